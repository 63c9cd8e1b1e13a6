/* vec.h - vector helpers for host-side code outside the ops table (sampling, the step's
 * log-probabilities): the reductions over a whole logits row that every step makes once
 * per row, with the CPU backend's SIMD (kernels/cpu/simd.h). */
#ifndef MD_VEC_H
#define MD_VEC_H

#include <stdint.h>

/* The largest of x[0 .. n), n >= 1 (NaNs aside). */
float vec_max(const float *x, int64_t n);

/* The index of the first largest of x[0 .. n), n >= 1, the same as a scalar scan that
 * keeps the first i with x[i] > x[best]: NaNs never win, and a NaN x[0] gives 0. */
int64_t vec_argmax(const float *x, int64_t n);

/* The first i < n with x[i] > t, or n when there is none (NaNs are never above): what a
 * scalar scan with the same comparison finds, 16 values a compare with AVX-512. */
int64_t vec_first_above(const float *x, int64_t n, float t);

/* sum exp(x[i] - mx), i < n: each term a float exp (the kernels' polynomial, within a few
 * ulp; terms below e^-87 count as ~1e-38), summed in double in a fixed order, so the same
 * row gives the same bits every time. */
double vec_sum_exp(const float *x, int64_t n, float mx);

/* The log-sum-exp of x[0 .. n), n >= 1, as *mx + the returned log: *mx = vec_max, the log
 * that of vec_sum_exp from it (in double). Log-softmax and the step's log-probabilities
 * both take it from here, so they agree bitwise. */
double vec_log_sum_exp(const float *x, int64_t n, float *mx);

#endif
