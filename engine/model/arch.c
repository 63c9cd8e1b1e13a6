/* arch.c - the supported architectures as a table (arch.h) and their descriptions for
 * `info`. Adding a family that fits the block of forward.c is one entry here; one that
 * needs a new op adds it to kern.h's issue-28 block too.
 *
 * Sources for what GGUF files do not say, from llama.cpp (src/llama-model.cpp,
 * llama_model::load_hparams, case LLM_ARCH_GEMMA3): Gemma 3's local layers are five of
 * every six (hparams.set_swa_pattern(6): layer l is local when l % 6 < 5) and rotate with
 * base 10000 (rope_freq_base_train_swa), the global ones with gemma3.rope.freq_base; its
 * attention scale is 1 / sqrt(head_dim) except for the 27B model (62 layers), whose is
 * 1 / sqrt(n_embd / n_head). llama_model_rope_type gives the NeoX pair layout for qwen2,
 * qwen3 and gemma3 (their converters do not permute Q and K as they do for llama). */
#include "model/arch.h"
#include "model/moe.h"

#include <stdio.h>
#include <string.h>

static const arch_desc archs[MODEL_ARCH_N] = {
    [MODEL_ARCH_LLAMA] = {.name = "llama", .arch = MODEL_ARCH_LLAMA, .act = MODEL_ACT_SILU,
                          .chat_note = "as its template says"},
    [MODEL_ARCH_QWEN2] = {.name = "qwen2", .arch = MODEL_ARCH_QWEN2, .rope_neox = true,
                          .qkv_bias = true, .act = MODEL_ACT_SILU, .chat_note = "ChatML"},
    [MODEL_ARCH_QWEN3] = {.name = "qwen3", .arch = MODEL_ARCH_QWEN3, .rope_neox = true,
                          .qk_norm = true, .act = MODEL_ACT_SILU,
                          .chat_note = "ChatML with <think> reasoning"},
    [MODEL_ARCH_GEMMA3] = {.name = "gemma3", .arch = MODEL_ARCH_GEMMA3, .rope_neox = true,
                           .qk_norm = true, .post_norms = true, .act = MODEL_ACT_GELU_TANH,
                           .embd_scaled = true, .swa_pattern = 6, .rope_base_swa = 10000.0f,
                           .chat_note = "Gemma turns"},
    [MODEL_ARCH_GEMMA4] = {.name = "gemma4", .arch = MODEL_ARCH_GEMMA4, .rope_neox = true,
                           .qk_norm = true, .post_norms = true, .act = MODEL_ACT_GELU_TANH,
                           .embd_scaled = true, .rope_base_swa = 10000.0f, .v_from_k = true,
                           .chat_note = "Gemma 4 turns (<|turn>role ... <turn|>)",
                           .load_hparams = gemma4_load_hparams,
                           .load_tensors = gemma4_load_tensors,
                           .load_layer = gemma4_load_layer},
    [MODEL_ARCH_QWEN3MOE] = {.name = "qwen3moe", .arch = MODEL_ARCH_QWEN3MOE, .rope_neox = true,
                             .qk_norm = true, .act = MODEL_ACT_SILU,
                             .moe_norm = true, .moe = true, .chat_note = "ChatML with <think> reasoning",
                             .load_hparams = moe_load_hparams, .load_layer = moe_load_layer},
    [MODEL_ARCH_QWEN2MOE] = {.name = "qwen2moe", .arch = MODEL_ARCH_QWEN2MOE, .rope_neox = true,
                             .qkv_bias = true, .act = MODEL_ACT_SILU, .moe_shared = true,
                             .moe = true, .chat_note = "ChatML", .load_hparams = moe_load_hparams,
                             .load_layer = moe_load_layer},
    [MODEL_ARCH_GPTOSS] = {.name = "gpt-oss", .arch = MODEL_ARCH_GPTOSS, .rope_neox = true,
                           .qkv_bias = true, .act = MODEL_ACT_SWIGLU_OAI, .swa_pattern = 2,
                           .ffn_norm = "post_attention_norm", .moe = true,
                           .chat_note = "harmony (an analysis channel, then the final one)",
                           .load_hparams = gptoss_load_hparams, .load_layer = gptoss_load_layer},
    [MODEL_ARCH_QWEN35] = {.name = "qwen35", .arch = MODEL_ARCH_QWEN35, .rope_neox = true,
                           .qk_norm = true, .act = MODEL_ACT_SILU,
                           .chat_note = "ChatML with <think> reasoning (qwen35)",
                           .load_hparams = qwen35_load_hparams,
                           .load_block = qwen35_load_block},
    [MODEL_ARCH_QWEN35MOE] = {.name = "qwen35moe", .arch = MODEL_ARCH_QWEN35MOE,
                              .rope_neox = true, .qk_norm = true, .act = MODEL_ACT_SILU,
                              .moe_norm = true, .moe_shared = true, .moe = true,
                              .chat_note = "ChatML with <think> reasoning (qwen35)",
                              .load_hparams = qwen35moe_load_hparams,
                              .load_block = qwen35_load_block},
};

const arch_desc *arch_find(const char *name) {
    for (int a = 0; name && a < MODEL_ARCH_N; a++)
        if (strcmp(archs[a].name, name) == 0) return &archs[a];
    return NULL;
}

const arch_desc *arch_get(model_arch a) { return &archs[a]; }

const char *model_arch_name(model_arch a) {
    return (unsigned)a < MODEL_ARCH_N ? archs[a].name : "?";
}

const char *model_arch_names(void) { return "llama, qwen2, qwen3, gemma3, gemma4, qwen35, qwen35moe, qwen3moe, qwen2moe, gpt-oss"; }

/* Gemma 4's additions in words ("" for the other families), into out. */
static void gemma4_features(const model_hparams *hp, char *out, size_t cap) {
    out[0] = '\0';
    if (hp->arch != MODEL_ARCH_GEMMA4) return;
    char ple[48] = "", cap_s[48] = "";
    if (hp->n_embd_ple > 0) snprintf(ple, sizeof ple, "; per-layer embeddings of %d", hp->n_embd_ple);
    if (hp->final_softcap > 0) snprintf(cap_s, sizeof cap_s, "; logits soft-capped at %g", hp->final_softcap);
    snprintf(out, cap, "; attention scale 1, V RMSNorm; local heads %d (%d KV, rope %d), global "
             "heads %d (%d KV, rope %d, proportional via rope_freqs); %d shared-KV layers%s%s",
             hp->head_dim_swa, hp->n_head_kv_swa, hp->rope_dim_swa, hp->head_dim, hp->n_head_kv,
             hp->rope_dim, hp->n_kv_shared, ple, cap_s);
}

/* Qwen3.5's recurrent layers and gated attention in words ("" for the other families). */
static void qwen35_features(const model_hparams *hp, char *out, size_t cap) {
    out[0] = '\0';
    if (hp->full_attn_interval <= 0) return;
    snprintf(out, cap, "; Gated DeltaNet on %d of every %d layers (conv %d, %d key / %d value "
             "heads of %d; recurrent state %.1f KiB a sequence, kept at every leaf and branch "
             "point), gated full attention on the others (rotary on %d of %d dims)",
             hp->full_attn_interval - 1, hp->full_attn_interval, hp->ssm_conv, hp->ssm_k_heads,
             hp->ssm_v_heads, hp->ssm_state, (double)model_rstate_floats(hp) * 4.0 / 1024.0,
             hp->rope_dim, hp->head_dim);
}

const char *model_arch_features(const model_hparams *hp, char *out, size_t cap) {
    char win[96] = "";
    if (hp->n_swa > 0 && hp->swa_pattern > 0)
        snprintf(win, sizeof win, "; sliding window %d on %d of every %d layers (rope base %g)",
                 hp->n_swa, hp->swa_pattern - 1, hp->swa_pattern, hp->rope_base_swa);
    char scale[64] = "";
    if (hp->rope_scale > 0 && hp->rope_scale != 1.0f)
        snprintf(scale, sizeof scale, " scaled linearly by 1/%g%s", (double)hp->rope_scale,
                 win[0] ? " on the global layers" : "");
    if (hp->yarn_factor > 0)
        snprintf(scale, sizeof scale, " with YaRN x%g from %d tokens", (double)hp->yarn_factor,
                 hp->yarn_orig_ctx);
    char g4[256], q35[320], moe[224] = "", sh[64] = "";
    gemma4_features(hp, g4, sizeof g4);
    qwen35_features(hp, q35, sizeof q35);
    if (hp->n_ff_shexp > 0)
        snprintf(sh, sizeof sh, ", a shared expert of width %d gated by a sigmoid", hp->n_ff_shexp);
    if (hp->n_expert > 0)
        snprintf(moe, sizeof moe, "; mixture of %d experts of width %d, %d used per token "
                 "(%s%s)%s", hp->n_expert, hp->n_ff_exp, hp->n_expert_used,
                 hp->expert_softmax_k ? "top-k router logits, softmax over the k"
                 : hp->expert_norm ? "softmax router, top-k weights renormalised"
                                   : "softmax router, top-k weights as they are",
                 hp->expert_w_scale != 1.0f ? ", scaled" : "", sh);
    if (hp->attn_sinks)
        snprintf(moe + strlen(moe), sizeof moe - strlen(moe), "; attention sinks; biases on "
                 "the attention output, the router and the experts");
    snprintf(out, cap, "%s: RMSNorm%s%s, %s, RoPE %s%s, biases %s, embeddings %s%s%s%s%s; chat: %s",
             model_arch_name(hp->arch), hp->qk_norm ? " + Q/K head norms" : "",
             hp->post_norms ? " + post-attention/FFN norms" : "",
             hp->act == MODEL_ACT_GELU_TANH ? "GeGLU (tanh GELU)"
             : hp->act == MODEL_ACT_SWIGLU_OAI ? "SwiGLU clamped at 7 (gpt-oss)" : "SwiGLU",
             hp->rope_neox ? "NeoX pairs (i, i+d/2)" : "adjacent pairs", scale,
             hp->qkv_bias ? "on Q, K, V" : "none",
             hp->embd_scale != 1.0f ? "scaled by sqrt(n_embd)" : "as stored", win, g4, q35, moe,
             (unsigned)hp->arch < MODEL_ARCH_N ? archs[hp->arch].chat_note : "?");
    return out;
}
