/* worker_impl.h - what worker.c (the thread, the queue, the jobs) and worker_run.c (the
 * strategy a job starts, stepped and summed up) share: the worker's state. Private to
 * those two files; the UI sees worker.h only. */
#ifndef MD_UI_WORKER_IMPL_H
#define MD_UI_WORKER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "base/clock.h"
#include "forest/step.h"
#include "strategy/strategy.h"
#include "mask_history.h"
#include "scores.h"
#include "undo.h"
#include "worker.h"

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
    double row_cost;           /* ui_worker_params.row_cost */
    ui_save_fn save;
    ui_load_fn load;
    void *ud;
    /* the running strategy (NULL: idle), driven through strategy.h */
    strategy *run;
    void *run_owner;           /* what owns run, when not the worker (margins' ui_margins,
                                  which its answer prompt needs); freed with run_owner_free */
    void (*run_owner_free)(void *owner);
    forest_id run_focus;       /* the node the run last asked views to show */
    bool paused;
    bool pause_next;           /* pause once the run's stage reaches pause_at (a staged run:
                                  tot pauses between levels) */
    int32_t pause_at;
    ui_chat chat;
    bool chat_on;              /* typed text becomes a user turn (needs chat.kind) */
    char note[160];            /* what the job did, added to its "done" */
    uint64_t run_seed;         /* the seed the running strategy drew (sp.seed is the next's) */
    bool run_sampled;          /* it ran at temp > 0: its "done" names the seed */
    /* what the UI reads */
    mask_view *mv;
    mv_history hist;           /* the last steps' views, for [ and ] in the mask pane */
    int32_t n_steps;           /* steps ever run (numbers the mask view) */
    double step_ms, t_job, job_tokens;
    int32_t rows;
    double last_tok_s;         /* of the last job, shown while idle */
    char msg[1024];
    uint64_t msg_no;
    forest_id focus;
    ui_undo undo;              /* the prune history */
    ui_scores judged;          /* judge and tot scores, kept with their nodes */
    session_meta *names;       /* the branches' names (:name; names.h), NULL out of memory */
    forest_id score_leaf[UI_MAX_SCORES]; /* the running beam's live hypotheses and scores */
    double score[UI_MAX_SCORES];
    int32_t n_scores;
    const char *model_name, *backend;
    int32_t threads;
    _Atomic uint64_t version;
    _Atomic int32_t fwd_done, fwd_rows; /* the long pass running now: rows done of fwd_rows
                                           (0: none; a prompt longer than one chunk) */
    _Atomic bool fwd_stop;     /* x was pressed: the pass stops after its chunk */
    bool fwd_cancelled;        /* ... and it did: the cancel job says so */
    _Atomic double unsaved_since;
    _Atomic bool modified;     /* changed since loaded or saved under a name of the user's */
    bool touched;              /* changed since the start or the last load */
};

static inline void say(ui_worker *w, const char *fmt, const char *arg) {
    snprintf(w->msg, sizeof w->msg, fmt, arg);
    w->msg_no++;
}

static inline void changed(ui_worker *w, bool forest_changed) {
    if (forest_changed && w->unsaved_since == 0) w->unsaved_since = mono_now_s();
    if (forest_changed) w->modified = w->touched = true;
    w->version++;
}

/* Starts the strategy job j (job.h) as w->run; refused while one runs (ST_ERR_ARG with a
 * message saying so), and for a node a strategy cannot start from. The forest is
 * unchanged on failure. */
st_code worker_run_start(ui_worker *w, const ui_job *j, st_err *err);
/* One step of w->run (under the lock): statistics, the mask view, its end, and a pause
 * asked for at the end of a stage. */
void worker_run_step(ui_worker *w);
/* Pause (p): a staged run (progress.staged) at the end of its stage, or at once when one
 * is not staged or a pause is already on its way; resume when paused. */
void worker_run_pause(ui_worker *w);
/* s while paused: n more stages of a staged run (then paused again), else n steps now. */
void worker_run_advance(ui_worker *w, int32_t n);
/* After the user pruned (in) while w->run runs, between two of its steps: the strategy
 * lets go of what went (strategy_forget) and goes on, or, left with nothing to grow, ends
 * as any run ends; the message says which. */
void worker_run_forget(ui_worker *w, const ui_prune_info *in);
/* Ends w->run (the rate of its tokens kept for the status line); none running: no-op. */
void worker_run_stop(ui_worker *w);
/* The strategy env of w's forest, plan and model (no emit). */
strategy_env worker_env(ui_worker *w);
/* w->run = strategy_create(o) over worker_env: ST_OK or err's code. */
st_code worker_run_create(ui_worker *w, const strategy_opts *o, st_err *err);
/* text as a chat user turn under node in the form the branch calls for (ask_margins.h):
 * its tokens (malloc'd, *n), and the form's name into what. NULL + err. */
int32_t *worker_turn_tokens(ui_worker *w, forest_id node, const char *text, int32_t *n, char *what, size_t cap,
                            st_err *err);

#endif
