/* sample.h - token samplers with their own seeded RNG (no global state).
 *
 * Greedy when temp <= 0. Otherwise, in order: top-k, then temperature softmax, then
 * top-p (nucleus) and min-p filtering, then a draw from the renormalised distribution.
 * Each sampler owns its RNG so that a branch seeded with S is reproducible. */
#ifndef MD_SAMPLE_H
#define MD_SAMPLE_H

#include <stdint.h>

typedef struct sample_params {
    float temp;     /* <= 0: greedy */
    int32_t top_k;  /* <= 0: off */
    float top_p;    /* >= 1: off */
    float min_p;    /* <= 0: off */
    uint64_t seed;
} sample_params;

sample_params sample_default_params(void); /* temp 0.8, top_k 40, top_p 0.95, min_p 0.05 */

typedef struct sampler {
    sample_params p;
    uint64_t rng;               /* xorshift64* state */
    struct sample_cand *cand;   /* scratch (n_vocab), owned */
    int32_t n_cand;
} sampler;

/* Returns 0, or -1 when out of memory. */
int sampler_init(sampler *s, const sample_params *p, int32_t n_vocab);
void sampler_free(sampler *s);
/* Picks a token from n logits (not modified). */
int32_t sampler_sample(sampler *s, const float *logits, int32_t n);
/* Index of the largest logit (first on ties). */
int32_t sample_argmax(const float *logits, int32_t n);

#endif
