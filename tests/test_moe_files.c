/* test_moe_files.c - the mixture-of-experts file layouts the loader reads beside the usual
 * one (mkmodel writes each from the same parameters, so the weights are the same values):
 * a file without feed_forward_length (the experts' widths have keys of their own, and
 * llama.cpp reads the key as optional), and a file whose gate and up experts are one fused
 * ffn_gate_up_exps tensor. Each gives the logits of the usual file bit for bit; a dense
 * model without feed_forward_length is still refused, naming the key. */
#include <string.h>

#include "convert/mkmodel.h"
#include "model/model.h"
#include "t.h"
#include "t_model.h"

#define N_TOK 12

static mkmodel_params moe_params(const char *arch, uint32_t wtype) {
    mkmodel_params p = mkmodel_default_params();
    p.arch = arch;
    p.wtype = wtype;
    p.n_head = 4, p.n_head_kv = 2, p.head_dim = 16;
    p.n_expert = 8, p.n_expert_used = 3, p.n_ff_exp = 64;
    if (!strcmp(arch, "qwen35moe"))
        p.n_layer = 4, p.ssm_k_heads = 1, p.ssm_v_heads = 2, p.ssm_state = 16;
    p.seed = 41;
    return p;
}

/* The last logits of a fixed token sequence decoded in one pass (n_vocab floats into out);
 * false when the model does not load or run. */
static bool run_logits(const mkmodel_params *p, float *out, st_err *err) {
    model *m = t_random_model(p, err);
    if (!m) return false;
    int32_t toks[N_TOK];
    for (int32_t i = 0; i < N_TOK; i++) toks[i] = 3 + (i * 37) % (m->hp.n_vocab - 3);
    model_ctx *c = t_new_ctx(m, N_TOK + 1);
    bool ok = c && model_forward_linear(c, toks, N_TOK, 0, out, err) == ST_OK;
    model_ctx_free(c);
    model_free(m);
    return ok;
}

/* The file of variant (p with one field changed) gives the same logits as p, bit for bit. */
static void check_same(const mkmodel_params *p, const mkmodel_params *variant, const char *what) {
    const int32_t V = p->n_vocab;
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    st_err err = {0};
    bool ok = a && b && run_logits(p, a, &err);
    T_CHECK(ok, "%s %s: the usual file runs: %s", p->arch, what, err.msg);
    st_clear(&err);
    bool ok2 = ok && run_logits(variant, b, &err);
    T_CHECK(ok2, "%s %s: the file loads and runs: %s", p->arch, what, err.msg);
    if (ok2)
        T_CHECK(!memcmp(a, b, sizeof(float) * (size_t)V), "%s %s: logits equal the usual file's",
                p->arch, what);
    free(a), free(b);
}

static void test_no_ff_key(void) {
    const char *archs[] = {"qwen3moe", "qwen2moe", "gpt-oss", "qwen35moe"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        mkmodel_params p = moe_params(archs[i], DT_F32), q = p;
        q.no_ff_key = true;
        check_same(&p, &q, "without feed_forward_length");
    }
    /* a dense model needs the key: its FFN has no other width */
    mkmodel_params d = mkmodel_default_params();
    d.no_ff_key = true;
    st_err err = {0};
    model *m = t_random_model(&d, &err);
    T_CHECK(!m && strstr(err.msg, "feed_forward_length"),
            "llama without feed_forward_length is refused naming it: %s", err.msg);
    model_free(m);
}

static void test_fused_gate_up(void) {
    const struct { const char *arch; uint32_t wtype; } cases[] = {
        {"qwen3moe", DT_F32}, {"qwen3moe", DT_Q8_0}, {"qwen35moe", DT_Q8_0}, {"qwen2moe", DT_Q8_0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mkmodel_params p = moe_params(cases[i].arch, cases[i].wtype), q = p;
        q.fused_gate_up = true;
        check_same(&p, &q, "with ffn_gate_up_exps");
    }
}

int main(void) {
    test_no_ff_key();
    test_fused_gate_up();
    return t_done();
}
