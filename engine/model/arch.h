/* arch.h - what each supported architecture adds to the llama block, as data: the loader
 * (model.c) copies a family's entry into the hyperparameters and reads the tensors it
 * names. Private to engine/model. */
#ifndef MD_MODEL_ARCH_H
#define MD_MODEL_ARCH_H

#include "model/model.h"

typedef struct arch_desc {
    const char *name;          /* general.architecture */
    model_arch arch;
    bool rope_neox, qkv_bias, qk_norm, post_norms;
    model_act act;
    bool embd_scaled;          /* embeddings times sqrt(n_embd) */
    int32_t swa_pattern;       /* every swa_pattern-th layer global; 0: no windows */
    float rope_base_swa;       /* RoPE base of the local layers */
    const char *chat_note;     /* the chat format the family's instruct models use */
} arch_desc;

/* The entry of architecture `name`, or NULL when this build does not run it. */
const arch_desc *arch_find(const char *name);

#endif
