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
    bool v_from_k;             /* a layer without attn_v uses its K projection as V */
    bool moe_norm;             /* a mixture renormalises its top-k weights (moe.h) */
    bool moe_shared;           /* a mixture has a gated shared expert */
    bool moe;                  /* a mixture of experts: its experts' widths have keys of
                                  their own, so feed_forward_length may be absent (as
                                  llama.cpp reads it) */
    const char *ffn_norm;      /* the FFN norm's tensor name in a layer; NULL: "ffn_norm" */
    const char *chat_note;     /* the chat format the family's instruct models use */
    /* What a family reads beyond the shared keys and tensors (NULL: nothing): its keys
     * after the common ones, its model-wide tensors, and each layer's. ST_OK or a code
     * with err, as model_from_gguf. */
    st_code (*load_hparams)(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);
    st_code (*load_tensors)(model *m, size_t *used, st_err *err);
    st_code (*load_layer)(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);
    /* A family whose layers are not the llama block loads each whole layer itself
     * (its shape and n_ff are set; it counts its matrices with load_count_mats). */
    st_code (*load_block)(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);
} arch_desc;

/* The loader's readers (model.c), for the families' own loaders (gemma4.c). */
/* "<arch>.<name>" as an integer; missing: def (def < 0: required). */
st_code load_hp_int(const gguf_ctx *g, const char *arch, const char *name, int64_t def,
                    int32_t *out, st_err *err);
/* Like load_hp_int, element l of it when the file stores one value a layer. */
st_code load_hp_int_at(const gguf_ctx *g, const char *arch, const char *name, int32_t l,
                       int64_t def, int32_t *out, st_err *err);
/* "<arch>.<name>" as a positive float; missing: def. */
st_code load_hp_float(const gguf_ctx *g, const char *arch, const char *name, double def,
                      float *out, st_err *err);
/* Matrix `name` of shape (n_in, n_out) in a type this build computes with. */
st_code load_want_mat(const gguf_ctx *g, const char *name, int64_t n_in, int64_t n_out,
                      kern_mat *m, st_err *err);
/* Vector `name` of n floats, every value finite (F16/BF16 converted into m->f32_copies at
 * *used, which moves past it). */
st_code load_want_vec(model *m, const char *name, int64_t n, const float **out, size_t *used,
                      st_err *err);

/* Adds the bytes of the matrices ms[0 .. n) that have data to m->weight_bytes (a V
 * that is K's projection counts once). */
void load_count_mats(model *m, const kern_mat *const *ms, size_t n);

/* Qwen3.5's loaders (qwen35.c; the MoE models' keys are both qwen35's and moe.c's), and the floats of its layers' DeltaNet vectors (the
 * conv's taps, dt bias, decay rates, output norm) for model_vec_floats. */
st_code qwen35_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);
st_code qwen35moe_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);
st_code qwen35_load_block(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);
size_t qwen35_vec_floats(const model_hparams *hp);

/* Gemma 4's loaders (gemma4.c). */
st_code gemma4_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);
st_code gemma4_load_tensors(model *m, size_t *used, st_err *err);
st_code gemma4_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);

/* gpt-oss's loaders (gptoss.c). */
st_code gptoss_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);
st_code gptoss_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);

/* The entry of architecture `name`, or NULL when this build does not run it. */
const arch_desc *arch_find(const char *name);
/* The entry of a (valid) model_arch. */
const arch_desc *arch_get(model_arch a);

#endif
