/* cmd_margins.c - `multidecode margins`: Writing in the Margins (Russak et al. 2024) over
 * one forest (engine/strategy/margins.h). A long context is cut into chunks of N tokens; each chunk
 * gets a branch that writes a short note about the question, all notes growing together,
 * one forest step per token; then a final branch answers the question with the notes
 * merged into its context. The notes are shown, then the answer.
 *
 * Prompts: the note and answer requests of engine/strategy/margins.h (margins_note_prompt,
 * margins_answer_prompt), rendered as a user message with a chat template (the model's,
 * unless --raw) or used as they are without one. The tokens the prompts share
 * (the question part) are stored and computed once. --rope-gap G (EXPERIMENTAL) answers
 * without re-prefilling the notes: the answer reads every note branch's K/V where it is
 * (chunk, note request and note side by side) at positions shifted by G (engine/strategy/merge.h);
 * its answers differ from the exact merge's. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/margins.h"
#include "forest/step.h"
#include "app.h"
#include "prompt.h"
#include "session_replay.h"

#define MARGINS_MAX_CHUNKS 1024

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define MARGINS_USAGE "usage: multidecode margins -m MODEL --context FILE -q QUESTION [options]"

static void margins_usage(FILE *f) {
    fprintf(f,
            MARGINS_USAGE "\n\n"
            "Writing in the Margins: the context is cut into chunks; every chunk gets a branch\n"
            "that writes a short note about the question, all in one forest (one step per\n"
            "token for all notes); then a final branch answers with the notes merged into\n"
            "its context. Shows the notes and the answer.\n\n"
            PROMPT_MODEL_HELP
            "  -x, --context FILE   the long text\n"
            "  -q, --question TEXT  the question\n"
            "      --chunk N        chunk size in tokens (default 512)\n"
            "      --note-tokens N  tokens per note at most (default 64)\n"
            "  -n, --tokens N       answer tokens at most (default 128)\n"
            "      --json           one JSON object on stdout\n"
            "      --raw            no chat template (the default when the model has none)\n"
            "      --system TEXT    system message for the chat template\n"
            "      --chat-template NAME  template to use instead of the model's\n"
            "      --rope-gap G     EXPERIMENTAL: answer without re-prefilling the notes,\n"
            "                       reading their K/V side by side at positions + G; answers\n"
            "                       differ from the exact merge (the default)\n"
            "  -Q, --quiet          no progress or statistics on stderr\n"
            "      --temp T         temperature; 0 = greedy (default 0)\n"
            PROMPT_SAMPLE_HELP
            "                       (note i samples with seed S + i, the answer with S + chunks)\n"
            SESSION_OPTS_HELP
            "                       (--load shows a saved session's notes and answer)\n");
}

typedef struct margins_opts {
    const char *question, *model_path;
    int32_t chunk, note_tokens, answer_tokens, gap;
    sample_params sp;
    bool json, quiet;
    prompt_chat pc;
    app_session_opts so;
} margins_opts;

/* A malloc'd string of the parts concatenated (NULL-terminated list). */
static char *cat(const char *a, const char *b, const char *c, const char *d, const char *e) {
    const char *p[5] = {a, b, c, d, e};
    size_t n = 1;
    for (int i = 0; i < 5; i++) n += p[i] ? strlen(p[i]) : 0;
    char *s = malloc(n);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < 5; i++)
        if (p[i]) strcat(s, p[i]);
    return s;
}

/* The rope-gap tail: what follows a note before the answer. With a template, the rest of
 * a conversation [user: ..., assistant: NOTE, user: "Answer the question ... Q"]. */
static int32_t *gap_tail(const prompt_model *pm, const margins_opts *o, chat_kind kind,
                         int32_t *n, st_err *err) {
    char *text = NULL;
    bool special = false;
    if (kind == CHAT_NONE) {
        text = cat("\n\nQuestion: ", o->question, "\nAnswer:", NULL, NULL);
    } else {
        char *user = cat("Using your notes on every part of the text, answer the question: ",
                         o->question, NULL, NULL, NULL);
        /* the close of the note's turn, the user turn, the assistant header */
        size_t need = user ? chat_user_turn(kind, NULL, user, false, NULL, 0) : 0;
        text = need > 0 ? malloc(need + 1) : NULL;
        if (text) chat_user_turn(kind, NULL, user, false, text, need + 1);
        free(user);
        special = true;
    }
    if (!text) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int32_t need = tok_encode(pm->tk, text, strlen(text), false, special, NULL, 0);
    int32_t *t = need > 0 ? malloc(sizeof(int32_t) * (size_t)need) : NULL;
    if (t) tok_encode(pm->tk, text, strlen(text), false, special, t, need);
    else st_set(err, need > 0 ? ST_ERR_NOMEM : ST_ERR_ARG, "cannot tokenise the answer prompt");
    free(text);
    *n = need;
    return t;
}

static const char *ended_by(const grow_branch *b, bool full) {
    return b->eog ? "EOS" : b->done ? "budget" : full ? "full context" : "budget";
}

static st_code margins_run(prompt_model *pm, const char *context, const margins_opts *o,
                           st_err *err) {
    prompt_chat pc = o->pc;
    pc.on = !o->pc.raw && (pc.tmpl || prompt_model_chat(pm->m->gguf) != CHAT_NONE);
    chat_kind kind = CHAT_NONE;
    int32_t n_ctx = 0, n_ch = 0, *ptok[MARGINS_MAX_CHUNKS] = {0}, plen[MARGINS_MAX_CHUNKS] = {0};
    int32_t *ctx = prompt_encode_raw(pm->tk, context, false, &n_ctx, err), *fin = NULL;
    forest *f = forest_init(pm->n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    margins mg = {0};
    char *notes = NULL;
    session_settings ss = session_settings_default();
    st_code rc = ST_OK;
    if (!ctx || !f) {
        rc = ctx ? st_set(err, ST_ERR_NOMEM, "out of memory") : err->code;
        goto done;
    }
    if (!pc.on && pc.system) {
        rc = st_set(err, ST_ERR_ARG, "--system needs a chat template, and the model has none "
                    "(name one with --chat-template)");
        goto done;
    }
    if (n_ctx == 0) {
        rc = st_set(err, ST_ERR_ARG, "the context file is empty");
        goto done;
    }
    n_ch = (n_ctx + o->chunk - 1) / o->chunk;
    if (n_ch > MARGINS_MAX_CHUNKS) {
        rc = st_set(err, ST_ERR_ARG, "%d chunks of %d tokens; at most %d (raise --chunk)", n_ch,
                    o->chunk, MARGINS_MAX_CHUNKS);
        goto done;
    }
    /* each chunk's note prompt */
    int32_t need = 0;
    for (int32_t i = 0; i < n_ch; i++) {
        int32_t at = i * o->chunk, len = n_ctx - at < o->chunk ? n_ctx - at : o->chunk;
        char *ct = tok_decode_str(pm->tk, ctx + at, len); /* a stream from the chunk start */
        char *text = ct ? margins_note_prompt(o->question, ct, pc.on) : NULL;
        free(ct);
        ptok[i] = text ? prompt_tokens(pm, &pc, text, &plen[i], &kind, err) : NULL;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!ptok[i]) {
            rc = err->code;
            goto done;
        }
        need += plen[i];
    }
    if ((rc = margins_init(&mg, f, (const int32_t *const *)ptok, plen, n_ch, &o->sp,
                           o->note_tokens, pm->m->hp.n_vocab, err)))
        goto done;
    int32_t prompt_slots = kv_alloc_used(forest_kv(f)) + forest_n_pending(f);
    if (prompt_slots > pm->n_slots) {
        rc = st_set(err, ST_ERR_CONTEXT, "the %d chunk prompts need %d KV slots (a shared prefix "
                    "of %d tokens + %d chunk tokens), more than the KV cache of %d (raise it with "
                    "-c)", n_ch, prompt_slots, mg.n_shared, prompt_slots - mg.n_shared, pm->n_slots);
        goto done;
    }
    prompt_report_chat(&pc, kind, o->quiet);

    /* the notes, in parallel */
    app_progress pr;
    app_progress_init(&pr, !o->quiet);
    double t0 = app_now();
    int32_t steps = 0, active = n_ch, max_rows = 0;
    int64_t rows = 0;
    bool full = false;
    while (mg.phase == MARGINS_NOTES) {
        rc = margins_step(&mg, f, &plan, pm->ctx, pm->tk, NULL, NULL, &active, err);
        if (rc == ST_NO_KV_SLOT) {
            full = true;
            break;
        }
        if (rc) goto done;
        if (steps++ > 0) {
            rows += plan.n_rows;
            if (plan.n_rows > max_rows) max_rows = plan.n_rows;
        }
        app_progress_tick(&pr, "margins: note step %d/%d, %d rows, %d notes running, KV %d slots",
                          steps, o->note_tokens, plan.n_rows, active, kv_alloc_used(forest_kv(f)));
    }
    double t1 = app_now();
    if (full) {
        rc = st_set(err, ST_NO_KV_SLOT, "the KV cache of %d slots is full while writing the notes "
                    "(raise it with -c)", pm->n_slots);
        goto done;
    }
    if (!(notes = margins_notes_text(&mg, f, pm->tk, "\n\n", err))) {
        rc = err->code;
        goto done;
    }
    /* the answer: exact merge of the notes (default) or rope-gap */
    sample_params ap = o->sp;
    ap.seed = o->sp.seed + (uint64_t)n_ch;
    int32_t n_fin = 0;
    if (o->gap < 0) {
        char *text = margins_answer_prompt(o->question, notes, pc.on);
        fin = text ? prompt_tokens(pm, &pc, text, &n_fin, NULL, err) : NULL;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!fin) {
            rc = err->code;
            goto done;
        }
        rc = margins_answer(&mg, f, fin, n_fin, &ap, o->answer_tokens, err);
    } else {
        if (!(fin = gap_tail(pm, o, pc.on ? kind : CHAT_NONE, &n_fin, err))) {
            rc = err->code;
            goto done;
        }
        if (!o->quiet)
            fprintf(stderr, "margins: EXPERIMENTAL rope-gap answer (gap %d): the answer reads the "
                    "notes' K/V side by side; it differs from the exact merge\n", o->gap);
        rc = margins_answer_gap(&mg, f, &plan, pm->ctx, fin, n_fin, o->gap, &ap, o->answer_tokens, err);
    }
    if (rc == ST_NO_KV_SLOT) full = true, rc = ST_OK;
    if (rc) goto done;
    int32_t answer_steps = 0;
    while (!full && !margins_done(&mg)) {
        rc = margins_step(&mg, f, &plan, pm->ctx, pm->tk, NULL, NULL, NULL, err);
        if (rc == ST_NO_KV_SLOT) {
            full = true, rc = ST_OK;
            break;
        }
        if (rc) goto done;
        answer_steps++;
        app_progress_tick(&pr, "margins: answer step %d/%d, KV %d slots", answer_steps,
                          o->answer_tokens, kv_alloc_used(forest_kv(f)));
    }
    app_progress_end(&pr);
    double t2 = app_now();
    char *ans = NULL;
    if (mg.answer.n > 0 &&
        !(ans = merge_branch_text(f, pm->tk, mg.answer_from, mg.answer.br[0].leaf, err))) {
        rc = err->code;
        goto done;
    }

    /* show the notes, then the answer */
    if (o->json) {
        printf("{\"question\": ");
        prompt_json_str(stdout, o->question);
        printf(", \"template\": \"%s\", \"mode\": \"%s\", \"chunks\": %d, \"chunk_tokens\": %d, "
               "\"context_tokens\": %d, \"shared_prefix_tokens\": %d, \"note_steps\": %d, "
               "\"kv_slots_used\": %d,\n \"notes\": [", pc.on ? chat_name(kind) : "none",
               o->gap < 0 ? "exact" : "rope-gap (experimental)", n_ch, o->chunk, n_ctx, mg.n_shared,
               steps, kv_alloc_used(forest_kv(f)));
    }
    for (int32_t i = 0; i < n_ch; i++) {
        char *t = margins_note_text(&mg, f, pm->tk, i, err);
        if (!t) {
            free(ans);
            rc = err->code;
            goto done;
        }
        const grow_branch *b = &mg.notes.br[i];
        int32_t a = i * o->chunk, z = a + o->chunk < n_ctx ? a + o->chunk : n_ctx;
        if (o->json) {
            printf("%s\n  {\"chunk\": %d, \"from_token\": %d, \"to_token\": %d, \"tokens\": %d, "
                   "\"ended\": \"%s\", \"note\": ", i ? "," : "", i, a, z, b->made, ended_by(b, false));
            prompt_json_str(stdout, t);
            printf("}");
        } else {
            printf("--- note %d (context tokens %d..%d; %d tokens, ended by %s)\n%s\n", i, a, z,
                   b->made, ended_by(b, false), t);
        }
        free(t);
    }
    const grow_branch *ab = mg.answer.n > 0 ? &mg.answer.br[0] : NULL;
    if (o->json) {
        printf("\n ],\n \"answer\": {\"text\": ");
        prompt_json_str(stdout, ans ? ans : "");
        printf(", \"prompt_tokens\": %d, \"tokens\": %d, \"ended\": \"%s\"}}\n", n_fin,
               ab ? ab->made : 0, ab ? ended_by(ab, full) : "full context");
    } else {
        printf("=== answer%s (%d tokens, ended by %s)\n%s\n", o->gap < 0 ? "" : " [EXPERIMENTAL rope-gap]",
               ab ? ab->made : 0, ab ? ended_by(ab, full) : "full context", ans ? ans : "");
    }
    fflush(stdout);
    free(ans);
    if (full)
        fprintf(stderr, "multidecode: stopped: the KV cache of %d slots is full (raise it with "
                "-c)\n", pm->n_slots);
    if (!o->quiet)
        fprintf(stderr, "margins: %d chunks of up to %d tokens (%d context tokens, shared prefix %d); "
                "notes: %d steps in %.3f s (%.1f rows per step after the prefill, at most %d); "
                "answer: %d prompt tokens, %d steps in %.3f s; KV slots used %d\n", n_ch, o->chunk,
                n_ctx, mg.n_shared, steps, t1 - t0, steps > 1 ? (double)rows / (steps - 1) : 0.0,
                max_rows, n_fin, answer_steps, t2 - t1, kv_alloc_used(forest_kv(f)));
    if (o->so.save) {
        char v[64];
        if ((rc = app_session_settings(&ss, "margins", o->model_path, &o->sp,
                                       pc.on ? kind : CHAT_NONE, err)))
            goto done;
        rc = session_settings_set(&ss, "question", o->question, err);
        snprintf(v, sizeof v, "%d", o->chunk);
        if (!rc) rc = session_settings_set(&ss, "chunk", v, err);
        snprintf(v, sizeof v, "%d", o->note_tokens);
        if (!rc) rc = session_settings_set(&ss, "note_tokens", v, err);
        if (!rc) rc = session_settings_set(&ss, "mode", o->gap < 0 ? "exact" : "rope-gap", err);
        for (int32_t i = 0; i < n_ch && !rc; i++)
            rc = app_session_mark(&ss, f, mg.note_from[i], mg.notes.br[i].leaf, "margins-note",
                                  o->sp.seed + (uint64_t)i, err);
        if (!rc && ab)
            rc = app_session_mark(&ss, f, mg.answer_from, ab->leaf, "margins-answer", ap.seed, err);
        if (!rc) rc = app_session_save(o->so.save, f, pm->m, pm->tk, &ss, err);
    }
done:
    session_settings_free(&ss);
    free(notes);
    free(fin);
    margins_free(&mg);
    step_plan_free(&plan);
    forest_free(f);
    for (int32_t i = 0; i < n_ch; i++) free(ptok[i]);
    free(ctx);
    return rc;
}

int cmd_margins(int argc, char **argv) {
    enum { O_CHUNK = 1000, O_NOTE, O_GAP };
    static const struct option lo[] = {
        PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS, SESSION_OPTS_LONGOPTS,
        {"context", 1, 0, 'x'}, {"question", 1, 0, 'q'}, {"tokens", 1, 0, 'n'},
        {"chunk", 1, 0, O_CHUNK}, {"note-tokens", 1, 0, O_NOTE}, {"rope-gap", 1, 0, O_GAP},
        {"json", 0, 0, 'J'}, {"raw", 0, 0, 'R'}, {"system", 1, 0, 'Y'},
        {"chat-template", 1, 0, 'E'}, {"quiet", 0, 0, 'Q'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    margins_opts o = {.chunk = 512, .note_tokens = 64, .answer_tokens = 128, .gap = -1,
                      .sp = sample_default_params()};
    o.sp.temp = 0; /* notes and answer are greedy unless asked otherwise */
    const char *ctx_path = NULL;
    int64_t v;
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:t:c:x:q:n:Qh", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&o.sp, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        if (app_session_opt(&o.so, ch, optarg) == 0) continue;
        switch (ch) {
        case 'x': ctx_path = optarg; break;
        case 'q': o.question = optarg; break;
        case 'n':
            if (app_opt_int("-n", optarg, 0, 1 << 24, &v)) return 2;
            o.answer_tokens = (int32_t)v;
            break;
        case O_CHUNK:
            if (app_opt_int("--chunk", optarg, 1, 1 << 24, &v)) return 2;
            o.chunk = (int32_t)v;
            break;
        case O_NOTE:
            if (app_opt_int("--note-tokens", optarg, 1, 1 << 24, &v)) return 2;
            o.note_tokens = (int32_t)v;
            break;
        case O_GAP:
            if (app_opt_int("--rope-gap", optarg, 0, 1 << 24, &v)) return 2;
            o.gap = (int32_t)v;
            break;
        case 'J': o.json = true; break;
        case 'R': case 'Y': case 'E':
            if ((r = prompt_chat_opt(&o.pc, ch, optarg))) return r;
            break;
        case 'Q': o.quiet = true; break;
        case 'h': margins_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode margins --help", MARGINS_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("margins needs a model: -m MODEL");
    o.model_path = mo.path;
    if (o.so.load) return app_session_replay("margins", &o.so, &mo, o.json, o.quiet);
    if (!ctx_path) return app_usage_error("margins needs a context: --context FILE");
    if (!o.question) return app_usage_error("margins needs a question: -q QUESTION");
    if ((r = prompt_chat_check(&o.pc))) return r;

    st_err err = {0};
    prompt_model pm;
    char *context = prompt_open_file(&pm, &mo, ctx_path, "context file", &err);
    if (!context) return app_fail(&err);
    st_code rc = margins_run(&pm, context, &o, &err);
    free(context);
    prompt_model_close(&pm);
    return rc ? app_fail(&err) : 0;
}
