/* test_cuda_emu.cc - the CUDA-on-CPU emulator (kernels/cuda/emu.h) itself: block
 * reductions through __syncthreads and static shared memory, warp reductions with each
 * shuffle, dynamic shared memory, 2-D indices, atomics across blocks; then its failure
 * modes, each run in a child process so the abort is seen: a divergent barrier and a wrong
 * shuffle mask abort naming the kernel, and shared memory nobody wrote reads as the
 * poison (a NaN), also when an earlier block wrote it; stream capture (emu_graph.h)
 * records a kernel and a copy without running them, and a graph replays them reading
 * memory as it is at the launch; a synchronous call or legacy-stream work during a capture
 * aborts. Last, emu_blas.h's cublasGemmEx: values, transposes and beta on a small
 * product, and its strictness (the combinations it refuses, leading dimensions too
 * small). */
#include <signal.h>
#include <sys/wait.h>

#include <string>

#include "kernels/cuda/emu.h"
#include "kernels/cuda/emu_blas.h"
#include "t.h"

/* ---- kernels ---- */

/* out[block] = sum of x over the block's blockDim.x values, by a tree in shared memory */
__global__ void k_block_sum(const int *x, int *out) {
    __shared__ int part[256];
    const int t = threadIdx.x;
    part[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (t < s) part[t] += part[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = part[0];
}

/* per warp w: xor[w*32+l] = warp sum (every lane), down[w] = warp sum (lane 0),
 * bcast[w*32+l] = lane 5's value, scan[w*32+l] = inclusive prefix sum (shfl_up) */
__global__ void k_warp(const float *x, float *xr, float *down, double *bcast, int *scan) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = x[i], d = x[i];
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    for (int o = 16; o > 0; o /= 2) d += __shfl_down_sync(0xffffffffu, d, o);
    xr[i] = v;
    if (lane == 0) down[i / 32] = d;
    bcast[i] = __shfl_sync(0xffffffffu, (double)x[i] * 2, 5);
    int s = (int)x[i];
    for (int o = 1; o < 32; o *= 2) {
        const int u = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += u;
    }
    scan[i] = s;
}

/* the lower half-warp sums its 16 values with a 16-lane mask, the upper half with the
 * other mask and width 16: both groups at once */
__global__ void k_half_warps(const int *x, int *out) {
    const int lane = threadIdx.x;
    const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    int v = x[lane];
    for (int o = 8; o > 0; o /= 2) v += __shfl_xor_sync(mask, v, o, 16);
    out[lane] = v;
}

/* each block reverses its n values through dynamic shared memory */
__global__ void k_reverse(const float *x, float *y, int n) {
    CU_DYN_SHARED(float, buf);
    const float *xb = x + blockIdx.x * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = xb[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = buf[n - 1 - i];
}

/* a 2-D grid of 2-D blocks: every thread writes its global (x, y) into a w-wide image */
__global__ void k_index2d(int *img, int w) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    img[y * w + x] = y * 1000 + x + (int)(gridDim.x * gridDim.y - 6) * 100000;
}

/* histogram of x into 8 bins, the largest value and the float sum, from every block */
__global__ void k_atomics(const int *x, int n, int *hist, int *mx, float *sum,
                          unsigned long long *cnt) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&hist[x[i] % 8], 1);
    atomicMax(mx, x[i]);
    atomicAdd(sum, (float)x[i]);
    atomicAdd(cnt, 1ull);
}

/* the failure modes */
__global__ void k_divergent(int *out) {
    if (threadIdx.x < 16) __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void k_two_barriers(int *out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}
__global__ void k_bad_mask(float *out) {
    float v = out[threadIdx.x];
    v += __shfl_xor_sync(0x0000ffffu, v, 1); /* lanes 16..31 call it too */
    out[threadIdx.x] = v;
}
__global__ void k_missing_lane(float *out) {
    float v = out[threadIdx.x];
    if (threadIdx.x < 16) v += __shfl_down_sync(0xffffffffu, v, 1); /* half the warp */
    out[threadIdx.x] = v;
}
__global__ void k_mixed_ops(float *out) {
    float v = out[threadIdx.x];
    if (threadIdx.x < 16) v += __shfl_xor_sync(0xffffffffu, v, 1); /* the others: a syncwarp */
    else __syncwarp(0xffffffffu);
    out[threadIdx.x] = v;
}
__global__ void k_read_outside_mask(float *out) {
    float v = out[threadIdx.x];
    if (threadIdx.x < 16) v += __shfl_sync(0x0000ffffu, v, 20); /* lane 20 is not in it */
    out[threadIdx.x] = v;
}
/* block 0 writes its shared memory, then every block reads it without writing */
__global__ void k_poison(unsigned *stat, unsigned *dyn) {
    __shared__ float s[4];
    CU_DYN_SHARED(float, d);
    if (blockIdx.x == 0) {
        s[threadIdx.x] = 1.0f;
        d[threadIdx.x] = 2.0f;
        __syncthreads();
    }
    stat[blockIdx.x * 4 + threadIdx.x] = __float_as_uint(s[threadIdx.x]);
    dyn[blockIdx.x * 4 + threadIdx.x] = __float_as_uint(d[threadIdx.x]);
}

/* ---- checks ---- */

static uint64_t rng = 42;
static int rnd(int n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng >> 33) % (uint64_t)n);
}

static void test_block_sum(void) {
    const int nb = 3, bs = 256;
    std::vector<int> x(nb * bs), out(nb);
    for (int &v : x) v = rnd(1000) - 500;
    CU_LAUNCH(k_block_sum, nb, bs, 0, nullptr, x.data(), out.data());
    for (int b = 0; b < nb; b++) {
        int want = 0;
        for (int i = 0; i < bs; i++) want += x[b * bs + i];
        T_CHECK(out[b] == want, "block %d: %d, want %d", b, out[b], want);
    }
}

static void test_warp(void) {
    const int n = 96; /* three warps in one block */
    std::vector<float> x(n), xr(n), down(n / 32);
    std::vector<double> bc(n);
    std::vector<int> scan(n);
    for (float &v : x) v = (float)rnd(100);
    CU_LAUNCH(k_warp, 1, n, 0, nullptr, x.data(), xr.data(), down.data(), bc.data(),
              scan.data());
    int bad_xor = 0, bad_bc = 0, bad_scan = 0;
    for (int w = 0; w < n / 32; w++) {
        float sum = 0;
        int run = 0;
        for (int l = 0; l < 32; l++) sum += x[w * 32 + l];
        for (int l = 0; l < 32; l++) {
            run += (int)x[w * 32 + l];
            bad_xor += xr[w * 32 + l] != sum;
            bad_bc += bc[w * 32 + l] != (double)x[w * 32 + 5] * 2;
            bad_scan += scan[w * 32 + l] != run;
        }
        T_CHECK(down[w] == sum, "warp %d: shfl_down sum %g, want %g", w, down[w], sum);
    }
    T_CHECK(bad_xor == 0, "%d lanes with a wrong shfl_xor sum", bad_xor);
    T_CHECK(bad_bc == 0, "%d lanes with a wrong shfl broadcast", bad_bc);
    T_CHECK(bad_scan == 0, "%d lanes with a wrong shfl_up prefix sum", bad_scan);

    std::vector<int> h(32), ho(32);
    for (int &v : h) v = rnd(50);
    CU_LAUNCH(k_half_warps, 1, 32, 0, nullptr, h.data(), ho.data());
    int lo = 0, hi = 0, bad = 0;
    for (int l = 0; l < 16; l++) lo += h[l], hi += h[16 + l];
    for (int l = 0; l < 32; l++) bad += ho[l] != (l < 16 ? lo : hi);
    T_CHECK(bad == 0, "%d lanes wrong with two half-warp masks of width 16", bad);
}

static void test_dyn_shared(void) {
    const int nb = 3, n = 333;
    std::vector<float> x(nb * n), y(nb * n);
    for (float &v : x) v = (float)rnd(1 << 20);
    CU_LAUNCH(k_reverse, nb, 64, n * sizeof(float), nullptr, x.data(), y.data(), n);
    int bad = 0;
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < n; i++) bad += y[b * n + i] != x[b * n + n - 1 - i];
    T_CHECK(bad == 0, "%d values misplaced by the dynamic shared memory reverse", bad);
}

static void test_index2d(void) {
    const int w = 12, h = 10; /* blocks of 4x5, grid 3x2 */
    std::vector<int> img(w * h, -1);
    CU_LAUNCH(k_index2d, dim3(3, 2), dim3(4, 5), 0, nullptr, img.data(), w);
    int bad = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) bad += img[y * w + x] != y * 1000 + x;
    T_CHECK(bad == 0, "%d pixels wrong in a 2-D launch", bad);
}

static void test_atomics(void) {
    const int n = 1000;
    std::vector<int> x(n), hist(8, 0), want(8, 0);
    int mx = -1, wmx = -1;
    float sum = 0, wsum = 0;
    unsigned long long cnt = 0;
    for (int i = 0; i < n; i++) {
        x[i] = rnd(5000);
        want[x[i] % 8]++;
        wmx = x[i] > wmx ? x[i] : wmx;
        wsum += (float)x[i]; /* integers below 2^24: any order gives these bits */
    }
    CU_LAUNCH(k_atomics, (n + 127) / 128, 128, 0, nullptr, x.data(), n, hist.data(), &mx,
              &sum, &cnt);
    T_CHECK(hist == want, "atomicAdd histogram differs");
    T_CHECK(mx == wmx, "atomicMax %d, want %d", mx, wmx);
    T_CHECK(sum == wsum, "float atomicAdd %g, want %g", sum, wsum);
    T_CHECK(cnt == (unsigned long long)n, "64-bit atomicAdd %llu, want %d", cnt, n);
}

/* Runs fn in a child with stderr captured; true when the child aborted (SIGABRT) and
 * its stderr holds every one of the words. */
template <class F>
static bool aborts_with(F fn, std::initializer_list<const char *> words, std::string *msg) {
    int p[2];
    if (pipe(p) != 0) return false;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        fn();
        _exit(0);
    }
    close(p[1]);
    char buf[4096];
    ssize_t r;
    while ((r = read(p[0], buf, sizeof buf)) > 0) msg->append(buf, (size_t)r);
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT) return false;
    for (const char *w : words)
        if (msg->find(w) == std::string::npos) return false;
    return true;
}

static void test_failures(void) {
    std::vector<int> io(64);
    std::vector<float> fo(64);
    std::string m;
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_divergent, 1, 64, 0, nullptr, io.data()); },
                        {"k_divergent", "divergent __syncthreads", "16 of 64"}, &m),
            "divergent barrier: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_two_barriers, 1, 32, 0, nullptr, io.data()); },
                        {"k_two_barriers", "divergent __syncthreads"}, &m),
            "barriers at two sites: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_bad_mask, 1, 32, 0, nullptr, fo.data()); },
                        {"k_bad_mask", "__shfl_xor_sync", "leaves the lane out"}, &m),
            "wrong shuffle mask: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_missing_lane, 1, 32, 0, nullptr, fo.data()); },
                        {"k_missing_lane", "0xffffffff"}, &m),
            "shuffle with lanes missing: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_mixed_ops, 1, 32, 0, nullptr, fo.data()); },
                        {"k_mixed_ops", "meets lane", "another warp operation"}, &m),
            "one mask, two warp operations: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_read_outside_mask, 1, 32, 0, nullptr, fo.data()); },
                        {"k_read_outside_mask", "reads lane 20"}, &m),
            "shuffle source outside the mask: %s", m.c_str());
    m.clear();
    T_CHECK(aborts_with([&] { CU_LAUNCH(k_block_sum, 1, 2048, 0, nullptr, io.data(), io.data()); },
                        {"k_block_sum", "1 to 1024"}, &m),
            "oversized block: %s", m.c_str());
    /* the working kernels above did not abort: the helper is not always true */
    m.clear();
    T_CHECK(!aborts_with([&] { test_block_sum(); }, {}, &m), "a good kernel aborted: %s",
            m.c_str());
}

static void test_graphs(void) {
    const int nb = 2, bs = 64;
    std::vector<int> x(nb * bs, 1), out(nb, -1), copy(nb, -1);
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t e;
    T_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    const uint64_t l0 = cuemu::n_launches;
    CU_LAUNCH(k_block_sum, nb, bs, 0, s, x.data(), out.data());
    cudaMemcpyAsync(copy.data(), out.data(), sizeof(int) * nb, cudaMemcpyDeviceToDevice, s);
    cudaStreamEndCapture(s, &g);
    T_CHECK(out[0] == -1 && copy[0] == -1 && cuemu::n_launches == l0, "a capture ran its work");
    cudaGraphInstantiate(&e, g, 0);
    cudaGraphDestroy(g);
    for (int round = 0; round < 2; round++) {
        for (int &v : x) v = rnd(100);
        int want = 0;
        for (int i = 0; i < bs; i++) want += x[bs + i];
        cudaGraphLaunch(e, s);
        T_CHECK(out[1] == want && copy[1] == want, "replay %d: %d and %d, want %d", round, out[1],
                copy[1], want);
    }
    T_CHECK(cuemu::n_launches == l0 + 2, "two replays ran %llu kernels",
            (unsigned long long)(cuemu::n_launches - l0));
    cudaGraphExecDestroy(e);
    std::string m;
    const struct {
        const char *what;
        std::function<void()> call;
    } bad[] = {
        {"cudaMemcpy", [&] { cudaMemcpy(copy.data(), out.data(), 4, cudaMemcpyDeviceToHost); }},
        {"cudaStreamSynchronize", [&] { cudaStreamSynchronize(s); }},
        {"cudaMalloc", [&] { void *p; cudaMalloc(&p, 4); }},
        {"legacy default stream", [&] { CU_LAUNCH(k_block_sum, 1, 32, 0, nullptr, x.data(), out.data()); }},
    };
    for (const auto &c : bad) {
        m.clear();
        T_CHECK(aborts_with([&] {
                    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
                    c.call();
                }, {c.what, "stream capture"}, &m),
                "%s during a capture: %s", c.what, m.c_str());
    }
    cudaStreamDestroy(s);
}

static void test_poison(void) {
    std::vector<unsigned> st(3 * 4), dy(3 * 4);
    CU_LAUNCH(k_poison, 3, 4, 4 * sizeof(float), nullptr, st.data(), dy.data());
    int b0 = 0, later = 0;
    for (int i = 0; i < 4; i++) {
        b0 += st[i] == __float_as_uint(1.0f) && dy[i] == __float_as_uint(2.0f);
        for (int b = 1; b < 3; b++)
            later += st[b * 4 + i] == cuemu::POISON && dy[b * 4 + i] == cuemu::POISON;
    }
    T_CHECK(b0 == 4, "block 0 reads back what it wrote (%d of 4)", b0);
    T_CHECK(later == 8, "unwritten shared memory reads as the poison in later blocks (%d of 8)",
            later);
    float f = __uint_as_float(cuemu::POISON);
    T_CHECK(f != f, "the poison is a NaN as a float");
}

/* C (2, 2) = A (2, 3) B (3, 2) + beta C with A given transposed (3, 2 column-major: lda 3)
 * and B as is (ldb 4, its 4th row unused), in fp16 and bf16 bits of small integers (exact
 * in both); then each refused call. */
static void test_gemm_ex(void) {
    const float at[6] = {1, 2, 3, -1, 0, 2}; /* A's rows, (1 2 3) and (-1 0 2) */
    const float bv[8] = {1, 0, 1, 9, 2, 1, 0, 9};  /* B's columns (1 0 1) and (2 1 0), 9 unused */
    const float want[4] = {4, 1, 14, 8}; /* C = A B, + 10 in its second column (beta 1) */
    for (int ti = 0; ti < 2; ti++) {
        const cudaDataType_t t = ti ? CUDA_R_16BF : CUDA_R_16F;
        uint16_t a[6], b[8];
        for (int i = 0; i < 6; i++) a[i] = ti ? f32_to_bf16(at[i]) : f32_to_fp16(at[i]);
        for (int i = 0; i < 8; i++) b[i] = ti ? f32_to_bf16(bv[i]) : f32_to_fp16(bv[i]);
        float c[4] = {7, 7, 10, 10};
        const float one = 1, zero = 0;
        cublasHandle_t h;
        cublasCreate(&h);
        cublasStatus_t e = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 1, 3, &one, a, t, 3, b, t, 4, &zero, c,
                                        CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        e = e ? e : cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 1, 3, &one, a, t, 3, b + 4, t, 4, &one, c + 2,
                                 CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        T_CHECK(e == CUBLAS_STATUS_SUCCESS && memcmp(c, want, sizeof want) == 0,
                "GemmEx %s: %g %g %g %g (status %d)", ti ? "bf16" : "fp16", c[0], c[1], c[2], c[3], (int)e);
        const cudaDataType_t other = ti ? CUDA_R_16F : CUDA_R_16BF;
        struct {
            const char *what;
            cublasStatus_t want, got;
        } bad[] = {
            {"A and B of two types", CUBLAS_STATUS_NOT_SUPPORTED,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 3, b, other, 4, &zero, c,
                          CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"float A and B", CUBLAS_STATUS_NOT_SUPPORTED,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, CUDA_R_32F, 3, b, CUDA_R_32F, 4,
                          &zero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"a 16-bit C", CUBLAS_STATUS_NOT_SUPPORTED,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 3, b, t, 4, &zero, c, t, 2,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"another compute type", CUBLAS_STATUS_NOT_SUPPORTED,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 3, b, t, 4, &zero, c, CUDA_R_32F,
                          2, (cublasComputeType_t)64, CUBLAS_GEMM_DEFAULT)},
            {"lda under k (A transposed)", CUBLAS_STATUS_INVALID_VALUE,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 2, b, t, 4, &zero, c, CUDA_R_32F,
                          2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"ldb under k", CUBLAS_STATUS_INVALID_VALUE,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 3, b, t, 2, &zero, c, CUDA_R_32F,
                          2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"ldc under m", CUBLAS_STATUS_INVALID_VALUE,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, 2, 3, &one, a, t, 3, b, t, 4, &zero, c, CUDA_R_32F,
                          1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
            {"a negative n", CUBLAS_STATUS_INVALID_VALUE,
             cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2, -1, 3, &one, a, t, 3, b, t, 4, &zero, c, CUDA_R_32F,
                          2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)},
        };
        for (const auto &x : bad)
            T_CHECK(x.got == x.want, "GemmEx %s, %s: status %d (want %d)", ti ? "bf16" : "fp16", x.what,
                    (int)x.got, (int)x.want);
        T_CHECK(memcmp(c, want, sizeof want) == 0, "refused calls leave C alone");
        cublasDestroy(h);
    }
}

int main(void) {
    test_block_sum();
    test_warp();
    test_dyn_shared();
    test_index2d();
    test_atomics();
    test_poison();
    test_failures();
    test_graphs();
    test_gemm_ex();
    return t_done();
}
