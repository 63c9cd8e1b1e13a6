/* tour_pane.c - the guided tour's screens in the TUI (tour_pane.h). */
#include "tour_pane.h"

#include <ncursesw/curses.h>
#include <stdio.h>
#include <string.h>

#include "screen.h"
#include "uline.h"

#define TOUR_SLOTS 256 /* the tour's forest is a few dozen tokens */

tour *tour_pane_open(const model *m, const tok *tk, const char *prompt, const char *backend, int32_t threads,
                     st_err *err) {
    if (!m) {
        st_set(err, ST_ERR_ARG, "no model for the tour");
        return NULL;
    }
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = TOUR_SLOTS, cp.max_rows = TOUR_SLOTS, cp.backend = backend, cp.n_threads = threads;
    model_ctx *c = model_ctx_init(m, &cp, err);
    tour *t = c ? tour_build(c, tk, prompt && *prompt ? prompt : "Once upon a time", err) : NULL;
    model_ctx_free(c);
    return t;
}

void tour_pane_draw(const tour *t, int32_t at, int h, int w) {
    char buf[512], line[512];
    snprintf(buf, sizeof buf, " tour %d of %d   n / space: next   p: back   q: leave", at + 1, tour_n_screens(t));
    ui_line l = ui_line_make(line, sizeof line, w, ui_screen_utf8());
    ui_line_put(&l, buf);
    ui_line_pad(&l);
    attron(ui_screen_attr(UI_PAIR_TITLE));
    mvaddstr(0, 0, line);
    attroff(ui_screen_attr(UI_PAIR_TITLE));
    const char *s = tour_screen(t, at);
    for (int y = 1; y < h && s && *s; y++) {
        size_t n = strcspn(s, "\n");
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), s);
        l = ui_line_make(line, sizeof line, w, ui_screen_utf8());
        ui_line_put(&l, buf);
        int attr = y == 1 ? A_BOLD : A_NORMAL; /* the screen's title */
        attron(attr);
        mvaddstr(y, 0, line);
        attroff(attr);
        s += n + (s[n] == '\n');
    }
}

bool tour_pane_key(const tour *t, int ch, bool is_key, int32_t *at) {
    bool next = (!is_key && (ch == 'n' || ch == ' ')) || (is_key && (ch == KEY_RIGHT || ch == KEY_NPAGE));
    bool back = (!is_key && ch == 'p') || (is_key && (ch == KEY_LEFT || ch == KEY_PPAGE));
    if (next && *at + 1 < tour_n_screens(t)) ++*at;
    else if (back && *at > 0) --*at;
    return is_key || (ch != 'q' && ch != 27);
}
