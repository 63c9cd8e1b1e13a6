/* t_forest.h - an independent checker of a forest's invariants (header-only, include
 * after t.h). It walks the forest only through forest.h's public API and trusts none of
 * the engine's own checks: forest_check is asked too, but only to see that it agrees.
 * test_soak runs it after every operation; any test that changes a forest may. */
#ifndef MD_T_FOREST_H
#define MD_T_FOREST_H

#include <stdarg.h>
#include <stdbool.h>

#include "forest/forest.h"

/* Writes a violation into why (cap bytes) unless one is there already; returns false, so
 * checks read `ok = t_forest_fail(...)`. */
static inline bool t_forest_fail(char *why, size_t cap, const char *fmt, ...) {
    if (!why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* One node at index i: its id, parent, depth and state, its child list, its slot (owner[]
 * records who owns each slot, seen[] how often each node is listed as a child). */
static inline bool t_forest_node_ok(const forest *f, int32_t i, int32_t *owner, int32_t *seen,
                                    char *why, size_t cap) {
    const int32_t n_idx = forest_capacity(f), ns = kv_alloc_n_slots(forest_kv_const(f));
    const forest_node *n = forest_node_at(f, i);
    const forest_id id = forest_id_at(f, i);
    if (n->state != FOREST_PENDING && n->state != FOREST_COMPUTED)
        return t_forest_fail(why, cap, "node %d: state %d", i, n->state);
    if (forest_get(f, id) != n) return t_forest_fail(why, cap, "node %d: forest_get of its id", i);
    if (n->parent >= 0) {
        const forest_node *p = n->parent < n_idx ? forest_node_at(f, n->parent) : NULL;
        if (!p || p->state == FOREST_FREE)
            return t_forest_fail(why, cap, "node %d: its parent %d is not live", i, n->parent);
        if (n->depth != p->depth + 1)
            return t_forest_fail(why, cap, "node %d: depth %d under depth %d", i, n->depth, p->depth);
        if (n->state == FOREST_COMPUTED && p->state != FOREST_COMPUTED)
            return t_forest_fail(why, cap, "node %d: computed under pending %d", i, n->parent);
    } else if (n->depth < 0) {
        return t_forest_fail(why, cap, "root %d: depth %d", i, n->depth);
    }
    int32_t k = 0;
    for (int32_t c = n->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling, k++) {
        if (c >= n_idx || k > n_idx || forest_node_at(f, c)->parent != i)
            return t_forest_fail(why, cap, "node %d: child %d does not point back (or a cycle)", i, c);
        seen[c]++;
    }
    if (n->state == FOREST_PENDING)
        return n->kv_slot == -1 ||
               t_forest_fail(why, cap, "pending node %d owns slot %d", i, n->kv_slot);
    const int32_t s = n->kv_slot;
    if (s < 0 || s >= ns || !kv_alloc_is_used(forest_kv_const(f), s))
        return t_forest_fail(why, cap, "node %d: slot %d is not a used slot", i, s);
    if (owner[s] >= 0) return t_forest_fail(why, cap, "slot %d is owned by %d and %d", s, owner[s], i);
    owner[s] = i;
    return true;
}

/* Checks every invariant: each index is free with no id, or live with forest_get(its id)
 * giving it; a live node's parent is live with depth one less, a computed node's parent
 * is computed; child lists point back and list every non-root once; a computed node owns
 * a used slot no other node owns, a pending node none, and every used slot has an owner
 * (pruned nodes' slots are free); the live, pending, used, leaf and root counts agree
 * with the forest's; the DFS visits every live node once, each after its parent;
 * forest_path of the probe-th node in DFS order (modulo the count) follows its parents;
 * forest_check agrees. True, or false with the first violation in why. */
static inline bool t_forest_walk(const forest *f, uint32_t probe, char *why, size_t cap) {
    const kv_alloc *kv = forest_kv_const(f);
    const int32_t n_idx = forest_capacity(f), ns = kv_alloc_n_slots(kv);
    int32_t live = 0, pending = 0, owned = 0, leaves = 0, roots = 0;
    int32_t *owner = malloc(sizeof *owner * (size_t)ns), *seen = calloc((size_t)n_idx + 1, sizeof *seen);
    bool ok = true;
    for (int32_t s = 0; s < ns; s++) owner[s] = -1;
    for (int32_t i = 0; i < n_idx && ok; i++) {
        const forest_node *n = forest_node_at(f, i);
        if (n->state == FOREST_FREE) {
            if (forest_id_at(f, i) != FOREST_NONE)
                ok = t_forest_fail(why, cap, "free index %d has an id", i);
            continue;
        }
        ok = t_forest_node_ok(f, i, owner, seen, why, cap);
        live++, pending += n->state == FOREST_PENDING, leaves += n->first_child < 0;
        roots += n->parent < 0, owned += n->state == FOREST_COMPUTED;
    }
    for (int32_t i = 0; i < n_idx && ok; i++) {
        const forest_node *n = forest_node_at(f, i);
        if (n->state != FOREST_FREE && seen[i] != (n->parent >= 0 ? 1 : 0))
            ok = t_forest_fail(why, cap, "node %d is listed %d times as a child", i, seen[i]);
    }
    for (int32_t s = 0; s < ns && ok; s++)
        if (kv_alloc_is_used(kv, s) && owner[s] < 0)
            ok = t_forest_fail(why, cap, "slot %d is used but no node owns it (a pruned node's "
                               "slot leaked)", s);
    if (ok && (live != forest_n_live(f) || pending != forest_n_pending(f) || owned != kv_alloc_used(kv)))
        ok = t_forest_fail(why, cap, "counts: %d live (says %d), %d pending (says %d), %d owned (%d used)",
                           live, forest_n_live(f), pending, forest_n_pending(f), owned, kv_alloc_used(kv));
    if (ok && (forest_leaves(f, NULL, 0) != leaves || forest_roots(f, NULL, 0) != roots))
        ok = t_forest_fail(why, cap, "%d leaves, %d roots; the forest says %d, %d", leaves, roots,
                           forest_leaves(f, NULL, 0), forest_roots(f, NULL, 0));
    memset(seen, 0, sizeof *seen * ((size_t)n_idx + 1));
    int32_t k = 0, at = -1;
    for (int32_t i = forest_dfs_first(f); i >= 0 && ok; i = forest_dfs_next(f, i), k++) {
        const forest_node *n = forest_node_at(f, i);
        if (k >= live || seen[i] || n->state == FOREST_FREE)
            ok = t_forest_fail(why, cap, "the DFS visits %d twice, or a free node, or too many", i);
        else if (n->parent >= 0 && !seen[n->parent])
            ok = t_forest_fail(why, cap, "the DFS visits node %d before its parent %d", i, n->parent);
        seen[i] = 1;
        if (live && k == (int32_t)(probe % (uint32_t)live)) at = i;
    }
    if (ok && k != live) ok = t_forest_fail(why, cap, "the DFS visits %d of %d live nodes", k, live);
    if (ok && at >= 0) {
        const int32_t len = forest_path(f, forest_id_at(f, at), NULL, 0);
        int32_t *path = malloc(sizeof *path * (size_t)(len > 0 ? len : 1)), j = at, q = len - 1;
        forest_path(f, forest_id_at(f, at), path, len);
        for (; q >= 0 && j >= 0 && ok; q--, j = forest_node_at(f, j)->parent)
            if (path[q] != forest_node_at(f, j)->token)
                ok = t_forest_fail(why, cap, "forest_path of %d differs at %d", at, q);
        if (ok && (j != -1 || q != -1))
            ok = t_forest_fail(why, cap, "forest_path of %d: length %d", at, len);
        free(path);
    }
    st_err err = {0};
    if (ok && forest_check(f, &err) != ST_OK) ok = t_forest_fail(why, cap, "forest_check: %s", err.msg);
    free(owner), free(seen);
    return ok;
}

#endif
