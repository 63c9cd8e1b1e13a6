/* cpu.h - the pieces of kern_cpu_ops that live in their own files (matmul.c,
 * attn.c, topk.c); ops.c holds the small ops and the table. Private to kernels/cpu. */
#ifndef MD_CPU_H
#define MD_CPU_H

#include "../kern_impl.h"

void cpu_matmul(kern_backend *b, float *y, const kern_mat *w, const float *x, int32_t n_rows);
void cpu_matmul_n(kern_backend *b, int32_t n, float *const *y, const kern_mat *const *w,
                  const float *x, int32_t n_rows);
void cpu_attention(kern_backend *b, const kern_attn *a);
void cpu_gather_rows(kern_backend *b, float *y, const float *x, const int32_t *idx, int32_t n,
                     int32_t width);
void cpu_topk_lse(kern_backend *b, const float *x, int32_t n_rows, int32_t n, int32_t k,
                  kern_lse *lse, int32_t *ids, float *lp);

#endif
