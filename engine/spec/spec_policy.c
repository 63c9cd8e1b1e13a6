/* spec_policy.c - acceptance estimates per draft source and the row-cost fit
 * (spec_policy.h). */
#include "spec/spec_policy.h"

#include <string.h>

#define PL_DECAY 0.97     /* per step, for counts and timings */
#define PL_PRIOR_P 0.5    /* p with no evidence, worth PL_PRIOR_N tokens */
#define PL_PRIOR_N 2.0
#define PL_PRIOR_COST 0.25 /* c before the fit has enough steps (a 2-core CPU) */

void spec_policy_init(spec_policy *pl, double row_cost) {
    memset(pl, 0, sizeof *pl);
    pl->fixed_cost = row_cost;
}

int spec_policy_lookup_bucket(int32_t key, int32_t rank) {
    int32_t k = key < 1 ? 1 : key > 4 ? 4 : key;
    return SPEC_B_LOOKUP + (k - 1) + (rank > 0 ? 4 : 0);
}

double spec_policy_p(const spec_policy *pl, int b) {
    return (pl->accepted[b] + PL_PRIOR_P * PL_PRIOR_N) / (pl->tested[b] + PL_PRIOR_N);
}

double spec_policy_row_cost(const spec_policy *pl) {
    if (pl->fixed_cost > 0) return pl->fixed_cost;
    double den = pl->sw * pl->sxx - pl->sx * pl->sx;
    /* the fit extrapolates to a one-row step: only trust it when the steps' row counts
     * vary by a row or more (a window of fixed size run every step does not) */
    if (pl->n_obs < 6 || den < pl->sw * pl->sw) return PL_PRIOR_COST;
    double b = (pl->sw * pl->sxy - pl->sx * pl->sy) / den; /* seconds per row */
    double a = (pl->sy - b * pl->sx) / pl->sw;             /* seconds per step */
    if (b <= 0) return 0.005;
    double c = b / (a + b > 1e-12 ? a + b : 1e-12);
    return c < 0.005 ? 0.005 : c > 1.0 ? 1.0 : c;
}

void spec_policy_record(spec_policy *pl, int b, int32_t tested, int32_t accepted) {
    if (b < 0 || b >= SPEC_N_BUCKETS || tested <= 0) return;
    pl->tested[b] += tested;
    pl->accepted[b] += accepted;
}

void spec_policy_observe(spec_policy *pl, int32_t rows, double secs) {
    for (int b = 0; b < SPEC_N_BUCKETS; b++) {
        pl->tested[b] *= PL_DECAY;
        pl->accepted[b] *= PL_DECAY;
    }
    pl->sw = pl->sw * PL_DECAY + 1;
    pl->sx = pl->sx * PL_DECAY + rows;
    pl->sy = pl->sy * PL_DECAY + secs;
    pl->sxx = pl->sxx * PL_DECAY + (double)rows * rows;
    pl->sxy = pl->sxy * PL_DECAY + rows * secs;
    pl->n_obs++;
}

bool spec_policy_worth(const spec_policy *pl, double q, int32_t n, double Q) {
    double c = spec_policy_row_cost(pl);
    return q > c * (1 + Q) / (1 + c * n);
}
