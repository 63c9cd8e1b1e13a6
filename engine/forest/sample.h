/* sample.h - token samplers with their own seeded RNG (no global state).
 *
 * Greedy when temp <= 0. Otherwise, in order: top-k, then temperature softmax, then
 * top-p (nucleus) and min-p filtering, then a draw from the renormalised distribution.
 * Each sampler owns its RNG so that a branch seeded with S is reproducible. An optional
 * repetition penalty (llama.cpp's "repeat_penalty") is applied first, by
 * sampler_sample_hist, which is given the token history. */
#ifndef MD_SAMPLE_H
#define MD_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct sample_params {
    float temp;     /* <= 0: greedy */
    int32_t top_k;  /* <= 0: off */
    float top_p;    /* >= 1: off */
    float min_p;    /* <= 0: off */
    uint64_t seed;
    float repeat_penalty;  /* 1: off. > 1 discourages tokens of the recent history: their
                              logit is divided by it when positive, multiplied when not */
    int32_t repeat_last_n; /* history tokens the penalty looks at; 0: off, -1: all */
} sample_params;

/* temp 0.8, top_k 40, top_p 0.95, min_p 0.05, seed 1, repeat_penalty 1 (off),
 * repeat_last_n 64 (as llama.cpp). */
sample_params sample_default_params(void);
/* The seed after seed (splitmix64: never 0, far from seed and from seed + i, which a run's
 * branches use): a session drawing one per run repeats its runs from its first seed. */
uint64_t sample_next_seed(uint64_t seed);

/* Sets the sampler setting called name ("temp", "top_k", "top_p", "min_p", "seed") to v:
 * the one check of a value a person gives, used by the command-line options, the TUI's
 * :set and the session loader, so that a value refused by one is refused by all, with the
 * same message. ST_OK; ST_ERR_ARG, p unchanged, for a value out of range ("'top_k' is -5,
 * want an integer from 0 to 1073741824"; NaN is out of every range); ST_ERR_NOT_FOUND
 * for another name. */
st_code sample_param_set(sample_params *p, const char *name, double v, st_err *err);

typedef struct sampler {
    sample_params p;
    uint64_t rng;               /* xorshift64* state */
    struct sample_cand *cand;   /* scratch (n_vocab), owned */
    int32_t n_cand;
} sampler;

/* Returns 0, or -1 when out of memory. */
int sampler_init(sampler *s, const sample_params *p, int32_t n_vocab);
void sampler_free(sampler *s);
/* Picks a token from n logits (not modified). Ignores the repetition penalty. */
int32_t sampler_sample(sampler *s, const float *logits, int32_t n);
/* The same, after the repetition penalty over the last repeat_last_n of hist[0..n_hist)
 * (the tokens so far, prompt included, oldest first; may be NULL when n_hist is 0). Each
 * distinct token of that window is penalised once, as llama.cpp does. With the penalty
 * off it is exactly sampler_sample (the same tokens and the same RNG draws). logits are
 * not modified. */
int32_t sampler_sample_hist(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                            int32_t n_hist);
/* How many of a row's best logits a draw with p reads: 1 when greedy, top_k when top-k is
 * on, 0 when it reads the whole row (top-k off, or a repetition penalty). */
int32_t sample_top_need(const sample_params *p);
/* sampler_sample's token and RNG draw from a row of n logits given only its k best:
 * ids[0..k) best first (ties to the lower id), x their logits, k >= min(top_k, n) (a
 * device's top-k: no row crosses to the host; x may be NULL when greedy). -1, no draw,
 * when k is too small, x is missing or the sampler has a repetition penalty. */
int32_t sampler_sample_top(sampler *s, const int32_t *ids, const float *x, int32_t k, int32_t n);
/* The distribution sampler_sample_hist draws from for these logits and history (hist may
 * be NULL when n_hist is 0 or the penalty is off): the kept tokens, most likely first, in
 * ids[0..k) with their probabilities in probs[0..k) (summing to 1); returns k (1 with
 * probability 1 when greedy; 0 when n is out of range). ids and probs need n entries.
 * No RNG draw: for callers that choose by another rule (exact speculative sampling). */
int32_t sampler_dist(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                     int32_t n_hist, int32_t *ids, float *probs);
/* A uniform draw in [0, 1) from the sampler's RNG (53 bits). */
double sampler_uniform(sampler *s);
/* True when the parameters ask for a repetition penalty (so callers can skip gathering a
 * history otherwise). */
bool sample_uses_history(const sample_params *p);
/* out[i] = log softmax(logits)[i] for i < n (out may not alias logits): kern_logprob with
 * vec_log_sum_exp's lse, the bits of the cpu backend's topk_lse and step_logprob_of; the
 * same input gives the same bits on every call. */
void sample_log_softmax(const float *logits, int32_t n, float *out);
/* Index of the largest logit (first on ties; NaNs never win, see vec_argmax). */
int32_t sample_argmax(const float *logits, int32_t n);

#endif
