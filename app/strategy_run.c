/* strategy_run.c - the commands' strategy loop (see strategy_run.h). */
#include "base/clock.h"
#include "strategy_run.h"

#include <stdio.h>

#include "app.h"

st_code app_strategy_run(strategy *s, const strategy_env *env, app_run_stats *st,
                         app_run_tick_fn tick, void *ud, st_err *err) {
    *st = (app_run_stats){.t0 = mono_now_s()};
    st->t1 = st->t0;
    st_code rc = ST_OK;
    while (!strategy_done(s)) {
        if ((rc = strategy_step(s, env, err)) == ST_NO_KV_SLOT) {
            st->full = true;
            rc = ST_OK;
            break;
        }
        if (rc) break;
        int32_t n = env->plan->n_rows;
        if (st->steps++ == 0) {
            st->t1 = mono_now_s();
            st->first_rows = n;
        } else {
            st->rows += n;
            if (n > st->max_rows) st->max_rows = n;
        }
        if (tick && !tick(ud, s, env, st)) break;
    }
    st->t2 = mono_now_s();
    return rc;
}

bool app_run_progress_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    strategy_progress p;
    strategy_get_progress(s, &p);
    app_progress_tick(ud, "%s: step %d, %d rows, KV %d slots%s%s", strategy_ops_of(s)->name, (int)st->steps,
                      (int)env->plan->n_rows, (int)kv_alloc_used(forest_kv(env->f)), p.text[0] ? "; " : "", p.text);
    return true;
}

void app_run_full_note(int32_t n_slots) {
    fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full (raise it with -c)\n", (int)n_slots);
}

st_code app_run_full_error(const strategy *s, const app_run_stats *st, int32_t n_slots, st_err *err) {
    return st_set(err, ST_NO_KV_SLOT, "%s: the KV cache of %d slots is full after %d steps (raise it with -c)",
                  strategy_ops_of(s)->name, (int)n_slots, (int)st->steps);
}

double app_run_mean_rows(const app_run_stats *st) {
    return st->steps > 1 ? (double)st->rows / (st->steps - 1) : 0.0;
}

const char *app_result_ended(const strategy_result *r, bool full) {
    const char *name = strategy_end_name(r->end);
    return name ? name : full ? "full context" : "budget";
}
