/* rope_view.h - RoPE made visible (teaching): the angle by which rotary position
 * embedding turns pair k of a head's query and key at position pos, and a row's first
 * pairs as one line of text, for the mask pane, the tour and the SVG's dials. The angles
 * are the global layers' (rope_base; no scaling); not here: applying them (the kernels). */
#ifndef MD_UI_ROPE_VIEW_H
#define MD_UI_ROPE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mask_view.h"

#define RV_PAIRS 4 /* pairs a line shows */

/* pos * base^(-2k/dim) reduced to [0, 2 pi): the turn of pair k (0 <= 2k < dim). */
double rv_angle(float base, int32_t dim, int32_t pos, int32_t k);
/* "WHO pos P:  a0°  a1°  a2°  a3°" (degrees, rounded; no '°' without UTF-8) for the
 * first RV_PAIRS pairs, at most width columns. */
void rv_line(const char *who, float base, int32_t dim, int32_t pos, char *out, size_t cap, int width,
             bool utf8);
/* The rows the pane shows beside row r of v: its parent's row in v or -1 (the parent is
 * then one position less, outside the step), and a row of another branch at r's position
 * (a sibling first) or -1. */
void rv_partners(const mask_view *v, int32_t r, int32_t *parent, int32_t *other);
/* Line i (0..2) of the rotation view of row r: the row, its parent, another row at its
 * position; false when there is no such line (no parent: a root; no other row at r's
 * position) or the view says no RoPE base. */
bool rv_view_line(const mask_view *v, int32_t r, int i, char *out, size_t cap, int width, bool utf8);

#endif
