/* forest.h - the token forest: every node is one token; a root-to-node path is a sequence.
 *
 * A node's RoPE position is its depth (a root starts at its tree's offset, usually 0),
 * and once computed it owns exactly one KV-cache slot, holding its K/V rotated by that
 * position. Nodes are "pending" from the moment they are added until a step (step.h)
 * computes them. Many roots make a forest; a shared context is simply a chain that several
 * subtrees hang under, stored and computed once.
 *
 * Node ids are stable handles: an index into one growable array plus a generation count,
 * so that an id kept by a caller (the UI) after its node was pruned is detected as stale
 * (forest_get returns NULL) and never dereferenced. Index slots are recycled through a
 * free list. The forest owns the KV slot allocator (kv.h) but not the K/V data, and
 * likewise the allocator of recurrent state cells (rstate.h) on models that have them.
 *
 * Not here: choosing tokens (sample.h, strategies), running the model (step.h). */
#ifndef MD_FOREST_H
#define MD_FOREST_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "forest/kv.h"

typedef uint64_t forest_id; /* (generation << 32) | index */
#define FOREST_NONE UINT64_MAX

enum { FOREST_FREE = 0, FOREST_PENDING = 1, FOREST_COMPUTED = 2 };

enum {
    FOREST_FINISHED = 1 << 0,   /* a strategy will not extend this leaf (EOS, budget) */
    FOREST_BOOKMARK = 1 << 1,   /* marked by the user */
    FOREST_WANT_LOGITS = 1 << 2,/* the next step returns this node's logits even if it is
                                   not a leaf (verification), or if it is already computed
                                   (re-scoring: it runs again in its own slot) */
    FOREST_NO_LOGITS = 1 << 3,  /* the next step skips this pending leaf's logits */
    FOREST_DIMMED = 1 << 4,     /* a search's loser, kept to be shown until it is pruned */
    FOREST_OWN_LINE = 1 << 5,   /* the user pruned a sibling of it: a view keeps it apart
                                   from its parent's text (lines never merge under the cursor) */
    FOREST_REPLAY = 1 << 6,     /* a computed node the next step runs again without logits,
                                   to rebuild a recurrent state below it (rstate.h) */
};

typedef struct forest_node {
    int32_t token;
    int32_t parent;       /* index, -1 for a root */
    int32_t first_child;  /* index, -1 for none; children are a singly linked list */
    int32_t last_child;   /* index, -1 for none: a new child is linked in O(1) */
    int32_t next_sibling; /* index, -1 for none */
    int32_t depth;        /* RoPE position: parent's + 1; a root's is its tree offset */
    int32_t kv_slot;      /* -1 while pending */
    int32_t rs_cell;      /* its recurrent state cell (rstate.h), -1: none kept */
    float logprob;        /* log p(token | ancestors), NAN when not scored (prompt text) */
    uint32_t gen;         /* generation of this index */
    uint8_t state;        /* FOREST_FREE / PENDING / COMPUTED */
    uint8_t flags;        /* FOREST_* flags */
    uint16_t tag;         /* free for callers (strategy / branch number) */
} forest_node;

typedef struct forest forest;

/* A forest over a KV cache of n_slots slots that keeps up to top_k alternatives per
 * computed node (0: none). NULL when out of memory. */
forest *forest_init(int32_t n_slots, int32_t top_k);
void forest_free(forest *f); /* NULL is a no-op */

/* ---- ids and reading ---- */
/* The node of a live id, or NULL for FOREST_NONE, a stale or an out-of-range id. The
 * pointer is valid until the next call that adds nodes (the array may move). */
const forest_node *forest_get(const forest *f, forest_id id);
/* The id of the live node at index idx, or FOREST_NONE. */
forest_id forest_id_at(const forest *f, int32_t idx);
static inline int32_t forest_index(forest_id id) { return (int32_t)(id & 0xffffffffu); }
/* Raw node array access for steps and views: index < forest_capacity; check state. */
const forest_node *forest_node_at(const forest *f, int32_t idx);
int32_t forest_capacity(const forest *f);
/* Preorder DFS over all live nodes, roots in creation order, children in creation order:
 * for (i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)). Parents come before
 * their children. */
int32_t forest_dfs_first(const forest *f);
int32_t forest_dfs_next(const forest *f, int32_t idx);
int32_t forest_n_live(const forest *f);
int32_t forest_n_pending(const forest *f);
kv_alloc *forest_kv(forest *f);
/* The recurrent state cells' allocator, made for n_cells cells on the first call (a
 * later call with another count remakes it while no node holds a cell); NULL when out
 * of memory or when n_cells differs from a busy allocator's. n_cells 0: the current one
 * (NULL when there is none). */
kv_alloc *forest_rstate(forest *f, int32_t n_cells);
/* The cells in use (0 when the forest has no allocator). */
int32_t forest_rstate_used(const forest *f);
const kv_alloc *forest_kv_const(const forest *f);
int32_t forest_top_k(const forest *f);

/* ---- building ---- */
/* Adds a root chain of n >= 1 pending tokens at positions pos0, pos0 + 1, ...; *last (when
 * not NULL) receives the id of its last node. ST_ERR_ARG for n < 1 or pos0 < 0,
 * ST_ERR_NOMEM. logprobs may be NULL (unscored). */
st_code forest_add_root(forest *f, const int32_t *tokens, const float *logprobs, int32_t n,
                        int32_t pos0, forest_id *last, st_err *err);
/* Appends a chain of n >= 1 pending tokens under parent (a new child of it: a fork when
 * the parent already has children). ST_ERR_ARG for a stale parent. */
st_code forest_append(forest *f, forest_id parent, const int32_t *tokens,
                      const float *logprobs, int32_t n, forest_id *last, st_err *err);
/* Removes node and its whole subtree, freeing their KV slots. ST_ERR_ARG if stale. */
st_code forest_prune(forest *f, forest_id node, st_err *err);
/* The place of a live node among its siblings (0: first; roots among the roots), -1
 * for a stale id. */
int32_t forest_sibling_pos(const forest *f, forest_id id);
/* Moves a live node (with its subtree) to place pos among its siblings (past the end:
 * last), so that a branch put back takes its old place; false for a stale id or pos < 0. */
bool forest_move_to(forest *f, forest_id id, int32_t pos);
/* Sets / clears flags of a live node; returns false for a stale id. */
bool forest_set_flags(forest *f, forest_id node, uint8_t set, uint8_t clear);
bool forest_set_tag(forest *f, forest_id node, uint16_t tag);
/* Sets the log-probability of a live node's token (scored after it was added, as
 * verified drafts are); false for a stale id. */
bool forest_set_logprob(forest *f, forest_id node, float logprob);

/* ---- queries ---- */
/* Tokens of the path root..node (inclusive) into out (cap entries); returns the path
 * length (may exceed cap: then only the first cap tokens are written), or -1 if stale. */
int32_t forest_path(const forest *f, forest_id node, int32_t *out, int32_t cap);
/* Ids of live leaves (nodes without children) in DFS order; returns how many there are
 * (writing at most cap). */
int32_t forest_leaves(const forest *f, forest_id *out, int32_t cap);
/* Ids of the roots, in creation order; returns how many (writing at most cap). */
int32_t forest_roots(const forest *f, forest_id *out, int32_t cap);
/* Deepest common ancestor of two live nodes (a node is its own ancestor), or FOREST_NONE
 * when they are in different trees. */
forest_id forest_common_ancestor(const forest *f, forest_id a, forest_id b);
int32_t forest_n_children(const forest *f, forest_id node);

/* ---- top-k alternatives (the next-token distribution after a computed node) ---- */
/* Stores up to top_k (id, logprob) pairs for node idx (called by the step). */
void forest_store_topk(forest *f, int32_t idx, const int32_t *ids, const float *logprobs,
                       int32_t k);
/* Copies them out; returns how many are stored (0 when none). */
int32_t forest_topk(const forest *f, forest_id node, int32_t *ids, float *logprobs, int32_t cap);

/* ---- invariants ---- */
/* Checks every structural invariant: parent/child links agree, depth(child) =
 * depth(parent) + 1, a computed node has a computed or no parent... (a pending node's
 * children are pending), every computed node owns exactly one used slot, no slot is owned
 * twice, the allocator's used count equals the number of owned slots (and of recurrent
 * state cells, which only computed nodes hold). ST_OK or
 * ST_ERR_FORMAT with the first violation in err. */
st_code forest_check(const forest *f, st_err *err);

/* For step.c: marks node idx computed in slot `slot` / rolls it back to pending. */
void forest_mark_computed(forest *f, int32_t idx, int32_t slot);
/* For rstate.c: sets the recurrent state cell node idx holds (-1: none); the caller takes
 * and releases cells in forest_rstate. */
void forest_set_rs_cell(forest *f, int32_t idx, int32_t cell);
/* For compaction: moves a computed node's slot number (the caller moved the K/V). */
void forest_move_slot(forest *f, int32_t idx, int32_t new_slot);

#endif
