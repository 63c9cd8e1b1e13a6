/* topk.cu - each logits row's top-k and log-sum-exp on the GPU, so that a step brings back
 * k (id, log-probability) pairs per row instead of the row. One block a row: every thread
 * keeps the top-k of its strided share in order (as the step's scan does: a value enters
 * only above the last kept), the block finds the row's max and sum of exps, then k rounds
 * of a block-wide arg-max over the threads' list heads merge the lists. Contract: cu.h. */
#include <algorithm>
#include <climits>

#include "kernels/cuda/common.cuh"

namespace {

constexpr int TOPK_THREADS = 256;

/* (v, i) ranks before (bv, bi): larger value, then lower id; id INT_MAX is "none" */
__device__ __forceinline__ bool ranks_before(float v, int i, float bv, int bi) {
    return i != INT_MAX && (bi == INT_MAX || v > bv || (v == bv && i < bi));
}

__device__ __forceinline__ void warp_best(float *v, int *i) {
    for (int o = 16; o > 0; o /= 2) {
        const float ov = __shfl_xor_sync(cu::FULL, *v, o);
        const int oi = __shfl_xor_sync(cu::FULL, *i, o);
        if (ranks_before(ov, oi, *v, *i)) *v = ov, *i = oi;
    }
}

__global__ void __launch_bounds__(TOPK_THREADS)
k_topk_lse(const float *logits, int n_vocab, int k, int stride, int32_t *ids, float *logprobs,
           float *mx_out, double *log_sum_out) {
    __shared__ float fred[32];
    __shared__ double dred[32];
    __shared__ int ired[32];
    const float *x = logits + (int64_t)blockIdx.x * n_vocab;
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;

    float tv[CU_TOPK_MAX];
    int ti[CU_TOPK_MAX];
    int cnt = 0;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) {
        const float v = x[i];
        mx = fmaxf(mx, v);
        if (k == 0 || (cnt == k && !(v > tv[k - 1]))) continue;
        int j = cnt < k ? cnt++ : k - 1;
        for (; j > 0 && tv[j - 1] < v; j--) tv[j] = tv[j - 1], ti[j] = ti[j - 1];
        tv[j] = v;
        ti[j] = i;
    }
    mx = cu::block_max(mx, fred, -INFINITY);
    double sum = 0.0;
    for (int i = threadIdx.x; i < n_vocab; i += blockDim.x) sum += (double)expf(x[i] - mx);
    const double log_sum = log(cu::block_sum(sum, dred));
    if (threadIdx.x == 0) {
        if (mx_out) mx_out[blockIdx.x] = mx;
        if (log_sum_out) log_sum_out[blockIdx.x] = log_sum;
    }

    int head = 0;
    for (int r = 0; r < k; r++) {
        float v = head < cnt ? tv[head] : -INFINITY;
        int id = head < cnt ? ti[head] : INT_MAX;
        warp_best(&v, &id);
        __syncthreads(); /* the previous round has read fred / ired */
        if (lane == 0) fred[w] = v, ired[w] = id;
        __syncthreads();
        v = lane < nw ? fred[lane] : -INFINITY;
        id = lane < nw ? ired[lane] : INT_MAX;
        warp_best(&v, &id);
        if (head < cnt && ti[head] == id) head++;
        if (threadIdx.x == 0) {
            ids[(int64_t)blockIdx.x * stride + r] = id;
            logprobs[(int64_t)blockIdx.x * stride + r] =
                (float)__dsub_rn((double)__fsub_rn(v, mx), log_sum); /* kern_logprob */
        }
    }
}

} /* namespace */

extern "C" int32_t cu_topk_lse(const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                               int32_t *ids, float *logprobs, float *mx, double *log_sum,
                               cu_stream s) {
    const int32_t kk = std::max(0, std::min(std::min(k, n_vocab), (int32_t)CU_TOPK_MAX));
    if (n_rows <= 0 || n_vocab <= 0 || (kk == 0 && !mx && !log_sum)) return kk;
    CU_LAUNCH(k_topk_lse, n_rows, TOPK_THREADS, 0, s, logits, n_vocab, kk, k, ids, logprobs,
              mx, log_sum);
    return kk;
}
