/* forest_view.c - the forest pane's view model (forest_view.h): the radix-line walk,
 * folding, the cursor and the text of one line. */
#include "base/array.h"
#include "forest_view.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/grow.h"
#include "chat_fold.h"
#include "think_fold.h"
#include "uline.h"

void fv_init(forest_view *v, bool utf8) {
    memset(v, 0, sizeof *v);
    v->cursor_id = FOREST_NONE;
    v->utf8 = utf8;
}

void fv_free(forest_view *v) {
    free(v->sib);
    free(v->lines);
    free(v->fold);
    free(v->stack);
    fv_init(v, v->utf8);
}

bool fv_is_folded(const forest_view *v, const forest *f, int32_t idx) {
    const forest_node *nd = forest_node_at(f, idx);
    return idx < v->cap_mark && nd && nd->state != FOREST_FREE && v->fold[idx] == forest_id_at(f, idx);
}

static bool single_child(const forest *f, const forest_node *nd) {
    return nd->first_child >= 0 && forest_node_at(f, nd->first_child)->next_sibling < 0;
}

/* The child that continues nd's line, -1 where the line ends: at a leaf, at two or more
 * children, or at a child whose siblings the user pruned (FOREST_OWN_LINE). Lines the
 * user's prune leaves never merge, so the survivor keeps its place and its text, and `d`
 * on it prunes what it shows, not the parent's line with it; a chain a strategy made
 * and pruned its own way (drafts, a load) is one line. */
static int32_t line_next(const forest *f, const forest_node *nd) {
    if (!single_child(f, nd)) return -1;
    int32_t c = nd->first_child;
    return forest_node_at(f, c)->flags & FOREST_OWN_LINE ? -1 : c;
}

/* A child waiting on the walk's stack, with its key and its place there. */
struct fv_sib {
    double key;
    int32_t idx, at;
};

/* Lower keys first, ties by place: popped from the top, the highest key comes first and
 * equal keys come as made. */
static int sib_cmp(const void *a, const void *b) {
    const struct fv_sib *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* The n children just pushed (pairs, at pairs[0..2n)) ordered by v->key. */
static bool order_children(forest_view *v, int32_t *pairs, int32_t n) {
    if (!v->key || n < 2) return true;
    if (!ARR_GROW_I32(v->sib, n, v->cap_sib)) return false;
    for (int32_t i = 0; i < n; i++) {
        const int32_t idx = pairs[2 * i];
        v->sib[i] = (struct fv_sib){idx < v->n_key ? v->key[idx] : -INFINITY, idx, i};
    }
    qsort(v->sib, (size_t)n, sizeof *v->sib, sib_cmp);
    for (int32_t i = 0; i < n; i++) pairs[2 * i] = v->sib[i].idx;
    return true;
}

st_code fv_rebuild(forest_view *v, const forest *f, st_err *err) {
    int32_t cap = forest_capacity(f), n_live = forest_n_live(f);
    if (!ARR_GROW_I32(v->stack, n_live + 1, v->cap_stack) ||
        !ARR_GROW_I32(v->lines, n_live + 1, v->cap_lines))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the forest view");
    if (cap > v->cap_mark) {
        int32_t old = v->cap_mark;
        if (!ARR_GROW_I32(v->fold, cap, v->cap_mark))
            return st_set(err, ST_ERR_NOMEM, "out of memory for the forest view");
        memset(v->fold + old, 0xff, sizeof(forest_id) * (size_t)(v->cap_mark - old)); /* FOREST_NONE */
    }
    /* a stack of (line start, indent) pairs; roots pushed last-first so they pop in order */
    int32_t sp = 0, n_roots = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (forest_node_at(f, i)->parent < 0) n_roots++;
    int32_t *stack = v->stack; /* each entry packs start and indent as two ints */
    if (!ARR_GROW_I32(v->stack, 2 * (n_live + 1), v->cap_stack))
        return st_set(err, ST_ERR_NOMEM, "out of memory for the forest view");
    stack = v->stack;
    sp = 2 * n_roots;
    {
        int32_t k = sp;
        for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
            if (forest_node_at(f, i)->parent < 0) stack[k - 2] = i, stack[k - 1] = 0, k -= 2;
    }
    int32_t n = 0;
    v->cursor = 0;
    bool found = false;
    while (sp > 0) {
        int32_t s = stack[sp - 2], indent = stack[sp - 1];
        sp -= 2;
        fv_line ln = {s, s, indent, 1, 0, 0};
        const forest_node *nd = forest_node_at(f, s);
        if (nd->flags & FOREST_BOOKMARK) ln.flags |= FV_BOOKMARK;
        if (nd->flags & FOREST_DIMMED) ln.flags |= FV_DIMMED;
        for (int32_t c; (c = line_next(f, nd)) >= 0;) {
            ln.end = c;
            nd = forest_node_at(f, ln.end);
            ln.n_nodes++;
            if (nd->flags & FOREST_BOOKMARK) ln.flags |= FV_BOOKMARK;
        }
        for (int32_t c = nd->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling) ln.n_children++;
        if (nd->flags & FOREST_FINISHED) ln.flags |= nd->tag == GROW_END_BUDGET ? FV_BUDGET : FV_FINISHED;
        if (nd->state == FOREST_PENDING) ln.flags |= FV_PENDING;
        if (ln.n_children > 0 && line_next(f, nd) < 0) {
            ln.flags |= FV_BRANCHES;
            if (fv_is_folded(v, f, s)) ln.flags |= FV_COLLAPSED;
            else {
                /* children pushed in reverse creation order so they pop in order */
                sp += 2 * ln.n_children;
                int32_t k = sp;
                for (int32_t c = nd->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling)
                    stack[k - 2] = c, stack[k - 1] = indent + 1, k -= 2;
                if (!order_children(v, stack + k, ln.n_children))
                    return st_set(err, ST_ERR_NOMEM, "out of memory for the forest view");
            }
        }
        if (!found && forest_id_at(f, s) == v->cursor_id) v->cursor = n, found = true;
        v->lines[n++] = ln;
    }
    v->n_lines = n;
    if (!found) v->cursor = v->cursor < n ? v->cursor : (n ? n - 1 : 0);
    v->cursor_id = n ? forest_id_at(f, v->lines[v->cursor].start) : FOREST_NONE;
    if (v->top > v->cursor) v->top = v->cursor;
    return ST_OK;
}

void fv_set_cursor(forest_view *v, const forest *f, int32_t line) {
    if (v->n_lines == 0) return;
    if (line < 0) line = 0;
    if (line >= v->n_lines) line = v->n_lines - 1;
    v->cursor = line;
    v->cursor_id = forest_id_at(f, v->lines[line].start);
}

void fv_move(forest_view *v, const forest *f, int32_t delta) { fv_set_cursor(v, f, v->cursor + delta); }

bool fv_select_node(forest_view *v, const forest *f, forest_id id) {
    const forest_node *nd = forest_get(f, id);
    if (!nd) return false;
    /* up to the start of its line: while the parent has this one child only */
    int32_t idx = forest_index(id);
    while (nd->parent >= 0 && line_next(f, forest_node_at(f, nd->parent)) == idx) {
        idx = nd->parent;
        nd = forest_node_at(f, idx);
    }
    for (int32_t i = 0; i < v->n_lines; i++)
        if (v->lines[i].start == idx) {
            fv_set_cursor(v, f, i);
            return true;
        }
    return false;
}

forest_id fv_selected(const forest_view *v, const forest *f) {
    if (v->n_lines == 0 || v->cursor >= v->n_lines) return FOREST_NONE;
    return forest_id_at(f, v->lines[v->cursor].end);
}

void fv_scroll(forest_view *v, int32_t height) {
    if (height < 1) height = 1;
    if (v->cursor < v->top) v->top = v->cursor;
    if (v->cursor >= v->top + height) v->top = v->cursor - height + 1;
    if (v->top > v->n_lines - height) v->top = v->n_lines - height;
    if (v->top < 0) v->top = 0;
}

bool fv_fold(forest_view *v, const forest *f, bool fold) {
    if (v->n_lines == 0) return false;
    const fv_line *ln = &v->lines[v->cursor];
    if (!(ln->flags & FV_BRANCHES) || ln->start >= v->cap_mark) return false;
    bool was = fv_is_folded(v, f, ln->start);
    if (was == fold) return false;
    v->fold[ln->start] = fold ? forest_id_at(f, ln->start) : FOREST_NONE;
    return true;
}

/* Replays node idx and up to FV_REPLAY - 1 of its ancestors into a fresh stream, so that
 * s ends as it would after decoding the whole branch up to idx: a character split over
 * tokens needs at most 4 bytes, so the bytes it holds back come from the last few tokens
 * (a few more are replayed for control tokens between them). idx < 0: a fresh stream. */
#define FV_REPLAY 8
static void stream_after(const forest *f, const tok *tk, int32_t idx, tok_stream *s) {
    int32_t chain[FV_REPLAY], n = 0;
    for (int32_t i = idx; i >= 0 && n < FV_REPLAY; i = forest_node_at(f, i)->parent) chain[n++] = i;
    tok_stream_init(s);
    if (n == 0) return;
    int32_t up = forest_node_at(f, chain[n - 1])->parent;
    s->prev = up >= 0 ? forest_node_at(f, up)->token : -1;
    char buf[256];
    while (n > 0) tok_stream_put(tk, s, forest_node_at(f, chain[--n])->token, buf, sizeof buf);
}

size_t fv_pending_text(const tok_stream *s, char *out, size_t cap) {
    size_t n = strlen(out);
    for (int32_t i = 0; i < s->n_pend && n + 5 <= cap; i++, n += 4) snprintf(out + n, cap - n, "<%02X>", s->pend[i]);
    return n;
}

void fv_stream_put(const tok *tk, tok_stream *s, int32_t id, char *out, size_t cap) {
    size_t got = tok_stream_put(tk, s, id, out, cap);
    if (got >= cap) { /* longer than any view shows: skip it, keeping the stream going */
        out[0] = '\0';
        s->n_pend = 0;
        s->prev = id;
    } else if (got == 0 && tok_type(tk, id) == TOK_CONTROL) {
        const char *pc = tok_piece(tk, id);
        snprintf(out, cap, "%s", pc ? pc : "");
    }
}

/* A token after the stream state s, alone: its text, then the bytes of a character it
 * leaves unfinished, escaped. */
static void alone_text(const tok *tk, tok_stream *s, int32_t id, char *out, size_t cap) {
    fv_stream_put(tk, s, id, out, cap);
    fv_pending_text(s, out, cap);
}

void fv_alt_text(const forest *f, const tok *tk, int32_t parent, int32_t id, char *out, size_t cap) {
    if (!tk) {
        snprintf(out, cap, "[%d]", id);
        return;
    }
    tok_stream s;
    stream_after(f, tk, parent, &s);
    if (parent < 0) s.prev = TOK_STREAM_MIDTEXT;
    alone_text(tk, &s, id, out, cap);
}

void fv_token_text(const forest *f, const tok *tk, int32_t idx, char *out, size_t cap) {
    const forest_node *nd = forest_node_at(f, idx);
    if (!tk) {
        snprintf(out, cap, "[%d]", nd->token);
        return;
    }
    tok_stream s;
    stream_after(f, tk, nd->parent, &s);
    alone_text(tk, &s, nd->token, out, cap);
}

void fv_stream_start(const forest *f, const tok *tk, int32_t idx, tok_stream *s) {
    stream_after(f, tk, idx >= 0 ? forest_node_at(f, idx)->parent : -1, s);
}

int32_t fv_find(const forest_view *v, const forest *f, const tok *tk, const char *needle, int32_t from, int dir,
                int32_t *rank, int32_t *total) {
    static char buf[8192]; /* the UI thread's alone, and too big for its stack */
    int32_t found = -1, best = 0;
    *rank = *total = 0;
    for (int32_t i = 0; i < v->n_lines && needle[0]; i++) {
        fv_render(v, f, tk, i, NULL, 0, buf, sizeof buf, 2000);
        if (!strcasestr(buf, needle)) continue;
        (*total)++;
        /* distance from `from` in the search's direction, 1 .. n_lines (itself last) */
        int32_t d = dir > 0 ? (i - from + v->n_lines - 1) % v->n_lines + 1 : (from - i + v->n_lines - 1) % v->n_lines + 1;
        if (found < 0 || d < best) found = i, best = d, *rank = *total;
    }
    return found;
}

const char *fv_legend(int32_t i, bool utf8) {
    static const char *const u[] = {
        "  \xe2\x96\xb6  growing now          \xe2\x9c\x93  ended: end of text (the model ended it)",
        "  \xe2\x80\xa6  stopped by the budget (n grows it on)   \xe2\x98\x85  bookmarked (m)",
        "  \xe2\x96\xbe \xe2\x96\xb8  branches below, open / folded (Space)   \xc2\xb7  no branches below",
        "  NN%  the line's first token's probability; -  prompt or typed text (unscored)",
        "  [-1.23]  a score kept with the branch: the judge's (:judge, :tot) or beam's",
        "  \xe2\x9c\x97  dropped by a running :tot, dimmed (pruned when it ends; x keeps it)",
        "  dim alone: the line's first token is below 10%",
    };
    static const char *const a[] = {
        "  >  growing now          $  ended: end of text (the model ended it)",
        "  ~  stopped by the budget (n grows it on)   *  bookmarked (m)",
        "  - +  branches below, open / folded (Space)",
        "  NN%  the line's first token's probability; -  prompt or typed text (unscored)",
        "  [-1.23]  a score kept with the branch: the judge's (:judge, :tot) or beam's",
        "  x  dropped by a running :tot, dimmed (pruned when it ends; x keeps it)",
        "  dim alone: the line's first token is below 10%",
    };
    if (i < 0 || i >= (int32_t)(sizeof u / sizeof u[0])) return NULL;
    return utf8 ? u[i] : a[i];
}

/* A line that holds a chat template's turns drawn as its words (chat_fold.h); false
 * when it holds none. Only its first FV_TURN_TOKENS tokens are read. */
#define FV_TURN_TOKENS 4096
static bool put_turns(const forest *f, const tok *tk, const fv_line *ln, ui_line *l) {
    int32_t ids[FV_TURN_TOKENS], n = 0;
    bool control = false;
    for (int32_t idx = ln->start; n < ln->n_nodes && n < FV_TURN_TOKENS; idx = forest_node_at(f, idx)->first_child) {
        ids[n] = forest_node_at(f, idx)->token;
        control |= tok_type(tk, ids[n++]) == TOK_CONTROL;
    }
    char text[1024];
    if (!control || !ui_chat_fold(tk, ids, n, text, sizeof text)) return false;
    ui_line_put(l, text);
    return true;
}

/* Whether token id's text may be part of a thinking section's marker. */
static bool marker_piece(const tok *tk, int32_t id) {
    const char *pc = tok_piece(tk, id);
    return pc && (strstr(pc, "think") || strstr(pc, "<|channel|>"));
}

/* The thinking section left open by the path above node idx (think_fold.h's kind, -1:
 * none), read from its last FV_PATH_TOKENS tokens, decoded only when one of them may be
 * part of a marker. */
#define FV_PATH_TOKENS 8192
static int open_above(const forest *f, const tok *tk, int32_t idx) {
    int32_t *up = malloc(sizeof *up * FV_PATH_TOKENS), n = 0;
    char *text = malloc((size_t)FV_PATH_TOKENS * 16 + 1), tb[256];
    bool marker = false;
    for (int32_t i = forest_node_at(f, idx)->parent; up && i >= 0 && n < FV_PATH_TOKENS;
         i = forest_node_at(f, i)->parent)
        marker |= marker_piece(tk, forest_node_at(f, i)->token), up[n++] = i;
    int open = -1;
    if (marker && text) {
        size_t len = 0;
        tok_stream s;
        fv_stream_start(f, tk, up[n - 1], &s);
        for (int32_t k = n - 1; k >= 0; k--) {
            fv_stream_put(tk, &s, forest_node_at(f, up[k])->token, tb, sizeof tb);
            const size_t m = strlen(tb);
            if (len + m > (size_t)FV_PATH_TOKENS * 16) break;
            memcpy(text + len, tb, m + 1);
            len += m;
        }
        text[len] = '\0';
        open = ui_think_open_after(text, -1);
    }
    free(up), free(text);
    return open;
}

/* A line that holds a thinking section, or closes one its ancestors opened, drawn with the
 * section folded (think_fold.h); false when it holds none. Only lines with a token whose
 * text may be a marker's piece are decoded, and only their first FV_TURN_TOKENS tokens. */
static bool put_thought(const forest_view *v, const forest *f, const tok *tk, const fv_line *ln,
                        ui_line *l) {
    bool marker = false;
    int32_t idx = ln->start, k = 0;
    for (; k < ln->n_nodes && k < FV_TURN_TOKENS && !marker; k++, idx = forest_node_at(f, idx)->first_child)
        marker = marker_piece(tk, forest_node_at(f, idx)->token);
    if (!marker) return false;
    char text[8192], out[8192];
    size_t len = 0;
    char tb[256];
    tok_stream s;
    fv_stream_start(f, tk, ln->start, &s);
    idx = ln->start;
    for (k = 0; k < ln->n_nodes && k < FV_TURN_TOKENS; k++, idx = forest_node_at(f, idx)->first_child) {
        fv_stream_put(tk, &s, forest_node_at(f, idx)->token, tb, sizeof tb);
        const size_t n = strlen(tb);
        if (len + n >= sizeof text) break;
        memcpy(text + len, tb, n + 1);
        len += n;
    }
    text[len] = '\0';
    if (!ui_think_fold_in(text, open_above(f, tk, ln->start), v->utf8, out, sizeof out)) return false;
    ui_line_put(l, out);
    return true;
}

/* Whether the line starting at idx begins inside a word its parent's token began (a
 * letter or digit on both sides), to be drawn after an ellipsis. */
static bool mid_word(const forest *f, const tok *tk, int32_t idx) {
    int32_t parent = forest_node_at(f, idx)->parent;
    if (parent < 0) return false;
    char a[256], b[256];
    fv_token_text(f, tk, parent, a, sizeof a);
    fv_token_text(f, tk, idx, b, sizeof b);
    size_t na = strlen(a);
    unsigned char x = na ? (unsigned char)a[na - 1] : ' ', y = (unsigned char)b[0];
    return (isalnum(x) || x >= 0x80) && (isalnum(y) || y >= 0x80);
}

int fv_render(const forest_view *v, const forest *f, const tok *tk, int32_t i,
              const forest_id *running, int32_t n_running, char *out, size_t cap, int width) {
    ui_line l = ui_line_make(out, cap, width, v->utf8);
    if (i < 0 || i >= v->n_lines) return 3;
    const fv_line *ln = &v->lines[i];
    for (int32_t k = 0; k < ln->indent && k < 32; k++) ui_line_put(&l, "  ");
    if (ln->flags & FV_BRANCHES)
        ui_line_put(&l, ln->flags & FV_COLLAPSED ? (v->utf8 ? "\xe2\x96\xb8" : "+") : (v->utf8 ? "\xe2\x96\xbe" : "-"));
    else
        ui_line_put(&l, v->utf8 ? "\xc2\xb7" : " ");
    bool run = false;
    forest_id end_id = forest_id_at(f, ln->end);
    for (int32_t k = 0; k < n_running; k++) run |= running[k] == end_id;
    const char *mark = ln->flags & FV_BOOKMARK ? (v->utf8 ? "\xe2\x98\x85" : "*")
                       : run                    ? (v->utf8 ? "\xe2\x96\xb6" : ">")
                       : ln->flags & FV_DIMMED   ? (v->utf8 ? "\xe2\x9c\x97" : "x")
                       : ln->flags & FV_FINISHED ? (v->utf8 ? "\xe2\x9c\x93" : "$")
                       : ln->flags & FV_BUDGET   ? (v->utf8 ? "\xe2\x80\xa6" : "~")
                                                 : " ";
    ui_line_put(&l, mark);
    const forest_node *nd = forest_node_at(f, ln->start);
    char buf[64];
    int cls = 3;
    if (isnan(nd->logprob)) ui_line_put(&l, "   - ");
    else {
        double p = exp((double)nd->logprob);
        cls = p < 0.1 ? 0 : p < 0.5 ? 1 : 2;
        snprintf(buf, sizeof buf, "%3.0f%% ", 100 * p);
        ui_line_put(&l, buf);
    }
    if (!v->raw && tk && (put_turns(f, tk, ln, &l) || put_thought(v, f, tk, ln, &l))) return cls;
    if (tk && mid_word(f, tk, ln->start)) ui_line_put(&l, v->utf8 ? "\xe2\x80\xa6" : "...");
    /* the text: decode node by node until the width is used (long chains cost only what
     * is shown) */
    int32_t idx = ln->start, k = 0;
    tok_stream s;
    if (tk) fv_stream_start(f, tk, idx, &s);
    char tb[256];
    for (; k < ln->n_nodes && !l.full; k++) {
        const forest_node *c = forest_node_at(f, idx);
        if (tk) fv_stream_put(tk, &s, c->token, tb, sizeof tb);
        else snprintf(tb, sizeof tb, "[%d]", c->token);
        ui_line_put(&l, tb);
        idx = c->first_child;
    }
    if (tk && k == ln->n_nodes) { /* the line ends inside a character */
        tb[0] = '\0';
        fv_pending_text(&s, tb, sizeof tb);
        ui_line_put(&l, tb);
    }
    if (ln->flags & FV_COLLAPSED && !l.full) {
        snprintf(buf, sizeof buf, " (%d)", ln->n_children);
        ui_line_put(&l, buf);
    }
    return cls;
}
