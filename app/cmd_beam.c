/* cmd_beam.c - `multidecode beam`: beam search of width B over one shared-KV forest
 * (engine/strategy/beam.h) on the strategies' command driver (strategy_cmd.h), printing the B
 * best hypotheses with their scores.
 *
 * The prompt is one root chain; every beam step is one forest step computing all live
 * hypotheses together; hypotheses share their common prefixes in the KV cache and losers
 * are pruned. Scores are sum of log-probabilities / length^alpha, as Hugging Face
 * transformers computes them; end-of-generation tokens end a hypothesis. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/beam.h"
#include "strategy/strategy.h"
#include "forest/forest.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_cmd.h"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BEAM_USAGE "usage: multidecode beam -m MODEL -p PROMPT [options]"

static void beam_usage(FILE *f) {
    fprintf(f,
            BEAM_USAGE "\n\n"
            "Beam search over one shared KV cache: each step computes every live hypothesis\n"
            "in one forest step, keeps the B best by sum logprob / length^alpha and prunes\n"
            "the rest. Prints the B best hypotheses with their scores.\n\n"
            PROMPT_MODEL_HELP
            "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n"
            "  -B, --beams B        beam width (default 4)\n"
            "  -n, --tokens N       tokens to generate at most (default 64)\n"
            "      --alpha A        length penalty exponent (default 1; 0 = plain sum)\n"
            "      --early-stopping[=WHEN]  true (stop once B hypotheses ended; the default\n"
            "                       WHEN), false (the default without the option: stop when\n"
            "                       no live beam can beat the worst ended one, by the current\n"
            "                       length) or never (the same, by the maximal length)\n"
            "      --json           a JSON list of {rank, score, logprob, tokens, text, ended}\n"
            "  -q, --quiet          no progress or statistics on stderr\n"
            "      --chat           -p is a user message: apply the model's chat template\n"
            PROMPT_CHAT_HELP
            "      --think on|off   the template's thinking switch (Qwen3; default on)\n"
            SESSION_OPTS_HELP
            "                       (the forest as the search left it, with the results'\n"
            "                       scores and tokens; --load shows its branches, recomputed)\n");
}

/* One result (logprob: its sum of log-probabilities): its JSON object, or its text block
 * on stdout (then NULL is returned too). */
static json_t *beam_result_out(const strategy_result *h, double logprob, int32_t rank,
                               const char *text, bool json) {
    const char *ended = app_result_ended(h, false); /* as generate and cot say */
    if (!json) {
        printf("--- %d: score %.4f (logprob %.4f, %d tokens, ended by %s)\n%s\n", rank, h->score,
               logprob, h->n_tokens, ended, text);
        return NULL;
    }
    json_t *r = json_object();
    jo_set(&r, "rank", json_integer(rank));
    jo_set(&r, "score", jo_fixed(h->score, 6));
    jo_set(&r, "logprob", jo_fixed(logprob, 6));
    jo_set(&r, "tokens", jo_ints(h->tokens, h->n_tokens));
    jo_set(&r, "text", jo_str(text));
    jo_set(&r, "ended", jo_str(ended));
    return r;
}

/* The results, best first: a JSON list or text blocks on stdout. ST_ERR_NOMEM. */
static st_code beam_print(const prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                          const strategy *s, const forest *f, bool json, st_err *err) {
    json_t *list = json ? json_array() : NULL;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        strategy_result h;
        strategy_result_at(s, f, i, &h);
        char *text = prompt_continuation(pm->tk, prompt, n_prompt, h.tokens, h.n_tokens);
        if (!text) {
            json_decref(list);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        /* the interface's results carry the score; the sum is beam's own */
        json_t *r = beam_result_out(&h, beam_result(strategy_beam(s), i)->sum, i + 1, text, json);
        if (json) jo_push(&list, r);
        free(text);
    }
    return json ? jo_print(list, err) : ST_OK;
}

/* The progress line after each step. */
static bool beam_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    const beam *b = strategy_beam(s);
    strategy_progress p;
    strategy_get_progress(s, &p);
    app_progress_tick(&((app_strat_run *)ud)->pr, "beam: step %d/%d, %d rows, %d live, %d ended, KV %d slots", st->steps, p.goal,
                      env->plan->n_rows, beam_n_live(b), beam_n_results(b), kv_alloc_used(forest_kv(env->f)));
    return true;
}

/* The statistics line on stderr. */
static void beam_stats(const app_run_stats *st, int32_t width, int32_t n_prompt, int32_t kv_peak) {
    fprintf(stderr, "beam B=%d: %d steps in %.3f s (prompt %d tokens in %.3f s; then %.1f "
            "rows per step on average, at most %d; %.1f ms per step); KV peak %d slots\n",
            width, st->steps, st->t2 - st->t0, n_prompt, st->t1 - st->t0, app_run_mean_rows(st),
            st->max_rows, st->steps > 1 ? 1e3 * (st->t2 - st->t1) / (st->steps - 1) : 0.0, kv_peak);
}

/* --save: the forest as the search left it (live and unpruned hypotheses), the settings,
 * and each result's score and tokens (results that ended may have been pruned). */
static st_code beam_save(void *self, const app_strat_run *r, session_settings *ss, st_err *err) {
    (void)self;
    const forest *f = r->f;
    forest_id from = r->a->o.from;
    const beam_params *bp = &r->a->o.u.beam;
    char key[48], v[64];
    st_code rc = app_session_set_int(ss, "beams", bp->width, err);
    if (!rc) rc = app_session_set_int(ss, "tokens", bp->max_tokens, err);
    snprintf(v, sizeof v, "%g", bp->alpha);
    if (!rc) rc = session_settings_set(ss, "alpha", v, err);
    for (int32_t i = 0; i < strategy_n_results(r->s) && !rc; i++) {
        strategy_result h;
        strategy_result_at(r->s, f, i, &h);
        size_t cap = 16 + 12 * (size_t)h.n_tokens, len = 0;
        char *toks = malloc(cap);
        if (!toks) {
            rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            break;
        }
        toks[0] = '\0';
        for (int32_t j = 0; j < h.n_tokens; j++)
            len += (size_t)snprintf(toks + len, cap - len, "%s%d", j ? " " : "", h.tokens[j]);
        snprintf(key, sizeof key, "result_%d_tokens", i + 1);
        rc = session_settings_set(ss, key, toks, err);
        free(toks);
        snprintf(key, sizeof key, "result_%d_score", i + 1);
        snprintf(v, sizeof v, "%.9g", h.score);
        if (!rc) rc = session_settings_set(ss, key, v, err);
    }
    int32_t n_leaves = forest_leaves(f, NULL, 0);
    forest_id *lv = malloc(sizeof *lv * (size_t)(n_leaves > 0 ? n_leaves : 1));
    if (!rc && !lv) rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) forest_leaves(f, lv, n_leaves);
    for (int32_t i = 0; i < n_leaves && !rc; i++)
        if (lv[i] != from && forest_common_ancestor(f, lv[i], from) == from)
            rc = app_session_mark(ss, f, from, lv[i], "beam", 0, err);
    free(lv);
    return rc;
}

/* The results (a full KV cache is an error: the search's ranking would be cut short),
 * --save and the statistics. */
static st_code beam_report(void *self, app_strat_run *r, st_err *err) {
    (void)self;
    st_code rc = ST_OK;
    if (r->st.full)
        rc = st_set(err, ST_NO_KV_SLOT, "the KV cache of %d slots is full after %d steps "
                    "(raise it with -c)", r->pm->n_slots, r->st.steps);
    if (!rc) rc = beam_print(r->pm, r->prompt, r->n_prompt, r->s, r->f, r->a->json, err);
    fflush(stdout);
    if (!rc && r->a->so.save) rc = app_strat_save(r, NULL, r->kind, err);
    if (!rc && !r->a->quiet)
        beam_stats(&r->st, r->a->o.u.beam.width, r->n_prompt, beam_kv_peak(strategy_beam(r->s)));
    return rc;
}

enum { O_ALPHA = 1000, O_EARLY };
static const struct option beam_longopts[] = {
    {"beams", 1, 0, 'b'}, {"tokens", 1, 0, 'n'}, {"alpha", 1, 0, O_ALPHA}, {"early-stopping", 2, 0, O_EARLY},
    {0, 0, 0, 0}};

static void beam_defaults(void *self, app_strat_args *a) {
    (void)self;
    a->o.budget = a->o.u.beam.max_tokens;
}

static int beam_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)self;
    beam_params *bp = &a->o.u.beam;
    int64_t v;
    double fv;
    if (ch == 'B' && is_short) ch = 'b'; /* short -B is the width; --backend is 'B' too */
    switch (ch) {
    case 'b':
        if (app_opt_int("-B", arg, 1, 1 << 12, &v)) return 2;
        bp->width = (int32_t)v;
        return 0;
    case 'n':
        if (app_opt_int("-n", arg, 0, 1 << 20, &v)) return 2;
        bp->max_tokens = a->o.budget = (int32_t)v;
        return 0;
    case O_ALPHA:
        if (app_parse_float(arg, &fv)) return app_usage_error("bad --alpha '%s' (want a finite number)", arg);
        bp->alpha = (float)fv;
        return 0;
    case O_EARLY:
        if (!arg || !strcmp(arg, "true")) bp->early_stopping = BEAM_STOP_EARLY;
        else if (!strcmp(arg, "false")) bp->early_stopping = BEAM_STOP_HEURISTIC;
        else if (!strcmp(arg, "never")) bp->early_stopping = BEAM_STOP_NEVER;
        else return app_usage_error("bad --early-stopping '%s' (true, false or never)", arg);
        return 0;
    default: return -1;
    }
}

static const app_strat_cmd beam_cmd = {
    .usage = BEAM_USAGE,
    .help = beam_usage,
    .longopts = beam_longopts,
    .shortopts = "B:n:",
    .no_sample = true,
    .session = true,
    .reserve = "the prompt and -n tokens",
    .defaults = beam_defaults,
    .opt = beam_opt,
    .tick = beam_tick,
    .save = beam_save,
    .report = beam_report,
};

int cmd_beam(int argc, char **argv) {
    return app_strategy_cmd(strategy_find("beam"), &beam_cmd, NULL, argc, argv);
}
