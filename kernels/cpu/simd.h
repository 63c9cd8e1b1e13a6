/* simd.h - the float vector layer the CPU kernels are written against.
 *
 * One type `vf` of VF_N floats and a handful of operations on it, mapped at build time
 * onto AVX-512 (16 lanes), AVX2+FMA (8), SSE2 (4), AArch64 NEON (4) or plain C (1).
 * Kernels written with these run unchanged on every x86-64 and AArch64 (and elsewhere
 * through the scalar branch); only
 * code that cannot be expressed with them (the int8 dot products of quantised
 * matmuls) has its own #ifdef branches. Tails shorter than VF_N are the caller's job
 * (loop to the last full vector, then finish in scalar C). Private to kernels/cpu. */
#ifndef MD_CPU_SIMD_H
#define MD_CPU_SIMD_H

#include <math.h>
#include <stdint.h>

#include "../dtype.h"

/* Which branch to build. Defining SIMD_SCALAR (-DSIMD_SCALAR) forces the plain C one,
 * so it can be tested on any machine; SIMD_256 the AVX2 one where AVX-512 is there too, so
 * that an AVX-512 VNNI machine runs the code of AVX-VNNI's chips (Intel's client chips:
 * 256-bit dpbusd, no AVX-512), with the same instruction EVEX-encoded (make test-isa). */
#if !defined(SIMD_SCALAR)
#if defined(__AVX512F__) && !defined(SIMD_256)
#define SIMD_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#define SIMD_AVX2 1
#elif defined(__SSE2__)
#define SIMD_SSE2 1
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define SIMD_NEON 1
#endif
#endif

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#if SIMD_NEON
#include <arm_neon.h>
#endif

#define SIMD_INLINE static inline __attribute__((always_inline))

/* fp16 -> f32 for one value: the F16C instruction when there is one. */
SIMD_INLINE float simd_h2f(uint16_t h) {
#if defined(__F16C__) && !defined(SIMD_SCALAR)
    return _cvtsh_ss(h);
#else
    return fp16_to_f32(h);
#endif
}

#if SIMD_AVX512
/* ---------------------------------------------------------------- AVX-512 */
#define VF_N 16
typedef __m512 vf;
SIMD_INLINE vf vf_zero(void) { return _mm512_setzero_ps(); }
SIMD_INLINE vf vf_set1(float a) { return _mm512_set1_ps(a); }
SIMD_INLINE vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
SIMD_INLINE void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
SIMD_INLINE vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
SIMD_INLINE vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
SIMD_INLINE vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
SIMD_INLINE vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
SIMD_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
SIMD_INLINE vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
SIMD_INLINE vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); }
/* (x1, x0, x3, x2, ...): the two floats of each pair swapped */
SIMD_INLINE vf vf_swap_pairs(vf a) { return _mm512_permute_ps(a, 0xb1); }
/* The sum of the lanes in a fixed tree: lanes i and i + 8, then i and i + 4, i + 2, i +
 * 1 (GCC's _mm512_reduce_add_ps, spelled out so that no compiler's choice can make it
 * disagree with vf_hsum16). */
SIMD_INLINE float vf_hsum(vf v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}
#define VF_HSUM16 1
/* vf_hsum16 in two steps, for callers that change lanes in between (matmul's tail
 * chunk): the first level's operands, lo[i] = blocks 0, 1 of v[2i] then of v[2i + 1]
 * (128-bit blocks), hi[i] = their blocks 2, 3; then the sum, from lo[i] + hi[i] on. */
SIMD_INLINE void vf_hsum16_lohi(const vf v[16], vf lo[8], vf hi[8]) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        lo[i] = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44);
        hi[i] = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee);
    }
}
SIMD_INLINE vf vf_hsum16_rest(const vf lo[8], const vf hi[8]) {
    __m512 w[8], x[4], y[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) w[i] = _mm512_add_ps(lo[i], hi[i]); /* lanes i and i + 8 */
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) /* i and i + 4: one vector per 128-bit lane */
        x[j] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0xdd));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* i and i + 2 */
        __m512d a = _mm512_castps_pd(x[2 * h]), b = _mm512_castps_pd(x[2 * h + 1]);
        y[h] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    /* i and i + 1 */
    return _mm512_add_ps(_mm512_shuffle_ps(y[0], y[1], 0x88), _mm512_shuffle_ps(y[0], y[1], 0xdd));
}
/* vf_hsum of 16 vectors at once, by the same tree, so bitwise the same: lane 4e + l of
 * the result is vf_hsum(v[4l + e]). Each level adds the same pairs of lanes; shuffles
 * only pack four (then eight, then sixteen) vectors' partial sums into one register,
 * so 16 sums cost 45 instructions instead of 16 x 8. */
SIMD_INLINE vf vf_hsum16(const vf v[16]) {
    vf lo[8], hi[8];
    vf_hsum16_lohi(v, lo, hi);
    return vf_hsum16_rest(lo, hi);
}
SIMD_INLINE float vf_hmax(vf v) { return _mm512_reduce_max_ps(v); }
SIMD_INLINE vf vf_round(vf v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT); }
/* 2^n for integral n in [-126, 127] */
SIMD_INLINE vf vf_pow2i(vf n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
SIMD_INLINE vf vf_load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
SIMD_INLINE vf vf_load_bf16(const uint16_t *p) {
    __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(u, 16));
}

#elif SIMD_AVX2
/* ---------------------------------------------------------------- AVX2 + FMA */
#define VF_N 8
typedef __m256 vf;
SIMD_INLINE vf vf_zero(void) { return _mm256_setzero_ps(); }
SIMD_INLINE vf vf_set1(float a) { return _mm256_set1_ps(a); }
SIMD_INLINE vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
SIMD_INLINE void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
SIMD_INLINE vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
SIMD_INLINE vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
SIMD_INLINE vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
SIMD_INLINE vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
SIMD_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
SIMD_INLINE vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
SIMD_INLINE vf vf_min(vf a, vf b) { return _mm256_min_ps(a, b); }
SIMD_INLINE vf vf_swap_pairs(vf a) { return _mm256_permute_ps(a, 0xb1); }
SIMD_INLINE float vf_hsum(vf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#define VF_HSUMN 1
/* vf_hsum of VF_N vectors at once, by the same pairs of lanes, so bitwise the same: lane k
 * of the result is vf_hsum(v[k]) (shuffles only pack the vectors' partial sums together:
 * 8 sums in 14 instructions instead of 8 x 5 and 8 scalar stores). */
SIMD_INLINE vf vf_hsumn(const vf v[8]) {
    __m256 w[4], x[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* lanes l and l + 4; v[i] low, v[i + 4] high */
        w[i] = _mm256_add_ps(_mm256_permute2f128_ps(v[i], v[i + 4], 0x20),
                             _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) /* l and l + 2 */
        x[j] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * j], w[2 * j + 1], 0x44),
                             _mm256_shuffle_ps(w[2 * j], w[2 * j + 1], 0xee));
    /* l and l + 1 */
    return _mm256_add_ps(_mm256_shuffle_ps(x[0], x[1], 0x88), _mm256_shuffle_ps(x[0], x[1], 0xdd));
}
SIMD_INLINE float vf_hmax(vf v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
SIMD_INLINE vf vf_round(vf v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
SIMD_INLINE vf vf_pow2i(vf n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
SIMD_INLINE vf vf_load_f16(const uint16_t *p) {
#if defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#else
    float t[8];
    for (int i = 0; i < 8; i++) t[i] = fp16_to_f32(p[i]);
    return _mm256_loadu_ps(t);
#endif
}
SIMD_INLINE vf vf_load_bf16(const uint16_t *p) {
    __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

#elif SIMD_SSE2
/* ---------------------------------------------------------------- SSE2 */
#define VF_N 4
typedef __m128 vf;
SIMD_INLINE vf vf_zero(void) { return _mm_setzero_ps(); }
SIMD_INLINE vf vf_set1(float a) { return _mm_set1_ps(a); }
SIMD_INLINE vf vf_load(const float *p) { return _mm_loadu_ps(p); }
SIMD_INLINE void vf_store(float *p, vf v) { _mm_storeu_ps(p, v); }
SIMD_INLINE vf vf_add(vf a, vf b) { return _mm_add_ps(a, b); }
SIMD_INLINE vf vf_sub(vf a, vf b) { return _mm_sub_ps(a, b); }
SIMD_INLINE vf vf_mul(vf a, vf b) { return _mm_mul_ps(a, b); }
SIMD_INLINE vf vf_div(vf a, vf b) { return _mm_div_ps(a, b); }
SIMD_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
SIMD_INLINE vf vf_max(vf a, vf b) { return _mm_max_ps(a, b); }
SIMD_INLINE vf vf_min(vf a, vf b) { return _mm_min_ps(a, b); }
SIMD_INLINE vf vf_swap_pairs(vf a) { return _mm_shuffle_ps(a, a, 0xb1); }
SIMD_INLINE float vf_hsum(vf v) {
    __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
SIMD_INLINE float vf_hmax(vf v) {
    __m128 s = _mm_max_ps(v, _mm_movehl_ps(v, v));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
SIMD_INLINE vf vf_round(vf v) { return _mm_cvtepi32_ps(_mm_cvtps_epi32(v)); }
SIMD_INLINE vf vf_pow2i(vf n) {
    __m128i e = _mm_add_epi32(_mm_cvtps_epi32(n), _mm_set1_epi32(127));
    return _mm_castsi128_ps(_mm_slli_epi32(e, 23));
}
SIMD_INLINE vf vf_load_f16(const uint16_t *p) {
    return _mm_setr_ps(fp16_to_f32(p[0]), fp16_to_f32(p[1]), fp16_to_f32(p[2]),
                       fp16_to_f32(p[3]));
}
SIMD_INLINE vf vf_load_bf16(const uint16_t *p) {
    __m128i h = _mm_loadl_epi64((const __m128i *)p);
    return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}

#elif SIMD_NEON
/* ---------------------------------------------------------------- AArch64 NEON */
/* Max and min are a compare and a select, not vmaxq/vmaxnmq, so that a NaN gives what
 * x86's maxps/minps and the plain C branch give (the second operand); the horizontal
 * sum is SSE2's tree (lanes i and i + 2, then i and i + 1), not vaddvq's pairwise one. */
#define VF_N 4
typedef float32x4_t vf;
SIMD_INLINE vf vf_zero(void) { return vdupq_n_f32(0.0f); }
SIMD_INLINE vf vf_set1(float a) { return vdupq_n_f32(a); }
SIMD_INLINE vf vf_load(const float *p) { return vld1q_f32(p); }
SIMD_INLINE void vf_store(float *p, vf v) { vst1q_f32(p, v); }
SIMD_INLINE vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
SIMD_INLINE vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
SIMD_INLINE vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
SIMD_INLINE vf vf_div(vf a, vf b) { return vdivq_f32(a, b); }
SIMD_INLINE vf vf_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }
SIMD_INLINE vf vf_max(vf a, vf b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
SIMD_INLINE vf vf_min(vf a, vf b) { return vbslq_f32(vcltq_f32(a, b), a, b); }
SIMD_INLINE vf vf_swap_pairs(vf a) { return vrev64q_f32(a); }
SIMD_INLINE float vf_hsum(vf v) {
    float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}
#define VF_HSUMN 1
/* vf_hsum of 4 vectors at once (lane k: vf_hsum(v[k])), by the same pairs of lanes */
SIMD_INLINE vf vf_hsumn(const vf v[4]) {
    const vf a = vaddq_f32(vcombine_f32(vget_low_f32(v[0]), vget_low_f32(v[1])),
                           vcombine_f32(vget_high_f32(v[0]), vget_high_f32(v[1])));
    const vf b = vaddq_f32(vcombine_f32(vget_low_f32(v[2]), vget_low_f32(v[3])),
                           vcombine_f32(vget_high_f32(v[2]), vget_high_f32(v[3])));
    return vpaddq_f32(a, b); /* lanes l and l + 1 */
}
SIMD_INLINE float vf_hmax(vf v) {
    float32x2_t a = vget_low_f32(v), b = vget_high_f32(v);
    float32x2_t s = vbsl_f32(vcgt_f32(a, b), a, b);
    float s0 = vget_lane_f32(s, 0), s1 = vget_lane_f32(s, 1);
    return s0 > s1 ? s0 : s1;
}
SIMD_INLINE vf vf_round(vf v) { return vrndnq_f32(v); }
SIMD_INLINE vf vf_pow2i(vf n) {
    int32x4_t e = vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(e, 23));
}
SIMD_INLINE vf vf_load_f16(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
SIMD_INLINE vf vf_load_bf16(const uint16_t *p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

#else
/* ---------------------------------------------------------------- plain C */
#define VF_N 1
typedef float vf;
SIMD_INLINE vf vf_zero(void) { return 0.0f; }
SIMD_INLINE vf vf_set1(float a) { return a; }
SIMD_INLINE vf vf_load(const float *p) { return *p; }
SIMD_INLINE void vf_store(float *p, vf v) { *p = v; }
SIMD_INLINE vf vf_add(vf a, vf b) { return a + b; }
SIMD_INLINE vf vf_sub(vf a, vf b) { return a - b; }
SIMD_INLINE vf vf_mul(vf a, vf b) { return a * b; }
SIMD_INLINE vf vf_div(vf a, vf b) { return a / b; }
SIMD_INLINE vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
SIMD_INLINE vf vf_max(vf a, vf b) { return a > b ? a : b; }
SIMD_INLINE vf vf_min(vf a, vf b) { return a < b ? a : b; }
SIMD_INLINE float vf_hsum(vf v) { return v; }
SIMD_INLINE float vf_hmax(vf v) { return v; }
SIMD_INLINE vf vf_round(vf v) { return rintf(v); }
SIMD_INLINE vf vf_pow2i(vf n) { return ldexpf(1.0f, (int)n); }
SIMD_INLINE vf vf_load_f16(const uint16_t *p) { return fp16_to_f32(*p); }
SIMD_INLINE vf vf_load_bf16(const uint16_t *p) { return bf16_to_f32(*p); }
#endif

/* e^x for every lane, within ~2 ulp of expf for x in [-87, 88]; inputs are clamped to
 * that range, so very negative x (-inf included) give ~1e-38 rather than 0, which no
 * sum of softmax weights can notice. Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2,
 * then the degree-7 Cephes polynomial for e^r, then scaling by 2^n. */
SIMD_INLINE vf vf_exp(vf x) {
    x = vf_min(vf_max(x, vf_set1(-87.0f)), vf_set1(88.0f));
    vf n = vf_round(vf_mul(x, vf_set1(1.44269504088896341f)));
    vf r = vf_sub(x, vf_mul(n, vf_set1(0.693359375f)));
    r = vf_sub(r, vf_mul(n, vf_set1(-2.12194440e-4f)));
    vf p = vf_set1(1.9875691500e-4f);
    p = vf_fma(p, r, vf_set1(1.3981999507e-3f));
    p = vf_fma(p, r, vf_set1(8.3334519073e-3f));
    p = vf_fma(p, r, vf_set1(4.1665795894e-2f));
    p = vf_fma(p, r, vf_set1(1.6666665459e-1f));
    p = vf_fma(p, r, vf_set1(5.0000001201e-1f));
    p = vf_fma(p, vf_mul(r, r), vf_add(r, vf_set1(1.0f)));
    return vf_mul(p, vf_pow2i(n));
}

/* The largest of x[0 .. n), n >= 1: lane by lane, then across the lanes. The order does
 * not change a maximum (but for which zero, +0 or -0, comes out; either gives the same
 * exp(x - max) downstream). NaNs are skipped unless x[0] is one (vf_max keeps its second
 * operand when the first is NaN, and every lane starts from x[0]). */
SIMD_INLINE float simd_max(const float *x, int64_t n) {
    float m = x[0];
    int64_t i = 0;
    if (n >= VF_N) {
        vf vm = vf_max(vf_load(x), vf_set1(m));
        for (i = VF_N; i + VF_N <= n; i += VF_N) vm = vf_max(vf_load(x + i), vm);
        m = vf_hmax(vm);
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* x[i] = exp(x[i] - m) for i < n (vf_exp lane by lane, expf for the tail); returns their
 * sum. */
SIMD_INLINE float simd_exp_sum(float *x, int64_t n, float m) {
    const vf vm = vf_set1(m);
    vf vs = vf_zero();
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) {
        vf e = vf_exp(vf_sub(vf_load(x + i), vm));
        vf_store(x + i, e);
        vs = vf_add(vs, e);
    }
    float sum = vf_hsum(vs);
    for (; i < n; i++) sum += (x[i] = expf(x[i] - m));
    return sum;
}

/* sum a[i] * b[i], i < n */
SIMD_INLINE float simd_dot(const float *a, const float *b, int64_t n) {
    vf s0 = vf_zero(), s1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * VF_N <= n; i += 2 * VF_N) {
        s0 = vf_fma(vf_load(a + i), vf_load(b + i), s0);
        s1 = vf_fma(vf_load(a + i + VF_N), vf_load(b + i + VF_N), s1);
    }
    for (; i + VF_N <= n; i += VF_N) s0 = vf_fma(vf_load(a + i), vf_load(b + i), s0);
    float s = vf_hsum(vf_add(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[i] += a * x[i], i < n */
SIMD_INLINE void simd_axpy(float *y, float a, const float *x, int64_t n) {
    vf va = vf_set1(a);
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) vf_store(y + i, vf_fma(va, vf_load(x + i), vf_load(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* y[i] *= a, i < n */
SIMD_INLINE void simd_scale(float *y, float a, int64_t n) {
    vf va = vf_set1(a);
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) vf_store(y + i, vf_mul(va, vf_load(y + i)));
    for (; i < n; i++) y[i] *= a;
}

#endif
