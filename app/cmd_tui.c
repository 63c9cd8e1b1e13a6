/* cmd_tui.c - `multidecode [tui] -m MODEL [PROMPT]`: opens the model and runs the TUI
 * (ui/tui.h) over it. Here live what the UI must not know: option parsing, the model
 * file, the state and config folders ($XDG_STATE_HOME/multidecode for the autosave, the
 * history and the log; $XDG_CONFIG_HOME/multidecode/keys for key bindings), the model's
 * chat template (for :ask and :margins), and saving and loading sessions
 * (app/session_opts.h), handed to the UI as callbacks. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "forest/forest.h"
#include "session/autosave.h"
#include "../ui/screen.h"
#include "../ui/tui.h"
#include "app.h"
#include "prompt.h"
#include "session_opts.h"

/* Where `make install` puts the default key bindings (the Makefile passes its DATADIR);
 * a source tree's assets/keys wins when the program runs from it. */
#ifndef MD_DATADIR
#define MD_DATADIR "/usr/local/share/multidecode"
#endif

#define TUI_TOPK 8 /* alternatives kept per node for the text pane */

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define TUI_USAGE "usage: multidecode [tui] -m MODEL [options] [PROMPT]"

static void tui_usage(FILE *f) {
    fprintf(f, TUI_USAGE "\n\n"
               "Opens the interactive forest explorer (press ? inside for its keys).\n\n"
               PROMPT_MODEL_HELP
               "      --raw            typed text (and PROMPT) goes in as it is; by default,\n"
               "                       with a model that has a chat template, it becomes a\n"
               "                       user turn (:set chat on|off switches inside)\n"
               "      --load FILE      start from a saved session\n"
               "      --budget N       tokens per grow, chain or draft run (default 32)\n"
               "      --row-cost C     fix :draft and :lookahead's cost of a row, relative to\n"
               "                       a one-row step (default: measured), so that which\n"
               "                       drafts a step packs does not depend on the machine\n"
               "      --temp T         temperature; 0 = greedy (default 0.8)\n"
               PROMPT_SAMPLE_HELP
               "                       (here: a fresh seed each start, and each run draws the\n"
               "                       next one, said in its done message; --seed S or\n"
               "                       :set seed S makes the next run repeatable)\n"
               "\nfiles: $XDG_STATE_HOME/multidecode/{autosave.json,history,tui.log},\n"
               "       autosave.1.json, autosave.2.json, ... there: the runs before (:load\n"
               "       restores the last; up to 100 and 256 MiB, at least 8, the start says\n"
               "       what it drops), $XDG_CONFIG_HOME/multidecode/keys (see assets/keys)\n");
}

/* dir/multidecode (created) from $VAR or ~/fallback into out; false when impossible. */
static bool app_dir(const char *var, const char *fallback, char *out, size_t cap) {
    const char *base = getenv(var), *home = getenv("HOME");
    char tmp[4096];
    if (base && *base) snprintf(tmp, sizeof tmp, "%s", base);
    else if (home && *home) snprintf(tmp, sizeof tmp, "%s/%s", home, fallback);
    else return false;
    if (snprintf(out, cap, "%s/multidecode", tmp) >= (int)cap) return false;
    /* mkdir -p */
    for (char *p = out + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(out, 0755) && errno != EEXIST) return false;
            *p = '/';
        }
    return !mkdir(out, 0755) || errno == EEXIST;
}

typedef struct tui_app {
    prompt_model pm;
    const char *model_path;
} tui_app;

static st_code tui_save(void *ud, const char *path, const forest *f, session_settings *s, st_err *err) {
    tui_app *a = ud;
    snprintf(s->model_path, sizeof s->model_path, "%s", a->model_path);
    return (st_code)app_session_save(path, f, a->pm.m, a->pm.tk, s, err);
}

static forest *tui_load(void *ud, const char *path, bool force, sample_params *sp, session_meta **meta,
                        st_err *err) {
    tui_app *a = ud;
    session_settings s = session_settings_default();
    forest *f = app_session_load(path, a->pm.m, a->model_path, a->pm.n_slots, force, &s, err);
    if (f) *sp = s.sample, *meta = s.meta, s.meta = NULL;
    else if (err->code == ST_ERR_ARG && !force) { /* another model's: the TUI's way to force it */
        char *cli = strstr(err->msg, " (or force loading");
        size_t n = cli ? (size_t)(cli - err->msg) : strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, ", or :load! FILE loads it anyway");
    }
    session_settings_free(&s);
    return f;
}

typedef struct tui_opts {
    prompt_model_opts mo;
    sample_params sp;
    const char *load, *text; /* --load FILE, the PROMPT argument (NULL: none) */
    int64_t budget;
    double row_cost; /* --row-cost C; 0: measured */
    bool raw;
} tui_opts;

/* The command line: -1 to go on, else the exit status (0 after --help, 2 for a bad
 * option). */
static int tui_parse(int argc, char **argv, tui_opts *o) {
    static const struct option lo[] = {PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
                                       {"load", 1, 0, 'L'}, {"budget", 1, 0, 'N'}, {"raw", 0, 0, 'R'},
                                       {"row-cost", 1, 0, 'C'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int ch, r;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "m:t:c:h", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&o->mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&o->sp, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'L': o->load = optarg; break;
        case 'R': o->raw = true; break;
        case 'N':
            if (app_opt_int("--budget", optarg, 1, 1 << 20, &o->budget)) return 2;
            break;
        case 'C':
            if (app_parse_float(optarg, &o->row_cost) || o->row_cost <= 0 || o->row_cost > 100)
                return app_usage_error("bad --row-cost '%s' (want a number above 0, at most 100)", optarg);
            break;
        case 'h': tui_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode tui --help", TUI_USAGE);
        }
    }
    if (optind + 1 < argc) return app_usage_error("one PROMPT at most (quote it)");
    o->text = optind < argc ? argv[optind] : NULL;
    if (!o->mo.path) return app_usage_error("the TUI needs a model: -m MODEL");
    if (!isatty(0) || !isatty(1)) return app_usage_error("the TUI needs a terminal");
    return -1;
}

/* The forest the TUI starts with (a --load session, with its scores into *meta, the
 * prompt, or none) and its first status line into hello. NULL + err. */
static forest *tui_first_forest(tui_app *a, tui_opts *o, session_meta **meta, char *hello, size_t cap,
                                st_err *err) {
    forest *f = NULL;
    if (o->load) {
        session_settings s = session_settings_default();
        f = app_session_load(o->load, a->pm.m, o->mo.path, a->pm.n_slots, false, &s, err);
        if (f) o->sp = s.sample, *meta = s.meta, s.meta = NULL;
        snprintf(hello, cap, "loaded %s%s%.200s: press s to compute it", o->load,
                 f && s.warning[0] ? ", warning: " : "", f ? s.warning : "");
        session_settings_free(&s);
    } else if ((f = forest_init(a->pm.n_slots, TUI_TOPK)) && o->text) {
        /* the prompt is typed text: a user turn when the model has a chat template */
        prompt_chat pc = {.raw = o->raw};
        prompt_chat_decide(&pc, a->pm.m, o->text);
        int32_t n = 0;
        int32_t *t = prompt_tokens(&a->pm, &pc, o->text, &n, NULL, err);
        st_code rc = t ? forest_add_root(f, t, NULL, n, 0, NULL, err) : err->code;
        free(t);
        if (rc) forest_free(f), f = NULL;
        snprintf(hello, cap, "n grows the selected branch, c forks 4 chains, v shows the mask, ? help");
    } else if (f)
        snprintf(hello, cap, "press a to type a prompt, ? for help");
    if (!f && !err->code) st_set(err, ST_ERR_NOMEM, "out of memory");
    return f;
}

/* Where the TUI keeps its files: the state folder's autosaves, history and log, the
 * config folder's keys. */
typedef struct tui_paths {
    bool have_state, have_config;
    char state[4096], config[4096];
    char autosave[4200], last[4200], history[4200], log[4200], keys[4200];
} tui_paths;

static void tui_paths_init(tui_paths *t) {
    t->have_state = app_dir("XDG_STATE_HOME", ".local/state", t->state, sizeof t->state);
    t->have_config = app_dir("XDG_CONFIG_HOME", ".config", t->config, sizeof t->config);
    autosave_name(t->state, 0, t->autosave, sizeof t->autosave);
    autosave_name(t->state, 1, t->last, sizeof t->last);
    snprintf(t->history, sizeof t->history, "%s/history", t->state);
    snprintf(t->log, sizeof t->log, "%s/tui.log", t->state);
    snprintf(t->keys, sizeof t->keys, "%s/keys", t->config);
}

/* The sampler a TUI starts with: the defaults with a seed of its own (--seed sets one),
 * so that two sessions do not repeat each other; each run then draws the next seed. */
static sample_params tui_sample_params(void) {
    sample_params sp = sample_default_params();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    sp.seed = sample_next_seed((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + ((uint64_t)getpid() << 40));
    return sp;
}

int cmd_tui(int argc, char **argv) {
    tui_opts o = {.mo = prompt_model_default_opts(), .sp = tui_sample_params(), .budget = 32};
    int r = tui_parse(argc, argv, &o);
    if (r >= 0) return r;
    tui_paths tp;
    tui_paths_init(&tp);

    st_err err = {0};
    tui_app a = {.model_path = o.mo.path};
    if (prompt_model_open(&a.pm, &o.mo, &err)) return app_fail(&err);
    char hello[512] = "";
    session_meta *meta = NULL;
    forest *f = tui_first_forest(&a, &o, &meta, hello, sizeof hello, &err);
    if (!f) {
        prompt_model_close(&a.pm);
        return app_fail(&err);
    }
    if (tp.have_state) { /* after a --load, which may name the autosave */
        autosave_params ap = autosave_default_params();
        char note[200];
        if (autosave_rotate(tp.state, &ap, note, sizeof note, &err)) fprintf(stderr, "multidecode: %s\n", err.msg);
        if (note[0]) snprintf(hello + strlen(hello), sizeof hello - strlen(hello), " | %s", note);
    }
    if (!o.load && tp.have_state && access(tp.last, R_OK) == 0)
        snprintf(hello + strlen(hello), sizeof hello - strlen(hello),
                 " | last session: :load restores it");
    /* the chat template :ask and :margins render with, and its default system message */
    const char *jinja = NULL;
    if (gguf_get_str(a.pm.m->gguf, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    size_t n_sys = chat_default_system(jinja, NULL, 0);
    char *chat_system = n_sys > 0 ? malloc(n_sys + 1) : NULL;
    if (chat_system) chat_default_system(jinja, chat_system, n_sys + 1);
    const char *slash = strrchr(o.mo.path, '/');
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    ui_tui_params p = {
        .wp = {.ctx = a.pm.ctx, .tk = a.pm.tk, .f = f, .meta = meta, .sp = o.sp, .budget = (int32_t)o.budget,
               .row_cost = o.row_cost, .unsaved = o.text && !o.load,
               .save = tui_save, .load = tui_load, .ud = &a,
               .model_name = slash ? slash + 1 : o.mo.path, .backend = o.mo.backend,
               .threads = o.mo.threads ? o.mo.threads : (int32_t)(nproc > 0 ? nproc : 1),
               .chat = {.kind = prompt_model_chat(a.pm.m->gguf), .system = chat_system}, .raw = o.raw},
        .autosave = tp.have_state ? tp.autosave : NULL,
        .last_session = tp.have_state ? tp.last : NULL,
        .history = tp.have_state ? tp.history : NULL,
        .log = tp.have_state ? tp.log : NULL,
        .keys_default = access("assets/keys", R_OK) == 0 ? "assets/keys"
                        : access(MD_DATADIR "/keys", R_OK) == 0 ? MD_DATADIR "/keys"
                                                                 : NULL,
        .keys_user = tp.have_config ? tp.keys : NULL,
        .hello = hello,
        .model = a.pm.m,
    };
    st_code rc = ui_tui_run(&p, &err);
    if (rc && rc != ST_OK) forest_free(f); /* the worker never took it */
    session_meta_free(meta);
    free(chat_system);
    prompt_model_close(&a.pm);
    if (rc) return app_fail(&err);
    /* ended by a signal (Ctrl-C, Ctrl-\\, kill): the shell's convention, 128 + its number */
    return ui_screen_signal() ? 128 + ui_screen_signal() : 0;
}
