/* test_cuda_emu_kernels.cc - the CUDA kernels of kernels/cuda/ against the ref backend and
 * the dtype dequantisers, on small shapes with odd sizes. make test runs it under the
 * emulator (kernels/cuda/emu.h); make cuda-test builds the same file with nvcc and runs it
 * on the GPU (buffers are managed memory, which host and device both reach; it reports
 * itself skipped without a device). Bounds (t_nerr = max|cuda - ref| / max|ref| over the output; observed
 * values printed on stderr at the end):
 *   rmsnorm     1e-5   float sums in a block reduction vs ref's double sum [~1e-7]
 *   rope        0      angles and products in double like ref, the same libm here; on a
 *                      GPU 1e-6 (CUDA's double pow/sin/cos may move a result by an ulp)
 *   swiglu      1e-6   float silu vs ref's double [~1e-7]
 *   add         0      one float add either way
 *   get_rows    0      bit for bit what dtype_dequantize_row gives, every type
 *   topk        ids and order exact (ties: lower id first); mx exact; log_sum within 1e-6
 *               of vec_log_sum_exp's (float exps, double sums, another order and exp);
 *               log-probabilities within 1e-5 * max(1, |lse|)
 *   mmvq        quantize_q8 bit for bit; 1e-5 against the quantised operands' product in
 *               double; 2e-2 against ref with float activations (int8's rounding)
 *   few_n       cu_matmul_few_n: each matrix's output the bits of its own cu_matmul_few
 *   q8_swiglu   cu_quantize_q8_swiglu bit for bit cu_swiglu then cu_quantize_q8 */
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cuda/cu.h"
#include "kernels/cuda/emu.h"

#define _Noreturn [[noreturn]] /* base/status.h is C11; this file is C++ */
extern "C" {
#include "kernels/kern.h"
#include "kernels/vec.h"
}
#include "t.h"

static uint64_t rng = 7;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { /* [-1, 1) */
    return (float)((double)(rng_next() >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}
/* Buffers the kernels read and write: managed memory, so the test's host code reads them
 * on the GPU too (plain host memory under the emulator). */
template <class T> struct managed {
    using value_type = T;
    managed() = default;
    template <class U> managed(const managed<U> &) {}
    T *allocate(size_t n) {
        T *p = nullptr;
        if (cudaMallocManaged(&p, n * sizeof(T) + 1) != cudaSuccess) {
            fprintf(stderr, "cudaMallocManaged of %zu bytes failed\n", n * sizeof(T));
            abort();
        }
        return p;
    }
    void deallocate(T *p, size_t) { cudaFree(p); }
    bool operator==(const managed &) const { return true; }
    bool operator!=(const managed &) const { return false; }
};
template <class T> using dvec = std::vector<T, managed<T>>;

/* after each launch: wait for it, and stop on a CUDA error */
static void sync(const char *what) {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static dvec<float> rand_vec(size_t n, float scale) {
    dvec<float> v(n);
    for (float &x : v) x = unif() * scale;
    return v;
}

static double worst_rms, worst_swiglu, worst_lsum, worst_lp, worst_mmvq, worst_mmvq_ref;

static kern_backend *ref;
static const kern_ops *R;

static void test_rmsnorm(void) {
    const int shapes[][2] = {{1, 1}, {3, 7}, {2, 33}, {5, 257}, {2, 1000}, {1, 4099}};
    for (const auto &sh : shapes) {
        const int rows = sh[0], dim = sh[1];
        dvec<float> x = rand_vec((size_t)rows * dim, 3), w = rand_vec(dim, 1.5f);
        dvec<float> y(x.size()), want(x.size()), inplace = x;
        R->rmsnorm(ref, want.data(), x.data(), w.data(), rows, dim, 1e-5f);
        cu_rmsnorm(y.data(), x.data(), w.data(), rows, dim, 1e-5f, nullptr);
        cu_rmsnorm(inplace.data(), inplace.data(), w.data(), rows, dim, 1e-5f, nullptr);
        sync("rmsnorm");
        const double e = t_nerr(y.data(), want.data(), (long)y.size());
        worst_rms = std::max(worst_rms, e);
        T_CHECK(e < 1e-5, "rmsnorm %dx%d: nerr %.3g", rows, dim, e);
        T_CHECK(inplace == y, "rmsnorm %dx%d in place differs from out of place", rows, dim);
    }
}

static void test_rope(void) {
    /* rows, heads, head_dim, rope_dim, with freq factors */
    const int shapes[][5] = {{1, 1, 2, 2, 0}, {3, 2, 8, 8, 0}, {5, 3, 10, 6, 1},
                             {2, 4, 64, 64, 1}, {7, 1, 96, 32, 0}};
    for (const auto &sh : shapes) {
        const int rows = sh[0], heads = sh[1], hd = sh[2], rd = sh[3];
        dvec<float> x = rand_vec((size_t)rows * heads * hd, 2), want = x;
        dvec<float> ff = rand_vec(rd / 2, 1);
        for (float &f : ff) f = 1.5f + f; /* 0.5 .. 2.5 */
        dvec<int32_t> pos(rows);
        for (int32_t &p : pos) p = (int32_t)(rng_next() % 6000);
        const float *f = sh[4] ? ff.data() : nullptr;
        R->rope(ref, want.data(), pos.data(), rows, heads, hd, rd, 10000.0f, f);
        cu_rope(x.data(), pos.data(), rows, heads, hd, rd, 10000.0f, f, nullptr);
        sync("rope");
        const double e = t_nerr(x.data(), want.data(), (long)x.size());
        T_CHECK(e <= (CU_EMU ? 0 : 1e-6), "rope %dx%dx%d rope_dim %d%s: nerr %.3g", rows, heads, hd, rd,
                f ? " freq factors" : "", e);
    }
}

static void test_swiglu_add(void) {
    for (long n : {1L, 7L, 1000L, 4097L}) {
        dvec<float> g = rand_vec(n, 6), u = rand_vec(n, 2), y(n), want(n);
        R->swiglu(ref, want.data(), g.data(), u.data(), n);
        cu_swiglu(y.data(), g.data(), u.data(), n, nullptr);
        sync("swiglu");
        const double e = t_nerr(y.data(), want.data(), n);
        worst_swiglu = std::max(worst_swiglu, e);
        T_CHECK(e < 1e-6, "swiglu n %ld: nerr %.3g", n, e);
        cu_swiglu(g.data(), g.data(), u.data(), n, nullptr);
        sync("swiglu");
        T_CHECK(g == y, "swiglu n %ld in place differs", n);

        dvec<float> a = rand_vec(n, 4), b = rand_vec(n, 4), wa = a;
        R->add(ref, wa.data(), b.data(), n);
        cu_add(a.data(), b.data(), n, nullptr);
        sync("add");
        T_CHECK(a == wa, "add n %ld differs", n);

        /* logits of +-30 capped at 10: saturated tails and the linear middle */
        dvec<float> x = rand_vec(n, 30), wx = x;
        R->softcap(ref, wx.data(), 10.0f, n);
        cu_softcap(x.data(), 10.0f, n, nullptr);
        sync("softcap");
        const double es = t_nerr(x.data(), wx.data(), n);
        T_CHECK(es < 1e-6, "softcap n %ld: nerr %.3g", n, es);
    }
}

static void test_get_rows(void) {
    const uint32_t types[] = {DT_F32,  DT_F16,  DT_BF16, DT_Q8_0,   DT_Q4_0,   DT_Q4_1,
                              DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K,   DT_Q6_K,   DT_Q2_K,
                              DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    const dvec<int32_t> rows = {6, 0, 3, 3, 5};
    const int n_out = 7, n_rows = 5;
    for (uint32_t type : types) {
        const int block = dtype_get(type)->block;
        for (int64_t n_in : {(int64_t)block * 3, block == 1 ? (int64_t)13 : (int64_t)block}) {
            const size_t rb = dtype_row_bytes(type, n_in);
            dvec<unsigned char> w(rb * n_out);
            for (int o = 0; o < n_out; o++) {
                dvec<float> src = rand_vec(n_in, o == 2 ? 0.0f : 1.0f + o);
                T_CHECK(dtype_quantize_row(type, src.data(), w.data() + o * rb, n_in),
                        "quantise %s", dtype_name(type));
            }
            dvec<float> got((size_t)n_rows * n_in, -7), want(got.size());
            for (int r = 0; r < n_rows; r++)
                dtype_dequantize_row(type, w.data() + rows[r] * rb, want.data() + r * n_in, n_in);
            const bool ok =
                cu_get_rows(got.data(), type, w.data(), n_in, rows.data(), n_rows, nullptr);
            sync("get_rows");
            T_CHECK(ok && memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0,
                    "get_rows %s n_in %ld: not the dequantiser's bits (first differing value %ld)",
                    dtype_name(type), (long)n_in,
                    (long)(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin()));
        }
    }
    T_CHECK(!cu_get_rows(nullptr, DT_IQ2_XXS, nullptr, 256, rows.data(), 1, nullptr),
            "get_rows takes a type without a kernel");
}

/* x quantised as cu_quantize_q8 says, computed here: the int8 values, scales and sums */
static void quantize_q8_oracle(const float *x, int64_t n, int8_t *q, float *d, int32_t *sum) {
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = std::max(amax, fabsf(x[b * 32 + i]));
        d[b] = amax / 127.0f;
        sum[2 * b] = sum[2 * b + 1] = 0;
        for (int i = 0; i < 32; i++) {
            q[b * 32 + i] = (int8_t)(amax == 0.0f ? 0 : (int)roundf(x[b * 32 + i] / d[b]));
            sum[2 * b + i / 16] += q[b * 32 + i];
        }
    }
}

/* The quantised few-row product: the activations' quantisation bit for bit; y against the
 * dequantised weights times the dequantised activations in double (what the kernel computes
 * but for float rounding); against ref's product of the float activations within the
 * quantisation's error; each row alone the same bits as in the batch. */
static void test_mmvq(void) {
    const uint32_t types[] = {DT_Q8_0, DT_Q4_0, DT_Q4_1,   DT_Q5_0,   DT_Q5_1, DT_Q4_K, DT_Q5_K,
                              DT_Q6_K, DT_Q2_K, DT_Q3_K, DT_IQ4_NL, DT_IQ4_XS, DT_MXFP4};
    const int n_out = 7, n_rows = 9; /* (a partial block of output rows; two groups of rows) */
    for (uint32_t type : types) {
        const int block = dtype_get(type)->block;
        for (int64_t n_in : {(int64_t)block, (int64_t)block * 3}) {
            const size_t rb = dtype_row_bytes(type, n_in);
            dvec<unsigned char> w(rb * n_out);
            std::vector<float> wd((size_t)n_out * n_in);
            for (int o = 0; o < n_out; o++) {
                dvec<float> src = rand_vec(n_in, o == 2 ? 0.0f : 1.0f + o);
                dtype_quantize_row(type, src.data(), w.data() + o * rb, n_in);
                dtype_dequantize_row(type, w.data() + o * rb, wd.data() + o * n_in, n_in);
            }
            dvec<float> x = rand_vec((size_t)n_rows * n_in, 2.0f);
            for (int i = 0; i < 32; i++) x[n_in + i] = 0.0f; /* a block of zeros */
            const size_t nx = x.size();
            dvec<int8_t> xq(nx);
            dvec<float> xd(nx / 32), y((size_t)n_rows * n_out), one(n_out), want_ref(y.size());
            dvec<int32_t> xs(nx / 16);
            cu_quantize_q8(xq.data(), xd.data(), xs.data(), x.data(), n_rows, n_in, nullptr);
            const bool ok = cu_matmul_q8(y.data(), type, w.data(), n_out, n_in, xq.data(), xd.data(),
                                         xs.data(), n_rows, nullptr);
            sync("mmvq");
            std::vector<int8_t> q(nx);
            std::vector<float> d(nx / 32);
            std::vector<int32_t> sum(nx / 16);
            quantize_q8_oracle(x.data(), (int64_t)nx, q.data(), d.data(), sum.data());
            T_CHECK(std::equal(q.begin(), q.end(), xq.begin()) && std::equal(d.begin(), d.end(), xd.begin()) &&
                        std::equal(sum.begin(), sum.end(), xs.begin()),
                    "quantize_q8 n_in %ld: not the definition's values", (long)n_in);
            std::vector<float> want(y.size());
            for (int r = 0; r < n_rows; r++)
                for (int o = 0; o < n_out; o++) {
                    double acc = 0;
                    for (int64_t i = 0; i < n_in; i++)
                        acc += (double)wd[o * n_in + i] * ((double)d[(r * n_in + i) / 32] * q[r * n_in + i]);
                    want[(size_t)r * n_out + o] = (float)acc;
                }
            const double e = t_nerr(y.data(), want.data(), (long)y.size());
            worst_mmvq = std::max(worst_mmvq, e);
            T_CHECK(ok && e < 1e-5, "mmvq %s n_in %ld: nerr %.3g against the quantised operands",
                    dtype_name(type), (long)n_in, e);
            const kern_mat st = {type, n_out, n_in, w.data(), nullptr};
            kern_mat km;
            R->mat_prepare(ref, &km, &st, 0, nullptr);
            R->matmul(ref, want_ref.data(), &km, x.data(), n_rows);
            R->mat_release(ref, &km);
            const double eq = t_nerr(y.data(), want_ref.data(), (long)y.size());
            worst_mmvq_ref = std::max(worst_mmvq_ref, eq);
            T_CHECK(eq < 2e-2, "mmvq %s n_in %ld: nerr %.3g against ref (float activations)",
                    dtype_name(type), (long)n_in, eq);
            cu_matmul_q8(one.data(), type, w.data(), n_out, n_in, xq.data() + 5 * n_in,
                         xd.data() + 5 * n_in / 32, xs.data() + 5 * n_in / 16, 1, nullptr);
            sync("mmvq");
            T_CHECK(memcmp(one.data(), y.data() + 5 * n_out, sizeof(float) * n_out) == 0,
                    "mmvq %s: row 5 alone differs from row 5 in the batch", dtype_name(type));
        }
    }
    T_CHECK(!cu_matmul_q8(nullptr, DT_F16, nullptr, 4, 64, nullptr, nullptr, nullptr, 1, nullptr),
            "mmvq takes F16");
}

/* The row's top kk as the definition says: sort ids by (value desc, id asc). */
static std::vector<int32_t> topk_oracle(const float *x, int n, int kk) {
    std::vector<int32_t> id(n);
    std::iota(id.begin(), id.end(), 0);
    std::stable_sort(id.begin(), id.end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
    id.resize(kk);
    return id;
}

static void test_topk(void) {
    /* (k 5000: past the vocabulary, still capped at CU_TOPK_MAX) */
    const int vocabs[] = {1, 5, 300, 4099}, ks[] = {1, 4, 40, 100, 5000};
    for (int n : vocabs)
        for (int k : ks) {
            if (k == 100 && n < 300) continue;
            const int rows = 3;
            dvec<float> x((size_t)rows * n);
            for (size_t i = 0; i < x.size(); i++) /* many ties: quarter steps in row 0 */
                x[i] = i < (size_t)n ? (float)(int)(unif() * 20) / 4 : unif() * 12;
            dvec<int32_t> ids((size_t)rows * k, -1);
            dvec<float> lp((size_t)rows * k), mx(rows);
            dvec<double> ls(rows);
            const int32_t kk = cu_topk_lse(x.data(), rows, n, k, ids.data(), lp.data(), mx.data(),
                                           ls.data(), nullptr);
            sync("topk_lse");
            const int want_kk = std::min(std::min(k, n), CU_TOPK_MAX);
            T_CHECK(kk == want_kk, "topk n %d k %d: %d entries, want %d", n, k, kk, want_kk);
            for (int r = 0; r < rows; r++) {
                const float *xr = x.data() + (size_t)r * n;
                float wmx;
                const double wls = vec_log_sum_exp(xr, n, &wmx);
                const std::vector<int32_t> want = topk_oracle(xr, n, want_kk);
                const bool same = std::equal(want.begin(), want.end(), ids.begin() + (size_t)r * k);
                T_CHECK(same, "topk n %d k %d row %d: ids differ from the sorted order", n, k, r);
                T_CHECK(mx[r] == wmx, "topk n %d row %d: mx %g, want %g", n, r, mx[r], wmx);
                const double el = fabs(ls[r] - wls);
                worst_lsum = std::max(worst_lsum, el);
                T_CHECK(el < 1e-6, "topk n %d row %d: log_sum %.9g, want %.9g", n, r, ls[r], wls);
                const float lse = wmx + (float)wls;
                double elp = 0;
                for (int i = 0; i < kk && same; i++)
                    elp = std::max(elp, fabs((double)lp[(size_t)r * k + i] - (xr[want[i]] - lse)));
                elp /= std::max(1.0, fabs((double)lse));
                worst_lp = std::max(worst_lp, elp);
                T_CHECK(elp < 1e-5, "topk n %d k %d row %d: logprob error %.3g", n, k, r, elp);
            }
        }
}

#if !CU_EMU
/* Seconds per call of f, over 50 calls after 3 untimed ones (CUDA events). */
template <class F> static double per_call(F f) {
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int i = 0; i < 3; i++) f();
    cudaEventRecord(a);
    for (int i = 0; i < 50; i++) f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms / 1e3 / 50;
}

/* On a GPU, a figure for the run's log (no check; MD_NO_TIMING skips it): the weight
 * bytes per second of one activation row through cu_matmul_few and through
 * cu_quantize_q8 + cu_matmul_q8, on an 8B model's ffn shape. */
static void time_products(void) {
    const int64_t n_out = 14336, n_in = 4096;
    for (uint32_t type : {DT_Q4_K, DT_Q4_1, DT_Q8_0, DT_Q6_K}) {
        const size_t wb = dtype_row_bytes(type, n_in) * n_out;
        void *w;
        float *x, *y, *xd;
        int8_t *xq;
        int32_t *xs;
        cudaMalloc(&w, wb), cudaMalloc(&x, n_in * 4), cudaMalloc(&y, n_out * 4);
        cudaMalloc(&xq, n_in), cudaMalloc(&xd, n_in / 8), cudaMalloc(&xs, n_in / 4);
        cudaMemset(w, 0x11, wb), cudaMemset(x, 0, n_in * 4);
        const double few = per_call([&] { cu_matmul_few(y, type, w, n_out, n_in, x, 1, nullptr); });
        const double q8 = per_call([&] {
            cu_quantize_q8(xq, xd, xs, x, 1, n_in, nullptr);
            cu_matmul_q8(y, type, w, n_out, n_in, xq, xd, xs, 1, nullptr);
        });
        sync("timing");
        fprintf(stderr, "speed %s %ldx%ld, 1 row: few-row %.0f GB/s (%.1f us), mmvq %.0f GB/s (%.1f us)\n",
                dtype_name(type), (long)n_out, (long)n_in, wb / few / 1e9, few * 1e6, wb / q8 / 1e9,
                q8 * 1e6);
        cudaFree(w), cudaFree(x), cudaFree(y), cudaFree(xq), cudaFree(xd), cudaFree(xs);
    }
}
#endif

/* SwiGLU's values quantised as formed: the bits of cu_swiglu then cu_quantize_q8, a block
 * of zeros (silu(0) = 0) and a block of large gates among them. */
static void test_quantize_swiglu(void) {
    const int n_rows = 3;
    for (int64_t n_in : {32, 96, 256}) {
        const size_t n = (size_t)n_rows * n_in;
        dvec<float> gate = rand_vec(n, 6.0f), up = rand_vec(n, 2.0f), h(n);
        for (int i = 0; i < 32; i++) gate[n_in + i] = 0.0f, gate[n - 32 + i] *= 30.0f;
        dvec<int8_t> q1(n), q2(n);
        dvec<float> d1(n / 32), d2(n / 32);
        dvec<int32_t> s1(n / 16), s2(n / 16);
        cu_swiglu(h.data(), gate.data(), up.data(), (int64_t)n, nullptr);
        cu_quantize_q8(q1.data(), d1.data(), s1.data(), h.data(), n_rows, n_in, nullptr);
        cu_quantize_q8_swiglu(q2.data(), d2.data(), s2.data(), gate.data(), up.data(), n_rows, n_in, nullptr);
        sync("quantize_q8_swiglu");
        T_CHECK(memcmp(q1.data(), q2.data(), n) == 0 && memcmp(d1.data(), d2.data(), n / 32 * 4) == 0 &&
                    memcmp(s1.data(), s2.data(), n / 16 * 4) == 0,
                "quantize_q8_swiglu n_in %ld: not swiglu + quantize_q8's bits", (long)n_in);
    }
}

/* 1 .. CU_MQ_N matrices of several heights (one of none) over the same x in one
 * cu_matmul_few_n launch, for the float types and one block type: each output the bits of
 * cu_matmul_few on its matrix alone. */
static void test_matmul_few_n(void) {
    const int64_t heights[CU_MQ_N] = {13, 0, 41, 5};
    for (uint32_t type : {DT_F32, DT_F16, DT_BF16, DT_Q4_K}) {
        const int64_t n_in = type == DT_Q4_K ? 512 : 77;
        const size_t rb = dtype_row_bytes(type, n_in);
        for (int n = 1; n <= CU_MQ_N; n++)
            for (int n_rows : {1, 9, CU_FEW_ROWS}) {
                dvec<unsigned char> w[CU_MQ_N];
                dvec<float> y[CU_MQ_N], one[CU_MQ_N];
                const void *wp[CU_MQ_N];
                float *yp[CU_MQ_N];
                for (int i = 0; i < n; i++) {
                    dvec<float> src = rand_vec((size_t)heights[i] * n_in + 1, 1.0f);
                    w[i].resize(rb * heights[i] + 1);
                    for (int64_t o = 0; o < heights[i]; o++)
                        dtype_quantize_row(type, src.data() + o * n_in, w[i].data() + o * rb, n_in);
                    y[i].assign((size_t)n_rows * heights[i] + 1, -1.0f);
                    one[i].assign(y[i].size(), -1.0f);
                    wp[i] = w[i].data(), yp[i] = y[i].data();
                }
                dvec<float> x = rand_vec((size_t)n_rows * n_in, 3.0f);
                const uint64_t before = cu_emu_launches();
                const bool ok = cu_matmul_few_n(n, yp, type, wp, heights, n_in, x.data(), n_rows, nullptr);
                sync("matmul_few_n");
                const uint64_t launches = cu_emu_launches() - before;
                bool same = true;
                for (int i = 0; i < n; i++) {
                    cu_matmul_few(one[i].data(), type, wp[i], heights[i], n_in, x.data(), n_rows, nullptr);
                    sync("matmul_few");
                    same = same && memcmp(one[i].data(), y[i].data(), sizeof(float) * y[i].size()) == 0;
                }
                T_CHECK(ok && same, "matmul_few_n %s, %d matrices, %d rows: not each one's own bits",
                        dtype_name(type), n, n_rows);
                T_CHECK(!cu_emulated() || launches == 1, "matmul_few_n %s, %d matrices: %lu launches",
                        dtype_name(type), n, (unsigned long)launches);
            }
    }
}

int main(void) {
    int n_dev = 0;
    const cudaError_t de = cudaGetDeviceCount(&n_dev);
    if (de != cudaSuccess || n_dev == 0) {
        T_SKIP("no CUDA device (%s): the kernels were not run",
               de != cudaSuccess ? cudaGetErrorString(de) : "none found");
        return t_done();
    }
    st_err err;
    ref = kern_backend_init("ref", 1, &err);
    if (!ref) {
        fprintf(stderr, "ref backend: %s\n", err.msg);
        return 1;
    }
    R = kern_backend_ops(ref);
    test_rmsnorm();
    test_rope();
    test_swiglu_add();
    test_get_rows();
    test_topk();
    test_mmvq();
    test_matmul_few_n();
    test_quantize_swiglu();
#if !CU_EMU
    if (!getenv("MD_NO_TIMING")) time_products(); /* (set under compute-sanitizer) */
#endif
    kern_backend_free(ref);
    fprintf(stderr,
            "max error seen: rmsnorm %.3g, swiglu %.3g, topk log_sum %.3g, logprob %.3g, mmvq %.3g "
            "(against ref's float activations %.3g)\n",
            worst_rms, worst_swiglu, worst_lsum, worst_lp, worst_mmvq, worst_mmvq_ref);
    return t_done();
}
