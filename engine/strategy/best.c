/* best.c - the "best" strategy (strategy.h): best-of-N sampling. N independent samples
 * from one node (branch i with seed + i, grown together one forest step per token, as
 * grow's), then ranked by their mean token log-probability, best first, so the results
 * read as a reranked list and the TUI shows each one's score. The whole strategy is this
 * file and its registry line: its grammar (`:best N [TOKENS]`, `multidecode best --samples
 * N --tokens T`), its private options, its defaults and its table. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/strategy_impl.h"

/* Its private options (strategy_opts.priv). */
typedef struct best_opts {
    int32_t n; /* samples (>= 1) */
} best_opts;

typedef struct best_run {
    strat_grow_run run; /* the samples: grow's branches (steps, progress, running) */
    int32_t *order;     /* (run.g.n) the branches best first, once done (identity before) */
    double *score;      /* (run.g.n) each branch's mean log-probability, once done */
} best_run;

static void best_defaults(strategy_opts *o) {
    best_opts bo = {.n = 4};
    memcpy(o->priv.bytes, &bo, sizeof bo);
}

static void best_free(void *self) {
    best_run *r = self;
    if (!r) return;
    grow_free(&r->run.g);
    free(r->order);
    free(r->score);
    free(r);
}

static void *best_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    best_opts bo;
    memcpy(&bo, o->priv.bytes, sizeof bo);
    if (bo.n < 1) {
        st_set(err, ST_ERR_ARG, "best: %d samples (want at least 1)", (int)bo.n);
        return NULL;
    }
    best_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->run.focus = o->from;
    r->run.goal = o->budget;
    r->order = malloc(sizeof *r->order * (size_t)bo.n);
    r->score = malloc(sizeof *r->score * (size_t)bo.n);
    st_code rc = r->order && r->score ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = strategy_start_node(env->f, o->from, err);
    if (!rc) rc = grow_init(&r->run.g, env->f, o->from, bo.n, &o->sample, o->budget, o->n_vocab, err);
    if (!rc) rc = strat_grow_stops(&r->run.g, o, err);
    if (rc) {
        best_free(r);
        return NULL;
    }
    for (int32_t i = 0; i < bo.n; i++) r->order[i] = i, r->score[i] = NAN;
    return r;
}

/* Branch i's mean log-probability over the tokens it keeps in the forest (an end token
 * is not kept, nor counted); -INFINITY for none. */
static double mean_logprob(const best_run *r, const forest *f, int32_t i) {
    strategy_result res;
    strat_grow_result(&r->run.g, i, &res);
    double sum = 0;
    int32_t n = 0;
    for (forest_id id = res.leaf; id != res.start && forest_get(f, id); n++) {
        const forest_node *nd = forest_get(f, id);
        sum += nd->logprob;
        if (nd->parent < 0) break;
        id = forest_id_at(f, nd->parent);
    }
    return n > 0 ? sum / n : -INFINITY;
}

/* Insertion sort of the order by score, best first; ties keep the lower branch first. */
static void rank(best_run *r, const forest *f) {
    for (int32_t i = 0; i < r->run.g.n; i++) r->score[i] = mean_logprob(r, f, i);
    for (int32_t i = 1; i < r->run.g.n; i++) {
        int32_t b = r->order[i], j = i;
        for (; j > 0 && r->score[r->order[j - 1]] < r->score[b]; j--) r->order[j] = r->order[j - 1];
        r->order[j] = b;
    }
}

static st_code best_step(void *self, const strategy_env *env, st_err *err) {
    best_run *r = self;
    bool was_done = strat_grow_run_done(&r->run);
    st_code rc = strat_grow_run_step(&r->run, env, err);
    if (!rc && !was_done && strat_grow_run_done(&r->run)) rank(r, env->f);
    return rc;
}

static bool best_done(const void *self) { return strat_grow_run_done(&((const best_run *)self)->run); }

static void best_progress(const void *self, strategy_progress *out) {
    strat_grow_run_progress(&((const best_run *)self)->run, out);
}

static int32_t best_n_results(const void *self) { return strat_grow_run_n_results(&((const best_run *)self)->run); }

static void best_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    const best_run *r = self;
    strat_grow_result(&r->run.g, r->order[i], out);
    out->score = r->score[r->order[i]];
}

static int32_t best_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_run_running(&((const best_run *)self)->run, out, cap);
}

/* Samples whose leaf went end; the ranking is made once the last one ends, here too. */
static void best_forget(void *self, const forest *f) {
    best_run *r = self;
    bool was_done = strat_grow_run_done(&r->run);
    strat_grow_run_forget(&r->run, f);
    if (!was_done && strat_grow_run_done(&r->run)) rank(r, f);
}

static const strategy_arg best_args[] = {
    {"samples", "independent samples to draw (default 4)", STRAT_ARG_PRIV, offsetof(best_opts, n), 1, 4096, false},
    {"tokens", "tokens per sample at most (default 32)", STRAT_ARG_BUDGET, 0, 1, 1 << 24, true},
};

const strategy_ops strat_best_ops = {
    .name = "best",
    .kind = STRAT_OTHER,
    .summary = STRAT_SUM_RANKED,
    .usage = ":best N [TOKENS]     N independent samples, best mean log-probability first",
    .args = best_args,
    .n_args = 2,
    .priv_size = sizeof(best_opts),
    .defaults = best_defaults,
    .create = best_create,
    .step = best_step,
    .done = best_done,
    .progress = best_progress,
    .n_results = best_n_results,
    .result = best_result,
    .running = best_running,
    .forget = best_forget,
    .free = best_free,
};
