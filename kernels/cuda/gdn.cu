/* gdn.cu - Qwen3.5's Gated DeltaNet rows (kern_gdn) on the GPU, one row at a time since a
 * row may continue the cell an earlier row of the batch wrote: the conv + SiLU with one
 * thread a channel (each owns its window column), then one block a value head with one
 * thread a value dim j, which owns column j of S, so the delta rule needs no atomics and
 * every sum has a fixed order (a row gives the same bits alone as in any batch). Float
 * sums; the L2 and RMS norms reduced by common.cuh's block_sum. Contracts: cu.h. */
#include "kernels/cuda/common.cuh"

#define _Noreturn [[noreturn]] /* base/status.h is C11 */
extern "C" {
#include "kernels/kern.h"
}

namespace {

constexpr int CONV_THREADS = 256;

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

/* channel c of one row: s = w[K-1] x + sum_k w[k] win[k], the window shifted by x */
__global__ void k_gdn_conv(float *x, float *win, const float *conv_w, int64_t cd, int K) {
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cd;
         c += (int64_t)gridDim.x * blockDim.x) {
        const float *w = conv_w + c * K;
        const float xc = x[c];
        float s = w[K - 1] * xc;
        for (int k = 0; k < K - 1; k++) s += w[k] * win[k * cd + c];
        for (int k = 0; k + 1 < K - 1; k++) win[k * cd + c] = win[(k + 1) * cd + c];
        if (K > 1) win[(int64_t)(K - 2) * cd + c] = xc;
        x[c] = silu(s);
    }
}

/* v (thread j's value) / sqrt(sum over the block + eps) * scale; j >= n adds nothing */
__device__ __forceinline__ float l2n(float v, float eps, float scale, float *red) {
    const float ss = cu::block_sum(v * v, red);
    return v * (scale / sqrtf(ss + eps));
}

/* Value head blockIdx.x of one row (x: its conv output, q | k | v), its S at S0. */
__global__ void __launch_bounds__(CU_GDN_MAX_STATE)
k_gdn_head(const float *x, float *S0, const float *z, const float *beta, const float *alpha,
           const float *dt_bias, const float *a, const float *norm_w, float *out, int HK, int n,
           float eps) {
    __shared__ float sq[CU_GDN_MAX_STATE], sk[CU_GDN_MAX_STATE], red[32];
    const int h = blockIdx.x, j = threadIdx.x, kh = h % HK;
    const bool live = j < n;
    const float qj = live ? x[(int64_t)kh * n + j] : 0.0f;
    const float kj = live ? x[(int64_t)(HK + kh) * n + j] : 0.0f;
    const float qn = l2n(qj, eps, 1.0f / sqrtf((float)n), red), kn = l2n(kj, eps, 1.0f, red);
    if (live) sq[j] = qn, sk[j] = kn;
    __syncthreads();
    const float sp = alpha[h] + dt_bias[h];
    const float decay = expf((sp > 20.0f ? sp : log1pf(expf(sp))) * a[h]);
    const float b = 1.0f / (1.0f + expf(-beta[h]));
    float *S = S0 + (int64_t)h * n * n + j;
    float o = 0.0f;
    if (live) {
        float skd = 0.0f;
        for (int i = 0; i < n; i++) {
            const float s = S[(int64_t)i * n] * decay;
            S[(int64_t)i * n] = s;
            skd += s * sk[i];
        }
        const float d = b * (x[(int64_t)(2 * HK + h) * n + j] - skd);
        for (int i = 0; i < n; i++) {
            const float s = S[(int64_t)i * n] + sk[i] * d;
            S[(int64_t)i * n] = s;
            o += s * sq[i];
        }
    }
    const float ss = cu::block_sum(o * o, red);
    if (live)
        out[(int64_t)h * n + j] = o * (1.0f / sqrtf(ss / (float)n + eps)) * norm_w[j] *
                                  silu(z[(int64_t)h * n + j]);
}

__global__ void k_sigmoid_mul(float *y, const float *gate, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = y[i] / (1.0f + expf(-gate[i]));
}

} /* namespace */

extern "C" void cu_gdn_row(const kern_gdn *a, int32_t r, float *cell, cu_stream s) {
    const int64_t cd = kern_gdn_conv_dim(a), vd = (int64_t)a->n_v_heads * a->d_state;
    float *x = a->qkv + r * cd;
    CU_LAUNCH(k_gdn_conv, cu::grid_for(cd, CONV_THREADS), CONV_THREADS, 0, s, x, cell, a->conv_w,
              cd, a->conv_k);
    const int threads = (a->d_state + 31) / 32 * 32;
    CU_LAUNCH(k_gdn_head, a->n_v_heads, threads, 0, s, x, cell + (a->conv_k - 1) * cd,
              a->z + r * vd, a->beta + (int64_t)r * a->n_v_heads,
              a->alpha + (int64_t)r * a->n_v_heads, a->dt_bias, a->a, a->norm_w, a->out + r * vd,
              a->n_k_heads, a->d_state, a->eps);
}

extern "C" void cu_sigmoid_mul(float *y, const float *gate, int64_t n, cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_sigmoid_mul, cu::grid_for(n, CONV_THREADS), CONV_THREADS, 0, s, y, gate, n);
}
