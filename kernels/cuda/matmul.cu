/* matmul.cu - the few-row product on the GPU: y = x W^T for 1 .. CU_FEW_ROWS activation
 * rows, reading W's GGUF blocks as stored. One warp an output row; each lane walks the row
 * at its index mod 32, dequantising each weight once for every activation row of its
 * group (MMV_R at a time), and the lanes' partials meet in shared memory, summed in lane
 * order by one lane per activation row (one warp barrier instead of a shuffle tree per
 * row). One launch may take several matrices over the same activations (blockIdx.z
 * picks one: Q, K and V; gate and up). F16 and BF16 weights meet activations rounded to their own type, as the many-row
 * product's tensor cores take them (cu_to_half), so that a row's bits do not depend on
 * which of the two its batch took. Contract: cu.h. */
#include "kernels/cuda/dequant.cuh"

namespace {

constexpr int MMV_WARPS = 8; /* output rows per block */
constexpr int MMV_R = 8;     /* activation rows per block (grid.y groups of them) */

/* x as the product multiplies it against TYPE's weights */
template <int TYPE> __device__ __forceinline__ float act(float x) {
    if constexpr (TYPE == DT_F16) return cu::h2f(cu::f2h_sat(x));
    else if constexpr (TYPE == DT_BF16) return cu::bf2f(cu::f2bf(x));
    else return x;
}

template <int TYPE>
__global__ void __launch_bounds__(MMV_WARPS * 32)
k_matmul_few(cu::mat_set m, int64_t n_in, size_t row_bytes, const float *x, int n_rows) {
    float *y = m.y[blockIdx.z];
    const uint8_t *w = m.w[blockIdx.z];
    const int64_t n_out = m.n_out[blockIdx.z];
    __shared__ float part[MMV_WARPS][MMV_R][33]; /* (33: lanes on distinct banks) */
    const int lane = threadIdx.x % 32, wi = threadIdx.x / 32;
    const int64_t o = (int64_t)blockIdx.x * MMV_WARPS + wi;
    const int r0 = blockIdx.y * MMV_R;
    const int nr = n_rows - r0 < MMV_R ? n_rows - r0 : MMV_R;
    float acc[MMV_R];
CU_UNROLL
    for (int r = 0; r < MMV_R; r++) acc[r] = 0.0f;
    if (o < n_out) {
        const uint8_t *row = w + (size_t)o * row_bytes;
        const float *xr = x + (int64_t)r0 * n_in;
        for (int64_t i = lane; i < n_in; i += 32) {
            const float wv = cu::dq<TYPE>(row, i);
CU_UNROLL
            for (int r = 0; r < MMV_R; r++)
                if (r < nr) acc[r] += wv * act<TYPE>(xr[r * n_in + i]);
        }
    }
CU_UNROLL
    for (int r = 0; r < MMV_R; r++) part[wi][r][lane] = acc[r];
    __syncwarp();
    if (o < n_out && lane < nr) {
        float s = 0.0f;
        for (int l = 0; l < 32; l++) s += part[wi][lane][l];
        y[(int64_t)(r0 + lane) * n_out + o] = s;
    }
}

template <int TYPE> struct matmul_few {
    static void run(const cu::mat_set &m, int64_t n_in, const float *x, int32_t n_rows,
                    cu_stream s) {
        const dim3 grid((unsigned)((m.most + MMV_WARPS - 1) / MMV_WARPS),
                        (unsigned)((n_rows + MMV_R - 1) / MMV_R), (unsigned)m.n);
        CU_LAUNCH(k_matmul_few<TYPE>, grid, MMV_WARPS * 32, 0, s, m, n_in,
                  dtype_row_bytes(TYPE, n_in), x, (int)n_rows);
    }
};

template <int TYPE> __global__ void k_to_half(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = TYPE == DT_F16 ? cu::f2h_sat(x[i]) : cu::f2bf(x[i]);
}

} /* namespace */

extern "C" bool cu_matmul_few(float *y, uint32_t type, const void *w, int64_t n_out,
                              int64_t n_in, const float *x, int32_t n_rows, cu_stream s) {
    return cu_matmul_few_n(1, &y, type, &w, &n_out, n_in, x, n_rows, s);
}

extern "C" bool cu_matmul_few_n(int32_t n, float *const *y, uint32_t type, const void *const *w,
                                const int64_t *n_out, int64_t n_in, const float *x,
                                int32_t n_rows, cu_stream s) {
    const cu::mat_set m = cu::make_set(n, y, w, n_out);
    if (m.n == 0 || n_in <= 0 || n_rows <= 0) return cu::has_type(type);
    return cu::with_type<matmul_few>(type, m, n_in, x, n_rows, s);
}

extern "C" bool cu_to_half(uint16_t *y, const float *x, int64_t n, uint32_t type, cu_stream s) {
    if (type != DT_F16 && type != DT_BF16) return false;
    if (n <= 0) return true;
    if (type == DT_F16)
        CU_LAUNCH(k_to_half<DT_F16>, cu::grid_for(n, 256), 256, 0, s, y, x, n);
    else
        CU_LAUNCH(k_to_half<DT_BF16>, cu::grid_for(n, 256), 256, 0, s, y, x, n);
    return true;
}
