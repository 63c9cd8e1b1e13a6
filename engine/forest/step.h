/* step.h - one forward pass over every pending node of a forest.
 *
 * step_plan_build orders the pending nodes parents-first (DFS preorder), gives each the
 * KV slot after its parent's when free (so chains are contiguous), its RoPE position (its
 * depth), and its attention set: the slots of its computed ancestors, of its pending
 * ancestors in this batch, and its own, as a short list of contiguous segments in path
 * order (root first). It
 * marks which rows return logits: pending leaves (the tips being extended) unless flagged
 * FOREST_NO_LOGITS, and any node flagged FOREST_WANT_LOGITS. A computed node flagged
 * FOREST_WANT_LOGITS is re-scored: it runs again as a row in its own KV slot (getting the
 * same K/V back) so that a strategy can start from any node. step_run runs the model
 * once over the plan, marks the nodes computed and keeps the logits and each scored
 * node's top-k alternatives. Choosing the next tokens is the caller's job: from the top-k
 * ids and log-probabilities (step_topk_of, what a device backend brings back), or from
 * the full logits rows (step_logits_of) where a sampler needs the whole distribution.
 *
 * On a model with recurrent layers (Qwen3.5) step_run gives each row its recurrent state
 * cells (rstate.h): leaves and branch points keep a state, forks copy it.
 *
 * On a model with sliding-window layers (model_hparams n_swa > 0) each row also gets
 * windowed segments (step_plan_window; step_run builds them): the keys of its path at
 * positions (pos - n_swa, pos]. Positions along a path are consecutive and end at the
 * row's own, so these are the last n_swa keys of its segments, in the same order: a leaf
 * sees the same key sequence as its path decoded alone, and the same bits. Windows only
 * cut what a row reads: every slot stays allocated (a slot that fell out of every
 * window is not freed).
 *
 * A plan holds KV slots from build until run or cancel. When the cache cannot hold every
 * pending node, build returns ST_NO_KV_SLOT and changes nothing; prune, then build again
 * (compaction frees no slot: it only makes the used ones contiguous). */
#ifndef MD_STEP_H
#define MD_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "model/model.h"

typedef struct step_plan {
    int32_t n_rows;
    int32_t *node;         /* (n_rows) forest index of each row */
    int32_t *tokens;       /* (n_rows) */
    int32_t *pos;          /* (n_rows) RoPE position = depth */
    int32_t *slot;         /* (n_rows) KV slot each row writes */
    int32_t *seg_off;      /* (n_rows + 1) */
    kern_seg *segs;        /* (seg_off[n_rows]) slot runs per row, in path order */
    uint8_t *want;         /* (n_rows) 1: row returns logits */
    int32_t n_out;         /* rows returning logits */
    forest_id *out_node;   /* (n_out) node of each logits row, in row order */
    float *logits;         /* (n_out, n_vocab) after step_run, when rows_kept: logits_buf,
                              or on a device backend its context's host buffer (valid until
                              the next run or the context is freed) */
    float *logits_buf;     /* the plan's own rows, for a host backend */
    int32_t n_vocab;
    bool active;           /* holds slots (built, not yet run or cancelled) */
    /* capacities */
    int32_t cap_rows, cap_segs, cap_out, cap_logits_rows;
    int32_t *scratch;      /* ancestor slots while building */
    int32_t cap_scratch;
    int32_t *row_of;       /* (forest capacity) the row of each node that is one, after
                              step_plan_build (other entries undefined): for a strategy
                              that rewrites the rows' segments (the rope-gap merge) */
    int32_t cap_row_of;
    int32_t top_k;         /* the caller's: top-k ids wanted per logits row (0: none);
                              a run computes max(top_k, forest_top_k) (step_topk_of) */
    bool topk_only;        /* the caller's: it reads the top-k only (step_topk_of, the
                              forest's alternatives), not the logits rows, so a device
                              backend leaves the rows on the device and brings back the
                              top-k alone; step_logits_of then gives NULL and
                              step_logprob_of brings back the one logit it reads
                              (step_forest_topk sets it for a step). false (the
                              default): full rows. A
                              device backend keeps the rows in its context's buffers and
                              computes every row's log-sum-exp there either way: nothing
                              but ids, log-probabilities and the rows asked for cross */
    bool rows_kept;        /* the last run's rows are in logits (not left on a device) */
    const float *dev_rows; /* (n_out, n_vocab) the last run's rows in a device backend's
                              memory (its context's, valid until the next run), or NULL */
    kern_lse *lse;         /* (n_out) each logits row's log-sum-exp (kern topk_lse op) */
    uint8_t *lse_ok;       /* (n_out) lse[o] computed for the last run */
    int32_t cap_lse, cap_lse_ok;
    int32_t tk_k;          /* top-k per row of the last run (0: none) */
    int32_t *tk_ids;       /* (n_out, tk_k) each row's top-k, best first */
    float *tk_lp;          /* (n_out, tk_k) their log-probabilities */
    int32_t cap_tk_ids, cap_tk_lp;
    float *tk_x;           /* (n_out, tk_k) the top-k's logits, after step_topk_logits */
    int64_t *tk_at;        /* (n_out, tk_k) scratch: their offsets in the device rows */
    int32_t cap_tk_x, cap_tk_at;
    bool tk_x_ok;          /* tk_x holds the last run's */
    kern_backend *be;      /* the backend of the last run (its context's, borrowed) */
    /* Windowed segments (step_plan_window), for the windowed layers of hp: n_swa 0 when
     * the plan has none (a model without windows, or not built since step_plan_build); hp
     * is set by every run or step_plan_window, windows or not. */
    int32_t n_swa;
    int32_t *seg_off_swa;  /* (n_rows + 1) */
    kern_seg *segs_swa;    /* (seg_off_swa[n_rows]) the tail of each row's segments */
    const model_hparams *hp; /* the model they were built for (borrowed; the model's) */
    int32_t cap_seg_off_swa, cap_segs_swa;
    /* Optional: called by step_run just before and just after the model's forward pass,
     * the long part of a step during which neither the forest nor the plan changes. A
     * threaded caller (the TUI's worker) uses them to release its forest lock so readers
     * can draw while the model runs. */
    void (*forward_begin)(void *ud);
    void (*forward_end)(void *ud);
    /* Optional: the pass's progress in rows (model_batch's on_chunk; false stops it, and
     * the step returns ST_CANCELLED with the forest as before). Called without the lock. */
    bool (*forward_progress)(void *ud, int32_t rows_done, int32_t n_rows);
    void *forward_ud;
    /* Optional, for one run (step_run clears them): positions (n_rows) and attention
     * segments (seg_off (n_rows + 1) into segs) that replace the plan's in the model's
     * batch, for a strategy that places rows otherwise than by depth and ancestry (the
     * rope-gap merge shifts a chain's positions and lets it see other branches). Rows,
     * tokens, slots and logits rows stay the plan's. Borrowed until the run returns. */
    const int32_t *pos_override;
    const int32_t *seg_off_override;
    const kern_seg *segs_override;
    /* The caller's, optional (teaching): when attn_want, runs hand back the attention
     * weights of layer attn_layer, query head attn_head (-1: the mean over the heads), read
     * with step_plan_attn_of; a backend without them (cuda) fails the run with
     * ST_ERR_UNSUPPORTED. A run with overridden segments keeps none. */
    bool attn_want;
    int32_t attn_layer, attn_head;
    float *attn_w;         /* (seg cells) after a run: model_attn_req's layout */
    int32_t attn_n;        /* cells in attn_w; 0: the last run kept no weights */
    int32_t attn_w_layer, attn_w_head; /* the layer and head attn_w is of (a caller may
                                          change attn_layer while a run computes) */
    int32_t cap_attn_w;
    /* The rows' recurrent state cells (rstate.h), on a model with recurrent layers. */
    int32_t *rs_in;        /* (n_rows) the cell each row starts from, -1: zeros */
    int32_t *rs_out;       /* (n_rows) the cell it leaves its state in */
    uint8_t *rs_kind;      /* (n_rows) rstate.c's RS_* */
    int32_t rs_rows;       /* rows given cells by the last rstate_plan (0 after a run) */
    int32_t cap_rs_in, cap_rs_out, cap_rs_kind;
} step_plan;

void step_plan_init(step_plan *p);
void step_plan_free(step_plan *p);

/* Plans the next step (see above). ST_OK with n_rows = 0 when nothing is pending.
 * ST_NO_KV_SLOT (the forest unchanged) when the cache is too small; ST_ERR_NOMEM. */
st_code step_plan_build(forest *f, step_plan *p, st_err *err);
/* Releases a built plan's slots without running it. */
void step_plan_cancel(forest *f, step_plan *p);
/* Dense view of the plan's mask: can row r attend to KV slot s? */
bool step_plan_sees(const step_plan *p, int32_t row, int32_t slot);
/* Builds the plan's windowed segments for the windowed layers of hp (its model's
 * hparams, which must outlive the plan's use of p->hp): each row's keys within its
 * window. Nothing when hp->n_swa is 0 (p->n_swa becomes 0). step_run does it itself; a
 * caller showing a plan that it does not run (a preview) calls it. ST_ERR_NOMEM. */
st_code step_plan_window(step_plan *p, const model_hparams *hp, st_err *err);
/* On a windowed layer, can row r attend to KV slot s? (step_plan_sees without windows.) */
bool step_plan_sees_window(const step_plan *p, int32_t row, int32_t slot);

/* The weight row `row` put on KV slot `slot` in the last run's attention (attn_want), or
 * NAN when it kept none or the row does not see the slot. */
float step_plan_attn_of(const step_plan *p, int32_t row, int32_t slot);

/* Runs the model over a built plan. On success the rows' nodes are computed, p->logits
 * holds the logits of the out rows and each out node's top-k alternatives are stored in
 * the forest. On failure the plan is cancelled and the forest is unchanged. */
st_code step_run(forest *f, step_plan *p, model_ctx *c, st_err *err);

/* build + run. */
st_code step_forest(forest *f, step_plan *p, model_ctx *c, st_err *err);

/* step_forest for a caller that reads of each logits row at most its top_k best tokens
 * (step_topk_of, step_argmax_of) and the log-probabilities of chosen tokens
 * (step_logprob_of): on a device backend the run is topk_only with the plan's top_k
 * raised to top_k; the plan's topk_only and top_k are the caller's again after. */
st_code step_forest_topk(forest *f, step_plan *p, model_ctx *c, int32_t top_k, st_err *err);

/* Logits row of a node scored by the last run, or NULL (also when a device backend left
 * the rows on the device: topk_only). */
const float *step_logits_of(const step_plan *p, forest_id node);
/* Did the last run score node (its row kept, or its top-k or log-sum-exp computed)? */
bool step_scored(const step_plan *p, forest_id node);
/* The greedy token of node's row in the last run (sample_argmax's: the first of the
 * largest; from the top-k when the row stayed on a device), or -1 when not scored. */
int32_t step_argmax_of(const step_plan *p, forest_id node);

/* log softmax(logits of node)[t] after the last run (t < n_vocab), or NAN when node was
 * not scored: kern_logprob with the row's log-sum-exp from the backend's topk_lse op (a
 * row left on a device (topk_only) brings back its logit t alone, unless t is in the
 * row's top-k, whose log-probabilities are these bits),
 * computed once per run and shared by every caller and by the top-k (step_topk_of), so
 * asking again costs nothing and gives the same bits (on the cpu backend also those of
 * sample_log_softmax). */
float step_logprob_of(step_plan *p, forest_id node, int32_t t);
/* lp[i] = step_logprob_of(p, node[i], t[i]) for i < n, the same bits; a row left on a
 * device brings back the logits of the tokens outside its top-k in one download_at per
 * 64 (a caller reading many, as the judge, waits for one round trip, not one each). */
void step_logprobs_of(step_plan *p, int32_t n, const forest_id *node, const int32_t *t, float *lp);

/* Most best tokens of a row a device backend's top-k keeps on the device (CUDA's); a
 * caller asking for more has the rows brought back to the host for it. */
#define STEP_TOPK_DEVICE_MAX 64
/* k when a step on c can leave its rows on the device and bring back each row's k best
 * instead (c's backend a device, 0 < k <= STEP_TOPK_DEVICE_MAX), else 0: the rows. */
int32_t step_device_topk(model_ctx *c, int32_t k);
/* The logits of every out row's top-k tokens in the last run (step_topk_x_of), from the
 * rows kept or, when they stayed on a device, brought back in one download_at: a sampler
 * drawing from a row's top-k (sampler_sample_top) needs those, not the row. ST_ERR_NOMEM,
 * or the backend's error. */
st_code step_topk_logits(step_plan *p, st_err *err);
/* The logits of node's top-k (step_topk_of's ids, in order) once step_topk_logits has run
 * after the last run, else NULL. */
const float *step_topk_x_of(const step_plan *p, forest_id node);

/* The top-k of node's logits row in the last run: *ids and *lp (either may be NULL)
 * point at its ids, best first (ties to the lower id), and their log-probabilities (the
 * bits of step_logprob_of); returns how many: min(max(p->top_k, forest_top_k), n_vocab),
 * 0 when node was not scored or no top-k was asked for. Valid until the next run. */
int32_t step_topk_of(const step_plan *p, forest_id node, const int32_t **ids, const float **lp);

/* Moves every computed node's K/V so that used slots are 0..n-1 in DFS order (chains
 * become contiguous again after prunes). No plan may be active. ST_ERR_NOMEM. */
st_code step_compact(forest *f, model_ctx *c, st_err *err);

#endif
