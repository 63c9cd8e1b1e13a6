/* judge_job.c - :judge and :tot for the worker (judge_job.h). */
#include "judge_job.h"

#include <stdio.h>

#include "strategy/judge.h"

int32_t ui_judge_branches(const forest *f, forest_id sel, forest_id *out, int32_t cap, bool *marked) {
    int32_t n = 0;
    *marked = true;
    for (int32_t i = forest_dfs_first(f); i >= 0 && n < cap; i = forest_dfs_next(f, i))
        if (forest_node_at(f, i)->flags & FOREST_BOOKMARK) out[n++] = forest_id_at(f, i);
    if (n >= 2) return n;
    *marked = false;
    const forest_node *nd = forest_get(f, sel);
    if (!nd) return 0;
    /* the fork point: the selection when it forks, else the nearest ancestor that does */
    forest_id fork = sel;
    while (forest_n_children(f, fork) < 2) {
        nd = forest_get(f, fork);
        if (nd->parent < 0) break;
        fork = forest_id_at(f, nd->parent);
    }
    forest_id leaves[4096];
    int32_t nl = forest_leaves(f, leaves, 4096);
    n = 0;
    for (int32_t i = 0; i < nl && i < 4096 && n < cap; i++)
        if (forest_common_ancestor(f, leaves[i], fork) == fork) out[n++] = leaves[i];
    return n;
}

strategy *ui_judge_start(const strategy_env *env, const ui_judge_env *je, const strategy_opts *opts,
                         const char *question, char *note, size_t cap, st_err *err) {
    judge_prompt jp;
    chat_kind kind = je->chat_on ? je->chat->kind : CHAT_NONE;
    if (judge_tokens(je->tk, kind, je->chat->system, question && *question ? question : NULL, NULL, NULL, &jp, err))
        return NULL;
    strategy_opts o = *opts;
    forest_id br[UI_JUDGE_MAX];
    bool marked = false;
    static const char *const newline[] = {"\n"};
    if (o.kind == STRAT_TOT) {
        o.stops = newline, o.n_stops = 1;
        o.u.tot.prompt = &jp;
        snprintf(note, cap, "tot: %d thoughts per node, keep %d, %d levels, %d tokens per thought", (int)o.u.tot.k,
                 (int)o.u.tot.b, (int)o.u.tot.d, (int)o.budget);
    } else {
        o.u.judge.n = ui_judge_branches(env->f, o.from, br, UI_JUDGE_MAX, &marked);
        o.u.judge.branches = br, o.u.judge.prompt = &jp;
        snprintf(note, cap, "judging %d %s branch%s in one step", (int)o.u.judge.n, marked ? "bookmarked" : "sibling",
                 o.u.judge.n == 1 ? "" : "es");
    }
    strategy *s = strategy_create(&o, env, err);
    judge_tokens_free(&jp);
    return s;
}
