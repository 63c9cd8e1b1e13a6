/* autosave.h - the TUI's autosave generations in a folder: autosave.json (this run's),
 * autosave.1.json (the run before), autosave.2.json, ... Each start moves them one
 * generation back, so a run's autosave never replaces the work of the runs before it,
 * and drops the oldest only beyond a count and a total size, naming what it dropped.
 *
 * Not here: writing a session (session.h), where the folder is (app/cmd_tui.c). */
#ifndef MD_SESSION_AUTOSAVE_H
#define MD_SESSION_AUTOSAVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct autosave_params {
    int32_t max_gens;   /* generations kept before this run's at most (autosave.1 ..) */
    int32_t min_gens;   /* ... and at least, whatever their size */
    int64_t max_bytes;  /* their total size beyond which the oldest go (above min_gens) */
} autosave_params;

/* 100 generations, at least 8, 256 MiB in all. */
autosave_params autosave_default_params(void);

/* The file of the run i runs ago (0: this run's) in dir, into out (cap bytes). */
void autosave_name(const char *dir, int32_t i, char *out, size_t cap);

/* Moves autosave.json to autosave.1.json, .1 to .2 and so on, then drops the oldest
 * generations beyond p's limits. Nothing moves without an autosave.json (an untouched
 * run writes none). note (cap > 0) gets "" or what was dropped ("dropped the oldest
 * autosave, autosave.9.json (12 MiB): 256 MiB of autosaves kept"). ST_OK, ST_ERR_IO when
 * a file could not be moved (err says which; the others moved). */
st_code autosave_rotate(const char *dir, const autosave_params *p, char *note, size_t cap, st_err *err);

#endif
