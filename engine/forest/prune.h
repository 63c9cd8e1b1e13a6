/* prune.h - pruning policies over the forest: keep the n best leaves, drop finished
 * branches, cap the KV cache's use. Each removes whole branches and reports what it freed.
 *
 * A leaf's score is computed over the scored nodes of its root-to-leaf path (those whose
 * logprob is not NAN: generated tokens; prompt text is unscored): PRUNE_SCORE_SUM is
 * their cumulative log-probability, PRUNE_SCORE_MEAN that divided by their count. A leaf
 * with no scored node scores -infinity.
 *
 * Removing a leaf removes its branch: the leaf and every ancestor that no other kept
 * leaf needs. With keep_prompts (the default) unscored nodes are never removed, nor
 * anything above them, and an unscored leaf is never a candidate: the prompt of a tree
 * stays even when all its completions go. Without it a tree whose leaves are all
 * removed disappears.
 *
 * Every policy works on the forest as it is (no step plan may be active), leaves its
 * invariants intact (forest_check) and frees the removed nodes' KV slots. Not here: what a
 * strategy does with its own branch lists (beam prunes its losers itself). */
#ifndef MD_PRUNE_H
#define MD_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"

enum { PRUNE_SCORE_SUM = 0, PRUNE_SCORE_MEAN = 1 };

typedef struct prune_params {
    int32_t score;      /* PRUNE_SCORE_* */
    bool keep_prompts;  /* never remove unscored nodes (default true) */
} prune_params;

/* PRUNE_SCORE_SUM, keep_prompts true. */
prune_params prune_default_params(void);

/* What a policy removed. */
typedef struct prune_stats {
    int32_t leaves;  /* candidate leaves removed (not counting leaves that appear on the way) */
    int32_t nodes;   /* nodes removed, pending ones included */
    int32_t slots;   /* KV slots freed (= computed nodes removed) */
} prune_stats;

/* The score of live node id's path (see above); NAN for a stale id. */
double prune_score(const forest *f, forest_id id, int32_t kind);

/* Keeps the n_keep best candidate leaves by score (ties: the earlier in DFS order) and
 * removes the branches of the others. n_keep >= 0. *st (may be NULL) gets what was
 * freed. ST_OK; ST_ERR_ARG (n_keep < 0, bad params), ST_ERR_NOMEM (nothing removed). */
st_code prune_keep_top(forest *f, int32_t n_keep, const prune_params *p, prune_stats *st,
                       st_err *err);

/* Removes the branches of the leaves flagged FOREST_FINISHED. */
st_code prune_finished(forest *f, const prune_params *p, prune_stats *st, st_err *err);

/* Removes the branch of the lowest-scoring candidate leaf (ties: the later in DFS order),
 * one leaf at a time, until at most cap KV slots are used. The candidates are the leaves
 * present at the call (a removal never leaves an unprotected node childless: it goes with
 * the branch). ST_OK (also when nothing had to go); ST_NO_KV_SLOT when removing every
 * candidate would not reach the cap, with the forest unchanged; ST_ERR_ARG (cap < 0),
 * ST_ERR_NOMEM. */
st_code prune_kv_cap(forest *f, int32_t cap, const prune_params *p, prune_stats *st,
                     st_err *err);

#endif
