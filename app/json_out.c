/* json_out.c - the commands' JSON output (see json_out.h). */
#include "json_out.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt.h"

json_t *jo_str(const char *s) { return json_string_nocheck(s ? s : ""); }

/* the value printf shows, read back, so that the output keeps exactly those digits */
static json_t *shown(double v, const char *fmt, int prec) {
    if (!isfinite(v)) return json_null();
    char buf[64];
    snprintf(buf, sizeof buf, fmt, prec, v);
    return json_real(strtod(buf, NULL));
}

json_t *jo_fixed(double v, int decimals) { return shown(v, "%.*f", decimals); }
json_t *jo_sig(double v, int digits) { return shown(v, "%.*g", digits); }

json_t *jo_u64(uint64_t v) {
    return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

json_t *jo_ints(const int32_t *t, int32_t n) {
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++) jo_push(&a, json_integer(t[i]));
    return a;
}

void jo_set(json_t **obj, const char *key, json_t *v) {
    if (*obj && v && !json_object_set_new_nocheck(*obj, key, v)) return;
    if (!*obj) json_decref(v); /* set_new releases v itself when it fails */
    json_decref(*obj);
    *obj = NULL;
}

void jo_push(json_t **arr, json_t *v) {
    if (*arr && v && !json_array_append_new(*arr, v)) return;
    if (!*arr) json_decref(v); /* append_new releases v itself when it fails */
    json_decref(*arr);
    *arr = NULL;
}

/* The shortest "%.Ng" that reads back as v: the digits the value was rounded to, with
 * ".0" where that form has no point or exponent, so that a reader still sees a real. */
static void put_real(double v) {
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, stdout);
    if (!strpbrk(buf, ".e")) fputs(".0", stdout);
}

static bool is_container(const json_t *v) { return json_is_object(v) || json_is_array(v); }

static void put(const json_t *v, int depth) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *x;
        bool first = true;
        putchar('{');
        json_object_foreach((json_t *)v, key, x) {
            fputs(first ? "" : ", ", stdout);
            prompt_json_str(stdout, key);
            fputs(": ", stdout);
            put(x, depth);
            first = false;
        }
        putchar('}');
        break;
    }
    case JSON_ARRAY: {
        /* containers one a line, indented by their depth in arrays */
        bool lines = false;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) lines |= is_container(x);
        putchar('[');
        json_array_foreach(v, i, x) {
            if (lines) printf("%s\n%*s", i ? "," : "", depth + 1, "");
            else fputs(i ? ", " : "", stdout);
            put(x, depth + 1);
        }
        if (lines) printf("\n%*s", depth, "");
        putchar(']');
        break;
    }
    case JSON_STRING: prompt_json_str(stdout, json_string_value(v)); break;
    case JSON_INTEGER: printf("%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: put_real(json_real_value(v)); break;
    case JSON_TRUE: fputs("true", stdout); break;
    case JSON_FALSE: fputs("false", stdout); break;
    case JSON_NULL: fputs("null", stdout); break;
    }
}

st_code jo_print(json_t *doc, st_err *err) {
    if (!doc) return st_set(err, ST_ERR_NOMEM, "out of memory (building the JSON output)");
    put(doc, 0);
    putchar('\n');
    json_decref(doc);
    return ST_OK;
}
