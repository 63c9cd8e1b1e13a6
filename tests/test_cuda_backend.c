/* test_cuda_backend.c - every op of the cuda backend (kernels/cuda/backend.cu) against the
 * ref backend on small shapes: odd sizes, every weight type with a device kernel, 1 to 64
 * rows (both the few-row kernel and the many-row product), attention segments that start
 * and end inside a 128-key tile, GQA groups of 1 to 8 heads, attention's chunks split over
 * blocks or not and a shared context's chunks taken once for several rows (the same
 * bits); the backend contract's buffer and KV checks
 * (t_backend.h); host memory where the engine passes it (matmul's y, topk_lse's x); errors
 * (no memory, an unsupported type) named. Every value goes through upload and download,
 * so the same binary runs under the emulator (make test) and on a GPU (tools/gpu-run.sh);
 * without a device it reports itself skipped.
 *
 * Error measure: t_nerr = max|cuda - ref| / max|ref| over an op's output. Bounds, with the
 * largest seen printed on stderr at the end:
 *   matmul (float32 products and sums against ref's double)   1e-5; block types with
 *   activations that int8 holds exactly (cu_matmul_q8 quantises them), F16 and BF16 with
 *   ones their type holds exactly (both paths round them to it: test_matmul_half bounds
 *   that rounding on any activations)
 *   attention (float scores, expf, float sums)                 1e-5
 *   gdn (float sums against ref's double, 8 rows of a chain)  1e-5, outputs and cells
 *   rmsnorm 1e-5, swiglu, swiglu_oai, geglu, softcap and sigmoid_mul 1e-6, softmax 1e-5,
 *   rope and rope_neox 1e-6 (0 under the emulator)
 *   get_row, add, add_bias, scale, gather_rows, kv ops         0 (bitwise)
 *   topk_lse: ids exact; mx exact; log_sum within 1e-6; lp within 1e-5 * max(1, |lse|)
 * Batch invariance: a row's matmul result is the same bits alone as in any batch for the
 * block types (cu_matmul_q8 at every size); F32, F16 and BF16: in a batch of up to
 * CU_FEW_ROWS rows (and in any batch under the emulator, whose product runs in the
 * few-row kernel's order; cuBLAS on a GPU sums in its own). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cuda/cu.h"
#include "kernels/cuda/emu_blas.h"
/* (only the emulated backend defines it: the device build links this test without it) */
#pragma weak cublas_emu_log
#include "kernels/kern.h"
#include "kernels/vec.h"
#include "t.h"
#include "t_kern.h"
#include "t_backend.h"

static kern_backend *ref, *cu;
static const kern_ops *R, *C;
static double seen_mm, seen_attn, seen_small;

/* A device copy of n floats of host memory. */
static float *dev(const float *h, size_t n) {
    float *d = C->buf_alloc(cu, n * sizeof(float) + 4);
    if (d && h) C->upload(cu, d, h, n * sizeof(float));
    return d;
}

/* n floats of device memory back in a malloc'd host array. */
static float *host(const float *d, size_t n) {
    float *h = malloc(n * sizeof(float) + 4);
    C->download(cu, h, d, n * sizeof(float));
    return h;
}

static void check_sync(const char *what) {
    st_err err = {0};
    T_CHECK(kern_backend_sync(cu, &err) == ST_OK, "%s: %s", what, err.msg);
}

/* x rounded to the activations' type of a type's product: F16's (saturated) or BF16's,
 * else unchanged, as cu_to_half rounds them. */
static void round_acts(float *x, int64_t n, uint32_t type) {
    for (int64_t i = 0; i < n; i++)
        if (type == DT_F16)
            x[i] = fp16_to_f32(f32_to_fp16(fabsf(x[i]) > 65504.0f ? copysignf(65504.0f, x[i]) : x[i]));
        else if (type == DT_BF16)
            x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

static void test_matmul(uint64_t seed) {
    static const uint32_t types[] = {DT_F32,  DT_F16,  DT_BF16, DT_Q8_0, DT_Q4_0,   DT_Q4_1,
                                     DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K,   DT_Q2_K,
                                     DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    static const int32_t rowss[] = {1, 2, 7, 8, 9, 16, 17, 33, 64};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const uint32_t t = types[ti];
        const int64_t blk = dtype_get(t)->block;
        const int64_t n_ins[] = {blk == 1 ? 40 : blk, blk == 1 ? 77 : 3 * blk};
        for (int ii = 0; ii < 2; ii++) {
            const int64_t n_in = n_ins[ii], n_out = ii ? 67 : 13;
            kern_mat st = {t, n_out, n_in, make_weights(&seed, t, n_out, n_in), NULL}, w;
            T_CHECK(C->mat_prepare(cu, &w, &st, 0, NULL) == ST_OK, "mat_prepare %s", dtype_name(t));
            /* (block types multiply int8 activations: ones it holds exactly test them tightly) */
            float *x = blk > 1 ? t_q8_exact_floats(&seed, 64 * n_in) : rand_floats(&seed, 64 * n_in, 1.0f);
            round_acts(x, 64 * n_in, t);
            float *want = malloc(sizeof(float) * 64 * n_out);
            float *dx = dev(x, 64 * n_in), *dy = dev(NULL, 64 * n_out);
            R->matmul(ref, want, &st, x, 64);
            C->matmul(cu, dy, &w, dx, 1); /* row 0 alone */
            float *alone = host(dy, n_out);
            for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++) {
                const int32_t n = rowss[ri];
                C->matmul(cu, dy, &w, dx, n);
                float *got = host(dy, (size_t)n * n_out);
                const double e = t_nerr(got, want, (long)(n * n_out));
                if (e > seen_mm) seen_mm = e;
                T_CHECK(e <= 1e-5, "matmul %s %ldx%ld, %d rows: nerr %.3g", dtype_name(t),
                        (long)n_out, (long)n_in, n, e);
                if (n <= CU_FEW_ROWS || cu_emulated() || blk > 1)
                    T_CHECK(memcmp(got, alone, sizeof(float) * n_out) == 0,
                            "matmul %s, %d rows: row 0 not the bits of itself alone", dtype_name(t), n);
                free(got);
            }
            /* y in host memory (staged), and matmul_n: the bits of separate calls */
            float *hy = malloc(sizeof(float) * 17 * n_out), *dy2 = dev(NULL, 17 * n_out);
            C->matmul(cu, hy, &w, dx, 17);
            C->matmul(cu, dy, &w, dx, 17);
            float *got = host(dy, 17 * (size_t)n_out);
            T_CHECK(memcmp(hy, got, sizeof(float) * 17 * n_out) == 0, "matmul %s into host memory",
                    dtype_name(t));
            C->matmul_n(cu, 2, (float *const[]){dy2, dy}, (const kern_mat *const[]){&w, &w}, dx, 3);
            float *g2 = host(dy2, 3 * (size_t)n_out), *g1 = host(dy, 3 * (size_t)n_out);
            T_CHECK(memcmp(g1, got, sizeof(float) * 3 * n_out) == 0 &&
                    memcmp(g2, got, sizeof(float) * 3 * n_out) == 0, "matmul_n %s", dtype_name(t));
            /* matmul_n over matrices of other heights (Q, K, V), few rows and many: each
             * its own call's bits, in at most 2 launches (x prepared once, one product) */
            for (int32_t nr = 3; nr <= 17; nr += 14) {
                const int64_t n_o[3] = {n_out, 5, 9};
                kern_mat sm[3], pm[3];
                float *dm[3], *hm[3], *gm[3];
                bool same = true;
                for (int k = 0; k < 3; k++) {
                    sm[k] = (kern_mat){t, n_o[k], n_in, k ? make_weights(&seed, t, n_o[k], n_in) : st.data, NULL};
                    T_CHECK(C->mat_prepare(cu, &pm[k], &sm[k], 0, NULL) == ST_OK, "mat_prepare %s", dtype_name(t));
                    dm[k] = dev(NULL, nr * n_o[k]), hm[k] = dev(NULL, nr * n_o[k]);
                    C->matmul(cu, hm[k], &pm[k], dx, nr);
                }
                const uint64_t before = cu_emu_launches();
                C->matmul_n(cu, 3, dm, (const kern_mat *const[]){&pm[0], &pm[1], &pm[2]}, dx, nr);
                const uint64_t launches = cu_emu_launches() - before;
                for (int k = 0; k < 3; k++) {
                    float *a1 = host(dm[k], nr * (size_t)n_o[k]);
                    gm[k] = host(hm[k], nr * (size_t)n_o[k]);
                    same = same && memcmp(a1, gm[k], sizeof(float) * nr * (size_t)n_o[k]) == 0;
                    free(a1), free(gm[k]);
                    C->buf_free(cu, dm[k]), C->buf_free(cu, hm[k]);
                    C->mat_release(cu, &pm[k]);
                    if (k) free((void *)sm[k].data);
                }
                T_CHECK(same, "matmul_n %s of three heights, %d rows", dtype_name(t), nr);
                T_CHECK(!cu_emulated() || launches <= 2, "matmul_n %s of three heights, %d rows: %lu launches",
                        dtype_name(t), nr, (unsigned long)launches);
            }
            /* matmul_swiglu: the bits of swiglu then matmul; a block type's in one launch fewer */
            for (int32_t nr = 1; nr <= 17; nr += 16) {
                float *up = rand_floats(&seed, nr * n_in, 2.0f), *dg = dev(x, nr * n_in), *du = dev(up, nr * n_in);
                C->swiglu(cu, dg, dg, du, nr * n_in);
                C->matmul(cu, dy, &w, dg, nr);
                C->upload(cu, dg, x, sizeof(float) * nr * n_in);
                const uint64_t before = cu_emu_launches();
                kern_matmul_swiglu(cu, dy2, &w, dg, du, nr);
                const uint64_t launches = cu_emu_launches() - before;
                float *g3 = host(dy2, nr * (size_t)n_out), *g4 = host(dy, nr * (size_t)n_out);
                T_CHECK(memcmp(g3, g4, sizeof(float) * nr * n_out) == 0 && (!cu_emulated() || blk == 1 || launches == 2),
                        "matmul_swiglu %s, %d rows: not swiglu + matmul's bits, or %lu launches", dtype_name(t), nr,
                        (unsigned long)launches);
                C->buf_free(cu, dg), C->buf_free(cu, du);
                free(up), free(g3), free(g4);
            }
            /* get_row: the dequantiser's bits */
            float *row = malloc(sizeof(float) * n_in), *drow = dev(NULL, n_in);
            R->get_row(ref, row, &st, n_out - 1);
            C->get_row(cu, drow, &w, n_out - 1);
            float *grow = host(drow, n_in);
            T_CHECK(memcmp(row, grow, sizeof(float) * n_in) == 0, "get_row %s", dtype_name(t));
            /* get_rows: each row the bits of get_row, repeats and any order */
            const int32_t idx[5] = {(int32_t)n_out - 1, 0, 3, (int32_t)n_out - 1, 5};
            float *drows = dev(NULL, 5 * n_in);
            C->get_rows(cu, drows, &w, idx, 5);
            float *grows = host(drows, 5 * (size_t)n_in);
            bool rows_ok = true;
            for (int32_t i = 0; i < 5; i++) {
                R->get_row(ref, row, &st, idx[i]);
                rows_ok = rows_ok && memcmp(row, grows + (size_t)i * n_in, sizeof(float) * n_in) == 0;
            }
            T_CHECK(rows_ok, "get_rows %s", dtype_name(t));
            C->buf_free(cu, drows), free(grows);
            check_sync(dtype_name(t));
            C->mat_release(cu, &w);
            T_CHECK(w.data == NULL, "mat_release clears");
            C->buf_free(cu, dx), C->buf_free(cu, dy), C->buf_free(cu, dy2), C->buf_free(cu, drow);
            free(x), free(want), free(alone), free(hy), free(got), free(g1), free(g2), free(row), free(grow);
            free((void *)st.data);
        }
    }
}

/* F16 and BF16 products of any activations (tiny, fp16-subnormal and past fp16's range
 * among them), few rows and many: each output within the bound of rounding the
 * activations to the weights' type (relative u = 2^-11 for fp16, 2^-8 for bf16, plus
 * 2^-25 absolute below fp16's normal range; magnitudes past 65504 saturated for fp16)
 * and of float sums over k terms in any order (k 2^-23 of the sum of |products|: 2^-23, not
 * 2^-24, since tensor cores may truncate their sums instead of rounding them), against the
 * exact product in double: |y - W xc| <= u S + 2^-25 sum|w| + (k + 2) 2^-23 S, with xc x
 * saturated for fp16 and S = sum |w xc| (the products of two 16-bit values are exact). And the bits of a row alone in any batch
 * under the emulator: the few-row kernel rounds the activations as GemmEx's take them. */
static void test_matmul_half(uint64_t seed) {
    static const int64_t shapes[][2] = {{13, 40}, {67, 77}, {33, 256}};
    static const int32_t rowss[] = {1, 16, 17, 40};
    for (int ti = 0; ti < 2; ti++) {
        const uint32_t t = ti ? DT_BF16 : DT_F16;
        const double u = ti ? 0x1p-8 : 0x1p-11, tiny = ti ? 0.0 : 0x1p-25;
        for (int si = 0; si < 3; si++) {
            const int64_t n_out = shapes[si][0], k = shapes[si][1];
            kern_mat st = {t, n_out, k, make_weights(&seed, t, n_out, k), NULL}, w;
            T_CHECK(C->mat_prepare(cu, &w, &st, 0, NULL) == ST_OK, "mat_prepare %s", dtype_name(t));
            float *x = rand_floats(&seed, 40 * k, 4.0f), *wf = malloc(sizeof(float) * n_out * k);
            x[3] = 1e5f, x[k + 7] = -7e4f, x[5] = 1e-6f, x[k + 2] = -3e-7f, x[39 * k] = 3e38f;
            dtype_dequantize_row(t, st.data, wf, n_out * k);
            float *dx = dev(x, 40 * k), *dy = dev(NULL, 40 * n_out);
            C->matmul(cu, dy, &w, dx, 1);
            float *alone = host(dy, n_out);
            for (size_t ri = 0; ri < sizeof rowss / sizeof *rowss; ri++) {
                const int32_t n = rowss[ri];
                C->matmul(cu, dy, &w, dx, n);
                float *got = host(dy, (size_t)n * n_out);
                int32_t bad = 0;
                for (int32_t r = 0; r < n; r++)
                    for (int64_t o = 0; o < n_out; o++) {
                        double exact = 0, sum = 0, wsum = 0;
                        for (int64_t i = 0; i < k; i++) {
                            const float xi = x[r * k + i];
                            const double xc = ti || fabsf(xi) <= 65504.0f ? xi : copysignf(65504.0f, xi);
                            const double p = (double)wf[o * k + i] * xc;
                            exact += p, sum += fabs(p), wsum += fabs(wf[o * k + i]);
                        }
                        const double bound = u * sum + tiny * wsum + (double)(k + 2) * 0x1p-23 * sum;
                        bad += !(fabs(got[r * n_out + o] - exact) <= bound);
                    }
                T_CHECK(bad == 0, "matmul %s %ldx%ld, %d rows, any activations: %d outputs past the "
                        "rounding bound", dtype_name(t), (long)n_out, (long)k, n, bad);
                if (cu_emulated() || n <= CU_FEW_ROWS)
                    T_CHECK(memcmp(got, alone, sizeof(float) * n_out) == 0,
                            "matmul %s, %d rows, any activations: row 0 not the bits of itself alone",
                            dtype_name(t), n);
                free(got);
            }
            check_sync(dtype_name(t));
            C->mat_release(cu, &w);
            C->buf_free(cu, dx), C->buf_free(cu, dy);
            free(x), free(wf), free(alone), free((void *)st.data);
        }
    }
}

/* A block type's product, few rows or many, is cu_quantize_q8 + cu_matmul_q8's bits. */
static void test_matmul_q8_route(uint64_t seed) {
    const int64_t n_out = 21, n_in = 512;
    kern_mat st = {DT_Q4_K, n_out, n_in, make_weights(&seed, DT_Q4_K, n_out, n_in), NULL}, w;
    T_CHECK(C->mat_prepare(cu, &w, &st, 0, NULL) == ST_OK, "mat_prepare Q4_K");
    float *x = rand_floats(&seed, 40 * n_in, 3.0f), *dx = dev(x, 40 * n_in);
    float *dy = dev(NULL, 40 * n_out), *dq = dev(NULL, 40 * n_out), *dd = dev(NULL, 40 * n_in / 32);
    int8_t *xq = C->buf_alloc(cu, 40 * n_in);
    int32_t *xs = C->buf_alloc(cu, sizeof(int32_t) * 40 * n_in / 16);
    for (int32_t n = 3; n <= 40; n += 37) {
        C->matmul(cu, dy, &w, dx, n);
        cu_quantize_q8(xq, dd, xs, dx, n, n_in, NULL);
        cu_matmul_q8(dq, DT_Q4_K, w.data, n_out, n_in, xq, dd, xs, n, NULL);
        float *a = host(dy, (size_t)n * n_out), *b = host(dq, (size_t)n * n_out);
        T_CHECK(memcmp(a, b, sizeof(float) * n * n_out) == 0, "matmul Q4_K, %d rows: not cu_matmul_q8's bits", n);
        free(a), free(b);
    }
    check_sync("matmul q8 route");
    C->mat_release(cu, &w);
    C->buf_free(cu, dx), C->buf_free(cu, dy), C->buf_free(cu, dq), C->buf_free(cu, dd);
    C->buf_free(cu, xq), C->buf_free(cu, xs);
    free(x), free((void *)st.data);
}

/* Random segments for n_rows rows over n_slots slots: row r gets 0-4 disjoint runs whose
 * lengths (1 .. 300) put their ends anywhere in a 128-key tile; row 0 gets none. */
static int32_t make_segs(uint64_t *s, int32_t n_rows, int32_t n_slots, int32_t *off, kern_seg *segs) {
    int32_t k = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        off[r] = k;
        const int32_t n = r == 0 ? 0 : 1 + rng_int(s, 4);
        int32_t at = rng_int(s, 20);
        for (int32_t i = 0; i < n && at < n_slots; i++) {
            const int32_t len = 1 + rng_int(s, at + 300 < n_slots ? 300 : n_slots - at);
            segs[k++] = (kern_seg){at, len};
            at += len + rng_int(s, 40);
        }
    }
    off[n_rows] = k;
    return k;
}

static void test_attention(uint64_t seed) {
    /* (query heads a KV head: 1, 2, 3, 4; 8 and 7 take two blocks a KV head) */
    static const int32_t shapes[][3] = {{1, 1, 2}, {4, 2, 32}, {3, 1, 40}, {8, 2, 64}, {2, 2, 128},
                                        {2, 1, 256}, {8, 1, 64}, {14, 2, 72}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int32_t nh = shapes[si][0], nkv = shapes[si][1], hd = shapes[si][2];
        for (int32_t n_rows = 1; n_rows <= 64; n_rows *= 4) {
            const int32_t n_slots = 900;
            int32_t off[65];
            kern_seg segs[65 * 4];
            make_segs(&seed, n_rows, n_slots, off, segs);
            const size_t qn = (size_t)n_rows * nh * hd, kn = (size_t)n_slots * nkv * hd;
            float *q = rand_floats(&seed, (int64_t)qn, 1.0f), *k = rand_floats(&seed, (int64_t)kn, 1.0f);
            float *v = rand_floats(&seed, (int64_t)kn, 1.0f), *want = malloc(qn * sizeof(float));
            float *dq = dev(q, qn), *dk = dev(k, kn), *dv = dev(v, kn), *dout = dev(NULL, qn);
            /* (attention sinks, gpt-oss's, on every other shape: logits from -2 to 4) */
            float *sk = si % 2 ? rand_floats(&seed, nh, 3.0f) : NULL;
            for (int32_t h = 0; sk && h < nh; h++) sk[h] += 1.0f;
            float *dsk = sk ? dev(sk, (size_t)nh) : NULL;
            kern_attn a = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                           .scale = 1.0f / sqrtf((float)hd), .q = q, .k = k, .v = v,
                           .seg_off = off, .segs = segs, .out = want, .sinks = sk};
            R->attention(ref, &a);
            a.q = dq, a.k = dk, a.v = dv, a.out = dout, a.sinks = dsk;
            C->attention(cu, &a);
            float *got = host(dout, qn);
            const double e = t_nerr(got, want, (long)qn);
            if (e > seen_attn) seen_attn = e;
            T_CHECK(e <= 1e-5 && got[0] == 0.0f, "attention %d/%d heads, hd %d, %d rows%s: nerr %.3g",
                    nh, nkv, hd, n_rows, sk ? ", sinks" : "", e);
            check_sync("attention");
            C->buf_free(cu, dq), C->buf_free(cu, dk), C->buf_free(cu, dv), C->buf_free(cu, dout);
            if (dsk) C->buf_free(cu, dsk);
            free(q), free(k), free(v), free(want), free(got), free(sk);
        }
    }
}

/* Rows over one context (its first P keys, cut in two segments on odd rows; P no multiple
 * of the chunk) and then keys of their own, through the backend: the cascade takes the
 * whole chunks of the context once for each CU_ATTN_ROWS rows (cu_attn_shared grows by
 * what it saves), and every row gets the bits it gets alone, within 1e-5 of ref. */
static void shared_case(uint64_t *seed, int32_t nh, int32_t nkv, int32_t hd, int32_t P, int32_t n_rows) {
    const int32_t n_slots = P + 48 * n_rows, rq = nh * hd;
    int32_t off[65], k = 0;
    kern_seg segs[65 * 3];
    for (int32_t r = 0; r < n_rows; r++) {
        off[r] = k;
        if (r % 2) segs[k++] = (kern_seg){0, 100}, segs[k++] = (kern_seg){100, P - 100};
        else segs[k++] = (kern_seg){0, P};
        segs[k++] = (kern_seg){P + 48 * r, 1 + rng_int(seed, 47)};
    }
    off[n_rows] = k;
    const size_t qn = (size_t)n_rows * rq, kn = (size_t)n_slots * nkv * hd;
    float *q = rand_floats(seed, (int64_t)qn, 1.0f), *kc = rand_floats(seed, (int64_t)kn, 1.0f);
    float *v = rand_floats(seed, (int64_t)kn, 1.0f), *want = malloc(qn * sizeof(float));
    float *dq = dev(q, qn), *dk = dev(kc, kn), *dv = dev(v, kn), *dout = dev(NULL, qn), *d1 = dev(NULL, qn);
    kern_attn a = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                   .scale = 1.0f / sqrtf((float)hd), .q = q, .k = kc, .v = v, .seg_off = off, .segs = segs,
                   .out = want};
    R->attention(ref, &a);
    a.q = dq, a.k = dk, a.v = dv, a.out = dout;
    const uint64_t s0 = cu_attn_shared(cu);
    C->attention(cu, &a);
    const uint64_t saved = cu_attn_shared(cu) - s0;
    for (int32_t r = 0; r < n_rows; r++) { /* each row alone */
        int32_t off1[2] = {0, off[r + 1] - off[r]};
        kern_attn b = a;
        b.n_rows = 1, b.q = dq + (size_t)r * rq, b.seg_off = off1, b.segs = segs + off[r], b.out = d1 + (size_t)r * rq;
        C->attention(cu, &b);
    }
    check_sync("attention shared");
    float *got = host(dout, qn), *alone = host(d1, qn);
    const uint64_t expect = (uint64_t)(n_rows - (n_rows + CU_ATTN_ROWS - 1) / CU_ATTN_ROWS) * (P / CU_ATTN_CHUNK);
    const double e = t_nerr(got, want, (long)qn);
    T_CHECK(e <= 1e-5, "shared attention %d/%d heads, hd %d, %d rows over %d keys: nerr %.3g", nh, nkv, hd,
            n_rows, P, e);
    T_CHECK(!memcmp(got, alone, qn * sizeof(float)), "shared attention %d/%d heads, hd %d, %d rows over %d keys: "
            "a row's bits differ from its own alone", nh, nkv, hd, n_rows, P);
    T_CHECK(saved == expect, "shared attention, %d rows over %d keys: %llu chunk reads saved, %llu expected",
            n_rows, P, (unsigned long long)saved, (unsigned long long)expect);
    C->buf_free(cu, dq), C->buf_free(cu, dk), C->buf_free(cu, dv), C->buf_free(cu, dout), C->buf_free(cu, d1);
    free(q), free(kc), free(v), free(want), free(got), free(alone);
}

static void test_attention_shared(uint64_t seed) {
    static const int32_t shapes[][3] = {{4, 2, 32}, {14, 2, 72}, {2, 1, 256}}, lens[] = {300, 777}, rows[] = {1, 6, 64};
    for (int32_t si = 0; si < 3; si++)
        for (int32_t li = 0; li < 2; li++)
            for (int32_t ri = 0; ri < 3; ri++)
                shared_case(&seed, shapes[si][0], shapes[si][1], shapes[si][2], lens[li], rows[ri]);
}

/* cu_attention with the chunks spread over blocks and folded by the merge kernel (part)
 * gives the same bits as with each row's chunks folded in its block (NULL): the choice the
 * backend makes from the batch's size must not change a row's result. Rows here run to
 * about 1,200 keys, 5 chunks. */
static void test_attention_split(uint64_t seed) {
    static const int32_t shapes[][3] = {{3, 1, 64}, {8, 1, 96}, {2, 2, 256}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int32_t nh = shapes[si][0], nkv = shapes[si][1], hd = shapes[si][2];
        const int32_t n_rows = 9, n_slots = 1400;
        int32_t off[10], most = 0;
        kern_seg segs[9 * 4];
        const int32_t n_segs = make_segs(&seed, n_rows, n_slots, off, segs);
        for (int32_t r = 0; r < n_rows; r++) {
            int32_t n = 0;
            for (int32_t i = off[r]; i < off[r + 1]; i++) n += segs[i].len;
            if (n > most) most = n;
        }
        const int32_t n_chunks = (most + CU_ATTN_CHUNK - 1) / CU_ATTN_CHUNK;
        const size_t qn = (size_t)n_rows * nh * hd, kn = (size_t)n_slots * nkv * hd;
        float *q = rand_floats(&seed, (int64_t)qn, 1.0f), *k = rand_floats(&seed, (int64_t)kn, 1.0f);
        float *v = rand_floats(&seed, (int64_t)kn, 1.0f), *want = malloc(qn * sizeof(float));
        float *dq = dev(q, qn), *dk = dev(k, kn), *dv = dev(v, kn);
        float *d1 = dev(NULL, qn), *d2 = dev(NULL, qn);
        float *part = dev(NULL, (size_t)n_rows * nh * n_chunks * (hd + 2));
        float *sk = si == 2 ? rand_floats(&seed, nh, 3.0f) : NULL, *dsk = sk ? dev(sk, (size_t)nh) : NULL;
        int32_t *doff = C->buf_alloc(cu, sizeof off), *dsegs = C->buf_alloc(cu, sizeof segs);
        C->upload(cu, doff, off, sizeof off), C->upload(cu, dsegs, segs, sizeof(kern_seg) * n_segs);
        kern_attn a = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                       .scale = 1.0f / sqrtf((float)hd), .q = q, .k = k, .v = v,
                       .seg_off = off, .segs = segs, .out = want, .sinks = sk};
        R->attention(ref, &a);
        cu_attention(d1, dq, dk, dv, doff, dsegs, n_rows, nh, nkv, hd, a.scale, dsk, NULL, 0, NULL, 0, NULL, NULL);
        cu_attention(d2, dq, dk, dv, doff, dsegs, n_rows, nh, nkv, hd, a.scale, dsk, part, n_chunks, NULL, 0, NULL, NULL);
        check_sync("attention split");
        float *g1 = host(d1, qn), *g2 = host(d2, qn);
        /* through the backend: these rows alone (split: few blocks) and as the first of 40
         * copies of them (whole: blocks enough) */
        float *dbig = dev(NULL, qn * 40), *qbig = malloc(qn * 40 * sizeof(float));
        int32_t *obig = malloc(sizeof(int32_t) * (9 * 40 + 1));
        kern_seg *sbig = malloc(sizeof(kern_seg) * (size_t)n_segs * 40);
        for (int32_t c = 0; c < 40; c++) {
            memcpy(qbig + qn * c, q, qn * sizeof(float));
            memcpy(sbig + n_segs * c, segs, sizeof(kern_seg) * n_segs);
            for (int32_t r = 0; r < n_rows; r++) obig[c * n_rows + r] = off[r] + c * n_segs;
        }
        obig[40 * n_rows] = 40 * n_segs;
        float *dqbig = dev(qbig, qn * 40);
        kern_attn b = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd,
                       .scale = a.scale, .q = dq, .k = dk, .v = dv, .seg_off = off, .segs = segs,
                       .out = d1, .sinks = dsk};
        C->attention(cu, &b);
        b.n_rows = 40 * n_rows, b.q = dqbig, b.seg_off = obig, b.segs = sbig, b.out = dbig;
        C->attention(cu, &b);
        float *g3 = host(d1, qn), *g4 = host(dbig, qn);
        T_CHECK(memcmp(g3, g1, qn * sizeof(float)) == 0 && memcmp(g4, g1, qn * sizeof(float)) == 0,
                "attention %d/%d heads, hd %d: a row's bits depend on its batch", nh, nkv, hd);
        C->buf_free(cu, dbig), C->buf_free(cu, dqbig);
        free(qbig), free(obig), free(sbig), free(g3), free(g4);
        T_CHECK(n_chunks >= 3, "rows of %d keys: too short to split", most);
        T_CHECK(memcmp(g1, g2, qn * sizeof(float)) == 0, "attention %d/%d heads, hd %d: split != whole",
                nh, nkv, hd);
        T_CHECK(t_nerr(g2, want, (long)qn) <= 1e-5, "split attention %d/%d heads, hd %d: nerr %.3g", nh,
                nkv, hd, t_nerr(g2, want, (long)qn));
        C->buf_free(cu, dq), C->buf_free(cu, dk), C->buf_free(cu, dv), C->buf_free(cu, d1);
        C->buf_free(cu, d2), C->buf_free(cu, part), C->buf_free(cu, doff), C->buf_free(cu, dsegs);
        if (dsk) C->buf_free(cu, dsk);
        free(sk);
        free(q), free(k), free(v), free(want), free(g1), free(g2);
    }
}

/* The batch arrays' device cache: an array found there is not the one the next copy
 * replaces. Here attention's seg_off is found (kv_store copied the same ints in first,
 * then 7 other arrays), and its segs are copied next: with the oldest-copied entry
 * replaced, that was seg_off's (the forest test crashed on it). */
static void test_small_cache(uint64_t seed) {
    const int32_t n_rows = 16, nh = 4, nkv = 2, hd = 32, n_slots = 900;
    int32_t off[17];
    kern_seg segs[16 * 4];
    make_segs(&seed, n_rows, n_slots, off, segs);
    const size_t qn = (size_t)n_rows * nh * hd, kn = (size_t)n_slots * nkv * hd;
    float *q = rand_floats(&seed, (int64_t)qn, 1.0f), *k = rand_floats(&seed, (int64_t)kn, 1.0f);
    float *want = malloc(qn * sizeof(float)), *ones = rand_floats(&seed, 17, 1.0f);
    float *dq = dev(q, qn), *dk = dev(k, kn), *dout = dev(NULL, qn), *scr = dev(NULL, n_slots);
    kern_attn a = {.n_rows = n_rows, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 0.2f,
                   .q = q, .k = k, .v = k, .seg_off = off, .segs = segs, .out = want};
    R->attention(ref, &a);
    C->kv_store(cu, scr, 1, off, ones, n_rows + 1);
    for (int32_t i = 0; i < 7; i++) C->kv_store(cu, scr, 1, &i, ones, 1);
    a.q = dq, a.k = dk, a.v = dk, a.out = dout;
    C->attention(cu, &a);
    float *got = host(dout, qn);
    T_CHECK(t_nerr(got, want, (long)qn) <= 1e-5, "attention after its seg_off was cached: nerr %.3g",
            t_nerr(got, want, (long)qn));
    check_sync("small cache");
    C->buf_free(cu, dq), C->buf_free(cu, dk), C->buf_free(cu, dout), C->buf_free(cu, scr);
    free(q), free(k), free(want), free(ones), free(got);
}

/* One small op on device copies of (a, b) against ref on host copies; bound on nerr. */
static void check_small(const char *what, const float *want, const float *d, size_t n, double bound) {
    float *got = host(d, n);
    const double e = t_nerr(got, want, (long)n);
    if (bound > 0 && e > seen_small) seen_small = e;
    T_CHECK(bound > 0 ? e <= bound : memcmp(got, want, n * sizeof(float)) == 0, "%s: nerr %.3g", what, e);
    free(got);
}

static void test_small_ops(uint64_t seed) {
    const int32_t rows = 5, dim = 333, nh = 3, hd = 10;
    const size_t n = (size_t)rows * dim;
    float *x = rand_floats(&seed, (int64_t)n, 3.0f), *w = rand_floats(&seed, dim, 1.0f);
    float *u = rand_floats(&seed, (int64_t)n, 2.0f), *y = malloc(n * sizeof(float));
    float *dx = dev(x, n), *dw = dev(w, dim), *du = dev(u, n), *dy = dev(NULL, n);
    R->rmsnorm(ref, y, x, w, rows, dim, 1e-5f);
    C->rmsnorm(cu, dy, dx, dw, rows, dim, 1e-5f);
    check_small("rmsnorm", y, dy, n, 1e-5);
    R->swiglu(ref, y, x, u, (int64_t)n);
    C->swiglu(cu, dy, dx, du, (int64_t)n);
    check_small("swiglu", y, dy, n, 1e-6);
    memcpy(y, x, n * sizeof(float));
    R->sigmoid_mul(ref, y, u, (int64_t)n);
    C->upload(cu, dy, x, n * sizeof(float));
    C->sigmoid_mul(cu, dy, du, (int64_t)n);
    check_small("sigmoid_mul", y, dy, n, 1e-6);
    memcpy(y, x, n * sizeof(float));
    R->add(ref, y, u, (int64_t)n);
    C->upload(cu, dy, x, n * sizeof(float));
    C->add(cu, dy, du, (int64_t)n);
    check_small("add", y, dy, n, 0);
    memcpy(y, x, n * sizeof(float));
    R->softmax(ref, y, rows, dim);
    C->upload(cu, dy, x, n * sizeof(float));
    C->softmax(cu, dy, rows, dim);
    check_small("softmax", y, dy, n, 1e-5);
    /* rope: rows of 3 heads of 10, rope_dim 6, freq factors, positions up to 6000 */
    const int32_t pos[5] = {0, 1, 77, 5999, 4096};
    float ff[3] = {1.0f, 1.5f, 0.7f}, *dff = dev(ff, 3);
    memcpy(y, x, (size_t)rows * nh * hd * sizeof(float));
    R->rope(ref, y, pos, rows, nh, hd, 6, 10000.0f, ff);
    C->upload(cu, dy, x, (size_t)rows * nh * hd * sizeof(float));
    C->rope(cu, dy, pos, rows, nh, hd, 6, 10000.0f, dff);
    check_small("rope", y, dy, (size_t)rows * nh * hd, cu_emulated() ? 0 : 1e-6);
    memcpy(y, x, (size_t)rows * nh * hd * sizeof(float));
    R->rope_neox(ref, y, pos, rows, nh, hd, 8, 10000.0f, NULL);
    C->upload(cu, dy, x, (size_t)rows * nh * hd * sizeof(float));
    C->rope_neox(cu, dy, pos, rows, nh, hd, 8, 10000.0f, NULL);
    check_small("rope_neox", y, dy, (size_t)rows * nh * hd, cu_emulated() ? 0 : 1e-6);
    R->geglu(ref, y, x, u, (int64_t)n);
    C->geglu(cu, dy, dx, du, (int64_t)n);
    check_small("geglu", y, dy, n, 1e-6);
    { /* gates and ups to 12: past the clamps at 7 */
        float *g4 = malloc(n * sizeof(float)), *u6 = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) g4[i] = 4.0f * x[i], u6[i] = 6.0f * u[i];
        float *dg = dev(g4, n), *dz = dev(u6, n);
        R->swiglu_oai(ref, y, g4, u6, (int64_t)n);
        C->swiglu_oai(cu, dy, dg, dz, (int64_t)n);
        check_small("swiglu_oai", y, dy, n, 1e-6);
        C->buf_free(cu, dg), C->buf_free(cu, dz);
        free(g4), free(u6);
    }
    memcpy(y, x, n * sizeof(float));
    R->add_bias(ref, y, w, rows, dim);
    C->upload(cu, dy, x, n * sizeof(float));
    C->add_bias(cu, dy, dw, rows, dim);
    check_small("add_bias", y, dy, n, 0);
    memcpy(y, x, n * sizeof(float));
    R->scale(ref, y, 1.7f, (int64_t)n);
    C->upload(cu, dy, x, n * sizeof(float));
    C->scale(cu, dy, 1.7f, (int64_t)n);
    check_small("scale", y, dy, n, 0);
    /* softcap on device rows (the device's tanhf) and on host rows (the host's: bitwise),
     * x times 10 so that many values reach the cap's curve */
    float *big = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) big[i] = 10.0f * x[i];
    memcpy(y, big, n * sizeof(float)), memcpy(hy, big, n * sizeof(float));
    R->softcap(ref, y, 12.5f, (int64_t)n);
    C->upload(cu, dy, big, n * sizeof(float));
    C->softcap(cu, dy, 12.5f, (int64_t)n);
    check_small("softcap", y, dy, n, 1e-6);
    C->softcap(cu, hy, 12.5f, (int64_t)n);
    check_sync("softcap on host rows");
    T_CHECK(memcmp(hy, y, n * sizeof(float)) == 0, "softcap on host rows: not ref's bits");
    free(big), free(hy);
    /* gather_rows in place (idx[i] >= i) and to another buffer: bitwise */
    const int32_t idx[3] = {1, 1, 4};
    for (int inplace = 0; inplace < 2; inplace++) {
        for (int i = 0; i < 3; i++) memcpy(y + i * dim, x + idx[i] * dim, dim * sizeof(float));
        C->upload(cu, dx, x, n * sizeof(float));
        C->gather_rows(cu, inplace ? dx : dy, dx, idx, 3, dim);
        check_small(inplace ? "gather_rows in place" : "gather_rows", y, inplace ? dx : dy, 3 * dim, 0);
    }
    check_sync("small ops");
    C->buf_free(cu, dx), C->buf_free(cu, dw), C->buf_free(cu, du), C->buf_free(cu, dy), C->buf_free(cu, dff);
    free(x), free(w), free(u), free(y);
}

/* The inputs of a gdn batch of n rows on ref (host copies) and cuda (device copies). */
typedef struct gdn_pair {
    kern_gdn h, d;
    float *qkv0; /* the projections as made (the op overwrites qkv) */
    float *cells0;
    int64_t cf;
} gdn_pair;

static float *gdn_arr(uint64_t *seed, int64_t n, float scale, float shift, float **d) {
    float *h = rand_floats(seed, n, scale);
    for (int64_t i = 0; i < n; i++) h[i] += shift;
    *d = dev(h, (size_t)n);
    return h;
}

static gdn_pair gdn_make(uint64_t *seed, const int32_t *shape, int32_t n, int32_t cells) {
    gdn_pair p;
    kern_gdn *h = &p.h, *d = &p.d;
    *h = (kern_gdn){.n_rows = n, .n_k_heads = shape[0], .n_v_heads = shape[1],
                    .d_state = shape[2], .conv_k = shape[3], .eps = 1e-6f};
    *d = *h;
    const int64_t cd = kern_gdn_conv_dim(h), vd = (int64_t)h->n_v_heads * h->d_state, hv = h->n_v_heads;
    p.cf = kern_gdn_cell_floats(h);
    float *dp;
    p.qkv0 = gdn_arr(seed, n * cd, 2, 0, &d->qkv);
    h->qkv = malloc(sizeof(float) * (size_t)(n * cd));
    h->z = gdn_arr(seed, n * vd, 2, 0, &dp), d->z = dp;
    h->beta = gdn_arr(seed, n * hv, 3, 0, &dp), d->beta = dp;
    h->alpha = gdn_arr(seed, n * hv, 3, 0, &dp), d->alpha = dp;
    h->conv_w = gdn_arr(seed, cd * h->conv_k, 1, 0, &dp), d->conv_w = dp;
    h->dt_bias = gdn_arr(seed, hv, 1, 0, &dp), d->dt_bias = dp;
    h->a = gdn_arr(seed, hv, 0.5f, -1.0f, &dp), d->a = dp; /* negative, as -exp(A_log) */
    h->norm_w = gdn_arr(seed, h->d_state, 1, 0, &dp), d->norm_w = dp;
    p.cells0 = gdn_arr(seed, cells * p.cf, 0.5f, 0, &d->cells); /* states left by earlier steps */
    h->cells = malloc(sizeof(float) * (size_t)(cells * p.cf));
    h->out = malloc(sizeof(float) * (size_t)(n * vd));
    d->out = dev(NULL, (size_t)(n * vd));
    return p;
}

static void gdn_free(gdn_pair *p) {
    const void *hp[] = {p->h.qkv, p->h.z, p->h.beta, p->h.alpha, p->h.conv_w, p->h.dt_bias,
                        p->h.a, p->h.norm_w, p->h.cells, p->h.out, p->qkv0, p->cells0};
    const void *dp[] = {p->d.qkv, p->d.z, p->d.beta, p->d.alpha, p->d.conv_w, p->d.dt_bias,
                        p->d.a, p->d.norm_w, p->d.cells, p->d.out};
    for (size_t i = 0; i < sizeof hp / sizeof *hp; i++) free((void *)hp[i]);
    for (size_t i = 0; i < sizeof dp / sizeof *dp; i++) C->buf_free(cu, (void *)dp[i]);
}

/* Rows [r0, r0 + n) of the device batch with the cells as made. */
static void gdn_dev_rows(gdn_pair *p, int32_t r0, int32_t n, const int32_t *in, const int32_t *out) {
    kern_gdn a = p->d;
    const int64_t cd = kern_gdn_conv_dim(&a), vd = (int64_t)a.n_v_heads * a.d_state;
    a.n_rows = n, a.cell_in = in + r0, a.cell_out = out + r0;
    a.qkv += r0 * cd, a.z += r0 * vd, a.out += r0 * vd;
    a.beta += (int64_t)r0 * a.n_v_heads, a.alpha += (int64_t)r0 * a.n_v_heads;
    C->gdn(cu, &a);
}

/* gdn against ref on 8 rows over 4 cells that hold earlier states: a copy of a held cell,
 * chains continued in place, forks from the cell an earlier row of the batch wrote, a
 * start from zeros; then the same rows a call each give the batch's bits. Shapes (key
 * heads, value heads, d_state, conv width): value heads a multiple of key heads, d_state
 * 16 to 128 and one not a multiple of 32. */
static void test_gdn(uint64_t seed) {
    static const int32_t shapes[][4] = {{1, 1, 16, 4}, {2, 4, 32, 4}, {2, 2, 64, 3},
                                        {1, 2, 128, 4}, {3, 6, 24, 2}};
    static const int32_t in[8] = {3, 0, 0, -1, 1, 0, 2, 1}, out[8] = {0, 0, 1, 2, 1, 3, 2, 1};
    const int32_t n = 8, cells = 4;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        gdn_pair p = gdn_make(&seed, shapes[s], n, cells);
        const int64_t cd = kern_gdn_conv_dim(&p.h), vd = (int64_t)p.h.n_v_heads * p.h.d_state;
        const size_t cb = sizeof(float) * (size_t)(cells * p.cf), ob = (size_t)(n * vd);
        memcpy(p.h.qkv, p.qkv0, sizeof(float) * (size_t)(n * cd));
        memcpy(p.h.cells, p.cells0, cb);
        p.h.cell_in = in, p.h.cell_out = out;
        R->gdn(ref, &p.h);
        gdn_dev_rows(&p, 0, n, in, out);
        float *got = host(p.d.out, ob), *gc = host(p.d.cells, cb / sizeof(float));
        const double e = t_nerr(got, p.h.out, (long)ob), ec = t_nerr(gc, p.h.cells, (long)(cb / sizeof(float)));
        if (e > seen_small) seen_small = e;
        T_CHECK(e <= 1e-5 && ec <= 1e-5, "gdn %d/%d heads, d_state %d, conv %d: nerr out %.3g, cells %.3g",
                shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], e, ec);
        C->upload(cu, p.d.qkv, p.qkv0, sizeof(float) * (size_t)(n * cd));
        C->upload(cu, p.d.cells, p.cells0, cb);
        for (int32_t r = 0; r < n; r++) gdn_dev_rows(&p, r, 1, in, out);
        float *one = host(p.d.out, ob);
        T_CHECK(memcmp(one, got, ob * sizeof(float)) == 0, "gdn shape %zu: a row a call differs "
                "from the batch", s);
        check_sync("gdn");
        free(got), free(gc), free(one);
        gdn_free(&p);
    }
}

static void test_topk(uint64_t seed) {
    const int32_t ns[] = {1, 7, 300, 4099}, ks[] = {0, 1, 5, 64, 100};
    for (size_t ni = 0; ni < 4; ni++)
        for (size_t ki = 0; ki < 5; ki++)
            for (int on_host = 0; on_host < 2; on_host++) {
                const int32_t n = ns[ni], k = ks[ki], rows = 3;
                float *x = rand_floats(&seed, (int64_t)rows * n, 8.0f);
                for (int32_t i = 0; i < n; i++) x[i] = (float)(int)(x[i] * 2) / 2; /* ties */
                float *dx = on_host ? x : dev(x, (size_t)rows * n);
                kern_lse lw[3], lg[3];
                int32_t iw[300], ig[300];
                float pw[300], pg[300];
                R->topk_lse(ref, x, rows, n, k, lw, iw, pw);
                C->topk_lse(cu, dx, rows, n, k, lg, k ? ig : NULL, k ? pg : NULL);
                bool ok = true;
                for (int32_t r = 0; r < rows; r++) {
                    ok = ok && lg[r].mx == lw[r].mx && fabs(lg[r].log_sum - lw[r].log_sum) <= 1e-6;
                    const double sc = fmax(1.0, fabs(lw[r].mx + lw[r].log_sum));
                    for (int32_t i = 0; i < k; i++)
                        ok = ok && ig[r * k + i] == iw[r * k + i] &&
                             (iw[r * k + i] < 0 ? pg[r * k + i] == -INFINITY
                                                : fabs(pg[r * k + i] - pw[r * k + i]) <= 1e-5 * sc);
                }
                T_CHECK(ok, "topk_lse n %d k %d, x in %s memory", n, k, on_host ? "host" : "device");
                check_sync("topk_lse");
                if (!on_host) C->buf_free(cu, dx);
                free(x);
            }
}

/* The cuBLAS call of a many-row product, as emu_blas.h records it: y (rows, n_out) row-major
 * is C (n_out, rows) column-major = W (n_out, n_in) row-major, read as A (n_in, n_out)
 * transposed, times x (rows, n_in) row-major, read as B (n_in, rows) untransposed: F32 by
 * Sgemm on x itself, F16 and BF16 by GemmEx on x's copy in W's type (float C, float
 * compute). The values are checked against ref by test_matmul, computed from these
 * arguments. */
static void test_gemm_args(uint64_t seed) {
    static const uint32_t types[] = {DT_F32, DT_F16, DT_BF16};
    static const int abtype[] = {CUBLAS_EMU_R_32F, CUBLAS_EMU_R_16F, CUBLAS_EMU_R_16BF};
    const int32_t n_out = 13, n_in = 40, rows = 20;
    for (int ti = 0; ti < 3; ti++) {
        const uint32_t t = types[ti];
        kern_mat st = {t, n_out, n_in, make_weights(&seed, t, n_out, n_in), NULL}, w;
        T_CHECK(C->mat_prepare(cu, &w, &st, 0, NULL) == ST_OK, "mat_prepare %s", dtype_name(t));
        float *x = rand_floats(&seed, rows * n_in, 1.0f);
        float *dx = dev(x, rows * n_in), *dy = dev(NULL, rows * n_out);
        const long before = cublas_emu_log.n_calls;
        C->matmul(cu, dy, &w, dx, rows);
        const cublas_emu_call g = cublas_emu_log;
        const char *tn = dtype_name(t);
        T_CHECK(g.n_calls == before + 1, "%s: one cuBLAS call for %d rows (%ld)", tn, rows, g.n_calls - before);
        T_CHECK(g.transa == 1 && g.transb == 0, "%s: transposes: A %s, B %s (want T, N)", tn,
                g.transa ? "T" : "N", g.transb ? "T" : "N");
        T_CHECK(g.m == n_out && g.n == rows && g.k == n_in, "%s: m n k: %d %d %d (want %d %d %d)", tn, g.m,
                g.n, g.k, n_out, rows, n_in);
        T_CHECK(g.lda == n_in && g.ldb == n_in && g.ldc == n_out, "%s: lda ldb ldc: %d %d %d (want %d %d %d)",
                tn, g.lda, g.ldb, g.ldc, n_in, n_in, n_out);
        T_CHECK(g.atype == abtype[ti] && g.btype == abtype[ti] && g.ctype == CUBLAS_EMU_R_32F &&
                g.compute == (ti ? CUBLAS_EMU_COMPUTE_32F : -1),
                "%s: types A %d B %d C %d, compute %d", tn, g.atype, g.btype, g.ctype, g.compute);
        T_CHECK(g.a == w.data && (g.b == dx) == (t == DT_F32) && g.c == dy,
                "%s: A the weights as stored, B x (F32) or its 16-bit copy, C y", tn);
        st_err err = {0};
        T_CHECK(kern_backend_sync(cu, &err) == ST_OK, "%s: sync: %s", tn, err.msg);
        C->mat_release(cu, &w);
        C->buf_free(cu, dx), C->buf_free(cu, dy);
        free(x), free((void *)st.data);
    }
}

/* Failures: a type without a kernel, a product without memory for its scratch (nothing
 * written), each named once by sync. */
static void test_errors(uint64_t seed) {
    st_err err = {0};
    kern_backend *cu0 = cu; /* a fresh instance: no scratch grown by the tests before */
    cu = kern_backend_init("cuda", 0, &err);
    kern_mat st = {DT_IQ2_XXS, 4, 256, NULL, NULL}, w;
    T_CHECK(C->mat_prepare(cu, &w, &st, 0, NULL) == ST_ERR_UNSUPPORTED &&
            kern_backend_sync(cu, &err) == ST_ERR_UNSUPPORTED && strstr(err.msg, "mat_prepare: ") &&
            strstr(err.msg, "IQ2_XXS"), "mat_prepare of IQ2_XXS: %s", err.msg);
    kern_mat sq = {DT_Q8_0, 32, 256, make_weights(&seed, DT_Q8_0, 32, 256), NULL};
    T_CHECK(C->mat_prepare(cu, &w, &sq, 0, NULL) == ST_OK, "mat_prepare Q8_0");
    float *x = rand_floats(&seed, 20 * 256, 1.0f), *y = malloc(sizeof(float) * 20 * 32);
    for (int i = 0; i < 20 * 32; i++) y[i] = 7.0f;
    float *dx = dev(x, 20 * 256), *dy = dev(y, 20 * 32);
    kern_backend_set_alloc_limit(cu, 1000);
    C->matmul(cu, dy, &w, dx, 20);
    float *got = host(dy, 20 * 32);
    T_CHECK(kern_backend_sync(cu, &err) == ST_ERR_NOMEM && strncmp(err.msg, "matmul: out of memory", 21) == 0 &&
            strstr(err.msg, "cuda") && got[0] == 7.0f && got[639] == 7.0f,
            "matmul without memory for its activations: nothing written, %s", err.msg);
    T_CHECK(kern_backend_sync(cu, &err) == ST_OK, "reported once");
    kern_backend_set_alloc_limit(cu, SIZE_MAX);
    C->mat_release(cu, &w);
    C->buf_free(cu, dx), C->buf_free(cu, dy);
    free(x), free(y), free(got), free((void *)sq.data);
    kern_backend_free(cu);
    cu = cu0;
}

/* A product into host memory whose activations' 16-bit copy finds no memory leaves y as
 * it was: the output scratch, which holds the previous product's rows, is not copied to it
 * (F16: a block type would go through cu_matmul_q8, which makes no such copy). */
static void test_no_stale_copy(uint64_t seed) {
    st_err err = {0};
    kern_backend *cu0 = cu;
    cu = kern_backend_init("cuda", 0, &err);
    kern_mat s1 = {DT_F16, 32, 256, make_weights(&seed, DT_F16, 32, 256), NULL};
    kern_mat s2 = {DT_F16, 32, 512, make_weights(&seed, DT_F16, 32, 512), NULL}, w1, w2;
    T_CHECK(C->mat_prepare(cu, &w1, &s1, 0, NULL) == ST_OK && C->mat_prepare(cu, &w2, &s2, 0, NULL) == ST_OK,
            "mat_prepare F16");
    float *x = rand_floats(&seed, 20 * 512, 1.0f), *y = malloc(sizeof(float) * 20 * 32);
    float *dx = dev(x, 20 * 512);
    C->matmul(cu, y, &w1, dx, 20); /* grows the output scratch and a 10 KiB copy of x */
    check_sync("matmul into host memory");
    for (int i = 0; i < 20 * 32; i++) y[i] = 7.0f;
    kern_backend_set_alloc_limit(cu, 15000); /* w2's 20 KiB copy of x does not fit */
    C->matmul(cu, y, &w2, dx, 20);
    bool kept = true;
    for (int i = 0; i < 20 * 32; i++) kept = kept && y[i] == 7.0f;
    T_CHECK(kern_backend_sync(cu, &err) == ST_ERR_NOMEM && kept,
            "host y after a product without memory for its x copy: unchanged (%s)", err.msg);
    kern_backend_set_alloc_limit(cu, SIZE_MAX);
    C->mat_release(cu, &w1), C->mat_release(cu, &w2);
    C->buf_free(cu, dx);
    free(x), free(y), free((void *)s1.data), free((void *)s2.data);
    kern_backend_free(cu);
    cu = cu0;
}

int main(void) {
    st_err err = {0};
    cu = kern_backend_init("cuda", 0, &err);
    if (!cu) {
        T_CHECK(err.code == ST_ERR_BACKEND && strstr(err.msg, "use --backend cpu"),
                "no device: the message says what to do: %s", err.msg);
        T_SKIP("no CUDA device: %s", err.msg);
        return t_done();
    }
    ref = kern_backend_init("ref", 1, &err);
    R = kern_backend_ops(ref), C = kern_backend_ops(cu);
    test_buffers(cu);
    test_kv_ops(cu, 33);
    if (cu_emulated()) test_gemm_args(67); /* (first: wrong arguments make test_matmul read out of bounds) */
    test_matmul(61);
    test_matmul_half(72);
    test_matmul_q8_route(69);
    test_attention(62);
    test_attention_split(70);
    test_attention_shared(72);
    test_small_cache(66);
    test_small_ops(63);
    test_gdn(71);
    test_topk(64);
    test_errors(65);
    test_no_stale_copy(68);
    fprintf(stderr, "cuda backend (%s): max nerr seen: matmul %.3g, attention %.3g, small ops %.3g\n",
            cu_emulated() ? "emulated" : "device", seen_mm, seen_attn, seen_small);
    kern_backend_free(cu);
    kern_backend_free(ref);
    return t_done();
}
