/* ngram.h - where drafts come from: an n-gram pool and prompt lookup.
 *
 * A draft is a guess of the next few tokens; the forest verifies it exactly (spec.h), so a
 * bad guess costs rows, never correctness. Two sources live here:
 *
 * - ngram_pool: n-grams keyed by their first token, each key keeping its most recently
 *   added continuations (n - 1 tokens each, no duplicates). Lookahead decoding fills it
 *   from its Jacobi trajectory, and the speculative driver from the text generated so
 *   far; a draft is a continuation whose key is the last token.
 * - ngram_lookup ("prompt lookup"): the last g tokens of the history searched for
 *   earlier in the history itself (prompt and generation), longest key first, most recent
 *   match first; what followed each match is a draft. Summaries and code edits copy long
 *   runs of their input, so this is where drafts pay most.
 *
 * Not here: verifying drafts (spec.h), the lookahead window (lookahead.h). */
#ifndef MD_NGRAM_H
#define MD_NGRAM_H

#include <stdint.h>

#include "base/status.h"

typedef struct ngram_pool {
    int32_t n;        /* n-gram size: the key and n - 1 continuation tokens */
    int32_t per_key;  /* continuations kept per key, most recent first */
    int32_t cap_keys; /* hash table size (a power of two) */
    int32_t n_keys;
    int32_t *keys;    /* (cap_keys) key token, -1 for an empty bucket */
    int32_t *count;   /* (cap_keys) continuations stored for the key */
    int32_t *cont;    /* (cap_keys, per_key, n - 1) */
} ngram_pool;

/* An empty pool of n-grams of size n >= 2, keeping per_key >= 1 continuations per key.
 * ST_ERR_ARG, ST_ERR_NOMEM. */
st_code ngram_pool_init(ngram_pool *p, int32_t n, int32_t per_key, st_err *err);
void ngram_pool_free(ngram_pool *p); /* a zeroed or freed pool is a no-op */
/* Adds gram[0..n): its continuation moves to the front of its key's list (added or
 * refreshed); the oldest drops out when the list is full. ST_ERR_NOMEM (pool unchanged). */
st_code ngram_pool_add(ngram_pool *p, const int32_t *gram, st_err *err);
/* Adds every n-gram of toks[0..n_toks) that ends at index >= from (so a growing history
 * can be fed incrementally). ST_ERR_NOMEM. */
st_code ngram_pool_add_all(ngram_pool *p, const int32_t *toks, int32_t n_toks, int32_t from,
                           st_err *err);
/* How many continuations key has; ngram_pool_get(p, key, i) is the i-th (most recent
 * first, n - 1 tokens, valid until the next add), NULL past the end. */
int32_t ngram_pool_count(const ngram_pool *p, int32_t key);
const int32_t *ngram_pool_get(const ngram_pool *p, int32_t key, int32_t i);

/* Prompt lookup over hist[0..n): for key lengths g = max_key down to min_key, each
 * earlier occurrence of hist[n-g..n) (most recent first) proposes the up to len tokens
 * that followed it. Up to max_cand distinct proposals are written to out (row c at
 * out + c * len, lens[c] tokens, keys[c] the key length that found it when keys is not
 * NULL; a proposal that is a prefix of an earlier one is skipped). Returns the number
 * written. */
int32_t ngram_lookup(const int32_t *hist, int32_t n, int32_t min_key, int32_t max_key,
                     int32_t len, int32_t max_cand, int32_t *out, int32_t *lens, int32_t *keys);

#endif
