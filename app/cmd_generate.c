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

#include "forest/forest.h"
#include "strategy/grow.h"
#include "forest/step.h"
#include "app.h"
#include "prompt.h"
#include "spec_opts.h"

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
            "                       --chat): chatml, llama3, llama2, zephyr or gemma\n"
            "      --raw            never apply a chat template: -p is raw text\n"
            "      --branches K     K continuations (seeds S, S+1, ...) grown together in one\n"
            "                       forest, one step per token, printed at the end (default 1)\n"
            "      --json           with --branches: a JSON list of {branch, seed, tokens,\n"
            "                       text, ended} on stdout\n"
            SPEC_HELP);
}

/* Starts the output stream with the prompt: it goes through the stream either way, so that
 * the answer's first token is decoded in context; a chat prompt (template markup) is not
 * echoed. */
static void gen_echo_prompt(prompt_model *pm, tok_stream *ts, const int32_t *prompt,
                            int32_t n_prompt, bool chat) {
    char buf[256];
    tok_stream_init(ts);
    for (int32_t i = 0; i < n_prompt; i++)
        if (tok_stream_put(pm->tk, ts, prompt[i], buf, sizeof buf) < sizeof buf && !chat)
            fputs(buf, stdout);
    fflush(stdout);
}

/* Opens the model and takes the prompt's tokens, as prompt_open_with does, but decides
 * chat or raw once the model is open: a non-empty prompt is the user's message when the
 * model has a chat template, unless --raw. */
static int32_t *gen_open(prompt_model *pm, const prompt_model_opts *mo, prompt_chat *pc,
                         const char *text, bool quiet, int32_t *n, st_err *err) {
    if (prompt_model_open(pm, mo, err)) return NULL;
    if (!pc->raw && *text && prompt_model_chat(pm->m->gguf) != CHAT_NONE) pc->on = true;
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

    double t0 = app_now();
    if ((rc = model_forward_linear(pm->ctx, toks, n_prompt, 0, logits, err))) goto out;
    double t1 = app_now();
    int32_t n = n_prompt, made = 0;
    bool full = false;
    while (made < n_gen) {
        int32_t next = sampler_sample(&smp, logits, V);
        made++;
        if (tok_is_eog(pm->tk, next)) break;
        if (tok_stream_put(pm->tk, &ts, next, buf, sizeof buf) < sizeof buf) {
            fputs(buf, stdout);
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
    if (tok_stream_flush(pm->tk, &ts, buf, sizeof buf) < sizeof buf) fputs(buf, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    double t2 = app_now();
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

/* The draft path: speculative greedy decoding or sampling (so->sp.samp), streamed. */
static st_code gen_spec(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, bool chat,
                        const spec_opts *so, int64_t n_gen, bool quiet, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    spec *s = NULL;
    int32_t *out = NULL;
    st_code rc = ST_OK;
    forest_id tip;
    if (!f) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = forest_add_root(f, prompt, NULL, n_prompt, 0, &tip, err))) goto out;
    if (!(s = spec_init(&so->sp, f, tip, err))) {
        rc = err->code;
        goto out;
    }
    if (!(out = malloc(sizeof(int32_t) * (size_t)spec_max_emit(s)))) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    tok_stream ts;
    char buf[256];
    gen_echo_prompt(pm, &ts, prompt, n_prompt, chat);
    double t0 = app_now(), t1 = t0;
    int64_t made = 0;
    bool full = false, eog = false;
    while (made < n_gen && !eog) {
        int32_t k = 0;
        rc = spec_step(s, f, &plan, pm->ctx, out, &k, err);
        if (rc == ST_NO_KV_SLOT) {
            full = true;
            rc = ST_OK;
            break;
        }
        if (rc) goto out;
        if (spec_get_stats(s)->steps == 1) t1 = app_now();
        for (int32_t i = 0; i < k && made < n_gen; i++) {
            if (tok_is_eog(pm->tk, out[i])) {
                eog = true;
                break;
            }
            made++;
            if (tok_stream_put(pm->tk, &ts, out[i], buf, sizeof buf) < sizeof buf) fputs(buf, stdout);
        }
        fflush(stdout);
    }
    if (tok_stream_flush(pm->tk, &ts, buf, sizeof buf) < sizeof buf) fputs(buf, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    double t2 = app_now();
    if (full) fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full\n", pm->n_slots);
    if (!quiet) {
        const spec_stats *st = spec_get_stats(s);
        char what[160];
        fprintf(stderr, "drafts: %s; %lld steps, %.2f tokens per step (%lld draft tokens accepted "
                "of %lld draft rows, %lld window rows; a row costs %.2f of a one-row step); "
                "first step (prefill) %.3f s; %lld tokens in %.3f s (%.1f tok/s)\n",
                spec_opts_describe(so, what, sizeof what), (long long)st->steps,
                (double)st->emitted / (double)(st->steps ? st->steps : 1), (long long)st->accepted,
                (long long)st->draft_rows, (long long)st->la_rows, spec_row_cost(s), t1 - t0,
                (long long)made, t2 - t0, (double)made / (t2 - t0 + 1e-12));
    }
out:
    free(out);
    spec_free(s);
    step_plan_free(&plan);
    forest_free(f);
    return rc;
}

/* The forest path: k branches from the prompt's last token, one step per token. */
static st_code gen_branches(prompt_model *pm, const int32_t *prompt, int32_t n_prompt, bool chat,
                            const sample_params *sp, int64_t n_gen, int32_t k, bool json,
                            bool quiet, st_err *err) {
    int32_t V = pm->m->hp.n_vocab;
    forest *f = forest_init(pm->n_slots, 0);
    prompt_toks *out = calloc((size_t)k, sizeof *out);
    step_plan plan;
    step_plan_init(&plan);
    grow g = {0};
    st_code rc = ST_OK;
    forest_id last;
    if (!f || !out) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rc = forest_add_root(f, prompt, NULL, n_prompt, 0, &last, err))) goto out;
    if ((rc = grow_init(&g, f, last, k, sp, (int32_t)n_gen, V, err))) goto out;

    double t0 = app_now(), t1 = t0;
    int32_t steps = 0, max_rows = 0;
    int64_t rows = 0, first_rows = 0;
    bool full = false;
    while (g.n_active > 0) {
        rc = grow_step(&g, f, &plan, pm->ctx, pm->tk, prompt_emit, out, NULL, err);
        if (rc == ST_NO_KV_SLOT) { /* the cache is full: report what the branches made */
            full = true;
            rc = ST_OK;
            break;
        }
        if (rc) goto out;
        if (steps == 0) {
            t1 = app_now();
            first_rows = plan.n_rows;
        } else {
            rows += plan.n_rows;
            if (plan.n_rows > max_rows) max_rows = plan.n_rows;
        }
        steps++;
    }
    double t2 = app_now();

    if (json) printf("[");
    int64_t made = 0;
    for (int32_t i = 0; i < k; i++) {
        const grow_branch *b = &g.br[i];
        const char *ended = b->eog ? "EOS" : b->done ? "budget" : full ? "full context" : "budget";
        char *text = prompt_continuation(pm->tk, prompt, n_prompt, out[i].t, out[i].n);
        if (!text) {
            rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            goto out;
        }
        made += b->made;
        uint64_t seed = sp->seed + (uint64_t)i;
        if (json) {
            printf("%s\n {\"branch\": %d, \"seed\": %llu, \"tokens\": [", i ? "," : "", i,
                   (unsigned long long)seed);
            for (int32_t j = 0; j < out[i].n; j++) printf("%s%d", j ? ", " : "", out[i].t[j]);
            printf("], \"text\": ");
            prompt_json_str(stdout, text);
            printf(", \"ended\": \"%s\"}", ended);
        } else {
            /* each branch reads as the prompt and its continuation, as one branch does */
            printf("--- branch %d (seed %llu, %d tokens, ended by %s)\n", i, (unsigned long long)seed, b->made,
                   ended);
            tok_stream ts;
            gen_echo_prompt(pm, &ts, prompt, n_prompt, chat);
            printf("%s\n", text);
        }
        free(text);
    }
    if (json) printf("\n]\n");
    fflush(stdout);
    if (full)
        fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full (raise it "
                "with -c)\n", pm->n_slots);
    if (!quiet)
        fprintf(stderr, "%d branches: %d steps (prefill %lld rows in %.3f s; then %.1f rows per "
                "step on average, at most %d); generated %lld tokens in %.3f s (%.1f tok/s in "
                "all); KV slots used %d\n", k, steps, (long long)first_rows, t1 - t0,
                steps > 1 ? (double)rows / (steps - 1) : 0.0, max_rows, (long long)made, t2 - t0,
                (double)made / (t2 - t0 + 1e-12), kv_alloc_used(forest_kv(f)));
out:
    grow_free(&g);
    step_plan_free(&plan);
    prompt_toks_free(out, k);
    free(out);
    forest_free(f);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"prompt", 1, 0, 'p'}, {"tokens", 1, 0, 'n'}, {"quiet", 0, 0, 'q'},
        {"chat", 0, 0, 'C'},  {"system", 1, 0, 'Y'}, {"chat-template", 1, 0, 'E'},
        {"raw", 0, 0, 'R'},   {"branches", 1, 0, 'b'}, {"json", 0, 0, 'J'},
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
