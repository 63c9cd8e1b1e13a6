/* command.h - the command line's language: ":grow 32", ":cot 8", ":beam 4 64", ":ask
 * TEXT", ":margins [CHUNK] QUESTION", ":draft 64", ":lookahead 5 4 4 64", ":append TEXT",
 * ":prune", ":merge", ":judge", ":tot 3 2 3", ":keep 3", ":sort score", ":step", ":save FILE", ":load FILE",
 * ":export FILE", ":set temp 0.7", ":bind KEY ACTION", ":pause", ":cancel", ":help",
 * ":quit". A line not starting with ':' is text to append under the selected node.
 * Parsing is plain C (unit-tested): a line becomes a ui_cmd or a message saying what is
 * wrong; a command that runs something as it is comes with its job (job.h). Not here:
 * running a command (tui.c, worker.c). */
#ifndef MD_UI_COMMAND_H
#define MD_UI_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "job.h"

typedef enum {
    UI_CMD_NONE = 0, /* an empty line */
    UI_CMD_GROW,     /* job: grow [TOKENS] (budget 0: the `budget` setting) */
    UI_CMD_COT,      /* job: cot.k chains of [TOKENS] */
    UI_CMD_BEAM,     /* job: beam.width, [TOKENS] as max tokens */
    UI_CMD_ASK,      /* job: ask; text: a user turn (with the model's chat template) under
                        the selected node, then grown */
    UI_CMD_MARGINS,  /* job: margins, u.run.chunk = [CHUNK] (0: the default); text = the
                        question */
    UI_CMD_DRAFT,    /* job: draft [TOKENS]: exact greedy, drafts verified in the forest */
    UI_CMD_LOOKAHEAD,/* job: lookahead, spec.p.la = W >= 1, N (2..16), G >= 0 (W x N <=
                        4096), [TOKENS]: the same plus lookahead decoding's window */
    UI_CMD_APPEND,   /* job: append text under the selected node */
    UI_CMD_PRUNE,    /* job: prune */
    UI_CMD_MERGE,    /* job: merge */
    UI_CMD_JUDGE,    /* job: judge; text = the judge's question ("": the default) */
    UI_CMD_TOT,      /* job: tot.k, tot.b kept, tot.d levels, [TOKENS] per thought */
    UI_CMD_KEEP,     /* job: keep u.keep.n */
    UI_CMD_SORT,     /* val = a ui_sort (scores.h): how the forest pane orders siblings */
    UI_CMD_NAME,     /* job: name; text = the name ("": clear it) */
    UI_CMD_STEP,     /* job: steps.n = [N] (default 1) */
    UI_CMD_SAVE,     /* text: file ("" = the autosave file); a leading ~/ is $HOME */
    UI_CMD_LOAD,     /* text: file ("" = the last run's autosave), ~/ as for save; force
                        (":load!"): even a session saved with another model */
    UI_CMD_EXPORT,   /* job: export; text: Markdown file, ~/ as for save */
    UI_CMD_COMPACT,  /* job: compact */
    UI_CMD_SET,      /* key = setting, val = value; key "": show the settings */
    UI_CMD_BIND,     /* key = KEY, text = ACTION */
    UI_CMD_PAUSE,    /* job: pause */
    UI_CMD_CANCEL,   /* job: cancel */
    UI_CMD_HELP,
    UI_CMD_TOUR,     /* text: the tour's prompt ("" for its own) */
    UI_CMD_QUIT,
    UI_CMD_RUN,      /* job: a registered strategy by its own grammar (strategy.h's usage) */
} ui_cmd_kind;

typedef struct ui_cmd {
    ui_cmd_kind kind;
    ui_job job;     /* what the command posts as it is, with the selection as its node and
                       text as its text (job.node and job.text are left to the caller);
                       UI_JOB_NONE for the commands the TUI does itself (save, load, set,
                       bind, help, quit) */
    double val;     /* :set's value */
    bool force;     /* the name ended with '!' (:load! only) */
    char key[32];   /* :set's name, :bind's key */
    char text[1024];
} ui_cmd;

/* Settings :set knows: temp, top_k, top_p, min_p, seed, budget (grow tokens), chat (on|off,
 * as 1 / 0: whether typed text becomes a chat user turn). */
bool ui_cmd_is_setting(const char *key);

/* Parses one line. ST_OK and *c filled, or ST_ERR_ARG with a message naming the problem
 * and the expected form ("usage: :beam WIDTH [TOKENS]"). */
st_code ui_cmd_parse(const char *line, ui_cmd *c, st_err *err);

/* Command names, for completion and the help: the i-th name (without ':') or NULL past
 * the end; ui_cmd_usage(i) its usage line. */
const char *ui_cmd_name(int32_t i);
const char *ui_cmd_usage(int32_t i);

#endif
