/* products.cu - the cuda backend's products (kern_ops matmul, matmul_n, matmul_swiglu;
 * the rest of the backend is backend.cu). Weights of a block type (Q4_0 .. Q6_K, the
 * IQ4 types, MXFP4) go through cu_matmul_q8 at any batch size, the activations quantised
 * to int8 on the device first (as the cpu backend does), so a row's result is the same
 * bits in any batch. F32, F16 and BF16: up to CU_FEW_ROWS activation rows go through
 * cu_matmul_few (the weights read as stored); more through product(): SGEMM for F32,
 * GemmEx on tensor cores for F16 and BF16 against activations rounded to the weights'
 * type, as cu_matmul_few rounds them. Under the emulator (emu.h, no cuBLAS) product()
 * multiplies on the host in the order of the few-row kernel, so a row's result is the
 * same bits in any batch there; on a GPU the two differ only in the order of their float
 * sums. matmul_n's products of one type and input go as one (fused_n): one launch of the
 * few-row kernels, or x rounded once for cuBLAS. The down projection of a block type
 * forms SwiGLU's values as it quantises them (matmul_swiglu). Every kernel goes through
 * LAUNCH (recorded for the step's graph, graphs.h); cuBLAS, which is not recorded, runs in
 * an eager scope, so a many-row product ends the recorded segment. */
#include <string.h>

#include "kernels/cuda/backend.cuh"

namespace {

using namespace cudab;

/* x (n_rows, n_in) as product() multiplies it against weights of type: x itself for
 * F32, else its copy rounded to the weights' 16-bit type (cu_to_half queued into S_HALF:
 * fp16 keeps 11 significant bits of an activation, bf16, whose weights may need its
 * range, 8); NULL (recorded) without memory for the copy. */
const void *product_acts(kern_backend *b, uint32_t type, const float *x, int32_t n_rows, int64_t n_in) {
    if (type == DT_F32) return x;
    const size_t n = (size_t)n_rows * (size_t)n_in;
    uint16_t *xh = static_cast<uint16_t *>(scratch(b, "matmul", S_HALF, sizeof(uint16_t) * n));
    if (xh) LAUNCH(b, cu_to_half, xh, x, (int64_t)n, type);
    return xh;
}

/* y (n_rows, n_out) = xa (n_rows, n_in, from product_acts) times W (n_out, n_in)
 * transposed, W read in place: F32 by cuBLAS SGEMM (float32 throughout, no TF32); F16 and
 * BF16 by cublasGemmEx on tensor cores, float32 sums and output. Under the emulator the
 * same calls to emu_blas.h, which computes what cuBLAS would from the arguments in
 * cu_matmul_few's order, so a row's result there is the same bits in any batch. */
bool product(kern_backend *b, float *y, const kern_mat *w, const void *xa, int32_t n_rows) {
    eager no_graph(b, "matmul"); /* (cuBLAS is not recorded) */
    const float one = 1.0f, zero = 0.0f;
    const int m = (int)w->n_out, k = (int)w->n_in;
    cublasHandle_t h = blas_of(b);
    if (w->type == DT_F32)
        return BLAS_OK(b, "matmul",
                       cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n_rows, k, &one,
                                   static_cast<const float *>(w->data), k,
                                   static_cast<const float *>(xa), k, &zero, y, m));
    const cudaDataType_t t = w->type == DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
    return BLAS_OK(b, "matmul",
                   cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n_rows, k, &one, w->data, t, k, xa,
                                t, k, &zero, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Activation rows as cu_quantize_q8 leaves them (device scratch S_Q8). */
struct q8_acts {
    const int8_t *q;
    const float *d;
    const int32_t *sum;
};

/* Whether weights of type go through cu_matmul_q8 (the block types). */
bool takes_q8(uint32_t type) {
    return cu_matmul_q8(nullptr, type, nullptr, 0, 0, nullptr, nullptr, nullptr, 0, nullptr);
}

/* x (n_rows, n_in) quantised into S_Q8, or SwiGLU's values of gate x and up when up is
 * given; false (recorded) without memory for it. */
bool quantize_acts(kern_backend *b, q8_acts *a, const float *x, int32_t n_rows, int64_t n_in,
                   const float *up = nullptr) {
    const size_t n = (size_t)n_rows * (size_t)n_in; /* (a multiple of 32) */
    char *p = static_cast<char *>(scratch(b, "matmul", S_Q8, n + n / 8 + n / 4));
    if (!p) return false;
    *a = q8_acts{reinterpret_cast<int8_t *>(p), reinterpret_cast<float *>(p + n),
                 reinterpret_cast<int32_t *>(p + n + n / 8)};
    if (up)
        LAUNCH(b, cu_quantize_q8_swiglu, reinterpret_cast<int8_t *>(p), reinterpret_cast<float *>(p + n),
               reinterpret_cast<int32_t *>(p + n + n / 8), x, up, n_rows, n_in);
    else
        LAUNCH(b, cu_quantize_q8, reinterpret_cast<int8_t *>(p), reinterpret_cast<float *>(p + n),
               reinterpret_cast<int32_t *>(p + n + n / 8), x, n_rows, n_in);
    return true;
}

/* y = x W^T: block types by cu_matmul_q8 at every batch size (so a row's bits never
 * depend on its batch), against xq when given (x already quantised, as matmul_n does
 * once for its products), else quantised here; the others by the few-row kernel or
 * product(). */
void matmul_one(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows,
                const q8_acts *xq) {
    if (n_rows <= 0 || w->n_out <= 0) return;
    const size_t y_bytes = sizeof(float) * (size_t)n_rows * (size_t)w->n_out;
    float *yd = on_device(b, y) ? y : static_cast<float *>(scratch(b, "matmul", S_OUT, y_bytes));
    if (!yd) return;
    if (!cu::has_type(w->type)) {
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "matmul", "weight type %s has no CUDA kernel",
                          dtype_name(w->type));
        return;
    }
    q8_acts own;
    if (takes_q8(w->type)) {
        if (!xq && !quantize_acts(b, &own, x, n_rows, w->n_in)) return;
        const q8_acts &a = xq ? *xq : own;
        LAUNCH(b, cu_matmul_q8, yd, w->type, w->data, w->n_out, w->n_in, a.q, a.d, a.sum, n_rows);
    } else if (n_rows <= CU_FEW_ROWS) {
        LAUNCH(b, cu_matmul_few, yd, w->type, w->data, w->n_out, w->n_in, x, n_rows);
    } else {
        const void *xa = product_acts(b, w->type, x, n_rows, w->n_in);
        if (!xa || !product(b, yd, w, xa, n_rows)) return; /* (yd holds an older product's rows) */
    }
    if (LAUNCHED(b, "matmul") && yd != y)
        CU_OK(b, "matmul", d2h(b, y, yd, y_bytes));
}

/* cu_matmul_q8_n (a given) or cu_matmul_few_n (x given), its arrays copied for the
 * step's graph, which signs them all. */
void launch_n(kern_backend *b, int32_t n, float *const *y, uint32_t type, const void *const *w,
              const int64_t *n_out, int64_t n_in, const q8_acts *a, const float *x, int32_t n_rows) {
    struct args {
        float *y[CU_MQ_N];
        const void *w[CU_MQ_N];
        int64_t n_out[CU_MQ_N], n_in;
        q8_acts a;
        const float *x;
        int32_t n, n_rows;
        uint32_t type;
        bool q8;
        cudaStream_t s;
    } p;
    memset(&p, 0, sizeof p); /* (the padding too: the bytes are the signature) */
    for (int32_t i = 0; i < n; i++) p.y[i] = y[i], p.w[i] = w[i], p.n_out[i] = n_out[i];
    p.n_in = n_in, p.x = x, p.n = n, p.n_rows = n_rows, p.type = type, p.s = stream_of(b);
    if (a) p.a = *a, p.q8 = true;
    cu_graphs::launch_fn(rec_of(b), &p, sizeof p, [p] {
        if (p.q8)
            cu_matmul_q8_n(p.n, p.y, p.type, p.w, p.n_out, p.n_in, p.a.q, p.a.d, p.a.sum, p.n_rows, p.s);
        else
            cu_matmul_few_n(p.n, p.y, p.type, p.w, p.n_out, p.n_in, p.x, p.n_rows, p.s);
    });
}

/* Whether matmul_n's products go as one: at most CU_MQ_N of one type with a device
 * kernel, every y device memory. */
bool fusable(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w) {
    bool ok = n <= CU_MQ_N && cu::has_type(w[0]->type);
    for (int32_t i = 0; ok && i < n; i++) ok = w[i]->type == w[0]->type && on_device(b, y[i]);
    return ok;
}

/* matmul_n's products as one: the block types by one cu_matmul_q8_n launch on a (x
 * quantised once), the float types by one cu_matmul_few_n launch for few rows, else x
 * rounded once for every cuBLAS call; each output the bits of its own matmul. */
void fused_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
             const float *x, int32_t n_rows, const q8_acts *a) {
    const void *wd[CU_MQ_N];
    int64_t n_out[CU_MQ_N];
    for (int32_t i = 0; i < n; i++) wd[i] = w[i]->data, n_out[i] = w[i]->n_out;
    const uint32_t t = w[0]->type;
    const int64_t n_in = w[0]->n_in;
    if (a || n_rows <= CU_FEW_ROWS) {
        launch_n(b, n, y, t, wd, n_out, n_in, a, x, n_rows);
    } else {
        const void *xa = product_acts(b, t, x, n_rows, n_in);
        for (int32_t i = 0; xa && i < n; i++)
            if (w[i]->n_out > 0 && !product(b, y[i], w[i], xa, n_rows)) break;
    }
    LAUNCHED(b, "matmul");
}

} /* namespace */

namespace cudab {

void cuda_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows) {
    matmul_one(b, y, w, x, n_rows, nullptr);
}

/* The down projection: for the block types SwiGLU's values are formed as the activations
 * are quantised (no swiglu launch, no pass writing them back); the others swiglu into
 * gate, then matmul. */
void cuda_matmul_swiglu(kern_backend *b, float *y, const kern_mat *w, float *gate, const float *up,
                        int32_t n_rows) {
    if (n_rows <= 0) return;
    if (!takes_q8(w->type)) {
        LAUNCH(b, cu_swiglu, gate, gate, up, (int64_t)n_rows * w->n_in);
        if (LAUNCHED(b, "matmul_swiglu")) matmul_one(b, y, w, gate, n_rows, nullptr);
        return;
    }
    q8_acts a;
    if (quantize_acts(b, &a, gate, n_rows, w->n_in, up)) matmul_one(b, y, w, nullptr, n_rows, &a);
}

/* Products of one x (Q, K and V; gate and up): x quantised once when every W takes it,
 * one launch (fused_n) when they share a type too and write device memory. */
void cuda_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                   const float *x, int32_t n_rows) {
    bool shared = n > 1 && n_rows > 0, q8 = shared;
    for (int32_t i = 0; shared && i < n; i++) shared = w[i]->n_in == w[0]->n_in;
    for (int32_t i = 0; q8 && i < n; i++) q8 = shared && takes_q8(w[i]->type);
    q8_acts a;
    if (q8 && !quantize_acts(b, &a, x, n_rows, w[0]->n_in)) return;
    if (shared && fusable(b, n, y, w)) return fused_n(b, n, y, w, x, n_rows, q8 ? &a : nullptr);
    for (int32_t i = 0; i < n; i++) matmul_one(b, y[i], w[i], x, n_rows, q8 ? &a : nullptr);
}

} /* namespace cudab */
