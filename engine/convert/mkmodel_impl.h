/* mkmodel_impl.h - the tensor list and helpers mkmodel.c shares with the families that
 * lay their layers out their own way (mkmodel_gemma4.c). Private to engine/convert. */
#ifndef MD_MKMODEL_IMPL_H
#define MD_MKMODEL_IMPL_H

#include "convert/mkmodel.h"
#include "gguf/gguf.h"

typedef struct mk_tensor {
    char name[48];
    uint32_t n_dims, type;
    int64_t ne[3];          /* ne[1] = 1 for vectors; ne[2] > 1: a 3-D tensor of ne[2]
                               matrices (a mixture's experts) */
    float center, spread;   /* values are center + spread * U(-1, 1) */
    void *data;             /* owned */
} mk_tensor;

#define MK_MAX_PER_LAYER 20 /* tensors of a layer, every architecture's extras included */
#define MK_MAX_GLOBAL 8     /* tensors outside the layers */

/* Appends a tensor (without data) at t[*n] and counts it. ne1 1: a vector. */
void mk_add(mk_tensor *t, int *n, const char *name, int64_t ne0, int64_t ne1, uint32_t type,
            float center, float spread);
/* Appends a 3-D tensor of ne2 matrices (ne1, ne0), like mk_add. */
void mk_add3(mk_tensor *t, int *n, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
             uint32_t type, float center, float spread);
/* head_dim, or n_embd / n_head when 0. */
int32_t mk_head_dim(const mkmodel_params *p);

/* Gemma 4 (mkmodel_gemma4.c): its checks, its tensors (after token_embd, output_norm and
 * output, which mk_list adds; returns the new count) and its "gemma4.*" keys. */
st_code mk_gemma4_check(const mkmodel_params *p, st_err *err);
int mk_gemma4_list(const mkmodel_params *p, mk_tensor *t, int n);
st_code mk_gemma4_meta(gguf_writer *w, const mkmodel_params *p);
/* The values of a generated tensor that are not random (Gemma 4's rope_freqs: 1 on the
 * rotated pairs, 1e30 on the rest); false for every other tensor. */
bool mk_gemma4_fixed(const mkmodel_params *p, const mk_tensor *t, float *row);

/* Mixtures of experts (mkmodel_moe.c): whether p's architecture is one, its checks, layer
 * l's feed-forward tensors (the router and the experts, appended at t[n]; returns the new
 * count) and its "<arch>.expert_*" keys. */
bool mk_moe(const mkmodel_params *p);
/* Whether layer tensor `suffix` of mk_list's llama block is left out (a mixture's dense
 * feed-forward; gpt-oss's ffn_norm, which it names post_attention_norm). */
bool mk_moe_skips(const mkmodel_params *p, const char *suffix, bool matrix);
/* The type of the matrices other than the experts: gpt-oss's are Q8_0 beside MXFP4 experts
 * (llama.cpp's MXFP4_MOE: "MoE tensors -> MXFP4, other tensors -> Q8_0"), else wtype. */
uint32_t mk_moe_dense_type(const mkmodel_params *p);
st_code mk_moe_check(const mkmodel_params *p, st_err *err);
int mk_moe_layer(const mkmodel_params *p, mk_tensor *t, int n, int l);
st_code mk_moe_meta(gguf_writer *w, const mkmodel_params *p, const char *arch);
/* Replaces each layer's filled ffn_gate_exps and ffn_up_exps in t[0..*n) by one
 * ffn_gate_up_exps holding, per expert, the gate's rows then the up's (mkmodel_params
 * fused_gate_up); *n drops by one a layer. ST_ERR_NOMEM (t unchanged). */
st_code mk_moe_fuse(mk_tensor *t, int *n);
/* Qwen3.5 (mkmodel_qwen35.c): whether p's architecture is qwen35 or qwen35moe, its checks,
 * its layers (after the global tensors; returns the new count), its "<arch>.*" keys and
 * its rotated dims (a quarter of the head). */
bool mk_qwen35(const mkmodel_params *p);
st_code mk_qwen35_check(const mkmodel_params *p, st_err *err);
int mk_qwen35_list(const mkmodel_params *p, mk_tensor *t, int n);
st_code mk_qwen35_meta(gguf_writer *w, const mkmodel_params *p, const char *arch);
int32_t mk_qwen35_rope_dim(const mkmodel_params *p);

#endif
