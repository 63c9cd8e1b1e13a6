/* fuzz_gguf.c - fuzz harness for the GGUF reader through model creation: the input is a
 * GGUF file. Whatever the reader accepts is read back through every accessor, turned
 * into a tokenizer (tok_from_gguf) and a model (model_from_gguf); a model that loads gets
 * a context and one forward step of one token, with the cpu or the ref backend (and
 * packed or stored weights) chosen by bits of the input's size. */
#include "fuzz.h"

#include "gguf/gguf.h"
#include "model/model.h"
#include "tok/tok.h"

/* Every tensor's bytes lie in the file, so a model's size follows the input's. */
#define FUZZ_MAX_INPUT (1 << 20)

static void read_kv(const gguf_ctx *g, int64_t i) {
    char buf[256], tiny[4];
    FUZZ_ASSERT(gguf_kv_key(g, i) != NULL);
    gguf_kv_format(g, i, buf, sizeof buf);
    gguf_kv_format(g, i, tiny, sizeof tiny);
    FUZZ_ASSERT(strlen(buf) < sizeof buf && strlen(tiny) < sizeof tiny);
    int64_t iv;
    uint64_t uv;
    double fv;
    bool bv;
    const char *s;
    size_t len;
    gguf_kv_i64(g, i, &iv);
    gguf_kv_u64(g, i, &uv);
    gguf_kv_f64(g, i, &fv);
    gguf_kv_bool(g, i, &bv);
    if (gguf_kv_str(g, i, &s) == ST_OK) FUZZ_ASSERT(s != NULL);
    FUZZ_ASSERT(gguf_find_key(g, gguf_kv_key(g, i)) >= 0);
    uint64_t n = gguf_arr_n(g, i);
    if (gguf_kv_type(g, i) != GGUF_ARRAY) FUZZ_ASSERT(n == 0);
    for (uint64_t j = 0; j < n; j += n - j > 2 ? n - j - 1 : 1) { /* first and last */
        gguf_arr_i64(g, i, j, &iv);
        gguf_arr_f64(g, i, j, &fv);
        if (gguf_arr_str(g, i, j, &s, &len) == ST_OK) FUZZ_ASSERT(s != NULL || len == 0);
    }
}

static void read_tensors(const gguf_ctx *g) {
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        FUZZ_ASSERT(t && t->n_dims >= 1 && t->n_dims <= GGUF_MAX_DIMS);
        FUZZ_ASSERT(gguf_tensor_nelem(t) >= 0);
        const gguf_tensor *by_name = gguf_find_tensor(g, t->name);
        FUZZ_ASSERT(by_name && strcmp(by_name->name, t->name) == 0);
        /* the data must lie inside the file: touch its first and last byte */
        if (t->nbytes) {
            const uint8_t *d = t->data;
            volatile uint8_t sink = d[0] ^ d[t->nbytes - 1];
            (void)sink;
        }
    }
}

static void tokenize(const gguf_ctx *g) {
    st_err err = {0};
    tok *t = tok_from_gguf(g, &err);
    if (!t) return;
    static const char text[] = "Hello world! <s> \xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80 12345";
    int32_t ids[64];
    int32_t n = tok_encode(t, text, sizeof text - 1, true, true, ids, 64);
    if (n > 64) n = 64;
    if (n > 0) free(tok_decode_str(t, ids, n));
    tok_free(t);
}

static void run_model(gguf_ctx *g, size_t size) {
    st_err err = {0};
    model *m = model_from_gguf(g, &err); /* owns g from here, on failure too */
    if (!m) {
        FUZZ_ASSERT(err.code != ST_OK);
        return;
    }
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 4;
    cp.max_rows = 2;
    cp.n_threads = 1;
    cp.backend = size & 8 ? "ref" : "cpu";
    cp.no_pack = size & 4;
    model_ctx *c = model_ctx_init(m, &cp, &err);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    if (c && logits) {
        int32_t tok0 = (int32_t)(size % (size_t)m->hp.n_vocab);
        FUZZ_ASSERT(model_forward_linear(c, &tok0, 1, 0, logits, &err) == ST_OK);
    }
    free(logits);
    model_ctx_free(c);
    model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT) return 0;
    st_err err = {0};
    gguf_ctx *g = gguf_open_mem(data, size, &err);
    if (!g) {
        FUZZ_ASSERT(err.code != ST_OK && err.msg[0] != '\0');
        return 0;
    }
    for (int64_t i = 0; i < gguf_n_kv(g); i++) read_kv(g, i);
    read_tensors(g);
    tokenize(g);
    run_model(g, size);
    return 0;
}
