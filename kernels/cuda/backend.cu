/* backend.cu - kern_cuda_ops: the CUDA backend, every op of kern.h on one device. Buffers
 * and prepared weights are device memory (cudaMalloc; the GGUF blocks uploaded as stored),
 * the ops are the kernels of cu.h queued on the instance's own non-blocking stream (what
 * one instance hands another, the weight preparer's matrices, is complete when
 * mat_prepare returns), a forward pass recorded and run as CUDA graphs (graphs.h;
 * MD_CUDA_GRAPHS=0: launched one by one), and every CUDA and cuBLAS status is checked:
 * the first failure is recorded naming the op, the call, its file and line, and sync
 * returns it.
 *
 * The products (matmul, matmul_n, matmul_swiglu) are products.cu's; backend.cuh declares
 * what the two files share, state.cuh the instance's state and its memory helpers. */
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <numeric>
#include <vector>

#include "kernels/cuda/backend.cuh"

#if CU_EMU
cublas_emu_call cublas_emu_log;
#endif

#pragma GCC visibility push(hidden)
#include "kernels/cuda/state.cuh"

namespace cudab {

/* ---- state, memory ---- */

/* The ops until the next sync are one step (kern_ops.step_begin): recorded for a graph. */
void cuda_step_begin(kern_backend *b) {
    cuda_state *s = state_of(b);
    if (s->rec.on) CU_OK(b, "step_begin", cu_graphs::end(&s->rec, true, &s->h2d_bytes));
    cu_graphs::begin(&s->rec);
}

st_code cuda_init(kern_backend *b, int32_t *n_threads, void **state, st_err *err) {
    (void)b;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n == 0) e = cudaErrorInvalidValue;
    if (e == cudaSuccess) e = cudaSetDevice(0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return st_set(err, ST_ERR_BACKEND, "no usable CUDA device (%s): use --backend cpu",
                      n == 0 && e == cudaErrorInvalidValue ? "none found" : cudaGetErrorString(e));
    }
    cuda_state *s = new (std::nothrow) cuda_state();
    if (!s) return st_set(err, ST_ERR_NOMEM, "out of memory creating the cuda backend");
    const cublasStatus_t be = cublasCreate(&s->blas);
    if (be != CUBLAS_STATUS_SUCCESS) {
        delete s;
        return st_set(err, ST_ERR_BACKEND, "cublasCreate failed: %s (use --backend cpu)",
                      cublasGetStatusString(be));
    }
    /* a stream of its own (graphs cannot capture the legacy one); off with MD_CUDA_GRAPHS=0 */
    const char *g = getenv("MD_CUDA_GRAPHS");
    s->rec.enabled = !g || strcmp(g, "0") != 0;
    if (cudaStreamCreateWithFlags(&s->rec.stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        cublasDestroy(s->blas);
        delete s;
        return st_set(err, ST_ERR_BACKEND, "cudaStreamCreateWithFlags failed (use --backend cpu)");
    }
    cublasSetStream(s->blas, s->rec.stream);
    *n_threads = 1; /* the host thread only queues work */
    *state = s;
    return ST_OK;
}

void cuda_free(void *state) {
    cuda_state *s = static_cast<cuda_state *>(state);
    if (!s) return;
    cudaDeviceSynchronize();
    cu_graphs::free_recorder(&s->rec);
    cudaStreamDestroy(s->rec.stream);
    for (dev_buf &d : s->scratch) cudaFree(d.p);
    for (small_copy &c : s->small) cudaFree(c.dev.p);
    cudaFreeHost(s->pinned.p);
    cublasDestroy(s->blas);
    delete s;
}

/* Ends a step (step_begin): what it recorded runs as a graph. */
st_code cuda_sync(kern_backend *b) {
    cuda_state *s = state_of(b);
    s->rec.in_step = false;
    if (s->rec.on && !CU_OK(b, "sync", cu_graphs::end(&s->rec, true, &s->h2d_bytes))) return ST_ERR_BACKEND;
    if (!CU_OK(b, "sync", cudaStreamSynchronize(s->rec.stream))) return ST_ERR_BACKEND;
    return CU_OK(b, "sync", cudaGetLastError()) ? ST_OK : ST_ERR_BACKEND;
}

void *cuda_buf_alloc(kern_backend *b, size_t bytes) {
    void *p = dev_alloc(b, "buf_alloc", "a buffer", bytes);
    if (!p) return nullptr;
    if (!CU_OK(b, "buf_alloc", cudaMemsetAsync(p, 0, bytes, stream_of(b)))) {
        cudaFree(p);
        return nullptr;
    }
    state_of(b)->own.emplace_back((uintptr_t)p, (uintptr_t)p + bytes);
    return p;
}

void cuda_buf_free(kern_backend *b, void *buf) {
    if (!buf) return;
    eager no_graph(b, "buf_free", true);
    auto &own = state_of(b)->own;
    own.erase(std::remove_if(own.begin(), own.end(),
                             [buf](const std::pair<uintptr_t, uintptr_t> &r) {
                                 return r.first == (uintptr_t)buf;
                             }),
              own.end());
    CU_OK(b, "buf_free", cudaFree(buf));
}

void cuda_upload(kern_backend *b, void *dst, const void *src, size_t bytes) {
    eager no_graph(b, "upload");
    if (bytes && CU_OK(b, "upload", h2d(b, dst, src, bytes)))
        CU_OK(b, "upload", cudaStreamSynchronize(stream_of(b)));
}

/* Page-locked host memory, so that downloads into it run at the link's full speed. */
void *cuda_host_alloc(kern_backend *b, size_t bytes) {
    void *p = nullptr;
    eager no_graph(b, "host_alloc");
    const cudaError_t e = kern_backend_alloc_allowed(b, bytes) ? cudaMallocHost(&p, bytes ? bytes : 1)
                                                               : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) return p;
    cudaGetLastError();
    kern_backend_fail(b, ST_ERR_NOMEM, "host_alloc", "out of memory for %zu bytes of pinned host "
                      "memory (%s)", bytes, cudaGetErrorString(e));
    return nullptr;
}

void cuda_host_free(kern_backend *b, void *p) {
    eager no_graph(b, "host_free");
    if (p) CU_OK(b, "host_free", cudaFreeHost(p));
}

void cuda_download(kern_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes) CU_OK(b, "download", d2h(b, dst, src, bytes));
}

/* the offsets sent up and the floats gathered into one scratch, then one copy back (the
 * offsets change every call: not for to_device's cache of a batch's arrays) */
void cuda_download_at(kern_backend *b, float *dst, const float *src, const int64_t *idx, int32_t n) {
    if (n <= 0) return;
    eager no_graph(b, "download_at");
    const size_t bytes = sizeof(float) * (size_t)n, ib = sizeof(int64_t) * (size_t)n;
    char *d = static_cast<char *>(scratch(b, "download_at", S_GATHER, ib + bytes));
    if (!d || !CU_OK(b, "download_at", h2d(b, d, idx, ib))) return;
    float *y = reinterpret_cast<float *>(d + ib);
    cu_gather_at(y, src, reinterpret_cast<const int64_t *>(d), n, stream_of(b));
    if (!LAUNCHED(b, "download_at")) return;
    const void *h = d2h_pinned(b, "download_at", y, bytes);
    if (h) memcpy(dst, h, bytes);
}

st_code cuda_mat_prepare(kern_backend *b, kern_mat *out, const kern_mat *stored, uint32_t flags,
                         size_t *bytes) {
    (void)flags; /* every use reads the stored blocks */
    if (bytes) *bytes = 0;
    *out = kern_mat{};
    if (!cu::has_type(stored->type)) {
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "mat_prepare",
                          "weight type %s has no CUDA kernel", dtype_name(stored->type));
        return ST_ERR_UNSUPPORTED;
    }
    const size_t n = dtype_row_bytes(stored->type, stored->n_in) * (size_t)stored->n_out;
    void *p = dev_alloc(b, "mat_prepare", "a weight matrix", n);
    if (!p) return ST_ERR_NOMEM;
    if (!CU_OK(b, "mat_prepare", h2d(b, p, stored->data, n)) ||
        !CU_OK(b, "mat_prepare", cudaStreamSynchronize(stream_of(b)))) {
        cudaFree(p);
        return ST_ERR_BACKEND;
    }
    *out = *stored;
    out->data = p;
    out->packed = nullptr;
    if (bytes) *bytes = n;
    return ST_OK;
}

void cuda_mat_release(kern_backend *b, kern_mat *w) {
    eager no_graph(b, "mat_release", true);
    if (w->data) CU_OK(b, "mat_release", cudaFree(const_cast<void *>(w->data)));
    *w = kern_mat{};
}

void cuda_kv_store(kern_backend *b, float *cache, int64_t row_len, const int32_t *slot,
                   const float *x, int32_t n_rows) {
    if (n_rows <= 0) return;
    const int32_t *ds = static_cast<const int32_t *>(
        to_device(b, "kv_store", slot, sizeof(int32_t) * (size_t)n_rows));
    if (!ds) return;
    LAUNCH(b, cu_kv_store, cache, row_len, ds, x, n_rows);
    LAUNCHED(b, "kv_store");
}

void cuda_kv_permute(kern_backend *b, float *cache, int64_t n_blocks, int32_t n_slots,
                     int64_t row_len, const int32_t *dst_of_src) {
    eager no_graph(b, "kv_permute");
    std::vector<int32_t> src, dst; /* the rows that move: from slot src[i] to dst[i] */
    for (int32_t s = 0; s < n_slots; s++)
        if (kern_kv_moves(dst_of_src, s)) src.push_back(s), dst.push_back(dst_of_src[s]);
    const int32_t m = (int32_t)src.size();
    if (m == 0 || row_len <= 0 || n_blocks <= 0) return;
    const size_t block = (size_t)n_slots * (size_t)row_len, idx_bytes = sizeof(int32_t) * (size_t)m;
    float *tmp = static_cast<float *>(dev_alloc(b, "kv_permute", "a copy of the rows that move",
                                                (size_t)m * (size_t)row_len * sizeof(float)));
    const int32_t *ds = tmp ? static_cast<const int32_t *>(to_device(b, "kv_permute", src.data(), idx_bytes))
                            : nullptr;
    const int32_t *dd = ds ? static_cast<const int32_t *>(to_device(b, "kv_permute", dst.data(), idx_bytes))
                           : nullptr;
    /* (all of a block's moving rows are read before any is written: a slot may be both) */
    for (int64_t l = 0; dd && l < n_blocks; l++) {
        float *c = cache + (size_t)l * block;
        cu_kv_gather(tmp, c, row_len, ds, m, stream_of(b));
        cu_kv_store(c, row_len, dd, tmp, m, stream_of(b));
    }
    LAUNCHED(b, "kv_permute");
    if (tmp) CU_OK(b, "kv_permute", cudaFree(tmp));
}

/* Every row in one launch, the indices copied in first. */
void cuda_get_rows(kern_backend *b, float *out, const kern_mat *w, const int32_t *rows, int32_t n) {
    if (n <= 0) return;
    const int32_t *dr = static_cast<const int32_t *>(
        to_device(b, "get_rows", rows, sizeof(int32_t) * (size_t)n));
    if (!dr) return;
    if (!LAUNCH(b, cu_get_rows, out, w->type, w->data, w->n_in, dr, n))
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "get_rows", "weight type %s has no CUDA kernel",
                          dtype_name(w->type));
    LAUNCHED(b, "get_rows");
}

void cuda_get_row(kern_backend *b, float *out, const kern_mat *w, int64_t row) {
    if (!LAUNCH(b, cu_dequant_rows, out, w->type, w->data, w->n_in, row, 1))
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "get_row", "weight type %s has no CUDA kernel",
                          dtype_name(w->type));
    LAUNCHED(b, "get_row");
}

/* ---- row and element-wise ops ---- */

void cuda_rmsnorm(kern_backend *b, float *y, const float *x, const float *w, int32_t n_rows,
                  int32_t dim, float eps) {
    LAUNCH(b, cu_rmsnorm, y, x, w, n_rows, dim, eps);
    LAUNCHED(b, "rmsnorm");
}

void cuda_rope(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
               int32_t head_dim, int32_t rope_dim, float base, const float *freq_factors) {
    if (n_rows <= 0) return;
    const int32_t *dp =
        static_cast<const int32_t *>(to_device(b, "rope", pos, sizeof(int32_t) * (size_t)n_rows));
    if (!dp) return;
    LAUNCH(b, cu_rope, x, dp, n_rows, n_head, head_dim, rope_dim, base, freq_factors);
    LAUNCHED(b, "rope");
}

void cuda_rope_neox(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                    int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                    const float *freq_factors) {
    if (n_rows <= 0) return;
    const int32_t *dp = static_cast<const int32_t *>(
        to_device(b, "rope_neox", pos, sizeof(int32_t) * (size_t)n_rows));
    if (!dp) return;
    LAUNCH(b, cu_rope_neox, x, dp, n_rows, n_head, head_dim, rope_dim, base, freq_factors);
    LAUNCHED(b, "rope_neox");
}

/* Attention's chunk partials for a's rows, or NULL when its rows alone make blocks
 * enough to fill the GPU (ATT_FILL: about two a multiprocessor of an H100's 132), a row
 * has one chunk at most, or the partials would take over ATT_PART_BYTES; rows that share
 * chunks (shared) take the partials however many. *n_chunks: the chunks of the longest row. */
constexpr int64_t ATT_FILL = 256;
constexpr size_t ATT_PART_BYTES = (size_t)64 << 20;
float *attention_parts(kern_backend *b, const kern_attn *a, bool shared, int32_t *n_chunks) {
    int64_t most = 0;
    for (int32_t r = 0; r < a->n_rows; r++) {
        int64_t n = 0;
        for (int32_t i = a->seg_off[r]; i < a->seg_off[r + 1]; i++) n += a->segs[i].len;
        most = std::max(most, n);
    }
    *n_chunks = (int32_t)((most + CU_ATTN_CHUNK - 1) / CU_ATTN_CHUNK);
    const int64_t blocks = (int64_t)a->n_rows * a->n_head_kv * cu_attention_subs(a->n_head, a->n_head_kv);
    const size_t bytes = sizeof(float) * (size_t)a->n_rows * a->n_head * (size_t)*n_chunks *
                         (size_t)(a->head_dim + 2);
    if (*n_chunks <= 1 || (blocks >= ATT_FILL && !shared) || bytes > ATT_PART_BYTES) return nullptr;
    return static_cast<float *>(scratch(b, "attention", S_ATT, bytes));
}

void cuda_attention(kern_backend *b, const kern_attn *a) {
    if (a->n_rows <= 0) return;
    if (a->head_dim > CU_ATTN_MAX_HD) {
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "attention",
                          "head_dim %d is over the CUDA kernel's %d", a->head_dim, CU_ATTN_MAX_HD);
        return;
    }
    const size_t n_segs = (size_t)a->seg_off[a->n_rows];
    const void *off = to_device(b, "attention", a->seg_off, sizeof(int32_t) * ((size_t)a->n_rows + 1));
    const void *segs = off ? to_device(b, "attention", a->segs, sizeof(kern_seg) * n_segs) : nullptr;
    if (!segs) return;
    int32_t n_chunks = 0;
    cuda_state *st = state_of(b);
    st->att_groups.resize((size_t)a->n_rows * 4);
    int32_t *casc = st->att_groups.data(), *nsh = casc + (size_t)a->n_rows * 3;
    const int32_t n_casc = cu_attention_groups(a->seg_off, reinterpret_cast<const int32_t *>(a->segs), a->n_rows, casc, nsh);
    float *part = attention_parts(b, a, n_casc > 0, &n_chunks);
    const void *dcasc = nullptr, *dnsh = nullptr;
    if (part && n_casc > 0) { /* (the same arrays every layer of a step: copied once) */
        dcasc = to_device(b, "attention", casc, sizeof(int32_t) * 3 * (size_t)n_casc);
        if (!dcasc || !(dnsh = to_device(b, "attention", nsh, sizeof(int32_t) * (size_t)a->n_rows))) return;
        for (int32_t g = 0; g < n_casc; g++) st->att_shared += (uint64_t)casc[3 * g + 2] * (casc[3 * g + 1] - 1);
    }
    LAUNCH(b, cu_attention, a->out, a->q, a->k, a->v, static_cast<const int32_t *>(off),
                 static_cast<const int32_t *>(segs), a->n_rows, a->n_head, a->n_head_kv,
                 a->head_dim, a->scale, a->sinks, part, part ? n_chunks : 0,
                 static_cast<const int32_t *>(dcasc), dnsh ? n_casc : 0, static_cast<const int32_t *>(dnsh));
    LAUNCHED(b, "attention");
}

void cuda_swiglu(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    LAUNCH(b, cu_swiglu, y, gate, up, n);
    LAUNCHED(b, "swiglu");
}

void cuda_geglu(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    LAUNCH(b, cu_geglu, y, gate, up, n);
    LAUNCHED(b, "geglu");
}

void cuda_add_bias(kern_backend *b, float *y, const float *bias, int32_t n_rows, int32_t dim) {
    LAUNCH(b, cu_add_bias, y, bias, n_rows, dim);
    LAUNCHED(b, "add_bias");
}

/* Logits matmul left in host memory (copied back before it returned) are capped there,
 * as the host backends do; the device's own on the device. */
void cuda_softcap(kern_backend *b, float *y, float cap, int64_t n) {
    if (!on_device(b, y)) {
        for (int64_t i = 0; i < n; i++) y[i] = cap * tanhf(y[i] / cap);
        return;
    }
    LAUNCH(b, cu_softcap, y, cap, n);
    LAUNCHED(b, "softcap");
}

void cuda_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n) {
    LAUNCH(b, cu_sigmoid_mul, y, gate, n);
    LAUNCHED(b, "sigmoid_mul");
}

/* One gdn row's work on its cell, recordable: the cell made from src (a copy; zeros when
 * src is NULL; nothing when it is the cell), then the row, kern_gdn copied without its
 * host arrays (the launcher reads only the device ones). */
void launch_gdn_row(kern_backend *b, const kern_gdn *a, int32_t r, float *cell, const float *src) {
    struct args {
        kern_gdn a;
        float *cell;
        const float *src;
        size_t bytes;
        int32_t r;
        cudaStream_t s;
    } p;
    memset(&p, 0, sizeof p); /* (the padding too: the bytes are the signature) */
    p.a = *a, p.a.cell_in = p.a.cell_out = nullptr;
    p.cell = cell, p.src = src, p.bytes = sizeof(float) * (size_t)kern_gdn_cell_floats(a);
    p.r = r, p.s = stream_of(b);
    cu_graphs::launch_fn(&state_of(b)->rec, &p, sizeof p, [p] {
        if (!p.src) cudaMemsetAsync(p.cell, 0, p.bytes, p.s);
        else if (p.src != p.cell)
            cudaMemcpyAsync(p.cell, p.src, p.bytes, cudaMemcpyDeviceToDevice, p.s);
        cu_gdn_row(&p.a, p.r, p.cell, p.s);
    });
}

/* The rows in order, each on its cell (cell_in and cell_out, host memory, pick the cells'
 * device addresses, which a step's graph then holds: a sequence continued in place gives
 * the same launches step after step). */
void cuda_gdn(kern_backend *b, const kern_gdn *a) {
    if (a->d_state > CU_GDN_MAX_STATE) {
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "gdn", "d_state %d is over the CUDA kernel's %d",
                          a->d_state, CU_GDN_MAX_STATE);
        return;
    }
    const int64_t cf = kern_gdn_cell_floats(a);
    for (int32_t r = 0; r < a->n_rows; r++) {
        const float *src = a->cell_in[r] < 0 ? nullptr : a->cells + (int64_t)a->cell_in[r] * cf;
        launch_gdn_row(b, a, r, a->cells + (int64_t)a->cell_out[r] * cf, src);
        if (!LAUNCHED(b, "gdn")) return;
    }
}

void cuda_swiglu_oai(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    LAUNCH(b, cu_swiglu_oai, y, gate, up, n);
    LAUNCHED(b, "swiglu_oai");
}

void cuda_scale(kern_backend *b, float *y, float f, int64_t n) {
    LAUNCH(b, cu_scale, y, f, n);
    LAUNCHED(b, "scale");
}

void cuda_add(kern_backend *b, float *y, const float *x, int64_t n) {
    LAUNCH(b, cu_add, y, x, n);
    LAUNCHED(b, "add");
}

void cuda_softmax(kern_backend *b, float *x, int32_t n_rows, int32_t n) {
    LAUNCH(b, cu_softmax, x, n_rows, n);
    LAUNCHED(b, "softmax");
}

/* ---- outputs ---- */

void cuda_gather_rows(kern_backend *b, float *y, const float *x, const int32_t *idx, int32_t n,
                      int32_t width) {
    if (n <= 0) return;
    const int32_t *di = static_cast<const int32_t *>(
        to_device(b, "gather_rows", idx, sizeof(int32_t) * (size_t)n));
    if (!di) return;
    LAUNCH(b, cu_gather_rows, y, x, di, n, width);
    LAUNCHED(b, "gather_rows");
}

/* Top-k past CU_TOPK_MAX, on the host from the rows in host memory: the k largest by
 * (value, lower id), each kern_logprob against the device's lse. */
void host_topk(const float *x, int32_t n_rows, int32_t n, int32_t k, const kern_lse *lse,
               int32_t *ids, float *lp) {
    std::vector<int32_t> id((size_t)n);
    const int32_t kk = std::min(k, n);
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        std::iota(id.begin(), id.end(), 0);
        std::partial_sort(id.begin(), id.begin() + kk, id.end(), [xr](int32_t a, int32_t c) {
            return xr[a] > xr[c] || (xr[a] == xr[c] && a < c);
        });
        for (int32_t i = 0; i < kk; i++) {
            ids[(size_t)r * k + i] = id[i];
            lp[(size_t)r * k + i] = kern_logprob(xr[id[i]], lse[r]);
        }
    }
}

void cuda_topk_lse(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                   kern_lse *lse, int32_t *ids, float *lp) {
    if (n_rows <= 0 || n <= 0) return;
    eager no_graph(b, "topk_lse");
    const size_t x_bytes = sizeof(float) * (size_t)n_rows * (size_t)n;
    const bool host_x = !on_device(b, x);
    const float *xd = x;
    if (host_x) {
        float *s = static_cast<float *>(scratch(b, "topk_lse", S_IN, x_bytes));
        if (!s || !CU_OK(b, "topk_lse", h2d(b, s, x, x_bytes)))
            return;
        xd = s;
    }
    const int32_t kd = k <= CU_TOPK_MAX ? k : 0; /* on the device; past it, on the host */
    const size_t nr = (size_t)n_rows, pairs = nr * (size_t)kd;
    /* one scratch: log_sum (double), mx, ids, lp */
    char *d = static_cast<char *>(scratch(b, "topk_lse", S_TOPK, nr * 12 + pairs * 8));
    if (!d) return;
    double *d_ls = reinterpret_cast<double *>(d);
    float *d_mx = reinterpret_cast<float *>(d + nr * 8);
    int32_t *d_ids = reinterpret_cast<int32_t *>(d + nr * 12);
    float *d_lp = reinterpret_cast<float *>(d + nr * 12 + pairs * 4);
    const int32_t got = cu_topk_lse(xd, n_rows, n, kd, d_ids, d_lp, d_mx, d_ls, stream_of(b));
    if (!LAUNCHED(b, "topk_lse")) return;
    const char *h = static_cast<const char *>(d2h_pinned(b, "topk_lse", d, nr * 12 + pairs * 8));
    if (!h) return;
    for (size_t r = 0; r < nr; r++) {
        lse[r].mx = reinterpret_cast<const float *>(h + nr * 8)[r];
        lse[r].log_sum = reinterpret_cast<const double *>(h)[r];
    }
    if (k <= 0) return;
    int32_t filled = got;
    if (kd > 0) {
        memcpy(ids, h + nr * 12, pairs * 4);
        memcpy(lp, h + nr * 12 + pairs * 4, pairs * 4);
    } else {
        std::vector<float> hx;
        const float *xh = x;
        if (!host_x) {
            hx.resize(nr * (size_t)n);
            if (!CU_OK(b, "topk_lse", d2h(b, hx.data(), x, x_bytes)))
                return;
            xh = hx.data();
        }
        host_topk(xh, n_rows, n, k, lse, ids, lp);
        filled = std::min(k, n);
    }
    for (size_t r = 0; r < nr; r++)
        for (int32_t i = filled; i < k; i++) ids[r * k + i] = -1, lp[r * k + i] = -INFINITY;
}

kern_ops make_ops() {
    kern_ops o = {};
    o.name = "cuda";
    o.device = true;
    o.init = cuda_init;
    o.free = cuda_free;
    o.sync = cuda_sync;
    o.buf_alloc = cuda_buf_alloc;
    o.buf_free = cuda_buf_free;
    o.host_alloc = cuda_host_alloc;
    o.host_free = cuda_host_free;
    o.upload = cuda_upload;
    o.download = cuda_download;
    o.download_at = cuda_download_at;
    o.mat_prepare = cuda_mat_prepare;
    o.mat_release = cuda_mat_release;
    o.kv_store = cuda_kv_store;
    o.kv_permute = cuda_kv_permute;
    o.matmul = cuda_matmul;
    o.matmul_n = cuda_matmul_n;
    o.matmul_swiglu = cuda_matmul_swiglu;
    o.get_row = cuda_get_row;
    o.get_rows = cuda_get_rows;
    o.rmsnorm = cuda_rmsnorm;
    o.rope = cuda_rope;
    o.attention = cuda_attention;
    o.swiglu = cuda_swiglu;
    o.add = cuda_add;
    o.softmax = cuda_softmax;
    o.gather_rows = cuda_gather_rows;
    o.topk_lse = cuda_topk_lse;
    o.rope_neox = cuda_rope_neox;
    o.add_bias = cuda_add_bias;
    o.scale = cuda_scale;
    o.softcap = cuda_softcap;
    o.swiglu_oai = cuda_swiglu_oai;
    o.geglu = cuda_geglu;
    o.sigmoid_mul = cuda_sigmoid_mul;
    o.gdn = cuda_gdn;
    o.step_begin = cuda_step_begin;
    return o;
}

} /* namespace cudab */
#pragma GCC visibility pop

extern "C" const kern_ops kern_cuda_ops = cudab::make_ops();

extern "C" bool cu_emulated(void) { return CU_EMU; }

extern "C" uint64_t cu_emu_launches(void) {
#if CU_EMU
    return cuemu::n_launches;
#else
    return 0;
#endif
}

extern "C" uint64_t cu_d2h_bytes(kern_backend *b) { return cudab::state_of(b)->d2h_bytes; }
extern "C" uint64_t cu_d2h_copies(kern_backend *b) { return cudab::state_of(b)->d2h_copies; }

extern "C" uint64_t cu_attn_shared(kern_backend *b) { return cudab::state_of(b)->att_shared; }

extern "C" uint64_t cu_h2d_bytes(kern_backend *b) { return cudab::state_of(b)->h2d_bytes; }

extern "C" uint64_t cu_dev_allocs(kern_backend *b) { return cudab::state_of(b)->n_allocs; }

extern "C" cu_graph_counts cu_graphs_of(kern_backend *b) {
    const cu_graphs::recorder &r = cudab::state_of(b)->rec;
    return cu_graph_counts{r.captures, r.replays, r.eager, r.graphs.size(), r.cap};
}
