/* think_fold.h - a reasoning model's thinking folded away from a forest line: the text of
 * a "<think> ... </think>" section (Qwen3, Qwen3.5, DeepSeek-R1 distills) or of gpt-oss's
 * analysis channel ("<|channel|>analysis<|message|> ... <|end|>") drawn as one short mark,
 * so a chain's line shows its answer. `t` (the scaffolding key) shows the text as it is.
 *
 * Works on a line's decoded text and the section left open by the text before it (its
 * ancestors' lines): a section opened on a parent line and closed on this one is folded
 * up to its close.
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
/* The kind of the section still open at the end of text when kind open (-1: none) was open
 * at its start; -1 when none is. */
int ui_think_open_after(const char *text, int open);
/* ui_think_fold of text that starts inside a section of kind open (-1: none; what
 * ui_think_open_after gives for the text before it): its part up to that section's close
 * is folded too ("⟨thinking…⟩" alone when it does not close). False when nothing is
 * folded. */
bool ui_think_fold_in(const char *text, int open, bool utf8, char *out, size_t cap);

/* For text seen piece by piece (the text pane's cells): the kind of the section whose
 * opening marker text holds (0, 1, ...), or -1; whether it holds kind k's closing marker
 * (then *close gets that marker's text); the mark ui_think_fold draws (static). */
int ui_think_opens(const char *text);
bool ui_think_closes(const char *text, int k, const char **close);
const char *ui_think_mark(bool closed, bool utf8);

#endif
