/* cmd_strategy.c - `multidecode NAME`: any registered strategy that brings its own grammar
 * (strategy.h: usage, args), run from one prompt by one generic driver: its arguments as
 * --NAME options beside the model, sampling and chat options, a forest with the prompt as
 * its root, the strategy stepped to its end, and its results printed as text or JSON. A
 * strategy added with its registry line is a command with no change here. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "json_out.h"
#include "prompt.h"
#include "strategy_run.h"

#define STRAT_MAX_ARGS 16
enum { O_ARG = 1000 }; /* getopt's value of the strategy's argument i: O_ARG + i */

/* The command line's settings. */
typedef struct strat_cmd {
    const strategy_ops *ops;
    strategy_opts o;
    prompt_model_opts mo;
    prompt_chat pc;
    const char *prompt;
    bool json, quiet;
} strat_cmd;

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
    fputs("      --temp T         temperature; 0 = greedy (default 0.8)\n" PROMPT_SAMPLE_HELP
          "      --json           one JSON object: {results: [{result, tokens, text, ended, score}]}\n"
          "  -q, --quiet          no progress or statistics on stderr\n"
          "      --chat           -p is a user message: apply the model's chat template\n" PROMPT_CHAT_HELP,
          f);
}

/* argv into *c: -1 to go on, else the exit status (0 after --help, 2 for a bad option). */
static int strat_parse(strat_cmd *c, int argc, char **argv) {
    struct option lo[32 + STRAT_MAX_ARGS] = {PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS, PROMPT_CHAT_LONGOPTS,
                                            {"prompt", 1, 0, 'p'}, {"json", 0, 0, 'J'}, {"quiet", 0, 0, 'q'},
                                            {"help", 0, 0, 'h'}};
    int n = 0, ch, r;
    while (lo[n].name) n++;
    for (int32_t i = 0; i < c->ops->n_args && i < STRAT_MAX_ARGS; i++)
        lo[n++] = (struct option){c->ops->args[i].name, 1, 0, O_ARG + i};
    st_err err = {0};
    while ((ch = getopt_long(argc, argv, "m:p:t:c:qh", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&c->mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&c->o.sample, ch, optarg)) >= 0 ||
            (r = prompt_chat_opt(&c->pc, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if (ch >= O_ARG && ch < O_ARG + c->ops->n_args) {
            if (strategy_arg_set(&c->o, &c->ops->args[ch - O_ARG], optarg, &err)) return app_usage_error("%s", err.msg);
            continue;
        }
        switch (ch) {
        case 'p': c->prompt = optarg; break;
        case 'J': c->json = true; break;
        case 'q': c->quiet = true; break;
        case 'h': strat_usage(c->ops, stdout); return 0;
        default: return app_usage_error("usage: multidecode %s -m MODEL -p PROMPT [options]; see multidecode %s --help",
                                        c->ops->name, c->ops->name);
        }
    }
    return app_opt_end(argc, argv, c->mo.path, c->ops->name);
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
static st_code strat_print(const strat_cmd *c, const prompt_model *pm, const strategy *s, const forest *f,
                           const int32_t *prompt, int32_t n_prompt, bool full, st_err *err) {
    json_t *list = c->json ? json_array() : NULL;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        int32_t n;
        int32_t *t = result_tokens(f, &r, &n);
        char *text = t ? prompt_continuation(pm->tk, prompt, n_prompt, t, n) : NULL;
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

/* The prompt as the forest's root, the strategy from its last token to its end. */
static st_code strat_run(strat_cmd *c, prompt_model *pm, const int32_t *prompt, int32_t n_prompt, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk};
    app_run_stats st = {0};
    app_progress pr;
    app_progress_init(&pr, !c->quiet);
    c->o.n_vocab = pm->m->hp.n_vocab;
    st_code rc = f ? forest_add_root(f, prompt, NULL, n_prompt, 0, &c->o.from, err)
                   : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc && !(s = strategy_create(&c->o, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, app_run_progress_tick, &pr, err);
    app_progress_end(&pr);
    if (!rc && st.full && strategy_n_results(s) == 0) rc = app_run_full_error(s, &st, pm->n_slots, err);
    if (!rc) rc = strat_print(c, pm, s, f, prompt, n_prompt, st.full, err);
    if (!rc && st.full) app_run_full_note(pm->n_slots);
    if (!rc && !c->quiet)
        fprintf(stderr, "%s: %d steps (prompt %d tokens in %.3f s; then %.1f rows per step on average); %.3f s in "
                "all; KV slots used %d\n", c->ops->name, (int)st.steps, (int)n_prompt, st.t1 - st.t0,
                app_run_mean_rows(&st), st.t2 - st.t0, (int)kv_alloc_used(forest_kv(f)));
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

int cmd_strategy(const strategy_ops *ops, int argc, char **argv) {
    strat_cmd c = {.ops = ops, .o = strategy_opts_for(ops), .mo = prompt_model_default_opts(), .prompt = ""};
    int r = strat_parse(&c, argc, argv);
    if (r >= 0) return r;
    if ((r = prompt_chat_check(&c.pc))) return r;
    st_err err = {0};
    prompt_model pm;
    int32_t n_prompt = 0;
    chat_kind kind;
    int32_t *toks = prompt_open_with(&pm, &c.mo, &c.pc, c.prompt, 0, "the prompt", c.quiet, &n_prompt, &kind, &err);
    if (!toks) return app_fail(&err);
    st_code rc = strat_run(&c, &pm, toks, n_prompt, &err);
    free(toks);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
