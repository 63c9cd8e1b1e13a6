/* matmul_pk.c - the packed form of the block types' weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q4_K, Q5_K, Q6_K; Q2_K, Q3_K but with AVX-512; kern_mat_pack): its layout, the packing,
 * and the loop over a matrix's rows that calls a level's tiles (matmul_pk512.c with AVX-512 VNNI, matmul_pkv.c with
 * AVX2 and NEON; none in plain C builds, which keep the stored form). The lookup-table
 * types IQ4_NL, IQ4_XS and MXFP4 are packed on those three levels by matmul_pk_iq.c, whose
 * tiles this row loop calls too.
 *
 * The tiles of matmul_quant.c put 16 groups of one weight row in a vector, so every 4
 * int8 dot products end in a float conversion, a scale product and one or two
 * multiply-adds per pair of rows: float work that shares pipes with the dot products
 * and capped those tiles (kernels/README.md). Here lane o of a vector is weight row o
 * of a block of 16 rows (AVX2: of one half of it), and an activation row's 4 values are
 * broadcast to all lanes: the 8 dot products of a 32-value block go into one integer sum
 * per (16 rows, activation row), then one scale product and one or two multiply-adds.
 * A weight vector, unpacked once, serves up to MM_PK_RX activation rows. There is no
 * preparing pass and no horizontal sum: a lane ends as one output; and the weights are
 * packed once, when a context is made, not at every product.
 *
 * Packed form, per block of 16 weight rows (an o-block): the quants of its blocks of 32
 * values, block by block (mm_pk_qbytes each; layout: mm_pk_quants, and Q8_0's 8 parts of
 * values plus 128, unsigned as the dot product wants), then the scales: per block of 32
 * the 16 rows' fp16 d (32 bytes) and then (Q4_1, Q5_1) their fp16 m; for the K types per
 * super block of 256 (MM_PK_KSC, MM_PK_6SC). Padded to 64 bytes (mm_pk_ob_bytes). The
 * same bytes as stored but for that padding and the K types' scales as bytes
 * (mm_pk_extra). n_out must be a multiple of 16; other matrices stay as stored.
 *
 * Arithmetic of output (o, activation row r): for each block b in order, the integer sum
 * P = sum_j u_j q_j, started at -off * sum_j q_j for the offset types (Q4_0: 8, Q8_0: 128;
 * exact in int32), then y = fma(float(P), d_w * d_x, y) and for Q4_1 y = fma(m_w, s_x, y)
 * with s_x = d_x * sum_j q_j (Q5_0: off 16; Q5_1 as Q4_1; Q4_K, Q5_K: d_w = d * sc, y =
 * y - (dmin * mn) * s_x; Q6_K: two sums a block, one per group of 16 with its own d_w =
 * d * sc, started at -32 times the group's sum of q). The same for every r, in any
 * batch, on any thread: a row's results do not depend on the rows beside it (forest
 * steps rely on it). They differ from the stored form's by float rounding (the stored
 * tiles sum groups of 16 first). Every level computes the same integer sums and the same
 * float operations in the same order, so AVX2 and AVX-512 give the same bits; but the K
 * types, which AVX2 and NEON multiply by activations with one scale per 256 values
 * (MM_QX_KSB: their sub-block scales go into the integer sums, matmul_pkv.c), so those
 * differ from AVX-512's by the activations' rounding. */
#include <stdlib.h>
#include <string.h>

#include "matmul_pk.h"

#if MM_PK

/* Lane o of one block's quants at dst (zeroed before), from its 32 values u (value order,
 * below 1 << bits). Nibble part p: byte 4o + i holds the low 4 bits of values 4p + i and
 * 16 + 4p + i. 5 bits: one part more whose byte 4o + i holds the fifth bits of the two
 * values of part p's byte at bits 2p, 2p + 1. 6 bits: two parts more; in part h, byte 4o
 * + i holds the top 2 bits of those of parts 2h and 2h + 1 at bits 0-1, 2-3 and 4-5, 6-7. */
static void mm_pk_quants(const uint8_t *u, int bits, int o, uint8_t *dst) {
    if (bits <= 3) { /* 2-bit part s / 2, bits 2 (s % 2) + 4 e: value 16 e + 4 s + i */
        for (int v = 0; v < 32; v++) {
            const int e = v / 16, s = v % 16 / 4, i = v % 4;
            dst[64 * (s / 2) + 4 * o + i] |= (uint8_t)((u[v] & 3) << (2 * (s % 2) + 4 * e));
            if (bits == 3) dst[128 + 4 * o + i] |= (uint8_t)((u[v] >> 2 & 1) << (2 * s + e));
        }
        return;
    }
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < 4; i++) {
            const uint8_t lo = u[4 * p + i], hi = u[16 + 4 * p + i];
            dst[64 * p + 4 * o + i] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            if (bits == 5)
                dst[256 + 4 * o + i] |= (uint8_t)(((lo >> 4) | (hi >> 4) << 1) << 2 * p);
            else if (bits == 6)
                dst[256 + 64 * (p / 2) + 4 * o + i] |=
                    (uint8_t)(((lo >> 4) | (hi >> 4) << 2) << 4 * (p % 2));
        }
}

/* Packs super block s of the 16 stored rows of a K type at src (rs bytes apart) into the
 * o-block at ob (nb blocks of 32). */
static void mm_pk_super(uint32_t type, const uint8_t *src, size_t rs, int64_t s, int64_t nb,
                        uint8_t *ob) {
    const int qb = mm_pk_qbytes(type), bits = mm_pk_bits(type);
    uint8_t *ks = ob + nb * qb + s * mm_pk_ksc_bytes(type);
    for (int o = 0; o < 16; o++) {
        const uint8_t *blk = src + (size_t)o * rs + (size_t)s * (size_t)mm_blk_bytes(type);
        if (type == DT_Q6_K) {
            const block_q6_K *b6 = (const block_q6_K *)blk;
            memcpy(ks + 2 * o, &b6->d, 2);
            for (int g = 0; g < 16; g++) ks[32 + 16 * g + o] = (uint8_t)b6->scales[g];
        } else if (type == DT_Q3_K) {
            const block_q3_K *b3 = (const block_q3_K *)blk;
            memcpy(ks + 2 * o, blk + 108, 2); /* d */
            for (int g = 0; g < 16; g++) {
                const int lo = (g < 8 ? b3->scales[g] : b3->scales[g - 8] >> 4) & 15;
                ks[32 + 16 * g + o] = (uint8_t)((lo | (b3->scales[8 + g % 4] >> 2 * (g / 4) & 3) << 4) - 32);
            }
        } else if (type == DT_Q2_K) {
            memcpy(ks + 2 * o, blk + 80, 2);      /* d */
            memcpy(ks + 32 + 2 * o, blk + 82, 2); /* dmin */
            for (int g = 0; g < 16; g++) ks[64 + 16 * g + o] = blk[g] & 15, ks[320 + 16 * g + o] = blk[g] >> 4;
        } else {
            memcpy(ks + 2 * o, blk, 2);          /* d */
            memcpy(ks + 32 + 2 * o, blk + 2, 2); /* dmin */
            uint64_t sc, mn;
            quant_k_scales(blk + 4, &sc, &mn);
            for (int j = 0; j < 8; j++) {
                ks[64 + 16 * j + o] = (uint8_t)(sc >> 8 * j);
                ks[192 + 16 * j + o] = (uint8_t)(mn >> 8 * j);
            }
        }
        quant_chunk c;
        quant_unpack(type, blk, 8, &c);
        for (int j = 0; j < 8; j++) mm_pk_quants(c.u + 32 * j, bits, o, ob + (8 * s + j) * qb);
    }
}

/* Packs block b of the 16 stored rows of a block type of 32 at src (rs bytes apart) into
 * the o-block at ob (nb blocks). */
static void mm_pk_block(uint32_t type, const uint8_t *src, size_t rs, int64_t b, int64_t nb,
                        uint8_t *ob) {
    const int bb = mm_blk_bytes(type), qb = mm_pk_qbytes(type);
    uint8_t *dst = ob + b * qb, *sc = ob + nb * qb + 32 * b;
    for (int o = 0; o < 16; o++) {
        const uint8_t *blk = src + (size_t)o * rs + (size_t)b * (size_t)bb;
        memcpy(sc + 2 * o, blk, 2); /* d */
        if (mm_pk_minf(type)) memcpy(sc + 32 * nb + 2 * o, blk + 2, 2); /* m */
        if (mm_pk_bits(type) == 5) {
            quant_chunk c;
            quant_unpack(type, blk, 1, &c);
            mm_pk_quants(c.u, 5, o, dst);
            continue;
        }
        /* Q4_0, Q4_1, Q8_0: their bytes as stored already are what the parts hold */
        const uint8_t *qs = blk + (type == DT_Q4_1 ? 4 : 2);
        for (int s = 0; s < qb / 64; s++) {
            uint32_t v;
            memcpy(&v, qs + 4 * s, 4);
            if (type == DT_Q8_0) v ^= 0x80808080u; /* + 128 in each byte */
            memcpy(dst + 64 * s + 4 * o, &v, 4);
        }
    }
}

void mm_pk_rows(uint32_t type, int64_t n_in, const uint8_t *w, int64_t o0, int64_t o1,
                const uint8_t *x, size_t xs, int32_t n_rows, float *y, int64_t n_out,
                uint8_t *wide) {
    const bool widen = wide && mm_pk_wide_bytes(type, n_in, n_rows) > 0;
    mm_pk_row *fns = mm_pk_lut(type) ? mm_pk_lut_tiles(type)
                     : widen          ? mm_pk_wide_tiles(type)
                                      : mm_pk_tiles(type);
    const int64_t nb = n_in / 32, np = mm_qx_np(n_in);
    const size_t obs = mm_pk_ob_bytes(type, n_in);
    for (int64_t o = o0; o < o1; o += 16 * MM_PK_OB) {
        const int ob = o1 - o < 16 * MM_PK_OB ? (int)((o1 - o) / 16) : MM_PK_OB;
        const uint8_t *wo = w + (size_t)(o / 16) * obs;
        if (widen) { /* (MM_PK_OB is 1 where there are wide tiles) */
            mm_pk_widen(type, nb, wo, obs, wide);
            wo = wide;
        }
        for (int32_t r0 = 0; r0 < n_rows; r0 += MM_PK_RX) {
            const int nr = n_rows - r0 < MM_PK_RX ? n_rows - r0 : MM_PK_RX;
            fns[ob - 1][nr - 1](nb, wo, obs, x + (size_t)r0 * xs, xs, np, y + (int64_t)r0 * n_out + o, n_out);
        }
    }
}

#endif

/* The wide form of an o-block (mm_pk_widen) and its tiles, for batches of more rows than
 * a tile takes: each o-block's quants unpacked once into the thread's scratch, where its
 * every group of rows reads them as bytes, instead of unpacking them again per group.
 * 4-bit quants unpack in two operations a vector, so for them the widening pays only
 * from more than MM_PK_WIDE4_ROWS rows (kernels/README.md). */
#define MM_PK_WIDE4_ROWS 64
size_t mm_pk_wide_bytes(uint32_t type, int64_t n, int32_t n_rows) {
#if MM_PK
    if (n_rows <= MM_PK_RX || type == DT_Q8_0 || mm_pk_lut(type) || !mm_pk_wide_tiles(type))
        return 0;
    if (mm_pk_bits(type) == 4 && n_rows <= MM_PK_WIDE4_ROWS) return 0;
    const int64_t nb = n / 32;
    return mm_pk_ob_bytes(type, n) - (size_t)nb * mm_pk_qbytes(type) + (size_t)nb * MM_PK_WQB;
#else
    (void)type, (void)n, (void)n_rows;
    return 0; /* (no packed form here) */
#endif
}

#if MM_PK
/* The o-blocks of a matrix one pool task packs: the stored rows at w, into out. */
typedef struct mm_pack_job {
    const kern_mat *w;
    uint8_t *out;
    size_t rs, obs;
    int64_t per; /* o-blocks a task */
} mm_pack_job;

static void mm_pack_task(void *ctx, int32_t task, int32_t thread) {
    (void)thread;
    const mm_pack_job *j = ctx;
    const kern_mat *w = j->w;
    const int64_t nb = w->n_in / 32, n_ob = w->n_out / 16, step = mm_blk_n(w->type) / 32;
    const int64_t ob0 = task * j->per, ob1 = ob0 + j->per < n_ob ? ob0 + j->per : n_ob;
    /* (zeroed here, not by the caller: the padding, and the high-bit parts the packers or
     * into; each task's pages are then first touched by the thread that fills them) */
    memset(j->out + (size_t)ob0 * j->obs, 0, (size_t)(ob1 - ob0) * j->obs);
    for (int64_t ob = ob0; ob < ob1; ob++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)(16 * ob) * j->rs;
        uint8_t *dst = j->out + (size_t)ob * j->obs;
        if (mm_pk_lut(w->type)) {
            mm_pk_lut_pack(w->type, src, j->rs, nb, dst);
            continue;
        }
        for (int64_t b = 0; b < nb; b += step)
            if (step > 1)
                mm_pk_super(w->type, src, j->rs, b / 8, nb, dst);
            else
                mm_pk_block(w->type, src, j->rs, b, nb, dst);
    }
}
#endif

void *kern_mat_pack(const kern_mat *w, size_t *bytes, pool *p) {
#if MM_PK
    if (!mm_pk_type(w->type) || !dtype_row_ok(w->type, w->n_in) || w->n_in <= 0 || w->n_out <= 0 ||
        w->n_out % 16)
        return NULL;
    mm_pack_job j = {w, NULL, dtype_row_bytes(w->type, w->n_in), mm_pk_ob_bytes(w->type, w->n_in), 0};
    const int64_t n_ob = w->n_out / 16;
    const size_t total = j.obs * (size_t)n_ob;
    j.out = kern_aligned_alloc(total);
    if (!j.out) return NULL;
    /* a few tasks a thread, for threads that start late; small matrices in one */
    const int64_t n_tasks = total < (64u << 10) ? 1 : 4 * (int64_t)pool_threads(p);
    j.per = (n_ob + n_tasks - 1) / n_tasks;
    pool_run(p, (int32_t)((n_ob + j.per - 1) / j.per), mm_pack_task, &j);
    if (bytes) *bytes = total;
    return j.out;
#else
    (void)w, (void)bytes, (void)p;
    return NULL;
#endif
}
