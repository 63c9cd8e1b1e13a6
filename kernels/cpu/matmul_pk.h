/* matmul_pk.h - what the packed form's layout (matmul_pk.c: packing and the row loop)
 * and its tiles (matmul_pk512.c with AVX-512 VNNI, matmul_pkv.c with AVX2) share: the
 * bytes of a block's quants and scales in an o-block of 16 weight rows, and the table of
 * tiles a level hands to the row loop. Layout and arithmetic: matmul_pk.c. Private to
 * kernels/cpu. */
#ifndef MD_CPU_MATMUL_PK_H
#define MD_CPU_MATMUL_PK_H

#include "unpack.h"

#if MM_PK

/* bits a value of the type has, and bytes of the quants of one block of an o-block: a
 * 64-byte part per bit (4 nibble parts, then one part of fifth bits or two of top 2
 * bits; Q2_K, Q3_K: 2 parts of 2-bit values, then Q3_K's part of third bits; Q8_0 8 parts
 * of bytes) */
SIMD_INLINE int mm_pk_bits(uint32_t type) {
    switch (type) {
    case DT_Q8_0: return 8;
    case DT_Q6_K: return 6;
    case DT_Q5_0: case DT_Q5_1: case DT_Q5_K: return 5;
    case DT_Q3_K: return 3;
    case DT_Q2_K: return 2;
    default: return 4;
    }
}
SIMD_INLINE int mm_pk_qbytes(uint32_t type) { return 64 * mm_pk_bits(type); }
/* the types whose blocks have a float min (w = d q + m), and the K types' (w = d sc q -
 * dmin mn) */
SIMD_INLINE bool mm_pk_minf(uint32_t type) { return type == DT_Q4_1 || type == DT_Q5_1; }
SIMD_INLINE bool mm_pk_k(uint32_t type) { return type == DT_Q4_K || type == DT_Q5_K; }
/* the types whose integer sum starts at -off * sum q, off = 1 << mm_pk_shift */
SIMD_INLINE bool mm_pk_ioff(uint32_t type) {
    return type == DT_Q4_0 || type == DT_Q5_0 || type == DT_Q8_0;
}
SIMD_INLINE int mm_pk_shift(uint32_t type) { return type == DT_Q8_0 ? 7 : type == DT_Q5_0 ? 4 : 3; }

/* bytes of a K type's super block of scales in an o-block: Q4_K, Q5_K: the 16 rows' fp16
 * d and dmin, then per sub-block their 6-bit sc, then their mn, a byte each; Q6_K: the 16
 * rows' fp16 d, then per group of 16 values their int8 scales */
#define MM_PK_KSC (64 + 2 * 8 * 16)
#define MM_PK_6SC (32 + 16 * 16)
/* Q3_K's: as Q6_K's (its 6-bit scales less 32); Q2_K's: the 16 rows' fp16 d and dmin, then
 * per group of 16 values their 4-bit scales, then their mins, a byte each */
#define MM_PK_2SC (64 + 2 * 16 * 16)
SIMD_INLINE int mm_pk_ksc_bytes(uint32_t type) {
    return type == DT_Q6_K || type == DT_Q3_K ? MM_PK_6SC : type == DT_Q2_K ? MM_PK_2SC : MM_PK_KSC;
}

/* y[r * ys + 16 o + lane] for activation rows r < R and o-blocks o < OB at w (obs bytes
 * apart), nb blocks; x: R rows of the MM_QX_BLK form, xs bytes apart, np = mm_qx_np. */
typedef void (*mm_pk_fn)(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, size_t xs,
                         int64_t np, float *y, int64_t ys);

/* A level's tiles for a type: [OB - 1][R - 1]. */
typedef const mm_pk_fn mm_pk_row[MM_PK_RX];
mm_pk_row *mm_pk_tiles(uint32_t type);

/* The wide form of an o-block: its quants as bytes, one value each (below 1 << bits),
 * MM_PK_WQB a block in 8 parts of 64 like Q8_0's (part s, byte 4 o + i: value 4 s + i of
 * row o), then its scales as packed. mm_pk_widen writes it for the o-block at w (obs
 * bytes, nb blocks) to dst; the wide tiles (the same sums, in the same order, as
 * mm_pk_tiles's) read it, with obs as given. NULL where a level has none. */
#define MM_PK_WQB 512
void mm_pk_widen(uint32_t type, int64_t nb, const uint8_t *w, size_t obs, uint8_t *dst);
mm_pk_row *mm_pk_wide_tiles(uint32_t type);

/* The lookup-table types' tiles and packing (matmul_pk_iq.c): mm_pk_lut_pack packs the
 * 16 stored rows at src (rs bytes apart, nb blocks of 32) into the zeroed o-block at ob. */
mm_pk_row *mm_pk_lut_tiles(uint32_t type);
void mm_pk_lut_pack(uint32_t type, const uint8_t *src, size_t rs, int64_t nb, uint8_t *ob);

/* Instantiates the tile template tmpl(nb, w, obs, x, xs, np, y, ys, type, R, OB) for
 * type T and every R, OB, and the table mm_pk_tiles hands out. */
#define MM_PK_FN(tmpl, name, T, r, ob)                                                     \
    static void name##_##r##x##ob(int64_t nb, const uint8_t *w, size_t obs, const uint8_t *x, \
                                  size_t xs, int64_t np, float *y, int64_t ys) {            \
        tmpl(nb, w, obs, x, xs, np, y, ys, T, r, ob);                                       \
    }
#define MM_PK_FNS_R(tmpl, name, T, ob)                                                     \
    MM_PK_FN(tmpl, name, T, 1, ob) MM_PK_FN(tmpl, name, T, 2, ob)                          \
    MM_PK_FN(tmpl, name, T, 3, ob) MM_PK_FN(tmpl, name, T, 4, ob)
#define MM_PK_ROW(name, ob) {name##_1x##ob, name##_2x##ob, name##_3x##ob, name##_4x##ob}
#if MM_PK_OB == 2
#define MM_PK_TYPE(tmpl, name, T)                                                          \
    MM_PK_FNS_R(tmpl, name, T, 1) MM_PK_FNS_R(tmpl, name, T, 2)                            \
    static mm_pk_row name##_fns[2] = {MM_PK_ROW(name, 1), MM_PK_ROW(name, 2)};
#else
#define MM_PK_TYPE(tmpl, name, T)                                                          \
    MM_PK_FNS_R(tmpl, name, T, 1) static mm_pk_row name##_fns[1] = {MM_PK_ROW(name, 1)};
#endif
_Static_assert(MM_PK_RX == 4 && MM_PK_OB <= 2, "MM_PK_TYPE spells out R 1..4, OB 1..2");

/* fname (mm_pk_tiles, mm_pk_wide_tiles) for a level whose tables MM_PK_TYPE named
 * PREFIX_q4_0 .. PREFIX_q5_k */
#define MM_PK_TABLES(prefix, fname)                                                        \
    mm_pk_row *fname(uint32_t type) {                                                \
        switch (type) {                                                                    \
        case DT_Q4_0: return prefix##_q4_0_fns;                                            \
        case DT_Q4_1: return prefix##_q4_1_fns;                                            \
        case DT_Q5_0: return prefix##_q5_0_fns;                                            \
        case DT_Q5_1: return prefix##_q5_1_fns;                                            \
        case DT_Q4_K: return prefix##_q4_k_fns;                                            \
        case DT_Q5_K: return prefix##_q5_k_fns;                                            \
        case DT_Q6_K: return prefix##_q6_k_fns;                                            \
        default: return prefix##_q8_0_fns;                                                 \
        }                                                                                  \
    }
#define MM_PK_ALL_TYPES(tmpl, prefix, fname)                                               \
    MM_PK_TYPE(tmpl, prefix##_q4_0, DT_Q4_0) MM_PK_TYPE(tmpl, prefix##_q4_1, DT_Q4_1)      \
    MM_PK_TYPE(tmpl, prefix##_q5_0, DT_Q5_0) MM_PK_TYPE(tmpl, prefix##_q5_1, DT_Q5_1)      \
    MM_PK_TYPE(tmpl, prefix##_q4_k, DT_Q4_K) MM_PK_TYPE(tmpl, prefix##_q5_k, DT_Q5_K)      \
    MM_PK_TYPE(tmpl, prefix##_q6_k, DT_Q6_K) MM_PK_TYPE(tmpl, prefix##_q8_0, DT_Q8_0)      \
    MM_PK_TABLES(prefix, fname)

#endif
#endif
