/* lookahead.h - lookahead decoding's Jacobi window as forest nodes (Fu et al., 2024).
 *
 * The window holds guesses for the tokens after the tip: level l (0..N-2), column i
 * (0..W-1) guesses the token at position P + i + l, where P is the tip's position and
 * window[0][0] is the tip itself. In the forest it is a tree under the tip: level 0 is a
 * chain (columns 1..W-1, a Jacobi window whose tokens each see the ones before), and each
 * column i carries a chain of levels 1..N-2 under its level-0 node (the tip for column 0),
 * so node (l, i) sits at depth P + i + l and sees the prefix, level 0 up to column i and
 * its own column below it - the layout of the paper's lookahead branch, with positions
 * and mask from the forest. That is (W - 1) + W (N - 2) rows, every one returning logits.
 *
 * After the step, node (l, i)'s greedy output guesses position P + i + l + 1. Each column
 * read upwards plus the top level's output is an n-gram of N consecutive guesses: these
 * go into the pool, keyed by their first token, for the verification branch (spec.h) to
 * draft from. The window then moves like a Jacobi iteration: level 0 drops out, the
 * others move down, the top level's outputs become the new top, and the columns shift
 * left by however many tokens the step accepted beyond one (positions stay right); a
 * column shifted in from beyond the window starts from tokens of the history. Window
 * nodes are pruned after every step: they are recomputed at their new places next time.
 * Not here: verification (spec.h), the pool (ngram.h). */
#ifndef MD_LOOKAHEAD_H
#define MD_LOOKAHEAD_H

#include <stdint.h>

#include "forest/forest.h"
#include "spec/ngram.h"
#include "forest/step.h"

typedef struct lookahead_params {
    int32_t w;     /* window W (columns); 0: no lookahead */
    int32_t n;     /* n-gram size N >= 2: levels N - 1 */
    int32_t g;     /* verification cap G: most pool n-grams drafted per step */
    uint64_t seed; /* initial guesses (tokens drawn from the history) */
} lookahead_params;

typedef struct lookahead lookahead;

/* A window for params lp (w >= 1, 2 <= n <= 16, w * n <= 4096). The initial guesses are
 * tokens of hist[0..n_hist) drawn with lp->seed (token 0 when the history is empty).
 * NULL with err set (ST_ERR_ARG, ST_ERR_NOMEM). */
lookahead *lookahead_init(const lookahead_params *lp, const int32_t *hist, int32_t n_hist,
                          st_err *err);
void lookahead_free(lookahead *la); /* NULL is a no-op */
/* Rows the window adds to a step: (W - 1) + W (N - 2). */
int32_t lookahead_rows(const lookahead *la);
/* Adds the window under tip (pending nodes, all returning logits; the tip flagged too).
 * ST_ERR_ARG (stale tip), ST_ERR_NOMEM (the forest unchanged). */
st_code lookahead_pack(lookahead *la, forest *f, forest_id tip, st_err *err);
/* After the step: harvests the columns' n-grams into pool (once the window has been
 * iterated N - 2 times, so that they are real outputs), moves the window by `advance` >= 1
 * tokens with new_tip as window[0][0], and prunes the window's nodes. hist[0..n_hist) is
 * the history (refills columns shifted in). ST_ERR_NOMEM (pool). */
st_code lookahead_update(lookahead *la, forest *f, const step_plan *p, forest_id tip,
                         ngram_pool *pool, int32_t advance, int32_t new_tip,
                         const int32_t *hist, int32_t n_hist, st_err *err);
/* Moves the window by advance >= 1 tokens without a step's outputs (a step that did not
 * run it): every level shifts left by `advance` columns so positions stay right, new
 * columns come from the history, and new_tip becomes window[0][0]. */
void lookahead_skip(lookahead *la, int32_t advance, int32_t new_tip, const int32_t *hist,
                    int32_t n_hist);
/* Prunes the packed window without reading it (a step that failed); the window stays. */
void lookahead_cancel(lookahead *la, forest *f);
/* The packed node of (level, column) after lookahead_pack (FOREST_NONE for (0, 0), which
 * is the tip, or out of range): for views and tests. */
forest_id lookahead_node(const lookahead *la, int32_t level, int32_t col);
/* The window's current guess at (level, column). */
int32_t lookahead_guess(const lookahead *la, int32_t level, int32_t col);

#endif
