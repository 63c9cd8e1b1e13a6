/* svg.c - the forest and a step's attention mask as one SVG picture (svg.h). */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "forest_view.h"
#include "rope_view.h"
#include "uline.h"

/* Where the drawing goes, and how far right its text reaches (estimated), so the view
 * box can hold every label. */
typedef struct svg_out {
    FILE *fp;
    int right;
} svg_out;

/* A palette that stays distinct on a projector and for most colour-blind readers (Tol). */
static const char *const colours[6] = {"#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377"};

/* Colour i of a picture: Tol's six, then hues a golden angle apart, so no two radix lines
 * of one picture share a colour (up to 3600 of them). buf holds at least 24 bytes. */
static const char *palette(int32_t i, char *buf) {
    if (i < 6) return colours[i];
    snprintf(buf, 24, "hsl(%.1f,55%%,%d%%)", fmod(i * 137.508, 360.0), 38 + (i / 6) % 3 * 8);
    return buf;
}

enum {
    FONT = 14,       /* px of the text */
    BOX_W = 96,      /* a tree node's box */
    BOX_H = 44,
    GAP_X = 24,      /* between depths */
    GAP_Y = 10,      /* between leaves */
    CELL = 16,       /* a mask cell */
    GAP_CELL = 6,    /* the column of a gap mark */
    LABEL_W = 220,   /* the mask rows' labels */
    HEAD_H = 92,     /* the title and the mask's column labels (11 characters, rotated) */
    MARGIN = 20,
    RULER_H = 44,    /* the positions' ruler under the tree, with its caption */
    SLIDE_CHARS = 22, /* --slide: a token's text drawn whole up to this many characters */
    FOLD_W = 260,    /* --slide: the box of the shared prompt */
    SLIDE_COLS = 64, /* --slide: mask columns of one slot each, past the folded runs */
    DIAL_R = 15,     /* a RoPE dial's radius */
    DIAL_PAIRS = 4,  /* frequency pairs drawn */
};

/* Writes s as XML text: markup characters escaped, control bytes and bytes that are not
 * UTF-8 as \xNN, so any token gives a well-formed file. */
static void put_text(svg_out *fp, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned cp;
        size_t n = ui_utf8_char(p, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7F) {
            fprintf(fp->fp, "\\x%02X", *p);
            p++;
            continue;
        }
        if (cp == '<') fputs("&lt;", fp->fp);
        else if (cp == '>') fputs("&gt;", fp->fp);
        else if (cp == '&') fputs("&amp;", fp->fp);
        else if (cp == '"') fputs("&quot;", fp->fp);
        else fwrite(p, 1, n, fp->fp);
        p += n;
    }
}

/* Characters (code points) of UTF-8 text s. */
static int n_chars(const char *s) {
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) n += (*p & 0xC0) != 0x80;
    return n;
}

/* Estimated width in px of text s at size px in the monospace font (0.62 em a character). */
static int text_w(const char *s, int size) { return (int)(n_chars(s) * size * 0.62 + 0.5); }

static void text_at(svg_out *fp, int x, int y, int size, const char *anchor, const char *extra, const char *s) {
    int w = text_w(s, size), right = !strcmp(anchor, "end") ? x : !strcmp(anchor, "middle") ? x + w / 2 : x + w;
    if (right > fp->right) fp->right = right;
    fprintf(fp->fp, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"%s\"%s>", x, y, size, anchor,
            extra ? extra : "");
    put_text(fp, s);
    fputs("</text>\n", fp->fp);
}

/* ---- the tree ---- */

typedef struct tree_layout {
    int32_t *row;        /* (capacity) each live node's row: that of its first leaf */
    int32_t n_rows, min_depth, max_depth, n_drawn, n_live;
    uint8_t *in_step;    /* (capacity) the node is a row of the captured step */
    int32_t *colour;     /* (capacity) palette index: one per radix line, in tree order */
    bool slide;          /* SVG_SLIDE: the prompt folded, whole token texts */
    int32_t fold, fold_node; /* slide: depth and node of the shared prompt's last token,
                                drawn with its ancestors as one box (-1: none) */
    int *col_x, *col_w;  /* (max_depth - min_depth + 1) each column's left edge and width */
} tree_layout;

static void tree_layout_free(tree_layout *t) {
    free(t->row), free(t->in_step), free(t->colour), free(t->col_x), free(t->col_w);
}

/* The column of depth d: the fold's for the folded prompt. */
static int32_t col_of(const tree_layout *t, int32_t d) {
    return t->fold >= 0 ? (d <= t->fold ? 0 : d - t->fold) : d - t->min_depth;
}

/* The shared prompt a slide folds: a single root's chain up to its first branching node,
 * when that is at least 3 tokens long. */
static void find_fold(const forest *f, tree_layout *t) {
    t->fold = t->fold_node = -1;
    int32_t i = forest_dfs_first(f);
    if (!t->slide || i < 0 || forest_node_at(f, i)->next_sibling >= 0) return;
    for (const forest_node *nd = forest_node_at(f, i); nd->first_child >= 0; nd = forest_node_at(f, i)) {
        if (forest_node_at(f, nd->first_child)->next_sibling >= 0) break; /* i branches */
        i = nd->first_child;
    }
    if (forest_node_at(f, i)->first_child >= 0 && forest_node_at(f, i)->depth >= 2)
        t->fold_node = i, t->fold = forest_node_at(f, i)->depth;
}

/* A box's second line: "p3 s1026 45%" (position, slot or - while pending, probability),
 * or for the folded prompt its positions and length. */
static void node_where(const forest_node *nd, bool fold, char *buf, size_t cap) {
    if (fold) snprintf(buf, cap, "the prompt: p0-%d, %d tokens", nd->depth, nd->depth + 1);
    else if (nd->kv_slot >= 0) snprintf(buf, cap, "p%d s%d", nd->depth, nd->kv_slot);
    else snprintf(buf, cap, "p%d s-", nd->depth);
    if (!fold && isfinite(nd->logprob)) {
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, " %.0f%%", 100.0 * exp((double)nd->logprob));
    }
}

/* Columns: BOX_W each, or on a slide as wide as their longest token (to SLIDE_CHARS). */
static bool lay_out_columns(const forest *f, const tok *tk, tree_layout *t) {
    int32_t n = t->max_depth - t->min_depth + 1;
    t->col_x = calloc((size_t)n + 1, sizeof *t->col_x);
    t->col_w = calloc((size_t)n + 1, sizeof *t->col_w);
    if (!t->col_x || !t->col_w) return false;
    for (int32_t c = 0; c < n; c++) t->col_w[c] = c == 0 && t->fold >= 0 ? FOLD_W : BOX_W;
    for (int32_t i = forest_dfs_first(f); t->slide && i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        if (nd->depth <= t->fold) continue;
        char text[256];
        fv_token_text(f, tk, i, text, sizeof text);
        int chars = n_chars(text), c = col_of(t, nd->depth);
        int w = (chars < SLIDE_CHARS ? chars : SLIDE_CHARS) * FONT * 62 / 100 + 20;
        node_where(nd, false, text, sizeof text); /* the second line fits too */
        if (text_w(text, FONT - 3) + 12 > w) w = text_w(text, FONT - 3) + 12;
        if (w > t->col_w[c]) t->col_w[c] = w;
    }
    for (int32_t c = 0, x = MARGIN; c < n; c++) t->col_x[c] = x, x += t->col_w[c] + GAP_X;
    return true;
}

static bool tree_lay_out(const forest *f, const tok *tk, const mask_view *mv, tree_layout *t) {
    int32_t cap = forest_capacity(f);
    t->row = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->row);
    t->in_step = calloc((size_t)(cap > 0 ? cap : 1), 1);
    t->colour = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->colour);
    if (!t->row || !t->in_step || !t->colour) return false;
    /* each radix line (a root, or a child of a branching node) takes the next colour, so
     * neighbouring branches never share one */
    int32_t next = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        const forest_node *p = nd->parent >= 0 ? forest_node_at(f, nd->parent) : NULL;
        bool starts = !p || forest_node_at(f, p->first_child)->next_sibling >= 0;
        t->colour[i] = starts ? next++ : t->colour[nd->parent];
    }
    t->n_rows = t->n_drawn = 0;
    t->n_live = forest_n_live(f);
    t->min_depth = INT32_MAX, t->max_depth = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0 && t->n_drawn < SVG_MAX_NODES; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        t->row[i] = t->n_rows;
        t->n_rows += nd->first_child < 0; /* preorder: a node shares its first leaf's row */
        t->min_depth = nd->depth < t->min_depth ? nd->depth : t->min_depth;
        t->max_depth = nd->depth > t->max_depth ? nd->depth : t->max_depth;
        t->n_drawn++;
    }
    if (t->n_drawn < t->n_live) t->n_rows++; /* a partly drawn branch ends the last row */
    for (int32_t r = 0; mv && mv->step >= 0 && r < mv->n_rows; r++)
        if (!mv->rows[r].gone && forest_get(f, mv->rows[r].id)) t->in_step[mv->rows[r].node] = 1;
    if (t->min_depth > t->max_depth) t->min_depth = t->max_depth = 0; /* an empty forest */
    find_fold(f, t);
    return lay_out_columns(f, tk, t);
}

static int node_x(const tree_layout *t, int32_t depth) { return t->col_x[col_of(t, depth)]; }
static int node_w(const tree_layout *t, int32_t depth) { return t->col_w[col_of(t, depth)]; }
static int node_y(int y0, int32_t row) { return y0 + row * (BOX_H + GAP_Y); }

/* Text cut to cols columns, with an ellipsis that says so, into out. */
static void fit_text(const char *text, int cols, char *out, size_t cap) {
    ui_line l = ui_line_make(out, cap, cols, true);
    if (!text[ui_line_put(&l, text)] || cap < 4) return;
    l = ui_line_make(out, cap - 3, cols - 1, true); /* room for the ellipsis's 3 bytes */
    ui_line_put(&l, text);
    strcat(out, "\u2026");
}

/* The folded prompt's text (its tokens from the root to node) into out. */
static void fold_text(const forest *f, const tok *tk, int32_t node, char *out, size_t cap) {
    int32_t path[64], n = 0;
    for (int32_t i = node; i >= 0 && n < 64; i = forest_node_at(f, i)->parent) path[n++] = i;
    size_t len = 0;
    out[0] = '\0';
    for (int32_t k = n - 1; k >= 0 && len + 1 < cap; k--) {
        fv_token_text(f, tk, path[k], out + len, cap - len);
        len += strlen(out + len);
    }
}

static void draw_node(svg_out *fp, const forest *f, const tok *tk, const tree_layout *t, int32_t i, int y0) {
    const forest_node *nd = forest_node_at(f, i);
    if (nd->depth < t->fold) return; /* inside the folded prompt's box */
    const bool fold = i == t->fold_node;
    int x = node_x(t, nd->depth), y = node_y(y0, t->row[i]), w = node_w(t, nd->depth);
    if (nd->parent >= 0 && !fold) {
        const forest_node *p = forest_node_at(f, nd->parent);
        fprintf(fp->fp, "<line class=\"edge\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n",
                node_x(t, p->depth) + node_w(t, p->depth), node_y(y0, t->row[nd->parent]) + BOX_H / 2, x, y + BOX_H / 2);
    }
    char pal[24];
    const char *c = palette(t->colour[i], pal);
    fprintf(fp->fp, "<g class=\"%s\" data-pos=\"%d\" data-slot=\"%d\" data-line=\"%d\">\n", fold ? "fold" : "node",
            nd->depth, nd->kv_slot, t->colour[i]);
    fprintf(fp->fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"5\" fill=\"%s\" fill-opacity=\"0.18\" "
                "stroke=\"%s\" stroke-width=\"%d\"%s/>\n",
            x, y, w, BOX_H, c, c, t->in_step[i] ? 3 : 1, nd->state == FOREST_PENDING ? " stroke-dasharray=\"4 3\"" : "");
    char tok_text[512], buf[64], shown[256];
    if (fold) fold_text(f, tk, i, tok_text, sizeof tok_text);
    else fv_token_text(f, tk, i, tok_text, sizeof tok_text);
    fit_text(tok_text, t->slide ? (w - 16) * 100 / (FONT * 62) : 11, shown, sizeof shown);
    text_at(fp, x + w / 2, y + 18, FONT, "middle", " class=\"token\" xml:space=\"preserve\"", shown);
    node_where(nd, fold, buf, sizeof buf);
    text_at(fp, x + w / 2, y + 36, FONT - 3, "middle", " class=\"where\" fill=\"#444\"", buf);
    fputs("</g>\n", fp->fp);
}

static int tree_height(const tree_layout *t) {
    return FONT + 14 + t->n_rows * (BOX_H + GAP_Y) + (t->n_drawn < t->n_live ? FONT + 6 : 0) + RULER_H;
}

/* The positions as a ruler under the tree's columns, which are its depths. */
static void draw_ruler(svg_out *fp, const tree_layout *t, int y) {
    fprintf(fp->fp, "<line class=\"ruler\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
            node_x(t, t->min_depth), y, node_x(t, t->max_depth) + node_w(t, t->max_depth), y);
    for (int32_t d = t->fold >= 0 ? t->fold : t->min_depth; d <= t->max_depth; d++) {
        char buf[24];
        int x = node_x(t, d) + node_w(t, d) / 2;
        fprintf(fp->fp, "<line class=\"tick\" data-pos=\"%d\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
                d, x, y - 4, x, y + 4);
        if (d == t->fold) snprintf(buf, sizeof buf, "pos 0-%d", d);
        else snprintf(buf, sizeof buf, "pos %d", d);
        text_at(fp, x, y + FONT + 2, FONT - 3, "middle", " fill=\"#444\"", buf);
    }
    text_at(fp, MARGIN, y + 2 * FONT + 8, FONT - 2, "start", " fill=\"#444\"",
            "pos = RoPE position = depth in the tree: siblings share one, a child is one further");
}

/* Draws the tree from y0; returns its height. */
static int draw_tree(svg_out *fp, const forest *f, const tok *tk, const tree_layout *t, int y0) {
    text_at(fp, MARGIN, y0 + FONT, FONT + 2, "start", " font-weight=\"bold\"",
            "The forest: token, RoPE position p, KV slot s (- pending), probability");
    y0 += FONT + 14;
    int32_t k = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0 && k < t->n_drawn; i = forest_dfs_next(f, i), k++)
        draw_node(fp, f, tk, t, i, y0);
    int y = y0 + t->n_rows * (BOX_H + GAP_Y);
    if (t->n_drawn < t->n_live) {
        char note[96];
        snprintf(note, sizeof note, "(%d more nodes not drawn)", t->n_live - t->n_drawn);
        text_at(fp, MARGIN, y + FONT, FONT, "start", NULL, note);
        y += FONT + 6;
    }
    draw_ruler(fp, t, y + 4);
    return tree_height(t);
}

/* ---- the mask ---- */

static int dcol_w(const mv_dcol *d) { return d->n == 0 ? GAP_CELL : CELL; }

static int mask_width(const mask_view *mv) {
    int w = 0;
    for (int32_t d = 0; d < mv->n_dcols; d++) w += dcol_w(&mv->dcols[d]);
    return LABEL_W + w;
}

/* The node whose KV slot is slot among f's live nodes, or -1 (a slide's mask columns are
 * coloured and labelled by the token they hold). */
static int32_t slot_owner(const forest *f, int32_t slot) {
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (forest_node_at(f, i)->kv_slot == slot) return i;
    return -1;
}

static void draw_mask_head(svg_out *fp, const forest *f, const tok *tk, const tree_layout *t, mask_view *mv, int y0) {
    char buf[160];
    snprintf(buf, sizeof buf, "Step %d: the attention mask (%d rows, %d KV slots; a row sees the filled cells)",
             mv->step, mv->n_rows_total, mv->n_cols_total);
    text_at(fp, MARGIN, y0 + FONT, FONT + 2, "start", " font-weight=\"bold\"", buf);
    int x = MARGIN + LABEL_W;
    for (int32_t d = 0; d < mv->n_dcols; d++) {
        mv_dcol_text(mv, d, buf, sizeof buf);
        const mv_dcol *dc = &mv->dcols[d];
        int32_t owner = t->slide && dc->n > 0 ? slot_owner(f, mv->cols[dc->col]) : -1;
        int32_t last = t->slide && dc->n > 1 ? slot_owner(f, mv->cols[dc->col + dc->n - 1]) : -1;
        if (owner >= 0) { /* a slide names the column's tokens (a run's first and last), not its slots */
            char text[128], end[48] = "";
            fv_token_text(f, tk, owner, text, sizeof text);
            if (last >= 0) fv_token_text(f, tk, last, end, sizeof end);
            char both[180];
            if (last >= 0 && last == t->fold_node) snprintf(both, sizeof both, "the prompt");
            else snprintf(both, sizeof both, "%s%s%s", text, last >= 0 ? ".." : "", end);
            fit_text(both, 11, buf, sizeof buf);
        }
        if (mv->dcols[d].n > 0) {
            fprintf(fp->fp, "<text class=\"slot\" font-size=\"%d\" transform=\"translate(%d,%d) rotate(-60)\">",
                    FONT - 3, x + CELL / 2 + 4, y0 + HEAD_H - 4);
            put_text(fp, buf);
            fputs("</text>\n", fp->fp);
        }
        x += dcol_w(&mv->dcols[d]);
    }
}

/* A weight's shade: the square root lifts the small weights of long rows into view. */
static double weight_opacity(double w) { return 0.12 + 0.88 * sqrt(w); }

static void draw_mask_row(svg_out *fp, const forest *f, const tree_layout *t, const mask_view *mv, int32_t r, int y) {
    const mv_row *row = &mv->rows[r];
    char label[96];
    snprintf(label, sizeof label, "%s   p%d s%d%s", row->gone ? "(pruned)" : row->text, row->pos, row->slot,
             row->want ? " L" : "");
    text_at(fp, MARGIN + LABEL_W - 8, y + CELL - 3, FONT - 1, "end", " class=\"rowlabel\" xml:space=\"preserve\"", label);
    bool live = !row->gone && forest_get(f, row->id);
    char pal[24];
    const char *c = live ? palette(t->colour[row->node], pal) : colours[row->colour % 6];
    int x = MARGIN + LABEL_W;
    for (int32_t d = 0; d < mv->n_dcols; d++) {
        const mv_dcol *dc = &mv->dcols[d];
        int32_t owner = t->slide && dc->n > 0 ? slot_owner(f, mv->cols[dc->col]) : -1;
        if (owner >= 0) c = palette(t->colour[owner], pal); /* the branch that holds the column */
        if (dc->n > 0) {
            const char m = mv_cell(mv, r, d); /* ':' an ancestor outside the window: pale */
            const bool on = m == '#' || m == ':';
            const float wt = mv_weight(mv, r, d); /* with weights, a cell as opaque as its weight */
            char shade[64] = "";
            if (wt >= 0) snprintf(shade, sizeof shade, " fill-opacity=\"%.3f\" data-w=\"%.4f\"", weight_opacity(wt), wt);
            else if (m == ':') snprintf(shade, sizeof shade, " fill-opacity=\"0.3\"");
            fprintf(fp->fp, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"%s stroke=\"#fff\"/>\n",
                    m == ':' ? "outwin" : on ? "on" : "off", x, y, CELL, CELL,
                    on ? c : mv->attn_layer >= 0 ? "#fafafa" : "#e8e8e8", shade);
        }
        x += dcol_w(dc);
    }
}

static int mask_height(const mask_view *mv) {
    return HEAD_H + mv->n_rows * CELL + FONT + 16 + (mv->n_swa > 0 ? FONT + 2 : 0) +
           (mv->attn_layer >= 0 ? CELL + 4 : 0);
}

/* The key of the shading: cells of weight 0, 0.25, 0.5, 0.75 and 1, and what they show. */
static void draw_weight_key(svg_out *fp, const mask_view *mv, int y) {
    char buf[192], what[96];
    int x = MARGIN;
    for (int i = 0; i <= 4; i++, x += CELL + 2)
        fprintf(fp->fp, "<rect class=\"key\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                "fill-opacity=\"%.3f\"/>\n", x, y, CELL, CELL, colours[0], weight_opacity(i / 4.0));
    mv_attn_text(mv, what, sizeof what);
    snprintf(buf, sizeof buf, "weight 0, 1/4, 1/2, 3/4, 1: the %s (a row's cells sum to 1)", what);
    text_at(fp, x + 6, y + CELL - 3, FONT - 2, "start", " fill=\"#444\"", buf);
}

/* Draws the mask from y0; returns its height. */
static int draw_mask(svg_out *fp, const forest *f, const tok *tk, const tree_layout *t, mask_view *mv, int y0) {
    draw_mask_head(fp, f, tk, t, mv, y0);
    int y = y0 + HEAD_H;
    for (int32_t r = 0; r < mv->n_rows; r++, y += CELL) draw_mask_row(fp, f, t, mv, r, y);
    char key[320];
    snprintf(key, sizeof key, "L: the row returns logits.%s%s",
             !mv->runs ? "" : t->slide ? "  A column a..b: a run of tokens every row sees alike." : "  A column a-b: a run of slots every row sees alike.",
             "  A narrow blank column: slot numbers jump.");
    text_at(fp, MARGIN, y + FONT + 8, FONT - 2, "start", " fill=\"#444\"", key);
    if (mv->n_swa > 0) { /* the grid is the windowed layers' mask */
        snprintf(key, sizeof key, "Sliding %s. The grid is a windowed layer's mask; pale "
                 "cells: ancestors outside the row's window, which only global layers see.", mv->window);
        text_at(fp, MARGIN, y + 2 * FONT + 10, FONT - 2, "start", " fill=\"#444\"", key);
    }
    if (mv->attn_layer >= 0) draw_weight_key(fp, mv, y + FONT + 16 + (mv->n_swa > 0 ? FONT + 2 : 0));
    return mask_height(mv);
}

/* ---- RoPE ---- */

/* Whether row r of the step is a live node with a parent. */
static bool rope_row_ok(const forest *f, const mask_view *mv, int32_t r) {
    const mv_row *row = &mv->rows[r];
    return !row->gone && forest_get(f, row->id) && row->parent >= 0;
}

/* The captured step's last live row with a parent, and another row at its position (a
 * sibling or a cousin in another branch; -1: none), as forest indices; false when none. */
static bool rope_rows(const forest *f, const mask_view *mv, int32_t *node, int32_t *sib) {
    for (int32_t r = mv->n_rows - 1; r >= 0; r--) {
        if (!rope_row_ok(f, mv, r)) continue;
        *node = mv->rows[r].node, *sib = -1;
        for (int32_t o = 0; o < mv->n_rows && *sib < 0; o++)
            if (o != r && rope_row_ok(f, mv, o) && mv->rows[o].pos == mv->rows[r].pos) *sib = mv->rows[o].node;
        return true;
    }
    return false;
}

static int rope_height(const forest *f, const mask_view *mv) {
    int32_t node, sib;
    if (!mv || mv->step < 0 || mv->rope_dim < 2 || !rope_rows(f, mv, &node, &sib)) return 0;
    return FONT + 14 + (sib >= 0 ? 3 : 2) * (2 * DIAL_R + 10) + FONT + 10;
}

/* The label of node i's dials ("parent \" a\" pos 6") into out. */
static void dial_label(const forest *f, const tok *tk, int32_t i, const char *who, char *out, size_t cap) {
    char text[40];
    fv_token_text(f, tk, i, text, sizeof text);
    snprintf(out, cap, "%s \"%s\" pos %d", who, text, forest_node_at(f, i)->depth);
}

/* One row of dials from x0: node i's rotation of the first DIAL_PAIRS pairs, angle
 * pos * theta_k, after its label. */
static void draw_dials(svg_out *fp, const forest *f, const tok *tk, const mask_view *mv, int32_t i,
                       const char *who, int x0, int y) {
    const forest_node *nd = forest_node_at(f, i);
    char buf[96];
    dial_label(f, tk, i, who, buf, sizeof buf);
    text_at(fp, MARGIN, y + DIAL_R + 4, FONT - 1, "start", " xml:space=\"preserve\"", buf);
    for (int k = 0; k < DIAL_PAIRS && 2 * k < mv->rope_dim; k++) {
        double a = rv_angle(mv->rope_base, mv->rope_dim, nd->depth, k);
        int cx = x0 + DIAL_R + k * (2 * DIAL_R + 16), cy = y + DIAL_R;
        fprintf(fp->fp, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", cx, cy, DIAL_R);
        fprintf(fp->fp, "<line class=\"dial\" data-pos=\"%d\" data-pair=\"%d\" data-angle=\"%.3f\" x1=\"%d\" y1=\"%d\" "
                    "x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                nd->depth, k, a * 180 / M_PI, cx, cy, cx + DIAL_R * cos(a), cy - DIAL_R * sin(a), colours[0]);
    }
}

/* How RoPE turns a row, beside its parent and a row of another branch at its position:
 * the first pairs' angles, the dials after the widest label. */
static void draw_rope(svg_out *fp, const forest *f, const tok *tk, const mask_view *mv, int y) {
    int32_t node, sib;
    if (!rope_height(f, mv) || !rope_rows(f, mv, &node, &sib)) return;
    text_at(fp, MARGIN, y + FONT, FONT + 2, "start", " font-weight=\"bold\"",
            "RoPE: each pair k of q and k turns by pos x theta_k (the first 4 pairs; theta_k = base^(-2k/d))");
    const int32_t who[3] = {forest_node_at(f, node)->parent, node, sib};
    const char *const names[3] = {"parent", "row", "other branch"};
    int x0 = MARGIN;
    for (int k = 0; k < 3 && who[k] >= 0; k++) {
        char buf[96];
        dial_label(f, tk, who[k], names[k], buf, sizeof buf);
        if (MARGIN + text_w(buf, FONT - 1) + 12 > x0) x0 = MARGIN + text_w(buf, FONT - 1) + 12;
    }
    y += FONT + 14;
    for (int k = 0; k < 3 && who[k] >= 0; k++, y += 2 * DIAL_R + 10)
        draw_dials(fp, f, tk, mv, who[k], names[k], x0, y);
    text_at(fp, MARGIN, y + FONT - 6, FONT - 2, "start", " fill=\"#444\"",
            "Same position, same turn, in any branch; the parent one step less. q.k sees only the "
            "difference: the distance along a path.");
}

/* The parts of the picture, drawn into o from y = MARGIN; returns the height used. */
static int draw_parts(svg_out *o, const forest *f, const tok *tk, tree_layout *t, mask_view *mv, bool tree,
                      bool mask) {
    int y = MARGIN;
    if (tree) y += draw_tree(o, f, tk, t, y) + MARGIN;
    if (mask) y += draw_mask(o, f, tk, t, mv, y) + MARGIN;
    int rh = tree && mask ? rope_height(f, mv) : 0; /* the rotation: with the whole picture */
    if (rh) {
        draw_rope(o, f, tk, mv, y);
        y += rh + MARGIN;
    }
    return y + MARGIN;
}

st_code svg_write(FILE *fp, const forest *f, const tok *tk, mask_view *mv, int parts, st_err *err) {
    bool mask = (parts & SVG_MASK) && mv && mv->step >= 0, tree = parts & SVG_TREE;
    tree_layout t = {0};
    char *body = NULL;
    size_t body_len = 0;
    svg_out o = {open_memstream(&body, &body_len), 0};
    t.slide = parts & SVG_SLIDE;
    if (!o.fp || !tree_lay_out(f, tk, mv, &t)) {
        if (o.fp) fclose(o.fp);
        free(body);
        tree_layout_free(&t);
        return st_set(err, ST_ERR_NOMEM, "out of memory laying out the picture");
    }
    if (mask) { /* a slide folds the shared runs, and every run when the rest is too wide */
        mv_layout(mv, INT32_MAX);
        mv_layout(mv, !t.slide ? SVG_MAX_COLS : mv->n_shared <= SLIDE_COLS ? mv->n_shared : 1);
    }
    int tw = tree ? node_x(&t, t.max_depth) + node_w(&t, t.max_depth) + MARGIN : 0;
    int mw = mask ? mask_width(mv) + MARGIN * 2 : 0;
    int h = draw_parts(&o, f, tk, &t, mv, tree, mask) - MARGIN;
    fclose(o.fp);
    int w = tw > mw ? tw : mw; /* and wide enough for every title and key */
    if (o.right + MARGIN > w) w = o.right + MARGIN;
    if (w < 200) w = 200;
    int pw = w, ph = h; /* the size shown: a slide is 1920 x 1080, its view box 16:9 */
    if (t.slide) {
        if (w * 9 < h * 16) w = (h * 16 + 8) / 9;
        else h = (w * 9 + 15) / 16;
        pw = 1920, ph = 1080;
    }
    fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            pw, ph, w, h);
    fwrite(body, 1, body_len, fp);
    fputs("</svg>\n", fp);
    free(body);
    tree_layout_free(&t);
    if (fflush(fp) != 0 || ferror(fp)) return st_set(err, ST_ERR_IO, "writing the picture failed: %s", strerror(errno));
    return ST_OK;
}

st_code svg_save(const char *path, const forest *f, const tok *tk, mask_view *mv, int parts, st_err *err) {
    outfile o;
    st_code rc = outfile_begin(&o, path, "picture", err);
    if (rc) return rc;
    if ((rc = svg_write(o.fp, f, tk, mv, parts, err))) {
        outfile_abort(&o);
        st_prefix(err, "%s", path);
        return rc;
    }
    return outfile_commit(&o, err);
}
