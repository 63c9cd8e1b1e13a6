/* test_kernels_oss.c - what gpt-oss adds to the kernels: attention sinks (kern_attn.sinks)
 * and the clamped SwiGLU (swiglu_oai). The ref backend against hand-computed values, then
 * the cpu backend against ref on random data with 1 and 3 threads, each row's attention
 * and each element's activation the same bits alone as in a batch (the forest's promise).
 *
 * Bounds (t_nerr as in test_kernels.c): attention with sinks 3e-6 as without (online
 * softmax, polynomial exp); swiglu_oai 1e-6 (polynomial exp, ~2 ulp). */
#include <stdint.h>

#include "kernels/kern.h"
#include "t.h"
#include "t_kern.h"

static void test_ref_values(kern_backend *ref) {
    const kern_ops *k = kern_backend_ops(ref);
    T_CHECK(k->swiglu_oai != NULL, "ref has swiglu_oai");
    /* g 0 -> 0; g 1, u 0 -> sigmoid(1.702); g 10 -> 7, u 10 -> 7: 7 sigmoid(11.914) 8 */
    float g[3] = {0, 1, 10}, u[3] = {3, 0, 10}, y[3];
    k->swiglu_oai(ref, y, g, u, 3);
    const double s1 = 1 / (1 + exp(-1.702)), s7 = 56 / (1 + exp(-1.702 * 7));
    T_CHECK(y[0] == 0 && fabs(y[1] - s1) < 1e-6 && fabs(y[2] - s7) < 1e-4,
            "ref swiglu_oai: %g %g %g (want 0 %g %g)", y[0], y[1], y[2], s1, s7);
    /* one slot of score 0 beside a sink of 0 weighs 1/2; a sink of ln 3, 1/4 */
    float q[2] = {0, 0}, kk[2] = {1, 1}, v[2] = {4, 8}, out[2], sink = 0;
    int32_t off[2] = {0, 1};
    kern_seg seg = {0, 1};
    kern_attn a = {.n_rows = 1, .n_head = 1, .n_head_kv = 1, .head_dim = 2, .scale = 1,
                   .q = q, .k = kk, .v = v, .seg_off = off, .segs = &seg, .out = out,
                   .sinks = &sink};
    k->attention(ref, &a);
    T_CHECK(fabs(out[0] - 2) < 1e-6 && fabs(out[1] - 4) < 1e-6, "ref sink 0: (%g, %g)", out[0],
            out[1]);
    sink = logf(3);
    k->attention(ref, &a);
    T_CHECK(fabs(out[0] - 1) < 1e-6 && fabs(out[1] - 2) < 1e-6, "ref sink ln 3: (%g, %g)",
            out[0], out[1]);
    float w;
    k->attn_weights(ref, &a, 0, &w);
    T_CHECK(fabs(w - 0.25) < 1e-6, "ref attention weight beside a sink of ln 3: %g", w);
}

static void test_swiglu(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    const kern_ops *kr = kern_backend_ops(ref), *kc = kern_backend_ops(cpu);
    static const int64_t ns[] = {1, 7, 640, 70000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        const int64_t n = ns[i];
        float *g = rand_floats(&seed, n, 12), *u = rand_floats(&seed, n, 12); /* past +-7 */
        float *y0 = malloc((size_t)n * sizeof *y0), *y1 = malloc((size_t)n * sizeof *y1);
        kr->swiglu_oai(ref, y0, g, u, n);
        kc->swiglu_oai(cpu, y1, g, u, n);
        T_CHECK(t_nerr(y1, y0, n) <= 1e-6, "swiglu_oai n %lld: nerr %.3g", (long long)n,
                t_nerr(y1, y0, n));
        bool same = true;
        for (int64_t j = 0; j < n && j < 50; j++) {
            float one;
            kc->swiglu_oai(cpu, &one, g + j, u + j, 1);
            same &= memcmp(&one, &y1[j], sizeof one) == 0;
        }
        T_CHECK(same, "swiglu_oai n %lld: an element alone differs from the array's",
                (long long)n);
        free(g), free(u), free(y0), free(y1);
    }
}

/* Rows of 1..40 slots in one or two segments, 4 heads over 2 KV heads; sinks from -3 to
 * 3 and one of 30 (above every score: the running maximum jumps to it). */
static void test_sinks(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    enum { R = 12, NH = 4, NKV = 2, HD = 64, SLOTS = 96 };
    float *q = rand_floats(&seed, R * NH * HD, 1), *k = rand_floats(&seed, SLOTS * NKV * HD, 1);
    float *v = rand_floats(&seed, SLOTS * NKV * HD, 1), *sinks = rand_floats(&seed, NH, 3);
    float o0[R * NH * HD], o1[R * NH * HD], alone[NH * HD];
    sinks[2] = 30;
    int32_t off[R + 1] = {0};
    kern_seg segs[2 * R];
    for (int32_t r = 0; r < R; r++) {
        const int32_t len = 1 + rng_int(&seed, 40), two = rng_int(&seed, 2);
        segs[off[r]] = (kern_seg){0, two ? len / 2 + 1 : len};
        if (two) segs[off[r] + 1] = (kern_seg){50, len - len / 2};
        off[r + 1] = off[r] + 1 + two;
    }
    kern_attn a = {.n_rows = R, .n_head = NH, .n_head_kv = NKV, .head_dim = HD,
                   .scale = 0.125f, .q = q, .k = k, .v = v, .seg_off = off, .segs = segs,
                   .out = o0, .sinks = sinks};
    kern_backend_ops(ref)->attention(ref, &a);
    a.out = o1;
    kern_backend_ops(cpu)->attention(cpu, &a);
    T_CHECK(t_nerr(o1, o0, R * NH * HD) <= 3e-6, "attention with sinks: nerr %.3g",
            t_nerr(o1, o0, R * NH * HD));
    bool same = true;
    for (int32_t r = 0; r < R; r++) {
        kern_attn one = a;
        one.n_rows = 1, one.q = q + r * NH * HD, one.seg_off = off + r, one.out = alone;
        kern_backend_ops(cpu)->attention(cpu, &one);
        same &= memcmp(alone, o1 + r * NH * HD, sizeof alone) == 0;
    }
    T_CHECK(same, "attention with sinks: a row alone differs from its bits in the batch");
    free(q), free(k), free(v), free(sinks);
}

int main(void) {
    st_err err = {0};
    kern_backend *ref = kern_backend_init("ref", 1, &err);
    T_CHECK(ref != NULL, "ref backend: %s", err.msg);
    if (!ref) return t_done();
    test_ref_values(ref);
    for (int32_t nt = 1; nt <= 3; nt += 2) {
        kern_backend *cpu = kern_backend_init("cpu", nt, &err);
        T_CHECK(cpu != NULL, "cpu backend with %d threads: %s", (int)nt, err.msg);
        if (!cpu) continue;
        test_swiglu(ref, cpu, 4100 + (uint64_t)nt);
        test_sinks(ref, cpu, 4200 + (uint64_t)nt);
        kern_backend_free(cpu);
    }
    kern_backend_free(ref);
    return t_done();
}
