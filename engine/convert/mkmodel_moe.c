/* mkmodel_moe.c - the feed-forward of a random mixture-of-experts model (mkmodel.h), laid
 * out as llama.cpp's converter writes Qwen3-MoE and Qwen2-MoE (the tensors
 * src/models/qwen3moe.cpp and qwen2moe.cpp load): a
 * router ffn_gate_inp (n_expert, n_embd) kept in F32 as llama.cpp's quantiser keeps it,
 * and the experts of each projection as one 3-D tensor (ffn_gate_exps, ffn_up_exps:
 * [n_embd, n_ff_exp, n_expert]; ffn_down_exps: [n_ff_exp, n_embd, n_expert]); Qwen2-MoE
 * adds a shared expert of width n_ff (ffn_{gate,up,down}_shexp) and its gate vector
 * ffn_gate_inp_shexp (F32), as Qwen3.5-MoE does (src/models/qwen35moe.cpp; its other
 * layers are mkmodel_qwen35.c's); gpt-oss (src/models/openai-moe.cpp) attention sinks, biases
 * on the attention output, the router and every expert (F32), its FFN norm named
 * post_attention_norm, and a sliding window; with --type MXFP4 its experts are MXFP4 and
 * its other matrices Q8_0, as gpt-oss files store them (llama.cpp's MXFP4_MOE mix). */
#include "convert/mkmodel_impl.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t moe_n_expert(const mkmodel_params *p) { return p->n_expert > 0 ? p->n_expert : 8; }
static int32_t moe_n_used(const mkmodel_params *p) { return p->n_expert_used > 0 ? p->n_expert_used : 2; }
static int32_t moe_n_ff(const mkmodel_params *p) { return p->n_ff_exp > 0 ? p->n_ff_exp : p->n_ff; }

static bool moe_shared(const mkmodel_params *p) {
    return strcmp(p->arch, "qwen2moe") == 0 || strcmp(p->arch, "qwen35moe") == 0;
}
static bool moe_oss(const mkmodel_params *p) { return strcmp(p->arch, "gpt-oss") == 0; }

bool mk_moe(const mkmodel_params *p) {
    return p->arch && (strcmp(p->arch, "qwen3moe") == 0 || moe_shared(p) || moe_oss(p));
}

uint32_t mk_moe_dense_type(const mkmodel_params *p) {
    return mk_moe(p) && moe_oss(p) && p->wtype == DT_MXFP4 ? DT_Q8_0 : p->wtype;
}

bool mk_moe_skips(const mkmodel_params *p, const char *suffix, bool matrix) {
    return mk_moe(p) && strncmp(suffix, "ffn_", 4) == 0 && (matrix || moe_oss(p));
}

/* gpt-oss's additions to layer l (sinks, biases, its FFN norm's name), at t[n]. */
static int oss_layer(const mkmodel_params *p, mk_tensor *t, int n, int l) {
    const int64_t e = p->n_embd, ff = moe_n_ff(p), ne = moe_n_expert(p);
    const struct { const char *suffix; int64_t ne0, ne1; float center, spread; } x[] = {
        {"attn_sinks.weight", p->n_head, 1, 0.5f, 1.0f},
        {"attn_output.bias", e, 1, 0.0f, 0.1f},
        {"post_attention_norm.weight", e, 1, 1.0f, 0.1f},
        {"ffn_gate_inp.bias", ne, 1, 0.0f, 0.5f},
        {"ffn_gate_exps.bias", ff, ne, 0.0f, 0.1f},
        {"ffn_down_exps.bias", e, ne, 0.0f, 0.1f},
        {"ffn_up_exps.bias", ff, ne, 0.0f, 0.1f},
    };
    char name[48];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
        snprintf(name, sizeof name, "blk.%d.%s", l, x[i].suffix);
        mk_add(t, &n, name, x[i].ne0, x[i].ne1, DT_F32, x[i].center, x[i].spread);
    }
    return n;
}

st_code mk_moe_check(const mkmodel_params *p, st_err *err) {
    if (p->n_expert < 0 || p->n_expert > 4096 || p->n_expert_used < 0 || p->n_ff_exp < 0 ||
        moe_n_used(p) > moe_n_expert(p))
        return st_set(err, ST_ERR_ARG, "mkmodel: %" PRId32 " experts with %" PRId32 " used per "
                      "token: want 1 to 4096 experts, at most all of them used", moe_n_expert(p),
                      moe_n_used(p));
    if (!dtype_row_ok(p->wtype, moe_n_ff(p)))
        return st_set(err, ST_ERR_ARG, "mkmodel: the experts' width %" PRId32 " is not whole "
                      "blocks of %s", moe_n_ff(p), dtype_name(p->wtype));
    return ST_OK;
}

int mk_moe_layer(const mkmodel_params *p, mk_tensor *t, int n, int l) {
    const int64_t e = p->n_embd, ff = moe_n_ff(p), ne = moe_n_expert(p);
    const float s_e = 1.0f / sqrtf((float)e), s_ff = 1.0f / sqrtf((float)ff);
    char name[48];
    /* a router of spread 4 / sqrt(n_embd) gives logits of std ~2: rows pick varied experts */
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp.weight", l);
    mk_add(t, &n, name, e, ne, DT_F32, 0.0f, 4.0f * s_e);
    const struct { const char *suffix; int64_t ne0, ne1; float spread; } x[] = {
        {"ffn_gate_exps", e, ff, s_e}, {"ffn_down_exps", ff, e, s_ff}, {"ffn_up_exps", e, ff, s_e}};
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, x[i].suffix);
        mk_add3(t, &n, name, x[i].ne0, x[i].ne1, ne, p->wtype, 0.0f, x[i].spread);
    }
    if (moe_oss(p)) return oss_layer(p, t, n, l);
    if (!moe_shared(p)) return n;
    const int64_t fs = p->n_ff;
    const struct { const char *suffix; int64_t ne0, ne1; float spread; } sh[] = {
        {"ffn_gate_inp_shexp", e, 1, 2.0f * s_e}, {"ffn_gate_shexp", e, fs, s_e},
        {"ffn_down_shexp", fs, e, 1.0f / sqrtf((float)fs)}, {"ffn_up_shexp", e, fs, s_e}};
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, sh[i].suffix);
        mk_add(t, &n, name, sh[i].ne0, sh[i].ne1, sh[i].ne1 > 1 ? p->wtype : DT_F32, 0.0f,
               sh[i].spread);
    }
    return n;
}

st_code mk_moe_meta(gguf_writer *w, const mkmodel_params *p, const char *arch) {
    const struct { const char *name; int32_t v; } kv[] = {
        {"expert_count", moe_n_expert(p)},
        {"expert_used_count", moe_n_used(p)},
        {"expert_feed_forward_length", moe_n_ff(p)},
        {moe_oss(p) ? "attention.sliding_window" : NULL, p->n_swa > 0 ? p->n_swa : p->n_ctx},
        {moe_shared(p) ? "expert_shared_feed_forward_length" : NULL, p->n_ff},
    };
    st_code rc = ST_OK;
    char key[96];
    for (size_t i = 0; i < sizeof kv / sizeof kv[0] && rc == ST_OK; i++) {
        if (!kv[i].name) continue;
        snprintf(key, sizeof key, "%s.%s", arch, kv[i].name);
        rc = gguf_writer_set_u32(w, key, (uint32_t)kv[i].v);
    }
    return rc;
}

/* The index of layer tensor `suffix` of the layer whose gate is named gate, or -1. */
static int mk_find_sibling(const mk_tensor *t, int n, const char *gate, const char *suffix) {
    char name[48];
    int l = -1;
    if (sscanf(gate, "blk.%d.", &l) != 1) return -1;
    snprintf(name, sizeof name, "blk.%d.%s", l, suffix);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return i;
    return -1;
}

st_code mk_moe_fuse(mk_tensor *t, int *n) {
    for (int g = 0; g < *n; g++) {
        const char *dot = strchr(t[g].name + 4, '.'); /* past "blk.L" */
        bool gate = dot && strcmp(dot, ".ffn_gate_exps.weight") == 0;
        int u = gate ? mk_find_sibling(t, *n, t[g].name, "ffn_up_exps.weight") : -1;
        if (u < 0) continue;
        const size_t rows = (size_t)t[g].ne[1], rb = dtype_row_bytes(t[g].type, t[g].ne[0]);
        char *fused = malloc(2 * rows * rb * (size_t)t[g].ne[2]);
        if (!fused) return ST_ERR_NOMEM;
        const size_t m = rows * rb; /* one expert's matrix */
        for (size_t e = 0; e < (size_t)t[g].ne[2]; e++) {
            memcpy(fused + 2 * e * m, (char *)t[g].data + e * m, m);
            memcpy(fused + (2 * e + 1) * m, (char *)t[u].data + e * m, m);
        }
        free(t[g].data);
        free(t[u].data);
        t[g].data = fused;
        t[g].ne[1] *= 2;
        snprintf(t[g].name + (dot - t[g].name), sizeof t[g].name - (size_t)(dot - t[g].name),
                 ".ffn_gate_up_exps.weight");
        memmove(&t[u], &t[u + 1], sizeof *t * (size_t)(*n - u - 1));
        (*n)--;
        if (u < g) g--;
    }
    return ST_OK;
}
