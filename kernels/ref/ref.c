/* ref.c - kern_ref_ops: the reference backend, plain scalar C written to be obviously
 * right rather than fast. It is the oracle tests compare every other backend with, so
 * each op follows its contract in kern.h literally: weights are dequantised with
 * dtype_dequantize_row, sums are taken in double, attention is two passes (scores,
 * then softmax and the weighted sum of values), and rope angles are computed in
 * double. Single-threaded and stateless: an op allocates what it needs per call, and
 * memory is host memory (the host buffers and KV ops of backend.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

static st_code ref_init(kern_backend *b, int32_t *n_threads, void **state, st_err *err) {
    (void)b, (void)err;
    *n_threads = 1; /* the oracle stays simple: one thread, fixed summation order */
    *state = NULL;
    return ST_OK;
}

static void ref_free(void *state) { (void)state; }

/* Memory an op needs; NULL when it runs out (recorded naming op: the op then returns). */
static void *ref_alloc(kern_backend *b, const char *op, const char *what, size_t bytes) {
    return kern_backend_alloc(b, op, what, bytes ? bytes : 1);
}

/* The ref backend computes with the stored form itself. */
static st_code ref_mat_prepare(kern_backend *b, kern_mat *out, const kern_mat *stored,
                               uint32_t flags, size_t *bytes) {
    (void)b, (void)flags;
    *out = *stored;
    out->packed = NULL;
    if (bytes) *bytes = 0;
    return ST_OK;
}

static void ref_mat_release(kern_backend *b, kern_mat *w) {
    (void)b;
    *w = (kern_mat){0};
}

static void ref_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x,
                       int32_t n_rows) {
    const size_t row_bytes = dtype_row_bytes(w->type, w->n_in);
    float *wrow = ref_alloc(b, "matmul", "a weight row", (size_t)w->n_in * sizeof *wrow);
    if (!wrow) return;
    for (int64_t o = 0; o < w->n_out; o++) {
        bool ok = dtype_dequantize_row(w->type, (const char *)w->data + o * row_bytes, wrow,
                                       w->n_in);
        ASSERT(ok);
        for (int32_t r = 0; r < n_rows; r++) {
            const float *xr = x + (int64_t)r * w->n_in;
            double s = 0;
            for (int64_t i = 0; i < w->n_in; i++) s += (double)wrow[i] * xr[i];
            y[(int64_t)r * w->n_out + o] = (float)s;
        }
    }
    free(wrow);
}

static void ref_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                         const float *x, int32_t n_rows) {
    for (int32_t i = 0; i < n; i++) ref_matmul(b, y[i], w[i], x, n_rows);
}

static void ref_get_row(kern_backend *b, float *out, const kern_mat *w, int64_t row) {
    (void)b;
    const size_t row_bytes = dtype_row_bytes(w->type, w->n_in);
    bool ok = dtype_dequantize_row(w->type, (const char *)w->data + row * row_bytes, out,
                                   w->n_in);
    ASSERT(ok);
}

static void ref_rmsnorm(kern_backend *b, float *y, const float *x, const float *w,
                        int32_t n_rows, int32_t dim, float eps) {
    (void)b;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (int64_t)r * dim;
        float *yr = y + (int64_t)r * dim;
        double ss = 0;
        for (int32_t i = 0; i < dim; i++) ss += (double)xr[i] * xr[i];
        double scale = 1.0 / sqrt(ss / dim + eps);
        for (int32_t i = 0; i < dim; i++) yr[i] = (float)(xr[i] * scale * w[i]);
    }
}

/* Pair i of each head is (v[i * step], v[i * step + off]): (2i, 2i + 1) for rope, (i, i +
 * rope_dim / 2) for rope_neox. */
static void rope_pairs(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head,
                       int32_t head_dim, int32_t rope_dim, float base, const float *freq_factors,
                       int32_t step, int32_t off) {
    for (int32_t r = 0; r < n_rows; r++) {
        for (int32_t h = 0; h < n_head; h++) {
            float *v = x + ((int64_t)r * n_head + h) * head_dim;
            for (int32_t i = 0; i < rope_dim / 2; i++) {
                double theta = pow((double)base, -2.0 * i / rope_dim);
                if (freq_factors) theta /= freq_factors[i];
                double ang = (double)pos[r] * theta;
                double c = cos(ang), s = sin(ang);
                double x0 = v[i * step], x1 = v[i * step + off];
                v[i * step] = (float)(x0 * c - x1 * s);
                v[i * step + off] = (float)(x0 * s + x1 * c);
            }
        }
    }
}

static void ref_rope(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                     int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                     const float *freq_factors) {
    (void)b;
    rope_pairs(x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, 2, 1);
}

static void ref_rope_neox(kern_backend *b, float *x, const int32_t *pos, int32_t n_rows,
                          int32_t n_head, int32_t head_dim, int32_t rope_dim, float base,
                          const float *freq_factors) {
    (void)b;
    rope_pairs(x, pos, n_rows, n_head, head_dim, rope_dim, base, freq_factors, 1, rope_dim / 2);
}

static void ref_attention(kern_backend *b, const kern_attn *a) {
    const int32_t hd = a->head_dim, n_rep = a->n_head / a->n_head_kv;
    const int64_t q_stride = (int64_t)a->n_head * hd, kv_stride = (int64_t)a->n_head_kv * hd;
    int64_t most = 0; /* the most slots a row attends to */
    for (int32_t r = 0; r < a->n_rows; r++) {
        int64_t n_slots = 0;
        for (int32_t s = a->seg_off[r]; s < a->seg_off[r + 1]; s++) n_slots += a->segs[s].len;
        if (n_slots > most) most = n_slots;
    }
    double *acc = ref_alloc(b, "attention", "a row's sums", (size_t)hd * sizeof *acc);
    double *score = acc ? ref_alloc(b, "attention", "a row's scores", (size_t)most * sizeof *score)
                        : NULL;
    if (!score) {
        free(acc);
        return;
    }
    for (int32_t r = 0; r < a->n_rows; r++) {
        for (int32_t h = 0; h < a->n_head; h++) {
            const int64_t kv_off = (int64_t)(h / n_rep) * hd;
            /* pass 1: scores and their maximum */
            const double ms = kern_host_attn_scores(a, r, h, score);
            const double mx = a->sinks && a->sinks[h] > ms ? a->sinks[h] : ms;
            /* pass 2: softmax weights and the weighted sum of values */
            double sum = 0;
            memset(acc, 0, (size_t)hd * sizeof *acc);
            int64_t j = 0;
            for (int32_t s = a->seg_off[r]; s < a->seg_off[r + 1]; s++) {
                for (int32_t t = 0; t < a->segs[s].len; t++, j++) {
                    const float *v = a->v + (int64_t)(a->segs[s].start + t) * kv_stride + kv_off;
                    double p = exp(score[j] - mx);
                    sum += p;
                    for (int32_t i = 0; i < hd; i++) acc[i] += p * v[i];
                }
            }
            if (a->sinks) sum += exp(a->sinks[h] - mx);
            float *out = a->out + r * q_stride + (int64_t)h * hd;
            for (int32_t i = 0; i < hd; i++) out[i] = sum > 0 ? (float)(acc[i] / sum) : 0.0f;
        }
    }
    free(score);
    free(acc);
}

static void ref_swiglu(kern_backend *b, float *y, const float *gate, const float *up,
                       int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        y[i] = (float)(g / (1.0 + exp(-g)) * up[i]);
    }
}

static void ref_swiglu_oai(kern_backend *b, float *y, const float *gate, const float *up,
                           int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) {
        const double g = gate[i] < 7.0f ? gate[i] : 7.0, u = up[i] < -7.0f ? -7.0 : up[i] > 7.0f ? 7.0 : up[i];
        y[i] = (float)(g / (1.0 + exp(-1.702 * g)) * (u + 1.0));
    }
}

static void ref_add(kern_backend *b, float *y, const float *x, int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void ref_geglu(kern_backend *b, float *y, const float *gate, const float *up,
                      int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) {
        double g = gate[i];
        y[i] = (float)(0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) *
                       up[i]);
    }
}

static void ref_add_bias(kern_backend *b, float *y, const float *bias, int32_t n_rows,
                         int32_t dim) {
    (void)b;
    for (int32_t r = 0; r < n_rows; r++)
        for (int32_t i = 0; i < dim; i++) y[(int64_t)r * dim + i] += bias[i];
}

static void ref_scale(kern_backend *b, float *y, float s, int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) y[i] *= s;
}

static void ref_softcap(kern_backend *b, float *y, float cap, int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) y[i] = cap * tanhf(y[i] / cap);
}

static void ref_softmax(kern_backend *b, float *x, int32_t n_rows, int32_t n) {
    (void)b;
    for (int32_t r = 0; r < n_rows; r++) {
        float *xr = x + (int64_t)r * n;
        double mx = -INFINITY, sum = 0;
        for (int32_t i = 0; i < n; i++)
            if (xr[i] > mx) mx = xr[i];
        for (int32_t i = 0; i < n; i++) sum += exp(xr[i] - mx);
        for (int32_t i = 0; i < n; i++) xr[i] = (float)(exp(xr[i] - mx) / sum);
    }
}

/* The log-sum-exp in double with libm's exp, then the top k by repeated selection of
 * the largest value not yet taken (the first on ties): O(n k), plain to check. */
static void ref_topk_lse(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                         kern_lse *lse, int32_t *ids, float *lp) {
    bool *taken = ref_alloc(b, "topk_lse", "a row's taken flags", (size_t)n * sizeof *taken);
    if (!taken) return;
    for (int32_t r = 0; r < n_rows; r++) {
        const float *xr = x + (size_t)r * n;
        float mx = xr[0];
        for (int32_t i = 1; i < n; i++)
            if (xr[i] > mx) mx = xr[i];
        double sum = 0;
        for (int32_t i = 0; i < n; i++) sum += exp((double)(xr[i] - mx));
        lse[r] = (kern_lse){mx, log(sum)};
        memset(taken, 0, (size_t)n * sizeof *taken);
        for (int32_t j = 0; j < k; j++) {
            int32_t best = -1;
            for (int32_t i = 0; i < n; i++)
                if (!taken[i] && (best < 0 || xr[i] > xr[best])) best = i;
            ids[(size_t)r * k + j] = best;
            lp[(size_t)r * k + j] = best < 0 ? -INFINITY : kern_logprob(xr[best], lse[r]);
            if (best >= 0) taken[best] = true;
        }
    }
    free(taken);
}

const kern_ops kern_ref_ops = {
    .name = "ref",
    .init = ref_init,
    .free = ref_free,
    .buf_alloc = kern_host_buf_alloc,
    .buf_free = kern_host_buf_free,
    .upload = kern_host_copy,
    .download = kern_host_copy,
    .download_at = kern_host_download_at,
    .mat_prepare = ref_mat_prepare,
    .mat_release = ref_mat_release,
    .kv_store = kern_host_kv_store,
    .kv_permute = kern_host_kv_permute,
    .matmul = ref_matmul,
    .matmul_n = ref_matmul_n,
    .get_row = ref_get_row,
    .rmsnorm = ref_rmsnorm,
    .rope = ref_rope,
    .attention = ref_attention,
    .attn_weights = kern_host_attn_weights,
    .swiglu = ref_swiglu,
    .add = ref_add,
    .softmax = ref_softmax,
    .gather_rows = kern_host_gather_rows,
    .topk_lse = ref_topk_lse,
    .rope_neox = ref_rope_neox,
    .add_bias = ref_add_bias,
    .scale = ref_scale,
    .softcap = ref_softcap,
    .geglu = ref_geglu,
    .swiglu_oai = ref_swiglu_oai,
    .sigmoid_mul = ref_sigmoid_mul,
    .gdn = ref_gdn,
};
