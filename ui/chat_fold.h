/* chat_fold.h - a chat prompt as a person reads it: the text of its turns without the
 * template's scaffolding (control tokens, role headers, the system turn), for the forest
 * pane, whose lines would otherwise all read "<|im_start|>system↵You are a helpful...".
 * Works on the templates whose turns are a control token, a role word and the text
 * (ChatML, Gemma's <start_of_turn>) or a role between header tokens (Llama 3).
 *
 * Not here: drawing (forest_view.c), writing chat prompts (engine/tok/chat.h). */
#ifndef MD_UI_CHAT_FOLD_H
#define MD_UI_CHAT_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok/tok.h"

/* The text of the n tokens ids (a line of the forest) with the scaffolding folded away:
 * the user's and the model's words, turns joined by " | ", the system turn only when
 * nothing else is there (as "system: ..."), into out (cap > 0 bytes, NUL-terminated).
 * Text before the line's first control token is the turn its parent line opened. False
 * (out unspecified) when ids hold no role header: the line is shown as it is. */
bool ui_chat_fold(const tok *tk, const int32_t *ids, int32_t n, char *out, size_t cap);

#endif
