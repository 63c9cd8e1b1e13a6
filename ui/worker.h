/* worker.h - the engine's thread. The worker is the only mutator of the forest: the UI
 * queues jobs (job.h: a strategy and its options, or prune, undo, redo, append, fork,
 * bookmark, set, save, load, export, pause, cancel, preview) and draws from the forest
 * while holding the worker's lock. A strategy (any of engine/strategy/strategy.h, driven
 * through its table) runs one forest step at a time; one runs at a time (a job starting
 * another while one runs is refused with a message saying to cancel it first). Queued
 * jobs run between steps, so a running strategy can be paused or cancelled while it
 * runs. Every change bumps a version number the UI polls (no lock needed) to know when
 * to redraw; results appear step by step.
 *
 * Locking: one mutex guards the forest, the last step's mask view, the statistics and
 * the messages. The worker holds it while a step is built and sampled and releases it
 * during the step's forward pass (step_plan's forward hooks; the forest does not change
 * then); the UI takes it with ui_worker_trylock while drawing and keeps its last frame
 * when it is held. After every job and step the mask view's rows whose nodes were pruned
 * are marked (mv_mark_pruned), so the view never names a stale node. A speculative
 * step's view is captured inside the step, before its drafts are pruned (spec_job.h).
 *
 * Saving and loading sessions are callbacks given by app/ (which knows the model file);
 * the worker calls them on its thread with the lock held. */
#ifndef MD_UI_WORKER_H
#define MD_UI_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "model/model.h"
#include "forest/sample.h"
#include "tok/tok.h"
#include "ask_margins.h"
#include "job.h"
#include "mask_view.h"
#include "scores.h"
#include "status.h"

/* s (the worker's, for the call; the callback may fill its model_path) holds the sampler,
 * the chat template typed turns were written in ("" none) and the nodes' scores. */
typedef st_code (*ui_save_fn)(void *ud, const char *path, const forest *f, session_settings *s, st_err *err);
/* Returns a new forest (every node pending) and fills *sp and *meta (the nodes' scores;
 * NULL when the file has none; the caller frees it), or NULL + err (ST_ERR_ARG for a
 * session saved with another model, unless force: its tokens are checked against this
 * model's vocabulary either way, so a forced load is safe, if not meaningful). */
typedef forest *(*ui_load_fn)(void *ud, const char *path, bool force, sample_params *sp,
                              session_meta **meta, st_err *err);

typedef struct ui_worker_params {
    model_ctx *ctx;        /* borrowed */
    const tok *tk;         /* borrowed */
    forest *f;             /* owned by the worker from start (freed by ui_worker_stop) */
    const session_meta *meta; /* f's scores (a loaded session's), read by start; may be NULL */
    bool unsaved;          /* f holds work no file has (a prompt from the command line):
                              :load asks before it replaces it */
    sample_params sp;
    int32_t budget;        /* default tokens per grow */
    double row_cost;       /* :draft / :lookahead's row cost (spec.h); <= 0: measured */
    ui_save_fn save;       /* may be NULL */
    ui_load_fn load;       /* may be NULL */
    void *ud;
    const char *model_name, *backend;
    int32_t threads;
    ui_chat chat;          /* the model's chat template, for :ask and :margins, and for
                              typed text (append) while chat mode is on */
    bool raw;              /* chat mode off at start (--raw): typed text goes in as it is */
} ui_worker_params;

typedef struct ui_worker ui_worker;

/* Starts the thread. NULL + err (ST_ERR_NOMEM, ST_ERR_IO when the thread cannot start);
 * then p->f is still the caller's. */
ui_worker *ui_worker_start(const ui_worker_params *p, st_err *err);
/* Queues a QUIT, waits for the thread to finish the jobs before it and frees everything
 * (the forest included). NULL is a no-op. */
void ui_worker_stop(ui_worker *w);
/* Queues a job (its text copied). False when the queue is full or memory ran out. */
bool ui_worker_post(ui_worker *w, const ui_job *j);

/* Changes of the forest, view or statistics since start: poll without the lock. */
uint64_t ui_worker_version(const ui_worker *w);
/* Seconds (monotonic) of the last change to the forest not yet saved; 0 when saved. */
double ui_worker_unsaved_since(const ui_worker *w);
/* The forest changed since it was loaded or saved to a file of the user's (autosaves do
 * not count: the next run's autosave replaces them): a load would lose work. */
bool ui_worker_modified(const ui_worker *w);

void ui_worker_lock(ui_worker *w);
bool ui_worker_trylock(ui_worker *w);
void ui_worker_unlock(ui_worker *w);
/* Under the lock: */
const forest *ui_worker_forest(const ui_worker *w);
/* The mask view the pane shows: the last step's (or the preview's), or one kept before it
 * (ui_worker_mask_back). */
const mask_view *ui_worker_mask(const ui_worker *w);
mask_view *ui_worker_mask_mut(ui_worker *w); /* scroll position only */
/* Moves the pane's view through the last steps kept (mask_history.h) by delta (negative:
 * older); returns how far back it now is (0: the last step), *kept the steps kept. */
int32_t ui_worker_mask_back(ui_worker *w, int32_t delta, int32_t *kept);
void ui_worker_stats(const ui_worker *w, ui_stats *s);
/* The attention weights the steps from now on keep for the mask pane (teaching): those of
 * layer (-1: none) and query head (-1: the mean over the heads). ST_ERR_ARG outside the
 * model's layers and heads, ST_ERR_UNSUPPORTED on a backend without them (cuda). */
st_code ui_worker_set_attn(ui_worker *w, int32_t layer, int32_t head, st_err *err);
/* The layer and head asked for (layer -1: none), and the model's layers and heads. */
void ui_worker_attn(const ui_worker *w, int32_t *layer, int32_t *head, int32_t *n_layer, int32_t *n_head);
/* Leaves a strategy is extending; returns how many (writes at most cap). */
int32_t ui_worker_running(const ui_worker *w, forest_id *out, int32_t cap);
/* Node id's score, into *score: the one kept with the node since a :judge or :tot scored
 * it or a beam returned it as a result (scores.h), else the running beam search's for a
 * live hypothesis (log-probability per token, as beam.h scores results). False: none. */
#define UI_MAX_SCORES 64 /* beam hypotheses shown */
bool ui_worker_score_of(const ui_worker *w, forest_id id, double *score);
/* The name given to node id (:name), NULL for none; valid until the lock is released. */
const char *ui_worker_name_of(const ui_worker *w, forest_id id);
/* The forest pane's sort keys for order (scores.h: ui_scores_keys over the judge scores). */
st_code ui_worker_sort_keys(const ui_worker *w, ui_sort order, double **keys, int32_t *cap, st_err *err);
/* The settings :set changes, as "temp 0.8  top_k 40 ... budget 32  chat on". */
void ui_worker_settings(const ui_worker *w, char *out, size_t cap);
/* The latest message and its number (0: none yet). */
uint64_t ui_worker_message(const ui_worker *w, char *out, size_t cap);
/* A node the UI should select (the new leaf of a fork or append), FOREST_NONE when none;
 * reading it clears it. */
forest_id ui_worker_take_focus(ui_worker *w);
bool ui_worker_busy(const ui_worker *w); /* a strategy is running (or paused) */

#endif
