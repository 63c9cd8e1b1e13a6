/* kv.c - slot allocator as a byte map; first-fit search for runs. Linear scans are fine:
 * a cache has at most a few tens of thousands of slots and a step allocates at most a
 * few hundred, which costs far less than one forward pass. */
#include "forest/kv.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

struct kv_alloc {
    int32_t n_slots;
    int32_t used;
    uint8_t *map; /* (n_slots) 1 = in use */
};

kv_alloc *kv_alloc_init(int32_t n_slots) {
    if (n_slots <= 0) return NULL;
    kv_alloc *kv = calloc(1, sizeof *kv);
    if (!kv) return NULL;
    kv->map = calloc((size_t)n_slots, 1);
    if (!kv->map) {
        free(kv);
        return NULL;
    }
    kv->n_slots = n_slots;
    return kv;
}

void kv_alloc_free(kv_alloc *kv) {
    if (!kv) return;
    free(kv->map);
    free(kv);
}

int32_t kv_alloc_n_slots(const kv_alloc *kv) { return kv->n_slots; }
int32_t kv_alloc_used(const kv_alloc *kv) { return kv->used; }

bool kv_alloc_is_used(const kv_alloc *kv, int32_t slot) {
    return slot >= 0 && slot < kv->n_slots && kv->map[slot];
}

int32_t kv_alloc_take(kv_alloc *kv, int32_t hint, int32_t run) {
    if (kv->used == kv->n_slots) return -1;
    int32_t pick = -1;
    if (hint >= 0 && hint < kv->n_slots && !kv->map[hint]) {
        pick = hint;
    } else {
        /* first free run of at least `run` slots, and the longest free run */
        int32_t first = -1, best = -1, best_len = 0;
        for (int32_t s = 0; s < kv->n_slots;) {
            if (kv->map[s]) {
                s++;
                continue;
            }
            int32_t e = s;
            while (e < kv->n_slots && !kv->map[e]) e++;
            if (first < 0 && e - s >= run) first = s;
            if (e - s > best_len) best = s, best_len = e - s;
            s = e;
        }
        if (hint >= 0 && run <= 1 && best_len > 2) {
            /* A chain whose next slot is taken (a fork, or two leaves growing side by
             * side) restarts in the middle of the largest free run, leaving room both
             * for whoever grows into that run from its start and for itself: k leaves
             * growing together each stay one contiguous run instead of interleaving. */
            pick = best + best_len / 2;
        } else {
            pick = first >= 0 ? first : best;
        }
    }
    ASSERT(pick >= 0);
    kv->map[pick] = 1;
    kv->used++;
    return pick;
}

void kv_alloc_release(kv_alloc *kv, int32_t slot) {
    ASSERT(slot >= 0 && slot < kv->n_slots && kv->map[slot]);
    kv->map[slot] = 0;
    kv->used--;
}

void kv_alloc_reset(kv_alloc *kv) {
    memset(kv->map, 0, (size_t)kv->n_slots);
    kv->used = 0;
}

int32_t kv_alloc_free_runs(const kv_alloc *kv) {
    int32_t runs = 0;
    for (int32_t s = 0; s < kv->n_slots; s++)
        if (!kv->map[s] && (s == 0 || kv->map[s - 1])) runs++;
    return runs;
}
