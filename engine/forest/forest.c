/* forest.c - node storage (one growable array, free list, generations), building,
 * pruning, queries and the invariant checker. */
#include "forest/forest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct forest {
    forest_node *nodes;   /* (cap) */
    int32_t cap;
    int32_t free_head;    /* free list through next_sibling, -1 when empty */
    int32_t n_live;
    int32_t n_pending;
    int32_t first_root;   /* roots are a sibling list too, in creation order */
    int32_t last_root;
    kv_alloc *kv;
    kv_alloc *rs;         /* recurrent state cells; NULL until a step asks (rstate.h) */
    int32_t top_k;
    int32_t *topk_ids;    /* (cap, top_k) */
    float *topk_lp;       /* (cap, top_k) */
    uint8_t *topk_n;      /* (cap) how many stored */
};

forest *forest_init(int32_t n_slots, int32_t top_k) {
    if (top_k < 0 || top_k > 255) return NULL;
    forest *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->kv = kv_alloc_init(n_slots);
    if (!f->kv) {
        free(f);
        return NULL;
    }
    f->free_head = f->first_root = f->last_root = -1;
    f->top_k = top_k;
    return f;
}

void forest_free(forest *f) {
    if (!f) return;
    kv_alloc_free(f->kv);
    kv_alloc_free(f->rs);
    free(f->nodes);
    free(f->topk_ids);
    free(f->topk_lp);
    free(f->topk_n);
    free(f);
}

static bool grow(forest *f, int32_t need) {
    if (need <= f->cap) return true;
    int32_t cap = f->cap ? f->cap : 64;
    while (cap < need) {
        if (cap > INT32_MAX / 2) return false;
        cap *= 2;
    }
    forest_node *n = realloc(f->nodes, sizeof *n * (size_t)cap);
    if (!n) return false;
    f->nodes = n;
    uint8_t *tn = realloc(f->topk_n, (size_t)cap);
    if (!tn) return false;
    f->topk_n = tn;
    memset(tn + f->cap, 0, (size_t)(cap - f->cap));
    if (f->top_k) {
        int32_t *ti = realloc(f->topk_ids, sizeof *ti * (size_t)cap * f->top_k);
        if (!ti) return false;
        f->topk_ids = ti;
        float *tl = realloc(f->topk_lp, sizeof *tl * (size_t)cap * f->top_k);
        if (!tl) return false;
        f->topk_lp = tl;
    }
    for (int32_t i = f->cap; i < cap; i++)
        f->nodes[i] = (forest_node){.state = FOREST_FREE, .next_sibling = i + 1 < cap ? i + 1 : -1,
                                    .parent = -1, .first_child = -1, .last_child = -1,
                                    .kv_slot = -1, .rs_cell = -1};
    /* the new indices go in front of the free list */
    f->nodes[cap - 1].next_sibling = f->free_head;
    f->free_head = f->cap;
    f->cap = cap;
    return true;
}

static forest_id make_id(const forest *f, int32_t idx) {
    return ((uint64_t)f->nodes[idx].gen << 32) | (uint32_t)idx;
}

const forest_node *forest_get(const forest *f, forest_id id) {
    if (id == FOREST_NONE) return NULL;
    int32_t idx = forest_index(id);
    if (idx < 0 || idx >= f->cap) return NULL;
    const forest_node *n = &f->nodes[idx];
    if (n->state == FOREST_FREE || n->gen != (uint32_t)(id >> 32)) return NULL;
    return n;
}

forest_id forest_id_at(const forest *f, int32_t idx) {
    if (idx < 0 || idx >= f->cap || f->nodes[idx].state == FOREST_FREE) return FOREST_NONE;
    return make_id(f, idx);
}

const forest_node *forest_node_at(const forest *f, int32_t idx) {
    ASSERT(idx >= 0 && idx < f->cap);
    return &f->nodes[idx];
}

int32_t forest_capacity(const forest *f) { return f->cap; }
int32_t forest_n_live(const forest *f) { return f->n_live; }
int32_t forest_n_pending(const forest *f) { return f->n_pending; }
kv_alloc *forest_kv(forest *f) { return f->kv; }

kv_alloc *forest_rstate(forest *f, int32_t n_cells) {
    if (n_cells == 0 || (f->rs && kv_alloc_n_slots(f->rs) == n_cells)) return f->rs;
    if (f->rs && kv_alloc_used(f->rs) > 0) return NULL;
    kv_alloc_free(f->rs);
    f->rs = kv_alloc_init(n_cells);
    return f->rs;
}

int32_t forest_rstate_used(const forest *f) { return f->rs ? kv_alloc_used(f->rs) : 0; }

void forest_set_rs_cell(forest *f, int32_t idx, int32_t cell) { f->nodes[idx].rs_cell = cell; }
const kv_alloc *forest_kv_const(const forest *f) { return f->kv; }
int32_t forest_top_k(const forest *f) { return f->top_k; }

/* Links a fresh pending node; the caller has grown the array. */
static int32_t new_node(forest *f, int32_t parent, int32_t token, float lp, int32_t depth) {
    int32_t i = f->free_head;
    ASSERT(i >= 0);
    forest_node *n = &f->nodes[i];
    f->free_head = n->next_sibling;
    uint32_t gen = n->gen;
    *n = (forest_node){.token = token, .parent = parent, .first_child = -1, .last_child = -1,
                       .next_sibling = -1, .depth = depth, .kv_slot = -1, .rs_cell = -1,
                       .logprob = lp, .gen = gen,
                       .state = FOREST_PENDING};
    f->topk_n[i] = 0;
    if (parent >= 0) {
        /* append at the end of the parent's child list, so children keep creation order */
        forest_node *p = &f->nodes[parent];
        if (p->last_child >= 0) f->nodes[p->last_child].next_sibling = i;
        else p->first_child = i;
        p->last_child = i;
    } else {
        if (f->last_root >= 0) f->nodes[f->last_root].next_sibling = i;
        else f->first_root = i;
        f->last_root = i;
    }
    f->n_live++;
    f->n_pending++;
    return i;
}

static st_code add_chain(forest *f, int32_t parent, const int32_t *tokens, const float *lps,
                         int32_t n, int32_t depth0, forest_id *last, st_err *err) {
    if (n < 1) return st_set(err, ST_ERR_ARG, "a chain needs at least one token");
    if (depth0 < 0 || depth0 > INT32_MAX - n) return st_set(err, ST_ERR_ARG, "bad position %d", depth0);
    if (f->n_live > INT32_MAX - n || !grow(f, f->n_live + n))
        return st_set(err, ST_ERR_NOMEM, "out of memory growing the forest");
    int32_t p = parent;
    for (int32_t i = 0; i < n; i++)
        p = new_node(f, p, tokens[i], lps ? lps[i] : NAN, depth0 + i);
    if (last) *last = make_id(f, p);
    return ST_OK;
}

st_code forest_add_root(forest *f, const int32_t *tokens, const float *logprobs, int32_t n,
                        int32_t pos0, forest_id *last, st_err *err) {
    return add_chain(f, -1, tokens, logprobs, n, pos0, last, err);
}

st_code forest_append(forest *f, forest_id parent, const int32_t *tokens, const float *logprobs,
                      int32_t n, forest_id *last, st_err *err) {
    const forest_node *p = forest_get(f, parent);
    if (!p) return st_set(err, ST_ERR_ARG, "the parent node no longer exists");
    return add_chain(f, forest_index(parent), tokens, logprobs, n, p->depth + 1, last, err);
}

/* Frees idx and its subtree (iteratively: subtrees can be deep chains). */
static void free_subtree(forest *f, int32_t root) {
    int32_t cur = root;
    while (cur >= 0) {
        forest_node *n = &f->nodes[cur];
        if (n->first_child >= 0 && n->state != FOREST_FREE) {
            /* descend first; mark this node by detaching its children list as we go */
            int32_t c = n->first_child;
            n->first_child = f->nodes[c].next_sibling; /* pop the child */
            f->nodes[c].next_sibling = -1;
            f->nodes[c].parent = cur;
            cur = c;
            continue;
        }
        int32_t up = cur == root ? -1 : n->parent;
        if (n->kv_slot >= 0) kv_alloc_release(f->kv, n->kv_slot);
        if (n->rs_cell >= 0) kv_alloc_release(f->rs, n->rs_cell);
        if (n->state == FOREST_PENDING) f->n_pending--;
        f->n_live--;
        *n = (forest_node){.state = FOREST_FREE, .gen = n->gen + 1, .parent = -1,
                           .first_child = -1, .last_child = -1, .kv_slot = -1,
                           .rs_cell = -1, .next_sibling = f->free_head};
        f->free_head = cur;
        cur = up;
    }
}

/* Takes idx out of its parent's child list (or the root list); its subtree stays. */
static void unlink_node(forest *f, int32_t idx) {
    int32_t parent = f->nodes[idx].parent;
    int32_t *link = parent >= 0 ? &f->nodes[parent].first_child : &f->first_root;
    int32_t prev = -1;
    while (*link != idx) {
        prev = *link;
        link = &f->nodes[*link].next_sibling;
    }
    *link = f->nodes[idx].next_sibling;
    int32_t *last = parent >= 0 ? &f->nodes[parent].last_child : &f->last_root;
    if (*last == idx) *last = prev;
    f->nodes[idx].next_sibling = -1;
}

st_code forest_prune(forest *f, forest_id id, st_err *err) {
    if (!forest_get(f, id)) return st_set(err, ST_ERR_ARG, "the node to prune no longer exists");
    unlink_node(f, forest_index(id));
    free_subtree(f, forest_index(id));
    return ST_OK;
}

int32_t forest_sibling_pos(const forest *f, forest_id id) {
    const forest_node *n = forest_get(f, id);
    if (!n) return -1;
    int32_t pos = 0, idx = forest_index(id);
    for (int32_t c = n->parent >= 0 ? f->nodes[n->parent].first_child : f->first_root; c != idx;
         c = f->nodes[c].next_sibling)
        pos++;
    return pos;
}

bool forest_move_to(forest *f, forest_id id, int32_t pos) {
    if (!forest_get(f, id) || pos < 0) return false;
    int32_t idx = forest_index(id), parent = f->nodes[idx].parent;
    unlink_node(f, idx);
    int32_t *link = parent >= 0 ? &f->nodes[parent].first_child : &f->first_root, prev = -1;
    for (; *link >= 0 && pos > 0; pos--) prev = *link, link = &f->nodes[*link].next_sibling;
    f->nodes[idx].next_sibling = *link;
    *link = idx;
    int32_t *last = parent >= 0 ? &f->nodes[parent].last_child : &f->last_root;
    if (*last == prev) *last = idx;
    return true;
}

bool forest_set_flags(forest *f, forest_id id, uint8_t set, uint8_t clear) {
    if (!forest_get(f, id)) return false;
    forest_node *n = &f->nodes[forest_index(id)];
    n->flags = (uint8_t)((n->flags & ~clear) | set);
    return true;
}

bool forest_set_tag(forest *f, forest_id id, uint16_t tag) {
    if (!forest_get(f, id)) return false;
    f->nodes[forest_index(id)].tag = tag;
    return true;
}

bool forest_set_logprob(forest *f, forest_id id, float logprob) {
    if (!forest_get(f, id)) return false;
    f->nodes[forest_index(id)].logprob = logprob;
    return true;
}

int32_t forest_path(const forest *f, forest_id id, int32_t *out, int32_t cap) {
    const forest_node *n = forest_get(f, id);
    if (!n) return -1;
    int32_t len = 0;
    for (int32_t i = forest_index(id); i >= 0; i = f->nodes[i].parent) len++;
    int32_t k = len;
    for (int32_t i = forest_index(id); i >= 0; i = f->nodes[i].parent) {
        k--;
        if (k < cap) out[k] = f->nodes[i].token;
    }
    return len;
}

int32_t forest_dfs_first(const forest *f) { return f->first_root; }

int32_t forest_dfs_next(const forest *f, int32_t i) {
    if (f->nodes[i].first_child >= 0) return f->nodes[i].first_child;
    while (i >= 0 && f->nodes[i].next_sibling < 0) i = f->nodes[i].parent;
    return i >= 0 ? f->nodes[i].next_sibling : -1;
}

#define FOREST_DFS(f, idx, body) \
    for (int32_t idx = forest_dfs_first(f); idx >= 0; idx = forest_dfs_next(f, idx)) { body; }

int32_t forest_leaves(const forest *f, forest_id *out, int32_t cap) {
    int32_t n = 0;
    FOREST_DFS(f, i, {
        if (f->nodes[i].first_child < 0) {
            if (n < cap) out[n] = make_id(f, i);
            n++;
        }
    });
    return n;
}

int32_t forest_roots(const forest *f, forest_id *out, int32_t cap) {
    int32_t n = 0;
    for (int32_t i = f->first_root; i >= 0; i = f->nodes[i].next_sibling) {
        if (n < cap) out[n] = make_id(f, i);
        n++;
    }
    return n;
}

forest_id forest_common_ancestor(const forest *f, forest_id a, forest_id b) {
    const forest_node *na = forest_get(f, a), *nb = forest_get(f, b);
    if (!na || !nb) return FOREST_NONE;
    int32_t x = forest_index(a), y = forest_index(b);
    /* depths may carry a tree offset, but both nodes of one tree share it */
    while (x >= 0 && y >= 0 && x != y) {
        if (f->nodes[x].depth >= f->nodes[y].depth) x = f->nodes[x].parent;
        else y = f->nodes[y].parent;
    }
    return x >= 0 && x == y ? make_id(f, x) : FOREST_NONE;
}

int32_t forest_n_children(const forest *f, forest_id id) {
    const forest_node *n = forest_get(f, id);
    if (!n) return 0;
    int32_t k = 0;
    for (int32_t c = n->first_child; c >= 0; c = f->nodes[c].next_sibling) k++;
    return k;
}

void forest_store_topk(forest *f, int32_t idx, const int32_t *ids, const float *lps, int32_t k) {
    if (!f->top_k) return;
    if (k > f->top_k) k = f->top_k;
    memcpy(f->topk_ids + (size_t)idx * f->top_k, ids, sizeof *ids * (size_t)k);
    memcpy(f->topk_lp + (size_t)idx * f->top_k, lps, sizeof *lps * (size_t)k);
    f->topk_n[idx] = (uint8_t)k;
}

int32_t forest_topk(const forest *f, forest_id id, int32_t *ids, float *lps, int32_t cap) {
    if (!forest_get(f, id) || !f->top_k) return 0;
    int32_t idx = forest_index(id), k = f->topk_n[idx];
    for (int32_t i = 0; i < k && i < cap; i++) {
        if (ids) ids[i] = f->topk_ids[(size_t)idx * f->top_k + i];
        if (lps) lps[i] = f->topk_lp[(size_t)idx * f->top_k + i];
    }
    return k;
}

void forest_mark_computed(forest *f, int32_t idx, int32_t slot) {
    forest_node *n = &f->nodes[idx];
    ASSERT(n->state == FOREST_PENDING);
    n->state = FOREST_COMPUTED;
    n->kv_slot = slot;
    n->flags &= (uint8_t)~(FOREST_WANT_LOGITS | FOREST_NO_LOGITS);
    f->n_pending--;
}

void forest_move_slot(forest *f, int32_t idx, int32_t new_slot) {
    ASSERT(f->nodes[idx].state == FOREST_COMPUTED);
    f->nodes[idx].kv_slot = new_slot;
}

/* Node i's state cell is in use and held by it alone (owned marks the cells seen). */
static st_code check_rs_cell(const forest *f, int32_t i, uint8_t *owned, int32_t *n, st_err *err) {
    const int32_t c = f->nodes[i].rs_cell;
    if (!f->rs || c >= kv_alloc_n_slots(f->rs) || !kv_alloc_is_used(f->rs, c) || owned[c])
        return st_set(err, ST_ERR_FORMAT, "node %d: state cell %d is invalid, free or held twice",
                      i, c);
    owned[c] = 1;
    (*n)++;
    return ST_OK;
}

st_code forest_check(const forest *f, st_err *err) {
    int32_t n_slots = kv_alloc_n_slots(f->kv);
    uint8_t *owned = calloc((size_t)n_slots, 1);
    uint8_t *rs_owned = calloc(f->rs ? (size_t)kv_alloc_n_slots(f->rs) : 1, 1);
    if (!owned || !rs_owned) {
        free(owned), free(rs_owned);
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    int32_t live = 0, pending = 0, n_owned = 0, n_rs = 0;
    st_code rc = ST_OK;
    FOREST_DFS(f, i, {
        const forest_node *n = &f->nodes[i];
        live++;
        if (n->state == FOREST_PENDING) pending++;
        if (n->state != FOREST_PENDING && n->state != FOREST_COMPUTED) {
            rc = st_set(err, ST_ERR_FORMAT, "node %d is linked but free", i);
            break;
        }
        if (n->parent >= 0) {
            const forest_node *p = &f->nodes[n->parent];
            if (p->state == FOREST_FREE || n->depth != p->depth + 1) {
                rc = st_set(err, ST_ERR_FORMAT, "node %d: depth %d, parent %d depth %d", i,
                            n->depth, n->parent, p->depth);
                break;
            }
            if (n->state == FOREST_COMPUTED && p->state != FOREST_COMPUTED) {
                rc = st_set(err, ST_ERR_FORMAT, "node %d is computed under pending parent %d", i,
                            n->parent);
                break;
            }
        }
        int32_t last = -1;
        for (int32_t c = n->first_child; c >= 0; last = c, c = f->nodes[c].next_sibling)
            if (f->nodes[c].parent != i) {
                rc = st_set(err, ST_ERR_FORMAT, "node %d lists child %d whose parent is %d", i, c,
                            f->nodes[c].parent);
                break;
            }
        if (!rc && last != n->last_child)
            rc = st_set(err, ST_ERR_FORMAT, "node %d: last child %d, recorded %d", i, last,
                        n->last_child);
        if (rc) break;
        if (n->state == FOREST_COMPUTED) {
            int32_t s = n->kv_slot;
            if (s < 0 || s >= n_slots || !kv_alloc_is_used(f->kv, s) || owned[s]) {
                rc = st_set(err, ST_ERR_FORMAT, "node %d: slot %d is invalid, free or owned twice",
                            i, s);
                break;
            }
            owned[s] = 1;
            n_owned++;
        } else if (n->kv_slot != -1 || n->rs_cell != -1) {
            rc = st_set(err, ST_ERR_FORMAT, "pending node %d owns slot %d, state cell %d", i,
                        n->kv_slot, n->rs_cell);
            break;
        }
        if (n->rs_cell >= 0 && (rc = check_rs_cell(f, i, rs_owned, &n_rs, err))) break;
    });
    if (!rc && (live != f->n_live || pending != f->n_pending))
        rc = st_set(err, ST_ERR_FORMAT, "counts: %d live (recorded %d), %d pending (recorded %d)",
                    live, f->n_live, pending, f->n_pending);
    if (!rc && n_owned != kv_alloc_used(f->kv))
        rc = st_set(err, ST_ERR_FORMAT, "%d slots owned by nodes but %d marked used (leak)",
                    n_owned, kv_alloc_used(f->kv));
    if (!rc && n_rs != forest_rstate_used(f))
        rc = st_set(err, ST_ERR_FORMAT, "%d state cells held by nodes but %d marked used (leak)",
                    n_rs, forest_rstate_used(f));
    free(owned);
    free(rs_owned);
    return rc;
}
