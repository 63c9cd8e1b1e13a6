/* scores.c - judge scores by node (scores.h). */
#include "scores.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ui_scores_init(ui_scores *s) { memset(s, 0, sizeof *s); }

void ui_scores_free(ui_scores *s) {
    free(s->v);
    free(s->gen);
    ui_scores_init(s);
}

/* Room for index idx; new entries unscored. */
static bool reserve(ui_scores *s, int32_t idx) {
    if (idx < s->cap) return true;
    int32_t cap = s->cap ? s->cap : 64;
    while (cap <= idx) cap *= 2;
    double *v = realloc(s->v, sizeof *v * (size_t)cap);
    if (v) s->v = v;
    uint32_t *g = v ? realloc(s->gen, sizeof *g * (size_t)cap) : NULL;
    if (!g) return false;
    s->gen = g;
    memset(g + s->cap, 0, sizeof *g * (size_t)(cap - s->cap));
    s->cap = cap;
    return true;
}

bool ui_scores_set(ui_scores *s, const forest *f, forest_id id, double v) {
    const forest_node *nd = forest_get(f, id);
    int32_t idx = forest_index(id);
    if (!nd || !reserve(s, idx)) return false;
    s->v[idx] = v;
    s->gen[idx] = nd->gen + 1;
    return true;
}

bool ui_scores_get(const ui_scores *s, const forest *f, forest_id id, double *v) {
    const forest_node *nd = forest_get(f, id);
    int32_t idx = forest_index(id);
    if (!nd || idx >= s->cap || s->gen[idx] != nd->gen + 1) return false;
    *v = s->v[idx];
    return true;
}

st_code ui_scores_take(ui_scores *s, const forest *f, const strategy *run, st_err *err) {
    int32_t cap = 64, n;
    forest_id *ids = NULL;
    double *v = NULL;
    for (;; cap *= 2) { /* until the strategy has fewer than cap to give */
        forest_id *ni = realloc(ids, sizeof *ids * (size_t)cap);
        if (ni) ids = ni;
        double *nv = ni ? realloc(v, sizeof *v * (size_t)cap) : NULL;
        if (nv) v = nv;
        if (!nv) {
            free(ids), free(v);
            return st_set(err, ST_ERR_NOMEM, "out of memory keeping the scores");
        }
        if ((n = strategy_scores(run, ids, v, cap)) < cap) break;
    }
    bool ok = true;
    for (int32_t i = 0; i < n; i++) ok &= ui_scores_set(s, f, ids[i], v[i]) || !forest_get(f, ids[i]);
    free(ids), free(v);
    return ok ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory keeping the scores");
}

st_code ui_scores_to_meta(const ui_scores *s, const forest *f, session_meta *m, st_err *err) {
    double v;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (ui_scores_get(s, f, forest_id_at(f, i), &v) && isfinite(v) &&
            session_meta_set_score(m, f, forest_id_at(f, i), v, err))
            return err->code;
    return ST_OK;
}

st_code ui_scores_from_meta(ui_scores *s, const forest *f, const session_meta *m, st_err *err) {
    ui_scores_free(s);
    double v;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (session_meta_get_score(m, f, forest_id_at(f, i), &v) && !ui_scores_set(s, f, forest_id_at(f, i), v))
            return st_set(err, ST_ERR_NOMEM, "out of memory keeping the scores");
    return ST_OK;
}

st_code ui_scores_keys(const ui_scores *s, const forest *f, ui_sort order, double **keys, int32_t *cap, st_err *err) {
    int32_t n = forest_capacity(f);
    if (n > *cap) {
        double *k = realloc(*keys, sizeof *k * (size_t)n);
        if (!k) return st_set(err, ST_ERR_NOMEM, "out of memory ordering the forest");
        *keys = k, *cap = n;
    }
    double *k = *keys;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        double v = -INFINITY;
        if (order == UI_SORT_PROB) v = isnan(nd->logprob) ? -INFINITY : nd->logprob;
        else ui_scores_get(s, f, forest_id_at(f, i), &v);
        k[i] = isnan(v) ? -INFINITY : v;
    }
    if (order != UI_SORT_SCORE) return ST_OK;
    /* the best below: children before parents, so each child's best is final when it is
     * folded into its parent (a preorder walk taken backwards) */
    int32_t m = 0, *pre = malloc(sizeof *pre * (size_t)(forest_n_live(f) + 1));
    if (!pre) return st_set(err, ST_ERR_NOMEM, "out of memory ordering the forest");
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) pre[m++] = i;
    while (m-- > 0) {
        int32_t p = forest_node_at(f, pre[m])->parent;
        if (p >= 0 && k[pre[m]] > k[p]) k[p] = k[pre[m]];
    }
    free(pre);
    return ST_OK;
}
