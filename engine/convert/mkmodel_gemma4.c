/* mkmodel_gemma4.c - the layers and keys of a random Gemma 4 model (mkmodel.h), laid out
 * as llama.cpp's converter writes a Gemma 4 file (conversion/gemma.py, Gemma4Model, and
 * the tensors src/models/gemma4.cpp loads): global layers of head_dim with proportional
 * rotary (rope_freqs: 1 on the first quarter of the pairs, 1e30 on the rest), local
 * layers of head_dim_swa rotating fully with base 10000, Q/K norms, layer output scales,
 * shared-KV layers without K, V or K norm, and per-layer embeddings. */
#include "convert/mkmodel_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t g4_pattern(const mkmodel_params *p) { return p->swa_pattern > 0 ? p->swa_pattern : 2; }
static int32_t g4_hd_swa(const mkmodel_params *p) {
    return p->head_dim_swa > 0 ? p->head_dim_swa : mk_head_dim(p) / 2;
}
static bool g4_is_swa(const mkmodel_params *p, int32_t l) {
    return l % g4_pattern(p) < g4_pattern(p) - 1;
}

st_code mk_gemma4_check(const mkmodel_params *p, st_err *err) {
    const int32_t first = p->n_layer - p->n_kv_shared, hs = g4_hd_swa(p);
    if (p->n_kv_shared < 0 || p->n_embd_ple < 0 || p->swa_pattern < 0 || p->head_dim_swa < 0 ||
        !(p->softcap >= 0 && p->softcap <= 1e4))
        return st_set(err, ST_ERR_ARG, "mkmodel: gemma4's pattern, head_dim_swa, shared layers, "
                      "per-layer width and softcap must not be negative");
    if (hs % 2 || mk_head_dim(p) % 8)
        return st_set(err, ST_ERR_ARG, "mkmodel: gemma4 needs an even head_dim_swa (%" PRId32 ") "
                      "and a head_dim that is a multiple of 8 (%" PRId32 ")", hs, mk_head_dim(p));
    if (p->n_kv_shared > 0 && (first < 2 || !g4_is_swa(p, first - 2) || g4_is_swa(p, first - 1)))
        return st_set(err, ST_ERR_ARG, "mkmodel: gemma4's %" PRId32 " shared-KV layers need the "
                      "two layers before them to be local then global", p->n_kv_shared);
    const int32_t rows[] = {p->n_head * hs, p->n_embd_ple > 0 ? p->n_embd_ple : p->n_embd,
                            p->n_embd_ple > 0 ? p->n_layer * p->n_embd_ple : p->n_embd};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!dtype_row_ok(p->wtype, rows[i]))
            return st_set(err, ST_ERR_ARG, "mkmodel: gemma4 row length %" PRId32 " is not whole "
                          "blocks of %s", rows[i], dtype_name(p->wtype));
    return ST_OK;
}

/* Layer l's tensors, appended at t[n]; returns the new count. */
static int g4_layer(const mkmodel_params *p, mk_tensor *t, int n, int l) {
    const int64_t e = p->n_embd, hd = g4_is_swa(p, l) ? g4_hd_swa(p) : mk_head_dim(p);
    const int64_t q = p->n_head * hd, kv = p->n_head_kv * hd, ff = p->n_ff, pl = p->n_embd_ple;
    const bool own = l < p->n_layer - p->n_kv_shared, ple = pl > 0;
    const float s_e = 1.0f / sqrtf((float)e);
    /* attention scale 1: Q and K gains of hd^-1/4 keep q.k as tame as 1/sqrt(hd) would */
    const float g_qk = powf((float)hd, -0.25f);
    const struct { bool on; const char *suffix; int64_t ne0, ne1; float center, spread; } b[] = {
        {true, "attn_norm", e, 1, 1.0f, 0.1f},
        {true, "attn_q", e, q, 0.0f, s_e},
        {own, "attn_k", e, kv, 0.0f, s_e},
        {own, "attn_v", e, kv, 0.0f, s_e},
        {true, "attn_q_norm", hd, 1, g_qk, 0.1f * g_qk},
        {own, "attn_k_norm", hd, 1, g_qk, 0.1f * g_qk},
        {true, "attn_output", q, e, 0.0f, 1.0f / sqrtf((float)q)},
        {true, "post_attention_norm", e, 1, 1.0f, 0.1f},
        {true, "ffn_norm", e, 1, 1.0f, 0.1f},
        {true, "ffn_gate", e, ff, 0.0f, s_e},
        {true, "ffn_up", e, ff, 0.0f, s_e},
        {true, "ffn_down", ff, e, 0.0f, 1.0f / sqrtf((float)ff)},
        {true, "post_ffw_norm", e, 1, 1.0f, 0.1f},
        {true, "layer_output_scale", 1, 1, 0.8f, 0.1f},
        {ple, "inp_gate", e, pl, 0.0f, s_e},
        {ple, "proj", pl, e, 0.0f, ple ? 1.0f / sqrtf((float)pl) : 0.0f},
        {ple, "post_norm", e, 1, 1.0f, 0.1f},
    };
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        if (!b[i].on) continue;
        char name[48];
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, b[i].suffix);
        mk_add(t, &n, name, b[i].ne0, b[i].ne1, b[i].ne1 > 1 ? p->wtype : DT_F32, b[i].center,
               b[i].spread);
    }
    return n;
}

int mk_gemma4_list(const mkmodel_params *p, mk_tensor *t, int n) {
    const int64_t e = p->n_embd, pl = (int64_t)p->n_layer * p->n_embd_ple;
    mk_add(t, &n, "rope_freqs.weight", mk_head_dim(p) / 2, 1, DT_F32, 1.0f, 0.0f);
    if (pl > 0) {
        mk_add(t, &n, "per_layer_token_embd.weight", pl, p->n_vocab, p->wtype, 0.0f,
               sqrtf(3.0f / (float)p->n_embd_ple));
        mk_add(t, &n, "per_layer_model_proj.weight", e, pl, p->wtype, 0.0f, 1.0f / sqrtf((float)e));
        mk_add(t, &n, "per_layer_proj_norm.weight", p->n_embd_ple, 1, DT_F32, 1.0f, 0.1f);
    }
    for (int l = 0; l < p->n_layer; l++) n = g4_layer(p, t, n, l);
    return n;
}

bool mk_gemma4_fixed(const mkmodel_params *p, const mk_tensor *t, float *row) {
    if (!p->arch || strcmp(p->arch, "gemma4") != 0 || strcmp(t->name, "rope_freqs.weight") != 0)
        return false;
    const int64_t rotated = mk_head_dim(p) / 8; /* partial_rotary_factor 0.25, in pairs */
    for (int64_t i = 0; i < t->ne[0]; i++) row[i] = i < rotated ? 1.0f : 1e30f;
    return true;
}

st_code mk_gemma4_meta(gguf_writer *w, const mkmodel_params *p) {
    const int32_t hd = mk_head_dim(p), hs = g4_hd_swa(p);
    uint8_t *pat = malloc((size_t)p->n_layer);
    if (!pat) return ST_ERR_NOMEM;
    for (int32_t l = 0; l < p->n_layer; l++) pat[l] = g4_is_swa(p, l);
    st_code rc = gguf_writer_set_arr(w, "gemma4.attention.sliding_window_pattern", GGUF_BOOL, pat,
                                     (uint64_t)p->n_layer);
    free(pat);
    const struct { const char *key; uint32_t v; } u[] = {
        {"gemma4.attention.key_length", (uint32_t)hd},
        {"gemma4.attention.value_length", (uint32_t)hd},
        {"gemma4.attention.key_length_swa", (uint32_t)hs},
        {"gemma4.attention.value_length_swa", (uint32_t)hs},
        {"gemma4.rope.dimension_count_swa", (uint32_t)hs},
        {"gemma4.attention.shared_kv_layers", (uint32_t)p->n_kv_shared},
        {"gemma4.embedding_length_per_layer_input", (uint32_t)p->n_embd_ple},
    };
    for (size_t i = 0; i < sizeof u / sizeof u[0] && rc == ST_OK; i++)
        if (!(i < 2 && p->n_embd == p->n_head * hd)) /* mk_set_meta wrote these then */
            rc = gguf_writer_set_u32(w, u[i].key, u[i].v);
    if (rc == ST_OK) rc = gguf_writer_set_f32(w, "gemma4.rope.freq_base_swa", 10000.0f);
    if (rc == ST_OK && p->softcap > 0)
        rc = gguf_writer_set_f32(w, "gemma4.final_logit_softcapping", p->softcap);
    return rc;
}
