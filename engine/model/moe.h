/* moe.h - the mixture-of-experts feed-forward (Qwen3-MoE): a router scores every expert
 * for each row, the row goes to its n_expert_used best (softmax, top-k, the k weights
 * renormalised to sum 1 where the family says so), and its output is the weighted sum of
 * those experts' SwiGLU feed-forwards, plus a shared expert's where the family has one
 * (Qwen2-MoE, Qwen3.5-MoE). Private to engine/model; forward.c calls moe_ffn where a dense layer
 * runs its feed-forward, so any block (qwen3moe's, later qwen35moe's) can use it.
 *
 * A batch's rows are grouped by expert: each chosen expert's matrices are read once for
 * all the rows routed to it. A row's result does not depend on the other rows of the
 * batch (the same bits alone or in any batch on backends whose matmul gives a row the
 * same bits in any batch, as ref and cpu do): its experts are summed in its own top-k
 * order. The files store each projection of a layer's experts as one 3-D tensor
 * (ffn_gate_exps, ffn_up_exps, ffn_down_exps: ne = [n_in, n_out, n_expert]; some files fuse
 * gate and up into ffn_gate_up_exps, [n_embd, 2 n_ff_exp, n_expert], the gate's rows first);
 * the loader cuts it into one matrix per expert, views into the mapping. */
#ifndef MD_MODEL_MOE_H
#define MD_MODEL_MOE_H

#include "model/model.h"

/* "<arch>.expert_count", expert_used_count, expert_feed_forward_length and
 * expert_weights_scale into hp (arch.h's load_hparams); a missing expert width is
 * feed_forward_length / expert_used_count, a missing shared one feed_forward_length, as
 * llama.cpp's qwen*moe.cpp take them. ST_ERR_FORMAT for a count out of range or a width
 * that is neither given nor derivable. */
st_code moe_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err);

/* Layer l's router and experts (arch.h's load_layer): ffn_gate_inp and the three 3-D
 * expert tensors (or the fused gate and up and the down), cut into m->experts (allocated on layer 0). ST_ERR_FORMAT naming a
 * missing tensor or a wrong shape, ST_ERR_UNSUPPORTED naming a type this build cannot
 * compute with, ST_ERR_NOMEM. */
st_code moe_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err);

/* The matrices of every layer's experts, in one array of n_layer * 3 * n_expert: layer
 * l's exp_gate at [3 l n_expert], exp_up after it, exp_down after that. */
size_t moe_n_mats(const model_hparams *hp);
/* Points L's expert arrays into such an array. */
void moe_layer_mats(const model_hparams *hp, kern_mat *all, int32_t l, model_layer *L);

/* Host and backend memory for routing a chunk of max_rows rows; free with
 * moe_scratch_free. NULL when out of memory. */
typedef struct moe_scratch moe_scratch;
moe_scratch *moe_scratch_init(kern_backend *be, const model_hparams *hp, int32_t max_rows);
void moe_scratch_free(moe_scratch *s, kern_backend *be); /* NULL is a no-op */

/* The feed-forward of layer L for n rows (<= max_rows): x (n, n_embd), the normed input
 * in backend memory, becomes the output. */
void moe_ffn(moe_scratch *s, kern_backend *be, const model_hparams *hp, const model_layer *L,
             float *x, int32_t n);

/* Routing of one row: the k best of n_expert router logits (softmax probabilities,
 * largest first, ties to the lower index) into sel, their probabilities (divided by the
 * sum of the k when norm) times scale into w. */
void moe_route(const float *logits, int32_t n_expert, int32_t k, bool norm, float scale,
               int32_t *sel, float *w);

#endif
