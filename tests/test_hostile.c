/* test_hostile.c - hostile input must give a clear error, never a crash or a write out of
 * bounds: commands run with options that stretch their buffers (`plan` with
 * many branches), model shapes at the edge of the kernels (heads of 2 dims), the
 * backend out of memory, and model files that are well-formed GGUF but describe something
 * impossible (odd alignment, huge counts, shapes that do not add up), written here with
 * the project's own GGUF writer. Under `make asan` this also checks the memory accesses.
 * The commands run $BUILD/multidecode (BUILD defaults to "build") on stories260K and are
 * skipped without it. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "convert/mkmodel.h"
#include "model/model.h"
#include "kernels/kern_impl.h"
#include "t.h"
#include "t_run.h"

static char bin[512];
static const char *stories;
static char tmpdir[] = "/tmp/md_test_hostile_XXXXXX";

static const char *tmp_path(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

/* ---- commands ---- */

/* plan's mask columns once held every row's visible slots before removing duplicates, in
 * an array of one entry per KV slot: 4 branches overflowed an 8-slot cache, 256 branches
 * a 2048-slot one (a double free in the release build). Both runs end with the full
 * cache's message. */
static void test_plan_many_branches(void) {
    static const char *const opts[] = { "--branches 4 --steps 3 -c 8",
                                        "--branches 256 --steps 64",
                                        "--branches 256 --steps 64 --json" };
    for (int i = 0; i < 3; i++) {
        int st;
        char *out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' %s 2>&1", bin, stories,
                           opts[i]);
        T_CHECK(out && st == 1 && strstr(out, "KV cache is full"),
                "plan %s: exit %d (want 1, the full cache's message)\n%s", opts[i], st,
                out ? out + (strlen(out) > 600 ? strlen(out) - 600 : 0) : "");
        free(out);
    }
}

/* ---- hostile model files ---- */

/* A small llama model of F32 tensors (values all 0.01) whose metadata may lie. */
typedef struct hostile {
    int32_t n_embd, n_ff, n_head;
    int32_t key_length;         /* attention.key_length and value_length; 0: not written */
    int32_t block_count;        /* llama.block_count as written */
    int32_t n_layers;           /* layers whose tensors are written */
    int32_t n_rows;             /* token_embd.weight rows */
    int32_t n_tokens;           /* tokenizer.ggml.tokens entries; 0: no tokenizer */
    uint32_t alignment;         /* general.alignment; 0: not written */
} hostile;

static hostile hostile_default(void) {
    return (hostile){ .n_embd = 64, .n_ff = 128, .n_head = 4, .block_count = 2, .n_layers = 2,
                      .n_rows = 300, .n_tokens = 300, .alignment = 0 };
}

/* Rewrites the u32 value of general.alignment in the GGUF file at path to align (the key,
 * then its type, then the value, as GGUF lays them out); false when it is not there. */
static bool patch_alignment(const char *path, uint32_t align) {
    static const char key[] = "general.alignment";
    static char buf[1 << 16];
    FILE *f = fopen(path, "r+b");
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    bool ok = false;
    for (size_t i = 0; f && !ok && i + sizeof key + 7 <= n; i++) {
        if (memcmp(buf + i, key, sizeof key - 1) != 0) continue;
        ok = fseek(f, (long)(i + sizeof key - 1 + 4), SEEK_SET) == 0 &&
             fwrite(&align, 4, 1, f) == 1; /* GGUF is little-endian, as is every host here */
    }
    if (f) fclose(f);
    T_CHECK(ok, "patching general.alignment of %s", path);
    return ok;
}

/* Writes h to path; false (and a failed check) when the writer refuses. */
static bool hostile_write(const hostile *h, const char *path) {
    static float data[64 * 2048]; /* >= every tensor: E * max(E, F, rows, n_head * key) */
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++) data[i] = 0.01f;
    const int64_t E = h->n_embd, F = h->n_ff;
    const int64_t QD = h->key_length ? (int64_t)h->n_head * h->key_length : E;
    gguf_writer *w = gguf_writer_init();
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)E);
    gguf_writer_set_u32(w, "llama.block_count", (uint32_t)h->block_count);
    gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)h->n_head);
    gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)F);
    gguf_writer_set_u32(w, "llama.context_length", 64);
    /* The writer refuses an alignment under 8: such a file is written with 8 and patched. */
    if (h->alignment)
        gguf_writer_set_u32(w, "general.alignment", h->alignment < 8 ? 8 : h->alignment);
    if (h->key_length) {
        gguf_writer_set_u32(w, "llama.attention.key_length", (uint32_t)h->key_length);
        gguf_writer_set_u32(w, "llama.attention.value_length", (uint32_t)h->key_length);
    }
    if (h->n_tokens > 0) {
        char(*text)[12] = malloc(12 * (size_t)h->n_tokens);
        const char **pieces = malloc(sizeof *pieces * (size_t)h->n_tokens);
        for (int32_t i = 0; i < h->n_tokens; i++) {
            snprintf(text[i], sizeof text[i], i < 3 ? "<c%d>" : "t%d", i);
            pieces[i] = text[i];
        }
        gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", pieces, NULL, (uint64_t)h->n_tokens);
        /* the writer copies the strings */
        free(pieces);
        free(text);
    }
    int64_t emb[2] = { E, h->n_rows }, vec[1] = { E };
    gguf_writer_add_tensor(w, "token_embd.weight", DT_F32, 2, emb, data);
    gguf_writer_add_tensor(w, "output_norm.weight", DT_F32, 1, vec, data);
    /* each matrix's (n_in, n_out): 0 = E, 1 = F, 2 = QD */
    static const struct { const char *name; int in, out; } lt[] = {
        { "attn_q", 0, 2 }, { "attn_k", 0, 2 }, { "attn_v", 0, 2 }, { "attn_output", 2, 0 },
        { "ffn_gate", 0, 1 }, { "ffn_up", 0, 1 }, { "ffn_down", 1, 0 },
    };
    const int64_t dims[3] = { E, F, QD };
    char nm[64];
    for (int32_t l = 0; l < h->n_layers; l++) {
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", (int)l);
        gguf_writer_add_tensor(w, nm, DT_F32, 1, vec, data);
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", (int)l);
        gguf_writer_add_tensor(w, nm, DT_F32, 1, vec, data);
        for (size_t k = 0; k < sizeof lt / sizeof lt[0]; k++) {
            int64_t ne[2] = { dims[lt[k].in], dims[lt[k].out] };
            snprintf(nm, sizeof nm, "blk.%d.%s.weight", (int)l, lt[k].name);
            gguf_writer_add_tensor(w, nm, DT_F32, 2, ne, data);
        }
    }
    st_err err = { 0 };
    st_code rc = gguf_writer_write(w, path, &err);
    gguf_writer_free(w);
    T_CHECK(rc == ST_OK, "writing %s: %s", path, err.msg);
    return rc == ST_OK && (h->alignment == 0 || h->alignment >= 8 ||
                           patch_alignment(path, h->alignment));
}

/* Loads h: ST_OK, or the error's code with its message in err. */
static st_code hostile_load(const hostile *h, const char *name, st_err *err) {
    const char *path = tmp_path(name);
    if (!hostile_write(h, path)) return ST_ERR_IO;
    model *m = model_load(path, err);
    model_free(m);
    return m ? ST_OK : err->code;
}

/* Each lie must be refused at load with a message that names what is wrong. */
static void test_hostile_models(void) {
    st_err err = { 0 };
    hostile h = hostile_default();
    T_CHECK(hostile_load(&h, "ok.gguf", &err) == ST_OK, "the honest model loads: %s", err.msg);

    /* alignment 2 would put the floats at odd addresses */
    h = hostile_default();
    h.alignment = 2;
    T_CHECK(hostile_load(&h, "align2.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "alignment 2"), "alignment 2: %s", err.msg);

    /* a block_count of 2^30 in a small file: no 4 GiB of layer tables before the
     * missing layers are found (that was an out-of-memory error, or a slow success of
     * calloc followed by 'tensor blk.2... is missing') */
    h = hostile_default();
    h.block_count = 1 << 30;
    T_CHECK(hostile_load(&h, "layers.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "block_count is 1073741824"), "block_count 2^30: %s", err.msg);
    h.block_count = 3; /* one layer more than the file has */
    T_CHECK(hostile_load(&h, "layers3.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "at most 2 layers"), "block_count 3 of 2 layers: %s", err.msg);

    /* head_count 128 with n_embd 64: heads of 0 dims */
    h = hostile_default();
    h.n_head = 128;
    T_CHECK(hostile_load(&h, "heads.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "head_count 128") && strstr(err.msg, "embedding_length 64"),
            "head_count 128, embd 64: %s", err.msg);
    h.n_head = 3; /* 64 / 3 is not whole */
    T_CHECK(hostile_load(&h, "heads3.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "head_count 3"), "head_count 3, embd 64: %s", err.msg);
    h.key_length = 32; /* ... unless key_length gives the head size */
    T_CHECK(hostile_load(&h, "heads3k.gguf", &err) == ST_OK, "3 heads of 32: %s", err.msg);
    h.n_head = 1, h.key_length = 2048; /* rope would rotate 2048 dims (an ASSERT at the
                                        * first forward pass) */
    T_CHECK(hostile_load(&h, "rope2048.gguf", &err) == ST_ERR_UNSUPPORTED &&
                strstr(err.msg, "rope.dimension_count 2048"), "a head of 2048: %s", err.msg);

    /* a tokenizer of 100 tokens over 300 embedding rows, and 300 tokens over 100 rows:
     * ids the tokenizer cannot spell, or tokens without embeddings (llama.cpp refuses
     * both: it sizes token_embd by the tokenizer) */
    h = hostile_default();
    h.n_tokens = 100;
    T_CHECK(hostile_load(&h, "vocab_short.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "100 tokens") && strstr(err.msg, "300 rows"),
            "100 tokens, 300 rows: %s", err.msg);
    h.n_tokens = 300, h.n_rows = 100;
    T_CHECK(hostile_load(&h, "vocab_long.gguf", &err) == ST_ERR_FORMAT &&
                strstr(err.msg, "300 tokens") && strstr(err.msg, "100 rows"),
            "300 tokens, 100 rows: %s", err.msg);
    h = hostile_default();
    h.n_tokens = 0; /* no tokenizer: the embedding says how many tokens there are */
    T_CHECK(hostile_load(&h, "no_tok.gguf", &err) == ST_OK, "no tokenizer: %s", err.msg);
}

/* ---- the backend's memory ---- */

/* Tiny heads make a rope table whose size is not a multiple of 64 bytes (32 heads of 2
 * dims, 3 rows: 48 bytes), which aligned_alloc may refuse (ASan does, and the backend
 * asserted); the pass must run and give finite logits. */
static void test_tiny_heads(void) {
    mkmodel_params p = mkmodel_default_params();
    p.n_head = p.n_head_kv = 32; /* n_embd 64: heads of 2 */
    st_err err = {0};
    const char *path = tmp_path("heads32x2.gguf");
    T_CHECK(mkmodel_write(&p, path, &err) == ST_OK, "mkmodel: %s", err.msg);
    model *m = model_load(path, &err);
    T_CHECK(m != NULL, "load: %s", err.msg);
    if (!m) return;
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 16;
    cp.n_threads = 1;
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "ctx: %s", err.msg);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int32_t toks[3] = { 1, 300, 301 };
    st_code rc = c ? model_forward_linear(c, toks, 3, 0, logits, &err) : ST_ERR_ARG;
    bool finite = rc == ST_OK;
    for (int32_t i = 0; finite && i < m->hp.n_vocab; i++) finite = isfinite(logits[i]);
    T_CHECK(rc == ST_OK && finite, "3 rows through 32 heads of 2: %s", err.msg);
    free(logits);
    model_ctx_free(c);
    model_free(m);
}

/* Scratch memory the backend cannot get is a recorded ST_ERR_NOMEM naming the op, not an
 * abort; the old buffer stays and the record is taken once. */
static void test_scratch_nomem(void) {
    st_err err = {0};
    kern_backend *b = kern_backend_init("cpu", 1, &err);
    T_CHECK(b != NULL, "backend: %s", err.msg);
    if (!b) return;
    kern_scratch s = {0};
    void *small = kern_scratch_get(b, &s, "test_op", 100);
    T_CHECK(small != NULL && (uintptr_t)small % 64 == 0, "100 bytes of scratch, 64-aligned");
    T_CHECK(kern_scratch_get(b, &s, "test_op", SIZE_MAX - 10) == NULL, "SIZE_MAX - 10 bytes: NULL");
    T_CHECK(kern_backend_sync(b, &err) == ST_ERR_NOMEM && strstr(err.msg, "scratch") &&
            strncmp(err.msg, "test_op: ", 9) == 0,
            "the failure is recorded, naming the op: %s", err.msg);
    T_CHECK(kern_backend_sync(b, &err) == ST_OK, "and taken once");
    T_CHECK(kern_scratch_get(b, &s, "test_op", 100) == small, "the old buffer stays");
    kern_scratch_free(&s);
    kern_backend_free(b);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        T_CHECK(false, "cannot create %s", tmpdir);
        return t_done();
    }
    test_hostile_models();
    test_tiny_heads();
    test_scratch_nomem();
    const char *build = getenv("BUILD");
    snprintf(bin, sizeof bin, "%s/multidecode", build && *build ? build : "build");
    stories = t_shared("models/stories260K.gguf");
    if (stories) stories = strdup(stories);
    if (!stories || access(bin, X_OK) != 0) {
        T_MISSING("needs %s and ../shared/models/stories260K.gguf", bin);
    } else {
        test_plan_many_branches();
    }
    free((void *)stories);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return t_done();
}
