/* forest_view.h - the forest pane's view model: the forest flattened into display lines,
 * without a terminal.
 *
 * A line is a maximal chain of single-child nodes (the radix view): it starts at a root
 * or at a child of a branching node and ends at a leaf or at a node with two or more
 * children, whose children's lines are nested one level deeper, unless the line is
 * collapsed. A node whose siblings the user pruned keeps beginning a line
 * (FOREST_OWN_LINE: the survivor stays under its parent's line); a chain is otherwise one
 * line whatever made it. Lines are rebuilt from the forest in O(nodes) without decoding any text;
 * text is decoded only for the lines drawn (fv_render), so forests of 10,000+ nodes
 * scroll without lag. The cursor is a line, remembered by its first node's id so that it
 * stays put while the forest grows. The selected node is the cursor line's last node.
 *
 * The view reads the forest; the caller holds whatever lock guards it during fv_rebuild
 * and fv_render. Not here: colours and curses (screen.c). */
#ifndef MD_UI_FOREST_VIEW_H
#define MD_UI_FOREST_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forest/forest.h"
#include "tok/tok.h"

enum {
    FV_BRANCHES = 1 << 0,  /* the last node's children have lines of their own */
    FV_COLLAPSED = 1 << 1, /* ... and they are hidden */
    FV_BOOKMARK = 1 << 2,  /* a node of the line is bookmarked */
    FV_FINISHED = 1 << 3,  /* the last node is a leaf ended by an end-of-text token (or a
                              stop string) */
    FV_PENDING = 1 << 4,   /* the last node is not computed yet */
    FV_BUDGET = 1 << 5,    /* the last node is a leaf stopped by the token budget */
    FV_DIMMED = 1 << 6,    /* the line's first node is a search's loser (FOREST_DIMMED):
                              marked with a cross, not only dimmed as unlikely lines are */
};

typedef struct fv_line {
    int32_t start, end;   /* forest indices of the first and last node */
    int32_t indent;       /* nesting level */
    int32_t n_nodes;      /* tokens on the line */
    int32_t n_children;   /* children of the last node */
    uint32_t flags;       /* FV_* */
} fv_line;

typedef struct forest_view {
    fv_line *lines;
    int32_t n_lines, cap_lines;
    int32_t cursor;        /* line index */
    int32_t top;           /* first line shown */
    forest_id cursor_id;   /* id of the cursor line's first node */
    forest_id *fold;       /* (cap_mark) per forest index: the id of the node whose line is
                              collapsed there, FOREST_NONE: none (a reused index starts open) */
    int32_t cap_mark;
    int32_t *stack;        /* scratch for the walk */
    int32_t cap_stack;
    bool utf8;             /* glyphs: UTF-8 or ASCII */
    bool raw;              /* lines show a chat template's scaffolding as it is; false:
                              folded away, the turns' words shown (chat_fold.h) */
    const double *key;     /* borrowed, by forest index: siblings ordered by it, higher
                              first (ties as made); NULL: as made */
    int32_t n_key;         /* entries of key: a node made after they were computed sorts
                              last instead of reading past them */
    struct fv_sib *sib;    /* scratch for ordering siblings */
    int32_t cap_sib;
} forest_view;

void fv_init(forest_view *v, bool utf8);
void fv_free(forest_view *v);

/* Recomputes the lines from f (keeping the cursor on its line when that line still
 * starts at the same node). ST_ERR_NOMEM leaves the old lines. */
st_code fv_rebuild(forest_view *v, const forest *f, st_err *err);

/* Moves the cursor by delta lines (clamped) / to line i. */
void fv_move(forest_view *v, const forest *f, int32_t delta);
void fv_set_cursor(forest_view *v, const forest *f, int32_t line);
/* Puts the cursor on the line that holds node id (after a rebuild); false if hidden or
 * stale. */
bool fv_select_node(forest_view *v, const forest *f, forest_id id);
/* The node the cursor selects (its line's last node), or FOREST_NONE. */
forest_id fv_selected(const forest_view *v, const forest *f);
/* Adjusts top so that the cursor is inside a window of height lines. */
void fv_scroll(forest_view *v, int32_t height);

/* Collapses (fold true) or expands the cursor line; returns true when that changed
 * anything. The caller rebuilds afterwards. */
bool fv_fold(forest_view *v, const forest *f, bool fold);
bool fv_is_folded(const forest_view *v, const forest *f, int32_t idx);

/* Writes line i as text of at most width columns into out (cap bytes): indentation,
 * a fold glyph, a marker (bookmark, running, finished, pending), the probability of
 * its first token and the line's text decoded in context: after an ellipsis when it
 * starts inside a word, and without a chat template's scaffolding unless v->raw. running (may be NULL) lists
 * the leaves a strategy is extending. tk may be NULL (token ids are shown). Returns the
 * probability class of the first token: 0 below 10%, 1 below 50%, 2 from 50%, 3 for an
 * unscored token (prompt text). */
int fv_render(const forest_view *v, const forest *f, const tok *tk, int32_t i,
              const forest_id *running, int32_t n_running, char *out, size_t cap, int width);

/* The line after (dir > 0) or before (dir < 0) line `from` whose text (as fv_render
 * draws it at a wide width) holds needle, ignoring case, wrapping around; -1 when no
 * line does. *rank gets its place among the matching lines (1-based), *total their
 * count. Only the lines shown are searched (a folded subtree's are not). */
int32_t fv_find(const forest_view *v, const forest *f, const tok *tk, const char *needle, int32_t from, int dir,
                int32_t *rank, int32_t *total);

/* Line i (0-based) of the legend of the marks fv_render draws ("▶ growing now", ...) in
 * the glyphs of utf8 or ASCII; NULL past the last. For the help screen. */
const char *fv_legend(int32_t i, bool utf8);

/* Text is decoded as a stream along the branch, so a character split over tokens is
 * shown whole where the text runs on (a line, the text pane); where one token is shown
 * alone, the bytes of a character it leaves unfinished are shown escaped ("<E6><9D>").
 * Control tokens show their piece ("<|im_start|>"). tk NULL: "[id]". */

/* Node idx's token alone, as it reads after its branch (a character it completes is
 * shown whole) into out (cap > 0). */
void fv_token_text(const forest *f, const tok *tk, int32_t idx, char *out, size_t cap);
/* The same for token id as a child of node parent (forest index; -1: a new root, read
 * as inside running text). */
void fv_alt_text(const forest *f, const tok *tk, int32_t parent, int32_t id, char *out, size_t cap);
/* A stream positioned just before node idx (its recent ancestors replayed); feed it the
 * tokens from idx on with fv_stream_put. */
void fv_stream_start(const forest *f, const tok *tk, int32_t idx, tok_stream *s);
/* Token id's text through s into out (cap > 0): what tok_stream_put gives, a control
 * token's piece, "" (and the stream moved past it) for a text longer than cap. */
void fv_stream_put(const tok *tk, tok_stream *s, int32_t id, char *out, size_t cap);
/* Appends the bytes s holds back (a character the text ends inside) as "<E6><9D>" to the
 * NUL-terminated string in out (cap bytes; whole escapes only); returns its length. */
size_t fv_pending_text(const tok_stream *s, char *out, size_t cap);

#endif
