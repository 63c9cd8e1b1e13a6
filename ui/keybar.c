/* keybar.c - the key bar's items (keybar.h): an order of actions per pane, each with the
 * key that runs it there, laid out until the width is used. */
#include "keybar.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define BAR_FIRST_MAX 16

/* The keys a pane's users reach for first, in the bar's order, after help and the command
 * line; every other action of the pane follows, so a new action shows up on a wide screen
 * without a line here. */
static const struct {
    int32_t n;
    int a[BAR_FIRST_MAX];
} bar_first[UI_VIEW_N] = {
    [UI_VIEW_FOREST] = {12, {UI_ACT_GROW, UI_ACT_COT, UI_ACT_BEAM, UI_ACT_APPEND, UI_ACT_PRUNE, UI_ACT_UNDO,
                             UI_ACT_SEARCH, UI_ACT_NEXT_PANE, UI_ACT_MASK, UI_ACT_BOOKMARK, UI_ACT_STEP,
                             UI_ACT_QUIT}},
    [UI_VIEW_TEXT] = {9, {UI_ACT_ALT_DOWN, UI_ACT_ALT_PICK, UI_ACT_WORD_NEXT, UI_ACT_WORD_PREV, UI_ACT_TOKEN_FIRST,
                          UI_ACT_TOKEN_LAST, UI_ACT_NEXT_PANE, UI_ACT_GROW, UI_ACT_QUIT}},
    [UI_VIEW_MASK] = {9, {UI_ACT_MASK_FOLD, UI_ACT_MASK_OLDER, UI_ACT_MASK_NEWER, UI_ACT_ATTN, UI_ACT_ATTN_HEAD,
                          UI_ACT_PREVIEW, UI_ACT_STEP, UI_ACT_NEXT_PANE, UI_ACT_QUIT}},
};

/* Columns s takes on a terminal: one a character (key names and action names are narrow). */
static int32_t cols_of(const char *s) {
    int32_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* The first key bound to action a that runs it in view, by name into key; false when none
 * does (unbound, or shadowed by the pane's own binding of that key). */
static bool key_in_view(const ui_keymap *km, int view, int a, char *key, size_t cap) {
    int v = ui_action_get(a)->view;
    for (int32_t i = 0; i < km->n[v]; i++)
        if (km->b[v][i].action == a && ui_keymap_lookup(km, view, km->b[v][i].key) == a) {
            ui_key_name(km->b[v][i].key, key, cap);
            return true;
        }
    return false;
}

/* Appends action a to order (n entries) unless it is there already. */
static void bar_add(int a, bool *seen, int *order, int32_t *n) {
    if (!seen[a]) seen[a] = true, order[(*n)++] = a;
}

/* The bar's order for view into order (UI_ACT_N entries at most, each action once);
 * how many. */
static int32_t bar_order(int view, int *order) {
    bool seen[UI_ACT_N] = {false};
    int32_t n = 0;
    bar_add(UI_ACT_HELP, seen, order, &n);
    bar_add(UI_ACT_COMMAND, seen, order, &n);
    for (int32_t i = 0; view > 0 && view < UI_VIEW_N && i < bar_first[view].n; i++)
        bar_add(bar_first[view].a[i], seen, order, &n);
    for (int pass = 0; pass < 2; pass++) /* the pane's own actions, then those of every pane */
        for (int a = 0; a < UI_ACT_N; a++)
            if (ui_action_get(a)->view == (pass ? UI_VIEW_ALL : view)) bar_add(a, seen, order, &n);
    return n;
}

int32_t ui_keybar(const ui_keymap *km, int view, int32_t width, ui_keybar_item *out, int32_t cap) {
    int order[UI_ACT_N];
    int32_t n_order = bar_order(view, order), n = 0, col = 0;
    for (int32_t i = 0; i < n_order && n < cap; i++) {
        ui_keybar_item it = {.name = ui_action_get(order[i])->name, .col = col ? col + 2 : 0};
        if (!key_in_view(km, view, order[i], it.key, sizeof it.key)) continue;
        it.name_col = it.col + cols_of(it.key) + 1;
        int32_t end = it.name_col + cols_of(it.name);
        if (end > width) break; /* the bar stops at the first item that does not fit */
        out[n++] = it;
        col = end;
    }
    return n;
}

const char *ui_keybar_text(const ui_keybar_item *it, int32_t n, char *buf, size_t cap) {
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s %s", i ? "  " : "", it[i].key, it[i].name);
        if (w < 0 || (size_t)w >= cap - len) break;
        len += (size_t)w;
    }
    return buf;
}
