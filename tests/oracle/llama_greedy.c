/* llama_greedy.c - llama.cpp's greedy decoding of fixed prompts, printed as the case
 * lines of a tests/golden golden.txt (format in gen_quant_models.py's header): for each
 * prompt, "case", "prompt", "gen" and one "step" line of the top-5 (id, logit) a token
 * was picked from, then "end". Built by gen_gemma4_models.sh against a llama.cpp build's
 * static libraries (src/libllama.a and ggml's), because the pinned llama-cpp-python
 * needs a shared build; like gen_quant_models.py it uses the CPU, n_ctx 128, float32 KV
 * cache and no flash attention, argmax with ties to the lower id, no eog stop.
 *
 * Prompts: BOS (id 1) then 8..24 ids uniform in [3, n_vocab), from splitmix64 seeded
 * with 4242 (not numpy's stream: this program has no numpy).
 *
 * usage: llama_greedy MODEL.gguf N_PROMPTS N_GEN
 *        llama_greedy --quantize IN.gguf OUT.gguf TYPE   (llama_model_quantize with its
 *                     default params and the ftype TYPE names, one of qp_ftypes, then a
 *                     "tensor NAME TYPE" line per tensor of OUT)
 *        llama_greedy --types MODEL.gguf   (only the "tensor NAME TYPE" lines) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctype.h>

#include "gguf.h"
#include "llama.h"

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void quiet(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* The top 5 of row (n values), largest first, ties to the lower id, as step line i into
 * buf; returns the first. */
static int32_t step_line(char *buf, size_t cap, int32_t i, const float *row, int32_t n) {
    int32_t top[5];
    for (int k = 0; k < 5; k++) {
        int32_t best = -1;
        for (int32_t j = 0; j < n; j++) {
            int taken = 0;
            for (int q = 0; q < k; q++) taken |= top[q] == j;
            if (!taken && (best < 0 || row[j] > row[best])) best = j;
        }
        top[k] = best;
    }
    int at = snprintf(buf, cap, "step %d", i);
    for (int k = 0; k < 5; k++)
        at += snprintf(buf + at, cap - (size_t)at, " %d %.9g", top[k], (double)row[top[k]]);
    snprintf(buf + at, cap - (size_t)at, "\n");
    return top[0];
}

static const struct {
    const char *name;
    enum llama_ftype ftype;
} qp_ftypes[] = {{"F32", LLAMA_FTYPE_ALL_F32},         {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
                 {"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},      {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
                 {"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL},  {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS}};

/* A "tensor NAME TYPE" line per tensor of the file. */
static int print_types(const char *path) {
    struct gguf_init_params gp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *g = gguf_init_from_file(path, gp);
    if (!g) return 1;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
        char type[16];
        snprintf(type, sizeof type, "%s", ggml_type_name(gguf_get_tensor_type(g, i)));
        for (char *c = type; *c; c++) *c = (char)toupper((unsigned char)*c);
        printf("tensor %s %s\n", gguf_get_tensor_name(g, i), type);
    }
    gguf_free(g);
    return 0;
}

/* IN to type as llama.cpp chooses each tensor's type; prints OUT's tensors' types. */
static int quantize(const char *in, const char *out, const char *type) {
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    size_t i = 0, n = sizeof qp_ftypes / sizeof qp_ftypes[0];
    while (i < n && strcmp(type, qp_ftypes[i].name) != 0) i++;
    if (i == n) return 2;
    qp.ftype = qp_ftypes[i].ftype;
    if (llama_model_quantize(in, out, &qp) != 0) return 1;
    return print_types(out);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--types") == 0) return print_types(argv[2]);
    if (argc == 5 && argv[1][0] == '-') {
        llama_log_set(quiet, NULL);
        llama_backend_init();
        return quantize(argv[2], argv[3], argv[4]);
    }
    if (argc != 4) {
        fprintf(stderr, "usage: llama_greedy MODEL.gguf N_PROMPTS N_GEN\n");
        return 2;
    }
    const int n_prompts = atoi(argv[2]), n_gen = atoi(argv[3]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) return 1;
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = 128;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    uint64_t seed = 4242;
    for (int p = 0; p < n_prompts; p++) {
        llama_token toks[128];
        int n = 1 + 8 + (int)(next(&seed) % 17);
        toks[0] = 1;
        for (int i = 1; i < n; i++) toks[i] = 3 + (llama_token)(next(&seed) % (uint64_t)(n_vocab - 3));
        llama_memory_clear(llama_get_memory(ctx), true);
        printf("case p%d\nprompt %d", p, n);
        for (int i = 0; i < n; i++) printf(" %d", toks[i]);
        printf("\n");
        if (llama_decode(ctx, llama_batch_get_one(toks, n))) return 1;
        char steps[64][200];
        llama_token gen[64];
        for (int i = 0; i < n_gen && i < 64; i++) {
            gen[i] = step_line(steps[i], sizeof steps[i], i, llama_get_logits_ith(ctx, -1), n_vocab);
            if (llama_decode(ctx, llama_batch_get_one(&gen[i], 1))) return 1;
        }
        printf("gen %d length", n_gen);
        for (int i = 0; i < n_gen; i++) printf(" %d", gen[i]);
        printf("\n");
        for (int i = 0; i < n_gen; i++) fputs(steps[i], stdout);
        printf("end\n");
    }
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
