/* test_judge.c - the judge (engine/strategy/judge.h) on a random tiny model: every score
 * equals the one computed from linear decoding of the branch's path + the judge (+ the
 * answer's first tokens), bit for bit; the judge chains are pruned (slots freed, the
 * forest as before); results and the scores op come best first; a full cache leaves the
 * forest as it was; the default judge's tokens. */
#include "t.h"

#include <math.h>
#include <string.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "strategy/judge.h"
#include "strategy/strategy.h"
#include "tok/tok.h"
#include "t_model.h"

#define SLOTS 256
#define NB 4 /* branches */

static const model *g_m;
static const tok *g_tk;

static const int32_t prompt[] = {1, 300, 317, 331, 300, 317, 345};
#define NP ((int32_t)(sizeof prompt / sizeof prompt[0]))
/* branch i: the prompt, then br[i][0..br_len[i]) */
static const int32_t br[NB][3] = {{400, 401, 402}, {410, 0, 0}, {400, 401, 420}, {430, 431, 0}};
static const int32_t br_len[NB] = {3, 1, 3, 2};
static int32_t q[] = {280, 290, 300, 317, 299};
static int32_t yes2[] = {350, 351}, yes1[] = {350}, no1[] = {352};

/* log softmax of the logits after seq[0..n) decoded linearly in a fresh context. */
static bool ref_logprobs(const int32_t *seq, int32_t n, float *lp) {
    int32_t V = g_m->hp.n_vocab;
    model_ctx *c = t_new_ctx(g_m, n + 1);
    float *lg = malloc(sizeof(float) * (size_t)V);
    bool ok = c && lg && t_linear(c, seq, n, 0, lg) == ST_OK;
    if (ok) sample_log_softmax(lg, V, lp);
    free(lg);
    model_ctx_free(c);
    return ok;
}

/* The score judge.h defines, from linear decoding of path + judge (+ answer prefixes). */
static double ref_score(const int32_t *path, int32_t n, const judge_prompt *jp, bool *ok) {
    int32_t seq[320], V = g_m->hp.n_vocab, len = 0;
    float *lp = malloc(sizeof(float) * (size_t)V);
    memcpy(seq, path, sizeof(int32_t) * (size_t)n);
    memcpy(seq + n, jp->prompt, sizeof(int32_t) * (size_t)jp->n_prompt);
    len = n + jp->n_prompt;
    double sc[2] = {0, 0};
    const int32_t *ans[2] = {jp->yes, jp->no};
    int32_t na[2] = {jp->n_yes, jp->n_no};
    *ok = lp != NULL;
    for (int a = 0; a < 2 && *ok; a++) {
        if (na[a] == 0) continue;
        /* the same order of additions as the engine: first token, then the last down */
        double s = 0;
        float first = NAN;
        float later[8];
        for (int32_t j = 0; j < na[a] && *ok; j++) {
            memcpy(seq + len, ans[a], sizeof(int32_t) * (size_t)j);
            *ok = ref_logprobs(seq, len + j, lp);
            if (j == 0) first = lp[ans[a][0]];
            else later[j] = lp[ans[a][j]];
        }
        s = first;
        for (int32_t j = na[a] - 1; j >= 1; j--) s += later[j];
        sc[a] = s;
    }
    free(lp);
    double s = sc[0];
    if (jp->n_no > 0) s -= sc[1];
    return s;
}

typedef struct rig {
    model_ctx *c;
    forest *f;
    step_plan plan;
    forest_id b[NB];
} rig;

/* A forest with the prompt and NB branches under it; computed when compute. */
static bool rig_init(rig *r, int32_t slots, bool compute) {
    st_err err = {0};
    r->c = t_new_ctx(g_m, slots);
    r->f = forest_init(slots, 0);
    step_plan_init(&r->plan);
    forest_id last;
    if (!r->c || !r->f || forest_add_root(r->f, prompt, NULL, NP, 0, &last, &err)) return false;
    for (int i = 0; i < NB; i++)
        if (forest_append(r->f, last, br[i], NULL, br_len[i], &r->b[i], &err)) return false;
    return !compute || step_forest(r->f, &r->plan, r->c, &err) == ST_OK;
}

static void rig_free(rig *r) {
    step_plan_free(&r->plan);
    forest_free(r->f);
    model_ctx_free(r->c);
}

static strategy *judge_run(rig *r, const judge_prompt *jp, st_err *err, st_code *rc) {
    strategy_env env = {.f = r->f, .plan = &r->plan, .ctx = r->c, .tk = g_tk};
    strategy_opts o = strategy_default_opts(STRAT_JUDGE);
    o.n_vocab = g_m->hp.n_vocab;
    o.u.judge.branches = r->b;
    o.u.judge.n = NB;
    o.u.judge.prompt = jp;
    strategy *s = strategy_create(&o, &env, err);
    *rc = s ? strategy_step(s, &env, err) : err->code;
    return s;
}

/* Exactness and ranking for one judge, over pending or computed branches. */
static void check_exact(const judge_prompt *jp, bool computed, const char *what) {
    rig r;
    st_err err = {0};
    if (!rig_init(&r, SLOTS, computed)) {
        T_CHECK(0, "%s: rig", what);
        rig_free(&r);
        return;
    }
    st_code rc;
    strategy *s = judge_run(&r, jp, &err, &rc);
    T_CHECK(s && rc == ST_OK && strategy_done(s), "%s: one step judges all: %s", what, err.msg);
    if (!s || rc) {
        strategy_free(s);
        rig_free(&r);
        return;
    }
    int32_t n = strategy_n_results(s), exact = 0, found = 0;
    double prev = INFINITY;
    bool ordered = true;
    for (int32_t i = 0; i < n; i++) {
        strategy_result res;
        strategy_result_at(s, r.f, i, &res);
        ordered &= res.score <= prev;
        prev = res.score;
        for (int k = 0; k < NB; k++) {
            if (res.leaf != r.b[k]) continue;
            found++;
            int32_t path[16];
            memcpy(path, prompt, sizeof prompt);
            memcpy(path + NP, br[k], sizeof(int32_t) * (size_t)br_len[k]);
            bool ok;
            double want = ref_score(path, NP + br_len[k], jp, &ok);
            if (ok && !memcmp(&want, &res.score, sizeof want)) exact++;
            else fprintf(stderr, "  branch %d: judge %.9g, linear %.9g\n", k, res.score, want);
        }
    }
    T_CHECK(n == NB && found == NB, "%s: a result per branch (%d)", what, n);
    T_CHECK(exact == NB, "%s: every score equals linear decoding's, bit for bit (%d of %d)", what, exact, NB);
    T_CHECK(ordered, "%s: results best first", what);
    forest_id ids[NB];
    double sc[NB];
    int32_t ns = strategy_scores(s, ids, sc, NB);
    strategy_result best;
    strategy_result_at(s, r.f, 0, &best);
    T_CHECK(ns == NB && ids[0] == best.leaf && sc[0] == best.score, "%s: the scores op, best first", what);
    T_CHECK(forest_n_pending(r.f) == 0 && forest_n_live(r.f) == NP + 9 &&
                kv_alloc_used(forest_kv(r.f)) == NP + 9 && forest_check(r.f, &err) == ST_OK,
            "%s: judge chains pruned, slots freed (%d live, %d slots used) %s", what, forest_n_live(r.f),
            kv_alloc_used(forest_kv(r.f)), err.msg);
    strategy_free(s);
    rig_free(&r);
}

static void check_full_cache(const judge_prompt *jp) {
    rig r;
    st_err err = {0};
    /* room for the prompt and branches, not for 4 judges */
    if (!rig_init(&r, NP + 9 + 5, true)) {
        T_CHECK(0, "full cache: rig");
        rig_free(&r);
        return;
    }
    st_code rc;
    strategy *s = judge_run(&r, jp, &err, &rc);
    T_CHECK(s && rc == ST_NO_KV_SLOT && !strategy_done(s), "full cache: ST_NO_KV_SLOT (%s)", st_str(rc));
    T_CHECK(forest_n_live(r.f) == NP + 9 && forest_n_pending(r.f) == 0 && kv_alloc_used(forest_kv(r.f)) == NP + 9 &&
                forest_check(r.f, &err) == ST_OK,
            "full cache: the forest as it was (%d live, %d pending)", forest_n_live(r.f), forest_n_pending(r.f));
    strategy_free(s);
    rig_free(&r);
}

/* The judge's score of the path prompt + text (special tokens parsed) + the judge, from
 * linear decoding. */
static double ref_text_score(const char *text, const judge_prompt *jp, bool *ok) {
    int32_t n = 0, path[256];
    st_err err = {0};
    int32_t *t = tok_encode_alloc(g_tk, text, strlen(text), false, true, &n, &err);
    *ok = t && NP + n <= 256 - 16;
    if (!*ok) return free(t), NAN;
    memcpy(path, prompt, sizeof prompt);
    memcpy(path + NP, t, sizeof(int32_t) * (size_t)n);
    free(t);
    return ref_score(path, NP + n, jp, ok);
}

/* A reasoning model's branches are judged on what follows their thinking: two branches
 * with one answer and different thoughts get one score, bit for bit, the score of the
 * prompt + the close mark and the answer + the judge; a different answer after the same
 * thought another; a branch whose thinking is not closed is judged whole. from_leaf: the
 * strategy's start is a leaf (as the TUI's selection can be), so the branches' common
 * ancestor is where their text starts. */
static void check_answer_cut(const judge_prompt *jp, bool from_leaf) {
    static const char *const texts[] = {
        "<think>one two</think>\n\nblue",         /* A */
        "<think>three four five</think>\n\nblue", /* B: A's answer, another thought */
        "<think>one two</think>\n\nred",          /* C: A's thought, another answer */
        "<think>one two blue",                    /* D: still thinking */
        "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>blue"};
    enum { NT = sizeof texts / sizeof texts[0] };
    st_err err = {0};
    model_ctx *c = t_new_ctx(g_m, 4 * SLOTS);
    forest *f = forest_init(4 * SLOTS, 0);
    step_plan plan;
    step_plan_init(&plan);
    forest_id last, b[NT];
    bool ok = c && f && !forest_add_root(f, prompt, NULL, NP, 0, &last, &err);
    for (int i = 0; ok && i < NT; i++) {
        int32_t n = 0, *t = tok_encode_alloc(g_tk, texts[i], strlen(texts[i]), false, true, &n, &err);
        ok = t && !forest_append(f, last, t, NULL, n, &b[i], &err);
        free(t);
    }
    ok = ok && step_forest(f, &plan, c, &err) == ST_OK;
    int32_t live = ok ? forest_n_live(f) : 0;
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .tk = g_tk};
    strategy_opts o = strategy_default_opts(STRAT_JUDGE);
    o.n_vocab = g_m->hp.n_vocab, o.from = from_leaf ? b[0] : last;
    o.u.judge.branches = b, o.u.judge.n = NT, o.u.judge.prompt = jp;
    strategy *s = ok ? strategy_create(&o, &env, &err) : NULL;
    ok = s && strategy_step(s, &env, &err) == ST_OK;
    T_CHECK(ok, "answer cut: judged: %s", err.msg);
    forest_id ids[NT];
    double sc[NT], by[NT];
    int32_t ns = ok ? strategy_scores(s, ids, sc, NT) : 0;
    for (int i = 0; i < NT; i++) {
        by[i] = NAN;
        for (int k = 0; k < ns; k++)
            if (ids[k] == b[i]) by[i] = sc[k];
    }
    bool ra, rd, rh;
    double want_a = ref_text_score("</think>\n\nblue", jp, &ra), want_d = ref_text_score(texts[3], jp, &rd);
    double want_h = ref_text_score("<|channel|>final<|message|>blue", jp, &rh);
    const char *w = from_leaf ? " (start at a leaf)" : "";
    T_CHECK(ok && by[0] == by[1] && isfinite(by[0]), "one answer, two thoughts: one score%s (%.9g, %.9g)", w,
            by[0], by[1]);
    T_CHECK(ok && by[0] != by[2], "one thought, two answers: two scores%s (%.9g, %.9g)", w, by[0], by[2]);
    T_CHECK(ra && by[0] == want_a, "the score is linear decoding's of prompt + '</think>' + answer + judge%s "
            "(%.9g, %.9g)", w, by[0], want_a);
    T_CHECK(rh && by[4] == want_h, "harmony: judged from its final channel%s (%.9g, %.9g)", w, by[4], want_h);
    T_CHECK(rd && by[3] == want_d, "unclosed thinking: judged whole%s (%.9g, %.9g)", w, by[3], want_d);
    T_CHECK(ok && forest_n_live(f) == live && forest_n_pending(f) == 0 && forest_check(f, &err) == ST_OK,
            "answer chains pruned with the judges%s (%d live, %d before)", w, ok ? forest_n_live(f) : 0, live);
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
}

static void check_tokens(void) {
    judge_prompt jp;
    st_err err = {0};
    st_code rc = judge_tokens(g_tk, CHAT_NONE, NULL, NULL, NULL, NULL, &jp, &err);
    T_CHECK(rc == ST_OK && jp.n_prompt > 5 && jp.n_yes >= 1 && jp.n_no >= 1, "default judge: %d + %d / %d tokens %s",
            jp.n_prompt, jp.n_yes, jp.n_no, err.msg);
    judge_tokens_free(&jp);
    rc = judge_tokens(g_tk, CHAT_NONE, NULL, "Good?", " yes", "", &jp, &err);
    T_CHECK(rc == ST_OK && jp.n_no == 0, "a single-answer judge");
    judge_tokens_free(&jp);
    rc = judge_tokens(g_tk, CHAT_NONE, NULL, "Good?", "", NULL, &jp, &err);
    T_CHECK(rc == ST_ERR_ARG && !jp.prompt, "an empty answer is refused: %s", err.msg);
}

int main(void) {
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "random model: %s", err.msg);
    if (!m || !tk) return t_done();
    g_m = m, g_tk = tk;
    judge_prompt two = {q, 5, yes1, 1, no1, 1}, multi = {q, 5, yes2, 2, no1, 1}, one = {q, 4, yes2, 2, NULL, 0};
    check_exact(&two, true, "yes/no over computed branches");
    check_exact(&two, false, "yes/no over pending branches");
    check_exact(&multi, true, "two-token yes");
    check_exact(&one, true, "single answer");
    check_full_cache(&two);
    check_answer_cut(&two, false);
    check_answer_cut(&multi, true);
    check_tokens();
    tok_free(tk);
    model_free(m);
    return t_done();
}
