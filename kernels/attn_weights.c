/* attn_weights.c - the attention weights op of the host backends (ref and cpu): for a
 * teaching display, the softmax weights each row of a kern_attn puts on the slots of its
 * segments, for one query head or averaged over heads.
 *
 * It recomputes the scores from q and the K cache rather than reaching into the
 * attention kernels, so that a pass that does not ask pays nothing; sums are in double,
 * as the ref backend's attention takes them. Not a speed path: one thread. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern_impl.h"

/* Slots row r of a attends to. */
static int64_t row_cells(const kern_attn *a, int32_t r) {
    int64_t n = 0;
    for (int32_t s = a->seg_off[r]; s < a->seg_off[r + 1]; s++) n += a->segs[s].len;
    return n;
}

double kern_host_attn_scores(const kern_attn *a, int32_t r, int32_t h, double *score) {
    const int32_t hd = a->head_dim, n_rep = a->n_head / a->n_head_kv;
    const int64_t kv_stride = (int64_t)a->n_head_kv * hd, kv_off = (int64_t)(h / n_rep) * hd;
    const float *q = a->q + (int64_t)r * a->n_head * hd + (int64_t)h * hd;
    double mx = -INFINITY;
    int64_t j = 0;
    for (int32_t s = a->seg_off[r]; s < a->seg_off[r + 1]; s++)
        for (int32_t t = 0; t < a->segs[s].len; t++, j++) {
            const float *k = a->k + (int64_t)(a->segs[s].start + t) * kv_stride + kv_off;
            double d = 0;
            for (int32_t i = 0; i < hd; i++) d += (double)q[i] * k[i];
            score[j] = d * a->scale;
            if (score[j] > mx) mx = score[j];
        }
    return mx;
}

/* Softmax of q.k * scale over row r's slots for query head h, added times `times` into
 * w (the row's cells); score is scratch of the row's cells. */
static void head_weights(const kern_attn *a, int32_t r, int32_t h, double times, double *score,
                         double *w) {
    const double ms = kern_host_attn_scores(a, r, h, score);
    const double mx = a->sinks && a->sinks[h] > ms ? a->sinks[h] : ms;
    const int64_t n = row_cells(a, r);
    double sum = a->sinks ? exp(a->sinks[h] - mx) : 0;
    for (int64_t i = 0; i < n; i++) sum += (score[i] = exp(score[i] - mx));
    for (int64_t i = 0; i < n; i++) w[i] += times * score[i] / sum;
}

void kern_host_attn_weights(kern_backend *b, const kern_attn *a, int32_t head, float *w) {
    int64_t most = 1;
    for (int32_t r = 0; r < a->n_rows; r++)
        if (row_cells(a, r) > most) most = row_cells(a, r);
    double *score = kern_backend_alloc(b, "attn_weights", "a row's scores", 2 * (size_t)most *
                                       sizeof *score);
    if (!score) return;
    double *acc = score + most;
    for (int32_t r = 0; r < a->n_rows; r++) {
        const int64_t n = row_cells(a, r);
        memset(acc, 0, (size_t)n * sizeof *acc);
        if (head >= 0) {
            head_weights(a, r, head, 1.0, score, acc);
        } else {
            for (int32_t h = 0; h < a->n_head; h++)
                head_weights(a, r, h, 1.0 / a->n_head, score, acc);
        }
        for (int64_t i = 0; i < n; i++) w[i] = (float)acc[i];
        w += n;
    }
    free(score);
}
