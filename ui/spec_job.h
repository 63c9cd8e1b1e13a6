/* spec_job.h - :draft and :lookahead as a strategy the worker steps: exact greedy decoding
 * from the selected node with drafts (prompt lookup and an n-gram pool of the text so
 * far) verified as a tree in each forest step, and with :lookahead also lookahead
 * decoding's Jacobi window in the same step (engine/spec/spec.h). The accepted tokens stay in
 * the forest as one ordinary chain under the start node, token for token what plain
 * greedy decoding gives; the rejected drafts and the window are pruned every step.
 *
 * It stops at an end-of-generation token (not kept: the chain's last node is marked
 * finished, as grow does) or at its budget: a step may accept more tokens than are left,
 * and those are pruned again, so the chain holds exactly the budget.
 *
 * The mask pane (mask_view.h) shows each step's layout as it ran: the spec driver's
 * observer captures the plan after the forward pass and before acceptance prunes, with
 * each row's role (tip, draft, window cell "la l,i") snapshotted (ui_spec_capture); after
 * acceptance the drafts read accepted or rejected. Runs on the worker's thread under its
 * lock (the lock is released during forward passes by the plan's hooks, as for every
 * strategy). Not here: the job queue (worker.c), the verification itself (engine/spec/spec.c). */
#ifndef MD_UI_SPEC_JOB_H
#define MD_UI_SPEC_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "spec/spec.h"
#include "tok/tok.h"
#include "mask_view.h"

/* The TUI's row cost for the adaptive draft policy (spec_policy.h): fixed rather than
 * measured from the steps' timings, so which drafts a step packs - and so the mask pane,
 * the forest's shape during the run and the tmux golden screens - does not depend on the
 * machine's speed. The tokens never depend on it (verification is exact). */
#define UI_SPEC_ROW_COST 0.25

/* A running :draft / :lookahead. */
typedef struct ui_spec {
    spec *s;
    spec_params sp;
    int32_t *out;       /* (spec_max_emit) one step's tokens */
    forest_id from;     /* the start node */
    forest_id last;     /* the chain's last node (pending: the tip, until done) */
    int32_t budget;     /* tokens to make at most */
    int32_t made;       /* tokens kept so far */
    int32_t steps;      /* forest steps run */
    bool done, eog;     /* finished; by an end-of-generation token */
    /* the observer's, set for each step */
    mask_view *mv;
    const tok *tk;
    int32_t step_no;
} ui_spec;

/* The parameters of :draft (w == 0) or :lookahead W N G: spec_default_params with the
 * window's W, N, G and the row cost fixed at UI_SPEC_ROW_COST. */
spec_params ui_spec_params(int32_t w, int32_t n, int32_t g);

/* Greedy decoding from node `from` (pending: the next step computes it; computed: the
 * next step re-scores it; a finished leaf is opened again), at most budget >= 1 tokens. NULL + err
 * (ST_ERR_ARG: a stale node or bad parameters, ST_ERR_NOMEM); f is unchanged then. */
ui_spec *ui_spec_start(forest *f, forest_id from, const spec_params *sp, int32_t budget, st_err *err);

/* One step (spec_step: drafts, one forest step on p, acceptance), then the stop rules.
 * mv (may be NULL) gets the step's layout, numbered step_no, captured before the drafts
 * and the window are pruned. *made_now gets the tokens this step kept, *active 0 when
 * the run is over. ST_NO_KV_SLOT: nothing changed (prune, then step again); other codes
 * from the step. tk: end-of-generation tokens and the rows' text. */
st_code ui_spec_step(ui_spec *u, forest *f, step_plan *p, model_ctx *c, const tok *tk, mask_view *mv,
                     int32_t step_no, int32_t *made_now, int32_t *active, st_err *err);

/* The mask view of a speculative step: mv_capture of p, then each row's role from
 * spec_node_role. Call from the observer (before acceptance prunes). */
void ui_spec_capture(mask_view *v, const spec *s, const forest *f, const tok *tk, const step_plan *p,
                     int32_t step);

/* "lookahead 3,3,2: 12 tokens in 5 steps, 2.40 tokens/step" (or "draft: ..."). */
const char *ui_spec_describe(const ui_spec *u, char *buf, size_t cap);
/* The leaf growing now (the tip); returns 0 or 1 (writes at most cap). */
int32_t ui_spec_running(const ui_spec *u, forest_id *out, int32_t cap);
void ui_spec_free(ui_spec *u); /* NULL is a no-op; leaves the forest as it is */

#endif
