/* session_opts.h - what the decoding commands (cot, beam, ask, margins) call to honour
 * `--save FILE` and `--load FILE`: the option table entries and their help, and save /
 * load helpers that fill in the model identity from the loaded model.
 *
 * A command adds SESSION_OPTS_LONGOPTS to its getopt_long table, passes every option to
 * app_session_opt, then, when o.load is set, starts from app_session_load's forest
 * (all nodes pending: the next step recomputes them) instead of a fresh one, and, when
 * o.save is set, calls app_session_save at the end. The option codes are above 255, so
 * they never collide with a command's short options. Not here: the session format
 * (engine/session/session.h). */
#ifndef MD_SESSION_OPTS_H
#define MD_SESSION_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "model/model.h"
#include "session/session.h"
#include "tok/tok.h"

enum { APP_SESSION_OPT_SAVE = 0x5301, APP_SESSION_OPT_LOAD, APP_SESSION_OPT_FORCE };

#define SESSION_OPTS_LONGOPTS                                                          \
    {"save", 1, 0, APP_SESSION_OPT_SAVE}, {"load", 1, 0, APP_SESSION_OPT_LOAD},        \
        {"force-model", 0, 0, APP_SESSION_OPT_FORCE}
#define SESSION_OPTS_HELP                                                                   \
    "      --save FILE      save the forest, its settings and the model's identity to FILE\n" \
    "                       (JSON, written atomically) when done\n"                         \
    "      --load FILE      start from the forest of session FILE (recomputed in one step)\n" \
    "      --force-model    load a session saved with a different model anyway\n"

typedef struct app_session_opts {
    const char *save;  /* --save FILE, NULL when absent */
    const char *load;  /* --load FILE, NULL when absent */
    bool force;        /* --force-model */
} app_session_opts;

/* Handles option ch with its argument: 0 when it is one of the session options, -1 when
 * not (the caller goes on with its own). */
int app_session_opt(app_session_opts *o, int ch, const char *arg);

/* Saves forest f with settings s (s->model_path names the model file: set it to the -m
 * path; s->meta may carry per-node metadata) and the identity of model m (may be NULL:
 * unknown) to path, atomically; tk (may be NULL) adds the branch texts. Returns ST_OK or
 * the failure's st_code, with err saying why (the old file is then untouched). */
int app_session_save(const char *path, const forest *f, const model *m, const tok *tk,
                     const session_settings *s, st_err *err);

/* Loads session path for model m (may be NULL: no identity check; model_path, may be
 * NULL, names it in messages) into a new forest of
 * n_slots KV slots (0: as saved; pass the model context's n_slots), filling *s (freed by
 * the caller with session_settings_free). NULL + err: ST_ERR_ARG when the session was
 * saved with another model (unless force) naming both, ST_ERR_FORMAT for a damaged file,
 * ST_ERR_CONTEXT when it has more nodes than n_slots (with the -c option to raise),
 * ST_ERR_IO. Settings the file held out of range are at their defaults, said in
 * s->warning (app_session_warn prints it; the TUI shows it on its status line). */
forest *app_session_load(const char *path, const model *m, const char *model_path,
                         int32_t n_slots, bool force, session_settings *s, st_err *err);

/* Prints the settings a loaded session had out of range (s->warning) on stderr, as a
 * warning naming path; nothing when there were none. */
void app_session_warn(const char *path, const session_settings *s);

#endif
