/* svg.c - the forest and a step's attention mask as one SVG picture (svg.h). */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/outfile.h"
#include "forest_view.h"
#include "uline.h"

/* A palette that stays distinct on a projector and for most colour-blind readers (Tol). */
static const char *const colours[6] = {"#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377"};

enum {
    FONT = 14,       /* px of the text */
    BOX_W = 96,      /* a tree node's box */
    BOX_H = 44,
    GAP_X = 24,      /* between depths */
    GAP_Y = 10,      /* between leaves */
    CELL = 16,       /* a mask cell */
    GAP_CELL = 6,    /* the column of a gap mark */
    LABEL_W = 220,   /* the mask rows' labels */
    HEAD_H = 70,     /* the mask's column labels */
    MARGIN = 20,
    RULER_H = 44,    /* the positions' ruler under the tree, with its caption */
    DIAL_R = 15,     /* a RoPE dial's radius */
    DIAL_PAIRS = 4,  /* frequency pairs drawn */
};

/* Writes s as XML text: markup characters escaped, control bytes and bytes that are not
 * UTF-8 as \xNN, so any token gives a well-formed file. */
static void put_text(FILE *fp, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned cp;
        size_t n = ui_utf8_char(p, &cp);
        if (n == 0 || cp < 0x20 || cp == 0x7F) {
            fprintf(fp, "\\x%02X", *p);
            p++;
            continue;
        }
        if (cp == '<') fputs("&lt;", fp);
        else if (cp == '>') fputs("&gt;", fp);
        else if (cp == '&') fputs("&amp;", fp);
        else if (cp == '"') fputs("&quot;", fp);
        else fwrite(p, 1, n, fp);
        p += n;
    }
}

static void text_at(FILE *fp, int x, int y, int size, const char *anchor, const char *extra, const char *s) {
    fprintf(fp, "<text x=\"%d\" y=\"%d\" font-size=\"%d\" text-anchor=\"%s\"%s>", x, y, size, anchor,
            extra ? extra : "");
    put_text(fp, s);
    fputs("</text>\n", fp);
}

/* ---- the tree ---- */

typedef struct tree_layout {
    int32_t *row;        /* (capacity) each live node's row: that of its first leaf */
    int32_t n_rows, min_depth, max_depth, n_drawn, n_live;
    uint8_t *in_step;    /* (capacity) the node is a row of the captured step */
    uint8_t *colour;     /* (capacity) palette index: one per radix line, in tree order */
} tree_layout;

static bool tree_lay_out(const forest *f, const mask_view *mv, tree_layout *t) {
    int32_t cap = forest_capacity(f);
    t->row = calloc((size_t)(cap > 0 ? cap : 1), sizeof *t->row);
    t->in_step = calloc((size_t)(cap > 0 ? cap : 1), 1);
    t->colour = calloc((size_t)(cap > 0 ? cap : 1), 1);
    if (!t->row || !t->in_step || !t->colour) return false;
    /* each radix line (a root, or a child of a branching node) takes the next colour, so
     * neighbouring branches never share one */
    int32_t next = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        const forest_node *p = nd->parent >= 0 ? forest_node_at(f, nd->parent) : NULL;
        bool starts = !p || forest_node_at(f, p->first_child)->next_sibling >= 0;
        t->colour[i] = starts ? (uint8_t)(next++ % 6) : t->colour[nd->parent];
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
    return true;
}

static int node_x(const tree_layout *t, int32_t depth) { return MARGIN + (depth - t->min_depth) * (BOX_W + GAP_X); }
static int node_y(int y0, int32_t row) { return y0 + row * (BOX_H + GAP_Y); }

static void draw_node(FILE *fp, const forest *f, const tok *tk, const tree_layout *t, int32_t i, int y0) {
    const forest_node *nd = forest_node_at(f, i);
    int x = node_x(t, nd->depth), y = node_y(y0, t->row[i]);
    if (nd->parent >= 0) {
        const forest_node *p = forest_node_at(f, nd->parent);
        fprintf(fp, "<line class=\"edge\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n",
                node_x(t, p->depth) + BOX_W, node_y(y0, t->row[nd->parent]) + BOX_H / 2, x, y + BOX_H / 2);
    }
    const char *c = colours[t->colour[i]];
    fprintf(fp, "<g class=\"node\" data-pos=\"%d\" data-slot=\"%d\">\n", nd->depth, nd->kv_slot);
    fprintf(fp, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"5\" fill=\"%s\" fill-opacity=\"0.18\" "
                "stroke=\"%s\" stroke-width=\"%d\"%s/>\n",
            x, y, BOX_W, BOX_H, c, c, t->in_step[i] ? 3 : 1, nd->state == FOREST_PENDING ? " stroke-dasharray=\"4 3\"" : "");
    char tok_text[64], buf[64];
    fv_token_text(f, tk, i, tok_text, sizeof tok_text);
    char shown[40];
    ui_line l = ui_line_make(shown, sizeof shown, 11, true);
    ui_line_put(&l, tok_text);
    text_at(fp, x + BOX_W / 2, y + 18, FONT, "middle", " class=\"token\" xml:space=\"preserve\"", shown);
    if (nd->kv_slot >= 0) snprintf(buf, sizeof buf, "p%d s%d", nd->depth, nd->kv_slot);
    else snprintf(buf, sizeof buf, "p%d s-", nd->depth);
    if (isfinite(nd->logprob)) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, " %.0f%%", 100.0 * exp((double)nd->logprob));
    }
    text_at(fp, x + BOX_W / 2, y + 36, FONT - 3, "middle", " class=\"where\" fill=\"#444\"", buf);
    fputs("</g>\n", fp);
}

static int tree_height(const tree_layout *t) {
    return FONT + 14 + t->n_rows * (BOX_H + GAP_Y) + (t->n_drawn < t->n_live ? FONT + 6 : 0) + RULER_H;
}

/* The positions as a ruler under the tree's columns, which are its depths. */
static void draw_ruler(FILE *fp, const tree_layout *t, int y) {
    fprintf(fp, "<line class=\"ruler\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
            node_x(t, t->min_depth), y, node_x(t, t->max_depth) + BOX_W, y);
    for (int32_t d = t->min_depth; d <= t->max_depth; d++) {
        char buf[16];
        int x = node_x(t, d) + BOX_W / 2;
        fprintf(fp, "<line class=\"tick\" data-pos=\"%d\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#444\"/>\n",
                d, x, y - 4, x, y + 4);
        snprintf(buf, sizeof buf, "pos %d", d);
        text_at(fp, x, y + FONT + 2, FONT - 3, "middle", " fill=\"#444\"", buf);
    }
    text_at(fp, MARGIN, y + 2 * FONT + 8, FONT - 2, "start", " fill=\"#444\"",
            "pos = RoPE position = depth in the tree: siblings share one, a child is one further");
}

/* Draws the tree from y0; returns its height. */
static int draw_tree(FILE *fp, const forest *f, const tok *tk, const tree_layout *t, int y0) {
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

static void draw_mask_head(FILE *fp, mask_view *mv, int y0) {
    char buf[160];
    snprintf(buf, sizeof buf, "Step %d: the attention mask (%d rows, %d KV slots; a row sees the filled cells)",
             mv->step, mv->n_rows_total, mv->n_cols_total);
    text_at(fp, MARGIN, y0 + FONT, FONT + 2, "start", " font-weight=\"bold\"", buf);
    int x = MARGIN + LABEL_W;
    for (int32_t d = 0; d < mv->n_dcols; d++) {
        mv_dcol_text(mv, d, buf, sizeof buf);
        if (mv->dcols[d].n > 0) {
            fprintf(fp, "<text class=\"slot\" font-size=\"%d\" transform=\"translate(%d,%d) rotate(-60)\">",
                    FONT - 3, x + CELL / 2 + 4, y0 + HEAD_H - 4);
            put_text(fp, buf);
            fputs("</text>\n", fp);
        }
        x += dcol_w(&mv->dcols[d]);
    }
}

/* A weight's shade: the square root lifts the small weights of long rows into view. */
static double weight_opacity(double w) { return 0.12 + 0.88 * sqrt(w); }

static void draw_mask_row(FILE *fp, const forest *f, const tree_layout *t, const mask_view *mv, int32_t r, int y) {
    const mv_row *row = &mv->rows[r];
    char label[96];
    snprintf(label, sizeof label, "%s   p%d s%d%s", row->gone ? "(pruned)" : row->text, row->pos, row->slot,
             row->want ? " L" : "");
    text_at(fp, MARGIN + LABEL_W - 8, y + CELL - 3, FONT - 1, "end", " class=\"rowlabel\" xml:space=\"preserve\"", label);
    bool live = !row->gone && forest_get(f, row->id);
    const char *c = colours[live ? t->colour[row->node] : row->colour % 6];
    int x = MARGIN + LABEL_W;
    for (int32_t d = 0; d < mv->n_dcols; d++) {
        const mv_dcol *dc = &mv->dcols[d];
        if (dc->n > 0) {
            const char m = mv_cell(mv, r, d); /* ':' an ancestor outside the window: pale */
            const bool on = m == '#' || m == ':';
            const float wt = mv_weight(mv, r, d); /* with weights, a cell as opaque as its weight */
            char shade[64] = "";
            if (wt >= 0) snprintf(shade, sizeof shade, " fill-opacity=\"%.3f\" data-w=\"%.4f\"", weight_opacity(wt), wt);
            else if (m == ':') snprintf(shade, sizeof shade, " fill-opacity=\"0.3\"");
            fprintf(fp, "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"%s stroke=\"#fff\"/>\n",
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
static void draw_weight_key(FILE *fp, const mask_view *mv, int y) {
    char buf[192], what[96];
    int x = MARGIN;
    for (int i = 0; i <= 4; i++, x += CELL + 2)
        fprintf(fp, "<rect class=\"key\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" "
                "fill-opacity=\"%.3f\"/>\n", x, y, CELL, CELL, colours[0], weight_opacity(i / 4.0));
    mv_attn_text(mv, what, sizeof what);
    snprintf(buf, sizeof buf, "weight 0, 1/4, 1/2, 3/4, 1: the %s (a row's cells sum to 1)", what);
    text_at(fp, x + 6, y + CELL - 3, FONT - 2, "start", " fill=\"#444\"", buf);
}

/* Draws the mask from y0; returns its height. */
static int draw_mask(FILE *fp, const forest *f, const tree_layout *t, mask_view *mv, int y0) {
    draw_mask_head(fp, mv, y0);
    int y = y0 + HEAD_H;
    for (int32_t r = 0; r < mv->n_rows; r++, y += CELL) draw_mask_row(fp, f, t, mv, r, y);
    char key[320];
    snprintf(key, sizeof key, "L: the row returns logits.%s%s", mv->runs ? "  A column a-b: a run of slots every row sees alike." : "",
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

/* One row of dials: node i's rotation of the first DIAL_PAIRS pairs, angle pos * theta_k. */
static void draw_dials(FILE *fp, const forest *f, const tok *tk, const mask_view *mv, int32_t i,
                       const char *who, int y) {
    const forest_node *nd = forest_node_at(f, i);
    char buf[96], text[40];
    fv_token_text(f, tk, i, text, sizeof text);
    snprintf(buf, sizeof buf, "%s \"%s\" pos %d", who, text, nd->depth);
    text_at(fp, MARGIN + LABEL_W - 8, y + DIAL_R + 4, FONT - 1, "end", " xml:space=\"preserve\"", buf);
    for (int k = 0; k < DIAL_PAIRS && 2 * k < mv->rope_dim; k++) {
        double theta = pow(mv->rope_base, -2.0 * k / mv->rope_dim), a = fmod(nd->depth * theta, 2 * M_PI);
        int cx = MARGIN + LABEL_W + DIAL_R + k * (2 * DIAL_R + 16), cy = y + DIAL_R;
        fprintf(fp, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", cx, cy, DIAL_R);
        fprintf(fp, "<line class=\"dial\" data-pos=\"%d\" data-pair=\"%d\" data-angle=\"%.3f\" x1=\"%d\" y1=\"%d\" "
                    "x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"/>\n",
                nd->depth, k, a * 180 / M_PI, cx, cy, cx + DIAL_R * cos(a), cy - DIAL_R * sin(a), colours[0]);
    }
}

/* How RoPE turns a row, beside its parent and a sibling: the first pairs' angles. */
static void draw_rope(FILE *fp, const forest *f, const tok *tk, const mask_view *mv, int y) {
    int32_t node, sib;
    if (!rope_height(f, mv) || !rope_rows(f, mv, &node, &sib)) return;
    text_at(fp, MARGIN, y + FONT, FONT + 2, "start", " font-weight=\"bold\"",
            "RoPE: each pair k of q and k turns by pos x theta_k (the first 4 pairs; theta_k = base^(-2k/d))");
    y += FONT + 14;
    draw_dials(fp, f, tk, mv, forest_node_at(f, node)->parent, "parent", y);
    draw_dials(fp, f, tk, mv, node, "row", y += 2 * DIAL_R + 10);
    if (sib >= 0) draw_dials(fp, f, tk, mv, sib, "other branch", y += 2 * DIAL_R + 10);
    text_at(fp, MARGIN, y + 2 * DIAL_R + FONT + 4, FONT - 2, "start", " fill=\"#444\"",
            "Same position, same turn, in any branch; the parent one step less. q.k sees only the "
            "difference: the distance along a path.");
}

st_code svg_write(FILE *fp, const forest *f, const tok *tk, mask_view *mv, int parts, st_err *err) {
    bool mask = (parts & SVG_MASK) && mv && mv->step >= 0, tree = parts & SVG_TREE;
    tree_layout t = {0};
    if (!tree_lay_out(f, mv, &t)) {
        free(t.row), free(t.in_step), free(t.colour);
        return st_set(err, ST_ERR_NOMEM, "out of memory laying out the picture");
    }
    if (mask) mv_layout(mv, SVG_MAX_COLS);
    int tw = tree ? node_x(&t, t.max_depth) + BOX_W + MARGIN : 0, mw = mask ? mask_width(mv) + MARGIN * 2 : 0;
    int th = tree ? tree_height(&t) : 0, mh = mask ? mask_height(mv) : 0;
    int rh = tree && mask ? rope_height(f, mv) : 0; /* the rotation: with the whole picture */
    int w = tw > mw ? tw : mw, h = MARGIN * 2 + th + (tree && mask ? MARGIN : 0) + mh + (rh ? rh + MARGIN : 0);
    fprintf(fp, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
            w > 200 ? w : 200, h, w > 200 ? w : 200, h);
    int y = MARGIN;
    if (tree) y += draw_tree(fp, f, tk, &t, y) + MARGIN;
    if (mask) y += draw_mask(fp, f, &t, mv, y) + MARGIN;
    if (rh) draw_rope(fp, f, tk, mv, y);
    fputs("</svg>\n", fp);
    free(t.row), free(t.in_step), free(t.colour);
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
