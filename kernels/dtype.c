/* dtype.c - the type table, fp16/bf16 conversions, and row (de)quantisers (the ggml
 * block types Q4_0 .. Q6_K, IQ4_NL, IQ4_XS and MXFP4 are in quant.c; the row functions here dispatch to it).
 *
 * Block sizes and byte sizes follow the GGUF/ggml definitions so that any tensor in a
 * valid file can be sized, even of a type we cannot compute with. */
#include "dtype.h"

#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const dtype_info dtypes[DT_COUNT] = {
    [DT_F32] = {"F32", 1, 4, true},          [DT_F16] = {"F16", 1, 2, true},
    [DT_Q4_0] = {"Q4_0", 32, 18, true},      [DT_Q4_1] = {"Q4_1", 32, 20, true},
    [DT_Q5_0] = {"Q5_0", 32, 22, true},      [DT_Q5_1] = {"Q5_1", 32, 24, true},
    [DT_Q8_0] = {"Q8_0", 32, 34, true},      [DT_Q8_1] = {"Q8_1", 32, 36, false},
    [DT_Q2_K] = {"Q2_K", 256, 84, true},    [DT_Q3_K] = {"Q3_K", 256, 110, true},
    [DT_Q4_K] = {"Q4_K", 256, 144, true},    [DT_Q5_K] = {"Q5_K", 256, 176, true},
    [DT_Q6_K] = {"Q6_K", 256, 210, true},    [DT_Q8_K] = {"Q8_K", 256, 292, false},
    [DT_IQ2_XXS] = {"IQ2_XXS", 256, 66, false}, [DT_IQ2_XS] = {"IQ2_XS", 256, 74, false},
    [DT_IQ3_XXS] = {"IQ3_XXS", 256, 98, false}, [DT_IQ1_S] = {"IQ1_S", 256, 50, false},
    [DT_IQ4_NL] = {"IQ4_NL", 32, 18, true}, [DT_IQ3_S] = {"IQ3_S", 256, 110, false},
    [DT_IQ2_S] = {"IQ2_S", 256, 82, false},  [DT_IQ4_XS] = {"IQ4_XS", 256, 136, true},
    [DT_I8] = {"I8", 1, 1, false},           [DT_I16] = {"I16", 1, 2, false},
    [DT_I32] = {"I32", 1, 4, false},         [DT_I64] = {"I64", 1, 8, false},
    [DT_F64] = {"F64", 1, 8, false},         [DT_IQ1_M] = {"IQ1_M", 256, 56, false},
    [DT_BF16] = {"BF16", 1, 2, true},        [DT_TQ1_0] = {"TQ1_0", 256, 54, false},
    [DT_TQ2_0] = {"TQ2_0", 256, 66, false},  [DT_MXFP4] = {"MXFP4", 32, 17, true},
};

const dtype_info *dtype_get(uint32_t type) {
    if (type >= DT_COUNT || !dtypes[type].name) return NULL;
    return &dtypes[type];
}

const char *dtype_name(uint32_t type) {
    const dtype_info *d = dtype_get(type);
    return d ? d->name : "unknown";
}

size_t dtype_compute_names(char *buf, size_t cap) {
    size_t len = 0;
    for (int32_t i = 0; i < DT_COUNT; i++) {
        if (!dtypes[i].name || !dtypes[i].compute) continue;
        int w = snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, "%s%s",
                         len ? ", " : "", dtypes[i].name);
        len += (size_t)w;
    }
    if (cap && !len) buf[0] = '\0';
    return len;
}

int32_t dtype_from_name(const char *name) {
    for (int32_t i = 0; i < DT_COUNT; i++)
        if (dtypes[i].name && strcasecmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

bool dtype_row_ok(uint32_t type, int64_t n) {
    const dtype_info *d = dtype_get(type);
    return d && n >= 0 && n % d->block == 0;
}

size_t dtype_row_bytes(uint32_t type, int64_t n) {
    const dtype_info *d = dtype_get(type);
    if (!d || n < 0) return 0;
    return (size_t)(n / d->block) * (size_t)d->block_bytes;
}

/* ---- half precision ---- */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        float v = (float)man * 5.9604644775390625e-8f; /* man * 2^-24, subnormal */
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_fp16(float f) {
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00 : 0x7c00);
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {
        /* subnormal half (or zero): value / 2^-24, rounded to nearest even */
        float v = u2f(a) * 16777216.0f;
        return sign | (uint16_t)lrintf(v);
    }
    uint32_t mant = a & 0x7fffffu, exp = (a >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* ---- rows ---- */

static void dequant_q8_0(const block_q8_0 *b, float *dst, int64_t n) {
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) dst[i * QK8_0 + j] = d * (float)b[i].qs[j];
    }
}

static void quant_q8_0(const float *src, block_q8_0 *b, int64_t n) {
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float *x = src + i * QK8_0;
        float amax = 0;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = (int8_t)lrintf(x[j] * id);
    }
}

bool dtype_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    switch (type) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); return true;
    case DT_F16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(s[i]);
        return true;
    }
    case DT_BF16: {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
        return true;
    }
    case DT_Q8_0: dequant_q8_0(src, dst, n); return true;
    default: return quant_dequantize_row(type, src, dst, n);
    }
}

bool dtype_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    switch (type) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); return true;
    case DT_F16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = f32_to_fp16(src[i]);
        return true;
    }
    case DT_BF16: {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
        return true;
    }
    case DT_Q8_0: quant_q8_0(src, dst, n); return true;
    default: return quant_quantize_row(type, src, dst, n);
    }
}
