/* kern.h - the compute ops table: one set of functions, one implementation per backend.
 *
 * Backends: "ref" (kernels/ref: plain scalar C, written to be obviously right; the
 * oracle every other backend is tested against) and "cpu" (kernels/cpu: SIMD and a
 * thread pool). A backend is picked at run time by name; every op has the same
 * contract in every backend, up to floating-point summation order.
 *
 * Layout conventions: activations are float32, row-major, one row per batch row
 * (a "row" is one token of the batch). A weight matrix W is (n_out, n_in) row-major
 * in its storage type, as GGUF stores it (ggml ne[0] = n_in, ne[1] = n_out), and
 * matmul computes y[r][o] = sum_i W[o][i] * x[r][i].
 *
 * This header knows nothing about models, forests or files. */
#ifndef MD_KERN_H
#define MD_KERN_H

#include <stdint.h>

#include "dtype.h"
#include "base/status.h"

typedef struct kern_mat {
    uint32_t type;      /* DT_* weight type */
    int64_t n_out;      /* rows of W */
    int64_t n_in;       /* columns of W (a multiple of the type's block) */
    const void *data;   /* n_out rows of dtype_row_bytes(type, n_in) bytes; borrowed */
    const void *packed; /* NULL, or kern_mat_pack's copy of data, which the cpu backend
                           multiplies instead (results within float rounding of the
                           stored form's, each row the same bits in any batch);
                           borrowed */
} kern_mat;

/* The rows of w repacked once for the cpu backend's matmul (kernels/cpu/matmul_pk.c): a
 * malloc'd buffer (free it with free) to set as w->packed, or NULL where this build's cpu
 * backend has no packed form for w's type or memory runs out (w then works as stored).
 * Its size goes to *bytes when not NULL. Every other op, and the ref backend, read data. */
void *kern_mat_pack(const kern_mat *w, size_t *bytes);

/* A run of contiguous KV-cache slots [start, start + len). */
typedef struct kern_seg {
    int32_t start;
    int32_t len;
} kern_seg;

/* Attention of a batch of rows over KV-cache slot segments (one layer).
 * Row r attends to the slots of segs[seg_off[r]] .. segs[seg_off[r + 1] - 1], in the
 * order given (the softmax does not depend on it); the segments of a row must not
 * overlap. Heads are grouped: query head h reads KV head h / (n_head / n_head_kv). */
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
} kern_attn;

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

typedef struct kern_ops {
    const char *name;
    /* y (n_rows, w->n_out) = x (n_rows, w->n_in) times W transposed. y and x do not alias. */
    void (*matmul)(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows);
    /* matmul of one x by n (1 .. KERN_MATMUL_N) matrices of the same n_in: y[i] = x W[i]
     * transposed, bitwise what n matmul calls give, in one pass where the backend can (the
     * projections that share an input: q, k, v; gate, up). */
    void (*matmul_n)(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                     const float *x, int32_t n_rows);
    /* out (n_in) = row `row` of W as float32 (embedding lookup). */
    void (*get_row)(kern_backend *b, float *out, const kern_mat *w, int64_t row);
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
} kern_ops;

/* Creates a backend by name ("ref", "cpu"). n_threads <= 0 means one per core.
 * Returns NULL and sets err (ST_ERR_ARG for an unknown name, ST_ERR_BACKEND when
 * threads cannot start). Free with kern_backend_free. */
kern_backend *kern_backend_init(const char *name, int32_t n_threads, st_err *err);
/* Frees a backend; NULL is a no-op. */
void kern_backend_free(kern_backend *b);
/* The first failure an op met since the last call, or ST_OK; resets it. The ops have no
 * error path of their own: one that cannot get memory (its scratch, the rope table)
 * records ST_ERR_NOMEM with a message (copied into err) and returns without writing its
 * output, so the caller asks after a pass and discards what the pass wrote. */
st_code kern_backend_take_error(kern_backend *b, st_err *err);
/* The ops of a backend (valid while b lives). */
const kern_ops *kern_backend_ops(const kern_backend *b);
const char *kern_backend_name(const kern_backend *b);
int32_t kern_backend_threads(const kern_backend *b);
/* Calls fn(ctx, task, thread) for every task in [0, n_tasks) on the backend's threads (the
 * caller's among them; thread < kern_backend_threads(b), unique among tasks running at
 * once) and returns when all are done: for work beside the ops that splits into
 * independent tasks (a step's per-row top-k). fn must not call back into b. */
void kern_backend_parallel(kern_backend *b, int32_t n_tasks,
                           void (*fn)(void *ctx, int32_t task, int32_t thread), void *ctx);

/* Backend tables; each backend's file defines one. */
extern const kern_ops kern_ref_ops;
extern const kern_ops kern_cpu_ops;

#endif
