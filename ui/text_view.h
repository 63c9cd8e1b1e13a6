/* text_view.h - the text pane's view model: the selected branch's tokens from its root,
 * each with its probability, a token cursor, and the alternatives at the cursor (the
 * top-k the forest kept for the token's parent: what else the model could have said
 * there). The cursor may also sit one past the last token ("next"), where the
 * alternatives are the leaf's own top-k, when it is computed.
 *
 * Plain C over engine headers; the caller holds the forest's lock while calling. */
#ifndef MD_UI_TEXT_VIEW_H
#define MD_UI_TEXT_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forest/forest.h"
#include "tok/tok.h"

#define TV_MAX_ALTS 16

typedef struct text_view {
    int32_t *idx;       /* (n) forest indices root..leaf */
    int32_t n, cap;
    forest_id leaf;     /* the branch shown */
    int32_t cursor;     /* 0..n (n: after the leaf) */
    int32_t alt;        /* chosen alternative at the cursor */
    bool follow;        /* the cursor follows the end while the branch grows */
    bool show_thinking; /* false: a thinking section's tokens are laid out as one mark
                           (think_fold.h) after its opening marker */
} text_view;

void tv_init(text_view *v);
void tv_free(text_view *v);
/* Shows the branch root..leaf (keeping the cursor when the leaf is the same or a
 * descendant). ST_ERR_NOMEM; ST_ERR_ARG for a stale id (the view is emptied). */
st_code tv_set(text_view *v, const forest *f, forest_id leaf, st_err *err);
void tv_move(text_view *v, int32_t delta);
/* Moves the cursor to the start of the next word (dir > 0; the end when there is none)
 * or of the previous one (dir < 0; the first token): a token whose text starts with
 * white space, or follows a token that ends with it. tk NULL: one token. */
void tv_move_word(text_view *v, const forest *f, const tok *tk, int dir);

/* Token i's text in context (fv_token_text) into out and its probability class (as
 * fv_render: 0 < 10%, 1 < 50%, 2 >= 50%, 3 unscored). */
int tv_token(const text_view *v, const forest *f, const tok *tk, int32_t i, char *out, size_t cap);
int tv_class(const text_view *v, const forest *f, int32_t i); /* that class alone */
/* The text pane's cell that starts at token i: tokens i..(returned index - 1) drawn as
 * one piece of text, so that a character split over tokens is drawn whole (a token that
 * leaves a character unfinished joins the next one, and so does a token that starts
 * with a combining mark). s carries the decoding from cell to cell: start it with
 * tv_stream_start and pass it to the cells in order. out (cap > 0) gets the text (the
 * bytes of a character the branch ends inside escaped, "<E6>"); tk NULL: "[id]". */
void tv_stream_start(const text_view *v, const forest *f, const tok *tk, tok_stream *s);
int32_t tv_cell(const text_view *v, const forest *f, const tok *tk, tok_stream *s, int32_t i,
                char *out, size_t cap);
/* The alternatives at the cursor: up to cap (token, logprob) pairs, best first; returns
 * how many. *parent (may be NULL) gets the node they would hang under. */
int32_t tv_alts(const text_view *v, const forest *f, int32_t *ids, float *lps, int32_t cap,
                forest_id *parent);

/* The text pane's lines: the cells (tv_cell) laid out in rows of `width` columns, each
 * cell cut into pieces. A newline is drawn as U+21B5 ("\\n" in ASCII) and then breaks the
 * line; lines break after spaces, so a word moves whole to the next row, and a word wider
 * than the row is broken where the row ends. Pieces hold display text (ui_line's: control
 * characters visible, columns measured with wcwidth). The last piece is the end mark
 * (end_mark, "░") with tok == n. Unless v->show_thinking, the tokens of a thinking
 * section after its opening marker are one piece: the mark and the closing marker. */
typedef struct tv_piece {
    int32_t tok, next; /* the cell's tokens tok..next-1 */
    int32_t row, col;  /* where it is drawn */
    int32_t cols;      /* columns it takes */
    size_t off, len;   /* its text in the layout's text */
    bool brk;          /* ends with a space: the row may break after it */
} tv_piece;

typedef struct tv_layout {
    tv_piece *p;
    int32_t n, cap;
    char *text;        /* every piece's text, back to back (not NUL-separated) */
    size_t n_text, cap_text;
    int32_t rows;      /* rows used */
} tv_layout;

void tv_layout_free(tv_layout *L); /* a zeroed layout is empty; the layout is zeroed */
/* Lays the branch out (replacing what L held); width > 0. ST_ERR_NOMEM (L emptied). */
st_code tv_layout_build(tv_layout *L, const text_view *v, const forest *f, const tok *tk,
                        int32_t width, bool utf8, const char *end_mark, st_err *err);
/* The row the cursor's first piece is on (0 when empty). */
int32_t tv_layout_cursor_row(const tv_layout *L, int32_t cursor);

#endif
