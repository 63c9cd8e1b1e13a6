/* job.h - what the TUI asks its engine thread to do (worker.h runs it): a strategy with
 * its options as engine/strategy/strategy.h takes them, or one of the TUI's own edits
 * (prune, append, fork, bookmark, a setting, save, load, ...), each with the fields it
 * reads. The command parser (command.c) and the key actions (tui.c) build jobs; nothing
 * here runs them. */
#ifndef MD_UI_JOB_H
#define MD_UI_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "strategy/strategy.h"

typedef enum {
    UI_JOB_NONE = 0, /* nothing (a command the TUI does itself: help, bind, quit, ...) */
    UI_JOB_RUN,      /* the strategy u.run from node */
    UI_JOB_PRUNE,    /* node's subtree */
    UI_JOB_UNDO,     /* restore the last pruned subtree (pending); again: the one before */
    UI_JOB_REDO,     /* prune again what the last undo restored */
    UI_JOB_KEEP,     /* the u.keep.n best scored leaves below node's fork point stay, the
                        other scored ones are pruned (one undo step; judge_job.h) */
    UI_JOB_APPEND,   /* text under node (FOREST_NONE: a new root); in chat mode as a user
                        turn, in the form :ask gives it (ask_margins.h) */
    UI_JOB_FORK,     /* u.fork.token under node, then grown (when nothing runs) */
    UI_JOB_WRITE,    /* text under node as the model's own tokens, sharing those already
                        there (loom.h): an edited line, a fork with your own words */
    UI_JOB_BOOKMARK, /* node: toggle */
    UI_JOB_NAME,     /* node's branch named text (NULL or "": the name cleared) */
    UI_JOB_SET,      /* text = setting name, u.set.value ("chat": 1 on, 0 off) */
    UI_JOB_SAVE,     /* text = path, u.save */
    UI_JOB_LOAD,     /* text = path, u.load */
    UI_JOB_EXPORT,   /* text = path (Markdown; "PATH.svg [tree|mask]": svg.h's picture) */
    UI_JOB_PAUSE,    /* toggle */
    UI_JOB_CANCEL,
    UI_JOB_PREVIEW,  /* the mask view shows the plan the next step would run (not run) */
    UI_JOB_COMPACT,  /* the KV cache's used slots moved together (step_compact; no run) */
    UI_JOB_QUIT,     /* ends the thread after the jobs queued before it */
} ui_job_kind;

/* A strategy to run: its options, less what the worker owns. The worker sets opts.from
 * to the job's node, opts.sample and opts.n_vocab to its own, opts.budget when it is 0
 * to the `budget` setting, and builds what points into the forest: ask's prompt (text as
 * a chat user turn under node, FOREST_NONE: a new root), margins' prompts (notes on
 * node's branch about the question text), merge's leaves (the bookmarked nodes), judge's
 * branches and the judge / tot prompt (text: the question; judge_job.h), the draft /
 * lookahead observer (the mask pane). Merge, judge (of the bookmarks) and steps need no
 * node. */
typedef struct ui_run {
    strategy_opts opts;
    int32_t chunk; /* margins: tokens per chunk (0: UI_MARGINS_CHUNK) */
} ui_run;

typedef struct ui_job {
    ui_job_kind kind;
    forest_id node;   /* the node it acts on (FOREST_NONE: none) */
    const char *text; /* copied by ui_worker_post; NULL: none */
    union {
        ui_run run;
        struct { int32_t token; } fork;
        struct { int32_t n; } keep;
        struct { double value; } set;
        struct {
            bool autosave;   /* the work still counts as unsaved after it */
            bool if_changed; /* only when the forest changed since the start or the last load */
            bool quiet;      /* says nothing (the timed autosave: a run's summary stays) */
        } save;
        struct { bool force; } load; /* even when saved with another model */
    } u;
} ui_job;

/* A job running strategy kind from node with its defaults (strategy_default_opts), budget
 * 0 (the `budget` setting), and for draft / lookahead the TUI's spec parameters
 * (ui_spec_params, with the default window). */
ui_job ui_job_run(strategy_kind kind, forest_id node);
/* The same for the strategy ops (strategy_find(NAME)), with strategy_opts_for's defaults. */
ui_job ui_job_of(const strategy_ops *ops, forest_id node);

#endif
