/* test_gdn.c - the Gated DeltaNet op (kern.h's kern_gdn) and the sigmoid gate: the ref
 * backend against values worked by hand on a one-dimensional state, then the cpu backend
 * against ref on random rows with 1, 2 and 3 threads, and the state rules the forest
 * relies on: a sequence run in one batch (its rows continuing one cell in place) gives
 * the bits of the same rows run one batch a row, and a cell copied at a fork continues
 * as the original would.
 *
 * Error measure t_nerr as in test_kernels.c; the observed value is printed on stderr.
 *   gdn         1e-5  float sums against ref's double over d_state terms, a few steps
 *   sigmoid_mul 1e-6  expf against exp */
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "t.h"
#include "t_kern.h"

static double seen_gdn;

/* A shape and its random inputs for n rows. */
typedef struct gdn_case {
    kern_gdn a;
    float *qkv0;     /* the projections, kept (the op overwrites qkv) */
    int32_t cells;
} gdn_case;

static gdn_case make_case(uint64_t *seed, int32_t hk, int32_t hv, int32_t S, int32_t K,
                          int32_t n, int32_t cells) {
    gdn_case c = {.cells = cells};
    kern_gdn *a = &c.a;
    *a = (kern_gdn){.n_rows = n, .n_k_heads = hk, .n_v_heads = hv, .d_state = S, .conv_k = K,
                    .eps = 1e-6f};
    const int64_t cd = kern_gdn_conv_dim(a), vd = (int64_t)hv * S;
    c.qkv0 = rand_floats(seed, n * cd, 2);
    a->qkv = malloc(sizeof(float) * (size_t)(n * cd));
    a->z = rand_floats(seed, n * vd, 2);
    a->beta = rand_floats(seed, (int64_t)n * hv, 3);
    a->alpha = rand_floats(seed, (int64_t)n * hv, 3);
    a->conv_w = rand_floats(seed, cd * K, 1);
    a->dt_bias = rand_floats(seed, hv, 1);
    float *dec = rand_floats(seed, hv, 0.5f);
    for (int32_t h = 0; h < hv; h++) dec[h] -= 1.0f; /* negative, as -exp(A_log) */
    a->a = dec;
    a->norm_w = rand_floats(seed, S, 1);
    a->cells = calloc((size_t)(cells * kern_gdn_cell_floats(a)), sizeof(float));
    a->out = malloc(sizeof(float) * (size_t)(n * vd));
    return c;
}

static void free_case(gdn_case *c) {
    free(c->qkv0), free(c->a.qkv), free((void *)c->a.z), free((void *)c->a.beta);
    free((void *)c->a.alpha), free((void *)c->a.conv_w), free((void *)c->a.dt_bias);
    free((void *)c->a.a), free((void *)c->a.norm_w), free(c->a.cells), free(c->a.out);
}

/* Runs rows [r0, r0 + n) of the case on backend b with the given cells. */
static void run_rows(kern_backend *b, gdn_case *c, int32_t r0, int32_t n, const int32_t *in,
                     const int32_t *out) {
    kern_gdn a = c->a;
    const int64_t cd = kern_gdn_conv_dim(&a), vd = (int64_t)a.n_v_heads * a.d_state;
    memcpy(a.qkv + r0 * cd, c->qkv0 + r0 * cd, sizeof(float) * (size_t)(n * cd));
    a.n_rows = n;
    a.qkv += r0 * cd, a.z += r0 * vd, a.beta += (int64_t)r0 * a.n_v_heads;
    a.alpha += (int64_t)r0 * a.n_v_heads, a.out += r0 * vd;
    a.cell_in = in, a.cell_out = out;
    kern_backend_ops(b)->gdn(b, &a);
}

/* One key and value head of size 1, conv width 2: every step by hand. */
static void test_ref_values(kern_backend *ref) {
    const kern_ops *k = kern_backend_ops(ref);
    T_CHECK(k->gdn && k->sigmoid_mul, "ref has the Qwen3.5 ops");
    float qkv[6] = {1, 2, 3, 1, 2, 3}, z[2] = {0, 0}, beta[2] = {0, 0}, alpha[2] = {0, 0};
    float conv_w[6] = {0.5f, 1, 0.5f, 1, 0.5f, 1}, dt = 0, dec = -1, nw = 1;
    float cells[1 * (3 + 1)] = {0}, out[2];
    int32_t in[2] = {-1, 0}, outc[2] = {0, 0};
    z[0] = z[1] = 30.0f; /* silu(30) = 30 to 1e-12: the gate passes o's sign times 30 */
    kern_gdn a = {.n_rows = 2, .n_k_heads = 1, .n_v_heads = 1, .d_state = 1, .conv_k = 2,
                  .eps = 0, .qkv = qkv, .z = z, .beta = beta, .alpha = alpha,
                  .conv_w = conv_w, .dt_bias = &dt, .a = &dec, .norm_w = &nw, .cells = cells,
                  .cell_in = in, .cell_out = outc, .out = out};
    k->gdn(ref, &a);
    /* row 0: conv = x (window 0); q = k = 1 after the L2 norm; v = silu(3); beta 1/2;
     * S = 0 -> delta = v / 2 -> S = v / 2; o = v / 2 > 0 -> norm 1 -> out = 30.
     * row 1: conv = 0.5 x_prev + x = 1.5 x; q = k = 1; v = silu(4.5); decay
     * e^(-log 2) = 1/2: S = v0 / 4; delta = (v1 - v0 / 4) / 2; S = v0 / 4 + delta; out 30. */
    const double v0 = 3 / (1 + exp(-3.0)), v1 = 4.5 / (1 + exp(-4.5));
    const double S1 = v0 / 4 + (v1 - v0 / 4) / 2;
    T_CHECK(fabs(out[0] - 30) < 1e-4 && fabs(out[1] - 30) < 1e-4, "ref gdn outputs %g %g",
            out[0], out[1]);
    T_CHECK(fabs(cells[3] - S1) < 1e-5, "ref gdn state after two rows %g, by hand %g", cells[3],
            S1);
    T_CHECK(cells[0] == 1 && cells[1] == 2 && cells[2] == 3, "ref gdn conv window holds the "
            "last raw input: %g %g %g", cells[0], cells[1], cells[2]);
    float y[2] = {2, -3}, g[2] = {0, 100};
    k->sigmoid_mul(ref, y, g, 2);
    T_CHECK(y[0] == 1 && y[1] == -3, "ref sigmoid_mul: %g %g", y[0], y[1]);
}

static void test_state_rules(kern_backend *b, uint64_t seed);

/* cpu against ref on a chain of rows from zeros, then the state rules on cpu. */
static void test_against_ref(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const int32_t shapes[][4] = {{1, 1, 4, 4}, {2, 4, 16, 4}, {2, 2, 32, 3}, {1, 2, 128, 4}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int32_t n = 9;
        gdn_case c = make_case(&seed, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], n, 3);
        const int64_t vd = (int64_t)shapes[s][1] * shapes[s][2], cf = kern_gdn_cell_floats(&c.a);
        int32_t in[9] = {-1, 0, 0, 0, 0, 0, 0, 0, 0}, out[9] = {0};
        float *o_ref = malloc(sizeof(float) * (size_t)(n * vd)), *cell_ref = malloc(sizeof(float) * (size_t)cf);
        run_rows(ref, &c, 0, n, in, out);
        memcpy(o_ref, c.a.out, sizeof(float) * (size_t)(n * vd));
        memcpy(cell_ref, c.a.cells, sizeof(float) * (size_t)cf);
        run_rows(cpu, &c, 0, n, in, out);
        double e = t_nerr(c.a.out, o_ref, (long)(n * vd));
        seen_gdn = e > seen_gdn ? e : seen_gdn;
        T_CHECK(e <= 1e-5, "gdn shape %zu: cpu against ref nerr %.3g", s, e);
        e = t_nerr(c.a.cells, cell_ref, (long)cf);
        T_CHECK(e <= 1e-5, "gdn shape %zu: state cpu against ref nerr %.3g", s, e);
        free(o_ref), free(cell_ref), free_case(&c);
    }
    test_state_rules(cpu, 4001);
}

/* The forest's rules on one backend: one batch = a row a batch, in place = copied. */
static void test_state_rules(kern_backend *b, uint64_t seed) {
    const int32_t n = 6;
    gdn_case c = make_case(&seed, 2, 4, 16, 4, n, 3);
    const int64_t vd = 64, cf = kern_gdn_cell_floats(&c.a);
    int32_t in[6] = {-1, 0, 0, 0, 0, 0}, out[6] = {0};
    run_rows(b, &c, 0, n, in, out);
    float *whole = malloc(sizeof(float) * (size_t)(n * vd)), *cell = malloc(sizeof(float) * (size_t)cf);
    memcpy(whole, c.a.out, sizeof(float) * (size_t)(n * vd));
    memcpy(cell, c.a.cells, sizeof(float) * (size_t)cf);
    /* a row a batch, each from a copy of the cell the row before it left */
    bool same = true;
    for (int32_t r = 0, prev = -1; r < n; r++) {
        int32_t o = r % 3;
        run_rows(b, &c, r, 1, &prev, &o);
        same &= memcmp(c.a.out + r * vd, whole + r * vd, sizeof(float) * (size_t)vd) == 0;
        prev = o;
    }
    T_CHECK(same, "gdn on %s: rows run one batch each from copied cells differ from one batch",
            kern_backend_name(b));
    free(whole), free(cell), free_case(&c);
}

int main(void) {
    kern_backend *ref = t_ref();
    if (!ref) return t_done();
    test_ref_values(ref);
    test_state_rules(ref, 4001);
    t_each_cpu(ref, test_against_ref, 4000);
    kern_backend_free(ref);
    fprintf(stderr, "max nerr seen: gdn %.2g\n", seen_gdn);
    return t_done();
}
