/* kern_impl.h - what a backend's ops may ask of the kern_backend that calls them.
 *
 * Private to kernels/: the engine sees only kern.h. A backend (kernels/backend.c) owns
 * the ops table, a thread pool and one growable scratch buffer; the ops reach them
 * through these two functions instead of through globals. */
#ifndef MD_KERN_IMPL_H
#define MD_KERN_IMPL_H

#include <stddef.h>

#include "kern.h"
#include "pool.h"

/* The backend's thread pool (a pool of one thread for "ref"); valid while b lives. */
pool *kern_backend_pool(kern_backend *b);

/* A 64-byte-aligned buffer of at least bytes bytes, owned by b. It stays valid until
 * the next call (which may move it), so an op takes it once per call. Aborts when
 * memory runs out: the ops have no error path, and the sizes are tiny next to the
 * model (activations of one step). */
void *kern_backend_scratch(kern_backend *b, size_t bytes);

#endif
