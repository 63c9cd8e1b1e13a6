/* strategy_results.c - a finished run's results made branches of the forest
 * (strategy_settle, strategy.h): a view that shows the forest then shows what the
 * strategy returned, and nothing it dropped. Not here: scores (the caller keeps them
 * with the leaves this returns), drawing. */
#include <stdlib.h>

#include "strategy/grow.h" /* GROW_END_BUDGET */
#include "strategy/strategy.h"

/* The child of parent with token t (parent FOREST_NONE: none is searched), or FOREST_NONE. */
static forest_id child_with(const forest *f, forest_id parent, int32_t t) {
    const forest_node *nd = forest_get(f, parent);
    for (int32_t c = nd ? nd->first_child : -1; c >= 0; c = forest_node_at(f, c)->next_sibling)
        if (forest_node_at(f, c)->token == t) return forest_id_at(f, c);
    return FOREST_NONE;
}

/* Result r, kept as tokens, as a branch under its start: its leaf into *leaf. */
static st_code place_tokens(forest *f, const strategy_result *r, forest_id *leaf, st_err *err) {
    int32_t n = r->n_tokens - (r->end == STRAT_END_EOG && r->n_tokens > 0);
    forest_id at = r->start;
    int32_t i = 0;
    for (forest_id c; i < n && (c = child_with(f, at, r->tokens[i])) != FOREST_NONE; i++) at = c;
    st_code rc = i < n ? forest_append(f, at, r->tokens + i, NULL, n - i, &at, err) : ST_OK;
    if (rc) return rc;
    if (at != r->start) {
        forest_set_flags(f, at, FOREST_FINISHED, 0);
        if (r->end == STRAT_END_BUDGET) forest_set_tag(f, at, GROW_END_BUDGET);
    }
    *leaf = at;
    return ST_OK;
}

static bool among(forest_id id, const forest_id *ids, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

/* Prunes leaf and its ancestors that lead only to it, stopping below a start or a
 * result's leaf (keep, n_keep). */
static st_code prune_up(forest *f, forest_id leaf, const forest_id *keep, int32_t n_keep, const forest_id *starts,
                        int32_t n_starts, st_err *err) {
    for (;;) {
        const forest_node *nd = forest_get(f, leaf);
        if (!nd || nd->parent < 0) break;
        forest_id up = forest_id_at(f, nd->parent);
        if (among(up, starts, n_starts) || among(up, keep, n_keep) || forest_n_children(f, up) != 1) break;
        leaf = up;
    }
    return forest_get(f, leaf) ? forest_prune(f, leaf, err) : ST_OK;
}

/* Leaves a and b (distinct) spell the same tokens from a common ancestor of theirs up. */
static bool same_branch(const forest *f, int32_t a, int32_t b) {
    while (a != b) {
        if (a < 0 || b < 0) return false; /* other trees */
        const forest_node *x = forest_node_at(f, a), *y = forest_node_at(f, b);
        if (x->token != y->token) return false;
        a = x->parent, b = y->parent;
    }
    return true;
}

/* Result i's leaf (keep[i] of n) repeats another leaf token for token: an older branch,
 * or an earlier result's (a later result's is judged in its turn). */
static bool repeats(const forest *f, const forest_id *keep, int32_t i, int32_t n, const forest_id *lv,
                    int32_t n_lv) {
    const forest_node *r = forest_get(f, keep[i]);
    if (!r || r->first_child >= 0) return false;
    for (int32_t j = 0; j < n_lv; j++) {
        const forest_node *l = forest_get(f, lv[j]);
        if (lv[j] == keep[i] || !l || l->depth != r->depth || among(lv[j], keep + i + 1, n - i - 1)) continue;
        if (same_branch(f, forest_index(keep[i]), forest_index(lv[j]))) return true;
    }
    return false;
}

/* Prunes the results that repeat a branch (repeats), so that sampling the same text
 * twice leaves one branch. */
static st_code drop_repeats(forest *f, const forest_id *keep, const forest_id *starts, int32_t n, st_err *err) {
    int32_t n_lv = forest_leaves(f, NULL, 0);
    forest_id *lv = malloc(sizeof *lv * (size_t)(n_lv + 1));
    if (!lv) return st_set(err, ST_ERR_NOMEM, "out of memory placing the results");
    forest_leaves(f, lv, n_lv);
    st_code rc = ST_OK;
    for (int32_t i = 0; i < n && !rc; i++)
        if (repeats(f, keep, i, n, lv, n_lv)) rc = prune_up(f, keep[i], keep, n, starts, n, err);
    free(lv);
    return rc;
}

st_code strategy_settle(const strategy *s, forest *f, forest_id *leaves, st_err *err) {
    int32_t n = strategy_n_results(s), n_run = forest_n_live(f); /* running leaves are live nodes */
    forest_id *keep = malloc(sizeof *keep * (size_t)(2 * n + 1));
    forest_id *run = malloc(sizeof *run * (size_t)(n_run + 1));
    if (!keep || !run) {
        free(keep), free(run);
        return st_set(err, ST_ERR_NOMEM, "out of memory placing the results");
    }
    forest_id *starts = keep + n;
    n_run = strategy_running(s, run, n_run);
    st_code rc = ST_OK;
    for (int32_t i = 0; i < n && !rc; i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        keep[i] = r.leaf;
        starts[i] = r.start;
        if (r.leaf == FOREST_NONE && r.tokens && forest_get(f, r.start)) rc = place_tokens(f, &r, &keep[i], err);
    }
    for (int32_t i = 0; i < n_run && !rc; i++)
        if (!among(run[i], keep, n) && !among(run[i], starts, n)) rc = prune_up(f, run[i], keep, n, starts, n, err);
    if (!rc) rc = drop_repeats(f, keep, starts, n, err);
    for (int32_t i = 0; leaves && i < n; i++) leaves[i] = forest_get(f, keep[i]) ? keep[i] : FOREST_NONE;
    free(keep), free(run);
    return rc;
}
