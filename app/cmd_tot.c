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

#include "app.h"
#include "json_out.h"
#include "forest/forest.h"
#include "judge_opts.h"
#include "prompt.h"
#include "strategy/cot.h"
#include "strategy/merge.h"
#include "strategy/strategy.h"
#include "strategy_cmd.h"

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
               "thoughts deep (the answer) or after 1 + (D-1)*B expansions. Once a path closes its\n"
               "thinking (</think>, gpt-oss's final channel), the judge reads what follows it.\n\n"
               PROMPT_MODEL_HELP
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

/* What tot adds to the driver's options (the search's own are in strategy_opts.u.tot). */
typedef struct tot_opts {
    const char *delims[TOT_MAX_DELIMS];
    int32_t n_delims;
    app_judge_opts jo;
    cot_vote_spec vote;
    judge_prompt jp; /* the judge's tokens, once the model is open */
} tot_opts;

enum { O_DELIM = 1000, O_VOTE, O_MODE, O_THRESHOLD };
static const struct option tot_longopts[] = {
    JUDGE_OPTS_LONGOPTS, {"thoughts", 1, 0, 'k'}, {"keep", 1, 0, 'b'}, {"depth", 1, 0, 'd'},
    {"tokens", 1, 0, 'n'}, {"delim", 1, 0, O_DELIM}, {"vote", 1, 0, O_VOTE}, {"mode", 1, 0, O_MODE},
    {"threshold", 1, 0, O_THRESHOLD}, {0, 0, 0, 0}};

static void tot_defaults(void *self, app_strat_args *a) {
    (void)self;
    a->o.sample.temp = 0.7f;
}

/* --delim TEXT ('sentence': the four sentence ends): 0, or 2 after a usage error. */
static int tot_delim(tot_opts *t, const char *arg) {
    static const char *const sentence[] = {".", "!", "?", "\n"};
    if (!strcmp(arg, "sentence")) {
        for (int i = 0; i < 4 && t->n_delims < TOT_MAX_DELIMS; i++) t->delims[t->n_delims++] = sentence[i];
    } else if (t->n_delims < TOT_MAX_DELIMS) {
        t->delims[t->n_delims++] = arg;
    } else {
        return app_usage_error("at most %d --delim strings", TOT_MAX_DELIMS);
    }
    return 0;
}

static int tot_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)is_short;
    tot_opts *t = self;
    int r;
    int64_t v;
    if ((r = app_vote_opt(ch, O_VOTE, arg, &t->vote, &a->json, &a->quiet)) >= 0 || (r = app_judge_opt(&t->jo, ch, arg)) >= 0)
        return r;
    int32_t *dst = ch == 'k' ? &a->o.u.tot.k : ch == 'b' ? &a->o.u.tot.b : ch == 'd' ? &a->o.u.tot.d
                 : ch == 'n' ? &a->o.budget : NULL;
    if (dst) {
        char name[3] = {'-', (char)ch, 0};
        if (app_opt_int(name, arg, 1, ch == 'n' ? 1 << 20 : 256, &v)) return 2;
        *dst = (int32_t)v;
        return 0;
    }
    switch (ch) {
    case O_DELIM: return tot_delim(t, arg);
    case O_MODE:
        if (strcmp(arg, "bfs") && strcmp(arg, "dfs")) return app_usage_error("--mode: bfs or dfs, not '%s'", arg);
        a->o.u.tot.dfs = !strcmp(arg, "dfs");
        return 0;
    case O_THRESHOLD: {
        char *end;
        a->o.u.tot.threshold = strtod(arg, &end);
        if (end == arg || *end || isnan(a->o.u.tot.threshold))
            return app_usage_error("--threshold: a number, not '%s'", arg);
        return 0;
    }
    default: return -1;
    }
}

static int tot_check(void *self, app_strat_args *a) {
    tot_opts *t = self;
    if (t->n_delims == 0) t->delims[t->n_delims++] = "\n";
    a->o.stops = t->delims, a->o.n_stops = t->n_delims;
    return -1;
}

/* The judge's tokens for the model and the prompt's template. */
static st_code tot_setup(void *self, app_strat_run *r, st_err *err) {
    tot_opts *t = self;
    st_code rc = app_judge_tokens(r->pm, r->kind, &t->jo, &t->jp, err);
    r->a->o.u.tot.prompt = &t->jp;
    return rc;
}

/* The kept leaves best first, their texts below the prompt (and answers). */
static st_code tot_print(const tot_opts *o, bool json, const strategy *s, const forest *f, const tok *tk, forest_id at,
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
        if (json) {
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
    if (json) {
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

/* The best leaves of the last level judged (a full KV cache stops the search: with the
 * commands' note, or before any level was judged, an error), then the statistics. */
static st_code tot_report(void *self, app_strat_run *r, st_err *err) {
    const tot_opts *t = self;
    st_code rc = app_strat_full_check(r, err);
    if (!rc) rc = tot_print(t, r->a->json, r->s, r->f, r->pm->tk, r->a->o.from, r->st.full, err);
    fflush(stdout);
    if (!rc && r->st.full) app_run_full_note(r->pm->n_slots);
    if (!rc && !r->a->quiet) {
        strategy_progress p;
        strategy_get_progress(r->s, &p);
        fprintf(stderr, "%s; %d steps, %lld rows in %.3f s; KV slots used %d\n", p.text, (int)r->st.steps,
                (long long)(r->st.first_rows + r->st.rows), r->st.t2 - r->st.t0, kv_alloc_used(forest_kv(r->f)));
    }
    return rc;
}

static void tot_free(void *self) {
    tot_opts *t = self;
    judge_tokens_free(&t->jp);
    app_judge_opts_free(&t->jo);
}

static const app_strat_cmd tot_cmd = {
    .usage = TOT_USAGE,
    .help = tot_usage,
    .longopts = tot_longopts,
    .shortopts = "k:b:d:n:j:",
    .defaults = tot_defaults,
    .opt = tot_opt,
    .check = tot_check,
    .setup = tot_setup,
    .report = tot_report,
    .free = tot_free,
};

int cmd_tot(int argc, char **argv) {
    tot_opts t = {0};
    return app_strategy_cmd(strategy_find("tot"), &tot_cmd, &t, argc, argv);
}
