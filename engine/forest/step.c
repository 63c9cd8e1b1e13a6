/* step.c - planning and running one forest step, top-k bookkeeping, and compaction. */
#include "base/array.h"
#include "forest/rstate.h"
#include "forest/sample.h"
#include "forest/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


void step_plan_init(step_plan *p) { memset(p, 0, sizeof *p); }

void step_plan_free(step_plan *p) {
    if (!p) return;
    free(p->node);
    free(p->tokens);
    free(p->pos);
    free(p->slot);
    free(p->seg_off);
    free(p->segs);
    free(p->want);
    free(p->out_node);
    free(p->logits_buf);
    free(p->scratch);
    free(p->row_of);
    free(p->lse);
    free(p->lse_ok);
    free(p->tk_ids);
    free(p->tk_lp);
    free(p->tk_x);
    free(p->tk_at);
    free(p->seg_off_swa);
    free(p->segs_swa);
    free(p->attn_w);
    free(p->rs_in);
    free(p->rs_out);
    free(p->rs_kind);
    memset(p, 0, sizeof *p);
}

/* Grows *arr (of elem bytes each) to hold at least need; false when out of memory. */
/* Grows every per-row array to one common capacity of at least rows (+1 for seg_off). */
static bool reserve_rows(step_plan *p, int32_t rows) {
    if (rows <= p->cap_rows) return true;
    int32_t c = p->cap_rows ? p->cap_rows : 16;
    while (c < rows) c = c > INT32_MAX / 2 ? rows : c * 2;
    size_t n = (size_t)c + 1;
#define R(field) ((field##_new = realloc(p->field, n * sizeof *p->field)) ? (p->field = field##_new, 1) : 0)
    int32_t *node_new, *tokens_new, *pos_new, *slot_new, *seg_off_new;
    uint8_t *want_new;
    bool ok = R(node) && R(tokens) && R(pos) && R(slot) && R(seg_off) && R(want);
#undef R
    if (ok) p->cap_rows = c;
    return ok;
}

/* Appends slots s[0..n) to p->segs as runs of consecutive ascending slots. */
static bool push_runs(step_plan *p, const int32_t *s, int32_t n) {
    int32_t total = p->seg_off[p->n_rows];
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && s[j] == s[j - 1] + 1) j++;
        if (!ARR_GROW_I32(p->segs, total + 1, p->cap_segs)) return false;
        p->segs[total++] = (kern_seg){s[i], j - i};
        i = j;
    }
    p->seg_off[p->n_rows + 1] = total;
    return true;
}

/* Collects the slots row r may see (ancestors' and its own) into p->scratch in path order,
 * root first. Path order (not slot order) matters: the attention kernels take keys in
 * the order given, so a leaf sees exactly the key sequence linear decoding of its path
 * sees, and its result is the same bit for bit, not just up to rounding.
 * row_of[idx] is the plan row of a pending node (slots of pending ancestors come from the
 * plan); computed ancestors have their own. */
static int32_t gather_slots(const forest *f, step_plan *p, const int32_t *row_of, int32_t idx,
                            bool *ok) {
    int32_t n = 0;
    for (int32_t i = idx; i >= 0; i = forest_node_at(f, i)->parent) {
        const forest_node *nd = forest_node_at(f, i);
        int32_t s = nd->state == FOREST_COMPUTED ? nd->kv_slot : p->slot[row_of[i]];
        if (!ARR_GROW_I32(p->scratch, n + 1, p->cap_scratch)) {
            *ok = false;
            return 0;
        }
        p->scratch[n++] = s;
    }
    for (int32_t i = 0, j = n - 1; i < j; i++, j--) {
        int32_t t = p->scratch[i];
        p->scratch[i] = p->scratch[j];
        p->scratch[j] = t;
    }
    return n;
}

void step_plan_cancel(forest *f, step_plan *p) {
    if (!p->active) return;
    for (int32_t r = 0; r < p->n_rows; r++)
        if (forest_node_at(f, p->node[r])->state == FOREST_PENDING) /* not re-scored rows */
            kv_alloc_release(forest_kv(f), p->slot[r]);
    p->active = false;
    p->n_rows = 0;
    p->n_out = 0;
}

/* Does node n become a row of the next step? */
static bool step_row_wanted(const forest_node *n) {
    return n->state == FOREST_PENDING ||
           (n->state == FOREST_COMPUTED && (n->flags & (FOREST_WANT_LOGITS | FOREST_REPLAY)));
}

st_code step_plan_build(forest *f, step_plan *p, st_err *err) {
    ASSERT(!p->active);
    p->n_rows = 0;
    p->n_out = 0;
    p->n_swa = 0; /* the windows of the last plan are stale */
    rstate_prepare(f);
    int32_t n_pending = forest_n_pending(f);
    kv_alloc *kv = forest_kv(f);
    if (n_pending > kv_alloc_n_slots(kv) - kv_alloc_used(kv))
        return st_set(err, ST_NO_KV_SLOT, "the KV cache is full: %d tokens to compute, %d of %d "
                      "slots free (prune branches, then retry)", n_pending,
                      kv_alloc_n_slots(kv) - kv_alloc_used(kv), kv_alloc_n_slots(kv));
    /* rows: pending nodes, and computed nodes flagged FOREST_WANT_LOGITS (re-scored: run
     * again in their own slot, which gets the same K/V back) */
    int32_t n_rows = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        n_rows += step_row_wanted(forest_node_at(f, i));
    if (n_rows == 0) return ST_OK;
    if (!ARR_GROW_I32(p->row_of, forest_capacity(f), p->cap_row_of) || !reserve_rows(p, n_rows) ||
        !ARR_GROW_I32(p->out_node, n_rows, p->cap_out))
        return st_set(err, ST_ERR_NOMEM, "out of memory planning a step");
    int32_t *row_of = p->row_of;
    /* 1. rows in DFS preorder: parents before children */
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (step_row_wanted(forest_node_at(f, i))) {
            row_of[i] = n;
            p->node[n++] = i;
        }
    ASSERT(n == n_rows);
    /* 2. slots: the one after the parent's when free, else the start of a free run long
     *    enough for the pending chain below (its length is bounded by the rows left) */
    for (int32_t r = 0; r < n; r++) {
        const forest_node *nd = forest_node_at(f, p->node[r]);
        int32_t hint = -1;
        if (nd->parent >= 0) {
            const forest_node *pa = forest_node_at(f, nd->parent);
            int32_t ps = pa->state == FOREST_COMPUTED ? pa->kv_slot : p->slot[row_of[nd->parent]];
            hint = ps + 1;
        }
        int32_t run = 1;
        for (int32_t c = nd->first_child; c >= 0 && run < n - r; c = forest_node_at(f, c)->first_child)
            run++;
        p->slot[r] = nd->state == FOREST_COMPUTED ? nd->kv_slot : kv_alloc_take(kv, hint, run);
        ASSERT(p->slot[r] >= 0); /* free slots were counted above */
        p->tokens[r] = nd->token;
        p->pos[r] = nd->depth;
        p->n_rows = r + 1;
    }
    p->active = true;
    /* 3. attention segments and logits rows */
    bool ok = true;
    p->n_rows = 0;
    p->seg_off[0] = 0;
    for (int32_t r = 0; r < n && ok; r++) {
        int32_t idx = p->node[r];
        int32_t k = gather_slots(f, p, row_of, idx, &ok);
        ok = ok && push_runs(p, p->scratch, k);
        p->n_rows = r + 1;
        const forest_node *nd = forest_node_at(f, idx);
        bool want = (nd->first_child < 0 && !(nd->flags & FOREST_NO_LOGITS)) ||
                    (nd->flags & FOREST_WANT_LOGITS);
        p->want[r] = want;
        if (want) p->out_node[p->n_out++] = forest_id_at(f, idx);
    }
    p->n_rows = n;
    if (!ok) {
        step_plan_cancel(f, p);
        return st_set(err, ST_ERR_NOMEM, "out of memory planning a step");
    }
    return ST_OK;
}

float step_plan_attn_of(const step_plan *p, int32_t row, int32_t slot) {
    if (p->attn_n == 0 || row < 0 || row >= p->n_rows) return NAN;
    int32_t at = 0;
    for (int32_t i = 0; i < p->seg_off[row]; i++) at += p->segs[i].len;
    for (int32_t i = p->seg_off[row]; i < p->seg_off[row + 1]; i++) {
        const kern_seg sg = p->segs[i];
        if (slot >= sg.start && slot < sg.start + sg.len) return p->attn_w[at + slot - sg.start];
        at += sg.len;
    }
    return NAN;
}

/* The attention request of a run over segments segs (the plan's unless overridden), with
 * room for its weights in p->attn_w; false when none is asked for or kept. */
static bool attn_request(step_plan *p, const kern_seg *segs, model_attn_req *req) {
    p->attn_n = 0;
    if (!p->attn_want || segs != p->segs) return false;
    int64_t n = 0;
    for (int32_t i = 0; i < p->seg_off[p->n_rows]; i++) n += p->segs[i].len;
    if (n > INT32_MAX / (int64_t)sizeof(float) || !ARR_GROW_I32(p->attn_w, (int32_t)n, p->cap_attn_w))
        return false;
    *req = (model_attn_req){.layer = p->attn_layer, .head = p->attn_head, .w = p->attn_w};
    p->attn_n = (int32_t)n;
    p->attn_w_layer = p->attn_layer, p->attn_w_head = p->attn_head;
    return true;
}

bool step_plan_sees(const step_plan *p, int32_t row, int32_t slot) {
    for (int32_t i = p->seg_off[row]; i < p->seg_off[row + 1]; i++)
        if (slot >= p->segs[i].start && slot < p->segs[i].start + p->segs[i].len) return true;
    return false;
}

/* The windowed segments of rows whose full segments are seg_off/segs: the last w keys of
 * each row's, its window since a path's positions are consecutive up to its own. */
static bool build_window(step_plan *p, const int32_t *seg_off, const kern_seg *segs, int32_t w) {
    if (!ARR_GROW_I32(p->seg_off_swa, p->n_rows + 1, p->cap_seg_off_swa)) return false;
    int32_t total = 0;
    p->seg_off_swa[0] = 0;
    for (int32_t r = 0; r < p->n_rows; r++) {
        int32_t i = seg_off[r + 1], left = w; /* segs[i..] hold the last w - left keys */
        while (i > seg_off[r] && left > 0) left -= segs[--i].len;
        if (!ARR_GROW_I32(p->segs_swa, total + seg_off[r + 1] - i, p->cap_segs_swa)) return false;
        for (int32_t j = i; j < seg_off[r + 1]; j++) p->segs_swa[total++] = segs[j];
        if (left < 0) { /* the first kept segment only in part: drop its first -left keys */
            kern_seg *first = &p->segs_swa[total - (seg_off[r + 1] - i)];
            first->start -= left;
            first->len += left;
        }
        p->seg_off_swa[r + 1] = total;
    }
    return true;
}

/* The windowed segments of hp's window from the rows' segments (seg_off, segs); none when
 * the model has no window. */
static st_code plan_window(step_plan *p, const int32_t *seg_off, const kern_seg *segs,
                           const model_hparams *hp, st_err *err) {
    p->n_swa = 0;
    p->hp = hp;
    if (hp->n_swa <= 0) return ST_OK;
    if (!build_window(p, seg_off, segs, hp->n_swa))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the windowed segments of %d rows",
                      p->n_rows);
    p->n_swa = hp->n_swa;
    return ST_OK;
}

st_code step_plan_window(step_plan *p, const model_hparams *hp, st_err *err) {
    return plan_window(p, p->seg_off, p->segs, hp, err);
}

bool step_plan_sees_window(const step_plan *p, int32_t row, int32_t slot) {
    if (p->n_swa <= 0) return step_plan_sees(p, row, slot);
    for (int32_t i = p->seg_off_swa[row]; i < p->seg_off_swa[row + 1]; i++)
        if (slot >= p->segs_swa[i].start && slot < p->segs_swa[i].start + p->segs_swa[i].len)
            return true;
    return false;
}

static int32_t out_row(const step_plan *p, forest_id node) {
    for (int32_t o = 0; o < p->n_out; o++)
        if (p->out_node[o] == node) return o;
    return -1;
}

/* Row o's log-sum-exp, computed on first use after a run: every row's in one op (its
 * rows in parallel), as the callers read most rows of a step; each row's value is the same
 * bits as computed alone. */
static kern_lse row_lse(step_plan *p, int32_t o) {
    if (!p->lse_ok[o]) {
        kern_backend_ops(p->be)->topk_lse(p->be, p->logits, p->n_out, p->n_vocab, 0, p->lse, NULL, NULL);
        memset(p->lse_ok, 1, (size_t)p->n_out);
    }
    return p->lse[o];
}

float step_logprob_of(step_plan *p, forest_id node, int32_t t) {
    float lp;
    step_logprobs_of(p, 1, &node, &t, &lp);
    return lp;
}

/* Token t's log-probability in row o's top-k (the same bits as from its logit), or NULL. */
static const float *topk_lp(const step_plan *p, int32_t o, int32_t t) {
    const int32_t nk = p->tk_k < p->n_vocab ? p->tk_k : p->n_vocab;
    for (int32_t i = 0; i < nk; i++)
        if (p->tk_ids[(size_t)o * p->tk_k + i] == t) return &p->tk_lp[(size_t)o * p->tk_k + i];
    return NULL;
}

#define LP_BATCH 64 /* logits one download_at brings back */

/* x[k] = the logit at offset at[k] of the rows on the device, k < m (NAN where the
 * download fails) */
static void dev_logits(const step_plan *p, const int64_t *at, int32_t m, float *x) {
    for (int32_t k = 0; k < m; k++) x[k] = NAN;
    kern_backend_ops(p->be)->download_at(p->be, x, p->dev_rows, at, m);
}

/* lp[at_i[k]] from the logits at offsets at[k] < m of the rows on the device, each row's
 * lse computed by the run on the device (store_topk) */
static void logits_back(const step_plan *p, const int64_t *at, const int32_t *at_i, int32_t m, float *lp) {
    float x[LP_BATCH];
    dev_logits(p, at, m, x);
    for (int32_t k = 0; k < m; k++) lp[at_i[k]] = kern_logprob(x[k], p->lse[at[k] / p->n_vocab]);
}

void step_logprobs_of(step_plan *p, int32_t n, const forest_id *node, const int32_t *t, float *lp) {
    int64_t at[LP_BATCH];
    int32_t at_i[LP_BATCH], m = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t o = p->rows_kept || p->dev_rows ? out_row(p, node[i]) : -1;
        lp[i] = NAN;
        if (o < 0 || t[i] < 0 || t[i] >= p->n_vocab) continue;
        const int64_t a = (int64_t)o * p->n_vocab + t[i];
        /* a token of the row's top-k has its log-probability there (greedy callers ask
         * for their top-1): only the others' logits come back */
        const float *k = p->rows_kept ? NULL : topk_lp(p, o, t[i]);
        if (p->rows_kept) lp[i] = kern_logprob(p->logits[a], row_lse(p, o));
        else if (k) lp[i] = *k;
        else at[m] = a, at_i[m++] = i;
        if (m == LP_BATCH) logits_back(p, at, at_i, m, lp), m = 0;
    }
    if (m > 0) logits_back(p, at, at_i, m, lp);
}

bool step_scored(const step_plan *p, forest_id node) {
    return (p->rows_kept || p->dev_rows || p->tk_k > 0) && out_row(p, node) >= 0;
}

int32_t step_argmax_of(const step_plan *p, forest_id node) {
    const float *lg = step_logits_of(p, node);
    if (lg) return sample_argmax(lg, p->n_vocab);
    const int32_t *ids;
    return step_topk_of(p, node, &ids, NULL) > 0 ? ids[0] : -1;
}

st_code step_topk_logits(step_plan *p, st_err *err) {
    const int32_t nk = p->tk_k < p->n_vocab ? p->tk_k : p->n_vocab, n = p->n_out * p->tk_k;
    if (p->tk_x_ok || nk <= 0) return ST_OK;
    if (!ARR_GROW_I32(p->tk_x, n, p->cap_tk_x) || !ARR_GROW_I32(p->tk_at, n, p->cap_tk_at))
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int32_t o = 0; o < p->n_out; o++)
        for (int32_t i = 0; i < p->tk_k; i++) {
            const int32_t t = i < nk ? p->tk_ids[(size_t)o * p->tk_k + i] : 0;
            p->tk_at[(size_t)o * p->tk_k + i] = (int64_t)o * p->n_vocab + t;
        }
    if (p->rows_kept) {
        for (int32_t i = 0; i < n; i++) p->tk_x[i] = p->logits[p->tk_at[i]];
    } else if (p->dev_rows) {
        dev_logits(p, p->tk_at, n, p->tk_x);
        st_code rc = kern_backend_sync(p->be, err);
        if (rc) return rc;
    } else {
        return ST_OK; /* (nothing scored) */
    }
    p->tk_x_ok = true;
    return ST_OK;
}

const float *step_topk_x_of(const step_plan *p, forest_id node) {
    const int32_t o = p->tk_x_ok ? out_row(p, node) : -1;
    return o < 0 ? NULL : p->tk_x + (size_t)o * p->tk_k;
}

int32_t step_topk_of(const step_plan *p, forest_id node, const int32_t **ids, const float **lp) {
    int32_t o = p->tk_k > 0 ? out_row(p, node) : -1;
    if (o < 0) return 0;
    if (ids) *ids = p->tk_ids + (size_t)o * p->tk_k;
    if (lp) *lp = p->tk_lp + (size_t)o * p->tk_k;
    return p->tk_k < p->n_vocab ? p->tk_k : p->n_vocab;
}

/* Every out row's log-sum-exp and top-k in one op on the backend from the rows (p->logits,
 * or backend memory), when the caller or the forest wants top-k, or when the rows are on
 * a device (so that they never go back up for it); the forest's share goes into each
 * node's alternatives. */
static void store_topk(forest *f, step_plan *p, const float *rows, bool on_device) {
    const int32_t K = p->tk_k, KF = forest_top_k(f) < K ? forest_top_k(f) : K;
    if ((K <= 0 && !on_device) || p->n_out == 0) return; /* (each row's lse waits until asked for) */
    kern_backend_ops(p->be)->topk_lse(p->be, rows, p->n_out, p->n_vocab, K, p->lse,
                                      K > 0 ? p->tk_ids : NULL, K > 0 ? p->tk_lp : NULL);
    memset(p->lse_ok, 1, (size_t)p->n_out);
    const int32_t n = KF < p->n_vocab ? KF : p->n_vocab;
    for (int32_t o = 0; o < p->n_out && KF > 0; o++)
        forest_store_topk(f, forest_index(p->out_node[o]), p->tk_ids + (size_t)o * K,
                          p->tk_lp + (size_t)o * K, n);
}

/* The first step of a recurrent model on a forest that has computed nodes (their K/V
 * restored, as a loaded session's): none holds a state yet, so the plan is made again
 * with the chains above its rows run again (rstate_prepare). */
static st_code plan_with_states(forest *f, step_plan *p, int32_t n_cells, st_err *err) {
    if (!forest_rstate(f, n_cells))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the recurrent state cells");
    if (forest_n_live(f) == forest_n_pending(f)) return ST_OK;
    step_plan_cancel(f, p);
    return step_plan_build(f, p, err);
}

st_code step_run(forest *f, step_plan *p, model_ctx *c, st_err *err) {
    const int32_t *pos = p->pos_override ? p->pos_override : p->pos;
    const int32_t *seg_off = p->seg_off_override ? p->seg_off_override : p->seg_off;
    const kern_seg *segs = p->segs_override ? p->segs_override : p->segs;
    p->pos_override = p->seg_off_override = NULL;
    p->segs_override = NULL;
    if (!p->active || p->n_rows == 0) return ST_OK;
    const model_hparams *hp = model_ctx_hparams(c);
    int32_t V = hp->n_vocab;
    int32_t K = forest_top_k(f) > p->top_k ? forest_top_k(f) : p->top_k;
    kern_backend *be = model_ctx_backend(c);
    const kern_ops *o = kern_backend_ops(be);
    /* A device backend computes the rows into its context's buffer, the log-sum-exp and
     * top-k there, and brings the rows down (into the context's pinned memory) only when
     * the caller reads them. */
    const bool on_device = o->device && p->n_out > 0;
    float *rows, *host = NULL;
    p->dev_rows = NULL;
    if (on_device) {
        rows = model_ctx_logits(c, p->n_out, false, NULL);
        if (rows && !p->topk_only && !(host = model_ctx_logits(c, p->n_out, true, NULL))) rows = NULL;
    } else {
        int32_t cap = p->n_vocab == V ? p->cap_logits_rows : 0; /* rows of the last vocabulary's size */
        rows = arr_reserve_i32(p->logits_buf, sizeof(float) * (size_t)V, p->n_out, &cap);
        if (rows) p->logits_buf = rows, p->cap_logits_rows = cap;
    }
    st_code rc = ST_OK;
    if (!rows ||
        !ARR_GROW_I32(p->lse, p->n_out, p->cap_lse) ||
        !ARR_GROW_I32(p->lse_ok, p->n_out, p->cap_lse_ok) ||
        !ARR_GROW_I32(p->tk_ids, p->n_out * K, p->cap_tk_ids) ||
        !ARR_GROW_I32(p->tk_lp, p->n_out * K, p->cap_tk_lp))
        rc = st_set(err, ST_ERR_NOMEM, "out of memory for %d rows of logits", p->n_out);
    /* windows from the segments the rows use (a rope-gap step's too: the last n_swa keys) */
    const int32_t n_cells = model_ctx_n_rstates(c);
    if (rc == ST_OK && n_cells > 0 && !forest_rstate(f, 0) && pos == p->pos)
        rc = plan_with_states(f, p, n_cells, err);
    if (rc == ST_OK) rc = plan_window(p, seg_off, segs, hp, err);
    if (rc == ST_OK && n_cells > 0) rc = rstate_plan(f, p, n_cells, err);
    if (rc == ST_OK) {
        p->n_vocab = V;
        p->tk_k = 0;
        p->tk_x_ok = false;
        p->rows_kept = false;
        p->be = be;
        model_batch b = {.n_rows = p->n_rows, .tokens = p->tokens, .pos = pos, .slot = p->slot,
                         .seg_off = seg_off, .segs = segs, .want_logits = p->want,
                         .seg_off_swa = p->seg_off_swa, .segs_swa = p->segs_swa,
                         .on_chunk = p->forward_progress, .chunk_ud = p->forward_ud,
                         .rs_in = p->rs_in, .rs_out = p->rs_out};
        model_attn_req req;
        if (attn_request(p, segs, &req)) b.attn = &req;
        if (p->forward_begin) p->forward_begin(p->forward_ud);
        rc = model_forward(c, &b, rows, err);
        if (p->forward_end) p->forward_end(p->forward_ud);
    }
    if (rc) {
        if (n_cells > 0) rstate_cancel(f, p);
        p->attn_n = 0;
        step_plan_cancel(f, p);
        return rc;
    }
    for (int32_t r = 0; r < p->n_rows; r++) {
        if (forest_node_at(f, p->node[r])->state == FOREST_PENDING)
            forest_mark_computed(f, p->node[r], p->slot[r]);
        else
            forest_set_flags(f, forest_id_at(f, p->node[r]), 0, FOREST_WANT_LOGITS | FOREST_REPLAY);
    }
    if (n_cells > 0) rstate_commit(f, p);
    if (p->n_out > 0) memset(p->lse_ok, 0, (size_t)p->n_out);
    p->tk_k = K;
    store_topk(f, p, rows, on_device);
    if (host) o->download(be, host, rows, sizeof(float) * (size_t)V * (size_t)p->n_out);
    p->logits = on_device ? host : p->logits_buf;
    p->rows_kept = p->logits != NULL || p->n_out == 0;
    p->dev_rows = on_device ? rows : NULL;
    p->active = false;
    return ST_OK;
}

st_code step_forest(forest *f, step_plan *p, model_ctx *c, st_err *err) {
    st_code rc = step_plan_build(f, p, err);
    if (rc) return rc;
    return step_run(f, p, c, err);
}

int32_t step_device_topk(model_ctx *c, int32_t k) {
    return kern_backend_ops(model_ctx_backend(c))->device && k > 0 && k <= STEP_TOPK_DEVICE_MAX ? k : 0;
}

st_code step_forest_topk(forest *f, step_plan *p, model_ctx *c, int32_t top_k, st_err *err) {
    const bool only = p->topk_only;
    const int32_t k = p->top_k;
    if (kern_backend_ops(model_ctx_backend(c))->device) p->topk_only = true, p->top_k = k > top_k ? k : top_k;
    st_code rc = step_forest(f, p, c, err);
    p->topk_only = only, p->top_k = k;
    return rc;
}

const float *step_logits_of(const step_plan *p, forest_id node) {
    int32_t o = p->rows_kept ? out_row(p, node) : -1;
    return o < 0 ? NULL : p->logits + (size_t)o * p->n_vocab;
}

st_code step_compact(forest *f, model_ctx *c, st_err *err) {
    kv_alloc *kv = forest_kv(f);
    int32_t n_slots = kv_alloc_n_slots(kv), cap = forest_capacity(f);
    int32_t *dst_of_src = malloc(sizeof(int32_t) * (size_t)n_slots);
    if (!dst_of_src) return st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int32_t s = 0; s < n_slots; s++) dst_of_src[s] = -1;
    /* new slots in DFS order, so each chain becomes one run */
    int32_t next = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        if (nd->state == FOREST_COMPUTED) dst_of_src[nd->kv_slot] = next++;
    }
    st_code rc = model_kv_permute(c, dst_of_src, err);
    if (rc == ST_OK) {
        for (int32_t k = 0; k < cap; k++) {
            const forest_node *nd = forest_node_at(f, k);
            if (nd->state == FOREST_COMPUTED) forest_move_slot(f, k, dst_of_src[nd->kv_slot]);
        }
        kv_alloc_reset(kv);
        for (int32_t s = 0; s < next; s++) kv_alloc_take(kv, s, 1);
    }
    free(dst_of_src);
    return rc;
}
