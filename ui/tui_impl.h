/* tui_impl.h - what tui.c (the main loop, drawing, the actions) and tui_loom.c (the loom's
 * keys and the side-by-side view) share: the TUI's state and its smallest helpers. Private
 * to those files; the app sees tui.h only. */
#ifndef MD_UI_TUI_IMPL_H
#define MD_UI_TUI_IMPL_H

#include <ncursesw/curses.h>
#include <stdio.h>

#include "forest_view.h"
#include "keys.h"
#include "scores.h"
#include "text_view.h"
#include "tour.h"
#include "tui.h"

#define MSG_ROWS 4 /* rows a long message takes, word-wrapped, until the next key */
#define MSG_CAP 1024

typedef struct tui {
    const ui_tui_params *p;
    ui_worker *w;
    ui_keymap km;
    forest_view fv;
    ui_sort sort;         /* :sort; its keys by forest index (t->fv.key) */
    double *keys;
    int32_t cap_keys;
    text_view tv;
    tv_layout lay;      /* the text pane's rows, rebuilt at each draw */
    int focus;          /* UI_VIEW_FOREST / TEXT / MASK */
    bool mask, help, quit, dirty;
    bool cmd_is_text;   /* the open command line takes text to append, not a command */
    bool cmd_is_search; /* ... or the text to search the forest pane for */
    bool cmd_is_write;  /* ... or your own text to write under write_node (an edit, a fork) */
    forest_id write_node;
    bool diff;          /* the right pane shows the selected branch beside the bookmarked one */
    text_view tv2;      /* ... the bookmarked one's, and its rows */
    tv_layout lay2;
    char search[256];   /* the last search ("" none) */
    int help_top;
    uint64_t seen_version, seen_msg;
    char msg[MSG_CAP];
    bool msg_full;      /* the message shown whole (wrapped); after a key only its first row */
    int pane_h;         /* rows of the panes as last drawn (the message's rows come off) */
    WINDOW *cmdwin;
    int forest_h;       /* rows of the forest pane */
    int mask_gw;        /* columns of the mask grid as last drawn */
    double last_autosave;
    bool confirming;    /* the message line asks y/n before confirm_job (a load) runs */
    ui_job confirm_job;
    char confirm_text[1024];
    tour *tour;         /* :tour's screens while it is open, else NULL */
    int32_t tour_at;    /* the screen shown */
    bool rope;          /* the mask pane shows the selected row's RoPE turn (R) */
} tui;

static inline void set_msg(tui *t, const char *m) {
    snprintf(t->msg, sizeof t->msg, "%.*s", (int)sizeof t->msg - 1, m);
    t->msg_full = true;
    t->dirty = true;
}

static inline void post(tui *t, ui_job j) {
    if (!ui_worker_post(t->w, &j)) set_msg(t, "the engine is busy: try again");
}

static inline void put_line(int y, int x, const char *s, int attr) {
    attron(attr);
    mvaddstr(y, x, s);
    attroff(attr);
}

/* tv's text in th rows of w columns from y0, x0, wrapped at words into L (tv_layout); the
 * cursor token reversed and kept in view. */
void tui_draw_pieces(tui *t, const forest *f, text_view *tv, tv_layout *L, int y0, int x0, int th, int w);

/* ---- tui_loom.c ---- */

/* D: the selected branch beside the bookmarked one, in h rows of w columns from y0, x0. */
void tui_draw_diff(tui *t, const forest *f, int y0, int x0, int h, int w);
/* e: the selected line's text on the command line, to be written beside the line. */
void tui_edit_line(tui *t, const forest *f);
/* i: the command line for your own text at the text pane's cursor token. */
void tui_fork_text(tui *t, const forest *f);
/* The text finished at an edit> or fork> prompt, written (UI_JOB_WRITE). */
void tui_write_text(tui *t, const char *line);

#endif
