/* gdn.c - the CPU backend's Gated DeltaNet (kern_gdn) and sigmoid gate. Rows run in
 * order (a row may continue the state the row before it left); within a row the value
 * heads are independent and go to the pool, each head's sums in one fixed order (over the
 * key dims, a vector of value dims at a time), so a row's result is the same bits
 * whatever the thread count or the rows around it. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "simd.h"

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void cpu_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) y[i] = y[i] / (1.0f + expf(-gate[i]));
}

typedef struct gdn_job {
    const kern_gdn *a;
    int32_t r;
    const float *x;  /* the row's conv output, q and k normalised */
    float *S;        /* the row's cell's matrices */
} gdn_job;

/* S *= decay, and d = S^T k (d[j] = sum over i of S[i][j] k[i], i in order). */
static void decay_sk(float *S, const float *k, float decay, float *d, int32_t n) {
    const vf vd = vf_set1(decay);
    int32_t j0 = 0;
    for (; j0 + VF_N <= n; j0 += VF_N) {
        vf acc = vf_zero();
        for (int32_t i = 0; i < n; i++) {
            const vf s = vf_mul(vf_load(S + (int64_t)i * n + j0), vd);
            vf_store(S + (int64_t)i * n + j0, s);
            acc = vf_fma(s, vf_set1(k[i]), acc);
        }
        vf_store(d + j0, acc);
    }
    for (; j0 < n; j0++) {
        float acc = 0.0f;
        for (int32_t i = 0; i < n; i++) {
            S[(int64_t)i * n + j0] *= decay;
            acc = fmaf(S[(int64_t)i * n + j0], k[i], acc);
        }
        d[j0] = acc;
    }
}

/* S += k d^T, and o = S^T q. */
static void update_sq(float *S, const float *k, const float *q, const float *d, float *o,
                      int32_t n) {
    int32_t j0 = 0;
    for (; j0 + VF_N <= n; j0 += VF_N) {
        const vf vd = vf_load(d + j0);
        vf acc = vf_zero();
        for (int32_t i = 0; i < n; i++) {
            const vf s = vf_fma(vf_set1(k[i]), vd, vf_load(S + (int64_t)i * n + j0));
            vf_store(S + (int64_t)i * n + j0, s);
            acc = vf_fma(s, vf_set1(q[i]), acc);
        }
        vf_store(o + j0, acc);
    }
    for (; j0 < n; j0++) {
        float acc = 0.0f;
        for (int32_t i = 0; i < n; i++) {
            S[(int64_t)i * n + j0] = fmaf(k[i], d[j0], S[(int64_t)i * n + j0]);
            acc = fmaf(S[(int64_t)i * n + j0], q[i], acc);
        }
        o[j0] = acc;
    }
}

/* Value head h of the job's row (kern.h's formula). */
static void gdn_head(void *ctx, int32_t h, int32_t thread) {
    (void)thread;
    const gdn_job *j = ctx;
    const kern_gdn *a = j->a;
    const int32_t n = a->d_state, HK = a->n_k_heads, HV = a->n_v_heads, r = j->r;
    const float *q = j->x + (int64_t)(h % HK) * n, *k = q + (int64_t)HK * n;
    const float *v = j->x + 2 * (int64_t)HK * n + (int64_t)h * n;
    float *S = j->S + (int64_t)h * n * n, d[KERN_GDN_MAX_STATE], o[KERN_GDN_MAX_STATE];
    const float decay = expf(softplus(a->alpha[(int64_t)r * HV + h] + a->dt_bias[h]) * a->a[h]);
    const float beta = 1.0f / (1.0f + expf(-a->beta[(int64_t)r * HV + h]));
    decay_sk(S, k, decay, d, n);
    for (int32_t jj = 0; jj < n; jj++) d[jj] = beta * (v[jj] - d[jj]);
    update_sq(S, k, q, d, o, n);
    float ss = 0.0f;
    for (int32_t jj = 0; jj < n; jj++) ss += o[jj] * o[jj];
    const float f = 1.0f / sqrtf(ss / (float)n + a->eps);
    const float *z = a->z + (int64_t)r * HV * n + (int64_t)h * n;
    float *out = a->out + (int64_t)r * HV * n + (int64_t)h * n;
    for (int32_t jj = 0; jj < n; jj++) out[jj] = o[jj] * f * a->norm_w[jj] * silu(z[jj]);
}

/* The conv, its SiLU and the window's move over row x; then q and k normalised. */
static void gdn_conv(const kern_gdn *a, float *x, float *win) {
    const int64_t cd = kern_gdn_conv_dim(a);
    const int32_t K = a->conv_k, n = a->d_state;
    for (int64_t c = 0; c < cd; c++) {
        const float *w = a->conv_w + c * K;
        float s = w[K - 1] * x[c];
        for (int32_t k = 0; k < K - 1; k++) s += w[k] * win[k * cd + c];
        for (int32_t k = 0; k + 1 < K - 1; k++) win[k * cd + c] = win[(k + 1) * cd + c];
        if (K > 1) win[(K - 2) * cd + c] = x[c];
        x[c] = silu(s);
    }
    for (int32_t h = 0; h < 2 * a->n_k_heads; h++) {
        float *v = x + (int64_t)h * n, ss = 0.0f;
        for (int32_t i = 0; i < n; i++) ss += v[i] * v[i];
        const float f = (h < a->n_k_heads ? 1.0f / sqrtf((float)n) : 1.0f) / sqrtf(ss + a->eps);
        for (int32_t i = 0; i < n; i++) v[i] *= f;
    }
}

void cpu_gdn(kern_backend *b, const kern_gdn *a) {
    const int64_t cd = kern_gdn_conv_dim(a), cf = kern_gdn_cell_floats(a);
    for (int32_t r = 0; r < a->n_rows; r++) {
        float *cell = a->cells + (int64_t)a->cell_out[r] * cf, *x = a->qkv + r * cd;
        if (a->cell_in[r] < 0) memset(cell, 0, sizeof(float) * (size_t)cf);
        else if (a->cell_in[r] != a->cell_out[r])
            memcpy(cell, a->cells + (int64_t)a->cell_in[r] * cf, sizeof(float) * (size_t)cf);
        gdn_conv(a, x, cell);
        gdn_job j = {.a = a, .r = r, .x = x, .S = cell + (a->conv_k - 1) * cd};
        pool_run(cpu_pool(b), a->n_v_heads, gdn_head, &j);
    }
}
