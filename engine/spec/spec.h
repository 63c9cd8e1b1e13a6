/* spec.h - exact acceleration of greedy decoding and of sampling: drafts verified as a
 * tree in one step.
 *
 * Pack / unpack. M candidate continuations (drafts) of the current tip are deduplicated
 * into a prefix tree (a shared prefix is one node), packed under the tip as pending forest
 * nodes that all return logits, and computed in one forest step with the rest of the
 * forest. Since every node gets exactly the logits of decoding its root-to-node path alone
 * (step.h), the greedy token after "tip + candidate[0..j)" is read from that node's logits:
 * unpacking maps each candidate back to its predictions through the tree's index map. The
 * longest candidate prefix that the model's own greedy choices confirm is accepted, the
 * rest pruned, and the model's next token after it comes free: every step yields at least
 * one token, and the tokens are exactly those of plain greedy decoding.
 *
 * The driver (spec_*) runs that loop over a forest: drafts from prompt lookup and from an
 * n-gram pool of the text so far (ngram.h), optionally lookahead decoding's Jacobi window
 * in the same step (lookahead.h), which feeds the pool. It emits tokens; the caller stops
 * at end-of-generation or its budget (tokens after either are simply not used).
 *
 * Sampling (spec_params.samp.temp > 0): exact speculative sampling (spec_sample.h) with
 * the drafts as deterministic (one-hot) proposals. The walk down the tree draws each
 * token with the sampler, as plain sampling does, and goes on while the token is a child:
 * the tokens are exactly those of plain sampling with the same parameters and seed
 * (sampler_sample_hist over the path's history), several per step when the drafts are
 * likely. */
#ifndef MD_SPEC_H
#define MD_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/sample.h"
#include "spec/lookahead.h"
#include "spec/ngram.h"
#include "spec/spec_policy.h"
#include "forest/step.h"

/* ---- the draft tree: pack / unpack ---- */
typedef struct spec_tree {
    int32_t n_nodes;
    int32_t *tok;        /* (n_nodes) */
    int32_t *parent;     /* (n_nodes) tree parent, -1 for a child of the tip; parent < node */
    forest_id *fid;      /* (n_nodes) forest node, after spec_tree_pack */
    int32_t n_cand;
    int32_t *cand_off;   /* (n_cand + 1) */
    int32_t *cand_node;  /* (cand_off[n_cand]) tree node of each candidate token: the index map */
    int32_t cap_nodes, cap_cand, cap_map;
} spec_tree;

void spec_tree_init(spec_tree *t);
void spec_tree_free(spec_tree *t);  /* NULL is a no-op */
void spec_tree_clear(spec_tree *t); /* no candidates; keeps the memory */
/* Adds a candidate of len >= 1 tokens, sharing the nodes of its longest prefix already
 * in the tree. ST_ERR_ARG (len < 1), ST_ERR_NOMEM (tree unchanged). */
st_code spec_tree_add(spec_tree *t, const int32_t *cand, int32_t len, st_err *err);
/* Adds the tree's nodes under tip as pending nodes, all flagged to return logits, and
 * flags the tip too (its logits give the first greedy token). fid[] receives the nodes.
 * ST_ERR_ARG (stale tip), ST_ERR_NOMEM (the forest unchanged). */
st_code spec_tree_pack(spec_tree *t, forest *f, forest_id tip, st_err *err);
/* After the step that computed the packed tree: pred[j] (j = 0..len) is the greedy token
 * after tip + candidate c's first j tokens. Returns len + 1, or -1 when a needed row was
 * not scored (c out of range, the step did not run). */
int32_t spec_tree_unpack(const spec_tree *t, const step_plan *p, forest_id tip, int32_t c,
                         int32_t *pred);
/* Accepts the longest path of the tree the greedy choices confirm: acc[0..*n_acc) gets
 * its tokens followed by the greedy token after it (so *n_acc >= 1); *last gets the last
 * accepted node (tip when none). Every other tree node is pruned (its KV slots freed); the
 * accepted ones stay computed, as if decoded one by one. acc needs n_nodes + 1 entries.
 * ST_ERR_ARG when the tip's logits are missing. */
st_code spec_tree_accept(spec_tree *t, forest *f, const step_plan *p, forest_id tip,
                         int32_t *acc, int32_t *n_acc, forest_id *last, st_err *err);

/* ---- the driver ---- */
typedef struct spec_params {
    int32_t draft_len;  /* most tokens per draft (prompt lookup and pool); 0: no drafts */
    int32_t n_drafts;   /* most drafts per step */
    int32_t max_rows;   /* most draft-tree nodes per step (drafts are cut to fit) */
    int32_t key_min, key_max; /* prompt lookup key lengths */
    int32_t pool_n;     /* n-gram size of the pool of the text so far (0: no pool) */
    bool adaptive;      /* only draft tokens worth their row (spec_policy.h); false:
                           every draft whole, within max_rows */
    double row_cost;    /* adaptive: one more row's cost relative to a one-row step;
                           <= 0: measured from the steps' timings */
    lookahead_params la;/* la.w = 0: no lookahead branch */
    bool la_adaptive;   /* the window runs only while its n-grams pay for its rows (and
                           now and then regardless, to keep learning); false: always */
    bool logprobs;      /* give accepted and new tokens their log-probability (a
                           log-sum-exp over the vocabulary per token: for views) */
    sample_params samp; /* temp <= 0 (the default): greedy, as plain greedy decoding;
                           > 0: exact speculative sampling from this target (its seed
                           seeds the driver's RNG) */
} spec_params;

spec_params spec_default_params(void);

typedef struct spec_stats {
    int64_t steps;      /* forest steps run */
    int64_t emitted;    /* tokens emitted (accepted drafts + one per step) */
    int64_t accepted;   /* draft tokens accepted */
    int64_t draft_rows; /* draft-tree rows computed */
    int64_t la_rows;    /* lookahead window rows computed */
    int64_t la_hits;    /* steps whose accepted draft came from the lookahead pool */
} spec_stats;

typedef struct spec spec;

/* A driver for greedy decoding (or sampling, sp->samp) after `tip`, a pending or computed node of f (usually the
 * prompt's last token, still pending: the first step then prefills the prompt with the
 * first drafts). The history for prompt lookup is tip's root-to-tip path. NULL with err
 * set on bad parameters (ST_ERR_ARG) or no memory. */
spec *spec_init(const spec_params *sp, forest *f, forest_id tip, st_err *err);
void spec_free(spec *s); /* NULL is a no-op */

/* One step: drafts, one forest step (step_forest on p), acceptance. out[0..*n_out) get
 * the emitted tokens (at most spec_max_emit(s)); the last one is the new tip, pending
 * (its logits come with the next step). ST_NO_KV_SLOT: the cache cannot hold even the
 * tip (drafts are cut to the free slots first) - nothing changed. Other errors from the
 * step (the forest is left without this step's drafts). */
st_code spec_step(spec *s, forest *f, step_plan *p, model_ctx *c, int32_t *out, int32_t *n_out,
                  st_err *err);
int32_t spec_max_emit(const spec *s);
forest_id spec_tip(const spec *s);
const spec_stats *spec_get_stats(const spec *s);
/* Optional: another draft source (a small draft model, say), asked every step before
 * prompt lookup and the pool: it writes up to max drafts of up to width tokens each
 * (draft c at out + c * width, lens[c] tokens) continuing hist[0..n_hist) - whose last
 * token is the tip - and returns how many. Its drafts go through the same policy, with
 * their own acceptance estimate. fn NULL: none. */
#define SPEC_EXT_MAX 4
typedef int32_t (*spec_draft_fn)(void *ud, const int32_t *hist, int32_t n_hist, int32_t *out,
                                 int32_t width, int32_t *lens, int32_t max);
void spec_set_draft_source(spec *s, spec_draft_fn fn, void *ud);
/* Optional: called after each step's forward pass and before acceptance prunes anything,
 * with the forest holding this step's drafts and window, computed, and p its plan (for
 * views and `plan --lookahead`). fn NULL: none. */
typedef void (*spec_observe_fn)(void *ud, const spec *s, const forest *f, const step_plan *p);
void spec_set_observer(spec *s, spec_observe_fn fn, void *ud);
/* What a node is in the current step (during the observer call): */
enum { SPEC_NODE_OTHER = 0, SPEC_NODE_TIP, SPEC_NODE_DRAFT, SPEC_NODE_WINDOW };
/* SPEC_NODE_*; for a window node *level and *col (may be NULL) get its place. */
int spec_node_role(const spec *s, forest_id id, int32_t *level, int32_t *col);
/* The row cost the adaptive policy is using now (spec_policy.h). */
double spec_row_cost(const spec *s);

#endif
