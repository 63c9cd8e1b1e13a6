/* test_topk.c - the output ops (gather_rows, topk_lse) and the log-probabilities built on
 * them.
 *
 * Ops: the cpu backend against the ref backend on rows with ties, -inf, odd lengths and
 * k above the row's length: the same ids in the same order, the same max, log-sums within
 * float-exp rounding, log-probabilities that are kern_logprob of the row's own lse, and
 * cpu's lse bitwise vec_log_sum_exp's (what sample_log_softmax uses). Step: on a random
 * model, each scored row's top-k (step_topk_of) holds the K best ids of its logits, and
 * their log-probabilities are bitwise step_logprob_of's, sample_log_softmax's, and those
 * stored as the forest's alternatives. */
#include <math.h>
#include <string.h>

#include "forest/sample.h"
#include "forest/step.h"
#include "kernels/vec.h"
#include "t.h"
#include "t_model.h"

static uint64_t rng = 88172645463325252ULL;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 16.0f - 8.0f;
}

/* Fills n_rows rows of n: random values, each row with ties (a value repeated, among them
 * its largest) and a few -inf (masked tokens). */
static void fill_rows(float *x, int32_t n_rows, int32_t n) {
    for (int32_t r = 0; r < n_rows; r++) {
        float *xr = x + (size_t)r * n;
        for (int32_t i = 0; i < n; i++) xr[i] = frand();
        if (n >= 4) {
            xr[n - 1] = xr[1] = 9.5f; /* a tie for first place, the later id last */
            xr[n / 2] = xr[2];        /* a tie lower down */
            xr[3] = -INFINITY;
        }
        if (n >= 9) xr[n - 2] = -INFINITY;
    }
}

/* The row's ids in rank order (value descending, id ascending) by qsort (insertion here
 * took most of the test's time on rows of 49,157: minutes under ASan). */
static const float *rank_x;
static int rank_cmp(const void *pa, const void *pb) {
    const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (rank_x[a] != rank_x[b]) return rank_x[a] > rank_x[b] ? -1 : 1;
    return (a > b) - (a < b);
}
static void rank_ids(const float *x, int32_t n, int32_t *out) {
    for (int32_t i = 0; i < n; i++) out[i] = i;
    rank_x = x;
    qsort(out, (size_t)n, sizeof *out, rank_cmp);
}

static void test_op(kern_backend *cpu, kern_backend *ref, int32_t n_rows, int32_t n, int32_t k) {
    const kern_ops *oc = kern_backend_ops(cpu), *orf = kern_backend_ops(ref);
    float *x = malloc(sizeof *x * (size_t)n_rows * n), *lpc = malloc(sizeof(float) * (size_t)(n_rows * k + 1));
    float *lpr = malloc(sizeof(float) * (size_t)(n_rows * k + 1)), *lsm = malloc(sizeof *lsm * (size_t)n);
    int32_t *idc = malloc(sizeof(int32_t) * (size_t)(n_rows * k + 1));
    int32_t *idr = malloc(sizeof(int32_t) * (size_t)(n_rows * k + 1)), *rank = malloc(sizeof *rank * (size_t)n);
    kern_lse *lc = malloc(sizeof *lc * (size_t)n_rows), *lr = malloc(sizeof *lr * (size_t)n_rows);
    fill_rows(x, n_rows, n);
    oc->topk_lse(cpu, x, n_rows, n, k, lc, idc, lpc);
    orf->topk_lse(ref, x, n_rows, n, k, lr, idr, lpr);
    bool ids_ok = true, rank_ok = true, pad_ok = true, lse_ok = true, lp_ok = true, vec_ok = true;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float mx;
        double ls = vec_log_sum_exp(xr, n, &mx);
        vec_ok &= mx == lc[r].mx && ls == lc[r].log_sum;
        lse_ok &= lc[r].mx == lr[r].mx && fabs(lc[r].log_sum - lr[r].log_sum) <= 1e-5;
        sample_log_softmax(xr, n, lsm);
        rank_ids(xr, n, rank);
        for (int32_t i = 0; i < k; i++) {
            const size_t j = (size_t)r * k + i;
            ids_ok &= idc[j] == idr[j];
            if (i >= n) {
                pad_ok &= idc[j] == -1 && idr[j] == -1 && lpc[j] == -INFINITY && lpr[j] == -INFINITY;
                continue;
            }
            rank_ok &= idc[j] == rank[i];
            /* the cpu's log-probabilities: the one formula, bitwise sample_log_softmax's */
            lp_ok &= lpc[j] == kern_logprob(xr[idc[j]], lc[r]) && lpc[j] == lsm[idc[j]] &&
                     lpr[j] == kern_logprob(xr[idr[j]], lr[r]) &&
                     (lpc[j] == lpr[j] || fabsf(lpc[j] - lpr[j]) <= 1e-5f); /* (-inf: equal) */
        }
    }
    T_CHECK(ids_ok, "%d rows of %d, k %d: cpu and ref pick the same ids in the same order", n_rows, n, k);
    T_CHECK(rank_ok, "%d rows of %d, k %d: the ids are the k best (value desc, id asc)", n_rows, n, k);
    T_CHECK(pad_ok, "%d rows of %d, k %d: entries past the row are -1 / -inf", n_rows, n, k);
    T_CHECK(lse_ok, "%d rows of %d, k %d: cpu and ref lse agree (max bitwise)", n_rows, n, k);
    T_CHECK(vec_ok, "%d rows of %d, k %d: cpu lse is vec_log_sum_exp's, bitwise", n_rows, n, k);
    T_CHECK(lp_ok, "%d rows of %d, k %d: lp = kern_logprob(x, lse), cpu = sample_log_softmax", n_rows, n, k);
    free(x), free(lpc), free(lpr), free(lsm), free(idc), free(idr), free(rank), free(lc), free(lr);
}

static void test_gather(kern_backend *be) {
    const kern_ops *o = kern_backend_ops(be);
    enum { R = 7, W = 13 };
    float x[R * W], y[R * W], want[R * W];
    for (int32_t i = 0; i < R * W; i++) x[i] = (float)i;
    const int32_t idx[4] = {1, 2, 4, 6};
    for (int32_t i = 0; i < 4; i++) memcpy(want + i * W, x + idx[i] * W, sizeof(float) * W);
    o->gather_rows(be, y, x, idx, 4, W);
    T_CHECK(!memcmp(y, want, sizeof(float) * 4 * W), "%s: gather_rows into another buffer", o->name);
    o->gather_rows(be, x, x, idx, 4, W);
    T_CHECK(!memcmp(x, want, sizeof(float) * 4 * W), "%s: gather_rows in place", o->name);
}

/* A step's top-k against its logits, step_logprob_of, sample_log_softmax and the forest's
 * stored alternatives, with the caller asking for more than the forest keeps. */
static void test_step(const model *m) {
    enum { KF = 3, KP = 6 };
    const int32_t V = m->hp.n_vocab, prompt[4] = {1, 5, 9, 2};
    forest *f = forest_init(64, KF);
    model_ctx *c = t_new_ctx(m, 64);
    step_plan p;
    step_plan_init(&p);
    p.top_k = KP;
    st_err err = {0};
    forest_id last, kids[2];
    forest_add_root(f, prompt, NULL, 4, 0, &last, &err);
    int32_t t1 = 7, t2 = 11;
    forest_append(f, last, &t1, NULL, 1, &kids[0], &err);
    forest_append(f, last, &t2, NULL, 1, &kids[1], &err);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "step: %s", err.msg);
    float *lsm = malloc(sizeof *lsm * (size_t)V);
    int32_t *rank = malloc(sizeof *rank * (size_t)V);
    for (int32_t k = 0; k < 2; k++) {
        const int32_t *ids;
        const float *lp;
        int32_t n = step_topk_of(&p, kids[k], &ids, &lp);
        const float *lg = step_logits_of(&p, kids[k]);
        T_CHECK(n == KP && lg, "leaf %d: %d of %d ids", k, n, KP);
        if (n != KP || !lg) continue;
        sample_log_softmax(lg, V, lsm);
        rank_ids(lg, V, rank);
        bool ok = true;
        for (int32_t i = 0; i < n; i++)
            ok &= ids[i] == rank[i] && lp[i] == step_logprob_of(&p, kids[k], ids[i]) && lp[i] == lsm[ids[i]];
        T_CHECK(ok, "leaf %d: top-k ids are the best, lp bitwise step_logprob_of and sample_log_softmax", k);
        int32_t fid[KF];
        float flp[KF];
        int32_t nf = forest_topk(f, kids[k], fid, flp, KF);
        T_CHECK(nf == KF && !memcmp(fid, ids, sizeof fid) && !memcmp(flp, lp, sizeof flp),
                "leaf %d: the forest's %d alternatives are the step's first, bitwise", k, nf);
    }
    T_CHECK(step_topk_of(&p, last, NULL, NULL) == 0, "an unscored node has no top-k");
    /* no top-k asked for: none computed, log-probabilities still on demand */
    forest_free(f);
    f = forest_init(64, 0);
    p.top_k = 0;
    forest_add_root(f, prompt, NULL, 4, 0, &last, &err);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "step: %s", err.msg);
    T_CHECK(step_topk_of(&p, last, NULL, NULL) == 0, "no top-k when neither caller nor forest asks");
    sample_log_softmax(step_logits_of(&p, last), V, lsm);
    T_CHECK(step_logprob_of(&p, last, 3) == lsm[3], "on-demand log-probability is sample_log_softmax's");
    free(lsm), free(rank);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

int main(void) {
    st_err err = {0};
    kern_backend *cpu = kern_backend_init("cpu", 2, &err), *ref = kern_backend_init("ref", 1, &err);
    T_CHECK(cpu && ref, "backends: %s", err.msg);
    if (!cpu || !ref) return t_done();
    const int32_t lens[] = {1, 3, 7, 17, 33, 1001, 49157};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        const int32_t n = lens[i];
        test_op(cpu, ref, 5, n, 0);
        test_op(cpu, ref, 5, n, 1);
        test_op(cpu, ref, 5, n, 4);
        test_op(cpu, ref, 3, n, n + 3); /* k > n */
        if (n > 40) test_op(cpu, ref, 9, n, 40);
    }
    test_gather(cpu);
    test_gather(ref);
    kern_backend_free(cpu);
    kern_backend_free(ref);
    mkmodel_params mp = mkmodel_default_params();
    mp.seed = 5;
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (m) test_step(m);
    model_free(m);
    return t_done();
}
