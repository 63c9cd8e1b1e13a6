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
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_cmd.h"

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

/* What ask adds to the driver's options. */
typedef struct ask_opts {
    const char *qs[ASK_MAX_QUESTIONS];
    int32_t n_q, n_qb;                   /* questions, --budgets entries */
    int64_t budget, qbudget[ASK_MAX_QUESTIONS];
} ask_opts;

/* What a run makes besides the driver's forest and strategy: every question's prompt
 * tokens and each answer's tokens. */
typedef struct ask_cmd {
    ask_opts o;
    int32_t *ptok[ASK_MAX_QUESTIONS], n_ptok[ASK_MAX_QUESTIONS];
    int32_t budgets[ASK_MAX_QUESTIONS];
    int32_t lcp, need;                   /* shared prefix tokens, all prompt tokens */
    prompt_toks *out;                    /* (n_q) each answer's tokens */
} ask_cmd;

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

static const struct option ask_longopts[] = {
    {"question", 1, 0, 'q'}, {"tokens", 1, 0, 'n'}, {"budgets", 1, 0, 'b'}, {0, 0, 0, 0}};

static int ask_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)a, (void)is_short;
    ask_opts *o = &((ask_cmd *)self)->o;
    switch (ch) {
    case 'q':
        if (o->n_q == ASK_MAX_QUESTIONS) return app_usage_error("at most %d questions", ASK_MAX_QUESTIONS);
        o->qs[o->n_q++] = arg;
        return 0;
    case 'n': return app_opt_int("-n", arg, 0, 1 << 24, &o->budget) ? 2 : 0;
    case 'b': return ask_budgets_opt(o, arg);
    default: return -1;
    }
}

/* What a fresh run (not --load) needs besides the model and the context: -1, or 2
 * after the message. */
static int ask_check(void *self, app_strat_args *a) {
    ask_opts *o = &((ask_cmd *)self)->o;
    if (o->n_q == 0) return app_usage_error("ask needs at least one question: -q QUESTION");
    if (o->n_qb > o->n_q)
        return app_usage_error("--budgets lists %d budgets for %d questions", o->n_qb, o->n_q);
    for (int32_t i = o->n_qb; i < o->n_q; i++) o->qbudget[i] = o->budget;
    a->o.budget = (int32_t)o->budget;
    return -1;
}

/* The chat template the prompts use, CHAT_NONE for none. */
static chat_kind ask_kind(const app_strat_run *r) {
    const prompt_chat *pc = &r->a->pc;
    if (!pc->on) return CHAT_NONE;
    return pc->tmpl ? chat_from_name(pc->tmpl) : prompt_model_chat(r->pm->m->gguf);
}

/* Every question's whole prompt, then their longest common prefix and what they need of
 * the KV cache. ST_ERR_NOMEM, ST_ERR_CONTEXT, a tokeniser's codes. */
static st_code ask_prompts(ask_cmd *r, const app_strat_run *run, st_err *err) {
    const ask_opts *o = &r->o;
    for (int32_t i = 0; i < o->n_q; i++) {
        char *text = ask_text(run->context, o->qs[i], run->a->pc.on);
        r->ptok[i] = text ? prompt_tokens(run->pm, &run->a->pc, text, &r->n_ptok[i], NULL, err) : NULL;
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
    int32_t n_q = o->n_q, lcp = r->lcp, n_slots = run->pm->n_slots, need = lcp;
    for (int32_t i = 0; i < n_q; i++) need += r->n_ptok[i] - lcp;
    r->need = need;
    if (need > n_slots)
        return st_set(err, ST_ERR_CONTEXT, "the context and the %d question%s need %d KV slots "
                      "before answering (a shared prefix of %d tokens + %d question tokens), more "
                      "than the KV cache of %d (raise it with -c)", n_q, n_q > 1 ? "s" : "", need,
                      lcp, need - lcp, n_slots);
    int64_t all_budgets = 0;
    for (int32_t i = 0; i < n_q; i++) all_budgets += o->qbudget[i];
    if (!run->a->quiet && need + all_budgets > n_slots)
        fprintf(stderr, "multidecode: note: %d prompt tokens + %lld answer tokens may not fit "
                "in the KV cache of %d; answers stop when it is full (raise it with -c)\n", need,
                (long long)all_budgets, n_slots);
    return ST_OK;
}

/* The prompts, then the ask strategy's options over them (the shared prefix once, each
 * question's rest under it, one forest step per token); a full KV cache stops every
 * answer (st.full). */
static st_code ask_setup(void *self, app_strat_run *r, st_err *err) {
    ask_cmd *c = self;
    const ask_opts *o = &c->o;
    if (!(c->out = calloc((size_t)o->n_q, sizeof *c->out))) return st_set(err, ST_ERR_NOMEM, "out of memory");
    st_code rc = ask_prompts(c, r, err);
    for (int32_t i = 0; i < o->n_q; i++) c->budgets[i] = (int32_t)o->qbudget[i];
    r->env.emit = prompt_emit, r->env.emit_ud = c->out;
    strategy_opts *so = &r->a->o;
    so->u.ask.prompts = (const int32_t *const *)c->ptok, so->u.ask.lens = c->n_ptok;
    so->u.ask.budgets = c->budgets, so->u.ask.n = o->n_q;
    return rc;
}

/* Answer i's result. */
static strategy_result ask_result(const app_strat_run *r, int32_t i) {
    strategy_result res;
    strategy_result_at(r->s, r->f, i, &res);
    return res;
}

static int64_t ask_unshared(const ask_cmd *c, const app_strat_run *r) {
    return (int64_t)kv_alloc_used(forest_kv(r->f)) + (c->lcp > 0 ? (int64_t)(c->o.n_q - 1) * c->lcp : 0);
}

/* The answers: "Qi: ...\nAi: ..." blocks, or one JSON object. ST_ERR_NOMEM. */
static st_code ask_print(const ask_cmd *c, const app_strat_run *r, st_err *err) {
    const ask_opts *o = &c->o;
    bool json = r->a->json;
    json_t *answers = json ? json_array() : NULL;
    for (int32_t i = 0; i < o->n_q; i++) {
        strategy_result b = ask_result(r, i);
        const char *ended = app_result_ended(&b, r->st.full);
        char *ans = prompt_continuation(r->pm->tk, c->ptok[i], c->n_ptok[i], c->out[i].t, c->out[i].n);
        if (!ans) {
            json_decref(answers);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        if (json) {
            json_t *a = json_object();
            jo_set(&a, "question", jo_str(o->qs[i]));
            jo_set(&a, "answer", jo_str(ans));
            jo_set(&a, "prompt_tokens", json_integer(c->n_ptok[i]));
            jo_set(&a, "tokens", json_integer(b.n_tokens));
            jo_set(&a, "ended", jo_str(ended));
            jo_push(&answers, a);
        } else {
            printf("Q%d: %s\nA%d: %s\n\n", i + 1, o->qs[i], i + 1, ans);
        }
        free(ans);
    }
    if (!json) return ST_OK;
    chat_kind kind = ask_kind(r);
    json_t *doc = json_object();
    jo_set(&doc, "model", jo_str(r->a->mo.path));
    jo_set(&doc, "template", jo_str(kind == CHAT_NONE ? "none" : chat_name(kind)));
    jo_set(&doc, "questions", json_integer(o->n_q));
    jo_set(&doc, "shared_prefix_tokens", json_integer(c->lcp));
    jo_set(&doc, "prompt_tokens", json_integer(c->need));
    jo_set(&doc, "kv_slots_used", json_integer(kv_alloc_used(forest_kv(r->f))));
    jo_set(&doc, "kv_slots_unshared", json_integer(ask_unshared(c, r)));
    jo_set(&doc, "kv_slots", json_integer(r->pm->n_slots));
    jo_set(&doc, "steps", json_integer(r->st.steps));
    jo_set(&doc, "answers", answers);
    return jo_print(doc, err);
}

/* The statistics line on stderr. */
static void ask_stats(const ask_cmd *c, const app_strat_run *r) {
    const ask_opts *o = &c->o;
    int64_t made = 0;
    for (int32_t i = 0; i < o->n_q; i++) made += ask_result(r, i).n_tokens;
    double dt = r->st.t2 - r->st.t0;
    fprintf(stderr, "ask: %d questions, shared prefix %d tokens (%d prompt tokens in all); "
            "%d steps, %lld answer tokens in %.3f s (%.1f tok/s); KV slots used %d (%lld "
            "without sharing)\n", o->n_q, c->lcp, c->need, r->st.steps, (long long)made, dt,
            (double)made / (dt + 1e-12), kv_alloc_used(forest_kv(r->f)),
            (long long)ask_unshared(c, r));
}

/* --save: the settings, and which question (seed) made each node. */
static st_code ask_save(void *self, const app_strat_run *r, session_settings *ss, st_err *err) {
    const ask_opts *o = &((const ask_cmd *)self)->o;
    char key[32];
    st_code rc = app_session_set_int(ss, "tokens", o->budget, err);
    for (int32_t i = 0; i < o->n_q && !rc; i++) {
        snprintf(key, sizeof key, "question_%d", i);
        rc = session_settings_set(ss, key, o->qs[i], err);
        strategy_result b = ask_result(r, i);
        if (!rc && forest_get(r->f, b.leaf))
            rc = app_session_mark(ss, r->f, b.start, b.leaf, "ask", r->a->o.sample.seed + (uint64_t)i, err);
    }
    return rc;
}

/* The answers, the full-cache note, the statistics and --save. */
static st_code ask_report(void *self, app_strat_run *r, st_err *err) {
    const ask_cmd *c = self;
    st_code rc = ask_print(c, r, err);
    fflush(stdout);
    if (!rc && r->st.full)
        app_run_full_note(r->pm->n_slots);
    if (!rc && !r->a->quiet) ask_stats(c, r);
    if (!rc && r->a->so.save) rc = app_strat_save(r, &r->a->o.sample, ask_kind(r), err);
    return rc;
}

/* No progress line: the answers' statistics follow the run. */
static bool ask_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    (void)ud, (void)s, (void)env, (void)st;
    return true;
}

static void ask_defaults(void *self, app_strat_args *a) {
    ((ask_cmd *)self)->o.budget = 128;
    a->o.sample.temp = 0; /* answers are greedy unless asked otherwise */
}

static void ask_free(void *self) {
    ask_cmd *c = self;
    prompt_toks_free(c->out, c->out ? c->o.n_q : 0);
    free(c->out);
    for (int32_t i = 0; i < c->o.n_q; i++) free(c->ptok[i]);
}

static const app_strat_cmd ask_cmd_ops = {
    .usage = ASK_USAGE,
    .help = ask_usage,
    .longopts = ask_longopts,
    .shortopts = "q:n:",
    .context = true,
    .session = true,
    .defaults = ask_defaults,
    .opt = ask_opt,
    .check = ask_check,
    .setup = ask_setup,
    .tick = ask_tick,
    .save = ask_save,
    .report = ask_report,
    .free = ask_free,
};

int cmd_ask(int argc, char **argv) {
    ask_cmd c = {0};
    return app_strategy_cmd(strategy_find("ask"), &ask_cmd_ops, &c, argc, argv);
}
