/* temps.c - the "temps" strategy (strategy.h): a temperature ladder. N independent chains
 * from one node, chain i sampling at temperature i * STEP / 100 (chain 0 greedy) with
 * seed + i, grown together one forest step per token as grow's branches, so one run
 * shows how the same start reads hotter and hotter. The whole strategy is this file and
 * its line in registry.def: `:temps N [TOKENS] [STEP]`, `multidecode temps --chains N
 * --tokens T --step S`. */
#include <stddef.h>
#include <string.h>

#include "strategy/strategy_impl.h"

/* Its private options (strategy_opts.priv). */
typedef struct temps_opts {
    int32_t n;    /* chains (>= 1) */
    int32_t step; /* hundredths of a degree between two chains' temperatures */
} temps_opts;

static void temps_defaults(strategy_opts *o) {
    temps_opts to = {.n = 4, .step = 25};
    memcpy(o->priv.bytes, &to, sizeof to);
}

static void *temps_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    temps_opts to;
    memcpy(&to, o->priv.bytes, sizeof to);
    if (to.n < 1 || to.step < 1) {
        st_set(err, ST_ERR_ARG, "temps: %d chains, step %d (want at least 1 of each)", (int)to.n, (int)to.step);
        return NULL;
    }
    strat_grow_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->focus = o->from;
    r->goal = o->budget;
    st_code rc = strategy_start_node(env->f, o->from, err);
    for (int32_t i = 0; i < to.n && !rc; i++) {
        sample_params sp = o->sample;
        sp.temp = (float)i * (float)to.step / 100.0f;
        sp.seed = o->sample.seed + (uint64_t)i;
        rc = grow_add(&r->g, env->f, o->from, &sp, o->budget, o->n_vocab, err);
    }
    if (rc || strat_grow_stops(&r->g, o, err)) {
        strat_grow_run_free(r);
        return NULL;
    }
    return r;
}

static const strategy_arg temps_args[] = {
    {"chains", "chains, one per temperature (default 4)", STRAT_ARG_PRIV, offsetof(temps_opts, n), 1, 256, false},
    {"tokens", "tokens per chain at most (default 32)", STRAT_ARG_BUDGET, 0, 1, 1 << 24, true},
    {"step", "temperature step in hundredths (default 25: 0, 0.25, 0.5, ...)", STRAT_ARG_PRIV,
     offsetof(temps_opts, step), 1, 500, true},
};

const strategy_ops strat_temps_ops = {
    .name = "temps",
    .kind = STRAT_OTHER,
    .summary = STRAT_SUM_BRANCHES,
    .usage = ":temps N [TOKENS] [STEP]  N chains at temperatures 0, STEP/100, 2*STEP/100, ...",
    .args = temps_args,
    .n_args = 3,
    .priv_size = sizeof(temps_opts),
    .own_temp = true,
    .defaults = temps_defaults,
    .create = temps_create,
    STRAT_GROW_RUN_OPS,
};
