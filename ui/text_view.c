/* text_view.c - the text pane's view model (text_view.h). */
#include "base/array.h"
#include "text_view.h"
#include "think_fold.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest_view.h"
#include "uline.h"

void tv_init(text_view *v) {
    memset(v, 0, sizeof *v);
    v->leaf = FOREST_NONE;
    v->follow = true;
}

void tv_free(text_view *v) {
    free(v->idx);
    tv_init(v);
}

st_code tv_set(text_view *v, const forest *f, forest_id leaf, st_err *err) {
    const forest_node *nd = forest_get(f, leaf);
    if (!nd) {
        v->n = 0;
        v->leaf = FOREST_NONE;
        return st_set(err, ST_ERR_ARG, "stale node");
    }
    int32_t n = 1;
    for (const forest_node *p = nd; p->parent >= 0; p = forest_node_at(f, p->parent)) n++;
    if (!ARR_GROW_I32(v->idx, n, v->cap))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the text view");
    int32_t old_n = v->n;
    bool same = leaf == v->leaf;
    int32_t at = forest_index(leaf);
    for (int32_t i = n - 1; i >= 0; i--) {
        v->idx[i] = at;
        at = forest_node_at(f, at)->parent;
    }
    v->n = n;
    (void)old_n;
    if (!same) { /* another branch: start at its end, following it as it grows */
        v->cursor = n;
        v->follow = true;
        v->alt = 0;
    } else if (v->follow || v->cursor > n)
        v->cursor = n;
    v->leaf = leaf;
    return ST_OK;
}

void tv_move(text_view *v, int32_t delta) {
    int32_t c = v->cursor + delta;
    if (c < 0) c = 0;
    if (c > v->n) c = v->n;
    v->cursor = c;
    v->alt = 0;
    v->follow = c == v->n;
}

int tv_class(const text_view *v, const forest *f, int32_t i) {
    if (i < 0 || i >= v->n) return 3;
    float lp = forest_node_at(f, v->idx[i])->logprob;
    if (isnan(lp)) return 3;
    double p = exp((double)lp);
    return p < 0.1 ? 0 : p < 0.5 ? 1 : 2;
}

/* Whether token i starts a word (see tv_move_word). */
static bool word_start(const text_view *v, const forest *f, const tok *tk, int32_t i) {
    char a[256], b[256];
    if (i <= 0 || i >= v->n) return true;
    tv_token(v, f, tk, i, b, sizeof b);
    tv_token(v, f, tk, i - 1, a, sizeof a);
    size_t na = strlen(a);
    return isspace((unsigned char)b[0]) || (na && isspace((unsigned char)a[na - 1]));
}

void tv_move_word(text_view *v, const forest *f, const tok *tk, int dir) {
    if (!tk) {
        tv_move(v, dir > 0 ? 1 : -1);
        return;
    }
    int32_t c = v->cursor + (dir > 0 ? 1 : -1);
    while (c > 0 && c < v->n && !word_start(v, f, tk, c)) c += dir > 0 ? 1 : -1;
    tv_move(v, c - v->cursor);
}

int tv_token(const text_view *v, const forest *f, const tok *tk, int32_t i, char *out, size_t cap) {
    if (i < 0 || i >= v->n) {
        if (cap) out[0] = '\0';
        return 3;
    }
    fv_token_text(f, tk, v->idx[i], out, cap);
    return tv_class(v, f, i);
}

void tv_stream_start(const text_view *v, const forest *f, const tok *tk, tok_stream *s) {
    if (tk && v->n > 0) fv_stream_start(f, tk, v->idx[0], s);
    else tok_stream_init(s);
}

/* Appends src to the string in out when it fits whole. */
static void cat(char *out, size_t cap, const char *src) {
    size_t n = strlen(out), m = strlen(src);
    if (n + m < cap) memcpy(out + n, src, m + 1);
}

int32_t tv_cell(const text_view *v, const forest *f, const tok *tk, tok_stream *s, int32_t i,
                char *out, size_t cap) {
    out[0] = '\0';
    if (i < 0 || i >= v->n) return v->n;
    if (!tk) {
        snprintf(out, cap, "[%d]", forest_node_at(f, v->idx[i])->token);
        return i + 1;
    }
    char tb[256];
    int32_t j = i;
    for (;;) {
        fv_stream_put(tk, s, forest_node_at(f, v->idx[j])->token, tb, sizeof tb);
        cat(out, cap, tb);
        if (++j >= v->n) break;
        if (s->n_pend > 0) continue;
        /* the next cell's first character (it may take a few tokens) */
        tok_stream peek = *s;
        tb[0] = '\0';
        for (int32_t k = j; k < v->n && k < j + 4 && !tb[0]; k++)
            fv_stream_put(tk, &peek, forest_node_at(f, v->idx[k])->token, tb, sizeof tb);
        unsigned cp;
        if (!(ui_utf8_char((const unsigned char *)tb, &cp) > 1 && ui_char_cols(cp) == 0)) break;
    }
    if (j == v->n) fv_pending_text(s, out, cap);
    return j;
}

int32_t tv_alts(const text_view *v, const forest *f, int32_t *ids, float *lps, int32_t cap,
                forest_id *parent) {
    if (parent) *parent = FOREST_NONE;
    if (v->n == 0 || v->cursor == 0) return 0; /* a root has no parent to fork from */
    int32_t p = v->idx[v->cursor - 1];
    forest_id pid = forest_id_at(f, p);
    if (parent) *parent = pid;
    return forest_topk(f, pid, ids, lps, cap);
}

/* ---- the pane's lines (tv_layout) ---- */

typedef struct lay {
    tv_layout *L;
    int32_t width, row, col;
    int32_t row_first; /* the first piece on the current row */
    bool utf8, oom;
} lay;

void tv_layout_free(tv_layout *L) {
    free(L->p);
    free(L->text);
    memset(L, 0, sizeof *L);
}

static void lay_newline(lay *c) {
    c->row++;
    c->col = 0;
    c->row_first = c->L->n;
}

static void lay_push(lay *c, int32_t tok, int32_t next, const char *s, size_t len, int32_t cols,
                     bool brk) {
    tv_layout *L = c->L;
    if (c->oom || !ARR_GROW_I32(L->p, L->n + 1, L->cap) || !ARR_GROW(L->text, L->n_text + len + 1, L->cap_text)) {
        c->oom = true;
        return;
    }
    memcpy(L->text + L->n_text, s, len);
    L->p[L->n++] = (tv_piece){tok, next, c->row, c->col, cols, L->n_text, len, brk};
    L->n_text += len;
    c->col += cols;
}

/* The display text of src[0..n) that fits in max_cols into out; returns the bytes of src
 * used, *cols the columns. */
static size_t lay_render(const lay *c, const char *src, size_t n, int32_t max_cols, char *out,
                         size_t cap, int32_t *cols) {
    char tmp[512];
    size_t k = n < sizeof tmp - 1 ? n : sizeof tmp - 1;
    memcpy(tmp, src, k);
    tmp[k] = '\0';
    ui_line l = ui_line_make(out, cap, max_cols, c->utf8);
    size_t used = ui_line_put(&l, tmp);
    *cols = l.cols;
    return used;
}

/* The most bytes of a cell laid out at once (lay_render's buffer holds them). */
#define TV_SLICE 500

/* One chunk of a cell: a word with the spaces after it, or text ending with a newline. */
static void lay_chunk(lay *c, int32_t tok, int32_t next, const char *src, size_t n) {
    char out[2200];
    int32_t w;
    lay_render(c, src, n, INT32_MAX, out, sizeof out, &w);
    bool nl = n && src[n - 1] == '\n', blank = strspn(src, " \t") >= n;
    tv_layout *L = c->L;
    if (c->col + w > c->width) {
        /* where the word this chunk continues starts on the row */
        int32_t ws = L->n;
        while (ws > c->row_first && !L->p[ws - 1].brk) ws--;
        int32_t ws_col = ws < L->n ? L->p[ws].col : c->col;
        if (blank) { /* spaces at the row's end: what fits, maybe nothing (they show nothing) */
            n = (size_t)(c->width - c->col);
            lay_render(c, src, n, (int32_t)n, out, sizeof out, &w);
            lay_push(c, tok, next, out, strlen(out), w, true);
            return;
        }
        if (ws > c->row_first && c->col - ws_col + w <= c->width) { /* the word moves down */
            for (int32_t i = ws; i < L->n; i++) L->p[i].row++, L->p[i].col -= ws_col;
            c->row++;
            c->col -= ws_col;
            c->row_first = ws;
        } else if (ws == L->n && c->col > 0 && w <= c->width) {
            lay_newline(c); /* a new word: on the next row */
        } else { /* longer than a row: broken where the row ends */
            while (c->col + w > c->width && !c->oom) {
                int32_t wp;
                size_t used = lay_render(c, src, n, c->width - c->col, out, sizeof out, &wp);
                if (used == 0 && c->col == 0) used = lay_render(c, src, n, 4, out, sizeof out, &wp);
                if (used) lay_push(c, tok, next, out, strlen(out), wp, false);
                lay_newline(c);
                src += used, n -= used;
                lay_render(c, src, n, INT32_MAX, out, sizeof out, &w);
            }
        }
    }
    if (n) lay_push(c, tok, next, out, strlen(out), w, blank || src[n - 1] == ' ' || src[n - 1] == '\t');
    if (nl) lay_newline(c);
}

/* A cell's text in chunks: each ends after a newline or after the spaces behind a word. */
static void lay_cell(lay *c, int32_t tok, int32_t next, const char *s) {
    while (*s && !c->oom) {
        size_t n = 0;
        while (s[n] && s[n] != '\n' && s[n] != ' ' && s[n] != '\t') n++;
        if (s[n] == '\n') n++;
        else n += strspn(s + n, " \t");
        if (n > TV_SLICE) { /* longer than lay_render's buffer: in slices, whole characters */
            n = TV_SLICE;
            while (n > 1 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
        }
        lay_chunk(c, tok, next, s, n);
        s += n;
    }
}

/* The last TV_TAIL - 1 bytes of what came before, then s (markers span cells). */
#define TV_TAIL 96
static void tail_add(char *tail, const char *s) {
    size_t a = strlen(tail), b = strlen(s);
    if (b >= TV_TAIL - 1) {
        memcpy(tail, s + b - (TV_TAIL - 1), TV_TAIL);
        return;
    }
    if (a + b >= TV_TAIL) {
        memmove(tail, tail + a + b - (TV_TAIL - 1), a - (a + b - (TV_TAIL - 1)) + 1);
        a = strlen(tail);
    }
    memcpy(tail + a, s, b + 1);
}

st_code tv_layout_build(tv_layout *L, const text_view *v, const forest *f, const tok *tk,
                        int32_t width, bool utf8, const char *end_mark, st_err *err) {
    L->n = 0, L->n_text = 0, L->rows = 0;
    lay c = {.L = L, .width = width > 4 ? width : 4, .utf8 = utf8};
    char buf[1024], tail[TV_TAIL] = "", mark[128];
    int kind = -1;        /* the section being folded, or -1 */
    int32_t from = 0;     /* its first folded token */
    const char *close;
    tok_stream ts;
    tv_stream_start(v, f, tk, &ts);
    for (int32_t i = 0, next; i < v->n && !c.oom; i = next) {
        next = tv_cell(v, f, tk, &ts, i, buf, sizeof buf);
        if (v->show_thinking || !tk) {
            lay_cell(&c, i, next, buf);
            continue;
        }
        tail_add(tail, buf);
        if (kind >= 0 && ui_think_closes(tail, kind, &close)) {
            snprintf(mark, sizeof mark, "%s%s", ui_think_mark(true, utf8), close);
            lay_cell(&c, from, next, mark);
            kind = -1, tail[0] = '\0';
        } else if (kind < 0) {
            lay_cell(&c, i, next, buf);
            if ((kind = ui_think_opens(tail)) >= 0) from = next, tail[0] = '\0';
        }
    }
    if (kind >= 0 && from < v->n) lay_cell(&c, from, v->n, ui_think_mark(false, utf8));
    lay_cell(&c, v->n, v->n + 1, end_mark);
    if (c.oom) {
        tv_layout_free(L);
        return st_set(err, ST_ERR_NOMEM, "out of memory for the text pane");
    }
    L->rows = c.row + 1;
    return ST_OK;
}

int32_t tv_layout_cursor_row(const tv_layout *L, int32_t cursor) {
    for (int32_t i = 0; i < L->n; i++)
        if (cursor >= L->p[i].tok && cursor < L->p[i].next) return L->p[i].row;
    return 0;
}
