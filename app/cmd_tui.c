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
#include <unistd.h>

#include "forest/forest.h"
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
               "      --temp T         temperature; 0 = greedy (default 0.8)\n"
               PROMPT_SAMPLE_HELP
               "\nfiles: $XDG_STATE_HOME/multidecode/{autosave.json,history,tui.log},\n"
               "       autosave.1.json .. autosave.4.json there: the runs before (:load\n"
               "       restores the last), $XDG_CONFIG_HOME/multidecode/keys (see assets/keys)\n");
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

#define TUI_AUTOSAVES 5 /* autosave.json (this run) and autosave.1.json .. .4.json before it */

/* The autosave file of the run i runs ago (0: this one) in the state folder. */
static void autosave_name(const char *state, int i, char *out, size_t cap) {
    if (i == 0) snprintf(out, cap, "%s/autosave.json", state);
    else snprintf(out, cap, "%s/autosave.%d.json", state, i);
}

/* The last run's autosave.json becomes autosave.1.json (.1 becomes .2, ...; the oldest is
 * dropped), so this run's autosave never replaces the work of the runs before it. Nothing
 * moves when there is no autosave.json (an untouched run writes none). */
static void autosave_rotate(const char *state) {
    char from[4200], to[4200];
    autosave_name(state, 0, from, sizeof from);
    if (access(from, F_OK) != 0) return;
    for (int i = TUI_AUTOSAVES - 1; i >= 1; i--) {
        autosave_name(state, i - 1, from, sizeof from);
        autosave_name(state, i, to, sizeof to);
        if (rename(from, to) && errno != ENOENT)
            fprintf(stderr, "multidecode: cannot keep the autosave %s: %s\n", from, strerror(errno));
    }
}

typedef struct tui_app {
    prompt_model pm;
    const char *model_path;
} tui_app;

static st_code tui_save(void *ud, const char *path, const forest *f, const sample_params *sp, st_err *err) {
    tui_app *a = ud;
    session_settings s = session_settings_default();
    s.sample = *sp;
    snprintf(s.model_path, sizeof s.model_path, "%s", a->model_path);
    st_code rc = (st_code)app_session_save(path, f, a->pm.m, a->pm.tk, &s, err);
    session_settings_free(&s);
    return rc;
}

static forest *tui_load(void *ud, const char *path, sample_params *sp, st_err *err) {
    tui_app *a = ud;
    session_settings s = session_settings_default();
    forest *f = app_session_load(path, a->pm.m, a->model_path, a->pm.n_slots, false, &s, err);
    if (f) *sp = s.sample;
    session_settings_free(&s);
    return f;
}

int cmd_tui(int argc, char **argv) {
    static const struct option lo[] = {PROMPT_MODEL_LONGOPTS, PROMPT_SAMPLE_LONGOPTS,
                                       {"load", 1, 0, 'L'}, {"budget", 1, 0, 'N'}, {"raw", 0, 0, 'R'},
                                       {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    sample_params sp = sample_default_params();
    const char *load = NULL;
    int64_t budget = 32;
    bool raw = false;
    int ch, r;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "m:t:c:h", lo, NULL)) != -1) {
        if ((r = prompt_model_opt(&mo, ch, optarg)) >= 0 || (r = prompt_sample_opt(&sp, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'L': load = optarg; break;
        case 'R': raw = true; break;
        case 'N':
            if (app_opt_int("--budget", optarg, 1, 1 << 20, &budget)) return 2;
            break;
        case 'h': tui_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode tui --help", TUI_USAGE);
        }
    }
    if (optind + 1 < argc) return app_usage_error("one PROMPT at most (quote it)");
    const char *text = optind < argc ? argv[optind] : NULL;
    if (!mo.path) return app_usage_error("the TUI needs a model: -m MODEL");
    if (!isatty(0) || !isatty(1)) return app_usage_error("the TUI needs a terminal");

    char state[4096] = "", config[4096] = "", autosave[4200], history[4200], logf[4200], keys[4200];
    bool have_state = app_dir("XDG_STATE_HOME", ".local/state", state, sizeof state);
    bool have_config = app_dir("XDG_CONFIG_HOME", ".config", config, sizeof config);
    char last[4200];
    autosave_name(state, 0, autosave, sizeof autosave);
    autosave_name(state, 1, last, sizeof last);
    snprintf(history, sizeof history, "%s/history", state);
    snprintf(logf, sizeof logf, "%s/tui.log", state);
    snprintf(keys, sizeof keys, "%s/keys", config);

    st_err err = {0};
    tui_app a = {.model_path = mo.path};
    if (prompt_model_open(&a.pm, &mo, &err)) return app_fail(&err);
    forest *f = NULL;
    char hello[512] = "";
    if (load) {
        session_settings s = session_settings_default();
        f = app_session_load(load, a.pm.m, mo.path, a.pm.n_slots, false, &s, &err);
        if (f) sp = s.sample;
        session_settings_free(&s);
        snprintf(hello, sizeof hello, "loaded %s: press s to compute it", load);
    } else if ((f = forest_init(a.pm.n_slots, TUI_TOPK)) && text) {
        /* the prompt is typed text: a user turn when the model has a chat template */
        prompt_chat pc = {.on = !raw && prompt_model_chat(a.pm.m->gguf) != CHAT_NONE};
        int32_t n = 0;
        int32_t *t = prompt_tokens(&a.pm, &pc, text, &n, NULL, &err);
        st_code rc = t ? forest_add_root(f, t, NULL, n, 0, NULL, &err) : err.code;
        free(t);
        if (rc) forest_free(f), f = NULL;
        snprintf(hello, sizeof hello, "n grows the selected branch, c forks 4 chains, v shows the mask, ? help");
    } else if (f)
        snprintf(hello, sizeof hello, "press a to type a prompt, ? for help");
    if (!f) {
        if (!err.code) st_set(&err, ST_ERR_NOMEM, "out of memory");
        prompt_model_close(&a.pm);
        return app_fail(&err);
    }
    if (have_state) autosave_rotate(state); /* after a --load, which may name the autosave */
    if (!load && have_state && access(last, R_OK) == 0)
        snprintf(hello + strlen(hello), sizeof hello - strlen(hello),
                 " | last session: :load restores it");
    /* the chat template :ask and :margins render with, and its default system message */
    const char *jinja = NULL;
    if (gguf_get_str(a.pm.m->gguf, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    size_t n_sys = chat_default_system(jinja, NULL, 0);
    char *chat_system = n_sys > 0 ? malloc(n_sys + 1) : NULL;
    if (chat_system) chat_default_system(jinja, chat_system, n_sys + 1);
    const char *slash = strrchr(mo.path, '/');
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    ui_tui_params p = {
        .wp = {.ctx = a.pm.ctx, .tk = a.pm.tk, .f = f, .sp = sp, .budget = (int32_t)budget,
               .save = tui_save, .load = tui_load, .ud = &a,
               .model_name = slash ? slash + 1 : mo.path, .backend = mo.backend,
               .threads = mo.threads ? mo.threads : (int32_t)(nproc > 0 ? nproc : 1),
               .chat = {.kind = prompt_model_chat(a.pm.m->gguf), .system = chat_system}, .raw = raw},
        .autosave = have_state ? autosave : NULL,
        .last_session = have_state ? last : NULL,
        .history = have_state ? history : NULL,
        .log = have_state ? logf : NULL,
        .keys_default = access("assets/keys", R_OK) == 0 ? "assets/keys"
                        : access(MD_DATADIR "/keys", R_OK) == 0 ? MD_DATADIR "/keys"
                                                                 : NULL,
        .keys_user = have_config ? keys : NULL,
        .hello = hello,
    };
    st_code rc = ui_tui_run(&p, &err);
    if (rc && rc != ST_OK) forest_free(f); /* the worker never took it */
    free(chat_system);
    prompt_model_close(&a.pm);
    if (rc) return app_fail(&err);
    /* ended by a signal (Ctrl-C, Ctrl-\\, kill): the shell's convention, 128 + its number */
    return ui_screen_signal() ? 128 + ui_screen_signal() : 0;
}
