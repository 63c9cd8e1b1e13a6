/* moe.c - the mixture-of-experts feed-forward (see moe.h): its keys and tensors, the
 * routing of a chunk's rows on the host, and the experts' products grouped by expert.
 *
 * Facts from llama.cpp 0c1e5709 (src/models/qwen3moe.cpp, src/llama-graph.cpp
 * build_moe_ffn): the router's probabilities are a softmax over the experts, the top
 * n_expert_used are taken, their probabilities are divided by their sum (clamped below at
 * 6.1e-5) and scaled by expert_weights_scale when it is set; each expert output is
 * multiplied by its weight after ffn_down, and a row's outputs are summed in top-k order.
 * Qwen3-MoE always renormalises (its norm_topk_prob is true), Qwen2-MoE never
 * (src/models/qwen2moe.cpp); Qwen2-MoE (and Qwen3.5-MoE, src/models/qwen35moe.cpp) add a
 * shared expert, a SwiGLU feed-forward every row runs, times sigmoid(ffn_gate_inp_shexp .
 * x), to the experts' sum. */
#include "model/moe.h"

#include "model/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct moe_scratch {
    float *logits;   /* (max_rows, n_expert) backend: the router's output */
    float *xg;       /* (max_rows * k, n_embd) backend: the inputs grouped by expert, then
                        the weighted outputs of choices 1 .. k-1 in (choice, row) order */
    float *hg, *hu;  /* (max_rows * k, n_ff_exp) backend: the experts' gate and up */
    float *yg;       /* (max_rows * k, n_embd) backend: the experts' outputs, grouped */
    float *host;     /* (max_rows, n_expert) host copy of logits */
    int32_t *sel;    /* (max_rows * k) host: row r's j-th expert at [r k + j] */
    float *w;        /* (max_rows * k) host: its weight */
    int32_t *row_of; /* (max_rows * k) host: the row of each grouped choice */
    float *w_of;     /* (max_rows * k) host: the weight of each grouped choice */
    int32_t *at_of;  /* (max_rows * k) host: choice (j, r) at [j n + r] -> grouped index */
    int32_t *start;  /* (n_expert + 1) host: expert e's choices are [start[e], start[e + 1]) */
    float *sh, *sh2; /* (max_rows, n_ff_shexp) backend: the shared expert's gate and up */
    float *ysh;      /* (max_rows, n_embd) backend: its output */
    float *sg;       /* (max_rows) backend: its gate's logits */
    float *host_sg;  /* (max_rows) host copy */
};

st_code moe_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    st_code rc;
    if ((rc = load_hp_int(g, arch, "expert_count", -1, &hp->n_expert, err)) ||
        (rc = load_hp_int(g, arch, "expert_used_count", -1, &hp->n_expert_used, err)) ||
        (rc = load_hp_int(g, arch, "expert_feed_forward_length", 0, &hp->n_ff_exp, err)))
        return rc;
    /* llama.cpp's qwen*moe.cpp: without the key, an expert is n_ff / n_expert_used wide */
    if (hp->n_ff_exp == 0 && hp->n_ff > 0 && hp->n_expert_used > 0)
        hp->n_ff_exp = hp->n_ff / hp->n_expert_used;
    char key[96];
    snprintf(key, sizeof key, "%s.expert_weights_scale", arch);
    double s = 0;
    if (gguf_find_key(g, key) >= 0 && (rc = gguf_get_f64(g, key, &s, err))) return rc;
    hp->expert_w_scale = s != 0 ? (float)s : 1.0f; /* 0: none, as llama.cpp reads it */
    const arch_desc *ad = arch_get(hp->arch);
    hp->expert_norm = ad->moe_norm;
    if (ad->moe_shared &&
        (rc = load_hp_int(g, arch, "expert_shared_feed_forward_length", hp->n_ff, &hp->n_ff_shexp, err)))
        return rc;
    if (hp->n_expert < 1 || hp->n_expert > 4096 || hp->n_expert_used < 1 ||
        hp->n_expert_used > hp->n_expert || hp->n_ff_exp < 1 || !isfinite(hp->expert_w_scale) ||
        (ad->moe_shared && hp->n_ff_shexp < 1))
        return st_set(err, ST_ERR_FORMAT, "%s: expert_count %d, expert_used_count %d, "
                      "expert_feed_forward_length %d, expert_weights_scale %g%s are out of range "
                      "(a width missing from the file is taken from feed_forward_length, %d)",
                      arch, hp->n_expert, hp->n_expert_used, hp->n_ff_exp, s,
                      ad->moe_shared ? ", expert_shared_feed_forward_length" : "", hp->n_ff);
    return ST_OK;
}

size_t moe_n_mats(const model_hparams *hp) {
    return (size_t)hp->n_layer * 3 * (size_t)hp->n_expert;
}

void moe_layer_mats(const model_hparams *hp, kern_mat *all, int32_t l, model_layer *L) {
    const size_t ne = (size_t)hp->n_expert;
    L->exp_gate = all + (size_t)l * 3 * ne;
    L->exp_up = L->exp_gate + ne;
    L->exp_down = L->exp_up + ne;
}

/* The 3-D tensor `name` of n_expert matrices of n_parts * n_out rows of n_in, cut into
 * out[0 .. n_expert): each expert's rows part * n_out .. (part + 1) * n_out (n_parts 1:
 * the whole matrix; 2: one half of a fused gate and up). */
static st_code load_experts_part(const model *m, const char *name, int64_t n_in, int64_t n_out,
                                 int64_t n_parts, int64_t part, kern_mat *out, st_err *err) {
    const int64_t ne = m->hp.n_expert, rows = n_parts * n_out;
    const gguf_tensor *t = gguf_find_tensor(m->gguf, name);
    if (!t) return st_set(err, ST_ERR_FORMAT, "tensor '%s' is missing", name);
    if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != rows || t->ne[2] != ne)
        return st_set(err, ST_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld], expected "
                      "[%lld, %lld, %lld]", name, (long long)t->ne[0], (long long)t->ne[1],
                      (long long)t->ne[2], (long long)n_in, (long long)rows, (long long)ne);
    const dtype_info *d = dtype_get(t->type);
    if (!d || !d->compute)
        return st_set(err, ST_ERR_UNSUPPORTED, "tensor '%s' has type %s, which this build "
                      "cannot compute with", name, dtype_name(t->type));
    const size_t row = dtype_row_bytes(t->type, n_in);
    for (int64_t e = 0; e < ne; e++)
        out[e] = (kern_mat){.type = t->type, .n_out = n_out, .n_in = n_in,
                            .data = (const char *)t->data + (size_t)(e * rows + part * n_out) * row};
    return ST_OK;
}

/* Layer l's gate and up experts: ffn_gate_exps and ffn_up_exps, or one fused
 * ffn_gate_up_exps whose experts hold the gate's rows then the up's (llama.cpp's
 * build_moe_ffn views the gate at offset 0 and the up at n_ff). */
static st_code load_gate_up(const model *m, int32_t l, model_layer *L, st_err *err) {
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff_exp;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    const bool fused = gguf_find_tensor(m->gguf, NAME("ffn_gate_up_exps")) != NULL;
    if (fused && (rc = load_experts_part(m, nm, E, F, 2, 0, L->exp_gate, err))) return rc;
    if (fused) return load_experts_part(m, nm, E, F, 2, 1, L->exp_up, err);
    if ((rc = load_experts_part(m, NAME("ffn_gate_exps"), E, F, 1, 0, L->exp_gate, err))) return rc;
    return load_experts_part(m, NAME("ffn_up_exps"), E, F, 1, 0, L->exp_up, err);
#undef NAME
}

/* Layer l's shared expert: its gate vector (a matrix of one row) and its SwiGLU. */
static st_code load_shared(model *m, int32_t l, model_layer *L, st_err *err) {
    const int64_t E = m->hp.n_embd, F = m->hp.n_ff_shexp;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    const gguf_tensor *t = gguf_find_tensor(m->gguf, NAME("ffn_gate_inp_shexp"));
    if (!t || t->n_dims != 1 || t->ne[0] != E || t->type != DT_F32)
        return st_set(err, ST_ERR_FORMAT, "tensor '%s' is missing or not F32 of %lld values", nm,
                      (long long)E);
    L->shexp_gate_inp = (kern_mat){.type = DT_F32, .n_out = 1, .n_in = E, .data = t->data};
    if ((rc = load_want_mat(m->gguf, NAME("ffn_gate_shexp"), E, F, &L->shexp_gate, err)) ||
        (rc = load_want_mat(m->gguf, NAME("ffn_up_shexp"), E, F, &L->shexp_up, err)) ||
        (rc = load_want_mat(m->gguf, NAME("ffn_down_shexp"), F, E, &L->shexp_down, err)))
        return rc;
#undef NAME
    const kern_mat *ms[] = {&L->shexp_gate_inp, &L->shexp_gate, &L->shexp_up, &L->shexp_down};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        m->weight_bytes += dtype_row_bytes(ms[i]->type, ms[i]->n_in) * (uint64_t)ms[i]->n_out;
    return ST_OK;
}

st_code moe_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    (void)used; /* the router and experts are matrices, no vectors to convert */
    const model_hparams *hp = &m->hp;
    if (!m->experts && !(m->experts = calloc(moe_n_mats(hp), sizeof *m->experts)))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the experts' matrices");
    moe_layer_mats(hp, m->experts, l, L);
    const int64_t E = hp->n_embd, F = hp->n_ff_exp;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    if ((rc = load_want_mat(m->gguf, NAME("ffn_gate_inp"), E, hp->n_expert, &L->gate_inp, err)) ||
        (rc = load_gate_up(m, l, L, err)) ||
        (rc = load_experts_part(m, NAME("ffn_down_exps"), F, E, 1, 0, L->exp_down, err)))
        return rc;
#undef NAME
    /* a token reads the router and its k experts */
    const kern_mat *ms[] = {&L->exp_gate[0], &L->exp_up[0], &L->exp_down[0]};
    m->weight_bytes += dtype_row_bytes(L->gate_inp.type, E) * (uint64_t)hp->n_expert;
    for (size_t i = 0; i < 3; i++)
        m->weight_bytes += dtype_row_bytes(ms[i]->type, ms[i]->n_in) * (uint64_t)ms[i]->n_out *
                           (uint64_t)hp->n_expert_used;
    return hp->n_ff_shexp > 0 ? load_shared(m, l, L, err) : ST_OK;
}

moe_scratch *moe_scratch_init(kern_backend *be, const model_hparams *hp, int32_t max_rows) {
    const kern_ops *o = kern_backend_ops(be);
    moe_scratch *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    const size_t R = (size_t)max_rows, NE = (size_t)hp->n_expert, RK = R * (size_t)hp->n_expert_used;
    const size_t E = (size_t)hp->n_embd, F = (size_t)hp->n_ff_exp;
    s->logits = o->buf_alloc(be, sizeof(float) * R * NE);
    s->xg = o->buf_alloc(be, sizeof(float) * RK * E);
    s->yg = o->buf_alloc(be, sizeof(float) * RK * E);
    s->hg = o->buf_alloc(be, sizeof(float) * RK * F);
    s->hu = o->buf_alloc(be, sizeof(float) * RK * F);
    s->host = malloc(sizeof(float) * R * NE);
    s->sel = malloc(sizeof(int32_t) * RK);
    s->w = malloc(sizeof(float) * RK);
    s->row_of = malloc(sizeof(int32_t) * RK);
    s->w_of = malloc(sizeof(float) * RK);
    s->at_of = malloc(sizeof(int32_t) * RK);
    s->start = malloc(sizeof(int32_t) * (NE + 1));
    bool ok = true;
    if (hp->n_ff_shexp > 0) {
        const size_t FS = (size_t)hp->n_ff_shexp;
        ok = (s->sh = o->buf_alloc(be, sizeof(float) * R * FS)) &&
             (s->sh2 = o->buf_alloc(be, sizeof(float) * R * FS)) &&
             (s->ysh = o->buf_alloc(be, sizeof(float) * R * E)) &&
             (s->sg = o->buf_alloc(be, sizeof(float) * R)) && (s->host_sg = malloc(sizeof(float) * R));
    }
    if (!ok || !s->logits || !s->xg || !s->yg || !s->hg || !s->hu || !s->host || !s->sel || !s->w ||
        !s->row_of || !s->w_of || !s->at_of || !s->start) {
        moe_scratch_free(s, be);
        return NULL;
    }
    return s;
}

void moe_scratch_free(moe_scratch *s, kern_backend *be) {
    if (!s) return;
    const kern_ops *o = kern_backend_ops(be);
    float *bufs[] = {s->logits, s->xg, s->yg, s->hg, s->hu, s->sh, s->sh2, s->ysh, s->sg};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) o->buf_free(be, bufs[i]);
    free(s->host);
    free(s->sel);
    free(s->w);
    free(s->row_of);
    free(s->w_of);
    free(s->at_of);
    free(s->start);
    free(s->host_sg);
    free(s);
}

/* The k chosen logits' softmax times scale as the weights (gpt-oss), into w. */
static void route_softmax_k(const float *logits, const int32_t *sel, int32_t k, float scale,
                            float *w) {
    float mx = -INFINITY;
    for (int32_t j = 0; j < k; j++) mx = logits[sel[j]] > mx ? logits[sel[j]] : mx;
    double sum = 0;
    for (int32_t j = 0; j < k; j++) sum += (double)(w[j] = expf(logits[sel[j]] - mx));
    const float inv = (float)(1.0 / sum);
    for (int32_t j = 0; j < k; j++) w[j] = w[j] * inv * scale;
}

void moe_route(const float *logits, int32_t n_expert, int32_t k, bool norm, float scale,
               int32_t *sel, float *w) {
    float mx = -INFINITY;
    for (int32_t e = 0; e < n_expert; e++) mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0; /* ggml's softmax: exp in float, the sum in double */
    for (int32_t e = 0; e < n_expert; e++) sum += (double)expf(logits[e] - mx);
    const float inv = (float)(1.0 / sum);
    float wsum = 0;
    for (int32_t j = 0; j < k; j++) { /* selection: k is small next to n_expert */
        int32_t best = -1;
        for (int32_t e = 0; e < n_expert; e++) {
            bool taken = false;
            for (int32_t i = 0; i < j && !taken; i++) taken = sel[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
        }
        sel[j] = best;
        w[j] = expf(logits[best] - mx) * inv;
        wsum += w[j];
    }
    wsum = norm ? (wsum > 6.103515625e-5f ? wsum : 6.103515625e-5f) : 1.0f;
    for (int32_t j = 0; j < k; j++) w[j] = (norm ? w[j] / wsum : w[j]) * scale;
}

/* Routes the n rows whose router logits are in s->host and groups their choices by
 * expert (expert by expert, rows in order within one): s->start, row_of, w_of, at_of. */
static void group_choices(moe_scratch *s, const model_hparams *hp, int32_t n) {
    const int32_t NE = hp->n_expert, k = hp->n_expert_used;
    memset(s->start, 0, sizeof(int32_t) * ((size_t)NE + 1));
    for (int32_t r = 0; r < n; r++) {
        moe_route(s->host + (size_t)r * NE, NE, k, hp->expert_norm, hp->expert_w_scale,
                  s->sel + r * k, s->w + r * k);
        if (hp->expert_softmax_k)
            route_softmax_k(s->host + (size_t)r * NE, s->sel + r * k, k, hp->expert_w_scale,
                            s->w + r * k);
        for (int32_t j = 0; j < k; j++) s->start[s->sel[r * k + j] + 1]++;
    }
    for (int32_t e = 0; e < NE; e++) s->start[e + 1] += s->start[e];
    for (int32_t r = 0; r < n; r++)
        for (int32_t j = 0; j < k; j++) { /* rows ascending, so each expert's stay in order */
            const int32_t e = s->sel[r * k + j], a = s->start[e]++;
            s->row_of[a] = r;
            s->w_of[a] = s->w[r * k + j];
            s->at_of[j * n + r] = a;
        }
    for (int32_t e = NE; e > 0; e--) s->start[e] = s->start[e - 1]; /* undo the walk */
    s->start[0] = 0;
}

/* The shared expert of the n rows of x, times its sigmoid gate, into s->ysh. */
static void shared_expert(moe_scratch *s, kern_backend *be, const model_hparams *hp,
                          const model_layer *L, const float *x, int32_t n) {
    const kern_ops *o = kern_backend_ops(be);
    const int32_t E = hp->n_embd;
    o->matmul(be, s->sg, &L->shexp_gate_inp, x, n);
    o->matmul_n(be, 2, (float *const[]){s->sh, s->sh2},
                (const kern_mat *const[]){&L->shexp_gate, &L->shexp_up}, x, n);
    o->swiglu(be, s->sh, s->sh, s->sh2, (int64_t)n * hp->n_ff_shexp);
    o->matmul(be, s->ysh, &L->shexp_down, s->sh, n);
    o->download(be, s->host_sg, s->sg, sizeof(float) * (size_t)n);
    for (int32_t r = 0; r < n; r++)
        o->scale(be, s->ysh + (size_t)r * E, 1.0f / (1.0f + expf(-s->host_sg[r])), E);
}

void moe_ffn(moe_scratch *s, kern_backend *be, const model_hparams *hp, const model_layer *L,
             float *x, int32_t n) {
    const kern_ops *o = kern_backend_ops(be);
    const int32_t NE = hp->n_expert, k = hp->n_expert_used, E = hp->n_embd, F = hp->n_ff_exp;
    void (*act)(kern_backend *, float *, const float *, const float *, int64_t) =
        hp->act == MODEL_ACT_SWIGLU_OAI ? o->swiglu_oai : o->swiglu;
    if (hp->n_ff_shexp > 0) shared_expert(s, be, hp, L, x, n); /* before x is overwritten */
    o->matmul(be, s->logits, &L->gate_inp, x, n);
    if (L->gate_inp_b) o->add_bias(be, s->logits, L->gate_inp_b, n, NE);
    o->download(be, s->host, s->logits, sizeof(float) * (size_t)n * (size_t)NE);
    group_choices(s, hp, n);
    o->gather_rows(be, s->xg, x, s->row_of, n * k, E);
    for (int32_t e = 0; e < NE; e++) {
        const int32_t a = s->start[e], c = s->start[e + 1] - a;
        if (c == 0) continue;
        float *hg = s->hg + (size_t)a * F, *hu = s->hu + (size_t)a * F;
        o->matmul_n(be, 2, (float *const[]){hg, hu},
                    (const kern_mat *const[]){&L->exp_gate[e], &L->exp_up[e]},
                    s->xg + (size_t)a * E, c);
        if (L->exp_gate_b) {
            o->add_bias(be, hg, L->exp_gate_b + (size_t)e * F, c, F);
            o->add_bias(be, hu, L->exp_up_b + (size_t)e * F, c, F);
        }
        act(be, hg, hg, hu, (int64_t)c * F);
        o->matmul(be, s->yg + (size_t)a * E, &L->exp_down[e], hg, c);
        if (L->exp_down_b) o->add_bias(be, s->yg + (size_t)a * E, L->exp_down_b + (size_t)e * E, c, E);
    }
    for (int32_t a = 0; a < n * k; a++) o->scale(be, s->yg + (size_t)a * E, s->w_of[a], E);
    /* x = choice 0's output, then + choice 1's, ...: each row sums in its top-k order */
    o->gather_rows(be, x, s->yg, s->at_of, n, E);
    if (k > 1) o->gather_rows(be, s->xg, s->yg, s->at_of + n, n * (k - 1), E);
    for (int32_t j = 1; j < k; j++)
        o->add(be, x, s->xg + (size_t)(j - 1) * (size_t)n * (size_t)E, (int64_t)n * E);
    if (hp->n_ff_shexp > 0) o->add(be, x, s->ysh, (int64_t)n * E);
}
