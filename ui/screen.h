/* screen.h - terminal setup and teardown for the TUI: locale and UTF-8 detection (ASCII
 * glyphs otherwise), colours (256, 8 or none), mouse, stderr sent to a log file while
 * curses owns the screen, and the terminal restored on every way out: ui_screen_end,
 * atexit, SIGINT/SIGTERM/SIGHUP/SIGQUIT (their handlers only set a flag the main loop
 * reads, so the loop ends and the autosave is written) and the crashes SIGSEGV, SIGBUS,
 * SIGABRT, SIGFPE, SIGILL (the terminal's modes restored with write and tcsetattr, then
 * the signal handed to the handler that was there before, ASan's say).
 * Process-wide state by nature (one terminal), kept in this file. */
#ifndef MD_UI_SCREEN_H
#define MD_UI_SCREEN_H

#include <stdbool.h>

/* Colour pairs. */
enum {
    UI_PAIR_TITLE = 1, UI_PAIR_STATUS, UI_PAIR_SEL, UI_PAIR_DIM, UI_PAIR_MSG,
    UI_PAIR_PROB0, UI_PAIR_PROB1, UI_PAIR_PROB2, UI_PAIR_PROB3, /* by probability class */
    UI_PAIR_BRANCH0, /* ... UI_PAIR_BRANCH0 + 5: by branch */
};

/* Starts curses; log_path (may be NULL) receives stderr meanwhile. false when the
 * terminal cannot be used (nothing changed then). */
bool ui_screen_start(const char *log_path);
/* Restores the terminal and stderr (idempotent). */
void ui_screen_end(void);
bool ui_screen_utf8(void);
/* The signal that asked us to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT), 0 when none. */
int ui_screen_signal(void);
/* The attribute of a colour pair, falling back to bold / dim / reverse without colours. */
int ui_screen_attr(int pair);

#endif
