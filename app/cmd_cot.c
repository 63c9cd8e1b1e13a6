/* cmd_cot.c - `multidecode cot`: k chains of thought from one prompt, forked with k
 * distinct first tokens and grown together in one forest (engine/strategy/cot.h), printed at the
 * end; optionally a self-consistency vote over an answer extracted from each chain.
 *
 * Chain i samples with seed S + i (S = --seed), so chain 0 is what `generate --seed S`
 * prints, and every chain is reproducible alone. Stop strings (--stop, repeatable) end a
 * chain once its text ends with one of them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/cot.h"
#include "forest/forest.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_cmd.h"

#define COT_MAX_STOPS 16

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define COT_USAGE "usage: multidecode cot -m MODEL -p PROMPT [options]"

static void cot_usage(FILE *f) {
    fprintf(f,
            COT_USAGE "\n\n"
            "k chains of thought from one prompt: k distinct first tokens (sampled without\n"
            "replacement, or the k best when greedy), then all chains grown together, one\n"
            "forest step per token. Optionally a self-consistency vote over their answers.\n\n"
            PROMPT_MODEL_HELP
            "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n"
            "  -k, --chains K       chains (default 8)\n"
            "  -n, --tokens N       tokens per chain at most (default 128)\n"
            "      --temp T         temperature; 0 = greedy (default 0.8)\n"
            PROMPT_SAMPLE_HELP
            "      --repeat-penalty P  penalise tokens of the recent history (default 1 = off)\n"
            "      --repeat-last-n N   history the penalty looks at (default 64; -1 = all)\n"
            "      --stop TEXT      end a chain once its text ends with TEXT (repeatable)\n"
            "      --vote PATTERN   last-number, or marker:TEXT (the text after the last TEXT,\n"
            "                       to the end of its line): report the majority answer of\n"
            "                       the chains that ended (an end token or a --stop string)\n"
            APP_VOTE_ALL_HELP
            "      --json           one JSON object: {chains: [{chain, seed, tokens, text,\n"
            "                       ended, answer, counted}], vote: {answer, votes, of,\n"
            "                       counted}}\n"
            "  -q, --quiet          no progress or statistics on stderr\n"
            "      --chat           -p is a user message: apply the model's chat template\n"
            PROMPT_CHAT_HELP
            "      --think on|off   the template's thinking switch (Qwen3; default on)\n"
            SESSION_OPTS_HELP
            "                       (--load shows a saved session's chains, recomputed)\n");
}

typedef struct cot_opts {
    int32_t k, budget;
    sample_params sp;
    const char *stops[COT_MAX_STOPS];
    int32_t n_stops;
    cot_vote_spec vote;
    bool json, quiet;
    app_session_opts so;    /* --save / --load */
    chat_kind kind;         /* the template used, CHAT_NONE for none */
} cot_opts;

/* How chain i ended ("full": still running when the KV cache filled up). */
static const char *cot_ended(const strategy *c, const forest *f, int32_t i) {
    strategy_result r;
    strategy_result_at(c, f, i, &r);
    const char *name = strategy_end_name(r.end);
    return name ? name : "full";
}

/* The vote: which chains count (ended ones, or all with --vote-all), how many do, the
 * winning chain (-1: none) and its votes. */
typedef struct cot_tally {
    bool *counts; /* (k) */
    int32_t counted, winner, votes;
} cot_tally;

static void cot_vote(const cot_opts *o, const strategy *c, const forest *f, char **answers, cot_tally *t) {
    t->counted = 0;
    for (int32_t i = 0; i < o->k; i++) {
        strategy_result r;
        strategy_result_at(c, f, i, &r);
        t->counted += t->counts[i] = cot_vote_counts(&o->vote, r.end);
    }
    t->winner = cot_majority((const char *const *)answers, t->counts, o->k, &t->votes);
}

/* The chains (and the vote) as one JSON object. */
static st_code cot_print_json(const cot_opts *o, const strategy *c, const forest *f,
                              prompt_toks *out, char **texts, char **answers, const cot_tally *t, st_err *err) {
    json_t *chains = json_array();
    for (int32_t i = 0; i < o->k; i++) {
        json_t *ch = json_object();
        jo_set(&ch, "chain", json_integer(i));
        jo_set(&ch, "seed", jo_u64(o->sp.seed + (uint64_t)i));
        jo_set(&ch, "tokens", jo_ints(out[i].t, out[i].n));
        jo_set(&ch, "text", jo_str(texts[i]));
        jo_set(&ch, "ended", jo_str(cot_ended(c, f, i)));
        if (o->vote.kind) jo_set(&ch, "answer", answers[i] ? jo_str(answers[i]) : json_null());
        if (o->vote.kind) jo_set(&ch, "counted", json_boolean(t->counts[i]));
        jo_push(&chains, ch);
    }
    json_t *doc = json_object();
    jo_set(&doc, "chains", chains);
    if (o->vote.kind) {
        json_t *v = json_object();
        jo_set(&v, "answer", t->winner >= 0 ? jo_str(answers[t->winner]) : json_null());
        jo_set(&v, "votes", json_integer(t->votes));
        jo_set(&v, "of", json_integer(o->k));
        jo_set(&v, "counted", json_integer(t->counted));
        jo_set(&doc, "vote", v);
    }
    return jo_print(doc, err);
}

/* Prints the chains (and the vote); texts[i] and answers[i] are chain i's. ST_ERR_NOMEM
 * (JSON). */
static st_code cot_print(const cot_opts *o, const strategy *c, const forest *f, prompt_toks *out,
                         char **texts, char **answers, const cot_tally *t, st_err *err) {
    st_code rc = ST_OK;
    if (o->json) {
        rc = cot_print_json(o, c, f, out, texts, answers, t, err);
        fflush(stdout);
        return rc;
    }
    for (int32_t i = 0; i < o->k; i++) {
        unsigned long long seed = (unsigned long long)(o->sp.seed + (uint64_t)i);
        printf("--- chain %d (seed %llu, %d tokens, ended by %s", i, seed, out[i].n,
               cot_ended(c, f, i));
        if (o->vote.kind) printf("; answer: %s%s", answers[i] ? answers[i] : "(none)", t->counts[i] ? "" : ", not counted");
        printf(")\n%s\n", texts[i]);
    }
    if (o->vote.kind) {
        const char *which = o->vote.all ? "" : " that ended";
        if (t->winner >= 0) printf("=== vote: %s (%d of the %d chains%s)\n", answers[t->winner], t->votes, t->counted, which);
        else printf("=== vote: no chain%s gave an answer\n", which);
    }
    fflush(stdout);
    return rc;
}

/* Each chain's text after the prompt, and with a vote its answer (NULL: none). Fills
 * texts[0..k) and answers[0..k) with malloc'd strings. ST_ERR_NOMEM. */
static st_code cot_texts(const prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                         const cot_opts *o, const prompt_toks *out, char **texts, char **answers,
                         st_err *err) {
    for (int32_t i = 0; i < o->k; i++) {
        if (!(texts[i] = prompt_continuation(pm->tk, prompt, n_prompt, out[i].t, out[i].n)))
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        if (!o->vote.kind) continue;
        size_t cap = strlen(texts[i]) + 1;
        if (!(answers[i] = malloc(cap))) return st_set(err, ST_ERR_NOMEM, "out of memory");
        if (cot_extract(&o->vote, texts[i], answers[i], cap) < 0) {
            free(answers[i]);
            answers[i] = NULL;
        }
    }
    return ST_OK;
}

/* What cot adds to the driver: its options and each chain's tokens, text and answer. */
typedef struct cot_cmd {
    cot_opts o;
    prompt_toks *out;      /* (o.k) each chain's tokens, as the strategy emits them */
    char **texts, **answers;
    cot_tally t;           /* the vote */
} cot_cmd;

/* The progress line after a step: the chains still running. */
static bool cot_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    app_strat_run *r = ud;
    int32_t active = 0;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        strategy_result res;
        strategy_result_at(s, env->f, i, &res);
        active += !strategy_end_name(res.end);
    }
    app_progress_tick(&r->pr, "cot: step %d/%d, %d rows, %d chains running, KV %d slots",
                      st->steps, r->a->o.budget, env->plan->n_rows, active,
                      kv_alloc_used(forest_kv(env->f)));
    return true;
}

/* The chains' arrays, the strategy's emit into them; -k within the vocabulary. */
static st_code cot_setup(void *self, app_strat_run *r, st_err *err) {
    cot_cmd *c = self;
    cot_opts *o = &c->o;
    o->sp = r->a->o.sample, o->json = r->a->json, o->quiet = r->a->quiet;
    o->kind = r->kind, o->so = r->a->so;
    if (o->k > r->pm->m->hp.n_vocab)
        return st_set(err, ST_ERR_ARG, "-k %d is more chains than the %d tokens of the vocabulary",
                      o->k, r->pm->m->hp.n_vocab);
    c->out = calloc((size_t)o->k, sizeof *c->out);
    c->texts = calloc((size_t)o->k, sizeof *c->texts), c->answers = calloc((size_t)o->k, sizeof *c->answers);
    c->t.counts = calloc((size_t)o->k, sizeof *c->t.counts);
    if (!c->out || !c->texts || !c->answers || !c->t.counts) return st_set(err, ST_ERR_NOMEM, "out of memory");
    r->env.emit = prompt_emit, r->env.emit_ud = c->out;
    return ST_OK;
}

/* --save: the settings and which chain (seed) made each node. */
static st_code cot_save(void *self, const app_strat_run *r, session_settings *s, st_err *err) {
    const cot_opts *o = &((const cot_cmd *)self)->o;
    st_code rc = app_session_set_int(s, "chains", o->k, err);
    if (!rc) rc = app_session_set_int(s, "tokens", o->budget, err);
    if (!rc) rc = app_session_set_int(s, "prompt_tokens", r->n_prompt, err);
    for (int32_t i = 0; i < o->k && !rc; i++) {
        strategy_result res;
        strategy_result_at(r->s, r->f, i, &res); /* res.start: the prompt's end, where every chain forks */
        if (forest_get(r->f, res.leaf))
            rc = app_session_mark(s, r->f, res.start, res.leaf, "cot", o->sp.seed + (uint64_t)i, err);
    }
    return rc;
}

/* The chains (and the vote), --save, the full-cache note and the statistics. */
static st_code cot_report(void *self, app_strat_run *r, st_err *err) {
    cot_cmd *c = self;
    const cot_opts *o = &c->o;
    st_code rc = cot_texts(r->pm, r->prompt, r->n_prompt, o, c->out, c->texts, c->answers, err);
    if (!rc && o->vote.kind) cot_vote(o, r->s, r->f, c->answers, &c->t);
    if (!rc) rc = cot_print(o, r->s, r->f, c->out, c->texts, c->answers, &c->t, err);
    if (!rc && o->so.save) rc = app_strat_save(r, &o->sp, o->kind, err);
    if (!rc && r->st.full)
        app_run_full_note(r->pm->n_slots);
    if (!rc && !o->quiet) {
        const app_run_stats *st = &r->st;
        int64_t made = 0;
        for (int32_t i = 0; i < o->k; i++) made += c->out[i].n;
        fprintf(stderr, "cot k=%d: %d steps (prompt %d tokens in %.3f s; then %.1f rows per step "
                "on average, at most %d); generated %lld tokens in %.3f s (%.1f tok/s in all); "
                "KV slots used %d\n", o->k, st->steps, r->n_prompt, st->t1 - st->t0,
                app_run_mean_rows(st), st->max_rows, (long long)made, st->t2 - st->t0,
                (double)made / (st->t2 - st->t0 + 1e-12), kv_alloc_used(forest_kv(r->f)));
    }
    return rc;
}

static void cot_cmd_free(void *self) {
    cot_cmd *c = self;
    for (int32_t i = 0; c->texts && c->answers && i < c->o.k; i++) free(c->texts[i]), free(c->answers[i]);
    free(c->texts);
    free(c->answers);
    free(c->t.counts);
    prompt_toks_free(c->out, c->out ? c->o.k : 0);
    free(c->out);
}

enum { O_PEN = 1000, O_LASTN, O_STOP, O_VOTE };
static const struct option cot_longopts[] = {
    {"chains", 1, 0, 'k'}, {"tokens", 1, 0, 'n'}, {"repeat-penalty", 1, 0, O_PEN},
    {"repeat-last-n", 1, 0, O_LASTN}, {"stop", 1, 0, O_STOP}, {"vote", 1, 0, O_VOTE}, APP_VOTE_ALL_LONGOPT, {0, 0, 0, 0}};

/* One of cot's options into c->o (the sampler's into a->o.sample). */
static int cot_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)is_short;
    cot_opts *o = &((cot_cmd *)self)->o;
    int64_t v;
    double fv;
    int r;
    if ((r = app_vote_opt(ch, O_VOTE, arg, &o->vote, &a->json, &a->quiet)) >= 0) return r;
    switch (ch) {
    case 'k':
        if (app_opt_int("-k", arg, 1, 1 << 16, &v)) return 2;
        o->k = (int32_t)v;
        return 0;
    case 'n':
        if (app_opt_int("-n", arg, 1, 1 << 24, &v)) return 2;
        o->budget = (int32_t)v;
        return 0;
    case O_PEN:
        if (app_parse_float(arg, &fv) || fv <= 0)
            return app_usage_error("bad --repeat-penalty '%s' (want > 0)", arg);
        a->o.sample.repeat_penalty = (float)fv;
        return 0;
    case O_LASTN:
        if (app_opt_int("--repeat-last-n", arg, -1, 1 << 24, &v)) return 2;
        a->o.sample.repeat_last_n = (int32_t)v;
        return 0;
    case O_STOP:
        if (o->n_stops == COT_MAX_STOPS)
            return app_usage_error("at most %d --stop strings", COT_MAX_STOPS);
        o->stops[o->n_stops++] = arg;
        return 0;
    default: return -1;
    }
}

/* The chains' options into the strategy's. */
static int cot_check(void *self, app_strat_args *a) {
    cot_opts *o = &((cot_cmd *)self)->o;
    a->o.u.cot.k = o->k, a->o.budget = o->budget, a->o.stops = o->stops, a->o.n_stops = o->n_stops;
    return -1;
}

static const app_strat_cmd cot_cmd_ops = {
    .usage = COT_USAGE,
    .help = cot_usage,
    .longopts = cot_longopts,
    .shortopts = "k:n:",
    .session = true,
    .opt = cot_opt,
    .check = cot_check,
    .setup = cot_setup,
    .tick = cot_tick,
    .save = cot_save,
    .report = cot_report,
    .free = cot_cmd_free,
};

int cmd_cot(int argc, char **argv) {
    cot_cmd c = {.o = {.k = 8, .budget = 128}, .t = {.winner = -1}};
    return app_strategy_cmd(strategy_find("cot"), &cot_cmd_ops, &c, argc, argv);
}
