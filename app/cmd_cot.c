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
#include "forest/step.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_run.h"

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
    const char *model_path; /* -m, for the saved session */
    chat_kind kind;         /* the template used, CHAT_NONE for none */
} cot_opts;

/* --save: the forest with the settings and which chain (seed) made each node. */
static st_code cot_save(const prompt_model *pm, const forest *f, const strategy *c,
                        int32_t n_prompt, const cot_opts *o, st_err *err) {
    session_settings s;
    char v[32];
    st_code rc = app_session_settings(&s, "cot", o->model_path, &o->sp, o->kind, err);
    snprintf(v, sizeof v, "%d", o->k);
    if (!rc) rc = session_settings_set(&s, "chains", v, err);
    snprintf(v, sizeof v, "%d", o->budget);
    if (!rc) rc = session_settings_set(&s, "tokens", v, err);
    snprintf(v, sizeof v, "%d", n_prompt);
    if (!rc) rc = session_settings_set(&s, "prompt_tokens", v, err);
    for (int32_t i = 0; i < o->k && !rc; i++) {
        strategy_result r;
        strategy_result_at(c, f, i, &r); /* r.start: the prompt's end, where every chain forks */
        if (forest_get(f, r.leaf))
            rc = app_session_mark(&s, f, r.start, r.leaf, "cot", o->sp.seed + (uint64_t)i, err);
    }
    if (!rc) rc = app_session_save(o->so.save, f, pm->m, pm->tk, &s, err);
    session_settings_free(&s);
    return rc;
}

/* How chain i ended ("full": still running when the KV cache filled up). */
static const char *cot_ended(const strategy *c, const forest *f, int32_t i) {
    strategy_result r;
    strategy_result_at(c, f, i, &r);
    return r.end == STRAT_RUNNING ? "full" : app_result_ended(&r, false);
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

/* The progress line after a step: the chains still running. */
typedef struct cot_tick_ud {
    app_progress pr;
    int32_t budget;
} cot_tick_ud;

static bool cot_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    cot_tick_ud *u = ud;
    int32_t active = 0;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        strategy_result r;
        strategy_result_at(s, env->f, i, &r);
        active += r.end == STRAT_RUNNING;
    }
    app_progress_tick(&u->pr, "cot: step %d/%d, %d rows, %d chains running, KV %d slots",
                      st->steps, u->budget, env->plan->n_rows, active,
                      kv_alloc_used(forest_kv(env->f)));
    return true;
}

/* The chains through the cot strategy from the prompt's last token, to their ends or a
 * full KV cache. */
static st_code cot_grow(prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                        const cot_opts *o, const strategy_env *env, strategy **c,
                        app_run_stats *st, st_err *err) {
    strategy_opts co = strategy_default_opts(STRAT_COT);
    co.sample = o->sp, co.budget = o->budget, co.n_vocab = pm->m->hp.n_vocab, co.u.cot.k = o->k;
    co.stops = o->stops, co.n_stops = o->n_stops;
    st_code rc = forest_add_root(env->f, prompt, NULL, n_prompt, 0, &co.from, err);
    if (rc) return rc;
    if (!(*c = strategy_create(&co, env, err))) return err->code;
    cot_tick_ud u = {.budget = o->budget};
    app_progress_init(&u.pr, !o->quiet);
    rc = app_strategy_run(*c, env, st, cot_tick, &u, err);
    app_progress_end(&u.pr);
    return rc;
}

static st_code cot_run(prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                       const cot_opts *o, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    prompt_toks *out = calloc((size_t)o->k, sizeof *out);
    char **texts = calloc((size_t)o->k, sizeof *texts), **answers = calloc((size_t)o->k, sizeof *answers);
    step_plan plan;
    step_plan_init(&plan);
    strategy *c = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk, .emit = prompt_emit,
                        .emit_ud = out};
    app_run_stats st = {0};
    cot_tally t = {.counts = calloc((size_t)o->k, sizeof *t.counts), .winner = -1};
    st_code rc = f && out && texts && answers && t.counts ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = cot_grow(pm, prompt, n_prompt, o, &env, &c, &st, err);
    if (!rc) rc = cot_texts(pm, prompt, n_prompt, o, out, texts, answers, err);
    if (!rc && o->vote.kind) cot_vote(o, c, f, answers, &t);
    if (!rc) rc = cot_print(o, c, f, out, texts, answers, &t, err);
    if (!rc && o->so.save) rc = cot_save(pm, f, c, n_prompt, o, err);
    if (!rc && st.full)
        app_run_full_note(pm->n_slots);
    if (!rc && !o->quiet) {
        int64_t made = 0;
        for (int32_t i = 0; i < o->k; i++) made += out[i].n;
        fprintf(stderr, "cot k=%d: %d steps (prompt %d tokens in %.3f s; then %.1f rows per step "
                "on average, at most %d); generated %lld tokens in %.3f s (%.1f tok/s in all); "
                "KV slots used %d\n", o->k, st.steps, n_prompt, st.t1 - st.t0,
                app_run_mean_rows(&st), st.max_rows, (long long)made, st.t2 - st.t0,
                (double)made / (st.t2 - st.t0 + 1e-12), kv_alloc_used(forest_kv(f)));
    }
    for (int32_t i = 0; texts && answers && i < o->k; i++) free(texts[i]), free(answers[i]);
    free(texts);
    free(answers);
    free(t.counts);
    strategy_free(c);
    step_plan_free(&plan);
    prompt_toks_free(out, out ? o->k : 0);
    free(out);
    forest_free(f);
    return rc;
}

/* The command line into o, mo, pc and *prompt: -1 to go on, else the exit status (0
 * after --help, 2 for a bad option). */
static int cot_parse(int argc, char **argv, cot_opts *o, prompt_model_opts *mo, prompt_chat *pc,
                     const char **prompt) {
    enum { O_PEN = 1000, O_LASTN, O_STOP, O_VOTE };
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"chains", 1, 0, 'k'}, {"tokens", 1, 0, 'n'},
        {"repeat-penalty", 1, 0, O_PEN}, {"repeat-last-n", 1, 0, O_LASTN},
        {"stop", 1, 0, O_STOP}, {"vote", 1, 0, O_VOTE}, APP_VOTE_ALL_LONGOPT, {"json", 0, 0, 'J'},
        {"quiet", 0, 0, 'q'}, PROMPT_CHAT_LONGOPTS, {"help", 0, 0, 'h'}, SESSION_OPTS_LONGOPTS, {0, 0, 0, 0}};
    int64_t v;
    double fv;
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:p:k:n:t:c:qh", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&o->sp, ch, optarg)) >= 0 ||
            (r = prompt_chat_opt(pc, ch, optarg)) >= 0 ||
            (r = app_vote_opt(ch, O_VOTE, optarg, &o->vote, &o->json, &o->quiet)) >= 0) {
            if (r) return r;
            continue;
        }
        if (app_session_opt(&o->so, ch, optarg) == 0) continue;
        switch (ch) {
        case 'p': *prompt = optarg; break;
        case 'k':
            if (app_opt_int("-k", optarg, 1, 1 << 16, &v)) return 2;
            o->k = (int32_t)v;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 1, 1 << 24, &v)) return 2;
            o->budget = (int32_t)v;
            break;
        case O_PEN:
            if (app_parse_float(optarg, &fv) || fv <= 0)
                return app_usage_error("bad --repeat-penalty '%s' (want > 0)", optarg);
            o->sp.repeat_penalty = (float)fv;
            break;
        case O_LASTN:
            if (app_opt_int("--repeat-last-n", optarg, -1, 1 << 24, &v)) return 2;
            o->sp.repeat_last_n = (int32_t)v;
            break;
        case O_STOP:
            if (o->n_stops == COT_MAX_STOPS)
                return app_usage_error("at most %d --stop strings", COT_MAX_STOPS);
            o->stops[o->n_stops++] = optarg;
            break;
        case 'h': cot_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode cot --help", COT_USAGE);
        }
    }
    if ((r = app_opt_end(argc, argv, mo->path, "cot")) >= 0) return r;
    return -1;
}

int cmd_cot(int argc, char **argv) {
    prompt_model_opts mo = prompt_model_default_opts();
    cot_opts o = {.k = 8, .budget = 128, .sp = sample_default_params()};
    const char *prompt = "";
    prompt_chat pc = {0};
    int r = cot_parse(argc, argv, &o, &mo, &pc, &prompt);
    if (r >= 0) return r;
    if (o.so.load) return app_session_replay("cot", &o.so, &mo, o.json, o.quiet);
    o.model_path = mo.path;
    if ((r = prompt_chat_check(&pc))) return r;

    st_err err = {0};
    prompt_model pm;
    int32_t n_prompt = 0;
    int32_t *toks = prompt_open_with(&pm, &mo, &pc, prompt, 0, "the prompt", o.quiet, &n_prompt,
                                     &o.kind, &err);
    if (!toks) return app_fail(&err);
    st_code rc = ST_OK;
    if (o.k > pm.m->hp.n_vocab)
        rc = st_set(&err, ST_ERR_ARG, "-k %d is more chains than the %d tokens of the vocabulary",
                    o.k, pm.m->hp.n_vocab);
    if (!rc) rc = cot_run(&pm, toks, n_prompt, &o, &err);
    free(toks);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
