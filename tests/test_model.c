/* test_model.c - the forward pass: batched rows equal linear decoding, a forest-shaped
 * batch (branches sharing a prefix, each at its own positions and slots) gives every
 * branch exactly its linear logits, the cpu backend agrees with ref, bad batches are
 * refused without side effects, and bad model files get clear errors. Models are
 * random-weight GGUFs from mkmodel. */
#include "gguf/gguf.h"
#include "convert/mkmodel.h"
#include "model/model.h"
#include "t.h"

static char tmpdir[] = "/tmp/md_test_model_XXXXXX";

static const char *tmp_path(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

static model *make_model(const mkmodel_params *p, const char *name) {
    st_err err = {0};
    const char *path = tmp_path(name);
    if (mkmodel_write(p, path, &err) != ST_OK) {
        fprintf(stderr, "mkmodel %s: %s\n", name, err.msg);
        return NULL;
    }
    model *m = model_load(path, &err);
    if (!m) fprintf(stderr, "load %s: %s\n", name, err.msg);
    return m;
}

static model_ctx *make_ctx(const model *m, const char *backend, int32_t max_rows) {
    model_ctx_params cp = model_ctx_default_params();
    cp.backend = backend;
    cp.n_slots = 256;
    cp.max_rows = max_rows;
    cp.n_threads = 2;
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    if (!c) fprintf(stderr, "ctx: %s\n", err.msg);
    return c;
}

/* Logits after feeding toks one token at a time (the plainest linear decode). */
static void linear_logits(model_ctx *c, const int32_t *toks, int32_t n, float *out) {
    for (int32_t i = 0; i < n; i++) model_forward_linear(c, &toks[i], 1, i, out, NULL);
}

static void fill_tokens(int32_t *t, int32_t n, int32_t vocab, uint32_t seed) {
    for (int32_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
}

/* Prepared weights: a second context on one backend shares the first's (no more packed
 * bytes) and gives the same bits; a no_pack context owns none and stays within bound of
 * ref. K/V rows go out (model_kv_read) and in (model_kv_write) bit for bit, and
 * model_kv_permute moves them. */
static void test_prepared_and_kv(const model *m, const char *what, double bound) {
    int32_t V = m->hp.n_vocab, n = 9, toks[9];
    fill_tokens(toks, n, V, 11);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *r = malloc(sizeof(float) * V);
    model_ctx *c1 = make_ctx(m, "cpu", 512);
    const uint64_t b1 = model_packed_bytes(m);
    model_ctx *c2 = make_ctx(m, "cpu", 4);
    T_CHECK(model_packed_bytes(m) == b1, "%s: a second cpu context shares the prepared weights "
            "(%llu bytes)", what, (unsigned long long)b1);
    model_forward_linear(c1, toks, n, 0, a, NULL);
    model_forward_linear(c2, toks, n, 0, b, NULL);
    T_CHECK(memcmp(a, b, sizeof(float) * V) == 0, "%s: and gives the same bits", what);
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 256;
    cp.no_pack = true;
    st_err err = {0};
    model_ctx *c3 = model_ctx_init(m, &cp, &err), *cr = make_ctx(m, "ref", 512);
    T_CHECK(c3 && cr && model_packed_bytes(m) == b1, "%s: a no_pack context owns no packed rows",
            what);
    if (c3 && cr) {
        model_forward_linear(c3, toks, n, 0, b, NULL);
        model_forward_linear(cr, toks, n, 0, r, NULL);
        T_CHECK(t_nerr(b, r, V) <= bound, "%s: no_pack vs ref nerr %.3g", what, t_nerr(b, r, V));
    }
    const model_hparams *hp = &m->hp;
    const size_t kv = (size_t)model_kv_slot_floats(hp);
    float *k = malloc(sizeof(float) * kv), *v = malloc(sizeof(float) * kv);
    float *k2 = malloc(sizeof(float) * kv), *v2 = malloc(sizeof(float) * kv);
    T_CHECK(model_kv_read(c1, 3, k, v, &err) == ST_OK, "%s: kv_read", what);
    T_CHECK(model_kv_write(c2, 100, k, v, &err) == ST_OK && model_kv_read(c2, 100, k2, v2, &err) == ST_OK &&
            memcmp(k, k2, sizeof(float) * kv) == 0 && memcmp(v, v2, sizeof(float) * kv) == 0,
            "%s: a slot's K/V written into another context reads back the same", what);
    int32_t *dst = malloc(sizeof(int32_t) * 256);
    for (int i = 0; i < 256; i++) dst[i] = -1;
    dst[3] = 50;
    T_CHECK(model_kv_permute(c1, dst, &err) == ST_OK && model_kv_read(c1, 50, k2, v2, &err) == ST_OK &&
            memcmp(k, k2, sizeof(float) * kv) == 0 && memcmp(v, v2, sizeof(float) * kv) == 0,
            "%s: model_kv_permute moves slot 3 to 50", what);
    T_CHECK(model_kv_read(c1, 256, k2, v2, &err) == ST_ERR_ARG, "%s: slot 256 is outside: %s", what,
            err.msg);
    free(k), free(v), free(k2), free(v2), free(dst), free(a), free(b), free(r);
    model_ctx_free(c1), model_ctx_free(c2), model_ctx_free(c3), model_ctx_free(cr);
}

/* Prefill in one batch (and in chunks of 3 rows) equals token-by-token decoding. */
static void test_batch_vs_linear(const model *m, const char *what) {
    int32_t V = m->hp.n_vocab, n = 23, toks[23];
    fill_tokens(toks, n, V, 7);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V), *c3 = malloc(sizeof(float) * V);
    model_ctx *c1 = make_ctx(m, "cpu", 512), *c2 = make_ctx(m, "cpu", 3);
    linear_logits(c1, toks, n, a);
    model_forward_linear(c1, toks, n, 0, b, NULL);
    model_forward_linear(c2, toks, n, 0, c3, NULL);
    double e1 = t_nerr(b, a, V), e2 = t_nerr(c3, a, V);
    T_CHECK(e1 <= 1e-5, "%s: batched prefill vs linear nerr %.3g", what, e1);
    T_CHECK(e2 <= 1e-5, "%s: chunked prefill vs linear nerr %.3g", what, e2);
    model_ctx_free(c1);
    model_ctx_free(c2);
    free(a);
    free(b);
    free(c3);
}

/* A forest in one batch: prefix P (4 tokens) computed in an earlier step; then in one
 * batch: branch A (3 tokens) and branch B (2 tokens) both under P, plus a second root R
 * (3 tokens) at its own positions 0..2. Slots are deliberately scattered. Each leaf's
 * logits must equal linear decoding of its own path. */
static void test_forest_batch(const model *m, const char *what) {
    int32_t V = m->hp.n_vocab;
    int32_t P[4], A[3], B[2], R[3];
    fill_tokens(P, 4, V, 1);
    fill_tokens(A, 3, V, 2);
    fill_tokens(B, 2, V, 3);
    fill_tokens(R, 3, V, 4);
    model_ctx *c = make_ctx(m, "cpu", 512);
    /* step 1: prefix in slots 10..13 */
    int32_t p_pos[4] = {0, 1, 2, 3}, p_slot[4] = {10, 11, 12, 13}, p_off[5] = {0, 1, 2, 3, 4};
    kern_seg p_seg[4] = {{10, 1}, {10, 2}, {10, 3}, {10, 4}};
    uint8_t none[4] = {0};
    model_batch b1 = {.n_rows = 4, .tokens = P, .pos = p_pos, .slot = p_slot, .seg_off = p_off,
                      .segs = p_seg, .want_logits = none};
    st_err err = {0};
    T_CHECK(model_forward(c, &b1, NULL, &err) == ST_OK, "%s: prefix step: %s", what, err.msg);
    /* step 2: rows in DFS order: A0 A1 A2 B0 B1 R0 R1 R2 */
    int32_t tok2[8] = {A[0], A[1], A[2], B[0], B[1], R[0], R[1], R[2]};
    int32_t pos2[8] = {4, 5, 6, 4, 5, 0, 1, 2};
    int32_t slot2[8] = {40, 41, 42, 20, 21, 0, 1, 2};
    kern_seg seg2[] = {
        {10, 4}, {40, 1},            /* A0 */
        {40, 2}, {10, 4},            /* A1 (segments in any order) */
        {10, 4}, {40, 3},            /* A2 */
        {10, 4}, {20, 1},            /* B0 */
        {10, 4}, {20, 2},            /* B1 */
        {0, 1}, {0, 2}, {0, 3},      /* R0 R1 R2 */
    };
    int32_t off2[9] = {0, 2, 4, 6, 8, 10, 11, 12, 13};
    uint8_t want2[8] = {0, 0, 1, 0, 1, 0, 0, 1};
    float *out = malloc(sizeof(float) * V * 3), *ref = malloc(sizeof(float) * V);
    model_batch b2 = {.n_rows = 8, .tokens = tok2, .pos = pos2, .slot = slot2, .seg_off = off2,
                      .segs = seg2, .want_logits = want2};
    T_CHECK(model_forward(c, &b2, out, &err) == ST_OK, "%s: forest step: %s", what, err.msg);

    int32_t pathA[7] = {P[0], P[1], P[2], P[3], A[0], A[1], A[2]};
    int32_t pathB[6] = {P[0], P[1], P[2], P[3], B[0], B[1]};
    const int32_t *paths[3] = {pathA, pathB, R};
    int32_t lens[3] = {7, 6, 3};
    const char *names[3] = {"A", "B", "R"};
    for (int i = 0; i < 3; i++) {
        model_ctx *lc = make_ctx(m, "cpu", 512);
        linear_logits(lc, paths[i], lens[i], ref);
        double e = t_nerr(out + (size_t)i * V, ref, V);
        T_CHECK(e <= 1e-5, "%s: leaf %s of the forest batch vs its linear decode: nerr %.3g", what,
                names[i], e);
        model_ctx_free(lc);
    }
    model_ctx_free(c);
    free(out);
    free(ref);
}

/* The cpu backend's logits agree with the ref backend's. */
static void test_cpu_vs_ref(const model *m, const char *what, double bound) {
    int32_t V = m->hp.n_vocab, n = 9, toks[9];
    fill_tokens(toks, n, V, 11);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    model_ctx *cr = make_ctx(m, "ref", 512), *cc = make_ctx(m, "cpu", 512);
    model_forward_linear(cr, toks, n, 0, a, NULL);
    model_forward_linear(cc, toks, n, 0, b, NULL);
    double e = t_nerr(b, a, V);
    T_CHECK(e <= bound, "%s: cpu vs ref logits nerr %.3g > %.3g", what, e, bound);
    model_ctx_free(cr);
    model_ctx_free(cc);
    free(a);
    free(b);
}

/* Bad batches are refused with ST_ERR_ARG/ST_ERR_CONTEXT and leave the cache as it was. */
static void test_bad_batches(const model *m) {
    int32_t V = m->hp.n_vocab, toks[3];
    fill_tokens(toks, 3, V, 5);
    model_ctx *c = make_ctx(m, "cpu", 512);
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    model_forward_linear(c, toks, 3, 0, a, NULL);
    int32_t pos[2] = {3, 4}, slot[2] = {3, 4}, off[3] = {0, 1, 2};
    kern_seg seg[2] = {{0, 4}, {0, 5}};
    struct { int32_t t0, s1, segstart; st_code want; const char *what; } cases[] = {
        {V, 4, 0, ST_ERR_ARG, "token id out of range"},
        {-1, 4, 0, ST_ERR_ARG, "negative token id"},
        {0, 3, 0, ST_ERR_ARG, "two rows write one slot"},
        {0, 999, 0, ST_ERR_CONTEXT, "slot outside the cache"},
        {0, 4, 250, ST_ERR_ARG, "segment outside the cache / missing own slot"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t tk[2] = {cases[i].t0, 1};
        int32_t sl[2] = {slot[0], cases[i].s1};
        kern_seg sg[2] = {seg[0], {cases[i].segstart ? cases[i].segstart : 0,
                                   cases[i].segstart ? 10 : 5}};
        model_batch bb = {.n_rows = 2, .tokens = tk, .pos = pos, .slot = sl, .seg_off = off,
                          .segs = sg};
        st_err err = {0};
        st_code rc = model_forward(c, &bb, b, &err);
        T_CHECK(rc == cases[i].want && err.msg[0], "%s: got %d (%s)", cases[i].what, rc, err.msg);
    }
    /* the cache is unchanged: decoding the 4th token gives what a fresh context gives */
    model_ctx *f = make_ctx(m, "cpu", 512);
    int32_t t4[4] = {toks[0], toks[1], toks[2], 7 % V};
    model_forward_linear(f, t4, 4, 0, a, NULL);
    model_forward_linear(c, &t4[3], 1, 3, b, NULL);
    T_CHECK(t_nerr(b, a, V) <= 1e-5, "cache changed by refused batches: nerr %.3g", t_nerr(b, a, V));
    st_err err = {0};
    T_CHECK(model_forward_linear(c, toks, 3, 255, a, &err) == ST_ERR_CONTEXT,
            "a run past the end of the cache is refused: %s", err.msg);
    model_ctx_free(c);
    model_ctx_free(f);
    free(a);
    free(b);
}

/* Copies a GGUF, applying edits: a new architecture string, a tensor dropped, or a
 * tensor's type changed (its data resized to fit). */
typedef struct edit {
    const char *arch, *drop, *retype;
    uint32_t type;
    float rope_factor; /* > 0: add rope_freqs.weight with every factor equal to this */
    const char *scaling; /* a new value for the file's *.rope.scaling.type */
    double factor;       /* != 0: a new value for its *.rope.scaling.factor */
    const char *nan;     /* an F32 tensor (rope_freqs.weight too) whose first value
                            becomes a NaN */
} edit;

static st_code copy_gguf(const char *src, const char *dst, const edit *e) {
    st_err err = {0};
    gguf_ctx *g = gguf_open(src, &err);
    if (!g) return err.code;
    gguf_writer *w = gguf_writer_init();
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_kv_key(g, i);
        gguf_type t = gguf_kv_type(g, i);
        if (t == GGUF_STRING) {
            const char *s;
            gguf_kv_str(g, i, &s);
            if (e->arch && !strcmp(k, "general.architecture")) s = e->arch;
            if (e->scaling && strstr(k, ".rope.scaling.type")) s = e->scaling;
            gguf_writer_set_str(w, k, s);
        } else if (t == GGUF_ARRAY && gguf_arr_type(g, i) == GGUF_STRING) {
            uint64_t n = gguf_arr_n(g, i);
            const char **ss = malloc(sizeof(char *) * (n + 1));
            size_t *ls = malloc(sizeof(size_t) * (n + 1));
            for (uint64_t j = 0; j < n; j++) gguf_arr_str(g, i, j, &ss[j], &ls[j]);
            gguf_writer_set_arr_str(w, k, ss, ls, n);
            free(ss);
            free(ls);
        } else if (t == GGUF_ARRAY && gguf_arr_type(g, i) == GGUF_BOOL) { /* Gemma 4's pattern */
            uint64_t n = gguf_arr_n(g, i);
            uint8_t *bs = malloc(n + 1);
            for (uint64_t j = 0; j < n; j++) {
                bool bv = false;
                gguf_arr_bool(g, i, j, &bv);
                bs[j] = bv;
            }
            gguf_writer_set_arr(w, k, GGUF_BOOL, bs, n);
            free(bs);
        } else if (t == GGUF_ARRAY && gguf_arr_type(g, i) == GGUF_I32) { /* Qwen3.5's sections */
            uint64_t n = gguf_arr_n(g, i);
            int32_t *v = malloc(sizeof(int32_t) * (n + 1));
            for (uint64_t j = 0; j < n; j++) {
                int64_t x = 0;
                gguf_arr_i64(g, i, j, &x);
                v[j] = (int32_t)x;
            }
            gguf_writer_set_arr(w, k, GGUF_I32, v, n);
            free(v);
        } else if (t == GGUF_ARRAY) {
            uint64_t n = gguf_arr_n(g, i);
            double *d = malloc(sizeof(double) * (n + 1));
            for (uint64_t j = 0; j < n; j++) gguf_arr_f64(g, i, j, &d[j]);
            gguf_writer_set_arr(w, k, GGUF_F64, d, n);
            free(d);
        } else if (t == GGUF_F32 || t == GGUF_F64) {
            double d;
            gguf_kv_f64(g, i, &d);
            if (e->factor != 0 && strstr(k, ".rope.scaling.factor")) d = e->factor;
            gguf_writer_set_f32(w, k, (float)d);
        } else if (t == GGUF_BOOL) {
            bool bv;
            gguf_kv_bool(g, i, &bv);
            gguf_writer_set_bool(w, k, bv);
        } else {
            int64_t v;
            gguf_kv_i64(g, i, &v);
            gguf_writer_set_u32(w, k, (uint32_t)v);
        }
    }
    void *junk = calloc(1, 1 << 22);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (e->drop && !strcmp(t->name, e->drop)) continue;
        if (e->nan && !strcmp(t->name, e->nan) && t->type == DT_F32 && t->nbytes <= 1 << 22) {
            memcpy(junk, t->data, t->nbytes);
            *(float *)junk = NAN;
            gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, junk);
        } else if (e->retype && !strcmp(t->name, e->retype))
            gguf_writer_add_tensor(w, t->name, e->type, t->n_dims, t->ne, junk);
        else
            gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    float factors[256];
    if (e->rope_factor > 0) {
        int64_t rd = 0;
        gguf_get_i64(g, "llama.rope.dimension_count", &rd, NULL);
        for (int i = 0; i < 256; i++) factors[i] = e->rope_factor;
        if (e->nan && !strcmp(e->nan, "rope_freqs.weight")) factors[1] = NAN;
        int64_t ne[1] = {rd / 2};
        gguf_writer_add_tensor(w, "rope_freqs.weight", DT_F32, 1, ne, factors);
    }
    st_code rc = gguf_writer_write(w, dst, &err);
    gguf_writer_free(w);
    gguf_close(g);
    free(junk);
    return rc;
}

/* The small tensors read at load: a qwen2 bias missing from a model with a
 * tied classifier is named (it was reported as a wrong block_count: the layer bound
 * counted the family's tensors), and a NaN in a norm, a bias or rope_freqs is refused
 * naming the tensor (a NaN rope_freqs.weight gave garbage tokens with no word). */
static void test_small_tensors(mkmodel_params *p, const char *src) {
    st_err err = {0};
    p->arch = "qwen2";
    p->tied = true;
    T_CHECK(mkmodel_write(p, src, &err) == ST_OK, "mkmodel qwen2 tied: %s", err.msg);
    struct { edit e; const char *needle; } cases[] = {
        {{.drop = "blk.0.attn_k.bias"}, "tensor 'blk.0.attn_k.bias' is missing"},
        {{.nan = "blk.0.attn_norm.weight"}, "tensor 'blk.0.attn_norm.weight' has a value that is not finite"},
        {{.nan = "blk.1.attn_v.bias"}, "tensor 'blk.1.attn_v.bias' has a value that is not finite"},
        {{.nan = "output_norm.weight"}, "tensor 'output_norm.weight' has a value that is not finite"},
        {{.arch = "llama", .rope_factor = 1, .nan = "rope_freqs.weight"},
         "tensor 'rope_freqs.weight' has a value that is not finite"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].e.arch) { /* rope_freqs.weight is llama's (llama.rope.dimension_count) */
            p->arch = cases[i].e.arch;
            T_CHECK(mkmodel_write(p, src, &err) == ST_OK, "mkmodel %s: %s", p->arch, err.msg);
        }
        T_CHECK(copy_gguf(src, tmp_path("bad.gguf"), &cases[i].e) == ST_OK, "copy %zu", i);
        st_clear(&err);
        model *m = model_load(tmp_path("bad.gguf"), &err);
        T_CHECK(!m && err.code == ST_ERR_FORMAT && strstr(err.msg, cases[i].needle),
                "small tensors %zu: code %d, message '%s' (want '%s')", i, err.code, err.msg,
                cases[i].needle);
        model_free(m);
    }
    p->tied = false;
}

static void test_bad_models(void) {
    mkmodel_params p = mkmodel_default_params();
    mkmodel_preset("tiny", &p);
    p.n_embd = 256; /* a multiple of 256 so a K-quant type fits the shape */
    p.head_dim = 256 / p.n_head;
    st_err err = {0};
    char src[600];
    snprintf(src, sizeof src, "%s", tmp_path("ok.gguf"));
    T_CHECK(mkmodel_write(&p, src, &err) == ST_OK, "mkmodel: %s", err.msg);
    struct { edit e; st_code want; const char *needle; } cases[] = {
        {{"gptneox", NULL, NULL, 0, 0, NULL, 0, NULL}, ST_ERR_UNSUPPORTED, "gptneox"},
        {{NULL, "blk.1.ffn_up.weight", NULL, 0, 0, NULL, 0, NULL}, ST_ERR_FORMAT, "blk.1.ffn_up.weight"},
        {{NULL, NULL, "blk.0.attn_q.weight", DT_IQ2_XXS, 0, NULL, 0, NULL}, ST_ERR_UNSUPPORTED, "IQ2_XXS"},
        {{NULL, NULL, "blk.0.attn_q.weight", DT_TQ1_0, 0, NULL, 0, NULL}, ST_ERR_UNSUPPORTED,
         "supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16, MXFP4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dst = tmp_path("bad.gguf");
        T_CHECK(copy_gguf(src, dst, &cases[i].e) == ST_OK, "copy %zu", i);
        st_clear(&err);
        model *m = model_load(dst, &err);
        T_CHECK(!m && err.code == cases[i].want && strstr(err.msg, cases[i].needle),
                "bad model %zu: code %d, message '%s' (want it to name '%s')", i, err.code,
                err.msg, cases[i].needle);
        model_free(m);
    }
    st_clear(&err);
    T_CHECK(!model_load(tmp_path("does-not-exist.gguf"), &err) && err.code == ST_ERR_IO,
            "a missing file is ST_ERR_IO: %s", err.msg);
    /* an unknown architecture's message names the supported ones */
    edit neox = {"gptneox", NULL, NULL, 0, 0, NULL, 0, NULL};
    copy_gguf(src, tmp_path("bad.gguf"), &neox);
    st_clear(&err);
    model_free(model_load(tmp_path("bad.gguf"), &err));
    T_CHECK(strstr(err.msg, "llama, qwen2, qwen3, gemma3, gemma4") != NULL,
            "unsupported architecture names the supported ones: %s", err.msg);
    /* Qwen3-Next is refused by name, saying what is missing */
    edit q3n = {"qwen3next", NULL, NULL, 0, 0, NULL, 0, NULL};
    copy_gguf(src, tmp_path("bad.gguf"), &q3n);
    st_clear(&err);
    model_free(model_load(tmp_path("bad.gguf"), &err));
    T_CHECK(err.code == ST_ERR_UNSUPPORTED && strstr(err.msg, "Qwen3-Next") &&
            strstr(err.msg, "qwen35moe"), "qwen3next refused by name: %s", err.msg);
    /* a family's own tensors are required: qwen2's biases, gemma3's post-norms */
    const struct { const char *arch, *drop; } fam[] = {
        {"qwen2", "blk.1.attn_k.bias"}, {"qwen3", "blk.0.attn_q_norm.weight"},
        {"gemma3", "blk.1.post_ffw_norm.weight"}, {"gemma4", "blk.0.attn_k_norm.weight"},
        {"qwen3moe", "blk.1.ffn_up_exps.weight"}, {"qwen2moe", "blk.0.ffn_gate_inp_shexp.weight"},
        {"gpt-oss", "blk.1.attn_sinks.weight"}, {"gpt-oss", "blk.0.ffn_down_exps.bias"},
        {"qwen35moe", "blk.0.ffn_gate_inp_shexp.weight"}, {"qwen35moe", "blk.1.ffn_down_exps.weight"}};
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        p.arch = fam[i].arch;
        T_CHECK(mkmodel_write(&p, src, &err) == ST_OK, "mkmodel %s: %s", fam[i].arch, err.msg);
        model *m = model_load(src, &err);
        T_CHECK(m && m->hp.arch != MODEL_ARCH_LLAMA && !strcmp(model_arch_name(m->hp.arch),
                fam[i].arch), "%s loads as itself: %s", fam[i].arch, err.msg);
        model_free(m);
        edit e = {NULL, fam[i].drop, NULL, 0, 0, NULL, 0, NULL};
        copy_gguf(src, tmp_path("bad.gguf"), &e);
        st_clear(&err);
        m = model_load(tmp_path("bad.gguf"), &err);
        T_CHECK(!m && err.code == ST_ERR_FORMAT && strstr(err.msg, fam[i].drop),
                "%s without %s: %s", fam[i].arch, fam[i].drop, err.msg);
        model_free(m);
    }
    test_small_tensors(&p, src);
}

/* Gemma 4's shapes through the same checks: local heads of 8 beside global heads of 16,
 * the last two layers reading the first two's caches (the KV rows a slot keeps are the
 * caching layers' only), per-layer embeddings, soft-capping. */
static void test_gemma4(void) {
    mkmodel_params p = mkmodel_default_params();
    p.arch = "gemma4";
    p.n_layer = 4;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.head_dim = 16;
    p.n_swa = 6;
    p.n_kv_shared = 2;
    p.n_embd_ple = 8;
    p.softcap = 10.0f;
    p.seed = 140;
    model *m = make_model(&p, "gemma4.gguf");
    T_CHECK(m != NULL, "gemma4 loads");
    if (!m) return;
    T_CHECK(m->hp.head_dim_swa == 8 && m->hp.n_kv_shared == 2 && m->layers[2].kv_src == 0 &&
                m->layers[3].kv_src == 1 && model_kv_slot_floats(&m->hp) == 2 * 8 + 2 * 16,
            "gemma4: local heads %d, layer 2 reads %d, layer 3 reads %d, %lld KV floats a slot",
            m->hp.head_dim_swa, m->layers[2].kv_src, m->layers[3].kv_src,
            (long long)model_kv_slot_floats(&m->hp));
    test_batch_vs_linear(m, "gemma4"); /* (test_forest runs its forests, windows and all) */
    test_cpu_vs_ref(m, "gemma4", 1e-5);
    test_prepared_and_kv(m, "gemma4", 1e-5);
    model_free(m);
}

/* Llama-3 rope frequency factors: factors of 1 change nothing, factors of 4 change the
 * logits, and the cpu backend agrees with ref with them. */
static void test_rope_freqs(void) {
    mkmodel_params p = mkmodel_default_params();
    mkmodel_preset("tiny", &p);
    p.seed = 77;
    st_err err = {0};
    char src[600];
    snprintf(src, sizeof src, "%s", tmp_path("rf.gguf"));
    T_CHECK(mkmodel_write(&p, src, &err) == ST_OK, "mkmodel: %s", err.msg);
    model *m0 = model_load(src, &err);
    edit e1 = {0}, e4 = {0};
    e1.rope_factor = 1.0f;
    e4.rope_factor = 4.0f;
    copy_gguf(src, tmp_path("rf1.gguf"), &e1);
    model *m1 = model_load(tmp_path("rf1.gguf"), &err);
    copy_gguf(src, tmp_path("rf4.gguf"), &e4);
    model *m4 = model_load(tmp_path("rf4.gguf"), &err);
    T_CHECK(m0 && m1 && m4 && m1->rope_freqs && m4->rope_freqs && !m0->rope_freqs,
            "rope_freqs.weight is picked up: %s", err.msg);
    if (m0 && m1 && m4) {
        int32_t V = m0->hp.n_vocab, toks[12];
        fill_tokens(toks, 12, V, 3);
        float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
        float *c = malloc(sizeof(float) * V), *d = malloc(sizeof(float) * V);
        model_ctx *c0 = make_ctx(m0, "cpu", 512), *c1 = make_ctx(m1, "cpu", 512);
        model_ctx *c4 = make_ctx(m4, "cpu", 512), *r4 = make_ctx(m4, "ref", 512);
        model_forward_linear(c0, toks, 12, 0, a, NULL);
        model_forward_linear(c1, toks, 12, 0, b, NULL);
        model_forward_linear(c4, toks, 12, 0, c, NULL);
        model_forward_linear(r4, toks, 12, 0, d, NULL);
        T_CHECK(t_nerr(b, a, V) == 0, "factors of 1 change nothing: %.3g", t_nerr(b, a, V));
        T_CHECK(t_nerr(c, a, V) > 1e-4, "factors of 4 change the logits: %.3g", t_nerr(c, a, V));
        T_CHECK(t_nerr(c, d, V) <= 1e-5, "cpu vs ref with factors: %.3g", t_nerr(c, d, V));
        model_ctx_free(c0), model_ctx_free(c1), model_ctx_free(c4), model_ctx_free(r4);
        free(a), free(b), free(c), free(d);
    }
    model_free(m0), model_free(m1), model_free(m4);
}

/* Linear RoPE scaling by 4 is the same rotation as frequency factors of 4: bitwise the
 * same logits (llama.cpp's goldens in tests/golden/archmodels check the meaning); other
 * scaling types are refused, naming the supported ones. */
static void test_rope_scaling(void) {
    mkmodel_params p = mkmodel_default_params();
    mkmodel_preset("tiny", &p);
    p.seed = 78;
    st_err err = {0};
    char plain[600], lin[600];
    snprintf(plain, sizeof plain, "%s", tmp_path("rs1.gguf"));
    snprintf(lin, sizeof lin, "%s", tmp_path("rs4.gguf"));
    T_CHECK(mkmodel_write(&p, plain, &err) == ST_OK, "mkmodel: %s", err.msg);
    p.rope_scale = 4.0f;
    T_CHECK(mkmodel_write(&p, lin, &err) == ST_OK, "mkmodel: %s", err.msg);
    edit e4 = {0};
    e4.rope_factor = 4.0f;
    copy_gguf(plain, tmp_path("rsf4.gguf"), &e4);
    model *m0 = model_load(plain, &err), *ml = model_load(lin, &err);
    model *mf = model_load(tmp_path("rsf4.gguf"), &err);
    T_CHECK(m0 && ml && mf && ml->hp.rope_scale == 4.0f && m0->hp.rope_scale == 1.0f,
            "linear scaling is read: %s", err.msg);
    if (m0 && ml && mf) {
        int32_t V = m0->hp.n_vocab, toks[40];
        fill_tokens(toks, 40, V, 5);
        float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
        float *c = malloc(sizeof(float) * V);
        const char *be[] = {"cpu", "ref"};
        for (int i = 0; i < 2; i++) {
            model_ctx *c0 = make_ctx(m0, be[i], 64), *cl = make_ctx(ml, be[i], 64);
            model_ctx *cf = make_ctx(mf, be[i], 64);
            model_forward_linear(c0, toks, 40, 0, a, NULL);
            model_forward_linear(cl, toks, 40, 0, b, NULL);
            model_forward_linear(cf, toks, 40, 0, c, NULL);
            T_CHECK(memcmp(b, c, sizeof(float) * V) == 0, "%s: scaling by 4 == factors of 4",
                    be[i]);
            T_CHECK(t_nerr(b, a, V) > 1e-4, "%s: scaling changes the logits: %.3g", be[i],
                    t_nerr(b, a, V));
            model_ctx_free(c0), model_ctx_free(cl), model_ctx_free(cf);
        }
        free(a), free(b), free(c);
    }
    model_free(m0), model_free(ml), model_free(mf);
    edit lr = {0}, yarn = {0};
    lr.scaling = "longrope";
    copy_gguf(lin, tmp_path("rsl.gguf"), &lr);
    st_clear(&err);
    model *my = model_load(tmp_path("rsl.gguf"), &err);
    T_CHECK(!my && err.code == ST_ERR_UNSUPPORTED && strstr(err.msg, "'longrope'") &&
            strstr(err.msg, "none, linear, yarn"), "longrope is refused clearly: '%s'", err.msg);
    model_free(my);
    /* YaRN loads (its numbers are checked against llama.cpp: tests/golden/gptoss) */
    yarn.scaling = "yarn";
    copy_gguf(lin, tmp_path("rsy.gguf"), &yarn);
    st_clear(&err);
    my = model_load(tmp_path("rsy.gguf"), &err);
    T_CHECK(my && my->hp.yarn_factor == 4.0f && my->hp.rope_scale == 1.0f &&
            my->hp.yarn_orig_ctx == my->hp.n_ctx_train, "yarn of 4 is read: %s", err.msg);
    model_free(my);
    /* a factor that would make the angles infinite is refused; type none ignores it */
    edit tiny = {0}, none = {0};
    tiny.factor = 1e-30, none.factor = 1e-30, none.scaling = "none";
    copy_gguf(lin, tmp_path("rst.gguf"), &tiny);
    st_clear(&err);
    model *mt = model_load(tmp_path("rst.gguf"), &err);
    T_CHECK(!mt && err.code == ST_ERR_FORMAT && strstr(err.msg, "out of range"),
            "a factor of 1e-30 is refused: '%s'", err.msg);
    model_free(mt);
    copy_gguf(lin, tmp_path("rsn.gguf"), &none);
    st_clear(&err);
    mt = model_load(tmp_path("rsn.gguf"), &err);
    T_CHECK(mt && mt->hp.rope_scale == 1.0f, "type none ignores the factor: %s", err.msg);
    model_free(mt);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    struct { const char *name; uint32_t type; int32_t head_kv; int32_t head_dim; bool tied;
             double bound; } shapes[] = {
        {"f32-gqa2-tied", DT_F32, 2, 16, true, 1e-5},
        {"f16-mha-untied", DT_F16, 4, 16, false, 1e-5},
        {"bf16-gqa4", DT_BF16, 1, 32, true, 1e-5},
        {"q8_0-gqa2", DT_Q8_0, 2, 32, false, 3e-2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        mkmodel_params p = mkmodel_default_params();
        mkmodel_preset("tiny", &p);
        p.wtype = shapes[i].type;
        p.n_head = 4;
        p.n_head_kv = shapes[i].head_kv;
        p.head_dim = shapes[i].head_dim;
        p.tied = shapes[i].tied;
        p.seed = 100 + i;
        char fn[64];
        snprintf(fn, sizeof fn, "%s.gguf", shapes[i].name);
        model *m = make_model(&p, fn);
        T_CHECK(m != NULL, "model %s loads", shapes[i].name);
        if (!m) continue;
        T_CHECK(m->hp.tied_output == shapes[i].tied, "%s: tied flag", shapes[i].name);
        test_batch_vs_linear(m, shapes[i].name);
        test_forest_batch(m, shapes[i].name);
        test_cpu_vs_ref(m, shapes[i].name, shapes[i].bound);
        test_prepared_and_kv(m, shapes[i].name, shapes[i].bound);
        if (i == 0) test_bad_batches(m);
        model_free(m);
    }
    test_gemma4();
    test_bad_models();
    test_rope_freqs();
    test_rope_scaling();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return t_done();
}
