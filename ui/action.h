/* action.h - the one table of TUI actions. Each X(ID, name, keys, view, help) row gives
 * the enum value UI_ACT_<ID>, the name used in key-binding files ("bind j down"), the
 * default keys (space-separated key names, see keys.h; assets/keys ships the same list),
 * the view the binding applies in (UI_VIEW_ALL: everywhere) and the help line. The enum,
 * the help screen, the binding-file names and the man page's key list are all generated
 * from this table (the tig habit: one request list, many uses).
 *
 * Not here: what an action does (tui.c), parsing key names and binding files (keys.c). */
#ifndef MD_UI_ACTION_H
#define MD_UI_ACTION_H

#include <stddef.h>
#include <stdint.h>

/* Views a binding can be limited to. */
enum { UI_VIEW_ALL = 0, UI_VIEW_FOREST, UI_VIEW_TEXT, UI_VIEW_MASK, UI_VIEW_N };

#define UI_ACTIONS(X)                                                                       \
    X(QUIT,        "quit",         "q",            UI_VIEW_ALL,    "autosave and quit")    \
    X(HELP,        "help",         "? F1",         UI_VIEW_ALL,    "show or hide this help") \
    X(COMMAND,     "command",      ":",            UI_VIEW_ALL,    "open the command line (:help lists commands)") \
    X(APPEND,      "append",       "a",            UI_VIEW_ALL,    "type text to append under the selected node") \
    X(NEXT_PANE,   "next-pane",    "Tab",          UI_VIEW_ALL,    "move focus: forest / text (forest / mask while the mask is shown)") \
    X(MASK,        "mask",         "v",            UI_VIEW_ALL,    "show or hide the mask pane (last step's batch)") \
    X(STEP,        "step",         "s",            UI_VIEW_ALL,    "run one engine step (paused :tot: its next level)") \
    X(PREVIEW,     "preview",      "N",            UI_VIEW_ALL,    "show the next step's plan in the mask pane (not run)") \
    X(GROW,        "grow",         "n",            UI_VIEW_ALL,    "grow the selected branch (:set budget N tokens)") \
    X(COT,         "cot",          "c",            UI_VIEW_ALL,    "4 chains of thought from the selected node") \
    X(BEAM,        "beam",         "b",            UI_VIEW_ALL,    "beam search of width 2 from the selected leaf") \
    X(MERGE,       "merge",        "M",            UI_VIEW_ALL,    "merge the bookmarked branches and grow the result") \
    X(PAUSE,       "pause",        "p",            UI_VIEW_ALL,    "pause or resume (:tot pauses at the level's end)") \
    X(CANCEL,      "cancel",       "x",            UI_VIEW_ALL,    "cancel the strategy or a long prompt's pass (:tot keeps its tree)") \
    X(PRUNE,       "prune",        "d Delete",     UI_VIEW_FOREST, "prune the selected subtree") \
    X(UNDO,        "undo",         "u",            UI_VIEW_FOREST, "undo the last prune (again: the one before), as it was") \
    X(REDO,        "redo",         "U C-r",        UI_VIEW_FOREST, "redo: prune again what undo restored") \
    X(BOOKMARK,    "bookmark",     "m",            UI_VIEW_ALL,    "bookmark the selected node or clear it") \
    X(NEXT_MARK,   "next-bookmark", "'",           UI_VIEW_ALL,    "jump to the next bookmark") \
    X(SAVE,        "save",         "w",            UI_VIEW_ALL,    "save the session now (the autosave file)") \
    X(REDRAW,      "redraw",       "C-l",          UI_VIEW_ALL,    "redraw the screen") \
    X(UP,          "up",           "k Up",         UI_VIEW_FOREST, "select the line above") \
    X(DOWN,        "down",         "j Down",       UI_VIEW_FOREST, "select the line below") \
    X(PAGE_UP,     "page-up",      "PgUp C-b",     UI_VIEW_ALL,    "scroll a page up") \
    X(PAGE_DOWN,   "page-down",    "PgDn C-f",     UI_VIEW_ALL,    "scroll a page down") \
    X(FIRST,       "first",        "g Home",       UI_VIEW_FOREST, "select the first line") \
    X(LAST,        "last",         "G End",        UI_VIEW_FOREST, "select the last line") \
    X(COLLAPSE,    "collapse",     "h Left",       UI_VIEW_FOREST, "collapse the selected subtree (or go to its parent)") \
    X(EXPAND,      "expand",       "l Right",      UI_VIEW_FOREST, "expand the selected subtree") \
    X(TOGGLE,      "toggle",       "Space",        UI_VIEW_FOREST, "collapse or expand the selected subtree") \
    X(SEARCH,      "search",       "/",            UI_VIEW_FOREST, "search the lines' text (C-n / C-p: next / previous match)") \
    X(SEARCH_NEXT, "search-next",  "C-n",          UI_VIEW_FOREST, "select the next line the search matches") \
    X(SEARCH_PREV, "search-prev",  "C-p",          UI_VIEW_FOREST, "select the previous line the search matches") \
    X(SCAFFOLD,    "scaffold",     "t",            UI_VIEW_FOREST, "show or fold away the chat template's scaffolding and the thinking on the lines") \
    X(EDIT,        "edit",         "e",            UI_VIEW_FOREST, "edit the line's text: the edit becomes a branch beside it, the original stays") \
    X(DIFF,        "diff",         "D",            UI_VIEW_FOREST, "the selected branch beside the bookmarked one, the first difference marked (D: back)") \
    X(TOKEN_PREV,  "token-prev",   "h Left",       UI_VIEW_TEXT,   "move the token cursor left") \
    X(TOKEN_NEXT,  "token-next",   "l Right",      UI_VIEW_TEXT,   "move the token cursor right") \
    X(WORD_NEXT,   "word-next",    "W",            UI_VIEW_TEXT,   "move the token cursor to the next word") \
    X(WORD_PREV,   "word-prev",    "B",            UI_VIEW_TEXT,   "move the token cursor to the previous word") \
    X(TOKEN_FIRST, "token-first",  "0 Home",       UI_VIEW_TEXT,   "move the token cursor to the first token") \
    X(TOKEN_LAST,  "token-last",   "$ End",        UI_VIEW_TEXT,   "move the token cursor to the last token") \
    X(ALT_UP,      "alt-up",       "k Up",         UI_VIEW_TEXT,   "previous alternative at the cursor token") \
    X(ALT_DOWN,    "alt-down",     "j Down",       UI_VIEW_TEXT,   "next alternative at the cursor token") \
    X(ALT_PICK,    "alt-pick",     "Enter",        UI_VIEW_TEXT,   "fork here with the chosen alternative and grow it") \
    X(FORK_TEXT,   "fork-text",    "i",            UI_VIEW_TEXT,   "fork at the cursor token with your own text (a branch beside the token)") \
    X(MASK_UP,     "mask-up",      "k Up",         UI_VIEW_MASK,   "scroll the mask rows up") \
    X(MASK_DOWN,   "mask-down",    "j Down",       UI_VIEW_MASK,   "scroll the mask rows down") \
    X(MASK_LEFT,   "mask-left",    "h Left",       UI_VIEW_MASK,   "scroll the mask grid left (older KV slots)") \
    X(MASK_RIGHT,  "mask-right",   "l Right",      UI_VIEW_MASK,   "scroll the mask grid right (back to the newest slots)") \
    X(MASK_FOLD,   "mask-fold",    "o",            UI_VIEW_MASK,   "open the folded runs of shared slots (one column a slot, h/l scroll) or fold them") \
    X(MASK_OLDER,  "mask-older",   "[",            UI_VIEW_MASK,   "show the step before (the last 8 steps are kept)") \
    X(MASK_NEWER,  "mask-newer",   "]",            UI_VIEW_MASK,   "show the step after (back to the last one)") \
    X(ATTN,        "attention",    "A",            UI_VIEW_MASK,   "attention weights in the mask from the next step on (last layer, mean of heads), or off") \
    X(ATTN_LOWER,  "attn-layer-down", "<",         UI_VIEW_MASK,   "the weights of the layer below, from the next step on") \
    X(ATTN_HIGHER, "attn-layer-up", ">",           UI_VIEW_MASK,   "the weights of the layer above, from the next step on") \
    X(ATTN_HEAD,   "attn-head",    "H",            UI_VIEW_MASK,   "the weights of the next head (after the last: their mean)") \
    X(ROPE,        "rope",         "R",            UI_VIEW_MASK,   "RoPE under the grid: the selected row's turn (its first pairs' angles) beside its parent's and another branch's, or off")

typedef enum {
#define UI_ACT_ENUM(id, name, keys, view, help) UI_ACT_##id,
    UI_ACTIONS(UI_ACT_ENUM)
#undef UI_ACT_ENUM
    UI_ACT_N,
    UI_ACT_NONE = -1
} ui_action;

typedef struct ui_action_info {
    const char *name;
    const char *keys; /* default keys, space-separated */
    int view;         /* UI_VIEW_* */
    const char *help;
} ui_action_info;

/* The row of action a (a valid action), or NULL. */
const ui_action_info *ui_action_get(int a);
/* The action called name, or UI_ACT_NONE. */
int ui_action_by_name(const char *name);
/* "all", "forest", "text", "mask". */
const char *ui_view_name(int view);

/* Line i (0-based) of the help screen into out (cap > 0 bytes): "  KEYS  name  help".
 * Returns the number of lines there are (the caller loops i < that). keys_of (may be
 * NULL: the defaults) gives the keys currently bound to an action as text. */
typedef const char *(*ui_keys_text_fn)(void *ud, int action, char *buf, size_t cap);
int32_t ui_help_line(int32_t i, ui_keys_text_fn keys_of, void *ud, char *out, size_t cap);

#endif
