/* dtype.h - tensor element types (GGUF / ggml type ids), their block layouts, and
 * conversions between them and float32.
 *
 * The ids are the ones GGUF files store. Every id a file may carry is listed with its
 * block size and block byte size, so a reader can size any tensor; `compute` says
 * whether the kernels can multiply by a weight of that type. This module converts
 * (dequantise a row, quantise a row for writing test models) but does no matmuls. */
#ifndef MD_DTYPE_H
#define MD_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    DT_F32 = 0, DT_F16 = 1, DT_Q4_0 = 2, DT_Q4_1 = 3, DT_Q5_0 = 6, DT_Q5_1 = 7,
    DT_Q8_0 = 8, DT_Q8_1 = 9, DT_Q2_K = 10, DT_Q3_K = 11, DT_Q4_K = 12, DT_Q5_K = 13,
    DT_Q6_K = 14, DT_Q8_K = 15, DT_IQ2_XXS = 16, DT_IQ2_XS = 17, DT_IQ3_XXS = 18,
    DT_IQ1_S = 19, DT_IQ4_NL = 20, DT_IQ3_S = 21, DT_IQ2_S = 22, DT_IQ4_XS = 23,
    DT_I8 = 24, DT_I16 = 25, DT_I32 = 26, DT_I64 = 27, DT_F64 = 28, DT_IQ1_M = 29,
    DT_BF16 = 30, DT_TQ1_0 = 34, DT_TQ2_0 = 35, DT_MXFP4 = 39,
    DT_COUNT = 40
};

typedef struct dtype_info {
    const char *name;   /* "Q8_0"; NULL for ids that no type uses */
    int32_t block;      /* elements per block (1 for plain types) */
    int32_t block_bytes;/* bytes per block */
    bool compute;       /* the kernels can use it as a weight type */
} dtype_info;

/* The info for a type id, or NULL when the id is not a known type. */
const dtype_info *dtype_get(uint32_t type);

/* Name of a type id ("Q8_0"), or "unknown" for ids that dtype_get rejects. */
const char *dtype_name(uint32_t type);

/* The names of the compute types in id order, ", "-separated ("F32, F16, Q4_0, ..."), into
 * buf (cap bytes, NUL-terminated, cut short to fit); returns the length of the whole list. */
size_t dtype_compute_names(char *buf, size_t cap);

/* Type id for a name, case-insensitive ("q8_0", "F16"); -1 when unknown. */
int32_t dtype_from_name(const char *name);

/* Bytes of a row of n elements of a type: n / block * block_bytes. The caller makes
 * sure n is a multiple of the block size (dtype_row_ok). Returns 0 for unknown ids. */
size_t dtype_row_bytes(uint32_t type, int64_t n);
bool dtype_row_ok(uint32_t type, int64_t n);

/* IEEE half and bfloat16 conversions (round to nearest even on the way down). */
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* Converts n elements (a multiple of the block) of a compute type to float32.
 * Returns false for types without a dequantiser. */
bool dtype_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Converts n float32 values (a multiple of the block) into type, writing
 * dtype_row_bytes(type, n) bytes. Returns false for types without a quantiser. */
bool dtype_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);

/* The Q8_0 block: 32 int8 values sharing one fp16 scale (d). value = d * q[i]. */
#define QK8_0 32
typedef struct {
    uint16_t d;
    int8_t qs[QK8_0];
} block_q8_0;

#endif
