/* attn.cu - segment attention on the GPU (kern_ops.attention): one block a (head, row). A
 * row's keys are the slots of its segments in the order given; the block walks them in
 * tiles of ATT_T, one key a thread for the scores (a float dot product over the head),
 * then every thread folds the tile into its head dims with the online-softmax rule
 * (rescale by exp(m_old - m_new)). The tile's max and sums are read by every thread from
 * shared memory in key order, so all threads hold the same m and l without a shuffle
 * tree. Contract: cu.h. */
#include "kernels/cuda/common.cuh"

namespace {

constexpr int ATT_T = 128;                         /* threads = keys per tile */
constexpr int ATT_D = CU_ATTN_MAX_HD / ATT_T;      /* head dims a thread accumulates */

__global__ void __launch_bounds__(ATT_T)
k_attention(float *out, const float *q, const float *kc, const float *vc, const int32_t *seg_off,
            const int32_t *segs, int n_head, int n_head_kv, int hd, float scale) {
    __shared__ float qs[CU_ATTN_MAX_HD];
    __shared__ float p[ATT_T];
    __shared__ int32_t slot[ATT_T];
    const int t = threadIdx.x, h = blockIdx.x, row = blockIdx.y;
    const int64_t q_stride = (int64_t)n_head * hd, kv_stride = (int64_t)n_head_kv * hd;
    const int64_t kv_off = (int64_t)(h / (n_head / n_head_kv)) * hd;
    const float *qr = q + row * q_stride + (int64_t)h * hd;
    for (int d = t; d < hd; d += ATT_T) qs[d] = qr[d];
    __syncthreads();
    const int s0 = seg_off[row], s1 = seg_off[row + 1];
    int64_t total = 0;
    for (int si = s0; si < s1; si++) total += segs[2 * si + 1];
    int si = s0;       /* this thread's key: segment si, key index base of its first slot */
    int64_t base = 0;
    float m = -INFINITY, l = 0.0f, acc[ATT_D];
CU_UNROLL
    for (int i = 0; i < ATT_D; i++) acc[i] = 0.0f;
    for (int64_t j0 = 0; j0 < total; j0 += ATT_T) {
        const int64_t j = j0 + t;
        const int cnt = total - j0 < ATT_T ? (int)(total - j0) : ATT_T;
        float score = -INFINITY;
        int32_t sl = 0;
        if (j < total) {
            while (j >= base + segs[2 * si + 1]) base += segs[2 * si + 1], si++;
            sl = segs[2 * si] + (int32_t)(j - base);
            const float *kr = kc + sl * kv_stride + kv_off;
            float dot = 0.0f;
            for (int d = 0; d < hd; d++) dot += qs[d] * kr[d];
            score = dot * scale;
        }
        __syncthreads(); /* the last tile's p and slot are read */
        p[t] = score;
        slot[t] = sl;
        __syncthreads();
        float mt = m;
        for (int i = 0; i < cnt; i++) mt = fmaxf(mt, p[i]);
        const float corr = expf(m - mt);
        __syncthreads(); /* every thread has its max before p becomes the weights */
        p[t] = t < cnt ? expf(score - mt) : 0.0f;
        __syncthreads();
        float sum = 0.0f;
        for (int i = 0; i < cnt; i++) sum += p[i];
        l = l * corr + sum;
CU_UNROLL
        for (int a = 0; a < ATT_D; a++) {
            const int d = t + a * ATT_T;
            if (d >= hd) break;
            float s = 0.0f;
            for (int i = 0; i < cnt; i++) s += p[i] * vc[slot[i] * kv_stride + kv_off + d];
            acc[a] = acc[a] * corr + s;
        }
        m = mt;
    }
    float *o = out + row * q_stride + (int64_t)h * hd;
CU_UNROLL
    for (int a = 0; a < ATT_D; a++) {
        const int d = t + a * ATT_T;
        if (d < hd) o[d] = l > 0.0f ? acc[a] / l : 0.0f;
    }
}

} /* namespace */

extern "C" void cu_attention(float *out, const float *q, const float *k, const float *v,
                             const int32_t *seg_off, const int32_t *segs, int32_t n_rows,
                             int32_t n_head, int32_t n_head_kv, int32_t head_dim, float scale,
                             cu_stream s) {
    if (n_rows <= 0 || n_head <= 0) return;
    for (int32_t r0 = 0; r0 < n_rows; r0 += 65535) { /* CUDA's most blocks in y */
        const int32_t n = n_rows - r0 < 65535 ? n_rows - r0 : 65535;
        CU_LAUNCH(k_attention, dim3((unsigned)n_head, (unsigned)n), ATT_T, 0, s,
                  out + (int64_t)r0 * n_head * head_dim, q + (int64_t)r0 * n_head * head_dim,
                  k, v, seg_off + r0, segs, (int)n_head, (int)n_head_kv, (int)head_dim, scale);
    }
}
