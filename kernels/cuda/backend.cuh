/* backend.cuh - what the cuda backend's two files share (backend.cu: state, memory, the
 * ops other than products; products.cu: the products): the scratch buffers by use, the
 * stream, the error recorders and the memory helpers backend.cu defines, and the product
 * ops products.cu defines for backend.cu's op table. Internal to the backend. */
#ifndef MD_CUDA_BACKEND_CUH
#define MD_CUDA_BACKEND_CUH

#include "kernels/cuda/dequant.cuh"

#define _Noreturn [[noreturn]] /* base/status.h is C11 */
extern "C" {
#include "kernels/kern_impl.h"
#include "kernels/vec.h"
}

#if CU_EMU
#include "kernels/cuda/emu_blas.h" /* cuBLAS's meaning of the arguments, recorded */
#else
#include <cublas_v2.h>
#endif

#pragma GCC visibility push(hidden) /* (the plugin exports kern_cuda_ops and cu_*, not these) */
namespace cudab {

enum { S_HALF, S_OUT, S_IN, S_TOPK, S_Q8, S_ATT, N_SCRATCH }; /* device scratch buffers, by use */

const cu_stream STREAM = nullptr; /* the legacy default stream: every instance's work in order */

/* e recorded for op naming the call, its file and line, unless a success (then true). */
bool cu_ok(kern_backend *b, const char *op, cudaError_t e, const char *call, const char *file,
           int line);
bool blas_ok(kern_backend *b, const char *op, cublasStatus_t e, const char *call,
             const char *file, int line);
#define CU_OK(b, op, call) cudab::cu_ok((b), (op), (call), #call, __FILE__, __LINE__)
#define BLAS_OK(b, op, call) cudab::blas_ok((b), (op), (call), #call, __FILE__, __LINE__)
/* After an op's launches: a launch error (bad configuration, no kernel image for this
 * device) recorded naming the op. */
#define LAUNCHED(b, op) CU_OK(b, op, cudaGetLastError())

/* b's cuBLAS handle. */
cublasHandle_t blas_of(kern_backend *b);
/* Device scratch buffer `which` (S_*) of at least bytes, grown (its contents lost) when
 * smaller, or NULL with ST_ERR_NOMEM recorded for op. */
void *scratch(kern_backend *b, const char *op, int which, size_t bytes);
/* Whether p is device memory: one of b's buffers, else as the driver says. */
bool on_device(kern_backend *b, const void *p);
/* bytes from the device to the host, synchronous, counted (cu_d2h_bytes). */
cudaError_t d2h(kern_backend *b, void *dst, const void *src, size_t bytes);

/* kern_ops' products (products.cu) */
void cuda_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows);
void cuda_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                   const float *x, int32_t n_rows);
void cuda_matmul_swiglu(kern_backend *b, float *y, const kern_mat *w, float *gate, const float *up,
                        int32_t n_rows);

} /* namespace cudab */
#pragma GCC visibility pop

#endif
