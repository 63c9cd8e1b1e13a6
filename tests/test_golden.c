/* test_golden.c - greedy output against a reference no one here wrote: llama2.c's own
 * expected text for 200 greedy steps of stories260K from BOS
 * (../shared/models/stories260K_greedy200.expected.txt), produced three ways: through the
 * library, through `multidecode generate` on the GGUF, and through `generate` on the GGUF
 * that `convert-llama2c` makes from stories260K.bin + tok512.bin. Skips without fixtures. */
#include "model/model.h"
#include "forest/sample.h"
#include "tok/tok.h"
#include "t.h"
#include "t_run.h"

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[len] = '\0';
    *n = len;
    return buf;
}

/* Runs cmd; its stdout without the final newline generate ends with, or NULL when it
 * failed. */
static char *run_capture(const char *cmd) {
    int st;
    char *buf = t_run(cmd, &st);
    if (buf && st != 0) {
        free(buf);
        return NULL;
    }
    size_t len = buf ? strlen(buf) : 0;
    if (len && buf[len - 1] == '\n') buf[len - 1] = '\0';
    return buf;
}

static void check_text(const char *what, const char *got, const char *want) {
    if (!got) {
        T_CHECK(got != NULL, "%s: produced no output", what);
        return;
    }
    size_t i = 0;
    while (got[i] && got[i] == want[i]) i++;
    T_CHECK(strcmp(got, want) == 0, "%s: differs from llama2.c's expected output at byte %zu:\n"
            "  got:  '%.60s'\n  want: '%.60s'", what, i, got + i, want + i);
}

/* Greedy decode through the library: BOS, then 200 argmax tokens. */
static char *library_greedy(const char *gguf_path, int32_t steps) {
    st_err err = {0};
    model *m = model_load(gguf_path, &err);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    tok *tk = tok_from_gguf(m->gguf, &err);
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = steps + 1;
    model_ctx *c = tk ? model_ctx_init(m, &cp, &err) : NULL;
    char *text = NULL;
    if (c) {
        size_t cap = 1 << 16, len = 0;
        text = calloc(cap, 1);
        float *logits = malloc(sizeof(float) * m->hp.n_vocab);
        tok_stream ts;
        tok_stream_init(&ts);
        int32_t t = tok_bos(tk);
        len += tok_stream_put(tk, &ts, t, text + len, cap - len);
        for (int32_t pos = 0; pos < steps; pos++) {
            if (model_forward_linear(c, &t, 1, pos, logits, &err)) break;
            t = sample_argmax(logits, m->hp.n_vocab);
            len += tok_stream_put(tk, &ts, t, text + len, cap - len);
        }
        free(logits);
    } else {
        fprintf(stderr, "%s\n", err.msg);
    }
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
    return text;
}

int main(void) {
    const char *p;
    char gguf[4096], bin[4096], tokbin[4096], expected_path[4096];
    if (!(p = t_shared("models/stories260K_greedy200.expected.txt"))) {
        T_MISSING("../shared/models is absent: golden tests skipped");
        return t_done();
    }
    snprintf(expected_path, sizeof expected_path, "%s", p);
    snprintf(gguf, sizeof gguf, "%s", t_shared("models/stories260K.gguf"));
    snprintf(bin, sizeof bin, "%s", t_shared("models/stories260K.bin"));
    snprintf(tokbin, sizeof tokbin, "%s", t_shared("models/tok512.bin"));
    size_t n;
    char *want = read_all(expected_path, &n);

    char *lib = library_greedy(gguf, 200);
    check_text("library greedy on stories260K.gguf", lib, want);
    free(lib);

    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s/multidecode generate -m '%s' --temp 0 -n 200 -p '' -q", build, gguf);
    char *out = run_capture(cmd);
    check_text("generate on stories260K.gguf", out, want);
    free(out);

    snprintf(cmd, sizeof cmd, "%s/multidecode generate -m '%s' --temp 0 -n 200 -p '' -q -t 1 "
             "--backend ref", build, gguf);
    out = run_capture(cmd);
    check_text("generate --backend ref on stories260K.gguf", out, want);
    free(out);

    char conv[] = "/tmp/md_golden_XXXXXX";
    int fd = mkstemp(conv);
    if (fd >= 0) close(fd);
    snprintf(cmd, sizeof cmd, "%s/multidecode convert-llama2c '%s' '%s' '%s' 2>/dev/null && "
             "%s/multidecode generate -m '%s' --temp 0 -n 200 -p '' -q", build, bin, tokbin, conv,
             build, conv);
    out = run_capture(cmd);
    check_text("generate on the GGUF converted from stories260K.bin + tok512.bin", out, want);
    free(out);
    unlink(conv);
    free(want);
    return t_done();
}
