/* gguf_write.c - the GGUF v3 writer: collects metadata and tensors in memory, then
 * writes the whole file at once, atomically (base/outfile.h).
 *
 * Each metadata value is kept already encoded (the bytes that follow its type field in
 * the file), so setters of every type share one store and the writer emits all entries
 * with one loop. Tensor data is borrowed until gguf_writer_write; tensor offsets are
 * assigned there, each aligned, in the order the tensors were added. The alignment is
 * GGUF_DEFAULT_ALIGNMENT unless the caller sets general.alignment (a u32 power of two),
 * and that key is written only when the caller set it. */
#include "base/array.h"
#include "base/outfile.h"
#include "gguf/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/dtype.h"

typedef struct gguf_wkv {
    char *key;
    gguf_type type;
    uint8_t *val;             /* encoded value, as in the file */
    size_t val_len;
} gguf_wkv;

typedef struct gguf_wtensor {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint64_t nbytes;
    const void *data;         /* borrowed */
} gguf_wtensor;

struct gguf_writer {
    gguf_wkv *kv;
    size_t n_kv, cap_kv;
    gguf_wtensor *t;
    size_t n_t, cap_t;
};

gguf_writer *gguf_writer_init(void) { return calloc(1, sizeof(gguf_writer)); }

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].val);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* Grows an array of elem-sized items to hold one more; false when out of memory. */
static void put_le(uint8_t *p, uint64_t v, size_t n) {
    for (size_t k = 0; k < n; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* Stores an encoded value under key, replacing an earlier value of the same key (which
 * keeps its place). Takes ownership of val, freeing it on failure. */
static st_code set_encoded(gguf_writer *w, const char *key, gguf_type type, uint8_t *val,
                           size_t len) {
    ASSERT(w && key);
    if (!val) return ST_ERR_NOMEM;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type, w->kv[i].val = val, w->kv[i].val_len = len;
            return ST_OK;
        }
    char *k = strdup(key);
    if (!k || !ARR_GROW(w->kv, w->n_kv + 1, w->cap_kv)) {
        free(k);
        free(val);
        return ST_ERR_NOMEM;
    }
    w->kv[w->n_kv++] = (gguf_wkv){k, type, val, len};
    return ST_OK;
}

/* One fixed-size scalar from its raw bits. */
static st_code set_scalar(gguf_writer *w, const char *key, gguf_type type, uint64_t bits,
                          size_t n) {
    uint8_t *v = malloc(n);
    if (v) put_le(v, bits, n);
    return set_encoded(w, key, type, v, n);
}

st_code gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) {
    return set_scalar(w, key, GGUF_U32, v, 4);
}
st_code gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) {
    return set_scalar(w, key, GGUF_I32, (uint32_t)v, 4);
}
st_code gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) {
    return set_scalar(w, key, GGUF_U64, v, 8);
}
st_code gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return set_scalar(w, key, GGUF_F32, bits, 4);
}
st_code gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) {
    return set_scalar(w, key, GGUF_BOOL, v ? 1 : 0, 1);
}

st_code gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    size_t n = strlen(v);
    uint8_t *e = malloc(8 + n);
    if (e) put_le(e, n, 8), memcpy(e + 8, v, n);
    return set_encoded(w, key, GGUF_STRING, e, 8 + n);
}

/* The bits of one host-order value of sz bytes (unaligned source). */
static uint64_t load_host(const uint8_t *src, size_t sz) {
    switch (sz) {
    case 1: return src[0];
    case 2: { uint16_t x; memcpy(&x, src, 2); return x; }
    case 4: { uint32_t x; memcpy(&x, src, 4); return x; }
    default: { uint64_t x; memcpy(&x, src, 8); return x; }
    }
}

st_code gguf_writer_set_val(gguf_writer *w, const char *key, gguf_type type, const void *v) {
    size_t sz = gguf_type_size(type);
    if (!sz || !v || (type == GGUF_BOOL && *(const uint8_t *)v > 1)) return ST_ERR_ARG;
    return set_scalar(w, key, type, load_host(v, sz), sz);
}

st_code gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type,
                            const void *data, uint64_t n) {
    size_t sz = gguf_type_size(elem_type);
    if (!sz || (n && !data)) return ST_ERR_ARG;
    if (n > (SIZE_MAX - 12) / sz) return ST_ERR_NOMEM;
    uint8_t *e = malloc(12 + (size_t)n * sz);
    if (e) {
        put_le(e, elem_type, 4), put_le(e + 4, n, 8);
        /* Elements are copied one by one from host into little-endian order. */
        for (uint64_t j = 0; j < n; j++)
            put_le(e + 12 + j * sz, load_host((const uint8_t *)data + j * sz, sz), sz);
    }
    return set_encoded(w, key, GGUF_ARRAY, e, 12 + (size_t)n * sz);
}

st_code gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n) {
    if (n && !strs) return ST_ERR_ARG;
    size_t total = 12;
    for (uint64_t j = 0; j < n; j++) {
        size_t len = lens ? lens[j] : strlen(strs[j]);
        if (len > SIZE_MAX - total - 8) return ST_ERR_NOMEM;
        total += 8 + len;
    }
    uint8_t *e = malloc(total);
    if (e) {
        size_t pos = 12;
        put_le(e, GGUF_STRING, 4), put_le(e + 4, n, 8);
        for (uint64_t j = 0; j < n; j++) {
            size_t len = lens ? lens[j] : strlen(strs[j]);
            put_le(e + pos, len, 8);
            if (len) memcpy(e + pos + 8, strs[j], len);
            pos += 8 + len;
        }
    }
    return set_encoded(w, key, GGUF_ARRAY, e, total);
}

st_code gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne, const void *data) {
    ASSERT(w && name);
    const dtype_info *di = dtype_get(type);
    if (!di || n_dims < 1 || n_dims > GGUF_MAX_DIMS || !ne) return ST_ERR_ARG;
    gguf_wtensor t = {.type = type, .n_dims = n_dims, .data = data};
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t.ne[d] = d < n_dims ? ne[d] : 1;
    if (t.ne[0] < 0 || t.ne[0] % di->block != 0) return ST_ERR_ARG;
    uint64_t nb = (uint64_t)(t.ne[0] / di->block);
    if (nb && (uint64_t)di->block_bytes > UINT64_MAX / nb) return ST_ERR_ARG;
    nb *= (uint64_t)di->block_bytes;
    for (uint32_t d = 1; d < GGUF_MAX_DIMS; d++) {
        if (t.ne[d] < 0 || (t.ne[d] && nb > UINT64_MAX / (uint64_t)t.ne[d])) return ST_ERR_ARG;
        nb *= (uint64_t)t.ne[d];
    }
    if (nb && !data) return ST_ERR_ARG;
    t.nbytes = nb;
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return ST_ERR_ARG;
    if (!(t.name = strdup(name)) || !ARR_GROW(w->t, w->n_t + 1, w->cap_t)) {
        free(t.name);
        return ST_ERR_NOMEM;
    }
    w->t[w->n_t++] = t;
    return ST_OK;
}

/* ---- output ---- */

/* A FILE with a sticky failure flag, so the emit code reads straight through and the
 * error is checked once per section. */
typedef struct {
    FILE *f;
    uint64_t pos;
    int err;                  /* errno of the first failure, 0 if none */
} gguf_wout;

static void w_bytes(gguf_wout *o, const void *p, size_t n) {
    if (o->err || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) o->err = errno ? errno : EIO;
    o->pos += n;
}

static void w_int(gguf_wout *o, uint64_t v, size_t n) {
    uint8_t b[8];
    put_le(b, v, n);
    w_bytes(o, b, n);
}

static void w_str(gguf_wout *o, const char *s) {
    size_t n = strlen(s);
    w_int(o, n, 8);
    w_bytes(o, s, n);
}

static void w_pad(gguf_wout *o, uint32_t align) {
    static const uint8_t zeros[256];
    while (o->pos % align) {
        size_t n = align - o->pos % align;
        w_bytes(o, zeros, n < sizeof zeros ? n : sizeof zeros);
        if (o->err) return;
    }
}

/* The alignment: the caller's general.alignment when set (a u32 power of two, 8 or more,
 * as the reader requires), else the default. 0 when the caller set an invalid one. */
static uint32_t writer_alignment(const gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") != 0) continue;
        if (w->kv[i].type != GGUF_U32) return 0;
        uint32_t a = (uint32_t)w->kv[i].val[0] | (uint32_t)w->kv[i].val[1] << 8 |
                     (uint32_t)w->kv[i].val[2] << 16 | (uint32_t)w->kv[i].val[3] << 24;
        return (a >= 8 && !(a & (a - 1))) ? a : 0;
    }
    return GGUF_DEFAULT_ALIGNMENT;
}

static void write_all(const gguf_writer *w, gguf_wout *o, uint32_t align) {
    w_bytes(o, "GGUF", 4);
    w_int(o, 3, 4);
    w_int(o, w->n_t, 8);
    w_int(o, w->n_kv, 8);
    for (size_t i = 0; i < w->n_kv; i++) {
        w_str(o, w->kv[i].key);
        w_int(o, (uint32_t)w->kv[i].type, 4);
        w_bytes(o, w->kv[i].val, w->kv[i].val_len);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const gguf_wtensor *t = &w->t[i];
        w_str(o, t->name);
        w_int(o, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) w_int(o, (uint64_t)t->ne[d], 8);
        w_int(o, t->type, 4);
        w_int(o, off, 8);
        off += (t->nbytes + align - 1) / align * align;
    }
    w_pad(o, align);
    for (size_t i = 0; i < w->n_t && !o->err; i++) {
        w_bytes(o, w->t[i].data, w->t[i].nbytes);
        w_pad(o, align);
    }
}

st_code gguf_writer_write(gguf_writer *w, const char *path, st_err *err) {
    ASSERT(w && path);
    uint32_t align = writer_alignment(w);
    if (!align)
        return st_set(err, ST_ERR_ARG,
                      "'%s': general.alignment must be a u32 power of two, 8 or more", path);
    outfile out;
    st_code rc = outfile_begin(&out, path, "GGUF file", err);
    if (rc) return rc;
    gguf_wout o = {.f = out.fp};
    write_all(w, &o, align);
    if (o.err) {
        outfile_abort(&out);
        return st_set(err, ST_ERR_IO, "cannot write GGUF file '%s': %s", path, strerror(o.err));
    }
    return outfile_commit(&out, err);
}
