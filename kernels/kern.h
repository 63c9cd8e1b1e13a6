/* kern.h - the compute ops table: one set of functions, one implementation per backend.
 *
 * Backends: "ref" (kernels/ref: plain scalar C, written to be obviously right; the
 * oracle every other backend is tested against), "cpu" (kernels/cpu: SIMD and a thread
 * pool) and "cuda" (kernels/cuda: one GPU, loaded as a plugin when asked for). A backend
 * is picked at run time by name; every op has the same contract in every backend, up to
 * floating-point summation order.
 *
 * Memory: a backend owns every buffer it computes on. Every float pointer an op receives
 * (activations, weights, norm vectors, the KV cache) is memory of the same backend: a
 * buffer from buf_alloc (or a pointer into one), or a matrix from mat_prepare. Memory of
 * one instance serves every instance of the same backend (host memory for ref and cpu;
 * one device for a device backend), so a model's prepared weights serve all the
 * contexts it has on that backend (engine/model/prep.c). The small
 * integer arrays that describe a batch (positions, slots, segments) are host memory; a
 * device backend copies them in itself. Host backends (ref, cpu) use host memory for
 * both, so for them any host pointer works (the tests rely on it).
 *
 * Errors: ops return nothing. An op that fails (no memory for its scratch) records the
 * first failure, naming itself, and returns without writing its output; the caller asks
 * kern_backend_sync after a pass and discards what the pass wrote.
 *
 * Adding a backend: write a kern_ops table (kernels/ref/ref.c is the shortest complete
 * one; the cpu backend's is in kernels/cpu/ops.c), add it to the list in backend.c, and
 * run tests/test_kernels.c against ref.
 *
 * Layout conventions: activations are float32, row-major, one row per batch row
 * (a "row" is one token of the batch). A weight matrix W is (n_out, n_in) row-major
 * in its storage type, as GGUF stores it (ggml ne[0] = n_in, ne[1] = n_out), and
 * matmul computes y[r][o] = sum_i W[o][i] * x[r][i].
 *
 * This header knows nothing about models, forests or files. */
#ifndef MD_KERN_H
#define MD_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "base/status.h"

typedef struct kern_mat {
    uint32_t type;      /* DT_* weight type */
    int64_t n_out;      /* rows of W */
    int64_t n_in;       /* columns of W (a multiple of the type's block) */
    const void *data;   /* n_out rows of dtype_row_bytes(type, n_in) bytes, in the backend's
                           memory once prepared (mat_prepare); borrowed */
    const void *packed; /* NULL, or the backend's own layout of the rows, which its matmul
                           reads instead (the cpu backend's repacked rows: results within
                           float rounding of the stored form's, each row the same bits in
                           any batch); owned by the backend, set by mat_prepare */
} kern_mat;

/* A run of contiguous KV-cache slots [start, start + len). */
typedef struct kern_seg {
    int32_t start;
    int32_t len;
} kern_seg;

/* Attention of a batch of rows over KV-cache slot segments (one layer).
 * Row r attends to the slots of segs[seg_off[r]] .. segs[seg_off[r + 1] - 1], in the
 * order given (the softmax does not depend on it); the segments of a row must not
 * overlap. Heads are grouped: query head h reads KV head h / (n_head / n_head_kv).
 * Sliding-window layers need nothing more: the caller passes each row's windowed
 * segments (a window is the tail of a row's path, so it is segments again). */
typedef struct kern_attn {
    int32_t n_rows;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    float scale;            /* usually 1 / sqrt(head_dim) */
    const float *q;         /* (n_rows, n_head * head_dim), already rotated */
    const float *k;         /* (n_slots, n_head_kv * head_dim) this layer's cache */
    const float *v;         /* (n_slots, n_head_kv * head_dim) */
    const int32_t *seg_off; /* (n_rows + 1) */
    const kern_seg *segs;
    float *out;             /* (n_rows, n_head * head_dim) */
    const float *sinks;     /* (n_head) or NULL: per head a logit that joins every row's
                               softmax without a value (gpt-oss's attention sinks), so the
                               weights of the slots sum to less than 1 (a device
                               backend's: in its memory, like the norms' weights) */
} kern_attn;

/* Gated DeltaNet (Qwen3.5's linear-attention layers) over a batch of rows, one layer.
 * Rows run in order, each on a state cell: a cell is this layer's recurrent state of
 * one sequence, (conv_k - 1) rows of conv_dim raw inputs (oldest first), then n_v_heads
 * matrices S of d_state x d_state (row i: key dim i, column j: value dim j). Row r first
 * makes cell_out[r] a copy of cell_in[r] (zeros when cell_in[r] < 0; nothing when they
 * are equal, which continues a sequence in place), then in that cell: the causal conv
 * of width conv_k over qkv[r] and the window (no bias), SiLU, q, k (n_k_heads each) and
 * v (n_v_heads) split in that order, q and k L2-normalised (x / sqrt(sum x^2 + eps)) and
 * q scaled by 1 / sqrt(d_state); per value head h (reading key head h % n_k_heads):
 * S <- e^g S with g = softplus(alpha + dt_bias[h]) a[h]; delta = sigmoid(beta)
 * (v - S^T k); S <- S + k delta^T; o = S^T q; out = RMSNorm(o; norm_w, eps) * silu(z).
 * A row may read a cell an earlier row of the batch wrote (a chain within one step). */
typedef struct kern_gdn {
    int32_t n_rows;
    int32_t n_k_heads, n_v_heads, d_state, conv_k;
    float eps;
    float *qkv;             /* (n_rows, conv_dim) the projections; overwritten (scratch) */
    const float *z;         /* (n_rows, n_v_heads * d_state) the output gate's input */
    const float *beta;      /* (n_rows, n_v_heads) before the sigmoid */
    const float *alpha;     /* (n_rows, n_v_heads) before dt_bias and the softplus */
    const float *conv_w;    /* (conv_dim, conv_k) */
    const float *dt_bias;   /* (n_v_heads) */
    const float *a;         /* (n_v_heads) the decay rates (negative) */
    const float *norm_w;    /* (d_state) the output norm's gains */
    float *cells;           /* (cells, kern_gdn_cell_floats) this layer's states */
    const int32_t *cell_in; /* (n_rows) host memory: the state each row starts from, -1: zeros */
    const int32_t *cell_out;/* (n_rows) host memory: the cell each row leaves its state in */
    float *out;             /* (n_rows, n_v_heads * d_state) */
} kern_gdn;

#define KERN_GDN_MAX_STATE 512 /* most d_state a backend takes */

/* Channels of the conv: q, k and v of every head. */
static inline int64_t kern_gdn_conv_dim(const kern_gdn *a) {
    return (int64_t)(2 * a->n_k_heads + a->n_v_heads) * a->d_state;
}
/* Floats of one state cell of one layer. */
static inline int64_t kern_gdn_cell_floats(const kern_gdn *a) {
    return (a->conv_k - 1) * kern_gdn_conv_dim(a) + (int64_t)a->n_v_heads * a->d_state * a->d_state;
}

typedef struct kern_backend kern_backend;

/* ---- outputs: what a step brings back of its logits ---- */

/* A row's log-sum-exp, kept as mx + log_sum: mx its largest value, log_sum the log of
 * sum exp(x[i] - mx), in double. */
typedef struct kern_lse {
    float mx;
    double log_sum;
} kern_lse;

/* log softmax(row)[i] from x = row[i] and the row's log-sum-exp: the one formula every
 * log-probability of the project goes through (the topk_lse op, the step's, the
 * samplers', the strategies'), so that they agree bit for bit given the same lse. */
static inline float kern_logprob(float x, kern_lse l) {
    return (float)((double)(x - l.mx) - l.log_sum);
}

#define KERN_ROPE_MAX_DIM 1024 /* most dims of a head that rope rotates */

#define KERN_MATMUL_N 4 /* most matrices one matmul_n takes */

/* How a matrix will be used, for mat_prepare. */
#define KERN_MAT_ROWS_ONLY 1u /* only get_row reads it (embeddings): no layout for matmul */
#define KERN_MAT_AS_STORED 2u /* keep the stored layout (to compare it with the backend's own) */

typedef struct kern_ops {
    const char *name;
    /* Its buffers are device memory, which the host reads only through download (a host
     * backend's are host memory: false). A caller that needs only a little of a result
     * (a step's top-k, not its logits rows) may then leave the rest on the device. */
    bool device;

    /* ---- state, errors, memory: the backend contract ---- */
    /* Makes the backend's own state (thread pool, scratch, device handles) for b, which
     * the ops reach with kern_backend_state (kern_impl.h). *n_threads: in, the threads
     * asked for (<= 0: one per core); out, the threads it uses. ST_OK, or a code and err
     * (ST_ERR_NOMEM, ST_ERR_BACKEND) with nothing left to free. */
    st_code (*init)(kern_backend *b, int32_t *n_threads, void **state, st_err *err);
    /* Frees what init made (state may be NULL); after the last op. */
    void (*free)(void *state);
    /* Waits until every op issued so far has finished, records a failure met meanwhile
     * (kern_backend_fail) and returns its code. NULL: the ops finish before returning. */
    st_code (*sync)(kern_backend *b);
    /* A zeroed buffer of bytes bytes, 64-byte aligned, or NULL with ST_ERR_NOMEM recorded
     * ("buf_alloc: out of memory for ..."). Pointers into it may be passed to any op. */
    void *(*buf_alloc)(kern_backend *b, size_t bytes);
    /* Frees a buf_alloc buffer; NULL is a no-op. */
    void (*buf_free)(kern_backend *b, void *buf);
    /* Host memory that download fills fastest (a device's page-locked memory), or NULL
     * with ST_ERR_NOMEM recorded; freed by host_free. Both NULL: plain malloc and free
     * (kern_host_alloc). */
    void *(*host_alloc)(kern_backend *b, size_t bytes);
    void (*host_free)(kern_backend *b, void *p);
    /* bytes from host memory src to the backend's dst (a buffer or a pointer into one). */
    void (*upload)(kern_backend *b, void *dst, const void *src, size_t bytes);
    /* bytes from the backend's src to host memory dst; the ops before it have finished. */
    void (*download)(kern_backend *b, void *dst, const void *src, size_t bytes);
    /* dst[i] = src[idx[i]] for i < n (src floats in a backend buffer): what n downloads of
     * a float each give, in one copy (a device's round trips are the cost, not bytes). */
    void (*download_at)(kern_backend *b, float *dst, const float *src, const int64_t *idx, int32_t n);
    /* The form of the stored matrix (host memory, e.g. the file mapping, which must
     * outlive the result) that this backend computes with, into *out: the ref backend
     * keeps the stored form, the cpu backend adds its repacked rows (unless flags say
     * KERN_MAT_ROWS_ONLY or KERN_MAT_AS_STORED; a matrix it cannot repack, for want of a
     * packed form or of memory, stays as stored), a device backend uploads. *bytes (when
     * not NULL) gets the bytes of backend memory the prepared form owns. ST_OK, or
     * ST_ERR_NOMEM recorded (*out then needs no release). */
    st_code (*mat_prepare)(kern_backend *b, kern_mat *out, const kern_mat *stored,
                           uint32_t flags, size_t *bytes);
    /* Frees what mat_prepare made for w and clears *w; a cleared w is a no-op. */
    void (*mat_release)(kern_backend *b, kern_mat *w);
    /* KV cache rows: row slot[i] of cache (rows of row_len floats) = row i of x, for
     * i < n_rows (the slots distinct). */
    void (*kv_store)(kern_backend *b, float *cache, int64_t row_len, const int32_t *slot,
                     const float *x, int32_t n_rows);
    /* cache is n_blocks blocks of (n_slots, row_len) floats (every layer's K, then V); in
     * each, the row in slot s moves to slot dst_of_src[s] (-1: dropped), dst_of_src being
     * injective on its used entries; a slot nothing moves to keeps its row. It needs
     * scratch for the rows that move (dst_of_src[s] not -1 nor s; only those are copied):
     * without it nothing moves and ST_ERR_NOMEM is recorded. */
    void (*kv_permute)(kern_backend *b, float *cache, int64_t n_blocks, int32_t n_slots,
                       int64_t row_len, const int32_t *dst_of_src);

    /* ---- compute ---- */
    /* y (n_rows, w->n_out) = x (n_rows, w->n_in) times W transposed. y and x do not alias. */
    void (*matmul)(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows);
    /* matmul of one x by n (1 .. KERN_MATMUL_N) matrices of the same n_in: y[i] = x W[i]
     * transposed, bitwise what n matmul calls give, in one pass where the backend can (the
     * projections that share an input: q, k, v; gate, up). */
    void (*matmul_n)(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                     const float *x, int32_t n_rows);
    /* y (n_rows, w->n_out) = (silu(gate) * up, element-wise) times W transposed, bitwise
     * what swiglu(gate, gate, up) then matmul give; gate's contents are unspecified after
     * it (a backend may form the product as it reads its input: the feed-forward's down
     * projection, one pass and one op fewer). gate and up (n_rows, w->n_in). NULL:
     * kern_matmul_swiglu calls those two. */
    void (*matmul_swiglu)(kern_backend *b, float *y, const kern_mat *w, float *gate,
                          const float *up, int32_t n_rows);
    /* out (n_in) = row `row` of W as float32 (embedding lookup). */
    void (*get_row)(kern_backend *b, float *out, const kern_mat *w, int64_t row);
    /* out (n, n_in) = rows[i] of W (host memory, n of them), the bits n get_row calls give,
     * in one pass (a step's embeddings). NULL: kern_get_rows calls get_row n times. */
    void (*get_rows)(kern_backend *b, float *out, const kern_mat *w, const int32_t *rows,
                     int32_t n);
    /* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w, for n_rows rows of dim; y may equal x. */
    void (*rmsnorm)(kern_backend *b, float *y, const float *x, const float *w, int32_t n_rows,
                    int32_t dim, float eps);
    /* Rotates, in place, the first rope_dim dims of every head of every row by the row's
     * position: pairs (2i, 2i+1) turn by angle pos[r] * theta_i, theta_i = base^(-2i/rope_dim)
     * divided by freq_factors[i] when freq_factors is not NULL (Llama-3 rope scaling).
     * x is (n_rows, n_head * head_dim). */
    void (*rope)(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
                 int32_t head_dim, int32_t rope_dim, float base, const float *freq_factors);
    /* Segment attention, see kern_attn. */
    void (*attention)(kern_backend *b, const kern_attn *a);
    /* For a teaching display: the softmax weights attention gives each row of a over the
     * slots of its segments (q.k * scale, softmax), for query head `head` (< n_head), or
     * their mean over the heads when head < 0. w is host memory: row after row, one
     * weight per slot of the row's segments, in their order. Reads q, k and the
     * segments of a, not v or out. NULL: the backend cannot (a device backend). */
    void (*attn_weights)(kern_backend *b, const kern_attn *a, int32_t head, float *w);
    /* y[i] = silu(gate[i]) * up[i], i < n; y may equal gate. */
    void (*swiglu)(kern_backend *b, float *y, const float *gate, const float *up, int64_t n);
    /* y[i] += x[i], i < n. */
    void (*add)(kern_backend *b, float *y, const float *x, int64_t n);
    /* Softmax of each of n_rows rows of n values, in place. */
    void (*softmax)(kern_backend *b, float *x, int32_t n_rows, int32_t n);
    /* ---- outputs ---- */
    /* y[i] = x[idx[i]], rows of width floats, i < n. y may equal x when idx[i] >= i for
     * every i (rows moved forward in place, as a batch keeps its rows that want logits). */
    void (*gather_rows)(kern_backend *b, float *y, const float *x, const int32_t *idx,
                        int32_t n, int32_t width);
    /* For each of n_rows rows of n values (n >= 1, at least one finite, no NaN): lse[r]
     * its log-sum-exp and, when k > 0, its min(k, n) largest values, largest first, ties to
     * the lower index, as ids[r * k + i] and log-probabilities lp[r * k + i] =
     * kern_logprob(row[id], lse[r]); entries past n get id -1 and lp -INFINITY. ids and lp
     * may be NULL when k is 0. */
    void (*topk_lse)(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                     kern_lse *lse, int32_t *ids, float *lp);

    /* ---- model families beyond llama: Qwen2, Qwen3, Gemma 3 ----
     * A backend without them (NULL) cannot run those architectures; model_ctx_init says
     * so instead of calling them. */
    /* Like rope, but rotating the pairs (i, i + rope_dim / 2) of each head (GPT-NeoX
     * layout: Qwen, Gemma), pair i by angle pos[r] * theta_i as rope defines it. */
    void (*rope_neox)(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                      int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                      const float *freq_factors);
    /* y[r][i] += bias[i] for n_rows rows of dim (the Q, K, V biases of Qwen2). */
    void (*add_bias)(kern_backend *b, float *y, const float *bias, int32_t n_rows, int32_t dim);
    /* y[i] *= s, i < n (Gemma's embeddings times sqrt(n_embd)). */
    void (*scale)(kern_backend *b, float *y, float s, int64_t n);
    /* y[i] = gelu(gate[i]) * up[i], i < n, gelu in its tanh form
     * 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))); y may equal gate. */
    void (*geglu)(kern_backend *b, float *y, const float *gate, const float *up, int64_t n);
    /* gpt-oss's clamped SwiGLU: g = min(gate[i], 7), u = clamp(up[i], -7, 7),
     * y[i] = g sigmoid(1.702 g) (u + 1), i < n (llama.cpp's swiglu_oai with its alpha and
     * limit); y may equal gate. */
    void (*swiglu_oai)(kern_backend *b, float *y, const float *gate, const float *up, int64_t n);
    /* y[i] = cap tanh(y[i] / cap) in float, i < n (final logit soft-capping: Gemma 2 and
     * 4). y is where matmul put the logits: host memory, or a device backend's own. */
    void (*softcap)(kern_backend *b, float *y, float cap, int64_t n);
    /* ---- Qwen3.5 (NULL: the backend cannot run it) ---- */
    /* y[i] *= sigmoid(gate[i]), i < n (the gated attention output). */
    void (*sigmoid_mul)(kern_backend *b, float *y, const float *gate, int64_t n);
    /* Gated DeltaNet rows, see kern_gdn. */
    void (*gdn)(kern_backend *b, const kern_gdn *a);

    /* ---- optional ---- */
    /* The ops from here to the next sync are one forward pass, likely repeated with the
     * same shape (decode steps): a device backend may record their launches and replay
     * them as one graph, with the same results. NULL: nothing to do. */
    void (*step_begin)(kern_backend *b);
} kern_ops;

/* Creates a backend by name ("ref", "cpu") through its ops->init. n_threads <= 0 means
 * one per core. Returns NULL and sets err (ST_ERR_ARG for an unknown name, naming the
 * known ones; what init reported otherwise). Free with kern_backend_free. */
kern_backend *kern_backend_init(const char *name, int32_t n_threads, st_err *err);
/* Frees a backend (its ops->free); NULL is a no-op. Free its buffers and prepared
 * matrices first. */
void kern_backend_free(kern_backend *b);
/* Waits for the ops issued so far (ops->sync) and returns the first failure an op met
 * since the last call (ST_ERR_NOMEM: "matmul: out of memory for 12.0 MiB of scratch (cpu
 * backend)"), copied into err, or ST_OK; then clears it. */
st_code kern_backend_sync(kern_backend *b, st_err *err);
/* The ops of a backend (valid while b lives). */
const kern_ops *kern_backend_ops(const kern_backend *b);
const char *kern_backend_name(const kern_backend *b);
/* bytes of host memory for b's downloads (its host_alloc op, else malloc), or NULL (with
 * ST_ERR_NOMEM recorded by the op); free with kern_host_free (NULL is a no-op). */
void *kern_host_alloc(kern_backend *b, size_t bytes);
void kern_host_free(kern_backend *b, void *p);
/* out (n, w->n_in) = rows rows[0..n) of w: b's get_rows op, else a get_row per row. */
void kern_get_rows(kern_backend *b, float *out, const kern_mat *w, const int32_t *rows, int32_t n);
/* y = (silu(gate) * up) W^T: b's matmul_swiglu op, else swiglu into gate then matmul. */
void kern_matmul_swiglu(kern_backend *b, float *y, const kern_mat *w, float *gate, const float *up,
                        int32_t n_rows);
int32_t kern_backend_threads(const kern_backend *b);

/* Backend tables; each backend's file defines one. */
extern const kern_ops kern_ref_ops;
extern const kern_ops kern_cpu_ops;
/* kernels/cuda/backend.cu: only in builds linked with it (backend.c refers to it weakly). */
extern const kern_ops kern_cuda_ops;

#endif
