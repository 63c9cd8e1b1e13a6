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

#include "strategy/strategy.h"
#include "session/session.h"
#include "forest/step.h"
#include "judge_job.h"
#include "spec_job.h"
#include "undo.h"

#define Q_CAP 64

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
    /* the running strategy (NULL: idle), driven through strategy.h */
    strategy *run;
    ui_margins *mg;            /* :margins: owns run, and what its answer prompt needs */
    forest_id run_focus;       /* the node the run last asked views to show */
    bool paused;
    ui_chat chat;
    bool chat_on;              /* typed text becomes a user turn (needs chat.kind) */
    char note[160];            /* what the job did, added to its "done" */
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
    if (w->run && dt > 0) w->last_tok_s = w->job_tokens / dt;
    if (w->mg) ui_margins_free(w->mg); /* with its strategy */
    else strategy_free(w->run);
    w->mg = NULL;
    w->run = NULL;
    w->paused = false;
}

static strategy_env worker_env(ui_worker *w) {
    return (strategy_env){.f = w->f, .plan = &w->plan, .ctx = w->ctx, .tk = w->tk};
}

/* The spec driver's observer: the step's plan with its drafts and window still in the
 * forest, captured for the mask pane. */
static void spec_observe(void *ud, const spec *s, const forest *f, const step_plan *p) {
    ui_worker *w = ud;
    ui_spec_capture(w->mv, s, f, w->tk, p, w->n_steps);
}

/* A strategy job as the strategy's options (budget 0: the worker's). */
static strategy_opts job_opts(ui_worker *w, const ui_job *j) {
    static const strategy_kind kinds[] = {
        [UI_JOB_GROW] = STRAT_GROW, [UI_JOB_COT] = STRAT_COT, [UI_JOB_BEAM] = STRAT_BEAM,
        [UI_JOB_STEP] = STRAT_STEPS, [UI_JOB_DRAFT] = STRAT_DRAFT, [UI_JOB_LOOKAHEAD] = STRAT_LOOKAHEAD};
    strategy_opts o = strategy_default_opts(kinds[j->kind]);
    int32_t asked = j->kind == UI_JOB_GROW || j->kind == UI_JOB_DRAFT ? j->a : j->kind == UI_JOB_LOOKAHEAD ? j->d : j->b;
    o.from = j->node;
    o.sample = w->sp;
    o.budget = asked > 0 ? asked : w->budget;
    o.n_vocab = w->n_vocab;
    if (j->kind == UI_JOB_COT) o.u.cot.k = j->a;
    if (j->kind == UI_JOB_BEAM) o.u.beam.width = j->a;
    if (j->kind == UI_JOB_STEP) o.u.steps.n = j->a > 0 ? j->a : 1;
    if (j->kind == UI_JOB_DRAFT || j->kind == UI_JOB_LOOKAHEAD) {
        /* greedy whatever the temperature: only greedy decoding can be verified */
        o.u.spec.p = j->kind == UI_JOB_DRAFT ? ui_spec_params(0, 0, 0) : ui_spec_params(j->a, j->b, j->c);
        o.u.spec.observe = spec_observe;
        o.u.spec.observe_ud = w;
    }
    return o;
}

/* Bookkeeping once w->run is set: the rate's clock, the node to show. */
static void run_begin(ui_worker *w) {
    strategy_progress pr;
    strategy_get_progress(w->run, &pr);
    w->run_focus = pr.focus;
    if (pr.focus != FOREST_NONE) w->focus = pr.focus;
    w->t_job = now_s();
    w->job_tokens = 0;
}

static st_code run_start(ui_worker *w, const ui_job *j, st_err *err) {
    if (w->run) return st_set(err, ST_ERR_ARG, "a strategy is running: cancel it first (x)");
    /* a step runs whatever is pending: it needs no node (the first tree may be gone) */
    if (!forest_get(w->f, j->node) && j->kind != UI_JOB_STEP) return st_set(err, ST_ERR_ARG, "nothing selected");
    w->note[0] = '\0';
    if (j->kind == UI_JOB_MARGINS) {
        int32_t chunk = j->a > 0 ? j->a : UI_MARGINS_CHUNK;
        if (!(w->mg = ui_margins_start(w->f, w->tk, j->node, j->text ? j->text : "", j->a, &w->chat, &w->sp,
                                       w->budget, w->n_vocab, err)))
            return err->code;
        w->run = w->mg->s;
        snprintf(w->note, sizeof w->note, "margins: %d note%s on %d-token chunks, then the answer",
                 (int)w->mg->n_chunks, w->mg->n_chunks > 1 ? "s" : "", (int)chunk);
        say(w, "%s", w->note);
    } else {
        strategy_opts o = job_opts(w, j);
        strategy_env env = worker_env(w);
        if (!(w->run = strategy_create(&o, &env, err))) return err->code;
        if ((j->kind == UI_JOB_DRAFT || j->kind == UI_JOB_LOOKAHEAD) && w->sp.temp > 0)
            say(w, "%s", "greedy decoding: the temperature does not apply (only greedy can be verified)");
    }
    run_begin(w);
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

/* What a grow-like run did (its results: branches or chains), for its "done": "+12
 * tokens, 1 branch; stopped: budget". Chains say how many were kept ("5 of 6 chains, 1
 * ended at once"): a chain whose first token ends the text leaves no branch. */
static void branch_summary(ui_worker *w, bool chains, char *out, size_t cap) {
    int32_t n = strategy_n_results(w->run), made = 0, eog = 0, stop = 0, budget = 0, empty = 0;
    forest_id eog_leaf = FOREST_NONE;
    for (int32_t i = 0; i < n; i++) {
        strategy_result r;
        strategy_result_at(w->run, w->f, i, &r);
        made += r.n_tokens;
        if (r.end == STRAT_END_EOG) eog++, eog_leaf = r.leaf, empty += r.n_tokens == 0;
        else if (r.end == STRAT_END_STOP) stop++;
        else budget++;
    }
    char end[96], why[192] = "";
    if (eog == 1 && n == 1) eog_name(w, eog_leaf, end, sizeof end);
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
        snprintf(out, cap, "%d of %d chain%s%s, +%d tokens; stopped: %s", (int)(n - empty), (int)n,
                 n == 1 ? "" : "s", once, (int)made, why);
    else
        snprintf(out, cap, "+%d token%s, %d branch%s; stopped: %s", (int)made, made == 1 ? "" : "s", (int)n,
                 n == 1 ? "" : "es", why);
}

/* "2 results, best score -1.23; stopped: budget (1), end of text (1)" */
static void ranked_summary(ui_worker *w, char *out, size_t cap) {
    int32_t n = strategy_n_results(w->run), ended = 0;
    strategy_result best = {0}, r;
    for (int32_t i = 0; i < n; i++) {
        strategy_result_at(w->run, w->f, i, &r);
        ended += r.end == STRAT_END_EOG;
        if (i == 0) best = r;
    }
    char why[96];
    if (ended == 0 || ended == n) snprintf(why, sizeof why, "%s", ended ? "end of text" : "budget");
    else snprintf(why, sizeof why, "budget (%d), end of text (%d)", (int)(n - ended), (int)ended);
    if (n == 0) snprintf(out, cap, "no result");
    else snprintf(out, cap, "%d result%s, best score %.2f; stopped: %s", (int)n, n == 1 ? "" : "s", best.score, why);
}

/* The "done" message of the run that just ended: its results summed up as its table
 * says, then the job's note (or the run's own progress line). */
static void say_done(ui_worker *w, const strategy_progress *pr) {
    char sum[320] = "";
    strategy_summary how = strategy_ops_of(w->run)->summary;
    if (how == STRAT_SUM_BRANCHES || how == STRAT_SUM_CHAINS) branch_summary(w, how == STRAT_SUM_CHAINS, sum, sizeof sum);
    if (how == STRAT_SUM_RANKED) ranked_summary(w, sum, sizeof sum);
    if (how == STRAT_SUM_PROGRESS) snprintf(w->note, sizeof w->note, "%s", pr->text);
    snprintf(w->msg, sizeof w->msg, "done%s%s%s%s%s", sum[0] ? ": " : "", sum, w->note[0] ? " (" : "", w->note,
             w->note[0] ? ")" : "");
    w->msg_no++;
}

/* One step of the running strategy, under the lock. */
static void run_step(ui_worker *w) {
    st_err err = {0};
    strategy_env env = worker_env(w);
    double t0 = now_s();
    st_code rc = strategy_step(w->run, &env, &err);
    double t1 = now_s();
    if (rc == ST_NO_KV_SLOT) {
        w->paused = true;
        say(w, "%s: prune something (d), then resume (p)", err.msg[0] ? err.msg : "the KV cache is full");
    } else if (rc) {
        say(w, "stopped: %s", err.msg[0] ? err.msg : st_str(rc));
        run_stop(w);
    } else {
        strategy_progress pr;
        strategy_get_progress(w->run, &pr);
        /* a speculative step's view was captured inside the step, before its drafts were
         * pruned: now they read accepted or rejected */
        bool captured = w->mv->spec && w->mv->step == w->n_steps;
        if (captured) mv_resolve_drafts(w->mv, w->f);
        w->n_steps++;
        w->rows = w->plan.n_rows;
        w->step_ms = 1e3 * (t1 - t0);
        w->job_tokens = (double)pr.tokens;
        if (w->plan.n_rows > 0 && !captured) mv_capture(w->mv, w->f, w->tk, &w->plan, w->n_steps - 1);
        if (strategy_ops_of(w->run)->scores)
            w->n_scores = strategy_scores(w->run, w->score_leaf, w->score, UI_MAX_SCORES);
        if (pr.focus != w->run_focus && pr.focus != FOREST_NONE) w->focus = w->run_focus = pr.focus;
        bool active = !strategy_done(w->run);
        if (pr.tell && active) say(w, "%s", pr.text); /* e.g. tokens per step so far */
        if (!active) {
            say_done(w, &pr);
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
    if (w->run) return st_set(err, ST_ERR_ARG, "cancel the running strategy before pruning (x)");
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
    if (w->run) return st_set(err, ST_ERR_ARG, "cancel the running strategy before merging (x)");
    forest_id marks[64];
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(w->f); i >= 0 && n < 64; i = forest_dfs_next(w->f, i))
        if (forest_node_at(w->f, i)->flags & FOREST_BOOKMARK) marks[n++] = forest_id_at(w->f, i);
    if (n < 2) return st_set(err, ST_ERR_ARG, "merge needs two or more bookmarked branches (m marks one)");
    strategy_opts o = strategy_default_opts(STRAT_MERGE);
    o.sample = w->sp;
    o.budget = w->budget;
    o.n_vocab = w->n_vocab;
    o.u.merge.leaves = marks;
    o.u.merge.n = n;
    strategy_env env = worker_env(w);
    if (!(w->run = strategy_create(&o, &env, err))) return err->code;
    for (int32_t i = 0; i < n; i++) forest_set_flags(w->f, marks[i], 0, FOREST_BOOKMARK);
    w->note[0] = '\0';
    run_begin(w);
    char m[64];
    snprintf(m, sizeof m, "%d", (int)n);
    say(w, "merged %s branches: growing the merged text", m);
    return ST_OK;
}

/* :judge and :tot (judge_job.h). */
static st_code judge_start(ui_worker *w, const ui_job *j, st_err *err) {
    if (w->run) return st_set(err, ST_ERR_ARG, "a strategy is running: cancel it first (x)");
    strategy_env env = worker_env(w);
    ui_judge_env je = {.tk = w->tk, .chat = &w->chat, .chat_on = w->chat_on, .sp = w->sp, .budget = w->budget,
                       .n_vocab = w->n_vocab};
    if (!(w->run = ui_judge_start(&env, &je, j->node, j->text, j->kind == UI_JOB_TOT, j->a, j->b, j->c, j->d, w->note,
                                  sizeof w->note, err)))
        return err->code;
    run_begin(w);
    say(w, "%s", w->note);
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
            bool idle = !w->run;
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
        if (!w->run) return st_set(err, ST_ERR_ARG, "nothing is running");
        w->paused = !w->paused;
        say(w, "%s", w->paused ? "paused" : "resumed");
        return ST_OK;
    case UI_JOB_CANCEL:
        if (!w->run) return st_set(err, ST_ERR_ARG, "nothing is running");
        run_stop(w);
        say(w, "%s", "cancelled");
        return ST_OK;
    case UI_JOB_MERGE:
        return merge_marked(w, err);
    case UI_JOB_JUDGE: case UI_JOB_TOT:
        return judge_start(w, j, err);
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
        while (w->q_n == 0 && !(w->run && !w->paused)) pthread_cond_wait(&w->qcv, &w->qmu);
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
bool ui_worker_busy(const ui_worker *w) { return w->run != NULL; }
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
    return w->run ? strategy_running(w->run, out, cap) : 0;
}

void ui_worker_stats(const ui_worker *w, ui_stats *s) {
    s->model = w->model_name;
    s->backend = w->backend;
    s->threads = w->threads;
    s->nodes = forest_n_live(w->f);
    s->kv_used = kv_alloc_used(forest_kv_const(w->f));
    s->kv_slots = kv_alloc_n_slots(forest_kv_const(w->f));
    s->step_ms = w->step_ms;
    s->rows = w->rows;
    double dt = now_s() - w->t_job;
    s->tok_s = w->run && dt > 0 ? w->job_tokens / dt : w->last_tok_s;
    s->mode = w->chat.kind == CHAT_NONE ? NULL : w->chat_on ? "chat" : "raw";
    strategy_progress pr;
    if (!w->run) {
        snprintf(s->job, sizeof s->job, "idle");
        return;
    }
    strategy_get_progress(w->run, &pr);
    snprintf(s->job, sizeof s->job, "%s %d/%d%s", strategy_ops_of(w->run)->name, pr.done, pr.goal,
             w->paused ? " paused" : "");
}
