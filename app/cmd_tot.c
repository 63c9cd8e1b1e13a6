/* cmd_tot.c - `multidecode tot`: tree of thoughts (engine/strategy/tot.c) from one prompt:
 * breadth-first, k thoughts per kept node grown together, all judged in one step per
 * level, the best b kept, d levels (or depth-first with backtracking, --mode dfs); prints
 * the results best first (the first is the answer), optionally with an answer extracted
 * from each. */
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
#include "forest/step.h"
#include "judge_opts.h"
#include "prompt.h"
#include "strategy/cot.h"
#include "strategy/merge.h"
#include "strategy/strategy.h"
#include "strategy_run.h"

#define TOT_MAX_DELIMS 16
#define TOT_USAGE "usage: multidecode tot -m MODEL -p PROMPT [options]"

static void tot_usage(FILE *f) {
    fprintf(f, TOT_USAGE "\n\n"
               "Tree of thoughts, breadth-first: every kept node (at first the prompt) forks K\n"
               "thoughts with distinct first tokens, all grown together; a thought ends at a\n"
               "delimiter or after N tokens; then ONE forest step judges every new thought (as\n"
               "`multidecode judge` does) and the best B are kept, the others pruned. D levels;\n"
               "the answer is the best leaf's text. With --mode dfs, depth-first with backtracking:\n"
               "the best child is expanded first; children scoring below --threshold are pruned,\n"
               "at most B kept per node; a node left without children is a dead end and the\n"
               "search backtracks to the next best node waiting; it stops at the first node D\n"
               "thoughts deep (the answer) or after 1 + (D-1)*B expansions.\n\n" PROMPT_MODEL_HELP
               "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n"
               "  -k, --thoughts K     thoughts per kept node and level (default 3)\n"
               "  -b, --keep B         thoughts kept per level (default 2)\n"
               "  -d, --depth D        levels (default 3)\n"
               "      --mode bfs|dfs   breadth-first (default) or depth-first with backtracking\n"
               "      --threshold S    dfs: prune children whose judge score is below S (default\n"
               "                       none)\n"
               "  -n, --tokens N       tokens per thought at most (default 24)\n"
               "      --delim TEXT     a thought ends once its text ends with TEXT (repeatable;\n"
               "                       default a newline; 'sentence': . ! ? or a newline)\n"
               "      --temp T         temperature; 0 = greedy (default 0.7)\n" PROMPT_SAMPLE_HELP JUDGE_OPTS_HELP
               "      --vote PATTERN   last-number or marker:TEXT: each leaf's answer\n"
               "      --json           one JSON object: {leaves: [{rank, score, text, answer}], answer,\n"
               "                       ended: done or full context}\n"
               "  -q, --quiet          no statistics on stderr\n"
               "      --chat           -p is a user message (chat template); the judge is a user turn\n"
               PROMPT_CHAT_HELP
               "      --think on|off   the template's thinking switch (Qwen3; default on)\n");
}

typedef struct tot_opts {
    const char *prompt;
    const char *delims[TOT_MAX_DELIMS];
    int32_t n_delims, k, b, d, budget;
    sample_params sp;
    app_judge_opts jo;
    cot_vote_spec vote;
    bool json, quiet, dfs;
    double threshold;
} tot_opts;

static int tot_parse(int argc, char **argv, tot_opts *o, prompt_model_opts *mo, prompt_chat *pc) {
    enum { O_DELIM = 1000, O_VOTE, O_MODE, O_THRESHOLD };
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS, PROMPT_CHAT_LONGOPTS, JUDGE_OPTS_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"thoughts", 1, 0, 'k'}, {"keep", 1, 0, 'b'}, {"depth", 1, 0, 'd'},
        {"tokens", 1, 0, 'n'}, {"delim", 1, 0, O_DELIM}, {"vote", 1, 0, O_VOTE}, {"json", 0, 0, 'J'},
        {"mode", 1, 0, O_MODE}, {"threshold", 1, 0, O_THRESHOLD},
        {"quiet", 0, 0, 'q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    static const char *const sentence[] = {".", "!", "?", "\n"};
    int ch, r;
    int64_t v;
    while ((ch = getopt_long(argc, argv, "m:p:k:b:d:n:j:t:c:qh", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&o->sp, ch, optarg)) >= 0 ||
            (r = prompt_chat_opt(pc, ch, optarg)) >= 0 ||
            (r = app_vote_opt(ch, O_VOTE, optarg, &o->vote, &o->json, &o->quiet)) >= 0 || (r = app_judge_opt(&o->jo, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        int32_t *dst = ch == 'k' ? &o->k : ch == 'b' ? &o->b : ch == 'd' ? &o->d : ch == 'n' ? &o->budget : NULL;
        if (dst) {
            char name[3] = {'-', (char)ch, 0};
            if (app_opt_int(name, optarg, 1, ch == 'n' ? 1 << 20 : 256, &v)) return 2;
            *dst = (int32_t)v;
            continue;
        }
        switch (ch) {
        case 'p': o->prompt = optarg; break;
        case O_DELIM:
            if (!strcmp(optarg, "sentence")) {
                for (int i = 0; i < 4 && o->n_delims < TOT_MAX_DELIMS; i++) o->delims[o->n_delims++] = sentence[i];
            } else if (o->n_delims < TOT_MAX_DELIMS) {
                o->delims[o->n_delims++] = optarg;
            } else {
                return app_usage_error("at most %d --delim strings", TOT_MAX_DELIMS);
            }
            break;
        case O_MODE:
            if (strcmp(optarg, "bfs") && strcmp(optarg, "dfs")) return app_usage_error("--mode: bfs or dfs, not '%s'", optarg);
            o->dfs = !strcmp(optarg, "dfs");
            break;
        case O_THRESHOLD: {
            char *end;
            o->threshold = strtod(optarg, &end);
            if (end == optarg || *end || isnan(o->threshold))
                return app_usage_error("--threshold: a number, not '%s'", optarg);
            break;
        }
        case 'h': tot_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode tot --help", TOT_USAGE);
        }
    }
    if ((r = app_opt_end(argc, argv, mo->path, "tot")) >= 0) return r;
    if (o->n_delims == 0) o->delims[o->n_delims++] = "\n";
    return prompt_chat_check(pc) ? 2 : -1;
}

/* The kept leaves best first, their texts below the prompt (and answers). */
static st_code tot_print(const tot_opts *o, const strategy *s, const forest *f, const tok *tk, forest_id at,
                         bool full, st_err *err) {
    json_t *arr = json_array();
    int32_t n = strategy_n_results(s);
    char *best_answer = NULL;
    for (int32_t i = 0; i < n; i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        char *text = merge_branch_text(f, tk, at, r.leaf, NULL);
        char *ans = text && o->vote.kind ? malloc(strlen(text) + 1) : NULL;
        if (ans && cot_extract(&o->vote, text, ans, strlen(text) + 1) < 0) free(ans), ans = NULL;
        if (o->json) {
            json_t *l = json_object();
            jo_set(&l, "rank", json_integer(i + 1));
            jo_set(&l, "score", jo_sig(r.score, 9));
            jo_set(&l, "text", jo_str(text));
            if (o->vote.kind) jo_set(&l, "answer", ans ? jo_str(ans) : json_null());
            jo_push(&arr, l);
        } else {
            printf("--- #%d score %+.4f%s%s\n%s\n", i + 1, r.score, ans ? "; answer: " : "", ans ? ans : "",
                   text ? text : "");
        }
        if (i == 0 && ans) best_answer = strdup(ans);
        free(text);
        free(ans);
    }
    st_code rc = ST_OK;
    if (o->json) {
        json_t *root = json_object();
        jo_set(&root, "leaves", arr);
        jo_set(&root, "answer", best_answer ? jo_str(best_answer) : json_null());
        jo_set(&root, "ended", jo_str(full ? "full context" : "done"));
        rc = jo_print(root, err);
    } else {
        json_decref(arr);
        if (o->vote.kind) printf("=== answer: %s\n", best_answer ? best_answer : "(none)");
    }
    free(best_answer);
    return rc;
}

/* The search on the commands' loop (strategy_run.h). A full KV cache stops it: the best
 * leaves of the last level judged are printed with the commands' note, or, before any
 * level was judged, it is an error. */
static st_code tot_run(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, chat_kind kind, const tot_opts *o,
                       st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    judge_prompt jp = {0};
    strategy *s = NULL;
    forest_id at;
    app_run_stats st = {0};
    st_code rc = f ? forest_add_root(f, prompt, NULL, n_prompt, 0, &at, err) : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = app_judge_tokens(pm, kind, &o->jo, &jp, err);
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk};
    if (!rc) {
        strategy_opts so = strategy_default_opts(STRAT_TOT);
        so.from = at, so.sample = o->sp, so.budget = o->budget, so.n_vocab = pm->m->hp.n_vocab;
        so.stops = o->delims, so.n_stops = o->n_delims;
        so.u.tot.k = o->k, so.u.tot.b = o->b, so.u.tot.d = o->d, so.u.tot.prompt = &jp;
        so.u.tot.dfs = o->dfs, so.u.tot.threshold = o->threshold;
        s = strategy_create(&so, &env, err);
        rc = s ? ST_OK : err->code;
    }
    app_progress pr;
    app_progress_init(&pr, !o->quiet);
    if (!rc) rc = app_strategy_run(s, &env, &st, app_run_progress_tick, &pr, err);
    app_progress_end(&pr);
    if (!rc && st.full && strategy_n_results(s) == 0) rc = app_run_full_error(s, &st, pm->n_slots, err);
    if (!rc) rc = tot_print(o, s, f, pm->tk, at, st.full, err);
    fflush(stdout);
    if (!rc && st.full) app_run_full_note(pm->n_slots);
    if (!rc && !o->quiet) {
        strategy_progress p;
        strategy_get_progress(s, &p);
        fprintf(stderr, "%s; %d steps, %lld rows in %.3f s; KV slots used %d\n", p.text, (int)st.steps,
                (long long)(st.first_rows + st.rows), st.t2 - st.t0, kv_alloc_used(forest_kv(f)));
    }
    strategy_free(s);
    judge_tokens_free(&jp);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

int cmd_tot(int argc, char **argv) {
    prompt_model_opts mo = prompt_model_default_opts();
    tot_opts o = {.prompt = "", .k = 3, .b = 2, .d = 3, .budget = 24, .sp = sample_default_params(),
                  .threshold = -INFINITY};
    o.sp.temp = 0.7f;
    prompt_chat pc = {0};
    int r = tot_parse(argc, argv, &o, &mo, &pc);
    if (r >= 0) {
        app_judge_opts_free(&o.jo);
        return r;
    }
    prompt_model pm;
    int32_t n_prompt = 0;
    chat_kind kind = CHAT_NONE;
    st_err err = {0};
    int32_t *toks = prompt_open_with(&pm, &mo, &pc, o.prompt, 0, "the prompt", o.quiet, &n_prompt, &kind, &err);
    st_code rc = toks ? tot_run(&pm, toks, n_prompt, kind, &o, &err) : err.code;
    free(toks);
    if (toks) prompt_model_close(&pm);
    app_judge_opts_free(&o.jo);
    return rc ? app_fail(&err) : 0;
}
