/* tui_loom.c - the loom's keys in the TUI (tui_impl.h): e edits a line and i forks at a
 * token with your own words, both through the command line and written by the worker
 * (loom.h); D draws the selected branch beside the bookmarked one from their first
 * difference. */
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "loom.h"
#include "screen.h"
#include "tui_impl.h"
#include "uline.h"

/* Opens the command line for your own text under node (an edit, a fork), prefilled with
 * text; a line break reads "\n" there. */
static void open_write(tui *t, forest_id node, const char *prompt, const char *text) {
    size_t n = strlen(text), k = 0;
    char *esc = malloc(2 * n + 1);
    if (!esc) return set_msg(t, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (text[i] == '\n') esc[k++] = '\\', esc[k++] = 'n';
        else esc[k++] = text[i];
    esc[k] = '\0';
    t->cmd_is_text = t->cmd_is_search = false;
    t->cmd_is_write = true, t->write_node = node;
    ui_cmdline_open_with(t->cmdwin, prompt, esc);
    free(esc);
}

/* e: the selected line's text to edit, written beside the line under its parent. */
void tui_edit_line(tui *t, const forest *f) {
    if (!t->fv.n_lines) return;
    const fv_line *ln = &t->fv.lines[t->fv.cursor];
    char *s = ui_loom_line_text(f, t->p->wp.tk, ln->start, ln->end);
    int32_t parent = forest_node_at(f, ln->start)->parent;
    if (s) open_write(t, parent >= 0 ? forest_id_at(f, parent) : FOREST_NONE, "edit> ", s);
    free(s);
}

/* i: your own text at the text pane's cursor token, a branch beside that token. */
void tui_fork_text(tui *t, const forest *f) {
    int32_t ids[TV_MAX_ALTS];
    float lps[TV_MAX_ALTS];
    forest_id parent;
    tv_alts(&t->tv, f, ids, lps, TV_MAX_ALTS, &parent);
    if (t->tv.n == 0) return set_msg(t, "nothing selected");
    open_write(t, parent, "fork> ", "");
}

/* The text finished at an edit> or fork> prompt ("\n": a line break), written. */
void tui_write_text(tui *t, const char *line) {
    char *s = strdup(line);
    if (!s) return set_msg(t, "out of memory");
    size_t k = 0;
    for (size_t i = 0; line[i]; i++)
        if (line[i] == '\\' && line[i + 1] == 'n') s[k++] = '\n', i++;
        else s[k++] = line[i];
    s[k] = '\0';
    post(t, (ui_job){.kind = UI_JOB_WRITE, .node = t->write_node, .text = s});
    free(s);
    t->dirty = true;
}

/* The first bookmarked node other than sel (DFS order), or FOREST_NONE. */
static forest_id bookmarked(const forest *f, forest_id sel) {
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if ((forest_node_at(f, i)->flags & FOREST_BOOKMARK) && forest_id_at(f, i) != sel) return forest_id_at(f, i);
    return FOREST_NONE;
}

/* D: the selected branch (left) beside the bookmarked one (right), each with the cursor on
 * the first token where they differ, so the difference is reversed and in view. */
void tui_draw_diff(tui *t, const forest *f, int y0, int x0, int h, int w) {
    forest_id sel = fv_selected(&t->fv, f), other = bookmarked(f, sel);
    st_err err = {0};
    char head[256];
    if (sel == FOREST_NONE || other == FOREST_NONE || tv_set(&t->tv2, f, other, &err)) {
        ui_line l = ui_line_make(head, sizeof head, w - 1, ui_screen_utf8());
        ui_line_put(&l, "D compares the selected branch with a bookmarked one: m marks one first");
        put_line(y0, x0 + 1, head, A_BOLD);
        return;
    }
    int32_t d = ui_loom_first_diff(f, sel, other), cw = (w - 1) / 2;
    char text[128];
    if (d < 0) snprintf(text, sizeof text, " the same tokens (D: back)");
    else snprintf(text, sizeof text, " differ from token %d: selected | bookmarked (D: back)", (int)d);
    ui_line l = ui_line_make(head, sizeof head, w, ui_screen_utf8());
    ui_line_put(&l, text);
    put_line(y0, x0, head, A_BOLD);
    t->tv.cursor = d >= 0 && d <= t->tv.n ? d : t->tv.n, t->tv.follow = false;
    t->tv2.cursor = d >= 0 && d <= t->tv2.n ? d : t->tv2.n, t->tv2.follow = false;
    tui_draw_pieces(t, f, &t->tv, &t->lay, y0 + 1, x0, h - 1, cw);
    for (int y = 1; y < h; y++) mvaddstr(y0 + y, x0 + cw, ui_screen_utf8() ? "\xe2\x94\x82" : "|");
    tui_draw_pieces(t, f, &t->tv2, &t->lay2, y0 + 1, x0 + cw + 1, h - 1, w - cw - 1);
}
