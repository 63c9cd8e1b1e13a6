/* screen.c - terminal setup and teardown (screen.h). */
#include "screen.h"

#include <langinfo.h>
#include <locale.h>
#include <ncursesw/curses.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

#include "base/outfile.h"

/* Signals that end the TUI the normal way (their handler sets a flag: the loop ends, the
 * autosave is written, the terminal restored), and crashes (their handler restores the
 * terminal with async-signal-safe calls only, then hands the signal on). */
static const int quit_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define N_CRASH (sizeof crash_signals / sizeof crash_signals[0])

static struct {
    bool active, utf8, colour, atexit_set;
    int saved_stderr;
    volatile sig_atomic_t sig;
    struct termios tio;       /* the terminal's modes before curses */
    bool have_tio;
    char reset[256];          /* what undoes curses' screen modes, written on a crash */
    size_t reset_len;
    struct sigaction old_crash[N_CRASH]; /* the handlers before ours (ASan's, say) */
} scr = {.saved_stderr = -1};

static void on_signal(int s) { scr.sig = s; }

/* A crash: the terminal back to the user's modes (write and tcsetattr are
 * async-signal-safe, curses is not), then the previous handler, and the signal again. */
static void on_crash(int s) {
    if (scr.active) {
        (void)!write(1, scr.reset, scr.reset_len);
        if (scr.have_tio) tcsetattr(0, TCSANOW, &scr.tio);
    }
    for (size_t i = 0; i < N_CRASH; i++)
        if (crash_signals[i] == s) sigaction(s, &scr.old_crash[i], NULL);
    raise(s);
}

/* Appends terminfo capability cap (when the terminal has it) to the crash reset. */
static void reset_add(const char *cap) {
    const char *v = tigetstr((char *)cap);
    if (!v || v == (char *)-1) return;
    size_t n = strlen(v);
    if (scr.reset_len + n >= sizeof scr.reset) return;
    memcpy(scr.reset + scr.reset_len, v, n);
    scr.reset_len += n;
}

static void restore_stderr(void) {
    if (scr.saved_stderr >= 0) {
        fflush(stderr);
        dup2(scr.saved_stderr, 2);
        close(scr.saved_stderr);
        scr.saved_stderr = -1;
    }
}

void ui_screen_end(void) {
    if (scr.active) {
        scr.active = false;
        for (size_t i = 0; i < N_CRASH; i++) sigaction(crash_signals[i], &scr.old_crash[i], NULL);
        endwin();
    }
    restore_stderr();
}

static void at_exit(void) { ui_screen_end(); }

bool ui_screen_start(const char *log_path) {
    setlocale(LC_ALL, "");
    const char *cs = nl_langinfo(CODESET);
    scr.utf8 = cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    if (!isatty(0) || !isatty(1)) return false;
    if (log_path) {
        /* only a regular file becomes the log (base/outfile.h); without one the messages
         * are not kept, and the TUI runs anyway */
        int fd = outfile_append(log_path, "log", NULL);
        if (fd >= 0) {
            fflush(stderr);
            scr.saved_stderr = dup(2);
            dup2(fd, 2);
            close(fd);
        }
    }
    if (!scr.atexit_set) atexit(at_exit), scr.atexit_set = true;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    for (size_t i = 0; i < sizeof quit_signals / sizeof quit_signals[0]; i++)
        sigaction(quit_signals[i], &sa, NULL);
    scr.have_tio = tcgetattr(0, &scr.tio) == 0;
    setenv("ESCDELAY", "25", 0);
    if (!initscr()) {
        restore_stderr();
        return false;
    }
    /* the crash reset, computed now because a crash handler cannot ask terminfo */
    scr.reset_len = 0;
    reset_add("sgr0");
    reset_add("cnorm");
    reset_add("rmkx");
    reset_add("rmcup");
    static const char mouse_off[] = "\033[?1006l\033[?1000l";
    memcpy(scr.reset + scr.reset_len, mouse_off, sizeof mouse_off - 1);
    scr.reset_len += sizeof mouse_off - 1;
    sa.sa_handler = on_crash;
    for (size_t i = 0; i < N_CRASH; i++) sigaction(crash_signals[i], &sa, &scr.old_crash[i]);
    scr.active = true;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    scr.colour = has_colors() && !getenv("NO_COLOR");
    if (scr.colour) {
        start_color();
        use_default_colors();
        bool c256 = COLORS >= 256;
        init_pair(UI_PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
        init_pair(UI_PAIR_STATUS, COLOR_BLACK, COLOR_WHITE);
        init_pair(UI_PAIR_SEL, COLOR_BLACK, COLOR_YELLOW);
        init_pair(UI_PAIR_DIM, c256 ? 244 : COLOR_BLUE, -1);
        init_pair(UI_PAIR_MSG, COLOR_YELLOW, -1);
        init_pair(UI_PAIR_PROB0, c256 ? 196 : COLOR_RED, -1);
        init_pair(UI_PAIR_PROB1, c256 ? 214 : COLOR_YELLOW, -1);
        init_pair(UI_PAIR_PROB2, c256 ? 114 : COLOR_GREEN, -1);
        init_pair(UI_PAIR_PROB3, -1, -1);
        static const short br8[6] = {COLOR_RED, COLOR_GREEN, COLOR_YELLOW, COLOR_BLUE, COLOR_MAGENTA, COLOR_CYAN};
        static const short br256[6] = {203, 113, 221, 75, 176, 80};
        for (int i = 0; i < 6; i++) init_pair((short)(UI_PAIR_BRANCH0 + i), c256 ? br256[i] : br8[i], -1);
    }
    mousemask(BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    mouseinterval(0);
    return true;
}

bool ui_screen_utf8(void) { return scr.utf8; }
int ui_screen_signal(void) { return scr.sig; }

int ui_screen_attr(int pair) {
    if (scr.colour) return (int)COLOR_PAIR(pair) | (pair == UI_PAIR_PROB0 || pair == UI_PAIR_MSG ? A_BOLD : 0);
    switch (pair) {
    case UI_PAIR_TITLE: case UI_PAIR_STATUS: case UI_PAIR_SEL: return A_REVERSE;
    case UI_PAIR_DIM: case UI_PAIR_PROB0: return A_DIM;
    case UI_PAIR_MSG: case UI_PAIR_PROB2: return A_BOLD;
    default: return A_NORMAL;
    }
}
