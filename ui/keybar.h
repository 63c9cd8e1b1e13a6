/* keybar.h - the key bar on the TUI's bottom line: the keys that work in the focused pane,
 * as "KEY name" items (htop's and lazygit's habit), read from the key map as it is bound
 * now and cut to the screen's width. Plain C over the action table and the key map, so it
 * is tested without a terminal (test_ui_keybar.c).
 *
 * Not here: drawing the items (tui.c), what the keys do. */
#ifndef MD_UI_KEYBAR_H
#define MD_UI_KEYBAR_H

#include <stddef.h>
#include <stdint.h>

#include "keys.h"

typedef struct ui_keybar_item {
    char key[16];     /* the first key bound to the action in the pane, by name ("n", "Space") */
    const char *name; /* the action's name (action.h), static */
    int32_t col;      /* the key's first column on the line */
    int32_t name_col; /* the name's (after the key and a space) */
} ui_keybar_item;

/* The items of view (UI_VIEW_FOREST / TEXT / MASK) that fit in width columns, two columns
 * apart and none cut: help and the command line first, then the pane's most used keys,
 * then its other actions and those that work everywhere, in the table's order. An action
 * with no key in the pane (unbound, or its key taken by another) is left out. Returns how
 * many were written (at most cap). */
int32_t ui_keybar(const ui_keymap *km, int view, int32_t width, ui_keybar_item *out, int32_t cap);

/* The items as one line of text into buf (cap > 0): "? help  : command  n grow". Returns buf. */
const char *ui_keybar_text(const ui_keybar_item *it, int32_t n, char *buf, size_t cap);

#endif
