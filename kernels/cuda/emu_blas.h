/* emu_blas.h - the cuBLAS the emulated cuda backend calls (kernels/cuda/emu.h builds):
 * cublasSgemm with cuBLAS's column-major meaning of every argument (transposes, m, n, k,
 * lda, ldb, ldc, alpha, beta; beta 0 reads no C), its argument checks (a leading
 * dimension too small is CUBLAS_STATUS_INVALID_VALUE), and a record of the last call
 * that the C tests read (cublas_emu_log). It sums each output in the few-row kernel's
 * order (lane partials of index mod 32, then the 32 partials in order), so the backend's
 * products keep the bits a forest test compares. What it does not run is cuBLAS itself:
 * on a GPU the sums are cuBLAS's own order (within test_cuda_backend's bound). Not here:
 * any other cuBLAS call than the handle's and Sgemm's. The log's part is C; the rest C++. */
#ifndef MD_CUDA_EMU_BLAS_H
#define MD_CUDA_EMU_BLAS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The arguments of the last cublasSgemm, and how many calls there were (defined by the
 * emulated backend, kernels/cuda/backend.cu). */
typedef struct cublas_emu_call {
    long n_calls;
    int transa, transb; /* 0: N, 1: T */
    int m, n, k, lda, ldb, ldc;
    const float *a, *b;
    float *c;
} cublas_emu_call;
extern cublas_emu_call cublas_emu_log;

#ifdef __cplusplus
}

typedef struct cublas_emu_handle *cublasHandle_t;
typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_ALLOC_FAILED = 3, /* (never returned here) */
    CUBLAS_STATUS_INVALID_VALUE = 7
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;

static inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = reinterpret_cast<cublasHandle_t>(h); /* any non-null token: nothing is kept */
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
template <typename S> static inline cublasStatus_t cublasSetStream(cublasHandle_t, S) {
    return CUBLAS_STATUS_SUCCESS;
}
static inline const char *cublasGetStatusString(cublasStatus_t e) {
    return e == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
}

/* C (m, n; ldc) = alpha op(A) (m, k) op(B) (k, n) + beta C, all column-major. */
static inline cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                         int n, int k, const float *alpha, const float *a, int lda,
                                         const float *b, int ldb, const float *beta, float *c, int ldc) {
    cublas_emu_log = {cublas_emu_log.n_calls + 1, ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k, lda, ldb,
                      ldc, a, b, c};
    if (m < 0 || n < 0 || k < 0 || lda < (ta == CUBLAS_OP_N ? m : k) || lda < 1 ||
        ldb < (tb == CUBLAS_OP_N ? k : n) || ldb < 1 || ldc < m || ldc < 1)
        return CUBLAS_STATUS_INVALID_VALUE;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float part[32] = {0};
            for (int l = 0; l < k; l++) {
                const float x = ta == CUBLAS_OP_N ? a[i + (long)l * lda] : a[l + (long)i * lda];
                const float y = tb == CUBLAS_OP_N ? b[l + (long)j * ldb] : b[j + (long)l * ldb];
                part[l % 32] += x * y;
            }
            float s = 0.0f;
            for (float p : part) s += p;
            float *out = c + i + (long)j * ldc;
            *out = *beta == 0.0f ? *alpha * s : *alpha * s + *beta * *out;
        }
    return CUBLAS_STATUS_SUCCESS;
}

#endif /* __cplusplus */
#endif
