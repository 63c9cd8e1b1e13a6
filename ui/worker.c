/* worker.c - the engine thread (worker.h): a job queue, the running strategy stepped one
 * forest step at a time, the prune history (undo.h), statistics for the status line. */
#include "worker.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strategy/beam.h"
#include "strategy/cot.h"
#include "strategy/grow.h"
#include "strategy/merge.h"
#include "session/session.h"
#include "forest/step.h"
#include "spec_job.h"
#include "undo.h"

#define Q_CAP 64

enum { RUN_NONE, RUN_GROW, RUN_COT, RUN_BEAM, RUN_STEPS, RUN_MARGINS, RUN_DRAFT, RUN_LOOKAHEAD };

struct ui_worker {
    pthread_t th;
    pthread_mutex_t mu;        /* the forest and everything the UI reads */
    pthread_mutex_t qmu;       /* the queue */
    pthread_cond_t qcv;
    ui_job q[Q_CAP];
    int32_t q_head, q_n;
    /* engine */
    forest *f;
    step_plan plan;
    step_plan preview;         /* the next step's plan, built and cancelled, never run */
    model_ctx *ctx;
    const tok *tk;
    int32_t n_vocab;
    sample_params sp;
    int32_t budget;
    ui_save_fn save;
    ui_load_fn load;
    void *ud;
    /* the running strategy */
    int run;
    bool paused;
    grow g;
    cot c;
    beam *b;
    ui_margins *mg;
    ui_spec *sj;               /* :draft, :lookahead */
    ui_chat chat;
    bool chat_on;              /* typed text becomes a user turn (needs chat.kind) */
    char note[160];            /* what the job did, added to its "done" */
    int32_t steps_left, steps_done, steps_goal;
    /* what the UI reads */
    mask_view *mv;
    int32_t n_steps;           /* steps ever run (numbers the mask view) */
    double step_ms, t_job, job_tokens;
    int32_t rows;
    double last_tok_s;         /* of the last job, shown while idle */
    char msg[1024];
    uint64_t msg_no;
    forest_id focus;
    ui_undo undo;              /* the prune history */
    forest_id score_leaf[UI_MAX_SCORES]; /* the last beam's hypotheses and scores */
    double score[UI_MAX_SCORES];
    int32_t n_scores;
    float beam_alpha;
    const char *model_name, *backend;
    int32_t threads;
    _Atomic uint64_t version;
    _Atomic double unsaved_since;
    _Atomic bool modified;     /* changed since loaded or saved under a name of the user's */
    bool touched;              /* changed since the start or the last load */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void say(ui_worker *w, const char *fmt, const char *arg) {
    snprintf(w->msg, sizeof w->msg, fmt, arg);
    w->msg_no++;
}

static void changed(ui_worker *w, bool forest_changed) {
    if (forest_changed && w->unsaved_since == 0) w->unsaved_since = now_s();
    if (forest_changed) w->modified = w->touched = true;
    w->version++;
}

/* ---- strategies ---- */

static void run_stop(ui_worker *w) {
    double dt = now_s() - w->t_job;
    if (w->run != RUN_NONE && dt > 0) w->last_tok_s = w->job_tokens / dt;
    if (w->run == RUN_GROW) grow_free(&w->g);
    if (w->run == RUN_COT) cot_free(&w->c);
    if (w->run == RUN_BEAM) beam_free(w->b);
    if (w->run == RUN_MARGINS) ui_margins_free(w->mg);
    if (w->run == RUN_DRAFT || w->run == RUN_LOOKAHEAD) ui_spec_free(w->sj);
    w->b = NULL;
    w->mg = NULL;
    w->sj = NULL;
    w->run = RUN_NONE;
    w->paused = false;
}

/* Makes node id a node a strategy can start from: a pending node is computed by the next
 * step with its logits; a computed one is re-scored by it (FOREST_WANT_LOGITS: it runs
 * again in its own KV slot), so every strategy starts from the model's own distribution at
 * any node. */
static st_code start_node(ui_worker *w, forest_id id, forest_id *out, st_err *err) {
    const forest_node *nd = forest_get(w->f, id);
    if (!nd) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    if (nd->state == FOREST_PENDING)
        forest_set_flags(w->f, id, 0, FOREST_FINISHED | FOREST_NO_LOGITS);
    else
        forest_set_flags(w->f, id, FOREST_WANT_LOGITS, FOREST_FINISHED);
    *out = id;
    return ST_OK;
}

static st_code run_start(ui_worker *w, const ui_job *j, st_err *err) {
    if (w->run != RUN_NONE) return st_set(err, ST_ERR_ARG, "a strategy is running: cancel it first (x)");
    int32_t asked = j->kind == UI_JOB_GROW || j->kind == UI_JOB_DRAFT ? j->a
                    : j->kind == UI_JOB_LOOKAHEAD ? j->d : j->kind == UI_JOB_MARGINS ? 0 : j->b;
    int32_t budget = asked > 0 ? asked : w->budget;
    forest_id from = j->node;
    st_code rc;
    const forest_node *nd = forest_get(w->f, j->node);
    /* a step runs whatever is pending: it needs no node (the first tree may be gone) */
    if (!nd && j->kind != UI_JOB_STEP) return st_set(err, ST_ERR_ARG, "nothing selected");
    if ((j->kind == UI_JOB_GROW || j->kind == UI_JOB_COT || j->kind == UI_JOB_BEAM) &&
        (rc = start_node(w, j->node, &from, err)))
        return rc;
    switch (j->kind) {
    case UI_JOB_GROW:
        if ((rc = grow_init(&w->g, w->f, from, 1, &w->sp, budget, w->n_vocab, err))) return rc;
        w->run = RUN_GROW;
        w->focus = from;
        break;
    case UI_JOB_COT:
        if ((rc = cot_init(&w->c, w->f, from, j->a, &w->sp, budget, w->n_vocab, err))) return rc;
        w->run = RUN_COT;
        break;
    case UI_JOB_MARGINS:
        if (!(w->mg = ui_margins_start(w->f, w->tk, j->node, j->text ? j->text : "", j->a, &w->chat,
                                       &w->sp, budget, w->n_vocab, err)))
            return err->code;
        w->run = RUN_MARGINS;
        w->focus = w->mg->m.note_from[0];
        budget *= 2; /* the notes, then the answer */
        snprintf(w->note, sizeof w->note, "margins: %d note%s on %d-token chunks, then the answer",
                 (int)w->mg->n_chunks, w->mg->n_chunks > 1 ? "s" : "", (int)(j->a > 0 ? j->a : UI_MARGINS_CHUNK));
        say(w, "%s", w->note);
        break;
    case UI_JOB_DRAFT: case UI_JOB_LOOKAHEAD: {
        /* greedy whatever the temperature: only greedy decoding can be verified */
        spec_params sp = j->kind == UI_JOB_DRAFT ? ui_spec_params(0, 0, 0) : ui_spec_params(j->a, j->b, j->c);
        if (!(w->sj = ui_spec_start(w->f, j->node, &sp, budget, err))) return err->code;
        w->run = j->kind == UI_JOB_DRAFT ? RUN_DRAFT : RUN_LOOKAHEAD;
        w->focus = j->node;
        if (w->sp.temp > 0) say(w, "%s", "greedy decoding: the temperature does not apply (only greedy can be verified)");
        break;
    }
    case UI_JOB_BEAM: {
        beam_params bp = beam_default_params();
        bp.width = j->a;
        bp.max_tokens = budget;
        w->beam_alpha = bp.alpha;
        if (!(w->b = beam_init(w->f, from, &bp, w->tk, w->n_vocab, err))) return err->code;
        w->run = RUN_BEAM;
        break;
    }
    default:
        w->steps_left = j->a > 0 ? j->a : 1;
        w->run = RUN_STEPS;
    }
    if (j->kind != UI_JOB_MARGINS) w->note[0] = '\0';
    w->steps_done = 0;
    w->steps_goal = j->kind == UI_JOB_STEP ? w->steps_left : budget;
    w->t_job = now_s();
    w->job_tokens = 0;
    return ST_OK;
}

/* The end-of-generation token a branch ended at, as "end of turn <|im_end|>" into out:
 * grow keeps no token for it; the leaf's top-k has it (the most probable end token
 * there, which greedy decoding picked). */
static void eog_name(ui_worker *w, forest_id leaf, char *out, size_t cap) {
    int32_t ids[16];
    float lps[16];
    int32_t n = forest_topk(w->f, leaf, ids, lps, 16);
    for (int32_t i = 0; i < n; i++)
        if (tok_is_eog(w->tk, ids[i])) {
            const char *pc = tok_piece(w->tk, ids[i]);
            bool turn = w->chat.kind != CHAT_NONE && (!pc || strcmp(pc, "<|endoftext|>"));
            snprintf(out, cap, "end of %s %s", turn ? "turn" : "text", pc ? pc : "");
            return;
        }
    snprintf(out, cap, "end of text");
}

/* What a grow or cot run did, for its "done": "+12 tokens, 1 branch; stopped: budget".
 * cot says how many chains it kept ("5 of 6 chains, 1 ended at once"): a chain whose
 * first token ends the text leaves no branch. */
static void grow_summary(ui_worker *w, const grow *g, bool chains, char *out, size_t cap) {
    int32_t made = 0, eog = 0, stop = 0, budget = 0, empty = 0;
    forest_id eog_leaf = FOREST_NONE;
    for (int32_t i = 0; i < g->n; i++) {
        const grow_branch *b = &g->br[i];
        made += b->made;
        if (b->eog) eog++, eog_leaf = b->leaf, empty += b->made == 0;
        else if (b->stop >= 0) stop++;
        else budget++;
    }
    char end[96], why[192] = "";
    if (eog == 1 && g->n == 1) eog_name(w, eog_leaf, end, sizeof end);
    else snprintf(end, sizeof end, "end of text");
    const char *names[3] = {"budget", end, "stop string"};
    int32_t counts[3] = {budget, eog, stop}, kinds = (budget > 0) + (eog > 0) + (stop > 0);
    for (int k = 0; k < 3; k++) {
        if (!counts[k]) continue;
        size_t l = strlen(why);
        if (kinds == 1) snprintf(why + l, sizeof why - l, "%s", names[k]);
        else snprintf(why + l, sizeof why - l, "%s%s (%d)", l ? ", " : "", names[k], (int)counts[k]);
    }
    char once[48] = "";
    if (empty) snprintf(once, sizeof once, ", %d ended at once", (int)empty);
    if (chains)
        snprintf(out, cap, "%d of %d chain%s%s, +%d tokens; stopped: %s", (int)(g->n - empty), (int)g->n,
                 g->n == 1 ? "" : "s", once, (int)made, why);
    else
        snprintf(out, cap, "+%d token%s, %d branch%s; stopped: %s", (int)made, made == 1 ? "" : "s", (int)g->n,
                 g->n == 1 ? "" : "es", why);
}

/* The beam's live hypotheses and their scores (sum / length^alpha, as its results are
 * scored) into w->score_*, for the forest pane. */
static void beam_scores(ui_worker *w) {
    int32_t len = beam_cur_len(w->b);
    w->n_scores = 0;
    for (int32_t i = 0; i < beam_n_live(w->b) && w->n_scores < UI_MAX_SCORES; i++) {
        w->score_leaf[w->n_scores] = beam_live_leaf(w->b, i);
        w->score[w->n_scores++] = len > 0 ? beam_live_sum(w->b, i) / pow((double)len, (double)w->beam_alpha) : 0;
    }
}

/* "2 results, best score -1.23; stopped: budget (1), end of text (1)" */
static void beam_summary(ui_worker *w, char *out, size_t cap) {
    beam_scores(w);
    int32_t n = beam_n_results(w->b), ended = 0;
    for (int32_t i = 0; i < n; i++) ended += beam_result(w->b, i)->ended;
    char why[96];
    if (ended == 0 || ended == n) snprintf(why, sizeof why, "%s", ended ? "end of text" : "budget");
    else snprintf(why, sizeof why, "budget (%d), end of text (%d)", (int)(n - ended), (int)ended);
    if (n == 0) snprintf(out, cap, "no result");
    else snprintf(out, cap, "%d result%s, best score %.2f; stopped: %s", (int)n, n == 1 ? "" : "s",
                  beam_result(w->b, 0)->score, why);
}

/* The "done" message of the run that just ended. */
static void say_done(ui_worker *w) {
    char sum[320] = "";
    if (w->run == RUN_GROW) grow_summary(w, &w->g, false, sum, sizeof sum);
    if (w->run == RUN_COT) grow_summary(w, &w->c.g, true, sum, sizeof sum);
    if (w->run == RUN_BEAM) beam_summary(w, sum, sizeof sum);
    snprintf(w->msg, sizeof w->msg, "done%s%s%s%s%s", sum[0] ? ": " : "", sum, w->note[0] ? " (" : "", w->note,
             w->note[0] ? ")" : "");
    w->msg_no++;
}

/* One step of the running strategy, under the lock. */
static void run_step(ui_worker *w) {
    st_err err = {0};
    st_code rc = ST_OK;
    int32_t active = 0, made = -1; /* made: tokens kept by a speculative step */
    double t0 = now_s();
    switch (w->run) {
    case RUN_GROW: rc = grow_step(&w->g, w->f, &w->plan, w->ctx, w->tk, NULL, NULL, &active, &err); break;
    case RUN_COT: rc = cot_step(&w->c, w->f, &w->plan, w->ctx, w->tk, NULL, NULL, &active, &err); break;
    case RUN_BEAM:
        rc = beam_step(w->b, w->f, &w->plan, w->ctx, &err);
        active = !beam_done(w->b);
        if (!rc) beam_scores(w);
        break;
    case RUN_STEPS:
        rc = step_forest(w->f, &w->plan, w->ctx, &err);
        active = --w->steps_left > 0 && forest_n_pending(w->f) > 0;
        break;
    case RUN_MARGINS: {
        bool notes = w->mg->m.phase == MARGINS_NOTES;
        rc = ui_margins_step(w->mg, w->f, &w->plan, w->ctx, w->tk, &active, &err);
        if (!rc && notes && w->mg->m.phase == MARGINS_ANSWER) w->focus = w->mg->m.answer_from;
        break;
    }
    case RUN_DRAFT: case RUN_LOOKAHEAD:
        /* the mask view is captured inside the step, before the drafts are pruned */
        rc = ui_spec_step(w->sj, w->f, &w->plan, w->ctx, w->tk, w->mv, w->n_steps, &made, &active, &err);
        if (!rc) ui_spec_describe(w->sj, w->note, sizeof w->note);
        break;
    }
    double t1 = now_s();
    if (rc == ST_NO_KV_SLOT) {
        w->paused = true;
        say(w, "%s: prune something (d), then resume (p)", err.msg[0] ? err.msg : "the KV cache is full");
    } else if (rc) {
        say(w, "stopped: %s", err.msg[0] ? err.msg : st_str(rc));
        run_stop(w);
    } else {
        w->steps_done = made >= 0 ? w->sj->made : w->steps_done + 1;
        w->n_steps++;
        w->rows = w->plan.n_rows;
        w->step_ms = 1e3 * (t1 - t0);
        /* a speculative step's rows include rejected drafts: its rate is of tokens kept */
        w->job_tokens += made >= 0 ? made : w->plan.n_rows;
        if (w->plan.n_rows > 0 && made < 0) mv_capture(w->mv, w->f, w->tk, &w->plan, w->n_steps - 1);
        if (made >= 0 && active) say(w, "%s", w->note); /* tokens per step so far */
        if (!active) {
            say_done(w);
            run_stop(w);
        }
    }
    changed(w, true);
}

/* ---- jobs ---- */

/* "pruned 12 nodes (3 branches)"-like messages for prune, undo and redo. */
static void say_pruned(ui_worker *w, const char *verb, const ui_prune_info *in, const char *then) {
    snprintf(w->msg, sizeof w->msg, "%s %d node%s (%d branch%s)%s", verb, (int)in->nodes, in->nodes == 1 ? "" : "s",
             (int)in->branches, in->branches == 1 ? "" : "es", then);
    w->msg_no++;
}

static st_code prune_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (w->run != RUN_NONE) return st_set(err, ST_ERR_ARG, "cancel the running strategy before pruning (x)");
    ui_prune_info in;
    forest_id top;
    st_code rc = j->kind == UI_JOB_PRUNE  ? ui_undo_prune(&w->undo, w->f, j->node, &in, err)
                 : j->kind == UI_JOB_UNDO ? ui_undo_undo(&w->undo, w->f, &top, &in, err)
                                          : ui_undo_redo(&w->undo, w->f, &in, err);
    if (rc) return rc;
    w->focus = in.near;
    if (j->kind == UI_JOB_PRUNE) say_pruned(w, "pruned", &in, ": u undoes");
    else if (j->kind == UI_JOB_UNDO) say_pruned(w, "restored", &in, ": s computes them, U prunes them again");
    else say_pruned(w, "pruned", &in, " again: u undoes");
    return ST_OK;
}

static st_code set_param(ui_worker *w, const char *key, double v, st_err *err) {
    if (!strcmp(key, "temp")) w->sp.temp = (float)v;
    else if (!strcmp(key, "top_k")) w->sp.top_k = (int32_t)v;
    else if (!strcmp(key, "top_p")) w->sp.top_p = (float)v;
    else if (!strcmp(key, "min_p")) w->sp.min_p = (float)v;
    else if (!strcmp(key, "seed")) w->sp.seed = (uint64_t)v;
    else if (!strcmp(key, "budget") && v >= 1 && v <= 1e6) w->budget = (int32_t)v;
    else if (!strcmp(key, "chat")) {
        if (v != 0 && w->chat.kind == CHAT_NONE)
            return st_set(err, ST_ERR_ARG, "the model has no chat template: typed text stays raw");
        w->chat_on = v != 0;
    }
    else return st_set(err, ST_ERR_ARG, "bad setting %s", key);
    return ST_OK;
}

/* :merge: the bookmarked nodes (at least two) are merged exactly (merge.h) under their
 * common ancestor; their bookmarks are cleared (they are used up) and the merged chain,
 * pending, is prefilled by the next step and grown by the budget. */
static st_code merge_marked(ui_worker *w, st_err *err) {
    if (w->run != RUN_NONE) return st_set(err, ST_ERR_ARG, "cancel the running strategy before merging (x)");
    forest_id marks[64];
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(w->f); i >= 0 && n < 64; i = forest_dfs_next(w->f, i))
        if (forest_node_at(w->f, i)->flags & FOREST_BOOKMARK) marks[n++] = forest_id_at(w->f, i);
    if (n < 2) return st_set(err, ST_ERR_ARG, "merge needs two or more bookmarked branches (m marks one)");
    forest_id last;
    st_code rc = merge_branches(w->f, w->tk, marks, n, NULL, &last, err);
    if (rc) return rc;
    for (int32_t i = 0; i < n; i++) forest_set_flags(w->f, marks[i], 0, FOREST_BOOKMARK);
    w->focus = last;
    ui_job g = {.kind = UI_JOB_GROW, .node = last};
    if ((rc = run_start(w, &g, err))) return rc;
    char m[64];
    snprintf(m, sizeof m, "%d", (int)n);
    say(w, "merged %s branches: growing the merged text", m);
    return ST_OK;
}

/* The plan the next step would run, shown in the mask view: built on a plan of its own
 * (the strategies' plan keeps its logits) and cancelled at once, so the forest and the
 * KV cache are as before. Runs on the worker's thread, between steps. */
static st_code preview_next(ui_worker *w, st_err *err) {
    st_code rc = step_plan_build(w->f, &w->preview, err);
    if (rc) return rc;
    if (w->preview.n_rows == 0) {
        step_plan_cancel(w->f, &w->preview);
        return st_set(err, ST_ERR_ARG, "nothing is pending: the next step has no rows (grow, fork or append first)");
    }
    mv_capture(w->mv, w->f, w->tk, &w->preview, w->n_steps);
    w->mv->preview = true;
    step_plan_cancel(w->f, &w->preview);
    say(w, "%s", "the next step's plan (not run): s runs it");
    return ST_OK;
}

/* :ask's tokens: the text in the form the selected branch calls for (ask_margins.h); what
 * the form was goes into note, for the messages. */
static int32_t *ask_tokens(ui_worker *w, const ui_job *j, int32_t *n, char *note, size_t cap,
                           st_err *err) {
    int32_t np = j->node == FOREST_NONE ? 0 : forest_path(w->f, j->node, NULL, 0);
    int32_t *path = malloc(sizeof(int32_t) * (size_t)(np > 0 ? np : 1));
    if (!path) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (np > 0) forest_path(w->f, j->node, path, np);
    int form = ui_turn_form(w->tk, w->chat.kind, path, np > 0 ? np : 0);
    free(path);
    int32_t *t = ui_turn_tokens(w->tk, &w->chat, j->text ? j->text : "", form, np <= 0, n, err);
    char what[128];
    snprintf(note, cap, "ask: %s", ui_turn_form_name(form, w->chat.kind, what, sizeof what));
    return t;
}

static st_code do_job(ui_worker *w, const ui_job *j, st_err *err) {
    st_code rc = ST_OK;
    switch (j->kind) {
    case UI_JOB_GROW: case UI_JOB_COT: case UI_JOB_BEAM: case UI_JOB_STEP: case UI_JOB_MARGINS:
    case UI_JOB_DRAFT: case UI_JOB_LOOKAHEAD:
        return run_start(w, j, err);
    case UI_JOB_PRUNE: case UI_JOB_UNDO: case UI_JOB_REDO:
        return prune_job(w, j, err);
    case UI_JOB_APPEND: case UI_JOB_FORK: case UI_JOB_ASK: {
        int32_t one = j->a, *t = &one, n = 1;
        char note[sizeof w->note] = "";
        const forest_node *nd = forest_get(w->f, j->node);
        if (!nd && j->node != FOREST_NONE) return st_set(err, ST_ERR_ARG, "the selected node is gone");
        if (j->kind == UI_JOB_FORK && nd) /* a token already there is selected, not made twice */
            for (int32_t c = nd->first_child; c >= 0; c = forest_node_at(w->f, c)->next_sibling)
                if (forest_node_at(w->f, c)->token == j->a) {
                    w->focus = forest_id_at(w->f, c);
                    say(w, "%s", "that token is already a branch here: selected it");
                    return ST_OK;
                }
        if (j->kind == UI_JOB_APPEND && w->chat_on) {
            if (!(t = ask_tokens(w, j, &n, note, sizeof note, err))) return err->code;
            say(w, "%s: n grows the answer", note + strlen("ask: "));
        } else if (j->kind == UI_JOB_APPEND) {
            const char *s = j->text ? j->text : "";
            n = tok_encode(w->tk, s, strlen(s), nd == NULL && tok_add_bos(w->tk), false, NULL, 0);
            if (n <= 0) return st_set(err, ST_ERR_ARG, "nothing to append");
            if (!(t = malloc(sizeof(int32_t) * (size_t)n))) return st_set(err, ST_ERR_NOMEM, "out of memory");
            tok_encode(w->tk, s, strlen(s), nd == NULL && tok_add_bos(w->tk), false, t, n);
        } else if (j->kind == UI_JOB_ASK && !(t = ask_tokens(w, j, &n, note, sizeof note, err))) {
            return err->code;
        }
        forest_id last;
        rc = nd ? forest_append(w->f, j->node, t, NULL, n, &last, err)
                : forest_add_root(w->f, t, NULL, n, 0, &last, err);
        if (t != &one) free(t);
        if (rc) return rc;
        w->focus = last;
        if (j->kind == UI_JOB_FORK || j->kind == UI_JOB_ASK || j->b) {
            ui_job g = {.kind = UI_JOB_GROW, .node = last};
            bool idle = w->run == RUN_NONE;
            if (idle) rc = run_start(w, &g, err);
            if (j->kind == UI_JOB_ASK && !rc) { /* the form the text took, while it grows and after */
                if (idle) snprintf(w->note, sizeof w->note, "%s", note);
                say(w, "%s", note);
            }
        }
        return rc;
    }
    case UI_JOB_BOOKMARK: {
        const forest_node *nd = forest_get(w->f, j->node);
        if (!nd) return st_set(err, ST_ERR_ARG, "nothing selected");
        bool on = nd->flags & FOREST_BOOKMARK;
        forest_set_flags(w->f, j->node, on ? 0 : FOREST_BOOKMARK, on ? FOREST_BOOKMARK : 0);
        return ST_OK;
    }
    case UI_JOB_SET:
        return set_param(w, j->text, j->val, err);
    case UI_JOB_SAVE:
        if (!w->save) return st_set(err, ST_ERR_ARG, "saving is not available");
        if (j->c && !w->touched) return ST_OK; /* nothing this run made */
        if (!(rc = w->save(w->ud, j->text, w->f, &w->sp, err))) {
            w->unsaved_since = 0;
            if (!j->b) w->modified = false; /* the autosave is replaced by the next run's */
            say(w, "saved %s", j->text);
        }
        return rc;
    case UI_JOB_LOAD: {
        if (!w->load) return st_set(err, ST_ERR_ARG, "loading is not available");
        sample_params sp = w->sp;
        forest *nf = w->load(w->ud, j->text, &sp, err);
        if (!nf) return err->code;
        run_stop(w);
        ui_undo_clear(&w->undo);
        forest_free(w->f);
        w->f = nf;
        w->sp = sp;
        mv_init(w->mv);
        w->unsaved_since = 0;
        w->modified = w->touched = false;
        w->n_scores = 0; /* ids of the old forest */
        say(w, "loaded %s: press s to compute it", j->text);
        return ST_OK;
    }
    case UI_JOB_EXPORT: {
        FILE *out = fopen(j->text, "w");
        if (!out) return st_set(err, ST_ERR_IO, "cannot write %s: %s", j->text, strerror(errno));
        session_settings s = session_settings_default();
        s.sample = w->sp;
        rc = session_export_markdown(out, w->f, w->tk, &s, NULL, err);
        if (fclose(out) && !rc) rc = st_set(err, ST_ERR_IO, "cannot write %s: %s", j->text, strerror(errno));
        if (!rc) say(w, "exported %s", j->text);
        return rc;
    }
    case UI_JOB_PAUSE:
        if (w->run == RUN_NONE) return st_set(err, ST_ERR_ARG, "nothing is running");
        w->paused = !w->paused;
        say(w, "%s", w->paused ? "paused" : "resumed");
        return ST_OK;
    case UI_JOB_CANCEL:
        if (w->run == RUN_NONE) return st_set(err, ST_ERR_ARG, "nothing is running");
        run_stop(w);
        say(w, "%s", "cancelled");
        return ST_OK;
    case UI_JOB_MERGE:
        return merge_marked(w, err);
    case UI_JOB_PREVIEW:
        return preview_next(w, err);
    case UI_JOB_QUIT:
        return ST_OK;
    }
    return ST_OK;
}

/* The forest lock is released while the model runs (step_plan's forward hooks): only
 * this thread mutates the forest, and it is busy in the forward pass, so readers see a
 * consistent forest the whole time. */
static void forward_unlock(void *ud) { pthread_mutex_unlock(&((ui_worker *)ud)->mu); }
static void forward_relock(void *ud) { pthread_mutex_lock(&((ui_worker *)ud)->mu); }

static void *worker_main(void *arg) {
    ui_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->qmu);
        while (w->q_n == 0 && !(w->run != RUN_NONE && !w->paused)) pthread_cond_wait(&w->qcv, &w->qmu);
        ui_job j = {0};
        bool have = w->q_n > 0;
        if (have) {
            j = w->q[w->q_head];
            w->q_head = (w->q_head + 1) % Q_CAP;
            w->q_n--;
        }
        pthread_mutex_unlock(&w->qmu);
        pthread_mutex_lock(&w->mu);
        if (have) {
            st_err err = {0};
            st_code rc = do_job(w, &j, &err);
            if (rc) say(w, "%s", err.msg[0] ? err.msg : st_str(rc));
            bool same = j.kind == UI_JOB_SAVE || j.kind == UI_JOB_EXPORT || j.kind == UI_JOB_PAUSE ||
                        j.kind == UI_JOB_SET || j.kind == UI_JOB_PREVIEW || j.kind == UI_JOB_CANCEL ||
                        j.kind == UI_JOB_LOAD;
            changed(w, !same && !rc);
        } else
            run_step(w);
        /* a prune (the user's, or a strategy's own) may have removed nodes the mask view names */
        mv_mark_pruned(w->mv, w->f);
        pthread_mutex_unlock(&w->mu);
        free((char *)j.text);
        if (have && j.kind == UI_JOB_QUIT) break;
    }
    return NULL;
}

/* ---- public ---- */

ui_worker *ui_worker_start(const ui_worker_params *p, st_err *err) {
    ui_worker *w = calloc(1, sizeof *w);
    if (!w || !(w->mv = malloc(sizeof *w->mv))) {
        free(w);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    mv_init(w->mv);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->qmu, NULL);
    pthread_cond_init(&w->qcv, NULL);
    step_plan_init(&w->plan);
    step_plan_init(&w->preview);
    w->plan.forward_begin = forward_unlock;
    w->plan.forward_end = forward_relock;
    w->plan.forward_ud = w;
    w->f = p->f;
    w->ctx = p->ctx;
    w->tk = p->tk;
    w->n_vocab = model_ctx_hparams(p->ctx)->n_vocab;
    w->sp = p->sp;
    w->budget = p->budget > 0 ? p->budget : 32;
    w->save = p->save;
    w->load = p->load;
    w->ud = p->ud;
    w->model_name = p->model_name;
    w->backend = p->backend;
    w->threads = p->threads;
    w->chat = p->chat;
    w->chat_on = p->chat.kind != CHAT_NONE && !p->raw;
    w->focus = FOREST_NONE;
    ui_undo_init(&w->undo);
    if (pthread_create(&w->th, NULL, worker_main, w)) {
        step_plan_free(&w->plan);
        step_plan_free(&w->preview);
        free(w->mv);
        free(w);
        st_set(err, ST_ERR_IO, "cannot start the engine thread");
        return NULL;
    }
    return w;
}

bool ui_worker_post(ui_worker *w, const ui_job *j) {
    ui_job c = *j;
    if (j->text && !(c.text = strdup(j->text))) return false;
    pthread_mutex_lock(&w->qmu);
    bool ok = w->q_n < Q_CAP;
    if (ok) w->q[(w->q_head + w->q_n++) % Q_CAP] = c;
    pthread_cond_signal(&w->qcv);
    pthread_mutex_unlock(&w->qmu);
    if (!ok) free((char *)c.text);
    return ok;
}

void ui_worker_stop(ui_worker *w) {
    if (!w) return;
    /* a QUIT queued even when the queue is full: drop what is left first */
    ui_job q = {.kind = UI_JOB_QUIT};
    pthread_mutex_lock(&w->qmu);
    if (w->q_n == Q_CAP) w->q_n--;
    w->q[(w->q_head + w->q_n++) % Q_CAP] = q;
    pthread_cond_signal(&w->qcv);
    pthread_mutex_unlock(&w->qmu);
    pthread_join(w->th, NULL);
    for (int32_t i = 0; i < w->q_n; i++) free((char *)w->q[(w->q_head + i) % Q_CAP].text);
    run_stop(w);
    ui_undo_free(&w->undo);
    step_plan_free(&w->plan);
    step_plan_free(&w->preview);
    forest_free(w->f);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->qmu);
    pthread_cond_destroy(&w->qcv);
    free(w->mv);
    free(w);
}

uint64_t ui_worker_version(const ui_worker *w) { return w->version; }
double ui_worker_unsaved_since(const ui_worker *w) { return w->unsaved_since; }
bool ui_worker_modified(const ui_worker *w) { return w->modified; }
void ui_worker_lock(ui_worker *w) { pthread_mutex_lock(&w->mu); }
bool ui_worker_trylock(ui_worker *w) { return pthread_mutex_trylock(&w->mu) == 0; }
void ui_worker_unlock(ui_worker *w) { pthread_mutex_unlock(&w->mu); }
const forest *ui_worker_forest(const ui_worker *w) { return w->f; }
const mask_view *ui_worker_mask(const ui_worker *w) { return w->mv; }
mask_view *ui_worker_mask_mut(ui_worker *w) { return w->mv; }
bool ui_worker_busy(const ui_worker *w) { return w->run != RUN_NONE; }
sample_params ui_worker_sample(const ui_worker *w) { return w->sp; }

forest_id ui_worker_take_focus(ui_worker *w) {
    forest_id f = w->focus;
    w->focus = FOREST_NONE;
    return f;
}

void ui_worker_settings(const ui_worker *w, char *out, size_t cap) {
    snprintf(out, cap, "temp %g  top_k %d  top_p %g  min_p %g  seed %llu  budget %d  chat %s", (double)w->sp.temp,
             (int)w->sp.top_k, (double)w->sp.top_p, (double)w->sp.min_p, (unsigned long long)w->sp.seed,
             (int)w->budget, w->chat.kind == CHAT_NONE ? "(no template)" : w->chat_on ? "on" : "off");
}

int32_t ui_worker_scores(const ui_worker *w, forest_id *ids, double *scores, int32_t cap) {
    int32_t n = 0;
    for (int32_t i = 0; i < w->n_scores && n < cap; i++)
        if (forest_get(w->f, w->score_leaf[i])) ids[n] = w->score_leaf[i], scores[n++] = w->score[i];
    return n;
}

uint64_t ui_worker_message(const ui_worker *w, char *out, size_t cap) {
    snprintf(out, cap, "%s", w->msg);
    return w->msg_no;
}

int32_t ui_worker_running(const ui_worker *w, forest_id *out, int32_t cap) {
    const grow *g = w->run == RUN_GROW ? &w->g : w->run == RUN_COT ? &w->c.g : NULL;
    int32_t n = 0;
    if (g)
        for (int32_t i = 0; i < g->n; i++)
            if (!g->br[i].done && n < cap) out[n++] = g->br[i].leaf;
    if (w->run == RUN_BEAM)
        for (int32_t i = 0; i < beam_n_live(w->b) && n < cap; i++) out[n++] = beam_live_leaf(w->b, i);
    if (w->run == RUN_MARGINS) n = ui_margins_running(w->mg, out, cap);
    if (w->run == RUN_DRAFT || w->run == RUN_LOOKAHEAD) n = ui_spec_running(w->sj, out, cap);
    return n;
}

void ui_worker_stats(const ui_worker *w, ui_stats *s) {
    static const char *const names[] = {"idle", "grow", "cot", "beam", "step", "margins", "draft", "lookahead"};
    s->model = w->model_name;
    s->backend = w->backend;
    s->threads = w->threads;
    s->nodes = forest_n_live(w->f);
    s->kv_used = kv_alloc_used(forest_kv_const(w->f));
    s->kv_slots = kv_alloc_n_slots(forest_kv_const(w->f));
    s->step_ms = w->step_ms;
    s->rows = w->rows;
    double dt = now_s() - w->t_job;
    s->tok_s = w->run != RUN_NONE && dt > 0 ? w->job_tokens / dt : w->last_tok_s;
    s->mode = w->chat.kind == CHAT_NONE ? NULL : w->chat_on ? "chat" : "raw";
    if (w->run == RUN_NONE) snprintf(s->job, sizeof s->job, "idle");
    else
        snprintf(s->job, sizeof s->job, "%s %d/%d%s", names[w->run], w->steps_done, w->steps_goal,
                 w->paused ? " paused" : "");
}
