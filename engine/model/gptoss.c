/* gptoss.c - what gpt-oss (general.architecture "gpt-oss") adds to the blocks of
 * forward.c and moe.c, read from its GGUF (arch.h's load hooks): attention sinks, an
 * attention output bias, biases on the router and on every expert, sliding windows on
 * every other layer. The forward pass is forward.c's and moe.c's, steered by these.
 *
 * Facts from llama.cpp 0c1e5709 (src/models/openai-moe.cpp, llama-graph.cpp
 * build_moe_ffn): layer l is local when l % 2 == 0 (load_swa_pattern(ml, 2)), the local
 * layers rotate with rope.freq_base_swa or else the global base; the FFN's input norm is
 * the tensor post_attention_norm; the router picks the top k logits (after its bias) and
 * weighs them by a softmax over those k (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, no
 * renormalisation); the experts use swiglu_oai (alpha 1.702, limit 7) with the biases
 * added to gate, up and down. Its files' YaRN rotary scaling is yarn.c's; MXFP4 experts
 * are refused by their type (load_want_mat's list) until the kernels read them. */
#include "model/arch.h"
#include "model/moe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

st_code gptoss_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    st_code rc = moe_load_hparams(g, arch, hp, err);
    if (rc) return rc;
    char key[96];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    if (gguf_find_key(g, key) >= 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "%s is not supported (this build runs gpt-oss's "
                      "window on every other layer)", key);
    if (hp->n_swa <= 0)
        return st_set(err, ST_ERR_FORMAT, "%s.attention.sliding_window is missing", arch);
    hp->attn_sinks = true;
    hp->expert_softmax_k = true;
    return load_hp_float(g, arch, "rope.freq_base_swa", hp->rope_base, &hp->rope_base_swa, err);
}

/* The 2-D bias `name` of ne1 rows of ne0 floats (one row an expert), F32, copied into
 * m->f32_copies at *used. */
static st_code load_bias2(model *m, const char *name, int64_t ne0, int64_t ne1, const float **out,
                          size_t *used, st_err *err) {
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t || t->type != DT_F32 || t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
        return st_set(err, ST_ERR_FORMAT, "tensor '%s' is missing or not F32 of [%lld, %lld]",
                      name, (long long)ne0, (long long)ne1);
    float *dst = m->f32_copies + *used;
    memcpy(dst, t->data, sizeof(float) * (size_t)(ne0 * ne1));
    for (int64_t i = 0; i < ne0 * ne1; i++)
        if (!isfinite(dst[i]))
            return st_set(err, ST_ERR_FORMAT, "tensor '%s' has a value that is not finite", name);
    *used += (size_t)(ne0 * ne1);
    *out = dst;
    return ST_OK;
}

st_code gptoss_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, NE = hp->n_expert, F = hp->n_ff_exp;
    st_code rc = moe_load_layer(m, l, L, used, err);
    char nm[96];
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, (int)l), nm)
    if (rc || (rc = load_want_vec(m, NAME("attn_sinks.weight"), hp->n_head, &L->sinks, used, err)) ||
        (rc = load_want_vec(m, NAME("attn_output.bias"), E, &L->bo, used, err)) ||
        (rc = load_want_vec(m, NAME("ffn_gate_inp.bias"), NE, &L->gate_inp_b, used, err)) ||
        (rc = load_bias2(m, NAME("ffn_gate_exps.bias"), F, NE, &L->exp_gate_b, used, err)) ||
        (rc = load_bias2(m, NAME("ffn_up_exps.bias"), F, NE, &L->exp_up_b, used, err)) ||
        (rc = load_bias2(m, NAME("ffn_down_exps.bias"), E, NE, &L->exp_down_b, used, err)))
        return rc;
#undef NAME
    return ST_OK;
}
