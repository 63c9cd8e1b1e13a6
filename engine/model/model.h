/* model.h - a Llama-architecture model: hyperparameters and weights from a GGUF file,
 * and the forward pass over a batch of rows that each carry their own position and
 * their own list of KV-cache slots to attend to.
 *
 * The batch is the forest primitive: row r is one token at RoPE position pos[r]; its K/V
 * are written (already rotated) into KV slot slot[r]; its attention reads exactly the
 * slots in its segments, which must include its own slot and may include slots written
 * by earlier rows of the same batch. Rows must be ordered so that a row's segments name
 * only slots already in the cache or written by earlier rows. Linear decoding is the
 * special case pos = slot = i with segment [0, i + 1).
 *
 * Weights are borrowed from the GGUF mapping (no copy). The KV cache and scratch
 * buffers live in a model_ctx, one per decoding session. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kern.h"
#include "gguf/gguf.h"

typedef struct model_hparams {
    int32_t n_vocab;
    int32_t n_embd;       /* embedding length */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;    /* GQA: n_head is a multiple of n_head_kv */
    int32_t head_dim;     /* n_embd / n_head unless the file says otherwise */
    int32_t n_ff;         /* feed-forward length */
    int32_t rope_dim;     /* rotated dims per head (<= head_dim, even) */
    int32_t n_ctx_train;  /* context length the model was trained for */
    float rope_base;      /* theta base, 10000 by default */
    float rms_eps;
    bool tied_output;     /* no output.weight: the classifier is token_embd */
} model_hparams;

typedef struct model_layer {
    const float *attn_norm;   /* (n_embd) */
    kern_mat wq;              /* (n_head * head_dim, n_embd) */
    kern_mat wk;              /* (n_head_kv * head_dim, n_embd) */
    kern_mat wv;              /* (n_head_kv * head_dim, n_embd) */
    kern_mat wo;              /* (n_embd, n_head * head_dim) */
    const float *ffn_norm;    /* (n_embd) */
    kern_mat w_gate;          /* (n_ff, n_embd)  ffn_gate, "w1" */
    kern_mat w_up;            /* (n_ff, n_embd)  ffn_up,   "w3" */
    kern_mat w_down;          /* (n_embd, n_ff)  ffn_down, "w2" */
} model_layer;

typedef struct model {
    model_hparams hp;
    gguf_ctx *gguf;           /* owned: the weights point into its mapping */
    kern_mat tok_embd;        /* (n_vocab, n_embd) */
    const float *out_norm;    /* (n_embd) */
    kern_mat output;          /* (n_vocab, n_embd); == tok_embd when tied */
    const float *rope_freqs;  /* (rope_dim / 2) or NULL */
    model_layer *layers;      /* (n_layer) */
    float *f32_copies;        /* owned float copies of F16/BF16 norm vectors, if any */
    uint64_t weight_bytes;    /* bytes of all weights read per token */
    uint64_t packed_bytes;    /* bytes of the matrices' packed copies (kern_mat_pack), owned */
} model;

/* Loads hyperparameters and weights of a llama-architecture GGUF. Takes ownership of g
 * on success and on failure. The matrices the cpu backend has a packed form for are
 * packed once here (kern_mat_pack: faster, results within float rounding of the stored
 * form's) unless the environment sets MD_NO_PACK (to compare the two). NULL + err:
 * ST_ERR_UNSUPPORTED naming the architecture or the tensor and its type; ST_ERR_FORMAT
 * naming a missing tensor or a wrong shape. */
model *model_from_gguf(gguf_ctx *g, st_err *err);
/* gguf_open + model_from_gguf. */
model *model_load(const char *path, st_err *err);
void model_free(model *m); /* NULL is a no-op */

typedef struct model_ctx_params {
    int32_t n_slots;      /* KV cache slots (tokens); 0 = min(n_ctx_train, 4096) */
    int32_t max_rows;     /* rows computed at once (scratch size); 0 = 512 */
    int32_t n_threads;    /* 0 = one per core */
    const char *backend;  /* "cpu" (default when NULL) or "ref" */
} model_ctx_params;

model_ctx_params model_ctx_default_params(void);

typedef struct model_ctx model_ctx;

/* Allocates the KV cache (n_layer, n_slots, n_head_kv * head_dim) for K and for V, and
 * scratch for max_rows rows. m is borrowed and must outlive the context. */
model_ctx *model_ctx_init(const model *m, const model_ctx_params *p, st_err *err);
void model_ctx_free(model_ctx *c); /* NULL is a no-op */
int32_t model_ctx_n_slots(const model_ctx *c);
kern_backend *model_ctx_backend(model_ctx *c);
const model_hparams *model_ctx_hparams(const model_ctx *c);

/* Moves K/V rows between slots in every layer: the row in slot s goes to dst_of_src[s]
 * (-1: dropped). dst_of_src has n_slots entries and must be injective on its used
 * entries. ST_ERR_NOMEM (nothing moved). */
st_code model_kv_permute(model_ctx *c, const int32_t *dst_of_src, st_err *err);

typedef struct model_batch {
    int32_t n_rows;
    const int32_t *tokens;      /* (n_rows) token ids */
    const int32_t *pos;         /* (n_rows) RoPE positions, >= 0 */
    const int32_t *slot;        /* (n_rows) KV slot each row writes, distinct */
    const int32_t *seg_off;     /* (n_rows + 1) row r: segs[seg_off[r] .. seg_off[r+1]) */
    const kern_seg *segs;       /* slot segments; each row's must include its own slot */
    const uint8_t *want_logits; /* (n_rows) nonzero: write this row's logits; NULL: all */
} model_batch;

/* Runs the model over the batch (in chunks of max_rows when larger). Writes the logits
 * of the requested rows, in row order, to logits (n_wanted, n_vocab). Returns ST_OK,
 * ST_ERR_ARG (bad token id, slot, position or segment; nothing is computed), or
 * ST_ERR_NOMEM (the backend could not get scratch memory; the batch's KV slots and logits
 * then hold garbage). */
st_code model_forward(model_ctx *c, const model_batch *b, float *logits, st_err *err);

/* Linear decoding helper: runs tokens[0..n) at positions/slots start..start+n-1, each
 * attending to slots [0, own + 1), and writes the last row's logits (n_vocab). */
st_code model_forward_linear(model_ctx *c, const int32_t *tokens, int32_t n, int32_t start,
                             float *logits, st_err *err);

#endif
