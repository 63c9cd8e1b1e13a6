/* strategy_impl.h - what the strategy files (engine/strategy/ *.c) share: each one's state
 * behind the table, and grow's branches read as results, running leaves and progress, so
 * that every grow-based strategy (grow, cot, ask, merge, margins) reports them the same
 * way. Private to the engine's strategy files. */
#ifndef MD_STRATEGY_IMPL_H
#define MD_STRATEGY_IMPL_H

#include "strategy/grow.h"
#include "strategy/strategy.h"

/* Branch i of g as a result (start, leaf, tokens made, end state from its flags). */
void strat_grow_result(const grow *g, int32_t i, strategy_result *out);
/* The leaves of g's running branches; returns how many (writes at most cap). */
int32_t strat_grow_running(const grow *g, forest_id *out, int32_t cap);
/* o's stop strings on g (nothing to do without any). */
st_code strat_grow_stops(grow *g, const strategy_opts *o, st_err *err);
/* Gives the starts of g's branches that also have children FOREST_WANT_LOGITS: a branch
 * may grow from a node other prompts continue (an empty prompt under a shared context),
 * and the step must still return that node's logits. */
void strat_grow_want_starts(const grow *g, forest *f);
/* The state s's table created: each strategy file reads its own state through it (its
 * accessor in strategy.h checks the table first). */
const void *strategy_state(const strategy *s);
/* The state of a strategy that is grow's branches and nothing more (grow, ask, merge):
 * their tables share every op but create (grow.c; STRAT_GROW_RUN_OPS fills them). */
typedef struct strat_grow_run {
    grow g;
    forest_id focus;     /* progress.focus: the start (grow), the merged chain's end (merge) */
    int32_t steps, goal; /* steps run; progress.goal (the longest budget) */
} strat_grow_run;
st_code strat_grow_run_step(void *self, const strategy_env *env, st_err *err);
bool strat_grow_run_done(const void *self);
void strat_grow_run_progress(const void *self, strategy_progress *out);
int32_t strat_grow_run_n_results(const void *self);
void strat_grow_run_result(const void *self, const forest *f, int32_t i, strategy_result *out);
int32_t strat_grow_run_running(const void *self, forest_id *out, int32_t cap);
void strat_grow_run_forget(void *self, const forest *f);
void strat_grow_run_free(void *self);
#define STRAT_GROW_RUN_OPS                                                                        \
    .step = strat_grow_run_step, .done = strat_grow_run_done, .progress = strat_grow_run_progress, \
    .n_results = strat_grow_run_n_results, .result = strat_grow_run_result,                       \
    .running = strat_grow_run_running, .forget = strat_grow_run_forget, .free = strat_grow_run_free
/* calloc that sets ST_ERR_NOMEM. */
void *strat_calloc(size_t size, st_err *err);

/* The registered tables (one per strategy file), declared from the registry's list. */
#define STRATEGY(table) extern const strategy_ops table;
#include "strategy/registry.def"
#undef STRATEGY

#endif
