/* tour_pane.h - the guided tour in the TUI (:tour): one tour.h screen at a time over the
 * whole terminal, with its keys (n, space or right: next; p or left: back; q or Esc:
 * leave). Not here: building the tour (tour.h), the main loop (tui.c). */
#ifndef MD_UI_TOUR_PANE_H
#define MD_UI_TOUR_PANE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "model/model.h"
#include "tour.h"

/* The tour of prompt ("" or NULL: "Once upon a time") on m, run in a small context of its
 * own (backend and threads as the TUI's: NULL, 0 for the defaults), which it frees before
 * returning. NULL + err as tour_build, or ST_ERR_ARG without a model. */
tour *tour_pane_open(const model *m, const tok *tk, const char *prompt, const char *backend, int32_t threads,
                     st_err *err);
/* Draws screen at of t over h x w cells from the top left (curses). */
void tour_pane_draw(const tour *t, int32_t at, int h, int w);
/* Applies key ch (is_key: a curses key code) to the screen shown, *at; returns false when
 * the key leaves the tour. */
bool tour_pane_key(const tour *t, int ch, bool is_key, int32_t *at);

#endif
