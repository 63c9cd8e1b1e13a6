/* t_model.h - test helpers over the engine (header-only, include after t.h): KV contexts
 * whose backend, threads and chunk size can be switched from the environment
 * (MD_BACKEND=ref, MD_THREADS=N, MD_MAXROWS=N), random-weight models written to a
 * temporary file and loaded, and linear decoding of one sequence (the exactness
 * reference). */
#ifndef MD_T_MODEL_H
#define MD_T_MODEL_H

#include "convert/mkmodel.h"
#include "model/model.h"
#include "forest/sample.h"
#include "tok/tok.h"

/* Whether the cuda backend starts (a device, or the emulator in this build); a skip when
 * it does not. */
static inline bool t_cuda_device(void) {
    st_err err = {0};
    kern_backend *probe = kern_backend_init("cuda", 0, &err);
    if (!probe) T_SKIP("no CUDA device: %s", err.msg);
    kern_backend_free(probe);
    return probe != NULL;
}

/* stories260K (the shared fixture) and its tokenizer into *m and *tk: false, both NULL,
 * with a skip when the fixture is absent or a failed check when it does not load. */
static inline bool t_stories(model **m, tok **tk) {
    const char *path = t_shared("models/stories260K.gguf");
    *m = NULL, *tk = NULL;
    if (!path) {
        T_MISSING("stories260K fixture absent");
        return false;
    }
    st_err err = {0};
    *m = model_load(path, &err);
    *tk = *m ? tok_from_gguf((*m)->gguf, &err) : NULL;
    T_CHECK(*m && *tk, "stories260K: %s", err.msg);
    if (*m && *tk) return true;
    model_free(*m);
    *m = NULL;
    return false;
}

/* A context of n_slots slots computing at most max_rows rows at once (0: the default). */
static inline model_ctx *t_new_ctx_rows(const model *m, int32_t n_slots, int32_t max_rows) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = n_slots;
    cp.n_rstates = 256; /* a recurrent model's forests: up to 128 leaves growing together */
    cp.max_rows = getenv("MD_MAXROWS") ? atoi(getenv("MD_MAXROWS")) : max_rows;
    if (getenv("MD_BACKEND")) cp.backend = getenv("MD_BACKEND");
    if (getenv("MD_THREADS")) cp.n_threads = atoi(getenv("MD_THREADS"));
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    if (!c) fprintf(stderr, "ctx: %s\n", err.msg);
    return c;
}

static inline model_ctx *t_new_ctx(const model *m, int32_t n_slots) {
    return t_new_ctx_rows(m, n_slots, 0);
}

/* stories260K, its tokenizer and a context of n_slots: false (skipped or failed, with
 * whatever was opened left in *m, *tk, *c for the caller to free) when unavailable. */
static inline bool t_stories_ctx(model **m, tok **tk, model_ctx **c, int32_t n_slots) {
    *c = NULL;
    if (!t_stories(m, tk)) return false;
    *c = t_new_ctx(*m, n_slots);
    T_CHECK(*c, "stories260K: no context of %d slots", (int)n_slots);
    return *c != NULL;
}

/* Writes the model of mp to a temporary file, loads it and removes the file; NULL + err. */
static inline model *t_random_model(const mkmodel_params *mp, st_err *err) {
    char path[] = "/tmp/md_test_model_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        st_set(err, ST_ERR_IO, "mkstemp failed");
        return NULL;
    }
    close(fd);
    model *m = NULL;
    if (mkmodel_write(mp, path, err) == ST_OK) m = model_load(path, err);
    unlink(path);
    return m;
}

/* Linear decoding of toks[from..n) of a sequence whose first token is at position pos0,
 * in slots from..n-1 of a cache that holds toks[0..from) in slots 0..from-1 (from = 0:
 * a fresh cache); row i sees slots [0, i], on the model's windowed layers slots
 * (i - n_swa, i]; recurrent layers continue the state in cell 0 (from zeros when from is
 * 0). The last row's logits go to last. This is the
 * reference a forest's leaf must equal bit for bit (test_forest, test_soak). */
static inline st_code t_linear_from(model_ctx *c, const int32_t *toks, int32_t from, int32_t n,
                                    int32_t pos0, float *last) {
    int32_t *pos = malloc(sizeof(int32_t) * n), *slot = malloc(sizeof(int32_t) * n);
    int32_t *off = malloc(sizeof(int32_t) * (n + 1));
    kern_seg *seg = malloc(sizeof(kern_seg) * 2 * n); /* n full, n windowed */
    uint8_t *want = calloc(n, 1);
    int32_t *rs = calloc(n + 1, sizeof *rs); /* cell 0 in place; -1 first for a new sequence */
    const int32_t w = model_ctx_hparams(c)->n_swa;
    rs[0] = from == 0 ? -1 : 0;
    toks += from;
    n -= from;
    for (int32_t i = 0; i < n; i++) {
        pos[i] = pos0 + from + i;
        slot[i] = from + i;
        off[i] = i;
        seg[i] = (kern_seg){0, from + i + 1};
        seg[n + i] = w > 0 && from + i + 1 > w ? (kern_seg){from + i + 1 - w, w} : seg[i];
    }
    off[n] = n;
    want[n - 1] = 1;
    model_batch b = {.n_rows = n, .tokens = toks, .pos = pos, .slot = slot, .seg_off = off,
                     .segs = seg, .want_logits = want, .seg_off_swa = off, .segs_swa = seg + n,
                     .rs_in = rs, .rs_out = rs + 1};
    st_err err = {0};
    st_code rc = model_forward(c, &b, last, &err);
    if (rc) fprintf(stderr, "linear: %s\n", err.msg);
    free(pos), free(slot), free(off), free(seg), free(want), free(rs);
    return rc;
}

/* t_linear_from with from = 0: the path alone in a fresh cache. */
static inline st_code t_linear(model_ctx *c, const int32_t *toks, int32_t n, int32_t pos0,
                               float *last) {
    return t_linear_from(c, toks, 0, n, pos0, last);
}

/* Linear greedy decoding of n tokens after prompt[0..np), one forward pass per token in a
 * fresh context: the reference that forest strategies (drafts, lookahead) must equal.
 * out[0..n); false (with a message on stderr) on failure. */
static inline bool t_greedy_linear(const model *m, const int32_t *prompt, int32_t np, int32_t n,
                                   int32_t *out) {
    int32_t V = m->hp.n_vocab;
    model_ctx *c = t_new_ctx(m, np + n + 1);
    float *lg = malloc(sizeof(float) * (size_t)V);
    st_err err = {0};
    bool ok = c && lg && model_forward_linear(c, prompt, np, 0, lg, &err) == ST_OK;
    for (int32_t i = 0; ok && i < n; i++) {
        out[i] = sample_argmax(lg, V);
        if (i + 1 < n) ok = model_forward_linear(c, &out[i], 1, np + i, lg, &err) == ST_OK;
    }
    if (!ok) fprintf(stderr, "greedy_linear: %s\n", err.msg);
    free(lg);
    model_ctx_free(c);
    return ok;
}

#endif
