/* test_tok_bpe.c - tests of the byte-level BPE tokenizer (model "gpt2": engine/tok/tok_bpe.c,
 * engine/tok/tok_pretok.c): merge order by rank, the byte-to-unicode table, decoding and
 * streaming, end-of-generation tokens and the error paths on a small hand-made vocabulary;
 * then, on SmolLM2-135M-Instruct's vocabulary (models/, fetched by tools/fetch-model.sh;
 * skipped when absent), every string of the Hugging Face goldens (tests/golden/bpe_*.txt,
 * written by tests/oracle/gen_bpe_golden.py) for the smollm, gpt2, llama3 and qwen2
 * pre-tokenizers, decode(encode(s)) == s round trips and streaming decoding. */
#include "base/clock.h"
#include "tok/tok.h"
#include "t.h"

#include <stdint.h>
#include <time.h>

#define MODEL_REL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* ---- helpers ---- */

static int32_t *enc(const tok *t, const char *s, size_t len, bool bos, bool special, int32_t *n) {
    *n = tok_encode(t, s, len, bos, special, NULL, 0);
    if (*n < 0) return NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*n + 1));
    int32_t m = tok_encode(t, s, len, bos, special, ids, *n);
    T_CHECK(m == *n, "encode count changed between calls: %d vs %d", m, *n);
    return ids;
}

/* Decodes into a fresh NUL-terminated string; *len gets its length. */
static char *dec(const tok *t, const int32_t *ids, int32_t n, size_t *len) {
    size_t need = tok_decode(t, ids, n, NULL, 0);
    char *s = malloc(need + 1);
    size_t got = tok_decode(t, ids, n, s, need + 1);
    T_CHECK(got == need, "decode size changed: %zu vs %zu", got, need);
    if (len) *len = got;
    return s;
}

/* Decodes token by token through the stream (each put sized first), then flushes. */
static char *dec_stream(const tok *t, const int32_t *ids, int32_t n, size_t *len) {
    tok_stream st;
    tok_stream_init(&st);
    size_t cap = 64, used = 0;
    char *out = malloc(cap);
    for (int32_t i = 0; i <= n; i++) {
        char small[1];
        size_t need = i < n ? tok_stream_put(t, &st, ids[i], small, 1)
                            : tok_stream_flush(t, &st, small, 1);
        if (need == 0) continue; /* consumed with no text (fits the 1-byte buffer) */
        if (used + need + 1 > cap) {
            cap = 2 * (used + need + 1);
            out = realloc(out, cap);
        }
        size_t got = i < n ? tok_stream_put(t, &st, ids[i], out + used, need + 1)
                           : tok_stream_flush(t, &st, out + used, need + 1);
        T_CHECK(got == need, "stream size changed: %zu vs %zu", got, need);
        used += got;
    }
    out[used] = '\0';
    *len = used;
    return out;
}

static void print_ids(const char *label, const int32_t *ids, int32_t n) {
    fprintf(stderr, "  %s:", label);
    for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

static void check_enc(const tok *t, const char *s, bool special, const int32_t *want,
                      int32_t n_want) {
    int32_t n;
    int32_t *got = enc(t, s, strlen(s), false, special, &n);
    bool same = got && n == n_want &&
                (n == 0 || memcmp(got, want, sizeof(int32_t) * (size_t)n) == 0);
    T_CHECK(same, "encode(\"%s\", special=%d)", s, special);
    if (!same && got) {
        print_ids("got ", got, n);
        print_ids("want", want, n_want);
    }
    free(got);
}

/* GPT-2's byte-to-unicode table, written out independently of engine/tok/tok_bpe.c: the
 * printable Latin-1 bytes keep their code point, the rest take 256, 257, ... in order. */
static void byte_table(uint32_t cp[256]) {
    int next = 256;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp[b] = keep ? (uint32_t)b : (uint32_t)next++;
    }
}

static void utf8_put(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3F)), out[2] = 0;
    }
}

/* ---- a hand-made byte-level vocabulary ---- */

/* 0..255 the byte characters (id = byte), then the pieces below. */
enum { G_AB = 256, G_BC, G_SPA, G_SPAB, G_AA, G_END, G_IMEND, G_USER, G_N };
static const char *const g_more[] = { "ab", "bc", "\xC4\xA0" "a" /* Ġa */,
                                      "\xC4\xA0" "ab", "aa", "<|endoftext|>", "<|im_end|>",
                                      "<u>" };

static tok *toy(const char *const *merges, int32_t n_merges, const char *pre, st_err *err) {
    static char bytes[256][3];
    const char *pieces[G_N];
    int32_t types[G_N];
    uint32_t cp[256];
    byte_table(cp);
    for (int b = 0; b < 256; b++) {
        utf8_put(cp[b], bytes[b]);
        pieces[b] = bytes[b];
        types[b] = TOK_NORMAL;
    }
    for (int i = G_AB; i < G_N; i++) {
        pieces[i] = g_more[i - G_AB];
        types[i] = TOK_NORMAL;
    }
    types[G_END] = TOK_CONTROL;
    types[G_IMEND] = TOK_CONTROL;
    types[G_USER] = TOK_USER;
    tok_vocab_desc d = tok_vocab_desc_default();
    d.model = "gpt2";
    d.n_vocab = G_N;
    d.pieces = pieces;
    d.types = types;
    d.merges = merges;
    d.n_merges = n_merges;
    d.pre = pre;
    d.add_bos = false;
    d.bos = G_END;
    return tok_from_vocab(&d, err);
}

static void test_toy(void) {
    st_err err;
    /* Rank decides, lowest first: "b c" before "a b" gives a|bc; the other order ab|c. */
    const char *m1[] = { "b c", "a b", "Ġ a", "a a" };
    const char *m2[] = { "Ġ a", "Ġa b", "a b", "b c", "a a", "no-space", "x y" };
    tok *t = toy(m1, 4, "smollm", &err);
    T_CHECK(t != NULL, "toy gpt2 vocabulary: %s", err.msg);
    if (!t) return;
    T_CHECK(strcmp(tok_model_name(t), "gpt2") == 0 && !tok_add_bos(t), "model name, add_bos");
    check_enc(t, "abc", false, (int32_t[]){ 'a', G_BC }, 2); /* "b c" (rank 0) wins */
    check_enc(t, " ab", false, (int32_t[]){ ' ', G_AB }, 2);  /* "a b" (1) before "Ġ a" (2) */
    check_enc(t, " a", false, (int32_t[]){ G_SPA }, 1);
    check_enc(t, "aaa", false, (int32_t[]){ G_AA, 'a' }, 2); /* leftmost pair first */
    check_enc(t, "a\n", false, (int32_t[]){ 'a', '\n' }, 2);
    check_enc(t, "", false, NULL, 0);
    /* special tokens: control ones only with parse_special, user ones always */
    check_enc(t, "a<|im_end|>", true, (int32_t[]){ 'a', G_IMEND }, 2);
    check_enc(t, "<u>b", false, (int32_t[]){ G_USER, 'b' }, 2);
    int32_t n;
    int32_t *ids = enc(t, "a<|im_end|>", 11, false, false, &n);
    T_CHECK(n > 2 && ids && ids[0] == 'a' && ids[1] == '<', "<|im_end|> as text: n = %d", n);
    free(ids);
    ids = enc(t, "ab", 2, true, false, &n);
    T_CHECK(n == 2 && ids[0] == G_END && ids[1] == G_AB, "add_bos prepends bos");
    free(ids);

    /* Decoding: byte characters back to bytes (Ġ is a space; no space is dropped),
     * control tokens give nothing, user tokens their text. */
    size_t len;
    char *s = dec(t, (int32_t[]){ G_SPAB, ' ', G_END, 'c', G_IMEND, G_USER }, 6, &len);
    T_CHECK(strcmp(s, " ab c<u>") == 0, "decode: \"%s\"", s);
    free(s);
    /* é (C3 A9) then an incomplete lead byte at the end: streamed and whole decodes agree */
    int32_t e_acute[] = { 0xC3, 0xA9, 'x', 0xE2 };
    s = dec_stream(t, e_acute, 4, &len);
    T_CHECK(strcmp(s, "\xC3\xA9x\xEF\xBF\xBD") == 0, "stream é, cut char: \"%s\"", s);
    free(s);
    tok_stream st;
    tok_stream_init(&st);
    char buf[16];
    size_t got = tok_stream_put(t, &st, 0xC3, buf, sizeof buf);
    T_CHECK(got == 0 && st.n_pend == 1, "lead byte held back: %zu", got);
    got = tok_stream_put(t, &st, 0xA9, buf, sizeof buf);
    T_CHECK(got == 2 && memcmp(buf, "\xC3\xA9", 2) == 0, "completed character: %zu", got);
    /* Printable ASCII decodes to itself through the table. */
    int32_t ascii[95];
    char ascii_want[96];
    for (int i = 0; i < 95; i++) ascii[i] = ' ' + i, ascii_want[i] = (char)(' ' + i);
    ascii_want[95] = 0;
    s = dec(t, ascii, 95, &len);
    T_CHECK(strcmp(s, ascii_want) == 0, "printable ASCII decodes: \"%s\"", s);
    free(s);
    /* Every byte round-trips: encode(byte) then decode. */
    int bad = 0;
    for (int b = 1; b < 256; b++) {
        char in[2] = { (char)b, 0 };
        ids = enc(t, in, 1, false, false, &n);
        if (!(n == 1 && ids[0] == b)) bad++;
        free(ids);
    }
    T_CHECK(bad == 0, "%d bytes did not encode to their own token", bad);

    /* End of generation: EOS unset, but <|im_end|> and <|endoftext|> are control tokens. */
    T_CHECK(tok_is_eog(t, G_IMEND) && tok_is_eog(t, G_END) && !tok_is_eog(t, 'a') &&
                !tok_is_eog(t, G_USER) && !tok_is_eog(t, -1),
            "tok_is_eog by text");
    tok_free(t);

    /* Merges without a separator or with pieces outside the vocabulary are ignored. */
    t = toy(m2, 7, NULL, &err);
    T_CHECK(t != NULL, "toy gpt2, other merge order: %s", err.msg);
    if (t) {
        check_enc(t, "abc", false, (int32_t[]){ G_AB, 'c' }, 2);
        check_enc(t, " abc", false, (int32_t[]){ G_SPAB, 'c' }, 2); /* Ġa, then Ġa b */
        /* default pre (GPT-2 regex): " 12" is one word; no merges apply inside */
        check_enc(t, "a 12", false, (int32_t[]){ 'a', ' ', '1', '2' }, 4);
        check_enc(t, "xy", false, (int32_t[]){ 'x', 'y' }, 2);
    }
    tok_free(t);

    /* Errors: an unknown pre-tokenizer, merges missing. */
    t = toy(m1, 4, "no-such-pre", &err);
    T_CHECK(t == NULL && err.code == ST_ERR_UNSUPPORTED && strstr(err.msg, "no-such-pre"),
            "unknown pre: %s", err.msg);
    t = toy(NULL, 3, "gpt2", &err);
    T_CHECK(t == NULL && err.code == ST_ERR_ARG, "merges missing: %s", err.msg);
    t = toy(NULL, 0, "llama3", &err);
    T_CHECK(t != NULL, "no merges at all is allowed: %s", err.msg);
    if (t) {
        check_enc(t, "ab", false, (int32_t[]){ G_AB }, 1); /* llama3: a whole-word piece */
        check_enc(t, "abab", false, (int32_t[]){ 'a', 'b', 'a', 'b' }, 4);
    }
    tok_free(t);
}

/* ---- SmolLM2's vocabulary against the Hugging Face goldens ---- */

/* A tokenizer from the model's arrays with another pre-tokenizer (tok_from_vocab path). */
static tok *model_with_pre(const gguf_ctx *g, const char *pre) {
    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    int64_t yi = gguf_find_key(g, "tokenizer.ggml.token_type");
    int64_t mi = gguf_find_key(g, "tokenizer.ggml.merges");
    if (ti < 0 || yi < 0 || mi < 0) return NULL;
    uint64_t n = gguf_arr_n(g, ti), nm = gguf_arr_n(g, mi);
    const char **pieces = malloc(sizeof(char *) * n), **merges = malloc(sizeof(char *) * nm);
    size_t *lens = malloc(sizeof(size_t) * n), *mlens = malloc(sizeof(size_t) * nm);
    int32_t *types = malloc(sizeof(int32_t) * n);
    for (uint64_t i = 0; i < n; i++) {
        int64_t ty = 0;
        gguf_arr_str(g, ti, i, &pieces[i], &lens[i]);
        gguf_arr_i64(g, yi, i, &ty);
        types[i] = (int32_t)ty;
    }
    for (uint64_t i = 0; i < nm; i++) gguf_arr_str(g, mi, i, &merges[i], &mlens[i]);
    tok_vocab_desc d = tok_vocab_desc_default();
    d.model = "gpt2";
    d.n_vocab = (int32_t)n;
    d.pieces = pieces;
    d.piece_lens = lens;
    d.types = types;
    d.merges = merges;
    d.merge_lens = mlens;
    d.n_merges = (int32_t)nm;
    d.pre = pre;
    st_err err;
    tok *t = tok_from_vocab(&d, &err);
    T_CHECK(t != NULL, "tok_from_vocab with pre %s: %s", pre, err.msg);
    free(pieces);
    free(merges);
    free(lens);
    free(mlens);
    free(types);
    return t;
}

/* Undoes the golden's escapes in place; returns the length. */
static size_t unescape(char *s) {
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] != '\\') {
            s[o++] = s[i];
            continue;
        }
        char c = s[++i];
        if (c == 'n') s[o++] = '\n';
        else if (c == 't') s[o++] = '\t';
        else if (c == 'r') s[o++] = '\r';
        else if (c == 'x') {
            unsigned v = 0;
            sscanf(s + i + 1, "%2x", &v);
            s[o++] = (char)v;
            i += 2;
        } else s[o++] = c;
    }
    return o;
}

/* Every case of one golden file: exact ids, round trip, streaming. */
static void check_golden(const tok *t, const char *path, const char *pre) {
    FILE *f = fopen(path, "r");
    T_CHECK(f != NULL, "golden %s is missing", path);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int cases = 0, mism = 0, rt_bad = 0, st_bad = 0;
    bool pre_ok = false;
    int32_t want[4096];
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '#') continue;
        if (strncmp(line, "pre\t", 4) == 0) {
            pre_ok = strcmp(line + 4, pre) == 0;
            continue;
        }
        char *tab1 = strchr(line, '\t'), *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        if (!tab2) continue;
        *tab1 = *tab2 = 0;
        bool special = line[0] == 'S';
        char *text = tab1 + 1;
        size_t len = unescape(text);
        int32_t nw = 0;
        for (char *p = tab2 + 1, *e; nw < 4096; p = e) {
            long v = strtol(p, &e, 10);
            if (e == p) break;
            want[nw++] = (int32_t)v;
        }
        cases++;
        int32_t n;
        int32_t *got = enc(t, text, len, false, special, &n);
        bool same = got && n == nw && (n == 0 || memcmp(got, want, sizeof(int32_t) * (size_t)n) == 0);
        if (!same && ++mism <= 8) {
            fprintf(stderr, "%s [%s] mismatch on \"%s\" (special=%d)\n", path, pre, tab1 + 1, special);
            print_ids("got ", got, n);
            print_ids("want", want, nw);
        }
        /* Round trip: exact unless control tokens were matched (they decode to nothing). */
        bool has_ctl = memchr(text, 0x1d, len) != NULL; /* a byte SmolLM2 cannot spell */
        for (int32_t i = 0; got && i < n; i++) has_ctl |= tok_type(t, got[i]) == TOK_CONTROL;
        size_t dl, sl;
        char *d = dec(t, got, n, &dl);
        if (!has_ctl && (dl != len || memcmp(d, text, len) != 0) && ++rt_bad <= 4)
            fprintf(stderr, "round trip differs on \"%s\": \"%s\"\n", text, d);
        char *s = dec_stream(t, got, n, &sl);
        if ((sl != dl || memcmp(s, d, dl) != 0) && ++st_bad <= 4)
            fprintf(stderr, "stream decode differs on \"%s\": \"%s\"\n", text, s);
        free(d);
        free(s);
        free(got);
    }
    free(line);
    fclose(f);
    T_CHECK(pre_ok, "%s is not the golden for pre %s", path, pre);
    T_CHECK(cases >= 400, "%s: only %d cases", path, cases);
    T_CHECK(mism == 0, "%s [%s]: %d of %d encodings differ from Hugging Face", path, pre, mism, cases);
    T_CHECK(rt_bad == 0, "%s: %d round trips failed", path, rt_bad);
    T_CHECK(st_bad == 0, "%s: %d streamed decodes differ", path, st_bad);
}

static void test_model(void) {
    const char *path = access(MODEL_REL, R_OK) == 0 ? MODEL_REL : t_shared(MODEL_REL);
    if (!path) {
        T_MISSING("%s absent (sh tools/fetch-model.sh fetches it)", MODEL_REL);
        return;
    }
    st_err err;
    gguf_ctx *g = gguf_open(path, &err);
    T_CHECK(g != NULL, "open %s: %s", path, err.msg);
    if (!g) return;
    tok *t = tok_from_gguf(g, &err);
    T_CHECK(t != NULL, "tokenizer of %s: %s", path, err.msg);
    if (t) {
        T_CHECK(strcmp(tok_model_name(t), "gpt2") == 0 && tok_n_vocab(t) == 49152 &&
                    !tok_add_bos(t) && tok_bos(t) == 1 && tok_eos(t) == 2,
                "SmolLM2 metadata: %s n=%d bos=%d eos=%d", tok_model_name(t), tok_n_vocab(t),
                tok_bos(t), tok_eos(t));
        T_CHECK(tok_is_eog(t, 2) && tok_is_eog(t, 0) && !tok_is_eog(t, 1) && !tok_is_eog(t, 198),
                "SmolLM2 end of generation: <|im_end|>, <|endoftext|>");
        check_golden(t, "tests/golden/bpe_smollm2.txt", "smollm");

        /* Bytes that are not UTF-8 still encode (one byte character each) and decode to
         * U+FFFD, as the UTF-8 rules of the stream say; 0xFF has no token in SmolLM2's
         * vocabulary and is dropped. */
        int32_t n;
        int32_t *ids = enc(t, "a\xFF\xC3 b\xE2\x82", 7, false, false, &n);
        size_t dl;
        char *d = dec(t, ids, n, &dl);
        T_CHECK(n == 4 && strcmp(d, "a\xEF\xBF\xBD b\xEF\xBF\xBD") == 0,
                "ill-formed UTF-8: n=%d \"%s\"", n, d);
        free(d);
        free(ids);

        /* A long mixed text (about 1 MB): encodes quickly and round-trips. */
        const char *chunk = "The quick brown fox, 1234567 times! \xD0\x9F\xD1\x80\xD0\xB8 "
                            "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80\n\tdef f(x): return x\n"
                            "                                \n";
        size_t cl = strlen(chunk), reps = (1u << 20) / cl, tl = reps * cl;
        char *big = malloc(tl + 1);
        for (size_t i = 0; i < reps; i++) memcpy(big + i * cl, chunk, cl);
        big[tl] = 0;
        double t0 = mono_now_s();
        ids = enc(t, big, tl, false, false, &n);
        double sec = mono_now_s() - t0;
        d = ids ? dec(t, ids, n, &dl) : NULL;
        T_CHECK(d && dl == tl && memcmp(d, big, tl) == 0, "1 MB round trip (%d tokens)", n);
        T_CHECK(sec < 20, "1 MB took %.2f s to encode (twice)", sec);
        fprintf(stderr, "bpe: 1 MB -> %d tokens, encoded twice in %.3f s\n", n, sec);
        free(d);
        free(ids);
        free(big);
        /* A very long run of one character class (a single pre-tokenizer word). */
        big = malloc(100001);
        memset(big, '=', 100000);
        big[100000] = 0;
        ids = enc(t, big, 100000, false, false, &n);
        d = ids ? dec(t, ids, n, &dl) : NULL;
        T_CHECK(d && dl == 100000 && memcmp(d, big, dl) == 0, "100k '=' round trip");
        free(d);
        free(ids);
        free(big);
    }
    tok_free(t);

    static const char *const others[][2] = {
        { "gpt2", "tests/golden/bpe_smollm2_gpt2.txt" },
        { "llama3", "tests/golden/bpe_smollm2_llama3.txt" },
        { "qwen2", "tests/golden/bpe_smollm2_qwen2.txt" },
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        t = model_with_pre(g, others[i][0]);
        if (t) check_golden(t, others[i][1], others[i][0]);
        tok_free(t);
    }
    gguf_close(g);
}

int main(void) {
    test_toy();
    test_model();
    return t_done();
}
