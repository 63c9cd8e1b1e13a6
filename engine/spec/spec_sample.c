/* spec_sample.c - the multi-draft speculative sampling rule (spec_sample.h). The target
 * is kept unnormalised with its total summed again in double after each rejection (no
 * drift from repeated subtraction). */
#include "spec/spec_sample.h"

#include <stddef.h>

static double total(const float *p, int32_t n) {
    double m = 0;
    for (int32_t j = 0; j < n; j++) m += p[j];
    return m;
}

/* A token drawn from p[0..n) (total mass > 0); the last token with mass when rounding
 * runs past the end. */
static int32_t draw(sampler *rng, const float *p, int32_t n, double mass) {
    double r = sampler_uniform(rng) * mass, acc = 0;
    int32_t last = 0;
    for (int32_t j = 0; j < n; j++) {
        if (p[j] <= 0) continue;
        acc += p[j];
        last = j;
        if (r < acc) return j;
    }
    return last;
}

int32_t spec_sample_pick(sampler *rng, float *p, int32_t n, const int32_t *x, const float *const *q,
                         int32_t m, int32_t *tok) {
    double mass = total(p, n);
    for (int32_t i = 0; i < m; i++) {
        int32_t t = x[i];
        if (t < 0 || t >= n) continue;
        const float *qi = q ? q[i] : NULL;
        double px = p[t] / mass;
        double a = px <= 0 ? 0 : !qi ? px : qi[t] <= px ? 1 : px / qi[t]; /* min(1, p/q) */
        if (sampler_uniform(rng) < a) {
            *tok = t;
            return i;
        }
        if (!qi) {
            p[t] = 0;
        } else {
            for (int32_t j = 0; j < n; j++) {
                float r = (float)(p[j] / mass) - qi[j];
                p[j] = r > 0 ? r : 0;
            }
        }
        mass = total(p, n);
        if (mass <= 0) { /* p was all on t (a was 1 up to rounding): t it is */
            *tok = t;
            return i;
        }
    }
    *tok = draw(rng, p, n, mass);
    return -1;
}
