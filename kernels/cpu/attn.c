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
 * With AVX-512 the horizontal sums that end each dot product q.k are taken 16 at a time
 * (four keys by up to four heads, vf_hsum16, by vf_hsum's tree; a transposed layout,
 * tried first, was bound by loads: kernels/README.md). With AVX2, whose 16 registers do not
 * hold a group's q and outputs, eight keys of a head at a time (vf_hsumn) and the values in
 * register blocks (attn_values), for any head size of whole vectors; NEON the same, four
 * keys at a time, for the head sizes past its register form (more than 32). */
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

/* Into L2 (prefetcht1), as the matmuls' MM_PREFETCH: prefetches to L1 hold its few miss
 * buffers until DRAM answers. */
static inline void attn_prefetch(const float *p, int32_t n) {
    for (int32_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 2);
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

/* The next up to ATTN_CHUNK keys of the row's sequence, whatever the segment boundaries,
 * as runs of slots (*nrun of them) into runs. Returns how many keys (0 at the end). */
static int32_t attn_next_chunk(attn_row *rw, const kern_seg *segs, kern_seg *runs,
                               int32_t *nrun) {
    int32_t cnt = 0;
    *nrun = 0;
    while (cnt < ATTN_CHUNK && rw->si < rw->se) {
        const kern_seg sg = segs[rw->si];
        int32_t take = sg.len - rw->s0;
        if (take > ATTN_CHUNK - cnt) take = ATTN_CHUNK - cnt;
        if (take > 0) {
            runs[(*nrun)++] = (kern_seg){sg.start + rw->s0, take};
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

/* The two chains of q . k for a key: their sum, lane by lane (vf_hsum of it is the dot
 * product); two chains, so the FMA latency is not paid NV times in a row. */
SIMD_INLINE vf attn_lanes(const vf *qv, const vf *kv, const int NV) {
    vf s0 = vf_mul(qv[0], kv[0]), s1 = vf_zero();
#pragma GCC unroll 8
    for (int i = 1; i < NV; i++) {
        if (i & 1)
            s1 = vf_fma(qv[i], kv[i], s1);
        else
            s0 = vf_fma(qv[i], kv[i], s0);
    }
    return vf_add(s0, s1);
}

/* A KV head's rows are ks apart, often a page or more, which the hardware prefetchers do
 * not follow: fetch K a few keys ahead of key j, and V for the value pass. */
SIMD_INLINE void attn_prefetch_key(const float *const *kp, const float *const *vp, int32_t j,
                                   int32_t cnt, int32_t hd) {
    if (j + ATTN_PREFETCH < cnt) attn_prefetch(kp[j + ATTN_PREFETCH], hd);
    attn_prefetch(vp[j], hd);
}

#if VF_HSUMN
/* The fewest vectors a head size needs to take the layout of attn_wide: AVX2 every size
 * (its 16 registers hold no group's q), NEON those its register form does not take. */
#if VF_N == 8
#define ATTN_WIDE_NV 1
#else
#define ATTN_WIDE_NV 9
#endif

/* attn_lanes with q and k read from memory (nv vectors, any number): fma0 starts the
 * first chain with an FMA on zero as simd_dot does (NV == 0), else with attn_lanes's
 * product; the chains and their order are the same, so the bits are. */
SIMD_INLINE vf attn_lanes_at(const float *q, const float *k, int32_t nv, const bool fma0) {
    vf s0 = fma0 ? vf_fma(vf_load(q), vf_load(k), vf_zero()) : vf_mul(vf_load(q), vf_load(k));
    vf s1 = vf_zero();
    int32_t i = 1;
#pragma GCC unroll 8
    for (; i + 1 < nv; i += 2) {
        s1 = vf_fma(vf_load(q + i * VF_N), vf_load(k + i * VF_N), s1);
        s0 = vf_fma(vf_load(q + (i + 1) * VF_N), vf_load(k + (i + 1) * VF_N), s0);
    }
    if (i < nv) s1 = vf_fma(vf_load(q + i * VF_N), vf_load(k + i * VF_N), s1);
    return vf_add(s0, s1);
}
#endif

/* Whether head size hd takes the layout of VF_N keys' sums a vector (vf_hsumn) and the
 * values in register blocks (whole vectors, from ATTN_WIDE_NV of them). */
SIMD_INLINE bool attn_wide(int32_t hd) {
#if VF_HSUMN
    return hd % VF_N == 0 && hd / VF_N >= ATTN_WIDE_NV;
#else
    (void)hd;
    return false;
#endif
}

/* sc[p * ATTN_CHUNK + j] for the NP heads and the cnt keys kp[j], key by key (see
 * attn_chunk). With AVX-512, four keys at a time for all heads, their horizontal sums
 * taken together by vf_hsum16 (the same tree as vf_hsum, so the same bits, for about a
 * third of the instructions). */
SIMD_INLINE void attn_scores(attn_head *const *h, const float *const *kp, const float *const *vp,
                             int32_t cnt, int32_t hd, float scale, bool pf, float *sc,
                             const int NV, const int NP) {
    vf qv[4][8];
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) qv[p][i] = vf_load(h[p]->q + i * VF_N);
    int32_t j = 0;
#if VF_HSUM16
    /* lane 4p + e of the reordered sums: head p, key e (vf_hsum16 leaves it in 4e + p) */
    const __m512i by_head = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    for (; NV > 0 && j + 4 <= cnt; j += 4) {
        vf v[16];
#pragma GCC unroll 4
        for (int e = 0; e < 4; e++) {
            if (pf) attn_prefetch_key(kp, vp, j + e, cnt, hd);
            vf kv[8];
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++) kv[i] = vf_load(kp[j + e] + i * VF_N);
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) v[4 * p + e] = p < NP ? attn_lanes(qv[p], kv, NV) : vf_zero();
        }
        const vf r = vf_mul(_mm512_permutexvar_ps(by_head, vf_hsum16(v)), vf_set1(scale));
        _mm_storeu_ps(sc + j, _mm512_castps512_ps128(r));
        if (NP > 1) _mm_storeu_ps(sc + ATTN_CHUNK + j, _mm512_extractf32x4_ps(r, 1));
        if (NP > 2) _mm_storeu_ps(sc + 2 * ATTN_CHUNK + j, _mm512_extractf32x4_ps(r, 2));
        if (NP > 3) _mm_storeu_ps(sc + 3 * ATTN_CHUNK + j, _mm512_extractf32x4_ps(r, 3));
    }
#endif
#if VF_HSUMN
    /* VF_N keys at a time, one head after another (q and the keys from L1), their
     * horizontal sums taken together by vf_hsumn (the same bits as vf_hsum), instead of
     * one dependent chain and one scalar store per key and head */
    const int32_t nv = NV > 0 ? NV : hd / VF_N;
    for (; attn_wide(hd) && j + VF_N <= cnt; j += VF_N) {
        if (pf)
            for (int e = 0; e < VF_N; e++) attn_prefetch_key(kp, vp, j + e, cnt, hd);
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) {
            vf v[VF_N];
#pragma GCC unroll 8
            for (int e = 0; e < VF_N; e++) v[e] = attn_lanes_at(h[p]->q, kp[j + e], nv, NV == 0);
            vf_store(sc + p * ATTN_CHUNK + j, vf_mul(vf_hsumn(v), vf_set1(scale)));
        }
    }
#endif
    for (; j < cnt; j++) {
        const float *kj = kp[j];
        if (pf) attn_prefetch_key(kp, vp, j, cnt, hd);
        if (NV == 0) {
#pragma GCC unroll 4
            for (int p = 0; p < NP; p++) sc[p * ATTN_CHUNK + j] = simd_dot(h[p]->q, kj, hd) * scale;
            continue;
        }
        vf kv[8];
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++) kv[i] = vf_load(kj + i * VF_N);
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++) sc[p * ATTN_CHUNK + j] = vf_hsum(attn_lanes(qv[p], kv, NV)) * scale;
    }
}

/* The values pass where attn_wide: each head's output scaled by f[p], then the weighted
 * V rows added key by key, as attn_chunk's register form and simd_scale + simd_axpy do
 * (the same operations on each element, in the same order, so the same bits), a block of
 * VB vectors of every head's output at a time in registers (AVX2's 16 hold NP x VB
 * accumulators, VB V vectors and a weight). */
SIMD_INLINE void attn_values(attn_head *const *h, const float *const *vp, int32_t cnt, int32_t nv,
                             const float *sc, const float *f, const int NP) {
    enum { VBM = 4 };
    const int VB = NP <= 2 ? 4 : 2;
    for (int32_t b = 0; b < nv; b += VB) {
        const int nb = nv - b < VB ? (int)(nv - b) : VB;
        vf acc[4][VBM];
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++)
#pragma GCC unroll 4
            for (int i = 0; i < VB; i++)
                acc[p][i] = i < nb ? vf_mul(vf_load(h[p]->out + (b + i) * VF_N), vf_set1(f[p])) : vf_zero();
        for (int32_t j = 0; j < cnt; j++) {
            vf vv[VBM];
#pragma GCC unroll 4
            for (int i = 0; i < VB; i++)
                vv[i] = i < nb ? vf_load(vp[j] + (b + i) * VF_N) : vf_zero();
#pragma GCC unroll 4
            for (int p = 0; p < NP; p++) {
                const vf w = vf_set1(sc[p * ATTN_CHUNK + j]);
#pragma GCC unroll 4
                for (int i = 0; i < VB; i++)
                    if (i < nb) acc[p][i] = vf_fma(w, vv[i], acc[p][i]);
            }
        }
#pragma GCC unroll 4
        for (int p = 0; p < NP; p++)
#pragma GCC unroll 4
            for (int i = 0; i < VB; i++)
                if (i < nb) vf_store(h[p]->out + (b + i) * VF_N, acc[p][i]);
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
 * previous row of the block has just read the same keys). */
SIMD_INLINE void attn_chunk(attn_head *const *h, const float *const *kp, const float *const *vp,
                            int32_t cnt, int32_t hd, float scale, bool pf, float *sc,
                            const int NV, const int NP) {
    vf acc[4][8];
    attn_scores(h, kp, vp, cnt, hd, scale, pf, sc, NV, NP);
    float f[4];
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++) {
        float *scp = sc + p * ATTN_CHUNK;
        const float cm = simd_max(scp, cnt);
        f[p] = 1.0f;
        if (cm > h[p]->m) {
            f[p] = expf(h[p]->m - cm); /* 0 on the first chunk (m = -inf): nothing to rescale */
            h[p]->l *= f[p];
            h[p]->m = cm;
        }
        h[p]->l += simd_exp_sum(scp, cnt, h[p]->m);
    }
    if (attn_wide(hd)) {
        attn_values(h, vp, cnt, NV > 0 ? NV : hd / VF_N, sc, f, NP);
        return;
    }
    if (NV == 0) {
        simd_scale(h[0]->out, f[0], hd);
        for (int32_t j = 0; j < cnt; j++) simd_axpy(h[0]->out, sc[j], vp[j], hd);
        return;
    }
#pragma GCC unroll 4
    for (int p = 0; p < NP; p++)
#pragma GCC unroll 8
        for (int i = 0; i < NV; i++)
            acc[p][i] = vf_mul(vf_load(h[p]->out + i * VF_N), vf_set1(f[p]));
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
        for (int i = 0; i < NV; i++) vf_store(h[p]->out + i * VF_N, acc[p][i]);
}

typedef void (*attn_chunk_fn)(attn_head *const *h, const float *const *kp, const float *const *vp,
                              int32_t cnt, int32_t hd, float scale, bool pf, float *sc);

/* The most heads one pass takes for a head size of NV vectors: their q (then their
 * accumulators) and one K (V) row must stay in the 32 vector registers. */
#define ATTN_NP(nv) ((nv) <= 4 ? 4 : (nv) <= 5 ? 3 : 2)

#define ATTN_CHUNK_FN(nv, np)                                                             \
    static void attn_chunk_##nv##_##np(attn_head *const *h, const float *const *kp,       \
                                       const float *const *vp, int32_t cnt, int32_t hd,   \
                                       float scale, bool pf, float *sc) {                 \
        attn_chunk(h, kp, vp, cnt, hd, scale, pf, sc, nv, np);                            \
    }
#define ATTN_CHUNK_NV(nv)                                                                 \
    ATTN_CHUNK_FN(nv, 1) ATTN_CHUNK_FN(nv, 2) ATTN_CHUNK_FN(nv, 3) ATTN_CHUNK_FN(nv, 4)
ATTN_CHUNK_NV(0) ATTN_CHUNK_NV(1) ATTN_CHUNK_NV(2) ATTN_CHUNK_NV(3) ATTN_CHUNK_NV(4)
ATTN_CHUNK_NV(5) ATTN_CHUNK_NV(6) ATTN_CHUNK_NV(7) ATTN_CHUNK_NV(8)
#define ATTN_FNS(nv) {NULL, attn_chunk_##nv##_1, attn_chunk_##nv##_2, attn_chunk_##nv##_3, \
                      attn_chunk_##nv##_4}

/* The chunk kernels for head size hd, by number of heads (fns[1 .. *np_max]). */
static const attn_chunk_fn *attn_chunk_for(int32_t hd, int32_t *np_max) {
    static const attn_chunk_fn fns[9][5] = {
        ATTN_FNS(0), ATTN_FNS(1), ATTN_FNS(2), ATTN_FNS(3), ATTN_FNS(4),
        ATTN_FNS(5), ATTN_FNS(6), ATTN_FNS(7), ATTN_FNS(8)};
    const int32_t nv = hd % VF_N == 0 && hd / VF_N <= 8 ? hd / VF_N : 0;
    /* (NV 0 holds no head in registers; its plain path, simd_dot and simd_axpy, takes one) */
    *np_max = nv > 0 ? ATTN_NP(nv) : attn_wide(hd) ? 4 : 1;
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
    const float *kp[ATTN_CHUNK], *vp[ATTN_CHUNK]; /* the K and V rows of the chunk ... */
    kern_seg runs[ATTN_CHUNK];                    /* ... whose slots are these runs */
    int32_t nrun;
    float sc[4 * ATTN_CHUNK];
} attn_task_ctx;

/* One chunk of keys (cnt keys in nrun runs of slots) through the nh heads at hl, np_max
 * at a time (the K and V rows of a chunk are fetched from memory once for all of them).
 * When the chunk before had the same keys (a shared prefix), its K and V row pointers are
 * kept and there is nothing to prefetch. */
static void attn_heads_step(attn_task_ctx *t, attn_head *const *hl, int32_t nh,
                            const kern_seg *runs, int32_t nrun, int32_t cnt) {
    const kern_attn *a = t->a;
    const bool pf = nrun != t->nrun || memcmp(runs, t->runs, (size_t)nrun * sizeof *runs);
    if (pf) {
        int32_t j = 0;
        for (int32_t r = 0; r < nrun; r++)
            for (int32_t i = 0; i < runs[r].len; i++, j++) {
                const int64_t off = ((int64_t)runs[r].start + i) * t->kv_stride;
                t->kp[j] = t->kbase + off;
                t->vp[j] = t->vbase + off;
            }
        memcpy(t->runs, runs, (size_t)nrun * sizeof *runs);
        t->nrun = nrun;
    }
    for (int32_t g = 0; g < nh;) {
        const int32_t np = nh - g < t->np_max ? nh - g : t->np_max;
        t->chunk[np](hl + g, t->kp, t->vp, cnt, a->head_dim, a->scale, pf && g == 0, t->sc);
        g += np;
    }
}

/* The row's next chunk through every head of the group. Returns false when the row has
 * no keys left. */
static bool attn_row_step(attn_task_ctx *t, attn_row *rw) {
    kern_seg runs[ATTN_CHUNK];
    int32_t nrun;
    const int32_t cnt = attn_next_chunk(rw, t->a->segs, runs, &nrun);
    if (cnt == 0) return false;
    attn_head *hl[ATTN_GROUP];
    for (int32_t g = 0; g < t->ng; g++) hl[g] = &rw->hs[g];
    attn_heads_step(t, hl, t->ng, runs, nrun, cnt);
    return true;
}

/* Chunk c of the rows that share it with a neighbour (c < lim[i]): the heads of a run of
 * rows that take the same keys go through it together, np_max at a time, whatever row
 * each belongs to, so a group of 3 heads (SmolLM2's 9 over 3) does not leave a quarter
 * of each 4-head pass empty (kernels/README.md). Every head still does its own
 * arithmetic in its own order: the same bits. */
static void attn_shared_step(attn_task_ctx *t, attn_row *rows, const int32_t *lim, int32_t nr,
                             int32_t c) {
    attn_head *hl[ATTN_ROWS * ATTN_GROUP];
    kern_seg gruns[ATTN_CHUNK], runs[ATTN_CHUNK];
    int32_t nh = 0, gnrun = 0, gcnt = 0;
    for (int32_t i = 0; i < nr; i++) {
        if (c >= lim[i]) continue;
        int32_t nrun;
        const int32_t cnt = attn_next_chunk(&rows[i], t->a->segs, runs, &nrun);
        if (cnt == 0) continue;
        if (nh > 0 &&
            (nrun != gnrun || cnt != gcnt || memcmp(runs, gruns, (size_t)nrun * sizeof *runs))) {
            attn_heads_step(t, hl, nh, gruns, gnrun, gcnt);
            nh = 0;
        }
        if (nh == 0) {
            memcpy(gruns, runs, (size_t)nrun * sizeof *runs);
            gnrun = nrun, gcnt = cnt;
        }
        for (int32_t g = 0; g < t->ng; g++) hl[nh++] = &rows[i].hs[g];
    }
    if (nh > 0) attn_heads_step(t, hl, nh, gruns, gnrun, gcnt);
}

/* The sink s joins a head's softmax as one more score without a value: the running
 * maximum rises to it if needed (the sum and the output rescaled), and its weight adds to
 * the sum. */
static void attn_sink(attn_head *hs, float s, int32_t hd) {
    if (s > hs->m) {
        const float f = expf(hs->m - s); /* 0 when the row had no slots */
        simd_scale(hs->out, f, hd);
        hs->l = hs->l * f + 1.0f;
        hs->m = s;
    } else {
        hs->l += expf(s - hs->m);
    }
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
    for (int32_t c = 0; c < lim_max; c++) attn_shared_step(&t, rows, lim, nr, c);
    for (int32_t i = 0; i < nr; i++) {
        while (attn_row_step(&t, &rows[i])) {}
        for (int32_t g = 0; g < ng; g++) {
            attn_head *hs = &rows[i].hs[g];
            if (a->sinks) attn_sink(hs, a->sinks[h0 + g], hd);
            simd_scale(hs->out, hs->l > 0 ? 1.0f / hs->l : 0.0f, hd);
        }
    }
}

void cpu_attention(kern_backend *b, const kern_attn *a) {
    if (a->n_rows <= 0) return;
    pool *p = cpu_pool(b);
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
