/* judge.c - judging branches in one forest step (judge.h): the judge's tokens, attaching
 * the judge chains, the step that reads the answers' log-probabilities, and the ranking. */
#include "strategy/judge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/merge.h"
#include "strategy/strategy_impl.h"

/* ---- the judge's tokens ---- */

void judge_tokens_free(judge_prompt *j) {
    if (!j) return;
    free(j->prompt);
    free(j->yes);
    free(j->no);
    memset(j, 0, sizeof *j);
}

/* Tokens of a rendered chat text (special tokens parsed, no BOS); NULL + err. */
static int32_t *encode_special(const tok *tk, const char *text, int32_t *n, st_err *err) {
    return tok_encode_alloc(tk, text, strlen(text), false, true, n, err);
}

static st_code need_tokens(int32_t n, const char *what, const char *text, st_err *err) {
    return n >= 1 ? ST_OK : st_set(err, ST_ERR_ARG, "judge: the %s '%s' has no tokens", what, text);
}

st_code judge_tokens(const tok *tk, chat_kind k, const char *default_system, const char *question,
                     const char *yes, const char *no, judge_prompt *out, st_err *err) {
    memset(out, 0, sizeof *out);
    if (!question) question = JUDGE_DEFAULT_QUESTION;
    bool chat = k != CHAT_NONE;
    if (!yes) yes = chat ? "Yes" : " yes";
    if (!no) no = chat ? "No" : " no";
    char *text = NULL;
    if (chat) {
        size_t len = chat_user_turn(k, default_system, question, false, NULL, 0);
        if ((text = malloc(len + 1))) chat_user_turn(k, default_system, question, false, text, len + 1);
    } else {
        size_t len = strlen(question) + 16;
        if ((text = malloc(len))) snprintf(text, len, "\n%s\nAnswer:", question);
    }
    st_code rc = text ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) {
        out->prompt = chat ? encode_special(tk, text, &out->n_prompt, err) : merge_encode(tk, text, &out->n_prompt, err);
        rc = out->prompt ? need_tokens(out->n_prompt, "question", question, err) : ST_ERR_NOMEM;
    }
    if (!rc) rc = (out->yes = merge_encode(tk, yes, &out->n_yes, err)) ? need_tokens(out->n_yes, "answer", yes, err)
                                                                          : ST_ERR_NOMEM;
    if (!rc) rc = (out->no = merge_encode(tk, no, &out->n_no, err)) ? ST_OK : ST_ERR_NOMEM;
    free(text);
    if (rc) judge_tokens_free(out);
    return rc;
}

static int32_t *dup_tokens(const int32_t *t, int32_t n) {
    int32_t *d = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (d && n > 0) memcpy(d, t, sizeof(int32_t) * (size_t)n);
    return d;
}

st_code judge_tokens_copy(judge_prompt *dst, const judge_prompt *src, st_err *err) {
    *dst = (judge_prompt){.prompt = dup_tokens(src->prompt, src->n_prompt), .n_prompt = src->n_prompt,
                          .yes = dup_tokens(src->yes, src->n_yes), .n_yes = src->n_yes,
                          .no = dup_tokens(src->no, src->n_no), .n_no = src->n_no};
    if (dst->prompt && dst->yes && dst->no) return ST_OK;
    judge_tokens_free(dst);
    return st_set(err, ST_ERR_NOMEM, "out of memory");
}

/* ---- attach, step, read ---- */

void judge_free(judge *jg) {
    if (!jg) return;
    free(jg->branch);
    free(jg->top);
    free(jg->last);
    free(jg->ans);
    free(jg->score);
    memset(jg, 0, sizeof *jg);
}

void judge_detach(judge *jg, forest *f) {
    for (int32_t i = 0; jg->attached && i < jg->n; i++)
        if (forest_get(f, jg->top[i])) forest_prune(f, jg->top[i], NULL);
    jg->attached = false;
}

static st_code grow_arrays(judge *jg, int32_t n, st_err *err) {
    judge_free(jg);
    jg->branch = malloc(sizeof(forest_id) * (size_t)n);
    jg->top = malloc(sizeof(forest_id) * (size_t)n);
    jg->last = malloc(sizeof(forest_id) * (size_t)n);
    jg->ans = malloc(sizeof(forest_id) * (size_t)n * 2);
    jg->score = malloc(sizeof(double) * (size_t)n);
    if (!jg->branch || !jg->top || !jg->last || !jg->ans || !jg->score) {
        judge_free(jg);
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    jg->n = n;
    return ST_OK;
}

/* The first node of the chain under parent whose last node is last. */
static forest_id chain_top(const forest *f, forest_id parent, forest_id last) {
    forest_id at = last;
    for (;;) {
        const forest_node *nd = forest_get(f, at);
        forest_id up = forest_id_at(f, nd->parent);
        if (up == parent) return at;
        at = up;
    }
}

/* Appends answer a's prefix (all but its last token) under the judge's last node, every
 * node asking for logits; *last = FOREST_NONE for a one-token answer. */
static st_code attach_answer(forest *f, forest_id under, const int32_t *a, int32_t n, forest_id *last,
                             st_err *err) {
    *last = FOREST_NONE;
    if (n < 2) return ST_OK;
    st_code rc = forest_append(f, under, a, NULL, n - 1, last, err);
    for (forest_id at = *last; !rc && at != under; at = forest_id_at(f, forest_get(f, at)->parent))
        forest_set_flags(f, at, FOREST_WANT_LOGITS, 0);
    return rc;
}

/* Where branch's judge hangs (judge_cut): *under = the last node of a new chain under
 * cut->from holding the thinking's close mark and the answer, or the branch itself when
 * its text has no close. */
static st_code answer_chain(forest *f, const judge_cut *cut, forest_id branch, forest_id *under, st_err *err) {
    *under = branch;
    char *text = merge_branch_text(f, cut->tk, cut->from, branch, err);
    if (!text) return err->code;
    const char *close = chat_think_close(text, NULL);
    int32_t n = 0, *toks = close ? encode_special(cut->tk, close, &n, err) : NULL;
    st_code rc = close && !toks ? err->code : ST_OK;
    if (!rc && n > 0) rc = forest_append(f, cut->from, toks, NULL, n, under, err);
    free(toks);
    free(text);
    return rc;
}

st_code judge_attach(judge *jg, forest *f, const judge_prompt *jp, const forest_id *branches, int32_t n,
                     bool want_branch_logits, const judge_cut *cut, st_err *err) {
    if (n < 1 || jp->n_prompt < 1 || jp->n_yes < 1)
        return st_set(err, ST_ERR_ARG, "judge: %s", n < 1 ? "no branches to judge" : "an empty judge");
    for (int32_t i = 0; i < n; i++)
        if (!forest_get(f, branches[i])) return st_set(err, ST_ERR_ARG, "judge: branch %d no longer exists", i);
    st_code rc = grow_arrays(jg, n, err);
    if (rc) return rc;
    jg->attached = true;
    jg->branch_logits = want_branch_logits;
    for (int32_t i = 0; i < n; i++) jg->top[i] = FOREST_NONE, jg->score[i] = NAN;
    for (int32_t i = 0; i < n && !rc; i++) {
        jg->branch[i] = branches[i];
        forest_id under = branches[i];
        if (cut && (rc = answer_chain(f, cut, branches[i], &under, err))) break;
        if (under != branches[i]) jg->top[i] = chain_top(f, cut->from, under);
        rc = forest_append(f, under, jp->prompt, NULL, jp->n_prompt, &jg->last[i], err);
        if (rc) break;
        if (under == branches[i]) jg->top[i] = chain_top(f, branches[i], jg->last[i]);
        forest_set_flags(f, jg->last[i], FOREST_WANT_LOGITS, FOREST_NO_LOGITS);
        rc = attach_answer(f, jg->last[i], jp->yes, jp->n_yes, &jg->ans[2 * i], err);
        if (!rc) rc = attach_answer(f, jg->last[i], jp->no, jp->n_no, &jg->ans[2 * i + 1], err);
    }
    if (rc) {
        judge_detach(jg, f);
        return rc;
    }
    /* a branch's own logits: a pending one is computed as a row anyway, a computed one is
     * re-scored in its slot */
    for (int32_t i = 0; want_branch_logits && i < n; i++) forest_set_flags(f, branches[i], FOREST_WANT_LOGITS, 0);
    return ST_OK;
}

/* The nodes and tokens whose log-probabilities sum to log P(a | path to `from`) over the
 * tokens a[0..n): the first read at from, the others at the answer prefix's nodes (whose
 * last node is pre), into node[0..n) and tok[0..n). */
static void answer_reads(const forest *f, forest_id from, forest_id pre, const int32_t *a, int32_t n,
                         forest_id *node, int32_t *tok) {
    node[0] = from, tok[0] = a[0];
    forest_id at = pre;
    for (int32_t j = n - 1; j >= 1; j--) {
        node[n - j] = at, tok[n - j] = a[j];
        at = forest_id_at(f, forest_get(f, at)->parent);
    }
}

static double sum_lp(const float *lp, int32_t n) {
    double s = lp[0];
    for (int32_t j = 1; j < n; j++) s += lp[j];
    return s;
}

/* Every branch's score: log P(yes) - log P(no), the log-probabilities read in one
 * step_logprobs_of (a device brings back the logits it lacks together). */
static st_code score_branches(judge *jg, const forest *f, step_plan *p, const judge_prompt *jp, st_err *err) {
    const int32_t per = jp->n_yes + jp->n_no, n = jg->n * per;
    const size_t m = (size_t)(n > 0 ? n : 1);
    forest_id *node = malloc(sizeof *node * m);
    int32_t *tok = malloc(sizeof *tok * m);
    float *lp = malloc(sizeof *lp * m);
    st_code rc = node && tok && lp ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; !rc && i < jg->n; i++) {
        answer_reads(f, jg->last[i], jg->ans[2 * i], jp->yes, jp->n_yes, node + i * per, tok + i * per);
        if (jp->n_no > 0)
            answer_reads(f, jg->last[i], jg->ans[2 * i + 1], jp->no, jp->n_no, node + i * per + jp->n_yes,
                         tok + i * per + jp->n_yes);
    }
    if (!rc) step_logprobs_of(p, n, node, tok, lp);
    for (int32_t i = 0; !rc && i < jg->n; i++) {
        jg->score[i] = sum_lp(lp + i * per, jp->n_yes);
        if (jp->n_no > 0) jg->score[i] -= sum_lp(lp + i * per + jp->n_yes, jp->n_no);
    }
    free(node), free(tok), free(lp);
    return rc;
}

static void clear_branch_logits(judge *jg, forest *f) {
    for (int32_t i = 0; i < jg->n; i++) {
        const forest_node *nd = forest_get(f, jg->branch[i]);
        if (nd && nd->state == FOREST_COMPUTED) forest_set_flags(f, jg->branch[i], 0, FOREST_WANT_LOGITS);
    }
}

st_code judge_step(judge *jg, forest *f, step_plan *p, model_ctx *c, const judge_prompt *jp, st_err *err) {
    /* the scores read the answers' log-probabilities alone */
    st_code rc = jg->branch_logits ? step_forest(f, p, c, err) : step_forest_topk(f, p, c, 0, err);
    if (!rc) rc = score_branches(jg, f, p, jp, err);
    if (rc) {
        judge_detach(jg, f);
        clear_branch_logits(jg, f);
        return rc;
    }
    judge_detach(jg, f);
    jg->scored = true;
    return ST_OK;
}

/* ---- ranking ---- */

/* x ranks before y: higher scores first, NAN last. */
static bool before(double x, double y) {
    return isnan(y) ? !isnan(x) : !isnan(x) && x > y;
}

void judge_rank(const double *score, int32_t *idx, int32_t n) {
    /* insertion sort: stable (ties keep their order) and n is a handful of branches */
    for (int32_t i = 1; i < n; i++) {
        int32_t v = idx[i], j = i;
        for (; j > 0 && before(score[v], score[idx[j - 1]]); j--) idx[j] = idx[j - 1];
        idx[j] = v;
    }
}

/* ---- the strategy table (strategy.h) ----
 * the judge (judge.h) behind the strategy interface (strategy.h): one step judges the
 * given branches; the results are the branches, best score first, and the scores op
 * gives every branch's score to views. */

typedef struct judge_run {
    judge_prompt jp;  /* owned copy */
    judge jg;
    forest_id *branches, start;
    forest_id from;   /* where the branches' own text starts (judge_cut) */
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
    /* the caller's start (the CLI's prompt) when it is above every branch, else theirs */
    r->from = r->start;
    if (forest_get(env->f, o->from) && r->start != FOREST_NONE &&
        forest_common_ancestor(env->f, o->from, r->start) == o->from)
        r->from = o->from;
    if (judge_tokens_copy(&r->jp, o->u.judge.prompt, err)) {
        judge_run_free(r);
        return NULL;
    }
    return r;
}

static st_code judge_run_step(void *self, const strategy_env *env, st_err *err) {
    judge_run *r = self;
    if (r->done) return ST_OK;
    const judge_cut cut = {.tk = env->tk, .from = r->from};
    st_code rc = judge_attach(&r->jg, env->f, &r->jp, r->branches, r->n, false,
                              env->tk && r->from != FOREST_NONE ? &cut : NULL, err);
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

static void judge_setup(strategy_opts *o, const strategy_judge_in *in, char *note, size_t cap) {
    o->u.judge.branches = in->branches, o->u.judge.n = in->n, o->u.judge.prompt = in->prompt;
    snprintf(note, cap, "judging %d %s branch%s in one step", (int)in->n, in->which, in->n == 1 ? "" : "es");
}

const strategy_ops strat_judge_ops = {
    .name = "judge",
    .kind = STRAT_JUDGE,
    .summary = STRAT_SUM_PROGRESS,
    .judge_setup = judge_setup,
    .judge_branches = true,
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
