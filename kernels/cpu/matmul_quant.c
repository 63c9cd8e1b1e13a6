/* matmul_quant.c - the CPU matmul of the ggml block types of kernels/quant.h (Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, MXFP4; and Q8_0 with AVX-512 VNNI): per
 * type a preparer,
 * which unpacks weight rows into one common form (mm_prep, matmul.h), and one tile
 * template over that form for all of them.
 *
 * Q8_0's quants are signed: its preparer adds 128 (u = q + 128, up to 255, which only
 * dpbusd's exact int32 sums allow: hence VNNI only), and its tiles start each group's
 * dot product at the activations' xo = -128 * sum q (matmul.h) instead of 0, so the sum
 * is again the exact sum of q_w * q_x and there is no offset term: per pair and chunk 4
 * dot products and 2 float operations, against 4 and 8 for its own block-pair tile.
 * The other types without a min whose offset divides 128 (Q4_0 8, Q5_0 16, Q6_K 32) start
 * at xo >> io the same way (mm_int_off): exact, and one float operation fewer (figures
 * for both: kernels/README.md).
 *
 * A row is walked in chunks of 256 values, 16 groups of 16. The preparer unpacks a
 * chunk (quant_unpack, the code the dequantiser uses, or with AVX-512 faster twins that
 * write the grouped order straight from registers) into unsigned quants u (0..63) and, per group, a scale s and an offset
 * m: w = s * (u - off) + m; it stores u in the grouped order (mm_grp_pos), s, and
 * mo = m - off * s. Against an activation row quantised to int8 blocks of 32 (q, scale
 * d, in the same grouped order; see matmul.h) group g contributes
 *
 *     s[g] * d * sum_g u * q  +  mo[g] * d * sum_g q
 *
 * The first term is four chained unsigned-by-signed int8 dot products (dpbusd with
 * VNNI; maddubs + madd without, where u <= 63 keeps the int16 pair sums from
 * saturating), one per 64-byte part of the chunk, which leave group g's exact int32
 * sum in lane g; it is scaled by s * d lane by lane. The second multiplies the 16
 * offsets by the activation's precomputed d * sum q (sx) at once. So a chunk costs a
 * pair of rows 4 dot instructions and 4 float operations, whatever the type; mins and
 * offsets are folded in as llama.cpp does with Q8_1's and Q8_K's block sums. Rows
 * shorter than a multiple of 256 (small types) end in a chunk padded with zero
 * weights, zero scales and zero activations.
 *
 * Each (weight row, activation row) pair goes through the same operations in the same
 * order for every NW and NX and every batch: the unpacking is per weight row, the sums
 * per pair. */
#include "unpack.h"

/* (With AVX-512 both are a few permutes: they run on every activation row quantised.
 * dst is 64-byte aligned there.) */
void mm_grp_reorder(const uint8_t *src, uint8_t *dst) {
#if MM_Q8_512
    mm_grp_rounds(_mm512_loadu_si512(src), _mm512_loadu_si512(src + 64),
                  _mm512_loadu_si512(src + 128), _mm512_loadu_si512(src + 192),
                  mm_grp_idx1(false, false), mm_grp_idx1(false, true), dst);
#else
    for (int v = 0; v < QUANT_CHUNK; v += 4) memcpy(dst + mm_grp_pos(v), src + v, 4);
#endif
}

void mm_tail_reorder(const uint8_t *src, uint8_t *dst, int nq) {
#if MM_Q8_512
    for (int j = 0; j < nq; j++)
        _mm512_store_si512(dst + 64 * j, mm_tail_quarter(_mm512_loadu_si512(src + 64 * j)));
#else
    for (int v = 0; v < 64 * nq; v += 4) memcpy(dst + mm_tail_pos(v), src + v, 4);
#endif
}

/* ---- the tile over prepared rows --------------------------------------------------
 * Per chunk and (weight row, activation row) pair: the int32 dot products of the four
 * 64-byte parts are chained, so lane g ends with the exact sum over group g; then
 *     acc += float(sum) * (s[g] * dg[g])  and  acc += mo[g] * sx[g]
 * lane by lane. (io >= 0, the types mm_int_off names: the chain starts at xo[g] >> io,
 * -off times the group's sum of q, instead of 0, and the second term is left out.) The
 * sums are the same for every NW and NX; only the loops around them change. A tail chunk (matmul.h) adds the same to the lanes of its groups only. */

#if MM_Q8_512
/* The tail chunk (nq quarters, compact order) of MM_TX activation rows, four pairs of
 * (weight row, activation row) at a time. A quarter of the activation rows fills one
 * register, row c in block c: quarter j's part s of row c is block c of xp[s], its dg
 * and sx block c of dg and sx (zero past NX), while a weight row's part s, s and mo are
 * broadcast to all four blocks. Four chained dot products then leave group 4j + g of
 * pair (r, c) in lane 4c + g, and mm_tile_grp's two multiply-adds run for the four pairs
 * at once, on their accumulator lanes 4j .. 4j + 3, gathered from and put back where
 * they were: per lane the operations and the order of a whole chunk. The activations'
 * registers are the same for every tile of weight rows, so mm_qx_tail_pack builds them
 * once per call and group of MM_TX rows, into the group's first row (tp, matmul.h), and
 * the tiles load them (mm_tail_xload): 7 loads a tile instead of 28 masked broadcasts
 * (kernels/README.md). */
SIMD_INLINE void mm_tail_x512(int64_t n, const uint8_t *x, size_t xs, int j, __m512i xp[4],
                              __m512 *dg, __m512 *sx, __m512i *xo, const int NX) {
    const int64_t ch = mm_full_chunks(n);
    *dg = _mm512_setzero_ps(), *sx = _mm512_setzero_ps(), *xo = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) xp[s] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int c = 0; c < NX; c++) {
        const __mmask16 in_c = (__mmask16)(0xf << 4 * c);
        const uint8_t *xr = x + c * xs;
        const uint8_t *xq = xr + ch * QUANT_CHUNK + 64 * j;
#pragma GCC unroll 4
        for (int s = 0; s < 4; s++)
            xp[s] = _mm512_mask_broadcast_i32x4(xp[s], in_c, _mm_load_si128((const __m128i *)(xq + 16 * s)));
        *dg = _mm512_mask_broadcast_f32x4(*dg, in_c, _mm_load_ps(mm_qx_dg(xr, n) + 16 * ch + 4 * j));
        *sx = _mm512_mask_broadcast_f32x4(*sx, in_c, _mm_load_ps(mm_qx_sx(xr, n) + 16 * ch + 4 * j));
        *xo = _mm512_mask_broadcast_i32x4(
            *xo, in_c, _mm_load_si128((const __m128i *)(mm_qx_xo(xr, n) + 16 * ch + 4 * j)));
    }
}

void mm_qx_tail_pack(uint8_t *x, size_t xs, int64_t n, int nx) {
    uint8_t *tp = x + mm_qx_tp_at(n);
    for (int j = 0; j < mm_tail_quarters(n); j++, tp += MM_QX_TP_QUARTER) {
        __m512i xp[4], xo;
        __m512 dg, sx;
        switch (nx) { /* (NX must be a constant there) */
        case 1: mm_tail_x512(n, x, xs, j, xp, &dg, &sx, &xo, 1); break;
        case 2: mm_tail_x512(n, x, xs, j, xp, &dg, &sx, &xo, 2); break;
        case 3: mm_tail_x512(n, x, xs, j, xp, &dg, &sx, &xo, 3); break;
        default: mm_tail_x512(n, x, xs, j, xp, &dg, &sx, &xo, MM_TX); break;
        }
        for (int s = 0; s < 4; s++) _mm512_store_si512(tp + 64 * s, xp[s]);
        _mm512_store_ps(tp + 256, dg), _mm512_store_ps(tp + 320, sx);
        _mm512_store_si512(tp + 384, xo);
    }
}

/* The start of a group's dot product for integer offset io: xo (-128 sum q) >> io, exact
 * (-off sum q for off = 128 >> io) */
SIMD_INLINE __m512i mm_xo_at(__m512i xo, const int io) { return io ? _mm512_srai_epi32(xo, io) : xo; }

/* mm_tail_x512's registers as mm_qx_tail_pack stored them in x's first row */
SIMD_INLINE void mm_tail_xload(int64_t n, const uint8_t *x, int j, __m512i xp[4], __m512 *dg,
                               __m512 *sx, __m512i *xo) {
    const uint8_t *tp = mm_qx_tp(x, n) + (size_t)j * MM_QX_TP_QUARTER;
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++) xp[s] = _mm512_load_si512(tp + 64 * s);
    *dg = _mm512_load_ps(tp + 256), *sx = _mm512_load_ps(tp + 320);
    *xo = _mm512_load_si512(tp + 384);
}

/* Quarter j of prepared weight row q against the packed activations: a (the four pairs'
 * accumulator lanes) plus the quarter's terms. (io: see mm_tile_grp.) */
SIMD_INLINE __m512 mm_tail_fma512(const mm_prep *q, int j, const __m512i xp[4], __m512 dg,
                                  __m512 sx, __m512i xo, __m512 a, const int io) {
    __m512i p = io >= 0 ? mm_xo_at(xo, io) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s = 0; s < 4; s++)
        p = _mm512_dpbusd_epi32(
            p, _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(q->u + 64 * j + 16 * s))), xp[s]);
    const __m512 sw = _mm512_broadcast_f32x4(_mm_load_ps(q->s + 4 * j));
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(sw, dg), a);
    return io >= 0 ? a : _mm512_fmadd_ps(_mm512_broadcast_f32x4(_mm_load_ps(q->mo + 4 * j)), sx, a);
}

/* The tail added to acc[MM_TX * r + c], r < NW, one pair's lanes gathered and put back
 * at a time. */
SIMD_INLINE void mm_tail512(int64_t n, const mm_prep *w, const uint8_t *x,
                            __m512 acc[MM_TW * MM_TX], const int NW, const int NX, const int io) {
    const __m512i blk = _mm512_set_epi32(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0);
    for (int j = 0; j < mm_tail_quarters(n); j++) {
        __m512i xp[4], xo;
        __m512 dg, sx;
        mm_tail_xload(n, x, j, xp, &dg, &sx, &xo);
        const __m512i from_j = _mm512_add_epi32(blk, _mm512_set1_epi32(4 * j));
        const __mmask16 to_j = (__mmask16)(0xf << 4 * j);
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++) {
            __m512 a = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++)
                a = _mm512_mask_permutexvar_ps(a, (__mmask16)(0xf << 4 * c), from_j, acc[MM_TX * r + c]);
            a = mm_tail_fma512(w + r, j, xp, dg, sx, xo, a, io);
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++)
                acc[MM_TX * r + c] = _mm512_mask_permutexvar_ps(
                    acc[MM_TX * r + c], to_j, _mm512_add_epi32(blk, _mm512_set1_epi32(4 * c)), a);
        }
    }
}

/* Quarter j for a whole tile of weight rows, on the halves of vf_hsum16's first level
 * that hold it (lh: lo for j < 2, hi after): lh[2r] holds pairs (r, 0) and (r, 1), lh[2r +
 * 1] pairs (r, 2) and (r, 3), quarter j of each in block j % 2 and 2 + j % 2. One
 * permute gathers a row's four pairs, two put them back. */
SIMD_INLINE void mm_tail_lh512(const mm_prep *w, int j, const __m512i xp[4], __m512 dg,
                               __m512 sx, __m512i xo, __m512 lh[8], const int io) {
    const int jj = j % 2;
    const __m512i gather = _mm512_add_epi32(
        _mm512_set_epi32(27, 26, 25, 24, 19, 18, 17, 16, 11, 10, 9, 8, 3, 2, 1, 0), _mm512_set1_epi32(4 * jj));
    const __m512i put01 = _mm512_set_epi32(7, 6, 5, 4, 7, 6, 5, 4, 3, 2, 1, 0, 3, 2, 1, 0);
    const __m512i put23 = _mm512_add_epi32(put01, _mm512_set1_epi32(8));
    const __mmask16 at = (__mmask16)(0x0f0f << 4 * jj);
#pragma GCC unroll 4
    for (int r = 0; r < MM_TW; r++) {
        __m512 a = _mm512_permutex2var_ps(lh[2 * r], gather, lh[2 * r + 1]);
        a = mm_tail_fma512(w + r, j, xp, dg, sx, xo, a, io);
        lh[2 * r] = _mm512_mask_permutexvar_ps(lh[2 * r], at, put01, a);
        lh[2 * r + 1] = _mm512_mask_permutexvar_ps(lh[2 * r + 1], at, put23, a);
    }
}

/* The tail chunk, if any, then the sums stored (mm_put512); with a whole tile of weight
 * rows the tail works inside vf_hsum16, whose first level moves those blocks anyway. */
SIMD_INLINE void mm_finish512(int64_t n, const mm_prep *w, const uint8_t *x,
                              __m512 acc[MM_TW * MM_TX], float *y, int64_t ys, const int NW,
                              const int NX, const int io) {
    if (n % QUANT_CHUNK == 0 || NW != MM_TW) {
        if (n % QUANT_CHUNK) mm_tail512(n, w, x, acc, NW, NX, io);
        mm_put512(acc, y, ys, NW, NX);
        return;
    }
    __m512 lo[8], hi[8];
    vf_hsum16_lohi(acc, lo, hi);
    for (int j = 0; j < mm_tail_quarters(n); j++) {
        __m512i xp[4], xo;
        __m512 dg, sx;
        mm_tail_xload(n, x, j, xp, &dg, &sx, &xo);
        if (j < 2)
            mm_tail_lh512(w, j, xp, dg, sx, xo, lo, io);
        else
            mm_tail_lh512(w, j, xp, dg, sx, xo, hi, io);
    }
    mm_store16(vf_hsum16_rest(lo, hi), y, ys, NX);
}
#else
void mm_qx_tail_pack(uint8_t *x, size_t xs, int64_t n, int nx) { (void)x, (void)xs, (void)n, (void)nx; }
#endif

#if MM_Q8_SIMD && !MM_Q8_512
/* The int32 group sums of half h (groups 8h .. 8h + 7) of a chunk of weights u and
 * activations x: the four parts chained. In a tail chunk (nq quarters) half h is quarters
 * 2h and 2h + 1 (zero past nq), each its four parts chained. */
SIMD_INLINE __m256i mm_dot_half(const uint8_t *u, const uint8_t *x, int h, bool tail, int nq,
                                const bool sg) {
#if MM_Q8_VNNI
    (void)sg; /* (no signed tiles with dpbusd) */
#define MM_DOT256(p, a, b) MM_DPBUSD(p, a, b)
#define MM_DOT128(p, a, b) MM_DPBUSD128(p, a, b)
#else
/* (sg: signed weights a, multiplied as |a| by sign(b, a)) */
#define MM_DOT256(p, a, b)                                                                \
    _mm256_add_epi32(p, _mm256_madd_epi16(sg ? _mm256_maddubs_epi16(_mm256_abs_epi8(a),   \
                                                                    _mm256_sign_epi8(b, a)) \
                                             : _mm256_maddubs_epi16(a, b),                \
                                          _mm256_set1_epi16(1)))
#define MM_DOT128(p, a, b)                                                                \
    _mm_add_epi32(p, _mm_madd_epi16(sg ? _mm_maddubs_epi16(_mm_abs_epi8(a), _mm_sign_epi8(b, a)) \
                                       : _mm_maddubs_epi16(a, b),                         \
                                    _mm_set1_epi16(1)))
#endif
    if (!tail) {
        __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            p = MM_DOT256(p, _mm256_load_si256((const __m256i *)(u + 64 * k + 32 * h)),
                          _mm256_load_si256((const __m256i *)(x + 64 * k + 32 * h)));
        return p;
    }
    __m128i p[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
    for (int i = 0; i < 2 && 2 * h + i < nq; i++)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const int at = 64 * (2 * h + i) + 16 * k;
            p[i] = MM_DOT128(p[i], _mm_load_si128((const __m128i *)(u + at)),
                             _mm_load_si128((const __m128i *)(x + at)));
        }
#undef MM_DOT256
#undef MM_DOT128
    return _mm256_set_m128i(p[1], p[0]);
}
#endif

SIMD_INLINE void mm_tile_grp(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                             size_t xs, float *y, int64_t ys, const int io, const bool sg,
                             const int NW, const int NX) {
    (void)ws, (void)io, (void)sg;
    const mm_prep *pr = (const mm_prep *)w;
    const int64_t nfull = mm_full_chunks(n);
#if MM_Q8_512
    /* Two weight rows at a time, held in registers while all NX activation rows pass:
     * each part of x is then loaded once for both rows (loads, not arithmetic, bound
     * this loop). */
    const __m512i zero = _mm512_setzero_si512();
    __m512 sums[MM_TW * MM_TX]; /* [MM_TX * r + c], summed up at the end (mm_put512) */
#pragma GCC unroll 16
    for (int i = 0; i < MM_TW * MM_TX; i++) sums[i] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int r0 = 0; r0 < NW; r0 += 2) {
        const int nr = NW - r0 < 2 ? NW - r0 : 2;
        __m512 acc[2][MM_TX];
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) acc[r][c] = _mm512_setzero_ps();
        const mm_prep *q = pr + r0;
        for (int64_t ch = 0; ch < nfull; ch++, q += NW) {
            __m512i u[2][4];
            __m512 sw[2], mo[2];
#pragma GCC unroll 2
            for (int r = 0; r < nr; r++) {
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) u[r][k] = _mm512_load_si512(q[r].u + 64 * k);
                sw[r] = _mm512_load_ps(q[r].s);
                mo[r] = io >= 0 ? _mm512_setzero_ps() : _mm512_load_ps(q[r].mo);
            }
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) {
                const uint8_t *xr = x + c * xs;
                const uint8_t *xq = xr + ch * QUANT_CHUNK;
                __m512 dg = _mm512_load_ps(mm_qx_dg(xr, n) + 16 * ch);
                __m512 sx = io >= 0 ? _mm512_setzero_ps() : _mm512_load_ps(mm_qx_sx(xr, n) + 16 * ch);
                /* (the empty asm keeps these, and each xv below, in a register: folded
                 * into the instructions as memory operands they were loaded once per
                 * weight row, and loads, not arithmetic, bound the loop) */
                __asm__("" : "+v"(dg), "+v"(sx));
                const __m512i p0 = io >= 0 ? mm_xo_at(_mm512_load_si512(mm_qx_xo(xr, n) + 16 * ch), io) : zero;
                __m512i p[2] = {p0, p0};
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    __m512i xv = _mm512_load_si512(xq + 64 * k);
                    __asm__("" : "+v"(xv));
#pragma GCC unroll 2
                    for (int r = 0; r < nr; r++) p[r] = _mm512_dpbusd_epi32(p[r], u[r][k], xv);
                }
#pragma GCC unroll 2
                for (int r = 0; r < nr; r++) {
                    __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r]), _mm512_mul_ps(sw[r], dg),
                                               acc[r][c]);
                    acc[r][c] = io >= 0 ? a : _mm512_fmadd_ps(mo[r], sx, a);
                }
            }
        }
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++)
#pragma GCC unroll 4
            for (int c = 0; c < NX; c++) sums[MM_TX * (r0 + r) + c] = acc[r][c];
    }
    mm_finish512(n, pr + nfull * NW, x, sums, y, ys, NW, NX, io);
#elif MM_Q8_SIMD
    /* the low and high 32 bytes of each part are groups 0..7 and 8..15 */
    const int64_t nch = nfull + (n % QUANT_CHUNK != 0);
    const int nq = mm_tail_quarters(n);
    __m256 acc[MM_TW][MM_TX];
#pragma GCC unroll 4
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t ch = 0; ch < nch; ch++, pr += NW) {
        const bool tail = ch == nfull;
        const int nh = tail ? (nq + 1) / 2 : 2; /* halves with groups in them */
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const uint8_t *xq = xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m256 a = acc[r][c];
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++)
                    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mm_dot_half(pr[r].u, xq, h, tail, nq, sg)),
                                        _mm256_mul_ps(_mm256_loadu_ps(pr[r].s + 8 * h),
                                                      _mm256_loadu_ps(dg + 8 * h)), a);
#pragma GCC unroll 2
                for (int h = 0; h < nh; h++)
                    a = _mm256_fmadd_ps(_mm256_loadu_ps(pr[r].mo + 8 * h), _mm256_loadu_ps(sx + 8 * h), a);
                acc[r][c] = a;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = mm_hsum256(acc[r][c]);
#else
    const int64_t nch = nfull + (n % QUANT_CHUNK != 0);
    float acc[MM_TW][MM_TX] = {{0}};
    for (int64_t ch = 0; ch < nch; ch++, pr += NW) {
        const bool tail = ch == nfull;
        const int ng = tail ? 4 * mm_tail_quarters(n) : 16; /* groups with values in them */
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const int8_t *xq = (const int8_t *)xr + ch * QUANT_CHUNK;
            const float *dg = mm_qx_dg(xr, n) + 16 * ch, *sx = mm_qx_sx(xr, n) + 16 * ch;
            for (int r = 0; r < NW; r++) {
                float a = acc[r][c];
                for (int g = 0; g < ng; g++) {
                    int32_t s = 0;
                    for (int k = 0; k < 4; k++)
                        for (int b = 0; b < 4; b++) {
                            const int at = tail ? mm_tail_pos(16 * g + 4 * k + b)
                                                : mm_grp_pos(16 * g + 4 * k + b);
                            s += (sg ? (int8_t)pr[r].u[at] : pr[r].u[at]) * xq[at];
                        }
                    a += (float)s * (pr[r].s[g] * dg[g]);
                }
                for (int g = 0; g < ng; g++) a += pr[r].mo[g] * sx[g];
                acc[r][c] = a;
            }
        }
    }
    for (int r = 0; r < NW; r++)
        for (int c = 0; c < NX; c++) y[c * ys + r] = acc[r][c];
#endif
}

/* One set of tiles per integer offset (mm_int_off): -1 (the offset term in float), 0 .. 4;
 * and for signed weights (mm_lut_signed) */
#define MM_GRP_TILES(name, io_, sg_)                                                      \
    SIMD_INLINE void name(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,       \
                          size_t xs, float *y, int64_t ys, const int NW, const int NX) {  \
        mm_tile_grp(n, w, ws, x, xs, y, ys, io_, sg_, NW, NX);                            \
    }                                                                                     \
    MM_TILES(name)
MM_GRP_TILES(mm_tile_blk, -1, false)
#if MM_Q8_512
MM_GRP_TILES(mm_tile_io0, 0, false)
MM_GRP_TILES(mm_tile_io2, 2, false)
MM_GRP_TILES(mm_tile_io3, 3, false)
MM_GRP_TILES(mm_tile_io4, 4, false)
#endif
#if MM_Q8_SIMD && !MM_Q8_VNNI && !MM_Q8_512
MM_GRP_TILES(mm_tile_sgn, -1, true)
#endif

#if MM_Q8_512
/* ---- the fused tile, for a few activation rows --------------------------------------
 * With one group of activation rows (decode) nothing is gained by preparing a tile's
 * rows whole first, and the prepared rows (up to 34 KB for 4 rows of 5632) leave L1
 * (kernels/README.md). This tile prepares one chunk of
 * its NW rows at a time (1.5 KB, on the stack) and multiplies it at once. Per (weight row,
 * activation row) pair it does mm_tile_grp's operations in mm_tile_grp's order (the
 * chained dot products of the four parts, then the two multiply-adds), so its results
 * are bitwise those of the prepared path. */
SIMD_INLINE void mm_tile_fused(int64_t n, const uint8_t *w, size_t ws, const uint8_t *x,
                               size_t xs, float *y, int64_t ys, const uint32_t type,
                               const int NW, const int NX) {
    const int bn = mm_blk_n(type), bb = mm_blk_bytes(type), per_chunk = QUANT_CHUNK / bn;
    const int io = mm_int_off(type);
    const int64_t nfull = mm_full_chunks(n);
    const size_t ahead = MM_AHEAD * (size_t)NW * ws;
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[MM_TW * MM_TX]; /* [MM_TX * r + c], as mm_put512 takes them */
#pragma GCC unroll 16
    for (int i = 0; i < MM_TW * MM_TX; i++) acc[i] = _mm512_setzero_ps();
    mm_prep q[MM_TW];
    for (int64_t ch = 0; ch < nfull; ch++) {
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++)
            mm_blk_prep(type, w + r * ws + ch * per_chunk * bb, per_chunk, ahead, &q[r]);
#pragma GCC unroll 4
        for (int c = 0; c < NX; c++) {
            const uint8_t *xr = x + c * xs;
            const uint8_t *xq = xr + ch * QUANT_CHUNK;
            const __m512 dg = _mm512_load_ps(mm_qx_dg(xr, n) + 16 * ch);
            const __m512 sx = io >= 0 ? _mm512_setzero_ps() : _mm512_load_ps(mm_qx_sx(xr, n) + 16 * ch);
            const __m512i p0 = io >= 0 ? mm_xo_at(_mm512_load_si512(mm_qx_xo(xr, n) + 16 * ch), io) : zero;
            __m512i p[MM_TW];
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) p[r] = p0;
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                const __m512i xv = _mm512_load_si512(xq + 64 * k);
#pragma GCC unroll 4
                for (int r = 0; r < NW; r++)
                    p[r] = _mm512_dpbusd_epi32(p[r], _mm512_load_si512(q[r].u + 64 * k), xv);
            }
#pragma GCC unroll 4
            for (int r = 0; r < NW; r++) {
                __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r]),
                                           _mm512_mul_ps(_mm512_load_ps(q[r].s), dg), acc[MM_TX * r + c]);
                acc[MM_TX * r + c] = io >= 0 ? a : _mm512_fmadd_ps(_mm512_load_ps(q[r].mo), sx, a);
            }
        }
    }
    if (n % QUANT_CHUNK) { /* (small types only) */
        const int cnb = (int)(n / bn - nfull * per_chunk);
#pragma GCC unroll 4
        for (int r = 0; r < NW; r++)
            mm_blk_prep(type, w + r * ws + nfull * per_chunk * bb, cnb, ahead, &q[r]);
    }
    mm_finish512(n, q, x, acc, y, ys, NW, NX, io);
}
#define MM_FUSED_TYPE(name, T)                                                            \
    SIMD_INLINE void mm_fused_##name(int64_t n, const uint8_t *w, size_t ws,              \
                                     const uint8_t *x, size_t xs, float *y, int64_t ys,   \
                                     const int NW, const int NX) {                        \
        mm_tile_fused(n, w, ws, x, xs, y, ys, T, NW, NX);                                 \
    }                                                                                     \
    MM_TILES(mm_fused_##name)
#else
#define MM_FUSED_TYPE(name, T)
#endif

/* One preparer per type: the type is a constant in each, so quant_unpack's switch and
 * the block sizes fold away. */
#define MM_BLK_TYPE(name, T)                                                              \
    static void mm_prep_##name(int64_t n, const uint8_t *w, size_t ws, int nw,            \
                               mm_prep *dst) {                                            \
        mm_prep_blk(n, w, ws, nw, dst, T);                                                \
    }                                                                                     \
    MM_FUSED_TYPE(name, T)

MM_BLK_TYPE(q4_0, DT_Q4_0)
MM_BLK_TYPE(q4_1, DT_Q4_1)
MM_BLK_TYPE(q5_0, DT_Q5_0)
MM_BLK_TYPE(q5_1, DT_Q5_1)
MM_BLK_TYPE(q4_k, DT_Q4_K)
MM_BLK_TYPE(q5_k, DT_Q5_K)
MM_BLK_TYPE(q6_k, DT_Q6_K)
MM_BLK_TYPE(q2_k, DT_Q2_K)
MM_BLK_TYPE(q3_k, DT_Q3_K)
MM_BLK_TYPE(iq4_nl, DT_IQ4_NL)
MM_BLK_TYPE(iq4_xs, DT_IQ4_XS)
MM_BLK_TYPE(mxfp4, DT_MXFP4)
#if MM_Q8_512
MM_BLK_TYPE(q8_0, DT_Q8_0)
#endif

mm_prep_fn mm_quant_prep(uint32_t type) {
    switch (type) {
    case DT_Q4_0: return mm_prep_q4_0;
    case DT_Q4_1: return mm_prep_q4_1;
    case DT_Q5_0: return mm_prep_q5_0;
    case DT_Q5_1: return mm_prep_q5_1;
    case DT_Q4_K: return mm_prep_q4_k;
    case DT_Q5_K: return mm_prep_q5_k;
    case DT_Q6_K: return mm_prep_q6_k;
    case DT_Q2_K: return mm_prep_q2_k;
    case DT_Q3_K: return mm_prep_q3_k;
    case DT_IQ4_NL: return mm_prep_iq4_nl;
    case DT_IQ4_XS: return mm_prep_iq4_xs;
    case DT_MXFP4: return mm_prep_mxfp4;
#if MM_Q8_512
    case DT_Q8_0: return mm_prep_q8_0;
#endif
    default: return NULL;
    }
}

mm_tile_row *mm_quant_tiles(uint32_t type) {
#if MM_Q8_512
    switch (mm_int_off(type)) {
    case 0: return mm_tile_io0_tiles;
    case 2: return mm_tile_io2_tiles;
    case 3: return mm_tile_io3_tiles;
    case 4: return mm_tile_io4_tiles;
    default: break;
    }
#endif
#if MM_Q8_SIMD && !MM_Q8_VNNI && !MM_Q8_512
    if (mm_lut_signed(type)) return mm_tile_sgn_tiles;
#endif
    return mm_quant_prep(type) ? mm_tile_blk_tiles : NULL;
}

mm_tile_row *mm_quant_fused(uint32_t type) {
#if MM_Q8_512
    switch (type) {
    case DT_Q4_0: return mm_fused_q4_0_tiles;
    case DT_Q4_1: return mm_fused_q4_1_tiles;
    case DT_Q5_0: return mm_fused_q5_0_tiles;
    case DT_Q5_1: return mm_fused_q5_1_tiles;
    case DT_Q4_K: return mm_fused_q4_k_tiles;
    case DT_Q5_K: return mm_fused_q5_k_tiles;
    case DT_Q6_K: return mm_fused_q6_k_tiles;
    case DT_Q8_0: return mm_fused_q8_0_tiles;
    case DT_Q2_K: return mm_fused_q2_k_tiles;
    case DT_Q3_K: return mm_fused_q3_k_tiles;
    case DT_IQ4_NL: return mm_fused_iq4_nl_tiles;
    case DT_IQ4_XS: return mm_fused_iq4_xs_tiles;
    case DT_MXFP4: return mm_fused_mxfp4_tiles;
    default: return NULL;
    }
#else
    (void)type;
    return NULL;
#endif
}
