/* tok_bpe.c - BPE by merge ranks: the GGUF tokenizer models "gpt2" (byte-level: GPT-2,
 * Llama 3, Qwen 2, SmolLM) and "gemma4". Byte-level: each byte of the text is spelled by
 * one printable character (GPT-2's byte-to-unicode table, so the vocabulary needs no byte
 * fallback), the text is cut into words by the pre-tokenizer (tok_pretok.c), and within
 * each word the adjacent pair with the lowest merge rank (tokenizer.ggml.merges order) is
 * merged, again and again, leftmost first on ties, until no listed pair is left - what
 * Hugging Face's BPE model and llama.cpp's llm_tokenizer_bpe do. "gemma4" (raw) runs the
 * same merges over the text's UTF-8 characters as they are, spaces spelled U+2581, words
 * being runs of newlines and runs of the rest; a run of newlines that is a piece is taken
 * whole, and a character no piece spells becomes its <0xXX> byte tokens (llama.cpp's
 * LLAMA_VOCAB_PRE_TYPE_GEMMA4 in src/llama-vocab.cpp). Merges are kept as a hash from
 * (left id, right id) to (rank, merged id), so BPE works on token ids, never on strings.
 * Special tokens are split out before this (tok_spm.c, shared by every model) and
 * decoding is in tok.c. */
#include "tok/tok_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tok_bpe {
    int pre;                 /* TOK_PRE_* */
    bool raw;                /* gemma4: characters as they are, spaces as U+2581 */
    int32_t hex_byte[256];   /* raw: the <0xXX> token of byte b, -1 when none */
    bool ignore_merges;      /* a word that is a piece is taken whole (llama3) */
    int32_t byte_id[256];    /* token spelling byte b (its one character), -1 when none */
    uint64_t *key;           /* (mask + 1) merge pair: left id << 32 | right id; ~0 = empty */
    int32_t *rank;           /* (mask + 1) the merge's rank */
    int32_t *res;            /* (mask + 1) the merged token */
    uint32_t mask;
};

/* ---- GPT-2's byte-to-unicode table ---- */

/* Bytes that are printable Latin-1 stand for themselves; the other 68 (controls, space,
 * DEL..NBSP, soft hyphen) take U+0100 onwards, in byte order. */
static uint32_t bpe_byte_cp(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return (uint32_t)b;
    if (b <= 0x20) return 0x100 + (uint32_t)b;
    if (b <= 0xA0) return 0x100 + 33 + (uint32_t)(b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

static int bpe_cp_byte(uint32_t c) {
    if (c <= 0xFF) return bpe_byte_cp((int)c) == c ? (int)c : -1;
    if (c < 0x100 + 33) return (int)(c - 0x100);
    if (c < 0x100 + 67) return (int)(c - 0x100 - 33 + 0x7F);
    return c == 0x100 + 67 ? 0xAD : -1;
}

/* UTF-8 of a code point below U+0800 (all the table uses); returns the length. */
static size_t bpe_utf8(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = (char)(0xC0 | c >> 6);
    out[1] = (char)(0x80 | (c & 0x3F));
    return 2;
}

int tok_bpe_char_byte(const char *p, size_t n, size_t *used) {
    uint8_t c = (uint8_t)p[0];
    *used = 1;
    if (c < 0x80) return bpe_cp_byte(c);
    /* The table's characters are all below U+0800: two-byte forms. Longer characters
     * stand for no byte; report their length so they pass through whole. */
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > n) return -1;
    for (size_t i = 1; i < len; i++)
        if (((uint8_t)p[i] & 0xC0) != 0x80) return -1;
    *used = len;
    if (len != 2) return -1;
    return bpe_cp_byte((uint32_t)(c & 0x1F) << 6 | ((uint8_t)p[1] & 0x3F));
}

/* ---- the merge table ---- */

static uint32_t bpe_slot(const struct tok_bpe *b, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull; /* Fibonacci hashing of the id pair */
    return (uint32_t)(h >> 32) & b->mask;
}

/* Rank and result of merging tokens l and r; false when no merge joins them. */
static bool bpe_merge_find(const struct tok_bpe *b, int32_t l, int32_t r, int32_t *rank,
                           int32_t *res) {
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint32_t i = bpe_slot(b, key);; i = (i + 1) & b->mask) {
        if (b->key[i] == ~0ull) return false;
        if (b->key[i] == key) {
            *rank = b->rank[i];
            *res = b->res[i];
            return true;
        }
    }
}

void tok_bpe_free(struct tok_bpe *b) {
    if (!b) return;
    free(b->key);
    free(b->rank);
    free(b->res);
    free(b);
}

bool tok_bpe_raw(const tok *t) { return t->bpe && t->bpe->raw; }

st_code tok_bpe_init(tok *t, const tok_vocab_desc *d, st_err *err) {
    const bool raw = d->model && strcmp(d->model, "gemma4") == 0;
    int pre = raw ? TOK_PRE_LINES : tok_pre_kind(d->pre);
    if (pre < 0)
        return st_set(err, ST_ERR_UNSUPPORTED,
                      "tokenizer pre-tokenizer '%.64s' is not supported (known: default, gpt2, "
                      "llama3, llama-bpe, qwen2, qwen35, smollm and aliases)", d->pre);
    if (d->n_merges < 0 || (d->n_merges > 0 && !d->merges))
        return st_set(err, ST_ERR_ARG, "tokenizer: gpt2 model without its merges");
    struct tok_bpe *b = calloc(1, sizeof *b);
    if (!b) return st_set(err, ST_ERR_NOMEM, "tokenizer: out of memory for the merges");
    b->pre = pre;
    b->raw = raw;
    b->ignore_merges = pre == TOK_PRE_LLAMA3;
    uint32_t cap = 16;
    while (cap < 2u * (uint32_t)d->n_merges) cap <<= 1;
    b->mask = cap - 1;
    b->key = malloc(sizeof(uint64_t) * cap);
    b->rank = malloc(sizeof(int32_t) * cap);
    b->res = malloc(sizeof(int32_t) * cap);
    size_t maxlen = 0;
    for (int32_t i = 0; i < d->n_merges; i++) {
        size_t n = d->merge_lens ? d->merge_lens[i] : strlen(d->merges[i]);
        if (n > maxlen) maxlen = n;
    }
    char *cat = malloc(maxlen + 1);
    if (!b->key || !b->rank || !b->res || !cat) {
        free(cat);
        tok_bpe_free(b);
        return st_set(err, ST_ERR_NOMEM, "tokenizer: out of memory for %d merges",
                      (int)d->n_merges);
    }
    memset(b->key, 0xff, sizeof(uint64_t) * cap);

    for (int32_t i = 0; i < d->n_merges; i++) {
        const char *m = d->merges[i];
        size_t n = d->merge_lens ? d->merge_lens[i] : strlen(m);
        /* The separator is the first space after the first byte (as llama.cpp splits),
         * spaces being spelled Ġ in byte-level vocabularies. */
        const char *sp = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp) continue;
        size_t nl = (size_t)(sp - m), nr = n - nl - 1;
        int32_t l = tok_lookup(t, m, nl), r = tok_lookup(t, sp + 1, nr);
        memcpy(cat, m, nl);
        memcpy(cat + nl, sp + 1, nr);
        int32_t res = tok_lookup(t, cat, nl + nr);
        if (l < 0 || r < 0 || res < 0) continue;
        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
        uint32_t s = bpe_slot(b, key);
        while (b->key[s] != ~0ull && b->key[s] != key) s = (s + 1) & b->mask;
        if (b->key[s] == key) continue; /* listed before: the lower rank stays */
        b->key[s] = key;
        b->rank[s] = i;
        b->res[s] = res;
    }
    free(cat);

    for (int c = 0; c < 256; c++) {
        char u[2], hex[8];
        b->byte_id[c] = tok_lookup(t, u, bpe_utf8(bpe_byte_cp(c), u));
        snprintf(hex, sizeof hex, "<0x%02X>", c);
        b->hex_byte[c] = tok_lookup(t, hex, 6);
    }
    t->bpe = b;
    t->add_space_prefix = false; /* byte-level BPE never adds one, nor strips one */
    return ST_OK;
}

/* ---- BPE over one word ---- */

typedef struct bpe_sym {
    int32_t id;              /* current token; -1 for a byte no token spells */
    int32_t at, len;         /* raw: the bytes of the word it spells */
    int32_t prev, next;      /* neighbours in the live chain, -1 at the ends */
    bool dead;               /* merged into its left neighbour */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank;
    int32_t left, right;     /* symbol indices */
    int32_t lid, rid;        /* their ids when queued, to spot stale entries */
} bpe_pair;

typedef struct bpe_work {
    bpe_sym *sym;            /* (word length) one per byte at first */
    bpe_pair *heap;          /* (3 * word length) n - 1 seeds + 2 per merge */
    size_t n_heap;
    int32_t *out;
    int64_t cap, *n;
} bpe_work;

static void bpe_emit(bpe_work *w, int32_t id) {
    if (*w->n < w->cap) w->out[*w->n] = id;
    (*w->n)++;
}

/* Lower rank first, then the leftmost pair. */
static bool bpe_before(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void bpe_heap_push(bpe_work *w, bpe_pair p) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!bpe_before(&p, &w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
}

static bpe_pair bpe_heap_pop(bpe_work *w) {
    bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bpe_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bpe_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static void bpe_try_pair(const struct tok_bpe *b, bpe_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    int32_t l = w->sym[left].id, r = w->sym[right].id, rank, res;
    if (l < 0 || r < 0 || !bpe_merge_find(b, l, r, &rank, &res)) return;
    bpe_heap_push(w, (bpe_pair){ rank, left, right, l, r });
}

/* The word's first symbols: one a byte (byte-level), or one a UTF-8 character (raw); the
 * count. */
static int32_t bpe_seed(const tok *t, bpe_work *w, const char *s, size_t n) {
    const struct tok_bpe *b = t->bpe;
    int32_t ns = 0;
    for (size_t i = 0, len; i < n; i += len, ns++) {
        uint32_t cp;
        len = b->raw ? tok_utf8_decode(s + i, n - i, &cp) : 1;
        if (len == 0) len = 1;
        int32_t id = b->raw ? tok_lookup(t, s + i, len) : b->byte_id[(uint8_t)s[i]];
        w->sym[ns] = (bpe_sym){ id, (int32_t)i, (int32_t)len, ns - 1, ns + 1, false };
    }
    if (ns > 0) w->sym[ns - 1].next = -1;
    return ns;
}

/* Emits symbol y: its token, or on raw vocabularies its bytes' <0xXX> tokens when no
 * piece spells it. */
static void bpe_emit_sym(const struct tok_bpe *b, bpe_work *w, const bpe_sym *y, const char *s) {
    if (y->id >= 0) {
        bpe_emit(w, y->id);
        return;
    }
    for (int32_t i = 0; b->raw && i < y->len; i++)
        if (b->hex_byte[(uint8_t)s[y->at + i]] >= 0) bpe_emit(w, b->hex_byte[(uint8_t)s[y->at + i]]);
}

/* A word taken whole when it is a piece: llama3's ignore_merges, and gemma4's runs of
 * newlines. */
static bool bpe_whole(const tok *t, bpe_work *w, const char *s, size_t n, char *spelled) {
    const struct tok_bpe *b = t->bpe;
    int32_t id = -1;
    if (b->raw && s[0] == '\n') {
        id = tok_lookup(t, s, n);
    } else if (b->ignore_merges) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += bpe_utf8(bpe_byte_cp((uint8_t)s[i]), spelled + m);
        id = tok_lookup(t, spelled, m);
    }
    if (id >= 0) bpe_emit(w, id);
    return id >= 0;
}

static void bpe_word(const tok *t, bpe_work *w, const char *s, size_t n, char *spelled) {
    const struct tok_bpe *b = t->bpe;
    if (bpe_whole(t, w, s, n, spelled)) return;
    int32_t ns = bpe_seed(t, w, s, n);
    w->n_heap = 0;
    for (int32_t i = 1; i < ns; i++) bpe_try_pair(b, w, i - 1, i);
    while (w->n_heap > 0) {
        bpe_pair p = bpe_heap_pop(w);
        bpe_sym *l = &w->sym[p.left], *r = &w->sym[p.right];
        if (l->dead || r->dead || l->next != p.right || l->id != p.lid || r->id != p.rid)
            continue; /* stale: one side has merged since */
        int32_t rank, res;
        bpe_merge_find(b, l->id, r->id, &rank, &res);
        l->id = res;
        l->len += r->len;
        r->dead = true;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = p.left;
        bpe_try_pair(b, w, l->prev, p.left);
        bpe_try_pair(b, w, p.left, l->next);
    }
    /* A byte the vocabulary cannot spell is dropped, as Hugging Face's BPE does without
     * an unk token: byte-level vocabularies name as unk a control token such as
     * <|endoftext|>, which would end the text for the model. (SmolLM2 lacks a few
     * control characters and bytes that never occur in UTF-8.) */
    for (int32_t i = 0; i != -1; i = w->sym[i].next) bpe_emit_sym(b, w, &w->sym[i], s);
}

/* Text with every space spelled U+2581, into a new buffer (*n in: bytes, out: the new
 * length); NULL when out of memory. */
static char *bpe_escape(const char *s, size_t *n) {
    size_t m = *n;
    for (size_t i = 0; i < *n; i++) m += s[i] == ' ' ? 2 : 0;
    char *e = malloc(m + 1);
    if (!e) return NULL;
    for (size_t i = 0, j = 0; i < *n; i++) {
        if (s[i] == ' ') memcpy(e + j, TOK_SPACE_MARK, 3), j += 3;
        else e[j++] = s[i];
    }
    *n = m;
    return e;
}

/* BPE over the words of s[0..len) (already escaped when raw). */
static bool tok_bpe_words(const tok *t, const char *s, size_t len, int32_t *out, int64_t cap,
                          int64_t *n) {
    tok_pre p;
    size_t off, wn, longest = 0;
    tok_pre_init(&p, t->bpe->pre, s, len);
    while (tok_pre_next(&p, &off, &wn))
        if (wn > longest) longest = wn;
    if (longest == 0) return true;
    if (longest > (size_t)INT32_MAX / 4) return false;
    bpe_work w = { malloc(longest * sizeof(bpe_sym)), malloc(3 * longest * sizeof(bpe_pair)),
                   0, out, cap, n };
    char *spelled = malloc(2 * longest);
    bool ok = w.sym && w.heap && spelled;
    tok_pre_init(&p, t->bpe->pre, s, len);
    while (ok && tok_pre_next(&p, &off, &wn)) bpe_word(t, &w, s + off, wn, spelled);
    free(w.sym);
    free(w.heap);
    free(spelled);
    return ok;
}


bool tok_bpe_fragment(const tok *t, const char *s, size_t len, int32_t *out, int64_t cap,
                      int64_t *n) {
    if (t->bpe->raw) {
        char *e = bpe_escape(s, &len);
        bool ok = e && tok_bpe_words(t, e, len, out, cap, n);
        free(e);
        return ok;
    }
    return tok_bpe_words(t, s, len, out, cap, n);
}
