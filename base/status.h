/* status.h - the project's one list of status codes, with their messages.
 *
 * It sits at the bottom of the layering (kernels/) so that every layer can report
 * through it. A status code says what kind of failure happened; an st_err carries the
 * code plus one sentence a person can act on ("tensor 'blk.0.attn_q.weight' has type
 * Q2_K, which is not supported"). Functions that can fail take an `st_err *err` (which
 * may be NULL) and return a status code or NULL; on failure they leave their inputs
 * unchanged unless their contract says otherwise. Programmer errors use ASSERT. */
#ifndef MD_STATUS_H
#define MD_STATUS_H

#include <stdarg.h>

typedef enum {
    ST_OK = 0,
    ST_ERR_IO,          /* a file could not be opened, read, written or mapped */
    ST_ERR_NOMEM,       /* an allocation failed */
    ST_ERR_FORMAT,      /* a file is corrupt, truncated or not of the expected format */
    ST_ERR_UNSUPPORTED, /* valid input that this build cannot handle (type, architecture) */
    ST_ERR_ARG,         /* bad user input (option, prompt, value out of range) */
    ST_ERR_NOT_FOUND,   /* a named key, tensor, file or token does not exist */
    ST_ERR_TYPE,        /* a metadata value has the wrong type */
    ST_ERR_CONTEXT,     /* the sequence would exceed the context / KV cache size */
    ST_NO_KV_SLOT,      /* the KV cache has no free slot: prune or compact, then retry */
    ST_ERR_BACKEND,     /* a compute backend failed (CUDA call, thread creation) */
    ST_CANCELLED,       /* the caller stopped a long computation (the TUI's x) */
    ST_N_CODES
} st_code;

typedef struct st_err {
    st_code code;
    char msg[512];      /* NUL-terminated; empty when code == ST_OK */
} st_err;

/* The fixed one-line description of a code ("corrupt or truncated file"). */
const char *st_str(st_code code);

/* Records code and a printf-style message in err (when err is not NULL) and returns
 * code, so callers can write `return st_set(err, ST_ERR_FORMAT, "...", ...)`. */
st_code st_set(st_err *err, st_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to err->msg (for adding context as an error travels up). */
void st_prefix(st_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Resets err to ST_OK with an empty message. */
void st_clear(st_err *err);

/* Programmer errors only: prints file:line and the expression, then aborts. */
#define ASSERT(x)                                                                  \
    do {                                                                           \
        if (!(x)) st_assert_fail(#x, __FILE__, __LINE__);                          \
    } while (0)
_Noreturn void st_assert_fail(const char *expr, const char *file, int line);

#endif
