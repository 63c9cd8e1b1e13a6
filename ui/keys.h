/* keys.h - key names and the key map: which action a key runs in each view.
 *
 * A key is an int: a Unicode code point for a character key (control keys as 1..31) or
 * a curses KEY_* code for a function key. Names, as binding files write them: one
 * character ("q", ":", "?"), "C-x" for control keys, "Space", "Tab", "Enter", "Esc",
 * "Backspace", "Delete", "Up", "Down", "Left", "Right", "PgUp", "PgDn", "Home", "End",
 * "F1".."F12". A binding file holds lines "bind KEY ACTION" (ACTION a name from
 * action.h; the binding applies in that action's view), "unbind KEY VIEW", blank lines
 * and "# comments". Bad lines are reported, never fatal: the rest of the file still
 * applies. Not here: what actions do. */
#ifndef MD_UI_KEYS_H
#define MD_UI_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "action.h"

#define UI_KEYMAP_MAX 256 /* bindings per view */

typedef struct ui_binding {
    int key;
    int action;
} ui_binding;

typedef struct ui_keymap {
    ui_binding b[UI_VIEW_N][UI_KEYMAP_MAX];
    int32_t n[UI_VIEW_N];
} ui_keymap;

/* The key called name, or -1. */
int ui_key_parse(const char *name);
/* The name of key into buf (cap > 0); returns buf ("?" for a key without a name). */
const char *ui_key_name(int key, char *buf, size_t cap);

/* An empty map / the defaults of the action table. */
void ui_keymap_clear(ui_keymap *km);
void ui_keymap_defaults(ui_keymap *km);
/* Binds key to action in the action's view (replacing the key's binding there). Returns
 * false when the view's table is full. */
bool ui_keymap_bind(ui_keymap *km, int key, int action);
void ui_keymap_unbind(ui_keymap *km, int key, int view);
/* The action of key in view (its own bindings first, then UI_VIEW_ALL's), or UI_ACT_NONE. */
int ui_keymap_lookup(const ui_keymap *km, int view, int key);
/* The keys bound to action, as "k Up" into buf; returns buf ("" when none). */
const char *ui_keymap_keys_of(const ui_keymap *km, int action, char *buf, size_t cap);

/* Applies a binding file's text (len bytes) to km. Returns the number of bad lines; the
 * first one's message ("NAME:LINE: why") goes to msg (cap bytes, "" when none). name is
 * the file name for messages. */
int32_t ui_keymap_parse(ui_keymap *km, const char *text, size_t len, const char *name,
                        char *msg, size_t cap);
/* A binding file larger than this is refused (the default one is 3 KiB). */
#define UI_KEYS_MAX_FILE ((size_t)64 << 10)
/* Reads and applies a file; a missing file is no error (returns 0); one that cannot be
 * read, is not a regular file or is over UI_KEYS_MAX_FILE bytes: 1, msg says why. */
int32_t ui_keymap_load(ui_keymap *km, const char *path, char *msg, size_t cap);

#endif
