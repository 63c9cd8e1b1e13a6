/* app.h - the subcommands of the multidecode program. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status; only main.c
 * calls exit(). Errors go to stderr as "multidecode: <message>". */
#ifndef MD_APP_H
#define MD_APP_H

#include <stdint.h>

#include "../kernels/status.h"

#define MD_VERSION "0.1.0"

int cmd_info(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);

/* Prints "multidecode: <err->msg>" (or the code's text) to stderr and returns 1. */
int app_fail(const st_err *err);
/* Prints "multidecode: <formatted>" to stderr and returns 2 (usage errors). */
int app_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a whole decimal integer / float argument; returns 0 on success. */
int app_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
int app_parse_float(const char *s, double *out);
/* Monotonic seconds. */
double app_now(void);

#endif
