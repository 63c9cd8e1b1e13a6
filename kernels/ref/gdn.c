/* gdn.c - the reference Gated DeltaNet (kern_gdn) and the sigmoid gate, written as
 * kern.h states them: one row after another, one value head after another, sums in
 * double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

static double silu(double x) { return x / (1.0 + exp(-x)); }
static double softplus(double x) { return x > 20.0 ? x : log1p(exp(x)); }

void ref_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n) {
    (void)b;
    for (int64_t i = 0; i < n; i++) y[i] = (float)(y[i] / (1.0 + exp(-(double)gate[i])));
}

/* The cell row r computes in, made from cell_in[r] as kern_gdn says. */
static float *row_cell(const kern_gdn *a, int32_t r) {
    const int64_t cf = kern_gdn_cell_floats(a);
    float *c = a->cells + (int64_t)a->cell_out[r] * cf;
    if (a->cell_in[r] < 0) memset(c, 0, sizeof(float) * (size_t)cf);
    else if (a->cell_in[r] != a->cell_out[r])
        memcpy(c, a->cells + (int64_t)a->cell_in[r] * cf, sizeof(float) * (size_t)cf);
    return c;
}

/* The causal conv and SiLU over row x (conv_dim channels) with the window win, which
 * then moves on by one input. */
static void conv_row(const kern_gdn *a, float *x, float *win) {
    const int64_t cd = kern_gdn_conv_dim(a);
    const int32_t K = a->conv_k;
    for (int64_t c = 0; c < cd; c++) {
        const float *w = a->conv_w + c * K;
        double s = (double)w[K - 1] * x[c];
        for (int32_t k = 0; k < K - 1; k++) s += (double)w[k] * win[k * cd + c];
        for (int32_t k = 0; k + 1 < K - 1; k++) win[k * cd + c] = win[(k + 1) * cd + c];
        if (K > 1) win[(K - 2) * cd + c] = x[c];
        x[c] = (float)silu(s);
    }
}

/* x (n) = x / sqrt(sum x^2 + eps) * scale. */
static void l2norm(float *x, int32_t n, float eps, double scale) {
    double ss = 0;
    for (int32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const double f = scale / sqrt(ss + eps);
    for (int32_t i = 0; i < n; i++) x[i] = (float)(x[i] * f);
}

/* Value head h of row r: the delta rule on S and the gated norm of its output into o. */
static void head_row(const kern_gdn *a, int32_t r, int32_t h, const float *q, const float *k,
                     const float *v, float *S, double *tmp, float *o) {
    const int32_t n = a->d_state, H = a->n_v_heads;
    const double g = softplus((double)a->alpha[(int64_t)r * H + h] + a->dt_bias[h]) * a->a[h];
    const double decay = exp(g), beta = 1.0 / (1.0 + exp(-(double)a->beta[(int64_t)r * H + h]));
    for (int64_t i = 0; i < (int64_t)n * n; i++) S[i] = (float)(S[i] * decay);
    for (int32_t j = 0; j < n; j++) {
        double sk = 0;
        for (int32_t i = 0; i < n; i++) sk += (double)S[i * n + j] * k[i];
        tmp[j] = beta * (v[j] - sk);
    }
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < n; j++) S[i * n + j] = (float)(S[i * n + j] + k[i] * tmp[j]);
    double ss = 0;
    for (int32_t j = 0; j < n; j++) {
        double s = 0;
        for (int32_t i = 0; i < n; i++) s += (double)S[i * n + j] * q[i];
        tmp[j] = s;
        ss += tmp[j] * tmp[j];
    }
    const double f = 1.0 / sqrt(ss / n + a->eps);
    const float *z = a->z + (int64_t)r * H * n + (int64_t)h * n;
    for (int32_t j = 0; j < n; j++) o[j] = (float)(tmp[j] * f * a->norm_w[j] * silu(z[j]));
}

void ref_gdn(kern_backend *b, const kern_gdn *a) {
    const int32_t n = a->d_state, HK = a->n_k_heads, HV = a->n_v_heads;
    const int64_t cd = kern_gdn_conv_dim(a);
    double *tmp = kern_backend_alloc(b, "gdn", "a head's delta", sizeof(double) * (size_t)n);
    if (!tmp) return;
    for (int32_t r = 0; r < a->n_rows; r++) {
        float *cell = row_cell(a, r), *x = a->qkv + r * cd;
        float *S = cell + (a->conv_k - 1) * cd;
        conv_row(a, x, cell);
        for (int32_t h = 0; h < 2 * HK; h++)
            l2norm(x + (int64_t)h * n, n, a->eps, h < HK ? 1.0 / sqrt((double)n) : 1.0);
        const float *q = x, *k = x + (int64_t)HK * n, *v = x + 2 * (int64_t)HK * n;
        for (int32_t h = 0; h < HV; h++)
            head_row(a, r, h, q + (int64_t)(h % HK) * n, k + (int64_t)(h % HK) * n,
                     v + (int64_t)h * n, S + (int64_t)h * n * n, tmp,
                     a->out + (int64_t)r * HV * n + (int64_t)h * n);
    }
    free(tmp);
}
