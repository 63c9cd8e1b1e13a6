/* state.cuh - the cuda backend's instance state and memory (host code, included once, by
 * backend.cu; what products.cu uses of it is declared in backend.cuh): its errors as
 * status codes, device scratch by use, the batch's small arrays' device copies (the
 * cascade attention's groups among them), copies to and from the host, page-locked
 * staging, and the eager scope that ends a recorded segment (graphs.h) before an op acts
 * on the host.
 *
 * Host memory where the engine passes it: the batch's integer arrays (positions, slots,
 * segments, gather indices, kv_permute's map) are copied in through a small cache keyed
 * by content (a forward pass passes the same arrays to every layer); matmul's y and
 * topk_lse's x may be host memory (the step's logits are, today), staged through device
 * scratch; topk_lse's lse, ids and lp are host memory, its results brought back in one
 * asynchronous copy into page-locked memory allocated once (grown when a step needs more). */
#ifndef MD_CUDA_STATE_CUH
#define MD_CUDA_STATE_CUH

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
    uint64_t d2h_copies; /* copies to the host so far (cu_d2h_copies) */
    uint64_t h2d_bytes; /* copied from the host so far, weights aside (cu_h2d_bytes) */
    uint64_t n_allocs;  /* cudaMalloc calls so far (cu_dev_allocs) */
    uint64_t att_shared; /* chunk reads the cascade saved (cu_attn_shared) */
    std::vector<int32_t> att_groups; /* (3 n_rows + n_rows) cu_attention_groups's casc, nsh */
    dev_buf pinned;     /* page-locked host memory the small results come back into */
    std::vector<std::pair<uintptr_t, uintptr_t>> own; /* this instance's buffers [start, end) */
    cu_graphs::recorder rec; /* its stream, and the step graphs (graphs.h) */
};

cuda_state *state_of(kern_backend *b) { return static_cast<cuda_state *>(kern_backend_state(b)); }
cudaStream_t stream_of(kern_backend *b) { return state_of(b)->rec.stream; }
cu_graphs::recorder *rec_of(kern_backend *b) { return &state_of(b)->rec; }
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

eager::eager(kern_backend *b_, const char *op, bool frees) : b(b_), was(state_of(b_)->rec.on) {
    cuda_state *s = state_of(b);
    if (was) CU_OK(b, op, cu_graphs::end(&s->rec, !frees, &s->h2d_bytes));
    if (frees) cu_graphs::drop_graphs(&s->rec);
}
eager::~eager() {
    if (was) cu_graphs::resume(&state_of(b)->rec);
}

/* bytes of device memory for op's `what`, or NULL with ST_ERR_NOMEM recorded as the host
 * backends word it ("matmul: out of memory for 12.0 MiB of device scratch"), the CUDA
 * error named. Honours kern_backend_set_alloc_limit. */
void *dev_alloc(kern_backend *b, const char *op, const char *what, size_t bytes) {
    void *p = nullptr;
    eager no_graph(b, op);
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
    eager no_graph(b, op, true);
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
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_of(b));
}

/* A device copy of bytes of host memory (a batch's small arrays), valid until N_SMALL - 1
 * other arrays have been asked for (the least recently asked for is replaced); NULL
 * recorded when memory runs out. */
const void *to_device(kern_backend *b, const char *op, const void *host, size_t bytes) {
    cuda_state *s = state_of(b);
    if (s->rec.on) { /* into the step's arena; the rest of a step too big for it as it comes */
        if (const void *d = cu_graphs::stage(&s->rec, host, bytes)) return d;
        eager no_graph(b, op);
        s->rec.in_step = false;
    }
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
    eager no_graph(b, "download");
    state_of(b)->d2h_bytes += bytes;
    state_of(b)->d2h_copies++;
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_of(b));
    return e == cudaSuccess ? cudaStreamSynchronize(stream_of(b)) : e;
}

/* bytes of page-locked host memory (grown, never shrunk; the contents do not survive a
 * growth), or NULL recorded. */
void *pinned(kern_backend *b, const char *op, size_t bytes) {
    dev_buf *h = &state_of(b)->pinned;
    if (bytes <= h->bytes && h->p) return h->p;
    eager no_graph(b, op);
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
    eager no_graph(b, op);
    void *h = pinned(b, op, bytes);
    if (!h || !CU_OK(b, op, cudaMemcpyAsync(h, src, bytes, cudaMemcpyDeviceToHost, stream_of(b))) ||
        !CU_OK(b, op, cudaStreamSynchronize(stream_of(b))))
        return nullptr;
    state_of(b)->d2h_bytes += bytes;
    state_of(b)->d2h_copies++;
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

} /* namespace cudab */

#endif
