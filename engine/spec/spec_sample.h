/* spec_sample.h - exact speculative sampling: the rule that verifies drafts against a
 * sampled target so that the chosen token follows the target's distribution exactly.
 *
 * Multi-draft speculative sampling (SpecInfer; Leviathan et al. and Chen et al. for one
 * draft): at a position whose target distribution is p, the drafts x_1..x_m proposed
 * there are tried in turn: x_i is accepted with probability min(1, p(x_i) / q_i(x_i)),
 * where q_i is the distribution x_i was drawn from; on rejection p becomes the residual
 * normalise(max(0, p - q_i)) and the next draft is tried; when none is accepted the token
 * is drawn from the last residual. Whatever the drafts, the token has distribution p.
 *
 * Deterministic drafts (prompt lookup, n-grams, lookahead's pool) are the one-hot case,
 * q_i = [x_i]: x_i is accepted with probability p(x_i) / (the mass left), a rejection
 * zeroes p(x_i). For distinct one-hot drafts that law is exactly one draw t from p
 * followed by "accepted when t is one of the drafts, else t is the residual's draw" (the
 * chance of x_i is p(x_i) either way, and of any other t, p(t)). The driver (spec.c)
 * uses that form: it draws each token with the sampler as plain sampling does
 * (sampler_sample_hist over the node's logits and the path's history), so a speculative
 * run gives plain sampling's very tokens for the same seed, whatever the drafts or the
 * tree's shape. spec_sample_pick below is the rule itself, for draft sources that come
 * with a distribution q (a draft model), and the oracle the form above is tested against
 * (tests/test_spec_sample.c). The target p is sampler_dist's (temperature, top-k, top-p,
 * min-p, repetition penalty). */
#ifndef MD_SPEC_SAMPLE_H
#define MD_SPEC_SAMPLE_H

#include <stdint.h>

#include "forest/sample.h"

/* The rule at one position over the target p[0..n) (non-negative, any positive total;
 * left holding the final residual, unnormalised): drafts x[0..m) tried in order, draft i
 * drawn from q[i] (n probabilities summing to 1), or one-hot when q or q[i] is NULL; the
 * uniform draws come from rng's RNG (sampler_uniform). Returns the index of the accepted
 * draft, or -1 when none was; *tok gets the token either way. A draft outside [0, n) is
 * never accepted. */
int32_t spec_sample_pick(sampler *rng, float *p, int32_t n, const int32_t *x, const float *const *q,
                         int32_t m, int32_t *tok);

#endif
