/* cmd_judge.c - `multidecode judge`: the model judges branches in one forest step
 * (engine/strategy/judge.h). The branches are given (--branch TEXT after a shared -p
 * PROMPT) or grown first as k chains of thought (-k K: the cot strategy); each gets the
 * judge under it, one step computes every judge, and the branches are printed best score
 * first. With --vote, the answers are tallied twice: a plain majority, and a vote where
 * each chain weighs P(yes) / (P(yes) + P(no)) = 1 / (1 + exp(-score)) (its judge's
 * log-odds turned back into a probability). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "app.h"
#include "json_out.h"
#include "forest/forest.h"
#include "judge_opts.h"
#include "prompt.h"
#include "strategy/cot.h"
#include "strategy/judge.h"
#include "strategy/merge.h"
#include "strategy/strategy.h"
#include "strategy_cmd.h"

#define JUDGE_MAX_BRANCHES 256
#define JUDGE_USAGE "usage: multidecode judge -m MODEL [-p PROMPT] (-b TEXT ... | -k K) [options]"

static void judge_usage(FILE *f) {
    fprintf(f, JUDGE_USAGE "\n\n"
               "The model judges branches: a short question appended under each branch, every one\n"
               "computed in ONE forest step; a branch's score is log P(yes) - log P(no) at its\n"
               "judge's end (the log-odds of the yes answer; with --no '' just log P(yes)). The\n"
               "branches are printed best first. A branch that closes its thinking (</think>,\n"
               "gpt-oss's final channel) is judged on what follows it, its answer; one still\n"
               "thinking is judged whole.\n\n" PROMPT_MODEL_HELP
               "  -p, --prompt TEXT    the context every branch continues (default empty)\n"
               "  -b, --branch TEXT    a branch: text continuing the prompt (repeatable)\n"
               "  -k, --chains K       instead: grow K chains of thought from the prompt (cot)\n"
               "  -n, --tokens N       tokens per chain at most (with -k; default 128)\n"
               "      --temp T         temperature for -k; 0 = greedy (default 0.8)\n" PROMPT_SAMPLE_HELP
               JUDGE_OPTS_HELP
               "      --vote PATTERN   last-number or marker:TEXT: majority and judge-weighted vote\n"
               "                       of the branches given and the chains that ended\n"
               APP_VOTE_ALL_HELP
               "      --json           one JSON object: {branches: [{rank, score, p_yes, text,\n"
               "                       ended (given, EOS, stop, budget), answer, counted}], vote,\n"
               "                       weighted_vote}\n"
               "  -q, --quiet          no statistics on stderr\n"
               "      --chat           -p is a user message (chat template); the judge is a user turn\n"
               PROMPT_CHAT_HELP
               "      --think on|off   the template's thinking switch (Qwen3; default on)\n");
}

typedef struct judge_opts {
    app_judge_opts jo;
    const char *branches[JUDGE_MAX_BRANCHES];
    int32_t n_branches, k, budget;
    sample_params sp;
    cot_vote_spec vote;
    bool json, quiet;
} judge_opts;

/* The branches judged: how each ended ("given" for a -b text) and whether it votes. */
typedef struct branch_set {
    forest_id id[JUDGE_MAX_BRANCHES];
    const char *ended[JUDGE_MAX_BRANCHES];
    bool counts[JUDGE_MAX_BRANCHES];
    int32_t n;
} branch_set;

/* What the run gives to print. */
typedef struct judged {
    int32_t n;
    char **text, **answer; /* (n) best first; answer NULL when none */
    const char *ended[JUDGE_MAX_BRANCHES]; /* (n) best first, as branch_set's */
    bool counts[JUDGE_MAX_BRANCHES];
    double *score;
    int32_t winner, votes, wwinner; /* majority's and weighted vote's chain, -1: none */
    double wweight, wtotal;
    double t_grow, t_judge;
    int32_t judge_rows;
} judged;

static void judged_free(judged *j) {
    for (int32_t i = 0; j->text && j->answer && i < j->n; i++) free(j->text[i]), free(j->answer[i]);
    free(j->text), free(j->answer), free(j->score);
}

static double p_yes(double score) { return 1.0 / (1.0 + exp(-score)); }

/* The weighted vote: the answer whose chains' p_yes sum is the largest. */
static void weighted_vote(judged *j) {
    j->wwinner = -1, j->wweight = 0, j->wtotal = 0;
    for (int32_t i = 0; i < j->n; i++) {
        if (!j->answer[i] || !j->counts[i]) continue;
        j->wtotal += p_yes(j->score[i]);
        double w = 0;
        for (int32_t k = 0; k < j->n; k++)
            if (j->answer[k] && j->counts[k] && !strcmp(j->answer[k], j->answer[i])) w += p_yes(j->score[k]);
        if (w > j->wweight) j->wweight = w, j->wwinner = i;
    }
}

/* Steps s on the commands' loop (strategy_run.h) with its progress line; a full KV cache is
 * an error here, since neither the chains nor the judges can be judged in part. */
static st_code judge_drive(strategy *s, const strategy_env *env, const judge_opts *o, int32_t n_slots,
                           app_run_stats *st, st_err *err) {
    app_progress pr;
    app_progress_init(&pr, !o->quiet);
    st_code rc = app_strategy_run(s, env, st, app_run_progress_tick, &pr, err);
    app_progress_end(&pr);
    return !rc && st->full ? app_run_full_error(s, st, n_slots, err) : rc;
}

/* The branches under `at`: the given texts appended, or k chains grown from it. */
static st_code make_branches(prompt_model *pm, const strategy_env *env, forest_id at, const judge_opts *o,
                             branch_set *out, st_err *err) {
    out->n = 0;
    if (o->k == 0) {
        for (int32_t i = 0; i < o->n_branches; i++) {
            int32_t nt;
            int32_t *t = merge_encode(pm->tk, o->branches[i], &nt, err);
            if (!t) return ST_ERR_NOMEM;
            out->ended[out->n] = "given", out->counts[out->n] = true;
            st_code rc = nt > 0 ? forest_append(env->f, at, t, NULL, nt, &out->id[out->n++], err)
                                : st_set(err, ST_ERR_ARG, "branch %d has no tokens", i + 1);
            free(t);
            if (rc) return rc;
        }
        return ST_OK;
    }
    strategy_opts so = strategy_opts_for(strategy_find("cot"));
    so.from = at, so.sample = o->sp, so.budget = o->budget, so.n_vocab = pm->m->hp.n_vocab;
    so.u.cot.k = o->k;
    strategy *s = strategy_create(&so, env, err);
    app_run_stats st;
    st_code rc = s ? judge_drive(s, env, o, pm->n_slots, &st, err) : err->code;
    for (int32_t i = 0; !rc && i < strategy_n_results(s); i++) {
        strategy_result r;
        strategy_result_at(s, env->f, i, &r);
        if (r.leaf == FOREST_NONE || r.leaf == at) continue; /* a chain that ended at once has none */
        out->ended[out->n] = app_result_ended(&r, false), out->counts[out->n] = cot_vote_counts(&o->vote, r.end);
        out->id[out->n++] = r.leaf;
    }
    strategy_free(s);
    return rc;
}

/* The judged branches' texts, scores, ends and answers into out, best first. */
static st_code judge_collect(const strategy *s, const forest *f, const tok *tk, forest_id at, const judge_opts *o,
                             const branch_set *br, judged *out, st_err *err) {
    int32_t nb = out->n;
    out->text = calloc((size_t)nb, sizeof *out->text), out->answer = calloc((size_t)nb, sizeof *out->answer);
    out->score = calloc((size_t)nb, sizeof *out->score);
    st_code rc = out->text && out->answer && out->score ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; !rc && i < nb; i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        out->score[i] = r.score;
        for (int32_t b = 0; b < br->n; b++)
            if (br->id[b] == r.leaf) out->ended[i] = br->ended[b], out->counts[i] = br->counts[b];
        if (!(out->text[i] = merge_branch_text(f, tk, at, r.leaf, err))) rc = err->code;
        size_t cap = out->text[i] ? strlen(out->text[i]) + 1 : 0;
        if (!rc && o->vote.kind && (out->answer[i] = malloc(cap)) &&
            cot_extract(&o->vote, out->text[i], out->answer[i], cap) < 0)
            free(out->answer[i]), out->answer[i] = NULL;
    }
    if (!rc && o->vote.kind) {
        out->winner = cot_majority((const char *const *)out->answer, out->counts, nb, &out->votes);
        weighted_vote(out);
    }
    return rc;
}

/* The branches that take part in the votes. */
static int32_t n_counted(const judged *j) {
    int32_t n = 0;
    for (int32_t i = 0; i < j->n; i++) n += j->counts[i];
    return n;
}

static json_t *vote_json(const judged *j, int32_t winner, json_t *count, const char *key) {
    json_t *v = json_object();
    jo_set(&v, "answer", winner >= 0 ? jo_str(j->answer[winner]) : json_null());
    jo_set(&v, key, count);
    jo_set(&v, "of", json_integer(j->n));
    jo_set(&v, "counted", json_integer(n_counted(j)));
    return v;
}

/* --json through json_out.h: branch text that ends inside a character stays (jo_str). */
static st_code judge_print_json(const judge_opts *o, const judged *j, st_err *err) {
    json_t *root = json_object(), *arr = json_array();
    for (int32_t i = 0; i < j->n; i++) {
        json_t *b = json_object();
        jo_set(&b, "rank", json_integer(i + 1));
        jo_set(&b, "score", jo_sig(j->score[i], 9));
        jo_set(&b, "p_yes", jo_sig(p_yes(j->score[i]), 9));
        jo_set(&b, "text", jo_str(j->text[i]));
        jo_set(&b, "ended", jo_str(j->ended[i] ? j->ended[i] : "?"));
        if (o->vote.kind) jo_set(&b, "answer", j->answer[i] ? jo_str(j->answer[i]) : json_null());
        if (o->vote.kind) jo_set(&b, "counted", json_boolean(j->counts[i]));
        jo_push(&arr, b);
    }
    jo_set(&root, "branches", arr);
    if (o->vote.kind) {
        jo_set(&root, "vote", vote_json(j, j->winner, json_integer(j->votes), "votes"));
        jo_set(&root, "weighted_vote", vote_json(j, j->wwinner, jo_sig(j->wweight, 9), "weight"));
    }
    return jo_print(root, err);
}

static st_code judge_print(const judge_opts *o, const judged *j, st_err *err) {
    if (o->json) return judge_print_json(o, j, err);
    for (int32_t i = 0; i < j->n; i++) {
        printf("--- #%d score %+.4f (p_yes %.3f, %s)", i + 1, j->score[i], p_yes(j->score[i]), j->ended[i]);
        if (o->vote.kind) printf("; answer: %s%s", j->answer[i] ? j->answer[i] : "(none)", j->counts[i] ? "" : ", not counted");
        printf("\n%s\n", j->text[i]);
    }
    if (o->vote.kind && j->winner >= 0)
        printf("=== vote: %s (%d of the %d counted)\n=== judge-weighted vote: %s (weight %.3f of %.3f)\n",
               j->answer[j->winner], j->votes, n_counted(j), j->answer[j->wwinner], j->wweight, j->wtotal);
    else if (o->vote.kind)
        printf("=== vote: no branch gave an answer\n");
    return ST_OK;
}

/* What judge adds to the driver: its options, the judge's tokens, the branches it
 * judges and what the report prints. */
typedef struct judge_cmd {
    judge_opts o;
    judge_prompt jp;
    branch_set br;
    double t0, t1; /* before the branches, after the judge's tokens */
    judged j;
} judge_cmd;

enum { O_VOTE = 1000 };
static const struct option judge_longopts[] = {
    {"branch", 1, 0, 'b'}, {"chains", 1, 0, 'k'}, {"tokens", 1, 0, 'n'}, JUDGE_OPTS_LONGOPTS,
    {"vote", 1, 0, O_VOTE}, APP_VOTE_ALL_LONGOPT, {0, 0, 0, 0}};

static int judge_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)is_short;
    judge_opts *o = &((judge_cmd *)self)->o;
    int r;
    int64_t v;
    if ((r = app_vote_opt(ch, O_VOTE, arg, &o->vote, &a->json, &a->quiet)) >= 0 || (r = app_judge_opt(&o->jo, ch, arg)) >= 0)
        return r;
    switch (ch) {
    case 'b':
        if (o->n_branches == JUDGE_MAX_BRANCHES) return app_usage_error("at most %d branches", JUDGE_MAX_BRANCHES);
        o->branches[o->n_branches++] = arg;
        return 0;
    case 'k': case 'n': {
        bool k = ch == 'k';
        if (app_opt_int(k ? "-k" : "-n", arg, 1, k ? JUDGE_MAX_BRANCHES : 1 << 24, &v)) return 2;
        *(k ? &o->k : &o->budget) = (int32_t)v;
        return 0;
    }
    default: return -1;
    }
}

static int judge_check(void *self, app_strat_args *a) {
    (void)a;
    const judge_opts *o = &((judge_cmd *)self)->o;
    if ((o->k > 0) == (o->n_branches > 0)) return app_usage_error("judge needs branches: -b TEXT (repeatable) or -k K");
    return -1;
}

/* The branches under the prompt (given, or grown as chains) and the judge's tokens. */
static st_code judge_setup(void *self, app_strat_run *r, st_err *err) {
    judge_cmd *c = self;
    judge_opts *o = &c->o;
    o->sp = r->a->o.sample, o->json = r->a->json, o->quiet = r->a->quiet;
    c->t0 = mono_now_s();
    st_code rc = make_branches(r->pm, &r->env, r->a->o.from, o, &c->br, err);
    int32_t nb = c->br.n;
    if (!rc && nb == 0) rc = st_set(err, ST_ERR_ARG, "no branch to judge (every chain ended at once)");
    if (!rc) rc = app_judge_tokens(r->pm, r->kind, &o->jo, &c->jp, err);
    c->t1 = mono_now_s();
    c->j.n = nb;
    r->a->o.u.judge.branches = c->br.id, r->a->o.u.judge.n = nb, r->a->o.u.judge.prompt = &c->jp;
    return rc;
}

/* The branches best first (a full KV cache is an error: the judges are one step), then
 * the statistics. */
static st_code judge_report(void *self, app_strat_run *r, st_err *err) {
    judge_cmd *c = self;
    const judge_opts *o = &c->o;
    judged *j = &c->j;
    j->t_grow = c->t1 - c->t0, j->t_judge = mono_now_s() - c->t1, j->judge_rows = (int32_t)r->st.first_rows;
    st_code rc = r->st.full ? app_run_full_error(r->s, &r->st, r->pm->n_slots, err) : ST_OK;
    if (!rc) rc = judge_collect(r->s, r->f, r->pm->tk, r->a->o.from, o, &c->br, j, err);
    if (!rc) rc = judge_print(o, j, err);
    if (!rc && !o->quiet)
        fprintf(stderr, "judge: %d branches%s in %.3f s; judged in one step of %d rows in %.3f s\n", (int)j->n,
                o->k ? " grown" : " added", j->t_grow, (int)j->judge_rows, j->t_judge);
    return rc;
}

static void judge_cmd_free(void *self) {
    judge_cmd *c = self;
    judged_free(&c->j);
    judge_tokens_free(&c->jp);
    app_judge_opts_free(&c->o.jo);
}

static const app_strat_cmd judge_cmd_ops = {
    .usage = JUDGE_USAGE, .help = judge_usage, .longopts = judge_longopts, .shortopts = "b:k:n:j:",
    .opt = judge_opt, .check = judge_check, .setup = judge_setup, .report = judge_report, .free = judge_cmd_free,
};

int cmd_judge(int argc, char **argv) {
    judge_cmd c = {.o = {.budget = 128}};
    return app_strategy_cmd(strategy_find("judge"), &judge_cmd_ops, &c, argc, argv);
}
