/* matmul.h - what matmul.c (the skeleton, float and Q8_0 tiles) and matmul_quant.c (the
 * tiles of the ggml block types Q4_0 .. Q6_K) share: the tile shape and its function
 * type, the macro that instantiates a tile template for every shape, which int8 dot
 * instructions the build has, and the layout of a quantised activation row. Private to
 * kernels/cpu. */
#ifndef MD_CPU_MATMUL_H
#define MD_CPU_MATMUL_H

#include <stdbool.h>

#include "cpu.h"
#include "simd.h"

#define MM_TW 4 /* weight rows per tile */
#define MM_TX 4 /* activation rows per tile (MM_TILES spells out 1..4) */

/* y[c * ys + r] = dot(row r of w, row c of x), r < NW, c < NX; n = n_in; ws and xs are
 * row strides in bytes. x is float32 or the quantised form, depending on the type. */
typedef void (*mm_tile_fn)(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs,
                           float *y, int64_t ys);

/* A type's tiles: [NW == MM_TW][NX - 1], as MM_TILES lays them out. */
typedef const mm_tile_fn mm_tile_row[MM_TX];

/* Instantiates template tmpl for one (NW, NX) pair, then for all of them, plus the
 * table mm_kind_of hands to the skeleton: [NW == MM_TW][NX - 1]. */
#define MM_TILE_FN(tmpl, nw, nx)                                                          \
    static void tmpl##_##nw##x##nx(int64_t n, const uint8_t *w, size_t ws,                \
                                   const uint8_t *x, size_t xs, float *y, int64_t ys) {   \
        tmpl(n, w, ws, x, xs, y, ys, nw, nx);                                             \
    }
#define MM_TILES(tmpl)                                                                    \
    MM_TILE_FN(tmpl, 1, 1) MM_TILE_FN(tmpl, 1, 2) MM_TILE_FN(tmpl, 1, 3)                  \
    MM_TILE_FN(tmpl, 1, 4) MM_TILE_FN(tmpl, 4, 1) MM_TILE_FN(tmpl, 4, 2)                  \
    MM_TILE_FN(tmpl, 4, 3) MM_TILE_FN(tmpl, 4, 4)                                         \
    static mm_tile_row tmpl##_tiles[2] = {                                                \
        {tmpl##_1x1, tmpl##_1x2, tmpl##_1x3, tmpl##_1x4},                                 \
        {tmpl##_4x1, tmpl##_4x2, tmpl##_4x3, tmpl##_4x4}};

/* Tiles prefetch the same columns of the next tile's weight rows (the next MM_TW rows
 * of W), one tile ahead. The hardware prefetchers stop at 4 KB pages, and a weight row
 * is about a page, so without this every row of a tile starts with a miss to DRAM. */
#define MM_PREFETCH(p) __builtin_prefetch((p), 0, 3)

_Static_assert(MM_TW == 4 && MM_TX == 4, "MM_TILES spells out NW in {1, 4}, NX in 1..4");

/* ---- int8 dot products: which instructions this build has ---------------------- *
 * MM_Q8_512: AVX-512 VNNI on 512-bit registers. MM_Q8_SIMD: AVX2 (256-bit), with
 * MM_Q8_VNNI when dpbusd exists at that width (AVX-512 VNNI + VL, or AVX-VNNI).
 * Neither: plain C. */
#if defined(SIMD_SCALAR)
/* plain C */
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define MM_Q8_VNNI 1
#define MM_DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif defined(__AVXVNNI__)
#define MM_Q8_VNNI 1
#define MM_DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(SIMD_SCALAR)
#define MM_Q8_SIMD 1
#endif
/* With AVX-512 VNNI two blocks share one 512-bit register: half the instructions. */
#if SIMD_AVX512 && defined(__AVX512VNNI__) && defined(__AVX512BW__)
#define MM_Q8_512 1
#endif

#if MM_Q8_SIMD
SIMD_INLINE float mm_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}
#endif

/* ---- quantised activations ------------------------------------------------------ *
 * An activation row of n values quantised to blocks of 32 int8 values with a float
 * scale each, x[i] ~= d[i / 32] * q[i], padded with zeros (q, d, dl and sx all 0) to
 * np = n rounded up to 256, so the block-type tiles can always work on whole chunks of
 * 256. From offset 0:
 *   q   np int8 values
 *   dl  np / 4 floats: d of value 4i, i.e. one per int32 lane of a dot product
 *   sx  np / 16 floats: d times the sum of q over values 16g .. 16g + 15 (what a
 *       weight block's min or offset multiplies)
 *   d   np / 32 floats, one per block
 * Every part starts at a multiple of 64 bytes from the row start. */
SIMD_INLINE int64_t mm_qx_np(int64_t n) { return (n + 255) / 256 * 256; }
SIMD_INLINE size_t mm_qx_row_bytes(int64_t n) {
    int64_t np = mm_qx_np(n);
    return (size_t)(np + np + np / 4 + np / 8 + 63) / 64 * 64;
}
SIMD_INLINE const float *mm_qx_dl(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + mm_qx_np(n));
}
SIMD_INLINE const float *mm_qx_sx(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + 2 * mm_qx_np(n));
}
SIMD_INLINE const float *mm_qx_d(const uint8_t *xr, int64_t n) {
    return (const float *)(xr + 2 * mm_qx_np(n) + mm_qx_np(n) / 4);
}

/* The tiles of a block type of kernels/quant.h (matmul_quant.c); NULL for others. */
mm_tile_row *mm_quant_tiles(uint32_t type);

#endif
