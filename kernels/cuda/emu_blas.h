/* emu_blas.h - the cuBLAS the emulated cuda backend calls (kernels/cuda/emu.h builds):
 * cublasSgemm and cublasGemmEx with cuBLAS's column-major meaning of every argument
 * (transposes, m, n, k, lda, ldb, ldc, alpha, beta; beta 0 reads no C), their argument
 * checks (a leading dimension too small is CUBLAS_STATUS_INVALID_VALUE; GemmEx takes fp16
 * or bf16 A and B of one type into float C with CUBLAS_COMPUTE_32F, anything else is
 * CUBLAS_STATUS_NOT_SUPPORTED here), and a record of the last call that the C tests read
 * (cublas_emu_log). It sums each output in float in the few-row kernel's order (lane
 * partials of index mod 32, then the 32 partials in order; GemmEx's half operands widened
 * to float first), so the backend's products keep the bits a forest test compares. What it
 * does not run is cuBLAS itself: on a GPU the sums are cuBLAS's own order (within
 * test_cuda_backend's bound). Not here: any other cuBLAS call than the handle's, Sgemm's
 * and GemmEx's. The log's part is C; the rest C++. */
#ifndef MD_CUDA_EMU_BLAS_H
#define MD_CUDA_EMU_BLAS_H

#ifdef __cplusplus
extern "C" {
#endif

/* cudaDataType_t's and cublasComputeType_t's values for the types the emulation takes
 * (named here so that C can read the log) */
enum { CUBLAS_EMU_R_32F = 0, CUBLAS_EMU_R_16F = 2, CUBLAS_EMU_R_16BF = 14, CUBLAS_EMU_COMPUTE_32F = 68 };

/* The arguments of the last cublasSgemm or cublasGemmEx, and how many calls of either
 * there were (defined by the emulated backend, kernels/cuda/backend.cu). */
typedef struct cublas_emu_call {
    long n_calls;
    int transa, transb; /* 0: N, 1: T */
    int m, n, k, lda, ldb, ldc;
    int atype, btype, ctype; /* CUBLAS_EMU_R_*: R_32F all three for Sgemm */
    int compute;             /* GemmEx's compute type, -1 for Sgemm */
    const void *a, *b;
    float *c;
} cublas_emu_call;
extern cublas_emu_call cublas_emu_log;

#ifdef __cplusplus
}

#include <stdint.h>

extern "C" {
#include "kernels/dtype.h" /* fp16_to_f32, bf16_to_f32 */
}

typedef struct cublas_emu_handle *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_ALLOC_FAILED = 3, /* (never returned here) */
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUDA_R_32F = CUBLAS_EMU_R_32F, CUDA_R_16F = CUBLAS_EMU_R_16F, CUDA_R_16BF = CUBLAS_EMU_R_16BF } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = CUBLAS_EMU_COMPUTE_32F } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = reinterpret_cast<cublasHandle_t>(h); /* any non-null token: nothing is kept */
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
template <typename S> static inline cublasStatus_t cublasSetStream(cublasHandle_t, S) {
    return CUBLAS_STATUS_SUCCESS;
}
static inline const char *cublasGetStatusString(cublasStatus_t e) {
    return e == CUBLAS_STATUS_SUCCESS         ? "CUBLAS_STATUS_SUCCESS"
           : e == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                              : "CUBLAS_STATUS_INVALID_VALUE";
}

/* The shared part of both calls: the log, the dimension checks, and C (m, n; ldc) = alpha
 * op(A) (m, k) op(B) (k, n) + beta C, all column-major, A's and B's values as at(ptr, i)
 * widens element i. */
template <class At, class Bt>
static inline cublasStatus_t cublas_emu_gemm(cublas_emu_call call, const float *alpha, const float *beta,
                                             At at, Bt bt) {
    call.n_calls = cublas_emu_log.n_calls + 1;
    cublas_emu_log = call;
    const bool na = call.transa == 0, nb = call.transb == 0;
    const int m = call.m, n = call.n, k = call.k, lda = call.lda, ldb = call.ldb, ldc = call.ldc;
    if (m < 0 || n < 0 || k < 0 || lda < (na ? m : k) || lda < 1 || ldb < (nb ? k : n) || ldb < 1 ||
        ldc < m || ldc < 1 || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float part[32] = {0};
            for (int l = 0; l < k; l++) {
                const float x = at(na ? i + (long)l * lda : l + (long)i * lda);
                const float y = bt(nb ? l + (long)j * ldb : j + (long)l * ldb);
                part[l % 32] += x * y;
            }
            float s = 0.0f;
            for (float p : part) s += p;
            float *out = call.c + i + (long)j * ldc;
            *out = *beta == 0.0f ? *alpha * s : *alpha * s + *beta * *out;
        }
    return CUBLAS_STATUS_SUCCESS;
}

static inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *a, int lda,
                                         const float *b, int ldb, const float *beta, float *c, int ldc) {
    const cublas_emu_call call = {0, ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, lda, ldb, ldc,
                                  CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, -1, a, b, c};
    return cublas_emu_gemm(call, alpha, beta, [a](long i) { return a[i]; }, [b](long i) { return b[i]; });
}

/* A 16-bit operand's element i widened to float (fp16 or bf16 bits). */
static inline float cublas_emu_half(const void *p, cudaDataType_t t, long i) {
    const uint16_t h = static_cast<const uint16_t *>(p)[i];
    return t == CUDA_R_16F ? fp16_to_f32(h) : bf16_to_f32(h);
}

/* GemmEx: only fp16 x fp16 or bf16 x bf16 into float C with float compute (alpha and beta
 * floats), the one form the backend calls; the algorithm is not checked (cuBLAS takes any). */
static inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                          int n, int k, const void *alpha, const void *a, cudaDataType_t at,
                                          int lda, const void *b, cudaDataType_t bt, int ldb,
                                          const void *beta, void *c, cudaDataType_t ct, int ldc,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
    const cublas_emu_call call = {0, ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, lda, ldb, ldc,
                                  at, bt, ct, compute, a, b, static_cast<float *>(c)};
    if (at != bt || (at != CUDA_R_16F && at != CUDA_R_16BF) || ct != CUDA_R_32F ||
        compute != CUBLAS_COMPUTE_32F) {
        const long n_calls = cublas_emu_log.n_calls + 1;
        cublas_emu_log = call;
        cublas_emu_log.n_calls = n_calls;
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    return cublas_emu_gemm(call, static_cast<const float *>(alpha), static_cast<const float *>(beta),
                           [a, at](long i) { return cublas_emu_half(a, at, i); },
                           [b, bt](long i) { return cublas_emu_half(b, bt, i); });
}

#endif /* __cplusplus */
#endif
