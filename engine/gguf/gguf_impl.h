/* gguf_impl.h - what the GGUF reader's two files share (gguf_read.c parses an image,
 * gguf_get.c answers questions about the parsed entries); not for use outside them. */
#ifndef MD_GGUF_IMPL_H
#define MD_GGUF_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef struct gguf_kv {
    char *key;               /* owned, NUL-terminated */
    gguf_type type;
    gguf_type arr_type;      /* GGUF_N_TYPES for non-arrays */
    uint64_t arr_n;
    const uint8_t *val;      /* scalar: its bytes; array: its first element */
    char *str;               /* owned copy of a scalar string */
    size_t *str_offs;        /* string arrays: image offset of each element's length */
} gguf_kv;

/* A name with the index of its entry, sorted by name for duplicate checks and lookup. */
typedef struct gguf_name_idx {
    const char *name;
    int64_t i;
} gguf_name_idx;

struct gguf_ctx {
    const uint8_t *base;
    size_t size;
    void *map;               /* non-NULL when gguf_open mapped the file */
    uint32_t version, alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    gguf_kv *kv;             /* (n_kv) */
    gguf_tensor *tensors;    /* (n_tensors) */
    gguf_name_idx *kv_by_name;     /* (n_kv) sorted */
    gguf_name_idx *tensor_by_name; /* (n_tensors) sorted */
};

/* The n-byte little-endian unsigned value at p (no alignment assumed). */
uint64_t gguf_ld_le(const uint8_t *p, size_t n);

/* The product of t's dimensions; *ok false when it overflows int64. */
int64_t gguf_tensor_nelem_checked(const gguf_tensor *t, bool *ok);

/* qsort/bsearch order of gguf_name_idx entries: by name. */
int gguf_name_idx_cmp(const void *a, const void *b);

#endif
