/* cmd_info.c - `multidecode info MODEL`: what a GGUF file holds and how we read it. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tok/chat.h"
#include "model/model.h"
#include "tok/tok.h"
#include "app.h"
#include "prompt.h"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define INFO_USAGE "usage: multidecode info [--tensors] MODEL"

static void info_usage(FILE *f) {
    fprintf(f, INFO_USAGE "\n\n"
               "Prints the file's metadata, the model's hyperparameters, its tensors (with\n"
               "--tensors: every one; default: a summary by type) and its tokenizer.\n");
}

/* A name from the file, escaped, padded to width columns. */
static void print_padded(const char *s, int width) {
    int n = prompt_show_bare(stdout, s);
    if (n < width) printf("%*s", width - n, "");
}

/* The file's format line and its metadata. */
static void info_metadata(const gguf_ctx *g, const char *path) {
    printf("file: %s\nformat: GGUF v%u, %zu bytes, alignment %u, %lld metadata keys, %lld tensors\n",
           path, gguf_version(g), gguf_file_size(g), gguf_alignment(g), (long long)gguf_n_kv(g),
           (long long)gguf_n_tensors(g));
    printf("\nmetadata:\n");
    char buf[256];
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        gguf_kv_format(g, i, buf, sizeof buf);
        printf("  ");
        print_padded(gguf_kv_key(g, i), 44);
        printf(" %s\n", buf);
    }
}

/* The tensors: a count and byte total per type, after every tensor when all. */
static void info_tensors(const gguf_ctx *g, bool all) {
    uint64_t bytes[DT_COUNT] = {0};
    int64_t count[DT_COUNT] = {0};
    printf("\ntensors:\n");
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        bytes[t->type] += t->nbytes;
        count[t->type]++;
        if (!all) continue;
        printf("  ");
        print_padded(t->name, 36);
        printf(" %-6s [", dtype_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) printf(d ? ", %lld" : "%lld", (long long)t->ne[d]);
        printf("] %llu bytes\n", (unsigned long long)t->nbytes);
    }
    for (int i = 0; i < DT_COUNT; i++)
        if (count[i])
            printf("  %-6s %5lld tensors, %10.2f MiB%s\n", dtype_name((uint32_t)i),
                   (long long)count[i], bytes[i] / 1048576.0,
                   dtype_get((uint32_t)i)->compute ? "" : "  (not supported for compute)");
}

/* The tokenizer (or why there is none usable) and the chat template. */
static void info_tokenizer(const gguf_ctx *g) {
    st_err err = {0};
    tok *tk = tok_from_gguf(g, &err);
    if (tk) {
        printf("\ntokenizer: ");
        prompt_show_bare(stdout, tok_model_name(tk));
        printf(", %d tokens, bos %d, eos %d, add_bos %s\n", tok_n_vocab(tk), tok_bos(tk),
               tok_eos(tk), tok_add_bos(tk) ? "yes" : "no");
        tok_free(tk);
    } else {
        printf("\ntokenizer: none usable (");
        prompt_show_bare(stdout, err.msg);
        printf(")\n");
    }
    const char *jinja = NULL;
    if (gguf_get_str(g, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    chat_kind ck = chat_detect(jinja);
    if (ck != CHAT_NONE)
        printf("chat template: %s (detected from tokenizer.chat_template)\n", chat_name(ck));
    else
        printf("chat template: none%s\n", jinja ? " (tokenizer.chat_template not recognised)" : "");
}

/* The model's hyperparameters (takes g); 1 when it cannot run. */
static int info_model(gguf_ctx *g) {
    st_err err = {0};
    model *m = model_from_gguf(g, &err);
    if (!m) {
        printf("\nmodel: cannot run: ");
        prompt_show_bare(stdout, err.msg);
        printf("\n");
        return 1;
    }
    const model_hparams *h = &m->hp;
    char feat[1024];
    printf("\nmodel: %s, %d layers, embd %d, ffn %d, heads %d (kv %d, dim %d), rope dim %d "
           "base %g, rms eps %g, vocab %d, context %d, output %s\n"
           "architecture: %s\n"
           "weights read per token: %.2f MiB\n",
           model_arch_name(h->arch), h->n_layer, h->n_embd, h->n_ff, h->n_head, h->n_head_kv, h->head_dim,
           h->rope_dim, h->rope_base, h->rms_eps, h->n_vocab, h->n_ctx_train,
           h->tied_output ? "tied to token_embd" : "separate",
           model_arch_features(h, feat, sizeof feat), m->weight_bytes / 1048576.0);
    model_free(m);
    return 0;
}

int cmd_info(int argc, char **argv) {
    static const struct option lo[] = {{"tensors", 0, 0, 'a'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    bool all = false;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (ch == 'a') all = true;
        else if (ch == 'h') { info_usage(stdout); return 0; }
        else return app_usage_error("%s; see multidecode info --help", INFO_USAGE);
    }
    if (optind != argc - 1) return app_usage_error("info needs exactly one MODEL argument");
    const char *path = argv[optind];
    st_err err = {0};
    gguf_ctx *g = gguf_open(path, &err);
    if (!g) return app_fail(&err);
    info_metadata(g, path);
    info_tensors(g, all);
    info_tokenizer(g);
    return info_model(g);
}
