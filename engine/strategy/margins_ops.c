/* margins_ops.c - Writing in the Margins (margins.h) behind the strategy interface
 * (strategy.h): the notes grow together; when the last is done, the answer's prompt (from
 * the caller's callback, around the notes' text) is added and the answer grows. Results:
 * note i is result i, the answer result n_chunks (once it has started). */
#include <stdlib.h>

#include "strategy/margins.h"
#include "strategy/strategy_impl.h"

typedef struct margins_run {
    margins m;
    sample_params answer_sp; /* seed + the number of chunks */
    int32_t answer_budget, gap, steps, goal;
    strategy_answer_fn answer;
    void *answer_ud;
} margins_run;

static void margins_run_free(void *self) {
    margins_run *r = self;
    if (!r) return;
    margins_free(&r->m);
    free(r);
}

static void *margins_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    margins_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    int32_t n = o->u.margins.n_chunks;
    if (margins_init(&r->m, env->f, o->u.margins.prompts, o->u.margins.lens, n, &o->sample, o->budget,
                     o->n_vocab, err) ||
        (o->n_stops > 0 && margins_set_note_stop(&r->m, o->stops, o->n_stops, err))) {
        margins_run_free(r);
        return NULL;
    }
    r->answer_sp = o->sample;
    r->answer_sp.seed = o->sample.seed + (uint64_t)n;
    r->answer_budget = o->u.margins.answer_budget > 0 ? o->u.margins.answer_budget : o->budget;
    r->gap = o->u.margins.gap;
    r->goal = o->budget + r->answer_budget;
    r->answer = o->u.margins.answer;
    r->answer_ud = o->u.margins.answer_ud;
    return r;
}

/* The answer's prompt, once every note is done. */
static st_code start_answer(margins_run *r, const strategy_env *env, st_err *err) {
    char *notes = margins_notes_text(&r->m, env->f, env->tk, "\n\n", err);
    if (!notes) return err->code;
    int32_t n = 0, *t = r->answer(r->answer_ud, notes, &n, err);
    free(notes);
    if (!t) return err->code ? err->code : st_set(err, ST_ERR_ARG, "margins: no answer prompt");
    st_code rc = r->gap < 0 ? margins_answer(&r->m, env->f, t, n, &r->answer_sp, r->answer_budget, err)
                            : margins_answer_gap(&r->m, env->f, env->plan, env->ctx, t, n, r->gap,
                                                 &r->answer_sp, r->answer_budget, err);
    free(t);
    return rc;
}

static bool margins_run_done(const void *self) {
    const margins_run *r = self;
    return r->m.phase == MARGINS_DONE || (r->m.phase == MARGINS_READY && !r->answer);
}

static st_code margins_run_step(void *self, const strategy_env *env, st_err *err) {
    margins_run *r = self;
    if (margins_run_done(r)) return ST_OK;
    st_code rc = margins_step(&r->m, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (rc) return rc;
    r->steps++;
    if (r->m.phase == MARGINS_READY && r->answer) rc = start_answer(r, env, err);
    return rc;
}

static void margins_run_progress(const void *self, strategy_progress *out) {
    const margins_run *r = self;
    out->done = r->steps;
    out->goal = r->goal;
    out->focus = r->m.phase == MARGINS_NOTES ? r->m.note_from[0] : r->m.answer_from;
}

static int32_t margins_run_n_results(const void *self) {
    const margins_run *r = self;
    return r->m.n_chunks + (r->m.answer.n > 0);
}

static void margins_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    const margins_run *r = self;
    if (i < r->m.n_chunks) strat_grow_result(&r->m.notes, i, out);
    else strat_grow_result(&r->m.answer, 0, out);
}

static int32_t margins_run_running(const void *self, forest_id *out, int32_t cap) {
    const margins_run *r = self;
    const grow *g = r->m.phase == MARGINS_NOTES ? &r->m.notes : r->m.phase == MARGINS_ANSWER ? &r->m.answer : NULL;
    return g ? strat_grow_running(g, out, cap) : 0;
}

const strategy_ops strat_margins_ops = {
    .name = "margins",
    .kind = STRAT_MARGINS,
    .summary = STRAT_SUM_NONE,
    .create = margins_run_create,
    .step = margins_run_step,
    .done = margins_run_done,
    .progress = margins_run_progress,
    .n_results = margins_run_n_results,
    .result = margins_run_result,
    .running = margins_run_running,
    .free = margins_run_free,
};
