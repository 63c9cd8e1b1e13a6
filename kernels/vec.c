/* vec.c - see vec.h. */
#include "vec.h"

#include <math.h>
#include <stdbool.h>

#include "cpu/simd.h"

float vec_max(const float *x, int64_t n) { return simd_max(x, n); }

double vec_log_sum_exp(const float *x, int64_t n, float *mx) {
    *mx = simd_max(x, n);
    return log(vec_sum_exp(x, n, *mx));
}

/* The first i < n with x[i] == t (above false) or x[i] > t (above true), or n; a NaN
 * matches neither. above is a constant after inlining. */
static inline int64_t vec_first(const float *x, int64_t n, float t, const bool above) {
    int64_t i = 0;
#if SIMD_AVX512
    const vf vt = vf_set1(t);
    for (; i + VF_N <= n; i += VF_N) {
        const __mmask16 hit = above ? _mm512_cmp_ps_mask(vf_load(x + i), vt, _CMP_GT_OQ)
                                    : _mm512_cmp_ps_mask(vf_load(x + i), vt, _CMP_EQ_OQ);
        if (hit) return i + __builtin_ctz(hit);
    }
#endif
    for (; i < n; i++)
        if (above ? x[i] > t : x[i] == t) return i;
    return n;
}

int64_t vec_argmax(const float *x, int64_t n) {
    if (n <= 0 || x[0] != x[0]) return 0;
    /* the largest non-NaN value, then the first index holding it */
    const int64_t i = vec_first(x, n, simd_max(x, n), false);
    return i < n ? i : 0;
}

int64_t vec_first_above(const float *x, int64_t n, float t) { return vec_first(x, n, t, true); }

double vec_sum_exp(const float *x, int64_t n, float mx) {
    const vf vm = vf_set1(mx);
    int64_t i = 0;
#if SIMD_AVX512
    /* lanes 0-7 of each vector into one double accumulator, 8-15 into the other */
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (; i + VF_N <= n; i += VF_N) {
        const vf e = vf_exp(vf_sub(vf_load(x + i), vm));
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
    }
    double s = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
#else
    /* lane k of every vector into acc[k] */
    double acc[VF_N] = {0};
    float e[VF_N];
    for (; i + VF_N <= n; i += VF_N) {
        vf_store(e, vf_exp(vf_sub(vf_load(x + i), vm)));
        for (int k = 0; k < VF_N; k++) acc[k] += e[k];
    }
    double s = 0;
    for (int k = 0; k < VF_N; k++) s += acc[k];
#endif
    float e1[VF_N];
    for (; i < n; i++) {
        vf_store(e1, vf_exp(vf_set1(x[i] - mx)));
        s += e1[0];
    }
    return s;
}
