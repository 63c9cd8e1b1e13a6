/* grow_ops.c - grow (grow.h) behind the strategy interface (strategy.h): n branches sampled
 * from one node. The smallest complete strategy table: read it, with strategy.h, to add
 * one. It also holds the helpers every grow-based table shares (strategy_impl.h). */
#include <math.h>
#include <stdlib.h>

#include "strategy/strategy_impl.h"

/* ---- shared by the grow-based strategies ---- */

void *strat_calloc(size_t size, st_err *err) {
    void *p = calloc(1, size);
    if (!p) st_set(err, ST_ERR_NOMEM, "out of memory");
    return p;
}

void strat_grow_result(const grow *g, int32_t i, strategy_result *out) {
    const grow_branch *b = &g->br[i];
    *out = (strategy_result){.start = b->start, .leaf = b->leaf, .n_tokens = b->made, .score = NAN,
                             .stop = b->stop, .eog_token = -1};
    out->end = !b->done ? STRAT_RUNNING : b->eog ? STRAT_END_EOG : b->stop >= 0 ? STRAT_END_STOP
                                                                                : STRAT_END_BUDGET;
}

int32_t strat_grow_running(const grow *g, forest_id *out, int32_t cap) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n && n < cap; i++)
        if (!g->br[i].done) out[n++] = g->br[i].leaf;
    return n;
}

int64_t strat_grow_made(const grow *g) {
    int64_t n = 0;
    for (int32_t i = 0; i < g->n; i++) n += g->br[i].made;
    return n;
}

void strat_grow_want_starts(const grow *g, forest *f) {
    for (int32_t i = 0; i < g->n; i++)
        if (forest_n_children(f, g->br[i].start) > 0) forest_set_flags(f, g->br[i].start, FOREST_WANT_LOGITS, 0);
}

st_code strat_grow_stops(grow *g, const strategy_opts *o, st_err *err) {
    return o->n_stops > 0 ? grow_set_stop(g, o->stops, o->n_stops, err) : ST_OK;
}

/* ---- the grow table ---- */

typedef struct grow_run {
    grow g;
    forest_id from;
    int32_t steps, budget;
} grow_run;

static void grow_run_free(void *self) {
    grow_run *r = self;
    if (!r) return;
    grow_free(&r->g);
    free(r);
}

/* n branches from start, the first with seed + first (o->u.grow.n branches each). */
static st_code grow_run_add(grow_run *r, forest *f, forest_id start, const strategy_opts *o,
                            int32_t first, st_err *err) {
    st_code rc = strategy_start_node(f, start, err);
    for (int32_t b = 0; b < o->u.grow.n && !rc; b++) {
        sample_params sp = o->sample;
        sp.seed = o->sample.seed + (uint64_t)(first + b);
        rc = grow_add(&r->g, f, start, &sp, o->budget, o->n_vocab, err);
    }
    return rc;
}

static void *grow_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    if (o->u.grow.n < 1) {
        st_set(err, ST_ERR_ARG, "grow: %d branches (want at least 1)", o->u.grow.n);
        return NULL;
    }
    grow_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    const forest_id *starts = o->u.grow.starts ? o->u.grow.starts : &o->from;
    int32_t n_starts = o->u.grow.starts ? o->u.grow.n_starts : 1;
    r->from = n_starts > 0 ? starts[0] : FOREST_NONE;
    r->budget = o->budget;
    st_code rc = n_starts > 0 ? ST_OK : st_set(err, ST_ERR_ARG, "grow: no node to start from");
    for (int32_t s = 0; s < n_starts && !rc; s++)
        rc = grow_run_add(r, env->f, starts[s], o, s * o->u.grow.n, err);
    if (!rc) strat_grow_want_starts(&r->g, env->f);
    if (rc || strat_grow_stops(&r->g, o, err)) {
        grow_run_free(r);
        return NULL;
    }
    return r;
}

static st_code grow_run_step(void *self, const strategy_env *env, st_err *err) {
    grow_run *r = self;
    if (r->g.n_active == 0) return ST_OK;
    st_code rc = grow_step(&r->g, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (!rc) r->steps++;
    return rc;
}

static bool grow_run_done(const void *self) { return ((const grow_run *)self)->g.n_active == 0; }

static void grow_run_progress(const void *self, strategy_progress *out) {
    const grow_run *r = self;
    out->done = r->steps;
    out->goal = r->budget;
    out->focus = r->from;
}

static int32_t grow_run_n_results(const void *self) { return ((const grow_run *)self)->g.n; }

static void grow_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    strat_grow_result(&((const grow_run *)self)->g, i, out);
}

static int32_t grow_run_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_running(&((const grow_run *)self)->g, out, cap);
}

const strategy_ops strat_grow_ops = {
    .name = "grow",
    .kind = STRAT_GROW,
    .summary = STRAT_SUM_BRANCHES,
    .create = grow_run_create,
    .step = grow_run_step,
    .done = grow_run_done,
    .progress = grow_run_progress,
    .n_results = grow_run_n_results,
    .result = grow_run_result,
    .running = grow_run_running,
    .free = grow_run_free,
};
