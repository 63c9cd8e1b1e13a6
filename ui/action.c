/* action.c - lookups over the action table (action.h) and the help screen it generates. */
#include "action.h"

#include <stdio.h>
#include <string.h>

static const ui_action_info ui_actions[UI_ACT_N] = {
#define UI_ACT_ROW(id, name, keys, view, help) {name, keys, view, help},
    UI_ACTIONS(UI_ACT_ROW)
#undef UI_ACT_ROW
};

const ui_action_info *ui_action_get(int a) {
    return a >= 0 && a < UI_ACT_N ? &ui_actions[a] : NULL;
}

int ui_action_by_name(const char *name) {
    for (int a = 0; a < UI_ACT_N; a++)
        if (!strcmp(ui_actions[a].name, name)) return a;
    return UI_ACT_NONE;
}

const char *ui_view_name(int view) {
    static const char *const names[UI_VIEW_N] = {"all", "forest", "text", "mask"};
    return view >= 0 && view < UI_VIEW_N ? names[view] : "?";
}

/* The help screen: one heading per view, then its actions, in table order. */
int32_t ui_help_line(int32_t i, ui_keys_text_fn keys_of, void *ud, char *out, size_t cap) {
    int32_t line = 0;
    char keys[64];
    for (int v = 0; v < UI_VIEW_N; v++) {
        int n = 0;
        for (int a = 0; a < UI_ACT_N; a++) n += ui_actions[a].view == v;
        if (!n) continue;
        if (line++ == i)
            snprintf(out, cap, "%s", v == UI_VIEW_ALL ? "Everywhere" : v == UI_VIEW_FOREST ? "Forest pane"
                                     : v == UI_VIEW_TEXT ? "Text pane" : "Mask pane");
        for (int a = 0; a < UI_ACT_N; a++) {
            if (ui_actions[a].view != v) continue;
            if (line++ != i) continue;
            const char *k = keys_of ? keys_of(ud, a, keys, sizeof keys) : ui_actions[a].keys;
            snprintf(out, cap, "  %-14s %-14s %s", k, ui_actions[a].name, ui_actions[a].help);
        }
    }
    if (i >= line && cap) out[0] = '\0';
    return line;
}
