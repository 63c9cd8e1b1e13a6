/* kern_impl.h - what a backend's ops may ask of the kern_backend that calls them.
 *
 * Private to kernels/: the engine sees only kern.h. A backend (kernels/backend.c) owns
 * the ops table, a thread pool, one growable scratch buffer and the last rope table; the
 * ops reach them through these functions instead of through globals. */
#ifndef MD_KERN_IMPL_H
#define MD_KERN_IMPL_H

#include <stddef.h>

#include "kern.h"
#include "pool.h"

/* The backend's thread pool (a pool of one thread for "ref"); valid while b lives. */
pool *kern_backend_pool(kern_backend *b);

/* A 64-byte-aligned block of at least bytes bytes (rounded up to a multiple of 64, as
 * aligned_alloc requires), for free(); NULL when memory runs out. */
void *kern_aligned_alloc(size_t bytes);

/* A 64-byte-aligned buffer of at least bytes bytes, owned by b. It stays valid until
 * the next call (which may move it), so an op takes it once per call. The ops have no
 * error path: when memory runs out this returns NULL (the old buffer stays) and records
 * ST_ERR_NOMEM for kern_backend_take_error; the op then returns without writing its
 * output. */
void *kern_backend_scratch(kern_backend *b, size_t bytes);

/* The cosines and sines of the rope angles pos[r] * theta[i] (computed in double, then
 * rounded to float), for r < n_rows and i < np, laid out for a rotation of interleaved
 * pairs (x0, x1) as x * C - swap(x) * S: row r is C then S, 2 np floats each, with
 * C = (c0, c0, c1, c1, ...) and S = (s0, -s0, s1, -s1, ...). The table of the last call is
 * kept and returned again while pos and theta hold the same values: the rotations of q
 * and k in every layer of a forward pass share one table instead of each computing the
 * sines anew. Valid until the next call; NULL when memory runs out, recorded as scratch
 * does. */
const float *kern_backend_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows,
                                     const double *theta, int32_t np);

#endif
