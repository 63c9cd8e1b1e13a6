/* attn.c - the CPU backend's segment attention (kern_attn in kern.h).
 *
 * One pass over a row's KV segments with an online softmax: the row's key sequence (its
 * segments in the order given) is taken in chunks of ATTN_CHUNK keys, cut at fixed
 * positions of the sequence whatever the segment boundaries; for each chunk the scores q.k are computed, the running
 * maximum is raised if needed (rescaling the partial sum and the accumulator once
 * per chunk, not once per slot), and the weighted values are added. The accumulator
 * is the output row itself, divided by the softmax denominator at the end.
 *
 * A task is one batch row and a group of query heads that share a KV head (GQA), so
 * each K and V row is loaded once for the whole group. Groups are split smaller when
 * there would otherwise be too few tasks to keep every thread busy (decode of a single
 * row). A row with no slots gets zeros. */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

#define ATTN_CHUNK 64   /* slots scored before each softmax update */
#define ATTN_GROUP 8    /* most query heads one task handles */

#define ATTN_PREFETCH 16  /* slots ahead to prefetch K */

static inline void attn_prefetch(const float *p, int32_t n) {
    for (int32_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, 0, 3);
}

typedef struct attn_job {
    const kern_attn *a;
    int32_t heads_per_task; /* divides n_head / n_head_kv, <= ATTN_GROUP */
    int32_t tasks_per_row;
} attn_job;

/* p[j] = exp(s[j] - m) for j < n; returns their sum */
static float attn_exp_sum(float *s, int32_t n, float m) {
    vf vm = vf_set1(m), vs = vf_zero();
    int32_t j = 0;
    for (; j + VF_N <= n; j += VF_N) {
        vf e = vf_exp(vf_sub(vf_load(s + j), vm));
        vf_store(s + j, e);
        vs = vf_add(vs, e);
    }
    float sum = vf_hsum(vs);
    for (; j < n; j++) sum += (s[j] = expf(s[j] - m));
    return sum;
}

/* What one (row, head) carries across chunks: running max, denominator, and the
 * accumulator (the output row itself). */
typedef struct attn_head {
    const float *q;
    float *out;
    float m, l;
} attn_head;

/* A piece of a chunk: cnt consecutive slots whose K rows start at k and V rows at v
 * (row stride ks); off is where the piece's scores sit in the chunk's score array. */
typedef struct attn_piece {
    const float *k, *v;
    int32_t cnt, off;
} attn_piece;

/* One chunk of the row's key sequence for one head: up to ATTN_CHUNK keys, possibly from
 * several segments (pieces). Chunks are cut at fixed positions of the key sequence, not
 * at segment boundaries, so a row's result depends only on the sequence of keys it sees:
 * a forest leaf whose ancestors sit in scattered runs of slots gets the same bits as
 * linear decoding of its path. hd = NV * VF_N with NV a constant after inlining, so q
 * and the accumulator live in registers; NV == 0 takes any hd through simd_dot /
 * simd_axpy. pf: also prefetch (the first head of a group does it for the others). */
SIMD_INLINE void attn_chunk(attn_head *h, const attn_piece *pc, int32_t n_pc, int32_t cnt,
                            int64_t ks, int32_t hd, float scale, bool pf, float *sc,
                            const int NV) {
    vf qv[8], acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < NV; i++) qv[i] = vf_load(h->q + i * VF_N);
    for (int32_t p = 0; p < n_pc; p++) {
        const float *k = pc[p].k, *v = pc[p].v;
        float *scp = sc + pc[p].off;
        for (int32_t j = 0; j < pc[p].cnt; j++) {
            const float *kj = k + j * ks;
            if (pf) {
                /* A KV head's rows are ks apart, often a page or more, which the hardware
                 * prefetchers do not follow: fetch K a few slots ahead, and V for the
                 * value pass below. */
                if (j + ATTN_PREFETCH < pc[p].cnt) attn_prefetch(kj + ATTN_PREFETCH * ks, hd);
                attn_prefetch(v + j * ks, hd);
            }
            if (NV == 0) {
                scp[j] = simd_dot(h->q, kj, hd) * scale;
            } else {
                /* two chains, so the FMA latency is not paid NV times in a row */
                vf s0 = vf_mul(qv[0], vf_load(kj)), s1 = vf_zero();
#pragma GCC unroll 8
                for (int i = 1; i < NV; i++) {
                    if (i & 1)
                        s1 = vf_fma(qv[i], vf_load(kj + i * VF_N), s1);
                    else
                        s0 = vf_fma(qv[i], vf_load(kj + i * VF_N), s0);
                }
                scp[j] = vf_hsum(vf_add(s0, s1)) * scale;
            }
        }
    }
    float cm = sc[0], f = 1.0f;
    for (int32_t j = 1; j < cnt; j++) cm = sc[j] > cm ? sc[j] : cm;
    if (cm > h->m) {
        f = expf(h->m - cm); /* 0 on the first chunk (m = -inf): nothing to rescale yet */
        h->l *= f;
        h->m = cm;
    }
    h->l += attn_exp_sum(sc, cnt, h->m);
    if (NV == 0) {
        simd_scale(h->out, f, hd);
        for (int32_t p = 0; p < n_pc; p++)
            for (int32_t j = 0; j < pc[p].cnt; j++)
                simd_axpy(h->out, sc[pc[p].off + j], pc[p].v + j * ks, hd);
        return;
    }
#pragma GCC unroll 8
    for (int i = 0; i < NV; i++) acc[i] = vf_mul(vf_load(h->out + i * VF_N), vf_set1(f));
    for (int32_t p = 0; p < n_pc; p++) {
        for (int32_t j = 0; j < pc[p].cnt; j++) {
            const vf w = vf_set1(sc[pc[p].off + j]);
            const float *vj = pc[p].v + j * ks;
#pragma GCC unroll 8
            for (int i = 0; i < NV; i++) acc[i] = vf_fma(w, vf_load(vj + i * VF_N), acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NV; i++) vf_store(h->out + i * VF_N, acc[i]);
}

#define ATTN_CHUNK_NV(nv)                                                                   \
    static void attn_chunk_##nv(attn_head *h, const attn_piece *pc, int32_t n_pc,           \
                                int32_t cnt, int64_t ks, int32_t hd, float scale, bool pf,  \
                                float *sc) {                                                \
        attn_chunk(h, pc, n_pc, cnt, ks, hd, scale, pf, sc, nv);                            \
    }
ATTN_CHUNK_NV(0) ATTN_CHUNK_NV(1) ATTN_CHUNK_NV(2) ATTN_CHUNK_NV(3) ATTN_CHUNK_NV(4)
ATTN_CHUNK_NV(5) ATTN_CHUNK_NV(6) ATTN_CHUNK_NV(7) ATTN_CHUNK_NV(8)

typedef void (*attn_chunk_fn)(attn_head *h, const attn_piece *pc, int32_t n_pc, int32_t cnt,
                              int64_t ks, int32_t hd, float scale, bool pf, float *sc);

static attn_chunk_fn attn_chunk_for(int32_t hd) {
    static const attn_chunk_fn fns[9] = {attn_chunk_0, attn_chunk_1, attn_chunk_2,
                                         attn_chunk_3, attn_chunk_4, attn_chunk_5,
                                         attn_chunk_6, attn_chunk_7, attn_chunk_8};
    return hd % VF_N == 0 && hd / VF_N <= 8 ? fns[hd / VF_N] : attn_chunk_0;
}

static void attn_task(void *ctx, int32_t task, int32_t thread) {
    (void)thread;
    const attn_job *job = ctx;
    const kern_attn *a = job->a;
    const int32_t r = task / job->tasks_per_row;
    const int32_t h0 = (task % job->tasks_per_row) * job->heads_per_task;
    const int32_t ng = job->heads_per_task, hd = a->head_dim;
    const int32_t kvh = h0 / (a->n_head / a->n_head_kv);
    const int64_t q_stride = (int64_t)a->n_head * hd, kv_stride = (int64_t)a->n_head_kv * hd;
    const float *kbase = a->k + (int64_t)kvh * hd, *vbase = a->v + (int64_t)kvh * hd;
    const attn_chunk_fn chunk = attn_chunk_for(hd);

    attn_head hs[ATTN_GROUP];
    float sc[ATTN_CHUNK];
    for (int32_t g = 0; g < ng; g++) {
        hs[g] = (attn_head){a->q + r * q_stride + (int64_t)(h0 + g) * hd,
                            a->out + r * q_stride + (int64_t)(h0 + g) * hd, -INFINITY, 0};
        memset(hs[g].out, 0, (size_t)hd * sizeof(float));
    }
    /* chunk by chunk of the key sequence, every head of the group, so the chunk's K and
     * V rows are fetched from memory once for the group */
    attn_piece pc[ATTN_CHUNK];
    int32_t n_pc = 0, cnt = 0;
    for (int32_t si = a->seg_off[r]; si < a->seg_off[r + 1]; si++) {
        const kern_seg seg = a->segs[si];
        for (int32_t s0 = 0; s0 < seg.len;) {
            const int32_t take = seg.len - s0 < ATTN_CHUNK - cnt ? seg.len - s0 : ATTN_CHUNK - cnt;
            const int64_t off = ((int64_t)seg.start + s0) * kv_stride;
            pc[n_pc++] = (attn_piece){kbase + off, vbase + off, take, cnt};
            cnt += take;
            s0 += take;
            if (cnt == ATTN_CHUNK) {
                for (int32_t g = 0; g < ng; g++)
                    chunk(&hs[g], pc, n_pc, cnt, kv_stride, hd, a->scale, g == 0, sc);
                n_pc = cnt = 0;
            }
        }
    }
    if (cnt > 0)
        for (int32_t g = 0; g < ng; g++)
            chunk(&hs[g], pc, n_pc, cnt, kv_stride, hd, a->scale, g == 0, sc);
    for (int32_t g = 0; g < ng; g++)
        simd_scale(hs[g].out, hs[g].l > 0 ? 1.0f / hs[g].l : 0.0f, hd);
}

void cpu_attention(kern_backend *b, const kern_attn *a) {
    if (a->n_rows <= 0) return;
    pool *p = kern_backend_pool(b);
    const int32_t n_rep = a->n_head / a->n_head_kv;
    ASSERT(n_rep >= 1 && n_rep * a->n_head_kv == a->n_head);
    /* the largest divisor of n_rep that fits a task, then smaller while the tasks
     * would not keep every thread busy */
    int32_t hpt = n_rep;
    while (hpt > ATTN_GROUP || n_rep % hpt) hpt--;
    while (hpt > 1 && (int64_t)a->n_rows * (a->n_head / hpt) < 4 * pool_threads(p)) {
        hpt--;
        while (n_rep % hpt) hpt--;
    }
    attn_job job = {a, hpt, a->n_head / hpt};
    pool_run(p, a->n_rows * job.tasks_per_row, attn_task, &job);
}
