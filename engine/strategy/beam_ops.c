/* beam_ops.c - beam search (beam.h) behind the strategy interface (strategy.h). The
 * results are the finished hypotheses, best first (their tokens, no forest leaf); the live
 * hypotheses are the running leaves, with their scores for views. */
#include <math.h>
#include <stdlib.h>

#include "strategy/strategy_impl.h"

typedef struct beam_run {
    beam *b; /* first: strategy_beam reads it */
    forest_id from;
    float alpha;
    int32_t budget;
} beam_run;

static void beam_run_free(void *self) {
    beam_run *r = self;
    if (!r) return;
    beam_free(r->b);
    free(r);
}

static void *beam_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    beam_params bp = o->u.beam;
    bp.max_tokens = o->budget;
    beam_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->from = o->from;
    r->alpha = bp.alpha;
    r->budget = o->budget;
    if (strategy_start_node(env->f, o->from, err) ||
        !(r->b = beam_init(env->f, o->from, &bp, env->tk, o->n_vocab, err))) {
        beam_run_free(r);
        return NULL;
    }
    return r;
}

static st_code beam_run_step(void *self, const strategy_env *env, st_err *err) {
    return beam_step(((beam_run *)self)->b, env->f, env->plan, env->ctx, err);
}

static bool beam_run_done(const void *self) { return beam_done(((const beam_run *)self)->b); }

static void beam_run_progress(const void *self, strategy_progress *out) {
    const beam_run *r = self;
    out->done = beam_steps(r->b);
    out->goal = r->budget;
}

static int32_t beam_run_n_results(const void *self) { return beam_n_results(((const beam_run *)self)->b); }

static void beam_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    const beam_run *r = self;
    const beam_hyp *h = beam_result(r->b, i);
    *out = (strategy_result){.start = r->from, .leaf = FOREST_NONE, .tokens = h->tokens, .n_tokens = h->n,
                             .score = h->score, .end = h->ended ? STRAT_END_EOG : STRAT_END_BUDGET,
                             .stop = -1, .eog_token = h->ended && h->n > 0 ? h->tokens[h->n - 1] : -1};
}

static int32_t beam_run_running(const void *self, forest_id *out, int32_t cap) {
    const beam *b = ((const beam_run *)self)->b;
    int32_t n = 0;
    for (int32_t i = 0; i < beam_n_live(b) && n < cap; i++) out[n++] = beam_live_leaf(b, i);
    return n;
}

/* The live hypotheses scored as results are (sum / length^alpha). */
static int32_t beam_run_scores(const void *self, forest_id *ids, double *scores, int32_t cap) {
    const beam_run *r = self;
    int32_t len = beam_cur_len(r->b), n = 0;
    for (int32_t i = 0; i < beam_n_live(r->b) && n < cap; i++, n++) {
        ids[n] = beam_live_leaf(r->b, i);
        scores[n] = len > 0 ? beam_live_sum(r->b, i) / pow((double)len, (double)r->alpha) : 0;
    }
    return n;
}

const strategy_ops strat_beam_ops = {
    .name = "beam",
    .kind = STRAT_BEAM,
    .summary = STRAT_SUM_RANKED,
    .create = beam_run_create,
    .step = beam_run_step,
    .done = beam_run_done,
    .progress = beam_run_progress,
    .n_results = beam_run_n_results,
    .result = beam_run_result,
    .running = beam_run_running,
    .scores = beam_run_scores,
    .free = beam_run_free,
};
