/* test_ui_keybar.c - the key bar on the TUI's bottom line (ui/keybar.h), without a
 * terminal: each pane's bar names the keys that work there, in the bar's order, fits any
 * width without cutting an item, follows the bindings as they are (a rebound key, an
 * unbound one, a pane key shadowing a global one), and names every action of the pane
 * on a wide enough line. */
#include <string.h>

#include "../ui/keybar.h"
#include "t.h"

#define BAR_MAX UI_ACT_N

/* The bar of view at width as text into buf; how many items. */
static int32_t bar(const ui_keymap *km, int view, int32_t width, char *buf, size_t cap) {
    ui_keybar_item it[BAR_MAX];
    int32_t n = ui_keybar(km, view, width, it, BAR_MAX);
    ui_keybar_text(it, n, buf, cap);
    return n;
}

static void test_panes(void) {
    ui_keymap km;
    ui_keymap_defaults(&km);
    char line[4096];
    bar(&km, UI_VIEW_FOREST, 80, line, sizeof line);
    T_CHECK(!strcmp(line, "? help  : command  n grow  c cot  b beam  a append  d prune  u undo  / search"),
            "the forest pane's bar at 80 columns: '%s'", line);
    bar(&km, UI_VIEW_TEXT, 80, line, sizeof line);
    T_CHECK(!strncmp(line, "? help  : command  j alt-down  Enter alt-pick  W word-next", 58),
            "the text pane's bar starts with its own keys: '%s'", line);
    bar(&km, UI_VIEW_MASK, 80, line, sizeof line);
    T_CHECK(!strncmp(line, "? help  : command  o mask-fold  [ mask-older  ] mask-newer", 58),
            "the mask pane's bar starts with its own keys: '%s'", line);
    /* a wide line names every action the pane's keys run, each once */
    int32_t n = bar(&km, UI_VIEW_TEXT, 4000, line, sizeof line), want = 0;
    bool all = true;
    for (int a = 0; a < UI_ACT_N; a++) {
        int v = ui_action_get(a)->view;
        if (v != UI_VIEW_TEXT && v != UI_VIEW_ALL) continue;
        char item[64];
        snprintf(item, sizeof item, " %s", ui_action_get(a)->name);
        const char *p = strstr(line, item);
        bool once = p && (p[strlen(item)] == ' ' || !p[strlen(item)]);
        all &= once;
        if (!once) fprintf(stderr, "the text bar lacks %s\n", item);
        want++;
    }
    T_CHECK(all && n == want, "4000 columns: the text pane's %d actions, %d items", (int)want, (int)n);
}

static void test_widths(void) {
    ui_keymap km;
    ui_keymap_defaults(&km);
    bool ok = true;
    for (int view = UI_VIEW_FOREST; view < UI_VIEW_N; view++)
        for (int32_t w = 0; w <= 300; w++) {
            ui_keybar_item it[BAR_MAX];
            int32_t n = ui_keybar(&km, view, w, it, BAR_MAX);
            char line[4096];
            ui_keybar_text(it, n, line, sizeof line);
            /* the text is the items at their columns, and within the width */
            int32_t end = n ? it[n - 1].name_col + (int32_t)strlen(it[n - 1].name) : 0;
            bool good = (int32_t)strlen(line) == end && end <= w;
            for (int32_t i = 0; good && i < n; i++)
                good = !strncmp(line + it[i].col, it[i].key, strlen(it[i].key)) &&
                       !strncmp(line + it[i].name_col, it[i].name, strlen(it[i].name));
            /* and one more item would not have fitted */
            ui_keybar_item more[BAR_MAX];
            good = good && (ui_keybar(&km, view, 4000, more, BAR_MAX) == n ||
                            more[n].name_col + (int32_t)strlen(more[n].name) > w);
            if (!good) fprintf(stderr, "view %d width %d: '%s'\n", view, (int)w, line);
            ok &= good;
        }
    T_CHECK(ok, "every width from 0 to 300: whole items, within the width, as many as fit");
    ui_keybar_item it[4];
    T_CHECK(ui_keybar(&km, UI_VIEW_FOREST, 4000, it, 4) == 4, "cap items at most");
}

static void test_bindings(void) {
    ui_keymap km;
    ui_keymap_defaults(&km);
    char line[4096];
    ui_keymap_bind(&km, ui_key_parse("C-g"), UI_ACT_GROW); /* added after n: n is still first */
    ui_keymap_unbind(&km, 'n', UI_VIEW_ALL);
    bar(&km, UI_VIEW_FOREST, 80, line, sizeof line);
    T_CHECK(strstr(line, "C-g grow") && !strstr(line, "n grow"), "grow rebound to C-g: '%s'", line);
    ui_keymap_unbind(&km, 'c', UI_VIEW_ALL);
    bar(&km, UI_VIEW_FOREST, 4000, line, sizeof line);
    T_CHECK(!strstr(line, " cot"), "an unbound action is left out: '%s'", line);
    /* b bound to prune (a forest pane action) shadows beam there, but not in the text pane */
    ui_keymap_bind(&km, 'b', UI_ACT_PRUNE);
    bar(&km, UI_VIEW_FOREST, 4000, line, sizeof line);
    bool forest_ok = strstr(line, "d prune") && !strstr(line, " beam");
    bar(&km, UI_VIEW_TEXT, 4000, line, sizeof line);
    T_CHECK(forest_ok && strstr(line, "b beam"), "a pane's key shadows a global one only in its pane: '%s'", line);
}

int main(void) {
    test_panes();
    test_widths();
    test_bindings();
    return t_done();
}
