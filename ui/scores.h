/* scores.h - scores kept with their nodes: the score :judge or :tot gave a branch, or
 * beam gave a result, stays with the branch's last node across later runs (a table by forest index, stamped
 * with the node's generation, so a reused index reads unscored), for the forest pane to
 * show on every judged line, to order siblings by (:sort) and to prune by (:keep). No cap
 * on how many. The caller holds whatever lock guards the forest. Not here: drawing
 * (tui.c), which leaves :keep keeps (judge_job.h). */
#ifndef MD_UI_SCORES_H
#define MD_UI_SCORES_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "session/session.h"
#include "strategy/strategy.h"

typedef struct ui_scores {
    double *v;     /* (cap) by forest index */
    uint32_t *gen; /* (cap) the node's generation + 1 when v holds its score, else 0 */
    int32_t cap;
} ui_scores;

void ui_scores_init(ui_scores *s);
void ui_scores_free(ui_scores *s); /* and forgets every score; init'd again */

/* Keeps score v for node id (replacing one it had). False for a stale id or when memory
 * ran out (the table is as it was). */
bool ui_scores_set(ui_scores *s, const forest *f, forest_id id, double v);
/* Node id's score into *v; false when it has none (or id is stale). */
bool ui_scores_get(const ui_scores *s, const forest *f, forest_id id, double *v);
/* Every score run reports now (strategy_scores), all of them. ST_ERR_NOMEM. */
st_code ui_scores_take(ui_scores *s, const forest *f, const strategy *run, st_err *err);

/* The scores into session metadata m (session.h: what a saved session keeps), and back
 * from a loaded session's m (NULL: none) after forgetting those held. ST_ERR_NOMEM. */
st_code ui_scores_to_meta(const ui_scores *s, const forest *f, session_meta *m, st_err *err);
st_code ui_scores_from_meta(ui_scores *s, const forest *f, const session_meta *m, st_err *err);

/* How the forest pane orders siblings (:sort). */
typedef enum { UI_SORT_NONE = 0, UI_SORT_SCORE, UI_SORT_PROB } ui_sort;

/* The sort keys of order by forest index into *keys (grown to the forest's capacity; the
 * caller frees it), higher first: UI_SORT_SCORE the best score in a node's subtree (-inf
 * when none), UI_SORT_PROB the node's own log-probability (-inf unscored). ST_ERR_NOMEM. */
st_code ui_scores_keys(const ui_scores *s, const forest *f, ui_sort order, double **keys, int32_t *cap, st_err *err);

#endif
