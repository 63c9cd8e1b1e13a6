/* strategy_run.h - how the commands drive a strategy (engine/strategy/strategy.h): step it
 * to its end, counting what the statistics lines report, stopping when the KV cache is
 * full, with a progress hook after each step. Not here: building prompts (prompt.h),
 * printing results (each command). */
#ifndef MD_STRATEGY_RUN_H
#define MD_STRATEGY_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "strategy/strategy.h"

/* What a run's statistics line reports. */
typedef struct app_run_stats {
    double t0, t1, t2;          /* start, end of the first step (the prefill), end: seconds */
    int32_t steps;              /* steps run */
    int64_t first_rows, rows;   /* rows of the first step; of all later steps */
    int32_t max_rows;           /* the most rows of one later step */
    bool full;                  /* stopped by a full KV cache (ST_NO_KV_SLOT) */
} app_run_stats;

/* Called after each step (st counts it already); false ends the run there (a command
 * that shows a set number of steps). */
typedef bool (*app_run_tick_fn)(void *ud, const strategy *s, const strategy_env *env,
                                const app_run_stats *st);

/* Steps s until it is done or tick says stop, filling *st. A full KV cache ends the run
 * with st->full set and ST_OK; other step errors are returned. tick may be NULL. */
st_code app_strategy_run(strategy *s, const strategy_env *env, app_run_stats *st,
                         app_run_tick_fn tick, void *ud, st_err *err);

/* A tick for ud = an app_progress (app.h): "NAME: step S, R rows, KV U slots[; the
 * strategy's progress text]" on stderr, at most once a second. */
bool app_run_progress_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st);

/* A full KV cache stopped the run (st->full) with results to show: the line every command
 * prints on stderr after them, "multidecode: stopped: the KV cache of N slots is full
 * (raise it with -c)". */
void app_run_full_note(int32_t n_slots);
/* A full KV cache stopped s's run before it had anything to show: ST_NO_KV_SLOT with
 * "NAME: the KV cache of N slots is full after S steps (raise it with -c)" for app_fail. */
st_code app_run_full_error(const strategy *s, const app_run_stats *st, int32_t n_slots, st_err *err);

/* Later rows per step on average (0 with one step). */
double app_run_mean_rows(const app_run_stats *st);

/* "EOS", "stop", "budget" or, for a result still running, full ? "full context" :
 * "budget": how a result ended, as the commands print it. */
const char *app_result_ended(const strategy_result *r, bool full);

#endif
