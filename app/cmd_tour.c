/* cmd_tour.c - `multidecode tour -m MODEL`: the guided tour (ui/tour.h) outside the TUI.
 * On a terminal it shows one screen at a time (n, p or space to move, q to leave);
 * otherwise it prints every screen, in order, as text. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "app.h"
#include "prompt.h"
#include "../ui/tour.h"

#define TOUR_USAGE "usage: multidecode tour -m MODEL [-p TEXT] [--all]"

static void tour_usage(FILE *f) {
    fprintf(f, TOUR_USAGE "\n\n"
               "A guided tour of one small forest: the prompt's prefill, a fork into the\n"
               "model's two likeliest next tokens, one more token on each branch, and on\n"
               "each screen what the rows, RoPE positions, KV slots, mask and attention\n"
               "weights mean, naming the rows built. On a terminal one screen at a time\n"
               "(n, p or space to move, q to leave); else every screen, as text.\n\n"
               PROMPT_MODEL_HELP
               "  -p, --prompt TEXT    the prompt, as raw text (default \"Once upon a time\")\n"
               "      --all            print every screen even on a terminal\n");
}

/* One key from the terminal, without waiting for Enter; EOF when none can be read. */
static int read_key(void) {
    struct termios old, raw;
    if (tcgetattr(STDIN_FILENO, &old)) return getchar();
    raw = old;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    int c = getchar();
    tcsetattr(STDIN_FILENO, TCSANOW, &old);
    return c;
}

/* Pages through the screens until q (or the end of input). */
static void tour_page(const tour *t) {
    int32_t i = 0, n = tour_n_screens(t);
    for (;;) {
        printf("\033[H\033[2J%s\n[n / space: next   p: back   q: leave]  %d of %d ", tour_screen(t, i), i + 1, n);
        fflush(stdout);
        int c = read_key();
        if (c == EOF || c == 'q') break;
        if ((c == 'n' || c == ' ') && i + 1 < n) i++;
        else if (c == 'p' && i > 0) i--;
    }
    putchar('\n');
}

int cmd_tour(int argc, char **argv) {
    static const struct option lo[] = {PROMPT_MODEL_LONGOPTS, {"prompt", 1, 0, 'p'}, {"all", 0, 0, 'a'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    const char *text = "Once upon a time";
    bool all = false;
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:p:t:c:h", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p': text = optarg; break;
        case 'a': all = true; break;
        case 'h': tour_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode tour --help", TOUR_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("tour needs a model: -m MODEL");
    st_err err = {0};
    prompt_model pm;
    if (prompt_model_open(&pm, &mo, &err)) return app_fail(&err);
    tour *t = tour_build(pm.ctx, pm.tk, text, &err);
    if (t && !all && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) tour_page(t);
    else
        for (int32_t i = 0; t && i < tour_n_screens(t); i++) printf("%s%s", i ? "\n----\n\n" : "", tour_screen(t, i));
    bool ok = t != NULL;
    tour_free(t);
    prompt_model_close(&pm);
    return ok ? 0 : app_fail(&err);
}
