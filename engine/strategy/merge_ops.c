/* merge_ops.c - the exact merge (merge.h) as a strategy (strategy.h): the chosen branches'
 * texts joined under their common ancestor as a new pending chain, then one branch grown
 * from it (grow.h); its result is that branch. */
#include <stdlib.h>

#include "strategy/merge.h"
#include "strategy/strategy_impl.h"

typedef struct merge_run {
    grow g;
    forest_id last; /* the merged chain's last node */
    int32_t steps, budget;
} merge_run;

static void merge_run_free(void *self) {
    merge_run *r = self;
    if (!r) return;
    grow_free(&r->g);
    free(r);
}

static void *merge_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    merge_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    int32_t before = forest_n_live(env->f);
    if (merge_branches(env->f, env->tk, o->u.merge.leaves, o->u.merge.n, o->u.merge.sep, &r->last, err)) {
        free(r);
        return NULL;
    }
    r->budget = o->budget;
    if (strategy_start_node(env->f, r->last, err) ||
        grow_init(&r->g, env->f, r->last, 1, &o->sample, o->budget, o->n_vocab, err) ||
        strat_grow_stops(&r->g, o, err)) {
        /* the forest as it was: the merged chain (its nodes are the ones just added) goes */
        forest_id top = r->last;
        for (int32_t i = forest_n_live(env->f) - before; i > 1; i--)
            top = forest_id_at(env->f, forest_get(env->f, top)->parent);
        forest_prune(env->f, top, NULL);
        merge_run_free(r);
        return NULL;
    }
    return r;
}

static st_code merge_run_step(void *self, const strategy_env *env, st_err *err) {
    merge_run *r = self;
    if (r->g.n_active == 0) return ST_OK;
    st_code rc = grow_step(&r->g, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (!rc) r->steps++;
    return rc;
}

static bool merge_run_done(const void *self) { return ((const merge_run *)self)->g.n_active == 0; }

static void merge_run_progress(const void *self, strategy_progress *out) {
    const merge_run *r = self;
    out->done = r->steps;
    out->goal = r->budget;
    out->focus = r->last;
}

static int32_t merge_run_n_results(const void *self) { return ((const merge_run *)self)->g.n; }

static void merge_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    strat_grow_result(&((const merge_run *)self)->g, i, out);
}

static int32_t merge_run_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_running(&((const merge_run *)self)->g, out, cap);
}

const strategy_ops strat_merge_ops = {
    .name = "merge",
    .kind = STRAT_MERGE,
    .summary = STRAT_SUM_BRANCHES,
    .create = merge_run_create,
    .step = merge_run_step,
    .done = merge_run_done,
    .progress = merge_run_progress,
    .n_results = merge_run_n_results,
    .result = merge_run_result,
    .running = merge_run_running,
    .free = merge_run_free,
};
