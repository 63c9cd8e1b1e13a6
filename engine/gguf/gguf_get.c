/* gguf_get.c - the GGUF reader's accessors: metadata by index or key as numbers, strings
 * and array elements (converted between numeric families only where no value is lost),
 * one entry formatted for display, and tensor lookup. The parser is in gguf_read.c. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_impl.h"

/* A loaded numeric value and which family it came from, so one set of conversion
 * rules serves scalars and array elements of every width. */
typedef enum { NUM_SIGNED, NUM_UNSIGNED, NUM_FLOAT, NUM_BOOL, NUM_NONE } gguf_num_kind;
typedef struct {
    gguf_num_kind kind;
    int64_t i;
    uint64_t u;
    double f;
} gguf_num;

static gguf_num num_load(gguf_type t, const uint8_t *p) {
    gguf_num n = {.kind = NUM_NONE};
    size_t sz = gguf_type_size(t);
    uint64_t raw = sz ? gguf_ld_le(p, sz) : 0;
    switch (t) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        n.kind = NUM_UNSIGNED, n.u = raw;
        break;
    case GGUF_I8: n.kind = NUM_SIGNED, n.i = (int8_t)raw; break;
    case GGUF_I16: n.kind = NUM_SIGNED, n.i = (int16_t)raw; break;
    case GGUF_I32: n.kind = NUM_SIGNED, n.i = (int32_t)raw; break;
    case GGUF_I64: n.kind = NUM_SIGNED, memcpy(&n.i, &raw, 8); break;
    case GGUF_F32: {
        uint32_t r32 = (uint32_t)raw;
        float f;
        memcpy(&f, &r32, 4);
        n.kind = NUM_FLOAT, n.f = f;
        break;
    }
    case GGUF_F64: n.kind = NUM_FLOAT, memcpy(&n.f, &raw, 8); break;
    case GGUF_BOOL: n.kind = NUM_BOOL, n.u = raw; break;
    default: break;
    }
    return n;
}

static st_code num_to_i64(gguf_num n, int64_t *out) {
    if (n.kind == NUM_SIGNED) return *out = n.i, ST_OK;
    if (n.kind == NUM_UNSIGNED && n.u <= (uint64_t)INT64_MAX) return *out = (int64_t)n.u, ST_OK;
    return ST_ERR_TYPE;
}

static st_code num_to_u64(gguf_num n, uint64_t *out) {
    if (n.kind == NUM_UNSIGNED) return *out = n.u, ST_OK;
    if (n.kind == NUM_SIGNED && n.i >= 0) return *out = (uint64_t)n.i, ST_OK;
    return ST_ERR_TYPE;
}

static st_code num_to_f64(gguf_num n, double *out) {
    switch (n.kind) {
    case NUM_FLOAT: *out = n.f; return ST_OK;
    case NUM_SIGNED: *out = (double)n.i; return ST_OK;
    case NUM_UNSIGNED: *out = (double)n.u; return ST_OK;
    default: return ST_ERR_TYPE;
    }
}

/* ---- metadata accessors ---- */

int64_t gguf_n_kv(const gguf_ctx *g) { return g->n_kv; }

static const gguf_name_idx *name_lookup(const gguf_name_idx *idx, int64_t n, const char *name) {
    if (n == 0 || !name) return NULL;
    gguf_name_idx key = {name, 0};
    return bsearch(&key, idx, (size_t)n, sizeof *idx, gguf_name_idx_cmp);
}

int64_t gguf_find_key(const gguf_ctx *g, const char *key) {
    const gguf_name_idx *e = name_lookup(g->kv_by_name, g->n_kv, key);
    return e ? e->i : -1;
}

static const gguf_kv *kv_at(const gguf_ctx *g, int64_t i) {
    ASSERT(i >= 0 && i < g->n_kv);
    return &g->kv[i];
}

const char *gguf_kv_key(const gguf_ctx *g, int64_t i) { return kv_at(g, i)->key; }
gguf_type gguf_kv_type(const gguf_ctx *g, int64_t i) { return kv_at(g, i)->type; }
gguf_type gguf_arr_type(const gguf_ctx *g, int64_t i) { return kv_at(g, i)->arr_type; }
uint64_t gguf_arr_n(const gguf_ctx *g, int64_t i) { return kv_at(g, i)->arr_n; }

/* The numeric value of scalar i (NUM_NONE for strings and arrays). */
static gguf_num kv_num(const gguf_ctx *g, int64_t i) {
    const gguf_kv *kv = kv_at(g, i);
    return gguf_type_size(kv->type) ? num_load(kv->type, kv->val) : (gguf_num){.kind = NUM_NONE};
}

/* The numeric value of element j of array i (NUM_NONE for string arrays). */
static gguf_num arr_num(const gguf_ctx *g, int64_t i, uint64_t j) {
    const gguf_kv *kv = kv_at(g, i);
    ASSERT(kv->type != GGUF_ARRAY || j < kv->arr_n);
    size_t sz = kv->type == GGUF_ARRAY ? gguf_type_size(kv->arr_type) : 0;
    return sz ? num_load(kv->arr_type, kv->val + j * sz) : (gguf_num){.kind = NUM_NONE};
}

st_code gguf_kv_i64(const gguf_ctx *g, int64_t i, int64_t *out) {
    return num_to_i64(kv_num(g, i), out);
}
st_code gguf_kv_u64(const gguf_ctx *g, int64_t i, uint64_t *out) {
    return num_to_u64(kv_num(g, i), out);
}
st_code gguf_kv_f64(const gguf_ctx *g, int64_t i, double *out) {
    return num_to_f64(kv_num(g, i), out);
}

st_code gguf_kv_bool(const gguf_ctx *g, int64_t i, bool *out) {
    gguf_num n = kv_num(g, i);
    if (n.kind != NUM_BOOL) return ST_ERR_TYPE;
    *out = n.u != 0;
    return ST_OK;
}

st_code gguf_kv_str(const gguf_ctx *g, int64_t i, const char **out) {
    const gguf_kv *kv = kv_at(g, i);
    if (kv->type != GGUF_STRING) return ST_ERR_TYPE;
    *out = kv->str;
    return ST_OK;
}

st_code gguf_arr_i64(const gguf_ctx *g, int64_t i, uint64_t j, int64_t *out) {
    return num_to_i64(arr_num(g, i, j), out);
}

st_code gguf_arr_bool(const gguf_ctx *g, int64_t i, uint64_t j, bool *out) {
    gguf_num n = arr_num(g, i, j);
    if (n.kind != NUM_BOOL) return ST_ERR_TYPE;
    *out = n.u != 0;
    return ST_OK;
}

st_code gguf_arr_f64(const gguf_ctx *g, int64_t i, uint64_t j, double *out) {
    return num_to_f64(arr_num(g, i, j), out);
}

st_code gguf_arr_str(const gguf_ctx *g, int64_t i, uint64_t j, const char **s, size_t *len) {
    const gguf_kv *kv = kv_at(g, i);
    if (kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING) return ST_ERR_TYPE;
    ASSERT(j < kv->arr_n);
    size_t off = kv->str_offs[j]; /* validated by the parser */
    *len = (size_t)gguf_ld_le(g->base + off, 8);
    *s = (const char *)g->base + off + 8;
    return ST_OK;
}

/* Shared by the gguf_get_* functions: turns the lookup (i < 0: absent) and the
 * accessor's result rc into a status with a message naming the key. */
static st_code get_result(const gguf_ctx *g, const char *key, int64_t i, st_code rc,
                          const char *want, st_err *err) {
    if (i < 0) return st_set(err, ST_ERR_NOT_FOUND, "metadata key '%s' not found", key);
    if (rc == ST_OK) return ST_OK;
    const gguf_kv *kv = kv_at(g, i);
    return st_set(err, ST_ERR_TYPE, "metadata key '%s' has type %s%s%s, expected %s", kv->key,
                  gguf_type_name(kv->type), kv->type == GGUF_ARRAY ? " of " : "",
                  kv->type == GGUF_ARRAY ? gguf_type_name(kv->arr_type) : "", want);
}

st_code gguf_get_i64(const gguf_ctx *g, const char *key, int64_t *out, st_err *err) {
    int64_t i = gguf_find_key(g, key);
    return get_result(g, key, i, i < 0 ? ST_ERR_NOT_FOUND : gguf_kv_i64(g, i, out),
                      "an integer that fits int64", err);
}

st_code gguf_get_f64(const gguf_ctx *g, const char *key, double *out, st_err *err) {
    int64_t i = gguf_find_key(g, key);
    return get_result(g, key, i, i < 0 ? ST_ERR_NOT_FOUND : gguf_kv_f64(g, i, out), "a number",
                      err);
}

st_code gguf_get_bool(const gguf_ctx *g, const char *key, bool *out, st_err *err) {
    int64_t i = gguf_find_key(g, key);
    return get_result(g, key, i, i < 0 ? ST_ERR_NOT_FOUND : gguf_kv_bool(g, i, out), "bool", err);
}

st_code gguf_get_str(const gguf_ctx *g, const char *key, const char **out, st_err *err) {
    int64_t i = gguf_find_key(g, key);
    return get_result(g, key, i, i < 0 ? ST_ERR_NOT_FOUND : gguf_kv_str(g, i, out), "string", err);
}

/* ---- display ---- */

/* Appends to a fixed buffer, truncating silently: display only. */
typedef struct {
    char *buf;
    size_t cap, len;
} gguf_out;

static void out_add(gguf_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_add(gguf_out *o, const char *fmt, ...) {
    if (o->len + 1 >= o->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n < o->cap - o->len ? (size_t)n : o->cap - o->len - 1;
}

static void out_num(gguf_out *o, gguf_num n) {
    switch (n.kind) {
    case NUM_SIGNED: out_add(o, "%" PRId64, n.i); break;
    case NUM_UNSIGNED: out_add(o, "%" PRIu64, n.u); break;
    case NUM_BOOL: out_add(o, "%s", n.u ? "true" : "false"); break;
    case NUM_FLOAT:
        /* Integral values keep a ".0" so they read as floats; others get %g. */
        if (n.f > -1e15 && n.f < 1e15 && n.f == (double)(int64_t)n.f) out_add(o, "%.1f", n.f);
        else out_add(o, "%.7g", n.f);
        break;
    default: out_add(o, "?"); break;
    }
}

/* A quoted string with control characters escaped, cut to 48 bytes. */
static void out_str(gguf_out *o, const char *s, size_t len) {
    out_add(o, "\"");
    for (size_t k = 0; k < len && k < 48; k++) {
        unsigned char ch = (unsigned char)s[k];
        if (ch == '"' || ch == '\\') out_add(o, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) out_add(o, "\\x%02x", ch);
        else out_add(o, "%c", ch);
    }
    out_add(o, len > 48 ? "\"..." : "\"");
}

void gguf_kv_format(const gguf_ctx *g, int64_t i, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    gguf_out o = {buf, cap, 0};
    buf[0] = '\0';
    const gguf_kv *kv = kv_at(g, i);
    if (kv->type == GGUF_STRING) {
        const uint8_t *p = kv->val;
        out_str(&o, (const char *)p + 8, (size_t)gguf_ld_le(p, 8));
    } else if (kv->type != GGUF_ARRAY) {
        out_num(&o, kv_num(g, i));
    } else if (kv->arr_type == GGUF_STRING) {
        out_add(&o, "[%" PRIu64 " strings", kv->arr_n);
        for (uint64_t j = 0; j < kv->arr_n && j < 3; j++) {
            const char *s;
            size_t len;
            gguf_arr_str(g, i, j, &s, &len);
            out_add(&o, j ? ", " : ": ");
            out_str(&o, s, len < 16 ? len : 16);
        }
        out_add(&o, kv->arr_n > 3 ? ", ...]" : "]");
    } else {
        out_add(&o, "[%" PRIu64 " %s", kv->arr_n, gguf_type_name(kv->arr_type));
        for (uint64_t j = 0; j < kv->arr_n && j < 4; j++) {
            out_add(&o, j ? ", " : ": ");
            out_num(&o, arr_num(g, i, j));
        }
        out_add(&o, kv->arr_n > 4 ? ", ...]" : "]");
    }
}

/* ---- tensors ---- */

int64_t gguf_n_tensors(const gguf_ctx *g) { return g->n_tensors; }

const gguf_tensor *gguf_tensor_at(const gguf_ctx *g, int64_t i) {
    ASSERT(i >= 0 && i < g->n_tensors);
    return &g->tensors[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_ctx *g, const char *name) {
    const gguf_name_idx *e = name_lookup(g->tensor_by_name, g->n_tensors, name);
    return e ? &g->tensors[e->i] : NULL;
}

int64_t gguf_tensor_nelem(const gguf_tensor *t) {
    bool ok;
    return gguf_tensor_nelem_checked(t, &ok); /* checked at parse time for reader tensors */
}
