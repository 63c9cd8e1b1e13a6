/* pack.c - kern_mat_pack: Q4_0 and Q4_1 weight rows repacked once, at load, into the
 * packed form of matmul.h, which the matmul prepares with a few loads and masks
 * (mm_pk_prep) instead of gathering blocks and permuting their values for every tile of
 * every step. The packed form is made from what the stored form's preparer gives
 * (mm_blk_prep), so the two prepare the same mm_prep, and the matmul's results are the
 * same bits either way (test_kernels holds them to it). */
#include <stdlib.h>
#include <string.h>

#include "unpack.h"

#if MM_Q8_512
/* One chunk of cnb blocks at src (stored form) into dst (packed form). */
static void pack_chunk(uint32_t type, const uint8_t *src, int cnb, uint8_t *dst) {
    mm_prep c;
    mm_blk_prep(type, src, cnb, 0, &c);
    const int nq = (cnb + 1) / 2, qb = mm_pk_qbytes(cnb), bb = mm_blk_bytes(type);
    if (cnb == 8)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 64; i++)
                dst[64 * h + i] = (uint8_t)(c.u[128 * h + i] | c.u[128 * h + 64 + i] << 4);
    else
        for (int j = 0; j < nq; j++)
            for (int i = 0; i < 32; i++)
                dst[32 * j + i] = (uint8_t)(c.u[64 * j + i] | c.u[64 * j + 32 + i] << 4);
    /* each block starts with its fp16 d, then (Q4_1) its fp16 m */
    for (int b = 0; b < cnb; b++) {
        memcpy(dst + qb + 2 * b, src + b * bb, 2);
        if (type == DT_Q4_1) memcpy(dst + qb + 2 * cnb + 2 * b, src + b * bb + 2, 2);
    }
}
#endif

void *kern_mat_pack(const kern_mat *w, size_t *bytes) {
#if MM_Q8_512
    if (!mm_pk_type(w->type) || w->n_in % 32 || w->n_in <= 0 || w->n_out <= 0) return NULL;
    const size_t rs = dtype_row_bytes(w->type, w->n_in), ps = mm_pk_row_bytes(w->type, w->n_in);
    const size_t total = ps * (size_t)w->n_out;
    uint8_t *out = aligned_alloc(64, (total + 63) / 64 * 64);
    if (!out) return NULL;
    const int bb = mm_blk_bytes(w->type);
    const int64_t nb = w->n_in / 32;
    for (int64_t r = 0; r < w->n_out; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * rs;
        uint8_t *dst = out + (size_t)r * ps;
        for (int64_t b0 = 0; b0 < nb; b0 += 8) {
            const int cnb = nb - b0 < 8 ? (int)(nb - b0) : 8;
            pack_chunk(w->type, src + b0 * bb, cnb, dst);
            dst += mm_pk_chunk_bytes(w->type, cnb);
        }
    }
    if (bytes) *bytes = total;
    return out;
#else
    (void)w, (void)bytes;
    return NULL;
#endif
}
