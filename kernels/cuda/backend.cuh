/* backend.cuh - what the cuda backend's two files share (backend.cu: state, memory, the
 * ops other than products; products.cu: the products): the scratch buffers by use, the
 * instance's stream and step recorder (LAUNCH, the eager scope), the error recorders and
 * the memory helpers backend.cu (state.cuh) defines, and the product ops products.cu
 * defines for backend.cu's op table. Internal to the backend. */
#ifndef MD_CUDA_BACKEND_CUH
#define MD_CUDA_BACKEND_CUH

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/graphs.h"

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

enum { S_HALF, S_OUT, S_IN, S_TOPK, S_Q8, S_ATT, S_GATHER, N_SCRATCH }; /* device scratch buffers, by use */

/* b's own stream, and its step recorder (graphs.h). */
cudaStream_t stream_of(kern_backend *b);
cu_graphs::recorder *rec_of(kern_backend *b);

/* A kernel launch of this instance (fn's arguments but its stream): queued for the
 * step's graph while one is recorded, else issued on b's stream. */
#define LAUNCH(b, fn, ...) cu_graphs::launch(cudab::rec_of(b), fn, __VA_ARGS__)

/* While one lives, this instance's work is issued as it comes: what a step recorded so
 * far is run first (as a graph unless it is about to free memory: frees drops every
 * graph, which may point into it), and recording resumes after. Every op that acts on
 * the host mid-step (allocates, frees, copies to the host, calls cuBLAS, decides per
 * row) opens one. */
struct eager {
    kern_backend *b;
    bool was;
    eager(kern_backend *b_, const char *op, bool frees = false);
    ~eager();
};

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
