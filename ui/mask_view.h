/* mask_view.h - the mask pane's view model (teaching): a copy of one step's plan as it
 * was packed: each row's node, parent, token text, RoPE position, KV slot and whether it
 * returns logits, the KV slots any row may see (the grid's columns) and the attention
 * mask as a grid, each row coloured by its branch (the radix line it belongs to).
 *
 * mv_capture copies what it needs, so the view stays valid after the plan and the
 * forest move on (the worker captures under the forest lock; the UI reads it under the
 * same lock). Rows keep their node's id, generation-checked: after a prune (the user's,
 * or a strategy's) mv_mark_pruned turns the rows of nodes that are gone into "pruned"
 * rows, whose node is never looked up again. Hit-testing a click (mv_row_at) is plain
 * arithmetic over the layout draw_mask uses (MV_HEAD_LINES). Grids larger than
 * MV_MAX_ROWS x MV_MAX_COLS keep their last rows/columns, and say so.
 *
 * A speculative step (:draft, :lookahead; ui/spec_job.h) is captured before its
 * acceptance prunes the rejected drafts and the lookahead window, and each row gets a
 * role (mv_set_role): the tip, a draft (then accepted or rejected: mv_resolve_drafts),
 * or window cell (level l, column i). Its rows keep the snapshotted token text and role
 * after their nodes are gone, so the step still reads as it ran; their ids are never
 * looked up again either.
 *
 * On a model with sliding-window layers the grid is the windowed layers' mask: a row's
 * ancestors outside its window (which only the global layers see) are marked apart from
 * the slots that are not its ancestors at all, and the header names the layers of each
 * kind.
 *
 * A step run with attention weights (step_plan attn_want: one layer, one head or their
 * mean) keeps them per cell: the pane draws a seen cell as a bar as tall as its weight
 * and the SVG shades it. */
#ifndef MD_UI_MASK_VIEW_H
#define MD_UI_MASK_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "tok/tok.h"

#define MV_MAX_ROWS 512
#define MV_MAX_COLS 1024

typedef struct mv_row {
    int32_t node, parent, token, pos, slot; /* node, parent: indices, for display only */
    forest_id id;      /* the node's id when captured */
    uint8_t gone;      /* the node was pruned since (mv_mark_pruned) */
    uint8_t want;      /* returns logits */
    uint8_t colour;    /* branch colour 0..5 */
    uint8_t role;      /* MV_ROLE_*: the row's part in a speculative step */
    int16_t la_level, la_col; /* MV_ROLE_WINDOW: its cell of the lookahead window */
    char text[32];     /* token text in context */
} mv_row;

/* Roles of a speculative step's rows (MV_ROLE_NONE in any other step). */
enum {
    MV_ROLE_NONE = 0,
    MV_ROLE_OTHER,     /* another pending node of the forest (a prompt being prefilled) */
    MV_ROLE_TIP,       /* the node whose logits give the first greedy token */
    MV_ROLE_DRAFT,     /* a draft token, before acceptance */
    MV_ROLE_ACCEPTED,  /* a draft token the model's greedy choices confirmed */
    MV_ROLE_REJECTED,  /* a draft token pruned by acceptance */
    MV_ROLE_WINDOW,    /* a lookahead window cell (la_level, la_col), pruned after the step */
};

/* A column of the grid as drawn (mv_layout): n = 1, one KV slot (column col); n > 1, a run
 * of n consecutive slots that every row sees or misses alike, drawn as one column; n = 0,
 * a gap mark where slot numbers jump. */
typedef struct mv_dcol {
    int32_t col, n;
} mv_dcol;

typedef struct mask_view {
    mv_row rows[MV_MAX_ROWS];
    int32_t n_rows;         /* rows kept (the last ones) */
    int32_t n_rows_total;   /* rows the step had */
    int32_t cols[MV_MAX_COLS]; /* slot of each column */
    int32_t n_cols, n_cols_total;
    uint8_t grid[MV_MAX_ROWS][MV_MAX_COLS / 8]; /* bit c of row r: row r sees column c */
    uint8_t outwin[MV_MAX_ROWS][MV_MAX_COLS / 8]; /* ... but only on global layers: the
                                                      slot is outside the row's window */
    int32_t n_swa;          /* the step's window (0: none) */
    char window[128];       /* its layers in words (model_window_text), "" without one */
    char recurrent[128];    /* a model's recurrent layers and the states the forest holds
                               after the step, in words; "" without such layers */
    int32_t step;           /* steps run before this one; -1 before any */
    bool preview;           /* the plan of the next step, built and cancelled, not run */
    bool spec;              /* a speculative step: rows carry roles */
    mv_dcol dcols[2 * MV_MAX_COLS]; /* the columns as drawn (mv_layout) */
    int32_t n_dcols;
    bool runs;              /* the layout drew runs of slots as one column each */
    int32_t n_plain;        /* drawn columns without runs, -1 before the capture is laid
                               out: a layout is redone only when the capture or the level
                               of folding it needs changes */
    int32_t n_shared;       /* drawn columns with the shared runs folded (level 1) */
    int32_t level;          /* the layout's folding: 0 none, 1 shared runs, 2 every run */
    bool unfold;            /* the user opened the folds (mv_toggle_fold): one column a
                               slot, scrolled with h / l */
    int32_t top;            /* first row shown */
    int32_t left;           /* first drawn column shown; -1: follow the newest (last) ones */
    /* The step's attention weights, when it ran with them (step_plan attn_want) */
    char kind[48];          /* what ran the step (mv_set_kind), "" when not said */
    float rope_base;        /* the model's RoPE base and rotated dims per head, for the */
    int32_t rope_dim;       /* picture of the rotation (svg.h); 0: not said */
    int32_t attn_layer;     /* -1: none captured */
    int32_t attn_head;      /* -1: the mean over the heads */
    uint16_t attn[MV_MAX_ROWS][MV_MAX_COLS]; /* row r's weight on column c, times 65535 */
} mask_view;

void mv_init(mask_view *v);
/* Copies plan p (built, run or not; its arrays still filled) over forest f. tk may be
 * NULL. step numbers the step. Clears preview (the worker sets it for a preview). */
void mv_capture(mask_view *v, const forest *f, const tok *tk, const step_plan *p, int32_t step);
bool mv_sees(const mask_view *v, int32_t row, int32_t col);
/* Row row sees column col on the global layers only (outside its window). */
bool mv_outside_window(const mask_view *v, int32_t row, int32_t col);
/* The branch colour (0..5) of node idx: that of the first node of its radix line (a root
 * or a child of a branching node), so every token of one line shares a colour. */
uint8_t mv_branch_colour(const forest *f, int32_t idx);

/* Names the step's kind after what ran it ("grow", "beam", "draft", "judge", ...),
 * "prefill + " before it when some rows return no logits (tokens that only fill the
 * cache: a prompt, the judge's question). */
void mv_set_kind(mask_view *v, const char *what);
/* Row r's attention weight on drawn column d (the sum over a run's slots): 0..1, or -1
 * when the step kept no weights or the row does not see the column. */
float mv_weight(const mask_view *v, int32_t r, int32_t d);
/* The cell of row r, drawn column d as the pane draws it, into out (a glyph, NUL-ended):
 * mv_cell's mark, or with weights a seen cell's weight as a bar of eighths
 * ("▁".."█"; without UTF-8 its tenths as a digit, '#' for 1). */
void mv_cell_glyph(const mask_view *v, int32_t r, int32_t d, bool utf8, char out[8]);
/* A weight 0..1 as one ASCII mark: its tenths as a digit, '#' from 0.95. */
char mv_weight_digit(float w);
/* "attention weights: layer 3, mean of heads" (or "head 2"), "" without weights. */
void mv_attn_text(const mask_view *v, char *out, size_t cap);

/* Lays the grid out for width screen columns: one column per slot, with a gap mark where
 * slot numbers jump; when that is wider than width, the shared context folds: each run of
 * consecutive slots that several rows see alike (and the others miss) becomes one column,
 * so a long prompt takes one column and the rows' own slots stay one a column (h / l
 * scroll them); when even that is too wide, every run of slots that all rows see or miss
 * alike becomes one column (k chains of a long thought: each chain one column).
 * mv_capture lays out for an unbounded width. A redraw may call it every time: it only
 * lays out again after a capture or when the width changes whether runs are needed. */
void mv_layout(mask_view *v, int32_t width);
/* Opens the folded runs (one column a slot, scrolled with h / l) or folds them again;
 * returns true when they are now open. */
bool mv_toggle_fold(mask_view *v);
/* Drawn column d of row r: '#' the row sees its slots, '.' it does not (they are not its
 * ancestors), ':' they are its ancestors outside its window (only global layers see
 * them), ' ' a gap. */
char mv_cell(const mask_view *v, int32_t r, int32_t d);
/* The slot line above the grid from drawn column first, at most width columns: a slot's
 * last digit, '≡' ('=' without UTF-8) for a run, '¦' ('|') for a gap. */
void mv_slot_line(const mask_view *v, int32_t first, int32_t width, char *out, size_t cap, bool utf8);
/* The slots of drawn column d as text ("17", "0-12", "" for a gap). */
void mv_dcol_text(const mask_view *v, int32_t d, char *out, size_t cap);

/* The first drawn column shown in a grid of width columns: the last columns while
 * following (left < 0), else left clamped so the grid does not end early. */
int32_t mv_first_col(const mask_view *v, int32_t width);
/* Scrolls the grid by delta drawn columns (negative: towards older slots) in a grid of
 * width columns; reaching the last columns follows them again (left = -1). */
void mv_hscroll(mask_view *v, int32_t delta, int32_t width);

/* Lines of the pane above the first row: the header, the legend, the slot numbers. */
#define MV_HEAD_LINES 3

/* Marks every row whose node is no longer live in f (forest_get: stale) as gone. Call it
 * after anything that may prune, under the lock that guards f. Returns the rows gone. */
int32_t mv_mark_pruned(mask_view *v, const forest *f);
/* The node of row r, or FOREST_NONE for a gone row or an r out of range. */
forest_id mv_row_node(const mask_view *v, int32_t r);
/* The row shown at screen cell (y, x) of a mask pane drawn at (y0, x0) over h x w cells
 * (rows from y0 + MV_HEAD_LINES, the first being v->top): -1 outside the pane, on the
 * header lines, below the last row, or before any step. */
int32_t mv_row_at(const mask_view *v, int32_t y, int32_t x, int32_t y0, int32_t x0, int32_t h,
                  int32_t w);
/* Scrolls the rows by delta (negative: up), keeping top within 0..n_rows - 1. */
void mv_vscroll(mask_view *v, int32_t delta);

/* Screen columns of mv_row_text's table; the grid starts after a separator. */
#define MV_TEXT_COLS 38

/* Text of the table's header and of row r ("row node parent pos slot logits text"; a
 * gone row reads "-" for logits and "pruned" for its text; spaces in a token read '·'
 * ('_' without UTF-8)), at most width columns. In a
 * speculative step a row reads "row node role pos slot text" and keeps its text when
 * gone (the header counts the drafts accepted and the window's rows). */
void mv_header(const mask_view *v, char *out, size_t cap, int width, bool utf8);
void mv_row_text(const mask_view *v, int32_t r, char *out, size_t cap, int width, bool utf8);
/* The column legend above the rows, to match mv_row_text, and the grid's title. */
void mv_legend(const mask_view *v, char *out, size_t cap, int width, bool utf8);
/* What the marks in use mean, e.g. "L logits  # sees  : beyond window  ≡ run  ¦ skip":
 * drawn beside the slot line (the window only with one, a run only when runs are drawn, a
 * gap only where slots jump), at most width columns. Returns the columns used. */
int mv_marks(const mask_view *v, char *out, size_t cap, int width, bool utf8);

/* ---- speculative steps ---- */
/* Gives row r a role (MV_ROLE_*; level and col for MV_ROLE_WINDOW) and makes the view a
 * speculative step's. Call right after mv_capture, before anything is pruned. */
void mv_set_role(mask_view *v, int32_t r, int role, int32_t level, int32_t col);
/* After acceptance: each MV_ROLE_DRAFT row becomes ACCEPTED when its node is still live
 * in f (generation-checked), REJECTED when it was pruned. */
void mv_resolve_drafts(mask_view *v, const forest *f);
/* "tip", "draft", "accepted", "rejected", "la L,I"; "" for NONE / OTHER. */
const char *mv_role_text(const mv_row *row, char *buf, size_t cap);

#endif
