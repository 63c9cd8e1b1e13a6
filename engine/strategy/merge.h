/* merge.h - joining completions into one context: the exact merge (a re-prefill of their
 * text), and an EXPERIMENTAL rope-gap merge that reuses their KV without re-prefill.
 *
 * Exact merge: the chosen branches hang under their deepest common ancestor A. Each
 * branch's text is the decoding of its tokens below A down to its leaf (streamed in the
 * context of A's token, so a first word keeps its leading space); the texts are joined
 * with a separator and tokenised, and the tokens become a new pending chain under A,
 * computed by the next forest step like any other prompt. Since the step gives a node
 * exactly the logits of decoding its path linearly, the merged leaf sees what a model
 * reading "A's path + the joined text" sees: the merge is exact by construction, and it
 * costs one prefill of the joined text.
 *
 * Rope-gap merge (EXPERIMENTAL; its outputs differ from the exact merge, see the
 * measured comparison in tests/test_merge.c): the branches' existing K/V are reused side
 * by side. A new chain hangs under the longest chosen leaf H; its rows attend to A's path,
 * then every chosen branch's nodes below A (in the order given, H's included), then the
 * chain itself, and take RoPE positions depth + gap (so they continue after the longest
 * branch, plus gap). Every branch's K/V keeps the positions it was computed at, so the
 * branches overlap in position space and see nothing of each other: the model reads a
 * context it was never trained on. Rows of a rope-gap chain must be computed with
 * merge_gap_step (a forest step that also computes every other pending node normally);
 * a plain step_forest would compute them as ordinary children of H. While the chain
 * lives, the chosen branches must not be pruned (their slots are read).
 *
 * The caller owns the forest, the plan and the model context. Not here: choosing which
 * branches to merge (the app or a strategy), sampling after the merge (grow.h). */
#ifndef MD_MERGE_H
#define MD_MERGE_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "tok/tok.h"

#define MERGE_DEFAULT_SEP "\n\n"

/* ---- exact merge ---- */

/* The text that node `leaf` adds below node `from` (an ancestor of leaf, excluded; leaf
 * included), decoded as a stream after from's token: a malloc'd NUL-terminated string
 * (caller frees; "" when leaf == from). from = FOREST_NONE: the whole path from the root.
 * NULL + err: ST_ERR_ARG (stale ids, from not an ancestor of leaf), ST_ERR_NOMEM. */
char *merge_branch_text(const forest *f, const tok *tk, forest_id from, forest_id leaf,
                        st_err *err);

/* The texts of branches from[i]..leaves[i] (as merge_branch_text; from may be NULL: the
 * common ancestor of all leaves) joined with sep (NULL: MERGE_DEFAULT_SEP): malloc'd,
 * caller frees. *anc (may be NULL) gets the leaves' deepest common ancestor.
 * NULL + err: ST_ERR_ARG (n < 1, a stale id, leaves in different trees), ST_ERR_NOMEM. */
char *merge_join_text(const forest *f, const tok *tk, const forest_id *from,
                      const forest_id *leaves, int32_t n, const char *sep, forest_id *anc,
                      st_err *err);

/* Tokens of a text that continues after other tokens (no BOS, no special tokens): when
 * the tokenizer adds a SentencePiece dummy-prefix space and the text starts with a
 * space, that space is dropped first (the encoder adds it back as the prefix), so
 * " upon a time" gives the tokens it has inside a sentence. malloc'd array of *n tokens
 * (at least one element allocated; *n may be 0). NULL + ST_ERR_NOMEM. */
int32_t *merge_encode(const tok *tk, const char *text, int32_t *n, st_err *err);

/* The exact merge (see above): joins the texts of leaves[0..n) below their common
 * ancestor with sep (NULL: "\n\n") and appends the tokens as a pending chain under the
 * ancestor; *out_last (may be NULL) gets the chain's last node. A leaf may be the
 * ancestor itself (an empty text). ST_OK; ST_ERR_ARG (n < 1, stale ids, leaves in
 * different trees, an empty joined text); ST_ERR_NOMEM. The forest is unchanged on
 * failure. */
st_code merge_branches(forest *f, const tok *tk, const forest_id *leaves, int32_t n,
                       const char *sep, forest_id *out_last, st_err *err);

/* ---- rope-gap merge (EXPERIMENTAL) ---- */

typedef struct merge_gap merge_gap;

/* Starts a rope-gap chain of tokens[0..n_tokens) (n_tokens >= 1) under the longest of
 * leaves[0..n) (ties: the first), with positions depth + gap (gap >= 0). The leaves must
 * be computed (their K/V exist) and share a common ancestor. *out_last (may be NULL) gets
 * the chain's last node; nodes appended below it later (sampled tokens) belong to the
 * rope-gap chain too. NULL + err: ST_ERR_ARG, ST_ERR_NOMEM (the forest unchanged). */
merge_gap *merge_gap_init(forest *f, const forest_id *leaves, int32_t n, int32_t gap,
                          const int32_t *tokens, int32_t n_tokens, forest_id *out_last,
                          st_err *err);
void merge_gap_free(merge_gap *g); /* NULL is a no-op; leaves the forest as it is */

/* One forest step: step_plan_build, then step_run with the rope-gap rows' attention
 * segments and positions changed as above (the plan's overrides), so it is a step in
 * every other way (forward hooks, top-k alternatives, re-scored rows):
 * step_logits_of(p, node) gives the logits of its scored rows. ST_ERR_ARG when a chosen
 * branch was pruned; ST_NO_KV_SLOT / ST_ERR_NOMEM from the plan (nothing changed). */
st_code merge_gap_step(merge_gap *g, forest *f, step_plan *p, model_ctx *c, st_err *err);

/* The first node of the chain. */
forest_id merge_gap_first(const merge_gap *g);

#endif
