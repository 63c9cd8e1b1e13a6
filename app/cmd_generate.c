/* cmd_generate.c - `multidecode generate`: one prompt, decoded linearly and streamed, or
 * (--branches k) k sampled continuations of it grown together in one forest.
 *
 * Linear: the prompt is prefilled in one batch, then tokens are sampled one at a time
 * until -n tokens, an end-of-generation token, or a full context. Text goes to stdout as
 * whole UTF-8 characters; statistics go to stderr. When the model has a chat template
 * (or with --chat) the prompt is the user's message: it is rendered with the template
 * (engine/tok/chat.h) and only the answer is printed; with --raw, without a template, or
 * without -p, the prompt is the text as given, echoed.
 *
 * Branches: the prompt is one root chain; k branches with seeds seed, seed + 1, ... grow
 * from its last token (engine/strategy/grow.h), all advanced by one forest step per token, and
 * each is printed at the end. Branch i makes exactly the tokens that linear decoding
 * with --seed seed+i makes, since its leaf sees the same keys as the linear sequence.
 *
 * Drafts (--draft, --lookahead W,N,G): decoding accelerated by tree-verified drafts
 * (engine/spec/spec.h), greedy unless --temp is given; the tokens are those of plain
 * greedy decoding (or of linear sampling with the same parameters and seed), several per
 * step when the drafts are right. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "strategy/grow.h"
#include "forest/step.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "spec_opts.h"
#include "strategy_run.h"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define GEN_USAGE "usage: multidecode generate -m MODEL [-p PROMPT] [options]"

static void gen_usage(FILE *f) {
    fprintf(f,
            GEN_USAGE "\n\n"
            PROMPT_MODEL_HELP
            "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n"
            "  -n, --tokens N       tokens to generate (per branch; default 128)\n"
            "      --temp T         temperature; 0 = greedy (default 0.8)\n"
            PROMPT_SAMPLE_HELP
            "  -q, --quiet          no statistics on stderr\n"
            "      --chat           -p is a user message: apply the model's chat template\n"
            "                       (the default when the model has one)\n"
            "      --system TEXT    system message for --chat (implies --chat)\n"
            "      --chat-template NAME  template to use instead of the model's (implies\n"
            "                       --chat): chatml, llama3, llama2, zephyr, gemma, gemma4, qwen35,\n"
            "                       harmony\n"
            "      --raw            never apply a chat template: -p is raw text\n"
            "      --think on|off   the template's thinking switch (Qwen3; default on)\n"
            "      --branches K     K continuations (seeds S, S+1, ...) grown together in one\n"
            "                       forest, one step per token, printed at the end (default 1)\n"
            "      --json           with --branches: a JSON list of {branch, seed, tokens,\n"
            "                       text, ended} on stdout\n"
            SPEC_HELP);
}

/* Starts the output stream with the prompt: it goes through the stream either way, so that
 * the answer's first token is decoded in context; a chat prompt (template markup) is not
 * echoed. */
static void gen_echo_prompt(const prompt_model *pm, tok_stream *ts, const int32_t *prompt,
                            int32_t n_prompt, bool chat) {
    char buf[256];
    tok_stream_init(ts);
    for (int32_t i = 0; i < n_prompt; i++)
        if (tok_stream_put(pm->tk, ts, prompt[i], buf, sizeof buf) < sizeof buf && !chat)
            prompt_put_text(stdout, buf);
    fflush(stdout);
}

/* Opens the model and takes the prompt's tokens, as prompt_open_with does, keeping the
 * chat-or-raw decision (prompt_chat_decide) in *pc for the output. */
static int32_t *gen_open(prompt_model *pm, const prompt_model_opts *mo, prompt_chat *pc,
                         const char *text, bool quiet, int32_t *n, st_err *err) {
    if (prompt_model_open(pm, mo, err)) return NULL;
    prompt_chat_decide(pc, pm->m, text);
    chat_kind k = CHAT_NONE;
    int32_t *t = prompt_tokens(pm, pc, text, n, &k, err);
    if (t) prompt_report_chat(pc, k, quiet);
    if (t && prompt_check_fits(*n, pm->n_slots, "the prompt", err)) {
        free(t);
        t = NULL;
    }
    if (!t) prompt_model_close(pm);
    return t;
}

/* The linear path: prefill, then one token per forward pass, streamed. */
static st_code gen_linear(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, bool chat,
                          const sample_params *sp, int64_t n_gen, bool quiet, const char *backend,
                          st_err *err) {
    const model *m = pm->m;
    int32_t n_slots = pm->n_slots, V = m->hp.n_vocab;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_slots);
    float *logits = malloc(sizeof(float) * (size_t)V);
    sampler smp = {0};
    st_code rc = ST_OK;
    if (!toks || !logits || sampler_init(&smp, sp, V)) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    memcpy(toks, prompt, sizeof(int32_t) * (size_t)n_prompt);
    tok_stream ts;
    char buf[256];
    gen_echo_prompt(pm, &ts, prompt, n_prompt, chat);

    double t0 = mono_now_s();
    if ((rc = model_forward_linear(pm->ctx, toks, n_prompt, 0, logits, err))) goto out;
    double t1 = mono_now_s();
    int32_t n = n_prompt, made = 0;
    bool full = false;
    while (made < n_gen) {
        int32_t next = sampler_sample(&smp, logits, V);
        made++;
        if (tok_is_eog(pm->tk, next)) break;
        if (tok_stream_put(pm->tk, &ts, next, buf, sizeof buf) < sizeof buf) {
            prompt_put_text(stdout, buf);
            fflush(stdout);
        }
        if (made == n_gen) break;
        if (n >= n_slots) {
            full = true;
            break;
        }
        toks[n] = next;
        if ((rc = model_forward_linear(pm->ctx, &toks[n], 1, n, logits, err))) goto out;
        n++;
    }
    if (tok_stream_flush(pm->tk, &ts, buf, sizeof buf) < sizeof buf) prompt_put_text(stdout, buf);
    fputc('\n', stdout);
    fflush(stdout);
    double t2 = mono_now_s();
    if (full) fprintf(stderr, "multidecode: stopped: the context of %d tokens is full\n", n_slots);
    if (!quiet)
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s); generated: %d tokens in %.3f s "
                "(%.1f tok/s); %d threads, %s backend\n", n_prompt, t1 - t0,
                n_prompt / (t1 - t0 + 1e-12), made, t2 - t1, made / (t2 - t1 + 1e-12),
                kern_backend_threads(model_ctx_backend(pm->ctx)), backend);
out:
    sampler_free(&smp);
    free(toks);
    free(logits);
    return rc;
}

/* The decoded text of the tokens kept, written as they come. */
typedef struct gen_stream {
    const tok *tk;
    tok_stream ts;
} gen_stream;

static void gen_stream_emit(void *ud, int32_t branch, int32_t token, float logprob) {
    (void)branch, (void)logprob;
    gen_stream *g = ud;
    char buf[256];
    if (tok_stream_put(g->tk, &g->ts, token, buf, sizeof buf) < sizeof buf) prompt_put_text(stdout, buf);
}

static bool gen_flush_tick(void *ud, const strategy *s, const strategy_env *env,
                           const app_run_stats *st) {
    (void)ud, (void)s, (void)env, (void)st;
    fflush(stdout);
    return true;
}

/* The statistics line of a speculative run (stats of the spec driver d). */
static void gen_spec_stats(const spec_opts *so, const spec *d, const app_run_stats *st, int64_t made) {
    const spec_stats *ss = spec_get_stats(d);
    char what[160];
    double dt = st->t2 - st->t0;
    fprintf(stderr, "drafts: %s; %lld steps, %.2f tokens per step (%lld draft tokens accepted "
            "of %lld draft rows, %lld window rows; a row costs %.2f of a one-row step); "
            "first step (prefill) %.3f s; %lld tokens in %.3f s (%.1f tok/s)\n",
            spec_opts_describe(so, what, sizeof what), (long long)ss->steps,
            (double)ss->emitted / (double)(ss->steps ? ss->steps : 1), (long long)ss->accepted,
            (long long)ss->draft_rows, (long long)ss->la_rows, spec_row_cost(d), st->t1 - st->t0,
            (long long)made, dt, (double)made / (dt + 1e-12));
}

/* --draft / --lookahead: speculative decoding through the draft or lookahead strategy,
 * greedy or sampling (so->sp.samp) with plain decoding's tokens, the text printed as the
 * steps accept it. */
static st_code gen_spec(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, bool chat,
                        const spec_opts *so, int64_t n_gen, bool quiet, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    gen_stream gs = {.tk = pm->tk};
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk,
                        .emit = gen_stream_emit, .emit_ud = &gs};
    strategy_opts o = strategy_opts_for(strategy_find(so->sp.la.w > 0 ? "lookahead" : "draft"));
    o.u.spec.p = so->sp, o.budget = (int32_t)n_gen, o.n_vocab = pm->m->hp.n_vocab;
    app_run_stats st = {0};
    int64_t made = 0;
    st_code rc = f ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = forest_add_root(f, prompt, NULL, n_prompt, 0, &o.from, err);
    /* -n 0: the prompt alone, with no strategy to run */
    if (!rc && n_gen > 0 && !(s = strategy_create(&o, &env, err))) rc = err->code;
    if (!rc) {
        gen_echo_prompt(pm, &gs.ts, prompt, n_prompt, chat);
        if (s) rc = app_strategy_run(s, &env, &st, gen_flush_tick, NULL, err);
        char buf[256];
        if (tok_stream_flush(pm->tk, &gs.ts, buf, sizeof buf) < sizeof buf) prompt_put_text(stdout, buf);
        fputc('\n', stdout);
        fflush(stdout);
    }
    if (s) {
        strategy_progress pg;
        strategy_get_progress(s, &pg);
        made = pg.tokens;
    }
    if (!rc && st.full) fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full\n", pm->n_slots);
    if (!rc && !quiet && s) gen_spec_stats(so, strategy_spec(s), &st, made);
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

/* The k branches (out[i]: branch i's tokens) of strategy s: a JSON list, or each as the
 * prompt and its continuation. full: the KV cache filled up. ST_ERR_NOMEM. */
static st_code gen_branches_print(const prompt_model *pm, const int32_t *prompt, int32_t n_prompt,
                                  bool chat, const sample_params *sp, const strategy *s,
                                  const forest *f, const prompt_toks *out, bool full, bool json,
                                  st_err *err) {
    json_t *list = json ? json_array() : NULL;
    for (int32_t i = 0; i < strategy_n_results(s); i++) {
        char *text = prompt_continuation(pm->tk, prompt, n_prompt, out[i].t, out[i].n);
        if (!text) {
            json_decref(list);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        uint64_t seed = sp->seed + (uint64_t)i;
        const char *ended = app_result_ended(&r, full);
        if (json) {
            json_t *b = json_object();
            jo_set(&b, "branch", json_integer(i));
            jo_set(&b, "seed", jo_u64(seed));
            jo_set(&b, "tokens", jo_ints(out[i].t, out[i].n));
            jo_set(&b, "text", jo_str(text));
            jo_set(&b, "ended", jo_str(ended));
            jo_push(&list, b);
        } else {
            /* each branch reads as the prompt and its continuation, as one branch does */
            printf("--- branch %d (seed %llu, %d tokens, ended by %s)\n", i,
                   (unsigned long long)seed, r.n_tokens, ended);
            tok_stream ts;
            gen_echo_prompt(pm, &ts, prompt, n_prompt, chat);
            prompt_put_text(stdout, text);
            fputc('\n', stdout);
        }
        free(text);
    }
    return json ? jo_print(list, err) : ST_OK;
}

/* The forest path: k branches from the prompt's last token (the grow strategy), one step
 * per token. */
static st_code gen_branches(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, bool chat,
                            const sample_params *sp, int64_t n_gen, int32_t k, bool json,
                            bool quiet, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    prompt_toks *out = calloc((size_t)k, sizeof *out);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = pm->ctx, .tk = pm->tk, .emit = prompt_emit,
                        .emit_ud = out};
    strategy_opts o = strategy_opts_for(strategy_find("grow"));
    o.sample = *sp, o.budget = (int32_t)n_gen, o.n_vocab = pm->m->hp.n_vocab, o.u.grow.n = k;
    app_run_stats st;
    st_code rc = f && out ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = forest_add_root(f, prompt, NULL, n_prompt, 0, &o.from, err);
    if (!rc && !(s = strategy_create(&o, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, NULL, NULL, err);
    if (!rc) rc = gen_branches_print(pm, prompt, n_prompt, chat, sp, s, f, out, st.full, json, err);
    fflush(stdout);
    if (!rc && st.full)
        app_run_full_note(pm->n_slots);
    if (!rc && !quiet) {
        int64_t made = 0;
        for (int32_t i = 0; i < k; i++) {
            strategy_result r;
            strategy_result_at(s, f, i, &r);
            made += r.n_tokens;
        }
        fprintf(stderr, "%d branches: %d steps (prefill %lld rows in %.3f s; then %.1f rows per "
                "step on average, at most %d); generated %lld tokens in %.3f s (%.1f tok/s in "
                "all); KV slots used %d\n", k, st.steps, (long long)st.first_rows, st.t1 - st.t0,
                app_run_mean_rows(&st), st.max_rows, (long long)made, st.t2 - st.t0,
                (double)made / (st.t2 - st.t0 + 1e-12), kv_alloc_used(forest_kv(f)));
    }
    strategy_free(s);
    step_plan_free(&plan);
    prompt_toks_free(out, out ? k : 0);
    free(out);
    forest_free(f);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"tokens", 1, 0, 'n'}, {"quiet", 0, 0, 'q'},
        PROMPT_CHAT_LONGOPTS, {"branches", 1, 0, 'b'}, {"json", 0, 0, 'J'},
        SPEC_LONGOPTS,        {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    spec_opts so = spec_default_opts();
    const char *prompt = "";
    int64_t n_gen = 128, branches = 1;
    bool quiet = false, json = false;
    prompt_chat pc = {0};
    sample_params sp = sample_default_params();
    int ch, r;
    bool temp_given = false; /* --draft samples only when asked to (greedy by default) */
    while ((ch = getopt_long(argc, argv, "m:p:n:t:c:qh", lo, NULL)) != -1) {
        temp_given |= ch == 'T';
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&sp, ch, optarg)) >= 0 ||
            (r = prompt_chat_opt(&pc, ch, optarg)) >= 0 || (r = spec_opt(&so, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p': prompt = optarg; break;
        case 'n':
            if (app_opt_int("-n", optarg, 0, 1 << 24, &n_gen)) return 2;
            break;
        case 'q': quiet = true; break;
        case 'b':
            if (app_opt_int("--branches", optarg, 1, 1 << 16, &branches)) return 2;
            break;
        case 'J': json = true; break;
        case 'h': gen_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode generate --help", GEN_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("generate needs a model: -m MODEL");
    if ((r = prompt_chat_check(&pc))) return r;
    if (json && branches < 2) return app_usage_error("--json goes with --branches K (K >= 2)");
    if (so.on && branches > 1) return app_usage_error("--draft and --lookahead decode one sequence: not with --branches");
    if (so.on && temp_given) so.sp.samp = sp;

    st_err err = {0};
    prompt_model pm;
    int32_t n_prompt = 0;
    int32_t *toks = gen_open(&pm, &mo, &pc, prompt, quiet, &n_prompt, &err);
    if (!toks) return app_fail(&err);
    st_code rc;
    if (so.on)
        rc = gen_spec(&pm, toks, n_prompt, pc.on, &so, n_gen, quiet, &err);
    else if (branches == 1)
        rc = gen_linear(&pm, toks, n_prompt, pc.on, &sp, n_gen, quiet, mo.backend, &err);
    else
        rc = gen_branches(&pm, toks, n_prompt, pc.on, &sp, n_gen, (int32_t)branches, json, quiet, &err);
    free(toks);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
