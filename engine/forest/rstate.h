/* rstate.h - the recurrent state cells of a step's rows, for models with recurrent
 * layers (Qwen3.5's Gated DeltaNet: model_batch rs_in / rs_out).
 *
 * A recurrent layer's output at a node depends on the state its parent left, so the
 * forest keeps a state cell at every computed node that still has a child to compute:
 * the leaves, and the branch points whose children are pending. A step gives each row
 * the cell it starts from (its parent's, -1 for a root) and the cell it leaves its state
 * in: its parent's own cell, continued in place, when it is its parent's only child to
 * compute (a chain of a prompt or a draft, a leaf grown by one token); else a new cell,
 * which the backend fills with a copy of the parent's first (a fork). A failed step
 * changes no node; a leaf whose state a failed step half-updated in place loses its cell,
 * and the next step runs its chain again (rstate_prepare). After the step a node with computed
 * children only lets its cell go, except rows flagged FOREST_WANT_LOGITS (a tree of
 * verified drafts): they keep theirs until the next step, so that the strategy can prune
 * the rejected drafts and grow from the last accepted one, whose cell is then its own. A
 * fork under a node that holds no cell runs the chain above it again (rstate_prepare).
 *
 * Cells come from the forest's allocator (forest_rstate), as many as the context has
 * (model_ctx_n_rstates); running out of cells is
 * ST_NO_KV_SLOT, as a full KV cache is, and leaves the forest unchanged. */
#ifndef MD_RSTATE_H
#define MD_RSTATE_H

#include "forest/step.h"

/* Before a step's rows are chosen (step_plan_build): lets go the cells of computed nodes
 * whose children are all computed, and marks FOREST_REPLAY the computed nodes to run
 * again so that a row's parent state exists: where a pending node (or a re-scored one)
 * hangs under a computed node holding no cell (a fork under an inner node of a chain),
 * the chain above it back to the nearest node holding a cell, or to its root, runs again
 * in its own KV slots (the same K/V come back) without logits, its state carried along
 * in one cell. Nothing on a forest no step with recurrent layers has run on. */
void rstate_prepare(forest *f);
/* Gives the plan's rows their cells (p->rs_in, p->rs_out) from n_cells cells, first
 * freeing the cells of computed nodes whose children are all computed. ST_OK,
 * ST_NO_KV_SLOT, ST_ERR_UNSUPPORTED or ST_ERR_NOMEM (nothing taken). */
st_code rstate_plan(forest *f, step_plan *p, int32_t n_cells, st_err *err);
/* After a successful run whose rows are marked computed: each row's node holds its
 * cell, parents whose state went on in place or is no longer needed let theirs go. */
void rstate_commit(forest *f, step_plan *p);
/* After a failed run: the cells rstate_plan took go back. */
void rstate_cancel(forest *f, step_plan *p);

#endif
