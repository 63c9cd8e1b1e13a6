/* fuzz_tok.h - the checks both tokenizer harnesses run on a tokenizer and an input:
 * encode (sized, then filled), decode the ids back whole and through the stream with
 * one-byte buffers, and decode the input read as arbitrary token ids (most out of range).
 * Valid UTF-8 encoded without special-token parsing must decode to itself when the
 * tokenizer is lossless for it (byte fallback or byte-level vocabulary), except that
 * SentencePiece decodes a U+2581 of the text as a space. */
#ifndef MD_FUZZ_TOK_H
#define MD_FUZZ_TOK_H

#include <stdbool.h>

#include "gguf/gguf.h"
#include "tok/tok.h"
#include "fuzz.h"

/* Encoding time grows faster than the text; a longer text finds nothing a short one
 * does not. */
#define FUZZ_TOK_MAX_TEXT 4096

/* The tokenizer of the GGUF file at path (NULL when path is NULL: the fixture is absent);
 * aborts naming who when the file does not give one, as the harness cannot go on. */
static inline tok *fuzz_tok_gguf(const char *who, const char *path) {
    if (!path) return NULL;
    st_err err = {0};
    gguf_ctx *g = gguf_open(path, &err);
    tok *t = g ? tok_from_gguf(g, &err) : NULL;
    gguf_close(g);
    if (!t) {
        fprintf(stderr, "%s: %s: %s\n", who, path, err.msg);
        abort();
    }
    return t;
}

/* True when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF). */
static inline bool fuzz_utf8_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
        if (k == 0 || n - i < k) return false;
        uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
        uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        for (size_t j = 1; j < k; j++, lo = 0x80, hi = 0xBF)
            if (s[i + j] < lo || s[i + j] > hi) return false;
        i += k;
    }
    return true;
}

/* Decodes ids through the stream with a 1-byte buffer first (the "does not fit" path),
 * then the size it asked for; returns the bytes produced and frees nothing of its own. */
static inline size_t fuzz_tok_stream(const tok *t, const int32_t *ids, int32_t n) {
    tok_stream st;
    tok_stream_init(&st);
    size_t total = 0;
    for (int32_t i = 0; i <= n; i++) {
        char small[1];
        size_t need = i < n ? tok_stream_put(t, &st, ids[i], small, 1)
                            : tok_stream_flush(t, &st, small, 1);
        if (need == 0) continue;
        char *buf = malloc(need + 1);
        if (!buf) abort();
        size_t got = i < n ? tok_stream_put(t, &st, ids[i], buf, need + 1)
                           : tok_stream_flush(t, &st, buf, need + 1);
        FUZZ_ASSERT(got == need);
        free(buf);
        total += got;
    }
    return total;
}

/* data[0]: flags (bit 0 add_bos, bit 1 parse_special); the rest: the text. lossless:
 * the tokenizer spells every byte (byte tokens or a byte-level vocabulary). */
static inline void fuzz_tok_check(const tok *t, const uint8_t *data, size_t size, bool lossless) {
    if (size < 1 || size > FUZZ_TOK_MAX_TEXT + 1) return;
    bool bos = data[0] & 1, special = data[0] & 2;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t n = tok_encode(t, text, len, bos, special, NULL, 0);
    FUZZ_ASSERT(n >= 0);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!ids) abort();
    FUZZ_ASSERT(tok_encode(t, text, len, bos, special, ids, n) == n);
    for (int32_t i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tok_n_vocab(t));
    size_t need = tok_decode(t, ids, n, NULL, 0);
    char *back = malloc(need + 1);
    if (!back) abort();
    FUZZ_ASSERT(tok_decode(t, ids, n, back, need + 1) == need);
    FUZZ_ASSERT(fuzz_tok_stream(t, ids, n) == need);
    /* SentencePiece reads U+2581 in the text as the space it stands for */
    bool mark = !strcmp(tok_model_name(t), "llama") && memmem(text, len, "\xe2\x96\x81", 3);
    if (lossless && !special && !mark && fuzz_utf8_valid((const uint8_t *)text, len))
        FUZZ_ASSERT(need == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);

    /* the text as token ids: mostly out of range, which must decode to nothing */
    int32_t m = (int32_t)(len / 4);
    int32_t *raw = malloc(sizeof(int32_t) * (size_t)(m + 1));
    if (!raw) abort();
    memcpy(raw, text, sizeof(int32_t) * (size_t)m);
    for (int32_t i = 0; i < m; i++) {
        if (i % 2) raw[i] = (int32_t)((uint32_t)raw[i] % (uint32_t)tok_n_vocab(t));
        (void)tok_piece(t, raw[i]);
        (void)tok_type(t, raw[i]);
        (void)tok_is_eog(t, raw[i]);
    }
    char *s = tok_decode_str(t, raw, m);
    FUZZ_ASSERT(s != NULL);
    free(s);
    FUZZ_ASSERT(fuzz_tok_stream(t, raw, m) == tok_decode(t, raw, m, NULL, 0));
    free(raw);
}

#endif
