/* worker.c - the engine thread (worker.h): a job queue, the jobs that edit the forest
 * (prune history in undo.h), the public reads for the views and the status line. The
 * strategy a job starts is run by worker_run.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "session/session.h"
#include "judge_job.h"
#include "loom.h"
#include "names.h"
#include "svg.h"
#include "run_host.h"
#include "worker_impl.h"

/* ---- jobs ---- */

/* "pruned 12 nodes (3 branches)"-like messages for prune, undo and redo. */
static void say_pruned(ui_worker *w, const char *verb, const ui_prune_info *in, const char *then) {
    snprintf(w->msg, sizeof w->msg, "%s %d node%s (%d branch%s)%s", verb, (int)in->nodes, in->nodes == 1 ? "" : "s",
             (int)in->branches, in->branches == 1 ? "" : "es", then);
    w->msg_no++;
}

/* After an undo: what was computed before its prune is computed again at once (its K/V
 * went with the prune; a step gives back the same), so the tree is as it was. */
static st_code restored(ui_worker *w, const ui_prune_info *in, st_err *err) {
    if (!in->computed) {
        say_pruned(w, "restored", in, ": s computes them, U prunes them again");
        return ST_OK;
    }
    ui_job s = ui_job_of(strategy_find("step"), in->near);
    st_code rc = worker_run_start(w, &s, err);
    while (!rc && w->run && !w->paused) worker_run_step(w); /* the lock is free while the model runs */
    if (!rc && !w->run) say_pruned(w, "restored", in, " as they were: U prunes them again");
    return rc; /* paused (a full KV cache): its message says what to do */
}

/* Whether a prune or redo (not an undo, whose step to compute what it restores waits for
 * the run) may go on while w->run runs: the strategy then lets go of what went. */
static st_code prune_while_running(const ui_worker *w, const ui_job *j, st_err *err) {
    const char *name = strategy_ops_of(w->run)->name;
    if (j->kind == UI_JOB_UNDO) return st_set(err, ST_ERR_ARG, "%s is running: undo once it ends (or x stops it)", name);
    if (!strategy_takes_prunes(w->run))
        return st_set(err, ST_ERR_ARG, "%s cannot lose a branch while it runs: x stops it, then d", name);
    return ST_OK;
}

static st_code prune_job(ui_worker *w, const ui_job *j, st_err *err) {
    /* plain steps (s, or the last undo's) end first, so that u u u undoes three levels */
    while (w->run && !w->paused && ui_run_host_of(strategy_ops_of(w->run))->advances) worker_run_step(w);
    if (w->run && prune_while_running(w, j, err)) return err->code;
    ui_prune_info in;
    forest_id top;
    st_code rc = j->kind == UI_JOB_PRUNE  ? ui_undo_prune(&w->undo, w->f, j->node, &in, err)
                 : j->kind == UI_JOB_UNDO ? ui_undo_undo(&w->undo, w->f, &top, &in, err)
                                          : ui_undo_redo(&w->undo, w->f, &in, err);
    if (rc) return rc;
    w->focus = in.near;
    if (w->run) return worker_run_forget(w, &in), ST_OK;
    if (j->kind == UI_JOB_PRUNE) say_pruned(w, "pruned", &in, ": u undoes");
    else if (j->kind == UI_JOB_UNDO) return restored(w, &in, err);
    else say_pruned(w, "pruned", &in, " again: u undoes");
    return ST_OK;
}

/* :keep N: the best scored leaves below the selection stay, the other scored ones go, as
 * one undo step. */
static st_code keep_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (w->run) return st_set(err, ST_ERR_ARG, "cancel the running strategy before pruning (x)");
    int32_t n_tops, n_scored;
    forest_id best, *tops = ui_judge_keep(w->f, &w->judged, j->node, j->u.keep.n, &n_tops, &n_scored, &best, err);
    if (!tops) return err->code;
    ui_prune_info in = {.near = FOREST_NONE};
    st_code rc = ui_undo_prune_group(&w->undo, w->f, tops, n_tops, &in, err);
    free(tops);
    if (rc) return rc;
    w->focus = best;
    int32_t kept = n_scored - in.branches;
    snprintf(w->msg, sizeof w->msg, "kept the %d best of %d scored leaves: pruned %d branch%s (%d nodes)%s",
             (int)kept, (int)n_scored, (int)in.branches, in.branches == 1 ? "" : "es", (int)in.nodes,
             in.branches ? ": u undoes" : "");
    w->msg_no++;
    return ST_OK;
}

st_code ui_worker_set_attn(ui_worker *w, int32_t layer, int32_t head, st_err *err) {
    const model_hparams *hp = model_ctx_hparams(w->ctx);
    kern_backend *be = model_ctx_backend(w->ctx);
    if (layer < -1 || layer >= hp->n_layer || head < -1 || head >= hp->n_head)
        return st_set(err, ST_ERR_ARG, "the model has layers 0-%d of heads 0-%d (layer -1: no "
                      "weights; head -1: their mean)", hp->n_layer - 1, hp->n_head - 1);
    if (layer >= 0 && !kern_backend_ops(be)->attn_weights)
        return st_set(err, ST_ERR_UNSUPPORTED, "the %s backend cannot hand back attention "
                      "weights", kern_backend_name(be));
    w->plan.attn_want = layer >= 0;
    w->plan.attn_layer = layer, w->plan.attn_head = head;
    return ST_OK;
}

void ui_worker_attn(const ui_worker *w, int32_t *layer, int32_t *head, int32_t *n_layer, int32_t *n_head) {
    *layer = w->plan.attn_want ? w->plan.attn_layer : -1;
    *head = w->plan.attn_head;
    *n_layer = model_ctx_hparams(w->ctx)->n_layer;
    *n_head = model_ctx_hparams(w->ctx)->n_head;
}

static st_code set_param(ui_worker *w, const char *key, double v, st_err *err) {
    st_code rc = sample_param_set(&w->sp, key, v, err);
    if (rc != ST_ERR_NOT_FOUND) return rc;
    if (!strcmp(key, "layer") || !strcmp(key, "head")) /* the mask pane's weights */
        return ui_worker_set_attn(w, !strcmp(key, "layer") ? (int32_t)v : w->plan.attn_layer,
                                  !strcmp(key, "head") ? (int32_t)v : w->plan.attn_head, err);
    if (!strcmp(key, "budget") && v >= 1 && v <= 1e6) w->budget = (int32_t)v;
    else if (!strcmp(key, "chat")) {
        if (v != 0 && w->chat.kind == CHAT_NONE)
            return st_set(err, ST_ERR_ARG, "the model has no chat template: typed text stays raw");
        w->chat_on = v != 0;
    }
    else return st_set(err, ST_ERR_ARG, "bad setting %s", key);
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
    rc = step_plan_window(&w->preview, model_ctx_hparams(w->ctx), err); /* a run builds its own */
    if (rc) {
        step_plan_cancel(w->f, &w->preview);
        return rc;
    }
    mv_capture(w->mv, w->f, w->tk, &w->preview, w->n_steps);
    w->mv->preview = true;
    w->hist.back = 0; /* the preview is what the pane shows */
    step_plan_cancel(w->f, &w->preview);
    say(w, "%s", "the next step's plan (not run): s runs it");
    return ST_OK;
}

/* Tokens under node (FOREST_NONE: a new root) with their log-probabilities (lp NULL:
 * typed text, unscored); the last one becomes the selection. */
static st_code add_tokens(ui_worker *w, forest_id node, const int32_t *t, const float *lp, int32_t n, forest_id *last,
                          st_err *err) {
    st_code rc = node == FOREST_NONE ? forest_add_root(w->f, t, lp, n, 0, last, err)
                                     : forest_append(w->f, node, t, lp, n, last, err);
    if (!rc) w->focus = *last;
    return rc;
}

/* Typed text as it is: its tokens (malloc'd), BOS first at a new root when the model
 * wants one. */
static int32_t *text_tokens(const tok *tk, const char *s, bool root, int32_t *n, st_err *err) {
    int32_t *t = tok_encode_alloc(tk, s, strlen(s), root && tok_add_bos(tk), false, n, err);
    if (t && *n <= 0) {
        free(t);
        st_set(err, ST_ERR_ARG, "nothing to append");
        return NULL;
    }
    return t;
}

/* While a run keeps its losers dimmed (:tot), tokens added under one would go with it
 * when the run prunes them: refused instead. */
static st_code check_not_dimmed(const ui_worker *w, const forest_node *nd, st_err *err) {
    for (; w->run && nd; nd = nd->parent >= 0 ? forest_node_at(w->f, nd->parent) : NULL)
        if (nd->flags & FOREST_DIMMED)
            return st_set(err, ST_ERR_ARG, "that branch lost and goes when the run ends: pick a kept one, "
                          "or cancel the run (x) to keep it");
    return ST_OK;
}

/* Typed text under node: in chat mode a user turn (as :ask makes it, not grown), else as
 * it is. */
static st_code append_job(ui_worker *w, const ui_job *j, st_err *err) {
    const forest_node *nd = forest_get(w->f, j->node);
    if (!nd && j->node != FOREST_NONE) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    if (check_not_dimmed(w, nd, err)) return err->code;
    char what[128];
    int32_t n, *t = w->chat_on ? worker_turn_tokens(w, j->node, j->text, &n, what, sizeof what, err)
                               : text_tokens(w->tk, j->text ? j->text : "", nd == NULL, &n, err);
    if (!t) return err->code;
    forest_id last;
    st_code rc = add_tokens(w, j->node, t, NULL, n, &last, err);
    free(t);
    if (!rc && w->chat_on) say(w, "%s: n grows the answer", what);
    return rc;
}

/* Your own text under node (an edited line, a fork at a token): the branch it makes, or
 * the one that already had that text, selected. */
static st_code write_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (check_not_dimmed(w, forest_get(w->f, j->node), err)) return err->code;
    forest_id leaf;
    bool made;
    st_code rc = ui_loom_write(w->f, w->tk, j->node, j->text ? j->text : "", &leaf, &made, err);
    if (rc) return rc;
    w->focus = leaf;
    say(w, "%s", made ? "written beside the original, which stays: n grows it, d prunes it"
                      : "that text is a branch here already: selected it");
    return ST_OK;
}

/* The log-probability of token among node's stored alternatives (the pane showed it);
 * NAN when it is not among them. */
static float alt_logprob(const forest *f, forest_id node, int32_t token) {
    int32_t ids[256];
    float lps[256];
    int32_t n = forest_topk(f, node, ids, lps, 256);
    for (int32_t i = 0; i < n && i < 256; i++)
        if (ids[i] == token) return lps[i];
    return NAN;
}

/* The alternative token picked in the text pane under node, grown when nothing runs; a
 * token already there is selected instead of made twice. */
static st_code fork_job(ui_worker *w, const ui_job *j, st_err *err) {
    const forest_node *nd = forest_get(w->f, j->node);
    if (!nd && j->node != FOREST_NONE) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    if (check_not_dimmed(w, nd, err)) return err->code;
    for (int32_t c = nd ? nd->first_child : -1; c >= 0; c = forest_node_at(w->f, c)->next_sibling)
        if (forest_node_at(w->f, c)->token == j->u.fork.token) {
            w->focus = forest_id_at(w->f, c);
            say(w, "%s", "that token is already a branch here: selected it");
            return ST_OK;
        }
    forest_id last;
    float lp = alt_logprob(w->f, j->node, j->u.fork.token);
    st_code rc = add_tokens(w, j->node, &j->u.fork.token, &lp, 1, &last, err);
    if (rc || w->run) return rc; /* running: the token waits for the next grow */
    ui_job g = ui_job_of(strategy_find("grow"), last);
    return worker_run_start(w, &g, err);
}

/* :name TEXT: the selected branch's name, drawn on its line and saved with it. */
static st_code name_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (!w->names) return st_set(err, ST_ERR_NOMEM, "out of memory");
    if (session_meta_set_name(w->names, w->f, j->node, j->text, err)) return err->code;
    if (j->text && *j->text) say(w, "named the branch '%s'", j->text);
    else say(w, "%s", "the branch's name cleared");
    return ST_OK;
}

static st_code bookmark_job(ui_worker *w, const ui_job *j, st_err *err) {
    const forest_node *nd = forest_get(w->f, j->node);
    if (!nd) return st_set(err, ST_ERR_ARG, "nothing selected");
    bool on = nd->flags & FOREST_BOOKMARK;
    forest_set_flags(w->f, j->node, on ? 0 : FOREST_BOOKMARK, on ? FOREST_BOOKMARK : 0);
    return ST_OK;
}

/* The scores as session metadata (scores.h), for a save or an export; NULL + err. */
static session_meta *scores_meta(const ui_worker *w, st_err *err) {
    session_meta *m = session_meta_init();
    if (!m) st_set(err, ST_ERR_NOMEM, "out of memory");
    else if (ui_scores_to_meta(&w->judged, w->f, m, err)) session_meta_free(m), m = NULL;
    return m;
}

/* What a save or an export records besides the forest: the sampler, the chat template the
 * typed turns were written in and the scores. The caller frees *s; ST_ERR_NOMEM. */
static st_code worker_settings(const ui_worker *w, session_settings *s, st_err *err) {
    *s = session_settings_default();
    s->sample = w->sp;
    if (w->chat_on) snprintf(s->chat_template, sizeof s->chat_template, "%s", chat_name(w->chat.kind));
    return (s->meta = scores_meta(w, err)) ? ui_names_copy(s->meta, w->names, w->f, err) : err->code;
}

static st_code save_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (!w->save) return st_set(err, ST_ERR_ARG, "saving is not available");
    if (j->u.save.if_changed && !w->touched) return ST_OK; /* nothing this run made */
    session_settings s;
    st_code rc = worker_settings(w, &s, err);
    if (!rc) rc = w->save(w->ud, j->text, w->f, &s, err);
    session_settings_free(&s);
    if (rc) return rc;
    w->unsaved_since = 0;
    if (!j->u.save.autosave) w->modified = false; /* the autosave is replaced by the next run's */
    if (!j->u.save.quiet) say(w, "saved %s", j->text);
    return ST_OK;
}

static st_code load_job(ui_worker *w, const ui_job *j, st_err *err) {
    if (!w->load) return st_set(err, ST_ERR_ARG, "loading is not available");
    sample_params sp = w->sp;
    session_meta *meta = NULL;
    forest *nf = w->load(w->ud, j->text, j->u.load.force, &sp, &meta, err);
    if (!nf) return err->code;
    worker_run_stop(w);
    ui_undo_clear(&w->undo);
    forest_free(w->f);
    w->f = nf;
    w->sp = sp;
    mv_init(w->mv);
    mvh_clear(&w->hist);
    w->unsaved_since = 0;
    w->modified = w->touched = false;
    w->n_scores = 0; /* ids of the old forest */
    st_code rc = ui_scores_from_meta(&w->judged, w->f, meta, err);
    session_meta_free(w->names);
    w->names = meta ? meta : session_meta_init(); /* its names (the rest it holds unread) */
    w->undo.names = w->names;
    if (rc) return rc;
    say(w, j->u.load.force ? "loaded %s (its model check skipped): press s to compute it"
                            : "loaded %s: press s to compute it", j->text);
    return ST_OK;
}

/* The parts an ":export FILE.svg [tree|mask]" path asks for (cutting the word from path),
 * or 0 for any other file (Markdown). */
static int svg_parts(char *path) {
    size_t n = strlen(path);
    int parts = SVG_TREE | SVG_MASK | SVG_SLIDE; /* the whole picture is a slide */
    if (n > 5 && (!strcmp(path + n - 5, " tree") || !strcmp(path + n - 5, " mask"))) {
        parts = path[n - 4] == 't' ? SVG_TREE : SVG_MASK;
        path[n -= 5] = '\0';
    }
    return n >= 4 && !strcasecmp(path + n - 4, ".svg") ? parts : 0;
}

/* The forest and the last step's mask as a picture (svg.h) at path; text is the command's
 * argument as typed, for the message. */
static st_code export_svg(ui_worker *w, const char *path, int parts, const char *text, st_err *err) {
    if ((parts & SVG_MASK) && !(parts & SVG_TREE) && w->mv->step < 0)
        return st_set(err, ST_ERR_ARG, "no step to draw yet: press s to run one");
    st_code rc = svg_save(path, w->f, w->tk, w->mv, parts, err);
    if (!rc) say(w, "exported %s", text); /* the path as typed, with its part word */
    return rc;
}

static st_code export_job(ui_worker *w, const ui_job *j, st_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s", j->text);
    int parts = svg_parts(path);
    if (parts) return export_svg(w, path, parts, j->text, err);
    session_settings s;
    st_code rc = worker_settings(w, &s, err);
    if (!rc) rc = session_save_markdown(j->text, w->f, w->tk, &s, NULL, err);
    session_settings_free(&s);
    if (!rc) say(w, "exported %s", j->text);
    return rc;
}

/* Pause (toggle) or cancel the running strategy. */
static st_code pause_job(ui_worker *w, bool cancel, st_err *err) {
    bool stopped = w->fwd_cancelled; /* the pass x stopped ended the run before this job */
    if (cancel) w->fwd_stop = w->fwd_cancelled = false;
    if (!w->run && cancel && stopped) {
        say(w, "%s", "cancelled: what the pass had not finished stays pending (s or n computes it)");
        return ST_OK;
    }
    if (!w->run) return st_set(err, ST_ERR_ARG, "nothing is running");
    if (!cancel) {
        worker_run_pause(w);
        return ST_OK;
    }
    worker_run_stop(w);
    say(w, "%s", "cancelled");
    return ST_OK;
}

/* :compact: prunes leave the used KV slots scattered; step_compact moves them together in
 * DFS order, so chains read contiguous runs again (it frees no slot). */
static st_code compact_job(ui_worker *w, st_err *err) {
    if (w->run) return st_set(err, ST_ERR_ARG, "cancel the running strategy before compacting (x)");
    const kv_alloc *kv = forest_kv_const(w->f);
    int32_t runs = kv_alloc_free_runs(kv);
    st_code rc = step_compact(w->f, w->ctx, err);
    if (rc) return rc;
    snprintf(w->msg, sizeof w->msg, "compacted: %d KV slots used, free space in %d run%s (was %d)",
             (int)kv_alloc_used(kv), (int)kv_alloc_free_runs(kv), kv_alloc_free_runs(kv) == 1 ? "" : "s", (int)runs);
    w->msg_no++;
    return ST_OK;
}

static st_code do_job(ui_worker *w, const ui_job *j, st_err *err) {
    switch (j->kind) {
    case UI_JOB_RUN: return worker_run_start(w, j, err);
    case UI_JOB_PRUNE: case UI_JOB_UNDO: case UI_JOB_REDO: return prune_job(w, j, err);
    case UI_JOB_KEEP: return keep_job(w, j, err);
    case UI_JOB_APPEND: return append_job(w, j, err);
    case UI_JOB_FORK: return fork_job(w, j, err);
    case UI_JOB_WRITE: return write_job(w, j, err);
    case UI_JOB_NAME: return name_job(w, j, err);
    case UI_JOB_BOOKMARK: return bookmark_job(w, j, err);
    case UI_JOB_SET: return set_param(w, j->text ? j->text : "", j->u.set.value, err);
    case UI_JOB_SAVE: return save_job(w, j, err);
    case UI_JOB_LOAD: return load_job(w, j, err);
    case UI_JOB_EXPORT: return export_job(w, j, err);
    case UI_JOB_PAUSE: case UI_JOB_CANCEL: return pause_job(w, j->kind == UI_JOB_CANCEL, err);
    case UI_JOB_PREVIEW: return preview_next(w, err);
    case UI_JOB_COMPACT: return compact_job(w, err);
    case UI_JOB_NONE: case UI_JOB_QUIT: return ST_OK;
    }
    return ST_OK;
}

/* The forest lock is released while the model runs (step_plan's forward hooks): only
 * this thread mutates the forest, and it is busy in the forward pass, so readers see a
 * consistent forest the whole time. */
static void forward_unlock(void *ud) { pthread_mutex_unlock(&((ui_worker *)ud)->mu); }
static void forward_relock(void *ud) {
    ui_worker *w = ud;
    pthread_mutex_lock(&w->mu);
    w->fwd_rows = 0;
}

/* A long pass's progress for the status line (read while the lock is free); x stops it. */
static bool forward_progress(void *ud, int32_t done, int32_t rows) {
    ui_worker *w = ud;
    w->fwd_done = done;
    w->fwd_rows = rows;
    w->version++;
    if (!w->fwd_stop) return true;
    w->fwd_cancelled = true;
    return false;
}

/* Waits for a job, or for a running strategy to step; true and *j when a job came
 * first (jobs go before steps, so pause and cancel land at once). */
static bool take_job(ui_worker *w, ui_job *j) {
    pthread_mutex_lock(&w->qmu);
    while (w->q_n == 0 && !(w->run && !w->paused)) pthread_cond_wait(&w->qcv, &w->qmu);
    bool have = w->q_n > 0;
    if (have) {
        *j = w->q[w->q_head];
        w->q_head = (w->q_head + 1) % Q_CAP;
        w->q_n--;
    }
    pthread_mutex_unlock(&w->qmu);
    return have;
}

/* Jobs that leave the forest as it was (a load replaces it, and counts as saved). */
static bool keeps_forest(ui_job_kind k) {
    return k == UI_JOB_SAVE || k == UI_JOB_EXPORT || k == UI_JOB_PAUSE || k == UI_JOB_SET || k == UI_JOB_PREVIEW ||
           k == UI_JOB_CANCEL || k == UI_JOB_LOAD || k == UI_JOB_COMPACT;
}

static void *worker_main(void *arg) {
    ui_worker *w = arg;
    for (;;) {
        ui_job j = {0};
        bool have = take_job(w, &j);
        pthread_mutex_lock(&w->mu);
        if (have) {
            st_err err = {0};
            st_code rc = do_job(w, &j, &err);
            if (rc) say(w, "%s", err.msg[0] ? err.msg : st_str(rc));
            changed(w, !keeps_forest(j.kind) && !rc);
        } else
            worker_run_step(w);
        /* a prune (the user's, or a strategy's own) may have removed nodes the mask view names */
        mv_mark_pruned(w->mv, w->f);
        for (int32_t b = 0; b < w->hist.n; b++) mv_mark_pruned(mvh_at(&w->hist, b), w->f);
        pthread_mutex_unlock(&w->mu);
        free((char *)j.text);
        if (have && j.kind == UI_JOB_QUIT) break;
    }
    return NULL;
}

/* ---- public ---- */

/* The worker's part of p (the forest becomes its own). */
static void take_params(ui_worker *w, const ui_worker_params *p) {
    w->f = p->f;
    w->ctx = p->ctx;
    w->tk = p->tk;
    w->n_vocab = model_ctx_hparams(p->ctx)->n_vocab;
    w->sp = p->sp;
    w->budget = p->budget > 0 ? p->budget : 32;
    w->row_cost = p->row_cost;
    w->save = p->save;
    w->load = p->load;
    w->ud = p->ud;
    w->model_name = p->model_name;
    w->backend = p->backend;
    w->threads = p->threads;
    w->chat = p->chat;
    w->chat_on = p->chat.kind != CHAT_NONE && !p->raw;
    w->focus = FOREST_NONE;
}

ui_worker *ui_worker_start(const ui_worker_params *p, st_err *err) {
    ui_worker *w = calloc(1, sizeof *w);
    if (!w || !(w->mv = malloc(sizeof *w->mv))) {
        free(w);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    mv_init(w->mv);
    mvh_init(&w->hist);
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_init(&w->qmu, NULL);
    pthread_cond_init(&w->qcv, NULL);
    step_plan_init(&w->plan);
    step_plan_init(&w->preview);
    w->plan.attn_layer = w->plan.attn_head = -1; /* no weights; asked: their mean */
    w->plan.forward_begin = forward_unlock;
    w->plan.forward_end = forward_relock;
    w->plan.forward_progress = forward_progress;
    w->plan.forward_ud = w;
    take_params(w, p);
    w->modified = p->unsaved;
    ui_undo_init(&w->undo);
    w->undo.scores = &w->judged;
    bool ok = !ui_scores_from_meta(&w->judged, w->f, p->meta, err);
    if (ok && !(w->names = session_meta_init())) ok = !st_set(err, ST_ERR_NOMEM, "out of memory");
    if (ok) ok = !ui_names_copy(w->names, p->meta, w->f, err);
    w->undo.names = w->names;
    if (ok && pthread_create(&w->th, NULL, worker_main, w))
        ok = !st_set(err, ST_ERR_IO, "cannot start the engine thread");
    if (!ok) {
        session_meta_free(w->names);
        ui_scores_free(&w->judged);
        step_plan_free(&w->plan);
        step_plan_free(&w->preview);
        free(w->mv);
        free(w);
        return NULL;
    }
    return w;
}

bool ui_worker_post(ui_worker *w, const ui_job *j) {
    ui_job c = *j;
    if (j->kind == UI_JOB_CANCEL) w->fwd_stop = true; /* a pass under way sees it at its next chunk */
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
    worker_run_stop(w);
    ui_undo_free(&w->undo);
    ui_scores_free(&w->judged);
    session_meta_free(w->names);
    step_plan_free(&w->plan);
    step_plan_free(&w->preview);
    forest_free(w->f);
    pthread_mutex_destroy(&w->mu);
    pthread_mutex_destroy(&w->qmu);
    pthread_cond_destroy(&w->qcv);
    free(w->mv);
    mvh_free(&w->hist);
    free(w);
}

uint64_t ui_worker_version(const ui_worker *w) { return w->version; }
double ui_worker_unsaved_since(const ui_worker *w) { return w->unsaved_since; }
bool ui_worker_modified(const ui_worker *w) { return w->modified; }
void ui_worker_lock(ui_worker *w) { pthread_mutex_lock(&w->mu); }
bool ui_worker_trylock(ui_worker *w) { return pthread_mutex_trylock(&w->mu) == 0; }
void ui_worker_unlock(ui_worker *w) { pthread_mutex_unlock(&w->mu); }
const forest *ui_worker_forest(const ui_worker *w) { return w->f; }
const mask_view *ui_worker_mask(const ui_worker *w) { return ui_worker_mask_mut((ui_worker *)w); }
mask_view *ui_worker_mask_mut(ui_worker *w) { return w->hist.back > 0 ? mvh_at(&w->hist, w->hist.back) : w->mv; }

int32_t ui_worker_mask_back(ui_worker *w, int32_t delta, int32_t *kept) {
    *kept = w->hist.n;
    return mvh_move(&w->hist, delta);
}
bool ui_worker_busy(const ui_worker *w) { return w->run != NULL; }

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

const char *ui_worker_name_of(const ui_worker *w, forest_id id) { return session_meta_get_name(w->names, w->f, id); }

bool ui_worker_score_of(const ui_worker *w, forest_id id, double *score) {
    if (ui_scores_get(&w->judged, w->f, id, score)) return true;
    for (int32_t i = 0; i < w->n_scores; i++)
        if (w->score_leaf[i] == id && forest_get(w->f, id)) return *score = w->score[i], true;
    return false;
}

st_code ui_worker_sort_keys(const ui_worker *w, ui_sort order, double **keys, int32_t *cap, st_err *err) {
    return ui_scores_keys(&w->judged, w->f, order, keys, cap, err);
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
    double dt = mono_now_s() - w->t_job;
    s->tok_s = w->run && dt > 0 ? w->job_tokens / dt : w->last_tok_s;
    s->mode = w->chat.kind == CHAT_NONE ? NULL : w->chat_on ? "chat" : "raw";
    strategy_progress pr;
    if (!w->run) {
        snprintf(s->job, sizeof s->job, "idle");
        return;
    }
    strategy_get_progress(w->run, &pr);
    if (w->fwd_rows > 0)
        snprintf(s->job, sizeof s->job, "%s: prompt %d/%d tokens (x stops)", strategy_ops_of(w->run)->name,
                 (int)w->fwd_done, (int)w->fwd_rows);
    else
        snprintf(s->job, sizeof s->job, "%s %d/%d%s", strategy_ops_of(w->run)->name, pr.done, pr.goal,
                 w->paused ? " paused" : w->pause_next ? " pausing" : "");
}
