/* think_fold.h - a reasoning model's thinking folded away from a forest line: the text of
 * a "<think> ... </think>" section (Qwen3, Qwen3.5, DeepSeek-R1 distills) or of gpt-oss's
 * analysis channel ("<|channel|>analysis<|message|> ... <|end|>") drawn as one short mark,
 * so a chain's line shows its answer. `t` (the scaffolding key) shows the text as it is.
 *
 * Works on a line's decoded text: a section opened on a parent line and closed on this
 * one is not recognised here (its line shows the thinking as it is).
 * Not here: drawing (forest_view.c), where the answer starts for a vote
 * (engine/tok/chat.h chat_after_think). */
#ifndef MD_UI_THINK_FOLD_H
#define MD_UI_THINK_FOLD_H

#include <stdbool.h>
#include <stddef.h>

/* text with each thinking section replaced by a mark ("⟨thought⟩", or "⟨thinking…⟩" for
 * one still open at the end; "[thought]" and "[thinking...]" when !utf8), into out (cap >
 * 0 bytes, NUL-terminated, cut short when it does not fit). False (out unspecified) when
 * text holds no section. */
bool ui_think_fold(const char *text, bool utf8, char *out, size_t cap);

/* For text seen piece by piece (the text pane's cells): the kind of the section whose
 * opening marker text holds (0, 1, ...), or -1; whether it holds kind k's closing marker
 * (then *close gets that marker's text); the mark ui_think_fold draws (static). */
int ui_think_opens(const char *text);
bool ui_think_closes(const char *text, int k, const char **close);
const char *ui_think_mark(bool closed, bool utf8);

#endif
