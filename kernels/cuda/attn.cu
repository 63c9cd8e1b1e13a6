/* attn.cu - segment attention on the GPU (kern_ops.attention), in the shape of
 * flash-decoding. A row's keys are the slots of its segments in the order given, cut into
 * chunks of CU_ATTN_CHUNK keys. Each chunk gets a partial softmax (its max m, its sum l and
 * its weighted values) by the online rule over tiles of 128 keys, and the chunks are then
 * folded in order into the result. One block takes a (KV head, up to 4 of its query heads,
 * row), so the heads of a KV group read each key once; it either folds all of the row's
 * chunks itself or, when the rows are too few to fill the GPU, does one chunk and leaves
 * its partial for k_attn_merge. Both paths run the same operations on the same values
 * (at_fold is the one folding rule), so a row's result is the same bits either way and
 * depends only on its keys, whatever the batch: the forest equals linear decoding.
 *
 * Scores: a tile's keys are staged in shared memory 64 dims at a time (coalesced reads,
 * rows padded by one word against bank conflicts), one key a thread. A head's attention
 * sink (gpt-oss) is folded last as one more chunk: weight e^sink, no value. Contract: cu.h. */
#include "kernels/cuda/common.cuh"

namespace {

constexpr int AT_T = 128;                           /* threads = keys a tile */
constexpr int AT_DC = 64;                           /* key dims staged at a time */
constexpr int AT_HB = 4;                            /* most query heads a block */
constexpr int AT_A = AT_HB * CU_ATTN_MAX_HD / AT_T; /* outputs a thread accumulates */
constexpr int AT_W = AT_T / 32;                     /* warps */

/* Folds a chunk's (m, l) into the running (M, L) and gives the factors its values and
 * the running ones are scaled by: O = O fa + acc fb. A chunk whose scores are all -inf
 * (none in practice) changes nothing. */
__device__ __forceinline__ void at_fold(float &M, float &L, float m, float l, float &fa, float &fb) {
    if (m == -INFINITY) {
        fa = 1.0f, fb = 0.0f;
        return;
    }
    const float mn = fmaxf(M, m);
    fa = M == -INFINITY ? 0.0f : expf(M - mn);
    fb = expf(m - mn);
    L = fmaf(L, fa, __fmul_rn(l, fb));
    M = mn;
}

__device__ __forceinline__ float at_scale2(float o, float fa, float acc, float fb) {
    return fmaf(o, fa, __fmul_rn(acc, fb));
}

/* The slot of key j of a row whose segments are segs[s0 .. s1). */
__device__ __forceinline__ int32_t at_slot(const int32_t *segs, int s0, int64_t j) {
    int si = s0;
    while (j >= segs[2 * si + 1]) j -= segs[2 * si + 1], si++;
    return segs[2 * si] + (int32_t)j;
}

struct at_args {
    float *out, *part; /* part: NULL, or (n_rows, n_head, n_chunks, head_dim + 2) partials */
    const float *q, *kc, *vc, *sinks;
    const int32_t *seg_off, *segs;
    int n_head, n_head_kv, hd, n_sub, n_chunks;
    float scale;
};

/* One block's shared memory. */
struct at_smem {
    float qs[AT_HB][CU_ATTN_MAX_HD];
    float ks[AT_T][AT_DC + 1];
    float p[AT_HB][AT_T];
    int32_t slot[AT_T];
    float red[AT_HB][AT_W];
    float m[AT_HB], l[AT_HB], corr[AT_HB];
};

/* This thread's key scores for the tile's cnt keys (slots in sm.slot), for nh heads. */
__device__ void at_scores(const at_args &a, at_smem &sm, int64_t kv_off, int cnt, int nh,
                          float score[AT_HB]) {
    const int t = threadIdx.x;
    const int64_t kv_stride = (int64_t)a.n_head_kv * a.hd;
    float dot[AT_HB];
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) dot[h] = 0.0f;
    for (int dc = 0; dc < a.hd; dc += AT_DC) {
        const int dw = a.hd - dc < AT_DC ? a.hd - dc : AT_DC;
        for (int e = t; e < cnt * dw; e += AT_T)
            sm.ks[e / dw][e % dw] = a.kc[sm.slot[e / dw] * kv_stride + kv_off + dc + e % dw];
        __syncthreads();
        if (t < cnt)
            for (int d = 0; d < dw; d++) {
                const float kd = sm.ks[t][d];
CU_UNROLL
                for (int h = 0; h < AT_HB; h++)
                    if (h < nh) dot[h] = fmaf(sm.qs[h][dc + d], kd, dot[h]);
            }
        __syncthreads();
    }
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) score[h] = t < cnt ? __fmul_rn(dot[h], a.scale) : -INFINITY;
}

/* Online softmax over one tile: the heads' running max, sum and correction in sm; the
 * tile's weights in sm.p. */
__device__ void at_softmax(at_smem &sm, int nh, const float score[AT_HB]) {
    const int t = threadIdx.x, lane = t % 32, w = t / 32;
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) {
        if (h >= nh) break;
        const float mx = cu::warp_max(score[h]);
        if (lane == 0) sm.red[h][w] = mx;
    }
    __syncthreads();
    if (t < nh) {
        float mt = sm.m[t];
        for (int i = 0; i < AT_W; i++) mt = fmaxf(mt, sm.red[t][i]);
        sm.corr[t] = sm.m[t] == -INFINITY ? 0.0f : expf(sm.m[t] - mt);
        sm.m[t] = mt;
    }
    __syncthreads();
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) {
        if (h >= nh) break;
        const float e = score[h] == -INFINITY ? 0.0f : expf(score[h] - sm.m[h]);
        sm.p[h][t] = e;
        const float s = cu::warp_sum(e);
        if (lane == 0) sm.red[h][w] = s;
    }
    __syncthreads();
    if (t < nh) {
        float s = 0.0f;
        for (int i = 0; i < AT_W; i++) s += sm.red[t][i];
        sm.l[t] = fmaf(sm.l[t], sm.corr[t], s);
    }
    __syncthreads();
}

/* One chunk's partial: keys [j0, j1) of the row into acc (items t + AT_T i: head item /
 * hd, dim item % hd) and sm.m, sm.l, which start the chunk at -inf and 0. */
__device__ void at_chunk(const at_args &a, at_smem &sm, int s0, int64_t j0, int64_t j1,
                         int64_t kv_off, int nh, float acc[AT_A]) {
    const int t = threadIdx.x;
    const int64_t kv_stride = (int64_t)a.n_head_kv * a.hd;
CU_UNROLL
    for (int i = 0; i < AT_A; i++) acc[i] = 0.0f;
    if (t < nh) sm.m[t] = -INFINITY, sm.l[t] = 0.0f;
    for (int64_t k0 = j0; k0 < j1; k0 += AT_T) {
        const int cnt = j1 - k0 < AT_T ? (int)(j1 - k0) : AT_T;
        if (t < cnt) sm.slot[t] = at_slot(a.segs, s0, k0 + t);
        __syncthreads();
        float score[AT_HB];
        at_scores(a, sm, kv_off, cnt, nh, score);
        at_softmax(sm, nh, score);
CU_UNROLL
        for (int i = 0; i < AT_A; i++) {
            const int item = t + i * AT_T;
            if (item >= nh * a.hd) break;
            const int h = item / a.hd, d = item % a.hd;
            float s = 0.0f;
            for (int k = 0; k < cnt; k++) s = fmaf(sm.p[h][k], a.vc[sm.slot[k] * kv_stride + kv_off + d], s);
            acc[i] = fmaf(acc[i], sm.corr[h], s);
        }
        __syncthreads(); /* slot and p are rewritten by the next tile */
    }
}

__global__ void __launch_bounds__(AT_T) k_attn(at_args a, int32_t row0) {
    __shared__ at_smem sm;
    __shared__ float fa_s[AT_HB], fb_s[AT_HB], M_s[AT_HB], L_s[AT_HB];
    const int t = threadIdx.x, row = row0 + (int)blockIdx.y, z = (int)blockIdx.z;
    const int g = (int)blockIdx.x / a.n_sub, sub = (int)blockIdx.x % a.n_sub;
    const int G = a.n_head / a.n_head_kv, h0 = g * G + sub * AT_HB;
    const int nh = G - sub * AT_HB < AT_HB ? G - sub * AT_HB : AT_HB;
    const int64_t kv_off = (int64_t)g * a.hd;
    const int s0 = a.seg_off[row], s1 = a.seg_off[row + 1];
    int64_t total = 0;
    for (int si = s0; si < s1; si++) total += a.segs[2 * si + 1];
    const int64_t n_chunks = (total + CU_ATTN_CHUNK - 1) / CU_ATTN_CHUNK;
    if (a.part && z >= n_chunks) return; /* (a split launch's blocks past this row's keys) */
    for (int e = t; e < nh * a.hd; e += AT_T)
        sm.qs[e / a.hd][e % a.hd] = a.q[((int64_t)row * a.n_head + h0 + e / a.hd) * a.hd + e % a.hd];
    float acc[AT_A], o[AT_A];
    if (a.part) { /* one chunk, its partial left for k_attn_merge */
        const int64_t j0 = (int64_t)z * CU_ATTN_CHUNK;
        at_chunk(a, sm, s0, j0, total - j0 < CU_ATTN_CHUNK ? total : j0 + CU_ATTN_CHUNK, kv_off, nh, acc);
        const int stride = a.hd + 2;
        float *pr = a.part + (((int64_t)row * a.n_head + h0) * a.n_chunks + z) * stride;
        if (t < nh) pr[(int64_t)t * a.n_chunks * stride] = sm.m[t], pr[(int64_t)t * a.n_chunks * stride + 1] = sm.l[t];
CU_UNROLL
        for (int i = 0; i < AT_A; i++) {
            const int item = t + i * AT_T;
            if (item >= nh * a.hd) break;
            pr[(int64_t)(item / a.hd) * a.n_chunks * stride + 2 + item % a.hd] = acc[i];
        }
        return;
    }
CU_UNROLL
    for (int i = 0; i < AT_A; i++) o[i] = 0.0f;
    if (t < nh) M_s[t] = -INFINITY, L_s[t] = 0.0f;
    __syncthreads(); /* (a row without keys reads L_s next) */
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t j0 = c * CU_ATTN_CHUNK;
        at_chunk(a, sm, s0, j0, total - j0 < CU_ATTN_CHUNK ? total : j0 + CU_ATTN_CHUNK, kv_off, nh, acc);
        if (t < nh) at_fold(M_s[t], L_s[t], sm.m[t], sm.l[t], fa_s[t], fb_s[t]);
        __syncthreads();
CU_UNROLL
        for (int i = 0; i < AT_A; i++) {
            const int item = t + i * AT_T;
            if (item >= nh * a.hd) break;
            o[i] = at_scale2(o[i], fa_s[item / a.hd], acc[i], fb_s[item / a.hd]);
        }
        __syncthreads(); /* fa_s, fb_s and sm's stats are rewritten by the next chunk */
    }
    if (a.sinks) { /* the sink: one more chunk of weight e^s and no value */
        if (t < nh) at_fold(M_s[t], L_s[t], a.sinks[h0 + t], 1.0f, fa_s[t], fb_s[t]);
        __syncthreads();
CU_UNROLL
        for (int i = 0; i < AT_A; i++) {
            const int item = t + i * AT_T;
            if (item >= nh * a.hd) break;
            o[i] = at_scale2(o[i], fa_s[item / a.hd], 0.0f, fb_s[item / a.hd]);
        }
    }
CU_UNROLL
    for (int i = 0; i < AT_A; i++) {
        const int item = t + i * AT_T;
        if (item >= nh * a.hd) break;
        const float L = L_s[item / a.hd];
        a.out[((int64_t)row * a.n_head + h0 + item / a.hd) * a.hd + item % a.hd] = L > 0.0f ? o[i] / L : 0.0f;
    }
}

/* Folds a row's chunk partials in order: one block a (head, row), a thread a dim. */
__global__ void __launch_bounds__(CU_ATTN_MAX_HD) k_attn_merge(at_args a, int32_t row0) {
    const int d = threadIdx.x, h = (int)blockIdx.x, row = row0 + (int)blockIdx.y;
    if (d >= a.hd) return;
    const int s0 = a.seg_off[row], s1 = a.seg_off[row + 1];
    int64_t total = 0;
    for (int si = s0; si < s1; si++) total += a.segs[2 * si + 1];
    const int64_t n_chunks = (total + CU_ATTN_CHUNK - 1) / CU_ATTN_CHUNK;
    const float *pr = a.part + ((int64_t)row * a.n_head + h) * a.n_chunks * (a.hd + 2);
    float M = -INFINITY, L = 0.0f, o = 0.0f, fa, fb;
    for (int64_t c = 0; c < n_chunks; c++, pr += a.hd + 2) {
        at_fold(M, L, pr[0], pr[1], fa, fb);
        o = at_scale2(o, fa, pr[2 + d], fb);
    }
    if (a.sinks) {
        at_fold(M, L, a.sinks[h], 1.0f, fa, fb);
        o = at_scale2(o, fa, 0.0f, fb);
    }
    a.out[((int64_t)row * a.n_head + h) * a.hd + d] = L > 0.0f ? o / L : 0.0f;
}

} /* namespace */

extern "C" int32_t cu_attention_subs(int32_t n_head, int32_t n_head_kv) {
    return (n_head / n_head_kv + AT_HB - 1) / AT_HB;
}

extern "C" void cu_attention(float *out, const float *q, const float *k, const float *v,
                             const int32_t *seg_off, const int32_t *segs, int32_t n_rows,
                             int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
                             const float *sinks, float *part, int32_t n_chunks, cu_stream s) {
    if (n_rows <= 0 || n_head <= 0) return;
    const int n_sub = cu_attention_subs(n_head, n_head_kv);
    const at_args a = {out, n_chunks > 0 ? part : nullptr, q, k, v, sinks, seg_off, segs, n_head,
                       n_head_kv, head_dim, n_sub, n_chunks, scale};
    for (int32_t r0 = 0; r0 < n_rows; r0 += 65535) { /* CUDA's most blocks in y */
        const unsigned n = (unsigned)(n_rows - r0 < 65535 ? n_rows - r0 : 65535);
        CU_LAUNCH(k_attn, dim3((unsigned)(n_head_kv * n_sub), n, a.part ? (unsigned)n_chunks : 1u),
                  AT_T, 0, s, a, r0);
        if (a.part)
            CU_LAUNCH(k_attn_merge, dim3((unsigned)n_head, n), (unsigned)((head_dim + 31) / 32 * 32),
                      0, s, a, r0);
    }
}
