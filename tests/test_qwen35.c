/* test_qwen35.c - Qwen3.5's model layer on random models (mkmodel --arch qwen35): the
 * hyperparameters and layer kinds it loads, a prompt run in one pass giving the bits of
 * the same prompt run a token a pass (the recurrent state continued in its cell), cpu
 * against ref within a bound, an F16 file, and the batch checks for state cells. The
 * forest's exactness with recurrent layers is in test_forest.c; the comparison with
 * llama.cpp in test_qmodels.c.
 *
 * Bound: cpu against ref, t_nerr of the last logits 1e-3 (4 layers, float sums against
 * double ones; observed values are printed on stderr). */
#include <string.h>

#include "convert/mkmodel.h"
#include "model/model.h"
#include "t.h"
#include "t_model.h"

static mkmodel_params q35_params(void) {
    mkmodel_params p = mkmodel_default_params();
    p.arch = "qwen35";
    p.n_layer = 4;
    p.head_dim = 16; /* rotary on 4 dims */
    p.ssm_v_heads = 4, p.ssm_k_heads = 2, p.ssm_state = 16;
    return p;
}

static void test_load(const model *m) {
    const model_hparams *hp = &m->hp;
    T_CHECK(hp->arch == MODEL_ARCH_QWEN35 && hp->full_attn_interval == 4 && hp->ssm_conv == 4 &&
            hp->ssm_state == 16 && hp->ssm_k_heads == 2 && hp->ssm_v_heads == 4 &&
            hp->rope_dim == 4 && hp->attn_out_gate && hp->rope_neox && hp->qk_norm,
            "qwen35 hparams: interval %d conv %d state %d heads %d/%d rope %d", hp->full_attn_interval,
            hp->ssm_conv, hp->ssm_state, hp->ssm_k_heads, hp->ssm_v_heads, hp->rope_dim);
    T_CHECK(m->layers[0].recurrent && m->layers[2].recurrent && !m->layers[3].recurrent &&
            m->layers[0].kv_src == -1 && m->layers[3].kv_src == 3,
            "layers 0-2 recurrent, 3 attention");
    T_CHECK(model_kv_slot_floats(hp) == 2 * 16, "KV floats a slot: only the attention layer's "
            "(%lld)", (long long)model_kv_slot_floats(hp));
    const int64_t cell = 3 * ((4 - 1) * (2 * 2 + 4) * 16 + 4 * 16 * 16);
    T_CHECK(model_rstate_floats(hp) == cell, "state floats %lld, expected %lld",
            (long long)model_rstate_floats(hp), (long long)cell);
    char feat[1024];
    model_arch_features(hp, feat, sizeof feat);
    T_CHECK(strstr(feat, "Gated DeltaNet on 3 of every 4 layers") != NULL, "features: %s", feat);
}

/* The prompt in one pass and a token a pass: the same bits; the logits into out. */
static void test_one_pass(const model *m, const char *backend, float *out) {
    const int32_t n = 12, V = m->hp.n_vocab;
    int32_t toks[12] = {1, 70, 300, 5, 99, 260, 261, 400, 17, 3, 42, 511};
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 32, cp.backend = backend, cp.n_rstates = 2;
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "%s context: %s", backend, err.msg);
    if (!c) return;
    float *step = malloc(sizeof(float) * (size_t)V);
    T_CHECK(model_forward_linear(c, toks, n, 0, out, &err) == ST_OK, "%s one pass: %s", backend,
            err.msg);
    bool ok = true;
    for (int32_t i = 0; i < n && ok; i++)
        ok = model_forward_linear(c, toks + i, 1, i, step, &err) == ST_OK;
    T_CHECK(ok, "%s a token a pass: %s", backend, err.msg);
    T_CHECK(memcmp(step, out, sizeof(float) * (size_t)V) == 0, "%s: a token a pass differs from "
            "one pass (nerr %.3g)", backend, t_nerr(step, out, V));
    /* a pass of 5 then 7 continues the state as well */
    ok = model_forward_linear(c, toks, 5, 0, step, &err) == ST_OK &&
         model_forward_linear(c, toks + 5, 7, 5, step, &err) == ST_OK;
    T_CHECK(ok && memcmp(step, out, sizeof(float) * (size_t)V) == 0, "%s: 5 + 7 rows differ "
            "from 12", backend);
    free(step);
    model_ctx_free(c);
}

static void test_batch_checks(const model *m) {
    model_ctx *c = t_new_ctx(m, 16);
    if (!c) return;
    int32_t tok = 1, pos = 0, off[2] = {0, 1}, in = -1, out = 1000;
    kern_seg seg = {0, 1};
    float *lg = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    model_batch b = {.n_rows = 1, .tokens = &tok, .pos = &pos, .slot = &pos, .seg_off = off,
                     .segs = &seg};
    st_err err = {0};
    T_CHECK(model_forward(c, &b, lg, &err) == ST_ERR_ARG && strstr(err.msg, "state cells"),
            "a batch without state cells: %s", err.msg);
    b.rs_in = &in, b.rs_out = &out;
    T_CHECK(model_forward(c, &b, lg, &err) == ST_ERR_ARG && strstr(err.msg, "outside"),
            "a state cell outside the context's: %s", err.msg);
    out = 0;
    float w[1];
    model_attn_req req = {.layer = 1, .head = 0, .w = w};
    b.attn = &req;
    T_CHECK(model_forward(c, &b, lg, &err) == ST_ERR_ARG && strstr(err.msg, "recurrent"),
            "attention weights of a recurrent layer: %s", err.msg);
    b.attn = NULL;
    T_CHECK(model_forward(c, &b, lg, &err) == ST_OK, "a good batch: %s", err.msg);
    free(lg);
    model_ctx_free(c);
}

int main(void) {
    mkmodel_params p = q35_params();
    st_err err = {0};
    model *m = t_random_model(&p, &err);
    T_CHECK(m != NULL, "qwen35 random model: %s", err.msg);
    if (!m) return t_done();
    test_load(m);
    const int32_t V = m->hp.n_vocab;
    float *lc = malloc(sizeof(float) * (size_t)V), *lr = malloc(sizeof(float) * (size_t)V);
    test_one_pass(m, "cpu", lc);
    test_one_pass(m, "ref", lr);
    const double e = t_nerr(lc, lr, V);
    fprintf(stderr, "qwen35 cpu against ref: nerr %.3g\n", e);
    T_CHECK(e <= 1e-3, "cpu against ref: nerr %.3g", e);
    test_batch_checks(m);
    model_free(m);
    p.wtype = DT_F16, p.seed = 7;
    m = t_random_model(&p, &err);
    T_CHECK(m != NULL, "qwen35 F16 model: %s", err.msg);
    if (m) test_one_pass(m, "cpu", lc);
    model_free(m);
    free(lc), free(lr);
    return t_done();
}
