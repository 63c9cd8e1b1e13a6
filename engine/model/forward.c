/* forward.c - the model's forward pass over a batch of rows, and the KV cache it fills.
 *
 * One pass handles any mix of rows: prompt prefill, single-token decode, or a whole
 * forest step. Each row carries its own RoPE position, the KV slot it writes and the slot
 * segments it attends to (see model.h). Per layer, K and V of every row of the chunk are
 * rotated and stored into their slots before any row attends, so a row may attend to
 * rows earlier in the same batch. Weights are read once per chunk for all its rows. */
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct model_ctx {
    const model *m;
    kern_backend *be;
    const kern_ops *ops;
    int32_t n_slots;
    int32_t max_rows;
    size_t kv_dim;
    float *k_cache;   /* (n_layer, n_slots, kv_dim) */
    float *v_cache;   /* (n_layer, n_slots, kv_dim) */
    void *k_mem, *v_mem; /* the blocks the caches are aligned in */
    /* scratch, (max_rows, width) each */
    float *x;         /* residual stream, n_embd */
    float *xb;        /* normed input, n_embd */
    float *q;         /* queries, n_head * head_dim */
    float *k;         /* keys, kv_dim */
    float *v;         /* values, kv_dim */
    float *att;       /* attention output, n_head * head_dim */
    float *hb;        /* ffn gate, n_ff */
    float *hb2;       /* ffn up, n_ff */
    uint8_t *seen;    /* (n_slots) slot check */
};

model_ctx_params model_ctx_default_params(void) {
    return (model_ctx_params){.n_slots = 0, .max_rows = 0, .n_threads = 0, .backend = "cpu"};
}

int32_t model_ctx_n_slots(const model_ctx *c) { return c->n_slots; }
kern_backend *model_ctx_backend(model_ctx *c) { return c->be; }
const model_hparams *model_ctx_hparams(const model_ctx *c) { return &c->m->hp; }

st_code model_kv_permute(model_ctx *c, const int32_t *dst_of_src, st_err *err) {
    size_t row = c->kv_dim * sizeof(float), layer = (size_t)c->n_slots * c->kv_dim;
    float *tmp = malloc(layer * sizeof(float));
    if (!tmp) return st_set(err, ST_ERR_NOMEM, "out of memory moving the KV cache");
    for (int32_t l = 0; l < c->m->hp.n_layer; l++) {
        float *caches[2] = {c->k_cache + l * layer, c->v_cache + l * layer};
        for (int w = 0; w < 2; w++) {
            memcpy(tmp, caches[w], layer * sizeof(float));
            for (int32_t s = 0; s < c->n_slots; s++)
                if (dst_of_src[s] >= 0)
                    memcpy(caches[w] + (size_t)dst_of_src[s] * c->kv_dim, tmp + (size_t)s * c->kv_dim, row);
        }
    }
    free(tmp);
    return ST_OK;
}

void model_ctx_free(model_ctx *c) {
    if (!c) return;
    kern_backend_free(c->be);
    free(c->k_mem);
    free(c->v_mem);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->hb);
    free(c->hb2);
    free(c->seen);
    free(c);
}

/* rows x width floats at a multiple of 64 bytes (a cache line, one AVX-512 vector), so
 * that the kernels' vector loads of a row never straddle two lines. */
static float *alloc_f(size_t rows, size_t width) {
    return aligned_alloc(64, (sizeof(float) * rows * width + 63) / 64 * 64);
}

/* n zeroed floats at a multiple of 64 bytes inside a calloc block (*mem, what to free):
 * calloc leaves a large cache's pages untouched until used, and the alignment matters
 * most here (a forest step's attention reads the cache once per row block; figures:
 * kernels/README.md). */
static float *alloc_cache(size_t n, void **mem) {
    *mem = calloc(n * sizeof(float) + 64, 1);
    if (!*mem) return NULL;
    return (float *)(((uintptr_t)*mem + 63) / 64 * 64);
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
    c->be = kern_backend_init(p->backend ? p->backend : "cpu", p->n_threads, err);
    if (!c->be) {
        model_ctx_free(c);
        return NULL;
    }
    c->ops = kern_backend_ops(c->be);
    c->kv_dim = (size_t)hp->n_head_kv * hp->head_dim;
    size_t qd = (size_t)hp->n_head * hp->head_dim, R = (size_t)c->max_rows;
    size_t cache = (size_t)hp->n_layer * (size_t)n_slots * c->kv_dim;
    c->k_cache = alloc_cache(cache, &c->k_mem);
    c->v_cache = alloc_cache(cache, &c->v_mem);
    c->x = alloc_f(R, hp->n_embd);
    c->xb = alloc_f(R, hp->n_embd);
    c->q = alloc_f(R, qd);
    c->k = alloc_f(R, c->kv_dim);
    c->v = alloc_f(R, c->kv_dim);
    c->att = alloc_f(R, qd);
    c->hb = alloc_f(R, hp->n_ff);
    c->hb2 = alloc_f(R, hp->n_ff);
    c->seen = calloc((size_t)n_slots, 1);
    if (!c->k_cache || !c->v_cache || !c->x || !c->xb || !c->q || !c->k || !c->v || !c->att ||
        !c->hb || !c->hb2 || !c->seen) {
        st_set(err, ST_ERR_NOMEM, "cannot allocate the KV cache (%d slots, %.1f MiB)", n_slots,
               2.0 * (double)cache * sizeof(float) / (1 << 20));
        model_ctx_free(c);
        return NULL;
    }
    return c;
}

/* Checks a batch before anything is computed, so that a bad batch changes nothing. */
static st_code check_batch(model_ctx *c, const model_batch *b, st_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (b->n_rows < 0) return st_set(err, ST_ERR_ARG, "negative row count");
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
        if (rc) break;
        if (b->seg_off[r + 1] < b->seg_off[r] || b->seg_off[r] < 0) {
            rc = st_set(err, ST_ERR_ARG, "row %d: bad segment offsets", r);
            break;
        }
        bool own = false;
        for (int32_t i = b->seg_off[r]; i < b->seg_off[r + 1]; i++) {
            kern_seg sg = b->segs[i];
            if (sg.start < 0 || sg.len <= 0 || sg.start > c->n_slots - sg.len) {
                rc = st_set(err, ST_ERR_ARG, "row %d: segment [%d, +%d) is outside the cache", r,
                            sg.start, sg.len);
                break;
            }
            own |= s >= sg.start && s < sg.start + sg.len;
        }
        if (!rc && !own)
            rc = st_set(err, ST_ERR_ARG, "row %d: its segments do not include its own slot %d", r, s);
    }
    for (int32_t i = 0; i < b->n_rows && i <= r; i++)
        if (b->slot[i] >= 0 && b->slot[i] < c->n_slots) c->seen[b->slot[i]] = 0;
    return rc;
}

/* Rows [r0, r0 + n) of the batch through every layer; leaves the residual in c->x. */
static void forward_chunk(model_ctx *c, const model_batch *b, int32_t r0, int32_t n) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    const kern_ops *o = c->ops;
    kern_backend *be = c->be;
    size_t E = (size_t)hp->n_embd, KD = c->kv_dim;
    size_t layer_stride = (size_t)c->n_slots * KD;

    for (int32_t i = 0; i < n; i++) o->get_row(be, c->x + i * E, &m->tok_embd, b->tokens[r0 + i]);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const model_layer *L = &m->layers[l];
        float *kc = c->k_cache + l * layer_stride, *vc = c->v_cache + l * layer_stride;

        o->rmsnorm(be, c->xb, c->x, L->attn_norm, n, hp->n_embd, hp->rms_eps);
        o->matmul_n(be, 3, (float *const[]){c->q, c->k, c->v},
                    (const kern_mat *const[]){&L->wq, &L->wk, &L->wv}, c->xb, n);
        o->rope(be, c->q, b->pos + r0, n, hp->n_head, hp->head_dim, hp->rope_dim, hp->rope_base,
                m->rope_freqs);
        o->rope(be, c->k, b->pos + r0, n, hp->n_head_kv, hp->head_dim, hp->rope_dim,
                hp->rope_base, m->rope_freqs);
        for (int32_t i = 0; i < n; i++) {
            size_t s = (size_t)b->slot[r0 + i];
            memcpy(kc + s * KD, c->k + i * KD, KD * sizeof(float));
            memcpy(vc + s * KD, c->v + i * KD, KD * sizeof(float));
        }
        kern_attn a = {
            .n_rows = n, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
            .head_dim = hp->head_dim, .scale = 1.0f / sqrtf((float)hp->head_dim),
            .q = c->q, .k = kc, .v = vc, .seg_off = b->seg_off + r0, .segs = b->segs,
            .out = c->att,
        };
        o->attention(be, &a);
        o->matmul(be, c->xb, &L->wo, c->att, n);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);

        o->rmsnorm(be, c->xb, c->x, L->ffn_norm, n, hp->n_embd, hp->rms_eps);
        o->matmul_n(be, 2, (float *const[]){c->hb, c->hb2},
                    (const kern_mat *const[]){&L->w_gate, &L->w_up}, c->xb, n);
        o->swiglu(be, c->hb, c->hb, c->hb2, (int64_t)n * hp->n_ff);
        o->matmul(be, c->xb, &L->w_down, c->hb, n);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);
    }
}

st_code model_forward(model_ctx *c, const model_batch *b, float *logits, st_err *err) {
    st_code rc = check_batch(c, b, err);
    if (rc) return rc;
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    float *out = logits;
    int32_t *keep = malloc(sizeof *keep * ((size_t)(b->n_rows < c->max_rows ? b->n_rows : c->max_rows) + 1));
    if (!keep) return st_set(err, ST_ERR_NOMEM, "out of memory for a batch of %d rows", b->n_rows);
    for (int32_t r0 = 0; r0 < b->n_rows; r0 += c->max_rows) {
        int32_t n = b->n_rows - r0 < c->max_rows ? b->n_rows - r0 : c->max_rows;
        forward_chunk(c, b, r0, n);
        /* gather the rows that want logits, then norm + classifier on those only */
        int32_t w = 0;
        for (int32_t i = 0; i < n; i++)
            if (!b->want_logits || b->want_logits[r0 + i]) keep[w++] = i;
        if (w == 0) continue;
        c->ops->gather_rows(c->be, c->x, c->x, keep, w, hp->n_embd);
        c->ops->rmsnorm(c->be, c->xb, c->x, m->out_norm, w, hp->n_embd, hp->rms_eps);
        c->ops->matmul(c->be, out, &m->output, c->xb, w);
        out += (size_t)w * hp->n_vocab;
    }
    free(keep);
    return kern_backend_take_error(c->be, err); /* an op short of scratch memory */
}

st_code model_forward_linear(model_ctx *c, const int32_t *tokens, int32_t n, int32_t start,
                             float *logits, st_err *err) {
    if (n <= 0) return st_set(err, ST_ERR_ARG, "no tokens to run");
    if (start < 0 || start > c->n_slots - n)
        return st_set(err, ST_ERR_CONTEXT, "%d tokens at position %d do not fit in the context "
                      "(%d tokens)", n, start, c->n_slots);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    int32_t *off = malloc(sizeof(int32_t) * ((size_t)n + 1));
    kern_seg *segs = malloc(sizeof(kern_seg) * (size_t)n);
    uint8_t *want = calloc((size_t)n, 1);
    st_code rc;
    if (!pos || !off || !segs || !want) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    } else {
        for (int32_t i = 0; i < n; i++) {
            pos[i] = start + i;
            off[i] = i;
            segs[i] = (kern_seg){0, start + i + 1};
        }
        off[n] = n;
        want[n - 1] = 1;
        model_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .slot = pos, .seg_off = off,
                         .segs = segs, .want_logits = want};
        rc = model_forward(c, &b, logits, err);
    }
    free(pos);
    free(off);
    free(segs);
    free(want);
    return rc;
}
