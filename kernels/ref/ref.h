/* ref.h - the reference backend's ops that live in their own files (gdn.c); ref.c holds
 * the table. Private to kernels/ref. */
#ifndef MD_REF_H
#define MD_REF_H

#include "../kern_impl.h"

/* kern_ops gdn and sigmoid_mul (gdn.c). */
void ref_gdn(kern_backend *b, const kern_gdn *a);
void ref_sigmoid_mul(kern_backend *b, float *y, const float *gate, int64_t n);

#endif
