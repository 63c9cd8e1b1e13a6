/* cmdline.c - readline inside curses (cmdline.h). Readline keeps its state in globals;
 * the few we add (the window, the pending input, the finished line) live here, the one
 * place that glues the two libraries. */
#include "cmdline.h"

#include <readline/history.h>
#include <readline/readline.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"

static struct {
    WINDOW *win;
    bool active, done;
    char *line;
    unsigned char in[64];
    int in_n, in_at;
    char hist[4096];
    char prompt[32];
    FILE *devnull;
} cl;

static int cl_getc(FILE *f) {
    (void)f;
    return cl.in_at < cl.in_n ? cl.in[cl.in_at++] : EOF;
}

static int cl_input_available(void) { return cl.in_at < cl.in_n; }

static void cl_redisplay(void) {
    if (!cl.win) return;
    werase(cl.win);
    int w = getmaxx(cl.win), plen = (int)strlen(cl.prompt);
    /* keep the cursor in view: show the line from an offset */
    int point = rl_point, off = point + plen >= w - 1 ? point + plen - (w - 2) : 0;
    mvwaddstr(cl.win, 0, 0, cl.prompt);
    mvwaddnstr(cl.win, 0, plen, rl_line_buffer + off, w - plen - 1);
    /* the cursor column counts characters, not bytes, up to the point */
    int col = plen;
    for (int i = off; i < point; i++)
        if (((unsigned char)rl_line_buffer[i] & 0xc0) != 0x80) col++;
    wmove(cl.win, 0, col < w ? col : w - 1);
    wrefresh(cl.win);
}

static void cl_on_line(char *line) {
    cl.done = true;
    cl.line = line; /* NULL on EOF (C-d on an empty line) */
    if (line && *line) add_history(line);
    rl_callback_handler_remove();
    cl.active = false;
}

/* Tab: complete ":name" at the start of the line from the command table. */
static char *cl_generator(const char *text, int state) {
    static int i;
    if (!state) i = 0;
    const char *t = text[0] == ':' ? text + 1 : text;
    for (const char *n; (n = ui_cmd_name(i)); ) {
        i++;
        if (!strncmp(n, t, strlen(t))) {
            char *r = malloc(strlen(n) + 2);
            if (r) sprintf(r, "%s%s", t != text ? ":" : "", n); /* the prompt's ':' is not in text */
            return r;
        }
    }
    return NULL;
}

static char **cl_complete(const char *text, int start, int end) {
    (void)end;
    rl_attempted_completion_over = 1;
    if (start != 0) return NULL;
    return rl_completion_matches(text, cl_generator);
}

/* Lists matches on the command window instead of stdout. */
static void cl_show_matches(char **matches, int n, int maxlen) {
    (void)maxlen;
    if (!cl.win) return;
    werase(cl.win);
    int x = 0;
    for (int i = 1; i <= n; i++) {
        mvwaddstr(cl.win, 0, x, matches[i]);
        x += (int)strlen(matches[i]) + 2;
        if (x >= getmaxx(cl.win) - 10) break;
    }
    wrefresh(cl.win);
    napms(600);
    cl_redisplay();
}

void ui_cmdline_init(const char *history_path) {
    memset(&cl, 0, sizeof cl);
    cl.devnull = fopen("/dev/null", "w");
    rl_catch_signals = 0;
    rl_catch_sigwinch = 0;
    rl_change_environment = 0;
    rl_prep_term_function = NULL;
    rl_deprep_term_function = NULL;
    rl_getc_function = cl_getc;
    rl_input_available_hook = cl_input_available;
    rl_redisplay_function = cl_redisplay;
    rl_attempted_completion_function = cl_complete;
    rl_completion_display_matches_hook = cl_show_matches;
    rl_outstream = cl.devnull ? cl.devnull : stderr;
    rl_instream = NULL;
    rl_readline_name = "multidecode";
    rl_bind_key('\t', rl_complete);
    using_history();
    stifle_history(1000);
    if (history_path) {
        snprintf(cl.hist, sizeof cl.hist, "%s", history_path);
        read_history(cl.hist);
    }
}

void ui_cmdline_end(void) {
    if (cl.active) rl_callback_handler_remove();
    if (cl.hist[0]) write_history(cl.hist);
    if (cl.devnull) fclose(cl.devnull);
    cl.devnull = NULL;
    cl.active = false;
}

void ui_cmdline_open(WINDOW *win, const char *prompt) {
    cl.win = win;
    cl.active = true;
    cl.done = false;
    cl.line = NULL;
    cl.in_n = cl.in_at = 0;
    snprintf(cl.prompt, sizeof cl.prompt, "%s", prompt);
    /* readline draws nothing itself: the prompt lives in our redisplay */
    rl_callback_handler_install("", cl_on_line);
    curs_set(1);
    cl_redisplay();
}

void ui_cmdline_open_with(WINDOW *win, const char *prompt, const char *text) {
    ui_cmdline_open(win, prompt);
    rl_replace_line(text, 0);
    rl_point = rl_end;
    cl_redisplay();
}

bool ui_cmdline_active(void) { return cl.active; }
void ui_cmdline_redraw(void) { if (cl.active) cl_redisplay(); }

static void cl_push(const char *bytes) {
    cl.in_n = cl.in_at = 0;
    for (const char *p = bytes; *p && cl.in_n < (int)sizeof cl.in; p++) cl.in[cl.in_n++] = (unsigned char)*p;
}

bool ui_cmdline_feed(int ch, bool is_key, char **line) {
    *line = NULL;
    if (!cl.active) return false;
    char buf[8] = {0};
    if (is_key) {
        const char *seq = NULL;
        switch (ch) {
        case KEY_LEFT: seq = "\033[D"; break;
        case KEY_RIGHT: seq = "\033[C"; break;
        case KEY_UP: seq = "\033[A"; break;
        case KEY_DOWN: seq = "\033[B"; break;
        case KEY_HOME: seq = "\001"; break;
        case KEY_END: seq = "\005"; break;
        case KEY_DC: seq = "\004"; break;
        case KEY_BACKSPACE: seq = "\177"; break;
        case KEY_ENTER: seq = "\n"; break;
        default: return false;
        }
        snprintf(buf, sizeof buf, "%s", seq);
    } else if (ch == 27 || ch == 3 || ((ch == 127 || ch == 8) && rl_end == 0)) {
        rl_callback_handler_remove(); /* abandoned */
        cl.active = false;
        curs_set(0);
        return true;
    } else if (ch < 0x80) {
        buf[0] = (char)(ch == '\r' ? '\n' : ch);
    } else if (ch < 0x800) {
        buf[0] = (char)(0xc0 | ch >> 6), buf[1] = (char)(0x80 | (ch & 0x3f));
    } else if (ch < 0x10000) {
        buf[0] = (char)(0xe0 | ch >> 12), buf[1] = (char)(0x80 | ((ch >> 6) & 0x3f)),
        buf[2] = (char)(0x80 | (ch & 0x3f));
    } else {
        buf[0] = (char)(0xf0 | ch >> 18), buf[1] = (char)(0x80 | ((ch >> 12) & 0x3f)),
        buf[2] = (char)(0x80 | ((ch >> 6) & 0x3f)), buf[3] = (char)(0x80 | (ch & 0x3f));
    }
    cl_push(buf);
    while (cl.in_at < cl.in_n && cl.active) rl_callback_read_char();
    if (cl.done) {
        cl.done = false;
        *line = cl.line;
        cl.line = NULL;
        curs_set(0);
        return true;
    }
    return false;
}
