/* mmvq.cu - the few-row quantised product in llama.cpp's mmvq shape: the activation rows
 * are quantised once on the device to int8 in blocks of 32 (one float scale a block, one
 * integer sum per 16 values), and every output row's weights are read as stored, 16 values
 * (a "unit") at a time, unpacked to bytes and multiplied by dp4a against the activations'
 * 16-byte loads. A unit's value is s * (u - off) + m, so its dot product with an
 * activation block's values d * q is s * d * (sum u q - off * sum q) + m * d * sum q, the
 * integer parts exact. One warp an output row, MQ_WARPS rows a block, up to MQ_R
 * activation rows per block (grid.y groups of them); each lane sums its units in order and
 * a butterfly sums the lanes, so a row's result is the same bits in any batch.
 * Contract: cu.h. */
#include "kernels/cuda/dequant.cuh"

namespace {

constexpr int MQ_WARPS = 4; /* output rows per block */
constexpr int MQ_R = 8;     /* activation rows per block */

/* four bytes at any address, little-endian */
__device__ __forceinline__ int ld32(const uint8_t *p) {
    return (int)((unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24);
}

/* Bits 0..3 of h as bit 4 of bytes 0..3. */
__device__ __forceinline__ int spread4(unsigned h) {
    return (int)((h & 1) << 4 | (h & 2) << 11 | (h & 4) << 18 | (h & 8) << 25);
}

/* Unit j of a block: u (16 unsigned values, 4 a word), s, m and off of its values. */
struct unit {
    int u[4];
    float s, m;
    int off;
};

template <int TYPE> struct qtype; /* values per block, units per block, unpacking */

template <> struct qtype<DT_Q8_0> {
    static constexpr int QK = 32, BYTES = 34;
    __device__ static unit get(const uint8_t *p, int j) {
        unit r;
        for (int k = 0; k < 4; k++) r.u[k] = ld32(p + 2 + 16 * j + 4 * k); /* (signed bytes) */
        r.s = cu::h2f(cu::ld16(p)), r.m = 0.0f, r.off = 0;
        return r;
    }
};

/* Q4_0, Q4_1, Q5_0, Q5_1: unit 0 the low nibbles of qs, unit 1 the high, qh the 5th bits */
template <int TYPE> struct qsmall {
    static constexpr bool has_m = TYPE == DT_Q4_1 || TYPE == DT_Q5_1;
    static constexpr bool five = TYPE == DT_Q5_0 || TYPE == DT_Q5_1;
    static constexpr int QK = 32, BYTES = 2 + 2 * has_m + 4 * five + 16;
    __device__ static unit get(const uint8_t *p, int j) {
        const uint8_t *qs = p + BYTES - 16;
        const unsigned qh = five ? (unsigned)ld32(p + 2 + 2 * has_m) >> 16 * j : 0u;
        unit r;
        for (int k = 0; k < 4; k++) {
            r.u[k] = (ld32(qs + 4 * k) >> 4 * j) & 0x0F0F0F0F;
            if (five) r.u[k] |= spread4(qh >> 4 * k & 15);
        }
        r.s = cu::h2f(cu::ld16(p)), r.m = has_m ? cu::h2f(cu::ld16(p + 2)) : 0.0f;
        r.off = TYPE == DT_Q4_0 ? 8 : TYPE == DT_Q5_0 ? 16 : 0;
        return r;
    }
};
template <> struct qtype<DT_Q4_0> : qsmall<DT_Q4_0> {};
template <> struct qtype<DT_Q4_1> : qsmall<DT_Q4_1> {};
template <> struct qtype<DT_Q5_0> : qsmall<DT_Q5_0> {};
template <> struct qtype<DT_Q5_1> : qsmall<DT_Q5_1> {};

/* Q4_K, Q5_K: 8 sub-blocks of 32 (two units each) with 6-bit scales and mins */
template <int TYPE> struct qk45 {
    static constexpr bool five = TYPE == DT_Q5_K;
    static constexpr int QK = 256, BYTES = five ? 176 : 144;
    __device__ static unit get(const uint8_t *p, int j) {
        const int sub = j / 2, l0 = 16 * (j % 2);
        const uint8_t *sc6 = p + 4, *q = p + (five ? 48 : 16) + 32 * (sub / 2) + l0;
        int sc, mn;
        if (sub < 4) {
            sc = sc6[sub] & 63, mn = sc6[sub + 4] & 63;
        } else {
            sc = (sc6[sub + 4] & 15) | (sc6[sub - 4] >> 6) << 4;
            mn = (sc6[sub + 4] >> 4) | (sc6[sub] >> 6) << 4;
        }
        unit r;
        for (int k = 0; k < 4; k++) {
            r.u[k] = (ld32(q + 4 * k) >> 4 * (sub % 2)) & 0x0F0F0F0F;
            if (five) r.u[k] |= ((ld32(p + 16 + l0 + 4 * k) >> sub) & 0x01010101) << 4;
        }
        r.s = __fmul_rn((float)sc, cu::h2f(cu::ld16(p)));
        r.m = -__fmul_rn((float)mn, cu::h2f(cu::ld16(p + 2)));
        r.off = 0;
        return r;
    }
};
template <> struct qtype<DT_Q4_K> : qk45<DT_Q4_K> {};
template <> struct qtype<DT_Q5_K> : qk45<DT_Q5_K> {};

/* Q6_K: 16 sub-blocks of 16 (a unit each) with int8 scales, 4 low bits and 2 high */
template <> struct qtype<DT_Q6_K> {
    static constexpr int QK = 256, BYTES = 210;
    __device__ static unit get(const uint8_t *p, int j) {
        const int h = j / 8, k = j % 8 / 2, l0 = 16 * (j % 2);
        const uint8_t *lo = p + 64 * h + 32 * (k % 2) + l0, *hi = p + 128 + 32 * h + l0;
        unit r;
        for (int i = 0; i < 4; i++)
            r.u[i] = ((ld32(lo + 4 * i) >> 4 * (k / 2)) & 0x0F0F0F0F) |
                     ((ld32(hi + 4 * i) >> 2 * k) & 0x03030303) << 4;
        r.s = __fmul_rn((float)(int8_t)p[192 + j], cu::h2f(cu::ld16(p + 208)));
        r.m = 0.0f, r.off = 32;
        return r;
    }
};

/* Q2_K, Q3_K: 16 sub-blocks of 16 (a unit each), 2-bit quants (Q3_K: a third bit in hmask) */
template <int TYPE> struct qk23 {
    static constexpr bool three = TYPE == DT_Q3_K;
    static constexpr int QK = 256, BYTES = three ? 110 : 84;
    __device__ static unit get(const uint8_t *p, int j) {
        const int h = j / 8, k = j % 8 / 2, l0 = 16 * (j % 2);
        const uint8_t *q = p + (three ? 32 : 16) + 32 * h + l0;
        unit r;
        for (int i = 0; i < 4; i++) {
            r.u[i] = (ld32(q + 4 * i) >> 2 * k) & 0x03030303;
            if (three) r.u[i] |= ((ld32(p + l0 + 4 * i) >> (4 * h + k)) & 0x01010101) << 2;
        }
        if (three) {
            const int lo = (j < 8 ? p[96 + j] : p[88 + j] >> 4) & 15;
            const int sc = lo | (p[104 + j % 4] >> 2 * (j / 4) & 3) << 4;
            r.s = __fmul_rn(cu::h2f(cu::ld16(p + 108)), (float)(sc - 32)), r.m = 0.0f, r.off = 4;
        } else {
            r.s = __fmul_rn(cu::h2f(cu::ld16(p + 80)), (float)(p[j] & 15));
            r.m = -__fmul_rn(cu::h2f(cu::ld16(p + 82)), (float)(p[j] >> 4)), r.off = 0;
        }
        return r;
    }
};
template <> struct qtype<DT_Q2_K> : qk23<DT_Q2_K> {};
template <> struct qtype<DT_Q3_K> : qk23<DT_Q3_K> {};

/* IQ4_NL, MXFP4 (two units a block of 32), IQ4_XS (16 units, two a sub-block of 32): the
 * nibbles looked up to their signed table values (off 0, as Q8_0's bytes) */
template <int TYPE> struct qlut {
    static constexpr int QK = TYPE == DT_IQ4_XS ? 256 : 32;
    static constexpr int BYTES = TYPE == DT_IQ4_XS ? 136 : TYPE == DT_MXFP4 ? 17 : 18;
    __device__ static unit get(const uint8_t *p, int j) {
        const uint8_t *qs;
        unit r;
        if constexpr (TYPE == DT_IQ4_XS) {
            const int k = j / 2;
            const int ls = (p[4 + k / 2] >> 4 * (k % 2) & 15) | (cu::ld16(p + 2) >> 2 * k & 3) << 4;
            r.s = __fmul_rn(cu::h2f(cu::ld16(p)), (float)(ls - 32)), qs = p + 8 + 16 * k;
        } else if constexpr (TYPE == DT_MXFP4) {
            r.s = cu::e8m0_half(p[0]), qs = p + 1;
        } else {
            r.s = cu::h2f(cu::ld16(p)), qs = p + 2;
        }
        for (int k = 0; k < 4; k++) {
            unsigned w = 0;
            for (int b = 0; b < 4; b++) {
                const int q = qs[4 * k + b] >> 4 * (j % 2) & 15;
                w |= (unsigned)((cu::lut_u<TYPE>(q) - 128) & 0xff) << 8 * b;
            }
            r.u[k] = (int)w;
        }
        r.m = 0.0f, r.off = 0;
        return r;
    }
};
template <> struct qtype<DT_IQ4_NL> : qlut<DT_IQ4_NL> {};
template <> struct qtype<DT_IQ4_XS> : qlut<DT_IQ4_XS> {};
template <> struct qtype<DT_MXFP4> : qlut<DT_MXFP4> {};

/* One warp a block of 32 activations: d = max|x| / 127, q = round(x / d), the two halves'
 * sums of q; x formed from gate x and up as SwiGLU's when up is not NULL. */
__global__ void __launch_bounds__(256)
k_quantize_q8(int8_t *xq, float *xd, int32_t *xs, const float *x, const float *up, int64_t n_blocks) {
    const int lane = threadIdx.x % 32;
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= n_blocks) return; /* (a whole warp leaves together) */
    const int64_t i = b * 32 + lane;
    const float v = up ? cu::silu_mul(x[i], up[i]) : x[i];
    const float amax = cu::warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    xq[b * 32 + lane] = (int8_t)q;
    int sum = q;
    for (int o = 8; o > 0; o /= 2) sum += __shfl_xor_sync(cu::FULL, sum, o);
    if (lane == 0) xd[b] = d;
    if (lane % 16 == 0) xs[b * 2 + lane / 16] = sum;
}

template <int TYPE>
__global__ void __launch_bounds__(MQ_WARPS * 32)
k_mmvq(cu::mat_set m, int64_t n_in, const int8_t *xq, const float *xd, const int32_t *xs, int n_rows) {
    using Q = qtype<TYPE>;
    float *y = m.y[blockIdx.z];
    const uint8_t *w = m.w[blockIdx.z];
    const int64_t n_out = m.n_out[blockIdx.z];
    constexpr int UPB = Q::QK / 16; /* units per block */
    const int lane = threadIdx.x % 32;
    const int64_t o = (int64_t)blockIdx.x * MQ_WARPS + threadIdx.x / 32;
    const int r0 = blockIdx.y * MQ_R;
    const int nr = n_rows - r0 < MQ_R ? n_rows - r0 : MQ_R;
    if (o >= n_out) return; /* (a whole warp leaves together) */
    const uint8_t *row = w + (size_t)o * (size_t)(n_in / Q::QK) * Q::BYTES;
    const int64_t n_units = n_in / 16;
    float acc[MQ_R];
CU_UNROLL
    for (int r = 0; r < MQ_R; r++) acc[r] = 0.0f;
    for (int64_t t = lane; t < n_units; t += 32) {
        const unit un = Q::get(row + t / UPB * Q::BYTES, (int)(t % UPB));
CU_UNROLL
        for (int r = 0; r < MQ_R; r++) {
            if (r >= nr) break;
            const int64_t xr = (int64_t)(r0 + r) * n_in;
            const int4 a = *reinterpret_cast<const int4 *>(xq + xr + 16 * t);
            const int dot = __dp4a(un.u[3], a.w, __dp4a(un.u[2], a.z, __dp4a(un.u[1], a.y, __dp4a(un.u[0], a.x, 0))));
            const int sum = xs[xr / 16 + t];
            const float d = xd[xr / 32 + t / 2];
            acc[r] += __fmul_rn(__fmul_rn(un.s, d), (float)(dot - un.off * sum)) +
                      __fmul_rn(__fmul_rn(un.m, d), (float)sum);
        }
    }
CU_UNROLL
    for (int r = 0; r < MQ_R; r++) {
        if (r >= nr) break;
        const float s = cu::warp_sum(acc[r]);
        if (lane == 0) y[(int64_t)(r0 + r) * n_out + o] = s;
    }
}

template <int TYPE> struct mmvq {
    static constexpr bool supported = TYPE != DT_F32 && TYPE != DT_F16 && TYPE != DT_BF16;
    static void run(const cu::mat_set &m, int64_t n_in, const int8_t *xq, const float *xd,
                    const int32_t *xs, int32_t n_rows, cu_stream s) {
        const dim3 grid((unsigned)((m.most + MQ_WARPS - 1) / MQ_WARPS),
                        (unsigned)((n_rows + MQ_R - 1) / MQ_R), (unsigned)m.n);
        CU_LAUNCH(k_mmvq<TYPE>, grid, MQ_WARPS * 32, 0, s, m, n_in, xq, xd, xs, (int)n_rows);
    }
};

template <int TYPE> struct has_mmvq { /* (no launch: whether mmvq takes TYPE) */
    static constexpr bool supported = mmvq<TYPE>::supported;
    static void run() {}
};

} /* namespace */

extern "C" void cu_quantize_q8(int8_t *xq, float *xd, int32_t *xs, const float *x,
                               int32_t n_rows, int64_t n_in, cu_stream s) {
    const int64_t n_blocks = (int64_t)n_rows * (n_in / 32);
    if (n_blocks <= 0) return;
    CU_LAUNCH(k_quantize_q8, (unsigned)((n_blocks + 7) / 8), 256, 0, s, xq, xd, xs, x,
              static_cast<const float *>(nullptr), n_blocks);
}

extern "C" void cu_quantize_q8_swiglu(int8_t *xq, float *xd, int32_t *xs, const float *gate,
                                      const float *up, int32_t n_rows, int64_t n_in, cu_stream s) {
    const int64_t n_blocks = (int64_t)n_rows * (n_in / 32);
    if (n_blocks <= 0) return;
    CU_LAUNCH(k_quantize_q8, (unsigned)((n_blocks + 7) / 8), 256, 0, s, xq, xd, xs, gate, up, n_blocks);
}

extern "C" bool cu_matmul_q8(float *y, uint32_t type, const void *w, int64_t n_out,
                             int64_t n_in, const int8_t *xq, const float *xd, const int32_t *xs,
                             int32_t n_rows, cu_stream s) {
    return cu_matmul_q8_n(1, &y, type, &w, &n_out, n_in, xq, xd, xs, n_rows, s);
}

extern "C" bool cu_matmul_q8_n(int32_t n, float *const *y, uint32_t type, const void *const *w,
                               const int64_t *n_out, int64_t n_in, const int8_t *xq,
                               const float *xd, const int32_t *xs, int32_t n_rows, cu_stream s) {
    const cu::mat_set m = cu::make_set(n, y, w, n_out);
    if (m.n == 0 || n_in <= 0 || n_rows <= 0) return cu::with_type<has_mmvq>(type);
    return cu::with_type<mmvq>(type, m, n_in, xq, xd, xs, n_rows, s);
}
