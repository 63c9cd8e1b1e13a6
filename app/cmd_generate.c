/* cmd_generate.c - `multidecode generate`: one sequence, decoded linearly, streamed.
 *
 * The prompt is prefilled in one batch, then tokens are sampled one at a time until
 * -n tokens, an end-of-generation token, or a full context. Text goes to stdout as whole
 * UTF-8 characters; statistics go to stderr. With --chat the prompt is the user's message:
 * it is rendered with the model's chat template (engine/chat.h) and only the answer is
 * printed; without it (--raw, the default) the prompt is the text as given, echoed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/chat.h"
#include "../engine/model.h"
#include "../engine/sample.h"
#include "../engine/tok.h"
#include "app.h"

static void gen_usage(FILE *f) {
    fprintf(f,
            "usage: multidecode generate -m MODEL [-p PROMPT] [options]\n\n"
            "  -m, --model PATH     GGUF model file\n"
            "  -p, --prompt TEXT    prompt (default empty: start from BOS)\n"
            "  -n, --tokens N       tokens to generate (default 128)\n"
            "      --temp T         temperature; 0 = greedy (default 0.8)\n"
            "      --top-k K        keep the K most likely tokens (default 40; 0 = off)\n"
            "      --top-p P        nucleus sampling mass (default 0.95; 1 = off)\n"
            "      --min-p P        drop tokens below P x the best probability (default 0.05)\n"
            "      --seed S         sampler seed (default 1)\n"
            "  -t, --threads N      CPU threads (default: one per core)\n"
            "  -c, --ctx N          KV cache size in tokens (default: min(model context, 4096))\n"
            "      --backend NAME   cpu (default) or ref\n"
            "  -q, --quiet          no statistics on stderr\n"
            "      --chat           -p is a user message: apply the model's chat template\n"
            "      --system TEXT    system message for --chat (implies --chat)\n"
            "      --chat-template NAME  template to use instead of the model's (implies\n"
            "                       --chat): chatml, llama3, llama2, zephyr or gemma\n"
            "      --raw            never apply a chat template (the default without --chat)\n");
}

/* "chatml, llama3, ..." for messages. */
static const char *gen_chat_names(char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = CHAT_NONE + 1; k < CHAT_N_KINDS && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", k > CHAT_NONE + 1 ? ", " : "",
                                chat_name((chat_kind)k));
    return buf;
}

/* The prompt text for --chat: the optional system message (the caller's, else the
 * model's default when its template has one and is the one used) and the user message,
 * rendered with the chosen template (named, else detected from tokenizer.chat_template).
 * Returns a malloc'd string and sets *kind, or NULL with err set. */
static char *gen_chat_prompt(const gguf_ctx *g, const char *named, const char *system,
                             const char *user, chat_kind *kind, st_err *err) {
    const char *jinja = NULL;
    if (gguf_get_str(g, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    chat_kind detected = chat_detect(jinja);
    chat_kind k = named ? chat_from_name(named) : detected;
    if (k == CHAT_NONE) {
        char names[128];
        st_set(err, ST_ERR_ARG, "--chat: %s; name one with --chat-template (%s) or use --raw",
               jinja ? "the model's tokenizer.chat_template is not one this program knows"
                     : "the model has no chat template (tokenizer.chat_template)",
               gen_chat_names(names, sizeof names));
        return NULL;
    }
    char *dflt = NULL;
    if (!system && k == detected) {
        size_t n = chat_default_system(jinja, NULL, 0);
        if (n > 0 && (dflt = malloc(n + 1)) == NULL) {
            st_set(err, ST_ERR_NOMEM, "out of memory");
            return NULL;
        }
        if (n > 0) chat_default_system(jinja, dflt, n + 1);
    }
    chat_msg msgs[2];
    size_t n_msgs = 0;
    if (system) msgs[n_msgs++] = (chat_msg){"system", system};
    msgs[n_msgs++] = (chat_msg){"user", user};
    size_t need = chat_apply_with_default(k, dflt, msgs, n_msgs, true, NULL, 0);
    char *text = malloc(need + 1);
    if (text) chat_apply_with_default(k, dflt, msgs, n_msgs, true, text, need + 1);
    else st_set(err, ST_ERR_NOMEM, "out of memory");
    free(dflt);
    *kind = k;
    return text;
}

int cmd_generate(int argc, char **argv) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"prompt", 1, 0, 'p'}, {"tokens", 1, 0, 'n'},
        {"temp", 1, 0, 'T'},  {"top-k", 1, 0, 'K'},  {"top-p", 1, 0, 'P'},
        {"min-p", 1, 0, 'M'}, {"seed", 1, 0, 'S'},   {"threads", 1, 0, 't'},
        {"ctx", 1, 0, 'c'},   {"backend", 1, 0, 'B'}, {"quiet", 0, 0, 'q'},
        {"chat", 0, 0, 'C'},  {"system", 1, 0, 'Y'}, {"chat-template", 1, 0, 'E'},
        {"raw", 0, 0, 'R'},   {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
    const char *path = NULL, *prompt = "", *backend = "cpu";
    int64_t n_gen = 128, threads = 0, n_ctx = 0, iv;
    double fv;
    bool quiet = false, chat = false, raw = false;
    const char *system = NULL, *tmpl_name = NULL;
    sample_params sp = sample_default_params();
    int ch;
    while ((ch = getopt_long(argc, argv, "m:p:n:t:c:qh", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': path = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n':
            if (app_parse_int(optarg, 0, 1 << 24, &n_gen)) return app_usage_error("bad -n '%s'", optarg);
            break;
        case 'T':
            if (app_parse_float(optarg, &fv) || fv < 0) return app_usage_error("bad --temp '%s'", optarg);
            sp.temp = (float)fv;
            break;
        case 'K':
            if (app_parse_int(optarg, 0, 1 << 30, &iv)) return app_usage_error("bad --top-k '%s'", optarg);
            sp.top_k = (int32_t)iv;
            break;
        case 'P':
            if (app_parse_float(optarg, &fv) || fv <= 0 || fv > 1)
                return app_usage_error("bad --top-p '%s' (want 0 < P <= 1)", optarg);
            sp.top_p = (float)fv;
            break;
        case 'M':
            if (app_parse_float(optarg, &fv) || fv < 0 || fv >= 1)
                return app_usage_error("bad --min-p '%s' (want 0 <= P < 1)", optarg);
            sp.min_p = (float)fv;
            break;
        case 'S':
            if (app_parse_int(optarg, 0, INT64_MAX, &iv)) return app_usage_error("bad --seed '%s'", optarg);
            sp.seed = (uint64_t)iv;
            break;
        case 't':
            if (app_parse_int(optarg, 1, 1024, &threads)) return app_usage_error("bad -t '%s'", optarg);
            break;
        case 'c':
            if (app_parse_int(optarg, 1, 1 << 24, &n_ctx)) return app_usage_error("bad -c '%s'", optarg);
            break;
        case 'B': backend = optarg; break;
        case 'q': quiet = true; break;
        case 'C': chat = true; break;
        case 'Y': system = optarg; chat = true; break;
        case 'E': {
            char names[128];
            if (chat_from_name(optarg) == CHAT_NONE)
                return app_usage_error("unknown chat template '%s' (known: %s)", optarg,
                                       gen_chat_names(names, sizeof names));
            tmpl_name = optarg;
            chat = true;
            break;
        }
        case 'R': raw = true; break;
        case 'h': gen_usage(stdout); return 0;
        default: gen_usage(stderr); return 2;
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!path) return app_usage_error("generate needs a model: -m MODEL");
    if (raw && chat) return app_usage_error("--raw excludes --chat, --system and --chat-template");

    st_err err = {0};
    int rc = 1;
    tok *tk = NULL;
    model_ctx *ctx = NULL;
    int32_t *toks = NULL;
    float *logits = NULL;
    sampler smp = {0};
    char *chat_text = NULL;
    model *m = model_load(path, &err);
    if (!m) return app_fail(&err);
    tk = tok_from_gguf(m->gguf, &err);
    if (!tk) goto out;

    /* A chat prompt holds special tokens as text, and its template may write BOS itself. */
    bool add_bos = tok_add_bos(tk), special = false;
    if (chat) {
        chat_kind kind = CHAT_NONE;
        chat_text = gen_chat_prompt(m->gguf, tmpl_name, system, prompt, &kind, &err);
        if (!chat_text) goto out;
        prompt = chat_text;
        special = true;
        if (chat_includes_bos(kind)) add_bos = false;
        if (!quiet) fprintf(stderr, "chat template: %s%s\n", chat_name(kind), tmpl_name ? "" : " (detected)");
    }
    int32_t n_prompt = tok_encode(tk, prompt, strlen(prompt), add_bos, special, NULL, 0);
    if (n_prompt == 0) {
        st_set(&err, ST_ERR_ARG, "the prompt is empty and the model has no BOS token to start from");
        goto out;
    }
    model_ctx_params cp = model_ctx_default_params();
    cp.n_threads = (int32_t)threads;
    cp.backend = backend;
    cp.n_slots = (int32_t)n_ctx;
    ctx = model_ctx_init(m, &cp, &err);
    if (!ctx) goto out;
    int32_t n_slots = model_ctx_n_slots(ctx);
    if (n_prompt > n_slots) {
        st_set(&err, ST_ERR_CONTEXT, "the prompt has %d tokens, more than the context of %d "
               "(raise it with -c)", n_prompt, n_slots);
        goto out;
    }
    toks = malloc(sizeof(int32_t) * (size_t)n_slots);
    logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    if (!toks || !logits || sampler_init(&smp, &sp, m->hp.n_vocab)) {
        st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    tok_encode(tk, prompt, strlen(prompt), add_bos, special, toks, n_slots);

    tok_stream ts;
    tok_stream_init(&ts);
    char buf[256];
    /* The prompt goes through the stream either way, so that the answer's first token is
     * decoded in context; a chat prompt (template markup) is not echoed. */
    for (int32_t i = 0; i < n_prompt; i++)
        if (tok_stream_put(tk, &ts, toks[i], buf, sizeof buf) < sizeof buf && !chat) fputs(buf, stdout);
    fflush(stdout);

    double t0 = app_now();
    if (model_forward_linear(ctx, toks, n_prompt, 0, logits, &err)) goto out;
    double t1 = app_now();
    int32_t n = n_prompt, made = 0;
    bool full = false;
    while (made < n_gen) {
        int32_t next = sampler_sample(&smp, logits, m->hp.n_vocab);
        made++;
        if (tok_is_eog(tk, next)) break;
        if (tok_stream_put(tk, &ts, next, buf, sizeof buf) < sizeof buf) {
            fputs(buf, stdout);
            fflush(stdout);
        }
        if (made == n_gen) break;
        if (n >= n_slots) {
            full = true;
            break;
        }
        toks[n] = next;
        if (model_forward_linear(ctx, &toks[n], 1, n, logits, &err)) goto out;
        n++;
    }
    if (tok_stream_flush(tk, &ts, buf, sizeof buf) < sizeof buf) fputs(buf, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    double t2 = app_now();
    if (full) fprintf(stderr, "multidecode: stopped: the context of %d tokens is full\n", n_slots);
    if (!quiet)
        fprintf(stderr, "prompt: %d tokens in %.3f s (%.1f tok/s); generated: %d tokens in %.3f s "
                "(%.1f tok/s); %d threads, %s backend\n", n_prompt, t1 - t0,
                n_prompt / (t1 - t0 + 1e-12), made, t2 - t1, made / (t2 - t1 + 1e-12),
                kern_backend_threads(model_ctx_backend(ctx)), backend);
    rc = 0;
out:
    if (rc) app_fail(&err);
    sampler_free(&smp);
    free(chat_text);
    free(toks);
    free(logits);
    model_ctx_free(ctx);
    tok_free(tk);
    model_free(m);
    return rc;
}
