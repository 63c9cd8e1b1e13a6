/* gguf_read.c - the GGUF v2/v3 reader: one bounds-checked parser over a byte image
 * (a read-only mapping of a file, or a borrowed buffer); the accessors are in gguf_get.c.
 *
 * The parser trusts nothing in the image. Every count is capped by the bytes that remain
 * before anything is allocated for it, every length and offset is compared with what
 * remains using arithmetic that cannot overflow, and every failure says which field of
 * which entry is wrong. Values are read with byte loads because the image gives no
 * alignment guarantee. What the parser keeps per entry is a pointer into the image (plus
 * an owned NUL-terminated copy of keys, names and scalar strings, and one offset per
 * string-array element), so memory use stays a small multiple of the file size. */
#include "gguf/gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/dtype.h"
#include "base/infile.h"

/* Smallest encodings, used to cap counts by the bytes left: a metadata entry is a key
 * (u64 length, possibly empty), a u32 type and at least a one-byte value; a tensor info
 * is a name (u64 length), u32 n_dims, at least one u64 ne, u32 type and u64 offset. */
#define GGUF_KV_MIN_BYTES 13u
#define GGUF_TENSOR_MIN_BYTES 32u
#define GGUF_STR_MIN_BYTES 8u


/* Bytes of one value of a fixed-size type; 0 for strings, arrays and unknown ids. */
size_t gguf_type_size(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(gguf_type t) {
    static const char *const names[GGUF_N_TYPES] = {
        [GGUF_U8] = "u8",   [GGUF_I8] = "i8",   [GGUF_U16] = "u16",     [GGUF_I16] = "i16",
        [GGUF_U32] = "u32", [GGUF_I32] = "i32", [GGUF_F32] = "f32",     [GGUF_BOOL] = "bool",
        [GGUF_STRING] = "string", [GGUF_ARRAY] = "array", [GGUF_U64] = "u64",
        [GGUF_I64] = "i64", [GGUF_F64] = "f64",
    };
    return ((unsigned)t < GGUF_N_TYPES) ? names[t] : "unknown";
}

/* ---- little-endian loads (no alignment assumed) ---- */

uint64_t gguf_ld_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | p[k];
    return v;
}


/* ---- the parser's cursor ---- */

typedef struct {
    const uint8_t *p;
    size_t size, pos;
    st_err *err;
    char where[160];          /* "metadata key 7 ('general.name')": prefixes messages */
} gguf_cur;

/* Copies at most 60 bytes of s into a message-safe form (non-printables become '?'). */
static void gguf_safe_name(char *dst, size_t cap, const char *s) {
    size_t k = 0;
    for (; s[k] && k + 4 < cap && k < 60; k++)
        dst[k] = (s[k] >= 0x20 && s[k] < 0x7f) ? s[k] : '?';
    if (s[k] && k + 4 <= cap) memcpy(dst + k, "...", 3), k += 3;
    dst[k] = '\0';
}

static void cur_where(gguf_cur *c, const char *what, int64_t i, const char *name) {
    if (!name) {
        snprintf(c->where, sizeof c->where, "%s %" PRId64, what, i);
        return;
    }
    char safe[72];
    gguf_safe_name(safe, sizeof safe, name);
    snprintf(c->where, sizeof c->where, "%s %" PRId64 " ('%s')", what, i, safe);
}

static size_t cur_left(const gguf_cur *c) { return c->size - c->pos; }

static bool cur_fail(gguf_cur *c, st_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool cur_fail(gguf_cur *c, st_code code, const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    st_set(c->err, code, "%s: %s", c->where, msg);
    return false;
}

/* Reads an n-byte little-endian integer; a short image is a truncation error. */
static bool cur_int(gguf_cur *c, size_t n, const char *what, uint64_t *out) {
    *out = 0; /* defined even on failure, which keeps -Wmaybe-uninitialized quiet */
    if (cur_left(c) < n)
        return cur_fail(c, ST_ERR_FORMAT,
                        "%s needs %zu bytes at offset %zu but only %zu remain (truncated file)",
                        what, n, c->pos, cur_left(c));
    *out = gguf_ld_le(c->p + c->pos, n);
    c->pos += n;
    return true;
}

static bool cur_u32(gguf_cur *c, const char *what, uint32_t *out) {
    uint64_t v;
    if (!cur_int(c, 4, what, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

/* A GGUF string: u64 length, then that many bytes (not NUL-terminated). */
static bool cur_str(gguf_cur *c, const char *what, const uint8_t **s, size_t *len) {
    uint64_t n;
    if (!cur_int(c, 8, what, &n)) return false;
    if (n > cur_left(c))
        return cur_fail(c, ST_ERR_FORMAT, "%s length %" PRIu64 " exceeds the remaining %zu bytes",
                        what, n, cur_left(c));
    *s = c->p + c->pos;
    *len = (size_t)n;
    c->pos += (size_t)n;
    return true;
}

/* An owned NUL-terminated copy (cut at an embedded NUL, which strlen sees anyway). */
static char *gguf_strdup_n(const uint8_t *s, size_t len) {
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

static bool cur_str_copy(gguf_cur *c, const char *what, char **out) {
    const uint8_t *s;
    size_t len;
    if (!cur_str(c, what, &s, &len)) return false;
    if (!(*out = gguf_strdup_n(s, len)))
        return cur_fail(c, ST_ERR_NOMEM, "cannot copy a %zu-byte %s", len, what);
    return true;
}

/* ---- metadata ---- */

/* Reads the value of one fixed-size scalar in place; bools must be 0 or 1 so that a
 * reader never sees a third truth value. */
static bool parse_fixed(gguf_cur *c, gguf_type t, const char *what, const uint8_t **val) {
    size_t sz = gguf_type_size(t);
    if (cur_left(c) < sz)
        return cur_fail(c, ST_ERR_FORMAT,
                        "%s %s needs %zu bytes at offset %zu but only %zu remain (truncated file)",
                        gguf_type_name(t), what, sz, c->pos, cur_left(c));
    if (t == GGUF_BOOL && c->p[c->pos] > 1)
        return cur_fail(c, ST_ERR_FORMAT, "bool %s at offset %zu is %u (must be 0 or 1)", what,
                        c->pos, c->p[c->pos]);
    *val = c->p + c->pos;
    c->pos += sz;
    return true;
}

static bool parse_array(gguf_cur *c, gguf_kv *kv) {
    uint32_t et;
    uint64_t n;
    if (!cur_u32(c, "array element type", &et)) return false;
    if (et == GGUF_ARRAY)
        return cur_fail(c, ST_ERR_UNSUPPORTED, "nested arrays are not supported");
    if (et >= GGUF_N_TYPES)
        return cur_fail(c, ST_ERR_FORMAT, "unknown array element type %" PRIu32, et);
    if (!cur_int(c, 8, "array length", &n)) return false;
    kv->arr_type = (gguf_type)et;
    kv->val = c->p + c->pos;
    size_t sz = gguf_type_size(et);
    if (sz) {
        if (n > cur_left(c) / sz)
            return cur_fail(c, ST_ERR_FORMAT,
                            "array of %" PRIu64 " %s needs more than the remaining %zu bytes", n,
                            gguf_type_name(et), cur_left(c));
        if (et == GGUF_BOOL)
            for (uint64_t j = 0; j < n; j++)
                if (c->p[c->pos + j] > 1)
                    return cur_fail(c, ST_ERR_FORMAT,
                                    "bool element %" PRIu64 " is %u (must be 0 or 1)", j,
                                    c->p[c->pos + j]);
        c->pos += (size_t)n * sz;
        kv->arr_n = n;
        return true;
    }
    /* Strings: each takes at least its 8-byte length, so the table is bounded by the file. */
    if (n > cur_left(c) / GGUF_STR_MIN_BYTES)
        return cur_fail(c, ST_ERR_FORMAT,
                        "array of %" PRIu64 " strings needs more than the remaining %zu bytes", n,
                        cur_left(c));
    if (n && !(kv->str_offs = malloc((size_t)n * sizeof *kv->str_offs)))
        return cur_fail(c, ST_ERR_NOMEM, "cannot allocate %" PRIu64 " string offsets", n);
    for (uint64_t j = 0; j < n; j++) {
        const uint8_t *s;
        size_t len;
        char what[48];
        snprintf(what, sizeof what, "string element %" PRIu64, j);
        kv->str_offs[j] = c->pos;
        if (!cur_str(c, what, &s, &len)) return false;
    }
    kv->arr_n = n;
    return true;
}

static bool parse_kv(gguf_cur *c, int64_t i, gguf_kv *kv) {
    uint32_t t;
    cur_where(c, "metadata key", i, NULL);
    if (!cur_str_copy(c, "key", &kv->key)) return false;
    cur_where(c, "metadata key", i, kv->key);
    if (!cur_u32(c, "value type", &t)) return false;
    if (t >= GGUF_N_TYPES) return cur_fail(c, ST_ERR_FORMAT, "unknown value type %" PRIu32, t);
    kv->type = (gguf_type)t;
    kv->arr_type = GGUF_N_TYPES;
    if (t == GGUF_STRING) {
        kv->val = c->p + c->pos;
        return cur_str_copy(c, "string value", &kv->str);
    }
    if (t == GGUF_ARRAY) return parse_array(c, kv);
    return parse_fixed(c, kv->type, "value", &kv->val);
}

/* ---- tensor infos ---- */

int64_t gguf_tensor_nelem_checked(const gguf_tensor *t, bool *ok) {
    int64_t n = 1;
    *ok = true;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] != 0 && n > INT64_MAX / t->ne[d]) *ok = false;
        else n *= t->ne[d];
    }
    return n;
}

static bool parse_tensor(gguf_cur *c, int64_t i, gguf_tensor *t, uint32_t alignment) {
    char *name = NULL;
    cur_where(c, "tensor", i, NULL);
    if (!cur_str_copy(c, "name", &name)) return false;
    t->name = name;
    cur_where(c, "tensor", i, name);
    if (!cur_u32(c, "n_dims", &t->n_dims)) return false;
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return cur_fail(c, ST_ERR_FORMAT, "n_dims is %" PRIu32 " (must be 1..%d)", t->n_dims,
                        GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (!cur_int(c, 8, "dimension", &ne)) return false;
        if (ne > (uint64_t)INT64_MAX)
            return cur_fail(c, ST_ERR_FORMAT, "ne[%" PRIu32 "] = %" PRIu64 " is negative as int64",
                            d, ne);
        t->ne[d] = (int64_t)ne;
    }
    bool ok;
    gguf_tensor_nelem_checked(t, &ok);
    if (!ok)
        return cur_fail(c, ST_ERR_FORMAT,
                        "shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                        "] has more than 2^63 elements",
                        t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    if (!cur_u32(c, "type", &t->type)) return false;
    const dtype_info *di = dtype_get(t->type);
    if (!di)
        return cur_fail(c, ST_ERR_UNSUPPORTED, "type id %" PRIu32 " is not a known tensor type",
                        t->type);
    if (t->ne[0] % di->block != 0)
        return cur_fail(c, ST_ERR_FORMAT,
                        "ne[0] = %" PRId64 " is not a multiple of the %s block (%d)", t->ne[0],
                        di->name, (int)di->block);
    /* nbytes = (ne0 / block) * block_bytes * ne1 * ne2 * ne3, each step checked. */
    uint64_t nb = (uint64_t)(t->ne[0] / di->block), bb = (uint64_t)di->block_bytes;
    ok = nb == 0 || bb <= UINT64_MAX / nb;
    nb *= ok ? bb : 0;
    for (uint32_t d = 1; ok && d < GGUF_MAX_DIMS; d++) {
        uint64_t ne = (uint64_t)t->ne[d];
        ok = ne == 0 || nb <= UINT64_MAX / ne;
        if (ok) nb *= ne;
    }
    if (!ok) return cur_fail(c, ST_ERR_FORMAT, "byte size of the %s data overflows", di->name);
    t->nbytes = nb;
    if (!cur_int(c, 8, "offset", &t->offset)) return false;
    if (t->offset % alignment != 0)
        return cur_fail(c, ST_ERR_FORMAT,
                        "offset %" PRIu64 " is not a multiple of the alignment %" PRIu32, t->offset,
                        alignment);
    return true;
}

/* ---- whole-image checks ---- */

int gguf_name_idx_cmp(const void *a, const void *b) {
    return strcmp(((const gguf_name_idx *)a)->name, ((const gguf_name_idx *)b)->name);
}

/* Sorts names and reports the first duplicate ("metadata key 'x' appears at 3 and 9"). */
static bool sort_names(gguf_cur *c, gguf_name_idx *idx, int64_t n, const char *what) {
    if (n > 1) qsort(idx, (size_t)n, sizeof *idx, gguf_name_idx_cmp);
    for (int64_t k = 1; k < n; k++)
        if (strcmp(idx[k - 1].name, idx[k].name) == 0) {
            char safe[72];
            int64_t a = idx[k - 1].i, b = idx[k].i;
            gguf_safe_name(safe, sizeof safe, idx[k].name);
            snprintf(c->where, sizeof c->where, "%s", what);
            return cur_fail(c, ST_ERR_FORMAT,
                            "duplicate name '%s' (entries %" PRId64 " and %" PRId64 ")", safe,
                            a < b ? a : b, a < b ? b : a);
        }
    return true;
}

static int tensor_ptr_cmp(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Every tensor inside the file, and no two sharing a byte (checked after sorting). */
static bool check_tensor_data(gguf_cur *c, gguf_ctx *g) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t room = g->data_offset <= g->size ? g->size - g->data_offset : 0;
        if (g->data_offset > g->size || t->offset > room || t->nbytes > room - t->offset) {
            cur_where(c, "tensor", i, t->name);
            return cur_fail(c, ST_ERR_FORMAT,
                            "data [offset %" PRIu64 ", %" PRIu64
                            " bytes] runs past the end of the file "
                            "(size %zu, data section at %" PRIu64 ")",
                            t->offset, t->nbytes, g->size, g->data_offset);
        }
        t->data = g->base + g->data_offset + t->offset;
    }
    if (g->n_tensors < 2) return true;
    gguf_tensor **by_off = malloc((size_t)g->n_tensors * sizeof *by_off);
    if (!by_off) return cur_fail(c, ST_ERR_NOMEM, "cannot sort %" PRId64 " tensors", g->n_tensors);
    for (int64_t i = 0; i < g->n_tensors; i++) by_off[i] = &g->tensors[i];
    qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, tensor_ptr_cmp);
    bool ok = true;
    for (int64_t k = 1; k < g->n_tensors && ok; k++) {
        const gguf_tensor *a = by_off[k - 1], *b = by_off[k];
        if (a->offset + a->nbytes > b->offset) {
            char sa[72], sb[72];
            gguf_safe_name(sa, sizeof sa, a->name);
            gguf_safe_name(sb, sizeof sb, b->name);
            snprintf(c->where, sizeof c->where, "tensor data");
            ok = cur_fail(c, ST_ERR_FORMAT,
                          "'%s' [offset %" PRIu64 ", %" PRIu64
                          " bytes] overlaps '%s' at offset %" PRIu64,
                          sa, a->offset, a->nbytes, sb, b->offset);
        }
    }
    free(by_off);
    return ok;
}

/* general.alignment: an optional u32, a power of two and a multiple of 8 (as the GGUF
 * spec requires), since the kernels read tensor data through typed pointers: an odd
 * alignment would put floats at odd addresses. */
static bool find_alignment(gguf_cur *c, gguf_ctx *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < g->n_kv; i++) {
        const gguf_kv *kv = &g->kv[i];
        if (strcmp(kv->key, "general.alignment") != 0) continue;
        cur_where(c, "metadata key", i, kv->key);
        if (kv->type != GGUF_U32)
            return cur_fail(c, ST_ERR_FORMAT, "has type %s (must be u32)",
                            gguf_type_name(kv->type));
        uint32_t a = (uint32_t)gguf_ld_le(kv->val, 4);
        if (a == 0 || (a & (a - 1)) != 0 || a % 8 != 0)
            return cur_fail(c, ST_ERR_FORMAT,
                            "alignment %" PRIu32 " is not a power of two and a multiple of 8 "
                            "(GGUF requires both; the usual value is 32)", a);
        g->alignment = a;
    }
    return true;
}

/* A count of entries that take at least min bytes each must fit in the left bytes. */
static bool check_count(gguf_cur *c, uint64_t n, size_t left, size_t min, const char *what) {
    if (n <= left / min) return true;
    return cur_fail(c, ST_ERR_FORMAT, "%s count %" PRIu64 " cannot fit in the remaining %zu bytes",
                    what, n, left);
}

static bool parse_header(gguf_cur *c, gguf_ctx *g, uint64_t *n_tensors, uint64_t *n_kv) {
    snprintf(c->where, sizeof c->where, "header");
    if (c->size < 4 || memcmp(c->p, "GGUF", 4) != 0)
        return cur_fail(c, ST_ERR_FORMAT, "not a GGUF file (%s)",
                        c->size < 4 ? "shorter than the 4-byte magic"
                                    : "the first 4 bytes are not \"GGUF\"");
    c->pos = 4;
    if (!cur_u32(c, "version", &g->version)) return false;
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version,
                 sw = (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
        return cur_fail(c, ST_ERR_UNSUPPORTED,
                        "GGUF version %" PRIu32 " is not supported (only 2 and 3)%s", v,
                        (sw == 2 || sw == 3) ? "; this looks like a big-endian file" : "");
    }
    if (!cur_int(c, 8, "tensor count", n_tensors) || !cur_int(c, 8, "metadata count", n_kv))
        return false;
    /* Cap both counts by the bytes left before anything is allocated for them; when each
     * fits alone but not both, neither is named as the culprit. */
    size_t left = cur_left(c);
    if (!check_count(c, *n_kv, left, GGUF_KV_MIN_BYTES, "metadata") ||
        !check_count(c, *n_tensors, left, GGUF_TENSOR_MIN_BYTES, "tensor"))
        return false;
    if (*n_kv * GGUF_KV_MIN_BYTES > left - *n_tensors * GGUF_TENSOR_MIN_BYTES)
        return cur_fail(c, ST_ERR_FORMAT,
                        "metadata count %" PRIu64 " and tensor count %" PRIu64 " cannot both fit "
                        "in the remaining %zu bytes (an entry takes at least %u and %u bytes)",
                        *n_kv, *n_tensors, left, GGUF_KV_MIN_BYTES, GGUF_TENSOR_MIN_BYTES);
    return true;
}

static bool gguf_parse(gguf_ctx *g, st_err *err) {
    gguf_cur c = {.p = g->base, .size = g->size, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (!parse_header(&c, g, &n_tensors, &n_kv)) return false;
    if (n_kv && (!(g->kv = calloc((size_t)n_kv, sizeof *g->kv)) ||
                 !(g->kv_by_name = malloc((size_t)n_kv * sizeof *g->kv_by_name))))
        return cur_fail(&c, ST_ERR_NOMEM, "cannot allocate %" PRIu64 " metadata entries", n_kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1; /* so that gguf_close frees the partial entry */
        if (!parse_kv(&c, (int64_t)i, &g->kv[i])) return false;
        g->kv_by_name[i] = (gguf_name_idx){g->kv[i].key, (int64_t)i};
    }
    if (!sort_names(&c, g->kv_by_name, g->n_kv, "metadata")) return false;
    if (!find_alignment(&c, g)) return false;

    snprintf(c.where, sizeof c.where, "tensor infos");
    if (!check_count(&c, n_tensors, cur_left(&c), GGUF_TENSOR_MIN_BYTES, "tensor")) return false;
    if (n_tensors && (!(g->tensors = calloc((size_t)n_tensors, sizeof *g->tensors)) ||
                      !(g->tensor_by_name = malloc((size_t)n_tensors * sizeof *g->tensor_by_name))))
        return cur_fail(&c, ST_ERR_NOMEM, "cannot allocate %" PRIu64 " tensor infos", n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if (!parse_tensor(&c, (int64_t)i, &g->tensors[i], g->alignment)) return false;
        g->tensor_by_name[i] = (gguf_name_idx){g->tensors[i].name, (int64_t)i};
    }
    if (!sort_names(&c, g->tensor_by_name, g->n_tensors, "tensor infos")) return false;
    /* The data section starts at the next multiple of the alignment (a power of two at
     * most 2^31, and pos <= size, so this cannot overflow). */
    g->data_offset = ((uint64_t)c.pos + g->alignment - 1) & ~(uint64_t)(g->alignment - 1);
    return check_tensor_data(&c, g);
}

/* ---- open / close ---- */

gguf_ctx *gguf_open_mem(const void *data, size_t size, st_err *err) {
    gguf_ctx *g = calloc(1, sizeof *g);
    if (!g) {
        st_set(err, ST_ERR_NOMEM, "cannot allocate a GGUF context");
        return NULL;
    }
    g->base = data;
    g->size = data ? size : 0;
    if ((uintptr_t)data % 8 != 0) { /* tensor offsets are multiples of 8 from here */
        st_set(err, ST_ERR_ARG,
               "GGUF image at %p is not 8-byte aligned, so its tensor data would not be "
               "(copy it into a malloc'd buffer)", data);
        gguf_close(g);
        return NULL;
    }
    if (!gguf_parse(g, err)) {
        gguf_close(g);
        return NULL;
    }
    st_clear(err);
    return g;
}

gguf_ctx *gguf_open(const char *path, st_err *err) {
    uint64_t size = 0;
    void *map = MAP_FAILED;
    int fd = infile_open(path, "model", &size, err); /* a FIFO or device is refused */
    if (fd < 0)
        return NULL;
    if (size < 4) /* mmap cannot map an empty file; nothing this small is GGUF */
        st_set(err, ST_ERR_FORMAT, "'%s': not a GGUF file (%llu bytes)", path,
               (unsigned long long)size);
    else if (size > SIZE_MAX)
        st_set(err, ST_ERR_IO, "'%s' is too large to map", path);
    else if ((map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        st_set(err, ST_ERR_IO, "cannot map '%s' (%llu bytes): %s", path,
               (unsigned long long)size, strerror(errno));
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED) return NULL;
    gguf_ctx *g = gguf_open_mem(map, (size_t)size, err);
    if (!g) {
        munmap(map, (size_t)size);
        if (err) st_prefix(err, "'%s'", path);
        return NULL;
    }
    g->map = map;
    return g;
}

void gguf_close(gguf_ctx *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str);
        free(g->kv[i].str_offs);
    }
    for (int64_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->kv);
    free(g->kv_by_name);
    free(g->tensors);
    free(g->tensor_by_name);
    if (g->map) munmap(g->map, g->size);
    free(g);
}

uint32_t gguf_version(const gguf_ctx *g) { return g->version; }
uint32_t gguf_alignment(const gguf_ctx *g) { return g->alignment; }
size_t gguf_file_size(const gguf_ctx *g) { return g->size; }
bool gguf_mapped(const gguf_ctx *g) { return g->map != NULL; }
uint64_t gguf_data_offset(const gguf_ctx *g) { return g->data_offset; }
