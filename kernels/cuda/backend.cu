/* backend.cu - kern_cuda_ops: the CUDA backend, every op of kern.h on one device. Buffers
 * and prepared weights are device memory (cudaMalloc; the GGUF blocks uploaded as stored),
 * the ops are the kernels of cu.h queued on the legacy default stream (so that every
 * instance, the model's weight preparer and each context, sees the others' work in
 * order), and every CUDA and cuBLAS status is checked: the first failure is recorded
 * naming the op, the call, its file and line, and sync returns it.
 *
 * The products (matmul, matmul_n, matmul_swiglu) are products.cu's; backend.cuh declares
 * what the two files share.
 *
 * Host memory where the engine passes it: the batch's integer arrays (positions, slots,
 * segments, gather indices, kv_permute's map) are copied in through a small cache keyed
 * by content (a forward pass passes the same arrays to every layer); matmul's y and
 * topk_lse's x may be host memory (the step's logits are, today), staged through device
 * scratch; topk_lse's lse, ids and lp are host memory, its results brought back in one
 * asynchronous copy into page-locked memory allocated once (grown when a step needs more). */
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
namespace cudab {

constexpr int N_SMALL = 8; /* host arrays kept on the device at once */


struct dev_buf {
    void *p;
    size_t bytes;
};

struct small_copy {
    std::vector<unsigned char> host; /* what dev holds */
    dev_buf dev;
    uint64_t used; /* when last handed out (the least recent is replaced) */
};

struct cuda_state {
    cublasHandle_t blas;
    dev_buf scratch[N_SCRATCH];
    small_copy small[N_SMALL];
    uint64_t small_clock;
    uint64_t d2h_bytes; /* copied to the host so far (cu_d2h_bytes) */
    uint64_t h2d_bytes; /* copied from the host so far, weights aside (cu_h2d_bytes) */
    uint64_t n_allocs;  /* cudaMalloc calls so far (cu_dev_allocs) */
    uint64_t att_shared; /* chunk reads the cascade saved (cu_attn_shared) */
    std::vector<int32_t> att_groups; /* (3 n_rows + n_rows) cu_attention_groups's casc, nsh */
    dev_buf pinned;     /* page-locked host memory the small results come back into */
    std::vector<std::pair<uintptr_t, uintptr_t>> own; /* this instance's buffers [start, end) */
};

cuda_state *state_of(kern_backend *b) { return static_cast<cuda_state *>(kern_backend_state(b)); }

cublasHandle_t blas_of(kern_backend *b) { return state_of(b)->blas; }

/* The name of the call in a CU_OK / BLAS_OK expression: its text up to the parenthesis. */
int call_len(const char *call) {
    const char *p = strchr(call, '(');
    return p ? (int)(p - call) : (int)strlen(call);
}

bool cu_ok(kern_backend *b, const char *op, cudaError_t e, const char *call, const char *file,
           int line) {
    if (e == cudaSuccess) return true;
    kern_backend_fail(b, e == cudaErrorMemoryAllocation ? ST_ERR_NOMEM : ST_ERR_BACKEND, op,
                      "%.*s failed: %s (%s:%d)", call_len(call), call, cudaGetErrorString(e),
                      file, line);
    return false;
}

bool blas_ok(kern_backend *b, const char *op, cublasStatus_t e, const char *call,
             const char *file, int line) {
    if (e == CUBLAS_STATUS_SUCCESS) return true;
    kern_backend_fail(b, e == CUBLAS_STATUS_ALLOC_FAILED ? ST_ERR_NOMEM : ST_ERR_BACKEND, op,
                      "%.*s failed: %s (%s:%d)", call_len(call), call, cublasGetStatusString(e),
                      file, line);
    return false;
}


/* bytes of device memory for op's `what`, or NULL with ST_ERR_NOMEM recorded as the host
 * backends word it ("matmul: out of memory for 12.0 MiB of device scratch"), the CUDA
 * error named. Honours kern_backend_set_alloc_limit. */
void *dev_alloc(kern_backend *b, const char *op, const char *what, size_t bytes) {
    void *p = nullptr;
    state_of(b)->n_allocs++;
    const cudaError_t e = kern_backend_alloc_allowed(b, bytes) ? cudaMalloc(&p, bytes ? bytes : 1)
                                                               : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) return p;
    if (e != cudaErrorMemoryAllocation) cudaGetLastError(); /* (not sticky: clear it) */
    if (bytes >= (size_t)1 << 20)
        kern_backend_fail(b, ST_ERR_NOMEM, op, "out of memory for %.1f MiB of %s (cudaMalloc: %s)",
                          (double)bytes / (1 << 20), what, cudaGetErrorString(e));
    else
        kern_backend_fail(b, ST_ERR_NOMEM, op, "out of memory for %zu bytes of %s (cudaMalloc: %s)",
                          bytes, what, cudaGetErrorString(e));
    return nullptr;
}

/* d grown to at least bytes (doubling), or NULL recorded; its contents do not survive a
 * growth (cudaFree waits for the kernels that use the old block). */
void *grow(kern_backend *b, const char *op, dev_buf *d, size_t bytes) {
    if (bytes <= d->bytes && d->p) return d->p;
    size_t n = std::max(bytes, std::max((size_t)4096, d->bytes * 2));
    if (!kern_backend_alloc_allowed(b, n)) n = bytes;
    if (d->p) CU_OK(b, op, cudaFree(d->p));
    *d = dev_buf{nullptr, 0};
    void *p = dev_alloc(b, op, "device scratch", n);
    if (p) *d = dev_buf{p, n};
    return p;
}

void *scratch(kern_backend *b, const char *op, int which, size_t bytes) {
    return grow(b, op, &state_of(b)->scratch[which], bytes);
}

/* bytes of host memory to the device, queued and counted (cu_h2d_bytes). */
cudaError_t h2d(kern_backend *b, void *dst, const void *src, size_t bytes) {
    state_of(b)->h2d_bytes += bytes;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, STREAM);
}

/* A device copy of bytes of host memory (a batch's small arrays), valid until N_SMALL - 1
 * other arrays have been asked for (the least recently asked for is replaced); NULL
 * recorded when memory runs out. */
const void *to_device(kern_backend *b, const char *op, const void *host, size_t bytes) {
    cuda_state *s = state_of(b);
    const unsigned char *h = static_cast<const unsigned char *>(host);
    small_copy *lru = &s->small[0];
    for (small_copy &c : s->small) {
        if (c.dev.p && c.host.size() == bytes && (bytes == 0 || memcmp(c.host.data(), h, bytes) == 0)) {
            c.used = ++s->small_clock;
            return c.dev.p;
        }
        if (c.used < lru->used) lru = &c;
    }
    small_copy &c = *lru; /* never one handed out since the last replacement */
    c.used = ++s->small_clock;
    c.host.clear();
    if (!grow(b, op, &c.dev, bytes)) return nullptr;
    if (bytes && !CU_OK(b, op, h2d(b, c.dev.p, host, bytes)))
        return nullptr;
    c.host.assign(h, h + bytes);
    return c.dev.p;
}

/* Every copy from the device to the host: synchronous, and counted (cu_d2h_bytes). */
cudaError_t d2h(kern_backend *b, void *dst, const void *src, size_t bytes) {
    state_of(b)->d2h_bytes += bytes;
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}

/* bytes of page-locked host memory (grown, never shrunk; the contents do not survive a
 * growth), or NULL recorded. */
void *pinned(kern_backend *b, const char *op, size_t bytes) {
    dev_buf *h = &state_of(b)->pinned;
    if (bytes <= h->bytes && h->p) return h->p;
    const size_t n = std::max(bytes, std::max((size_t)4096, h->bytes * 2));
    cudaFreeHost(h->p);
    *h = dev_buf{nullptr, 0};
    void *p = nullptr;
    const cudaError_t e = kern_backend_alloc_allowed(b, n) ? cudaMallocHost(&p, n) : cudaErrorMemoryAllocation;
    if (e != cudaSuccess) {
        cudaGetLastError();
        kern_backend_fail(b, ST_ERR_NOMEM, op, "out of memory for %zu bytes of pinned host memory (%s)",
                          n, cudaGetErrorString(e));
        return nullptr;
    }
    *h = dev_buf{p, n};
    return p;
}

/* bytes of device memory at src into page-locked memory, in one asynchronous copy the
 * stream then waits for (counted in cu_d2h_bytes); NULL recorded on failure. */
const void *d2h_pinned(kern_backend *b, const char *op, const void *src, size_t bytes) {
    void *h = pinned(b, op, bytes);
    if (!h || !CU_OK(b, op, cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, STREAM)) ||
        !CU_OK(b, op, cudaStreamSynchronize(STREAM)))
        return nullptr;
    state_of(b)->d2h_bytes += bytes;
    return h;
}

/* Whether p is device memory: one of this instance's buffers, else as the driver says. */
bool on_device(kern_backend *b, const void *p) {
    const uintptr_t u = (uintptr_t)p;
    for (const auto &r : state_of(b)->own)
        if (u >= r.first && u < r.second) return true;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* ---- state, memory ---- */

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
    cublasSetStream(s->blas, STREAM);
    *n_threads = 1; /* the host thread only queues work */
    *state = s;
    return ST_OK;
}

void cuda_free(void *state) {
    cuda_state *s = static_cast<cuda_state *>(state);
    if (!s) return;
    cudaDeviceSynchronize();
    for (dev_buf &d : s->scratch) cudaFree(d.p);
    for (small_copy &c : s->small) cudaFree(c.dev.p);
    cudaFreeHost(s->pinned.p);
    cublasDestroy(s->blas);
    delete s;
}

st_code cuda_sync(kern_backend *b) {
    if (!CU_OK(b, "sync", cudaStreamSynchronize(STREAM))) return ST_ERR_BACKEND;
    return CU_OK(b, "sync", cudaGetLastError()) ? ST_OK : ST_ERR_BACKEND;
}

void *cuda_buf_alloc(kern_backend *b, size_t bytes) {
    void *p = dev_alloc(b, "buf_alloc", "a buffer", bytes);
    if (!p) return nullptr;
    if (!CU_OK(b, "buf_alloc", cudaMemset(p, 0, bytes))) {
        cudaFree(p);
        return nullptr;
    }
    state_of(b)->own.emplace_back((uintptr_t)p, (uintptr_t)p + bytes);
    return p;
}

void cuda_buf_free(kern_backend *b, void *buf) {
    if (!buf) return;
    auto &own = state_of(b)->own;
    own.erase(std::remove_if(own.begin(), own.end(),
                             [buf](const std::pair<uintptr_t, uintptr_t> &r) {
                                 return r.first == (uintptr_t)buf;
                             }),
              own.end());
    CU_OK(b, "buf_free", cudaFree(buf));
}

void cuda_upload(kern_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes && CU_OK(b, "upload", h2d(b, dst, src, bytes))) CU_OK(b, "upload", cudaStreamSynchronize(STREAM));
}

/* Page-locked host memory, so that downloads into it run at the link's full speed. */
void *cuda_host_alloc(kern_backend *b, size_t bytes) {
    void *p = nullptr;
    const cudaError_t e = kern_backend_alloc_allowed(b, bytes) ? cudaMallocHost(&p, bytes ? bytes : 1)
                                                               : cudaErrorMemoryAllocation;
    if (e == cudaSuccess) return p;
    cudaGetLastError();
    kern_backend_fail(b, ST_ERR_NOMEM, "host_alloc", "out of memory for %zu bytes of pinned host "
                      "memory (%s)", bytes, cudaGetErrorString(e));
    return nullptr;
}

void cuda_host_free(kern_backend *b, void *p) {
    if (p) CU_OK(b, "host_free", cudaFreeHost(p));
}

void cuda_download(kern_backend *b, void *dst, const void *src, size_t bytes) {
    if (bytes) CU_OK(b, "download", d2h(b, dst, src, bytes));
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
    if (!CU_OK(b, "mat_prepare", cudaMemcpy(p, stored->data, n, cudaMemcpyHostToDevice))) {
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
    if (w->data) CU_OK(b, "mat_release", cudaFree(const_cast<void *>(w->data)));
    *w = kern_mat{};
}

void cuda_kv_store(kern_backend *b, float *cache, int64_t row_len, const int32_t *slot,
                   const float *x, int32_t n_rows) {
    if (n_rows <= 0) return;
    const int32_t *ds = static_cast<const int32_t *>(
        to_device(b, "kv_store", slot, sizeof(int32_t) * (size_t)n_rows));
    if (!ds) return;
    cu_kv_store(cache, row_len, ds, x, n_rows, STREAM);
    LAUNCHED(b, "kv_store");
}

void cuda_kv_permute(kern_backend *b, float *cache, int64_t n_blocks, int32_t n_slots,
                     int64_t row_len, const int32_t *dst_of_src) {
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
        cu_kv_gather(tmp, c, row_len, ds, m, STREAM);
        cu_kv_store(c, row_len, dd, tmp, m, STREAM);
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
    if (!cu_get_rows(out, w->type, w->data, w->n_in, dr, n, STREAM))
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "get_rows", "weight type %s has no CUDA kernel",
                          dtype_name(w->type));
    LAUNCHED(b, "get_rows");
}

void cuda_get_row(kern_backend *b, float *out, const kern_mat *w, int64_t row) {
    if (!cu_dequant_rows(out, w->type, w->data, w->n_in, row, 1, STREAM))
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "get_row", "weight type %s has no CUDA kernel",
                          dtype_name(w->type));
    LAUNCHED(b, "get_row");
}

/* ---- row and element-wise ops ---- */

void cuda_rmsnorm(kern_backend *b, float *y, const float *x, const float *w, int32_t n_rows,
                  int32_t dim, float eps) {
    cu_rmsnorm(y, x, w, n_rows, dim, eps, STREAM);
    LAUNCHED(b, "rmsnorm");
}

void cuda_rope(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
               int32_t head_dim, int32_t rope_dim, float base, const float *freq_factors) {
    if (n_rows <= 0) return;
    const int32_t *dp =
        static_cast<const int32_t *>(to_device(b, "rope", pos, sizeof(int32_t) * (size_t)n_rows));
    if (!dp) return;
    cu_rope(x, dp, n_rows, n_head, head_dim, rope_dim, base, freq_factors, STREAM);
    LAUNCHED(b, "rope");
}

void cuda_rope_neox(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                    int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                    const float *freq_factors) {
    if (n_rows <= 0) return;
    const int32_t *dp = static_cast<const int32_t *>(
        to_device(b, "rope_neox", pos, sizeof(int32_t) * (size_t)n_rows));
    if (!dp) return;
    cu_rope_neox(x, dp, n_rows, n_head, head_dim, rope_dim, base, freq_factors, STREAM);
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
    cu_attention(a->out, a->q, a->k, a->v, static_cast<const int32_t *>(off),
                 static_cast<const int32_t *>(segs), a->n_rows, a->n_head, a->n_head_kv,
                 a->head_dim, a->scale, a->sinks, part, part ? n_chunks : 0,
                 static_cast<const int32_t *>(dcasc), dnsh ? n_casc : 0, static_cast<const int32_t *>(dnsh), STREAM);
    LAUNCHED(b, "attention");
}

void cuda_swiglu(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    cu_swiglu(y, gate, up, n, STREAM);
    LAUNCHED(b, "swiglu");
}

void cuda_geglu(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    cu_geglu(y, gate, up, n, STREAM);
    LAUNCHED(b, "geglu");
}

void cuda_add_bias(kern_backend *b, float *y, const float *bias, int32_t n_rows, int32_t dim) {
    cu_add_bias(y, bias, n_rows, dim, STREAM);
    LAUNCHED(b, "add_bias");
}

/* Logits matmul left in host memory (copied back before it returned) are capped there,
 * as the host backends do; the device's own on the device. */
void cuda_softcap(kern_backend *b, float *y, float cap, int64_t n) {
    if (!on_device(b, y)) {
        for (int64_t i = 0; i < n; i++) y[i] = cap * tanhf(y[i] / cap);
        return;
    }
    cu_softcap(y, cap, n, STREAM);
    LAUNCHED(b, "softcap");
}

void cuda_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n) {
    cu_sigmoid_mul(y, gate, n, STREAM);
    LAUNCHED(b, "sigmoid_mul");
}

/* The rows in order (cell_in and cell_out are host memory): each row's cell made from
 * its cell_in on the device (a copy, or zeros), then its conv and heads. */
void cuda_gdn(kern_backend *b, const kern_gdn *a) {
    if (a->d_state > CU_GDN_MAX_STATE) {
        kern_backend_fail(b, ST_ERR_UNSUPPORTED, "gdn", "d_state %d is over the CUDA kernel's %d",
                          a->d_state, CU_GDN_MAX_STATE);
        return;
    }
    const int64_t cf = kern_gdn_cell_floats(a);
    const size_t bytes = sizeof(float) * (size_t)cf;
    for (int32_t r = 0; r < a->n_rows; r++) {
        float *cell = a->cells + (int64_t)a->cell_out[r] * cf;
        if (a->cell_in[r] < 0 && !CU_OK(b, "gdn", cudaMemsetAsync(cell, 0, bytes, STREAM)))
            return;
        if (a->cell_in[r] >= 0 && a->cell_in[r] != a->cell_out[r] &&
            !CU_OK(b, "gdn", cudaMemcpyAsync(cell, a->cells + (int64_t)a->cell_in[r] * cf, bytes,
                                             cudaMemcpyDeviceToDevice, STREAM)))
            return;
        cu_gdn_row(a, r, cell, STREAM);
        if (!LAUNCHED(b, "gdn")) return;
    }
}

void cuda_swiglu_oai(kern_backend *b, float *y, const float *gate, const float *up, int64_t n) {
    cu_swiglu_oai(y, gate, up, n, STREAM);
    LAUNCHED(b, "swiglu_oai");
}

void cuda_scale(kern_backend *b, float *y, float f, int64_t n) {
    cu_scale(y, f, n, STREAM);
    LAUNCHED(b, "scale");
}

void cuda_add(kern_backend *b, float *y, const float *x, int64_t n) {
    cu_add(y, x, n, STREAM);
    LAUNCHED(b, "add");
}

void cuda_softmax(kern_backend *b, float *x, int32_t n_rows, int32_t n) {
    cu_softmax(x, n_rows, n, STREAM);
    LAUNCHED(b, "softmax");
}

/* ---- outputs ---- */

void cuda_gather_rows(kern_backend *b, float *y, const float *x, const int32_t *idx, int32_t n,
                      int32_t width) {
    if (n <= 0) return;
    const int32_t *di = static_cast<const int32_t *>(
        to_device(b, "gather_rows", idx, sizeof(int32_t) * (size_t)n));
    if (!di) return;
    cu_gather_rows(y, x, di, n, width, STREAM);
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
    const int32_t got = cu_topk_lse(xd, n_rows, n, kd, d_ids, d_lp, d_mx, d_ls, STREAM);
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

extern "C" uint64_t cu_attn_shared(kern_backend *b) { return cudab::state_of(b)->att_shared; }

extern "C" uint64_t cu_h2d_bytes(kern_backend *b) { return cudab::state_of(b)->h2d_bytes; }

extern "C" uint64_t cu_dev_allocs(kern_backend *b) { return cudab::state_of(b)->n_allocs; }
