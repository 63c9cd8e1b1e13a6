/* attn.c - the CPU backend's segment attention (kern_attn in kern.h).
 *
 * One pass over a row's KV segments with an online softmax: slots are taken in
 * chunks of ATTN_CHUNK; for each chunk the scores q.k are computed, the running
 * maximum is raised if needed (rescaling the partial sum and the accumulator once
 * per chunk, not once per slot), and the weighted values are added. The accumulator
 * is the output row itself, divided by the softmax denominator at the end.
 *
 * A task is one batch row and a group of query heads that share a KV head (GQA), so
 * each K and V row is loaded once for the whole group. Groups are split smaller when
 * there would otherwise be too few tasks to keep every thread busy (decode of a single
 * row). A row with no slots gets zeros. */
#include <math.h>

#include "cpu.h"
#include "simd.h"

#define ATTN_CHUNK 64   /* slots scored before each softmax update */
#define ATTN_GROUP 8    /* most query heads one task handles */

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

static void attn_task(void *ctx, int32_t task, int32_t thread) {
    (void)thread;
    const attn_job *job = ctx;
    const kern_attn *a = job->a;
    const int32_t r = task / job->tasks_per_row;
    const int32_t h0 = (task % job->tasks_per_row) * job->heads_per_task;
    const int32_t ng = job->heads_per_task, hd = a->head_dim;
    const int32_t kvh = h0 / (a->n_head / a->n_head_kv);
    const int64_t q_stride = (int64_t)a->n_head * hd, kv_stride = (int64_t)a->n_head_kv * hd;
    const float *q = a->q + r * q_stride + (int64_t)h0 * hd;
    float *out = a->out + r * q_stride + (int64_t)h0 * hd;
    const float *kbase = a->k + (int64_t)kvh * hd, *vbase = a->v + (int64_t)kvh * hd;

    float m[ATTN_GROUP], l[ATTN_GROUP];
    float sc[ATTN_GROUP][ATTN_CHUNK];
    for (int32_t g = 0; g < ng; g++) {
        m[g] = -INFINITY;
        l[g] = 0;
        for (int32_t i = 0; i < hd; i++) out[g * hd + i] = 0;
    }
    for (int32_t si = a->seg_off[r]; si < a->seg_off[r + 1]; si++) {
        const kern_seg seg = a->segs[si];
        for (int32_t s0 = 0; s0 < seg.len; s0 += ATTN_CHUNK) {
            const int32_t cnt = seg.len - s0 < ATTN_CHUNK ? seg.len - s0 : ATTN_CHUNK;
            const int64_t slot0 = (int64_t)seg.start + s0;
            for (int32_t j = 0; j < cnt; j++) {
                const float *k = kbase + (slot0 + j) * kv_stride;
                for (int32_t g = 0; g < ng; g++) sc[g][j] = simd_dot(q + g * hd, k, hd) * a->scale;
            }
            for (int32_t g = 0; g < ng; g++) {
                float cm = sc[g][0];
                for (int32_t j = 1; j < cnt; j++) cm = sc[g][j] > cm ? sc[g][j] : cm;
                if (cm > m[g]) {
                    /* exp(-inf) = 0 on the first chunk: nothing to rescale yet */
                    float f = expf(m[g] - cm);
                    l[g] *= f;
                    simd_scale(out + g * hd, f, hd);
                    m[g] = cm;
                }
                l[g] += attn_exp_sum(sc[g], cnt, m[g]);
            }
            for (int32_t j = 0; j < cnt; j++) {
                const float *v = vbase + (slot0 + j) * kv_stride;
                for (int32_t g = 0; g < ng; g++) simd_axpy(out + g * hd, sc[g][j], v, hd);
            }
        }
    }
    for (int32_t g = 0; g < ng; g++) simd_scale(out + g * hd, l[g] > 0 ? 1.0f / l[g] : 0.0f, hd);
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
