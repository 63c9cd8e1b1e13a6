/* cmd_strategy.c - the one command driver (strategy_cmd.h): `multidecode NAME` for any
 * registered strategy, run from one prompt: its arguments as --NAME options beside the
 * model, sampling and chat options (and a command's own), a forest with the prompt as its
 * root, the strategy stepped to its end, and its results printed as text or JSON, or as
 * the command reports them. A strategy added with its registry line is a command with no
 * change here. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_cmd.h"

#define CMD_MAX_ARGS 16
#define CMD_MAX_OPTS 64
enum { O_ARG = 0x6000 }; /* getopt's value of the strategy's argument i: O_ARG + i */

/* The help part of ops's usage (after its form and two spaces). */
static const char *usage_help(const strategy_ops *ops) {
    const char *gap = strstr(ops->usage, "  ");
    return gap ? gap + strspn(gap, " ") : ops->usage;
}

static void strat_usage(const strategy_ops *ops, FILE *f) {
    fprintf(f, "usage: multidecode %s -m MODEL -p PROMPT [options]\n\n%s.\n\n", ops->name, usage_help(ops));
    fputs(PROMPT_MODEL_HELP "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n", f);
    for (int32_t i = 0; i < ops->n_args; i++) {
        char opt[48];
        snprintf(opt, sizeof opt, "--%s N", ops->args[i].name);
        fprintf(f, "      %-16s %s\n", opt, ops->args[i].help);
    }
    if (!ops->own_temp) fputs("      --temp T         temperature; 0 = greedy (default 0.8)\n", f);
    fputs(PROMPT_SAMPLE_HELP "      --json           one JSON object: {results: [{result, tokens, text, ended, score}]}\n"
          "  -q, --quiet          no progress or statistics on stderr\n"
          "      --chat           -p is a user message: apply the model's chat template\n" PROMPT_CHAT_HELP,
          f);
}

/* The driver's getopt_long table: its options, the command's and the strategy's
 * arguments ({0}-ended in lo, which holds CMD_MAX_OPTS). */
static void strat_longopts(const strategy_ops *ops, const app_strat_cmd *cmd, struct option *lo) {
    static const struct option own[] = {PROMPT_MODEL_LONGOPTS, {"json", 0, 0, 'J'}, {"help", 0, 0, 'h'}};
    static const struct option prompt[] = {PROMPT_CHAT_LONGOPTS, {"prompt", 1, 0, 'p'}, {"quiet", 0, 0, 'q'}};
    static const struct option context[] = {{"context", 1, 0, 'x'}, {"quiet", 0, 0, 'Q'}, {"raw", 0, 0, 'R'},
                                            {"system", 1, 0, 'Y'}, {"chat-template", 1, 0, 'E'}};
    static const struct option sample[] = {PROMPT_SAMPLE_LONGOPTS};
    static const struct option session[] = {SESSION_OPTS_LONGOPTS};
    int n = 0;
#define CMD_ADD(t, on) \
    for (size_t i = 0; (on) && i < sizeof t / sizeof t[0]; i++) lo[n++] = t[i]
    CMD_ADD(own, true);
    CMD_ADD(prompt, !cmd->context);
    CMD_ADD(context, cmd->context);
    for (size_t i = 0; !cmd->no_sample && i < sizeof sample / sizeof sample[0]; i++)
        if (!ops->own_temp || strcmp(sample[i].name, "temp")) lo[n++] = sample[i];
    CMD_ADD(session, cmd->session);
#undef CMD_ADD
    for (int32_t i = 0; cmd->longopts && cmd->longopts[i].name && n < CMD_MAX_OPTS - 1; i++) lo[n++] = cmd->longopts[i];
    for (int32_t i = 0; i < ops->n_args && i < CMD_MAX_ARGS && n < CMD_MAX_OPTS - 1; i++)
        lo[n++] = (struct option){ops->args[i].name, 1, 0, O_ARG + i};
    lo[n] = (struct option){0, 0, 0, 0};
}

enum { CMD_HELP = -2 }; /* strat_opt after printing --help */

/* One option the command did not take: 0 handled, CMD_HELP, else the exit status. */
static int strat_opt(const strategy_ops *ops, const app_strat_cmd *cmd, app_strat_args *a, int ch) {
    int r;
    st_err err = {0};
    if ((r = prompt_model_opt(&a->mo, ch, optarg)) >= 0 || (r = prompt_chat_opt(&a->pc, ch, optarg)) >= 0 ||
        (!cmd->no_sample && (r = prompt_sample_opt(&a->o.sample, ch, optarg)) >= 0))
        return r;
    if (cmd->session && app_session_opt(&a->so, ch, optarg) == 0) return 0;
    if (ch >= O_ARG && ch < O_ARG + ops->n_args)
        return strategy_arg_set(&a->o, &ops->args[ch - O_ARG], optarg, &err) ? app_usage_error("%s", err.msg) : 0;
    switch (ch) {
    case 'p': a->prompt = optarg; return 0;
    case 'x': a->context = optarg; return 0;
    case 'J': a->json = true; return 0;
    case 'q': case 'Q': a->quiet = true; return 0;
    case 'h':
        if (cmd->help) cmd->help(stdout);
        else strat_usage(ops, stdout);
        return CMD_HELP;
    default:
        if (cmd->usage) return app_usage_error("%s; see multidecode %s --help", cmd->usage, ops->name);
        return app_usage_error("usage: multidecode %s -m MODEL -p PROMPT [options]; see multidecode %s --help",
                               ops->name, ops->name);
    }
}

/* argv into *a: -1 to go on, else the exit status (0 after --help, 2 for a bad option). */
static int strat_parse(const strategy_ops *ops, const app_strat_cmd *cmd, void *self, app_strat_args *a, int argc,
                       char **argv) {
    struct option lo[CMD_MAX_OPTS];
    char shortopts[64];
    snprintf(shortopts, sizeof shortopts, "%s%s", cmd->context ? "m:t:c:x:Qh" : "m:p:t:c:qh",
             cmd->shortopts ? cmd->shortopts : "");
    strat_longopts(ops, cmd, lo);
    int ch, r, idx;
    for (;;) {
        idx = -1;
        if ((ch = getopt_long(argc, argv, shortopts, lo, &idx)) == -1) break;
        if (cmd->opt && (r = cmd->opt(self, a, ch, idx < 0, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if ((r = strat_opt(ops, cmd, a, ch))) return r == CMD_HELP ? 0 : r;
    }
    if ((r = app_opt_end(argc, argv, a->mo.path, ops->name)) >= 0) return r;
    if (a->so.load) return app_session_replay(ops->name, &a->so, &a->mo, a->json, a->quiet);
    if (cmd->context && !a->context) return app_usage_error("%s needs a context: --context FILE", ops->name);
    if (cmd->check && (r = cmd->check(self, a)) >= 0) return r;
    return prompt_chat_check(&a->pc) ? 2 : -1;
}

/* Result r's tokens after its start (r->tokens, or the forest's path start..leaf) into a
 * malloc'd array; NULL when out of memory. */
static int32_t *result_tokens(const forest *f, const strategy_result *r, int32_t *n) {
    if (r->tokens || r->leaf == FOREST_NONE) {
        int32_t *t = malloc(sizeof *t * (size_t)(r->n_tokens > 0 ? r->n_tokens : 1));
        if (t && r->n_tokens > 0) memcpy(t, r->tokens, sizeof *t * (size_t)r->n_tokens);
        *n = r->n_tokens;
        return t;
    }
    int32_t n_leaf = forest_path(f, r->leaf, NULL, 0), n_start = forest_path(f, r->start, NULL, 0);
    int32_t *t = malloc(sizeof *t * (size_t)(n_leaf > 0 ? n_leaf : 1));
    if (t) forest_path(f, r->leaf, t, n_leaf);
    *n = n_leaf - n_start;
    if (t) memmove(t, t + n_start, sizeof *t * (size_t)*n);
    return t;
}

/* The results, best first as the strategy orders them, as text or one JSON object. */
static st_code strat_print(const app_strat_run *run, st_err *err) {
    const strategy *s = run->s;
    const forest *f = run->f;
    bool full = run->st.full;
    json_t *list = run->a->json ? json_array() : NULL;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        int32_t n;
        int32_t *t = result_tokens(f, &r, &n);
        char *text = t ? prompt_continuation(run->pm->tk, run->prompt, run->n_prompt, t, n) : NULL;
        if (!text) {
            free(t);
            json_decref(list);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        if (list) {
            json_t *o = json_object();
            jo_set(&o, "result", json_integer(i));
            jo_set(&o, "tokens", jo_ints(t, n));
            jo_set(&o, "text", jo_str(text));
            jo_set(&o, "ended", jo_str(app_result_ended(&r, full)));
            jo_set(&o, "score", r.score == r.score ? json_real(r.score) : json_null());
            jo_push(&list, o);
        } else {
            printf("--- result %d (%d tokens, ended by %s", i, n, app_result_ended(&r, full));
            if (r.score == r.score) printf(", score %.4f", r.score);
            printf(")\n");
            prompt_put_text(stdout, text);
            printf("\n");
        }
        free(text);
        free(t);
    }
    st_code rc = ST_OK;
    if (list) {
        json_t *doc = json_object();
        jo_set(&doc, "results", list);
        rc = jo_print(doc, err);
    }
    fflush(stdout);
    return rc;
}

st_code app_strat_save(const app_strat_run *r, const sample_params *sp, chat_kind kind, st_err *err) {
    session_settings ss;
    st_code rc = app_session_settings(&ss, r->ops->name, r->a->mo.path, sp, kind, err);
    if (!rc && r->cmd->save) rc = r->cmd->save(r->self, r, &ss, err);
    if (!rc) rc = app_session_save(r->a->so.save, r->f, r->pm->m, r->pm->tk, &ss, err);
    session_settings_free(&ss);
    return rc;
}

st_code app_strat_full_check(const app_strat_run *r, st_err *err) {
    if (r->st.full && strategy_n_results(r->s) == 0) return app_run_full_error(r->s, &r->st, r->pm->n_slots, err);
    return ST_OK;
}

st_code app_strat_report(void *self, app_strat_run *r, st_err *err) {
    (void)self;
    st_code rc = app_strat_full_check(r, err);
    if (!rc) rc = strat_print(r, err);
    if (!rc && r->st.full) app_run_full_note(r->pm->n_slots);
    if (!rc && !r->a->quiet)
        fprintf(stderr, "%s: %d steps (prompt %d tokens in %.3f s; then %.1f rows per step on average); %.3f s in "
                "all; KV slots used %d\n", r->ops->name, (int)r->st.steps, (int)r->n_prompt, r->st.t1 - r->st.t0,
                app_run_mean_rows(&r->st), r->st.t2 - r->st.t0, (int)kv_alloc_used(forest_kv(r->f)));
    return rc;
}

/* The prompt as the forest's root, the command's setup, the strategy from the root's last
 * node to its end, the report. */
static st_code strat_run(const app_strat_cmd *cmd, void *self, app_strat_run *r, st_err *err) {
    step_plan plan;
    step_plan_init(&plan);
    r->f = forest_init(r->pm->n_slots, 0);
    r->env = (strategy_env){.f = r->f, .plan = &plan, .ctx = r->pm->ctx, .tk = r->pm->tk};
    app_progress_init(&r->pr, !r->a->quiet);
    strategy_opts *o = &r->a->o;
    o->n_vocab = r->pm->m->hp.n_vocab;
    st_code rc = r->f ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc && r->prompt) rc = forest_add_root(r->f, r->prompt, NULL, r->n_prompt, 0, &o->from, err);
    if (!rc && cmd->setup) rc = cmd->setup(self, r, err);
    if (!rc && !(r->s = strategy_create(o, &r->env, err))) rc = err->code;
    if (!rc && cmd->created) rc = cmd->created(self, r, err);
    if (!rc && cmd->tick) rc = app_strategy_run(r->s, &r->env, &r->st, cmd->tick, r, err);
    else if (!rc) rc = app_strategy_run(r->s, &r->env, &r->st, app_run_progress_tick, &r->pr, err);
    app_progress_end(&r->pr);
    if (!rc) rc = (cmd->report ? cmd->report : app_strat_report)(self, r, err);
    fflush(stdout);
    strategy_free(r->s);
    step_plan_free(&plan);
    forest_free(r->f);
    return rc;
}

/* A context command's model and text: the file read, the model open, the chat rule decided
 * for a context. NULL + err with the model closed. */
static char *strat_open_context(prompt_model *pm, app_strat_args *a, st_err *err) {
    char *text = prompt_open_file(pm, &a->mo, a->context, "context file", err);
    if (!text) return NULL;
    a->pc.on = false; /* --system alone asks for none: it needs a template (below) */
    prompt_chat_decide(&a->pc, pm->m, NULL);
    if (a->pc.on || !a->pc.system) return text;
    st_set(err, ST_ERR_ARG, "--system needs a chat template, and the model has none (name one with --chat-template)");
    free(text);
    prompt_model_close(pm);
    return NULL;
}

/* Opens the model with the prompt (or the context) and runs; the exit status. */
static int strat_open_run(const strategy_ops *ops, const app_strat_cmd *cmd, void *self, app_strat_args *a) {
    st_err err = {0};
    prompt_model pm;
    app_strat_run r = {.ops = ops, .cmd = cmd, .self = self, .a = a, .pm = &pm, .kind = CHAT_NONE};
    int32_t *toks = NULL;
    char *context = NULL;
    if (cmd->context) {
        if (!(context = strat_open_context(&pm, a, &err))) return app_fail(&err);
        r.context = context;
    } else {
        toks = prompt_open_with(&pm, &a->mo, &a->pc, a->prompt, cmd->reserve ? a->o.budget : 0,
                                cmd->reserve ? cmd->reserve : "the prompt", a->quiet, &r.n_prompt, &r.kind, &err);
        if (!toks) return app_fail(&err);
        r.prompt = toks;
    }
    st_code rc = strat_run(cmd, self, &r, &err);
    free(toks);
    free(context);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}

int app_strategy_cmd(const strategy_ops *ops, const app_strat_cmd *cmd, void *self, int argc, char **argv) {
    static const app_strat_cmd none = {0};
    if (!cmd) cmd = &none;
    app_strat_args a = {.o = strategy_opts_for(ops), .mo = prompt_model_default_opts(), .prompt = ""};
    if (cmd->defaults) cmd->defaults(self, &a);
    int r = strat_parse(ops, cmd, self, &a, argc, argv);
    if (r < 0) r = strat_open_run(ops, cmd, self, &a);
    if (cmd->free) cmd->free(self);
    return r;
}

int cmd_strategy(const strategy_ops *ops, int argc, char **argv) { return app_strategy_cmd(ops, NULL, NULL, argc, argv); }
