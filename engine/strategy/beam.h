/* beam.h - beam search over the forest step: B hypotheses share one KV cache.
 *
 * A beam search of width B starts from one pending node (usually a prompt's last token).
 * Each beam_step is one forest step: every live hypothesis is a pending leaf, computed
 * in that step; each is expanded by its 2B best next tokens (log-softmax of its leaf's
 * logits); of all candidates, ordered by cumulative log-probability, the first 2B are
 * walked as Hugging Face transformers' BeamSearchScorer does: an end token (EOS/EOG)
 * ranked among the first B ends a hypothesis (moved to the finished list, scored by
 * sum logprob / len^alpha, len counting the end token), a later-ranked end token is
 * skipped, and the first B other candidates become the next live hypotheses, appended as
 * children of their parents' leaves. Leaves that no hypothesis continues are pruned with
 * their now-unused ancestors (never above the start node), freeing their KV slots; a
 * hypothesis never copies KV, since its prefix is its path in the forest.
 *
 * Stopping, as transformers' early_stopping: BEAM_STOP_EARLY (True) once B hypotheses are
 * finished; BEAM_STOP_HEURISTIC (False) once B are finished and the best candidate sum
 * of this step divided by the current length^alpha cannot beat the worst finished score;
 * BEAM_STOP_NEVER ("never") the same but with max_tokens^alpha when alpha > 0 (a true
 * bound). At max_tokens the live hypotheses join the finished list (unless the search
 * already stopped). The finished list keeps the B best (a full list admits only a
 * strictly better score; ties evict the earliest added). Results: the finished list by
 * score, best first (ties: earliest added first).
 *
 * Ordering rules, so that a reference can reproduce the search exactly: a beam's
 * candidates are its 2B best tokens by log-probability (ties: lower token id); all
 * candidates are ordered by cumulative sum (double), ties by the index of the live
 * hypothesis they extend, then by token id. Live hypotheses are kept in the order they
 * were chosen. Sums are doubles accumulated in path order from float log-probabilities
 * (sample_log_softmax).
 *
 * The caller owns the forest, the step plan and the model context. Not here: sampling
 * (grow, cot), diverse or constrained beams. */
#ifndef MD_BEAM_H
#define MD_BEAM_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "tok/tok.h"

enum { BEAM_STOP_HEURISTIC = 0, BEAM_STOP_EARLY = 1, BEAM_STOP_NEVER = 2 };

typedef struct beam_params {
    int32_t width;          /* B >= 1 */
    int32_t max_tokens;     /* generated tokens at most (transformers' max_new_tokens), >= 0 */
    float alpha;            /* length penalty exponent (transformers' length_penalty) */
    int32_t early_stopping; /* BEAM_STOP_* */
    int32_t eos;            /* an end token besides the tokenizer's EOG set; -1: none */
} beam_params;

/* width 4, max_tokens 64, alpha 1, BEAM_STOP_HEURISTIC, eos -1 */
beam_params beam_default_params(void);

typedef struct beam_hyp {
    int32_t *tokens;   /* (n) generated tokens, the end token included when it ended by one */
    int32_t n;
    double sum;        /* sum of the tokens' log-probabilities */
    double score;      /* sum / n^alpha */
    bool ended;        /* by an end token (else by max_tokens) */
} beam_hyp;

typedef struct beam beam;

/* A search from node `from`, which must be pending (its logits come from the first step;
 * ST_ERR_ARG otherwise, or for a stale id or bad params). tk (may be NULL: no end tokens
 * but p->eos) gives the end-of-generation set and must outlive the beam. n_vocab is the
 * model's. NULL + err on failure. */
beam *beam_init(forest *f, forest_id from, const beam_params *p, const tok *tk,
                int32_t n_vocab, st_err *err);
void beam_free(beam *b); /* NULL is a no-op; leaves the forest as it is */

/* One forest step and one beam decision (see above). ST_OK (also when already done);
 * ST_NO_KV_SLOT from the step with nothing changed (prune elsewhere, then retry);
 * ST_ERR_NOMEM or ST_ERR_ARG (a live leaf was pruned by someone else) after which the
 * search is broken and can only be freed. */
st_code beam_step(beam *b, forest *f, step_plan *p, model_ctx *c, st_err *err);

/* After nodes of f were pruned from outside between two steps: the live hypotheses whose
 * leaf went are dropped (the next step picks the B best candidates of the others, so the
 * beam refills from them); with none left the search is done, the finished list as it is. */
void beam_forget(beam *b, const forest *f);

bool beam_done(const beam *b);
int32_t beam_steps(const beam *b);       /* steps run */
int32_t beam_cur_len(const beam *b);     /* generated length of the live hypotheses */
/* Largest KV use seen right after a step, before its pruning (the search's peak). */
int32_t beam_kv_peak(const beam *b);

/* Live hypotheses (in order): their leaf and cumulative sum. After the last step,
 * parent[i] (may be NULL) is the index, in the previous live list, of the one live
 * hypothesis i extends, and its leaf's token is the one it added. */
int32_t beam_n_live(const beam *b);
forest_id beam_live_leaf(const beam *b, int32_t i);
double beam_live_sum(const beam *b, int32_t i);
int32_t beam_live_parent(const beam *b, int32_t i);

/* Finished hypotheses, best first; valid until the next beam_step or beam_free. */
int32_t beam_n_results(const beam *b);
const beam_hyp *beam_result(const beam *b, int32_t i);

#endif
