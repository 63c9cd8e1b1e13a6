/* cot_ops.c - cot (cot.h) behind the strategy interface (strategy.h): k chains with
 * distinct first tokens from one node; the results are the chains. */
#include <stdlib.h>

#include "strategy/cot.h"
#include "strategy/strategy_impl.h"

typedef struct cot_run {
    cot c;
    int32_t steps, budget;
} cot_run;

static void cot_run_free(void *self) {
    cot_run *r = self;
    if (!r) return;
    cot_free(&r->c);
    free(r);
}

static void *cot_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    cot_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->budget = o->budget;
    if (strategy_start_node(env->f, o->from, err) ||
        cot_init(&r->c, env->f, o->from, o->u.cot.k, &o->sample, o->budget, o->n_vocab, err) ||
        strat_grow_stops(&r->c.g, o, err)) {
        cot_run_free(r);
        return NULL;
    }
    return r;
}

static st_code cot_run_step(void *self, const strategy_env *env, st_err *err) {
    cot_run *r = self;
    if (cot_done(&r->c)) return ST_OK;
    st_code rc = cot_step(&r->c, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (!rc) r->steps++;
    return rc;
}

static bool cot_run_done(const void *self) { return cot_done(&((const cot_run *)self)->c); }

static void cot_run_progress(const void *self, strategy_progress *out) {
    const cot_run *r = self;
    out->done = r->steps;
    out->goal = r->budget;
}

static int32_t cot_run_n_results(const void *self) { return ((const cot_run *)self)->c.g.n; }

static void cot_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    strat_grow_result(&((const cot_run *)self)->c.g, i, out);
}

static int32_t cot_run_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_running(&((const cot_run *)self)->c.g, out, cap);
}

const strategy_ops strat_cot_ops = {
    .name = "cot",
    .kind = STRAT_COT,
    .summary = STRAT_SUM_CHAINS,
    .create = cot_run_create,
    .step = cot_run_step,
    .done = cot_run_done,
    .progress = cot_run_progress,
    .n_results = cot_run_n_results,
    .result = cot_run_result,
    .running = cot_run_running,
    .free = cot_run_free,
};
