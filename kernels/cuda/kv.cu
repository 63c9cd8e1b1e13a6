/* kv.cu - moving rows on the GPU: K/V rows into their cache slots and out of them (a
 * compaction moves a layer's rows through both), and a batch's rows gathered for the
 * classifier.
 * Contracts: cu.h. */
#include "kernels/cuda/common.cuh"

namespace {

constexpr int ROW_THREADS = 256;

/* block i copies src row (smap ? smap[i] : i) to dst row (dmap ? dmap[i] : i), unless the
 * destination is negative */
__global__ void __launch_bounds__(ROW_THREADS)
k_copy_rows(float *dst, const float *src, const int32_t *dmap, const int32_t *smap,
            int64_t row_len) {
    const int64_t i = blockIdx.x;
    const int64_t d = dmap ? dmap[i] : i, s = smap ? smap[i] : i;
    if (d < 0) return;
    for (int64_t c = threadIdx.x; c < row_len; c += blockDim.x)
        dst[d * row_len + c] = src[s * row_len + c];
}

/* rows in order, a barrier between them, so that a row is read before it is overwritten
 * when y is x and idx[i] >= i */
__global__ void __launch_bounds__(ROW_THREADS)
k_gather_inplace(float *y, const float *x, const int32_t *idx, int n, int width) {
    for (int i = 0; i < n; i++) {
        float v[8];
        const float *src = x + (int64_t)idx[i] * width;
        for (int c0 = 0; c0 < width; c0 += 8 * ROW_THREADS) {
            /* each thread reads its (up to 8) values of this span before any is written */
CU_UNROLL
            for (int a = 0; a < 8; a++) {
                const int c = c0 + a * ROW_THREADS + threadIdx.x;
                if (c < width) v[a] = src[c];
            }
            __syncthreads();
CU_UNROLL
            for (int a = 0; a < 8; a++) {
                const int c = c0 + a * ROW_THREADS + threadIdx.x;
                if (c < width) y[(int64_t)i * width + c] = v[a];
            }
            __syncthreads();
        }
    }
}

void copy_rows(float *dst, const float *src, const int32_t *dmap, const int32_t *smap,
               int64_t n, int64_t row_len, cu_stream s) {
    for (int64_t i0 = 0; i0 < n; i0 += 1 << 30) {
        const int64_t k = n - i0 < (1 << 30) ? n - i0 : 1 << 30;
        CU_LAUNCH(k_copy_rows, (unsigned)k, ROW_THREADS, 0, s, dst, src, dmap ? dmap + i0 : dmap,
                  smap ? smap + i0 : smap, row_len);
    }
}

__global__ void __launch_bounds__(ROW_THREADS)
k_gather_at(float *y, const float *x, const int64_t *idx, int n) {
    const int i = blockIdx.x * ROW_THREADS + threadIdx.x;
    if (i < n) y[i] = x[idx[i]];
}

} /* namespace */

extern "C" void cu_kv_store(float *cache, int64_t row_len, const int32_t *slot, const float *x,
                            int32_t n_rows, cu_stream s) {
    if (n_rows > 0 && row_len > 0) copy_rows(cache, x, slot, nullptr, n_rows, row_len, s);
}

extern "C" void cu_kv_gather(float *y, const float *cache, int64_t row_len, const int32_t *slot,
                             int32_t n_rows, cu_stream s) {
    if (n_rows > 0 && row_len > 0) copy_rows(y, cache, nullptr, slot, n_rows, row_len, s);
}

extern "C" void cu_gather_at(float *y, const float *x, const int64_t *idx, int32_t n, cu_stream s) {
    if (n > 0)
        CU_LAUNCH(k_gather_at, (unsigned)((n + ROW_THREADS - 1) / ROW_THREADS), ROW_THREADS, 0, s, y, x,
                  idx, (int)n);
}

extern "C" void cu_gather_rows(float *y, const float *x, const int32_t *idx, int32_t n,
                               int32_t width, cu_stream s) {
    if (n <= 0 || width <= 0) return;
    if (y != x) copy_rows(y, x, nullptr, idx, n, width, s);
    else CU_LAUNCH(k_gather_inplace, 1, ROW_THREADS, 0, s, y, x, idx, (int)n, (int)width);
}
