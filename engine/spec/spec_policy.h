/* spec_policy.h - which draft tokens are worth a row: the cost model of speculative
 * decoding (spec.h).
 *
 * A draft token costs one more row in the step whether it is accepted or not; it pays
 * only when it is accepted. The policy keeps, per draft source ("bucket": prompt lookup by
 * key length and rank, the n-gram pool, the lookahead pool), a decaying count of draft
 * tokens tested and accepted, so p(bucket) estimates the chance that a draft token is
 * right given that the ones before it were; a token j deep in a draft is then accepted
 * with q = p^j. It also estimates c, the cost of one more row relative to a one-row step,
 * by a decaying least-squares fit of step time against rows (or takes c as given). A step
 * of n draft rows whose tokens have acceptance chances q_1..q_n yields 1 + sum q tokens
 * for 1 + c n time, so tokens are added in order of q while q > c (1 + Q) / (1 + c n),
 * which is when adding one raises tokens per unit of time. None of this affects which
 * tokens come out (verification is exact), only how fast. */
#ifndef MD_SPEC_POLICY_H
#define MD_SPEC_POLICY_H

#include <stdbool.h>
#include <stdint.h>

enum {
    SPEC_B_LOOKUP = 0,   /* + min(key, 4) - 1, + 4 for proposals after the first */
    SPEC_B_POOL = 8,     /* the n-gram pool of the text so far */
    SPEC_B_LA = 9,       /* the lookahead window's pool */
    SPEC_B_EXT = 10,     /* another source (spec_set_draft_source) */
    SPEC_N_BUCKETS = 11,
};

typedef struct spec_policy {
    double tested[SPEC_N_BUCKETS], accepted[SPEC_N_BUCKETS];
    double fixed_cost;  /* > 0: c as given; otherwise measured */
    double sw, sx, sy, sxx, sxy; /* decaying sums of (rows, seconds) for the fit */
    int32_t n_obs;
} spec_policy;

/* row_cost > 0 fixes c; <= 0 measures it (0.25 until enough steps are seen). */
void spec_policy_init(spec_policy *pl, double row_cost);
/* The bucket of a prompt-lookup proposal with key length key, rank-th of its key length. */
int spec_policy_lookup_bucket(int32_t key, int32_t rank);
/* The estimated chance that a draft token of bucket b is right (the ones before it being
 * right). */
double spec_policy_p(const spec_policy *pl, int b);
/* c: one more row's cost relative to a one-row step. */
double spec_policy_row_cost(const spec_policy *pl);
/* After a step: one draft of bucket b had `tested` tokens checked, `accepted` of them
 * right. */
void spec_policy_record(spec_policy *pl, int b, int32_t tested, int32_t accepted);
/* After a step: it ran `rows` rows in `secs` seconds; older counts and timings fade. */
void spec_policy_observe(spec_policy *pl, int32_t rows, double secs);
/* Should a token of chance q join a tree of n tokens whose chances sum to Q? */
bool spec_policy_worth(const spec_policy *pl, double q, int32_t n, double Q);

#endif
