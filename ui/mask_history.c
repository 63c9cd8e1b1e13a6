/* mask_history.c - the last steps' mask views (mask_history.h). */
#include "mask_history.h"

#include <stdlib.h>
#include <string.h>

void mvh_init(mv_history *h) { memset(h, 0, sizeof *h); }

void mvh_free(mv_history *h) {
    if (!h) return;
    for (int32_t i = 0; i < MVH_KEEP; i++) free(h->view[i]);
    mvh_init(h);
}

void mvh_clear(mv_history *h) { h->n = h->back = 0; }

/* Ring index of the copy back steps before the newest. */
static int32_t ring(const mv_history *h, int32_t back) {
    return ((h->newest - back) % MVH_KEEP + MVH_KEEP) % MVH_KEEP;
}

bool mvh_push(mv_history *h, const mask_view *v) {
    int32_t at = h->n ? (h->newest + 1) % MVH_KEEP : h->newest;
    if (!h->view[at] && !(h->view[at] = malloc(sizeof *h->view[at]))) return false;
    memcpy(h->view[at], v, sizeof *v);
    h->newest = at;
    if (h->n < MVH_KEEP) h->n++;
    if (h->back > 0) h->back = h->back + 1 < h->n ? h->back + 1 : h->n - 1;
    return true;
}

int32_t mvh_move(mv_history *h, int32_t delta) {
    int32_t b = h->back - delta; /* older is further back */
    h->back = b < 0 ? 0 : h->n == 0 ? 0 : b >= h->n ? h->n - 1 : b;
    return h->back;
}

mask_view *mvh_at(const mv_history *h, int32_t back) {
    return back >= 0 && back < h->n ? h->view[ring(h, back)] : NULL;
}
