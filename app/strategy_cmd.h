/* strategy_cmd.h - the one command driver of the strategies (cmd_strategy.c) and what a
 * command adds to it. `multidecode NAME` parses the model, prompt, sampling, chat and
 * output options and the strategy's own arguments (strategy.h's grammar), opens the model
 * with the prompt as a forest root, creates the strategy from the root's last node, steps
 * it to its end on the commands' loop (strategy_run.h) and reports. A command whose
 * options or report go beyond the grammar (tot's delimiters and judge, beam's scores and
 * --save) gives an app_strat_cmd with its own options, its setup once the model is open
 * and its report; the driver keeps the rest, so no command repeats getopt, the forest,
 * the plan or the run loop. Not here: the strategies themselves (engine/strategy/). */
#ifndef MD_STRATEGY_CMD_H
#define MD_STRATEGY_CMD_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "progress.h"
#include "prompt.h"
#include "session_opts.h"
#include "session/session.h"
#include "strategy_run.h"

/* The command line as parsed: the driver's options and the strategy's options, which a
 * command's option hook may also set. */
typedef struct app_strat_args {
    strategy_opts o;
    prompt_model_opts mo;
    prompt_chat pc;
    const char *prompt; /* -p, "" when absent */
    const char *context; /* --context FILE (a context command's), NULL when absent */
    app_session_opts so; /* --save / --load (a command with sessions) */
    bool json, quiet;
} app_strat_args;

/* A run, as the setup and report hooks see it; everything belongs to the driver. */
struct app_strat_cmd;

typedef struct app_strat_run {
    const strategy_ops *ops;
    const struct app_strat_cmd *cmd;
    void *self;              /* the command's state (app_strategy_cmd's self) */
    app_strat_args *a;
    prompt_model *pm;
    chat_kind kind;          /* the template the prompt used, CHAT_NONE for none */
    const int32_t *prompt;   /* (n_prompt) the prompt's tokens, the forest's root chain;
                                NULL for a context command (no root: o.from FOREST_NONE) */
    int32_t n_prompt;
    const char *context;     /* a context command's file text, NULL otherwise */
    forest *f;
    strategy *s;             /* NULL until the setup has run */
    strategy_env env;
    app_run_stats st;        /* st.full: a full KV cache stopped the run */
    app_progress pr;         /* the progress line on stderr (off with -q) */
} app_strat_run;

/* What a command adds to the driver; every member may be zero (the generic command). */
typedef struct app_strat_cmd {
    const char *usage;       /* "usage: multidecode NAME -m MODEL -p PROMPT [options]", the
                                line a mistyped option prints */
    void (*help)(FILE *f);   /* --help's text */
    const struct option *longopts; /* its own getopt_long entries ({0}-ended), NULL: none */
    const char *shortopts;   /* its own short options, "k:b:d:" */
    bool no_sample;          /* the sampling options are not its (beam) */
    /* Questions over a text file instead of a prompt (ask, margins): --context FILE
     * (-x) is needed, there is no -p, no --chat or --think, and -q is the command's own
     * (a question), so quiet is --quiet or -Q. The model opens with the file's text; the
     * chat rule is decided for a context (prompt_chat_decide with no text). */
    bool context;
    /* --save FILE / --load FILE / --force-model (session_opts.h): --load replays the
     * session (app_session_replay) instead of running; the report saves (a->so.save). */
    bool session;
    const char *reserve;     /* NULL: the prompt must fit the KV cache; else the prompt and
                                o.budget more tokens, named so ("the prompt and -n tokens") */
    /* Its defaults into a (before parsing). */
    void (*defaults)(void *self, app_strat_args *a);
    /* Option ch (short: a short option letter, not a long option's code) with arg: 0 when
     * handled, > 0 to exit with that status (a usage error printed), -1 when not its own. */
    int (*opt)(void *self, app_strat_args *a, int ch, bool is_short, const char *arg);
    /* After parsing (and --load, --context), before the model opens: -1 to go on, else
     * the exit status (a usage error). */
    int (*check)(void *self, app_strat_args *a);
    /* The model open and the root added (r->a->o.from), before the strategy is created:
     * options that need the model (a judge's tokens). */
    st_code (*setup)(void *self, app_strat_run *r, st_err *err);
    /* After each step, with ud the app_strat_run (its progress line in pr). NULL:
     * app_run_progress_tick. */
    app_run_tick_fn tick;
    /* The strategy created, before its first step: checks of what it made (margins'
     * prompts against the cache), lines to show before the run. */
    st_code (*created)(void *self, app_strat_run *r, st_err *err);
    /* What --save records beyond the common settings (app_strat_save): its options and
     * which result (strategy, seed) made each node. NULL: nothing more. */
    st_code (*save)(void *self, const app_strat_run *r, session_settings *ss, st_err *err);
    /* After the run: results, statistics, --save (app_strat_save). NULL: app_strat_report. */
    st_code (*report)(void *self, app_strat_run *r, st_err *err);
    void (*free)(void *self); /* what the hooks allocated; called once, parsed or not */
} app_strat_cmd;

/* `multidecode NAME`: ops's command with cmd's additions (NULL: none) on self, the
 * command's own state; argv[0] is NAME. Returns the exit status. */
int app_strategy_cmd(const strategy_ops *ops, const app_strat_cmd *cmd, void *self, int argc, char **argv);

/* The generic report: the results as text or JSON, the full-cache note and the statistics
 * line. */
st_code app_strat_report(void *self, app_strat_run *r, st_err *err);

/* --save FILE (r->a->so.save): the forest with the common settings (the command's name,
 * the model path, sampler sp (NULL: the defaults), template kind), what the command's save
 * hook adds, and the model's identity, written atomically: the one save of every command.
 * ST_OK, or the failure's code with err (the old file untouched). */
st_code app_strat_save(const app_strat_run *r, const sample_params *sp, chat_kind kind, st_err *err);

/* A full KV cache with no result to show: ST_NO_KV_SLOT (app_run_full_error); else ST_OK. */
st_code app_strat_full_check(const app_strat_run *r, st_err *err);

#endif
