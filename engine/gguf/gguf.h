/* gguf.h - GGUF v2/v3 reader (memory-mapped, fully bounds-checked) and writer.
 *
 * The reader maps the file, validates every count, length, type and offset before use,
 * and exposes metadata and tensor infos. A truncated or hostile file yields NULL with
 * ST_ERR_FORMAT (or ST_ERR_UNSUPPORTED for a version or type this code does not know)
 * and a message naming the bad field; it never reads out of bounds, overflows, or
 * allocates more than a small multiple of the file's size.
 *
 * Strings in a GGUF file are not NUL-terminated. The reader gives keys, tensor names and
 * scalar string values as NUL-terminated copies it owns; elements of string arrays are
 * given as (pointer into the mapping, length) pairs. Everything returned by the reader is
 * borrowed and valid until gguf_close.
 *
 * The writer collects metadata and tensors in memory and writes a v3 file in one go.
 * It is not a streaming writer: tensor data is borrowed until gguf_writer_write. */
#ifndef MD_GGUF_H
#define MD_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Metadata value types, as stored in the file. */
typedef enum {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_N_TYPES
} gguf_type;

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef struct gguf_tensor {
    const char *name;        /* NUL-terminated */
    uint32_t n_dims;         /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dim; ne[0] is the contiguous one; unused = 1 */
    uint32_t type;           /* DT_* id (kernels/dtype.h), checked to be a known type */
    uint64_t offset;         /* from the start of the data section, aligned */
    uint64_t nbytes;         /* checked to lie inside the file, no overlap with others */
    const void *data;        /* into the mapping */
} gguf_tensor;

typedef struct gguf_ctx gguf_ctx;

/* Opens and validates a GGUF file (mmap, read-only). NULL + err on failure. */
gguf_ctx *gguf_open(const char *path, st_err *err);
/* Parses a GGUF image in memory; the buffer is borrowed and must outlive the context.
 * It must be 8-byte aligned (ST_ERR_ARG otherwise): with the alignment of 8 or more that
 * the reader requires, every tensor's data then starts at a multiple of 8, which the
 * kernels' typed loads (floats, fp16 scales) rely on. */
gguf_ctx *gguf_open_mem(const void *data, size_t size, st_err *err);
/* Unmaps and frees; NULL is a no-op. */
void gguf_close(gguf_ctx *g);

uint32_t gguf_version(const gguf_ctx *g);
uint32_t gguf_alignment(const gguf_ctx *g);
size_t gguf_file_size(const gguf_ctx *g);
/* True when gguf_open mapped the file: its bytes can leave memory and come back from it. */
bool gguf_mapped(const gguf_ctx *g);
/* Offset of the data section (where tensor offsets count from). */
uint64_t gguf_data_offset(const gguf_ctx *g);

/* ---- metadata ---- */
int64_t gguf_n_kv(const gguf_ctx *g);
/* Index of a key, or -1. */
int64_t gguf_find_key(const gguf_ctx *g, const char *key);
const char *gguf_kv_key(const gguf_ctx *g, int64_t i);
gguf_type gguf_kv_type(const gguf_ctx *g, int64_t i);
/* For arrays: element type and count (0 / GGUF_N_TYPES for non-arrays). */
gguf_type gguf_arr_type(const gguf_ctx *g, int64_t i);
uint64_t gguf_arr_n(const gguf_ctx *g, int64_t i);

/* Scalar accessors by index. They convert between integer types when the value fits,
 * and from F32/F64 to double. They return ST_OK, or ST_ERR_TYPE (with nothing
 * written) when the value is not of a compatible type or does not fit. */
st_code gguf_kv_i64(const gguf_ctx *g, int64_t i, int64_t *out);
st_code gguf_kv_u64(const gguf_ctx *g, int64_t i, uint64_t *out);
st_code gguf_kv_f64(const gguf_ctx *g, int64_t i, double *out);
st_code gguf_kv_bool(const gguf_ctx *g, int64_t i, bool *out);
/* Scalar string value, NUL-terminated (a string containing NUL bytes is cut there). */
st_code gguf_kv_str(const gguf_ctx *g, int64_t i, const char **out);

/* Array element accessors (index j < gguf_arr_n). Numeric elements are converted as
 * above; string elements are returned as pointer + length, not NUL-terminated. */
st_code gguf_arr_i64(const gguf_ctx *g, int64_t i, uint64_t j, int64_t *out);
st_code gguf_arr_f64(const gguf_ctx *g, int64_t i, uint64_t j, double *out);
/* A GGUF_BOOL element (ST_ERR_TYPE for any other type). */
st_code gguf_arr_bool(const gguf_ctx *g, int64_t i, uint64_t j, bool *out);
st_code gguf_arr_str(const gguf_ctx *g, int64_t i, uint64_t j, const char **s, size_t *len);

/* By-name conveniences with the same conversions: ST_ERR_NOT_FOUND when the key is
 * absent (out untouched), ST_ERR_TYPE when present with an incompatible type; err gets
 * a message naming the key in both cases. */
st_code gguf_get_i64(const gguf_ctx *g, const char *key, int64_t *out, st_err *err);
st_code gguf_get_f64(const gguf_ctx *g, const char *key, double *out, st_err *err);
st_code gguf_get_bool(const gguf_ctx *g, const char *key, bool *out, st_err *err);
st_code gguf_get_str(const gguf_ctx *g, const char *key, const char **out, st_err *err);

/* Writes a one-line human form of value i ("5", "1.0e-05", "\"llama\"", "[32000 strings]"). */
void gguf_kv_format(const gguf_ctx *g, int64_t i, char *buf, size_t cap);
const char *gguf_type_name(gguf_type t);
/* Bytes of one value of a fixed-size type (the reader's and the writer's); 0 for strings,
 * arrays and unknown ids. */
size_t gguf_type_size(uint32_t t);

/* ---- tensors ---- */
int64_t gguf_n_tensors(const gguf_ctx *g);
const gguf_tensor *gguf_tensor_at(const gguf_ctx *g, int64_t i);
/* By name, or NULL. */
const gguf_tensor *gguf_find_tensor(const gguf_ctx *g, const char *name);
/* Product of ne[] (elements). */
int64_t gguf_tensor_nelem(const gguf_tensor *t);

/* ---- writer ---- */
typedef struct gguf_writer gguf_writer;

gguf_writer *gguf_writer_init(void);
void gguf_writer_free(gguf_writer *w);   /* NULL is a no-op */

/* Metadata setters; keys and strings are copied. Setting a key twice replaces it.
 * They return ST_OK or ST_ERR_NOMEM. */
st_code gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
st_code gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
st_code gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
st_code gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
st_code gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
st_code gguf_writer_set_str(gguf_writer *w, const char *key, const char *v);
/* Any fixed-size scalar type (not GGUF_STRING / GGUF_ARRAY): v points at one value of
 * that type in host order (uint8_t for GGUF_BOOL, 0 or 1). ST_ERR_ARG for other types. */
st_code gguf_writer_set_val(gguf_writer *w, const char *key, gguf_type type, const void *v);
/* Numeric array of n elements of elem_type (not GGUF_STRING / GGUF_ARRAY); copied. */
st_code gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem_type,
                            const void *data, uint64_t n);
/* String array; strs[j] has lens[j] bytes (lens NULL: NUL-terminated); copied. */
st_code gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n);
/* Adds a tensor; data (dtype_row_bytes(type, ne[0]) * ne[1] * ... bytes) is borrowed
 * until gguf_writer_write. ST_ERR_ARG for a bad shape/type or a duplicate name. */
st_code gguf_writer_add_tensor(gguf_writer *w, const char *name, uint32_t type,
                               uint32_t n_dims, const int64_t *ne, const void *data);
/* Writes the file through base/outfile.h (a new temporary file beside PATH, fsync,
 * rename). ST_ERR_IO on failure, PATH unchanged: PATH is a link or not a regular file,
 * or a write failed. */
st_code gguf_writer_write(gguf_writer *w, const char *path, st_err *err);

#endif
