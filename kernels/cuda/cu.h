/* cu.h - the host-side launchers of the CUDA kernels in kernels/cuda/ (the .cu files), callable from C
 * and C++. Every pointer is a device pointer (host memory under the emulator, emu.h);
 * nothing here allocates, copies or synchronises: each call queues one kernel on stream s
 * (NULL: the default stream) and returns. Launch errors show up in the caller's next
 * cudaGetLastError / stream synchronisation. Each op has the contract of its kern_ops
 * twin in kernels/kern.h (ref/ is the oracle); what differs is stated per function.
 *
 * These are the pieces the CUDA backend (backend.cu: buffers, prepared weights, the KV
 * cache, outputs, errors) is made of. */
#ifndef MD_CUDA_CU_H
#define MD_CUDA_CU_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* the CUDA runtime's cudaStream_t, spelled so that C can name it */
typedef struct CUstream_st *cu_stream;

/* Whether these kernels run under the CPU emulator (emu.h) rather than on a GPU. */
bool cu_emulated(void);
/* Kernels launched so far under the emulator (every instance's), 0 on a GPU. */
uint64_t cu_emu_launches(void);

struct kern_backend;
/* Bytes the cuda backend b has copied from the device to the host so far (download,
 * matmul into host memory, topk_lse's results): what a test counts to see that rows
 * left on the device stay there. */
uint64_t cu_d2h_bytes(struct kern_backend *b);
/* Copies b has made from the device to the host so far: each a round trip the host waits for. */
uint64_t cu_d2h_copies(struct kern_backend *b);
/* Chunk reads of keys the cascade has saved b's attention so far: a group's shared chunks
 * once for all its rows instead of once a row. */
uint64_t cu_attn_shared(struct kern_backend *b);
/* Bytes b has copied from the host to the device so far (the batch's small arrays,
 * upload, rows staged for topk_lse), the prepared weights aside. */
uint64_t cu_h2d_bytes(struct kern_backend *b);
/* Device allocations (cudaMalloc calls) b has made so far: what a test counts to see
 * that a step reuses its buffers. */
uint64_t cu_dev_allocs(struct kern_backend *b);

/* What became of the segments of steps b recorded (backend.cu, graphs.h): captured into a
 * new graph (a signature's second sighting), replayed from one, or run as recorded (its
 * first sighting, or cut short by an op that frees memory); graphs: those kept now;
 * arena: the bytes of batch arrays a step may stage (grown after a step that needed
 * more). All 0 with MD_CUDA_GRAPHS=0. */
typedef struct cu_graph_counts {
    uint64_t captures, replays, eager, graphs, arena;
} cu_graph_counts;
cu_graph_counts cu_graphs_of(struct kern_backend *b);

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for n_rows rows of dim (one block a row, float
 * sums); y may equal x. */
void cu_rmsnorm(float *y, const float *x, const float *w, int32_t n_rows, int32_t dim,
                float eps, cu_stream s);

/* kern_ops.rope: pairs (2i, 2i+1) of the first rope_dim dims of every head turn by
 * pos[r] * base^(-2i/rope_dim) / freq_factors[i] (freq_factors may be NULL), angles and
 * products in double as ref does. x is (n_rows, n_head * head_dim); pos (n_rows). */
void cu_rope(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head, int32_t head_dim,
             int32_t rope_dim, float base, const float *freq_factors, cu_stream s);

/* kern_ops.rope_neox: cu_rope turning the pairs (i, i + rope_dim / 2) of each head. */
void cu_rope_neox(float *x, const int32_t *pos, int32_t n_rows, int32_t n_head, int32_t head_dim,
                  int32_t rope_dim, float base, const float *freq_factors, cu_stream s);

/* y[i] = gelu(gate[i]) * up[i] in float (tanh form), i < n; y may equal gate. */
void cu_geglu(float *y, const float *gate, const float *up, int64_t n, cu_stream s);

/* y[r][i] += bias[i] for n_rows rows of dim. */
void cu_add_bias(float *y, const float *bias, int32_t n_rows, int32_t dim, cu_stream s);

/* y[i] *= f, i < n. */
void cu_scale(float *y, float f, int64_t n, cu_stream s);

/* y[i] = cap * tanh(y[i] / cap) in float, i < n (the device's tanhf). */
void cu_softcap(float *y, float cap, int64_t n, cu_stream s);

/* kern_ops.swiglu_oai in float: g = min(gate, 7), u = clamp(up, -7, 7),
 * y = g / (1 + exp(-1.702 g)) (u + 1), i < n; y may equal gate. */
void cu_swiglu_oai(float *y, const float *gate, const float *up, int64_t n, cu_stream s);

/* y[i] = silu(gate[i]) * up[i] in float, i < n; y may equal gate. */
void cu_swiglu(float *y, const float *gate, const float *up, int64_t n, cu_stream s);

/* y[i] += x[i], i < n. */
void cu_add(float *y, const float *x, int64_t n, cu_stream s);

/* y[i] = y[i] * sigmoid(gate[i]) in float (expf), i < n. */
void cu_sigmoid_mul(float *y, const float *gate, int64_t n, cu_stream s);

#define CU_GDN_MAX_STATE 512 /* largest d_state cu_gdn_row takes (threads a block) */

struct kern_gdn;
/* Row r of kern_gdn a (its device arrays; cell_in and cell_out unused) in cell, which
 * already holds the state the row starts from: the conv and SiLU over qkv[r] in place
 * (one thread a channel), then one block a value head (one thread a value dim, owning
 * column j of S) for the L2 norms, the decay, the delta rule, o = S^T q and the gated
 * RMSNorm into out[r]; float sums in a fixed order. d_state <= CU_GDN_MAX_STATE. */
void cu_gdn_row(const struct kern_gdn *a, int32_t r, float *cell, cu_stream s);

/* out (n_rows, n_in) = rows rows[0 .. n_rows) of w, a (?, n_in) matrix of DT_* type as
 * GGUF stores it, dequantised to float with dtype_dequantize_row's arithmetic (the same
 * bits). rows is a device array. False (nothing queued) for a type without a kernel
 * (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K have one). */
bool cu_get_rows(float *out, uint32_t type, const void *w, int64_t n_in, const int32_t *rows,
                 int32_t n_rows, cu_stream s);

/* cu_get_rows of the consecutive rows row0 .. row0 + n_rows - 1 (no index array): a
 * weight row for get_row, a tile of a matrix for the many-row product. */
bool cu_dequant_rows(float *out, uint32_t type, const void *w, int64_t n_in, int64_t row0,
                     int32_t n_rows, cu_stream s);

#define CU_FEW_ROWS 16 /* most activation rows cu_matmul_few takes */
#define CU_MQ_N 4      /* most matrices one fused product launch takes (matmul_n's) */

/* y (n_rows, n_out) = x (n_rows, n_in) times W transposed, W (n_out, n_in) of DT_* type as
 * stored, for 1 .. CU_FEW_ROWS rows: one warp an output row, weights dequantised as read
 * (dq), float products and sums; each lane sums the values of its index mod 32 in order,
 * then one lane sums the 32 partials in lane order, so a row's result is the same bits in
 * any batch. F16 and BF16: each activation is rounded to the weights' type first (as
 * cu_to_half rounds it), the operands of the many-row product. False (nothing queued) for
 * a type without a kernel (cu_get_rows' list). */
bool cu_matmul_few(float *y, uint32_t type, const void *w, int64_t n_out, int64_t n_in,
                   const float *x, int32_t n_rows, cu_stream s);

/* cu_matmul_few of one x by n (at most CU_MQ_N) matrices of one type and n_in, n_out[i]
 * rows each, into y[i]: one launch, each output the bits of its own call. */
bool cu_matmul_few_n(int32_t n, float *const *y, uint32_t type, const void *const *w,
                     const int64_t *n_out, int64_t n_in, const float *x, int32_t n_rows,
                     cu_stream s);

/* y[i] = x[i] rounded to the 16-bit type of DT_F16 weights (fp16 bits, to nearest even,
 * magnitudes past 65504 saturated) or of DT_BF16 ones (bf16 bits, to nearest even), i < n:
 * the activations the many-row product multiplies on tensor cores. False (nothing
 * queued) for another type. */
bool cu_to_half(uint16_t *y, const float *x, int64_t n, uint32_t type, cu_stream s);

/* The activations of the quantised few-row product: x (n_rows, n_in) in blocks of 32 as
 * int8 q = round(x / d) (xq, (n_rows, n_in)) with d = max|x| / 127 a block (xd,
 * (n_rows, n_in / 32)) and the sum of q of each 16 (xs, (n_rows, n_in / 16)). n_in is a
 * multiple of 32; xq 16-byte aligned. */
void cu_quantize_q8(int8_t *xq, float *xd, int32_t *xs, const float *x, int32_t n_rows,
                    int64_t n_in, cu_stream s);

/* cu_quantize_q8 of x = cu_swiglu(gate, up) formed as read (the same bits), for the down
 * projection: one kernel and one pass over the rows fewer. */
void cu_quantize_q8_swiglu(int8_t *xq, float *xd, int32_t *xs, const float *gate,
                           const float *up, int32_t n_rows, int64_t n_in, cu_stream s);

/* cu_matmul_few with x given as cu_quantize_q8 made it: each weight block's values as
 * bytes against the int8 activations by dp4a, integer sums, one float multiply-add per 16
 * values (mmvq.cu); a row's result is the same bits in any batch. False (nothing queued)
 * for a type without this kernel (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K have
 * one). */
bool cu_matmul_q8(float *y, uint32_t type, const void *w, int64_t n_out, int64_t n_in,
                  const int8_t *xq, const float *xd, const int32_t *xs, int32_t n_rows,
                  cu_stream s);
/* cu_matmul_q8 of one activation by n (at most CU_MQ_N) matrices of one type and n_in,
 * n_out[i] rows each, into y[i]: one launch, each output the bits of its own call. */
bool cu_matmul_q8_n(int32_t n, float *const *y, uint32_t type, const void *const *w,
                    const int64_t *n_out, int64_t n_in, const int8_t *xq, const float *xd,
                    const int32_t *xs, int32_t n_rows, cu_stream s);

/* Softmax of each of n_rows rows of n values in place (float; one block a row). */
void cu_softmax(float *x, int32_t n_rows, int32_t n, cu_stream s);

#define CU_ATTN_MAX_HD 256 /* largest head_dim cu_attention takes */
#define CU_ATTN_CHUNK 256  /* keys a partial softmax covers (attn.cu) */
#define CU_ATTN_ROWS 4     /* most rows a block of shared chunks takes (attn.cu's cascade) */

/* kern_ops.attention with device arrays: seg_off (n_rows + 1) indexes segs, slots of the
 * cache rows (n_head_kv * head_dim floats). A row's keys, in order, are cut into chunks of
 * CU_ATTN_CHUNK; each chunk's softmax is taken by the online rule over tiles of 128 keys
 * (float scores and sums, expf) and the chunks are folded in order; a row without keys
 * gets zeros. One block a (KV head, up to 4 of its query heads, row, and with part one
 * chunk): part (n_rows * n_head * n_chunks * (head_dim + 2) floats, n_chunks at least the
 * chunks of the longest row) spreads the chunks over blocks and folds them in a second
 * kernel; NULL folds them in the row's block. Either way, the same bits. sinks (n_head
 * or NULL): kern_attn.sinks, folded after the keys. head_dim <= CU_ATTN_MAX_HD. With part,
 * casc (n_casc groups, cu_attention_groups's, device arrays) and nsh (n_rows): each group's
 * shared chunks are taken once for its rows (the keys read once), the same bits again;
 * n_casc 0: none. */
void cu_attention(float *out, const float *q, const float *k, const float *v,
                  const int32_t *seg_off, const int32_t *segs, int32_t n_rows, int32_t n_head,
                  int32_t n_head_kv, int32_t head_dim, float scale, const float *sinks,
                  float *part, int32_t n_chunks, const int32_t *casc, int32_t n_casc,
                  const int32_t *nsh, cu_stream s);
/* The cascade's groups of host arrays seg_off, segs (kern_seg pairs): consecutive rows, up
 * to CU_ATTN_ROWS a group, whose key sequences start with the same whole chunks (the same
 * slots in the same places, CU_ATTN_CHUNK keys a chunk); (first row, rows, shared chunks)
 * a group into casc (3 n_rows), each row's shared chunks (0: none) into nsh (n_rows).
 * Returns the groups. */
int32_t cu_attention_groups(const int32_t *seg_off, const int32_t *segs, int32_t n_rows, int32_t *casc,
                            int32_t *nsh);

/* Blocks cu_attention gives one (KV head, row): ceil(query heads a KV head / 4). */
int32_t cu_attention_subs(int32_t n_head, int32_t n_head_kv);

/* Row slot[i] of cache (rows of row_len floats) = row i of x, i < n_rows; slot a device
 * array. */
void cu_kv_store(float *cache, int64_t row_len, const int32_t *slot, const float *x,
                 int32_t n_rows, cu_stream s);

/* Row i of y = row slot[i] of cache (rows of row_len floats), i < n_rows; slot a device
 * array, y and cache do not overlap. */
void cu_kv_gather(float *y, const float *cache, int64_t row_len, const int32_t *slot,
                  int32_t n_rows, cu_stream s);

/* y[i] = x[idx[i]], rows of width floats, i < n (idx a device array), one row after
 * another, so y may equal x when idx[i] >= i. */
void cu_gather_rows(float *y, const float *x, const int32_t *idx, int32_t n, int32_t width,
                    cu_stream s);
/* y[i] = x[idx[i]], i < n (idx a device array; y does not overlap x). */
void cu_gather_at(float *y, const float *x, const int64_t *idx, int32_t n, cu_stream s);

#define CU_TOPK_MAX 64 /* most entries cu_topk_lse keeps per row */

/* For each of n_rows rows of n_vocab logits: its k largest (ties: the lower id first),
 * largest first, as ids and log-probabilities kern_logprob(logit, {mx, log_sum}), with mx
 * the row's largest logit and log_sum = log(sum exp(logit - mx)) (float exps summed in
 * double). ids and logprobs are (n_rows, k); mx and log_sum (n_rows) may be NULL; k may be
 * 0 (only mx and log_sum). Returns the entries written per row, min(k, n_vocab,
 * CU_TOPK_MAX). Rows holding NaN give unspecified entries. */
int32_t cu_topk_lse(const float *logits, int32_t n_rows, int32_t n_vocab, int32_t k,
                    int32_t *ids, float *logprobs, float *mx, double *log_sum, cu_stream s);

#ifdef __cplusplus
}
#endif

#endif
