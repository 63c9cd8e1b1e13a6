/* fuzz.h - what the fuzz harnesses share (header-only, one harness per binary).
 *
 * Each tests/fuzz/fuzz_NAME.c defines LLVMFuzzerTestOneInput and is linked two ways: with
 * libFuzzer under clang (make fuzz), and with tests/fuzz/replay.c under the normal
 * compiler (make test), which feeds it the regression inputs in tests/fuzz/regress/NAME/.
 * A harness must leave no state behind between inputs except what it builds once on its
 * first call (a tokenizer), since libFuzzer runs millions of inputs in one process, and
 * must cap input sizes where the code under test legitimately allocates in proportion. */
#ifndef MD_FUZZ_H
#define MD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts with a message: a broken invariant is a finding, like a crash. */
#define FUZZ_ASSERT(cond)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

/* Path of a shared fixture ("models/tokenizer.gguf") under $MD_SHARED or ../shared, or
 * NULL when absent; the string is static, overwritten by the next call. */
static inline const char *fuzz_shared(const char *rel) {
    static char path[4096];
    const char *root = getenv("MD_SHARED");
    snprintf(path, sizeof path, "%s/%s", root ? root : "../shared", rel);
    return access(path, R_OK) == 0 ? path : NULL;
}

/* A NUL-terminated copy of the input (caller frees); NULL when out of memory. */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) return NULL;
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
