/* model.h - a decoder-only transformer (the llama architecture and its relatives Qwen2,
 * Qwen3, Gemma 3, Gemma 4, and the mixtures of experts Qwen3-MoE, Qwen2-MoE and gpt-oss
 * (moe.h)): hyperparameters and weights from a GGUF file,
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
 * The model borrows its weights from the GGUF mapping (no copy); a context computes with
 * them in the form its backend prepared (kern_ops mat_prepare: the cpu backend's packed
 * rows), made by the first context on each backend and shared by the later ones. The KV
 * cache and activations live in the backend's buffers of a model_ctx, one per decoding
 * session. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kern.h"
#include "gguf/gguf.h"

/* The architectures this build runs (general.architecture); model_arch_names lists them. */
typedef enum model_arch {
    MODEL_ARCH_LLAMA,   /* "llama": Llama 2/3, SmolLM2, TinyLlama, Mistral */
    MODEL_ARCH_QWEN2,   /* "qwen2": Qwen2, Qwen2.5 (biases on Q, K, V) */
    MODEL_ARCH_QWEN3,   /* "qwen3": Qwen3 dense (RMSNorm on Q and K per head) */
    MODEL_ARCH_GEMMA3,  /* "gemma3": Gemma 3 text (post-norms, GELU, sliding windows) */
    MODEL_ARCH_GEMMA4,  /* "gemma4": Gemma 4 dense text (per-layer head sizes, shared KV
                           layers, per-layer embeddings, V norm, logit soft-capping) */
    MODEL_ARCH_QWEN3MOE, /* "qwen3moe": Qwen3's block with a mixture-of-experts FFN */
    MODEL_ARCH_QWEN2MOE, /* "qwen2moe": Qwen2's block, experts and a gated shared expert */
    MODEL_ARCH_GPTOSS,   /* "gpt-oss": attention sinks, alternating windows, biased experts
                            with a clamped SwiGLU */
    MODEL_ARCH_QWEN35,  /* "qwen35": Qwen3.5 dense (Gated DeltaNet layers between gated
                           full-attention layers) */
    MODEL_ARCH_QWEN35MOE, /* "qwen35moe": Qwen3.5's layers with qwen2moe's experts and gated
                             shared expert */
    MODEL_ARCH_N
} model_arch;

/* The feed-forward's gate activation. */
typedef enum model_act {
    MODEL_ACT_SILU,      /* SwiGLU: silu(gate) * up */
    MODEL_ACT_GELU_TANH, /* GeGLU: gelu(gate) * up, gelu in its tanh form */
    MODEL_ACT_SWIGLU_OAI, /* gpt-oss's clamped SwiGLU (kern.h swiglu_oai) */
} model_act;

typedef struct model_hparams {
    model_arch arch;
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
    float rope_scale;     /* linear RoPE scaling of the global layers: angles / rope_scale */
    float yarn_factor;    /* YaRN scaling of every layer (prep.h model_yarn_factors); 0: none */
    int32_t yarn_orig_ctx; /* its original context (rope.scaling.original_context_length) */
    float yarn_beta_fast, yarn_beta_slow; /* its correction range, 32 and 1 by default */
    float rms_eps;
    bool tied_output;     /* no output.weight: the classifier is token_embd */
    /* What the architecture adds to the llama block (model_arch_features fills them). */
    bool rope_neox;       /* rotate pairs (i, i + rope_dim / 2), not (2i, 2i + 1) */
    bool qkv_bias;        /* Q, K and V have bias vectors (attn_q.bias, ...) */
    bool qk_norm;         /* RMSNorm over each head of Q and K before RoPE */
    bool post_norms;      /* RMSNorm on the attention's and the FFN's outputs before the
                             residual adds (post_attention_norm, post_ffw_norm) */
    model_act act;
    float embd_scale;     /* token embeddings are multiplied by it (Gemma: sqrt(n_embd)) */
    float attn_scale;     /* softmax scale of q.k: 1 / sqrt(head_dim) unless the family says */
    /* Sliding-window attention (Gemma 3). A layer l is local when n_swa > 0 and
     * swa_pattern > 0 and (l % swa_pattern) < swa_pattern - 1 (every swa_pattern-th layer
     * global); a local layer's row sees the keys of its path whose position is within
     * n_swa of its own (pos - key_pos < n_swa) and rotates with rope_base_swa. */
    int32_t n_swa;        /* window in tokens; 0: every layer is global */
    int32_t swa_pattern;  /* 0: no local layers */
    float rope_base_swa;  /* RoPE base of the local layers */
    /* Gemma 4: the local layers' own head shape (equal to the global ones elsewhere). */
    int32_t head_dim_swa;   /* head size of the local layers */
    int32_t rope_dim_swa;   /* rotated dims of a local layer's head */
    int32_t n_head_kv_swa;  /* KV heads of the local layers */
    int32_t n_kv_shared;    /* the last n_kv_shared layers compute only Q and read the cache
                               of the last earlier layer of their kind (0: none) */
    int32_t n_embd_ple;     /* per-layer embedding width (Gemma 4 E models; 0: none) */
    bool v_norm;            /* RMSNorm without a gain over each head of V */
    bool rope_freqs_global; /* rope_freqs apply to the global layers only (Gemma 4's
                               proportional rotary); the local ones rotate plainly */
    float final_softcap;    /* logits become c * tanh(logits / c); 0: none */
    /* Mixture of experts (moe.h): each row's feed-forward is the weighted sum of the
     * n_expert_used experts its router ranks highest. 0 experts: a dense feed-forward. */
    int32_t n_expert;       /* expert_count */
    int32_t n_expert_used;  /* expert_used_count, 1 .. n_expert */
    int32_t n_ff_exp;       /* expert_feed_forward_length: one expert's hidden width */
    float expert_w_scale;   /* the routing weights are multiplied by it; 1 */
    bool expert_norm;       /* the k routing weights are divided by their sum */
    bool expert_softmax_k;  /* the weights are a softmax over the k chosen logits, not the
                               chosen ones of a softmax over all (gpt-oss) */
    bool attn_sinks;        /* a learned logit per head joins each softmax (gpt-oss); with
                               it, attention and FFN biases: attn_output.bias, the router's
                               and the experts' */
    int32_t n_ff_shexp;     /* the shared expert's width (every row runs it, scaled by a
                               sigmoid gate); 0: none */
    /* Qwen3.5: layer l is a Gated DeltaNet layer (kern_gdn: a recurrent state per
     * sequence, no KV cache) unless (l + 1) % full_attn_interval == 0. */
    int32_t full_attn_interval; /* 0: no recurrent layers */
    int32_t ssm_conv;       /* the conv's width (ssm.conv_kernel) */
    int32_t ssm_state;      /* key and value head size of the DeltaNet (ssm.state_size) */
    int32_t ssm_k_heads;    /* its key heads (ssm.group_count) */
    int32_t ssm_v_heads;    /* its value heads (ssm.time_step_rank) */
    bool attn_out_gate;     /* attn_q gives [q | gate] per head; the attention's output is
                               multiplied by sigmoid(gate) before attn_output */
} model_hparams;

/* True when layer l is a recurrent (Gated DeltaNet) layer. */
static inline bool model_layer_is_recurrent(const model_hparams *hp, int32_t l) {
    return hp->full_attn_interval > 0 && (l + 1) % hp->full_attn_interval != 0;
}

/* True when layer l of a model with hp uses a sliding window (see model_hparams). */
static inline bool model_layer_is_swa(const model_hparams *hp, int32_t l) {
    return hp->n_swa > 0 && hp->swa_pattern > 0 && l % hp->swa_pattern < hp->swa_pattern - 1;
}

/* Head size, KV heads and rotated dims of layer l (the local layers' own on Gemma 4). */
static inline int32_t model_layer_head_dim(const model_hparams *hp, int32_t l) {
    return model_layer_is_swa(hp, l) ? hp->head_dim_swa : hp->head_dim;
}
static inline int32_t model_layer_n_head_kv(const model_hparams *hp, int32_t l) {
    return model_layer_is_swa(hp, l) ? hp->n_head_kv_swa : hp->n_head_kv;
}
static inline int32_t model_layer_rope_dim(const model_hparams *hp, int32_t l) {
    return model_layer_is_swa(hp, l) ? hp->rope_dim_swa : hp->rope_dim;
}
/* The layer whose KV cache layer l attends to: l itself, or for a shared-KV layer the
 * last layer before the shared ones of its kind (local or global), as llama.cpp's
 * layer_reuse_cb for Gemma 4 (src/llama-model.cpp): n_layer - n_kv_shared - 2 for a
 * local one, - 1 for a global one. */
static inline int32_t model_layer_kv_source(const model_hparams *hp, int32_t l) {
    if (model_layer_is_recurrent(hp, l)) return -1; /* no cache at all */
    const int32_t first = hp->n_layer - hp->n_kv_shared;
    if (hp->n_kv_shared <= 0 || l < first) return l;
    return first - (model_layer_is_swa(hp, l) ? 2 : 1);
}

/* Forces a window of n_swa keys on hp (tests, and `plan --window` to teach what a window
 * does): on every layer when pattern is 0, else on all but each pattern-th (pattern 2:
 * layers 0, 2, 4, ... local). A model without local layers gets its global RoPE base on
 * them. n_swa 0 removes the window. */
static inline void model_hparams_set_window(model_hparams *hp, int32_t n_swa, int32_t pattern) {
    hp->n_swa = n_swa > 0 ? n_swa : 0;
    hp->swa_pattern = hp->n_swa == 0 ? 0 : pattern > 0 ? pattern : hp->n_layer + 1;
    if (!(hp->rope_base_swa > 0)) hp->rope_base_swa = hp->rope_base;
}

/* "llama", "qwen2", ... for an architecture; "?" out of range. */
const char *model_arch_name(model_arch a);
/* The supported architectures' names, comma-separated ("llama, qwen2, qwen3, gemma3"). */
const char *model_arch_names(void);
/* A one-line summary of the features of hp's architecture for `info` (the norms, biases,
 * activation, RoPE layout and windows), written like snprintf into out; returns out. */
const char *model_arch_features(const model_hparams *hp, char *out, size_t cap);

typedef struct model_layer {
    /* this layer's shape (model_layer_head_dim ...; n_ff per layer on Gemma 4) */
    int32_t head_dim, n_head_kv, rope_dim, n_ff;
    int32_t kv_src;           /* model_layer_kv_source: the layer whose cache it reads */
    float out_scale;          /* the layer's output is multiplied by it (Gemma 4); 1 */
    const float *attn_norm;   /* (n_embd) */
    const float *bq, *bk, *bv; /* (n_head * head_dim), (n_head_kv * head_dim) x 2; qkv_bias */
    const float *q_norm;      /* (head_dim) qk_norm, every head's gain */
    const float *k_norm;      /* (head_dim) */
    const float *post_attn_norm; /* (n_embd) post_norms */
    const float *post_ffn_norm;  /* (n_embd) post_norms */
    kern_mat wq;              /* (n_head * head_dim, n_embd) */
    kern_mat wk;              /* (n_head_kv * head_dim, n_embd) */
    kern_mat wv;              /* (n_head_kv * head_dim, n_embd) */
    kern_mat wo;              /* (n_embd, n_head * head_dim) */
    const float *ffn_norm;    /* (n_embd) */
    kern_mat w_gate;          /* (n_ff, n_embd)  ffn_gate, "w1" */
    kern_mat w_up;            /* (n_ff, n_embd)  ffn_up,   "w3" */
    kern_mat w_down;          /* (n_embd, n_ff)  ffn_down, "w2" */
    /* per-layer embeddings (n_embd_ple > 0) */
    kern_mat ple_gate;        /* (n_embd_ple, n_embd) per_layer_inp_gate */
    kern_mat ple_proj;        /* (n_embd, n_embd_ple) per_layer_proj */
    const float *ple_norm;    /* (n_embd) per_layer_post_norm */
    /* mixture of experts (n_expert > 0; no w_gate, w_up, w_down then) */
    kern_mat gate_inp;        /* (n_expert, n_embd) the router, ffn_gate_inp */
    kern_mat *exp_gate;       /* (n_expert) each (n_ff_exp, n_embd): ffn_gate_exps's slices */
    kern_mat *exp_up;         /* (n_expert) each (n_ff_exp, n_embd): ffn_up_exps's */
    kern_mat *exp_down;       /* (n_expert) each (n_embd, n_ff_exp): ffn_down_exps's */
    kern_mat shexp_gate_inp;  /* (1, n_embd) the shared expert's gate, n_ff_shexp > 0 */
    kern_mat shexp_gate;      /* (n_ff_shexp, n_embd) */
    kern_mat shexp_up;        /* (n_ff_shexp, n_embd) */
    kern_mat shexp_down;      /* (n_embd, n_ff_shexp) */
    /* gpt-oss (attn_sinks) */
    const float *sinks;       /* (n_head) attn_sinks */
    const float *bo;          /* (n_embd) attn_output.bias */
    const float *gate_inp_b;  /* (n_expert) ffn_gate_inp.bias */
    const float *exp_gate_b;  /* (n_expert, n_ff_exp) ffn_gate_exps.bias */
    const float *exp_up_b;    /* (n_expert, n_ff_exp) ffn_up_exps.bias */
    const float *exp_down_b;  /* (n_expert, n_embd) ffn_down_exps.bias */
    /* a recurrent layer (model_layer_is_recurrent; kv_src -1): its output projection
     * ssm_out is wo, (n_embd, ssm_v_heads * ssm_state); ffn_norm is post_attention_norm */
    bool recurrent;
    kern_mat ssm_qkv;         /* (conv_dim, n_embd) attn_qkv: q, k, v before the conv */
    kern_mat ssm_z;           /* (ssm_v_heads * ssm_state, n_embd) attn_gate */
    kern_mat ssm_beta;        /* (ssm_v_heads, n_embd) */
    kern_mat ssm_alpha;       /* (ssm_v_heads, n_embd) */
    const float *ssm_conv_w;  /* (conv_dim, ssm_conv) ssm_conv1d */
    const float *ssm_dt;      /* (ssm_v_heads) ssm_dt.bias */
    const float *ssm_a;       /* (ssm_v_heads) ssm_a: -exp(A_log) */
    const float *ssm_norm;    /* (ssm_state) */
} model_layer;

typedef struct model {
    model_hparams hp;
    gguf_ctx *gguf;           /* owned: the weights point into its mapping */
    kern_mat tok_embd;        /* (n_vocab, n_embd) */
    const float *out_norm;    /* (n_embd) */
    kern_mat output;          /* (n_vocab, n_embd); == tok_embd when tied */
    const float *rope_freqs;  /* (rope_dim / 2) or NULL */
    const float *ones;        /* (head_dim max) gains of 1: the V norm's */
    kern_mat ple_embd;        /* (n_vocab, n_layer * n_embd_ple) per_layer_token_embd */
    kern_mat ple_model_proj;  /* (n_layer * n_embd_ple, n_embd) per_layer_model_proj */
    const float *ple_proj_norm; /* (n_embd_ple) per_layer_proj_norm */
    model_layer *layers;      /* (n_layer) */
    kern_mat *experts;        /* owned: every layer's exp_gate, exp_up, exp_down arrays */
    float *f32_copies;        /* owned float copies of F16/BF16 norm vectors, if any */
    uint64_t weight_bytes;    /* bytes of all weights read per token */
    struct model_preps *preps; /* the weights prepared per backend (prep.c), owned */
} model;

/* The window in words, into out (cap bytes): "window 512 on layers 0-4,6-10; layers 5,11
 * global", "window 8 on layers 0-1", or "" without one. Returns the length it needs
 * (snprintf's rule). */
int model_window_text(const model_hparams *hp, char *out, size_t cap);

/* Loads hyperparameters and weights of a GGUF of a supported architecture (model_arch).
 * Takes ownership of g on success and on failure. NULL + err:
 * ST_ERR_UNSUPPORTED naming the architecture (and the supported ones) or the tensor and
 * its type; ST_ERR_FORMAT naming a missing tensor or a wrong shape. */
model *model_from_gguf(gguf_ctx *g, st_err *err);
/* Floats of all of a model's norm and bias vectors (each layer's and the output norm). */
size_t model_vec_floats(const model_hparams *hp);
/* gguf_open + model_from_gguf. */
model *model_load(const char *path, st_err *err);
/* Frees the model and the weights its contexts prepared; its contexts must be freed
 * first. NULL is a no-op. */
void model_free(model *m);
/* Bytes of backend memory the prepared weights of m's contexts own so far (the cpu
 * backend's packed rows). */
uint64_t model_packed_bytes(const model *m);

typedef struct model_ctx_params {
    int32_t n_slots;      /* KV cache slots (tokens); 0 = min(n_ctx_train, 4096) */
    int32_t max_rows;     /* rows computed at once (scratch size); 0 = 512 */
    int32_t n_threads;    /* 0 = one per core */
    const char *backend;  /* "cpu" (default when NULL) or "ref" */
    int32_t n_rstates;    /* recurrent state cells, on a model with recurrent layers (the
                             forest keeps one a leaf or branch point); 0 = 34 */
    bool no_pack;         /* compute with the weights as stored, not in the backend's own
                             layout (the cpu backend's packed rows: faster, results within
                             float rounding); the app sets it from MD_NO_PACK */
} model_ctx_params;

model_ctx_params model_ctx_default_params(void);

typedef struct model_ctx model_ctx;

/* Allocates, in the backend's buffers, the KV cache (n_layer, n_slots, n_head_kv *
 * head_dim) for K and for V and the activations of max_rows rows, and prepares m's
 * weights for the backend when no context did before (see model.h's top). m is borrowed
 * and must outlive the context. NULL + err: ST_ERR_ARG (a bad size or backend name),
 * ST_ERR_NOMEM naming what did not fit, ST_ERR_BACKEND, ST_ERR_UNSUPPORTED (the backend
 * lacks an op m's architecture needs). */
model_ctx *model_ctx_init(const model *m, const model_ctx_params *p, st_err *err);
void model_ctx_free(model_ctx *c); /* NULL is a no-op */
int32_t model_ctx_n_slots(const model_ctx *c);
kern_backend *model_ctx_backend(model_ctx *c);
const model_hparams *model_ctx_hparams(const model_ctx *c);
/* The context's room for n_rows rows of logits (n_vocab floats each), kept until it is
 * freed and grown when a step needs more (the contents do not survive a growth), so that
 * steps allocate nothing: backend memory (host is false; on a device backend, where
 * model_forward writes the logits without a copy) or host memory that downloads fill
 * fastest (host is true: page-locked on a device backend). NULL + ST_ERR_NOMEM. */
float *model_ctx_logits(model_ctx *c, int32_t n_rows, bool host, st_err *err);

/* Moves K/V rows between slots in every layer: the row in slot s goes to dst_of_src[s]
 * (-1: dropped). dst_of_src has n_slots entries and must be injective on its used
 * entries. ST_ERR_NOMEM (nothing moved). */
st_code model_kv_permute(model_ctx *c, const int32_t *dst_of_src, st_err *err);

/* Floats of one recurrent state cell over every recurrent layer (model_hparams: conv
 * window and DeltaNet matrices), 0 for a model without recurrent layers. */
int64_t model_rstate_floats(const model_hparams *hp);
/* The context's recurrent state cells (0 for a model without recurrent layers). */
int32_t model_ctx_n_rstates(const model_ctx *c);

/* Floats of one slot's K rows (and as many of its V rows) over the layers that keep a
 * cache (not Gemma 4's shared-KV ones), each layer's n_head_kv * head_dim in turn. */
int64_t model_kv_slot_floats(const model_hparams *hp);

/* The K and V rows of one slot, every caching layer's, from the backend to host memory k
 * and v (model_kv_slot_floats each; a session saving the cache), or back
 * (model_kv_write). ST_ERR_ARG for a slot outside the cache. */
st_code model_kv_read(model_ctx *c, int32_t slot, float *k, float *v, st_err *err);
st_code model_kv_write(model_ctx *c, int32_t slot, const float *k, const float *v, st_err *err);

/* A request for one layer's attention weights (teaching), in a model_batch: row after
 * row, one weight per slot of the row's segments (seg_off, segs), in their order, each
 * row's summing to 1; on a windowed layer the slots outside the row's window get 0. */
typedef struct model_attn_req {
    int32_t layer;  /* 0 .. n_layer - 1 */
    int32_t head;   /* a query head (< n_head), or -1: the mean over the heads */
    float *w;       /* (seg cells) host memory, the caller's */
} model_attn_req;

typedef struct model_batch {
    int32_t n_rows;
    const int32_t *tokens;      /* (n_rows) token ids */
    const int32_t *pos;         /* (n_rows) RoPE positions, >= 0 */
    const int32_t *slot;        /* (n_rows) KV slot each row writes, distinct */
    const int32_t *seg_off;     /* (n_rows + 1) row r: segs[seg_off[r] .. seg_off[r+1]) */
    const kern_seg *segs;       /* slot segments; each row's must include its own slot */
    const uint8_t *want_logits; /* (n_rows) nonzero: write this row's logits; NULL: all */
    /* The segments windowed layers read (hparams n_swa > 0; ignored otherwise): row r's
     * keys at positions within its window, in the same order, its own slot included
     * (step.h's step_plan_window builds them for a forest step). */
    const int32_t *seg_off_swa; /* (n_rows + 1) */
    const kern_seg *segs_swa;
    /* The recurrent state cells (models with recurrent layers; ignored otherwise): row r
     * starts from cell rs_in[r] (-1: a new sequence, zeros) and leaves its state in cell
     * rs_out[r] (kern_gdn); a row may start from the cell an earlier row left. */
    const int32_t *rs_in;       /* (n_rows) */
    const int32_t *rs_out;      /* (n_rows) */
    /* Optional (NULL: none, and the pass pays nothing for it): the weights of one layer's
     * attention. Backends without the attn_weights op (cuda) answer ST_ERR_UNSUPPORTED. */
    const model_attn_req *attn;
    /* Optional, for a batch of more than max_rows rows: called before the first chunk
     * and after each but the last with the rows done so far, so a long prompt's pass can
     * show its progress; false stops the pass there. */
    bool (*on_chunk)(void *ud, int32_t rows_done, int32_t n_rows);
    void *chunk_ud;
} model_batch;

/* Runs the model over the batch (in chunks of max_rows when larger). Writes the logits
 * of the requested rows, in row order, to logits (n_wanted, n_vocab). Returns ST_OK,
 * ST_CANCELLED (on_chunk said stop: the rows after it are not computed, so the caller
 * treats the batch's KV slots and logits as garbage),
 * ST_ERR_ARG (bad token id, slot, position or segment, windowed segments missing on a
 * model with windowed layers, an attention request's layer or head out of range; nothing
 * is computed), ST_ERR_UNSUPPORTED (attention weights asked of a backend without them), or
 * ST_ERR_NOMEM (the backend could not get scratch memory; the batch's KV slots and logits
 * then hold garbage). */
st_code model_forward(model_ctx *c, const model_batch *b, float *logits, st_err *err);

/* Linear decoding helper: runs tokens[0..n) at positions/slots start..start+n-1, each
 * attending to slots [0, own + 1) (on windowed layers the last n_swa of them), and
 * writes the last row's logits (n_vocab). Recurrent layers continue the state in cell 0
 * (a new one when start is 0). */
st_code model_forward_linear(model_ctx *c, const int32_t *tokens, int32_t n, int32_t start,
                             float *logits, st_err *err);

#endif
