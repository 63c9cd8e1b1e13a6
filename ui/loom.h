/* loom.h - the loom's edits of the forest, as people who explore completions expect them
 * (Loom, the tree-of-completions editor): your own text written under any node, sharing
 * the tokens already there so that an edited line forks where the edit begins and the
 * original stays; a line's text to edit; and where two branches first differ, for the
 * side-by-side view. Plain C over the forest and the tokenizer, tested without a terminal
 * (test_ui_loom.c).
 *
 * Not here: the keys and the prompt (tui.c), the worker's job around a write (worker.c),
 * branch names (names.h). */
#ifndef MD_UI_LOOM_H
#define MD_UI_LOOM_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "tok/tok.h"

/* text as the model's own tokens under node (FOREST_NONE: a new root, BOS first when the
 * model wants one), spelled as the tokenizer spells node's path and text together (so a
 * typed leading space or a word finished across the boundary gives the tokens the whole
 * text has, forking at an ancestor when the end of the path is spelled differently; a path
 * whose text does not encode back to itself takes the text alone), never a chat turn:
 * control tokens written as text ("<|im_end|>") are parsed back into them, so an edited
 * chat line keeps its turns. The first tokens that a child chain already has are shared,
 * the rest appended: *leaf gets the branch's last node, *made whether a node was added
 * (false: the text is a branch there already). ST_ERR_ARG for a stale node or a text of
 * no tokens, ST_ERR_NOMEM, the forest's codes (the forest keeps what was appended). */
st_code ui_loom_write(forest *f, const tok *tk, forest_id node, const char *text, forest_id *leaf, bool *made,
                      st_err *err);

/* The text of the nodes from index start down to index end (a forest pane line, one chain
 * of single children), as it reads after the text before it (a SentencePiece word keeps
 * its leading space), control tokens as their text: malloc'd, NULL when memory runs out
 * or end is not below start. */
char *ui_loom_line_text(const forest *f, const tok *tk, int32_t start, int32_t end);

/* The first token position (depth, the root's first token 0) where the root-to-node
 * paths of a and b differ; the shorter's length when one is the other's beginning; -1
 * for a stale id or when they are the same path. */
int32_t ui_loom_first_diff(const forest *f, forest_id a, forest_id b);

#endif
