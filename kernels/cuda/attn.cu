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
 * Cascade: rows that hold the same keys at the same places of their sequences (leaves over
 * one context) share those whole chunks; one block takes a shared chunk for up to AT_R such
 * rows, staging each key once and scoring it against every row's queries, and leaves the
 * rows' partials beside those of their own chunks for k_attn_merge. Per row the operations
 * and their order are those of the row alone (the same chunks, tiles and folds), so the
 * bits are too.
 *
 * Scores: a tile's keys are staged in shared memory 64 dims at a time (coalesced reads,
 * rows padded by one word against bank conflicts), one key a thread. A head's attention
 * sink (gpt-oss) is folded last as one more chunk: weight e^sink, no value. Contract: cu.h. */
#include "kernels/cuda/common.cuh"

#include <algorithm>

namespace {

constexpr int AT_T = 128;                           /* threads = keys a tile */
constexpr int AT_DC = 64;                           /* key dims staged at a time */
constexpr int AT_HB = 4;                            /* most query heads a block */
constexpr int AT_A = AT_HB * CU_ATTN_MAX_HD / AT_T; /* outputs a thread accumulates */
constexpr int AT_W = AT_T / 32;                     /* warps */
constexpr int AT_R = CU_ATTN_ROWS;                  /* most rows a cascade block */

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
    const int32_t *casc, *nsh; /* cascade groups (first row, rows, shared chunks) and each
                                  row's shared chunks, or NULL: none */
    int n_head, n_head_kv, hd, n_sub, n_chunks;
    float scale;
};

/* The query rows [row0, row0 + nr) and heads [h0, h0 + nh) a block scores keys for. */
struct at_q {
    int row0, nr, h0, nh;
};

/* One block's shared memory, for NR query rows. */
template <int NR> struct at_smem {
    float qs[NR][AT_HB][AT_DC];
    float ks[AT_T][AT_DC + 1];
    float p[AT_HB][AT_T];
    int32_t slot[AT_T];
    float red[AT_HB][AT_W];
    float m[NR][AT_HB], l[NR][AT_HB], corr[AT_HB];
};

/* This thread's key scores for the tile's cnt keys (slots in sm.slot), for the rows and
 * heads of w: each key's dims staged once for all of them. */
template <int NR>
__device__ __forceinline__ void at_scores(const at_args &a, at_smem<NR> &sm, const at_q &w, int64_t kv_off, int cnt,
                          float score[NR][AT_HB]) {
    const int t = threadIdx.x;
    const int64_t kv_stride = (int64_t)a.n_head_kv * a.hd;
    float dot[NR][AT_HB];
CU_UNROLL
    for (int r = 0; r < NR; r++)
CU_UNROLL
        for (int h = 0; h < AT_HB; h++) dot[r][h] = 0.0f;
    for (int dc = 0; dc < a.hd; dc += AT_DC) {
        const int dw = a.hd - dc < AT_DC ? a.hd - dc : AT_DC;
        for (int e = t; e < cnt * dw; e += AT_T)
            sm.ks[e / dw][e % dw] = a.kc[sm.slot[e / dw] * kv_stride + kv_off + dc + e % dw];
        for (int e = t; e < w.nr * w.nh * dw; e += AT_T) {
            const int r = e / (w.nh * dw), h = e / dw % w.nh;
            sm.qs[r][h][e % dw] = a.q[((int64_t)(w.row0 + r) * a.n_head + w.h0 + h) * a.hd + dc + e % dw];
        }
        __syncthreads();
        if (t < cnt)
            for (int d = 0; d < dw; d++) {
                const float kd = sm.ks[t][d];
CU_UNROLL
                for (int r = 0; r < NR; r++)
CU_UNROLL
                    for (int h = 0; h < AT_HB; h++)
                        if (r < w.nr && h < w.nh) dot[r][h] = fmaf(sm.qs[r][h][d], kd, dot[r][h]);
            }
        __syncthreads();
    }
CU_UNROLL
    for (int r = 0; r < NR; r++)
CU_UNROLL
        for (int h = 0; h < AT_HB; h++) score[r][h] = t < cnt ? __fmul_rn(dot[r][h], a.scale) : -INFINITY;
}

/* Online softmax over one tile for query row r of the block: its heads' running max and
 * sum in sm.m[r], sm.l[r], the correction in sm.corr; the tile's weights in sm.p. */
template <int NR> __device__ __forceinline__ void at_softmax(at_smem<NR> &sm, int r, int nh, const float score[AT_HB]) {
    const int t = threadIdx.x, lane = t % 32, w = t / 32;
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) {
        if (h >= nh) break;
        const float mx = cu::warp_max(score[h]);
        if (lane == 0) sm.red[h][w] = mx;
    }
    __syncthreads();
    if (t < nh) {
        float mt = sm.m[r][t];
        for (int i = 0; i < AT_W; i++) mt = fmaxf(mt, sm.red[t][i]);
        sm.corr[t] = sm.m[r][t] == -INFINITY ? 0.0f : expf(sm.m[r][t] - mt);
        sm.m[r][t] = mt;
    }
    __syncthreads();
CU_UNROLL
    for (int h = 0; h < AT_HB; h++) {
        if (h >= nh) break;
        const float e = score[h] == -INFINITY ? 0.0f : expf(score[h] - sm.m[r][h]);
        sm.p[h][t] = e;
        const float s = cu::warp_sum(e);
        if (lane == 0) sm.red[h][w] = s;
    }
    __syncthreads();
    if (t < nh) {
        float s = 0.0f;
        for (int i = 0; i < AT_W; i++) s += sm.red[t][i];
        sm.l[r][t] = fmaf(sm.l[r][t], sm.corr[t], s);
    }
    __syncthreads();
}

/* The tile's weighted values (sm.p, cnt keys) added to one row's acc, rescaled first. */
template <int NR>
__device__ __forceinline__ void at_values(const at_args &a, const at_smem<NR> &sm, int64_t kv_off, int cnt, int nh,
                          float acc[AT_A]) {
    const int t = threadIdx.x;
    const int64_t kv_stride = (int64_t)a.n_head_kv * a.hd;
CU_UNROLL
    for (int i = 0; i < AT_A; i++) {
        const int item = t + i * AT_T;
        if (item >= nh * a.hd) break;
        const int h = item / a.hd, d = item % a.hd;
        float s = 0.0f;
CU_UNROLL_BY((NR > 1 ? 1 : 4)) /* (a cascade block's rows' loops unrolled spill on sm_80) */
        for (int k = 0; k < cnt; k++) s = fmaf(sm.p[h][k], a.vc[sm.slot[k] * kv_stride + kv_off + d], s);
        acc[i] = fmaf(acc[i], sm.corr[h], s);
    }
}

/* One chunk's partial for the rows of w: keys [j0, j1) of the sequence of segments from s0
 * (the same slots for every row) into acc[r] (items t + AT_T i: head item / hd, dim item
 * % hd) and sm.m[r], sm.l[r], which start the chunk at -inf and 0. The rows take each tile
 * one after another, so each row's operations are those it runs alone. */
template <int NR>
__device__ __forceinline__ void at_chunk(const at_args &a, at_smem<NR> &sm, const at_q &w, int s0, int64_t j0, int64_t j1,
                         int64_t kv_off, float acc[NR][AT_A]) {
    const int t = threadIdx.x;
CU_UNROLL
    for (int r = 0; r < NR; r++)
CU_UNROLL
        for (int i = 0; i < AT_A; i++) acc[r][i] = 0.0f;
    if (t < w.nh)
        for (int r = 0; r < NR; r++) sm.m[r][t] = -INFINITY, sm.l[r][t] = 0.0f;
    for (int64_t k0 = j0; k0 < j1; k0 += AT_T) {
        const int cnt = j1 - k0 < AT_T ? (int)(j1 - k0) : AT_T;
        if (t < cnt) sm.slot[t] = at_slot(a.segs, s0, k0 + t);
        __syncthreads();
        float score[NR][AT_HB];
        at_scores(a, sm, w, kv_off, cnt, score);
CU_UNROLL
        for (int r = 0; r < NR; r++)
            if (r < w.nr) { /* (at_softmax's barriers order this row's p after the last's reads) */
                at_softmax(sm, r, w.nh, score[r]);
                at_values(a, sm, kv_off, cnt, w.nh, acc[r]);
            }
        __syncthreads(); /* slot and p are rewritten by the next tile */
    }
}

/* Query row r of the block (batch row `row`) leaves its partial of chunk z in a.part. */
template <int NR>
__device__ __forceinline__ void at_put(const at_args &a, const at_smem<NR> &sm, int r, int row, int h0, int z, int nh,
                       const float acc[AT_A]) {
    const int t = threadIdx.x, stride = a.hd + 2;
    float *pr = a.part + (((int64_t)row * a.n_head + h0) * a.n_chunks + z) * stride;
    if (t < nh) pr[(int64_t)t * a.n_chunks * stride] = sm.m[r][t], pr[(int64_t)t * a.n_chunks * stride + 1] = sm.l[r][t];
CU_UNROLL
    for (int i = 0; i < AT_A; i++) {
        const int item = t + i * AT_T;
        if (item >= nh * a.hd) break;
        pr[(int64_t)(item / a.hd) * a.n_chunks * stride + 2 + item % a.hd] = acc[i];
    }
}

__global__ void __launch_bounds__(AT_T) k_attn(at_args a, int32_t row0) {
    __shared__ at_smem<1> sm;
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
    /* (a split launch's blocks past this row's keys, or on a chunk k_attn_shared takes) */
    if (a.part && (z >= n_chunks || (a.nsh && z < a.nsh[row]))) return;
    const at_q w = {row, 1, h0, nh};
    float acc[1][AT_A], o[AT_A];
    if (a.part) { /* one chunk, its partial left for k_attn_merge */
        const int64_t j0 = (int64_t)z * CU_ATTN_CHUNK;
        at_chunk(a, sm, w, s0, j0, total - j0 < CU_ATTN_CHUNK ? total : j0 + CU_ATTN_CHUNK, kv_off, acc);
        at_put(a, sm, 0, row, h0, z, nh, acc[0]);
        return;
    }
CU_UNROLL
    for (int i = 0; i < AT_A; i++) o[i] = 0.0f;
    if (t < nh) M_s[t] = -INFINITY, L_s[t] = 0.0f;
    __syncthreads(); /* (a row without keys reads L_s next) */
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t j0 = c * CU_ATTN_CHUNK;
        at_chunk(a, sm, w, s0, j0, total - j0 < CU_ATTN_CHUNK ? total : j0 + CU_ATTN_CHUNK, kv_off, acc);
        if (t < nh) at_fold(M_s[t], L_s[t], sm.m[0][t], sm.l[0][t], fa_s[t], fb_s[t]);
        __syncthreads();
CU_UNROLL
        for (int i = 0; i < AT_A; i++) {
            const int item = t + i * AT_T;
            if (item >= nh * a.hd) break;
            o[i] = at_scale2(o[i], fa_s[item / a.hd], acc[0][i], fb_s[item / a.hd]);
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

/* The shared chunks: one block a (KV head, up to 4 of its query heads, cascade group g0 +
 * y, chunk z < the group's shared chunks), each key staged once for the group's rows. */
__global__ void __launch_bounds__(AT_T) k_attn_shared(at_args a, int32_t g0) {
    __shared__ at_smem<AT_R> sm;
    const int32_t *gr = a.casc + 3 * ((int64_t)g0 + blockIdx.y);
    const int z = (int)blockIdx.z;
    if (z >= gr[2]) return;
    const int g = (int)blockIdx.x / a.n_sub, sub = (int)blockIdx.x % a.n_sub;
    const int G = a.n_head / a.n_head_kv, h0 = g * G + sub * AT_HB;
    const at_q w = {gr[0], gr[1], h0, G - sub * AT_HB < AT_HB ? G - sub * AT_HB : AT_HB};
    float acc[AT_R][AT_A];
    const int64_t j0 = (int64_t)z * CU_ATTN_CHUNK;
    at_chunk(a, sm, w, a.seg_off[w.row0], j0, j0 + CU_ATTN_CHUNK, (int64_t)g * a.hd, acc);
CU_UNROLL
    for (int r = 0; r < AT_R; r++)
        if (r < w.nr) at_put(a, sm, r, w.row0 + r, h0, z, w.nh, acc[r]);
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
                             const float *sinks, float *part, int32_t n_chunks, const int32_t *casc,
                             int32_t n_casc, const int32_t *nsh, cu_stream s) {
    if (n_rows <= 0 || n_head <= 0) return;
    const int n_sub = cu_attention_subs(n_head, n_head_kv);
    const bool split = n_chunks > 0 && part;
    const at_args a = {out, split ? part : nullptr, q, k, v, sinks, seg_off, segs,
                       split && n_casc > 0 ? casc : nullptr, split && n_casc > 0 ? nsh : nullptr,
                       n_head, n_head_kv, head_dim, n_sub, n_chunks, scale};
    for (int32_t g0 = 0; a.casc && g0 < n_casc; g0 += 65535) {
        const unsigned n = (unsigned)(n_casc - g0 < 65535 ? n_casc - g0 : 65535);
        CU_LAUNCH(k_attn_shared, dim3((unsigned)(n_head_kv * n_sub), n, (unsigned)n_chunks), AT_T, 0, s, a, g0);
    }
    for (int32_t r0 = 0; r0 < n_rows; r0 += 65535) { /* CUDA's most blocks in y */
        const unsigned n = (unsigned)(n_rows - r0 < 65535 ? n_rows - r0 : 65535);
        CU_LAUNCH(k_attn, dim3((unsigned)(n_head_kv * n_sub), n, a.part ? (unsigned)n_chunks : 1u),
                  AT_T, 0, s, a, r0);
        if (a.part)
            CU_LAUNCH(k_attn_merge, dim3((unsigned)n_head, n), (unsigned)((head_dim + 31) / 32 * 32),
                      0, s, a, r0);
    }
}

/* The length of the common start of rows r1's and r2's key sequences (segs: start, len
 * pairs). */
static int64_t at_common(const int32_t *seg_off, const int32_t *segs, int32_t r1, int32_t r2) {
    int32_t i = seg_off[r1], j = seg_off[r2], oi = 0, oj = 0;
    int64_t n = 0;
    while (i < seg_off[r1 + 1] && j < seg_off[r2 + 1] && segs[2 * i] + oi == segs[2 * j] + oj) {
        const int32_t take = std::min(segs[2 * i + 1] - oi, segs[2 * j + 1] - oj);
        n += take, oi += take, oj += take;
        if (oi == segs[2 * i + 1]) i++, oi = 0;
        if (oj == segs[2 * j + 1]) j++, oj = 0;
    }
    return n;
}

extern "C" int32_t cu_attention_groups(const int32_t *seg_off, const int32_t *segs, int32_t n_rows,
                                       int32_t *casc, int32_t *nsh) {
    int32_t n = 0;
    for (int32_t r = 0; r < n_rows;) {
        int32_t k = 1;
        int64_t common = INT64_MAX;
        for (; k < AT_R && r + k < n_rows; k++) {
            const int64_t c = at_common(seg_off, segs, r, r + k);
            if (c < CU_ATTN_CHUNK) break;
            common = std::min(common, c);
        }
        const int32_t ns = k > 1 ? (int32_t)(common / CU_ATTN_CHUNK) : 0;
        for (int32_t i = 0; i < k; i++) nsh[r + i] = ns;
        if (ns > 0) casc[3 * n] = r, casc[3 * n + 1] = k, casc[3 * n + 2] = ns, n++;
        r += k;
    }
    return n;
}
