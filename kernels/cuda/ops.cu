/* ops.cu - the row and element-wise ops of a forward pass on the GPU: RMSNorm (one block a
 * row, float sums reduced by warp shuffles), RoPE (one thread a rotated pair, in double like
 * ref), SwiGLU, GeGLU, the residual add, biases and scaling (grid-stride loops), softmax (one block a
 * row). Contracts: cu.h. */
#include "kernels/cuda/common.cuh"

namespace {

constexpr int NORM_THREADS = 256;
constexpr int EW_THREADS = 256;

__global__ void __launch_bounds__(NORM_THREADS)
k_rmsnorm(float *y, const float *x, const float *w, int dim, float eps) {
    __shared__ float red[32];
    const float *xr = x + (int64_t)blockIdx.x * dim;
    float *yr = y + (int64_t)blockIdx.x * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
    ss = cu::block_sum(ss, red);
    const float scale = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * scale * w[i];
}

/* thread t rotates pair t % half of head t / half, the values i * step and i * step + off
 * of the head (2 and 1: adjacent pairs; 1 and rope_dim / 2: NeoX halves); angles as ref
 * computes them, the products unfused (_rn) so the GPU rounds as the CPU does */
__global__ void k_rope(float *x, const int32_t *pos, int64_t n_pairs, int n_head, int head_dim,
                       int rope_dim, float base, const float *freq_factors, int step, int off) {
    const int half = rope_dim / 2;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n_pairs;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int i = (int)(t % half);
        const int64_t rh = t / half; /* row * n_head + head */
        float *v = x + rh * head_dim;
        double theta = pow((double)base, -2.0 * i / rope_dim);
        if (freq_factors) theta /= freq_factors[i];
        const double ang = (double)pos[rh / n_head] * theta;
        const double c = cos(ang), s = sin(ang);
        const double x0 = v[i * step], x1 = v[i * step + off];
        v[i * step] = (float)__dsub_rn(__dmul_rn(x0, c), __dmul_rn(x1, s));
        v[i * step + off] = (float)__dadd_rn(__dmul_rn(x0, s), __dmul_rn(x1, c));
    }
}

__global__ void k_swiglu(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        y[i] = cu::silu_mul(gate[i], up[i]);
    }
}

__global__ void __launch_bounds__(NORM_THREADS) k_softmax(float *x, int n) {
    __shared__ float red[32];
    float *xr = x + (int64_t)blockIdx.x * n;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, xr[i]);
    mx = cu::block_max(mx, red, -INFINITY);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) sum += expf(xr[i] - mx);
    sum = cu::block_sum(sum, red);
    for (int i = threadIdx.x; i < n; i += blockDim.x) xr[i] = expf(xr[i] - mx) / sum;
}

__global__ void k_geglu(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = gate[i];
        y[i] = 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g))) * up[i];
    }
}

__global__ void k_add_bias(float *y, const float *bias, int64_t n, int dim) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += bias[i % dim];
}

__global__ void k_scale(float *y, float s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] *= s;
}

__global__ void k_softcap(float *y, float cap, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cap * tanhf(y[i] / cap);
}

__global__ void k_swiglu_oai(float *y, const float *gate, const float *up, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        const float g = fminf(gate[i], 7.0f), u = fminf(fmaxf(up[i], -7.0f), 7.0f);
        y[i] = g / (1.0f + expf(-1.702f * g)) * (u + 1.0f);
    }
}

__global__ void k_add(float *y, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

} /* namespace */

extern "C" void cu_rmsnorm(float *y, const float *x, const float *w, int32_t n_rows,
                           int32_t dim, float eps, cu_stream s) {
    if (n_rows <= 0 || dim <= 0) return;
    CU_LAUNCH(k_rmsnorm, n_rows, NORM_THREADS, 0, s, y, x, w, dim, eps);
}

static void rope(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head, int32_t head_dim,
                 int32_t rope_dim, float base, const float *freq_factors, int step, int off,
                 cu_stream s) {
    const int64_t n_pairs = (int64_t)n_rows * n_head * (rope_dim / 2);
    if (n_pairs <= 0) return;
    CU_LAUNCH(k_rope, cu::grid_for(n_pairs, EW_THREADS), EW_THREADS, 0, s, x, pos, n_pairs,
              n_head, head_dim, rope_dim, base, freq_factors, step, off);
}

extern "C" void cu_rope(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
                        int32_t head_dim, int32_t rope_dim, float base,
                        const float *freq_factors, cu_stream s) {
    rope(x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, 2, 1, s);
}

extern "C" void cu_rope_neox(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
                             int32_t head_dim, int32_t rope_dim, float base,
                             const float *freq_factors, cu_stream s) {
    rope(x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, 1, rope_dim / 2, s);
}

extern "C" void cu_geglu(float *y, const float *gate, const float *up, int64_t n, cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_geglu, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, gate, up, n);
}

extern "C" void cu_add_bias(float *y, const float *bias, int32_t n_rows, int32_t dim,
                            cu_stream s) {
    const int64_t n = (int64_t)n_rows * dim;
    if (n <= 0) return;
    CU_LAUNCH(k_add_bias, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, bias, n, (int)dim);
}

extern "C" void cu_scale(float *y, float f, int64_t n, cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_scale, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, f, n);
}

extern "C" void cu_softcap(float *y, float cap, int64_t n, cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_softcap, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, cap, n);
}

extern "C" void cu_swiglu_oai(float *y, const float *gate, const float *up, int64_t n,
                              cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_swiglu_oai, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, gate, up, n);
}

extern "C" void cu_swiglu(float *y, const float *gate, const float *up, int64_t n,
                          cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_swiglu, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, gate, up, n);
}

extern "C" void cu_add(float *y, const float *x, int64_t n, cu_stream s) {
    if (n <= 0) return;
    CU_LAUNCH(k_add, cu::grid_for(n, EW_THREADS), EW_THREADS, 0, s, y, x, n);
}

extern "C" void cu_softmax(float *x, int32_t n_rows, int32_t n, cu_stream s) {
    if (n_rows <= 0 || n <= 0) return;
    CU_LAUNCH(k_softmax, n_rows, NORM_THREADS, 0, s, x, n);
}
