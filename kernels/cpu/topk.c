/* topk.c - the CPU backend's output ops: gathering rows, and each logits row's
 * log-sum-exp and top-k (kern_ops.topk_lse), one row a task on the backend's threads.
 *
 * The log-sum-exp is vec_log_sum_exp's (kernels/vec.c), the one host code uses too, so
 * a log-probability from this op is the same bits as one computed beside it. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "../vec.h"

/* The K largest of x[0..n), largest first (ties to the lower index), into ids and v;
 * returns how many (min(K, n)). */
static int32_t row_topk(const float *x, int32_t n, int32_t K, int32_t *ids, float *v) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        /* once the list is full, only a value above its last can enter: scan for the next */
        if (k == K && (i += (int32_t)vec_first_above(x + i, n - i, v[K - 1])) >= n) break;
        const float xi = x[i]; /* enters: the list is not full, or xi beats its last */
        int32_t j = k < K ? k++ : K - 1;
        while (j > 0 && v[j - 1] < xi) {
            v[j] = v[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        v[j] = xi;
        ids[j] = i;
    }
    return k;
}

typedef struct topk_job {
    const float *x;
    int32_t n, k;
    kern_lse *lse;
    int32_t *ids;
    float *lp;
} topk_job;

/* Row r: a pass for the log-sum-exp, one for the top-k (vec_first_above skips most of
 * the row), then the k values turned into log-probabilities. */
static void topk_row(void *ctx, int32_t r, int32_t thread) {
    (void)thread;
    const topk_job *j = ctx;
    const float *x = j->x + (size_t)r * j->n;
    kern_lse *l = &j->lse[r];
    l->log_sum = vec_log_sum_exp(x, j->n, &l->mx);
    if (j->k <= 0) return;
    int32_t *ids = j->ids + (size_t)r * j->k;
    float *lp = j->lp + (size_t)r * j->k;
    const int32_t got = row_topk(x, j->n, j->k, ids, lp);
    for (int32_t i = 0; i < got; i++) lp[i] = kern_logprob(lp[i], *l);
    for (int32_t i = got; i < j->k; i++) ids[i] = -1, lp[i] = -INFINITY;
}

void cpu_topk_lse(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                  kern_lse *lse, int32_t *ids, float *lp) {
    topk_job j = {x, n, k, lse, ids, lp};
    pool_run(cpu_pool(b), n_rows, topk_row, &j);
}
