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
};

const arch_desc *arch_find(const char *name) {
    for (int a = 0; name && a < MODEL_ARCH_N; a++)
        if (strcmp(archs[a].name, name) == 0) return &archs[a];
    return NULL;
}

const char *model_arch_name(model_arch a) {
    return (unsigned)a < MODEL_ARCH_N ? archs[a].name : "?";
}

const char *model_arch_names(void) { return "llama, qwen2, qwen3, gemma3"; }

const char *model_arch_features(const model_hparams *hp, char *out, size_t cap) {
    char win[96] = "";
    if (hp->n_swa > 0 && hp->swa_pattern > 0)
        snprintf(win, sizeof win, "; sliding window %d on %d of every %d layers (rope base %g)",
                 hp->n_swa, hp->swa_pattern - 1, hp->swa_pattern, hp->rope_base_swa);
    char scale[64] = "";
    if (hp->rope_scale > 0 && hp->rope_scale != 1.0f)
        snprintf(scale, sizeof scale, " scaled linearly by 1/%g%s", (double)hp->rope_scale,
                 win[0] ? " on the global layers" : "");
    snprintf(out, cap, "%s: RMSNorm%s%s, %s, RoPE %s%s, biases %s, embeddings %s%s; chat: %s",
             model_arch_name(hp->arch), hp->qk_norm ? " + Q/K head norms" : "",
             hp->post_norms ? " + post-attention/FFN norms" : "",
             hp->act == MODEL_ACT_GELU_TANH ? "GeGLU (tanh GELU)" : "SwiGLU",
             hp->rope_neox ? "NeoX pairs (i, i+d/2)" : "adjacent pairs", scale,
             hp->qkv_bias ? "on Q, K, V" : "none",
             hp->embd_scale != 1.0f ? "scaled by sqrt(n_embd)" : "as stored", win,
             (unsigned)hp->arch < MODEL_ARCH_N ? archs[hp->arch].chat_note : "?");
    return out;
}
