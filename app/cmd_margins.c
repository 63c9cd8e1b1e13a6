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

#include "base/clock.h"
#include "strategy/margins.h"
#include "app.h"
#include "json_out.h"
#include "prompt.h"
#include "session_replay.h"
#include "strategy_cmd.h"

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
    const char *question;
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
    int32_t *t = tok_encode_alloc(pm->tk, text, strlen(text), false, special, n, err);
    free(text);
    if (t && *n <= 0) {
        free(t);
        st_set(err, ST_ERR_ARG, "cannot tokenise the answer prompt");
        return NULL;
    }
    return t;
}

static const char *ended_by(const grow_branch *b, bool full) {
    return b->eog ? "EOS" : b->done ? "budget" : full ? "full context" : "budget";
}

/* What a run makes: the context's tokens, every chunk's note prompt, the forest that
 * grows the notes and then the answer, and what the statistics line reports. */
typedef struct margins_job {
    prompt_chat pc;                    /* the options' with .on decided for the model */
    chat_kind kind;                    /* the template the prompts use (with pc.on) */
    int32_t *ctx, n_ctx;               /* the context's tokens */
    int32_t n_ch, *ptok[MARGINS_MAX_CHUNKS], plen[MARGINS_MAX_CHUNKS];
    int32_t *fin, n_fin;               /* the answer's prompt tokens */
    char *ans;                         /* the answer's text */
    margins_opts o;
    forest *f;                         /* the driver's, from the setup on */
    strategy *s;                       /* the margins strategy, once created */
    const margins *mg;                 /* its state (notes, answer, phase) */
    prompt_model *pm;
    app_run_stats st;                  /* the whole run (st.full: the cache filled up) */
    int32_t steps, answer_steps, max_rows; /* note steps, answer steps */
    int64_t rows;                      /* note rows after the prefill */
    int32_t phase;                     /* the phase before the step the tick reports */
    double t1;                         /* the end of the notes */
} margins_job;

/* The context's tokens, cut into chunks, and each chunk's note prompt. ST_ERR_ARG (empty
 * context, too many chunks), ST_ERR_NOMEM, a tokeniser's codes. */
static st_code margins_prompts(margins_job *j, prompt_model *pm, const char *context,
                               const margins_opts *o, st_err *err) {
    if (!(j->ctx = prompt_encode_raw(pm->tk, context, false, &j->n_ctx, err))) return err->code;
    if (j->n_ctx == 0) return st_set(err, ST_ERR_ARG, "the context file is empty");
    /* n_ch counts the prompts made so far (what margins_job_free frees), never more than
     * the arrays hold */
    int32_t n_ch = (j->n_ctx + o->chunk - 1) / o->chunk;
    if (n_ch > MARGINS_MAX_CHUNKS)
        return st_set(err, ST_ERR_ARG, "%d chunks of %d tokens; at most %d (raise --chunk)",
                      n_ch, o->chunk, MARGINS_MAX_CHUNKS);
    for (int32_t i = 0; i < n_ch; i++) {
        char *text = margins_chunk_prompt(pm->tk, j->ctx, j->n_ctx, o->chunk, i, o->question, j->pc.on);
        j->ptok[i] = text ? prompt_tokens(pm, &j->pc, text, &j->plen[i], &j->kind, err) : NULL;
        j->n_ch = i + 1;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!j->ptok[i]) return err->code;
    }
    return ST_OK;
}

/* The answer's prompt from the notes' text (strategy_answer_fn): the exact merge's
 * prompt, or with --rope-gap the tail read after the notes. */
static int32_t *margins_answer_tokens(void *ud, const char *notes, int32_t *n, st_err *err) {
    margins_job *j = ud;
    free(j->fin);
    j->fin = NULL;
    if (j->o.gap >= 0) {
        if (!(j->fin = gap_tail(j->pm, &j->o, j->pc.on ? j->kind : CHAT_NONE, &j->n_fin, err))) return NULL;
        if (!j->o.quiet)
            fprintf(stderr, "margins: EXPERIMENTAL rope-gap answer (gap %d): the answer reads the "
                    "notes' K/V side by side; it differs from the exact merge\n", j->o.gap);
    } else {
        char *text = margins_answer_prompt(j->o.question, notes, j->pc.on);
        j->fin = text ? prompt_tokens(j->pm, &j->pc, text, &j->n_fin, NULL, err) : NULL;
        if (!text) st_set(err, ST_ERR_NOMEM, "out of memory");
        free(text);
        if (!j->fin) return NULL;
    }
    /* the strategy frees what it gets; the job keeps its own copy for the report */
    int32_t *t = malloc(sizeof(int32_t) * (size_t)j->n_fin);
    if (!t) st_set(err, ST_ERR_NOMEM, "out of memory");
    else memcpy(t, j->fin, sizeof(int32_t) * (size_t)j->n_fin);
    *n = j->n_fin;
    return t;
}

/* The note prompts and the margins strategy's options over them. */
static st_code margins_setup(void *self, app_strat_run *r, st_err *err) {
    margins_job *j = self;
    margins_opts *o = &j->o;
    o->sp = r->a->o.sample, o->json = r->a->json, o->quiet = r->a->quiet, o->so = r->a->so;
    j->pc = r->a->pc, j->pm = r->pm, j->f = r->f;
    st_code rc = margins_prompts(j, r->pm, r->context, o, err);
    strategy_opts *so = &r->a->o;
    so->budget = o->note_tokens;
    so->u.margins.prompts = (const int32_t *const *)j->ptok, so->u.margins.lens = j->plen;
    so->u.margins.n_chunks = j->n_ch, so->u.margins.answer_budget = o->answer_tokens;
    /* -n 0: no answer to grow (the strategy reads an answer budget of 0 as the notes'),
     * its prompt is still made for the report (margins_report) */
    so->u.margins.gap = o->gap;
    so->u.margins.answer = o->answer_tokens > 0 ? margins_answer_tokens : NULL;
    so->u.margins.answer_ud = j;
    return rc;
}

/* The prompts the strategy added must fit the cache (ST_ERR_CONTEXT); then the template
 * in use is shown. */
static st_code margins_created(void *self, app_strat_run *r, st_err *err) {
    margins_job *j = self;
    j->s = r->s;
    j->mg = strategy_margins(j->s);
    j->phase = j->mg->phase;
    int32_t prompt_slots = kv_alloc_used(forest_kv(j->f)) + forest_n_pending(j->f);
    if (prompt_slots > r->pm->n_slots)
        return st_set(err, ST_ERR_CONTEXT, "the %d chunk prompts need %d KV slots (a shared "
                      "prefix of %d tokens + %d chunk tokens), more than the KV cache of %d "
                      "(raise it with -c)", j->n_ch, prompt_slots, j->mg->n_shared,
                      prompt_slots - j->mg->n_shared, r->pm->n_slots);
    prompt_report_chat(&j->pc, j->kind, j->o.quiet);
    return ST_OK;
}

/* After each step: the notes' or the answer's counts and progress line. */
static bool margins_tick(void *ud, const strategy *s, const strategy_env *env,
                         const app_run_stats *st) {
    (void)s, (void)st;
    app_strat_run *r = ud;
    margins_job *j = r->self;
    int32_t rows = env->plan->n_rows, slots = kv_alloc_used(forest_kv(env->f));
    if (j->phase == MARGINS_NOTES) {
        if (j->steps++ > 0) {
            j->rows += rows;
            if (rows > j->max_rows) j->max_rows = rows;
        }
        j->t1 = mono_now_s();
        app_progress_tick(&r->pr, "margins: note step %d/%d, %d rows, %d notes running, KV %d "
                          "slots", j->steps, j->o.note_tokens, rows, j->mg->notes.n_active, slots);
    } else {
        j->answer_steps++;
        app_progress_tick(&r->pr, "margins: answer step %d/%d, KV %d slots", j->answer_steps,
                          j->o.answer_tokens, slots);
    }
    j->phase = j->mg->phase;
    return true;
}

/* After the notes and the answer ran to their ends or a full KV cache (j->st.full; while
 * writing the notes: ST_NO_KV_SLOT): the answer's text. */
static st_code margins_write(margins_job *j, prompt_model *pm, st_err *err) {
    st_code rc = ST_OK;
    if (!j->steps) j->t1 = j->st.t0;
    if (!rc && j->st.full && j->mg->phase == MARGINS_NOTES)
        return st_set(err, ST_NO_KV_SLOT, "the KV cache of %d slots is full while writing the "
                      "notes (raise it with -c)", pm->n_slots);
    if (!rc && j->o.answer_tokens == 0) { /* the prompt of an answer of no tokens */
        char *notes = margins_notes_text(j->mg, j->f, pm->tk, "\n\n", err);
        int32_t n = 0, *t = notes ? margins_answer_tokens(j, notes, &n, err) : NULL;
        free(notes);
        free(t);
        if (!t) return err->code;
    }
    if (!rc && j->mg->answer.n > 0 &&
        !(j->ans = merge_branch_text(j->f, pm->tk, j->mg->answer_from, j->mg->answer.br[0].leaf, err)))
        rc = err->code;
    return rc;
}

/* The notes, then the answer: text blocks, or one JSON object. ST_ERR_NOMEM. */
static st_code margins_print(const margins_job *j, const prompt_model *pm, const margins_opts *o,
                             st_err *err) {
    json_t *notes = o->json ? json_array() : NULL;
    for (int32_t i = 0; i < j->n_ch; i++) {
        char *t = margins_note_text(j->mg, j->f, pm->tk, i, err);
        if (!t) {
            json_decref(notes);
            return err->code;
        }
        const grow_branch *b = &j->mg->notes.br[i];
        int32_t a = i * o->chunk, z = a + o->chunk < j->n_ctx ? a + o->chunk : j->n_ctx;
        if (o->json) {
            json_t *n = json_object();
            jo_set(&n, "chunk", json_integer(i));
            jo_set(&n, "from_token", json_integer(a));
            jo_set(&n, "to_token", json_integer(z));
            jo_set(&n, "tokens", json_integer(b->made));
            jo_set(&n, "ended", jo_str(ended_by(b, false)));
            jo_set(&n, "note", jo_str(t));
            jo_push(&notes, n);
        } else {
            printf("--- note %d (context tokens %d..%d; %d tokens, ended by %s)\n%s\n", i, a, z,
                   b->made, ended_by(b, false), t);
        }
        free(t);
    }
    const grow_branch *ab = j->mg->answer.n > 0 ? &j->mg->answer.br[0] : NULL;
    const char *ended = ab ? ended_by(ab, j->st.full)
                           : o->answer_tokens == 0 && !j->st.full ? "budget" : "full context";
    if (!o->json) {
        printf("=== answer%s (%d tokens, ended by %s)\n%s\n", o->gap < 0 ? "" : " [EXPERIMENTAL rope-gap]",
               ab ? ab->made : 0, ended, j->ans ? j->ans : "");
        return ST_OK;
    }
    json_t *answer = json_object(), *doc = json_object();
    jo_set(&answer, "text", jo_str(j->ans));
    jo_set(&answer, "prompt_tokens", json_integer(j->n_fin));
    jo_set(&answer, "tokens", json_integer(ab ? ab->made : 0));
    jo_set(&answer, "ended", jo_str(ended));
    jo_set(&doc, "question", jo_str(o->question));
    jo_set(&doc, "template", jo_str(j->pc.on ? chat_name(j->kind) : "none"));
    jo_set(&doc, "mode", jo_str(o->gap < 0 ? "exact" : "rope-gap (experimental)"));
    jo_set(&doc, "chunks", json_integer(j->n_ch));
    jo_set(&doc, "chunk_tokens", json_integer(o->chunk));
    jo_set(&doc, "context_tokens", json_integer(j->n_ctx));
    jo_set(&doc, "shared_prefix_tokens", json_integer(j->mg->n_shared));
    jo_set(&doc, "note_steps", json_integer(j->steps));
    jo_set(&doc, "kv_slots_used", json_integer(kv_alloc_used(forest_kv(j->f))));
    jo_set(&doc, "notes", notes);
    jo_set(&doc, "answer", answer);
    return jo_print(doc, err);
}

/* The statistics line on stderr. */
static void margins_stats(const margins_job *j, const margins_opts *o) {
    fprintf(stderr, "margins: %d chunks of up to %d tokens (%d context tokens, shared prefix %d); "
            "notes: %d steps in %.3f s (%.1f rows per step after the prefill, at most %d); "
            "answer: %d prompt tokens, %d steps in %.3f s; KV slots used %d\n", j->n_ch, o->chunk,
            j->n_ctx, j->mg->n_shared, j->steps, j->t1 - j->st.t0,
            j->steps > 1 ? (double)j->rows / (j->steps - 1) : 0.0, j->max_rows, j->n_fin,
            j->answer_steps, j->st.t2 - j->t1, kv_alloc_used(forest_kv(j->f)));
}

/* --save: the settings, and which note (seed) or the answer made each node. */
static st_code margins_save(void *self, const app_strat_run *r, session_settings *ss, st_err *err) {
    (void)r;
    const margins_job *j = self;
    const margins_opts *o = &j->o;
    st_code rc = session_settings_set(ss, "question", o->question, err);
    if (!rc) rc = app_session_set_int(ss, "chunk", o->chunk, err);
    if (!rc) rc = app_session_set_int(ss, "note_tokens", o->note_tokens, err);
    if (!rc) rc = session_settings_set(ss, "mode", o->gap < 0 ? "exact" : "rope-gap", err);
    for (int32_t i = 0; i < j->n_ch && !rc; i++)
        rc = app_session_mark(ss, j->f, j->mg->note_from[i], j->mg->notes.br[i].leaf,
                              "margins-note", o->sp.seed + (uint64_t)i, err);
    if (!rc && j->mg->answer.n > 0) /* the answer samples with seed S + chunks */
        rc = app_session_mark(ss, j->f, j->mg->answer_from, j->mg->answer.br[0].leaf,
                              "margins-answer", o->sp.seed + (uint64_t)j->n_ch, err);
    return rc;
}

/* The notes and the answer, the full-cache note, the statistics and --save. */
static st_code margins_report(void *self, app_strat_run *r, st_err *err) {
    margins_job *j = self;
    j->st = r->st;
    st_code rc = margins_write(j, r->pm, err);
    if (!rc) rc = margins_print(j, r->pm, &j->o, err);
    fflush(stdout);
    if (!rc && j->st.full)
        app_run_full_note(r->pm->n_slots);
    if (!rc && !j->o.quiet) margins_stats(j, &j->o);
    if (!rc && j->o.so.save) rc = app_strat_save(r, &j->o.sp, j->pc.on ? j->kind : CHAT_NONE, err);
    return rc;
}

static void margins_job_free(void *self) {
    margins_job *j = self;
    free(j->ans);
    free(j->fin);
    for (int32_t i = 0; i < j->n_ch; i++) free(j->ptok[i]);
    free(j->ctx);
}

enum { O_CHUNK = 1000, O_NOTE, O_GAP };
static const struct option margins_longopts[] = {
    {"question", 1, 0, 'q'}, {"tokens", 1, 0, 'n'}, {"chunk", 1, 0, O_CHUNK},
    {"note-tokens", 1, 0, O_NOTE}, {"rope-gap", 1, 0, O_GAP}, {0, 0, 0, 0}};

static int margins_opt(void *self, app_strat_args *a, int ch, bool is_short, const char *arg) {
    (void)a, (void)is_short;
    margins_opts *o = &((margins_job *)self)->o;
    int64_t v;
    int32_t *dst = ch == 'n' ? &o->answer_tokens : ch == O_CHUNK ? &o->chunk : ch == O_NOTE ? &o->note_tokens
                 : ch == O_GAP ? &o->gap : NULL;
    const char *name = ch == 'n' ? "-n" : ch == O_CHUNK ? "--chunk" : ch == O_NOTE ? "--note-tokens" : "--rope-gap";
    if (ch == 'q') o->question = arg;
    if (ch == 'q' || !dst) return ch == 'q' ? 0 : -1;
    if (app_opt_int(name, arg, ch == 'n' || ch == O_GAP ? 0 : 1, 1 << 24, &v)) return 2;
    *dst = (int32_t)v;
    return 0;
}

static int margins_check(void *self, app_strat_args *a) {
    (void)a;
    if (!((margins_job *)self)->o.question) return app_usage_error("margins needs a question: -q QUESTION");
    return -1;
}

static void margins_defaults(void *self, app_strat_args *a) {
    margins_job *j = self;
    j->o = (margins_opts){.chunk = 512, .note_tokens = 64, .answer_tokens = 128, .gap = -1};
    j->kind = CHAT_NONE;
    a->o.sample.temp = 0; /* notes and answer are greedy unless asked otherwise */
}

static const app_strat_cmd margins_cmd = {
    .usage = MARGINS_USAGE,
    .help = margins_usage,
    .longopts = margins_longopts,
    .shortopts = "q:n:",
    .context = true,
    .session = true,
    .defaults = margins_defaults,
    .opt = margins_opt,
    .check = margins_check,
    .setup = margins_setup,
    .tick = margins_tick,
    .created = margins_created,
    .save = margins_save,
    .report = margins_report,
    .free = margins_job_free,
};

int cmd_margins(int argc, char **argv) {
    margins_job j = {0};
    return app_strategy_cmd(strategy_find("margins"), &margins_cmd, &j, argc, argv);
}
