/* lookahead.c - the Jacobi window of lookahead decoding as a forest subtree
 * (lookahead.h): packing, reading the outputs, harvesting n-grams, moving the window. */
#include "spec/lookahead.h"

#include <stdlib.h>
#include <string.h>

#include "forest/sample.h"

struct lookahead {
    int32_t w, n_lev;   /* columns, levels (N - 1) */
    int32_t iters;      /* updates so far */
    uint64_t rng;
    int32_t *guess;     /* (n_lev, w) */
    int32_t *next;      /* (n_lev, w) scratch for the move */
    int32_t *outp;      /* (n_lev, w) greedy outputs of the last step */
    forest_id *fid;     /* (n_lev, w) packed nodes; [0] is the tip */
    int32_t *gram;      /* (n_lev + 1) */
};

static uint64_t la_rand(lookahead *la) { /* splitmix64 */
    uint64_t z = (la->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int32_t la_draw(lookahead *la, const int32_t *hist, int32_t n_hist) {
    return n_hist > 0 ? hist[la_rand(la) % (uint64_t)n_hist] : 0;
}

#define LA_AT(a, l, i) ((a)[(size_t)(l) * (size_t)la->w + (size_t)(i)])

lookahead *lookahead_init(const lookahead_params *lp, const int32_t *hist, int32_t n_hist,
                          st_err *err) {
    if (lp->w < 1 || lp->n < 2 || lp->n > 16 || lp->w > 4096 || lp->w * lp->n > 4096) {
        st_set(err, ST_ERR_ARG, "lookahead: W = %d and N = %d (need W >= 1, 2 <= N <= 16, "
               "W * N <= 4096)", lp->w, lp->n);
        return NULL;
    }
    lookahead *la = calloc(1, sizeof *la);
    if (!la) goto nomem;
    la->w = lp->w;
    la->n_lev = lp->n - 1;
    la->rng = lp->seed;
    size_t cells = (size_t)la->w * (size_t)la->n_lev;
    la->guess = malloc(sizeof(int32_t) * cells);
    la->next = malloc(sizeof(int32_t) * cells);
    la->outp = malloc(sizeof(int32_t) * cells);
    la->fid = malloc(sizeof(forest_id) * cells);
    la->gram = malloc(sizeof(int32_t) * (size_t)(la->n_lev + 1));
    if (!la->guess || !la->next || !la->outp || !la->fid || !la->gram) goto nomem;
    for (size_t k = 0; k < cells; k++) {
        la->guess[k] = la_draw(la, hist, n_hist);
        la->fid[k] = FOREST_NONE;
    }
    if (n_hist > 0) la->guess[0] = hist[n_hist - 1];
    return la;
nomem:
    lookahead_free(la);
    st_set(err, ST_ERR_NOMEM, "out of memory for the lookahead window");
    return NULL;
}

void lookahead_free(lookahead *la) {
    if (!la) return;
    free(la->guess);
    free(la->next);
    free(la->outp);
    free(la->fid);
    free(la->gram);
    free(la);
}

int32_t lookahead_rows(const lookahead *la) { return la->w - 1 + la->w * (la->n_lev - 1); }

forest_id lookahead_node(const lookahead *la, int32_t level, int32_t col) {
    if (level < 0 || level >= la->n_lev || col < 0 || col >= la->w || (level == 0 && col == 0))
        return FOREST_NONE;
    return LA_AT(la->fid, level, col);
}

int32_t lookahead_guess(const lookahead *la, int32_t level, int32_t col) {
    if (level < 0 || level >= la->n_lev || col < 0 || col >= la->w) return -1;
    return LA_AT(la->guess, level, col);
}

/* Prunes the packed window: the level-0 chain (with every column hanging under it) and
 * column 0's chain under the tip. */
void lookahead_cancel(lookahead *la, forest *f) {
    if (la->w > 1 && LA_AT(la->fid, 0, 1) != FOREST_NONE) forest_prune(f, LA_AT(la->fid, 0, 1), NULL);
    if (la->n_lev > 1 && LA_AT(la->fid, 1, 0) != FOREST_NONE) forest_prune(f, LA_AT(la->fid, 1, 0), NULL);
    for (size_t k = 1; k < (size_t)la->w * (size_t)la->n_lev; k++) la->fid[k] = FOREST_NONE;
}

static st_code la_add(lookahead *la, forest *f, forest_id parent, int32_t l, int32_t i,
                      st_err *err) {
    forest_id id;
    st_code rc = forest_append(f, parent, &LA_AT(la->guess, l, i), NULL, 1, &id, err);
    if (rc) return rc;
    forest_set_flags(f, id, FOREST_WANT_LOGITS, FOREST_NO_LOGITS);
    LA_AT(la->fid, l, i) = id;
    return ST_OK;
}

st_code lookahead_pack(lookahead *la, forest *f, forest_id tip, st_err *err) {
    if (!forest_get(f, tip)) return st_set(err, ST_ERR_ARG, "lookahead: the tip node is stale");
    la->fid[0] = tip;
    forest_set_flags(f, tip, FOREST_WANT_LOGITS, FOREST_NO_LOGITS);
    st_code rc = ST_OK;
    for (int32_t i = 1; i < la->w && !rc; i++) rc = la_add(la, f, LA_AT(la->fid, 0, i - 1), 0, i, err);
    for (int32_t i = 0; i < la->w && !rc; i++)
        for (int32_t l = 1; l < la->n_lev && !rc; l++)
            rc = la_add(la, f, LA_AT(la->fid, l - 1, i), l, i, err);
    if (rc) lookahead_cancel(la, f);
    return rc;
}

st_code lookahead_update(lookahead *la, forest *f, const step_plan *p, forest_id tip,
                         ngram_pool *pool, int32_t advance, int32_t new_tip,
                         const int32_t *hist, int32_t n_hist, st_err *err) {
    const int32_t W = la->w, L = la->n_lev;
    la->fid[0] = tip;
    for (int32_t l = 0; l < L; l++)
        for (int32_t i = 0; i < W; i++) {
            LA_AT(la->outp, l, i) = step_argmax_of(p, LA_AT(la->fid, l, i));
        }
    lookahead_cancel(la, f);
    st_code rc = ST_OK;
    /* Harvest once every level holds real outputs (the initial guesses are history
     * tokens): column i read upwards, then the top level's output. */
    if (pool && pool->n == L + 1 && la->iters >= L - 1)
        for (int32_t i = 0; i < W && !rc; i++) {
            for (int32_t l = 0; l < L; l++) la->gram[l] = LA_AT(la->guess, l, i);
            la->gram[L] = LA_AT(la->outp, L - 1, i);
            if (la->gram[L] >= 0) rc = ngram_pool_add(pool, la->gram, err);
        }
    /* Move: new (l, i) guesses position P' + i + l with P' = P + advance, i.e. the old
     * (l + 1, i + advance - 1), or for the top level the old top's output there. */
    int32_t sh = advance - 1;
    for (int32_t l = 0; l < L; l++)
        for (int32_t i = 0; i < W; i++) {
            int32_t j = i + sh, v = -1;
            if (j < W) v = l + 1 < L ? LA_AT(la->guess, l + 1, j) : LA_AT(la->outp, L - 1, j);
            LA_AT(la->next, l, i) = v >= 0 ? v : la_draw(la, hist, n_hist);
        }
    LA_AT(la->next, 0, 0) = new_tip;
    int32_t *t = la->guess;
    la->guess = la->next;
    la->next = t;
    la->iters++;
    return rc;
}

void lookahead_skip(lookahead *la, int32_t advance, int32_t new_tip, const int32_t *hist,
                    int32_t n_hist) {
    /* old (l, j) guesses P + j + l; new (l, i) guesses P + advance + i + l: j = i + advance */
    for (int32_t l = 0; l < la->n_lev; l++)
        for (int32_t i = 0; i < la->w; i++) {
            int32_t j = i + advance;
            LA_AT(la->next, l, i) = j < la->w ? LA_AT(la->guess, l, j) : la_draw(la, hist, n_hist);
        }
    LA_AT(la->next, 0, 0) = new_tip;
    int32_t *t = la->guess;
    la->guess = la->next;
    la->next = t;
}
