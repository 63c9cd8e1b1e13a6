/* undo.h - the TUI's prune history: every prune made through it keeps the pruned subtree
 * (tokens, log-probabilities, bookmarks, finished marks and tags, scores, the stored
 * alternatives) so that undo puts it back in its old place among its siblings (pending:
 * the caller runs a step to compute it again) and redo prunes it again, many levels each way, as an editor's undo does. A new prune
 * clears what could be redone.
 *
 * Restored nodes get new ids: entries further down the history that hang under a node of
 * the restored subtree are moved to its new id, so undoing a prune inside a subtree
 * pruned later works in either order. An entry whose parent was removed by other means
 * (a strategy's own pruning, a load) says so when undone and is dropped.
 *
 * Not here: what the worker does around it (messages, the selection). The caller holds
 * whatever lock guards the forest. */
#ifndef MD_UI_UNDO_H
#define MD_UI_UNDO_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "scores.h"

#define UI_UNDO_MAX 32 /* prunes kept (a group counts once); the oldest is forgotten beyond */

typedef struct ui_undo_entry ui_undo_entry;

typedef struct ui_undo {
    ui_scores *scores;     /* borrowed, may be NULL: the scores kept and put back with nodes */
    session_meta *names;   /* borrowed, may be NULL: the names (:name) kept and put back */
    ui_undo_entry **undo;  /* (n_undo) oldest first; an entry may be joined to the one before */
    int32_t n_undo, cap_undo;
    forest_id *redo;       /* (n_redo) tops of restored subtrees, oldest first */
    bool *redo_more;       /* (n_redo) redone with the one before it (a group) */
    int32_t n_redo, cap_redo;
} ui_undo;

/* What a prune removed (for the message) and where the selection should go: the next
 * sibling of the pruned node, else the previous one, else its parent (FOREST_NONE for a
 * pruned root without siblings). The siblings a prune leaves get FOREST_OWN_LINE. */
typedef struct ui_prune_info {
    int32_t nodes, branches; /* branches: leaves of the pruned subtree */
    forest_id near;
    bool computed; /* undo: what it put back was computed before its prune */
} ui_prune_info;

void ui_undo_init(ui_undo *u);
/* Forgets the history (after a load); scores stays. */
void ui_undo_clear(ui_undo *u);
void ui_undo_free(ui_undo *u);

/* Prunes node id and keeps it for undo; clears the redo list. ST_ERR_ARG for a stale id,
 * ST_ERR_NOMEM (nothing pruned). */
st_code ui_undo_prune(ui_undo *u, forest *f, forest_id id, ui_prune_info *info, st_err *err);
/* Prunes the n subtrees ids (none inside another) as one step of the history: undo puts
 * them all back, redo prunes them all again. info sums them (near: the first one's).
 * ST_ERR_ARG for a stale id, ST_ERR_NOMEM; on failure those pruned stay pruned, undoable. */
st_code ui_undo_prune_group(ui_undo *u, forest *f, const forest_id *ids, int32_t n, ui_prune_info *info,
                            st_err *err);
/* Puts back the last pruned subtree (a group: all of them); *top receives its new top node and info its size.
 * ST_ERR_ARG "nothing to undo" or when its parent is gone (the entry is dropped). */
st_code ui_undo_undo(ui_undo *u, forest *f, forest_id *top, ui_prune_info *info, st_err *err);
/* Prunes again what the last undo put back. ST_ERR_ARG "nothing to redo", or when that
 * subtree is gone. */
st_code ui_undo_redo(ui_undo *u, forest *f, ui_prune_info *info, st_err *err);

#endif
