/* cot.h - k parallel chains of thought from one node, and a self-consistency vote.
 *
 * cot forks k children of a pending node with k DISTINCT first tokens, then grows all k
 * together (engine/strategy/grow.h), one forest step per token. Chain i owns a sampler seeded
 * sp.seed + i. Its first token is drawn by that sampler from the node's logits with the
 * first tokens of chains 0..i-1 removed (sampling without replacement, with the full
 * settings: repetition penalty, top-k, temperature, top-p, min-p); with temp <= 0 that
 * makes the first tokens the k best, in order (ties: lower id). Then the chain samples on
 * with the same sampler. So chain 0 is exactly what linear decoding with seed sp.seed
 * makes, and every chain is exactly linear decoding of its own path with its sampler:
 * the forest hands each leaf the same logits, bit for bit.
 *
 * The vote (self-consistency) is plain text work: an answer is extracted from each
 * chain's text by a simple built-in pattern and the most frequent answer wins.
 *
 * The caller owns the forest, the plan and the model context. Not here: how a prompt is
 * built (app/), scoring chains by likelihood (beam). */
#ifndef MD_COT_H
#define MD_COT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strategy/grow.h"
#include "strategy/strategy.h"

typedef struct cot {
    forest_id from;    /* the fork node */
    int32_t k;
    int32_t n_vocab;
    bool forked;       /* the first step (fork) has run */
    int32_t *first;    /* (k) first tokens; -1 before the fork */
    grow g;            /* chain i is g.br[i]; its budget counts the first token */
    float *scratch;    /* (n_vocab) masked logits, then log-probabilities */
} cot;

/* k chains from node `from` (pending: its logits come from the first step), each of at
 * most budget tokens (the first included), chain i sampling with sp and seed sp->seed + i.
 * ST_ERR_ARG: a stale or computed node, k < 1 or k > n_vocab; ST_ERR_NOMEM. On failure c
 * is zeroed (cot_free is still safe). */
st_code cot_init(cot *c, forest *f, forest_id from, int32_t k, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err);
void cot_free(cot *c); /* zeroed or initialised; leaves the forest as it is */

/* Stop strings for every chain (grow_set_stop), checked from the first token on (read
 * after the fork node's token). */
st_code cot_set_stop(cot *c, const char *const *stops, int32_t n, st_err *err);

/* One forest step: the first computes the fork node and forks the k chains, the later
 * ones grow them (grow_step). emit gets (chain, token, logprob) for every token a chain
 * keeps, first tokens included. *active (may be NULL) gets the chains still running.
 * ST_NO_KV_SLOT leaves everything unchanged. */
st_code cot_step(cot *c, forest *f, step_plan *p, model_ctx *ctx, const tok *tk,
                 grow_emit_fn emit, void *ud, int32_t *active, st_err *err);

bool cot_done(const cot *c);

/* The fork itself, for a strategy that forks several nodes in one step (tot.h): branches
 * g->br[i0 .. i0 + k), all starting at the node whose logits lg (n_vocab V) are, draw
 * their first tokens as the chains above do (branch i0 + j without the tokens of
 * i0..i0 + j - 1) and take them (grow_accept). first (k) gets the tokens; scratch holds V
 * floats. Codes from grow_history / grow_accept. */
st_code cot_fork_branches(grow *g, forest *f, int32_t i0, int32_t k, const float *lg, int32_t V, float *scratch,
                          int32_t *first, const tok *tk, grow_emit_fn emit, void *ud, st_err *err);
/* Tokens chain i made (below the fork node) into out (cap entries); returns how many it
 * has (may exceed cap), -1 for a pruned leaf. */
int32_t cot_chain_tokens(const cot *c, const forest *f, int32_t i, int32_t *out, int32_t cap);

/* ---- self-consistency vote ---- */

enum { COT_VOTE_NONE = 0, COT_VOTE_LAST_NUMBER, COT_VOTE_MARKER };

typedef struct cot_vote_spec {
    int32_t kind;        /* COT_VOTE_* */
    const char *marker;  /* COT_VOTE_MARKER: the text before the answer (borrowed) */
    bool all;            /* chains the budget cut vote too (--vote-all) */
} cot_vote_spec;

/* Parses "last-number" or "marker:TEXT" (TEXT non-empty; v->marker points into s) into
 * v's kind and marker (v->all is left as it is). ST_ERR_ARG naming the accepted forms. */
st_code cot_vote_parse(const char *s, cot_vote_spec *v, st_err *err);

/* The answer of one chain's text, normalised, into out (cap > 0 bytes, NUL-terminated,
 * cut short when it does not fit). Returns its length, or -1 when the text has none.
 * Only the text after the last "</think>" counts when there is one (a reasoning model's
 * answer follows its reasoning: chat_after_think).
 *   last-number: the last number in the text (an optional minus, digits with optional
 *     thousands commas, an optional decimal part), commas removed, trailing decimal
 *     zeros and point dropped ("1,200.50" -> "1200.5", "3.0" -> "3");
 *   marker: the text after the last occurrence of the marker up to the end of its line,
 *     trimmed of spaces and of one final '.'. */
int32_t cot_extract(const cot_vote_spec *v, const char *text, char *out, size_t cap);

/* Whether a chain that ended by end takes part in v's vote: one that ended (an end token,
 * a stop string) always; one its budget or a full cache cut only with v->all, since its
 * last number may be one it was still writing. */
bool cot_vote_counts(const cot_vote_spec *v, strategy_end end);

/* Majority over the answers[0..n) that count (counts NULL: all; NULL answers have none):
 * returns the index of the first chain holding the most frequent answer (ties: the answer
 * seen first wins) and its vote count in *votes; -1 (and *votes = 0) when none has one. */
int32_t cot_majority(const char *const *answers, const bool *counts, int32_t n, int32_t *votes);

#endif
