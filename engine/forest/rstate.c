/* rstate.c - the recurrent state cells of a step's rows (rstate.h). */
#include "base/array.h"
#include "forest/rstate.h"

#include <stdlib.h>
#include <string.h>

/* What a row does with its cell (rs_kind). */
enum {
    RS_FRESH = 1,   /* a new cell (else its parent row's, continued in place) */
    RS_PENDING = 2, /* a pending node: it holds the cell after the run (else a computed node
                       run again, whose cell goes back unless a child row carries it on) */
    RS_KEEP = 4,    /* a pending row flagged FOREST_WANT_LOGITS: its node keeps its cell
                       after the run even when all its children are computed */
    RS_TAKEN = 8,   /* in place on the cell of a parent that is not a row (a leaf grown by
                       one token): a failed run leaves that state half-updated, so the
                       parent loses it (a later step runs its chain again) */
    RS_HELD = 0x80, /* rstate_commit's: the cell is a computed row's, to go back */
};

/* Has node n a child still to compute? */
static bool has_pending_child(const forest *f, const forest_node *n) {
    for (int32_t c = n->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling)
        if (forest_node_at(f, c)->state == FOREST_PENDING) return true;
    return false;
}

/* Lets computed node i's cell go when all its children are computed. */
static void release_if_done(forest *f, kv_alloc *rs, int32_t i) {
    const forest_node *n = forest_node_at(f, i);
    if (n->state != FOREST_COMPUTED || n->rs_cell < 0 || n->first_child < 0 ||
        has_pending_child(f, n))
        return;
    kv_alloc_release(rs, n->rs_cell);
    forest_set_rs_cell(f, i, -1);
}

/* Marks FOREST_REPLAY the computed ancestors of pending node i up to (not including) the
 * first that holds a cell, or up to its root: the chain the step runs again. */
static void mark_replay(forest *f, int32_t i) {
    for (int32_t a = forest_node_at(f, i)->parent; a >= 0; a = forest_node_at(f, a)->parent) {
        const forest_node *n = forest_node_at(f, a);
        if (n->state != FOREST_COMPUTED || n->rs_cell >= 0 || (n->flags & FOREST_REPLAY)) return;
        forest_set_flags(f, forest_id_at(f, a), FOREST_REPLAY, 0);
    }
}

void rstate_prepare(forest *f) {
    kv_alloc *rs = forest_rstate(f, 0);
    if (!rs) return; /* no step has run: nothing is computed */
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        forest_set_flags(f, forest_id_at(f, i), 0, FOREST_REPLAY);
        release_if_done(f, rs, i);
    }
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *n = forest_node_at(f, i);
        const bool rescored = n->state == FOREST_COMPUTED && (n->flags & FOREST_WANT_LOGITS);
        if (n->state == FOREST_PENDING || rescored) mark_replay(f, i);
    }
}

/* The row of node idx in the plan, or -1 (row_of holds rows for row nodes only). */
static int32_t row_of_node(const step_plan *p, int32_t idx) {
    const int32_t r = p->row_of[idx];
    return r >= 0 && r < p->n_rows && p->node[r] == idx ? r : -1;
}

/* The cell row r starts from: its parent row's, its parent's, or -1 for a root. */
static int32_t row_in(const forest *f, const step_plan *p, int32_t r) {
    const int32_t pa = forest_node_at(f, p->node[r])->parent;
    if (pa < 0) return -1;
    const int32_t pr = row_of_node(p, pa);
    return pr >= 0 ? p->rs_out[pr] : forest_node_at(f, pa)->rs_cell;
}

/* Does row r continue its parent's cell in place: either the parent is a row that keeps
 * no cell for itself and r is the only one of its children that is a row, or the parent
 * holds a cell and r, pending, is its only child (a leaf grown by a token: no copy)? */
static bool row_in_place(const forest *f, const step_plan *p, int32_t r) {
    const forest_node *nd = forest_node_at(f, p->node[r]);
    const int32_t pa = nd->parent;
    const int32_t pr = pa >= 0 ? row_of_node(p, pa) : -1;
    if (pa >= 0 && pr < 0)
        return nd->state == FOREST_PENDING && forest_node_at(f, pa)->rs_cell >= 0 &&
               forest_node_at(f, pa)->first_child == p->node[r] && nd->next_sibling < 0;
    if (pr < 0 || (p->rs_kind[pr] & RS_KEEP)) return false;
    for (int32_t c = forest_node_at(f, pa)->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling)
        if (c != p->node[r] && row_of_node(p, c) >= 0) return false;
    return true;
}

/* Row r's cells into the plan; ST_OK, or a code when its parent's state is not there or
 * the cells are full. */
static st_code plan_row(forest *f, step_plan *p, kv_alloc *rs, int32_t r, st_err *err) {
    const forest_node *nd = forest_node_at(f, p->node[r]);
    const int32_t in = row_in(f, p, r);
    if (in < 0 && nd->parent >= 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "node %d: its parent's recurrent state is "
                      "neither kept nor run again in this step", p->node[r]);
    const bool same = in >= 0 && row_in_place(f, p, r);
    const int32_t out = same ? in : kv_alloc_take(rs, -1, 1);
    if (out < 0)
        return st_set(err, ST_NO_KV_SLOT, "the recurrent state cells are full: %d of %d in use "
                      "(each leaf and branch point of a model with recurrent layers holds one; "
                      "prune branches, then retry)", kv_alloc_used(rs), kv_alloc_n_slots(rs));
    p->rs_in[r] = in, p->rs_out[r] = out;
    const bool pending = nd->state == FOREST_PENDING;
    const bool taken = same && row_of_node(p, nd->parent) < 0;
    p->rs_kind[r] = (uint8_t)((same ? 0 : RS_FRESH) | (pending ? RS_PENDING : 0) |
                              (pending && (nd->flags & FOREST_WANT_LOGITS) ? RS_KEEP : 0) |
                              (taken ? RS_TAKEN : 0));
    p->rs_rows = r + 1;
    return ST_OK;
}

st_code rstate_plan(forest *f, step_plan *p, int32_t n_cells, st_err *err) {
    kv_alloc *rs = forest_rstate(f, n_cells);
    p->rs_rows = 0;
    if (!rs)
        return st_set(err, ST_ERR_NOMEM, "cannot make %d recurrent state cells (out of memory, "
                      "or the forest holds cells of a context with another count)", n_cells);
    if (!ARR_GROW_I32(p->rs_in, p->n_rows, p->cap_rs_in) ||
        !ARR_GROW_I32(p->rs_out, p->n_rows, p->cap_rs_out) ||
        !ARR_GROW_I32(p->rs_kind, p->n_rows, p->cap_rs_kind))
        return st_set(err, ST_ERR_NOMEM, "out of memory planning the recurrent states");
    st_code rc = ST_OK;
    for (int32_t r = 0; r < p->n_rows && rc == ST_OK; r++) rc = plan_row(f, p, rs, r, err);
    if (rc) rstate_cancel(f, p);
    return rc;
}

void rstate_commit(forest *f, step_plan *p) {
    kv_alloc *rs = forest_rstate(f, 0);
    uint8_t *k = p->rs_kind;
    for (int32_t r = 0; r < p->rs_rows; r++) {
        const int32_t idx = p->node[r];
        if (!(k[r] & RS_FRESH)) { /* in place: the parent row hands its cell on */
            const int32_t pa = forest_node_at(f, idx)->parent, pr = row_of_node(p, pa);
            if (pr >= 0 && (k[pr] & RS_HELD)) k[pr] &= (uint8_t)~RS_HELD;
            else forest_set_rs_cell(f, pa, -1);
        }
        if (k[r] & RS_PENDING) forest_set_rs_cell(f, idx, p->rs_out[r]);
        else k[r] |= RS_HELD;
    }
    for (int32_t r = 0; r < p->rs_rows; r++)
        if (k[r] & RS_HELD) kv_alloc_release(rs, p->rs_out[r]);
    for (int32_t r = 0; r < p->rs_rows; r++) {
        const int32_t pa = forest_node_at(f, p->node[r])->parent;
        const int32_t pr = pa >= 0 ? row_of_node(p, pa) : -1;
        if (pa >= 0 && !(pr >= 0 && (k[pr] & RS_KEEP))) release_if_done(f, rs, pa);
    }
    p->rs_rows = 0;
}

void rstate_cancel(forest *f, step_plan *p) {
    kv_alloc *rs = forest_rstate(f, 0);
    for (int32_t r = 0; r < p->rs_rows; r++) {
        if (p->rs_kind[r] & RS_FRESH) kv_alloc_release(rs, p->rs_out[r]);
        if (p->rs_kind[r] & RS_TAKEN) {
            const int32_t pa = forest_node_at(f, p->node[r])->parent;
            kv_alloc_release(rs, p->rs_out[r]);
            forest_set_rs_cell(f, pa, -1);
        }
    }
    p->rs_rows = 0;
}
