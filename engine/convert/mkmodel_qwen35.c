/* mkmodel_qwen35.c - the layers and keys of a random Qwen3.5 model (mkmodel.h), laid out
 * as llama.cpp's converter writes a Qwen3.5 file (the tensors src/models/qwen35.cpp
 * loads): Gated DeltaNet layers (attn_qkv, attn_gate, ssm_conv1d in F32, ssm_dt.bias,
 * ssm_a, ssm_beta, ssm_alpha, ssm_norm, ssm_out) with a full-attention layer every
 * full_attn_interval-th (attn_q of [q | gate] per head, Q/K norms, rotary on a quarter of
 * the head), each followed by post_attention_norm and the SwiGLU feed-forward, or for
 * qwen35moe (src/models/qwen35moe.cpp) mkmodel_moe.c's experts with a shared expert. */
#include "convert/mkmodel_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The DeltaNet shape with its defaults filled in. */
typedef struct q35_shape {
    int32_t state, k_heads, v_heads, conv, every;
} q35_shape;

static q35_shape q35_of(const mkmodel_params *p) {
    return (q35_shape){.state = p->ssm_state > 0 ? p->ssm_state : mk_head_dim(p),
                       .k_heads = p->ssm_k_heads > 0 ? p->ssm_k_heads : p->n_head_kv,
                       .v_heads = p->ssm_v_heads > 0 ? p->ssm_v_heads : p->n_head,
                       .conv = p->ssm_conv > 0 ? p->ssm_conv : 4,
                       .every = p->full_attn_interval > 0 ? p->full_attn_interval : 4};
}

bool mk_qwen35(const mkmodel_params *p) {
    return p->arch && (strcmp(p->arch, "qwen35") == 0 || strcmp(p->arch, "qwen35moe") == 0);
}

static bool q35_recurrent(const q35_shape *s, int32_t l) { return (l + 1) % s->every != 0; }

int32_t mk_qwen35_rope_dim(const mkmodel_params *p) { return mk_head_dim(p) / 4; }

st_code mk_qwen35_check(const mkmodel_params *p, st_err *err) {
    const q35_shape s = q35_of(p);
    if (p->ssm_state < 0 || p->ssm_k_heads < 0 || p->ssm_v_heads < 0 || p->ssm_conv < 0 ||
        p->full_attn_interval < 0 || s.state > 512 || s.conv > 64 || s.v_heads % s.k_heads)
        return st_set(err, ST_ERR_ARG, "mkmodel: qwen35's DeltaNet state (%" PRId32 ", at most "
                      "512), conv (%" PRId32 ", at most 64), key heads (%" PRId32 ") dividing "
                      "value heads (%" PRId32 ") and attention interval must be positive",
                      s.state, s.conv, s.k_heads, s.v_heads);
    if (mk_head_dim(p) % 8)
        return st_set(err, ST_ERR_ARG, "mkmodel: qwen35 rotates a quarter of the head: head_dim "
                      "%" PRId32 " must be a multiple of 8", mk_head_dim(p));
    if (!dtype_row_ok(p->wtype, s.v_heads * s.state))
        return st_set(err, ST_ERR_ARG, "mkmodel: qwen35's DeltaNet width %" PRId32 " is not "
                      "whole blocks of %s", s.v_heads * s.state, dtype_name(p->wtype));
    return ST_OK;
}

/* Layer l's tensors, appended at t[n]; returns the new count. */
static int q35_layer(const mkmodel_params *p, const q35_shape *s, mk_tensor *t, int n, int l) {
    const int64_t e = p->n_embd, hd = mk_head_dim(p), q = p->n_head * hd, kv = p->n_head_kv * hd;
    const int64_t ff = p->n_ff, vd = (int64_t)s->v_heads * s->state;
    const int64_t cd = (2 * (int64_t)s->k_heads + s->v_heads) * s->state;
    const bool rec = q35_recurrent(s, l), att = !rec, moe = mk_moe(p);
    const float s_e = 1.0f / sqrtf((float)e);
    const struct { bool on; const char *suffix; int64_t ne0, ne1; bool f32; float center, spread; } b[] = {
        {true, "attn_norm.weight", e, 1, true, 1.0f, 0.1f},
        {att, "attn_q.weight", e, 2 * q, false, 0.0f, s_e},
        {att, "attn_k.weight", e, kv, false, 0.0f, s_e},
        {att, "attn_v.weight", e, kv, false, 0.0f, s_e},
        {att, "attn_q_norm.weight", hd, 1, true, 1.0f, 0.1f},
        {att, "attn_k_norm.weight", hd, 1, true, 1.0f, 0.1f},
        {att, "attn_output.weight", q, e, false, 0.0f, 1.0f / sqrtf((float)q)},
        {rec, "attn_qkv.weight", e, cd, false, 0.0f, s_e},
        {rec, "attn_gate.weight", e, vd, false, 0.0f, s_e},
        {rec, "ssm_conv1d.weight", s->conv, cd, true, 0.0f, 0.5f},
        {rec, "ssm_dt.bias", s->v_heads, 1, true, 0.0f, 0.5f},
        {rec, "ssm_a", s->v_heads, 1, true, -1.0f, 0.5f},
        {rec, "ssm_beta.weight", e, s->v_heads, false, 0.0f, s_e},
        {rec, "ssm_alpha.weight", e, s->v_heads, false, 0.0f, s_e},
        {rec, "ssm_norm.weight", s->state, 1, true, 1.0f, 0.1f},
        {rec, "ssm_out.weight", vd, e, false, 0.0f, 1.0f / sqrtf((float)vd)},
        {true, "post_attention_norm.weight", e, 1, true, 1.0f, 0.1f},
        {!moe, "ffn_gate.weight", e, ff, false, 0.0f, s_e},
        {!moe, "ffn_up.weight", e, ff, false, 0.0f, s_e},
        {!moe, "ffn_down.weight", ff, e, false, 0.0f, 1.0f / sqrtf((float)ff)},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        if (!b[i].on) continue;
        char name[48];
        snprintf(name, sizeof name, "blk.%d.%s", l, b[i].suffix);
        mk_add(t, &n, name, b[i].ne0, b[i].ne1, b[i].f32 ? DT_F32 : p->wtype, b[i].center,
               b[i].spread);
    }
    return moe ? mk_moe_layer(p, t, n, l) : n;
}

int mk_qwen35_list(const mkmodel_params *p, mk_tensor *t, int n) {
    const q35_shape s = q35_of(p);
    for (int l = 0; l < p->n_layer; l++) n = q35_layer(p, &s, t, n, l);
    return n;
}

st_code mk_qwen35_meta(gguf_writer *w, const mkmodel_params *p, const char *arch) {
    const q35_shape s = q35_of(p);
    const int32_t pairs = mk_qwen35_rope_dim(p) / 2;
    /* llama.cpp requires the M-RoPE sections; interleaved, pair i takes section i % 3, and
     * text gives the first three one position: covering every pair as Qwen3.5's files do
     * (11, 11, 10 of 32) makes it plain NeoX rotary */
    const int32_t sections[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
    char key[96];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
    st_code rc = gguf_writer_set_arr(w, key, GGUF_I32, sections, 4);
    const struct { const char *key; uint32_t v; } u[] = {
        {"full_attention_interval", (uint32_t)s.every},
        {"ssm.conv_kernel", (uint32_t)s.conv},
        {"ssm.state_size", (uint32_t)s.state},
        {"ssm.group_count", (uint32_t)s.k_heads},
        {"ssm.time_step_rank", (uint32_t)s.v_heads},
        {"ssm.inner_size", (uint32_t)(s.v_heads * s.state)},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0] && rc == ST_OK; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, u[i].key);
        rc = gguf_writer_set_u32(w, key, u[i].v);
    }
    return rc;
}
