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
#include "strategy/grow.h"
#include "forest/step.h"
#include "app.h"
#include "prompt.h"
#include "session_replay.h"

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

int cmd_ask(int argc, char **argv) {
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
        {"context", 1, 0, 'x'}, {"question", 1, 0, 'q'}, {"tokens", 1, 0, 'n'},
        {"json", 0, 0, 'J'},    {"raw", 0, 0, 'R'},      {"system", 1, 0, 'Y'},
        {"chat-template", 1, 0, 'E'}, {"quiet", 0, 0, 'Q'}, {"help", 0, 0, 'h'},
        {"budgets", 1, 0, 'b'}, SESSION_OPTS_LONGOPTS, {0, 0, 0, 0}};
    app_session_opts so = {0};
    prompt_model_opts mo = prompt_model_default_opts();
    sample_params sp = sample_default_params();
    sp.temp = 0; /* answers are greedy unless asked otherwise */
    const char *qs[ASK_MAX_QUESTIONS], *ctx_path = NULL;
    int32_t n_q = 0;
    int64_t budget = 128, qbudget[ASK_MAX_QUESTIONS];
    int32_t n_qb = 0;
    bool json = false, quiet = false;
    prompt_chat pc = {0};
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:t:c:x:q:n:h", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&sp, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if (app_session_opt(&so, ch, optarg) == 0) continue;
        switch (ch) {
        case 'x': ctx_path = optarg; break;
        case 'q':
            if (n_q == ASK_MAX_QUESTIONS) return app_usage_error("at most %d questions", ASK_MAX_QUESTIONS);
            qs[n_q++] = optarg;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 0, 1 << 24, &budget)) return 2;
            break;
        case 'b': {
            char list[1024];
            snprintf(list, sizeof list, "%s", optarg);
            n_qb = 0;
            for (char *t = strtok(list, ","); t; t = strtok(NULL, ",")) {
                if (n_qb == ASK_MAX_QUESTIONS || app_parse_int(t, 0, 1 << 24, &qbudget[n_qb]))
                    return app_usage_error("bad --budgets '%s' (at most %d integers from 0 to %d)",
                                           optarg, ASK_MAX_QUESTIONS, 1 << 24);
                n_qb++;
            }
            break;
        }
        case 'J': json = true; break;
        case 'R': case 'Y': case 'E':
            if ((r = prompt_chat_opt(&pc, ch, optarg))) return r;
            break;
        case 'Q': quiet = true; break;
        case 'h': ask_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode ask --help", ASK_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("ask needs a model: -m MODEL");
    if (so.load) return app_session_replay("ask", &so, &mo, json, quiet);
    if (!ctx_path) return app_usage_error("ask needs a context: --context FILE");
    if (n_q == 0) return app_usage_error("ask needs at least one question: -q QUESTION");
    if (n_qb > n_q) return app_usage_error("--budgets lists %d budgets for %d questions", n_qb, n_q);
    if ((r = prompt_chat_check(&pc))) return r;

    st_err err = {0};
    st_code rc = ST_OK;
    prompt_model pm;
    char *context = prompt_open_file(&pm, &mo, ctx_path, "context file", &err);
    if (!context) return app_fail(&err);
    int32_t *ptok[ASK_MAX_QUESTIONS] = {0}, n_ptok[ASK_MAX_QUESTIONS] = {0};
    prompt_toks *out = calloc((size_t)n_q, sizeof *out);
    forest *f = forest_init(pm.n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    grow g = {0};
    if (!out || !f) {
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    pc.on = !pc.raw && (pc.tmpl || prompt_model_chat(pm.m->gguf) != CHAT_NONE);
    if (!pc.on && pc.system) {
        rc = st_set(&err, ST_ERR_ARG, "--system needs a chat template, and the model has none "
                    "(name one with --chat-template)");
        goto out;
    }

    /* every question's whole prompt, then their longest common prefix */
    for (int32_t i = 0; i < n_q; i++) {
        char *text = ask_text(context, qs[i], pc.on);
        ptok[i] = text ? prompt_tokens(&pm, &pc, text, &n_ptok[i], NULL, &err) : NULL;
        if (!text) st_set(&err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!ptok[i]) {
            rc = err.code;
            goto out;
        }
    }
    int32_t lcp = n_ptok[0];
    for (int32_t i = 1; i < n_q; i++) {
        int32_t j = 0;
        while (j < lcp && j < n_ptok[i] && ptok[i][j] == ptok[0][j]) j++;
        lcp = j;
    }
    int32_t need = lcp;
    for (int32_t i = 0; i < n_q; i++) need += n_ptok[i] - lcp;
    if (need > pm.n_slots) {
        rc = st_set(&err, ST_ERR_CONTEXT, "the context and the %d question%s need %d KV slots "
                    "before answering (a shared prefix of %d tokens + %d question tokens), more "
                    "than the KV cache of %d (raise it with -c)", n_q, n_q > 1 ? "s" : "", need,
                    lcp, need - lcp, pm.n_slots);
        goto out;
    }
    for (int32_t i = n_qb; i < n_q; i++) qbudget[i] = budget;
    int64_t all_budgets = 0;
    for (int32_t i = 0; i < n_q; i++) all_budgets += qbudget[i];
    if (!quiet && need + all_budgets > pm.n_slots)
        fprintf(stderr, "multidecode: note: %d prompt tokens + %lld answer tokens may not fit "
                "in the KV cache of %d; answers stop when it is full (raise it with -c)\n", need,
                (long long)all_budgets, pm.n_slots);

    /* the forest: the shared prefix once, each question's rest under it */
    forest_id prefix = FOREST_NONE;
    if (lcp > 0 && (rc = forest_add_root(f, ptok[0], NULL, lcp, 0, &prefix, &err))) goto out;
    for (int32_t i = 0; i < n_q; i++) {
        forest_id from = prefix;
        int32_t rest = n_ptok[i] - lcp;
        if (rest > 0 && lcp > 0) rc = forest_append(f, prefix, ptok[i] + lcp, NULL, rest, &from, &err);
        else if (rest > 0) rc = forest_add_root(f, ptok[i], NULL, rest, 0, &from, &err);
        if (rc) goto out;
        sample_params bp = sp;
        bp.seed = sp.seed + (uint64_t)i;
        if ((rc = grow_add(&g, f, from, &bp, (int32_t)qbudget[i], pm.m->hp.n_vocab, &err))) goto out;
    }
    /* a question that is all prefix answers from a node that also has children: the step
     * must still return that node's logits */
    for (int32_t i = 0; i < n_q; i++)
        if (forest_n_children(f, g.br[i].start) > 0) forest_set_flags(f, g.br[i].start, FOREST_WANT_LOGITS, 0);

    double t0 = app_now();
    int32_t steps = 0;
    bool full = false;
    while (g.n_active > 0) {
        rc = grow_step(&g, f, &plan, pm.ctx, pm.tk, prompt_emit, out, NULL, &err);
        if (rc == ST_NO_KV_SLOT) {
            full = true;
            rc = ST_OK;
            break;
        }
        if (rc) goto out;
        steps++;
    }
    double t1 = app_now();

    int32_t used = kv_alloc_used(forest_kv(f));
    int64_t unshared = (int64_t)used + (lcp > 0 ? (int64_t)(n_q - 1) * lcp : 0), made = 0;
    if (json) {
        printf("{\"model\": ");
        prompt_json_str(stdout, mo.path);
        printf(", \"template\": \"%s\", \"questions\": %d, \"shared_prefix_tokens\": %d, "
               "\"prompt_tokens\": %d, \"kv_slots_used\": %d, \"kv_slots_unshared\": %lld, "
               "\"kv_slots\": %d, \"steps\": %d,\n \"answers\": [",
               pc.on ? chat_name(pc.tmpl ? chat_from_name(pc.tmpl) : prompt_model_chat(pm.m->gguf))
                     : "none",
               n_q, lcp, need, used, (long long)unshared, pm.n_slots, steps);
    }
    for (int32_t i = 0; i < n_q; i++) {
        const grow_branch *b = &g.br[i];
        const char *ended = b->eog ? "EOS" : b->done ? "budget" : full ? "full context" : "budget";
        char *ans = prompt_continuation(pm.tk, ptok[i], n_ptok[i], out[i].t, out[i].n);
        if (!ans) {
            rc = st_set(&err, ST_ERR_NOMEM, "out of memory");
            goto out;
        }
        made += b->made;
        if (json) {
            printf("%s\n  {\"question\": ", i ? "," : "");
            prompt_json_str(stdout, qs[i]);
            printf(", \"answer\": ");
            prompt_json_str(stdout, ans);
            printf(", \"prompt_tokens\": %d, \"tokens\": %d, \"ended\": \"%s\"}", n_ptok[i],
                   b->made, ended);
        } else {
            printf("Q%d: %s\nA%d: %s\n\n", i + 1, qs[i], i + 1, ans);
        }
        free(ans);
    }
    if (json) printf("\n]}\n");
    fflush(stdout);
    if (full) fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full (raise it "
                      "with -c)\n", pm.n_slots);
    if (!quiet)
        fprintf(stderr, "ask: %d questions, shared prefix %d tokens (%d prompt tokens in all); "
                "%d steps, %lld answer tokens in %.3f s (%.1f tok/s); KV slots used %d (%lld "
                "without sharing)\n", n_q, lcp, need, steps, (long long)made, t1 - t0,
                (double)made / (t1 - t0 + 1e-12), used, (long long)unshared);
    if (so.save) { /* the forest, the settings, and which question (seed) made each node */
        session_settings ss;
        chat_kind kind = pc.on ? (pc.tmpl ? chat_from_name(pc.tmpl) : prompt_model_chat(pm.m->gguf))
                               : CHAT_NONE;
        char key[32], v[32];
        rc = app_session_settings(&ss, "ask", mo.path, &sp, kind, &err);
        snprintf(v, sizeof v, "%lld", (long long)budget);
        if (!rc) rc = session_settings_set(&ss, "tokens", v, &err);
        for (int32_t i = 0; i < n_q && !rc; i++) {
            snprintf(key, sizeof key, "question_%d", i);
            rc = session_settings_set(&ss, key, qs[i], &err);
            if (!rc && forest_get(f, g.br[i].leaf))
                rc = app_session_mark(&ss, f, g.br[i].start, g.br[i].leaf, "ask",
                                      sp.seed + (uint64_t)i, &err);
        }
        if (!rc) rc = app_session_save(so.save, f, pm.m, pm.tk, &ss, &err);
        session_settings_free(&ss);
    }
out:
    grow_free(&g);
    step_plan_free(&plan);
    forest_free(f);
    prompt_toks_free(out, n_q);
    free(out);
    for (int32_t i = 0; i < n_q; i++) free(ptok[i]);
    free(context);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
