/* embed.cu - embedding rows on the GPU (and whole matrices dequantised for the many-row product): the token rows of a weight matrix dequantised to
 * float, one thread a value, one grid row a token (consecutive threads read consecutive
 * bytes of a row). Contract: cu.h. */
#include "kernels/cuda/dequant.cuh"

namespace {

constexpr int ROW_THREADS = 256;

template <int TYPE>
__global__ void __launch_bounds__(ROW_THREADS)
k_get_rows(float *out, const uint8_t *w, int64_t n_in, size_t row_bytes, const int32_t *rows,
           int64_t row0) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_in) return;
    const int64_t r = rows ? rows[blockIdx.y] : row0 + blockIdx.y;
    const uint8_t *row = w + (size_t)r * row_bytes;
    out[blockIdx.y * n_in + i] = cu::dq<TYPE>(row, i);
}

template <int TYPE> struct get_rows {
    static void run(float *out, const void *w, int64_t n_in, const int32_t *rows, int64_t row0,
                    int32_t n_rows, cu_stream s) {
        const unsigned bx = (unsigned)((n_in + ROW_THREADS - 1) / ROW_THREADS);
        for (int32_t r0 = 0; r0 < n_rows; r0 += 65535) { /* CUDA's most blocks in y */
            const int32_t n = n_rows - r0 < 65535 ? n_rows - r0 : 65535;
            CU_LAUNCH(k_get_rows<TYPE>, dim3(bx, (unsigned)n), ROW_THREADS, 0, s,
                      out + (int64_t)r0 * n_in, static_cast<const uint8_t *>(w), n_in,
                      dtype_row_bytes(TYPE, n_in), rows ? rows + r0 : nullptr, row0 + r0);
        }
    }
};

} /* namespace */

extern "C" bool cu_get_rows(float *out, uint32_t type, const void *w, int64_t n_in,
                            const int32_t *rows, int32_t n_rows, cu_stream s) {
    if (n_in <= 0) n_rows = 0; /* nothing to launch, but the type still answers */
    return cu::with_type<get_rows>(type, out, w, n_in, rows, (int64_t)0, n_rows, s);
}

extern "C" bool cu_dequant_rows(float *out, uint32_t type, const void *w, int64_t n_in,
                                int64_t row0, int32_t n_rows, cu_stream s) {
    if (n_in <= 0) n_rows = 0;
    return cu::with_type<get_rows>(type, out, w, n_in, (const int32_t *)nullptr, row0, n_rows, s);
}
