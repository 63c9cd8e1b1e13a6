/* options.h - what every command parses its arguments with and reports errors through
 * (options.c): messages "multidecode: ..." on stderr, the exit statuses 1 (failure) and 2
 * (usage), whole-number and float arguments checked against their ranges. */
#ifndef MD_APP_OPTIONS_H
#define MD_APP_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

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
/* --vote-all, the getopt_long entry cot and judge add to their tables, and its help line. */
enum { APP_OPT_VOTE_ALL = 0x5601 };
#define APP_VOTE_ALL_LONGOPT {"vote-all", 0, 0, APP_OPT_VOTE_ALL}
#define APP_VOTE_ALL_HELP \
    "      --vote-all       chains the budget cut vote too (by default only ended ones)\n"
/* The output options cot, judge and tot share: --vote (getopt code o_vote), --vote-all,
 * --json ('J'), --quiet ('q'). 0 when ch was one of them, 2 after a usage error, -1 for
 * any other ch. */
int app_vote_opt(int ch, int o_vote, const char *arg, struct cot_vote_spec *vote, bool *json, bool *quiet);
/* After getopt: a usage error (2) for a stray argument or a missing -m MODEL, else -1. */
int app_opt_end(int argc, char **argv, const char *model, const char *cmd);

#endif
