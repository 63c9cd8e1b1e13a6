/* t_kern.h - test data for the kernels (header-only, include after t.h): a seeded
 * splitmix64 generator, random float arrays (malloc'd), activations that int8 quantises
 * exactly, and random weight matrices of any type (malloc'd, quantised from uniform values
 * in [-1, 1)), and the check that an elementwise op gives an element the same bits alone. */
#ifndef MD_T_KERN_H
#define MD_T_KERN_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dtype.h"
#include "kernels/kern.h"

static inline uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float rng_unif(uint64_t *s) { /* [-1, 1) */
    return (float)((double)(rng_next(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
static inline int32_t rng_int(uint64_t *s, int32_t n) { return (int32_t)(rng_next(s) % (uint64_t)n); }

static inline float *rand_floats(uint64_t *s, int64_t n, float scale) {
    float *p = malloc((n > 0 && n < ((int64_t)1 << 40) ? (size_t)n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = rng_unif(s) * scale;
    return p;
}

/* Activations that quantise to Q8 blocks exactly: per span of values (32, or 256 for a
 * form with one scale per 256, which the per-32 forms then quantise exactly too) a
 * power-of-two scale times integers in [-127, 127], one of them +-127 in every 32. With
 * these the int8 kernels must match ref up to summation order, which tests them far more
 * tightly than random activations (whose rounding error would hide small kernel
 * mistakes). */
static inline float *t_qx_exact_floats(uint64_t *s, int64_t n, int64_t span) {
    float *p = malloc((size_t)n * sizeof *p);
    float d = 1;
    for (int64_t b = 0; b < n / 32; b++) {
        if (b % (span / 32) == 0) d = ldexpf(1.0f, rng_int(s, 5) - 3);
        for (int j = 0; j < 32; j++) p[b * 32 + j] = d * (float)(rng_int(s, 255) - 127);
        p[b * 32 + rng_int(s, 32)] = d * (rng_int(s, 2) ? 127.0f : -127.0f);
    }
    return p;
}
static inline float *t_q8_exact_floats(uint64_t *s, int64_t n) { return t_qx_exact_floats(s, n, 32); }

/* The span t_qx_exact_floats needs for a matmul of this type: the packed K types' read
 * activations with one scale per 256 values (on AVX2 and NEON). */
static inline int64_t t_qx_span(uint32_t type, bool packed) {
    return packed && (type == DT_Q4_K || type == DT_Q5_K || type == DT_Q6_K || type == DT_Q2_K ||
                      type == DT_Q3_K)
               ? 256
               : 32;
}

/* The ref backend, or NULL after a failed check. */
static inline kern_backend *t_ref(void) {
    st_err err = {0};
    kern_backend *ref = kern_backend_init("ref", 1, &err);
    T_CHECK(ref != NULL, "ref backend: %s", err.msg);
    return ref;
}

/* Runs fn(ref, cpu, seed0 + threads) with a cpu backend of 1, 2 and 3 threads each: the
 * ops' comparisons against ref at every thread count. */
static inline void t_each_cpu(kern_backend *ref, void (*fn)(kern_backend *, kern_backend *, uint64_t),
                              uint64_t seed0) {
    for (int32_t nt = 1; nt <= 3; nt++) {
        st_err err = {0};
        kern_backend *cpu = kern_backend_init("cpu", nt, &err);
        T_CHECK(cpu != NULL, "cpu backend with %d threads: %s", (int)nt, err.msg);
        if (!cpu) continue;
        fn(ref, cpu, seed0 + (uint64_t)nt);
        kern_backend_free(cpu);
    }
}

static inline void *make_weights(uint64_t *s, uint32_t type, int64_t n_out, int64_t n_in) {
    size_t rb = dtype_row_bytes(type, n_in);
    uint8_t *w = malloc(rb * (size_t)n_out);
    float *row = malloc((size_t)n_in * sizeof *row);
    for (int64_t o = 0; o < n_out; o++) {
        for (int64_t i = 0; i < n_in; i++) row[i] = rng_unif(s);
        dtype_quantize_row(type, row, w + o * rb, n_in);
    }
    free(row);
    return w;
}

/* For an elementwise gated op fn of backend b (geglu, swiglu_oai): true when each of the
 * first 50 of n elements computed alone gets the bits y holds for it from one call over
 * all n (an element's value must not depend on where it falls in the array). */
typedef void (*t_gated_fn)(kern_backend *, float *, const float *, const float *, int64_t);
static inline bool t_gated_alone(kern_backend *b, t_gated_fn fn, const float *g, const float *u,
                                 const float *y, int64_t n) {
    bool same = true;
    for (int64_t j = 0; j < n && j < 50; j++) {
        float one;
        fn(b, &one, g + j, u + j, 1);
        same &= memcmp(&one, &y[j], sizeof one) == 0;
    }
    return same;
}

#endif
