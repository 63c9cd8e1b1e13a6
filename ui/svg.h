/* svg.h - pictures for slides: the forest as a tree and one step's attention mask, as SVG.
 *
 * The tree shows every live node as a box: its token, its RoPE position (p) and KV slot
 * (s, "-" while pending) and its probability; the nodes of the captured step are drawn
 * with a heavy border. The mask shows the step's rows (token, position, slot) against the
 * KV slots they may see, each row in its branch's colour, with the same columns as the
 * mask pane (mask_view.h: a gap where slot numbers jump; runs of slots that every row
 * sees alike as one column when there are more than SVG_MAX_COLS). Sizes are chosen to
 * stay readable when projected (14 px text, 16 px cells). Text is escaped for XML and
 * bytes that are not UTF-8 read as \xNN, so any token gives a well-formed file.
 *
 * No two radix lines of one picture share a colour. Not here: running steps (the caller captures the mask view), the terminal. */
#ifndef MD_UI_SVG_H
#define MD_UI_SVG_H

#include <stdio.h>

#include "base/status.h"
#include "forest/forest.h"
#include "mask_view.h"
#include "tok/tok.h"

#define SVG_MAX_COLS 160  /* mask columns before runs of slots are merged */
#define SVG_MAX_NODES 4000 /* tree nodes drawn; the rest are counted in a note */

enum { SVG_TREE = 1, SVG_MASK = 2 }; /* the parts to draw (or both) */
/* With the parts: a slide. 16:9 (1920 x 1080), the shared prompt folded into one labelled
 * box, whole token texts (cut with an ellipsis past SVG slide width), the mask's shared
 * runs as one column each, its columns named and coloured by the token that holds them. */
#define SVG_SLIDE 4

/* Writes the picture of forest f (tk may be NULL: tokens read [id]) and of the step in
 * mv (its layout is changed; skipped when no step was captured) to fp. parts: SVG_TREE,
 * SVG_MASK or both. ST_ERR_IO when the write fails. */
st_code svg_write(FILE *fp, const forest *f, const tok *tk, mask_view *mv, int parts, st_err *err);
/* svg_write into the file at path, created or replaced whole through base/outfile.h (a
 * link or a file that is not regular is refused), with a message naming it. */
st_code svg_save(const char *path, const forest *f, const tok *tk, mask_view *mv, int parts,
                 st_err *err);

#endif
