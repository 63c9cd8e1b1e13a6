/* mkmodel.h - writes random-weight GGUF models for tests and benchmarks, of the llama
 * architecture or of qwen2 (Q/K/V biases), qwen3 (Q/K head norms), gemma3 (Q/K head
 * norms, post-norms, a sliding window) and gemma4 (gemma3's block with local layers of
 * their own head size, a V norm, proportional rotary on the global layers, shared-KV
 * layers, per-layer embeddings, layer output scales, logit soft-capping), and the
 * mixtures of experts qwen3moe, qwen2moe (a shared expert) and gpt-oss (sinks, biases, a
 * window on every other layer; mkmodel_moe.c), with the
 * tensors and "<arch>.*" keys llama.cpp's converter writes for each (Gemma's norm gains
 * stored as 1 + w, as it stores them).
 *
 * The weights are a pure function of the parameters (seed included): the same params give
 * a byte-identical file. They are scaled so that activations stay in a sane range through
 * many layers and the logits are varied (not all equal, argmax changing with the input):
 * matrices uniform in +-1/sqrt(n_in), norm gains 1 +- 0.1, embeddings of standard deviation
 * 1/sqrt(n_embd) (small, as trained ones are, so that a tied classifier does not just
 * predict the input token), and a classifier scaled for logits of standard deviation
 * about 2 (through the output norm's gain of 2 when tied). Random models still fall
 * into repeating one token after a few greedy steps; that is expected of noise. The file carries a
 * synthetic SentencePiece ("llama") vocabulary so a model runs end to end: <unk>, <s>,
 * </s>, the 256 byte tokens <0x00>..<0xFF>, then printable pieces (single characters,
 * "\u2581"-prefixed letters, letter pairs and triples, ...), every one reachable by
 * merging two shorter pieces, with distinct scores that favour shorter pieces.
 *
 * This is not a model of any language: its text is noise. It exists so tests and
 * benchmarks can run model shapes whose real weights are not at hand. */
#ifndef MD_MKMODEL_H
#define MD_MKMODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/dtype.h" /* the DT_* ids that wtype takes */
#include "base/status.h"

typedef struct mkmodel_params {
    const char *arch;   /* "llama" (NULL means it), "qwen2", "qwen3", "gemma3", "gemma4",
                           "qwen3moe", "qwen2moe", "gpt-oss", "qwen35", "qwen35moe" */
    int32_t n_vocab;    /* >= MKMODEL_MIN_VOCAB */
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;  /* divides n_head (GQA) */
    int32_t head_dim;   /* even; 0 = n_embd / n_head. When it differs from that,
                           llama.attention.key_length / value_length are written */
    int32_t n_ff;
    int32_t n_ctx;      /* llama.context_length */
    float rope_base;    /* llama.rope.freq_base */
    float rope_scale;   /* > 1: rope.scaling.type "linear" with this factor; 0 or 1: none */
    float yarn;         /* > 1: rope.scaling.type "yarn" with this factor, from an original
                           context of n_ctx / yarn (instead of rope_scale); 0: none */
    bool tied;          /* true: no output.weight (the classifier is token_embd) */
    uint32_t wtype;     /* DT_F32 / DT_F16 / DT_BF16 / DT_Q8_0, or a ggml block type
                           (DT_Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4: rows a multiple of
                           32; DT_Q2_K .. Q6_K, IQ4_XS: of 256) for the 2-D weights
                           (token_embd included); norm vectors stay F32 */
    int32_t n_swa;      /* gemma3, gemma4, gpt-oss: attention.sliding_window; 0 = n_ctx (no key
                           is ever outside the window) */
    /* gemma4 only (0 for the others): */
    int32_t swa_pattern;  /* every swa_pattern-th layer global, the others local; 0 = 2 */
    int32_t head_dim_swa; /* the local layers' head size (even); 0 = head_dim / 2 */
    int32_t n_kv_shared;  /* the last layers that read an earlier layer's KV cache; needs
                             the two layers before them local then global */
    int32_t n_embd_ple;   /* per-layer embedding width; 0 = none */
    float softcap;        /* final_logit_softcapping; 0 = none */
    /* qwen3moe, qwen2moe, gpt-oss, qwen35moe: a mixture of experts in place of each layer's FFN */
    int32_t n_expert;      /* experts per layer; 0 = 8 */
    int32_t n_expert_used; /* experts a token uses; 0 = 2 */
    int32_t n_ff_exp;      /* one expert's hidden width; 0 = n_ff */
    bool no_ff_key;        /* feed_forward_length left out of the file, as some mixtures'
                              files do (the experts' widths have keys of their own; a
                              dense model's file is then one the loader refuses) */
    bool fused_gate_up;    /* each layer's gate and up experts as one ffn_gate_up_exps
                              [n_embd, 2 n_ff_exp, n_expert] (the gate's rows first), with
                              the same values as the two tensors it replaces */
    /* qwen35 and qwen35moe only (0: the default in brackets): */
    int32_t ssm_state;    /* the DeltaNet's head size [head_dim] */
    int32_t ssm_k_heads;  /* its key heads [n_head_kv] */
    int32_t ssm_v_heads;  /* its value heads, a multiple of the key heads [n_head] */
    int32_t ssm_conv;     /* its conv's width [4] */
    int32_t full_attn_interval; /* every such layer full attention, the others DeltaNet [4] */
    uint64_t seed;
} mkmodel_params;

/* Three control tokens + 256 byte tokens + at least one ordinary piece. */
#define MKMODEL_MIN_VOCAB 260
#define MKMODEL_MAX_VOCAB (1 << 20)

/* The "tiny" preset with seed 1: vocab 512, embd 64, 2 layers, 4 heads, 2 KV heads,
 * ff 192, context 512, untied, F32 (164,160 parameters): fast enough for every test. */
mkmodel_params mkmodel_default_params(void);

/* Fills *p with a named shape; seed 1 and the wtype listed. ST_OK, or ST_ERR_ARG for an
 * unknown name (p untouched). Parameter counts include every tensor:
 *   "tiny"  vocab 512,   embd 64,   2 layers,  4 heads /  2 kv, ff 192,  ctx 512,  untied,
 *           F32:   164,160
 *   "25m"   vocab 32000, embd 384,  8 layers,  6 heads /  6 kv, ff 1024, ctx 1024, tied,
 *           F32:   26,450,304
 *   "110m"  vocab 32000, embd 768,  12 layers, 12 heads / 12 kv, ff 2048, ctx 1024, tied,
 *           F32:   109,529,856 (the stories110M shape)
 *   "1b"    vocab 32000, embd 2048, 22 layers, 32 heads /  4 kv, ff 5632, ctx 2048, untied,
 *           F16:   1,100,048,384 (the TinyLlama-1.1B shape; 2.2 GB in F16) */
st_code mkmodel_preset(const char *name, mkmodel_params *p);

/* Checks the parameters: ST_OK, or ST_ERR_ARG with a message naming the bad field (an
 * unknown arch, a count out of range, n_head not a multiple of n_head_kv, an odd head_dim, a row length
 * that is not a multiple of the weight type's block, an unsupported wtype). */
st_code mkmodel_check(const mkmodel_params *p, st_err *err);

/* Number of parameters (elements of all tensors) of valid params. */
int64_t mkmodel_n_params(const mkmodel_params *p);

/* Generates the weights and writes the GGUF to path (through PATH.tmp and a rename).
 * All tensors are generated in memory before the write and freed after it, so peak
 * memory is about the file's size. Returns ST_OK; ST_ERR_ARG (see mkmodel_check);
 * ST_ERR_NOMEM; ST_ERR_IO from the write. */
st_code mkmodel_write(const mkmodel_params *p, const char *path, st_err *err);

#endif
