/* test_tok_fuzz.c - hostile text for both tokenizers: thousands of random byte strings
 * (fixed seed; biased towards spaces, lead and continuation bytes, U+2581's bytes and
 * cut-short characters) are encoded by the SentencePiece tokenizer (the Llama 2 and
 * stories260K vocabularies) and the byte-level BPE one (SmolLM2's vocabulary, and a
 * byte-only vocabulary under each pre-tokenizer). Every id must be in range, the count
 * must not change between the sizing and the filling call, and decode(encode(x)) must
 * give the bytes of x (ill-formed UTF-8 turned into U+FFFD by the decoder), which is what
 * decoding x spelled byte by byte gives. Run under `make asan` this is also the check
 * that no input writes outside the tokenizer's work areas. The pre-tokenizer's words must
 * tile the text. */
#include "tok/tok_impl.h"
#include "t.h"
#include "t_tok.h"

#include <stdint.h>

#define SMOL_REL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A random text of 0..max bytes; most bytes come from a list of troublemakers. */
static size_t rnd_text(char *buf, size_t max) {
    static const uint8_t pick[] = { ' ', ' ', ' ', 'a', 'e', '\n', '0', '\'', 0x80, 0xBF,
                                    0xC0, 0xC1, 0xC3, 0xE0, 0xE2, 0x96, 0x81, 0xED, 0xA0,
                                    0xF0, 0xF4, 0x90, 0xF5, 0xFF, 0x00 };
    size_t n = rnd() % (max + 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rnd();
        buf[i] = (char)(r % 4 == 0 ? (uint8_t)(r >> 8) : pick[(r >> 8) % sizeof pick]);
    }
    return n;
}

/* Encodes (sizing call, then filling call); NULL and a failed check on any trouble. */
static int32_t *enc(const tok *t, const char *s, size_t len, int32_t *n) {
    *n = tok_encode(t, s, len, false, false, NULL, 0);
    if (*n < 0) return NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(*n + 1));
    int32_t m = tok_encode(t, s, len, false, false, ids, *n);
    bool in_range = m == *n;
    for (int32_t i = 0; i < *n && in_range; i++) in_range = ids[i] >= 0 && ids[i] < t->n_vocab;
    if (!in_range) {
        free(ids);
        return NULL;
    }
    return ids;
}

/* The ids that spell each byte of s[0..n) on its own (SPM: U+2581 counts as a space, as
 * the decoder shows it); a byte without a token adds none. */
static int32_t spell_bytes(const tok *t, const char *s, size_t n, int32_t *out) {
    int32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        if (!t->bpe) {
            if (n - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                b = ' ';
                i += 2;
            }
            if (t->byte_tok[b] >= 0) out[k++] = t->byte_tok[b];
        } else {
            int32_t id;
            if (tok_encode(t, (const char *)&b, 1, false, false, &id, 1) == 1) out[k++] = id;
        }
    }
    return k;
}

/* n_iter random texts through t; returns the number of failures (first few printed). */
static int fuzz_tok(const tok *t, const char *name, int n_iter, size_t max_len) {
    char *text = malloc(max_len + 1);
    int32_t *want_ids = malloc(sizeof(int32_t) * (max_len + 1));
    int bad = 0;
    for (int it = 0; it < n_iter; it++) {
        size_t len = rnd_text(text, max_len);
        int32_t n;
        int32_t *ids = enc(t, text, len, &n);
        char *got = ids ? tok_decode_str(t, ids, n) : NULL;
        char *want = tok_decode_str(t, want_ids, spell_bytes(t, text, len, want_ids));
        bool ok = got && want && strcmp(got, want) == 0;
        if (!ok && bad++ < 5) {
            fprintf(stderr, "%s: text", name);
            for (size_t i = 0; i < len; i++) fprintf(stderr, " %02x", (uint8_t)text[i]);
            fprintf(stderr, "\n  got  \"%s\"\n  want \"%s\"\n", got ? got : "(encode failed)",
                    want ? want : "?");
        }
        free(got);
        free(want);
        free(ids);
    }
    free(text);
    free(want_ids);
    return bad;
}

/* A regression test: a lead byte before a space swallowed the first byte of the
 * space's U+2581, and the symbols outnumbered their array (a heap overflow). */
static void test_spm_lead_before_space(const tok *t, const char *name) {
    const char *s = "\xc0 \x90\x80\x80";
    int32_t n;
    int32_t *ids = enc(t, s, strlen(s), &n);
    char *got = ids ? tok_decode_str(t, ids, n) : NULL;
    T_CHECK(got && strcmp(got, "\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD") == 0,
            "%s: \\xc0 then a space decodes to \"%s\"", name, got ? got : "(null)");
    free(got);
    free(ids);
}

static void test_spm(const char *rel, int n_iter) {
    tok *t = t_tok_load(rel);
    if (!t) return;
    test_spm_lead_before_space(t, rel);
    int bad = fuzz_tok(t, rel, n_iter, 128);
    T_CHECK(bad == 0, "%s: %d of %d random texts do not round-trip", rel, bad, n_iter);
    tok_free(t);
}

/* A byte-level vocabulary of the 256 byte characters and a few merges, so that every
 * pre-tokenizer can be run on random bytes without a model file. */
static tok *byte_vocab(const char *pre) {
    static char pieces[256 + 4][8];
    const char *pp[256 + 4];
    int32_t n = 0;
    for (uint32_t cp = 0; cp < 0x200 && n < 256; cp++) {
        char u[4];
        size_t used, ul = cp < 0x80 ? 1 : 2;
        u[0] = (char)(cp < 0x80 ? cp : 0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        if (tok_bpe_char_byte(u, ul, &used) < 0) continue;
        memcpy(pieces[n], u, ul);
        pieces[n][ul] = '\0';
        pp[n] = pieces[n];
        n++;
    }
    static const char *const extra[] = { "\xC4\xA0" "a", "ae", "\xC4\xA0" "ae", "00" };
    static const char *const merges[] = { "\xC4\xA0 a", "a e", "\xC4\xA0" "a e", "0 0" };
    for (int i = 0; i < 4; i++) pp[n++] = extra[i];
    tok_vocab_desc d = tok_vocab_desc_default();
    d.model = "gpt2";
    d.n_vocab = n;
    d.pieces = pp;
    d.merges = merges;
    d.n_merges = 4;
    d.pre = pre;
    st_err err;
    tok *t = tok_from_vocab(&d, &err);
    T_CHECK(t != NULL, "byte vocabulary (pre %s): %s", pre, err.msg);
    return t;
}

/* The pre-tokenizer's words tile random texts: each starts where the last ended, none is
 * empty, the last ends at the text's end. */
static void test_pretok_tiles(int kind, int n_iter) {
    char text[96];
    int bad = 0;
    for (int it = 0; it < n_iter; it++) {
        size_t len = rnd_text(text, sizeof text), at = 0, off, n;
        tok_pre p;
        tok_pre_init(&p, kind, text, len);
        bool ok = true;
        while (ok && tok_pre_next(&p, &off, &n)) {
            ok = off == at && n > 0 && off + n <= len;
            at = off + n;
        }
        if (!ok || at != len) bad++;
    }
    T_CHECK(bad == 0, "pre-tokenizer %d: %d of %d texts not tiled", kind, bad, n_iter);
}

/* Words of text under pre-tokenizer kind. */
static int pretok_words(int kind, const char *text) {
    tok_pre p;
    size_t off, n;
    int words = 0;
    tok_pre_init(&p, kind, text, strlen(text));
    while (tok_pre_next(&p, &off, &n)) words++;
    return words;
}

/* qwen35 keeps combining marks inside words, qwen2 splits at them; gemma4 splits only at
 * newline runs. */
static void test_pretok_marks(void) {
    const char *namaste = " \u0928\u092e\u0938\u094d\u0924\u0947"; /* " namaste", two marks */
    T_CHECK(pretok_words(tok_pre_kind("qwen35"), namaste) == 1, "qwen35: one word");
    T_CHECK(pretok_words(tok_pre_kind("qwen2"), namaste) == 3, "qwen2: three words (%d)",
            pretok_words(tok_pre_kind("qwen2"), namaste));
    T_CHECK(pretok_words(TOK_PRE_LINES, "a b\n\nc d\n") == 4, "lines: 4 runs");
}

static void test_bpe(int n_iter) {
    static const char *const pres[] = { "gpt2", "llama3", "qwen2", "qwen35", "smollm" };
    test_pretok_marks();
    test_pretok_tiles(TOK_PRE_LINES, n_iter);
    for (int i = 0; i < 5; i++) {
        test_pretok_tiles(tok_pre_kind(pres[i]), n_iter);
        tok *t = byte_vocab(pres[i]);
        if (!t) continue;
        int bad = fuzz_tok(t, pres[i], n_iter, 128);
        T_CHECK(bad == 0, "byte vocabulary, pre %s: %d of %d random texts do not round-trip",
                pres[i], bad, n_iter);
        tok_free(t);
    }
    tok *t = t_tok_load(SMOL_REL);
    if (t) {
        int bad = fuzz_tok(t, "SmolLM2", n_iter, 128);
        T_CHECK(bad == 0, "SmolLM2: %d of %d random texts do not round-trip", bad, n_iter);
    }
    tok_free(t);
}

int main(void) {
    test_spm("models/stories260K.gguf", 5000);
    test_spm("models/ggml-vocab-llama-spm.gguf", 5000);
    test_bpe(5000);
    return t_done();
}
