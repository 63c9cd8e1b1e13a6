/* t.h - the tiny test harness every test file includes (header-only, one per binary).
 *
 * T_CHECK(cond, fmt, ...) counts a pass or prints file:line and a failure message;
 * T_SKIP(fmt, ...) counts a skip; T_MISSING(fmt, ...) is the skip for an absent fixture
 * (a shared file, a fetched model, the built program), a failure where
 * MD_REQUIRE_FIXTURES=1 (CI sets it: there every fixture is fetched, so a missing one is a
 * broken fetch, not a reason to stay green); t_done() prints "N passed, N failed, N
 * skipped" as the last line and returns the exit code. t_shared(rel) finds a fixture
 * under ../shared (or $MD_SHARED) and returns NULL when it is absent. */
#ifndef MD_T_H
#define MD_T_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int t_pass, t_fail, t_skip;

#define T_CHECK(cond, ...)                                                           \
    do {                                                                             \
        if (cond) {                                                                  \
            t_pass++;                                                                \
        } else {                                                                     \
            t_fail++;                                                                \
            fprintf(stderr, "%s:%d: FAIL (%s) ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

#define T_SKIP(...)                                                                  \
    do {                                                                             \
        t_skip++;                                                                    \
        fprintf(stderr, "SKIP: ");                                                   \
        fprintf(stderr, __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                         \
    } while (0)

/* MD_REQUIRE_FIXTURES is set to anything but "" or "0". */
static inline int t_require_fixtures(void) {
    const char *e = getenv("MD_REQUIRE_FIXTURES");
    return e && *e && strcmp(e, "0") != 0;
}

#define T_MISSING(...)                                                               \
    do {                                                                             \
        if (t_require_fixtures()) {                                                  \
            t_fail++;                                                                \
            fprintf(stderr, "%s:%d: FAIL (fixture missing, MD_REQUIRE_FIXTURES) ",   \
                    __FILE__, __LINE__);                                             \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        } else {                                                                     \
            T_SKIP(__VA_ARGS__);                                                     \
        }                                                                            \
    } while (0)

/* Built with AddressSanitizer (make asan): Gemma 3's forests, many minutes there, are
 * left to make test's release build, which runs them (and fails on a missing model). */
#if defined(__SANITIZE_ADDRESS__)
#define T_SANITIZED 1
#else
#define T_SANITIZED 0
#endif

static inline int t_done(void) {
    fflush(stderr);
    printf("%d passed, %d failed, %d skipped\n", t_pass, t_fail, t_skip);
    return t_fail ? 1 : 0;
}

/* Path of a shared fixture ("models/stories260K.gguf"), or NULL when absent. The
 * returned string is static and overwritten by the next call. */
static inline const char *t_shared(const char *rel) {
    static char path[4096];
    const char *root = getenv("MD_SHARED");
    snprintf(path, sizeof path, "%s/%s", root ? root : "../shared", rel);
    return access(path, R_OK) == 0 ? path : NULL;
}

/* The whole file at path in a malloc'd buffer with a NUL after its bytes, their count in
 * *n (n may be NULL); NULL when it cannot be opened or read. */
static inline char *t_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    char *b = len >= 0 && fseek(f, 0, SEEK_SET) == 0 ? (char *)malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
    fclose(f);
    if (b) b[len] = 0;
    if (n) *n = b ? (size_t)len : 0;
    return b;
}

/* max |a - b| / max |b| over n values (0 when b is all zero and a == b). */
static inline double t_nerr(const float *a, const float *b, long n) {
    double md = 0, mb = 0;
    for (long i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || d != d) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return mb > 0 ? md / mb : md;
}

#endif
