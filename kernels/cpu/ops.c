/* ops.c - kern_cpu_ops: the CPU backend's table and its small ops (get_row, rmsnorm,
 * rope and rope_neox, swiglu and geglu, add, add_bias, scale, softmax). matmul.c and attn.c hold the two big ones.
 *
 * The small ops are vectorised with simd.h and run on the calling thread unless the
 * input is large enough (SMALL_OP_PAR elements) to repay a trip through the pool; in a
 * decode step they touch a few KB each, far below that. Rope takes its sines and cosines
 * from a table the backend keeps (cpu_rope_table), computed once per pass. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

#define SMALL_OP_PAR (1 << 16)   /* elements from which an elementwise op uses the pool */

static void cpu_get_row(kern_backend *b, float *out, const kern_mat *w, int64_t row) {
    (void)b;
    const size_t row_bytes = dtype_row_bytes(w->type, w->n_in);
    bool ok = dtype_dequantize_row(w->type, (const char *)w->data + row * row_bytes, out,
                                   w->n_in);
    ASSERT(ok);
}

/* ---- rows: rmsnorm, softmax ---- */

typedef struct row_job {
    float *y;
    const float *x, *w;
    int32_t n_rows, dim;
    float eps;
} row_job;

/* Runs fn over rows (j its context), in the pool when there are many elements. */
static void rows_run(kern_backend *b, int32_t n_rows, int32_t dim, pool_fn fn, void *j) {
    if ((int64_t)n_rows * dim >= SMALL_OP_PAR && n_rows > 1)
        pool_run(cpu_pool(b), n_rows, fn, j);
    else
        for (int32_t r = 0; r < n_rows; r++) fn(j, r, 0);
}

static void rmsnorm_row(void *ctx, int32_t r, int32_t thread) {
    (void)thread;
    const row_job *j = ctx;
    const float *x = j->x + (int64_t)r * j->dim;
    float *y = j->y + (int64_t)r * j->dim;
    const float ss = simd_dot(x, x, j->dim);
    const float scale = 1.0f / sqrtf(ss / (float)j->dim + j->eps);
    const vf vs = vf_set1(scale);
    int32_t i = 0;
    for (; i + VF_N <= j->dim; i += VF_N)
        vf_store(y + i, vf_mul(vf_mul(vf_load(x + i), vs), vf_load(j->w + i)));
    for (; i < j->dim; i++) y[i] = x[i] * scale * j->w[i];
}

static void cpu_rmsnorm(kern_backend *b, float *y, const float *x, const float *w,
                        int32_t n_rows, int32_t dim, float eps) {
    row_job j = {.y = y, .x = x, .w = w, .n_rows = n_rows, .dim = dim, .eps = eps};
    rows_run(b, n_rows, dim, rmsnorm_row, &j);
}

static void softmax_row(void *ctx, int32_t r, int32_t thread) {
    (void)thread;
    const row_job *j = ctx;
    float *x = j->y + (int64_t)r * j->dim;
    const int32_t n = j->dim;
    const float sum = simd_exp_sum(x, n, simd_max(x, n));
    simd_scale(x, 1.0f / sum, n);
}

static void cpu_softmax(kern_backend *b, float *x, int32_t n_rows, int32_t n) {
    row_job j = {.y = x, .n_rows = n_rows, .dim = n};
    rows_run(b, n_rows, n, softmax_row, &j);
}

/* ---- rope ---- */

typedef struct rope_job {
    float *x;
    const float *cs;        /* cpu_rope_table */
    int32_t n_head, head_dim, rope_dim;
} rope_job;

/* Row r's heads turned by the table's angles: x * C - swap(x) * S, pairs (2i, 2i + 1) to
 * (x0 c - x1 s, x1 c + x0 s), each product rounded before the difference. */
static void rope_row(void *ctx, int32_t r, int32_t thread) {
    (void)thread;
    const rope_job *j = ctx;
    const int32_t rd = j->rope_dim;
    const float *c = j->cs + (size_t)2 * rd * r, *s = c + rd;
    for (int32_t h = 0; h < j->n_head; h++) {
        float *v = j->x + ((int64_t)r * j->n_head + h) * j->head_dim;
        int32_t i = 0;
#if VF_N > 1
        for (; i + VF_N <= rd; i += VF_N) {
            const vf x = vf_load(v + i);
            const vf xc = vf_mul(x, vf_load(c + i)), ys = vf_mul(vf_swap_pairs(x), vf_load(s + i));
            vf_store(v + i, vf_sub(xc, ys));
        }
#endif
        for (; i < rd; i += 2) {
            const float x0 = v[i], x1 = v[i + 1];
            v[i] = x0 * c[i] - x1 * s[i];
            v[i + 1] = x1 * c[i + 1] - x0 * s[i + 1];
        }
    }
}

/* The NeoX layout: pair i is (i, i + rope_dim / 2), turned by the same table's angle i
 * (C[2i], S[2i]) with the same rounding as rope_row. */
static void rope_neox_row(void *ctx, int32_t r, int32_t thread) {
    (void)thread;
    const rope_job *j = ctx;
    const int32_t rd = j->rope_dim, half = rd / 2;
    const float *c = j->cs + (size_t)2 * rd * r, *s = c + rd;
    for (int32_t h = 0; h < j->n_head; h++) {
        float *v = j->x + ((int64_t)r * j->n_head + h) * j->head_dim;
        for (int32_t i = 0; i < half; i++) {
            const float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * c[2 * i] - x1 * s[2 * i];
            v[i + half] = x1 * c[2 * i + 1] - x0 * s[2 * i + 1];
        }
    }
}

static void rope_any(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                     int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                     const float *freq_factors, pool_fn row_fn) {
    ASSERT(rope_dim <= KERN_ROPE_MAX_DIM && rope_dim <= head_dim && rope_dim % 2 == 0);
    if (n_rows <= 0 || rope_dim == 0) return;
    /* the sines come from the backend's table, shared by q, k and every layer of a pass */
    rope_job j = {x, cpu_rope_table(b, pos, n_rows, base, rope_dim, freq_factors), n_head,
                  head_dim, rope_dim};
    if (j.cs) rows_run(b, n_rows, n_head * rope_dim, row_fn, &j); /* else recorded */
}

static void cpu_rope(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                     int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                     const float *freq_factors) {
    rope_any(b, x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, rope_row);
}

static void cpu_rope_neox(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                          int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                          const float *freq_factors) {
    rope_any(b, x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, rope_neox_row);
}

/* ---- elementwise: swiglu, geglu, add, scale ---- */

typedef struct ew_job {
    float *y;
    const float *a, *b;
    int64_t n, per_task;
    bool b_whole;           /* b is one value for every span, not an array */
    void (*fn)(float *y, const float *a, const float *b, int64_t n);
} ew_job;

static inline vf swiglu_vf(vf g, vf u) {
    return vf_mul(vf_div(g, vf_add(vf_set1(1.0f), vf_exp(vf_sub(vf_zero(), g)))), u);
}

/* gelu(g) u in its tanh form: 0.5 (1 + tanh(z)) = 1 / (1 + e^(-2z)), so g times that. */
static inline vf geglu_vf(vf g, vf u) {
    const vf z2 = vf_mul(vf_mul(vf_set1(2.0f * 0.7978845608f), g),
                         vf_add(vf_set1(1.0f), vf_mul(vf_set1(0.044715f), vf_mul(g, g))));
    return vf_mul(vf_div(g, vf_add(vf_set1(1.0f), vf_exp(vf_sub(vf_zero(), z2)))), u);
}

/* The tail goes through the same vector code (padded), never through expf: an element's
 * value must not depend on where it falls in the array, or a row's result would depend on
 * the other rows of its batch (see the bitwise forest test). */
#define GATED_SPAN(name, fn)                                                               \
    static void name(float *y, const float *g, const float *u, int64_t n) {                \
        int64_t i = 0;                                                                     \
        for (; i + VF_N <= n; i += VF_N) vf_store(y + i, fn(vf_load(g + i), vf_load(u + i))); \
        if (i < n) {                                                                       \
            _Alignas(64) float gt[VF_N] = {0}, ut[VF_N] = {0}, yt[VF_N];                   \
            memcpy(gt, g + i, sizeof(float) * (size_t)(n - i));                            \
            memcpy(ut, u + i, sizeof(float) * (size_t)(n - i));                            \
            vf_store(yt, fn(vf_load(gt), vf_load(ut)));                                    \
            memcpy(y + i, yt, sizeof(float) * (size_t)(n - i));                            \
        }                                                                                  \
    }
/* gpt-oss's clamped SwiGLU (kern.h): min(g, 7) sigmoid(1.702 min(g, 7)) (clamp(u) + 1). */
static inline vf swiglu_oai_vf(vf g, vf u) {
    const vf lim = vf_set1(7.0f), x = vf_min(g, lim);
    const vf y = vf_max(vf_min(u, lim), vf_sub(vf_zero(), lim));
    const vf glu = vf_div(x, vf_add(vf_set1(1.0f), vf_exp(vf_mul(vf_set1(-1.702f), x))));
    return vf_mul(glu, vf_add(y, vf_set1(1.0f)));
}

GATED_SPAN(swiglu_span, swiglu_vf)
GATED_SPAN(geglu_span, geglu_vf)
GATED_SPAN(swiglu_oai_span, swiglu_oai_vf)
#undef GATED_SPAN

static void add_span(float *y, const float *x, const float *unused, int64_t n) {
    (void)unused;
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) vf_store(y + i, vf_add(vf_load(y + i), vf_load(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

/* y[i] *= *s: the factor comes through the b pointer of the elementwise skeleton. */
static void scale_span(float *y, const float *unused, const float *s, int64_t n) {
    (void)unused;
    const vf vs = vf_set1(*s);
    int64_t i = 0;
    for (; i + VF_N <= n; i += VF_N) vf_store(y + i, vf_mul(vf_load(y + i), vs));
    for (; i < n; i++) y[i] *= *s;
}

/* (ref's expression, value by value: the same bits) */
static void softcap_span(float *y, const float *unused, const float *cap, int64_t n) {
    (void)unused;
    for (int64_t i = 0; i < n; i++) y[i] = *cap * tanhf(y[i] / *cap);
}

static void ew_task(void *ctx, int32_t t, int32_t thread) {
    (void)thread;
    const ew_job *j = ctx;
    int64_t i0 = t * j->per_task, n = j->n - i0 < j->per_task ? j->n - i0 : j->per_task;
    j->fn(j->y + i0, j->a ? j->a + i0 : NULL, j->b && !j->b_whole ? j->b + i0 : j->b, n);
}

static void ew_run(kern_backend *b, ew_job *j) {
    pool *p = cpu_pool(b);
    if (j->n < SMALL_OP_PAR || pool_threads(p) == 1) {
        j->fn(j->y, j->a, j->b, j->n);
        return;
    }
    /* spans of whole cache lines */
    int64_t per = (j->n + 4 * pool_threads(p) - 1) / (4 * pool_threads(p));
    j->per_task = (per + 15) & ~(int64_t)15;
    pool_run(p, (int32_t)((j->n + j->per_task - 1) / j->per_task), ew_task, j);
}

static void cpu_swiglu(kern_backend *b, float *y, const float *gate, const float *up,
                       int64_t n) {
    ew_job j = {.y = y, .a = gate, .b = up, .n = n, .fn = swiglu_span};
    ew_run(b, &j);
}

static void cpu_add(kern_backend *b, float *y, const float *x, int64_t n) {
    ew_job j = {.y = y, .a = x, .b = NULL, .n = n, .fn = add_span};
    ew_run(b, &j);
}

static void cpu_geglu(kern_backend *b, float *y, const float *gate, const float *up,
                      int64_t n) {
    ew_job j = {.y = y, .a = gate, .b = up, .n = n, .fn = geglu_span};
    ew_run(b, &j);
}

static void cpu_swiglu_oai(kern_backend *b, float *y, const float *gate, const float *up,
                           int64_t n) {
    ew_job j = {.y = y, .a = gate, .b = up, .n = n, .fn = swiglu_oai_span};
    ew_run(b, &j);
}

static void cpu_scale(kern_backend *b, float *y, float s, int64_t n) {
    ew_job j = {.y = y, .a = NULL, .b = &s, .b_whole = true, .n = n, .fn = scale_span};
    ew_run(b, &j);
}

static void cpu_softcap(kern_backend *b, float *y, float cap, int64_t n) {
    ew_job j = {.y = y, .a = NULL, .b = &cap, .b_whole = true, .n = n, .fn = softcap_span};
    ew_run(b, &j);
}

/* Row by row: the bias is short (one head group) and the rows few. */
static void cpu_add_bias(kern_backend *b, float *y, const float *bias, int32_t n_rows,
                         int32_t dim) {
    (void)b;
    for (int32_t r = 0; r < n_rows; r++) add_span(y + (int64_t)r * dim, bias, NULL, dim);
}

const kern_ops kern_cpu_ops = {
    .name = "cpu",
    .init = cpu_init,
    .free = cpu_free,
    .buf_alloc = kern_host_buf_alloc,
    .buf_free = kern_host_buf_free,
    .upload = kern_host_copy,
    .download = kern_host_copy,
    .download_at = kern_host_download_at,
    .mat_prepare = cpu_mat_prepare,
    .mat_release = cpu_mat_release,
    .kv_store = kern_host_kv_store,
    .kv_permute = kern_host_kv_permute,
    .matmul = cpu_matmul,
    .matmul_n = cpu_matmul_n,
    .get_row = cpu_get_row,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .attn_weights = kern_host_attn_weights,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .softmax = cpu_softmax,
    .gather_rows = kern_host_gather_rows,
    .topk_lse = cpu_topk_lse,
    .rope_neox = cpu_rope_neox,
    .add_bias = cpu_add_bias,
    .scale = cpu_scale,
    .softcap = cpu_softcap,
    .geglu = cpu_geglu,
    .swiglu_oai = cpu_swiglu_oai,
    .sigmoid_mul = cpu_sigmoid_mul,
    .gdn = cpu_gdn,
};
