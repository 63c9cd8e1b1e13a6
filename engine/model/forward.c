/* forward.c - the model's forward pass over a batch of rows, and the KV cache it fills.
 *
 * One pass handles any mix of rows: prompt prefill, single-token decode, or a whole
 * forest step. Each row carries its own RoPE position, the KV slot it writes and the slot
 * segments it attends to (see model.h), and on windowed layers its windowed segments. Per layer, K and V of every row of the chunk are
 * rotated and stored into their slots before any row attends, so a row may attend to
 * rows earlier in the same batch. Weights are read once per chunk for all its rows. */
#include "model/model.h"
#include "model/prep.h"
#include "model/moe.h"

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
    X(att, AD)   /* attention (or DeltaNet) output */                          \
    X(hb, F)     /* ffn gate */                                  \
    X(hb2, F)    /* ffn up */                                    \
    X(ple, PL)   /* per-layer inputs, (layer, row, n_embd_ple) */ \
    X(ple2, PL)  /* their projection, (row, layer, n_embd_ple) */ \
    X(qg, QG)    /* gated attention's [q | gate] per head */     \
    X(gate, GD)  /* its gates */                                 \
    X(ssx, CD)   /* a DeltaNet layer's q, k, v before the conv */ \
    X(ssz, VD)   /* its output gate's input */                   \
    X(ssb, HV)   /* its beta before the sigmoid */               \
    X(ssa, HV)   /* its alpha before the softplus */

struct model_ctx {
    const model *m;
    const model_prep *w; /* the weights as the backend computes with them; the model's */
    kern_backend *be;
    const kern_ops *ops;
    int32_t n_slots;
    int32_t max_rows;
    float *kv;        /* a buffer: each caching layer's K cache then its V cache */
    float **k_cache;  /* (n_layer) layer l's (n_slots, n_head_kv(l) * head_dim(l)) into kv;
                         a shared-KV layer's is its source's */
    float **v_cache;  /* (n_layer) likewise */
#define ACT_FIELD(name, width) float *name;
    ACTS(ACT_FIELD)   /* (max_rows, width) each */
#undef ACT_FIELD
    uint8_t *seen;    /* (n_slots) slot check, host memory */
    int32_t *keep;    /* (max_rows + 1) the rows of a chunk that return logits */
    int32_t *ple_idx; /* (max_rows * n_layer) the per-layer inputs' reorder, host memory */
    moe_scratch *moe; /* a mixture of experts' routing (n_expert > 0), else NULL */
    int32_t *qg_idx;  /* (2 max_rows n_head) rows of qg that are queries, then gates */
    int32_t n_rstates;
    float *rstate;    /* a buffer: each recurrent layer's n_rstates cells */
    float **rs_cells; /* (n_layer) layer l's cells into rstate; NULL on attention layers */
    float *out_dev;   /* a buffer: (out_dev_rows, n_vocab) logits (model_ctx_logits) */
    float *out_host;  /* host memory (kern_host_alloc): (out_host_rows, n_vocab) */
    int32_t out_dev_rows, out_host_rows;
};

/* Floats of layer l's K rows of one slot. */
static size_t layer_kv_dim(const model_layer *L) { return (size_t)L->n_head_kv * L->head_dim; }

int64_t model_kv_slot_floats(const model_hparams *hp) {
    int64_t n = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        if (model_layer_kv_source(hp, l) == l)
            n += (int64_t)model_layer_n_head_kv(hp, l) * model_layer_head_dim(hp, l);
    return n;
}

/* The DeltaNet shape of hp (kern_gdn) without the batch. */
static kern_gdn gdn_shape(const model_hparams *hp) {
    return (kern_gdn){.n_k_heads = hp->ssm_k_heads, .n_v_heads = hp->ssm_v_heads,
                      .d_state = hp->ssm_state, .conv_k = hp->ssm_conv, .eps = hp->rms_eps};
}

int64_t model_rstate_floats(const model_hparams *hp) {
    const kern_gdn g = gdn_shape(hp);
    int64_t n = 0;
    for (int32_t l = 0; l < hp->n_layer; l++)
        if (model_layer_is_recurrent(hp, l)) n += kern_gdn_cell_floats(&g);
    return n;
}

int32_t model_ctx_n_rstates(const model_ctx *c) { return c->n_rstates; }

model_ctx_params model_ctx_default_params(void) {
    return (model_ctx_params){.n_slots = 0, .max_rows = 0, .n_threads = 0, .backend = "cpu"};
}

int32_t model_ctx_n_slots(const model_ctx *c) { return c->n_slots; }
kern_backend *model_ctx_backend(model_ctx *c) { return c->be; }

/* *buf grown to rows logits rows (at least doubling), on the backend or the host. */
static float *logits_grow(model_ctx *c, float **buf, int32_t *cap, int32_t rows, bool host,
                          st_err *err) {
    if (rows <= *cap && *buf) return *buf;
    const int32_t n = rows > 2 * *cap ? rows : 2 * *cap;
    const size_t bytes = sizeof(float) * (size_t)n * (size_t)c->m->hp.n_vocab;
    if (host) kern_host_free(c->be, *buf);
    else c->ops->buf_free(c->be, *buf);
    *cap = 0;
    *buf = host ? kern_host_alloc(c->be, bytes) : c->ops->buf_alloc(c->be, bytes);
    if (!*buf) {
        kern_backend_sync(c->be, NULL); /* (the op's record: the message is ours) */
        st_set(err, ST_ERR_NOMEM, "out of memory for %d rows of logits", (int)n);
        return NULL;
    }
    *cap = n;
    return *buf;
}

float *model_ctx_logits(model_ctx *c, int32_t n_rows, bool host, st_err *err) {
    return host ? logits_grow(c, &c->out_host, &c->out_host_rows, n_rows, true, err)
                : logits_grow(c, &c->out_dev, &c->out_dev_rows, n_rows, false, err);
}
const model_hparams *model_ctx_hparams(const model_ctx *c) { return &c->m->hp; }

st_code model_kv_permute(model_ctx *c, const int32_t *dst_of_src, st_err *err) {
    for (int32_t l = 0; l < c->m->hp.n_layer; l++) /* K and V of a layer are adjacent */
        if (c->w->layers[l].kv_src == l)
            c->ops->kv_permute(c->be, c->k_cache[l], 2, c->n_slots,
                               (int64_t)layer_kv_dim(&c->w->layers[l]), dst_of_src);
    return kern_backend_sync(c->be, err);
}

/* Copies slot's K and V rows of every caching layer between the cache and host memory
 * k and v (to_host: download). */
static st_code kv_copy(model_ctx *c, int32_t slot, float *k, float *v, bool to_host, st_err *err) {
    if (slot < 0 || slot >= c->n_slots)
        return st_set(err, ST_ERR_ARG, "KV slot %d is outside the cache (%d slots)", slot,
                      c->n_slots);
    size_t at = 0;
    for (int32_t l = 0; l < c->m->hp.n_layer; l++) {
        if (c->w->layers[l].kv_src != l) continue;
        const size_t row = layer_kv_dim(&c->w->layers[l]);
        float *kc = c->k_cache[l] + (size_t)slot * row, *vc = c->v_cache[l] + (size_t)slot * row;
        if (to_host) {
            c->ops->download(c->be, k + at, kc, row * sizeof(float));
            c->ops->download(c->be, v + at, vc, row * sizeof(float));
        } else {
            c->ops->upload(c->be, kc, k + at, row * sizeof(float));
            c->ops->upload(c->be, vc, v + at, row * sizeof(float));
        }
        at += row;
    }
    return kern_backend_sync(c->be, err);
}

st_code model_kv_read(model_ctx *c, int32_t slot, float *k, float *v, st_err *err) {
    return kv_copy(c, slot, k, v, true, err);
}

st_code model_kv_write(model_ctx *c, int32_t slot, const float *k, const float *v, st_err *err) {
    return kv_copy(c, slot, (float *)k, (float *)v, false, err);
}

void model_ctx_free(model_ctx *c) {
    if (!c) return;
    if (c->be) {
        moe_scratch_free(c->moe, c->be);
        c->ops->buf_free(c->be, c->kv);
        c->ops->buf_free(c->be, c->rstate);
        c->ops->buf_free(c->be, c->out_dev);
        kern_host_free(c->be, c->out_host);
#define ACT_FREE(name, width) c->ops->buf_free(c->be, c->name);
        ACTS(ACT_FREE)
#undef ACT_FREE
    }
    kern_backend_free(c->be);
    free(c->seen);
    free(c->keep);
    free(c->ple_idx);
    free(c->qg_idx);
    free(c->rs_cells);
    free(c->k_cache);
    free(c->v_cache);
    free(c);
}

/* The ops hp's architecture calls beyond llama's exist in backend o (kern.h: a backend
 * may not have them yet); false + ST_ERR_UNSUPPORTED naming the first missing one. */
static bool check_ops(const kern_ops *o, const model_hparams *hp, st_err *err) {
    const struct { bool need; bool have; const char *op; } ops[] = {
        {hp->rope_neox, o->rope_neox != NULL, "rope_neox"},
        {hp->qkv_bias, o->add_bias != NULL, "add_bias"},
        {hp->embd_scale != 1.0f || hp->n_expert > 0, o->scale != NULL, "scale"},
        {hp->act == MODEL_ACT_GELU_TANH, o->geglu != NULL, "geglu"},
        {hp->act == MODEL_ACT_SWIGLU_OAI, o->swiglu_oai != NULL, "swiglu_oai"},
        {hp->final_softcap > 0, o->softcap != NULL, "softcap (final logit soft-capping)"},
        {hp->full_attn_interval > 0, o->gdn != NULL, "gdn (Gated DeltaNet recurrent layers)"},
        {hp->attn_out_gate, o->sigmoid_mul != NULL, "sigmoid_mul"},
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

/* The recurrent layers' state cells (none without such layers); false when out of memory. */
static bool alloc_rstate(model_ctx *c, const model_hparams *hp) {
    const int64_t floats = model_rstate_floats(hp);
    c->rs_cells = calloc((size_t)hp->n_layer, sizeof *c->rs_cells);
    if (!c->rs_cells) return false;
    if (floats == 0) {
        c->n_rstates = 0;
        return true;
    }
    c->rstate = c->ops->buf_alloc(c->be, sizeof(float) * (size_t)floats * (size_t)c->n_rstates);
    const kern_gdn g = gdn_shape(hp);
    size_t at = 0;
    for (int32_t l = 0; c->rstate && l < hp->n_layer; l++)
        if (model_layer_is_recurrent(hp, l)) {
            c->rs_cells[l] = c->rstate + at;
            at += (size_t)kern_gdn_cell_floats(&g) * (size_t)c->n_rstates;
        }
    return c->rstate != NULL;
}

/* The KV cache (each caching layer's K then V, shared-KV layers pointing at their
 * source's), the activations of max_rows rows, and the host arrays; false when any
 * allocation failed. */
static bool alloc_ctx(model_ctx *c, const model_hparams *hp, int32_t n_slots) {
    /* (a mixture without feed_forward_length has no dense FFN: one float keeps hb allocated) */
    const size_t E = (size_t)hp->n_embd, R = (size_t)c->max_rows, F = hp->n_ff > 0 ? (size_t)hp->n_ff : 1;
    const size_t hd = (size_t)(hp->head_dim > hp->head_dim_swa ? hp->head_dim : hp->head_dim_swa);
    const size_t QD = (size_t)hp->n_head * hd, PL = (size_t)hp->n_layer * hp->n_embd_ple + 1;
    const size_t kvh = (size_t)(hp->n_head_kv > hp->n_head_kv_swa ? hp->n_head_kv : hp->n_head_kv_swa);
    const size_t KD = kvh * hd;
    const size_t QG = hp->attn_out_gate ? 2 * QD : 1, GD = hp->attn_out_gate ? QD : 1;
    const kern_gdn g = gdn_shape(hp);
    const bool rec = hp->full_attn_interval > 0;
    const size_t CD = rec ? (size_t)kern_gdn_conv_dim(&g) : 1, HV = rec ? (size_t)g.n_v_heads : 1;
    const size_t VD = rec ? HV * (size_t)g.d_state : 1, AD = QD > VD ? QD : VD;
    c->k_cache = calloc((size_t)hp->n_layer, sizeof *c->k_cache);
    c->v_cache = calloc((size_t)hp->n_layer, sizeof *c->v_cache);
    c->kv = c->ops->buf_alloc(c->be, 2 * (size_t)model_kv_slot_floats(hp) * (size_t)n_slots *
                                         sizeof(float));
    bool ok = c->kv && c->k_cache && c->v_cache;
    size_t at = 0;
    for (int32_t l = 0; ok && l < hp->n_layer; l++) {
        const model_layer *L = &c->w->layers[l];
        if (L->kv_src < 0) continue; /* a recurrent layer */
        if (L->kv_src != l) {
            c->k_cache[l] = c->k_cache[L->kv_src];
            c->v_cache[l] = c->v_cache[L->kv_src];
            continue;
        }
        const size_t block = (size_t)n_slots * layer_kv_dim(L);
        c->k_cache[l] = c->kv + at;
        c->v_cache[l] = c->kv + at + block;
        at += 2 * block;
    }
#define ACT_ALLOC(name, width) ok = ok && (c->name = c->ops->buf_alloc(c->be, sizeof(float) * R * (width)));
    ACTS(ACT_ALLOC)
#undef ACT_ALLOC
    c->seen = calloc((size_t)n_slots, 1);
    c->keep = malloc(sizeof *c->keep * (R + 1));
    c->ple_idx = malloc(sizeof *c->ple_idx * R * (size_t)hp->n_layer);
    if (ok && hp->n_expert > 0) ok = (c->moe = moe_scratch_init(c->be, hp, c->max_rows)) != NULL;
    const size_t nq = R * (size_t)hp->n_head;
    c->qg_idx = malloc(sizeof *c->qg_idx * 2 * nq);
    for (size_t i = 0; c->qg_idx && i < 2 * nq; i++)
        c->qg_idx[i] = (int32_t)(i < nq ? 2 * i : 2 * (i - nq) + 1);
    return ok && c->seen && c->keep && c->ple_idx && c->qg_idx && alloc_rstate(c, hp);
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
    c->n_rstates = p->n_rstates > 0 ? p->n_rstates : 34;
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
    if (!alloc_ctx(c, hp, n_slots)) {
        kern_backend_sync(c->be, NULL);
        st_set(err, ST_ERR_NOMEM, "cannot allocate the KV cache (%d slots, %.1f MiB), %d "
               "recurrent states (%.1f MiB) and the activations of %d rows", n_slots,
               2.0 * (double)model_kv_slot_floats(hp) * n_slots * sizeof(float) / (1 << 20),
               c->n_rstates, (double)model_rstate_floats(hp) * c->n_rstates * sizeof(float) / (1 << 20),
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

/* The rows' recurrent state cells: given, and inside the context's. */
static st_code check_rstates(const model_ctx *c, const model_batch *b, st_err *err) {
    if (!b->rs_in || !b->rs_out)
        return st_set(err, ST_ERR_ARG, "the model has recurrent layers: the batch needs each "
                      "row's state cells");
    for (int32_t r = 0; r < b->n_rows; r++)
        if (b->rs_in[r] < -1 || b->rs_in[r] >= c->n_rstates || b->rs_out[r] < 0 ||
            b->rs_out[r] >= c->n_rstates)
            return st_set(err, ST_ERR_ARG, "row %d: recurrent state cells %d -> %d are outside "
                          "the context's %d", r, b->rs_in[r], b->rs_out[r], c->n_rstates);
    return ST_OK;
}

/* Checks a batch before anything is computed, so that a bad batch changes nothing. */
static st_code check_batch(model_ctx *c, const model_batch *b, st_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (b->n_rows < 0) return st_set(err, ST_ERR_ARG, "negative row count");
    if (hp->n_swa > 0 && b->n_rows > 0 && (!b->seg_off_swa || !b->segs_swa))
        return st_set(err, ST_ERR_ARG, "the model has sliding-window layers (window %d): the "
                      "batch needs windowed segments", hp->n_swa);
    if (b->attn && (b->attn->layer < 0 || b->attn->layer >= hp->n_layer ||
                    b->attn->head < -1 || b->attn->head >= hp->n_head || !b->attn->w))
        return st_set(err, ST_ERR_ARG, "attention weights of layer %d, head %d: the model has "
                      "%d layers of %d heads", b->attn->layer, b->attn->head, hp->n_layer,
                      hp->n_head);
    if (b->attn && model_layer_is_recurrent(hp, b->attn->layer))
        return st_set(err, ST_ERR_ARG, "layer %d is a recurrent (Gated DeltaNet) layer: it has "
                      "no attention weights", b->attn->layer);
    if (c->n_rstates > 0 && b->n_rows > 0) {
        st_code rc = check_rstates(c, b, err);
        if (rc) return rc;
    }
    if (b->attn && !c->ops->attn_weights)
        return st_set(err, ST_ERR_UNSUPPORTED, "the %s backend cannot hand back attention "
                      "weights; use --backend cpu", c->ops->name);
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

/* Cells (slots over every segment) of rows [r0, r1) of segments seg_off/segs. */
static int64_t seg_cells(const int32_t *seg_off, const kern_seg *segs, int32_t r0, int32_t r1) {
    int64_t n = 0;
    for (int32_t i = seg_off[r0]; i < seg_off[r1]; i++) n += segs[i].len;
    return n;
}

/* The requested weights of rows [r0, r0 + n) into w (their cells of the full segments).
 * On a windowed layer the op fills tmp (the window's cells), which is then placed slot by
 * slot among the full cells, the others 0. */
static void chunk_attn_weights(model_ctx *c, const model_batch *b, const kern_attn *a,
                               int32_t r0, float *w, float *tmp) {
    if (a->segs == b->segs) {
        c->ops->attn_weights(c->be, a, b->attn->head, w);
        return;
    }
    c->ops->attn_weights(c->be, a, b->attn->head, tmp);
    for (int32_t r = r0; r < r0 + a->n_rows; r++) {
        const int64_t n = seg_cells(b->seg_off, b->segs, r, r + 1);
        memset(w, 0, (size_t)n * sizeof *w);
        for (int32_t i = b->seg_off_swa[r]; i < b->seg_off_swa[r + 1]; i++)
            for (int32_t t = 0; t < b->segs_swa[i].len; t++) {
                const int32_t slot = b->segs_swa[i].start + t;
                int64_t at = 0;
                for (int32_t j = b->seg_off[r]; j < b->seg_off[r + 1]; j++) {
                    const kern_seg sg = b->segs[j];
                    if (slot >= sg.start && slot < sg.start + sg.len) w[at + slot - sg.start] = *tmp;
                    at += sg.len;
                }
                tmp++;
            }
        w += n;
    }
}

/* The per-layer inputs of the chunk's n rows (Gemma 4's E models, gemma4.cpp's
 * build_inp_per_layer and project_per_layer_inputs): (the per-layer embedding row times
 * sqrt(n_embd_ple) + RMSNorm(proj x / sqrt(n_embd))) / sqrt(2), x the scaled embeddings,
 * left in c->ple as (layer, row, n_embd_ple) so each layer's block is contiguous. */
static void ple_inputs(model_ctx *c, const model_batch *b, int32_t r0, int32_t n) {
    const model_prep *w = c->w;
    const model_hparams *hp = &c->m->hp;
    const kern_ops *o = c->ops;
    const int32_t P = hp->n_embd_ple, NL = hp->n_layer;
    const size_t PL = (size_t)NL * P;
    kern_get_rows(c->be, c->ple, &w->ple_embd, b->tokens + r0, n);
    o->scale(c->be, c->ple, sqrtf((float)P), (int64_t)n * (int64_t)PL);
    o->matmul(c->be, c->ple2, &w->ple_model_proj, c->x, n);
    o->scale(c->be, c->ple2, 1.0f / sqrtf((float)hp->n_embd), (int64_t)n * (int64_t)PL);
    o->rmsnorm(c->be, c->ple2, c->ple2, w->ple_proj_norm, n * NL, P, hp->rms_eps);
    o->add(c->be, c->ple2, c->ple, (int64_t)n * (int64_t)PL);
    o->scale(c->be, c->ple2, 1.0f / sqrtf(2.0f), (int64_t)n * (int64_t)PL);
    for (int32_t l = 0; l < NL; l++)
        for (int32_t i = 0; i < n; i++) c->ple_idx[l * n + i] = i * NL + l;
    o->gather_rows(c->be, c->ple, c->ple2, c->ple_idx, n * NL, P);
}

/* Layer l's per-layer embedding added to the residual: x += RMSNorm(proj (gelu(gate x) *
 * the layer's input)). */
static void ple_layer(model_ctx *c, const model_layer *L, int32_t l, int32_t n) {
    const model_hparams *hp = &c->m->hp;
    const kern_ops *o = c->ops;
    const int64_t P = hp->n_embd_ple;
    o->matmul(c->be, c->ple2, &L->ple_gate, c->x, n); /* ple2 is free once ple_inputs ran */
    o->geglu(c->be, c->ple2, c->ple2, c->ple + (size_t)l * (size_t)n * (size_t)P, n * P);
    o->matmul(c->be, c->xb, &L->ple_proj, c->ple2, n);
    o->rmsnorm(c->be, c->xb, c->xb, L->ple_norm, n, hp->n_embd, hp->rms_eps);
    o->add(c->be, c->x, c->xb, (int64_t)n * hp->n_embd);
}

/* Layer l's attention for the chunk's n rows: the result (before wo) in c->att. A layer
 * with its own cache stores its rows' K and V first; a shared-KV layer reads its source's. */
static void attention_block(model_ctx *c, const model_batch *b, int32_t r0, int32_t n, int32_t l,
                            float *aw, float *tmp) {
    const model_prep *w = c->w;
    const model_layer *L = &w->layers[l];
    const model_hparams *hp = &c->m->hp;
    const kern_ops *o = c->ops;
    kern_backend *be = c->be;
    const bool swa = model_layer_is_swa(hp, l), own = L->kv_src == l;
    const float base = swa ? hp->rope_base_swa : hp->rope_base;
    const int32_t hd = L->head_dim, KD = (int32_t)layer_kv_dim(L);
    void (*rope)(kern_backend *, float *, const int32_t *, int32_t, int32_t, int32_t, int32_t,
                 float, const float *) = hp->rope_neox ? o->rope_neox : o->rope;
    const float *ff = swa ? w->rope_freqs_swa : w->rope_freqs;

    float *qo = hp->attn_out_gate ? c->qg : c->q;
    if (own)
        o->matmul_n(be, 3, (float *const[]){qo, c->k, c->v},
                    (const kern_mat *const[]){&L->wq, &L->wk, &L->wv}, c->xb, n);
    else
        o->matmul(be, qo, &L->wq, c->xb, n);
    if (hp->attn_out_gate) { /* each head's [q | gate] apart */
        o->gather_rows(be, c->q, c->qg, c->qg_idx, n * hp->n_head, hd);
        o->gather_rows(be, c->gate, c->qg, c->qg_idx + (size_t)c->max_rows * hp->n_head,
                       n * hp->n_head, hd);
    }
    if (L->bq) {
        o->add_bias(be, c->q, L->bq, n, hp->n_head * hd);
        o->add_bias(be, c->k, L->bk, n, KD);
        o->add_bias(be, c->v, L->bv, n, KD);
    }
    if (L->q_norm) /* every head of every row is a row of head_dim here */
        o->rmsnorm(be, c->q, c->q, L->q_norm, n * hp->n_head, hd, hp->rms_eps);
    rope(be, c->q, b->pos + r0, n, hp->n_head, hd, L->rope_dim, base, ff);
    if (own) {
        if (L->k_norm) o->rmsnorm(be, c->k, c->k, L->k_norm, n * L->n_head_kv, hd, hp->rms_eps);
        if (hp->v_norm) o->rmsnorm(be, c->v, c->v, w->ones, n * L->n_head_kv, hd, hp->rms_eps);
        rope(be, c->k, b->pos + r0, n, L->n_head_kv, hd, L->rope_dim, base, ff);
        o->kv_store(be, c->k_cache[l], KD, b->slot + r0, c->k, n);
        o->kv_store(be, c->v_cache[l], KD, b->slot + r0, c->v, n);
    }
    kern_attn a = {
        .n_rows = n, .n_head = hp->n_head, .n_head_kv = L->n_head_kv,
        .head_dim = hd, .scale = hp->attn_scale,
        .q = c->q, .k = c->k_cache[l], .v = c->v_cache[l], .seg_off = b->seg_off + r0,
        .segs = b->segs, .out = c->att, .sinks = L->sinks,
    };
    if (swa) a.seg_off = b->seg_off_swa + r0, a.segs = b->segs_swa;
    o->attention(be, &a);
    if (hp->attn_out_gate) o->sigmoid_mul(be, c->att, c->gate, (int64_t)n * hp->n_head * hd);
    if (b->attn && b->attn->layer == l) chunk_attn_weights(c, b, &a, r0, aw, tmp);
}

/* Recurrent layer l for the chunk's n rows (Gated DeltaNet, kern_gdn): the gated output
 * (before ssm_out, which is wo) in c->att, each row's state in its cell. */
static void deltanet_block(model_ctx *c, const model_batch *b, int32_t r0, int32_t n, int32_t l) {
    const model_layer *L = &c->w->layers[l];
    c->ops->matmul_n(c->be, 4, (float *const[]){c->ssx, c->ssz, c->ssb, c->ssa},
                     (const kern_mat *const[]){&L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha},
                     c->xb, n);
    kern_gdn a = gdn_shape(&c->m->hp);
    a.n_rows = n;
    a.qkv = c->ssx, a.z = c->ssz, a.beta = c->ssb, a.alpha = c->ssa;
    a.conv_w = L->ssm_conv_w, a.dt_bias = L->ssm_dt, a.a = L->ssm_a, a.norm_w = L->ssm_norm;
    a.cells = c->rs_cells[l], a.cell_in = b->rs_in + r0, a.cell_out = b->rs_out + r0;
    a.out = c->att;
    c->ops->gdn(c->be, &a);
}

/* Rows [r0, r0 + n) of the batch through every layer; leaves the residual in c->x. The
 * requested attention weights (b->attn) of these rows go to aw, with tmp for a windowed
 * layer's (chunk_attn_weights). */
static void forward_chunk(model_ctx *c, const model_batch *b, int32_t r0, int32_t n, float *aw,
                          float *tmp) {
    const model_prep *w = c->w;
    const model_hparams *hp = &c->m->hp;
    const kern_ops *o = c->ops;
    kern_backend *be = c->be;

    kern_get_rows(be, c->x, &w->tok_embd, b->tokens + r0, n);
    if (hp->embd_scale != 1.0f) o->scale(be, c->x, hp->embd_scale, (int64_t)n * hp->n_embd);
    if (hp->n_embd_ple > 0) ple_inputs(c, b, r0, n);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const model_layer *L = &w->layers[l];
        o->rmsnorm(be, c->xb, c->x, L->attn_norm, n, hp->n_embd, hp->rms_eps);
        if (L->recurrent) deltanet_block(c, b, r0, n, l);
        else attention_block(c, b, r0, n, l, aw, tmp);
        o->matmul(be, c->xb, &L->wo, c->att, n);
        if (L->bo) o->add_bias(be, c->xb, L->bo, n, hp->n_embd);
        if (L->post_attn_norm)
            o->rmsnorm(be, c->xb, c->xb, L->post_attn_norm, n, hp->n_embd, hp->rms_eps);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);

        o->rmsnorm(be, c->xb, c->x, L->ffn_norm, n, hp->n_embd, hp->rms_eps);
        if (c->moe) {
            moe_ffn(c->moe, be, hp, L, c->xb, n);
        } else {
            o->matmul_n(be, 2, (float *const[]){c->hb, c->hb2},
                        (const kern_mat *const[]){&L->w_gate, &L->w_up}, c->xb, n);
            if (hp->act == MODEL_ACT_GELU_TANH) {
                o->geglu(be, c->hb, c->hb, c->hb2, (int64_t)n * L->n_ff);
                o->matmul(be, c->xb, &L->w_down, c->hb, n);
            } else {
                kern_matmul_swiglu(be, c->xb, &L->w_down, c->hb, c->hb2, n);
            }
        }
        if (L->post_ffn_norm)
            o->rmsnorm(be, c->xb, c->xb, L->post_ffn_norm, n, hp->n_embd, hp->rms_eps);
        o->add(be, c->x, c->xb, (int64_t)n * hp->n_embd);
        if (L->ple_norm) ple_layer(c, L, l, n);
        if (L->out_scale != 1.0f) o->scale(be, c->x, L->out_scale, (int64_t)n * hp->n_embd);
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
    if (c->ops->step_begin) c->ops->step_begin(c->be); /* (ended by the sync below) */
    float *tmp = NULL; /* a windowed layer's weights, before they are placed */
    if (b->attn && model_layer_is_swa(hp, b->attn->layer) && b->n_rows > 0 &&
        !(tmp = malloc(sizeof *tmp * (size_t)seg_cells(b->seg_off_swa, b->segs_swa, 0, b->n_rows))))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the attention weights");
    for (int32_t r0 = 0; r0 < b->n_rows; r0 += c->max_rows) {
        int32_t n = b->n_rows - r0 < c->max_rows ? b->n_rows - r0 : c->max_rows;
        float *aw = b->attn ? b->attn->w + seg_cells(b->seg_off, b->segs, 0, r0) : NULL;
        forward_chunk(c, b, r0, n, aw, tmp);
        /* gather the rows that want logits, then norm + classifier on those only */
        int32_t w = 0;
        for (int32_t i = 0; i < n; i++)
            if (!b->want_logits || b->want_logits[r0 + i]) keep[w++] = i;
        if (w > 0) {
            c->ops->gather_rows(c->be, c->x, c->x, keep, w, hp->n_embd);
            c->ops->rmsnorm(c->be, c->xb, c->x, wt->out_norm, w, hp->n_embd, hp->rms_eps);
            c->ops->matmul(c->be, out, &wt->output, c->xb, w);
            if (hp->final_softcap > 0)
                c->ops->softcap(c->be, out, hp->final_softcap, (int64_t)w * hp->n_vocab);
            out += (size_t)w * hp->n_vocab;
        }
        if (b->on_chunk && r0 + n < b->n_rows && !b->on_chunk(b->chunk_ud, r0 + n, b->n_rows)) {
            free(tmp);
            return st_set(err, ST_CANCELLED, "cancelled after %d of %d rows", (int)(r0 + n), (int)b->n_rows);
        }
    }
    free(tmp);
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
    int32_t *rs = calloc((size_t)n + 1, sizeof *rs); /* cell 0 throughout; -1 to start */
    const int32_t w = c->m->hp.n_swa;
    st_code rc;
    if (!pos || !off || !segs || !want || !rs) {
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
        rs[0] = start == 0 ? -1 : 0;
        model_batch b = {.n_rows = n, .tokens = tokens, .pos = pos, .slot = pos, .seg_off = off,
                         .segs = segs, .want_logits = want, .seg_off_swa = off,
                         .segs_swa = segs + n, .rs_in = rs, .rs_out = rs + 1};
        rc = model_forward(c, &b, logits, err);
    }
    free(pos);
    free(off);
    free(segs);
    free(want);
    free(rs);
    return rc;
}
