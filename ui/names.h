/* names.h - the names people give branches (:name), kept by node as session metadata
 * (session.h) so that a save writes them beside the scores and a load brings them back.
 *
 * Not here: where a name is drawn (tui.c), the :name job (worker.c). */
#ifndef MD_UI_NAMES_H
#define MD_UI_NAMES_H

#include "forest/forest.h"
#include "session/session.h"

/* The name of every live node of f that src has (src may be NULL: none) set in dst.
 * ST_ERR_NOMEM (dst holds the names copied so far). */
st_code ui_names_copy(session_meta *dst, const session_meta *src, const forest *f, st_err *err);

#endif
