/* cmd_ask.c - `multidecode ask`: several questions over one shared context, answered in
 * parallel in one forest.
 *
 * Each question's full prompt is built first: with a chat template (the model's, unless
 * --raw), the user message "CONTEXT\n\nQUESTION" rendered and tokenised with its special
 * tokens; without one, "CONTEXT\n\nQuestion: QUESTION\nAnswer:". The longest token prefix
 * common to all of them becomes one root chain, computed and stored once; each question's
 * remaining tokens hang under it as a branch, and the answers grow together (engine/strategy/grow.h),
 * one forest step per token, greedy by default. So each answer is what decoding its own
 * prompt alone would give, while the context costs its KV slots and its prefill once. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_run.h"

#define ASK_MAX_QUESTIONS 256

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define ASK_USAGE "usage: multidecode ask -m MODEL --context FILE -q QUESTION [-q QUESTION ...]"

static void ask_usage(FILE *f) {
    fprintf(f,
            ASK_USAGE "\n\n"
            PROMPT_MODEL_HELP
            "  -x, --context FILE   the text the questions are about\n"
            "  -q, --question TEXT  a question (repeat, up to %d)\n"
            "  -n, --tokens N       answer tokens at most, per question (default 128)\n"
            "      --budgets LIST   per-question budgets, comma-separated, in -q order\n"
            "                       (questions beyond the list use -n)\n"
            "      --json           one JSON object on stdout\n"
            "      --raw            no chat template: \"CONTEXT\\n\\nQuestion: Q\\nAnswer:\"\n"
            "                       (the default when the model has no template)\n"
            "      --system TEXT    system message for the chat template\n"
            "      --chat-template NAME  template to use instead of the model's\n"
            "      --quiet          no statistics on stderr\n"
            "      --temp T         temperature; 0 = greedy (default 0)\n"
            PROMPT_SAMPLE_HELP
            "                       (question i samples with seed S + i)\n"
            SESSION_OPTS_HELP
            "                       (--load shows a saved session's answers, recomputed)\n",
            ASK_MAX_QUESTIONS);
}

/* The prompt text of one question (malloc'd). */
static char *ask_text(const char *context, const char *q, bool chat) {
    const char *mid = chat ? "\n\n" : "\n\nQuestion: ", *end = chat ? "" : "\nAnswer:";
    size_t n = strlen(context) + strlen(mid) + strlen(q) + strlen(end) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s%s", context, mid, q, end);
    return s;
}

/* The command line: -1 to go on, else the exit status (0 after --help, 2 for a bad
 * option). */
typedef struct ask_opts {
    prompt_model_opts mo;
    sample_params sp;
    prompt_chat pc;
    app_session_opts so;
    const char *qs[ASK_MAX_QUESTIONS], *ctx_path;
    int32_t n_q, n_qb;                   /* questions, --budgets entries */
    int64_t budget, qbudget[ASK_MAX_QUESTIONS];
    bool json, quiet;
} ask_opts;

/* What a run makes: the model, every question's prompt tokens and the forest that grew
 * their answers. */
typedef struct ask_run {
    prompt_model pm;
    bool pm_open;
    char *context;
    int32_t *ptok[ASK_MAX_QUESTIONS], n_ptok[ASK_MAX_QUESTIONS];
    int32_t lcp, need;                   /* shared prefix tokens, all prompt tokens */
    prompt_toks *out;                    /* (n_q) each answer's tokens */
    forest *f;
    step_plan plan;
    strategy *s;                         /* the ask strategy */
    app_run_stats st;
} ask_run;

/* --budgets LIST: 0, or 2 after the message. */
static int ask_budgets_opt(ask_opts *o, const char *arg) {
    char list[1024];
    snprintf(list, sizeof list, "%s", arg);
    o->n_qb = 0;
    for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
        if (o->n_qb == ASK_MAX_QUESTIONS || app_parse_int(t, 0, 1 << 24, &o->qbudget[o->n_qb]))
            return app_usage_error("bad --budgets '%s' (at most %d integers from 0 to %d)", arg,
                                   ASK_MAX_QUESTIONS, 1 << 24);
        o->n_qb++;
    }
    return 0;
}

static int ask_parse(int argc, char **argv, ask_opts *o) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"context", 1, 0, 'x'}, {"question", 1, 0, 'q'}, {"tokens", 1, 0, 'n'},
        {"json", 0, 0, 'J'},    {"raw", 0, 0, 'R'},      {"system", 1, 0, 'Y'},
        {"chat-template", 1, 0, 'E'}, {"quiet", 0, 0, 'Q'}, {"help", 0, 0, 'h'},
        {"budgets", 1, 0, 'b'}, SESSION_OPTS_LONGOPTS, {0, 0, 0, 0}};
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:t:c:x:q:n:h", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&o->mo, ch, optarg)) >= 0 ||
            (r = prompt_sample_opt(&o->sp, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if (app_session_opt(&o->so, ch, optarg) == 0) continue;
        switch (ch) {
        case 'x': o->ctx_path = optarg; break;
        case 'q':
            if (o->n_q == ASK_MAX_QUESTIONS) return app_usage_error("at most %d questions", ASK_MAX_QUESTIONS);
            o->qs[o->n_q++] = optarg;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 0, 1 << 24, &o->budget)) return 2;
            break;
        case 'b':
            if ((r = ask_budgets_opt(o, optarg))) return r;
            break;
        case 'J': o->json = true; break;
        case 'R': case 'Y': case 'E':
            if ((r = prompt_chat_opt(&o->pc, ch, optarg))) return r;
            break;
        case 'Q': o->quiet = true; break;
        case 'h': ask_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode ask --help", ASK_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->mo.path) return app_usage_error("ask needs a model: -m MODEL");
    return -1;
}

/* What a fresh run (not --load) needs besides the model: 0 or 2 after the message. */
static int ask_check(ask_opts *o) {
    if (!o->ctx_path) return app_usage_error("ask needs a context: --context FILE");
    if (o->n_q == 0) return app_usage_error("ask needs at least one question: -q QUESTION");
    if (o->n_qb > o->n_q)
        return app_usage_error("--budgets lists %d budgets for %d questions", o->n_qb, o->n_q);
    for (int32_t i = o->n_qb; i < o->n_q; i++) o->qbudget[i] = o->budget;
    return prompt_chat_check(&o->pc);
}

/* The chat template the prompts use, CHAT_NONE for none. */
static chat_kind ask_kind(const ask_run *r, const ask_opts *o) {
    if (!o->pc.on) return CHAT_NONE;
    return o->pc.tmpl ? chat_from_name(o->pc.tmpl) : prompt_model_chat(r->pm.m->gguf);
}

/* Every question's whole prompt, then their longest common prefix and what they need of
 * the KV cache. ST_ERR_NOMEM, ST_ERR_CONTEXT, a tokeniser's codes. */
static st_code ask_prompts(ask_run *r, const ask_opts *o, st_err *err) {
    for (int32_t i = 0; i < o->n_q; i++) {
        char *text = ask_text(r->context, o->qs[i], o->pc.on);
        r->ptok[i] = text ? prompt_tokens(&r->pm, &o->pc, text, &r->n_ptok[i], NULL, err) : NULL;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!r->ptok[i]) return err->code;
    }
    r->lcp = r->n_ptok[0];
    for (int32_t i = 1; i < o->n_q; i++) {
        int32_t j = 0;
        while (j < r->lcp && j < r->n_ptok[i] && r->ptok[i][j] == r->ptok[0][j]) j++;
        r->lcp = j;
    }
    int32_t n_q = o->n_q, lcp = r->lcp, n_slots = r->pm.n_slots, need = lcp;
    for (int32_t i = 0; i < n_q; i++) need += r->n_ptok[i] - lcp;
    r->need = need;
    if (need > n_slots)
        return st_set(err, ST_ERR_CONTEXT, "the context and the %d question%s need %d KV slots "
                      "before answering (a shared prefix of %d tokens + %d question tokens), more "
                      "than the KV cache of %d (raise it with -c)", n_q, n_q > 1 ? "s" : "", need,
                      lcp, need - lcp, n_slots);
    int64_t all_budgets = 0;
    for (int32_t i = 0; i < n_q; i++) all_budgets += o->qbudget[i];
    if (!o->quiet && need + all_budgets > n_slots)
        fprintf(stderr, "multidecode: note: %d prompt tokens + %lld answer tokens may not fit "
                "in the KV cache of %d; answers stop when it is full (raise it with -c)\n", need,
                (long long)all_budgets, n_slots);
    return ST_OK;
}

/* Answers every question through the ask strategy (the shared prefix once, each
 * question's rest under it, one forest step per token); a full KV cache stops them all
 * (r->st.full). */
static st_code ask_answer(ask_run *r, const ask_opts *o, st_err *err) {
    int32_t budgets[ASK_MAX_QUESTIONS];
    for (int32_t i = 0; i < o->n_q; i++) budgets[i] = (int32_t)o->qbudget[i];
    strategy_env env = {.f = r->f, .plan = &r->plan, .ctx = r->pm.ctx, .tk = r->pm.tk,
                        .emit = prompt_emit, .emit_ud = r->out};
    strategy_opts so = strategy_default_opts(STRAT_ASK);
    so.sample = o->sp, so.budget = (int32_t)o->budget, so.n_vocab = r->pm.m->hp.n_vocab;
    so.u.ask.prompts = (const int32_t *const *)r->ptok, so.u.ask.lens = r->n_ptok;
    so.u.ask.budgets = budgets, so.u.ask.n = o->n_q;
    if (!(r->s = strategy_create(&so, &env, err))) return err->code;
    return app_strategy_run(r->s, &env, &r->st, NULL, NULL, err);
}

/* Answer i's result. */
static strategy_result ask_result(const ask_run *r, int32_t i) {
    strategy_result res;
    strategy_result_at(r->s, r->f, i, &res);
    return res;
}

static int64_t ask_unshared(const ask_run *r, int32_t n_q) {
    return (int64_t)kv_alloc_used(forest_kv(r->f)) + (r->lcp > 0 ? (int64_t)(n_q - 1) * r->lcp : 0);
}

/* The answers: "Qi: ...\nAi: ..." blocks, or one JSON object. ST_ERR_NOMEM. */
static st_code ask_print(const ask_run *r, const ask_opts *o, st_err *err) {
    json_t *answers = o->json ? json_array() : NULL;
    for (int32_t i = 0; i < o->n_q; i++) {
        strategy_result b = ask_result(r, i);
        const char *ended = app_result_ended(&b, r->st.full);
        char *ans = prompt_continuation(r->pm.tk, r->ptok[i], r->n_ptok[i], r->out[i].t, r->out[i].n);
        if (!ans) {
            json_decref(answers);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        if (o->json) {
            json_t *a = json_object();
            jo_set(&a, "question", jo_str(o->qs[i]));
            jo_set(&a, "answer", jo_str(ans));
            jo_set(&a, "prompt_tokens", json_integer(r->n_ptok[i]));
            jo_set(&a, "tokens", json_integer(b.n_tokens));
            jo_set(&a, "ended", jo_str(ended));
            jo_push(&answers, a);
        } else {
            printf("Q%d: %s\nA%d: %s\n\n", i + 1, o->qs[i], i + 1, ans);
        }
        free(ans);
    }
    if (!o->json) return ST_OK;
    chat_kind kind = ask_kind(r, o);
    json_t *doc = json_object();
    jo_set(&doc, "model", jo_str(o->mo.path));
    jo_set(&doc, "template", jo_str(kind == CHAT_NONE ? "none" : chat_name(kind)));
    jo_set(&doc, "questions", json_integer(o->n_q));
    jo_set(&doc, "shared_prefix_tokens", json_integer(r->lcp));
    jo_set(&doc, "prompt_tokens", json_integer(r->need));
    jo_set(&doc, "kv_slots_used", json_integer(kv_alloc_used(forest_kv(r->f))));
    jo_set(&doc, "kv_slots_unshared", json_integer(ask_unshared(r, o->n_q)));
    jo_set(&doc, "kv_slots", json_integer(r->pm.n_slots));
    jo_set(&doc, "steps", json_integer(r->st.steps));
    jo_set(&doc, "answers", answers);
    return jo_print(doc, err);
}

/* The statistics line on stderr. */
static void ask_stats(const ask_run *r, const ask_opts *o) {
    int64_t made = 0;
    for (int32_t i = 0; i < o->n_q; i++) made += ask_result(r, i).n_tokens;
    double dt = r->st.t2 - r->st.t0;
    fprintf(stderr, "ask: %d questions, shared prefix %d tokens (%d prompt tokens in all); "
            "%d steps, %lld answer tokens in %.3f s (%.1f tok/s); KV slots used %d (%lld "
            "without sharing)\n", o->n_q, r->lcp, r->need, r->st.steps, (long long)made, dt,
            (double)made / (dt + 1e-12), kv_alloc_used(forest_kv(r->f)),
            (long long)ask_unshared(r, o->n_q));
}

/* --save: the forest, the settings, and which question (seed) made each node. */
static st_code ask_save(const ask_run *r, const ask_opts *o, st_err *err) {
    session_settings ss;
    char key[32], v[32];
    st_code rc = app_session_settings(&ss, "ask", o->mo.path, &o->sp, ask_kind(r, o), err);
    snprintf(v, sizeof v, "%lld", (long long)o->budget);
    if (!rc) rc = session_settings_set(&ss, "tokens", v, err);
    for (int32_t i = 0; i < o->n_q && !rc; i++) {
        snprintf(key, sizeof key, "question_%d", i);
        rc = session_settings_set(&ss, key, o->qs[i], err);
        strategy_result b = ask_result(r, i);
        if (!rc && forest_get(r->f, b.leaf))
            rc = app_session_mark(&ss, r->f, b.start, b.leaf, "ask", o->sp.seed + (uint64_t)i, err);
    }
    if (!rc) rc = app_session_save(o->so.save, r->f, r->pm.m, r->pm.tk, &ss, err);
    session_settings_free(&ss);
    return rc;
}

/* Opens the model and the context, makes the forest and grows the answers. */
static st_code ask_run_all(ask_run *r, ask_opts *o, st_err *err) {
    if (!(r->context = prompt_open_file(&r->pm, &o->mo, o->ctx_path, "context file", err)))
        return err->code;
    r->pm_open = true;
    r->out = calloc((size_t)o->n_q, sizeof *r->out);
    r->f = forest_init(r->pm.n_slots, 0);
    if (!r->out || !r->f) return st_set(err, ST_ERR_NOMEM, "out of memory");
    o->pc.on = false; /* --system alone asks for none: it needs a template (below) */
    prompt_chat_decide(&o->pc, r->pm.m, NULL);
    if (!o->pc.on && o->pc.system)
        return st_set(err, ST_ERR_ARG, "--system needs a chat template, and the model has none "
                      "(name one with --chat-template)");
    st_code rc = ask_prompts(r, o, err);
    if (!rc) rc = ask_answer(r, o, err);
    return rc;
}

static void ask_run_free(ask_run *r, int32_t n_q) {
    strategy_free(r->s);
    step_plan_free(&r->plan);
    forest_free(r->f);
    prompt_toks_free(r->out, r->out ? n_q : 0);
    free(r->out);
    for (int32_t i = 0; i < n_q; i++) free(r->ptok[i]);
    free(r->context);
    if (r->pm_open) prompt_model_close(&r->pm);
}

int cmd_ask(int argc, char **argv) {
    ask_opts o = {.mo = prompt_model_default_opts(), .sp = sample_default_params(), .budget = 128};
    o.sp.temp = 0; /* answers are greedy unless asked otherwise */
    int r = ask_parse(argc, argv, &o);
    if (r >= 0) return r;
    if (o.so.load) return app_session_replay("ask", &o.so, &o.mo, o.json, o.quiet);
    if ((r = ask_check(&o))) return r;

    st_err err = {0};
    ask_run run = {0};
    step_plan_init(&run.plan);
    st_code rc = ask_run_all(&run, &o, &err);
    if (!rc) rc = ask_print(&run, &o, &err);
    fflush(stdout);
    if (!rc && run.st.full)
        app_run_full_note(run.pm.n_slots);
    if (!rc && !o.quiet) ask_stats(&run, &o);
    if (!rc && o.so.save) rc = ask_save(&run, &o, &err);
    ask_run_free(&run, o.n_q);
    return rc ? app_fail(&err) : 0;
}
