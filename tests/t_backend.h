/* t_backend.h - the backend contract's checks that take any backend (header-only, include
 * after t.h and t_kern.h): buffers (zeroed, aligned, upload/download, one too big failing
 * as ST_ERR_NOMEM named once) and kv_store / kv_permute bitwise against host loops, with
 * every value going through upload and download, so a device backend runs them as they
 * are (test_backend.c for ref and cpu, test_cuda_backend.c for cuda). */
#ifndef MD_T_BACKEND_H
#define MD_T_BACKEND_H

#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/kern_impl.h"

/* Buffers: zeroed, 64-byte aligned, what upload puts in download gives back; one too big
 * is NULL and sync reports ST_ERR_NOMEM naming buf_alloc, once. */
static void test_buffers(kern_backend *b) {
    const kern_ops *o = kern_backend_ops(b);
    const char *nm = kern_backend_name(b);
    st_err err = {0};
    enum { N = 1000 };
    float *buf = o->buf_alloc(b, N * sizeof(float));
    T_CHECK(buf && (uintptr_t)buf % 64 == 0, "%s: buf_alloc 64-byte aligned", nm);
    if (!buf) return;
    float host[N], back[N];
    bool zero = true;
    o->download(b, back, buf, sizeof back);
    for (int i = 0; i < N; i++) zero = zero && back[i] == 0.0f;
    T_CHECK(zero, "%s: a new buffer is zeroed", nm);
    uint64_t s = 5;
    for (int i = 0; i < N; i++) host[i] = rng_unif(&s);
    o->upload(b, buf + 10, host, 500 * sizeof(float));
    o->download(b, back, buf, sizeof back);
    T_CHECK(memcmp(back + 10, host, 500 * sizeof(float)) == 0 && back[9] == 0.0f &&
            back[510] == 0.0f, "%s: upload at an offset, download: the same bytes, no more", nm);
    o->buf_free(b, buf);
    o->buf_free(b, NULL);
    T_CHECK(kern_backend_sync(b, &err) == ST_OK, "%s: no failure yet", nm);
    T_CHECK(o->buf_alloc(b, SIZE_MAX - 100) == NULL, "%s: SIZE_MAX - 100 bytes: NULL", nm);
    T_CHECK(o->buf_alloc(b, SIZE_MAX - 200) == NULL, "%s: and again", nm);
    T_CHECK(kern_backend_sync(b, &err) == ST_ERR_NOMEM &&
            strncmp(err.msg, "buf_alloc: out of memory", 24) == 0 && strstr(err.msg, nm),
            "%s: sync reports the first failure, naming the op: %s", nm, err.msg);
    T_CHECK(kern_backend_sync(b, &err) == ST_OK && err.code == ST_ERR_NOMEM,
            "%s: then nothing (err untouched)", nm);
}

/* kv_store and kv_permute against a plain loop over host rows, bitwise; a permutation
 * without memory moves nothing and names kv_permute; one that moves few slots needs
 * scratch for those rows only. */
static void test_kv_ops(kern_backend *b, uint64_t seed) {
    const kern_ops *o = kern_backend_ops(b);
    const char *nm = kern_backend_name(b);
    enum { BLK = 3, SL = 40, ROW = 24, NR = 7 };
    const size_t n = (size_t)BLK * SL * ROW;
    float *want = rand_floats(&seed, (int64_t)n, 1.0f), *got = malloc(n * sizeof *got);
    float *cache = o->buf_alloc(b, n * sizeof(float));
    float *x = rand_floats(&seed, (int64_t)NR * ROW, 2.0f), *xb = o->buf_alloc(b, NR * ROW * sizeof(float));
    o->upload(b, cache, want, n * sizeof(float));
    o->upload(b, xb, x, NR * ROW * sizeof(float));
    const int32_t slot[NR] = {39, 0, 5, 6, 17, 38, 2};
    o->kv_store(b, cache + SL * ROW, ROW, slot, xb, NR); /* into block 1 */
    for (int i = 0; i < NR; i++) memcpy(want + (SL + slot[i]) * ROW, x + i * ROW, ROW * sizeof(float));
    o->download(b, got, cache, n * sizeof(float));
    T_CHECK(memcmp(got, want, n * sizeof(float)) == 0, "%s: kv_store writes exactly its rows", nm);
    int32_t dst[SL];
    for (int s = 0; s < SL; s++) dst[s] = -1;
    for (int s = 0; s < SL; s += 2) dst[s] = (s * 7 + 3) % SL; /* a cycle through odd slots too */
    float *before = malloc(n * sizeof *before);
    memcpy(before, want, n * sizeof *before);
    for (int l = 0; l < BLK; l++)
        for (int s = 0; s < SL; s++)
            if (dst[s] >= 0)
                memcpy(want + (l * SL + dst[s]) * ROW, before + (l * SL + s) * ROW, ROW * sizeof(float));
    kern_backend_set_alloc_limit(b, 100);
    o->kv_permute(b, cache, BLK, SL, ROW, dst);
    st_err err = {0};
    o->download(b, got, cache, n * sizeof(float));
    T_CHECK(kern_backend_sync(b, &err) == ST_ERR_NOMEM && strncmp(err.msg, "kv_permute: ", 12) == 0 &&
            memcmp(got, before, n * sizeof(float)) == 0,
            "%s: kv_permute without memory moves nothing: %s", nm, err.msg);
    kern_backend_set_alloc_limit(b, SIZE_MAX);
    o->kv_permute(b, cache, BLK, SL, ROW, dst);
    o->download(b, got, cache, n * sizeof(float));
    T_CHECK(kern_backend_sync(b, &err) == ST_OK && memcmp(got, want, n * sizeof(float)) == 0,
            "%s: kv_permute moves each block's rows, keeps the rest", nm);
    /* few slots move (a swap and one more), the rest stay (dst s) or go (-1): only the
     * three moving rows need scratch, so a limit of three rows is enough */
    for (int s = 0; s < SL; s++) dst[s] = s % 5 == 4 ? -1 : s;
    dst[3] = 7, dst[7] = 3, dst[12] = 14;
    memcpy(before, want, n * sizeof *before);
    for (int l = 0; l < BLK; l++)
        for (int s = 0; s < SL; s++)
            if (dst[s] >= 0)
                memcpy(want + (l * SL + dst[s]) * ROW, before + (l * SL + s) * ROW, ROW * sizeof(float));
    kern_backend_set_alloc_limit(b, 3 * ROW * sizeof(float));
    o->kv_permute(b, cache, BLK, SL, ROW, dst);
    o->download(b, got, cache, n * sizeof(float));
    T_CHECK(kern_backend_sync(b, &err) == ST_OK && memcmp(got, want, n * sizeof(float)) == 0,
            "%s: kv_permute moving 3 of %d slots needs scratch for those rows only: %s", nm, SL,
            err.msg);
    kern_backend_set_alloc_limit(b, SIZE_MAX);
    o->buf_free(b, cache), o->buf_free(b, xb);
    free(want), free(got), free(x), free(before);
}

#endif
