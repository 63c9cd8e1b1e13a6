/* session_replay.h - what the decoding commands (ask, cot, beam, margins) share for
 * `--save` and `--load` beyond the option glue of session_opts.h: filling the settings
 * of a run (sampler, template, command name and options, which strategy and seed made
 * each generated node), and replaying a saved session: load it for the model, recompute
 * every node in one forest step, then print each saved branch (its prompt's end and what
 * was generated after it).
 *
 * In a replay a branch's generated part is the run of scored nodes (logprob not NAN) at
 * the bottom of its root-to-leaf path; the rest is prompt text. Not here: the session
 * format (engine/session/session.h), option parsing (session_opts.h). */
#ifndef MD_SESSION_REPLAY_H
#define MD_SESSION_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "prompt.h"
#include "session_opts.h"

/* A fresh settings struct (session_settings_free it) for command cmd ("cot", ...) run
 * with model path mpath, sampler sp (may be NULL: default) and chat template kind
 * (CHAT_NONE: none); with an empty metadata table. ST_ERR_NOMEM. */
st_code app_session_settings(session_settings *s, const char *cmd, const char *mpath,
                             const sample_params *sp, chat_kind kind, st_err *err);

/* Key set to the decimal value v (session_settings_set). ST_ERR_NOMEM. */
st_code app_session_set_int(session_settings *s, const char *key, int64_t v, st_err *err);

/* Records strategy and seed for every node below from (excluded; FOREST_NONE: the whole
 * path) down to leaf. ST_ERR_ARG (stale), ST_ERR_NOMEM. */
st_code app_session_mark(session_settings *s, const forest *f, forest_id from, forest_id leaf,
                         const char *strategy, uint64_t seed, st_err *err);

/* `CMD --load FILE`: opens the model of mo, loads the session (force: even when saved
 * with another model), recomputes every node in one step and prints its branches (JSON
 * with json), with statistics on stderr unless quiet. Returns the exit status. */
int app_session_replay(const char *cmd, const app_session_opts *so, const prompt_model_opts *mo,
                       bool json, bool quiet);

#endif
