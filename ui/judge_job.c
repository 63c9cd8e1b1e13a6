/* judge_job.c - :judge and :tot for the worker (judge_job.h). */
#include "judge_job.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/array.h"
#include "strategy/judge.h"

/* Appends id to *out; false + err when memory runs out. */
static bool push_id(forest_id **out, int32_t *n, int32_t *cap, forest_id id, st_err *err) {
    if (!ARR_GROW_I32(*out, *n + 1, *cap)) return st_set(err, ST_ERR_NOMEM, "out of memory"), false;
    (*out)[(*n)++] = id;
    return true;
}

/* The fork point of sel: sel when it forks, else the nearest ancestor that does (or the
 * root). */
static forest_id fork_of(const forest *f, forest_id sel) {
    forest_id fork = sel;
    while (forest_n_children(f, fork) < 2) {
        const forest_node *nd = forest_get(f, fork);
        if (nd->parent < 0) break;
        fork = forest_id_at(f, nd->parent);
    }
    return fork;
}

/* The leaves below sel's fork point, in depth-first order (malloc'd, *n). */
static forest_id *leaves_below(const forest *f, forest_id sel, int32_t *n, st_err *err) {
    forest_id *out = NULL;
    int32_t cap = 0;
    *n = 0;
    if (!ARR_GROW_I32(out, 1, cap)) return st_set(err, ST_ERR_NOMEM, "out of memory"), NULL;
    if (!forest_get(f, sel)) return out;
    forest_id fork = fork_of(f, sel);
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        forest_id id = forest_id_at(f, i);
        if (forest_n_children(f, id) == 0 && forest_common_ancestor(f, id, fork) == fork &&
            !push_id(&out, n, &cap, id, err))
            return free(out), NULL;
    }
    return out;
}

forest_id *ui_judge_branches(const forest *f, forest_id sel, int32_t *n, bool *marked, st_err *err) {
    forest_id *out = NULL;
    int32_t cap = 0;
    *n = 0;
    *marked = true;
    if (!ARR_GROW_I32(out, 1, cap)) return st_set(err, ST_ERR_NOMEM, "out of memory"), NULL;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if ((forest_node_at(f, i)->flags & FOREST_BOOKMARK) && !push_id(&out, n, &cap, forest_id_at(f, i), err))
            return free(out), NULL;
    if (*n >= 2) return out;
    *marked = false;
    free(out);
    return leaves_below(f, sel, n, err);
}

/* The kept leaves and the unscored ones (need 1), and every node above them (2). */
static void mark_needed(const forest *f, uint8_t *need, const forest_id *keep, int32_t n) {
    for (int32_t i = 0; i < n; i++)
        for (int32_t at = forest_index(keep[i]); at >= 0 && need[at] < 2; at = forest_node_at(f, at)->parent)
            need[at] = 2;
}

forest_id *ui_judge_keep(const forest *f, const ui_scores *s, forest_id sel, int32_t n, int32_t *n_tops,
                         int32_t *n_scored, forest_id *best, st_err *err) {
    int32_t nl = 0, ns = 0, nk = 0, cap = 0;
    forest_id *leaf = leaves_below(f, sel, &nl, err), *keep = NULL, *tops = NULL;
    int32_t *order = malloc(sizeof *order * (size_t)(nl + 1));
    double *sc = malloc(sizeof *sc * (size_t)(nl + 1));
    uint8_t *need = calloc((size_t)forest_capacity(f) + 1, 1), *in = calloc((size_t)forest_capacity(f) + 1, 1);
    keep = malloc(sizeof *keep * (size_t)(nl + 1));
    if (!leaf || !order || !sc || !need || !in || !keep) {
        if (leaf) st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int32_t i = 0; i < nl; i++) /* scored leaves first into leaf[], the others kept as they are */
        if (ui_scores_get(s, f, leaf[i], &sc[ns])) leaf[ns++] = leaf[i];
        else keep[nk++] = leaf[i];
    if (ns == 0) {
        st_set(err, ST_ERR_ARG, "no scored leaves below the selection: :judge or :tot first");
        goto out;
    }
    for (int32_t i = 0; i < ns; i++) order[i] = i;
    judge_rank(sc, order, ns);
    for (int32_t i = 0; i < ns && i < n; i++) keep[nk++] = leaf[order[i]];
    *best = leaf[order[0]];
    *n_scored = ns;
    mark_needed(f, need, keep, nk);
    /* the tops: nodes below the fork point, needed by none, under a needed parent */
    in[forest_index(fork_of(f, sel))] = 1;
    *n_tops = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        int32_t p = forest_node_at(f, i)->parent;
        if (p < 0 || !in[p]) continue;
        in[i] = 1;
        if (need[p] && !need[i] && !push_id(&tops, n_tops, &cap, forest_id_at(f, i), err)) goto out;
    }
    if (!tops && !ARR_GROW_I32(tops, 1, cap)) st_set(err, ST_ERR_NOMEM, "out of memory");
out:
    free(leaf), free(keep), free(order), free(sc), free(need), free(in);
    if (err->code && tops) free(tops), tops = NULL;
    return tops;
}

strategy *ui_judge_start(const strategy_env *env, const ui_judge_env *je, const strategy_opts *opts,
                         const char *question, char *note, size_t cap, st_err *err) {
    judge_prompt jp;
    chat_kind kind = je->chat_on ? je->chat->kind : CHAT_NONE;
    if (judge_tokens(je->tk, kind, je->chat->system, question && *question ? question : NULL, NULL, NULL, &jp, err))
        return NULL;
    strategy_opts o = *opts;
    const strategy_ops *ops = o.ops ? o.ops : strategy_get(o.kind);
    strategy_judge_in in = {.prompt = &jp, .which = "sibling"};
    forest_id *br = NULL;
    bool marked = false;
    if (ops->judge_branches) {
        if (!(br = ui_judge_branches(env->f, o.from, &in.n, &marked, err))) {
            judge_tokens_free(&jp);
            return NULL;
        }
        in.branches = br, in.which = marked ? "bookmarked" : "sibling";
    }
    ops->judge_setup(&o, &in, note, cap);
    strategy *s = strategy_create(&o, env, err);
    judge_tokens_free(&jp);
    free(br);
    return s;
}
