/* cpu.h - the pieces of kern_cpu_ops that live in their own files (matmul.c, attn.c,
 * topk.c, state.c); ops.c holds the small ops and the table. Private to kernels/cpu. */
#ifndef MD_CPU_H
#define MD_CPU_H

#include "../kern_impl.h"

void cpu_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows);
void cpu_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                  const float *x, int32_t n_rows);
void cpu_attention(kern_backend *b, const kern_attn *a);
/* kern_ops gdn and sigmoid_mul (gdn.c). */
void cpu_gdn(kern_backend *b, const kern_gdn *a);
void cpu_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n);
void cpu_topk_lse(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                  kern_lse *lse, int32_t *ids, float *lp);

/* The rows of w repacked once for cpu_matmul (matmul_pk.c), on the threads of p (NULL:
 * the caller's alone): a kern_aligned_alloc'd buffer (free it with free) to set as
 * w->packed, or NULL where this build has no packed form for w's type or memory runs out
 * (w then works as stored). Its size goes to *bytes when not NULL. Every other op reads
 * data. */
void *kern_mat_pack(const kern_mat *w, size_t *bytes, pool *p);

/* ---- the backend's state (state.c) ---- */

/* kern_ops init / free: a thread pool of *n_threads (<= 0: one per core). */
st_code cpu_init(kern_backend *b, int32_t *n_threads, void **state, st_err *err);
void cpu_free(void *state);

/* kern_ops mat_prepare / mat_release: the stored form plus its repacked rows (kern_mat_pack)
 * where there is one. */
st_code cpu_mat_prepare(kern_backend *b, kern_mat *out, const kern_mat *stored, uint32_t flags,
                        size_t *bytes);
void cpu_mat_release(kern_backend *b, kern_mat *w);

/* The backend's thread pool; valid while b lives. */
pool *cpu_pool(kern_backend *b);

/* The backend's scratch for op `op` (kern_scratch_get): valid until the next call, NULL
 * and recorded for kern_backend_sync when memory runs out. */
void *cpu_scratch(kern_backend *b, const char *op, size_t bytes);

/* The cosines and sines of the rope angles pos[r] * theta_i, theta_i = base^(-2i /
 * rope_dim) / freq_factors[i] (freq_factors may be NULL; computed in double, then rounded
 * to float), for r < n_rows and i < rope_dim / 2 = np, laid out for a rotation of
 * interleaved pairs (x0, x1) as x * C - swap(x) * S: row r is C then S, 2 np floats each,
 * with C = (c0, c0, c1, c1, ...) and S = (s0, -s0, s1, -s1, ...). The backend keeps the
 * tables of the last two (base, rope_dim, freq_factors) it was asked for: the theta_i of
 * each computed once, and its table returned again while pos holds the same values, so
 * the rotations of q and k in every layer of a forward pass share one table and no pass
 * recomputes the frequencies. Valid until the next call; NULL when memory runs out,
 * recorded as scratch is. */
const float *cpu_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows, float base,
                            int32_t rope_dim, const float *freq_factors);

#endif
