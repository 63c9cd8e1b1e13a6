/* run_host.h - what the TUI worker adds to a strategy it starts, one row per strategy that
 * needs more than its options (tig's view_ops, for the worker): the inputs only the TUI
 * can build (ask's turn, margins' chunk prompts, merge's bookmarked leaves, the judge
 * prompt of every strategy that runs one), draft's and lookahead's observer and sampling,
 * which nodes it may start from and how its scores are kept. worker_run.c reads the row of
 * the job's strategy (ui_run_host_of) and has no per-strategy code; a strategy without a
 * row (grow, cot, beam, best, ...) is created from its options as they are. Not here: the
 * stepping (worker_run.c), the prompts' text (ask_margins.c, judge_job.c). */
#ifndef MD_UI_RUN_HOST_H
#define MD_UI_RUN_HOST_H

#include <stdbool.h>

#include "job.h"
#include "strategy/strategy.h"

struct ui_worker;

typedef struct ui_run_host {
    const char *name;  /* the strategy's (strategy_ops.name) */
    bool any_node;     /* starts with no selection, or a stale one (steps, merge, judge of
                          the bookmarks) */
    bool new_tree;     /* no selection (FOREST_NONE) starts a new tree (ask) */
    bool advances;     /* plain steps: its job while a run is paused advances that run, and
                          it asks for the next-token choices of a selected branch end */
    bool judged;       /* its scores stay with their nodes (ui_scores_take), not a live list */
    /* A job's options once built (ui_job_run); may be NULL. */
    void (*defaults)(strategy_opts *o);
    /* Creates w->run (and what it needs) from the job and its completed options o, with
     * w->note saying what it does; NULL: strategy_create(o) as it is. ST_OK or err. */
    st_code (*start)(struct ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err);
} ui_run_host;

/* The row of the strategy ops; for one with none, a row that judges (start_judge) when
 * its table has judge_setup, else the empty row (name NULL). */
const ui_run_host *ui_run_host_of(const strategy_ops *ops);

#endif
