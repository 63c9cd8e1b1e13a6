/* ngram.c - the n-gram pool (open-addressing table of keys, each with a most-recent-first
 * list of continuations) and prompt lookup (ngram.h). */
#include "spec/ngram.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint32_t ngram_hash(int32_t key) { return (uint32_t)key * 2654435761u; }

/* Bucket of key, or of the empty bucket where it would go. */
static int32_t ngram_bucket(const ngram_pool *p, int32_t key) {
    uint32_t mask = (uint32_t)p->cap_keys - 1;
    for (uint32_t b = ngram_hash(key) & mask;; b = (b + 1) & mask)
        if (p->keys[b] == key || p->keys[b] < 0) return (int32_t)b;
}

static bool ngram_alloc(ngram_pool *p, int32_t cap) {
    size_t w = (size_t)p->per_key * (size_t)(p->n - 1);
    p->keys = malloc(sizeof(int32_t) * (size_t)cap);
    p->count = calloc((size_t)cap, sizeof(int32_t));
    p->cont = malloc(sizeof(int32_t) * (size_t)cap * w);
    if (!p->keys || !p->count || !p->cont) return false;
    for (int32_t i = 0; i < cap; i++) p->keys[i] = -1;
    p->cap_keys = cap;
    p->n_keys = 0;
    return true;
}

st_code ngram_pool_init(ngram_pool *p, int32_t n, int32_t per_key, st_err *err) {
    memset(p, 0, sizeof *p);
    if (n < 2 || per_key < 1 || per_key > 1024 || n > 64)
        return st_set(err, ST_ERR_ARG, "n-gram pool: n = %d (2..64), per_key = %d (1..1024)", n,
                      per_key);
    p->n = n;
    p->per_key = per_key;
    if (!ngram_alloc(p, 64)) {
        ngram_pool_free(p);
        return st_set(err, ST_ERR_NOMEM, "out of memory for the n-gram pool");
    }
    return ST_OK;
}

void ngram_pool_free(ngram_pool *p) {
    if (!p) return;
    free(p->keys);
    free(p->count);
    free(p->cont);
    memset(p, 0, sizeof *p);
}

/* Doubles the table, rehashing every key with its list. */
static bool ngram_grow(ngram_pool *p) {
    ngram_pool old = *p;
    if (!ngram_alloc(p, old.cap_keys * 2)) {
        free(p->keys);
        free(p->count);
        free(p->cont);
        *p = old;
        return false;
    }
    size_t w = (size_t)p->per_key * (size_t)(p->n - 1);
    for (int32_t b = 0; b < old.cap_keys; b++) {
        if (old.keys[b] < 0) continue;
        int32_t nb = ngram_bucket(p, old.keys[b]);
        p->keys[nb] = old.keys[b];
        p->count[nb] = old.count[b];
        memcpy(p->cont + (size_t)nb * w, old.cont + (size_t)b * w, sizeof(int32_t) * w);
        p->n_keys++;
    }
    free(old.keys);
    free(old.count);
    free(old.cont);
    return true;
}

st_code ngram_pool_add(ngram_pool *p, const int32_t *gram, st_err *err) {
    if ((p->n_keys + 1) * 2 > p->cap_keys && !ngram_grow(p))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the n-gram pool");
    int32_t b = ngram_bucket(p, gram[0]);
    if (p->keys[b] < 0) {
        p->keys[b] = gram[0];
        p->count[b] = 0;
        p->n_keys++;
    }
    size_t m = (size_t)(p->n - 1);
    int32_t *list = p->cont + (size_t)b * (size_t)p->per_key * m;
    int32_t at = p->count[b]; /* where the continuation is now (count: not present) */
    for (int32_t i = 0; i < p->count[b]; i++)
        if (!memcmp(list + (size_t)i * m, gram + 1, sizeof(int32_t) * m)) {
            at = i;
            break;
        }
    if (at == p->count[b] && p->count[b] < p->per_key) p->count[b]++;
    if (at >= p->per_key) at = p->per_key - 1; /* full: the oldest is overwritten */
    memmove(list + m, list, sizeof(int32_t) * m * (size_t)at);
    memcpy(list, gram + 1, sizeof(int32_t) * m);
    return ST_OK;
}

st_code ngram_pool_add_all(ngram_pool *p, const int32_t *toks, int32_t n_toks, int32_t from,
                           st_err *err) {
    int32_t first_end = from > p->n - 1 ? from : p->n - 1;
    for (int32_t e = first_end; e < n_toks; e++) {
        st_code rc = ngram_pool_add(p, toks + e - (p->n - 1), err);
        if (rc) return rc;
    }
    return ST_OK;
}

int32_t ngram_pool_count(const ngram_pool *p, int32_t key) {
    if (!p->keys || key < 0) return 0;
    int32_t b = ngram_bucket(p, key);
    return p->keys[b] == key ? p->count[b] : 0;
}

const int32_t *ngram_pool_get(const ngram_pool *p, int32_t key, int32_t i) {
    if (i < 0 || i >= ngram_pool_count(p, key)) return NULL;
    int32_t b = ngram_bucket(p, key);
    size_t m = (size_t)(p->n - 1);
    return p->cont + ((size_t)b * (size_t)p->per_key + (size_t)i) * m;
}

/* Is a[0..na) a prefix of b[0..nb)? */
static bool ngram_is_prefix(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    return na <= nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na);
}

int32_t ngram_lookup(const int32_t *hist, int32_t n, int32_t min_key, int32_t max_key,
                     int32_t len, int32_t max_cand, int32_t *out, int32_t *lens, int32_t *keys) {
    int32_t nc = 0;
    if (min_key < 1) min_key = 1;
    if (len < 1) return 0;
    for (int32_t g = max_key; g >= min_key && nc < max_cand; g--) {
        if (g >= n) continue;
        const int32_t *key = hist + n - g;
        /* a match at i: hist[i..i+g) == key with at least one token after it */
        for (int32_t i = n - g - 1; i >= 0 && nc < max_cand; i--) {
            if (hist[i] != key[0] || memcmp(hist + i, key, sizeof(int32_t) * (size_t)g)) continue;
            const int32_t *c = hist + i + g;
            int32_t cl = n - (i + g) < len ? n - (i + g) : len;
            bool dup = false;
            for (int32_t k = 0; k < nc && !dup; k++)
                dup = ngram_is_prefix(c, cl, out + (size_t)k * len, lens[k]);
            if (dup) continue;
            memcpy(out + (size_t)nc * len, c, sizeof(int32_t) * (size_t)cl);
            if (keys) keys[nc] = g;
            lens[nc++] = cl;
        }
    }
    return nc;
}
