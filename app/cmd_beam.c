/* cmd_beam.c - `multidecode beam`: beam search of width B over one shared-KV forest
 * (engine/strategy/beam.h), printing the B best hypotheses with their scores; and the progress
 * line the strategy commands (beam, cot) print on stderr during long runs.
 *
 * The prompt is one root chain; every beam step is one forest step computing all live
 * hypotheses together; hypotheses share their common prefixes in the KV cache and losers
 * are pruned. Scores are sum of log-probabilities / length^alpha, as Hugging Face
 * transformers computes them; end-of-generation tokens end a hypothesis. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "strategy/beam.h"
#include "strategy/strategy.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_run.h"

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

typedef struct beam_opts {
    beam_params bp;
    bool json, quiet, chat;
    app_session_opts so;    /* --save / --load */
    const char *model_path; /* -m, for the saved session */
    chat_kind kind;         /* the template used, CHAT_NONE for none */
} beam_opts;

/* --save: the forest as the search left it (live and unpruned hypotheses), the settings,
 * and each result's score and tokens (results that ended may have been pruned). */
static st_code beam_save(const prompt_model *pm, forest *f, const strategy *s, forest_id from,
                         const beam_opts *o, st_err *err) {
    session_settings ss;
    char key[48], v[64];
    st_code rc = app_session_settings(&ss, "beam", o->model_path, NULL, o->kind, err);
    snprintf(v, sizeof v, "%d", o->bp.width);
    if (!rc) rc = session_settings_set(&ss, "beams", v, err);
    snprintf(v, sizeof v, "%d", o->bp.max_tokens);
    if (!rc) rc = session_settings_set(&ss, "tokens", v, err);
    snprintf(v, sizeof v, "%g", o->bp.alpha);
    if (!rc) rc = session_settings_set(&ss, "alpha", v, err);
    for (int32_t i = 0; i < strategy_n_results(s) && !rc; i++) {
        strategy_result h;
        strategy_result_at(s, f, i, &h);
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
        rc = session_settings_set(&ss, key, toks, err);
        free(toks);
        snprintf(key, sizeof key, "result_%d_score", i + 1);
        snprintf(v, sizeof v, "%.9g", h.score);
        if (!rc) rc = session_settings_set(&ss, key, v, err);
    }
    int32_t n_leaves = forest_leaves(f, NULL, 0);
    forest_id *lv = malloc(sizeof *lv * (size_t)(n_leaves > 0 ? n_leaves : 1));
    if (!rc && !lv) rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) forest_leaves(f, lv, n_leaves);
    for (int32_t i = 0; i < n_leaves && !rc; i++)
        if (lv[i] != from && forest_common_ancestor(f, lv[i], from) == from)
            rc = app_session_mark(&ss, f, from, lv[i], "beam", 0, err);
    free(lv);
    if (!rc) rc = app_session_save(o->so.save, f, pm->m, pm->tk, &ss, err);
    session_settings_free(&ss);
    return rc;
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
    app_progress_tick(ud, "beam: step %d/%d, %d rows, %d live, %d ended, KV %d slots", st->steps, p.goal,
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

/* The search through the beam strategy (strategy.h), then its results, --save and the
 * statistics. */
static st_code beam_run(prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                        const beam_opts *o, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk};
    strategy_opts so = strategy_default_opts(STRAT_BEAM);
    so.u.beam = o->bp, so.budget = o->bp.max_tokens, so.n_vocab = pm->m->hp.n_vocab;
    app_run_stats st;
    app_progress pr;
    app_progress_init(&pr, !o->quiet);
    st_code rc = f ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = forest_add_root(f, prompt, NULL, n_prompt, 0, &so.from, err);
    if (!rc && !(s = strategy_create(&so, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, beam_tick, &pr, err);
    app_progress_end(&pr);
    if (!rc && st.full)
        rc = st_set(err, ST_NO_KV_SLOT, "the KV cache of %d slots is full after %d steps "
                    "(raise it with -c)", pm->n_slots, st.steps);
    if (!rc) rc = beam_print(pm, prompt, n_prompt, s, f, o->json, err);
    fflush(stdout);
    if (!rc && o->so.save) rc = beam_save(pm, f, s, so.from, o, err);
    if (!rc && !o->quiet) beam_stats(&st, o->bp.width, n_prompt, beam_kv_peak(strategy_beam(s)));
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

int cmd_beam(int argc, char **argv) {
    enum { O_ALPHA = 1000, O_EARLY };
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"beams", 1, 0, 'b'}, {"tokens", 1, 0, 'n'},
        {"alpha", 1, 0, O_ALPHA}, {"early-stopping", 2, 0, O_EARLY}, {"json", 0, 0, 'J'},
        {"quiet", 0, 0, 'q'}, PROMPT_CHAT_LONGOPTS, {"help", 0, 0, 'h'}, SESSION_OPTS_LONGOPTS, {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    beam_opts o = {.bp = beam_default_params()};
    const char *prompt = "";
    prompt_chat pc = {0};
    int64_t v;
    double fv;
    int ch, r, idx;
    for (;;) {
        idx = -1;
        if ((ch = getopt_long(argc, argv, "m:p:B:n:t:c:qh", lo, &idx)) == -1) break;
        if (ch == 'B' && idx < 0) ch = 'b'; /* short -B is the width; --backend is 'B' too */
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_chat_opt(&pc, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if (app_session_opt(&o.so, ch, optarg) == 0) continue;
        switch (ch) {
        case 'p': prompt = optarg; break;
        case 'b':
            if (app_opt_int("-B", optarg, 1, 1 << 12, &v)) return 2;
            o.bp.width = (int32_t)v;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 0, 1 << 20, &v)) return 2;
            o.bp.max_tokens = (int32_t)v;
            break;
        case O_ALPHA:
            if (app_parse_float(optarg, &fv)) return app_usage_error("bad --alpha '%s' (want a finite number)", optarg);
            o.bp.alpha = (float)fv;
            break;
        case O_EARLY:
            if (!optarg || !strcmp(optarg, "true")) o.bp.early_stopping = BEAM_STOP_EARLY;
            else if (!strcmp(optarg, "false")) o.bp.early_stopping = BEAM_STOP_HEURISTIC;
            else if (!strcmp(optarg, "never")) o.bp.early_stopping = BEAM_STOP_NEVER;
            else return app_usage_error("bad --early-stopping '%s' (true, false or never)", optarg);
            break;
        case 'J': o.json = true; break;
        case 'q': o.quiet = true; break;
        case 'h': beam_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode beam --help", BEAM_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("beam needs a model: -m MODEL");
    if (o.so.load) return app_session_replay("beam", &o.so, &mo, o.json, o.quiet);
    o.model_path = mo.path;
    if ((r = prompt_chat_check(&pc))) return r;

    st_err err = {0};
    prompt_model pm;
    int32_t n_prompt = 0;
    int32_t *toks = prompt_open_with(&pm, &mo, &pc, prompt, o.bp.max_tokens,
                                     "the prompt and -n tokens", o.quiet, &n_prompt, &o.kind, &err);
    if (!toks) return app_fail(&err);
    st_code rc = beam_run(&pm, toks, n_prompt, &o, &err);
    free(toks);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
