/* tok_spm.c - tok_encode: SentencePiece-style BPE as llama.cpp's llm_tokenizer_spm does
 * it. The text is first cut into fragments at special-token pieces (for both models; the
 * plain fragments of a "gpt2" model go to tok_bpe.c instead); each plain fragment
 * gets its spaces replaced by U+2581 (plus a leading one, the dummy prefix, where
 * SentencePiece would put it), is split into UTF-8 characters (each ill-formed byte a
 * symbol of its own), and then the adjacent pair whose concatenation is the
 * highest-scoring vocabulary piece is merged, again and again (a max-heap of candidate
 * pairs over a linked list of symbols: O(n log n)). Symbols left that are not pieces are
 * spelled with byte tokens. Decoding is in tok.c. */
#include "base/array.h"
#include "tok/tok_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- the BPE work area, sized once per call ---- */

typedef struct spm_sym {
    int32_t prev, next;   /* neighbours in the live chain, -1 at the ends */
    uint32_t start, n;    /* bytes [start, start + n) of the escaped text; n = 0 once merged */
} spm_sym;

typedef struct spm_pair {
    float score;          /* score of the merged piece */
    int32_t left, right;  /* symbol indices */
    uint32_t size;        /* bytes of the merge when queued, to spot stale entries */
} spm_pair;

typedef struct spm_work {
    char *buf;            /* (n_esc) escaped text of one fragment */
    spm_sym *sym;         /* (n_esc) symbols: at most one a byte of the escaped text */
    spm_pair *heap;       /* (3 * n_esc) candidate pairs: n - 1 seeds + 2 per merge */
    size_t n_heap;
} spm_work;

typedef struct spm_out {
    int32_t *ids;
    int64_t cap, n;       /* n counts every id, stored or not */
} spm_out;

static void spm_emit(spm_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* True when pair a should be merged before pair b: higher score, then leftmost. */
static bool spm_before(const spm_pair *a, const spm_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void spm_heap_push(spm_work *w, spm_pair p) {
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!spm_before(&p, &w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
}

static spm_pair spm_heap_pop(spm_work *w) {
    spm_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && spm_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!spm_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

/* Queues the merge of two neighbouring symbols when their concatenation is a piece. */
static void spm_try_pair(const tok *t, spm_work *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    uint32_t size = w->sym[left].n + w->sym[right].n;
    int32_t id = tok_lookup(t, w->buf + w->sym[left].start, size);
    if (id < 0) return;
    spm_heap_push(w, (spm_pair){ t->score[id], left, right, size });
}

/* BPE over bytes [at, end) of the escaped text in w->buf. */
static void spm_bpe(const tok *t, spm_work *w, size_t at, size_t end, spm_out *o) {
    int32_t ns = 0;
    for (; at < end; ns++) {
        /* An ill-formed byte is a symbol of its own, so it never swallows the bytes after
         * it (a space's U+2581 among them) and comes out as its byte token. */
        uint32_t cp, l = tok_utf8_decode(w->buf + at, end - at, &cp);
        if (l == 0) l = 1;
        w->sym[ns] = (spm_sym){ ns - 1, ns + 1, (uint32_t)at, l };
        at += l;
    }
    w->sym[ns - 1].next = -1;

    w->n_heap = 0;
    for (int32_t i = 1; i < ns; i++) spm_try_pair(t, w, i - 1, i);
    while (w->n_heap > 0) {
        spm_pair p = spm_heap_pop(w);
        spm_sym *l = &w->sym[p.left], *r = &w->sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = p.left;
        spm_try_pair(t, w, l->prev, p.left);
        spm_try_pair(t, w, p.left, l->next);
    }

    for (int32_t i = 0; i != -1; i = w->sym[i].next) {
        const spm_sym *y = &w->sym[i];
        int32_t id = tok_lookup(t, w->buf + y->start, y->n);
        if (id >= 0) {
            spm_emit(o, id);
            continue;
        }
        /* Only single characters can be left unmatched (merges always form pieces). */
        for (uint32_t j = 0; j < y->n; j++) {
            int32_t b = t->byte_tok[(uint8_t)w->buf[y->start + j]];
            if (b >= 0) spm_emit(o, b); /* no byte token and no unk: the byte is dropped */
        }
    }
}

/* Encodes one plain fragment of n > 0 bytes. */
static void spm_fragment(const tok *t, spm_work *w, const char *s, size_t n, bool prefix,
                         spm_out *o) {
    static const char mark[3] = { '\xE2', '\x96', '\x81' }; /* U+2581 */
    size_t m = 0;
    if (prefix) {
        memcpy(w->buf, mark, 3);
        m = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(w->buf + m, mark, 3);
            m += 3;
        } else {
            w->buf[m++] = s[i];
        }
    }

    /* A lone byte (see tok_impl.h) is a symbol no merge can touch, so the stretches
     * between lone bytes are independent: the result is the same as one BPE over all,
     * with far smaller heaps on long texts (newlines in the Llama vocabulary). */
    size_t start = 0;
    for (size_t i = 0; i < m; i++) {
        uint8_t c = (uint8_t)w->buf[i];
        if (c < 128 && t->lone[c]) {
            if (i > start) spm_bpe(t, w, start, i, o);
            spm_bpe(t, w, i, i + 1, o);
            start = i + 1;
        }
    }
    if (start < m) spm_bpe(t, w, start, m, o);
}

/* ---- special-token fragments ---- */

typedef struct spm_frag {
    size_t off, len;
    int32_t id;           /* the special token, or -1 for plain text */
} spm_frag;

typedef struct spm_frags {
    spm_frag *v;
    size_t n, cap;
} spm_frags;

static bool spm_frag_add(spm_frags *f, size_t off, size_t len, int32_t id) {
    if (!ARR_GROW(f->v, f->n + 1, f->cap)) return false;
    f->v[f->n++] = (spm_frag){ off, len, id };
    return true;
}

/* Cuts text into fragments as llama.cpp's tokenizer_st_partition does: each special
 * piece in turn, longest first, splits every plain fragment at all its (non-overlapping,
 * leftmost-first) occurrences. Returns false when memory runs out. */
static bool spm_partition(const tok *t, const char *text, size_t len, bool parse_special,
                          spm_frags *f) {
    spm_frags next = { 0 };
    f->n = 0;
    if (!spm_frag_add(f, 0, len, -1)) return false;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->type[id] != TOK_USER) continue;
        const char *p = t->text + t->off[id];
        size_t pl = t->len[id];
        next.n = 0;
        for (size_t i = 0; i < f->n; i++) {
            spm_frag fr = f->v[i];
            const char *hit = NULL;
            size_t pos = fr.off, end = fr.off + fr.len;
            if (fr.id < 0 && fr.len >= pl) hit = memmem(text + pos, end - pos, p, pl);
            if (!hit) {
                if (!spm_frag_add(&next, fr.off, fr.len, fr.id)) goto nomem;
                continue;
            }
            for (; hit; hit = memmem(text + pos, end - pos, p, pl)) {
                size_t h = (size_t)(hit - text);
                if (h > pos && !spm_frag_add(&next, pos, h - pos, -1)) goto nomem;
                if (!spm_frag_add(&next, h, pl, id)) goto nomem;
                pos = h + pl;
            }
            if (pos < end && !spm_frag_add(&next, pos, end - pos, -1)) goto nomem;
        }
        spm_frags tmp = *f;
        *f = next;
        next = tmp;
    }
    free(next.v);
    return true;
nomem:
    free(next.v);
    return false;
}

/* ---- tok_encode ---- */

int32_t *tok_encode_alloc(const tok *t, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *n, st_err *err) {
    int32_t need = tok_encode(t, text, len, add_bos, parse_special, NULL, 0);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(need > 0 ? need : 1));
    if (!ids) {
        st_set(err, ST_ERR_NOMEM, "out of memory for %d tokens", need);
        return NULL;
    }
    *n = tok_encode(t, text, len, add_bos, parse_special, ids, need);
    return ids;
}

int32_t tok_encode(const tok *t, const char *text, size_t len, bool add_bos, bool parse_special,
                   int32_t *out, int32_t cap) {
    spm_out o = { out, cap > 0 ? cap : 0, 0 };
    if (add_bos && t->bos >= 0) spm_emit(&o, t->bos);
    if (len == 0) return (int32_t)o.n; /* no fragments, so no dummy prefix either */
    if (len > (size_t)INT32_MAX / 4) return -1;

    spm_work w = { 0 };
    spm_frags f = { 0 };
    int32_t ret = -1;
    if (!t->bpe) { /* byte-level BPE sizes its own work area per fragment */
        /* The escaped text: each space becomes 3 bytes, plus the dummy prefix. */
        size_t n_esc = len + 3;
        for (const char *p = text; (p = memchr(p, ' ', len - (size_t)(p - text))); p++)
            n_esc += 2;
        w.buf = malloc(n_esc);
        w.sym = malloc(n_esc * sizeof *w.sym);
        w.heap = malloc(3 * n_esc * sizeof *w.heap);
        if (!w.buf || !w.sym || !w.heap) goto done;
    }
    if (!spm_partition(t, text, len, parse_special, &f)) goto done;

    bool after_special = true; /* the text start counts as one, for the dummy prefix */
    for (size_t i = 0; i < f.n; i++) {
        if (f.v[i].id >= 0) {
            spm_emit(&o, f.v[i].id);
            after_special = true;
        } else if (t->bpe) { /* byte-level BPE (tok_bpe.c) */
            if (!tok_bpe_fragment(t, text + f.v[i].off, f.v[i].len, o.ids, o.cap, &o.n))
                goto done;
        } else {
            spm_fragment(t, &w, text + f.v[i].off, f.v[i].len,
                         t->add_space_prefix && after_special, &o);
            after_special = false;
        }
    }
    ret = o.n > INT32_MAX ? -1 : (int32_t)o.n;
done:
    free(w.buf);
    free(w.sym);
    free(w.heap);
    free(f.v);
    return ret;
}
