/* kv.h - the KV-cache slot allocator: which of the cache's n_slots rows are in use.
 *
 * It only does bookkeeping; the K/V data lives in the model context (model.h). A node of
 * the forest owns exactly one slot once computed. To keep chains contiguous (so that a
 * row's attention set is a few long segments), a child asks for the slot right after its
 * parent's, and a new chain asks for the start of a free run long enough to hold it. */
#ifndef MD_KV_H
#define MD_KV_H

#include <stdbool.h>
#include <stdint.h>

typedef struct kv_alloc kv_alloc;

/* A free allocator over n_slots slots; NULL when out of memory. */
kv_alloc *kv_alloc_init(int32_t n_slots);
void kv_alloc_free(kv_alloc *kv); /* NULL is a no-op */

int32_t kv_alloc_n_slots(const kv_alloc *kv);
int32_t kv_alloc_used(const kv_alloc *kv);
bool kv_alloc_is_used(const kv_alloc *kv, int32_t slot);

/* Takes a slot: `hint` when it is free (hint < 0: no preference); else, for a chain
 * continuing after a taken slot (hint >= 0, run <= 1), the middle of the longest free run
 * (so side-by-side growing leaves each stay contiguous); else the start of the first free
 * run of at least `run` slots, else the start of the longest free run.
 * Returns the slot, or -1 when the cache is full (nothing changes). */
int32_t kv_alloc_take(kv_alloc *kv, int32_t hint, int32_t run);
/* Returns a used slot to the free pool. Releasing a free slot is a programmer error. */
void kv_alloc_release(kv_alloc *kv, int32_t slot);
/* Marks every slot free. */
void kv_alloc_reset(kv_alloc *kv);
/* Number of maximal free runs (a fragmentation measure: 1 when all free space is one run). */
int32_t kv_alloc_free_runs(const kv_alloc *kv);

#endif
