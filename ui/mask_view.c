/* mask_view.c - the mask pane's view model (mask_view.h). */
#include "mask_view.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest_view.h"
#include "uline.h"

void mv_init(mask_view *v) {
    memset(v, 0, sizeof *v);
    v->step = -1;
    v->left = -1;
    v->n_plain = -1;
    v->attn_layer = -1;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

uint8_t mv_branch_colour(const forest *f, int32_t idx) {
    const forest_node *nd = forest_node_at(f, idx);
    while (nd->parent >= 0) {
        const forest_node *p = forest_node_at(f, nd->parent);
        if (forest_node_at(f, p->first_child)->next_sibling >= 0) break; /* p branches */
        idx = nd->parent;
        nd = p;
    }
    return (uint8_t)(((uint32_t)idx * 2654435761u >> 16) % 6);
}

/* The weights of the plan's last run, rows from r0 (as kept), when it kept any. */
static void capture_weights(mask_view *v, const step_plan *p, int32_t r0) {
    v->attn_layer = p->attn_n > 0 ? p->attn_w_layer : -1;
    v->attn_head = p->attn_w_head;
    if (v->attn_layer < 0) return;
    int64_t at = 0; /* the cell of the row's first slot in p->attn_w */
    for (int32_t i = 0; i < p->seg_off[r0]; i++) at += p->segs[i].len;
    for (int32_t r = 0; r < v->n_rows; r++) { /* row by row, slot by slot: each cell once */
        memset(v->attn[r], 0, sizeof v->attn[r]);
        for (int32_t i = p->seg_off[r0 + r]; i < p->seg_off[r0 + r + 1]; i++)
            for (int32_t s = p->segs[i].start; s < p->segs[i].start + p->segs[i].len; s++, at++) {
                const int32_t *c = bsearch(&s, v->cols, (size_t)v->n_cols, sizeof *v->cols, cmp_i32);
                if (c) v->attn[r][c - v->cols] = (uint16_t)(p->attn_w[at] * 65535.0f + 0.5f);
            }
    }
}

void mv_capture(mask_view *v, const forest *f, const tok *tk, const step_plan *p, int32_t step) {
    v->step = step;
    v->preview = false;
    v->kind[0] = '\0';
    v->spec = false;
    v->n_rows_total = p->n_rows;
    int32_t r0 = p->n_rows > MV_MAX_ROWS ? p->n_rows - MV_MAX_ROWS : 0;
    v->n_rows = p->n_rows - r0;
    /* columns: the distinct slots the kept rows may see, in slot order */
    static const int32_t cap_all = 1 << 16;
    int32_t *all = malloc(sizeof(int32_t) * (size_t)cap_all), n_all = 0;
    for (int32_t r = r0; all && r < p->n_rows; r++)
        for (int32_t i = p->seg_off[r]; i < p->seg_off[r + 1]; i++)
            for (int32_t s = p->segs[i].start; s < p->segs[i].start + p->segs[i].len && n_all < cap_all; s++)
                all[n_all++] = s;
    if (all) qsort(all, (size_t)n_all, sizeof *all, cmp_i32);
    int32_t m = 0;
    for (int32_t i = 0; i < n_all; i++)
        if (m == 0 || all[m - 1] != all[i]) all[m++] = all[i];
    v->n_cols_total = m;
    int32_t c0 = m > MV_MAX_COLS ? m - MV_MAX_COLS : 0;
    v->n_cols = m - c0;
    if (all) memcpy(v->cols, all + c0, sizeof(int32_t) * (size_t)v->n_cols);
    free(all);
    memset(v->grid, 0, sizeof v->grid);
    memset(v->outwin, 0, sizeof v->outwin);
    v->n_swa = p->n_swa;
    if (p->n_swa > 0) model_window_text(p->hp, v->window, sizeof v->window);
    else v->window[0] = '\0';
    v->recurrent[0] = '\0';
    if (p->hp && p->hp->full_attn_interval > 0) /* outside the mask: states, one a tip */
        snprintf(v->recurrent, sizeof v->recurrent, "%d of %d layers recurrent (no mask): %d "
                 "states of %.1f KiB held", p->hp->full_attn_interval - 1, p->hp->full_attn_interval,
                 forest_rstate_used(f), (double)model_rstate_floats(p->hp) * 4.0 / 1024.0);
    for (int32_t r = 0; r < v->n_rows; r++) {
        int32_t pr = r0 + r, idx = p->node[pr];
        const forest_node *nd = forest_node_at(f, idx);
        mv_row *row = &v->rows[r];
        row->node = idx;
        row->id = forest_id_at(f, idx);
        row->gone = 0;
        row->parent = nd->parent;
        row->token = p->tokens[pr];
        row->pos = p->pos[pr];
        row->slot = p->slot[pr];
        row->want = p->want[pr];
        row->colour = mv_branch_colour(f, idx);
        row->role = MV_ROLE_NONE;
        row->la_level = row->la_col = 0;
        fv_token_text(f, tk, idx, row->text, sizeof row->text);
        for (int32_t c = 0; c < v->n_cols; c++) {
            if (!step_plan_sees(p, pr, v->cols[c])) continue;
            v->grid[r][c / 8] |= (uint8_t)(1u << (c % 8));
            if (!step_plan_sees_window(p, pr, v->cols[c])) v->outwin[r][c / 8] |= (uint8_t)(1u << (c % 8));
        }
    }
    capture_weights(v, p, r0);
    if (v->top > v->n_rows) v->top = 0;
    v->n_plain = -1; /* a new grid: lay it out again */
    mv_layout(v, INT32_MAX);
}

bool mv_sees(const mask_view *v, int32_t row, int32_t col) {
    if (row < 0 || row >= v->n_rows || col < 0 || col >= v->n_cols) return false;
    return v->grid[row][col / 8] >> (col % 8) & 1;
}

bool mv_outside_window(const mask_view *v, int32_t row, int32_t col) {
    if (!mv_sees(v, row, col)) return false;
    return v->outwin[row][col / 8] >> (col % 8) & 1;
}

/* Column col's mark in row r: '#', ':' or '.' (mv_cell). */
static char mark_of(const mask_view *v, int32_t r, int32_t col) {
    return !mv_sees(v, r, col) ? '.' : mv_outside_window(v, r, col) ? ':' : '#';
}

int32_t mv_mark_pruned(mask_view *v, const forest *f) {
    int32_t n = 0;
    for (int32_t r = 0; r < v->n_rows; r++) {
        mv_row *row = &v->rows[r];
        if (!row->gone && !forest_get(f, row->id)) row->gone = 1;
        n += row->gone;
    }
    return n;
}

forest_id mv_row_node(const mask_view *v, int32_t r) {
    if (r < 0 || r >= v->n_rows || v->rows[r].gone) return FOREST_NONE;
    return v->rows[r].id;
}

int32_t mv_row_at(const mask_view *v, int32_t y, int32_t x, int32_t y0, int32_t x0, int32_t h,
                  int32_t w) {
    if (v->step < 0 || x < x0 || x >= x0 + w || y >= y0 + h) return -1;
    int32_t k = y - y0 - MV_HEAD_LINES;
    if (k < 0 || v->top + k >= v->n_rows) return -1;
    return v->top + k;
}

void mv_vscroll(mask_view *v, int32_t delta) {
    int32_t top = v->top + delta, last = v->n_rows > 0 ? v->n_rows - 1 : 0;
    v->top = top < 0 ? 0 : top > last ? last : top;
}

/* Whether columns a and b are seen by the same rows (and within the same rows' windows). */
static bool same_rows(const mask_view *v, int32_t a, int32_t b) {
    for (int32_t r = 0; r < v->n_rows; r++)
        if (mark_of(v, r, a) != mark_of(v, r, b)) return false;
    return true;
}

/* Whether more than one row sees column c (a slot of the shared context). */
static bool shared(const mask_view *v, int32_t c) {
    int32_t n = 0;
    for (int32_t r = 0; r < v->n_rows && n < 2; r++) n += mv_sees(v, r, c);
    return n >= 2;
}

/* Fills v->dcols: one per column, a gap mark where slots jump; at level 1 consecutive
 * shared slots seen by the same rows share one, at level 2 any consecutive slots seen by
 * the same rows. Returns the count. */
static int32_t lay_out(mask_view *v, int level) {
    int32_t n = 0;
    for (int32_t c = 0; c < v->n_cols; c++) {
        bool adjacent = c > 0 && v->cols[c] == v->cols[c - 1] + 1;
        if (c > 0 && !adjacent) v->dcols[n++] = (mv_dcol){c, 0};
        if (level > 0 && adjacent && same_rows(v, c - 1, c) && (level == 2 || shared(v, c))) v->dcols[n - 1].n++;
        else v->dcols[n++] = (mv_dcol){c, 1};
    }
    return n;
}

void mv_layout(mask_view *v, int32_t width) {
    /* the layout depends on the grid and on the folding it needs only, so a redraw at
     * the same width (or one as wide) reuses it */
    if (v->n_plain < 0) {
        v->n_shared = lay_out(v, 1);
        v->n_dcols = v->n_plain = lay_out(v, 0);
        v->level = 0;
    }
    int level = v->unfold || v->n_plain <= width ? 0 : v->n_shared <= width ? 1 : 2;
    if (level != v->level) {
        v->n_dcols = lay_out(v, level);
        v->level = level;
    }
    v->runs = v->n_dcols < v->n_plain;
    if (v->left >= v->n_dcols) v->left = -1;
}

bool mv_toggle_fold(mask_view *v) {
    v->unfold = !v->unfold;
    v->left = -1;
    return v->unfold;
}

char mv_cell(const mask_view *v, int32_t r, int32_t d) {
    if (d < 0 || d >= v->n_dcols || v->dcols[d].n == 0) return ' ';
    return mark_of(v, r, v->dcols[d].col);
}

void mv_set_kind(mask_view *v, const char *what) {
    bool prefill = false;
    for (int32_t r = 0; r < v->n_rows && !prefill; r++) prefill = !v->rows[r].want;
    snprintf(v->kind, sizeof v->kind, "%s%s", prefill ? "prefill + " : "", what);
}

float mv_weight(const mask_view *v, int32_t r, int32_t d) {
    if (v->attn_layer < 0 || r < 0 || r >= v->n_rows || d < 0 || d >= v->n_dcols) return -1;
    const mv_dcol *dc = &v->dcols[d];
    if (dc->n == 0 || !mv_sees(v, r, dc->col)) return -1;
    uint32_t sum = 0;
    for (int32_t c = dc->col; c < dc->col + dc->n; c++) sum += v->attn[r][c];
    return sum / 65535.0f;
}

void mv_cell_glyph(const mask_view *v, int32_t r, int32_t d, bool utf8, char out[8]) {
    static const char *const bars[8] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                        "\u2585", "\u2586", "\u2587", "\u2588"};
    float w = mv_weight(v, r, d);
    if (w < 0) snprintf(out, 8, "%c", mv_cell(v, r, d));
    else if (utf8) snprintf(out, 8, "%s", bars[w >= 1 ? 7 : (int)(w * 8)]);
    else snprintf(out, 8, "%c", mv_weight_digit(w));
}

char mv_weight_digit(float w) { return w >= 0.95f ? '#' : (char)('0' + (int)(w * 10 + 0.5f)); }

void mv_attn_text(const mask_view *v, char *out, size_t cap) {
    if (v->attn_layer < 0) snprintf(out, cap, "%s", "");
    else if (v->attn_head < 0) snprintf(out, cap, "attention weights: layer %d, mean of heads", v->attn_layer);
    else snprintf(out, cap, "attention weights: layer %d, head %d", v->attn_layer, v->attn_head);
}

void mv_slot_line(const mask_view *v, int32_t first, int32_t width, char *out, size_t cap, bool utf8) {
    ui_line l = ui_line_make(out, cap, width, utf8);
    for (int32_t d = first < 0 ? 0 : first; d < v->n_dcols; d++) {
        const mv_dcol *dc = &v->dcols[d];
        char digit[2] = {(char)('0' + v->cols[dc->col] % 10), 0};
        ui_line_put(&l, dc->n == 0 ? (utf8 ? "\u00a6" : "|") : dc->n > 1 ? (utf8 ? "\u2261" : "=") : digit);
    }
}

void mv_dcol_text(const mask_view *v, int32_t d, char *out, size_t cap) {
    const mv_dcol *dc = d >= 0 && d < v->n_dcols ? &v->dcols[d] : NULL;
    if (!dc || dc->n == 0) snprintf(out, cap, "%s", "");
    else if (dc->n == 1) snprintf(out, cap, "%d", v->cols[dc->col]);
    else snprintf(out, cap, "%d-%d", v->cols[dc->col], v->cols[dc->col + dc->n - 1]);
}

int32_t mv_first_col(const mask_view *v, int32_t width) {
    int32_t last = v->n_dcols > width ? v->n_dcols - width : 0;
    return v->left < 0 || v->left > last ? last : v->left;
}

void mv_hscroll(mask_view *v, int32_t delta, int32_t width) {
    int32_t last = v->n_dcols > width ? v->n_dcols - width : 0;
    int32_t c = mv_first_col(v, width) + delta;
    c = c < 0 ? 0 : c;
    v->left = c >= last ? -1 : c;
}

void mv_header(const mask_view *v, char *out, size_t cap, int width, bool utf8) {
    ui_line l = ui_line_make(out, cap, width, utf8);
    char buf[160];
    if (v->step < 0) {
        ui_line_put(&l, "no step has run yet: press s to run one");
        return;
    }
    char kind[64] = "";
    if (v->kind[0]) snprintf(kind, sizeof kind, " (%s)", v->kind);
    snprintf(buf, sizeof buf, "%s %d%s%s: %d rows, %d KV slots seen%s", v->preview ? "next step" : "step", v->step,
             v->preview ? " (preview, not run)" : "", kind, v->n_rows_total,
             v->n_cols_total, v->n_rows < v->n_rows_total ? " (last rows shown)" : "");
    ui_line_put(&l, buf);
    /* a speculative step's drafts and window are pruned by design: counted apart */
    int32_t gone = 0, drafts = 0, accepted = 0, window = 0;
    for (int32_t r = 0; r < v->n_rows; r++) {
        int role = v->rows[r].role;
        drafts += role == MV_ROLE_DRAFT || role == MV_ROLE_ACCEPTED || role == MV_ROLE_REJECTED;
        accepted += role == MV_ROLE_ACCEPTED;
        window += role == MV_ROLE_WINDOW;
        gone += v->rows[r].gone && role != MV_ROLE_REJECTED && role != MV_ROLE_WINDOW;
    }
    if (v->spec) {
        if (drafts > 0) snprintf(buf, sizeof buf, "; %d/%d drafts accepted", accepted, drafts);
        else snprintf(buf, sizeof buf, "; no drafts");
        ui_line_put(&l, buf);
        if (window > 0) {
            snprintf(buf, sizeof buf, ", %d window", window);
            ui_line_put(&l, buf);
        }
    }
    if (gone > 0) {
        snprintf(buf, sizeof buf, "; %d pruned since", gone);
        ui_line_put(&l, buf);
    }
    if (v->n_swa > 0) { /* the grid is the windowed layers' mask */
        snprintf(buf, sizeof buf, "; %s", v->window);
        ui_line_put(&l, buf);
    }
    if (v->recurrent[0]) {
        snprintf(buf, sizeof buf, "; %s", v->recurrent);
        ui_line_put(&l, buf);
    }
    if (v->attn_layer >= 0) {
        char what[80];
        mv_attn_text(v, what, sizeof what);
        snprintf(buf, sizeof buf, "; %s", what);
        ui_line_put(&l, buf);
    }
}

void mv_legend(const mask_view *v, char *out, size_t cap, int width, bool utf8) {
    ui_line l = ui_line_make(out, cap, width, utf8);
    char head[64];
    if (v->spec) snprintf(head, sizeof head, "%4s %5s %-8s %4s %4s %-8s", "row", "node", "role", "pos", "slot", "token");
    else snprintf(head, sizeof head, "%4s %5s %6s %4s %4s %s %-8s", "row", "node", "parent", "pos", "slot", "L", "token");
    ui_line_put(&l, head);
    ui_line_put(&l, utf8 ? "\u2502" : "|");
    /* what pos means, where the pane is wide enough to say it whole */
    static const char grid[] = "KV slots", more[] = "KV slots; pos = RoPE position = depth in the tree";
    ui_line_put(&l, width - l.cols >= (int)sizeof more - 1 ? more : grid);
}

int mv_marks(const mask_view *v, char *out, size_t cap, int width, bool utf8) {
    bool gaps = false;
    for (int32_t d = 0; d < v->n_dcols; d++) gaps |= v->dcols[d].n == 0;
    char buf[96];
    const char *sees = v->attn_layer < 0 ? "# sees" : utf8 ? "\u2581-\u2588 weight" : "0-9 weight";
    snprintf(buf, sizeof buf, "%s%s%s%s%s", v->spec ? "" : "L logits  ", sees,
             v->n_swa > 0 ? "  : beyond window" : "", !v->runs ? "" : utf8 ? "  \u2261 run" : "  = run",
             !gaps ? "" : utf8 ? "  \u00a6 skip" : "  | skip");
    ui_line l = ui_line_make(out, cap, width, utf8);
    ui_line_put(&l, buf);
    return l.cols;
}

/* The token text of a row, spaces made visible, in 8 columns. */
static void row_token(const mv_row *row, char *out, size_t cap, bool utf8) {
    char vis[96];
    size_t n = 0;
    for (const char *c = row->text; *c && n + 3 < sizeof vis; c++) {
        if (*c != ' ') vis[n++] = *c;
        else if (utf8) memcpy(vis + n, "\u00b7", 2), n += 2;
        else vis[n++] = '_';
    }
    vis[n] = 0;
    ui_line t = ui_line_make(out, cap, 8, utf8);
    ui_line_put(&t, vis);
    ui_line_pad(&t);
}

const char *mv_role_text(const mv_row *row, char *buf, size_t cap) {
    static const char *const names[] = {"", "", "tip", "draft", "accepted", "rejected"};
    if (row->role == MV_ROLE_WINDOW) snprintf(buf, cap, "la %d,%d", row->la_level, row->la_col);
    else snprintf(buf, cap, "%s", row->role < MV_ROLE_WINDOW ? names[row->role] : "");
    return buf;
}

void mv_row_text(const mask_view *v, int32_t r, char *out, size_t cap, int width, bool utf8) {
    ui_line l = ui_line_make(out, cap, width, utf8);
    if (r < 0 || r >= v->n_rows) return;
    const mv_row *row = &v->rows[r];
    char buf[96], text[40], role[16];
    row_token(row, text, sizeof text, utf8);
    if (v->spec) {
        /* the role takes the parent's and the logits' columns; the text is the snapshot,
           shown even when the node is gone (a rejected draft, a window cell) */
        mv_role_text(row, role, sizeof role);
        if (row->role == MV_ROLE_OTHER) snprintf(role, sizeof role, "%s", row->gone ? "-" : row->want ? "L" : "");
        snprintf(buf, sizeof buf, "%4d %5d %-8.8s %4d %4d %s", r, row->node, role, row->pos, row->slot,
                 row->gone && row->role == MV_ROLE_OTHER ? "pruned" : text);
    } else
        snprintf(buf, sizeof buf, "%4d %5d %6d %4d %4d %s %s", r, row->node, row->parent, row->pos,
                 row->slot, row->gone ? "-" : row->want ? "L" : " ", row->gone ? "pruned" : text);
    ui_line_put(&l, buf);
}

void mv_set_role(mask_view *v, int32_t r, int role, int32_t level, int32_t col) {
    if (r < 0 || r >= v->n_rows) return;
    v->spec = true;
    v->rows[r].role = (uint8_t)role;
    v->rows[r].la_level = (int16_t)level;
    v->rows[r].la_col = (int16_t)col;
}

void mv_resolve_drafts(mask_view *v, const forest *f) {
    for (int32_t r = 0; r < v->n_rows; r++) {
        mv_row *row = &v->rows[r];
        if (row->role == MV_ROLE_DRAFT)
            row->role = !row->gone && forest_get(f, row->id) ? MV_ROLE_ACCEPTED : MV_ROLE_REJECTED;
    }
}
