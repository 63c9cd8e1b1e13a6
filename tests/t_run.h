/* t_run.h - running the program from a test (header-only, for the CLI tests): a command
 * line through sh, its stdout captured and its exit status. */
#ifndef MD_T_RUN_H
#define MD_T_RUN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* Runs cmd (through sh); returns its stdout (malloc'd, NUL-terminated) and its exit
 * status (-1 when killed by a signal). */
static inline char *t_run(const char *cmd, int *status) {
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

static inline char *t_runf(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline char *t_runf(int *status, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return t_run(cmd, status);
}

/* The program to test ($BUILD/multidecode, build/ by default) into bin and the shared
 * stories260K model's path into model; false, with a skip, when either is missing. */
static inline bool t_cli_setup(char *bin, size_t bin_cap, char *model, size_t model_cap) {
    const char *build = getenv("BUILD");
    snprintf(bin, bin_cap, "%s/multidecode", build && *build ? build : "build");
    const char *m = t_shared("models/stories260K.gguf");
    if (!m || access(bin, X_OK) != 0) {
        T_MISSING("needs %s and ../shared/models/stories260K.gguf", bin);
        return false;
    }
    snprintf(model, model_cap, "%s", m);
    return true;
}

#endif
