/* quant.c - row dequantisers and round-to-nearest quantisers for the ggml block types
 * of quant.h (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K, IQ4_NL, IQ4_XS, MXFP4).
 *
 * Dequantisation goes through quant_unpack, the same code the CPU matmul uses, so the
 * bit layouts live in one place; tests/test_dequant_golden.c checks it against gguf-py.
 * The quantisers exist to write test models and to test the kernels: each (sub-)block
 * gets the scale (and min) that maps its range onto the quant range, scales of K types
 * are themselves rounded to 6 or 8 bits against the super block's fp16 scale, and every
 * value is rounded to the nearest level of the rounded scales. Valid, close to the input,
 * but not llama.cpp's error-minimising search. */
#include "quant.h"

#include <math.h>
#include <stddef.h>

bool quant_has(uint32_t type) {
    switch (type) {
    case DT_Q4_0: case DT_Q4_1: case DT_Q5_0: case DT_Q5_1: case DT_Q2_K: case DT_Q3_K:
    case DT_Q4_K: case DT_Q5_K: case DT_Q6_K: case DT_IQ4_NL: case DT_IQ4_XS: case DT_MXFP4:
        return true;
    default: return false;
    }
}

bool quant_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    if (!quant_has(type)) return false;
    const dtype_info *info = dtype_get(type);
    const int64_t nb = n / info->block; /* blocks in the row */
    const int per_chunk = QUANT_CHUNK / info->block;
    const int off = quant_off(type);
    quant_chunk c;
    for (int64_t b0 = 0; b0 < nb; b0 += per_chunk) {
        const int cnb = nb - b0 < per_chunk ? (int)(nb - b0) : per_chunk;
        quant_unpack(type, (const uint8_t *)src + b0 * info->block_bytes, cnb, &c);
        float *y = dst + b0 * info->block;
        for (int i = 0; i < cnb * info->block; i++)
            y[i] = c.s[i / 16] * (float)((int)c.u[i] - off) + c.m[i / 16];
    }
    return true;
}

/* ---- quantisers ---- */

static int quant_clamp(long v, int hi) { return v < 0 ? 0 : v > hi ? hi : (int)v; }

/* Rounds to fp16 and back: the scale the dequantiser will see. */
static float quant_fp16_round(float f, uint16_t *h) {
    *h = f32_to_fp16(f);
    return fp16_to_f32(*h);
}

/* Q4_0, Q4_1, Q5_0, Q5_1: one block of 32. Symmetric types (off > 0) scale the value of
 * largest magnitude to -off, as ggml does, so the one extra negative level is used;
 * the others map [min, max] onto [0, levels - 1]. */
static void quant_small_block(uint32_t type, const float *x, uint8_t *p) {
    const bool has_m = type == DT_Q4_1 || type == DT_Q5_1;
    const bool five = type == DT_Q5_0 || type == DT_Q5_1;
    const int top = five ? 31 : 15, off = quant_off(type);
    float mn = x[0], mx = x[0], ext = 0;
    for (int j = 0; j < 32; j++) {
        mn = fminf(mn, x[j]), mx = fmaxf(mx, x[j]);
        if (fabsf(x[j]) > fabsf(ext)) ext = x[j];
    }
    uint16_t hd, hm = 0;
    float d = quant_fp16_round(has_m ? (mx - mn) / (float)top : ext / (float)-off, &hd);
    float m = has_m ? quant_fp16_round(mn, &hm) : 0.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    uint8_t q[32];
    for (int j = 0; j < 32; j++)
        q[j] = (uint8_t)quant_clamp(lrintf((x[j] - m) * id) + off, top);
    memcpy(p, &hd, 2);
    if (has_m) memcpy(p + 2, &hm, 2);
    uint8_t *qh = p + 2 + 2 * has_m, *qs = qh + 4 * five;
    uint32_t bits = 0;
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
    for (int j = 0; j < 32; j++) bits |= (uint32_t)(q[j] >> 4 & 1) << j;
    if (five) memcpy(qh, &bits, 4); /* little-endian, as ggml reads it */
}

/* Q4_K, Q5_K: a super block of 8 sub-blocks of 32, each with scale (max - min) / top and
 * min -min(0, min x) (so values are d * sc * q - dmin * mn with mn >= 0, as ggml has it),
 * both rounded to 6 bits against the super block's d = max scale / 63, dmin likewise. */
static void quant_k4_block(uint32_t type, const float *x, uint8_t *p) {
    const bool five = type == DT_Q5_K;
    const int top = five ? 31 : 15;
    float scale[8], mins[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float mn = 0, mx = x[32 * j];
        for (int l = 0; l < 32; l++) mn = fminf(mn, x[32 * j + l]), mx = fmaxf(mx, x[32 * j + l]);
        scale[j] = (mx - mn) / (float)top;
        mins[j] = -mn;
        max_scale = fmaxf(max_scale, scale[j]), max_min = fmaxf(max_min, mins[j]);
    }
    uint16_t hd, hdmin;
    float d = quant_fp16_round(max_scale / 63.0f, &hd);
    float dmin = quant_fp16_round(max_min / 63.0f, &hdmin);
    uint8_t sc[8], mq[8], q[QK_K];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? quant_clamp(lrintf(scale[j] / d), 63) : 0);
        mq[j] = (uint8_t)(dmin > 0 ? quant_clamp(lrintf(mins[j] / dmin), 63) : 0);
        float D = d * (float)sc[j], M = dmin * (float)mq[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)(D > 0 ? quant_clamp(lrintf((x[32 * j + l] + M) / D), top) : 0);
    }
    memcpy(p, &hd, 2);
    memcpy(p + 2, &hdmin, 2);
    uint8_t *scales = p + 4, *qh = p + 16, *qs = p + (five ? 48 : 16);
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) { /* packed as block_q4_K describes */
        if (j < 4) {
            scales[j] |= sc[j], scales[j + 4] |= mq[j];
        } else {
            scales[j + 4] = (uint8_t)((sc[j] & 0xF) | (mq[j] & 0xF) << 4);
            scales[j - 4] |= (uint8_t)((sc[j] >> 4) << 6);
            scales[j] |= (uint8_t)((mq[j] >> 4) << 6);
        }
    }
    if (five) memset(qh, 0, 32);
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < 32; l++) {
            uint8_t a = q[64 * k + l], b = q[64 * k + 32 + l];
            qs[32 * k + l] = (uint8_t)((a & 15) | (b & 15) << 4);
            if (five) qh[l] |= (uint8_t)((a >> 4) << (2 * k) | (b >> 4) << (2 * k + 1));
        }
}

/* The value of largest magnitude of n, with its sign (0 when all are 0). */
static float quant_ext(const float *x, int n) {
    float ext = 0;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > fabsf(ext)) ext = x[j];
    return ext;
}

/* Per group of gl values (ng groups), the scale that maps its value of largest magnitude
 * to -top, into scale[g]; returns the largest |scale|. */
static float quant_ext_scales(const float *x, int ng, int gl, float top, float *scale) {
    float amax = 0;
    for (int g = 0; g < ng; g++) {
        scale[g] = quant_ext(x + gl * g, gl) / -top;
        amax = fmaxf(amax, fabsf(scale[g]));
    }
    return amax;
}

/* Q6_K: 16 sub-blocks of 16, each scaled so its value of largest magnitude is -32, the
 * scales rounded to int8 against d = max |scale| / 127. */
static void quant_q6_k_block(const float *x, block_q6_K *b) {
    float scale[16];
    const float amax = quant_ext_scales(x, 16, 16, 32.0f, scale);
    float d = quant_fp16_round(amax / 127.0f, &b->d);
    uint8_t q[QK_K];
    for (int g = 0; g < 16; g++) {
        long s = d > 0 ? lrintf(scale[g] / d) : 0;
        b->scales[g] = (int8_t)(s < -127 ? -127 : s > 127 ? 127 : s);
        float D = d * (float)b->scales[g];
        for (int l = 0; l < 16; l++)
            q[16 * g + l] = (uint8_t)(D != 0 ? quant_clamp(lrintf(x[16 * g + l] / D) + 32, 63) : 32);
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *v = q + 128 * h + l; /* v[0], v[32], v[64], v[96] */
            b->ql[64 * h + l] = (uint8_t)((v[0] & 15) | (v[64] & 15) << 4);
            b->ql[64 * h + 32 + l] = (uint8_t)((v[32] & 15) | (v[96] & 15) << 4);
            b->qh[32 * h + l] = (uint8_t)(v[0] >> 4 | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 |
                                          (v[96] >> 4) << 6);
        }
}

/* Q2_K: 16 sub-blocks of 16 with 4-bit scale (max - min) / 3 and min -min(0, min x), both
 * rounded against the super block's d = max scale / 15 and dmin likewise. */
static void quant_q2_k_block(const float *x, block_q2_K *b) {
    float scale[16], mins[16], max_scale = 0, max_min = 0;
    for (int g = 0; g < 16; g++) {
        float mn = 0, mx = x[16 * g];
        for (int l = 0; l < 16; l++) mn = fminf(mn, x[16 * g + l]), mx = fmaxf(mx, x[16 * g + l]);
        scale[g] = (mx - mn) / 3.0f, mins[g] = -mn;
        max_scale = fmaxf(max_scale, scale[g]), max_min = fmaxf(max_min, mins[g]);
    }
    float d = quant_fp16_round(max_scale / 15.0f, &b->d);
    float dmin = quant_fp16_round(max_min / 15.0f, &b->dmin);
    memset(b->qs, 0, sizeof b->qs);
    for (int g = 0; g < 16; g++) {
        const int sc = d > 0 ? quant_clamp(lrintf(scale[g] / d), 15) : 0;
        const int mq = dmin > 0 ? quant_clamp(lrintf(mins[g] / dmin), 15) : 0;
        b->scales[g] = (uint8_t)(sc | mq << 4);
        const float D = d * (float)sc, M = dmin * (float)mq;
        for (int l = 0; l < 16; l++) {
            const int v = 16 * g + l, q = D > 0 ? quant_clamp(lrintf((x[v] + M) / D), 3) : 0;
            b->qs[32 * (v / 128) + v % 32] |= (uint8_t)(q << 2 * (v % 128 / 32));
        }
    }
}

/* Q3_K: 16 sub-blocks of 16, each scaled so its value of largest magnitude is -4, the
 * scales rounded to 6 bits (-32 .. 31) against d = max |scale| / 32. */
static void quant_q3_k_block(const float *x, block_q3_K *b) {
    float scale[16];
    const float amax = quant_ext_scales(x, 16, 16, 4.0f, scale);
    float d = quant_fp16_round(amax / 32.0f, &b->d);
    memset(b, 0, offsetof(block_q3_K, d));
    for (int g = 0; g < 16; g++) {
        const int sc = d > 0 ? quant_clamp(lrintf(scale[g] / d) + 32, 63) : 32;
        b->scales[g % 8] |= (uint8_t)((sc & 15) << 4 * (g / 8));
        b->scales[8 + g % 4] |= (uint8_t)((sc >> 4) << 2 * (g / 4));
        const float D = d * (float)(sc - 32);
        for (int l = 0; l < 16; l++) {
            const int v = 16 * g + l;
            const int u = D != 0 ? quant_clamp(lrintf(x[v] / D) + 4, 7) : 4;
            b->qs[32 * (v / 128) + v % 32] |= (uint8_t)((u & 3) << 2 * (v % 128 / 32));
            b->hmask[v % 32] |= (uint8_t)((u >> 2) << v / 32);
        }
    }
}

/* The index of the table entry (u values, value + 128) nearest to v. */
static int quant_nearest(const uint8_t *tab, float v) {
    int best = 0;
    for (int i = 1; i < 16; i++)
        if (fabsf((float)(tab[i] - 128) - v) < fabsf((float)(tab[best] - 128) - v)) best = i;
    return best;
}

/* 32 values at x, each as its nearest table entry times scale d, into nibbles at qs. */
static void quant_lut_nibbles(const uint8_t *tab, const float *x, float d, uint8_t *qs) {
    const float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(quant_nearest(tab, x[j] * id) | quant_nearest(tab, x[j + 16] * id) << 4);
}

/* IQ4_NL (the value of largest magnitude at the table's -127) and MXFP4 (the smallest
 * power of two that fits the largest magnitude into the table's +-12). */
static void quant_lut_block(uint32_t type, const float *x, uint8_t *p) {
    const float ext = quant_ext(x, 32);
    if (type == DT_IQ4_NL) {
        uint16_t h;
        const float d = quant_fp16_round(ext / -127.0f, &h);
        memcpy(p, &h, 2);
        quant_lut_nibbles(quant_iq4nl_u, x, d, p + 2);
        return;
    }
    int e = 0;
    if (ext != 0) {
        frexpf(fabsf(ext) / 12.0f, &e); /* |ext| / 12 < 2^e */
        e += 128;
        e = e < 2 ? 2 : e > 254 ? 254 : e;
    }
    p[0] = (uint8_t)e;
    quant_lut_nibbles(quant_mxfp4_u, x, quant_e8m0_half(p[0]), p + 1);
}

/* IQ4_XS: 8 sub-blocks of 32 with scale ext / -127, rounded to 6 bits (-32 .. 31) against
 * d = max |scale| / 32. */
static void quant_iq4_xs_block(const float *x, block_iq4_xs *b) {
    float scale[8];
    const float amax = quant_ext_scales(x, 8, 32, 127.0f, scale);
    const float d = quant_fp16_round(amax / 32.0f, &b->d);
    b->scales_h = 0;
    memset(b->scales_l, 0, sizeof b->scales_l);
    for (int k = 0; k < 8; k++) {
        const int ls = d > 0 ? quant_clamp(lrintf(scale[k] / d) + 32, 63) : 32;
        b->scales_l[k / 2] |= (uint8_t)((ls & 15) << 4 * (k % 2));
        b->scales_h |= (uint16_t)((ls >> 4) << 2 * k);
        quant_lut_nibbles(quant_iq4nl_u, x + 32 * k, d * (float)(ls - 32), b->qs + 16 * k);
    }
}

bool quant_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    if (!quant_has(type)) return false;
    const dtype_info *info = dtype_get(type);
    for (int64_t b = 0; b < n / info->block; b++) {
        const float *x = src + b * info->block;
        uint8_t *p = (uint8_t *)dst + b * info->block_bytes;
        if (type == DT_Q6_K)
            quant_q6_k_block(x, (block_q6_K *)p);
        else if (type == DT_Q2_K)
            quant_q2_k_block(x, (block_q2_K *)p);
        else if (type == DT_Q3_K)
            quant_q3_k_block(x, (block_q3_K *)p);
        else if (type == DT_IQ4_XS)
            quant_iq4_xs_block(x, (block_iq4_xs *)p);
        else if (quant_lut(type))
            quant_lut_block(type, x, p);
        else if (type == DT_Q4_K || type == DT_Q5_K)
            quant_k4_block(type, x, p);
        else
            quant_small_block(type, x, p);
    }
    return true;
}
