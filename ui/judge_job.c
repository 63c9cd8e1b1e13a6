/* judge_job.c - :judge and :tot for the worker (judge_job.h). */
#include "judge_job.h"

#include <math.h>
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
    *n = 0;
    *marked = false;
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

strategy *ui_judge_start(const strategy_env *env, const ui_judge_env *je, const strategy_opts *opts,
                         const char *question, char *note, size_t cap, st_err *err) {
    judge_prompt jp;
    chat_kind kind = je->chat_on ? je->chat->kind : CHAT_NONE;
    if (judge_tokens(je->tk, kind, je->chat->system, question && *question ? question : NULL, NULL, NULL, &jp, err))
        return NULL;
    strategy_opts o = *opts;
    forest_id *br = NULL;
    bool marked = false;
    static const char *const newline[] = {"\n"};
    if (o.kind == STRAT_TOT) {
        o.stops = newline, o.n_stops = 1;
        o.u.tot.prompt = &jp;
        snprintf(note, cap, "tot%s: %d thoughts per node, keep %d, %d levels, %d tokens per thought%s", o.u.tot.dfs ? " dfs" : "",
                 (int)o.u.tot.k, (int)o.u.tot.b, (int)o.u.tot.d, (int)o.budget,
                 o.u.tot.dfs && isfinite(o.u.tot.threshold) ? ", scores below the threshold pruned" : "");
    } else {
        if (!(br = ui_judge_branches(env->f, o.from, &o.u.judge.n, &marked, err))) {
            judge_tokens_free(&jp);
            return NULL;
        }
        o.u.judge.branches = br, o.u.judge.prompt = &jp;
        snprintf(note, cap, "judging %d %s branch%s in one step", (int)o.u.judge.n, marked ? "bookmarked" : "sibling",
                 o.u.judge.n == 1 ? "" : "es");
    }
    strategy *s = strategy_create(&o, env, err);
    judge_tokens_free(&jp);
    free(br);
    return s;
}
