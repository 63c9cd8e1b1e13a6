/* test_kernels.c - the compute kernels: the ref backend against hand-computed values
 * (so the oracle itself is checked), then every op of the cpu backend against ref on
 * random data with fixed seeds, for every weight type, odd sizes and 1, 2 and 3
 * threads; that a row's matmul result is the same bits alone and in a batch, and matmul_n's
 * the same bits as separate matmuls, and packed weights (kern_mat_pack) against ref as
 * tightly as stored ones, each row the bits of itself alone; that the kept rope table
 * follows new positions; the quantisers' round trip; vec_max, vec_sum_exp, vec_argmax and vec_first_above against
 * scalar code; plus the backend API and the thread pool.
 *
 * Error measure: t_nerr = max|cpu - ref| / max|ref| over the op's output. Bounds are
 * about 3-10x the largest error observed on this data (printed at the end as
 * "max nerr seen" on stderr). Observed in brackets: AVX-512 / plain C (-DSIMD_SCALAR,
 * one accumulator, so longer float sums); AVX2 and SSE2 fall in between.
 *   matmul F32/F16/BF16   5e-5  [1.7e-6 / 2e-5] float vs double sums; weights exact
 *   matmul Q8_0           2e-5  [1.2e-5 / 2.2e-6] activations that quantise exactly (the
 *                               1.2e-5 is one output of n_in 256 that nearly cancels; all
 *                               others < 4e-6)
 *                         2e-2  [4.3e-3] random activations, rounded to int8 per block
 *   matmul Q4_0 .. MXFP4  2e-5  [3.6e-6 / 3.6e-6; AVX2 5.9e-6] activations that quantise
 *                               exactly (Q4_1 is the worst; the others 0.2e-6 .. 1.1e-6)
 *                         2e-2  [5.3e-3] random activations (4.0e-3 .. 5.3e-3 per type)
 *   quantise round trip   rms(dequant(quant(x)) - x) / rms(x) on uniform data; bounds are
 *                         1.5x the figures, which are about the quant step / sqrt(12):
 *                         Q8_0 .0038, Q4_0 .067, Q4_1 .060, Q5_0 .032, Q5_1 .029,
 *                         Q4_K .060, Q5_K .030, Q6_K .015, Q2_K .28, Q3_K .14, IQ4_NL
 *                         .070, IQ4_XS .072, MXFP4 .098
 *   get_row               0     both call the same dequantiser
 *   rmsnorm               2e-6  [1.4e-7 / 5.5e-7]
 *   rope                  1e-6  [1.1e-7] angles in double on both sides
 *   attention             3e-6  [3.6e-7 / 5.5e-7] online softmax, polynomial exp
 *   swiglu                1e-6  [1.2e-7] polynomial exp (~2 ulp)
 *   softmax               1e-5  [2.3e-7 / 3.2e-6]
 *   add                   0     one float add either way */
#include <stdint.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/matmul.h"
#include "kernels/kern.h"
#include "kernels/pool.h"
#include "kernels/vec.h"
#include "t.h"
#include "t_kern.h"

/* test-isa's vnni256 level builds with SIMD_256 on an AVX-512 VNNI target to run the code
 * of AVX-VNNI's chips: the 256-bit tiles with dpbusd, which this checks it got. */
#if defined(SIMD_256) && defined(__AVX512VNNI__) && (MM_Q8_512 || !MM_Q8_SIMD || !MM_Q8_VNNI)
#error "SIMD_256 on AVX-512 VNNI should give the 256-bit dpbusd tiles (MM_Q8_SIMD, MM_Q8_VNNI)"
#endif

/* ---- data ---- */

/* Worst normalised error seen per op, for the summary and for setting bounds. */
/* The ggml block types; their errors are per type, exact (q8 x) and random activations. */
static const uint32_t blk_types[] = {DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K,
                                     DT_Q6_K, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
#define N_BLK 12

enum { E_F32, E_F16, E_BF16, E_Q8_0, E_Q8_0X, E_GETROW, E_RMS, E_ROPE, E_ATTN, E_SWIGLU, E_ADD,
       E_SOFTMAX, E_BLKX, E_BLKR = E_BLKX + N_BLK, E_N = E_BLKR + N_BLK };
static const char *const e_names[E_BLKX] = {
    "matmul F32", "matmul F16", "matmul BF16", "matmul Q8_0", "matmul Q8_0 (q8 x)", "get_row",
    "rmsnorm", "rope", "attention", "swiglu", "add", "softmax"};
static const double e_bound[E_BLKX] = {5e-5, 5e-5, 5e-5, 2e-2, 2e-5, 0, 2e-6, 1e-6, 3e-6, 1e-6, 0, 1e-5};
/* the block types': exact activations, random ones */
#define E_BLKX_BOUND 2e-5
#define E_BLKR_BOUND 2e-2

/* An error slot's name ("matmul Q4_K (q8 x)" for a block type's exact slot) and bound. */
static const char *e_name(int e) {
    static char buf[E_N][40];
    if (e < E_BLKX) return e_names[e];
    const bool x = e < E_BLKR;
    snprintf(buf[e], sizeof buf[e], "matmul %s%s", dtype_name(blk_types[e - (x ? E_BLKX : E_BLKR)]),
             x ? " (q8 x)" : "");
    return buf[e];
}
static double e_bound_of(int e) {
    return e < E_BLKX ? e_bound[e] : e < E_BLKR ? E_BLKX_BOUND : E_BLKR_BOUND;
}
static double e_seen[E_N];

static void check_err(int e, double err, const char *what) {
    if (err > e_seen[e] || err != err) e_seen[e] = err;
    T_CHECK(err <= e_bound_of(e), "%s: %s nerr %.3g > bound %.3g", e_name(e), what, err,
            e_bound_of(e));
}

static int blk_index(uint32_t t) {
    for (int i = 0; i < N_BLK; i++)
        if (blk_types[i] == t) return i;
    return -1;
}

/* The error slot of a type with activations that quantise exactly (random: false). */
static int e_of_type(uint32_t t, bool random) {
    if (blk_index(t) >= 0) return (random ? E_BLKR : E_BLKX) + blk_index(t);
    if (t == DT_Q8_0) return random ? E_Q8_0 : E_Q8_0X;
    return t == DT_F32 ? E_F32 : t == DT_F16 ? E_F16 : E_BF16;
}

/* ---- the oracle against hand-computed values ---- */

static void test_ref_oracle(kern_backend *ref) {
    const kern_ops *k = kern_backend_ops(ref);
    /* rmsnorm of [1,2,3]: rms = sqrt(14/3) */
    float x[4] = {1, 2, 3}, w[3] = {1, 1, 2}, y[4];
    k->rmsnorm(ref, y, x, w, 1, 3, 0.0f);
    double inv = 1.0 / sqrt(14.0 / 3.0);
    T_CHECK(fabs(y[0] - inv) < 1e-6 && fabs(y[1] - 2 * inv) < 1e-6 && fabs(y[2] - 6 * inv) < 1e-6,
            "ref rmsnorm [%g %g %g]", y[0], y[1], y[2]);

    /* rope: freq factor 2/pi makes theta_0 = pi/2, so position 1 turns pair 0 by 90
     * degrees; pair 1 has theta = 10000^(-2/4) = 0.01; dims past rope_dim stay. */
    float r[6] = {1, 0, 1, 0, 7, 8};
    float ff[2] = {(float)(2.0 / M_PI), 1.0f};
    int32_t pos1 = 1;
    k->rope(ref, r, &pos1, 1, 1, 6, 4, 10000.0f, ff);
    T_CHECK(fabs(r[0]) < 1e-6 && fabs(r[1] - 1) < 1e-6, "ref rope 90 deg: (%g, %g)", r[0], r[1]);
    T_CHECK(fabs(r[2] - cos(0.01)) < 1e-6 && fabs(r[3] - sin(0.01)) < 1e-6,
            "ref rope pair 1: (%g, %g)", r[2], r[3]);
    T_CHECK(r[4] == 7 && r[5] == 8, "ref rope touched dims past rope_dim");
    /* a large position: the angle must be computed in (at least) double */
    float big[4] = {1, 0, 1, 0};
    int32_t posb = 100000;
    k->rope(ref, big, &posb, 1, 1, 4, 4, 10000.0f, NULL);
    long double a1 = 100000.0L * powl(10000.0L, -0.5L); /* pair 1: 1000 rad */
    T_CHECK(fabsl(big[0] - cosl(100000.0L)) < 1e-6 && fabsl(big[1] - sinl(100000.0L)) < 1e-6 &&
                fabsl(big[2] - cosl(a1)) < 1e-6 && fabsl(big[3] - sinl(a1)) < 1e-6,
            "ref rope at 1e5: (%g, %g, %g, %g)", big[0], big[1], big[2], big[3]);

    /* attention: one slot returns v; two slots with scores 0 and ln 2 weigh 1/3, 2/3 */
    float q[2] = {1, 0}, kk[4] = {0, 5, (float)M_LN2, 5}, vv[4] = {3, -1, 6, 2}, out[2];
    int32_t off1[2] = {0, 1}, off2[2] = {0, 2};
    kern_seg s1[1] = {{1, 1}}, s2[2] = {{1, 1}, {0, 1}};
    kern_attn at = {.n_rows = 1, .n_head = 1, .n_head_kv = 1, .head_dim = 2, .scale = 1,
                    .q = q, .k = kk, .v = vv, .seg_off = off1, .segs = s1, .out = out};
    k->attention(ref, &at);
    T_CHECK(fabs(out[0] - 6) < 1e-6 && fabs(out[1] - 2) < 1e-6, "ref attention one slot");
    at.seg_off = off2;
    at.segs = s2;
    k->attention(ref, &at);
    T_CHECK(fabs(out[0] - (3.0 / 3 + 2 * 6.0 / 3)) < 1e-5 && fabs(out[1] - (-1.0 / 3 + 4.0 / 3)) < 1e-5,
            "ref attention 1/3-2/3: (%g, %g)", out[0], out[1]);

    /* softmax: [0, ln 2] -> [1/3, 2/3]; a random row sums to 1 */
    float sm[2] = {0, (float)M_LN2};
    k->softmax(ref, sm, 1, 2);
    T_CHECK(fabs(sm[0] - 1.0 / 3) < 1e-6 && fabs(sm[1] - 2.0 / 3) < 1e-6, "ref softmax");
    uint64_t seed = 5;
    float *big_row = rand_floats(&seed, 1000, 20);
    k->softmax(ref, big_row, 1, 1000);
    double sum = 0;
    for (int i = 0; i < 1000; i++) sum += big_row[i];
    T_CHECK(fabs(sum - 1) < 1e-5, "ref softmax sums to %.8f", sum);
    free(big_row);

    /* swiglu: silu(0) = 0, silu(1) * 2 = 2 / (1 + e^-1); add */
    float g[2] = {0, 1}, u[2] = {5, 2}, sw[2];
    k->swiglu(ref, sw, g, u, 2);
    T_CHECK(sw[0] == 0 && fabs(sw[1] - 2 / (1 + exp(-1.0))) < 1e-6, "ref swiglu");
    k->add(ref, g, u, 2);
    T_CHECK(g[0] == 5 && g[1] == 3, "ref add");

    /* Q8_0: one known block (d = 0.5, q[j] = j - 16) times ones, and its get_row */
    block_q8_0 blk[2];
    for (int i = 0; i < 2; i++) {
        blk[i].d = f32_to_fp16(0.5f * (float)(i + 1));
        for (int j = 0; j < QK8_0; j++) blk[i].qs[j] = (int8_t)(j - 16);
    }
    kern_mat wq = {DT_Q8_0, 2, 32, blk, NULL};
    float ones[32], mq[2], gr[32];
    for (int j = 0; j < 32; j++) ones[j] = 1;
    k->matmul(ref, mq, &wq, ones, 1);
    T_CHECK(mq[0] == -8 && mq[1] == -16, "ref Q8_0 matmul (%g, %g)", mq[0], mq[1]);
    k->get_row(ref, gr, &wq, 1);
    T_CHECK(gr[0] == -16 && gr[31] == 15 && gr[17] == 1, "ref Q8_0 get_row");
    /* F16 2x2 with exact halves */
    uint16_t wh[4] = {f32_to_fp16(1.5f), f32_to_fp16(-2.25f), f32_to_fp16(0.5f), f32_to_fp16(4)};
    kern_mat wf = {DT_F16, 2, 2, wh, NULL};
    float xf[4] = {2, 1, -1, 1}, yf[4];
    k->matmul(ref, yf, &wf, xf, 2);
    T_CHECK(yf[0] == 0.75f && yf[1] == 5 && yf[2] == -3.75f && yf[3] == 3.5f,
            "ref F16 matmul [%g %g %g %g]", yf[0], yf[1], yf[2], yf[3]);
}

/* ---- cpu against ref ---- */

static void test_matmul(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint32_t types[] = {DT_F32,  DT_F16,  DT_BF16, DT_Q8_0, DT_Q4_0,
                                     DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K,
                                     DT_Q6_K, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    /* 64, 288 and 4128: rows of 32-blocks that end in a part of a 256 chunk; the sizes
     * from 256 on are for the quantised types only (the float ones' figures predate them) */
    static const int64_t n_ins[] = {32, 40, 64, 4096 + 32, 256, 288, 4096 + 256};
    static const int64_t n_outs[] = {1, 5, 13, 67};
    static const int32_t n_rowss[] = {1, 2, 3, 7, 8, 17};
    char what[128];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const bool quant_x = types[ti] != DT_F32 && types[ti] != DT_F16 && types[ti] != DT_BF16;
        for (size_t ii = 0; ii < sizeof n_ins / sizeof *n_ins; ii++) {
            const int64_t n_in = n_ins[ii];
            if (!dtype_row_ok(types[ti], n_in) || (ii >= 4 && !quant_x)) continue;
            for (size_t oi = 0; oi < sizeof n_outs / sizeof *n_outs; oi++) {
                const int64_t n_out = n_outs[oi];
                void *wd = make_weights(&seed, types[ti], n_out, n_in);
                kern_mat w = {types[ti], n_out, n_in, wd, NULL};
                float *x = quant_x ? t_q8_exact_floats(&seed, 17 * n_in)
                                   : rand_floats(&seed, 17 * n_in, 1);
                float *y0 = malloc((size_t)(17 * n_out) * sizeof *y0);
                float *y1 = malloc((size_t)(17 * n_out) * sizeof *y1);
                float *y_one = malloc((size_t)n_out * sizeof *y_one);
                kern_backend_ops(cpu)->matmul(cpu, y_one, &w, x, 1);
                for (size_t ri = 0; ri < sizeof n_rowss / sizeof *n_rowss; ri++) {
                    const int32_t n_rows = n_rowss[ri];
                    kern_backend_ops(ref)->matmul(ref, y0, &w, x, n_rows);
                    for (int64_t i = 0; i < n_rows * n_out; i++) y1[i] = NAN;
                    kern_backend_ops(cpu)->matmul(cpu, y1, &w, x, n_rows);
                    snprintf(what, sizeof what, "%s %d threads n_in %lld n_out %lld n_rows %d",
                             dtype_name(types[ti]), (int)kern_backend_threads(cpu),
                             (long long)n_in, (long long)n_out, (int)n_rows);
                    check_err(e_of_type(types[ti], false), t_nerr(y1, y0, n_rows * n_out), what);
                    /* row 0 must not depend on the batch around it (forest steps rely on it) */
                    T_CHECK(memcmp(y1, y_one, (size_t)n_out * sizeof *y1) == 0,
                            "%s: row 0 differs from the same row alone", what);
                }
                /* get_row of the last row */
                float *g0 = malloc((size_t)n_in * sizeof *g0), *g1 = malloc((size_t)n_in * sizeof *g1);
                kern_backend_ops(ref)->get_row(ref, g0, &w, n_out - 1);
                kern_backend_ops(cpu)->get_row(cpu, g1, &w, n_out - 1);
                check_err(E_GETROW, t_nerr(g1, g0, n_in), dtype_name(types[ti]));
                free(g0), free(g1), free(wd), free(x), free(y0), free(y1), free(y_one);
            }
        }
    }
}

/* Matmul with a large matrix, so the work is really split across threads; random
 * activations, so the quantised types show their activation rounding error. */
static void test_matmul_big(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint32_t types[] = {DT_F16,  DT_Q8_0, DT_Q4_0, DT_Q4_1,  DT_Q5_0,  DT_Q5_1,
                                     DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_Q2_K,  DT_Q3_K,
                                     DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    const int64_t n_in = 512, n_out = 1030;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        void *wd = make_weights(&seed, types[ti], n_out, n_in);
        kern_mat w = {types[ti], n_out, n_in, wd, NULL};
        float *x = rand_floats(&seed, 9 * n_in, 3);
        float *y0 = malloc((size_t)(9 * n_out) * sizeof *y0), *y1 = malloc((size_t)(9 * n_out) * sizeof *y1);
        for (int32_t n_rows = 1; n_rows <= 9; n_rows += 8) {
            kern_backend_ops(ref)->matmul(ref, y0, &w, x, n_rows);
            kern_backend_ops(cpu)->matmul(cpu, y1, &w, x, n_rows);
            check_err(e_of_type(types[ti], true), t_nerr(y1, y0, n_rows * n_out),
                      "1030x512 random activations");
        }
        free(wd), free(x), free(y0), free(y1);
    }
}

/* Quantise then dequantise: valid blocks, close to the input, exact for zeros. */
static void test_quant_roundtrip(uint64_t seed) {
    enum { N = 8192 };
    static const uint32_t types[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q4_K,  DT_Q5_K,
                                     DT_Q6_K, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    /* rms error / rms x on the data below, 1.5x the figures in the header */
    static const double bound[] = {0.006, 0.10, 0.09, 0.048, 0.044, 0.09, 0.045,
                                   0.022, 0.42, 0.21, 0.105, 0.108, 0.147};
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(dtype_row_bytes(DT_F32, N));
    /* uniform values whose scale changes every 64, as the rows of a weight matrix do */
    for (int i = 0; i < N; i++) x[i] = rng_unif(&seed) * ldexpf(1.0f, -(i / 64) % 7);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const uint32_t t = types[ti];
        T_CHECK(dtype_quantize_row(t, x, q, N) && dtype_dequantize_row(t, q, y, N),
                "%s: no (de)quantiser", dtype_name(t));
        double se = 0, sx = 0;
        for (int i = 0; i < N; i++) se += ((double)y[i] - x[i]) * (y[i] - x[i]), sx += (double)x[i] * x[i];
        double rel = sqrt(se / sx);
        fprintf(stderr, "round trip %s: rms error %.4f of rms x\n", dtype_name(t), rel);
        T_CHECK(rel <= bound[ti], "%s round trip: rms error %.4g > %.4g", dtype_name(t), rel, bound[ti]);
        float z[256] = {0}, zy[256];
        dtype_quantize_row(t, z, q, 256);
        dtype_dequantize_row(t, q, zy, 256);
        T_CHECK(t_nerr(zy, z, 256) == 0, "%s: zeros do not come back as zeros", dtype_name(t));
    }
    free(x), free(y), free(q);
}

static void test_rows_ops(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    const kern_ops *kr = kern_backend_ops(ref), *kc = kern_backend_ops(cpu);
    static const int32_t dims[] = {3, 64, 576, 4096 + 32};
    for (size_t di = 0; di < sizeof dims / sizeof *dims; di++) {
        const int32_t dim = dims[di], n_rows = 17;
        const int64_t n = (int64_t)dim * n_rows;
        float *x = rand_floats(&seed, n, 4), *w = rand_floats(&seed, dim, 1);
        float *y0 = malloc((size_t)n * sizeof *y0), *y1 = malloc((size_t)n * sizeof *y1);
        kr->rmsnorm(ref, y0, x, w, n_rows, dim, 1e-5f);
        kc->rmsnorm(cpu, y1, x, w, n_rows, dim, 1e-5f);
        check_err(E_RMS, t_nerr(y1, y0, n), "rmsnorm");
        memcpy(y1, x, (size_t)n * sizeof *y1); /* in place */
        kc->rmsnorm(cpu, y1, y1, w, n_rows, dim, 1e-5f);
        check_err(E_RMS, t_nerr(y1, y0, n), "rmsnorm in place");

        float *g = rand_floats(&seed, n, 8), *u = rand_floats(&seed, n, 2);
        kr->swiglu(ref, y0, g, u, n);
        kc->swiglu(cpu, y1, g, u, n);
        check_err(E_SWIGLU, t_nerr(y1, y0, n), "swiglu");
        kc->swiglu(cpu, g, g, u, n); /* in place */
        check_err(E_SWIGLU, t_nerr(g, y0, n), "swiglu in place");

        memcpy(y0, x, (size_t)n * sizeof *y0);
        memcpy(y1, x, (size_t)n * sizeof *y1);
        kr->add(ref, y0, u, n);
        kc->add(cpu, y1, u, n);
        check_err(E_ADD, t_nerr(y1, y0, n), "add");

        memcpy(y0, x, (size_t)n * sizeof *y0);
        memcpy(y1, x, (size_t)n * sizeof *y1);
        kr->softmax(ref, y0, n_rows, dim);
        kc->softmax(cpu, y1, n_rows, dim);
        check_err(E_SOFTMAX, t_nerr(y1, y0, n), "softmax");
        double sum = 0;
        for (int32_t i = 0; i < dim; i++) sum += y1[i];
        T_CHECK(fabs(sum - 1) < 1e-5, "cpu softmax row sums to %.8f", sum);
        free(x), free(w), free(y0), free(y1), free(g), free(u);
    }
    /* swiglu with huge |gate| (exp clamping) */
    float g[32], u[32], s0[32], s1[32];
    for (int i = 0; i < 32; i++) g[i] = (float)(i - 16) * 12.0f, u[i] = 1;
    kr->swiglu(ref, s0, g, u, 32);
    kc->swiglu(cpu, s1, g, u, 32);
    check_err(E_SWIGLU, t_nerr(s1, s0, 32), "swiglu large gates");
}

static void test_rope(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    /* head size, rotated dims, heads; the last runs in the cpu backend's pool (20 rows x
     * 32 heads x 128 rotated dims is past its threshold of elements), the others in line */
    static const int32_t hds[][3] = {{64, 64, 3}, {128, 128, 3}, {128, 64, 3}, {8, 8, 3},
                                     {80, 32, 3}, {128, 128, 32}};
    for (size_t i = 0; i < sizeof hds / sizeof *hds; i++) {
        const int32_t hd = hds[i][0], rd = hds[i][1], n_head = hds[i][2], n_rows = 20;
        const int64_t n = (int64_t)n_rows * n_head * hd;
        float *x0 = rand_floats(&seed, n, 2), *x1 = malloc((size_t)n * sizeof *x1);
        float *ff = rand_floats(&seed, rd / 2, 1);
        for (int32_t j = 0; j < rd / 2; j++) ff[j] = 1.5f + ff[j];
        int32_t pos[20] = {0, 1, 2, 17, 4095, 65536, 100000};
        for (int32_t r = 7; r < n_rows; r++) pos[r] = rng_int(&seed, 131072);
        for (int with_ff = 0; with_ff < 2; with_ff++) {
            memcpy(x1, x0, (size_t)n * sizeof *x1);
            float *y0 = x0;
            float *tmp = malloc((size_t)n * sizeof *tmp);
            memcpy(tmp, y0, (size_t)n * sizeof *tmp);
            kern_backend_ops(ref)->rope(ref, tmp, pos, n_rows, n_head, hd, rd, 500000.0f,
                                        with_ff ? ff : NULL);
            kern_backend_ops(cpu)->rope(cpu, x1, pos, n_rows, n_head, hd, rd, 500000.0f,
                                        with_ff ? ff : NULL);
            check_err(E_ROPE, t_nerr(x1, tmp, n), with_ff ? "rope freq factors" : "rope");
            free(tmp);
        }
        /* the cpu backend keeps the last angle table: the same pos buffer with new values
         * must not find the old table; and a backend that computes the table afresh gives
         * the same bits */
        float *t0 = malloc((size_t)n * sizeof *t0), *t1 = malloc((size_t)n * sizeof *t1);
        memcpy(x1, x0, (size_t)n * sizeof *x1);
        kern_backend_ops(cpu)->rope(cpu, x1, pos, n_rows, n_head, hd, rd, 10000.0f, NULL);
        for (int32_t r = 0; r < n_rows; r++) pos[r] = (pos[r] * 7 + 3) % 131072;
        memcpy(t0, x0, (size_t)n * sizeof *t0);
        memcpy(t1, x0, (size_t)n * sizeof *t1);
        memcpy(x1, x0, (size_t)n * sizeof *x1);
        kern_backend_ops(ref)->rope(ref, t0, pos, n_rows, n_head, hd, rd, 10000.0f, NULL);
        kern_backend_ops(cpu)->rope(cpu, x1, pos, n_rows, n_head, hd, rd, 10000.0f, NULL);
        check_err(E_ROPE, t_nerr(x1, t0, n), "rope after new positions in the same buffer");
        st_err e = {0};
        kern_backend *fresh = kern_backend_init("cpu", 1, &e);
        kern_backend_ops(fresh)->rope(fresh, t1, pos, n_rows, n_head, hd, rd, 10000.0f, NULL);
        T_CHECK(memcmp(t1, x1, (size_t)n * sizeof *t1) == 0, "rope: kept table vs fresh backend differ");
        kern_backend_free(fresh);
        free(t0), free(t1);
        free(x0), free(x1), free(ff);
    }
}

/* Random non-overlapping segments over [0, n_slots), in shuffled order. Returns the
 * count written to segs (at least one slot in total). */
static int32_t rand_segs(uint64_t *s, int32_t n_slots, kern_seg *segs, int32_t max_segs) {
    int32_t n = 0;
    for (int32_t at = 0; at < n_slots && n < max_segs;) {
        int32_t len = 1 + rng_int(s, 90);
        if (len > n_slots - at) len = n_slots - at;
        if (rng_int(s, 2)) segs[n++] = (kern_seg){at, len};
        at += len + rng_int(s, 3);
    }
    if (n == 0) segs[n++] = (kern_seg){rng_int(s, n_slots), 1};
    for (int32_t i = n - 1; i > 0; i--) {
        int32_t j = rng_int(s, i + 1);
        kern_seg t = segs[i];
        segs[i] = segs[j], segs[j] = t;
    }
    return n;
}

/* Attention of n_rows rows (scale 1 / sqrt(hd)) by ref into o_ref, then by cpu into
 * o_cpu; returns the call, its out at o_cpu. */
static kern_attn attn_both(kern_backend *ref, kern_backend *cpu, int32_t n_rows, int32_t nh,
                           int32_t nkv, int32_t hd, const float *q, const float *k,
                           const float *v, const int32_t *off, const kern_seg *segs,
                           float *o_ref, float *o_cpu) {
    kern_attn a = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                   .scale = 1.0f / sqrtf((float)hd), .q = q, .k = k, .v = v,
                   .seg_off = off, .segs = segs, .out = o_ref};
    kern_backend_ops(ref)->attention(ref, &a);
    a.out = o_cpu;
    kern_backend_ops(cpu)->attention(cpu, &a);
    return a;
}

static void test_attention(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    /* (AVX2: 8 .. 64 in registers, 80, 128 and 256 in blocks with a part block at 80) */
    static const int32_t hds[] = {8, 32, 64, 80, 128, 256};
    static const int32_t gqa[][2] = {{4, 4}, {4, 2}, {8, 2}, {6, 3}, {9, 3}};
    enum { N_SLOTS = 300, N_ROWS = 6, MAX_SEGS = 40 };
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
        for (size_t gi = 0; gi < sizeof gqa / sizeof *gqa; gi++) {
            const int32_t hd = hds[hi], nh = gqa[gi][0], nkv = gqa[gi][1];
            const int64_t qn = (int64_t)N_ROWS * nh * hd;
            /* large-ish q so scores spread over several units and the running max moves */
            float *q = rand_floats(&seed, qn, 3.0f);
            float *k = rand_floats(&seed, (int64_t)N_SLOTS * nkv * hd, 1.0f);
            float *v = rand_floats(&seed, (int64_t)N_SLOTS * nkv * hd, 1.0f);
            kern_seg segs[N_ROWS * MAX_SEGS];
            int32_t off[N_ROWS + 1] = {0};
            for (int32_t r = 0; r < N_ROWS; r++) {
                int32_t n;
                if (r == 0) { /* a row with a single slot */
                    segs[off[r]] = (kern_seg){rng_int(&seed, N_SLOTS), 1};
                    n = 1;
                } else if (r == 1) { /* one long segment: many chunks */
                    segs[off[r]] = (kern_seg){0, N_SLOTS};
                    n = 1;
                } else {
                    n = rand_segs(&seed, N_SLOTS, segs + off[r], MAX_SEGS);
                }
                off[r + 1] = off[r] + n;
            }
            float *o0 = malloc((size_t)qn * sizeof *o0), *o1 = malloc((size_t)qn * sizeof *o1);
            kern_attn a = attn_both(ref, cpu, N_ROWS, nh, nkv, hd, q, k, v, off, segs, o0, o1);
            char what[96];
            snprintf(what, sizeof what, "head_dim %d heads %d/%d threads %d", hd, nh, nkv,
                     (int)kern_backend_threads(cpu));
            check_err(E_ATTN, t_nerr(o1, o0, qn), what);
            /* the single-slot row returns v of its slot exactly (up to the division) */
            const float *vs = v + (int64_t)segs[0].start * nkv * hd;
            T_CHECK(fabsf(o1[0] - vs[0]) < 1e-6f, "one-slot row returns v");
            /* one row alone gives the same answer (no cross-row state) */
            if (hi == 0 && gi == 0) {
                kern_attn a1 = a;
                a1.n_rows = 1;
                a1.q = q + 3 * nh * hd;
                a1.seg_off = off + 3;
                float *o2 = malloc((size_t)nh * hd * sizeof *o2);
                a1.out = o2;
                kern_backend_ops(cpu)->attention(cpu, &a1);
                check_err(E_ATTN, t_nerr(o2, o0 + 3 * nh * hd, nh * hd), "single row");
                free(o2);
            }
            free(q), free(k), free(v), free(o0), free(o1);
        }
    }
}

/* matmul_n: one input by matrices of several types (each kind of quantised activations
 * and the float one) gives, per matrix, the bits of matmul alone, in ref and cpu. */
static void test_matmul_n(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint32_t types[] = {DT_Q4_1, DT_Q8_0, DT_F32, DT_Q6_K};
    static const int64_t n_outs[] = {67, 13, 5, 32};
    static const int32_t n_rowss[] = {1, 4, 17};
    const int64_t n_in = 512;
    kern_mat w[4];
    float *y[4], *y1 = malloc(sizeof(float) * 17 * 67);
    float *x = rand_floats(&seed, 17 * n_in, 1);
    for (int i = 0; i < 4; i++) {
        w[i] = (kern_mat){types[i], n_outs[i], n_in, make_weights(&seed, types[i], n_outs[i], n_in), NULL};
        y[i] = malloc(sizeof(float) * 17 * (size_t)n_outs[i]);
    }
    kern_backend *bs[2] = {ref, cpu};
    for (int bi = 0; bi < 2; bi++)
        for (size_t ri = 0; ri < sizeof n_rowss / sizeof *n_rowss; ri++)
            for (int n = 1; n <= 4; n++) {
                const int32_t n_rows = n_rowss[ri];
                const kern_ops *o = kern_backend_ops(bs[bi]);
                o->matmul_n(bs[bi], n, y, (const kern_mat *const[]){&w[0], &w[1], &w[2], &w[3]},
                            x, n_rows);
                for (int i = 0; i < n; i++) {
                    o->matmul(bs[bi], y1, &w[i], x, n_rows);
                    T_CHECK(memcmp(y1, y[i], sizeof(float) * (size_t)(n_rows * n_outs[i])) == 0,
                            "%s matmul_n of %d, %s with %d rows: the bits of matmul alone",
                            kern_backend_name(bs[bi]), n, dtype_name(types[i]), (int)n_rows);
                }
            }
    for (int i = 0; i < 4; i++) free((void *)w[i].data), free(y[i]);
    free(y1), free(x);
}

/* No packed form of a type of the packed tests: a failure where the build has packed tiles
 * (the instruction-set macros, not the kernels' own list of types), else a skip. A packer
 * that silently declines a type, leaving it on the slow stored path, fails here. */
static void t_no_pack(uint32_t type) {
    /* Q2_K and Q3_K are packed on AVX2 and NEON only (the K types' 256-scale tiles) */
    const bool k23_512 = MM_Q8_512 && (type == DT_Q2_K || type == DT_Q3_K);
    if (MM_PK && !k23_512)
        T_CHECK(false, "this build packs %s", dtype_name(type));
    else
        T_SKIP("this build has no packed form of %s", dtype_name(type));
}

/* kern_mat_pack on a pool of threads (each packing and zeroing its own o-blocks) makes the
 * bytes packing alone makes, for every packed type, a matrix of many tasks. */
static void test_pack_pool(uint64_t seed) {
    static const uint32_t types[] = {DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q8_0,   DT_Q4_K, DT_Q5_K,
                                     DT_Q6_K, DT_Q2_K, DT_Q3_K,   DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    pool *p = pool_init(3);
    T_CHECK(p != NULL, "pool_init(3)");
    for (size_t ti = 0; p && ti < sizeof types / sizeof *types; ti++) {
        kern_mat w = {types[ti], 16 * 45, 1024, make_weights(&seed, types[ti], 16 * 45, 1024), NULL};
        size_t b1 = 0, b3 = 0;
        void *one = kern_mat_pack(&w, &b1, NULL), *three = kern_mat_pack(&w, &b3, p);
        if (!one) {
            t_no_pack(types[ti]);
        } else {
            T_CHECK(three && b1 == b3 && b1 > (64u << 10) && memcmp(one, three, b1) == 0,
                    "%s: packed on 3 threads = packed alone (%zu bytes)", dtype_name(types[ti]), b1);
        }
        free(one), free(three), free((void *)w.data);
    }
    pool_free(p);
}

/* kern_mat_pack: the packed matrices (16 weight rows a vector, matmul_pk.c: every block
 * type) against ref, as tightly as the stored ones (activations that quantise exactly),
 * for blocks of 16 and 32 weight rows, any number of activation rows (1 .. 4 a pass, and
 * their rest); every row of a batch the bits of the same row alone, in a matmul_n beside
 * stored matrices too; no packed form where n_out is not a multiple of 16 or the type
 * has none. */
static void test_matmul_packed(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint32_t types[] = {DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q8_0,   DT_Q4_K, DT_Q5_K,
                                     DT_Q6_K, DT_Q2_K, DT_Q3_K,   DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    static const int64_t n_ins[] = {32, 96, 224, 256, 416, 576, 1536, 2048};
    static const int64_t n_outs[] = {16, 48, 80};
    /* 65 rows: past the rows from which 4-bit types take the wide tiles (only where n_in
     * is at most 576, to keep ref's time down) */
    enum { PK_ROWS = 65 };
    static const int32_t n_rowss[] = {1, 2, 3, 4, 5, 16, 17, PK_ROWS};
    const kern_ops *o = kern_backend_ops(cpu);
    static const uint32_t none[] = {DT_F32, DT_F16, DT_BF16};
    for (size_t ti = 0; ti < sizeof none / sizeof *none; ti++) {
        void *wd = make_weights(&seed, none[ti], 16, 256);
        kern_mat w = {none[ti], 16, 256, wd, NULL};
        void *pk = kern_mat_pack(&w, NULL, NULL);
        T_CHECK(pk == NULL, "%s has no packed form", dtype_name(none[ti]));
        free(pk), free(wd);
    }
    {
        void *wd = make_weights(&seed, DT_Q4_1, 40, 256);
        kern_mat w = {DT_Q4_1, 40, 256, wd, NULL};
        void *pk = kern_mat_pack(&w, NULL, NULL);
        T_CHECK(pk == NULL, "Q4_1 with 40 rows (not a multiple of 16) has no packed form");
        free(pk), free(wd);
    }
    char what[128];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++)
        for (size_t ii = 0; ii < sizeof n_ins / sizeof *n_ins; ii++)
            for (size_t oi = 0; oi < sizeof n_outs / sizeof *n_outs; oi++) {
                const int64_t n_in = n_ins[ii], n_out = n_outs[oi];
                if (!dtype_row_ok(types[ti], n_in)) continue;
                kern_mat w = {types[ti], n_out, n_in, make_weights(&seed, types[ti], n_out, n_in), NULL};
                size_t bytes = 0;
                w.packed = kern_mat_pack(&w, &bytes, NULL);
                if (!w.packed) {
                    t_no_pack(types[ti]);
                    free((void *)w.data);
                    continue;
                }
                /* the stored bytes, but for 64-byte padding a block of 16 rows (Q4_K, Q5_K,
                 * Q3_K: their 6-bit scales and mins as bytes, 4 more bytes a row and super
                 * block; Q2_K its 4-bit ones, 16 more; IQ4_XS its 6-bit scales, 2 more) */
                const size_t extra = w.type == DT_Q2_K                                            ? 16
                                     : w.type == DT_Q4_K || w.type == DT_Q5_K || w.type == DT_Q3_K ? 4
                                     : w.type == DT_IQ4_XS                                         ? 2
                                                                                                    : 0;
                const size_t stored = dtype_row_bytes(w.type, n_in) * (size_t)n_out +
                                      extra * (size_t)n_out * (size_t)(n_in / 256);
                T_CHECK(bytes >= stored && bytes < stored + 64 * (size_t)(n_out / 16),
                        "%s packed size %zu", dtype_name(w.type), bytes);
                float *x = t_qx_exact_floats(&seed, PK_ROWS * n_in, t_qx_span(w.type, true));
                float *y0 = malloc(sizeof(float) * PK_ROWS * (size_t)n_out);
                float *y1 = malloc(sizeof(float) * PK_ROWS * (size_t)n_out);
                float *y_one = malloc(sizeof(float) * PK_ROWS * (size_t)n_out);
                for (int32_t r = 0; r < PK_ROWS; r++) o->matmul(cpu, y_one + r * n_out, &w, x + r * n_in, 1);
                for (size_t ri = 0; ri < sizeof n_rowss / sizeof *n_rowss; ri++) {
                    const int32_t n_rows = n_rowss[ri];
                    if (n_rows == PK_ROWS && n_in > 576) continue;
                    kern_backend_ops(ref)->matmul(ref, y0, &w, x, n_rows);
                    for (int64_t i = 0; i < n_rows * n_out; i++) y1[i] = NAN;
                    o->matmul(cpu, y1, &w, x, n_rows);
                    snprintf(what, sizeof what, "%s packed, %d threads n_in %lld n_out %lld n_rows %d",
                             dtype_name(w.type), (int)kern_backend_threads(cpu), (long long)n_in,
                             (long long)n_out, (int)n_rows);
                    check_err(e_of_type(w.type, false), t_nerr(y1, y0, n_rows * n_out), what);
                    T_CHECK(memcmp(y1, y_one, sizeof(float) * (size_t)(n_rows * n_out)) == 0,
                            "%s: every row the bits of the same row alone", what);
                }
                free((void *)w.packed), free((void *)w.data), free(x), free(y0), free(y1), free(y_one);
            }
    /* packed and stored matrices in one matmul_n: each the bits of itself alone */
    const int64_t n_in = 576;
    static const uint32_t mix[] = {DT_Q4_1, DT_Q5_0, DT_Q8_0};
    kern_mat w[3];
    float *y[3], *y1 = malloc(sizeof(float) * 17 * 64), *x = rand_floats(&seed, 17 * n_in, 1);
    for (int i = 0; i < 3; i++) {
        w[i] = (kern_mat){mix[i], 64, n_in, make_weights(&seed, mix[i], 64, n_in), NULL};
        w[i].packed = kern_mat_pack(&w[i], NULL, NULL);
        y[i] = malloc(sizeof(float) * 17 * 64);
    }
    for (int32_t n_rows = 1; n_rows <= 17; n_rows += 8) {
        o->matmul_n(cpu, 3, y, (const kern_mat *const[]){&w[0], &w[1], &w[2]}, x, n_rows);
        for (int i = 0; i < 3; i++) {
            o->matmul(cpu, y1, &w[i], x, n_rows);
            T_CHECK(memcmp(y1, y[i], sizeof(float) * (size_t)n_rows * 64) == 0,
                    "matmul_n of packed and stored, %s (%s) with %d rows: the bits of it alone",
                    dtype_name(mix[i]), w[i].packed ? "packed" : "stored", (int)n_rows);
        }
    }
    for (int i = 0; i < 3; i++) free((void *)w[i].packed), free((void *)w[i].data), free(y[i]);
    free(y1), free(x);
}

/* Weights and activations at the ends of their ranges, where int16 pair sums
 * (AVX2's maddubs, matmul_pk256.c) come closest to saturating: every group of 16
 * weights 15 at +-1 and one just past -+1 (quants 0 or the type's top), activations
 * +-127. Packed and stored against ref. */
static void test_matmul_extreme(kern_backend *ref, kern_backend *cpu) {
    static const uint32_t types[] = {DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q8_0,   DT_Q4_K,
                                     DT_Q5_K, DT_Q6_K, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS,
                                     DT_MXFP4};
    const int64_t n_in = 512, n_out = 32;
    float *row = malloc(sizeof(float) * n_in), *x = malloc(sizeof(float) * 4 * n_in);
    float *y0 = malloc(sizeof(float) * 4 * n_out), *y1 = malloc(sizeof(float) * 4 * n_out);
    for (int64_t i = 0; i < 4 * n_in; i++) x[i] = i / n_in % 2 ? -127.0f : 127.0f;
    char what[96];
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const size_t rb = dtype_row_bytes(types[ti], n_in);
        uint8_t *wd = malloc(rb * (size_t)n_out);
        for (int64_t o = 0; o < n_out; o++) {
            const float sg = o % 2 ? -1.0f : 1.0f;
            for (int64_t i = 0; i < n_in; i++) row[i] = sg * (i % 16 ? 1.0f : -1.0001f);
            dtype_quantize_row(types[ti], row, wd + o * rb, n_in);
        }
        kern_mat w = {types[ti], n_out, n_in, wd, NULL};
        for (int form = 0; form < 2; form++) {
            if (form) w.packed = kern_mat_pack(&w, NULL, NULL);
            if (form && !w.packed) break;
            for (int32_t n_rows = 1; n_rows <= 4; n_rows++) {
                kern_backend_ops(ref)->matmul(ref, y0, &w, x, n_rows);
                kern_backend_ops(cpu)->matmul(cpu, y1, &w, x, n_rows);
                snprintf(what, sizeof what, "%s %s, extreme values, %d rows", dtype_name(w.type),
                         form ? "packed" : "stored", (int)n_rows);
                check_err(e_of_type(w.type, false), t_nerr(y1, y0, n_rows * n_out), what);
            }
        }
        free((void *)w.packed), free(wd);
    }
    free(row), free(x), free(y0), free(y1);
}

/* MXFP4 at the ends of its e8m0 scale's range, where the tiles make 2^(e - 128) from the
 * byte themselves (subnormal below e = 2): random codes with one e for the whole matrix,
 * packed and stored against ref. */
static void test_matmul_mxfp4_scales(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint8_t es[] = {0, 1, 2, 3, 60, 127, 200};
    const int64_t n_in = 96, n_out = 32, rb = n_in / 32 * (int64_t)sizeof(block_mxfp4);
    uint8_t *wd = malloc((size_t)(rb * n_out));
    float *x = t_q8_exact_floats(&seed, 3 * n_in), *y0 = malloc(sizeof(float) * 3 * n_out);
    float *y1 = malloc(sizeof(float) * 3 * n_out);
    char what[96];
    for (size_t ei = 0; ei < sizeof es; ei++) {
        for (int64_t i = 0; i < rb * n_out; i++) wd[i] = (uint8_t)rng_next(&seed);
        for (int64_t b = 0; b < n_in / 32 * n_out; b++) ((block_mxfp4 *)wd)[b].e = es[ei];
        kern_mat w = {DT_MXFP4, n_out, n_in, wd, NULL};
        for (int form = 0; form < 2; form++) {
            if (form) w.packed = kern_mat_pack(&w, NULL, NULL);
            if (form && !w.packed) break;
            kern_backend_ops(ref)->matmul(ref, y0, &w, x, 3);
            kern_backend_ops(cpu)->matmul(cpu, y1, &w, x, 3);
            snprintf(what, sizeof what, "MXFP4 %s, e = %d", form ? "packed" : "stored", (int)es[ei]);
            check_err(e_of_type(DT_MXFP4, false), t_nerr(y1, y0, 3 * n_out), what);
        }
        free((void *)w.packed);
    }
    free(wd), free(x), free(y0), free(y1);
}

/* Rows that share a long prefix of keys (leaves under one context, the rows of a
 * prefill) go through its chunks together, row after row while a chunk is in cache; each
 * row must still get exactly the bits it gets alone, and match the ref backend. */
static void test_attention_shared(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const int32_t hds[] = {16, 32, 64, 128, 256};
    enum { N_ROWS = 7, CTX = 200, OWN = 23 };
    const int32_t nh = 6, nkv = 2, n_slots = CTX + N_ROWS * OWN;
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++) {
        const int32_t hd = hds[hi];
        const int64_t qn = (int64_t)N_ROWS * nh * hd, row = (int64_t)nh * hd;
        float *q = rand_floats(&seed, qn, 3.0f);
        float *k = rand_floats(&seed, (int64_t)n_slots * nkv * hd, 1.0f);
        float *v = rand_floats(&seed, (int64_t)n_slots * nkv * hd, 1.0f);
        kern_seg segs[2 * N_ROWS];
        int32_t off[N_ROWS + 1];
        for (int32_t r = 0; r < N_ROWS; r++) {
            /* rows 0-4: the context (its first 130 keys for row 2) then keys of their own;
             * rows 5, 6: a prefill's rows, the context up to themselves */
            off[r] = 2 * r;
            segs[2 * r] = (kern_seg){0, r == 2 ? 130 : r >= 5 ? CTX - 6 + r : CTX};
            segs[2 * r + 1] = (kern_seg){CTX + r * OWN, r >= 5 ? 0 : OWN - 3 * r};
        }
        off[N_ROWS] = 2 * N_ROWS;
        float *o0 = malloc((size_t)qn * sizeof *o0), *o1 = malloc((size_t)qn * sizeof *o1);
        float *o2 = malloc((size_t)row * sizeof *o2);
        kern_attn a = attn_both(ref, cpu, N_ROWS, nh, nkv, hd, q, k, v, off, segs, o0, o1);
        check_err(E_ATTN, t_nerr(o1, o0, qn), "shared prefix");
        for (int32_t r = 0; r < N_ROWS; r++) {
            kern_attn a1 = a;
            a1.n_rows = 1;
            a1.q = q + r * row;
            a1.seg_off = off + r;
            a1.out = o2;
            kern_backend_ops(cpu)->attention(cpu, &a1);
            T_CHECK(memcmp(o2, o1 + r * row, (size_t)row * sizeof *o2) == 0,
                    "head_dim %d row %d: the same bits alone as with rows sharing its keys",
                    (int)hd, (int)r);
        }
        free(q), free(k), free(v), free(o0), free(o1), free(o2);
    }
}

/* ---- the backend API and the pool ---- */

static void test_backend_api(void) {
    st_err err = {0};
    T_CHECK(kern_backend_init("nope", 1, &err) == NULL && err.code == ST_ERR_ARG,
            "unknown backend name");
    kern_backend *r = kern_backend_init("ref", 4, &err);
    T_CHECK(r && kern_backend_threads(r) == 1 && strcmp(kern_backend_name(r), "ref") == 0,
            "ref is single-threaded");
    kern_backend *c = kern_backend_init("cpu", 0, &err);
    T_CHECK(c && kern_backend_threads(c) == (int32_t)sysconf(_SC_NPROCESSORS_ONLN),
            "cpu with 0 threads uses every online cpu");
    T_CHECK(c && kern_backend_ops(c) == &kern_cpu_ops, "cpu ops table");
    kern_backend_free(r);
    kern_backend_free(c);
    kern_backend_free(NULL);
}

typedef struct pool_ctx {
    int32_t *hits;
    int32_t n_threads;
    int bad_thread;
} pool_ctx;

static void pool_count(void *ctx, int32_t task, int32_t thread) {
    pool_ctx *c = ctx;
    __atomic_add_fetch(&c->hits[task], 1, __ATOMIC_RELAXED);
    if (thread < 0 || thread >= c->n_threads) c->bad_thread = 1;
}

static void test_pool(void) {
    for (int32_t nt = 1; nt <= 4; nt++) {
        pool *p = pool_init(nt);
        T_CHECK(p && pool_threads(p) == nt, "pool_init(%d)", (int)nt);
        int32_t hits[257];
        pool_ctx c = {hits, nt, 0};
        int ok = 1;
        for (int rep = 0; rep < 2000; rep++) {
            int32_t n = 1 + rep % 257;
            memset(hits, 0, sizeof hits);
            pool_run(p, n, pool_count, &c);
            for (int32_t i = 0; i < n; i++) ok &= hits[i] == 1;
            for (int32_t i = n; i < 257; i++) ok &= hits[i] == 0;
            if (rep == 1000) usleep(2 * POOL_SPIN_NS / 1000); /* let workers fall asleep */
        }
        T_CHECK(ok && !c.bad_thread, "pool with %d threads runs each task once", (int)nt);
        pool_run(p, 0, pool_count, &c);
        pool_free(p);
    }
    pool_free(NULL);
}

static int64_t scalar_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* vec_max and vec_sum_exp against plain double arithmetic, on lengths around the vector
 * width, with -inf entries (masked logits) and a vocabulary-sized row; vec_argmax and
 * vec_first_above against scalar scans. */
static void test_vec(uint64_t seed) {
    static const int64_t ns[] = {1, 7, 15, 16, 17, 33, 49152};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        const int64_t n = ns[c];
        float *x = rand_floats(&seed, n, 12.0f);
        if (n > 3) x[2] = -INFINITY;
        float mx = x[0];
        for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
        double want = 0;
        for (int64_t i = 0; i < n; i++) want += exp((double)(x[i] - mx));
        T_CHECK(vec_max(x, n) == mx, "vec_max n=%lld", (long long)n);
        const double got = vec_sum_exp(x, n, mx);
        T_CHECK(fabs(got - want) <= 1e-6 * want, "vec_sum_exp n=%lld: %.9g want %.9g",
                (long long)n, got, want);
        T_CHECK(vec_sum_exp(x, n, mx) == got, "vec_sum_exp the same bits twice");
        /* argmax: the first of tied maxima, NaNs never win, a NaN first entry gives 0 */
        T_CHECK(vec_argmax(x, n) == scalar_argmax(x, n), "vec_argmax n=%lld", (long long)n);
        if (n > 5) {
            const int64_t at = n - 2;
            x[at] = mx + 1.0f;
            x[1] = NAN, x[n - 3] = NAN;
            T_CHECK(vec_argmax(x, n) == at, "vec_argmax past a NaN, n=%lld", (long long)n);
            x[n - 1] = x[at];
            x[3] = x[at];
            T_CHECK(vec_argmax(x, n) == 3 && scalar_argmax(x, n) == 3,
                    "vec_argmax: the first of ties, n=%lld", (long long)n);
            x[0] = NAN;
            T_CHECK(vec_argmax(x, n) == 0 && scalar_argmax(x, n) == 0,
                    "vec_argmax: a NaN first entry gives 0, n=%lld", (long long)n);
        }
        free(x);
    }
    /* vec_first_above against a scalar scan: every start and length around the vector
     * width, thresholds below, equal to (ties: not above) and above the values, NaNs in
     * the way */
    float y[40];
    for (int i = 0; i < 40; i++) y[i] = (float)(i % 7);
    y[5] = NAN, y[20] = NAN;
    for (int64_t s0 = 0; s0 < 40; s0++)
        for (int64_t n = 0; s0 + n <= 40; n++)
            for (int t = -1; t <= 7; t++) {
                int64_t want = n;
                for (int64_t i = 0; i < n; i++)
                    if (y[s0 + i] > (float)t) {
                        want = i;
                        break;
                    }
                T_CHECK(vec_first_above(y + s0, n, (float)t) == want,
                        "vec_first_above from %lld, n=%lld t=%d", (long long)s0, (long long)n, t);
            }
}

int main(void) {
    st_err err = {0};
    test_vec(99);
    kern_backend *ref = kern_backend_init("ref", 1, &err);
    T_CHECK(ref != NULL, "ref backend: %s", err.msg);
    if (!ref) return t_done();
    test_ref_oracle(ref);
    test_backend_api();
    test_pool();
    test_pack_pool(78);
    test_quant_roundtrip(77);
    for (int32_t nt = 1; nt <= 3; nt++) {
        kern_backend *cpu = kern_backend_init("cpu", nt, &err);
        T_CHECK(cpu != NULL, "cpu backend with %d threads: %s", (int)nt, err.msg);
        if (!cpu) continue;
        uint64_t seed = 1000 + (uint64_t)nt;
        test_matmul(ref, cpu, seed);
        test_matmul_big(ref, cpu, seed + 1);
        test_rows_ops(ref, cpu, seed + 2);
        test_rope(ref, cpu, seed + 3);
        test_attention(ref, cpu, seed + 4);
        test_attention_shared(ref, cpu, seed + 5);
        test_matmul_n(ref, cpu, seed + 6);
        test_matmul_packed(ref, cpu, seed + 7);
        test_matmul_extreme(ref, cpu);
        test_matmul_mxfp4_scales(ref, cpu, seed + 8);
        kern_backend_free(cpu);
    }
    kern_backend_free(ref);
    fprintf(stderr, "max nerr seen (bound):");
    for (int e = 0; e < E_N; e++) fprintf(stderr, "%s %s %.2g (%.0g)", e ? "," : "", e_name(e), e_seen[e], e_bound_of(e));
    fputc('\n', stderr);
    return t_done();
}
