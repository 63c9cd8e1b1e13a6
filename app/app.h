/* app.h - the subcommands of the multidecode program. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status; only main.c
 * calls exit(). Errors go to stderr as "multidecode: <message>". */
#ifndef MD_APP_H
#define MD_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h" /* mono_now_s, the one monotonic clock */
#include "base/status.h"

#define MD_VERSION "0.1.0"

int cmd_info(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ask(int argc, char **argv);
/* `bench forest` and `bench ask` (cmd_bench_forest.c); argv[0] is "forest" / "ask". */
int cmd_bench_forest(int argc, char **argv);
int cmd_bench_ask(int argc, char **argv);
/* `bench attention` (cmd_bench_attn.c); argv[0] is "attention". */
int cmd_bench_attention(int argc, char **argv);
/* `bench memory` (cmd_bench_mem.c): read bandwidth; argv[0] is "memory". */
int cmd_bench_memory(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
/* `session info FILE` and `session export FILE --markdown` (cmd_session.c). */
int cmd_session(int argc, char **argv);
/* `beam` (cmd_beam.c), `cot` (cmd_cot.c); `bench beam` and `bench cot`
 * (cmd_bench_strategy.c; argv[0] is "beam" / "cot"). */
int cmd_beam(int argc, char **argv);
int cmd_cot(int argc, char **argv);
int cmd_bench_beam(int argc, char **argv);
int cmd_bench_cot(int argc, char **argv);
int cmd_bench_spec(int argc, char **argv);
/* `judge` (cmd_judge.c) and `tot` (cmd_tot.c): judging branches in one step, and tree of
 * thoughts over it. */
int cmd_judge(int argc, char **argv);
int cmd_tot(int argc, char **argv);
/* `margins` (cmd_margins.c): Writing in the Margins over one forest. */
int cmd_margins(int argc, char **argv);
/* `tui` and `multidecode -m MODEL ...` (cmd_tui.c): the interactive explorer. */
int cmd_tui(int argc, char **argv);

/* Prints "multidecode: <err->msg>" (or the code's text) to stderr and returns 1. */
int app_fail(const st_err *err);
/* Prints "multidecode: <formatted>" to stderr and returns 2 (usage errors). */
int app_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a whole decimal integer in [lo, hi] / a number finite as a float (1e300 is
 * not: every caller keeps a float); returns 0 on success, -1 (out untouched) for anything
 * else, an out-of-range number included. */
int app_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
int app_parse_float(const char *s, double *out);
/* Option name's integer argument s in [lo, hi]: 0, or 2 after printing "bad NAME 'S' (want
 * an integer from LO to HI)" (return it from the command). */
int app_opt_int(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out);
/* The same for a 64-bit unsigned value (seeds): 0 to 2^64 - 1. */
int app_opt_u64(const char *name, const char *s, uint64_t *out);

struct cot_vote_spec;
/* The output options cot, judge and tot share: --vote (getopt code o_vote), --json ('J'),
 * --quiet ('q'). 0 when ch was one of them, 2 after a usage error, -1 for any other ch. */
int app_vote_opt(int ch, int o_vote, const char *arg, struct cot_vote_spec *vote, bool *json, bool *quiet);
/* After getopt: a usage error (2) for a stray argument or a missing -m MODEL, else -1. */
int app_opt_end(int argc, char **argv, const char *model, const char *cmd);

/* A progress line on stderr for long strategy runs (cmd_beam.c): at most once a second,
 * after the first second; rewritten in place on a terminal, one line each otherwise. */
typedef struct app_progress {
    double t0, last;
    bool on, tty, shown;
} app_progress;
void app_progress_init(app_progress *p, bool on);
void app_progress_tick(app_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void app_progress_end(app_progress *p); /* clears a terminal line */

#endif
