/* judge_ops.c - the judge (judge.h) behind the strategy interface (strategy.h): one step
 * judges the given branches; the results are the branches, best score first, and the
 * scores op gives every branch's score to views. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "strategy/judge.h"
#include "strategy/strategy_impl.h"

typedef struct judge_run {
    judge_prompt jp;  /* owned copy */
    judge jg;
    forest_id *branches, start;
    int32_t n, *order; /* (n) branch indices, best first once judged */
    bool done;
} judge_run;

static void judge_run_free(void *self) {
    judge_run *r = self;
    if (!r) return;
    judge_tokens_free(&r->jp);
    judge_free(&r->jg);
    free(r->branches);
    free(r->order);
    free(r);
}

static void *judge_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    int32_t n = o->u.judge.n;
    if (n < 1 || !o->u.judge.prompt) {
        st_set(err, ST_ERR_ARG, "judge: %s", n < 1 ? "no branches to judge" : "no judge prompt");
        return NULL;
    }
    judge_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->n = n;
    r->branches = malloc(sizeof(forest_id) * (size_t)n);
    r->order = malloc(sizeof(int32_t) * (size_t)n);
    if (!r->branches || !r->order) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        judge_run_free(r);
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        r->branches[i] = o->u.judge.branches[i], r->order[i] = i;
        if (!forest_get(env->f, r->branches[i])) {
            st_set(err, ST_ERR_ARG, "judge: branch %d no longer exists", i);
            judge_run_free(r);
            return NULL;
        }
    }
    r->start = r->branches[0];
    for (int32_t i = 1; i < n && r->start != FOREST_NONE; i++)
        r->start = forest_common_ancestor(env->f, r->start, r->branches[i]);
    if (judge_tokens_copy(&r->jp, o->u.judge.prompt, err)) {
        judge_run_free(r);
        return NULL;
    }
    return r;
}

static st_code judge_run_step(void *self, const strategy_env *env, st_err *err) {
    judge_run *r = self;
    if (r->done) return ST_OK;
    st_code rc = judge_attach(&r->jg, env->f, &r->jp, r->branches, r->n, false, err);
    if (!rc) rc = judge_step(&r->jg, env->f, env->plan, env->ctx, &r->jp, err);
    if (rc) return rc;
    judge_rank(r->jg.score, r->order, r->n);
    r->done = true;
    return ST_OK;
}

static bool judge_run_done(const void *self) { return ((const judge_run *)self)->done; }

static void judge_run_progress(const void *self, strategy_progress *out) {
    const judge_run *r = self;
    out->done = r->done;
    out->goal = 1;
    out->focus = r->done ? r->branches[r->order[0]] : FOREST_NONE;
    if (r->done)
        snprintf(out->text, sizeof out->text, "judged %d branch%s: best %+.3f, worst %+.3f", (int)r->n,
                 r->n == 1 ? "" : "es", r->jg.score[r->order[0]], r->jg.score[r->order[r->n - 1]]);
}

static int32_t judge_run_n_results(const void *self) { return ((const judge_run *)self)->n; }

/* Result i: the i-th best branch (before the step: the i-th given, unscored). */
static void judge_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    const judge_run *r = self;
    int32_t b = r->order[i];
    const forest_node *leaf = forest_get(f, r->branches[b]), *st = forest_get(f, r->start);
    *out = (strategy_result){.start = r->start, .leaf = leaf ? r->branches[b] : FOREST_NONE,
                             .n_tokens = leaf && st ? leaf->depth - st->depth : 0,
                             .score = r->done ? r->jg.score[b] : NAN, .end = STRAT_END_STOP, .stop = -1,
                             .eog_token = -1};
}

static int32_t judge_run_running(const void *self, forest_id *out, int32_t cap) {
    (void)self, (void)out, (void)cap;
    return 0;
}

static int32_t judge_run_scores(const void *self, forest_id *ids, double *scores, int32_t cap) {
    const judge_run *r = self;
    int32_t n = 0;
    for (int32_t i = 0; r->done && i < r->n && n < cap; i++, n++)
        ids[n] = r->branches[r->order[i]], scores[n] = r->jg.score[r->order[i]];
    return n;
}

const strategy_ops strat_judge_ops = {
    .name = "judge",
    .kind = STRAT_JUDGE,
    .summary = STRAT_SUM_PROGRESS,
    .create = judge_run_create,
    .step = judge_run_step,
    .done = judge_run_done,
    .progress = judge_run_progress,
    .n_results = judge_run_n_results,
    .result = judge_run_result,
    .running = judge_run_running,
    .scores = judge_run_scores,
    .free = judge_run_free,
};
