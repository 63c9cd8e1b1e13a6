/* test_kernels_arch.c - the ops that model families beyond llama need (kern.h's issue-28
 * block: rope_neox, add_bias, scale, geglu; gpt-oss's swiglu_oai and attention sinks):
 * the ref backend against hand-computed values, then the cpu backend against ref on
 * random data with 1, 2 and 3 threads, and geglu's and swiglu_oai's result for an element
 * (attention's for a row) the same bits wherever it falls in the batch (the forest's
 * bitwise promise).
 *
 * Error measure t_nerr as in test_kernels.c; observed values are printed on stderr.
 *   rope_neox   1e-6  the same angle table as rope, pairs (i, i + rope_dim / 2)
 *   geglu       1e-6  polynomial exp for the tanh (~2 ulp)
 *   add_bias    0     one float add either way
 *   softcap     0     the same float expression value by value
 *   scale       0     one float product either way
 *   swiglu_oai  1e-6  polynomial exp (~2 ulp)
 *   attention with sinks  3e-6 as without (online softmax, polynomial exp)
 * and that the rope frequencies the cpu backend keeps follow a change of base, rope_dim or
 * freq factors. */
#include <stdint.h>

#include "kernels/kern.h"
#include "t.h"
#include "t_kern.h"

static double seen_rope, seen_geglu;

static void test_ref_values(kern_backend *ref) {
    const kern_ops *k = kern_backend_ops(ref);
    T_CHECK(k->rope_neox && k->add_bias && k->scale && k->geglu, "ref has the issue-28 ops");
    /* rope_neox with head 6, rotated dims 4: pairs (0, 2) and (1, 3); a freq factor of
     * 2/pi turns pair 0 by 90 degrees at position 1; dims 4, 5 stay */
    float r[6] = {1, 5, 0, 6, 7, 8}, ff[2] = {(float)(2 / M_PI), 1e30f};
    int32_t pos1 = 1;
    k->rope_neox(ref, r, &pos1, 1, 1, 6, 4, 10000.0f, ff);
    T_CHECK(fabs(r[0]) < 1e-6 && fabs(r[2] - 1) < 1e-6, "ref rope_neox 90 deg: (%g, %g)", r[0],
            r[2]);
    T_CHECK(fabs(r[1] - 5) < 1e-6 && fabs(r[3] - 6) < 1e-6, "ref rope_neox pair 1 turned by "
            "~0: (%g, %g)", r[1], r[3]);
    T_CHECK(r[4] == 7 && r[5] == 8, "ref rope_neox touched dims past rope_dim");
    /* geglu: gelu(0) = 0; gelu(1) = 0.8411920; gelu(-3) * 2 = -0.0036374 * 2 */
    float g[3] = {0, 1, -3}, u[3] = {5, 1, 2}, y[3];
    k->geglu(ref, y, g, u, 3);
    T_CHECK(y[0] == 0 && fabs(y[1] - 0.8411920f) < 1e-6 && fabs(y[2] + 0.0072748f) < 1e-6,
            "ref geglu: %g %g %g", y[0], y[1], y[2]);
    float b[2] = {1, -2}, x[4] = {1, 2, 3, 4};
    k->add_bias(ref, x, b, 2, 2);
    T_CHECK(x[0] == 2 && x[1] == 0 && x[2] == 4 && x[3] == 2, "ref add_bias");
    k->scale(ref, x, 0.5f, 4);
    T_CHECK(x[0] == 1 && x[1] == 0 && x[2] == 2 && x[3] == 1, "ref scale");
    /* softcap: 30 tanh(x / 30): 0 stays, 30 -> 22.8478, -1e6 -> -30, 3 -> 2.99004 */
    float sc[4] = {0, 30, -1e6f, 3};
    k->softcap(ref, sc, 30.0f, 4);
    T_CHECK(sc[0] == 0 && fabs(sc[1] - 22.847825f) < 1e-4 && sc[2] == -30 && fabs(sc[3] - 2.990040f) < 1e-5,
            "ref softcap: %g %g %g %g", sc[0], sc[1], sc[2], sc[3]);
}

static void test_against_ref(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    const kern_ops *kr = kern_backend_ops(ref), *kc = kern_backend_ops(cpu);
    /* rope_neox: head size, rotated dims, heads; the last runs in the cpu pool */
    static const int32_t hds[][3] = {{64, 64, 3}, {256, 256, 4}, {128, 64, 2}, {8, 8, 3},
                                     {128, 128, 32}};
    for (size_t i = 0; i < sizeof hds / sizeof *hds; i++) {
        const int32_t hd = hds[i][0], rd = hds[i][1], nh = hds[i][2], n_rows = 20;
        const int64_t n = (int64_t)n_rows * nh * hd;
        float *x0 = rand_floats(&seed, n, 2), *x1 = malloc((size_t)n * sizeof *x1);
        int32_t pos[20] = {0, 1, 2, 17, 511, 4095, 32767};
        for (int32_t r = 7; r < n_rows; r++) pos[r] = rng_int(&seed, 32768);
        memcpy(x1, x0, (size_t)n * sizeof *x1);
        kr->rope_neox(ref, x0, pos, n_rows, nh, hd, rd, 1000000.0f, NULL);
        kc->rope_neox(cpu, x1, pos, n_rows, nh, hd, rd, 1000000.0f, NULL);
        double e = t_nerr(x1, x0, n);
        if (e > seen_rope) seen_rope = e;
        T_CHECK(e <= 1e-6, "rope_neox hd %d rd %d: nerr %.3g", hd, rd, e);
        free(x0), free(x1);
    }
    static const int64_t ns[] = {1, 7, 640, 2048 * 17 + 3, 70000};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        const int64_t n = ns[i];
        float *g = rand_floats(&seed, n, 8), *u = rand_floats(&seed, n, 2);
        float *y0 = malloc((size_t)n * sizeof *y0), *y1 = malloc((size_t)n * sizeof *y1);
        kr->geglu(ref, y0, g, u, n);
        kc->geglu(cpu, y1, g, u, n);
        double e = t_nerr(y1, y0, n);
        if (e > seen_geglu) seen_geglu = e;
        T_CHECK(e <= 1e-6, "geglu n %lld: nerr %.3g", (long long)n, e);
        T_CHECK(t_gated_alone(cpu, kc->geglu, g, u, y1, n), "geglu n %lld: an element alone "
                "differs from its value in the array", (long long)n);
        memcpy(y0, g, (size_t)n * sizeof *y0);
        memcpy(y1, g, (size_t)n * sizeof *y1);
        kr->scale(ref, y0, 25.298221f, n);
        kc->scale(cpu, y1, 25.298221f, n);
        T_CHECK(memcmp(y0, y1, (size_t)n * sizeof *y0) == 0, "scale n %lld differs", (long long)n);
        kr->softcap(ref, y0, 30.0f, n); /* (values up to about 200: past the cap) */
        kc->softcap(cpu, y1, 30.0f, n);
        T_CHECK(memcmp(y0, y1, (size_t)n * sizeof *y0) == 0, "softcap n %lld differs", (long long)n);
        free(g), free(u), free(y0), free(y1);
    }
    /* huge |gate|: the tanh saturates without NaN */
    float g[32], u[32], s0[32], s1[32];
    for (int i = 0; i < 32; i++) g[i] = (float)(i - 16) * 12.0f, u[i] = 1;
    kr->geglu(ref, s0, g, u, 32);
    kc->geglu(cpu, s1, g, u, 32);
    T_CHECK(t_nerr(s1, s0, 32) <= 1e-6, "geglu large gates: nerr %.3g", t_nerr(s1, s0, 32));
    const int32_t rows = 9, dim = 1024 + 3;
    float *x0 = rand_floats(&seed, (int64_t)rows * dim, 3), *bias = rand_floats(&seed, dim, 1);
    float *x1 = malloc(sizeof(float) * (size_t)rows * dim);
    memcpy(x1, x0, sizeof(float) * (size_t)rows * dim);
    kr->add_bias(ref, x0, bias, rows, dim);
    kc->add_bias(cpu, x1, bias, rows, dim);
    T_CHECK(memcmp(x0, x1, sizeof(float) * (size_t)rows * dim) == 0, "add_bias differs");
    free(x0), free(x1), free(bias);
}

static void test_oss_ref_values(kern_backend *ref) {
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
        T_CHECK(t_gated_alone(cpu, kc->swiglu_oai, g, u, y1, n), "swiglu_oai n %lld: an element "
                "alone differs from the array's", (long long)n);
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

/* One rotation of x0 by backend b into out: rope, or rope_neox when neox. */
static void rope_key_run(kern_backend *b, bool neox, float *out, const float *x0, const int32_t *pos,
                         int32_t n_rows, int32_t nh, int32_t hd, int32_t rd, float base,
                         const float *ff) {
    memcpy(out, x0, sizeof *out * (size_t)(n_rows * nh * hd));
    const kern_ops *k = kern_backend_ops(b);
    (neox ? k->rope_neox : k->rope)(b, out, pos, n_rows, nh, hd, rd, base, ff);
}

/* The cpu backend keeps the frequencies of its last two (base, rope_dim, freq factors):
 * a run of rotations that changes one of them at a time (two bases taken in turn, as a
 * model with local and global layers does; a third; a narrower rope_dim; factors
 * rewritten in place) gives at each call the bits of a fresh backend and ref's values. */
static void test_rope_keys(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    enum { R = 5, NH = 3, HD = 64 };
    static const struct {
        float base;
        int32_t rd;
        int ff; /* 0: none, 1: factors, 2: the same array rewritten */
        bool neox;
    } calls[] = {{10000, 64, 0, 0}, {500000, 64, 0, 0}, {10000, 64, 0, 1}, {500000, 64, 0, 0},
                 {1000000, 64, 0, 0}, {10000, 64, 0, 0}, {10000, 32, 0, 0}, {10000, 64, 1, 0},
                 {10000, 64, 2, 1}, {10000, 64, 0, 0}};
    float *x0 = rand_floats(&seed, R * NH * HD, 2), ff[32];
    float y[R * NH * HD], y_fresh[R * NH * HD], y_ref[R * NH * HD];
    const int32_t pos[R] = {0, 1, 77, 4095, 100000};
    for (int j = 0; j < 32; j++) ff[j] = 1.0f + (float)j / 8;
    for (size_t c = 0; c < sizeof calls / sizeof *calls; c++) {
        if (calls[c].ff == 2)
            for (int j = 0; j < 32; j++) ff[j] = 4.0f - (float)j / 16;
        const float *f = calls[c].ff ? ff : NULL;
        st_err err = {0};
        kern_backend *fresh = kern_backend_init("cpu", 1, &err);
        T_CHECK(fresh != NULL, "cpu backend: %s", err.msg);
        if (!fresh) break;
        rope_key_run(cpu, calls[c].neox, y, x0, pos, R, NH, HD, calls[c].rd, calls[c].base, f);
        rope_key_run(fresh, calls[c].neox, y_fresh, x0, pos, R, NH, HD, calls[c].rd, calls[c].base, f);
        rope_key_run(ref, calls[c].neox, y_ref, x0, pos, R, NH, HD, calls[c].rd, calls[c].base, f);
        kern_backend_free(fresh);
        T_CHECK(memcmp(y, y_fresh, sizeof y) == 0, "rope call %d: kept frequencies differ from a fresh backend's",
                (int)c);
        const double e = t_nerr(y, y_ref, R * NH * HD);
        T_CHECK(e <= 1e-6, "rope call %d: nerr %.3g against ref", (int)c, e);
    }
    free(x0);
}

int main(void) {
    kern_backend *ref = t_ref();
    if (!ref) return t_done();
    test_ref_values(ref);
    test_oss_ref_values(ref);
    t_each_cpu(ref, test_against_ref, 2800);
    t_each_cpu(ref, test_swiglu, 4100);
    t_each_cpu(ref, test_sinks, 4200);
    t_each_cpu(ref, test_rope_keys, 4300);
    kern_backend_free(ref);
    fprintf(stderr, "max nerr seen: rope_neox %.2g, geglu %.2g\n", seen_rope, seen_geglu);
    return t_done();
}
