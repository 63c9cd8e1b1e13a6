/* tui.c - the TUI's main loop (tui.h): reads keys and mouse events with a 30 ms timeout,
 * maps them through the key map to actions, queues engine jobs with the worker, and
 * redraws when the worker's version changes or the user moved. Drawing takes the
 * worker's lock with trylock, so a running step never blocks the screen: the last frame
 * stays up until the step lands. Layout (top to bottom): title, panes (forest | text or
 * mask), status line, message, key bar (the command line over it while open). Below
 * 80x24 only a message is drawn. */
#include "base/clock.h"
#include "tui.h"

#include <math.h>
#include <ncursesw/curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "action.h"
#include "cmdline.h"
#include "command.h"
#include "forest_view.h"
#include "keybar.h"
#include "keys.h"
#include "tui_impl.h"
#include "screen.h"
#include "rope_view.h"
#include "text_view.h"
#include "tour_pane.h"
#include "uline.h"

#define MIN_W 80
#define MIN_H 24
#define AUTOSAVE_S 30.0
/* A save to path; one to the autosave file leaves the work counted as unsaved (the next
 * run's autosave replaces it). */
static ui_job save_job(const tui *t, const char *path) {
    bool autosave = t->p->autosave && !strcmp(path, t->p->autosave);
    return (ui_job){.kind = UI_JOB_SAVE, .text = path, .u.save.autosave = autosave};
}

/* The keys' cot and beam: k chains, a beam of width, from node. */
static ui_job cot_job(forest_id node, int32_t k) {
    ui_job j = ui_job_of(strategy_find("cot"), node);
    j.u.run.opts.u.cot.k = k;
    return j;
}

static ui_job beam_job(forest_id node, int32_t width) {
    ui_job j = ui_job_of(strategy_find("beam"), node);
    j.u.run.opts.u.beam.width = width;
    return j;
}

/* Views follow the forest (under the lock). */
static void sync_views(tui *t) {
    const forest *f = ui_worker_forest(t->w);
    st_err err = {0};
    t->fv.key = NULL;
    if (t->sort && !ui_worker_sort_keys(t->w, t->sort, &t->keys, &t->cap_keys, &err))
        t->fv.key = t->keys, t->fv.n_key = forest_capacity(f);
    if (fv_rebuild(&t->fv, f, &err)) set_msg(t, err.msg);
    forest_id focus = ui_worker_take_focus(t->w);
    if (focus != FOREST_NONE) fv_select_node(&t->fv, f, focus);
    forest_id sel = fv_selected(&t->fv, f);
    if (sel != FOREST_NONE) tv_set(&t->tv, f, sel, &err);
    else tv_free(&t->tv);
}

/* ---- drawing ---- */

static int branch_pair(int32_t start) {
    return UI_PAIR_BRANCH0 + (int)(((uint32_t)start * 2654435761u >> 16) % 6);
}

static void draw_forest(tui *t, const forest *f, int y0, int h, int w) {
    forest_id running[64];
    int32_t nr = ui_worker_running(t->w, running, 64);
    fv_scroll(&t->fv, h);
    t->forest_h = h;
    char buf[1024];
    for (int r = 0; r < h; r++) {
        int32_t i = t->fv.top + r;
        if (i >= t->fv.n_lines) break;
        const fv_line *ln = &t->fv.lines[i];
        /* a named line ends with its name (:name), a judged branch's or a beam hypothesis's
           with its score */
        char sc[160] = "";
        double score;
        const char *name = ui_worker_name_of(t->w, forest_id_at(f, ln->start));
        if (name) snprintf(sc, sizeof sc, ui_screen_utf8() ? " \xc2\xab%.100s\xc2\xbb" : " <%.100s>", name);
        if (ui_worker_score_of(t->w, forest_id_at(f, ln->end), &score))
            snprintf(sc + strlen(sc), sizeof sc - strlen(sc), " [%.2f]", score);
        int sw = (int)strlen(sc);
        int cls = fv_render(&t->fv, f, t->p->wp.tk, i, running, nr, buf, sizeof buf, w - sw > 8 ? w - sw : w);
        if (sc[0] && w - sw > 8) {
            char line[1024];
            ui_line l = ui_line_make(line, sizeof line, w, ui_screen_utf8());
            ui_line_put(&l, buf);
            ui_line_put(&l, sc);
            memcpy(buf, line, sizeof line);
        }
        bool sel = i == t->fv.cursor;
        /* colour by branch; dimmed below 10% so unlikely branches recede */
        int attr = cls == 3 ? ui_screen_attr(UI_PAIR_PROB3) : ui_screen_attr(branch_pair(ln->start));
        if (cls == 0 || (ln->flags & FV_DIMMED)) attr |= (int)A_DIM;
        if (sel) attr = ui_screen_attr(UI_PAIR_SEL) | (t->focus == UI_VIEW_FOREST ? (int)A_BOLD : 0);
        put_line(y0 + r, 0, buf, attr);
        /* ... and the percentage shaded by probability (the text pane's scale) */
        int xp = 2 * (ln->indent < 32 ? ln->indent : 32) + 2;
        if (!sel && cls < 3 && xp + 4 <= w) {
            static const int cls_pair[3] = {UI_PAIR_PROB0, UI_PAIR_PROB1, UI_PAIR_PROB2};
            char pc[16];
            snprintf(pc, sizeof pc, "%3.0f%%", 100.0 * exp((double)forest_node_at(f, ln->start)->logprob));
            put_line(y0 + r, xp, pc, ui_screen_attr(cls_pair[cls]) | (ln->flags & FV_DIMMED ? A_DIM : A_BOLD));
        }
    }
}

/* tv's text in th rows of w columns from y0, x0, wrapped at words into L (tv_layout); the
 * cursor token reversed and kept in view. */
void tui_draw_pieces(tui *t, const forest *f, text_view *tv, tv_layout *L, int y0, int x0, int th, int w) {
    static const int cls_pair[4] = {UI_PAIR_PROB0, UI_PAIR_PROB1, UI_PAIR_PROB2, UI_PAIR_PROB3};
    char buf[1024];
    st_err err = {0};
    if (tv_layout_build(L, tv, f, t->p->wp.tk, w, ui_screen_utf8(), ui_screen_utf8() ? "\xe2\x96\x91" : "_", &err))
        set_msg(t, err.msg);
    int32_t cur_row = tv_layout_cursor_row(L, tv->cursor);
    int32_t first = cur_row - th + 1 > 0 ? cur_row - th + 1 : 0;
    if (L->rows - first >= th && cur_row < L->rows - th + 1) first = cur_row > 0 ? cur_row - 1 : 0;
    for (int32_t i = 0; i < L->n; i++) {
        const tv_piece *pc = &L->p[i];
        if (pc->row < first || pc->row - first >= th) continue;
        size_t len = pc->len < sizeof buf - 1 ? pc->len : sizeof buf - 1;
        memcpy(buf, L->text + pc->off, len);
        buf[len] = '\0';
        int attr = ui_screen_attr(cls_pair[tv_class(tv, f, pc->tok)]); /* the cell's first token's */
        if (tv->cursor >= pc->tok && tv->cursor < pc->next) attr |= A_REVERSE | (t->focus == UI_VIEW_TEXT ? A_BOLD : 0);
        put_line(y0 + pc->row - first, x0 + pc->col, buf, attr);
    }
}

/* The branch's text (draw_pieces), then the alternatives at the cursor token. */
static void draw_text(tui *t, const forest *f, int y0, int x0, int h, int w) {
    text_view *tv = &t->tv;
    int alt_h = 7, th = h - alt_h;
    char buf[1024], vis[1024];
    tui_draw_pieces(t, f, tv, &t->lay, y0, x0, th, w);
    /* the alternatives at the cursor */
    int32_t ids[TV_MAX_ALTS];
    float lps[TV_MAX_ALTS];
    forest_id parent;
    int32_t n = tv_alts(tv, f, ids, lps, TV_MAX_ALTS, &parent);
    int ya = y0 + th;
    for (int x = 0; x < w; x++) mvaddstr(ya, x0 + x, ui_screen_utf8() ? "\xe2\x94\x80" : "-");
    snprintf(vis, sizeof vis, " alternatives at token %d%s ", tv->cursor,
             tv->cursor == tv->n ? " (next)" : "");
    put_line(ya, x0 + 1, vis, ui_screen_attr(UI_PAIR_DIM));
    if (tv->alt >= n) tv->alt = n ? n - 1 : 0;
    for (int32_t k = 0; k < n && k < alt_h - 1; k++) {
        /* shown as text after its parent (a leading space stays visible), not as the raw
         * vocabulary piece ("Ġand", "▁and") */
        char pc[64];
        fv_alt_text(f, t->p->wp.tk, forest_index(parent), ids[k], pc, sizeof pc);
        ui_line l = ui_line_make(vis, sizeof vis, w - 12, ui_screen_utf8());
        ui_line_put(&l, pc);
        snprintf(buf, sizeof buf, "%c %5.1f%%  ", k == tv->alt && t->focus == UI_VIEW_TEXT ? '>' : ' ',
                 100.0 * exp((double)lps[k]));
        put_line(ya + 1 + k, x0, buf, ui_screen_attr(UI_PAIR_DIM));
        put_line(ya + 1 + k, x0 + (int)strlen(buf), vis, k == tv->alt ? A_BOLD : A_NORMAL);
    }
    if (n == 0) put_line(ya + 1, x0 + 2, "(none kept: run a step, or move the cursor)", ui_screen_attr(UI_PAIR_DIM));
}

/* The rotation of the selected node's row (else the last row) under the grid, beside its
 * parent and another branch; the rows' lines it takes, 0 where the pane is short. */
static int draw_rope(tui *t, const mask_view *mv, int y0, int x0, int h, int w) {
    if (!t->rope || mv->rope_dim < 2 || mv->n_rows == 0 || h < MV_HEAD_LINES + 10) return 0;
    forest_id sel = fv_selected(&t->fv, ui_worker_forest(t->w));
    int32_t r = mv->n_rows - 1;
    for (int32_t i = 0; i < mv->n_rows; i++)
        if (mv_row_node(mv, i) == sel) r = i;
    char buf[256];
    ui_line l = ui_line_make(buf, sizeof buf, w, ui_screen_utf8());
    ui_line_put(&l, "RoPE: pos = RoPE position = depth; turn = pos x theta_k");
    put_line(y0 + h - 4, x0, buf, ui_screen_attr(UI_PAIR_DIM));
    for (int i = 0; i < 3; i++)
        if (rv_view_line(mv, r, i, buf, sizeof buf, w - 2, ui_screen_utf8()))
            put_line(y0 + h - 3 + i, x0 + 2, buf, ui_screen_attr(UI_PAIR_DIM));
    return 4;
}

static void draw_mask(tui *t, int y0, int x0, int h, int w) {
    mask_view *mv = ui_worker_mask_mut(t->w);
    bool utf8 = ui_screen_utf8();
    char buf[512];
    int32_t kept, back = ui_worker_mask_back(t->w, 0, &kept);
    char mark[32] = "";
    if (back > 0) snprintf(mark, sizeof mark, " [%d back]", back); /* an older step: ] returns */
    mv_header(mv, buf, sizeof buf, w - (int)strlen(mark), utf8);
    put_line(y0, x0, buf, A_BOLD);
    if (back > 0) put_line(y0, x0 + w - (int)strlen(mark), mark, ui_screen_attr(UI_PAIR_DIM) | A_BOLD);
    if (mv->step < 0) return;
    mv_legend(mv, buf, sizeof buf, w, utf8);
    put_line(y0 + 1, x0, buf, ui_screen_attr(UI_PAIR_DIM));
    int tw = MV_TEXT_COLS + 1, gw = w - tw;
    /* the newest slots are the interesting ones: the grid follows its last columns until
     * scrolled left (h / l); runs of slots become one column when the grid is too wide */
    mv_layout(mv, gw);
    t->mask_gw = gw;
    int32_t left = mv_first_col(mv, gw);
    const char *sep = utf8 ? "\u2502" : "|";
    int mw = mv_marks(mv, buf, sizeof buf, tw - 2, utf8);
    put_line(y0 + 2, x0 + tw - 2 - mw, buf, ui_screen_attr(UI_PAIR_DIM));
    put_line(y0 + 2, x0 + tw - 1, sep, ui_screen_attr(UI_PAIR_DIM));
    mv_slot_line(mv, left, gw, buf, sizeof buf, utf8);
    put_line(y0 + 2, x0 + tw, buf, ui_screen_attr(UI_PAIR_DIM));
    h -= draw_rope(t, mv, y0, x0, h, w);
    for (int r = 0; r < h - MV_HEAD_LINES && mv->top + r < mv->n_rows; r++) {
        int32_t row = mv->top + r;
        int y = y0 + MV_HEAD_LINES + r; /* mv_row_at's layout */
        mv_row_text(mv, row, buf, sizeof buf, MV_TEXT_COLS, utf8);
        /* a pruned node's row stays (the step did run it), dimmed: a speculative step's
           rejected drafts and window cells among them */
        int attr = mv->rows[row].gone ? ui_screen_attr(UI_PAIR_DIM) : ui_screen_attr(UI_PAIR_BRANCH0 + mv->rows[row].colour);
        put_line(y, x0, buf, attr);
        put_line(y, x0 + tw - 1, sep, ui_screen_attr(UI_PAIR_DIM));
        for (int c = 0; c < gw && left + c < mv->n_dcols; c++) {
            char cell = mv_cell(mv, row, left + c), g[8]; /* ':' (outside the window) is seen too */
            mv_cell_glyph(mv, row, left + c, utf8, g);
            put_line(y, x0 + tw + c, g, cell == '#' || cell == ':' ? attr : ui_screen_attr(UI_PAIR_DIM));
        }
    }
}

static const char *keys_text(void *ud, int a, char *buf, size_t cap) {
    return ui_keymap_keys_of(ud, a, buf, cap);
}

static void draw_help(tui *t, int h, int w) {
    char buf[512];
    int32_t n = ui_help_line(0, keys_text, &t->km, buf, sizeof buf), n_cmd = 0, n_leg = 0;
    while (ui_cmd_usage(n_cmd)) n_cmd++;
    while (fv_legend(n_leg, ui_screen_utf8())) n_leg++;
    int32_t c0 = n + 2 + n_leg + 2; /* the first command line: keys, marks, commands */
    int32_t total = c0 + n_cmd;
    if (t->help_top > total - (h - 2)) t->help_top = total - (h - 2);
    if (t->help_top < 0) t->help_top = 0;
    put_line(0, 0, " help: keys (any key closes; j/k scroll)", ui_screen_attr(UI_PAIR_TITLE));
    for (int r = 0; r < h - 2; r++) {
        int32_t i = t->help_top + r;
        if (i < n) ui_help_line(i, keys_text, &t->km, buf, sizeof buf);
        else if (i == n || i == c0 - 2) buf[0] = '\0';
        else if (i == n + 1) snprintf(buf, sizeof buf, "Marks in the forest pane");
        else if (i < c0 - 2) snprintf(buf, sizeof buf, "%s", fv_legend(i - n - 2, ui_screen_utf8()));
        else if (i == c0 - 1) snprintf(buf, sizeof buf, "Commands (:)");
        else if (i < total) snprintf(buf, sizeof buf, "  %s", ui_cmd_usage(i - c0));
        else break;
        ui_line l = ui_line_make(buf + 256, 256, w, ui_screen_utf8());
        ui_line_put(&l, buf);
        put_line(1 + r, 0, buf + 256, buf[0] != ' ' ? A_BOLD : A_NORMAL);
    }
}

/* The bottom line: the focused pane's keys (keybar.h), each key bold before its name. */
static void draw_keybar(tui *t, int y, int w) {
    ui_keybar_item it[UI_ACT_N];
    int32_t n = ui_keybar(&t->km, t->focus, w, it, UI_ACT_N);
    for (int32_t i = 0; i < n; i++) {
        put_line(y, it[i].col, it[i].key, ui_screen_attr(UI_PAIR_TITLE) | A_BOLD);
        put_line(y, it[i].name_col, it[i].name, ui_screen_attr(UI_PAIR_DIM));
    }
}

static void draw(tui *t) {
    int H = LINES, W = COLS;
    erase();
    if (W < MIN_W || H < MIN_H) {
        char m[128];
        snprintf(m, sizeof m, "terminal too small: %dx%d, need %dx%d", W, H, MIN_W, MIN_H);
        mvaddnstr(H / 2, 0, m, W);
        refresh();
        return;
    }
    if (t->help || t->tour) {
        if (t->tour) tour_pane_draw(t->tour, t->tour_at, H, W);
        else draw_help(t, H, W);
        refresh();
        return;
    }
    const forest *f = ui_worker_forest(t->w);
    char buf[1024];
    ui_line l = ui_line_make(buf, sizeof buf, W, ui_screen_utf8());
    ui_line_put(&l, " multidecode ");
    ui_line_put(&l, t->p->wp.model_name ? t->p->wp.model_name : "");
    ui_line_put(&l, t->focus == UI_VIEW_FOREST ? "  [forest]" : t->focus == UI_VIEW_TEXT ? "  [text]" : "  [mask]");
    ui_line_put(&l, "   ? help  : command  q quit");
    ui_line_pad(&l);
    put_line(0, 0, buf, ui_screen_attr(UI_PAIR_TITLE));
    /* the message, word-wrapped: whole (up to MSG_ROWS rows) until the next key, then its
     * first row, ending with '…' when there is more */
    char mrow[MSG_ROWS][512];
    int nm = 0;
    const char *ms = t->msg;
    int max_rows = ui_cmdline_active() ? 0 : t->msg_full ? MSG_ROWS : 1;
    while (nm < max_rows && (nm == 0 || *ms)) {
        ui_line m = ui_line_make(mrow[nm], sizeof mrow[nm], W, ui_screen_utf8());
        size_t used = ui_line_put_words(&m, ms);
        if (ms[used] && nm + 1 == max_rows) { /* the last row there is room for: more follows */
            m = ui_line_make(mrow[nm], sizeof mrow[nm], W - 2, ui_screen_utf8());
            ui_line_put_words(&m, ms);
            m.full = false, m.max_cols = W;
            ui_line_put(&m, ui_screen_utf8() ? " \xe2\x80\xa6" : " ~");
        }
        ms += used;
        nm++;
        if (!used) break;
    }
    int rows = nm > 1 ? nm : 1;
    int ph = H - 3 - rows, fw = W * 2 / 5;
    t->pane_h = ph;
    draw_forest(t, f, 1, ph, fw);
    for (int y = 0; y < ph; y++) mvaddstr(1 + y, fw, ui_screen_utf8() ? "\xe2\x94\x82" : "|");
    if (t->mask) draw_mask(t, 1, fw + 1, ph, W - fw - 1);
    else if (t->diff) tui_draw_diff(t, f, 1, fw + 1, ph, W - fw - 1);
    else draw_text(t, f, 1, fw + 1, ph, W - fw - 1);
    ui_stats st;
    ui_worker_stats(t->w, &st);
    ui_status_format(&st, buf, sizeof buf, W);
    put_line(H - 2 - rows, 0, buf, ui_screen_attr(UI_PAIR_STATUS));
    for (int r = 0; r < nm; r++) put_line(H - 1 - rows + r, 0, mrow[r], ui_screen_attr(UI_PAIR_MSG));
    draw_keybar(t, H - 1, W);
    refresh();
    if (ui_cmdline_active()) ui_cmdline_redraw();
}

/* ---- actions ---- */

static forest_id selected(tui *t) {
    ui_worker_lock(t->w);
    forest_id sel = fv_selected(&t->fv, ui_worker_forest(t->w));
    ui_worker_unlock(t->w);
    return sel;
}

/* :tour: its steps run in a context of its own, the worker held still meanwhile. */
static void open_tour(tui *t, const char *prompt) {
    st_err err = {0};
    ui_worker_lock(t->w);
    tour *tr = tour_pane_open(t->p->model, t->p->wp.tk, prompt, t->p->wp.backend, t->p->wp.threads, &err);
    ui_worker_unlock(t->w);
    if (!tr) set_msg(t, err.msg);
    tour_free(t->tour);
    t->tour = tr, t->tour_at = 0;
}

/* The first node of the selected line (a name stays on it while the branch grows). */
static forest_id line_start(tui *t) {
    ui_worker_lock(t->w);
    forest_id id = t->fv.n_lines ? forest_id_at(ui_worker_forest(t->w), t->fv.lines[t->fv.cursor].start) : FOREST_NONE;
    ui_worker_unlock(t->w);
    return id;
}

static void run_command(tui *t, const char *line) {
    ui_cmd c;
    st_err err = {0};
    if (ui_cmd_parse(line, &c, &err)) {
        set_msg(t, err.msg);
        return;
    }
    if (c.job.kind != UI_JOB_NONE) { /* a job as the command gave it, at the selection */
        c.job.node = c.kind == UI_CMD_NAME ? line_start(t) : selected(t);
        c.job.text = c.text[0] ? c.text : NULL;
        post(t, c.job);
        t->dirty = true;
        return;
    }
    const char *file = c.text[0] ? c.text : c.kind == UI_CMD_LOAD ? t->p->last_session : t->p->autosave;
    switch (c.kind) {
    case UI_CMD_SAVE: if (file) post(t, save_job(t, file)); break;
    case UI_CMD_LOAD:
        if (!file) set_msg(t, "no last session to restore: :load FILE");
        else if (ui_worker_modified(t->w)) { /* the work would be lost: ask first */
            snprintf(t->confirm_text, sizeof t->confirm_text, "%s", file);
            t->confirm_job = (ui_job){.kind = UI_JOB_LOAD, .text = t->confirm_text};
            t->confirming = true;
            t->confirm_job.u.load.force = c.force;
            snprintf(t->msg, sizeof t->msg, "unsaved changes: load %.900s and lose them? (y/n; :save FILE keeps them)", file);
            t->msg_full = true;
        } else
            post(t, (ui_job){.kind = UI_JOB_LOAD, .text = file, .u.load.force = c.force});
        break;
    case UI_CMD_SET:
        if (!c.key[0]) { /* the current values */
            ui_worker_lock(t->w);
            ui_worker_settings(t->w, t->msg, sizeof t->msg);
            ui_worker_unlock(t->w);
            break;
        }
        post(t, (ui_job){.kind = UI_JOB_SET, .text = c.key, .u.set.value = c.val});
        if (!strcmp(c.key, "chat"))
            snprintf(t->msg, sizeof t->msg, "chat %s: typed text goes in %s", c.val ? "on" : "off",
                     c.val ? "as a user turn" : "as it is");
        else
            snprintf(t->msg, sizeof t->msg, "%s = %g", c.key, c.val);
        break;
    case UI_CMD_BIND: {
        int k = ui_key_parse(c.key), a = ui_action_by_name(c.text);
        if (k < 0 || a < 0) set_msg(t, k < 0 ? "unknown key" : "unknown action");
        else ui_keymap_bind(&t->km, k, a);
        break;
    }
    case UI_CMD_SORT: t->sort = (ui_sort)c.val, t->seen_version = (uint64_t)-1; break; /* views rebuilt */
    case UI_CMD_HELP: t->help = true; break;
    case UI_CMD_TOUR: open_tour(t, c.text); break;
    case UI_CMD_QUIT: t->quit = true; break;
    default: break; /* the rest post their jobs */
    }
    t->dirty = true;
}

/* Selects the next (dir > 0) or previous line the last search matches, saying which of
 * how many; the caller holds the lock. */
static void search_move(tui *t, const forest *f, int dir) {
    char m[400];
    if (!t->search[0]) {
        set_msg(t, "nothing to search for: / then the text");
        return;
    }
    int32_t rank, total, i = fv_find(&t->fv, f, t->p->wp.tk, t->search, t->fv.cursor, dir, &rank, &total);
    if (i >= 0) fv_set_cursor(&t->fv, f, i);
    if (i >= 0) snprintf(m, sizeof m, "/%s: match %d of %d (C-n / C-p: next / previous)", t->search, (int)rank, (int)total);
    else snprintf(m, sizeof m, "/%s: not found in the lines shown", t->search);
    set_msg(t, m);
}

/* The text typed at the / prompt (empty: the last one again), searched forward. */
static void search_text(tui *t, const char *text) {
    if (text[0]) snprintf(t->search, sizeof t->search, "%s", text);
    ui_worker_lock(t->w);
    search_move(t, ui_worker_forest(t->w), 1);
    ui_worker_unlock(t->w);
}

/* Text typed at the append> prompt goes under the selected node as it is. */
static void append_text(tui *t, const char *text) {
    post(t, (ui_job){.kind = UI_JOB_APPEND, .node = selected(t), .text = text});
    t->dirty = true;
}

/* A mask-pane key that changes the attention weights later steps keep (under the lock). */
static void attn_key(tui *t, int a) {
    int32_t layer, head, n_layer, n_head;
    ui_worker_attn(t->w, &layer, &head, &n_layer, &n_head);
    if (a == UI_ACT_ATTN) layer = layer < 0 ? n_layer - 1 : -1;
    else if (layer < 0) layer = n_layer - 1; /* any weights key turns them on */
    else if (a == UI_ACT_ATTN_LOWER) layer = (layer + n_layer - 1) % n_layer;
    else if (a == UI_ACT_ATTN_HIGHER) layer = (layer + 1) % n_layer;
    else head = head + 1 < n_head ? head + 1 : -1;
    st_err err = {0};
    char buf[160];
    if (ui_worker_set_attn(t->w, layer, head, &err)) set_msg(t, err.msg);
    else if (layer < 0) set_msg(t, "attention weights off");
    else {
        char which[32] = "mean of heads";
        if (head >= 0) snprintf(which, sizeof which, "head %d", head);
        snprintf(buf, sizeof buf, "attention weights of layer %d, %s from the next step on (s runs one)",
                 layer, which);
        set_msg(t, buf);
    }
}

static void do_action(tui *t, int a) {
    ui_worker_lock(t->w);
    const forest *f = ui_worker_forest(t->w);
    forest_id sel = fv_selected(&t->fv, f);
    int page = t->forest_h > 2 ? t->forest_h - 1 : 10;
    mask_view *mv = ui_worker_mask_mut(t->w);
    switch (a) {
    case UI_ACT_QUIT: t->quit = true; break;
    case UI_ACT_HELP: t->help = !t->help, t->help_top = 0; break;
    case UI_ACT_COMMAND: t->cmd_is_text = t->cmd_is_search = false, ui_cmdline_open(t->cmdwin, ":"); break;
    case UI_ACT_APPEND: t->cmd_is_text = true, t->cmd_is_search = false, ui_cmdline_open(t->cmdwin, "append> "); break;
    case UI_ACT_SEARCH: t->cmd_is_text = false, t->cmd_is_search = true, ui_cmdline_open(t->cmdwin, "/"); break;
    case UI_ACT_SEARCH_NEXT: case UI_ACT_SEARCH_PREV: search_move(t, f, a == UI_ACT_SEARCH_NEXT ? 1 : -1); break;
    case UI_ACT_NEXT_PANE:
        t->focus = t->focus == UI_VIEW_FOREST ? (t->mask ? UI_VIEW_MASK : UI_VIEW_TEXT) : UI_VIEW_FOREST;
        break;
    case UI_ACT_MASK:
        t->mask = !t->mask;
        if (t->focus != UI_VIEW_FOREST) t->focus = t->mask ? UI_VIEW_MASK : UI_VIEW_TEXT;
        break;
    case UI_ACT_STEP: post(t, ui_job_of(strategy_find("step"), sel)); break;
    case UI_ACT_PREVIEW:
        t->mask = true;
        if (t->focus != UI_VIEW_FOREST) t->focus = UI_VIEW_MASK;
        post(t, (ui_job){.kind = UI_JOB_PREVIEW});
        break;
    case UI_ACT_MERGE: post(t, ui_job_of(strategy_find("merge"), FOREST_NONE)); break;
    case UI_ACT_GROW: post(t, ui_job_of(strategy_find("grow"), sel)); break;
    case UI_ACT_COT: post(t, cot_job(sel, 4)); break;
    case UI_ACT_BEAM: post(t, beam_job(sel, 2)); break;
    case UI_ACT_PAUSE: post(t, (ui_job){.kind = UI_JOB_PAUSE}); break;
    case UI_ACT_CANCEL: post(t, (ui_job){.kind = UI_JOB_CANCEL}); break;
    case UI_ACT_PRUNE: post(t, (ui_job){.kind = UI_JOB_PRUNE, .node = forest_id_at(f, t->fv.n_lines ? t->fv.lines[t->fv.cursor].start : -1)}); break;
    case UI_ACT_UNDO: post(t, (ui_job){.kind = UI_JOB_UNDO}); break;
    case UI_ACT_REDO: post(t, (ui_job){.kind = UI_JOB_REDO}); break;
    case UI_ACT_BOOKMARK: post(t, (ui_job){.kind = UI_JOB_BOOKMARK, .node = sel}); break;
    case UI_ACT_NEXT_MARK: {
        bool found = false;
        for (int32_t k = 1; k <= t->fv.n_lines && !found; k++) {
            int32_t i = (t->fv.cursor + k) % t->fv.n_lines;
            if ((found = t->fv.lines[i].flags & FV_BOOKMARK)) fv_set_cursor(&t->fv, f, i);
        }
        if (!found) set_msg(t, "no bookmarks: m marks the selected node");
        break;
    }
    case UI_ACT_SAVE: if (t->p->autosave) post(t, save_job(t, t->p->autosave)); break;
    case UI_ACT_REDRAW: clearok(curscr, TRUE); break;
    case UI_ACT_UP: fv_move(&t->fv, f, -1); break;
    case UI_ACT_DOWN: fv_move(&t->fv, f, 1); break;
    case UI_ACT_PAGE_UP:
        if (t->focus == UI_VIEW_MASK) mv_vscroll(mv, -page);
        else fv_move(&t->fv, f, -page);
        break;
    case UI_ACT_PAGE_DOWN:
        if (t->focus == UI_VIEW_MASK) mv_vscroll(mv, page);
        else fv_move(&t->fv, f, page);
        break;
    case UI_ACT_FIRST: fv_set_cursor(&t->fv, f, 0); break;
    case UI_ACT_LAST: fv_set_cursor(&t->fv, f, t->fv.n_lines - 1); break;
    case UI_ACT_COLLAPSE:
        if (!fv_fold(&t->fv, f, true)) { /* already folded or a leaf: go to the parent line */
            const forest_node *nd = t->fv.n_lines ? forest_node_at(f, t->fv.lines[t->fv.cursor].start) : NULL;
            if (nd && nd->parent >= 0) fv_select_node(&t->fv, f, forest_id_at(f, nd->parent));
        }
        break;
    case UI_ACT_EXPAND: fv_fold(&t->fv, f, false); break;
    case UI_ACT_TOGGLE:
        if (t->fv.n_lines) fv_fold(&t->fv, f, !fv_is_folded(&t->fv, f, t->fv.lines[t->fv.cursor].start));
        break;
    case UI_ACT_EDIT: tui_edit_line(t, f); break;
    case UI_ACT_FORK_TEXT: tui_fork_text(t, f); break;
    case UI_ACT_DIFF:
        t->diff = !t->diff, t->mask = false;
        if (!t->diff) t->tv.follow = true;
        break;
    case UI_ACT_SCAFFOLD:
        t->fv.raw = t->tv.show_thinking = !t->fv.raw;
        set_msg(t, t->fv.raw ? "the chat template's scaffolding and the thinking shown as they are: t folds them away"
                             : "the chat template's scaffolding and the thinking folded away: t shows them");
        break;
    case UI_ACT_TOKEN_PREV: tv_move(&t->tv, -1); break;
    case UI_ACT_TOKEN_NEXT: tv_move(&t->tv, 1); break;
    case UI_ACT_WORD_NEXT: tv_move_word(&t->tv, f, t->p->wp.tk, 1); break;
    case UI_ACT_WORD_PREV: tv_move_word(&t->tv, f, t->p->wp.tk, -1); break;
    case UI_ACT_TOKEN_FIRST: tv_move(&t->tv, -t->tv.cursor); break;
    case UI_ACT_TOKEN_LAST: tv_move(&t->tv, (t->tv.n > 0 ? t->tv.n - 1 : 0) - t->tv.cursor); break;
    case UI_ACT_ALT_UP: if (t->tv.alt > 0) t->tv.alt--; break;
    case UI_ACT_ALT_DOWN: t->tv.alt++; break;
    case UI_ACT_MASK_UP: mv_vscroll(mv, -1); break;
    case UI_ACT_MASK_DOWN: mv_vscroll(mv, 1); break;
    case UI_ACT_MASK_LEFT: mv_hscroll(mv, -8, t->mask_gw > 0 ? t->mask_gw : 40); break;
    case UI_ACT_MASK_RIGHT: mv_hscroll(mv, 8, t->mask_gw > 0 ? t->mask_gw : 40); break;
    case UI_ACT_MASK_FOLD:
        set_msg(t, mv_toggle_fold(mv) ? "folds open: one column a slot (h/l scroll, o folds)"
                                      : "shared runs folded (o opens them)");
        break;
    case UI_ACT_MASK_OLDER: case UI_ACT_MASK_NEWER: {
        int32_t kept, back = ui_worker_mask_back(t->w, a == UI_ACT_MASK_OLDER ? -1 : 1, &kept);
        char buf[96];
        if (back) snprintf(buf, sizeof buf, "%d step%s back of %d kept: ] comes forward", back, back == 1 ? "" : "s", kept);
        else snprintf(buf, sizeof buf, "the last step (%d kept: [ goes back)", kept);
        set_msg(t, buf);
        break;
    }
    case UI_ACT_ATTN: case UI_ACT_ATTN_LOWER: case UI_ACT_ATTN_HIGHER: case UI_ACT_ATTN_HEAD: attn_key(t, a); break;
    case UI_ACT_ROPE: t->rope = !t->rope; break;
    case UI_ACT_ALT_PICK: {
        int32_t ids[TV_MAX_ALTS];
        float lps[TV_MAX_ALTS];
        forest_id parent;
        int32_t n = tv_alts(&t->tv, f, ids, lps, TV_MAX_ALTS, &parent);
        if (t->tv.alt < n) post(t, (ui_job){.kind = UI_JOB_FORK, .node = parent, .u.fork.token = ids[t->tv.alt]});
        else set_msg(t, "no alternative here");
        break;
    }
    }
    t->fv.cursor_id = t->fv.n_lines ? forest_id_at(f, t->fv.lines[t->fv.cursor].start) : FOREST_NONE;
    sel = fv_selected(&t->fv, f);
    st_err err = {0};
    if (sel != FOREST_NONE && (a != UI_ACT_TOKEN_PREV && a != UI_ACT_TOKEN_NEXT && a != UI_ACT_ALT_UP && a != UI_ACT_ALT_DOWN))
        tv_set(&t->tv, f, sel, &err);
    if (a == UI_ACT_COLLAPSE || a == UI_ACT_EXPAND || a == UI_ACT_TOGGLE) sync_views(t);
    ui_worker_unlock(t->w);
    t->dirty = true;
}

/* A click on a mask row selects its node's line (the forest and text panes follow);
 * returns the node, FOREST_NONE when it was pruned (a pruned row's node is not looked up). */
static forest_id mask_click(tui *t, const forest *f, int32_t row) {
    const mask_view *mv = ui_worker_mask(t->w);
    forest_id id = mv_row_node(mv, row);
    char m[96];
    if (id == FOREST_NONE || !forest_get(f, id)) {
        snprintf(m, sizeof m, "row %d: its node was pruned", (int)row);
        set_msg(t, m);
        id = FOREST_NONE;
    } else {
        /* a node inside folded lines: unfold the visible ancestor line, and again */
        st_err err = {0};
        for (int k = 0; k < 256 && !fv_select_node(&t->fv, f, id); k++) {
            const forest_node *nd = forest_get(f, id);
            bool opened = false;
            for (int32_t a = nd->parent; a >= 0 && !opened; a = forest_node_at(f, a)->parent)
                if (fv_select_node(&t->fv, f, forest_id_at(f, a))) opened = fv_fold(&t->fv, f, false);
            if (!opened || fv_rebuild(&t->fv, f, &err)) {
                set_msg(t, "that node is not shown in the forest pane");
                id = FOREST_NONE;
                break;
            }
        }
    }
    t->focus = UI_VIEW_MASK;
    return id;
}

static void on_mouse(tui *t) {
    MEVENT me;
    if (getmouse(&me) != OK) return;
    ui_worker_lock(t->w);
    const forest *f = ui_worker_forest(t->w);
    /* the pane layout draw() used: forest | mask, pane_h rows from line 1 */
    int fw = COLS * 2 / 5, ph = t->pane_h > 0 ? t->pane_h : LINES - 4;
    bool in_mask = t->mask && me.x > fw && me.y >= 1 && me.y < 1 + ph;
    mask_view *mv = ui_worker_mask_mut(t->w);
    forest_id clicked = FOREST_NONE;
    if (me.bstate & (BUTTON4_PRESSED | BUTTON5_PRESSED)) {
        int d = me.bstate & BUTTON4_PRESSED ? -3 : 3;
        if (in_mask) mv_vscroll(mv, d);
        else fv_move(&t->fv, f, d);
    } else if (me.bstate & BUTTON1_CLICKED && in_mask) {
        int32_t row = mv_row_at(mv, me.y, me.x, 1, fw + 1, ph, COLS - fw - 1);
        if (row >= 0) clicked = mask_click(t, f, row);
    } else if (me.bstate & BUTTON1_CLICKED && me.x < fw && me.y >= 1 && me.y < 1 + ph) {
        fv_set_cursor(&t->fv, f, t->fv.top + me.y - 1);
        t->focus = UI_VIEW_FOREST;
    }
    forest_id sel = fv_selected(&t->fv, f);
    st_err err = {0};
    if (sel != FOREST_NONE) tv_set(&t->tv, f, sel, &err);
    /* the text pane's token cursor on the clicked row's token */
    for (int32_t k = 0; clicked != FOREST_NONE && k < t->tv.n; k++)
        if (t->tv.idx[k] == forest_index(clicked)) t->tv.cursor = k, t->tv.follow = false;
    ui_worker_unlock(t->w);
    t->dirty = true;
}

static void on_key(tui *t, int ch, bool is_key) {
    if (t->msg_full && strlen(t->msg) > (size_t)COLS / 2) t->dirty = true; /* folds to one row */
    t->msg_full = false;
    if (ui_cmdline_active()) {
        char *line = NULL;
        if (ui_cmdline_feed(ch, is_key, &line)) {
            if (line && t->cmd_is_write) {
                if (*line) tui_write_text(t, line);
                free(line);
            } else if (line && t->cmd_is_search) {
                search_text(t, line);
                free(line);
            } else if (line && t->cmd_is_text) { /* text, verbatim: leading spaces and ':' kept */
                if (*line) append_text(t, line);
                free(line);
            } else if (line) {
                /* the ':' is the prompt, not part of the line */
                char full[1100];
                snprintf(full, sizeof full, ":%.1024s", line);
                run_command(t, full);
                free(line);
            }
            t->cmd_is_write = false;
            t->dirty = true;
        }
        return;
    }
    if (t->confirming) { /* the y/n question in the message line */
        t->confirming = false;
        if (ch == 'y' || ch == 'Y') post(t, t->confirm_job);
        else set_msg(t, "not loaded: your work is still here");
        t->dirty = true;
        return;
    }
    if (t->tour) {
        if (!tour_pane_key(t->tour, ch, is_key, &t->tour_at)) tour_free(t->tour), t->tour = NULL;
        t->dirty = true;
        return;
    }
    if (t->help) { /* j/k scroll; any other key closes */
        if (ch == 'j' || (is_key && ch == KEY_DOWN)) t->help_top++;
        else if (ch == 'k' || (is_key && ch == KEY_UP)) t->help_top--;
        else t->help = false;
        t->dirty = true;
        return;
    }
    if (is_key && ch == KEY_MOUSE) return on_mouse(t);
    if (is_key && ch == KEY_RESIZE) {
        wresize(t->cmdwin, 1, COLS);
        mvwin(t->cmdwin, LINES - 1, 0);
        t->dirty = true;
        return;
    }
    if (!is_key && ch == '\r') ch = '\n';
    if (is_key && ch == KEY_ENTER) ch = '\n';
    int a = ui_keymap_lookup(&t->km, t->focus, ch);
    if (a != UI_ACT_NONE) do_action(t, a);
}

st_code ui_tui_run(const ui_tui_params *p, st_err *err) {
    if (!ui_screen_start(p->log)) return st_set(err, ST_ERR_IO, "the TUI needs a terminal (stdin and stdout)");
    tui t = {.p = p, .focus = UI_VIEW_FOREST, .dirty = true};
    ui_keymap_defaults(&t.km);
    char kmsg[MSG_CAP] = "";
    if (p->keys_default) ui_keymap_load(&t.km, p->keys_default, kmsg, sizeof kmsg);
    if (!kmsg[0] && p->keys_user) ui_keymap_load(&t.km, p->keys_user, kmsg, sizeof kmsg);
    set_msg(&t, kmsg[0] ? kmsg : p->hello ? p->hello : "");
    fv_init(&t.fv, ui_screen_utf8());
    tv_init(&t.tv);
    tv_init(&t.tv2);
    if (!(t.w = ui_worker_start(&p->wp, err))) {
        ui_screen_end();
        return err->code;
    }
    t.cmdwin = newwin(1, COLS, LINES - 1, 0);
    keypad(t.cmdwin, TRUE);
    ui_cmdline_init(p->history);
    timeout(30);
    t.last_autosave = mono_now_s();
    t.seen_version = (uint64_t)-1;
    while (!t.quit && !ui_screen_signal()) {
        wint_t wch;
        int r = get_wch(&wch);
        if (r == OK) on_key(&t, (int)wch, false);
        else if (r == KEY_CODE_YES) on_key(&t, (int)wch, true);
        uint64_t v = ui_worker_version(t.w);
        /* a step running holds the lock: the last frame stays until it is done */
        if ((v != t.seen_version || t.dirty) && ui_worker_trylock(t.w)) {
            if (v != t.seen_version) {
                sync_views(&t);
                char m[MSG_CAP];
                uint64_t no = ui_worker_message(t.w, m, sizeof m);
                if (no != t.seen_msg) t.seen_msg = no, set_msg(&t, m);
                t.seen_version = v;
            }
            draw(&t);
            ui_worker_unlock(t.w);
            t.dirty = false;
        }
        double since = ui_worker_unsaved_since(t.w);
        if (p->autosave && since > 0 && mono_now_s() - since > AUTOSAVE_S && mono_now_s() - t.last_autosave > AUTOSAVE_S) {
            ui_job s = save_job(&t, p->autosave);
            s.u.save.quiet = true;
            post(&t, s);
            t.last_autosave = mono_now_s();
        }
    }
    /* only when something changed: an untouched run leaves the last autosave alone */
    if (p->autosave) post(&t, (ui_job){.kind = UI_JOB_SAVE, .text = p->autosave, .u.save = {.autosave = true, .if_changed = true}});
    ui_worker_stop(t.w); /* runs the save, then ends the thread */
    ui_cmdline_end();
    delwin(t.cmdwin);
    fv_free(&t.fv);
    tour_free(t.tour);
    free(t.keys);
    tv_free(&t.tv);
    tv_free(&t.tv2);
    tv_layout_free(&t.lay);
    tv_layout_free(&t.lay2);
    ui_screen_end();
    return ST_OK;
}
