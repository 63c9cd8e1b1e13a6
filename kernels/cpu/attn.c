/* attn.c - the CPU backend's segment attention (kern_attn in kern.h).
 *
 * One pass over a row's KV segments with an online softmax: the row's key sequence (its
 * segments in the order given) is taken in chunks of ATTN_CHUNK keys, cut at fixed
 * positions of the sequence whatever the segment boundaries; for each chunk the scores
 * q.k are computed, the running maximum is raised if needed (rescaling the partial sum
 * and the accumulator once per chunk, not once per slot), and the weighted values are
 * added. The accumulator is the output row itself, divided by the softmax denominator
 * at the end. A row with no slots gets zeros.
 *
 * A task is a block of rows and a group of query heads that share a KV head (GQA). The
 * heads of a group go through a chunk together, each K and V row loaded once into
 * registers for all of them; the rows of a block go chunk index by chunk index, so rows
 * that share a prefix of keys (forest leaves under one context, the rows of a prefill)
 * take each chunk of it one after another while it is in cache. Every (row, head) still
 * does its own arithmetic in its own order, so a row gets the same bits in any batch as
 * alone. Groups are split smaller only when there would be fewer tasks than threads
 * (decode of a single row on many cores): a split group loads K and V once per part.
 * With AVX-512 a chunk that rows of a block share is transposed once, and its scores
 * are taken 16 keys a vector with no horizontal sums, by the same arithmetic to the bit
 * (attn_scores_t). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

#define ATTN_CHUNK 64   /* slots scored before each softmax update */
#define ATTN_GROUP 8    /* most query heads one task handles */
#define ATTN_ROWS 32    /* most rows one task handles */
#define ATTN_TASKS 2    /* fewest tasks per thread when the rows are cut into blocks */
#define ATTN_PREFETCH 16  /* slots ahead to prefetch K */

static inline void attn_prefetch(const float *p, int32_t n) {
    for (int32_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 3);
}

typedef struct attn_job {
    const kern_attn *a;
    int32_t heads_per_task; /* divides n_head / n_head_kv, <= ATTN_GROUP */
    int32_t groups;         /* head groups: n_head / heads_per_task */
    int32_t rows_per_task;  /* rows of a block, <= ATTN_ROWS */
} attn_job;

/* What one (row, head) carries across chunks: running max, denominator, and the
 * accumulator (the output row itself). */
typedef struct attn_head {
    const float *q;
    float *out;
    float m, l;
} attn_head;

/* Where a row stands in its key sequence, and its heads' state. */
typedef struct attn_row {
    int32_t si, se, s0; /* next segment, end of the row's segments, slots of si taken */
    attn_head hs[ATTN_GROUP];
} attn_row;

/* The next up to ATTN_CHUNK keys of the row's sequence, whatever the segment boundaries:
 * their K and V rows into kp and vp. Returns how many (0 at the end). */
static int32_t attn_next_chunk(attn_row *rw, const kern_seg *segs, const float *kbase,
                               const float *vbase, int64_t ks, const float **kp,
                               const float **vp) {
    int32_t cnt = 0;
    while (cnt < ATTN_CHUNK && rw->si < rw->se) {
        const kern_seg sg = segs[rw->si];
        int32_t take = sg.len - rw->s0;
        if (take > ATTN_CHUNK - cnt) take = ATTN_CHUNK - cnt;
        for (int32_t i = 0; i < take; i++) {
            const int64_t off = ((int64_t)sg.start + rw->s0 + i) * ks;
            kp[cnt + i] = kbase + off;
            vp[cnt + i] = vbase + off;
        }
        if (take > 0) {
            cnt += take;
            rw->s0 += take;
        }
        if (rw->s0 >= sg.len) {
            rw->si++;
            rw->s0 = 0;
        }
    }
    return cnt;
}

#if SIMD_AVX512
/* ---- scores of a chunk several rows share, from its keys transposed ------------------
 * Scoring a key one at a time ends in a horizontal sum per (key, head), the larger part
 * of the work. When the rows of a block share a chunk (leaves under one context, the
 * rows of a prefill), the chunk's K rows are transposed once (kt[d * ATTN_CHUNK + j] =
 * dim d of key j) and every row's heads score 16 keys per vector, lane j for key j, by
 * the same arithmetic as attn_chunk's loop and vf_hsum, spelled out lane-wise: lane l of
 * the two chains (d = 16 i + l, even i then odd i), their sum, then the sum over l in
 * vf_hsum's tree (l and l + 8, then + 4, + 2, + 1). So a row gets the same bits whether
 * its chunk was shared or not, and no horizontal sums are left. */

/* 16 rows of 16 lanes transposed in registers: four rounds, round k swapping bit k of
 * the row index with bit k of the lane index between rows i and i | 2^k. */
SIMD_INLINE void attn_t16(vf r[16]) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        const __m512i bit = _mm512_set1_epi32(1 << k), sixteen = _mm512_set1_epi32(16);
        const __mmask16 set = _mm512_test_epi32_mask(lane, bit);
        /* row i keeps its lanes with bit k clear and takes the others from row i | 2^k,
         * lane ^ 2^k; row i | 2^k takes the clear ones from row i, lane | 2^k */
        const __m512i ia = _mm512_mask_mov_epi32(lane, set,
                                                 _mm512_add_epi32(_mm512_xor_si512(lane, bit), sixteen));
        const __m512i ib = _mm512_mask_mov_epi32(_mm512_or_si512(lane, bit), set,
                                                 _mm512_add_epi32(lane, sixteen));
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            if (!(i & (1 << k))) {
                const vf a = r[i], b = r[i | 1 << k];
                r[i] = _mm512_permutex2var_ps(a, ia, b);
                r[i | 1 << k] = _mm512_permutex2var_ps(a, ib, b);
            }
    }
}

/* kt[d * ATTN_CHUNK + j] = kp[j][d] for j < cnt, d < hd (a multiple of 16), zero for the
 * keys from cnt to the next multiple of 16; each next block's K rows prefetched first. */
static void attn_transpose(const float *const *kp, int32_t cnt, int32_t hd, float *kt) {
    for (int32_t j0 = 0; j0 < cnt; j0 += 16) {
        const int32_t nj = cnt - j0 < 16 ? cnt - j0 : 16;
        for (int32_t i = j0 + 16; i < j0 + 32 && i < cnt; i++) attn_prefetch(kp[i], hd);
        for (int32_t d0 = 0; d0 < hd; d0 += 16) {
            vf r[16];
            if (nj == 16) {
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) r[i] = vf_load(kp[j0 + i] + d0);
            } else {
                for (int i = 0; i < 16; i++) r[i] = i < nj ? vf_load(kp[j0 + i] + d0) : vf_zero();
            }
            attn_t16(r);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) vf_store(kt + (int64_t)(d0 + i) * ATTN_CHUNK + j0, r[i]);
        }
    }
}

/* Lane l's two chains for 16 keys (kt from the block's first key) and their sum: what
 * vf_add(s0, s1) holds in lane l in attn_chunk's loop, for each of the 16 keys. */
SIMD_INLINE vf attn_lane_t(const float *q, const float *kt, int l, const int NV) {
    vf s0 = vf_mul(vf_set1(q[l]), vf_load(kt + (int64_t)l * ATTN_CHUNK)), s1 = vf_zero();
#pragma GCC unroll 8
    for (int i = 1; i < NV; i++) {
        const int d = 16 * i + l;
        if (i & 1)
            s1 = vf_fma(vf_set1(q[d]), vf_load(kt + (int64_t)d * ATTN_CHUNK), s1);
        else
            s0 = vf_fma(vf_set1(q[d]), vf_load(kt + (int64_t)d * ATTN_CHUNK), s0);
    }
    return vf_add(s0, s1);
}

/* sc[p * ATTN_CHUNK + j] for the NP heads and the cnt keys of a transposed chunk. */
SIMD_INLINE void attn_scores_t(const attn_head *h, const float *kt, int32_t cnt, float scale,
                               float *sc, const int NV, const int NP) {
    const vf vs = vf_set1(scale);
    for (int32_t j0 = 0; j0 < cnt; j0 += 16)
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) {
            vf a[8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++)
                a[l] = vf_add(attn_lane_t(h[p].q, kt + j0, l, NV), attn_lane_t(h[p].q, kt + j0, l + 8, NV));
#pragma GCC unroll 4
            for (int l = 0; l < 4; l++) a[l] = vf_add(a[l], a[l + 4]);
            a[0] = vf_add(a[0], a[2]), a[1] = vf_add(a[1], a[3]);
            vf_store(sc + p * ATTN_CHUNK + j0, vf_mul(vf_add(a[0], a[1]), vs));
        }
}
#define ATTN_T 1
#else
#define ATTN_T 0
#endif

/* sc[p * ATTN_CHUNK + j] for the NP heads and the cnt keys kp[j], one key at a time (see
 * attn_chunk). */
SIMD_INLINE void attn_scores(const attn_head *h, const float *const *kp, const float *const *vp,
                             int32_t cnt, int32_t hd, float scale, bool pf, float *sc,
                             const int NV, const int NP) {
    vf qv[4][8];
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) qv[p][i] = vf_load(h[p].q + i * VF_N);
    for (int32_t j = 0; j < cnt; j++) {
        const float *kj = kp[j];
        if (pf) {
            /* A KV head's rows are ks apart, often a page or more, which the hardware
             * prefetchers do not follow: fetch K a few keys ahead, and V for the value
             * pass. */
            if (j + ATTN_PREFETCH < cnt) attn_prefetch(kp[j + ATTN_PREFETCH], hd);
            attn_prefetch(vp[j], hd);
        }
        if (NV == 0) {
            sc[j] = simd_dot(h->q, kj, hd) * scale;
            continue;
        }
        vf kv[8];
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) kv[i] = vf_load(kj + i * VF_N);
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) {
            /* two chains, so the FMA latency is not paid NV times in a row */
            vf s0 = vf_mul(qv[p][0], kv[0]), s1 = vf_zero();
#pragma GCC unroll 8
            for (int i = 1; i < NV; i++) {
                if (i & 1)
                    s1 = vf_fma(qv[p][i], kv[i], s1);
                else
                    s0 = vf_fma(qv[p][i], kv[i], s0);
            }
            sc[p * ATTN_CHUNK + j] = vf_hsum(vf_add(s0, s1)) * scale;
        }
    }
}

/* One chunk of the row's key sequence for NP heads of a group: cnt <= ATTN_CHUNK keys
 * whose K and V rows are kp[j] and vp[j]. Chunks are cut at fixed positions of the key
 * sequence, not at segment boundaries, so a row's result depends only on the sequence of
 * keys it sees: a forest leaf whose ancestors sit in scattered runs of slots gets the
 * same bits as linear decoding of its path. hd = NV * VF_N with NV a constant after
 * inlining, so the NP heads' q and accumulators live in registers and each K and V row
 * is loaded once for all of them (the heads share it); every head still does its own
 * arithmetic in the same order as alone. NV == 0 takes any hd through simd_dot /
 * simd_axpy, one head at a time (NP == 1). sc holds NP x ATTN_CHUNK scores. pf: also
 * prefetch (the first heads of a group do it for the others, and not at all when the
 * previous row of the block has just read the same keys). kt: the chunk's keys
 * transposed (a chunk rows share, NV > 0), scored by attn_scores_t to the same bits. */
SIMD_INLINE void attn_chunk(attn_head *h, const float *const *kp, const float *const *vp,
                            const float *kt, int32_t cnt, int32_t hd, float scale, bool pf,
                            float *sc, const int NV, const int NP) {
    vf acc[4][8];
#if ATTN_T
    if (NV > 0 && kt) {
        if (pf)
            for (int32_t j = 0; j < cnt; j++) attn_prefetch(vp[j], hd);
        attn_scores_t(h, kt, cnt, scale, sc, NV, NP);
    } else
#endif
        attn_scores(h, kp, vp, cnt, hd, scale, pf, sc, NV, NP);
    float f[4];
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++) {
        float *scp = sc + p * ATTN_CHUNK;
        const float cm = simd_max(scp, cnt);
        f[p] = 1.0f;
        if (cm > h[p].m) {
            f[p] = expf(h[p].m - cm); /* 0 on the first chunk (m = -inf): nothing to rescale */
            h[p].l *= f[p];
            h[p].m = cm;
        }
        h[p].l += simd_exp_sum(scp, cnt, h[p].m);
    }
    if (NV == 0) {
        simd_scale(h->out, f[0], hd);
        for (int32_t j = 0; j < cnt; j++) simd_axpy(h->out, sc[j], vp[j], hd);
        return;
    }
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++)
            acc[p][i] = vf_mul(vf_load(h[p].out + i * VF_N), vf_set1(f[p]));
    for (int32_t j = 0; j < cnt; j++) {
        vf vv[8];
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) vv[i] = vf_load(vp[j] + i * VF_N);
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) {
            const vf w = vf_set1(sc[p * ATTN_CHUNK + j]);
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++) acc[p][i] = vf_fma(w, vv[i], acc[p][i]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) vf_store(h[p].out + i * VF_N, acc[p][i]);
}

typedef void (*attn_chunk_fn)(attn_head *h, const float *const *kp, const float *const *vp,
                              const float *kt, int32_t cnt, int32_t hd, float scale, bool pf,
                              float *sc);

/* The most heads one pass takes for a head size of NV vectors: their q (then their
 * accumulators) and one K (V) row must stay in the 32 vector registers. */
#define ATTN_NP(nv) ((nv) <= 4 ? 4 : (nv) <= 5 ? 3 : 2)

#define ATTN_CHUNK_FN(nv, np)                                                             \
    static void attn_chunk_##nv##_##np(attn_head *h, const float *const *kp,              \
                                       const float *const *vp, const float *kt,           \
                                       int32_t cnt, int32_t hd, float scale, bool pf,     \
                                       float *sc) {                                       \
        attn_chunk(h, kp, vp, kt, cnt, hd, scale, pf, sc, nv, np);                        \
    }
#define ATTN_CHUNK_NV(nv)                                                                 \
    ATTN_CHUNK_FN(nv, 1) ATTN_CHUNK_FN(nv, 2) ATTN_CHUNK_FN(nv, 3) ATTN_CHUNK_FN(nv, 4)
ATTN_CHUNK_FN(0, 1) ATTN_CHUNK_NV(1) ATTN_CHUNK_NV(2) ATTN_CHUNK_NV(3) ATTN_CHUNK_NV(4)
ATTN_CHUNK_NV(5) ATTN_CHUNK_NV(6) ATTN_CHUNK_NV(7) ATTN_CHUNK_NV(8)
#define ATTN_FNS(nv) {NULL, attn_chunk_##nv##_1, attn_chunk_##nv##_2, attn_chunk_##nv##_3, \
                      attn_chunk_##nv##_4}

/* The chunk kernels for head size hd, by number of heads (fns[1 .. *np_max]). */
static const attn_chunk_fn *attn_chunk_for(int32_t hd, int32_t *np_max) {
    static const attn_chunk_fn fns[9][5] = {
        {NULL, attn_chunk_0_1}, ATTN_FNS(1), ATTN_FNS(2), ATTN_FNS(3), ATTN_FNS(4),
        ATTN_FNS(5), ATTN_FNS(6), ATTN_FNS(7), ATTN_FNS(8)};
    const int32_t nv = hd % VF_N == 0 && hd / VF_N <= 8 ? hd / VF_N : 0;
    *np_max = nv == 0 ? 1 : ATTN_NP(nv);
    return fns[nv];
}

/* How many keys two segment lists have in common at their start (the same slots in the
 * same order), whatever the cuts between segments. */
static int64_t attn_common(const kern_seg *x, int32_t nx, const kern_seg *y, int32_t ny) {
    int64_t n = 0;
    int32_t i = 0, j = 0, ox = 0, oy = 0; /* slots of x[i], y[j] already matched */
    while (i < nx && j < ny) {
        if (x[i].len - ox <= 0) {
            i++, ox = 0;
        } else if (y[j].len - oy <= 0) {
            j++, oy = 0;
        } else if (x[i].start + ox != y[j].start + oy) {
            break;
        } else {
            const int32_t t = x[i].len - ox < y[j].len - oy ? x[i].len - ox : y[j].len - oy;
            n += t, ox += t, oy += t;
        }
    }
    return n;
}

typedef struct attn_task_ctx {
    const kern_attn *a;
    const float *kbase, *vbase;
    int64_t kv_stride;
    int32_t ng, np_max;
    const attn_chunk_fn *chunk;
    const float *kp[ATTN_CHUNK], *vp[ATTN_CHUNK];
    float sc[4 * ATTN_CHUNK];
    float *kt;                      /* NULL, or head_dim x ATTN_CHUNK: a chunk transposed */
    const float *kt_of[ATTN_CHUNK]; /* ... that of these kt_cnt K rows */
    int32_t kt_cnt;
} attn_task_ctx;

/* The row's next chunk through every head of the group (the K and V rows of a chunk are
 * fetched from memory once for the group). prev: the first K row of the chunk just done
 * before, if it was the same chunk there is nothing to prefetch. shared: other rows of the
 * block take this chunk too, so it is worth transposing (once: the transpose is kept
 * while they come). Returns that K row, NULL when the row has no keys left. */
static const float *attn_row_step(attn_task_ctx *t, attn_row *rw, const float *prev,
                                  bool shared) {
    const kern_attn *a = t->a;
    const int32_t cnt = attn_next_chunk(rw, a->segs, t->kbase, t->vbase, t->kv_stride, t->kp,
                                        t->vp);
    if (cnt == 0) return NULL;
    const bool pf = t->kp[0] != prev;
    const float *kt = NULL;
#if ATTN_T
    if (shared && t->kt) {
        if (cnt != t->kt_cnt || memcmp(t->kp, t->kt_of, (size_t)cnt * sizeof *t->kp)) {
            attn_transpose(t->kp, cnt, a->head_dim, t->kt);
            memcpy(t->kt_of, t->kp, (size_t)cnt * sizeof *t->kp);
            t->kt_cnt = cnt;
        }
        kt = t->kt;
    }
#else
    (void)shared;
#endif
    for (int32_t g = 0; g < t->ng;) {
        const int32_t np = t->ng - g < t->np_max ? t->ng - g : t->np_max;
        t->chunk[np](&rw->hs[g], t->kp, t->vp, kt, cnt, a->head_dim, a->scale, pf && g == 0,
                     t->sc);
        g += np;
    }
    return t->kp[0];
}

/* A task is a block of rows and a group of heads. Rows that share a prefix of keys with a
 * neighbour in the block (forest leaves under one context, the rows of a prefill) go
 * through the shared chunks chunk index by chunk index, row by row inside, so each
 * chunk's K and V rows are read from memory once and then found in cache, instead of
 * each row streaming the whole prefix on its own; then each row goes on alone through
 * the rest of its keys, streamed in order. Each row keeps its own chunks and its own
 * softmax state, so its bits are those it gets alone; only the order across rows
 * changes. */
static void attn_task(void *ctx, int32_t task, int32_t thread) {
    (void)thread;
    const attn_job *job = ctx;
    const kern_attn *a = job->a;
    const int32_t r0 = task / job->groups * job->rows_per_task;
    const int32_t nr = a->n_rows - r0 < job->rows_per_task ? a->n_rows - r0 : job->rows_per_task;
    const int32_t h0 = (task % job->groups) * job->heads_per_task;
    const int32_t ng = job->heads_per_task, hd = a->head_dim;
    const int32_t kvh = h0 / (a->n_head / a->n_head_kv);
    const int64_t q_stride = (int64_t)a->n_head * hd, kv_stride = (int64_t)a->n_head_kv * hd;
    attn_task_ctx t = {.a = a, .kbase = a->k + (int64_t)kvh * hd,
                       .vbase = a->v + (int64_t)kvh * hd, .kv_stride = kv_stride, .ng = ng};
    t.chunk = attn_chunk_for(hd, &t.np_max);
    /* room for a transposed chunk when rows may share one (+16: to align it to 64 bytes) */
    const bool may_share = ATTN_T && nr > 1 && hd % 16 == 0;
    float kt_room[may_share ? (int64_t)hd * ATTN_CHUNK + 16 : 1];
    t.kt = may_share ? (float *)(((uintptr_t)kt_room + 63) & ~(uintptr_t)63) : NULL;

    attn_row rows[ATTN_ROWS];
    int32_t lim[ATTN_ROWS]; /* leading chunks row i shares with row i - 1 or i + 1 */
    int32_t lim_max = 0;
    for (int32_t i = 0; i < nr; i++) {
        attn_row *rw = &rows[i];
        const int32_t r = r0 + i;
        rw->si = a->seg_off[r];
        rw->se = a->seg_off[r + 1];
        rw->s0 = 0;
        lim[i] = 0;
        if (i > 0) {
            const int64_t c = attn_common(a->segs + rows[i - 1].si, rows[i - 1].se - rows[i - 1].si,
                                          a->segs + rw->si, rw->se - rw->si) / ATTN_CHUNK;
            lim[i] = (int32_t)c;
            if (lim[i - 1] < lim[i]) lim[i - 1] = lim[i];
            if (lim_max < lim[i]) lim_max = lim[i];
        }
        for (int32_t g = 0; g < ng; g++) {
            rw->hs[g] = (attn_head){a->q + r * q_stride + (int64_t)(h0 + g) * hd,
                                    a->out + r * q_stride + (int64_t)(h0 + g) * hd, -INFINITY, 0};
            memset(rw->hs[g].out, 0, (size_t)hd * sizeof(float));
        }
    }
    for (int32_t c = 0; c < lim_max; c++) {
        const float *prev = NULL;
        for (int32_t i = 0; i < nr; i++)
            if (c < lim[i]) prev = attn_row_step(&t, &rows[i], prev, true);
    }
    for (int32_t i = 0; i < nr; i++) {
        while (attn_row_step(&t, &rows[i], NULL, false)) {}
        for (int32_t g = 0; g < ng; g++)
            simd_scale(rows[i].hs[g].out, rows[i].hs[g].l > 0 ? 1.0f / rows[i].hs[g].l : 0.0f,
                       hd);
    }
}

void cpu_attention(kern_backend *b, const kern_attn *a) {
    if (a->n_rows <= 0) return;
    pool *p = kern_backend_pool(b);
    const int32_t n_rep = a->n_head / a->n_head_kv, nt = pool_threads(p);
    ASSERT(n_rep >= 1 && n_rep * a->n_head_kv == a->n_head);
    /* the largest divisor of n_rep that fits a task, then smaller only while there would
     * be fewer tasks than threads: a whole group is worth more than a finer split (its
     * K and V are read once, not once per part), even when the last task runs alone */
    int32_t hpt = n_rep;
    while (hpt > ATTN_GROUP || n_rep % hpt) hpt--;
    while (hpt > 1 && (int64_t)a->n_rows * (a->n_head / hpt) < nt) {
        hpt--;
        while (n_rep % hpt) hpt--;
    }
    /* Rows in as few blocks as still give every thread the same number of tasks, at
     * least ATTN_TASKS each (a prefix the rows share is read once per block and head
     * group), and no more than ATTN_ROWS rows a block. */
    const int32_t groups = a->n_head / hpt;
    int32_t nb = (a->n_rows + ATTN_ROWS - 1) / ATTN_ROWS;
    while (nb < a->n_rows &&
           ((int64_t)nb * groups < (int64_t)ATTN_TASKS * nt || nb * groups % nt))
        nb++;
    const int32_t rpt = (a->n_rows + nb - 1) / nb;
    nb = (a->n_rows + rpt - 1) / rpt;
    attn_job job = {a, hpt, groups, rpt};
    pool_run(p, nb * groups, attn_task, &job);
}
