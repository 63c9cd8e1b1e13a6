/* cmdline.h - a readline line editor inside curses, through readline's callback
 * interface: keys read by curses are fed to readline one byte at a time (function keys
 * as the escape sequences readline knows), readline never touches the terminal, and its
 * line is drawn into a curses window by our redisplay hook. History is kept across runs
 * in a file; Tab completes command names. Readline is one global editor, so there is one
 * command line per process. */
#ifndef MD_UI_CMDLINE_H
#define MD_UI_CMDLINE_H

#include <stdbool.h>
#include <ncursesw/curses.h>

/* Sets readline up (history read from history_path, may be NULL). */
void ui_cmdline_init(const char *history_path);
/* Saves the history and releases readline. */
void ui_cmdline_end(void);
/* Starts editing a line with prompt (":" or "append> ") drawn on window win's row 0. */
void ui_cmdline_open(WINDOW *win, const char *prompt);
/* The same with text already on the line, the cursor at its end (an edit of a line). */
void ui_cmdline_open_with(WINDOW *win, const char *prompt, const char *text);
bool ui_cmdline_active(void);
/* Feeds one curses key (wint_t character or KEY_* code, is_key tells which). Returns
 * true when a line was finished (Enter) or abandoned (Esc, C-c, or Backspace on an empty
 * line): then *line is the malloc'd text (caller frees) or NULL when abandoned. */
bool ui_cmdline_feed(int ch, bool is_key, char **line);
/* Redraws the line (after a resize or a full redraw). */
void ui_cmdline_redraw(void);

#endif
