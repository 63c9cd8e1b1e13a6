/* tok.c - the tokenizer's vocabulary and decoder: building a tok from a GGUF file's
 * tokenizer.ggml.* metadata or from plain arrays, the piece -> id hash map, accessors,
 * and the streaming detokenizer (piece text, byte tokens, UTF-8 reassembly). Encoding
 * (SentencePiece BPE) lives in tok_spm.c. This file does not know about models or
 * sampling; it only maps between text and token ids. */
#include "tok_impl.h"

#include <stdlib.h>
#include <string.h>

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's stand-in for a space. */
#define TOK_SPACE_MARK "\xE2\x96\x81"

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
static const tok *tok_sort_ctx_unused; /* qsort has no context argument; see tok_sort */
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
    if (strcmp(model, "llama") != 0) {
        if (strcmp(model, "gpt2") == 0)
            st_set(err, ST_ERR_UNSUPPORTED,
                   "tokenizer model 'gpt2' (byte-level BPE) is not supported yet");
        else
            st_set(err, ST_ERR_UNSUPPORTED,
                   "tokenizer model '%.64s' is not supported (only 'llama', SentencePiece BPE)",
                   model);
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
    if (tok_build_special(t) != ST_OK) goto nomem;
    return t;

nomem:
    tok_free(t);
    st_set(err, ST_ERR_NOMEM, "tokenizer: out of memory for %d tokens", (int)nv);
    return NULL;
}
