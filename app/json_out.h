/* json_out.h - the --json output of the commands: a jansson tree, built with the helpers
 * below, written to stdout in one layout (arrays of objects or arrays one element a line,
 * everything else inline). Reals keep the digits the command rounds them to, in their
 * shortest form (no trailing zeros; a point or an exponent always there, so a reader sees
 * a real); strings are written byte for byte with control characters escaped, since a
 * token's text may end inside a character. Not here: session files (engine/session/).
 *
 * Building: every helper returns NULL when out of memory, and jo_set / jo_push keep a
 * NULL container NULL (dropping what they were given), so a failure anywhere in a tree
 * leaves its root NULL and jo_print reports it. */
#ifndef MD_JSON_OUT_H
#define MD_JSON_OUT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

/* s (NULL: "") as a JSON string; the bytes are not checked for UTF-8. */
json_t *jo_str(const char *s);
/* v as printf's "%.<decimals>f" shows it; null when v is not finite. */
json_t *jo_fixed(double v, int decimals);
/* v as printf's "%.<digits>g" shows it; null when v is not finite. */
json_t *jo_sig(double v, int digits);
/* An unsigned 64-bit value (a seed): an integer up to 2^63 - 1, a real above. */
json_t *jo_u64(uint64_t v);
/* The list [t[0], ..., t[n-1]]. */
json_t *jo_ints(const int32_t *t, int32_t n);

/* (*obj)[key] = v / append v to *arr; v's reference is taken. On failure (either NULL)
 * the container is released and set to NULL. */
void jo_set(json_t **obj, const char *key, json_t *v);
void jo_push(json_t **arr, json_t *v);

/* Writes doc and a newline to stdout and releases doc. ST_ERR_NOMEM when doc is NULL
 * (a failed build). */
st_code jo_print(json_t *doc, st_err *err);

#endif
