/* kern_impl.h - what a backend's ops may ask of the kern_backend that calls them.
 *
 * Private to kernels/ (and the tests): the engine sees only kern.h. A kern_backend holds
 * the ops table, the state the backend's init made (the cpu backend's pool, scratch and
 * rope table: kernels/cpu/state.c) and the sticky error; the ops reach them through these
 * functions instead of through globals. */
#ifndef MD_KERN_IMPL_H
#define MD_KERN_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "kern.h"
#include "pool.h"

/* The state b's ops->init made (NULL when it made none); valid while b lives. */
void *kern_backend_state(kern_backend *b);

/* Records a failure of op `op` ("matmul") for kern_backend_sync when none is recorded
 * yet; the message reads "op: <fmt>" and ends with the backend's name. */
void kern_backend_fail(kern_backend *b, st_code code, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A 64-byte-aligned block of at least bytes bytes (rounded up to a multiple of 64, as
 * aligned_alloc requires), for free(); NULL when memory runs out. */
void *kern_aligned_alloc(size_t bytes);

/* kern_aligned_alloc for op `op`, which needs it for `what` ("scratch"): NULL when memory
 * runs out (or the test limit below is passed), recorded as ST_ERR_NOMEM naming op, what
 * and the size. The op then returns without writing its output. */
void *kern_backend_alloc(kern_backend *b, const char *op, const char *what, size_t bytes);

/* For tests: every later kern_backend_alloc (buffers, scratch, tables) of more than bytes
 * fails as if memory ran out. SIZE_MAX means no limit (the default; requests over
 * PTRDIFF_MAX always fail). */
void kern_backend_set_alloc_limit(kern_backend *b, size_t bytes);

/* Whether a request of bytes is within the limit above, for a backend whose memory is not
 * kern_backend_alloc's (a device): it fails over-limit requests the same way. */
bool kern_backend_alloc_allowed(const kern_backend *b, size_t bytes);

/* The host backends' buffers (ops buf_alloc, buf_free, upload, download): zeroed,
 * 64-byte-aligned host memory, and memcpy. */
void *kern_host_buf_alloc(kern_backend *b, size_t bytes);
void kern_host_buf_free(kern_backend *b, void *buf);
void kern_host_copy(kern_backend *b, void *dst, const void *src, size_t bytes);
/* The host backends' download_at (a loop). */
void kern_host_download_at(kern_backend *b, float *dst, const float *src, const int64_t *idx, int32_t n);
/* The host backends' gather_rows (memmove; in place allowed). */
void kern_host_gather_rows(kern_backend *b, float *y, const float *x, const int32_t *idx, int32_t n,
                           int32_t width);
/* Row r's scores q.k * scale for query head h over its segments' slots, in order, into
 * score (double, as the ref backend's attention takes them); returns their maximum. */
double kern_host_attn_scores(const kern_attn *a, int32_t r, int32_t h, double *score);
/* The host backends' attn_weights (kernels/attn_weights.c). */
void kern_host_attn_weights(kern_backend *b, const kern_attn *a, int32_t head, float *w);
/* Whether kv_permute moves slot s: dst_of_src[s] is another slot (not -1, not s). Every
 * backend moves only those rows, so compacting a cache where few slots change costs few
 * row copies, not the whole cache. */
bool kern_kv_moves(const int32_t *dst_of_src, int32_t s);
/* The host backends' kv_store and kv_permute (memcpy; kv_permute's copy of the rows that
 * move from kern_backend_alloc). */
void kern_host_kv_store(kern_backend *b, float *cache, int64_t row_len, const int32_t *slot,
                        const float *x, int32_t n_rows);
void kern_host_kv_permute(kern_backend *b, float *cache, int64_t n_blocks, int32_t n_slots,
                          int64_t row_len, const int32_t *dst_of_src);

/* A growable 64-byte-aligned buffer a backend's state may own (zero-initialised). */
typedef struct kern_scratch {
    void *p;
    size_t bytes;
} kern_scratch;

/* At least bytes bytes of s, for op `op`. Valid until the next call (which may move it),
 * so an op takes it once per call. When memory runs out this returns NULL (the old
 * buffer stays) and records ST_ERR_NOMEM naming op (kern_backend_alloc). */
void *kern_scratch_get(kern_backend *b, kern_scratch *s, const char *op, size_t bytes);
void kern_scratch_free(kern_scratch *s);

#endif
