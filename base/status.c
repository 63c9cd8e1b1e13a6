/* status.c - messages for the status codes and the st_err helpers. */
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const st_names[ST_N_CODES] = {
    [ST_OK] = "ok",
    [ST_ERR_IO] = "input/output error",
    [ST_ERR_NOMEM] = "out of memory",
    [ST_ERR_FORMAT] = "corrupt or malformed file",
    [ST_ERR_UNSUPPORTED] = "not supported",
    [ST_ERR_ARG] = "invalid argument",
    [ST_ERR_NOT_FOUND] = "not found",
    [ST_ERR_TYPE] = "wrong value type",
    [ST_ERR_CONTEXT] = "context is full",
    [ST_NO_KV_SLOT] = "no free KV cache slot",
    [ST_ERR_BACKEND] = "compute backend failure",
    [ST_CANCELLED] = "cancelled",
};

const char *st_str(st_code code) {
    if ((int)code < 0 || code >= ST_N_CODES) return "unknown status";
    return st_names[code];
}

st_code st_set(st_err *err, st_code code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void st_prefix(st_err *err, const char *fmt, ...) {
    if (!err) return;
    char pre[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(pre);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, pre, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3, m = strnlen(old, sizeof old);
    if (m > room) m = room;
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
}

void st_clear(st_err *err) {
    if (!err) return;
    err->code = ST_OK;
    err->msg[0] = '\0';
}

_Noreturn void st_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}
