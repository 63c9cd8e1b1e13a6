/* test_attn_weights.c - the attention weights a pass hands back for teaching (kern.h's
 * attn_weights op, model_batch's attn request, step_plan's attn_want).
 *
 * - the op, on ref and cpu: each row's weights are positive and sum to 1, equal a softmax
 *   recomputed here from q and k, and weigh v into what the attention op returns;
 * - a forest step over a random llama model, prefill and a growing step, one head or the
 *   mean, in one chunk or many: a row has a weight exactly on the slots its mask allows,
 *   and they sum to 1;
 * - layer 0's weights equal a softmax recomputed from the ref backend's Q (its ops over
 *   the layer's weights) and K (its cache), on ref and on cpu;
 * - every layer's weights of a leaf are those of its path decoded alone, bit for bit, with
 *   a window forced on too (0 outside the window);
 * - a bad layer or head is refused before anything runs. */
#include "forest/forest.h"
#include "forest/step.h"
#include "kernels/kern.h"
#include "t.h"
#include "t_model.h"

#define N_SLOTS 64

/* ---- the op ---- */

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

/* Softmax over row r's slots of head h recomputed here, into w; returns the cells. */
static int32_t recompute(const kern_attn *a, int32_t r, int32_t h, double *w) {
    const int32_t hd = a->head_dim, kvh = h / (a->n_head / a->n_head_kv);
    double mx = -INFINITY, sum = 0;
    int32_t n = 0;
    for (int32_t i = a->seg_off[r]; i < a->seg_off[r + 1]; i++)
        for (int32_t s = a->segs[i].start; s < a->segs[i].start + a->segs[i].len; s++, n++) {
            double d = 0;
            for (int32_t j = 0; j < hd; j++)
                d += (double)a->q[((int64_t)r * a->n_head + h) * hd + j] *
                     a->k[((int64_t)s * a->n_head_kv + kvh) * hd + j];
            w[n] = d * a->scale;
            mx = w[n] > mx ? w[n] : mx;
        }
    for (int32_t j = 0; j < n; j++) sum += w[j] = exp(w[j] - mx);
    for (int32_t j = 0; j < n; j++) w[j] /= sum;
    return n;
}

static void test_op(const char *name, uint64_t seed) {
    st_err err = {0};
    kern_backend *b = kern_backend_init(name, 2, &err);
    T_CHECK(b != NULL, "%s: %s", name, err.msg);
    if (!b) return;
    enum { R = 3, NH = 4, NKV = 2, HD = 16, SL = 24 };
    static float q[R * NH * HD], k[SL * NKV * HD], v[SL * NKV * HD], out[R * NH * HD];
    for (int i = 0; i < R * NH * HD; i++) q[i] = 2 * frand(&seed);
    for (int i = 0; i < SL * NKV * HD; i++) k[i] = 2 * frand(&seed), v[i] = frand(&seed);
    const int32_t seg_off[R + 1] = {0, 1, 3, 5};
    const kern_seg segs[5] = {{0, 5}, {0, 3}, {10, 4}, {20, 2}, {6, 3}};
    kern_attn a = {.n_rows = R, .n_head = NH, .n_head_kv = NKV, .head_dim = HD,
                   .scale = 0.25f, .q = q, .k = k, .v = v, .seg_off = seg_off, .segs = segs,
                   .out = out};
    const kern_ops *o = kern_backend_ops(b);
    o->attention(b, &a);
    float w[5 + 7 + 5];
    double ref[8], mean[8];
    for (int32_t head = -1; head < NH; head++) {
        o->attn_weights(b, &a, head, w);
        const float *wr = w;
        for (int32_t r = 0; r < R; r++) {
            int32_t n = 0;
            for (int32_t h = 0; h < NH; h++) {
                n = recompute(&a, r, h, ref);
                for (int32_t j = 0; j < n; j++) mean[j] = (h ? mean[j] : 0) + ref[j] / NH;
            }
            if (head >= 0) recompute(&a, r, head, mean);
            double sum = 0, diff = 0;
            for (int32_t j = 0; j < n; j++) {
                sum += wr[j];
                diff = fmax(diff, fabs(wr[j] - mean[j]));
            }
            T_CHECK(fabs(sum - 1) < 1e-5 && diff < 1e-6, "%s head %d row %d: sum %.8f, %g from "
                    "the recomputation", name, head, r, sum, diff);
            /* the weights are the attention's: they weigh v into its output */
            double worst = 0;
            for (int32_t d = 0; head >= 0 && d < HD; d++) {
                double acc = 0;
                int32_t j = 0;
                for (int32_t i = seg_off[r]; i < seg_off[r + 1]; i++)
                    for (int32_t s = segs[i].start; s < segs[i].start + segs[i].len; s++, j++)
                        acc += wr[j] * v[((int64_t)s * NKV + head / (NH / NKV)) * HD + d];
                worst = fmax(worst, fabs(acc - out[((int64_t)r * NH + head) * HD + d]));
            }
            T_CHECK(worst < 1e-5, "%s head %d row %d: weights times v are %g from the "
                    "attention's output", name, head, r, worst);
            wr += n;
        }
    }
    kern_backend_free(b);
}

/* ---- through a forest ---- */

/* A prompt of 6 tokens, three branches of 2 under its end and one of 2 under its third
 * token: one step prefills all of them. */
static forest *small_forest(int32_t V, forest_id *leaves) {
    forest *f = forest_init(N_SLOTS, 0);
    st_err err = {0};
    int32_t toks[6];
    for (int32_t i = 0; i < 6; i++) toks[i] = (i * 37 + 5) % V;
    forest_id end, mid;
    forest_add_root(f, toks, NULL, 6, 0, &end, &err);
    mid = forest_id_at(f, 2);
    for (int32_t b = 0; b < 4; b++) {
        int32_t t[2] = {(b * 11 + 3) % V, (b * 13 + 7) % V};
        T_CHECK(forest_append(f, b < 3 ? end : mid, t, NULL, 2, &leaves[b], &err) == ST_OK,
                "append: %s", err.msg);
    }
    return f;
}

/* A plan whose runs keep the weights of layer l, head h. */
static void attn_plan(step_plan *p, int32_t l, int32_t h) {
    step_plan_init(p);
    p->attn_want = true, p->attn_layer = l, p->attn_head = h;
}

/* Every row of p has a finite positive weight exactly on the slots its mask allows, and
 * they sum to 1. */
static void check_mask_cells(const step_plan *p, const char *what) {
    int32_t bad = 0;
    double worst = 0;
    for (int32_t r = 0; r < p->n_rows; r++) {
        double sum = 0;
        for (int32_t s = 0; s < N_SLOTS; s++) {
            float w = step_plan_attn_of(p, r, s);
            bool sees = step_plan_sees(p, r, s);
            bad += sees != !isnan(w) || (sees && !(w > 0 && w <= 1));
            if (sees) sum += w;
        }
        worst = fmax(worst, fabs(sum - 1));
    }
    T_CHECK(p->attn_n > 0 && bad == 0 && worst < 1e-5, "%s: %d cells off the mask, sums within "
            "%g of 1", what, bad, worst);
}

/* Two steps (prefill, then one more token under every leaf) with weights of layer l, head
 * h asked for; the second step's weights into w (cells). Returns the cells, 0 on failure. */
static int32_t forest_weights(model *m, model_ctx *c, int32_t l, int32_t h, float *w,
                              const char *what) {
    forest_id leaves[4];
    forest *f = small_forest(m->hp.n_vocab, leaves);
    step_plan p;
    attn_plan(&p, l, h);
    st_err err = {0};
    int32_t n = 0;
    if (step_forest(f, &p, c, &err) == ST_OK) {
        check_mask_cells(&p, what);
        for (int32_t b = 0; b < 4; b++) {
            int32_t t = (b * 5 + 1) % m->hp.n_vocab;
            forest_append(f, leaves[b], &t, NULL, 1, NULL, &err);
        }
        if (step_forest(f, &p, c, &err) == ST_OK) {
            check_mask_cells(&p, what);
            n = p.attn_n;
            memcpy(w, p.attn_w, sizeof(float) * (size_t)n);
        }
    }
    T_CHECK(n > 0, "%s: %s", what, err.msg);
    step_plan_free(&p);
    forest_free(f);
    return n;
}

/* One head and the mean, layer 0 and the last, on one backend; in chunks of 3 rows the
 * same bits as in one chunk. */
static void test_forest_mask(model *m, const char *backend) {
    setenv("MD_BACKEND", backend, 1);
    model_ctx *one = t_new_ctx_rows(m, N_SLOTS, 0), *three = t_new_ctx_rows(m, N_SLOTS, 3);
    float w1[N_SLOTS * N_SLOTS], w3[N_SLOTS * N_SLOTS];
    const int32_t cases[3][2] = {{0, 0}, {m->hp.n_layer - 1, -1}, {0, m->hp.n_head - 1}};
    for (int i = 0; one && three && i < 3; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s layer %d head %d", backend, cases[i][0], cases[i][1]);
        int32_t n1 = forest_weights(m, one, cases[i][0], cases[i][1], w1, what);
        int32_t n3 = forest_weights(m, three, cases[i][0], cases[i][1], w3, what);
        T_CHECK(n1 == n3 && !memcmp(w1, w3, sizeof(float) * (size_t)n1),
                "%s: in chunks of 3 rows the same weights", what);
    }
    model_ctx_free(one);
    model_ctx_free(three);
    unsetenv("MD_BACKEND");
}

/* Layer 0's query of one row: the ref backend's ops over the layer's stored weights. */
static void layer0_query(model *m, kern_backend *ref, int32_t token, int32_t pos, float *q) {
    const kern_ops *o = kern_backend_ops(ref);
    const model_hparams *hp = &m->hp;
    float x[1024];
    o->get_row(ref, x, &m->tok_embd, token);
    o->rmsnorm(ref, x, x, m->layers[0].attn_norm, 1, hp->n_embd, hp->rms_eps);
    o->matmul(ref, q, &m->layers[0].wq, x, 1);
    o->rope(ref, q, &pos, 1, hp->n_head, hp->head_dim, hp->rope_dim, hp->rope_base,
            m->rope_freqs);
}

/* Layer 0, head h: each row's weights against a softmax of the ref backend's Q and K. */
static void test_layer0_recompute(model *m, const char *backend, double tol) {
    setenv("MD_BACKEND", backend, 1);
    model_ctx *c = t_new_ctx(m, N_SLOTS);
    setenv("MD_BACKEND", "ref", 1);
    model_ctx *rc = t_new_ctx(m, N_SLOTS); /* its cache holds the K we compare with */
    unsetenv("MD_BACKEND");
    st_err err = {0};
    kern_backend *ref = kern_backend_init("ref", 1, &err);
    const model_hparams *hp = &m->hp;
    const int32_t h = 1, kvd = hp->n_head_kv * hp->head_dim, hd = hp->head_dim;
    float q[1024], *kk = malloc(sizeof(float) * (size_t)kvd * hp->n_layer * 2);
    forest_id leaves[4];
    forest *f = small_forest(hp->n_vocab, leaves), *g = small_forest(hp->n_vocab, leaves);
    step_plan p, pr;
    attn_plan(&p, 0, h), step_plan_init(&pr);
    bool ok = c && rc && ref && step_forest(f, &p, c, &err) == ST_OK &&
              step_forest(g, &pr, rc, &err) == ST_OK;
    T_CHECK(ok, "%s: %s", backend, err.msg);
    double worst = 0;
    for (int32_t r = 0; ok && r < p.n_rows; r++) {
        layer0_query(m, ref, p.tokens[r], p.pos[r], q);
        double sc[N_SLOTS], mx = -INFINITY, sum = 0;
        for (int32_t s = 0; s < N_SLOTS; s++) {
            sc[s] = -INFINITY;
            if (!step_plan_sees(&p, r, s)) continue;
            model_kv_read(rc, s, kk, kk + (size_t)kvd * hp->n_layer, &err);
            double d = 0;
            for (int32_t i = 0; i < hd; i++)
                d += (double)q[h * hd + i] * kk[(h / (hp->n_head / hp->n_head_kv)) * hd + i];
            sc[s] = d * hp->attn_scale;
            mx = fmax(mx, sc[s]);
        }
        for (int32_t s = 0; s < N_SLOTS; s++) sum += isinf(sc[s]) ? 0 : exp(sc[s] - mx);
        for (int32_t s = 0; s < N_SLOTS; s++)
            if (!isinf(sc[s]))
                worst = fmax(worst, fabs(exp(sc[s] - mx) / sum - step_plan_attn_of(&p, r, s)));
    }
    T_CHECK(ok && worst < tol, "%s layer 0 head %d: %g from the weights of the ref backend's "
            "Q and K", backend, h, worst);
    step_plan_free(&p), step_plan_free(&pr);
    forest_free(f), forest_free(g);
    free(kk);
    kern_backend_free(ref);
    model_ctx_free(c), model_ctx_free(rc);
}

/* The last row's weights of tokens[0..n) decoded alone (windowed as the model is) into w. */
static bool linear_weights(model_ctx *c, const int32_t *toks, int32_t n, int32_t l, int32_t h,
                           float *w) {
    int32_t pos[N_SLOTS], off[N_SLOTS + 1];
    kern_seg seg[2 * N_SLOTS];
    const int32_t win = model_ctx_hparams(c)->n_swa;
    for (int32_t i = 0; i < n; i++) {
        pos[i] = off[i] = i;
        seg[i] = (kern_seg){0, i + 1};
        seg[n + i] = win > 0 && i + 1 > win ? (kern_seg){i + 1 - win, win} : seg[i];
    }
    off[n] = n;
    float *all = malloc(sizeof(float) * (size_t)n * (n + 1) / 2);
    float *lg = malloc(sizeof(float) * (size_t)model_ctx_hparams(c)->n_vocab);
    model_attn_req req = {.layer = l, .head = h, .w = all};
    uint8_t want[N_SLOTS] = {0};
    want[n - 1] = 1;
    model_batch b = {.n_rows = n, .tokens = toks, .pos = pos, .slot = pos, .seg_off = off,
                     .segs = seg, .want_logits = want, .seg_off_swa = off, .segs_swa = seg + n,
                     .attn = &req};
    st_err err = {0};
    bool ok = model_forward(c, &b, lg, &err) == ST_OK;
    if (ok) memcpy(w, all + (size_t)(n - 1) * n / 2, sizeof(float) * (size_t)n);
    free(all), free(lg);
    return ok;
}

/* Every layer, a head and the mean: each leaf's weights in path order are those of its
 * path decoded alone; with a window, 0 before it. */
static void test_leaf_linear(model *m, int32_t window) {
    model_hparams_set_window(&m->hp, window, 2);
    model_ctx *c = t_new_ctx(m, N_SLOTS), *lc = t_new_ctx(m, N_SLOTS);
    int32_t bad = 0, outside = 0, checked = 0;
    for (int32_t l = 0; c && lc && l < m->hp.n_layer; l++)
        for (int32_t h = -1; h < 1; h++) {
            forest_id leaves[4];
            forest *f = small_forest(m->hp.n_vocab, leaves);
            step_plan p;
            attn_plan(&p, l, h);
            st_err err = {0};
            if (step_forest(f, &p, c, &err) != ST_OK) bad++;
            for (int32_t b = 0; b < 4 && p.attn_n > 0; b++) {
                int32_t path[N_SLOTS], n = forest_path(f, leaves[b], path, N_SLOTS), r = 0;
                float alone[N_SLOTS];
                while (p.node[r] != forest_index(leaves[b])) r++;
                bad += !linear_weights(lc, path, n, l, h, alone);
                int32_t j = 0; /* the leaf's cells are its path's slots, root first */
                for (int32_t i = p.seg_off[r]; i < p.seg_off[r + 1]; i++)
                    for (int32_t s = p.segs[i].start; s < p.segs[i].start + p.segs[i].len; s++, j++) {
                        bad += step_plan_attn_of(&p, r, s) != alone[j];
                        outside += model_layer_is_swa(&m->hp, l) && j < n - window && alone[j] != 0;
                    }
                checked++;
            }
            step_plan_free(&p);
            forest_free(f);
        }
    T_CHECK(checked == 4 * 2 * m->hp.n_layer && bad == 0 && outside == 0, "window %d: %d leaves "
            "checked, %d weights differ from the path's alone, %d nonzero outside the window",
            window, checked, bad, outside);
    model_ctx_free(c), model_ctx_free(lc);
    model_hparams_set_window(&m->hp, 0, 0);
}

static void test_refused(model *m) {
    model_ctx *c = t_new_ctx(m, N_SLOTS);
    forest_id leaves[4];
    forest *f = small_forest(m->hp.n_vocab, leaves);
    step_plan p;
    attn_plan(&p, m->hp.n_layer, 0);
    st_err err = {0};
    T_CHECK(c && step_forest(f, &p, c, &err) == ST_ERR_ARG && forest_n_pending(f) > 0,
            "layer %d of %d refused, nothing computed: %s", m->hp.n_layer, m->hp.n_layer, err.msg);
    p.attn_layer = 0, p.attn_head = m->hp.n_head;
    T_CHECK(c && step_forest(f, &p, c, &err) == ST_ERR_ARG, "head out of range: %s", err.msg);
    p.attn_head = -1;
    T_CHECK(c && step_forest(f, &p, c, &err) == ST_OK && p.attn_n > 0, "then a mean: %s", err.msg);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

int main(void) {
    test_op("ref", 1);
    test_op("cpu", 2);
    mkmodel_params mp = mkmodel_default_params();
    mp.seed = 7;
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (m) {
        test_forest_mask(m, "ref");
        test_forest_mask(m, "cpu");
        test_layer0_recompute(m, "ref", 1e-6);
        test_layer0_recompute(m, "cpu", 1e-4);
        test_leaf_linear(m, 0);
        test_leaf_linear(m, 4);
        test_refused(m);
        model_free(m);
    }
    return t_done();
}
