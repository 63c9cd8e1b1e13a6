/* pk_lanes.h - the vector layer the packed form's tiles are written over (matmul_pkv.c's
 * AVX2 and NEON tiles, matmul_pk_iq.c's on every level): int vectors (pv) of PV_L int32
 * lanes, one lane a weight row, and float vectors (pf) of as many. A level with AVX-512
 * VNNI has a whole o-block (16 rows) in a vector; AVX2 half (also where AVX-512 lacks
 * VNNI, so this is not simd.h's vf, whose width follows AVX-512F); NEON a quarter.
 * Private to kernels/cpu. */
#ifndef MD_CPU_PK_LANES_H
#define MD_CPU_PK_LANES_H

#include <string.h>

#include "matmul_pk.h"

#if MM_PK

#if MM_Q8_512
#define PV_L 16
typedef __m512i pv;
typedef __m512 pf;
SIMD_INLINE pv pv_load(const uint8_t *p) { return _mm512_load_si512((const void *)p); }
SIMD_INLINE pv pv_set32(int32_t v) { return _mm512_set1_epi32(v); }
SIMD_INLINE pf pf_zero(void) { return _mm512_setzero_ps(); }
SIMD_INLINE pf pf_set1(float v) { return _mm512_set1_ps(v); }
SIMD_INLINE pf pf_mul(pf a, pf b) { return _mm512_mul_ps(a, b); }
SIMD_INLINE pf pf_fma(pf a, pf b, pf c) { return _mm512_fmadd_ps(a, b, c); }
SIMD_INLINE pf pf_cvt(pv a) { return _mm512_cvtepi32_ps(a); }
SIMD_INLINE void pf_store(float *p, pf a) { _mm512_storeu_ps(p, a); }
SIMD_INLINE pf pf_h(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
#elif MM_Q8_SIMD
#define PV_L 8
typedef __m256i pv;
typedef __m256 pf;
SIMD_INLINE pv pv_load(const uint8_t *p) { return _mm256_load_si256((const __m256i *)p); }
SIMD_INLINE pv pv_zero(void) { return _mm256_setzero_si256(); }
SIMD_INLINE pv pv_set8(int8_t v) { return _mm256_set1_epi8(v); }
SIMD_INLINE pv pv_set32(int32_t v) { return _mm256_set1_epi32(v); }
SIMD_INLINE pv pv_and(pv a, pv b) { return _mm256_and_si256(a, b); }
SIMD_INLINE pv pv_or(pv a, pv b) { return _mm256_or_si256(a, b); }
SIMD_INLINE void pv_store(uint8_t *p, pv a) { _mm256_store_si256((__m256i *)p, a); }
#define pv_shl16(a, n) _mm256_slli_epi16(a, n)
#define pv_shr16(a, n) _mm256_srli_epi16(a, n)
SIMD_INLINE pf pf_zero(void) { return _mm256_setzero_ps(); }
SIMD_INLINE pf pf_set1(float v) { return _mm256_set1_ps(v); }
SIMD_INLINE pf pf_mul(pf a, pf b) { return _mm256_mul_ps(a, b); }
SIMD_INLINE pf pf_fma(pf a, pf b, pf c) { return _mm256_fmadd_ps(a, b, c); }  /* a b + c */
SIMD_INLINE pf pf_fnma(pf a, pf b, pf c) { return _mm256_fnmadd_ps(a, b, c); } /* c - a b */
SIMD_INLINE pf pf_cvt(pv a) { return _mm256_cvtepi32_ps(a); }
SIMD_INLINE void pf_store(float *p, pf a) { _mm256_storeu_ps(p, a); }
SIMD_INLINE pf pf_h(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
#elif MM_Q8_NEON
#define PV_L 4
typedef int8x16_t pv;
typedef float32x4_t pf;
SIMD_INLINE pv pv_load(const uint8_t *p) { return vld1q_s8((const int8_t *)p); }
SIMD_INLINE pv pv_zero(void) { return vdupq_n_s8(0); }
SIMD_INLINE pv pv_set8(int8_t v) { return vdupq_n_s8(v); }
SIMD_INLINE pv pv_set32(int32_t v) { return vreinterpretq_s8_s32(vdupq_n_s32(v)); }
SIMD_INLINE pv pv_and(pv a, pv b) { return vandq_s8(a, b); }
SIMD_INLINE pv pv_or(pv a, pv b) { return vorrq_s8(a, b); }
SIMD_INLINE void pv_store(uint8_t *p, pv a) { vst1q_s8((int8_t *)p, a); }
/* (shifts by a vector count, which any n may be: the _n forms want an immediate even in
 * the arms of a conditional that constant folding drops) */
#define pv_shl16(a, n) vreinterpretq_s8_u16(vshlq_u16(vreinterpretq_u16_s8(a), vdupq_n_s16(n)))
#define pv_shr16(a, n) vreinterpretq_s8_u16(vshlq_u16(vreinterpretq_u16_s8(a), vdupq_n_s16(-(n))))
SIMD_INLINE pf pf_zero(void) { return vdupq_n_f32(0); }
SIMD_INLINE pf pf_set1(float v) { return vdupq_n_f32(v); }
SIMD_INLINE pf pf_mul(pf a, pf b) { return vmulq_f32(a, b); }
SIMD_INLINE pf pf_fma(pf a, pf b, pf c) { return vfmaq_f32(c, a, b); }
SIMD_INLINE pf pf_fnma(pf a, pf b, pf c) { return vfmsq_f32(c, a, b); }
SIMD_INLINE pf pf_cvt(pv a) { return vcvtq_f32_s32(vreinterpretq_s32_s8(a)); }
SIMD_INLINE void pf_store(float *p, pf a) { vst1q_f32(p, a); }
SIMD_INLINE pf pf_h(const uint8_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p))); }
SIMD_INLINE uint8x8_t pv_bytes4(const uint8_t *p) { /* (4 bytes: no read past them) */
    uint32_t v;
    memcpy(&v, p, 4);
    return vcreate_u8(v);
}
#endif

/* Activation row xr's four values from i, broadcast to every lane. */
SIMD_INLINE pv pv_x4(const uint8_t *xr, int64_t i) {
    int32_t v;
    memcpy(&v, xr + i, 4);
    return pv_set32(v);
}

/* Parts of an o-block (16 rows) one vector holds. */
#define PV_NP (16 / PV_L)

/* An integer sum under way: p, int32 lanes, and (plain AVX2) s, the int16 pair sums not
 * yet added to p. */
typedef struct pv_sum {
    pv p, s;
} pv_sum;

#endif
#endif
