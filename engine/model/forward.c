/* forward.c - the model's forward pass over a batch of rows, and the KV cache it fills.
 *
 * One pass handles any mix of rows: prompt prefill, single-token decode, or a whole
 * forest step. Each row carries its own RoPE position, the KV slot it writes and the slot
 * segments it attends to (see model.h), and on windowed layers its windowed segments. Per layer, K and V of every row of the chunk are
 * rotated and stored into their slots before any row attends, so a row may attend to
 * rows earlier in the same batch. Weights are read once per chunk for all its rows. */
#include "model/model.h"
#include "model/prep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The activations of max_rows rows, one backend buffer each: (field, width). */
#define ACTS(X)                                                  \
    X(x, E)      /* residual stream */                           \
    X(xb, E)     /* normed input */                              \
    X(q, QD)     /* queries */                                   \
    X(k, KD)     /* keys */                                      \
    X(v, KD)     /* values */                                    \
    X(att, QD)   /* attention output */                          \
    X(hb, F)     /* ffn gate */                                  \
    X(hb2, F)    /* ffn up */

struct model_ctx {
    const model *m;
    const model_prep *w; /* the weights as the backend computes with them; the model's */
    kern_backend *be;
    const kern_ops *ops;
    int32_t n_slots;
    int32_t max_rows;
    size_t kv_dim;
    float *kv;        /* a buffer: every layer's K cache, then every layer's V cache */
    float *k_cache;   /* (n_layer, n_slots, kv_dim) into kv */
    float *v_cache;   /* (n_layer, n_slots, kv_dim) into kv */
#define ACT_FIELD(name, width) float *name;
    ACTS(ACT_FIELD)   /* (max_rows, width) each */
#undef ACT_FIELD
    uint8_t *seen;    /* (n_slots) slot check, host memory */
    int32_t *keep;    /* (max_rows + 1) the rows of a chunk that return logits */
};

model_ctx_params model_ctx_default_params(void) {
    return (model_ctx_params){.n_slots = 0, .max_rows = 0, .n_threads = 0, .backend = "cpu"};
}

int32_t model_ctx_n_slots(const model_ctx *c) { return c->n_slots; }
kern_backend *model_ctx_backend(model_ctx *c) { return c->be; }
const model_hparams *model_ctx_hparams(const model_ctx *c) { return &c->m->hp; }

st_code model_kv_permute(model_ctx *c, const int32_t *dst_of_src, st_err *err) {
    c->ops->kv_permute(c->be, c->kv, 2 * (int64_t)c->m->hp.n_layer, c->n_slots,
                       (int64_t)c->kv_dim, dst_of_src);
    return kern_backend_sync(c->be, err);
}

st_code model_kv_read(model_ctx *c, int32_t slot, float *k, float *v, st_err *err) {
    if (slot < 0 || slot >= c->n_slots)
        return st_set(err, ST_ERR_ARG, "KV slot %d is outside the cache (%d slots)", slot,
                      c->n_slots);
    const size_t row = c->kv_dim, layer = (size_t)c->n_slots * row;
    for (int32_t l = 0; l < c->m->hp.n_layer; l++) {
        c->ops->download(c->be, k + l * row, c->k_cache + l * layer + slot * row, row * sizeof(float));
        c->ops->download(c->be, v + l * row, c->v_cache + l * layer + slot * row, row * sizeof(float));
    }
    return kern_backend_sync(c->be, err);
}

st_code model_kv_write(model_ctx *c, int32_t slot, const float *k, const float *v, st_err *err) {
    if (slot < 0 || slot >= c->n_slots)
        return st_set(err, ST_ERR_ARG, "KV slot %d is outside the cache (%d slots)", slot,
                      c->n_slots);
    const size_t row = c->kv_dim, layer = (size_t)c->n_slots * row;
    for (int32_t l = 0; l < c->m->hp.n_layer; l++) {
        c->ops->upload(c->be, c->k_cache + l * layer + slot * row, k + l * row, row * sizeof(float));
        c->ops->upload(c->be, c->v_cache + l * layer + slot * row, v + l * row, row * sizeof(float));
    }
    return kern_backend_sync(c->be, err);
}

void model_ctx_free(model_ctx *c) {
    if (!c) return;
    if (c->be) {
        c->ops->buf_free(c->be, c->kv);
#define ACT_FREE(name, width) c->ops->buf_free(c->be, c->name);
        ACTS(ACT_FREE)
#undef ACT_FREE
    }
    kern_backend_free(c->be);
    free(c->seen);
    free(c->keep);
    free(c);
}

/* The ops hp's architecture calls beyond llama's exist in backend o (kern.h: a backend
 * may not have them yet); false + ST_ERR_UNSUPPORTED naming the first missing one. */
static bool check_ops(const kern_ops *o, const model_hparams *hp, st_err *err) {
    const struct { bool need; bool have; const char *op; } ops[] = {
        {hp->rope_neox, o->rope_neox != NULL, "rope_neox"},
        {hp->qkv_bias, o->add_bias != NULL, "add_bias"},
        {hp->embd_scale != 1.0f, o->scale != NULL, "scale"},
        {hp->act == MODEL_ACT_GELU_TANH, o->geglu != NULL, "geglu"},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].need && !ops[i].have) {
            st_set(err, ST_ERR_UNSUPPORTED, "the %s backend cannot run architecture %s yet (it "
                   "has no %s op); use --backend cpu", o->name, model_arch_name(hp->arch),
                   ops[i].op);
            return false;
        }
    return true;
}

model_ctx *model_ctx_init(const model *m, const model_ctx_params *p, st_err *err) {
    model_ctx_params dp = model_ctx_default_params();
    if (!p) p = &dp;
    const model_hparams *hp = &m->hp;
    int32_t n_slots = p->n_slots > 0 ? p->n_slots
                      : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (n_slots <= 0 || n_slots > (1 << 24)) {
        st_set(err, ST_ERR_ARG, "KV cache size %d is out of range", n_slots);
        return NULL;
    }
    model_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->m = m;
    c->n_slots = n_slots;
    c->max_rows = p->max_rows > 0 ? p->max_rows : 512;
    const char *name = p->backend ? p->backend : "cpu";
    c->be = kern_backend_init(name, p->n_threads, err);
    if (!c->be || !(c->w = model_prep_get(m, name, p->no_pack, err))) {
        model_ctx_free(c);
        return NULL;
    }
    c->ops = kern_backend_ops(c->be);
    if (!check_ops(c->ops, hp, err)) {
        model_ctx_free(c);
        return NULL;
    }
    c->kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t E = (size_t)hp->n_embd, QD = (size_t)hp->n_head * hp->head_dim,
                 KD = c->kv_dim, F = (size_t)hp->n_ff, R = (size_t)c->max_rows;
    size_t cache = (size_t)hp->n_layer * (size_t)n_slots * c->kv_dim;
    c->kv = c->ops->buf_alloc(c->be, 2 * cache * sizeof(float));
    c->k_cache = c->kv;
    c->v_cache = c->kv ? c->kv + cache : NULL;
    bool ok = c->kv != NULL;
#define ACT_ALLOC(name, width) ok = ok && (c->name = c->ops->buf_alloc(c->be, sizeof(float) * R * (width)));
    ACTS(ACT_ALLOC)
#undef ACT_ALLOC
    c->seen = calloc((size_t)n_slots, 1);
    c->keep = malloc(sizeof *c->keep * ((size_t)c->max_rows + 1));
    if (!ok || !c->seen || !c->keep) {
        kern_backend_sync(c->be, NULL);
        st_set(err, ST_ERR_NOMEM, "cannot allocate the KV cache (%d slots, %.1f MiB) and the "
               "activations of %d rows", n_slots, 2.0 * (double)cache * sizeof(float) / (1 << 20),
               c->max_rows);
        model_ctx_free(c);
        return NULL;
    }
    return c;
}

/* Checks row r's segments segs[seg_off[r] .. seg_off[r + 1]) (what: "" or " windowed"):
 * inside the cache, and its own slot s among them. */
static st_code check_segs(const model_ctx *c, int32_t r, int32_t s, const int32_t *seg_off,
                          const kern_seg *segs, const char *what, st_err *err) {
    if (seg_off[r + 1] < seg_off[r] || seg_off[r] < 0)
        return st_set(err, ST_ERR_ARG, "row %d: bad%s segment offsets", r, what);
    bool own = false;
    for (int32_t i = seg_off[r]; i < seg_off[r + 1]; i++) {
        kern_seg sg = segs[i];
        if (sg.start < 0 || sg.len <= 0 || sg.start > c->n_slots - sg.len)
            return st_set(err, ST_ERR_ARG, "row %d:%s segment [%d, +%d) is outside the cache", r,
                          what, sg.start, sg.len);
        own |= s >= sg.start && s < sg.start + sg.len;
    }
    if (!own)
        return st_set(err, ST_ERR_ARG, "row %d: its%s segments do not include its own slot %d", r,
                      what, s);
    return ST_OK;
}

/* Checks a batch before anything is computed, so that a bad batch changes nothing. */
static st_code check_batch(model_ctx *c, const model_batch *b, st_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (b->n_rows < 0) return st_set(err, ST_ERR_ARG, "negative row count");
    if (hp->n_swa > 0 && b->n_rows > 0 && (!b->seg_off_swa || !b->segs_swa))
        return st_set(err, ST_ERR_ARG, "the model has sliding-window layers (window %d): the "
                      "batch needs windowed segments", hp->n_swa);
    st_code rc = ST_OK;
    int32_t r = 0;
    for (; r < b->n_rows && rc == ST_OK; r++) {
        int32_t s = b->slot[r];
        if (b->tokens[r] < 0 || b->tokens[r] >= hp->n_vocab)
            rc = st_set(err, ST_ERR_ARG, "row %d: token id %d is out of range [0, %d)", r,
                        b->tokens[r], hp->n_vocab);
        else if (b->pos[r] < 0)
            rc = st_set(err, ST_ERR_ARG, "row %d: negative position %d", r, b->pos[r]);
        else if (s < 0 || s >= c->n_slots)
            rc = st_set(err, ST_ERR_CONTEXT, "row %d: KV slot %d is outside the cache (%d slots)",
                        r, s, c->n_slots);
        else if (c->seen[s])
            rc = st_set(err, ST_ERR_ARG, "row %d: KV slot %d is written by two rows", r, s);
        else
            c->seen[s] = 1;
        if (!rc) rc = check_segs(c, r, s, b->seg_off, b->segs, "", err);
        if (!rc && hp->n_swa > 0) rc = check_segs(c, r, s, b->seg_off_swa, b->segs_swa, " windowed", err);
        if (rc) break;
    }
    for (int32_t i = 0; i < b->n_rows && i <= r; i++)
        if (b->slot[i] >= 0 && b->slot[i] < c->n_slots) c->seen[b->slot[i]] = 0;
    return rc;
}

/* Rows [r0, r0 + n) of the batch through every layer; leaves the residual in c->x. */
static void forward_chunk(model_ctx *c, const model_batch *b, int32_t r0, int32_t n) {
    const model_prep *w = c->w;
    const model_hparams *hp = &c->m->hp;
    const kern_ops *o = c->ops;
    kern_backend *be = c->be;
    size_t E = (size_t)hp->n_embd, KD = c->kv_dim;
    size_t layer_stride = (size_t)c->n_slots * KD;

    for (int32_t i = 0; i < n; i++) o->get_row(be, c->x + i * E, &w->tok_embd, b->tokens[r0 + i]);
    if (hp->embd_scale != 1.0f) o->scale(be, c->x, hp->embd_scale, (int64_t)n * hp->n_embd);
    /* the architecture's choices, fixed for the pass (arch.c) */
    void (*rope)(kern_backend *, float *, const int32_t *, int32_t, int32_t, int32_t, int32_t,
                 float, const float *) = hp->rope_neox ? o->rope_neox : o->rope;
    void (*act)(kern_backend *, float *, const float *, const float *, int64_t) =
        hp->act == MODEL_ACT_GELU_TANH ? o->geglu : o->swiglu;

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const model_layer *L = &w->layers[l];
        float *kc = c->k_cache + l * layer_stride, *vc = c->v_cache + l * layer_stride;
        const bool swa = model_layer_is_swa(hp, l);
        const float base = swa ? hp->rope_base_swa : hp->rope_base;

        o->rmsnorm(be, c->xb, c->x, L->attn_norm, n, hp->n_embd, hp->rms_eps);
        o->matmul_n(be, 3, (float *const[]){c->q, c->k, c->v},
                    (const kern_mat *const[]){&L->wq, &L->wk, &L->wv}, c->xb, n);
        if (L->bq) {
            o->add_bias(be, c->q, L->bq, n, hp->n_head * hp->head_dim);
            o->add_bias(be, c->k, L->bk, n, (int32_t)KD);
            o->add_bias(be, c->v, L->bv, n, (int32_t)KD);
        }
        if (L->q_norm) { /* every head of every row is a row of head_dim here */
            o->rmsnorm(be, c->q, c->q, L->q_norm, n * hp->n_head, hp->head_dim, hp->rms_eps);
            o->rmsnorm(be, c->k, c->k, L->k_norm, n * hp->n_head_kv, hp->head_dim, hp->rms_eps);
        }
        const float *ff = swa ? w->rope_freqs_swa : w->rope_freqs;
        rope(be, c->q, b->pos + r0, n, hp->n_head, hp->head_dim, hp->rope_dim, base, ff);
        rope(be, c->k, b->pos + r0, n, hp->n_head_kv, hp->head_dim, hp->rope_dim, base, ff);
        o->kv_store(be, kc, (int64_t)KD, b->slot + r0, c->k, n);
        o->kv_store(be, vc, (int64_t)KD, b->slot + r0, c->v, n);
        kern_attn a = {
            .n_rows = n, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
            .head_dim = hp->head_dim, .scale = hp->attn_scale,
            .q = c->q, .k = kc, .v = vc, .seg_off = b->seg_off + r0, .segs = b->segs,
            .out = c->att,
        };
        if (swa) a.seg_off = b->seg_off_swa + r0, a.segs = b->segs_swa;
        o->attention(be, &a);
        o->matmul(be, c->xb, &L->wo, c->att, n);
        if (L->post_attn_norm)
            o->rmsnorm(be, c->xb, c->xb, L->post_attn_norm, n, hp->n_embd, hp->rms_eps);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);

        o->rmsnorm(be, c->xb, c->x, L->ffn_norm, n, hp->n_embd, hp->rms_eps);
        o->matmul_n(be, 2, (float *const[]){c->hb, c->hb2},
                    (const kern_mat *const[]){&L->w_gate, &L->w_up}, c->xb, n);
        act(be, c->hb, c->hb, c->hb2, (int64_t)n * hp->n_ff);
        o->matmul(be, c->xb, &L->w_down, c->hb, n);
        if (L->post_ffn_norm)
            o->rmsnorm(be, c->xb, c->xb, L->post_ffn_norm, n, hp->n_embd, hp->rms_eps);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);
    }
}

st_code model_forward(model_ctx *c, const model_batch *b, float *logits, st_err *err) {
    st_code rc = check_batch(c, b, err);
    if (rc) return rc;
    const model_prep *wt = c->w;
    const model_hparams *hp = &c->m->hp;
    float *out = logits;
    int32_t *keep = c->keep;
    if (b->on_chunk && b->n_rows > c->max_rows && !b->on_chunk(b->chunk_ud, 0, b->n_rows))
        return st_set(err, ST_CANCELLED, "cancelled before the first of %d rows", (int)b->n_rows);
    for (int32_t r0 = 0; r0 < b->n_rows; r0 += c->max_rows) {
        int32_t n = b->n_rows - r0 < c->max_rows ? b->n_rows - r0 : c->max_rows;
        forward_chunk(c, b, r0, n);
        /* gather the rows that want logits, then norm + classifier on those only */
        int32_t w = 0;
        for (int32_t i = 0; i < n; i++)
            if (!b->want_logits || b->want_logits[r0 + i]) keep[w++] = i;
        if (w > 0) {
            c->ops->gather_rows(c->be, c->x, c->x, keep, w, hp->n_embd);
            c->ops->rmsnorm(c->be, c->xb, c->x, wt->out_norm, w, hp->n_embd, hp->rms_eps);
            c->ops->matmul(c->be, out, &wt->output, c->xb, w);
            out += (size_t)w * hp->n_vocab;
        }
        if (b->on_chunk && r0 + n < b->n_rows && !b->on_chunk(b->chunk_ud, r0 + n, b->n_rows))
            return st_set(err, ST_CANCELLED, "cancelled after %d of %d rows", (int)(r0 + n), (int)b->n_rows);
    }
    return kern_backend_sync(c->be, err); /* an op short of scratch memory */
}

st_code model_forward_linear(model_ctx *c, const int32_t *tokens, int32_t n, int32_t start,
                             float *logits, st_err *err) {
    if (n <= 0) return st_set(err, ST_ERR_ARG, "no tokens to run");
    if (start < 0 || start > c->n_slots - n)
        return st_set(err, ST_ERR_CONTEXT, "%d tokens at position %d do not fit in the context "
                      "(%d tokens)", n, start, c->n_slots);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *off = malloc(sizeof(int32_t) * ((size_t)n + 1));
    kern_seg *segs = malloc(sizeof(kern_seg) * 2 * (size_t)n); /* n full, then n windowed */
    uint8_t *want = calloc((size_t)n, 1);
    const int32_t w = c->m->hp.n_swa;
    st_code rc;
    if (!pos || !off || !segs || !want) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    } else {
        for (int32_t i = 0; i < n; i++) {
            pos[i] = start + i;
            off[i] = i;
            segs[i] = (kern_seg){0, start + i + 1};
            segs[n + i] = w > 0 && start + i + 1 > w ? (kern_seg){start + i + 1 - w, w} : segs[i];
        }
        off[n] = n;
        want[n - 1] = 1;
        model_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .slot = pos, .seg_off = off,
                         .segs = segs, .want_logits = want, .seg_off_swa = off,
                         .segs_swa = segs + n};
        rc = model_forward(c, &b, logits, err);
    }
    free(pos);
    free(off);
    free(segs);
    free(want);
    return rc;
}
