/* mask_history.h - the last steps' mask views, so the mask pane can look back ([ and ]):
 * a ring of MVH_KEEP copies of mask_view (each named by its kind, mv_set_kind).
 *
 * The worker pushes a copy after each step it runs (under the forest lock); the pane shows
 * the newest view (the worker's own, back = 0) or one of the copies. A copy keeps its rows'
 * node ids, generation-checked as in mask_view.h, so mv_mark_pruned works on it too. Not
 * here: the preview of a step not run (never pushed). */
#ifndef MD_UI_MASK_HISTORY_H
#define MD_UI_MASK_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "mask_view.h"

#define MVH_KEEP 8 /* steps kept, the newest included */

typedef struct mv_history {
    mask_view *view[MVH_KEEP]; /* ring of copies, allocated as needed; owned */
    int32_t n;                 /* copies held */
    int32_t newest;            /* ring index of the newest */
    int32_t back;              /* the one shown: 0 the newest .. n - 1 the oldest */
} mv_history;

void mvh_init(mv_history *h);
void mvh_free(mv_history *h); /* its copies; NULL is a no-op */
/* Keeps a copy of v, a step that ran, as the newest. A view being looked at stays in view
 * (back moves with it) while kept. False when memory runs out (nothing kept). */
bool mvh_push(mv_history *h, const mask_view *v);
/* Moves the shown step by delta (negative: older), within what is kept. Returns back. */
int32_t mvh_move(mv_history *h, int32_t delta);
/* The view back steps before the newest (0: the newest copy), or NULL when not kept. */
mask_view *mvh_at(const mv_history *h, int32_t back);
/* Drops every copy (a load replaces the forest they showed). */
void mvh_clear(mv_history *h);

#endif
