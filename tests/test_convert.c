/* test_convert.c - tests of the two GGUF producers: the llama2.c converter (llama2c) and
 * the random-weight model generator (mkmodel).
 *
 * llama2c: stories260K.bin + tok512.bin must convert to exactly the tokens, scores,
 * token types, hyperparameters and tensor bytes of the published stories260K.gguf
 * (skipped without the fixtures); a small synthetic checkpoint (tied and untied) must
 * land each array under the right name and shape; hostile checkpoints and tokenizers
 * must give clean errors and no output file. mkmodel: every preset and its documented
 * parameter count, parameter checks, a tiny model per weight type (tied / untied, GQA,
 * head_dim != n_embd / n_head) read back for metadata, vocabulary, tensor shapes and
 * types, weight scales, determinism from the seed, and a tokenizer that encodes text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "convert/llama2c.h"
#include "convert/mkmodel.h"
#include "tok/tok.h"
#include "kernels/dtype.h"
#include "t.h"

/* ---- helpers ---- */

typedef struct tpath { char s[512]; } tpath;

static tpath path_in(const char *dir, const char *name) {
    tpath p;
    snprintf(p.s, sizeof p.s, "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    if (n && fwrite(data, 1, n, f) != n) { perror(path); exit(2); }
    fclose(f);
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static int64_t get_i(const gguf_ctx *g, const char *key) {
    int64_t v = -999;
    gguf_get_i64(g, key, &v, NULL);
    return v;
}

/* ---- llama2c: stories260K against the published GGUF ---- */

static void test_stories260k(const char *dir) {
    char bin[4096], tokp[4096], ref[4096];
    const char *p;
    if (!(p = t_shared("models/stories260K.bin"))) { T_MISSING("no stories260K.bin"); return; }
    snprintf(bin, sizeof bin, "%s", p);
    if (!(p = t_shared("models/tok512.bin"))) { T_MISSING("no tok512.bin"); return; }
    snprintf(tokp, sizeof tokp, "%s", p);
    if (!(p = t_shared("models/stories260K.gguf"))) { T_MISSING("no stories260K.gguf"); return; }
    snprintf(ref, sizeof ref, "%s", p);

    tpath outp = path_in(dir, "stories260K.gguf");
    const char *out = outp.s;
    st_err err = {0};
    st_code rc = llama2c_convert(bin, tokp, out, &err);
    T_CHECK(rc == ST_OK, "convert: %s", err.msg);
    if (rc != ST_OK) return;
    gguf_ctx *a = gguf_open(out, &err), *b = gguf_open(ref, &err);
    T_CHECK(a && b, "open: %s", err.msg);
    if (!a || !b) { gguf_close(a); gguf_close(b); return; }

    static const char *const same_int[] = {
        "llama.embedding_length", "llama.feed_forward_length", "llama.block_count",
        "llama.attention.head_count", "llama.attention.head_count_kv",
        "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"};
    for (size_t i = 0; i < sizeof same_int / sizeof same_int[0]; i++)
        T_CHECK(get_i(a, same_int[i]) == get_i(b, same_int[i]) && get_i(a, same_int[i]) >= 0,
                "%s: %lld vs %lld", same_int[i], (long long)get_i(a, same_int[i]),
                (long long)get_i(b, same_int[i]));
    T_CHECK(get_i(a, "llama.context_length") == 512, "context_length is seq_len");
    double ea = 0, eb = 1;
    gguf_get_f64(a, "llama.attention.layer_norm_rms_epsilon", &ea, NULL);
    gguf_get_f64(b, "llama.attention.layer_norm_rms_epsilon", &eb, NULL);
    T_CHECK(ea == eb, "rms eps %g vs %g", ea, eb);
    double fb = 0;
    gguf_get_f64(a, "llama.rope.freq_base", &fb, NULL);
    T_CHECK(fb == 10000.0, "freq_base %g", fb);
    static const char *const same_str[] = {"general.architecture", "tokenizer.ggml.model"};
    for (size_t i = 0; i < 2; i++) {
        const char *sa = "", *sb = "?";
        gguf_get_str(a, same_str[i], &sa, NULL);
        gguf_get_str(b, same_str[i], &sb, NULL);
        T_CHECK(strcmp(sa, sb) == 0, "%s: '%s' vs '%s'", same_str[i], sa, sb);
    }
    const char *name = "";
    gguf_get_str(a, "general.name", &name, NULL);
    T_CHECK(strcmp(name, "stories260K") == 0, "general.name '%s'", name);

    /* The vocabulary, element by element. */
    int64_t ta = gguf_find_key(a, "tokenizer.ggml.tokens");
    int64_t tb = gguf_find_key(b, "tokenizer.ggml.tokens");
    int64_t sa = gguf_find_key(a, "tokenizer.ggml.scores");
    int64_t sb = gguf_find_key(b, "tokenizer.ggml.scores");
    int64_t ya = gguf_find_key(a, "tokenizer.ggml.token_type");
    int64_t yb = gguf_find_key(b, "tokenizer.ggml.token_type");
    T_CHECK(ta >= 0 && sa >= 0 && ya >= 0, "tokenizer arrays present");
    uint64_t n = gguf_arr_n(b, tb);
    T_CHECK(n == 512 && gguf_arr_n(a, ta) == n && gguf_arr_n(a, sa) == n && gguf_arr_n(a, ya) == n,
            "vocab sizes");
    T_CHECK(gguf_arr_type(a, sa) == GGUF_F32 && gguf_arr_type(a, ya) == GGUF_I32, "array types");
    int bad_tok = 0, bad_score = 0, bad_type = 0;
    for (uint64_t j = 0; j < n && ta >= 0 && sa >= 0 && ya >= 0; j++) {
        const char *pa = NULL, *pb = NULL;
        size_t la = 0, lb = 1;
        gguf_arr_str(a, ta, j, &pa, &la);
        gguf_arr_str(b, tb, j, &pb, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0) bad_tok++;
        double da = 0, db = 1;
        gguf_arr_f64(a, sa, j, &da);
        gguf_arr_f64(b, sb, j, &db);
        if (da != db) bad_score++;
        int64_t ia = 0, ib = -1;
        gguf_arr_i64(a, ya, j, &ia);
        gguf_arr_i64(b, yb, j, &ib);
        if (ia != ib) bad_type++;
    }
    T_CHECK(bad_tok == 0, "%d tokens differ", bad_tok);
    T_CHECK(bad_score == 0, "%d scores differ", bad_score);
    T_CHECK(bad_type == 0, "%d token types differ", bad_type);

    /* Every reference tensor has a byte-identical twin; output.weight is the embedding. */
    T_CHECK(gguf_n_tensors(a) == gguf_n_tensors(b) - 1, "%lld tensors vs %lld",
            (long long)gguf_n_tensors(a), (long long)gguf_n_tensors(b));
    T_CHECK(gguf_find_tensor(a, "output.weight") == NULL, "tied: no output.weight");
    int bad = 0;
    for (int64_t i = 0; i < gguf_n_tensors(b); i++) {
        const gguf_tensor *tr = gguf_tensor_at(b, i);
        bool is_out = strcmp(tr->name, "output.weight") == 0;
        const gguf_tensor *to = gguf_find_tensor(a, is_out ? "token_embd.weight" : tr->name);
        bool ok = to && to->type == tr->type && to->n_dims == tr->n_dims &&
                  memcmp(to->ne, tr->ne, sizeof to->ne) == 0 && to->nbytes == tr->nbytes &&
                  memcmp(to->data, tr->data, tr->nbytes) == 0;
        if (!ok) {
            bad++;
            fprintf(stderr, "tensor %s differs\n", tr->name);
        }
    }
    T_CHECK(bad == 0, "%d tensors differ", bad);
    gguf_close(a);
    gguf_close(b);
}

/* ---- llama2c: synthetic checkpoints ---- */

enum { H_DIM, H_HID, H_L, H_HEADS, H_KV, H_VOCAB, H_SEQ };

/* Floats a header implies (computed here independently of the converter), or -1. */
static long ck_floats(const int32_t h[7]) {
    long d = h[H_DIM], hid = h[H_HID], L = h[H_L], kv = (long)h[H_DIM] * h[H_KV] / h[H_HEADS];
    long v = labs((long)h[H_VOCAB]), hs = d / h[H_HEADS];
    return v * d + L * d + L * d * d + 2 * L * kv * d + L * d * d + L * d + 3 * L * hid * d +
           d + 2 * (long)h[H_SEQ] * (hs / 2) + (h[H_VOCAB] < 0 ? v * d : 0);
}

/* Writes a checkpoint whose float i is (float)i, with n_floats floats after the header. */
static void write_ckpt(const char *path, const int32_t h[7], long n_floats) {
    size_t n = 28 + 4 * (size_t)(n_floats > 0 ? n_floats : 0);
    unsigned char *b = calloc(1, n);
    memcpy(b, h, 28);
    for (long i = 0; i < n_floats; i++) {
        float f = (float)i;
        memcpy(b + 28 + 4 * i, &f, 4);
    }
    write_bytes(path, b, n);
    free(b);
}

/* The six-token tokenizer in llama2.c's export form. */
static const char *const tok6[6] = {"<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", " a", "bc d"};
static const float tok6_score[6] = {0, 0, 0, 0, -1.0f, -2.5f};

/* Builds a tokenizer image of tokens [0, n) of tok6 (n may exceed 6: repeats "x"). */
static size_t build_tok(unsigned char *b, int32_t max_len, int n) {
    size_t o = 0;
    memcpy(b, &max_len, 4);
    o = 4;
    for (int i = 0; i < n; i++) {
        const char *s = i < 6 ? tok6[i] : "x";
        float sc = i < 6 ? tok6_score[i] : -9.0f;
        int32_t len = (int32_t)strlen(s);
        memcpy(b + o, &sc, 4);
        memcpy(b + o + 4, &len, 4);
        memcpy(b + o + 8, s, (size_t)len);
        o += 8 + (size_t)len;
    }
    return o;
}

static void test_synthetic(const char *dir) {
    unsigned char tb[512];
    tpath tp = path_in(dir, "tok6.bin"), bp = path_in(dir, "tiny.bin");
    tpath op = path_in(dir, "tiny.gguf");
    const char *tokp = tp.s, *bin = bp.s, *out = op.s;
    write_bytes(tokp, tb, build_tok(tb, 6, 6));
    for (int untied = 0; untied < 2; untied++) {
        int32_t h[7] = {8, 12, 2, 2, 1, untied ? -6 : 6, 4};
        long nf = ck_floats(h);
        write_ckpt(bin, h, nf);
        st_err err = {0};
        st_code rc = llama2c_convert(bin, tokp, out, &err);
        T_CHECK(rc == ST_OK, "synthetic convert (untied %d): %s", untied, err.msg);
        gguf_ctx *g = gguf_open(out, &err);
        T_CHECK(g != NULL, "open: %s", err.msg);
        if (!g) continue;
        T_CHECK(get_i(g, "llama.attention.head_count_kv") == 1 &&
                get_i(g, "llama.rope.dimension_count") == 4 &&
                get_i(g, "llama.context_length") == 4, "hparams");
        T_CHECK(gguf_n_tensors(g) == 2 * 9 + 2 + untied, "tensor count %lld",
                (long long)gguf_n_tensors(g));
        /* Float offsets in llama2.c order: emb 48, rms_att 16, wq 128, wk 64, wv 64,
         * wo 128, rms_ffn 16, w1 192, w2 192, w3 192, rms_final 8, freq 16 (, wcls 48). */
        const struct { const char *name; int64_t ne0, ne1; long first; } want[] = {
            {"token_embd.weight", 8, 6, 0},
            {"blk.0.attn_norm.weight", 8, 1, 48},
            {"blk.1.attn_norm.weight", 8, 1, 56},
            {"blk.1.attn_q.weight", 8, 8, 64 + 64},
            {"blk.0.attn_k.weight", 8, 4, 192},
            {"blk.1.attn_v.weight", 8, 4, 256 + 32},
            {"blk.1.attn_output.weight", 8, 8, 320 + 64},
            {"blk.1.ffn_norm.weight", 8, 1, 448 + 8},
            {"blk.1.ffn_gate.weight", 8, 12, 464 + 96},
            {"blk.1.ffn_down.weight", 12, 8, 656 + 96},
            {"blk.0.ffn_up.weight", 8, 12, 848},
            {"output_norm.weight", 8, 1, 1040},
            {"output.weight", 8, 6, 1064},
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            const gguf_tensor *t = gguf_find_tensor(g, want[i].name);
            if (!untied && strcmp(want[i].name, "output.weight") == 0) {
                T_CHECK(t == NULL, "tied model has output.weight");
                continue;
            }
            T_CHECK(t && t->type == DT_F32 && t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1,
                    "%s shape", want[i].name);
            if (!t) continue;
            const float *f = t->data;
            int64_t ne = gguf_tensor_nelem(t);
            T_CHECK(f[0] == (float)want[i].first && f[ne - 1] == (float)(want[i].first + ne - 1),
                    "%s holds floats %ld.. (got %g)", want[i].name, want[i].first, f[0]);
        }
        static const char *const exp_tok[6] = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81" "a",
                                              "bc\xe2\x96\x81" "d"};
        static const int64_t exp_type[6] = {2, 3, 3, 6, 1, 1};
        int64_t kt = gguf_find_key(g, "tokenizer.ggml.tokens");
        int64_t ks = gguf_find_key(g, "tokenizer.ggml.scores");
        int64_t ky = gguf_find_key(g, "tokenizer.ggml.token_type");
        for (uint64_t j = 0; j < 6 && kt >= 0 && ks >= 0 && ky >= 0; j++) {
            const char *s = NULL;
            size_t len = 0;
            double sc = 1;
            int64_t ty = 0;
            gguf_arr_str(g, kt, j, &s, &len);
            gguf_arr_f64(g, ks, j, &sc);
            gguf_arr_i64(g, ky, j, &ty);
            T_CHECK(s && len == strlen(exp_tok[j]) && memcmp(s, exp_tok[j], len) == 0 &&
                    sc == tok6_score[j] && ty == exp_type[j], "token %d", (int)j);
        }
        gguf_close(g);
        unlink(out);
    }
}

/* One hostile input: the conversion must fail with the code, mention the fragment, and
 * leave no output file. */
static void expect_fail(const char *what, const char *bin, const char *tokp, const char *out,
                        st_code want, const char *fragment) {
    st_err err = {0};
    unlink(out);
    st_code rc = llama2c_convert(bin, tokp, out, &err);
    T_CHECK(rc == want && err.code == want, "%s: got %s (%s)", what, st_str(rc), err.msg);
    T_CHECK(strstr(err.msg, fragment) != NULL, "%s: message '%s' lacks '%s'", what, err.msg,
            fragment);
    T_CHECK(!exists(out), "%s: output written", what);
}

static void test_hostile(const char *dir) {
    tpath bp = path_in(dir, "bad.bin"), tp = path_in(dir, "bad_tok.bin");
    tpath op = path_in(dir, "bad.gguf"), nope = path_in(dir, "nope.bin");
    tpath none = path_in(dir, "none_tok.bin");
    const char *bin = bp.s, *tokp = tp.s, *out = op.s;
    unsigned char tb[512];
    size_t tn = build_tok(tb, 6, 6);
    write_bytes(tokp, tb, tn);
    const int32_t good[7] = {8, 12, 2, 2, 1, 6, 4};
    long nf = ck_floats(good);

    expect_fail("missing model", nope.s, tokp, out, ST_ERR_IO, "nope.bin");
    write_bytes(bin, good, 10);
    expect_fail("short header", bin, tokp, out, ST_ERR_FORMAT, "28-byte");

    const struct { int field; int32_t v; const char *frag; } hdr[] = {
        {H_DIM, -8, "dim"}, {H_DIM, 0, "dim"}, {H_HID, -1, "hidden_dim"},
        {H_L, 0, "n_layers"}, {H_HEADS, 3, "n_heads"}, {H_HEADS, 0, "n_heads"},
        {H_KV, 3, "n_kv_heads"}, {H_KV, -2, "n_kv_heads"}, {H_VOCAB, 0, "vocab_size"},
        {H_VOCAB, INT32_MIN, "vocab_size"}, {H_SEQ, -4, "seq_len"}, {H_HEADS, 8, "odd"}};
    for (size_t i = 0; i < sizeof hdr / sizeof hdr[0]; i++) {
        int32_t h[7];
        memcpy(h, good, sizeof h);
        h[hdr[i].field] = hdr[i].v;
        write_ckpt(bin, h, nf);
        char what[64];
        snprintf(what, sizeof what, "header field %d = %d", hdr[i].field, (int)hdr[i].v);
        expect_fail(what, bin, tokp, out, ST_ERR_FORMAT, hdr[i].frag);
    }
    /* Sizes that overflow 64 bits must be caught before any allocation or read. */
    int32_t huge[7] = {1 << 30, 1 << 30, 1 << 30, 2, 2, INT32_MAX, 1 << 30};
    write_ckpt(bin, huge, 16);
    expect_fail("overflowing header", bin, tokp, out, ST_ERR_FORMAT, "impossible");
    int32_t big[7] = {4096, 11008, 32, 32, 32, 32000, 2048};
    write_ckpt(bin, big, 16);
    expect_fail("7B header, tiny file", bin, tokp, out, ST_ERR_FORMAT, "implies");

    write_ckpt(bin, good, nf - 1);
    expect_fail("truncated weights", bin, tokp, out, ST_ERR_FORMAT, "implies");
    write_ckpt(bin, good, nf + 1);
    expect_fail("one float too many", bin, tokp, out, ST_ERR_FORMAT, "implies");
    write_ckpt(bin, good, nf + 6 * 8);
    expect_fail("unannounced classifier", bin, tokp, out, ST_ERR_FORMAT, "negative");

    /* A valid checkpoint with broken tokenizers. */
    write_ckpt(bin, good, nf);
    expect_fail("missing tokenizer", bin, none.s, out, ST_ERR_IO,
                "none_tok.bin");
    write_bytes(tokp, tb, 0);
    expect_fail("empty tokenizer", bin, tokp, out, ST_ERR_FORMAT, "too short");
    write_bytes(tokp, tb, tn - 2);
    expect_fail("tokenizer cut inside a token", bin, tokp, out, ST_ERR_FORMAT, "truncated");
    write_bytes(tokp, tb, build_tok(tb, 6, 5));
    expect_fail("tokenizer with 5 of 6 tokens", bin, tokp, out, ST_ERR_FORMAT, "truncated");
    write_bytes(tokp, tb, build_tok(tb, 6, 7));
    expect_fail("tokenizer with 7 tokens", bin, tokp, out, ST_ERR_FORMAT, "after its 6");
    write_bytes(tokp, tb, build_tok(tb, -1, 6));
    expect_fail("negative max_token_length", bin, tokp, out, ST_ERR_FORMAT, "max_token_length");
    write_bytes(tokp, tb, build_tok(tb, 4, 6)); /* "<unk>" is 5 bytes > 4 */
    expect_fail("token longer than max", bin, tokp, out, ST_ERR_FORMAT, "token 0 has length");
    tn = build_tok(tb, 6, 6);
    int32_t absurd = 1000000000;
    memcpy(tb + 4 + 8 + 5 + 4, &absurd, 4); /* token 1's length */
    write_bytes(tokp, tb, tn);
    expect_fail("absurd token length", bin, tokp, out, ST_ERR_FORMAT, "1000000000");
    int32_t neg = -5;
    memcpy(tb + 4 + 8 + 5 + 4, &neg, 4);
    write_bytes(tokp, tb, tn);
    expect_fail("negative token length", bin, tokp, out, ST_ERR_FORMAT, "-5");
}

/* ---- mkmodel ---- */

static void test_mk_params(const char *dir) {
    static const struct { const char *name; int64_t n_params; } pre[] = {
        {"tiny", 164160}, {"25m", 26450304}, {"110m", 109529856}, {"1b", 1100048384}};
    for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++) {
        mkmodel_params p = {0};
        st_code rc = mkmodel_preset(pre[i].name, &p);
        T_CHECK(rc == ST_OK && mkmodel_check(&p, NULL) == ST_OK, "preset %s", pre[i].name);
        T_CHECK(mkmodel_n_params(&p) == pre[i].n_params, "preset %s has %lld params",
                pre[i].name, (long long)mkmodel_n_params(&p));
    }
    mkmodel_params q = mkmodel_default_params(), keep = q;
    q.seed = 77;
    keep = q;
    T_CHECK(mkmodel_preset("2b", &q) == ST_ERR_ARG && q.seed == keep.seed &&
            q.n_vocab == keep.n_vocab && q.wtype == keep.wtype, "unknown preset");
    T_CHECK(q.n_vocab >= MKMODEL_MIN_VOCAB && q.n_vocab <= 512 && q.n_embd == 64 &&
            q.n_layer == 2, "default is tiny");

    const struct {
        const char *what;
        int field;
        int32_t v;
        uint32_t wtype;
        const char *frag;
    } bad[] = {
        {"vocab too small", 0, 100, DT_F32, "n_vocab"},
        {"heads not multiple of kv", 1, 3, DT_F32, "n_head_kv"},
        {"Q8_0 embd 48", 2, 48, DT_Q8_0, "block"},
        {"odd head_dim", 3, 15, DT_F32, "odd"},
        {"Q2_K weights", 4, 0, DT_Q2_K, "Q2_K"},
        {"Q4_K embd 128", 2, 128, DT_Q4_K, "256"},
        {"zero layers", 5, 0, DT_F32, "n_layer"},
        {"embd not multiple of heads", 2, 66, DT_F32, "n_head"},
        {"Q8_0 ff 100", 6, 100, DT_Q8_0, "n_ff"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mkmodel_params p = mkmodel_default_params();
        p.wtype = bad[i].wtype;
        int32_t *f[] = {&p.n_vocab, &p.n_head_kv, &p.n_embd, &p.head_dim, &p.n_ctx, &p.n_layer,
                        &p.n_ff};
        if (bad[i].field != 4) *f[bad[i].field] = bad[i].v;
        st_err err = {0};
        tpath pp = path_in(dir, "bad_mk.gguf");
        const char *path = pp.s;
        st_code rc = mkmodel_write(&p, path, &err);
        T_CHECK(rc == ST_ERR_ARG && strstr(err.msg, bad[i].frag), "%s: %s (%s)", bad[i].what,
                st_str(rc), err.msg);
        T_CHECK(!exists(path), "%s: file written", bad[i].what);
    }
}

/* Mean and standard deviation of a tensor's dequantised values. */
static void tensor_stats(const gguf_tensor *t, double *mean, double *std) {
    int64_t ne0 = t->ne[0], rows = gguf_tensor_nelem(t) / ne0;
    float *row = malloc((size_t)ne0 * sizeof *row);
    size_t rb = dtype_row_bytes(t->type, ne0);
    double s = 0, s2 = 0;
    for (int64_t r = 0; r < rows; r++) {
        dtype_dequantize_row(t->type, (const char *)t->data + (size_t)r * rb, row, ne0);
        for (int64_t i = 0; i < ne0; i++) {
            s += row[i];
            s2 += (double)row[i] * row[i];
        }
    }
    double n = (double)(rows * ne0);
    *mean = s / n;
    *std = sqrt(fmax(s2 / n - *mean * *mean, 0));
    free(row);
}

static bool within(double x, double target, double factor) {
    return x >= target / factor && x <= target * factor;
}

static void check_mk_file(const mkmodel_params *p, const char *path) {
    st_err err = {0};
    gguf_ctx *g = gguf_open(path, &err);
    T_CHECK(g != NULL, "open %s: %s", path, err.msg);
    if (!g) return;
    int32_t hd = p->head_dim ? p->head_dim : p->n_embd / p->n_head;
    const char *arch = "";
    gguf_get_str(g, "general.architecture", &arch, NULL);
    T_CHECK(strcmp(arch, "llama") == 0, "architecture");
    T_CHECK(get_i(g, "llama.embedding_length") == p->n_embd &&
            get_i(g, "llama.block_count") == p->n_layer &&
            get_i(g, "llama.attention.head_count") == p->n_head &&
            get_i(g, "llama.attention.head_count_kv") == p->n_head_kv &&
            get_i(g, "llama.feed_forward_length") == p->n_ff &&
            get_i(g, "llama.context_length") == p->n_ctx &&
            get_i(g, "llama.rope.dimension_count") == hd, "hparams");
    bool odd_hd = hd * p->n_head != p->n_embd;
    T_CHECK(odd_hd ? get_i(g, "llama.attention.key_length") == hd &&
                     get_i(g, "llama.attention.value_length") == hd
                   : gguf_find_key(g, "llama.attention.key_length") < 0, "key_length");
    double base = 0;
    gguf_get_f64(g, "llama.rope.freq_base", &base, NULL);
    T_CHECK(base == (double)p->rope_base, "freq_base %g", base);

    /* Vocabulary: the fixed head, then distinct printable pieces. */
    int64_t kt = gguf_find_key(g, "tokenizer.ggml.tokens");
    int64_t ky = gguf_find_key(g, "tokenizer.ggml.token_type");
    T_CHECK(kt >= 0 && ky >= 0 && gguf_arr_n(g, kt) == (uint64_t)p->n_vocab &&
            gguf_arr_n(g, ky) == (uint64_t)p->n_vocab, "vocab arrays");
    if (kt >= 0 && ky >= 0) {
        int bad = 0, dup = 0;
        const char *s, *s2;
        size_t len, len2;
        for (uint64_t j = 0; j < (uint64_t)p->n_vocab; j++) {
            int64_t ty = 0;
            gguf_arr_i64(g, ky, j, &ty);
            gguf_arr_str(g, kt, j, &s, &len);
            char want[16];
            int64_t wt = j == 0 ? 2 : j < 3 ? 3 : j < 259 ? 6 : 1;
            if (j >= 3 && j < 259) snprintf(want, sizeof want, "<0x%02X>", (unsigned)(j - 3));
            if (ty != wt || len == 0 || (j >= 3 && j < 259 && (len != 6 || memcmp(s, want, 6))))
                bad++;
            for (uint64_t k = 0; k < j; k++) {
                gguf_arr_str(g, kt, k, &s2, &len2);
                if (len == len2 && memcmp(s, s2, len) == 0) dup++;
            }
        }
        T_CHECK(bad == 0 && dup == 0, "%d bad and %d duplicate tokens", bad, dup);
    }

    /* Tensors: count, types, shapes. */
    int64_t e = p->n_embd, q = (int64_t)p->n_head * hd, kv = (int64_t)p->n_head_kv * hd;
    T_CHECK(gguf_n_tensors(g) == 9 * p->n_layer + 2 + !p->tied, "tensor count");
    T_CHECK((gguf_find_tensor(g, "output.weight") == NULL) == p->tied, "output.weight iff untied");
    const struct { const char *name; int64_t ne0, ne1; bool mat; } want[] = {
        {"token_embd.weight", e, p->n_vocab, true}, {"output_norm.weight", e, 1, false},
        {"blk.0.attn_q.weight", e, q, true}, {"blk.0.attn_k.weight", e, kv, true},
        {"blk.1.attn_v.weight", e, kv, true}, {"blk.1.attn_output.weight", q, e, true},
        {"blk.0.ffn_gate.weight", e, p->n_ff, true}, {"blk.1.ffn_down.weight", p->n_ff, e, true},
        {"blk.1.ffn_up.weight", e, p->n_ff, true}, {"blk.1.attn_norm.weight", e, 1, false},
        {"blk.0.ffn_norm.weight", e, 1, false}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const gguf_tensor *t = gguf_find_tensor(g, want[i].name);
        T_CHECK(t && t->ne[0] == want[i].ne0 && t->ne[1] == want[i].ne1 &&
                t->n_dims == (want[i].mat ? 2u : 1u) &&
                t->type == (want[i].mat ? p->wtype : (uint32_t)DT_F32), "%s shape/type",
                want[i].name);
    }
    /* Scales: U(-a, a) has std a / sqrt(3). */
    double mean, sd;
    const gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_q.weight");
    if (t) {
        tensor_stats(t, &mean, &sd);
        T_CHECK(within(sd, 1.0 / sqrt(3.0 * (double)e), 1.15) && fabs(mean) < 0.1 * sd,
                "attn_q std %g mean %g", sd, mean);
    }
    if ((t = gguf_find_tensor(g, "token_embd.weight"))) {
        tensor_stats(t, &mean, &sd);
        T_CHECK(within(sd, 1.0 / sqrt((double)e), 1.1) && fabs(mean) < 0.1 * sd,
                "token_embd std %g mean %g", sd, mean);
    }
    if ((t = gguf_find_tensor(g, "blk.1.attn_norm.weight"))) {
        tensor_stats(t, &mean, &sd);
        T_CHECK(fabs(mean - 1.0) < 0.05 && sd > 0.01 && sd < 0.1, "attn_norm mean %g std %g",
                mean, sd);
    }

    /* The vocabulary works: text encodes with merges and decodes back. */
    tok *tk = tok_from_gguf(g, &err);
    T_CHECK(tk != NULL, "tokenizer: %s", err.msg);
    if (tk) {
        const char *text = "hello world, Once upon a time!";
        int32_t ids[128];
        int32_t n = tok_encode(tk, text, strlen(text), true, false, ids, 128);
        char back[256];
        size_t bl = n > 0 && n <= 128 ? tok_decode(tk, ids + 1, n - 1, back, sizeof back) : 0;
        back[bl < sizeof back ? bl : sizeof back - 1] = '\0';
        const char *cmp = back[0] == ' ' ? back + 1 : back;
        T_CHECK(n > 1 && n < (int32_t)strlen(text) && ids[0] == 1 && strcmp(cmp, text) == 0,
                "encode gave %d ids, decoded '%s'", n, back);
        tok_free(tk);
    }
    gguf_close(g);
}

static void test_mk_models(const char *dir) {
    mkmodel_params base = mkmodel_default_params();
    struct { const char *what; uint32_t wtype; bool tied; int32_t kv, hd; } cases[] = {
        {"f32 untied gqa", DT_F32, false, 2, 0},
        {"f16 tied mha", DT_F16, true, 4, 0},
        {"bf16 untied head_dim 32", DT_BF16, false, 1, 32},
        {"q8_0 tied gqa head_dim 32", DT_Q8_0, true, 2, 32},
        {"q8_0 untied head_dim 8", DT_Q8_0, false, 4, 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mkmodel_params p = base;
        p.wtype = cases[i].wtype;
        p.tied = cases[i].tied;
        p.n_head_kv = cases[i].kv;
        p.head_dim = cases[i].hd;
        p.seed = 100 + i;
        p.rope_base = 500000.0f;
        tpath pp = path_in(dir, "mk.gguf");
        const char *path = pp.s;
        st_err err = {0};
        st_code rc = mkmodel_write(&p, path, &err);
        T_CHECK(rc == ST_OK, "%s: %s", cases[i].what, err.msg);
        if (rc == ST_OK) check_mk_file(&p, path);
        unlink(path);
    }

    /* Determinism: same params -> same bytes; another seed -> other weights. */
    mkmodel_params p = base;
    p.wtype = DT_Q8_0;
    tpath ap = path_in(dir, "det_a.gguf"), bp = path_in(dir, "det_b.gguf");
    const char *a = ap.s, *b = bp.s;
    st_code ra = mkmodel_write(&p, a, NULL), rb = mkmodel_write(&p, b, NULL);
    size_t na = 0, nb = 0;
    unsigned char *ba = (unsigned char *)t_slurp(a, &na), *bb = (unsigned char *)t_slurp(b, &nb);
    T_CHECK(ra == ST_OK && rb == ST_OK && ba && bb && na == nb && memcmp(ba, bb, na) == 0,
            "same seed, same bytes");
    free(bb);
    p.seed++;
    rb = mkmodel_write(&p, b, NULL);
    bb = (unsigned char *)t_slurp(b, &nb);
    T_CHECK(rb == ST_OK && bb && na == nb && memcmp(ba, bb, na) != 0, "new seed, new bytes");
    free(ba);
    free(bb);
    unlink(a);
    unlink(b);
}

int main(void) {
    char dir[] = "/tmp/md_test_convert_XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    test_stories260k(dir);
    test_synthetic(dir);
    test_hostile(dir);
    test_mk_params(dir);
    test_mk_models(dir);
    static const char *const files[] = {"stories260K.gguf", "tok6.bin", "tiny.bin", "tiny.gguf",
                                        "bad.bin", "bad_tok.bin", "bad.gguf", "bad_mk.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(path_in(dir, files[i]).s);
    if (rmdir(dir) != 0) fprintf(stderr, "note: %s not empty\n", dir);
    return t_done();
}
