/* tui.h - the TUI: forest, text and mask panes, status line, command line and help, over
 * an engine worker thread (worker.h). app/cmd_tui.c opens the model and calls ui_tui_run.
 * Not here: option parsing, model loading, session files (the callbacks in wp). */
#ifndef MD_UI_TUI_H
#define MD_UI_TUI_H

#include "base/status.h"
#include "model/model.h"
#include "worker.h"

typedef struct ui_tui_params {
    ui_worker_params wp;      /* the worker takes wp.f */
    const char *autosave;     /* session file saved on quit and every 30 s of changes */
    const char *last_session; /* what :load without a file restores (the last run's
                                 autosave; may be NULL) */
    const char *history;      /* command-line history file (may be NULL) */
    const char *log;          /* stderr while the screen is up (may be NULL) */
    const char *keys_default; /* shipped bindings (assets/keys, may be NULL) */
    const char *keys_user;    /* the user's bindings (may be NULL) */
    const char *hello;        /* first message on the command line (may be NULL) */
    const model *model;       /* for :tour's own small context (NULL: no tour) */
} ui_tui_params;

/* Runs until quit or a signal. ST_OK; ST_ERR_IO when the terminal cannot be used (then
 * p->wp.f still belongs to the caller) or the worker cannot start. */
st_code ui_tui_run(const ui_tui_params *p, st_err *err);

#endif
