/* tok.c - the tokenizer's vocabulary and decoder: building a tok from a GGUF file's
 * tokenizer.ggml.* metadata or from plain arrays, the piece -> id hash map, accessors,
 * and the streaming detokenizer (piece text, byte tokens, UTF-8 reassembly). Encoding
 * lives in tok_spm.c (SentencePiece BPE, and the special-token split both models share)
 * and tok_bpe.c (byte-level BPE, model "gpt2"). This file does not know about models or
 * sampling; it only maps between text and token ids. */
#include "tok/tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- hash map: piece -> id ---- */

static uint64_t tok_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a: short keys, good spread, no tables */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

int32_t tok_lookup(const tok *t, const char *s, size_t n) {
    for (uint32_t i = (uint32_t)tok_hash(s, n) & t->map_mask;; i = (i + 1) & t->map_mask) {
        int32_t id = t->map[i];
        if (id < 0) return -1;
        if (t->len[id] == n && memcmp(t->text + t->off[id], s, n) == 0) return id;
    }
}

/* Inserts id; a piece already present is taken over by the later id. The table is at
 * least twice the vocabulary, so probing always finds an empty slot. */
static void tok_map_put(tok *t, int32_t id) {
    const char *s = t->text + t->off[id];
    uint32_t n = t->len[id];
    for (uint32_t i = (uint32_t)tok_hash(s, n) & t->map_mask;; i = (i + 1) & t->map_mask) {
        int32_t old = t->map[i];
        if (old < 0 || (t->len[old] == n && memcmp(t->text + t->off[old], s, n) == 0)) {
            t->map[i] = id;
            return;
        }
    }
}

/* ---- construction ---- */

tok_vocab_desc tok_vocab_desc_default(void) {
    return (tok_vocab_desc){ .bos = -1, .eos = -1, .unk = -1, .eot = -1, .add_bos = true,
                             .add_space_prefix = true };
}

void tok_free(tok *t) {
    if (!t) return;
    free(t->text);
    free(t->off);
    free(t->len);
    free(t->score);
    free(t->type);
    free(t->byte_val);
    free(t->map);
    free(t->special);
    tok_bpe_free(t->bpe);
    free(t);
}

/* 0..255 for a piece of the form <0xXX> (either hex case), else -1. */
static int tok_parse_byte_piece(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Special pieces are tried longest first (then by id, for a stable order). */
static int tok_special_cmp(const void *a, const void *b) {
    const uint32_t *la = a, *lb = b; /* pairs (len, id) packed as two uint32 */
    if (la[0] != lb[0]) return la[0] > lb[0] ? -1 : 1;
    return la[1] < lb[1] ? -1 : la[1] > lb[1];
}

static st_code tok_build_special(tok *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int32_t ty = t->type[i];
        if ((ty == TOK_CONTROL || ty == TOK_USER || ty == TOK_UNKNOWN) && t->len[i] > 0) n++;
    }
    t->n_special = n;
    if (n == 0) return ST_OK;
    uint32_t *pairs = malloc(sizeof(uint32_t) * 2 * (size_t)n);
    t->special = malloc(sizeof(int32_t) * (size_t)n);
    if (!pairs || !t->special) {
        free(pairs);
        return ST_ERR_NOMEM;
    }
    n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int32_t ty = t->type[i];
        if ((ty == TOK_CONTROL || ty == TOK_USER || ty == TOK_UNKNOWN) && t->len[i] > 0) {
            pairs[2 * n] = t->len[i];
            pairs[2 * n + 1] = (uint32_t)i;
            n++;
        }
    }
    qsort(pairs, (size_t)n, 2 * sizeof(uint32_t), tok_special_cmp);
    for (int32_t i = 0; i < n; i++) t->special[i] = (int32_t)pairs[2 * i + 1];
    free(pairs);
    return ST_OK;
}

static bool tok_id_ok(int32_t id, int32_t n) { return id >= -1 && id < n; }

tok *tok_from_vocab(const tok_vocab_desc *d, st_err *err) {
    const char *model = d->model ? d->model : "llama";
    bool bpe = strcmp(model, "gpt2") == 0 || strcmp(model, "gemma4") == 0;
    if (!bpe && strcmp(model, "llama") != 0) {
        st_set(err, ST_ERR_UNSUPPORTED,
               "tokenizer model '%.64s' is not supported (only 'llama', SentencePiece BPE, "
               "'gpt2', byte-level BPE, and 'gemma4', BPE on UTF-8)", model);
        return NULL;
    }
    if (d->n_vocab <= 0 || d->n_vocab > (1 << 28) || !d->pieces) {
        st_set(err, ST_ERR_ARG, "tokenizer: bad vocabulary (%d tokens%s)", (int)d->n_vocab,
               d->pieces ? "" : ", no pieces");
        return NULL;
    }
    int32_t nv = d->n_vocab;
    const struct { const char *name; int32_t id; } ids[] = {
        { "bos", d->bos }, { "eos", d->eos }, { "unknown", d->unk }, { "eot", d->eot } };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (!tok_id_ok(ids[i].id, nv)) {
            st_set(err, ST_ERR_ARG, "tokenizer: %s token id %d is outside the vocabulary (%d)",
                   ids[i].name, (int)ids[i].id, (int)nv);
            return NULL;
        }
    }
    size_t total = 0;
    for (int32_t i = 0; i < nv; i++) {
        if (!d->pieces[i]) {
            st_set(err, ST_ERR_ARG, "tokenizer: token %d has no piece", (int)i);
            return NULL;
        }
        total += (d->piece_lens ? d->piece_lens[i] : strlen(d->pieces[i])) + 1;
        if (total > UINT32_MAX) {
            st_set(err, ST_ERR_ARG, "tokenizer: pieces exceed 4 GiB");
            return NULL;
        }
    }

    tok *t = calloc(1, sizeof *t);
    if (!t) goto nomem;
    snprintf(t->model, sizeof t->model, "%s", model);
    t->n_vocab = nv;
    uint32_t cap = 1;
    while (cap < 2u * (uint32_t)nv) cap <<= 1;
    t->map_mask = cap - 1;
    t->text = malloc(total);
    t->off = malloc(sizeof(uint32_t) * (size_t)nv);
    t->len = malloc(sizeof(uint32_t) * (size_t)nv);
    t->score = malloc(sizeof(float) * (size_t)nv);
    t->type = malloc(sizeof(int32_t) * (size_t)nv);
    t->byte_val = malloc(sizeof(int16_t) * (size_t)nv);
    t->map = malloc(sizeof(int32_t) * (size_t)cap);
    if (!t->text || !t->off || !t->len || !t->score || !t->type || !t->byte_val || !t->map)
        goto nomem;
    memset(t->map, 0xff, sizeof(int32_t) * (size_t)cap); /* all -1: empty */

    size_t pos = 0;
    for (int32_t i = 0; i < nv; i++) {
        size_t n = d->piece_lens ? d->piece_lens[i] : strlen(d->pieces[i]);
        memcpy(t->text + pos, d->pieces[i], n);
        t->text[pos + n] = '\0';
        t->off[i] = (uint32_t)pos;
        t->len[i] = (uint32_t)n;
        pos += n + 1;
        t->score[i] = d->scores ? d->scores[i] : 0.0f;
        t->type[i] = d->types ? d->types[i] : TOK_NORMAL;
        t->byte_val[i] = (int16_t)(t->type[i] == TOK_BYTE ? tok_parse_byte_piece(d->pieces[i], n)
                                                         : -1);
        tok_map_put(t, i);
    }
    t->bos = d->bos;
    t->eos = d->eos;
    t->unk = d->unk;
    t->eot = d->eot;
    t->add_bos = d->add_bos;
    t->add_space_prefix = d->add_space_prefix;

    /* Byte fallback as llama.cpp: the <0xXX> piece (upper-case hex), else the one-byte
     * piece, else unk. */
    for (int b = 0; b < 256; b++) {
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        char one = (char)b;
        int32_t id = tok_lookup(t, hex, 6);
        if (id < 0) id = tok_lookup(t, &one, 1);
        t->byte_tok[b] = id >= 0 ? id : t->unk;
    }
    for (int c = 0; c < 128; c++) t->lone[c] = true;
    for (int32_t i = 0; i < nv; i++)
        for (uint32_t j = 0; t->len[i] >= 2 && j < t->len[i]; j++) {
            uint8_t c = (uint8_t)t->text[t->off[i] + j];
            if (c < 128) t->lone[c] = false;
        }
    if (tok_build_special(t) != ST_OK) goto nomem;
    /* Chat models end a turn with these even when the file names another EOS/EOT. */
    static const char *const eog_text[TOK_N_EOG] = { "<|im_end|>", "<|endoftext|>", "<turn|>" };
    for (int i = 0; i < TOK_N_EOG; i++) {
        int32_t id = tok_lookup(t, eog_text[i], strlen(eog_text[i]));
        t->eog[i] = id >= 0 && (t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER) ? id : -1;
    }
    if (bpe && tok_bpe_init(t, d, err) != ST_OK) {
        tok_free(t);
        return NULL;
    }
    return t;

nomem:
    tok_free(t);
    st_set(err, ST_ERR_NOMEM, "tokenizer: out of memory for %d tokens", (int)nv);
    return NULL;
}

/* ---- from GGUF metadata ---- */

/* An optional token id key: absent gives dflt (when it lies in the vocabulary, else -1);
 * 0xFFFFFFFF and -1 mean "none", as converters write them. */
static st_code tok_gguf_id(const gguf_ctx *g, const char *key, int32_t dflt, int32_t nv,
                           int32_t *out, st_err *err) {
    st_err e;
    int64_t v;
    st_code rc = gguf_get_i64(g, key, &v, &e);
    if (rc == ST_ERR_NOT_FOUND) {
        *out = dflt < nv ? dflt : -1;
        return ST_OK;
    }
    if (rc != ST_OK) return st_set(err, ST_ERR_FORMAT, "%s", e.msg);
    if (v == -1 || v == 0xFFFFFFFFll) {
        *out = -1;
        return ST_OK;
    }
    if (v < 0 || v >= nv)
        return st_set(err, ST_ERR_FORMAT, "%s = %lld is outside the vocabulary (%d tokens)", key,
                      (long long)v, (int)nv);
    *out = (int32_t)v;
    return ST_OK;
}

static st_code tok_gguf_flag(const gguf_ctx *g, const char *key, bool *out, st_err *err) {
    st_err e;
    st_code rc = gguf_get_bool(g, key, out, &e);
    if (rc == ST_ERR_NOT_FOUND) return ST_OK; /* keep the default */
    if (rc != ST_OK) return st_set(err, ST_ERR_FORMAT, "%s", e.msg);
    return ST_OK;
}

/* Index of an optional array key of n numeric elements, -1 when absent; ST_ERR_FORMAT
 * when it is not such an array. */
static st_code tok_gguf_num_arr(const gguf_ctx *g, const char *key, uint64_t n, int64_t *idx,
                                st_err *err) {
    *idx = gguf_find_key(g, key);
    if (*idx < 0) return ST_OK;
    gguf_type at = gguf_arr_type(g, *idx);
    if (gguf_kv_type(g, *idx) != GGUF_ARRAY || at == GGUF_STRING || at == GGUF_ARRAY ||
        at >= GGUF_N_TYPES)
        return st_set(err, ST_ERR_FORMAT, "%s is not a numeric array", key);
    if (gguf_arr_n(g, *idx) != n)
        return st_set(err, ST_ERR_FORMAT, "%s has %llu entries but tokenizer.ggml.tokens has %llu",
                      key, (unsigned long long)gguf_arr_n(g, *idx), (unsigned long long)n);
    return ST_OK;
}

tok *tok_from_gguf(const gguf_ctx *g, st_err *err) {
    const char *model;
    st_err e;
    if (gguf_get_str(g, "tokenizer.ggml.model", &model, &e) != ST_OK) {
        st_set(err, e.code == ST_ERR_NOT_FOUND ? ST_ERR_NOT_FOUND : ST_ERR_FORMAT,
               "no tokenizer in this file: %s", e.msg);
        return NULL;
    }
    tok_vocab_desc d = tok_vocab_desc_default();
    d.model = model;
    const bool raw = strcmp(model, "gemma4") == 0;
    bool bpe = strcmp(model, "gpt2") == 0 || raw;
    if (!bpe && strcmp(model, "llama") != 0) return tok_from_vocab(&d, err); /* names it */
    if (bpe) d.add_bos = d.add_space_prefix = false;

    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || gguf_kv_type(g, ti) != GGUF_ARRAY || gguf_arr_type(g, ti) != GGUF_STRING) {
        st_set(err, ST_ERR_FORMAT, "tokenizer.ggml.tokens is %s",
               ti < 0 ? "missing" : "not a string array");
        return NULL;
    }
    uint64_t n = gguf_arr_n(g, ti);
    if (n == 0 || n > (1u << 28)) {
        st_set(err, ST_ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries",
               (unsigned long long)n);
        return NULL;
    }
    int32_t nv = (int32_t)n;
    int64_t si, yi, mi = -1;
    if (tok_gguf_num_arr(g, "tokenizer.ggml.scores", n, &si, err) != ST_OK ||
        tok_gguf_num_arr(g, "tokenizer.ggml.token_type", n, &yi, err) != ST_OK)
        return NULL;
    if (bpe) {
        mi = gguf_find_key(g, "tokenizer.ggml.merges");
        if (mi < 0 || gguf_kv_type(g, mi) != GGUF_ARRAY || gguf_arr_type(g, mi) != GGUF_STRING ||
            gguf_arr_n(g, mi) > INT32_MAX) {
            st_set(err, ST_ERR_FORMAT, "tokenizer.ggml.merges is %s",
                   mi < 0 ? "missing (a gpt2 tokenizer needs it)" : "not a string array");
            return NULL;
        }
        st_code rc = gguf_get_str(g, "tokenizer.ggml.pre", &d.pre, &e);
        if (rc != ST_OK && rc != ST_ERR_NOT_FOUND) {
            st_set(err, ST_ERR_FORMAT, "%s", e.msg);
            return NULL;
        }
    }
    /* llama.cpp's defaults for SentencePiece vocabularies when the ids are not given;
     * byte-level vocabularies have none. */
    if (tok_gguf_id(g, "tokenizer.ggml.bos_token_id", bpe ? -1 : 1, nv, &d.bos, err) != ST_OK ||
        tok_gguf_id(g, "tokenizer.ggml.eos_token_id", bpe ? -1 : 2, nv, &d.eos, err) != ST_OK ||
        tok_gguf_id(g, "tokenizer.ggml.unknown_token_id", bpe ? -1 : 0, nv, &d.unk, err) != ST_OK ||
        tok_gguf_id(g, "tokenizer.ggml.eot_token_id", -1, nv, &d.eot, err) != ST_OK ||
        tok_gguf_flag(g, "tokenizer.ggml.add_bos_token", &d.add_bos, err) != ST_OK ||
        tok_gguf_flag(g, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix, err) != ST_OK)
        return NULL;
    if (raw) d.add_bos = true; /* llama.cpp overrides a false add_bos_token for Gemma 4 */

    const char **pieces = malloc(sizeof(char *) * n);
    size_t *lens = malloc(sizeof(size_t) * n);
    float *scores = si >= 0 ? malloc(sizeof(float) * n) : NULL;
    int32_t *types = yi >= 0 ? malloc(sizeof(int32_t) * n) : NULL;
    uint64_t nm = mi >= 0 ? gguf_arr_n(g, mi) : 0;
    const char **merges = nm ? malloc(sizeof(char *) * nm) : NULL;
    size_t *merge_lens = nm ? malloc(sizeof(size_t) * nm) : NULL;
    tok *t = NULL;
    if (!pieces || !lens || (si >= 0 && !scores) || (yi >= 0 && !types) ||
        (nm && (!merges || !merge_lens))) {
        st_set(err, ST_ERR_NOMEM, "tokenizer: out of memory for %d tokens", (int)nv);
        goto done;
    }
    for (uint64_t j = 0; j < n; j++) {
        double f;
        int64_t ty;
        if (gguf_arr_str(g, ti, j, &pieces[j], &lens[j]) != ST_OK ||
            (scores && gguf_arr_f64(g, si, j, &f) != ST_OK) ||
            (types && (gguf_arr_i64(g, yi, j, &ty) != ST_OK || ty < INT32_MIN || ty > INT32_MAX))) {
            st_set(err, ST_ERR_FORMAT, "tokenizer arrays: bad entry %llu", (unsigned long long)j);
            goto done;
        }
        if (scores) scores[j] = (float)f;
        if (types) types[j] = (int32_t)ty;
    }
    for (uint64_t j = 0; j < nm; j++) {
        if (gguf_arr_str(g, mi, j, &merges[j], &merge_lens[j]) != ST_OK) {
            st_set(err, ST_ERR_FORMAT, "tokenizer.ggml.merges: bad entry %llu",
                   (unsigned long long)j);
            goto done;
        }
    }
    d.merges = merges;
    d.merge_lens = merge_lens;
    d.n_merges = (int32_t)nm;
    d.n_vocab = nv;
    d.pieces = pieces;
    d.piece_lens = lens;
    d.scores = scores;
    d.types = types;
    t = tok_from_vocab(&d, err);
    if (!t && err && err->code == ST_ERR_ARG) err->code = ST_ERR_FORMAT; /* a bad file */
done:
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    free(merges);
    free(merge_lens);
    return t;
}

/* ---- accessors ---- */

int32_t tok_n_vocab(const tok *t) { return t->n_vocab; }
int32_t tok_bos(const tok *t) { return t->bos; }
int32_t tok_eos(const tok *t) { return t->eos; }
bool tok_add_bos(const tok *t) { return t->add_bos; }
const char *tok_model_name(const tok *t) { return t->model; }

bool tok_is_eog(const tok *t, int32_t id) {
    bool eog = id >= 0 && (id == t->eos || id == t->eot);
    for (int i = 0; i < TOK_N_EOG; i++) eog |= id >= 0 && id == t->eog[i];
    return eog;
}

const char *tok_piece(const tok *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->text + t->off[id] : NULL;
}

int32_t tok_type(const tok *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->type[id] : -1;
}

/* ---- decoding ---- */

/* Output that counts every byte and stores the ones that fit in cap. */
typedef struct tok_sink {
    char *buf;
    size_t cap, n;
} tok_sink;

static void tok_sink_put(tok_sink *k, const char *s, size_t n) {
    if (k->n < k->cap) memcpy(k->buf + k->n, s, k->cap - k->n < n ? k->cap - k->n : n);
    k->n += n;
}

#define TOK_FFFD "\xEF\xBF\xBD" /* U+FFFD REPLACEMENT CHARACTER */

/* Bytes in the UTF-8 character that lead byte c starts; 0 when c cannot start one
 * (a continuation byte, C0/C1 overlong leads, F5..FF beyond U+10FFFF). */
static int tok_utf8_need(uint8_t c) {
    return c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
}

/* Feeds one byte through the UTF-8 assembler: whole characters go to k, the bytes of an
 * unfinished one wait in s->pend, and each maximal ill-formed subsequence becomes one
 * U+FFFD (the Unicode recommendation, which Python's "replace" also follows). */
static void tok_utf8_feed(tok_stream *s, uint8_t c, tok_sink *k) {
    for (;;) {
        if (s->n_pend == 0) {
            int need = tok_utf8_need(c);
            if (need == 1) tok_sink_put(k, (const char *)&c, 1);
            else if (need == 0) tok_sink_put(k, TOK_FFFD, 3);
            else s->pend[s->n_pend++] = c;
            return;
        }
        /* The second byte's range is narrower after E0/ED/F0/F4: that excludes overlong
         * forms, surrogates and code points past U+10FFFF. */
        uint8_t lead = s->pend[0], lo = 0x80, hi = 0xBF;
        if (s->n_pend == 1) {
            if (lead == 0xE0) lo = 0xA0;
            else if (lead == 0xED) hi = 0x9F;
            else if (lead == 0xF0) lo = 0x90;
            else if (lead == 0xF4) hi = 0x8F;
        }
        if (c >= lo && c <= hi) {
            s->pend[s->n_pend++] = c;
            if (s->n_pend == tok_utf8_need(lead)) {
                tok_sink_put(k, (const char *)s->pend, (size_t)s->n_pend);
                s->n_pend = 0;
            }
            return;
        }
        tok_sink_put(k, TOK_FFFD, 3); /* the unfinished character is lost; c starts afresh */
        s->n_pend = 0;
    }
}

static void tok_utf8_feed_str(tok_stream *s, const char *p, size_t n, tok_sink *k) {
    for (size_t i = 0; i < n; i++) tok_utf8_feed(s, (uint8_t)p[i], k);
}

/* The text of one token, through the assembler. Ids out of range leave s as it is. */
static void tok_emit(const tok *t, tok_stream *s, int32_t id, tok_sink *k) {
    if (id < 0 || id >= t->n_vocab) return;
    const char *p = t->text + t->off[id];
    size_t n = t->len[id];
    int32_t ty = t->type[id];
    if (ty == TOK_CONTROL || ty == TOK_UNUSED) {
        /* no text */
    } else if (ty == TOK_BYTE && t->byte_val[id] >= 0) {
        tok_utf8_feed(s, (uint8_t)t->byte_val[id], k);
    } else if (ty == TOK_USER || ty == TOK_BYTE) {
        tok_utf8_feed_str(s, p, n, k);
    } else if (ty == TOK_UNKNOWN) {
        tok_utf8_feed_str(s, " \xE2\x81\x87 ", 5, k);
    } else if (t->bpe && !tok_bpe_raw(t)) {
        /* NORMAL byte-level piece: each character stands for one byte. */
        for (size_t i = 0, used; i < n; i += used) {
            int b = tok_bpe_char_byte(p + i, n - i, &used);
            if (b >= 0) tok_utf8_feed(s, (uint8_t)b, k);
            else tok_utf8_feed_str(s, p + i, used, k);
        }
    } else {
        /* NORMAL (and unknown type values): U+2581 -> ' ', minus the dummy prefix at
         * stream start or after a special token, where encoding put one. */
        int32_t pty = s->prev < 0 ? TOK_CONTROL
                      : s->prev >= t->n_vocab ? TOK_NORMAL /* TOK_STREAM_MIDTEXT */
                      : t->type[s->prev];
        bool strip = t->add_space_prefix &&
                     (pty == TOK_CONTROL || pty == TOK_USER || pty == TOK_UNKNOWN);
        for (size_t i = 0; i < n;) {
            bool mark = n - i >= 3 && memcmp(p + i, TOK_SPACE_MARK, 3) == 0;
            uint8_t c = mark ? ' ' : (uint8_t)p[i];
            i += mark ? 3 : 1;
            if (!(strip && c == ' ')) tok_utf8_feed(s, c, k);
            strip = false;
        }
    }
    s->prev = id;
}

void tok_stream_init(tok_stream *s) {
    memset(s, 0, sizeof *s);
    s->prev = -1;
}

/* Runs step on a copy of s to size the text; only when it fits (with its NUL) runs it
 * for real, so a call that does not fit leaves s and out untouched. */
static size_t tok_stream_step(const tok *t, tok_stream *s, int32_t id, bool flush, char *out,
                              size_t cap) {
    tok_stream tmp = *s;
    tok_sink k = { NULL, 0, 0 };
    for (int pass = 0; pass < 2; pass++) {
        if (flush) {
            if (tmp.n_pend > 0) tok_sink_put(&k, TOK_FFFD, 3);
            tmp.n_pend = 0;
        } else {
            tok_emit(t, &tmp, id, &k);
        }
        if (pass == 1 || k.n >= cap) break;
        tmp = *s;
        k = (tok_sink){ out, cap, 0 };
    }
    if (k.n < cap) {
        *s = tmp;
        out[k.n] = '\0';
    }
    return k.n;
}

size_t tok_stream_put(const tok *t, tok_stream *s, int32_t id, char *out, size_t cap) {
    return tok_stream_step(t, s, id, false, out, cap);
}

size_t tok_stream_flush(const tok *t, tok_stream *s, char *out, size_t cap) {
    return tok_stream_step(t, s, -1, true, out, cap);
}

size_t tok_decode(const tok *t, const int32_t *ids, int32_t n, char *out, size_t cap) {
    tok_stream s;
    tok_stream_init(&s);
    tok_sink k = { out, cap ? cap - 1 : 0, 0 };
    for (int32_t i = 0; i < n; i++) tok_emit(t, &s, ids[i], &k);
    if (s.n_pend > 0) tok_sink_put(&k, TOK_FFFD, 3);
    if (cap) out[k.n < cap - 1 ? k.n : cap - 1] = '\0';
    return k.n;
}

char *tok_decode_str(const tok *t, const int32_t *ids, int32_t n) {
    const size_t need = tok_decode(t, ids, n, NULL, 0);
    char *s = malloc(need + 1);
    if (s) tok_decode(t, ids, n, s, need + 1);
    return s;
}
