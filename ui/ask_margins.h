/* ask_margins.h - what the worker builds for :ask and :margins. :ask puts its text under
 * the selected node as a chat user turn (the model's template, handed in by app/ as a
 * ui_chat) followed by the assistant's header, so the model answers it; a model without
 * a template gets the text as it is. :margins runs Writing in the Margins
 * (engine/strategy/margins.h) over the selected branch's text: this file builds its
 * prompts (chunks of the branch, the chat form) and its answer prompt; the worker steps it
 * through the strategy interface like every other strategy.
 *
 * The text forms (ui_turn_form, ui_turn_text) are plain C, unit-tested; the rest runs on
 * the worker's thread under its lock. Not here: the job queue and the lock (worker.c),
 * the wording of the margins requests (engine/strategy/margins.h), chat rendering (engine/tok/chat.h). */
#ifndef MD_UI_ASK_MARGINS_H
#define MD_UI_ASK_MARGINS_H

#include <stdbool.h>
#include <stdint.h>

#include "tok/chat.h"
#include "forest/forest.h"
#include "strategy/margins.h"
#include "strategy/strategy.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "tok/tok.h"

/* The model's chat template, as app/ found it. */
typedef struct ui_chat {
    chat_kind kind;     /* CHAT_NONE: the model has none (or not one this program knows) */
    const char *system; /* the template's default system message (chat_default_system),
                           NULL when none; borrowed for the worker's life */
} ui_chat;

/* How :ask's text is put after a branch. */
enum {
    UI_TURN_RAW = 0, /* no template: the text as it is */
    UI_TURN_FIRST,   /* a new root: the conversation's start (default system message, user
                        turn, assistant header; BOS as the template wants), as `multidecode
                        ask` renders a question */
    UI_TURN_OPEN,    /* after plain text: the same start, without BOS */
    UI_TURN_FOLLOW,  /* after a chat (the branch holds a control token other than BOS):
                        the close of the answer it ends with, the user turn, the assistant
                        header (chat_user_turn's !first form) */
};

/* The form for a branch of path[0..n) tokens (n = 0: nothing selected, a new root).
 * tk may be NULL only when kind is CHAT_NONE or n is 0. */
int ui_turn_form(const tok *tk, chat_kind kind, const int32_t *path, int32_t n);
/* "raw text (no chat template)", "chatml: user turn + assistant header", ... for messages. */
const char *ui_turn_form_name(int form, chat_kind kind, char *buf, size_t cap);
/* text in that form (malloc'd, caller frees; NULL when out of memory). */
char *ui_turn_text(const ui_chat *ch, const char *text, int form);
/* Its tokens: special tokens parsed in the chat forms; BOS for UI_TURN_FIRST (unless the
 * template writes it) and for UI_TURN_RAW when root; none otherwise. malloc'd array of *n
 * >= 1 tokens; NULL + err: ST_ERR_ARG (nothing to append), ST_ERR_NOMEM. */
int32_t *ui_turn_tokens(const tok *tk, const ui_chat *ch, const char *text, int form, bool root,
                        int32_t *n, st_err *err);

#define UI_MARGINS_CHUNK 128      /* default chunk, in tokens */

/* A running :margins: the margins strategy (engine/strategy/strategy.h) with the prompts
 * built here from the branch's text, and what its answer prompt needs. */
typedef struct ui_margins {
    strategy *s;        /* owned */
    char *question;
    ui_chat chat;
    const tok *tk;
    int32_t n_chunks;
} ui_margins;

/* Starts margins over the text of the branch root..from: its tokens (less a leading BOS)
 * cut into chunks of chunk tokens (0: UI_MARGINS_CHUNK), each chunk's note request
 * (margins_note_prompt) in UI_TURN_FIRST form (UI_TURN_RAW, with BOS, without a template)
 * added to f as new trees sharing their common prefix (margins_init); note i grows with sp
 * and seed sp->seed + i, at most budget tokens; when the last note is done, the answer's
 * prompt (margins_answer_prompt around the joined notes, in the notes' form) is added and
 * grown with seed sp->seed + the number of chunks, at most budget tokens. NULL + err:
 * ST_ERR_ARG (from is gone or has no text, more than MARGINS_MAX_CHUNKS chunks),
 * ST_ERR_CONTEXT (the prompts need more KV slots than are free), ST_ERR_NOMEM; f is
 * unchanged then. */
ui_margins *ui_margins_start(forest *f, const tok *tk, forest_id from, const char *question,
                             int32_t chunk, const ui_chat *ch, const sample_params *sp,
                             int32_t budget, int32_t n_vocab, st_err *err);
void ui_margins_free(ui_margins *um); /* NULL is a no-op; leaves the forest as it is */

#endif
