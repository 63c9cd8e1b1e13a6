/* app.h - the subcommands of the multidecode program. Each takes the arguments after its
 * name (argv[0] is the subcommand) and returns the process exit status; only main.c
 * calls exit(). Errors go to stderr as "multidecode: <message>". */
#ifndef MD_APP_H
#define MD_APP_H

#include <stdbool.h>
#include <stdint.h>

#include "base/clock.h" /* mono_now_s, the one monotonic clock */
#include "base/status.h"
#include "options.h"  /* app_fail, app_opt_int, ...: what every command parses with */
#include "progress.h" /* app_progress: the long runs' progress line */

#define MD_VERSION "0.1.0"

int cmd_info(int argc, char **argv);
int cmd_generate(int argc, char **argv);
/* `bench NAME` (bench/bench.c, which passes NAME on to the others of bench/). */
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_ask(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
/* `session info FILE` and `session export FILE --markdown` (cmd_session.c). */
int cmd_session(int argc, char **argv);
/* `beam` (cmd_beam.c), `cot` (cmd_cot.c). */
int cmd_beam(int argc, char **argv);
int cmd_cot(int argc, char **argv);
/* `judge` (cmd_judge.c) and `tot` (cmd_tot.c): judging branches in one step, and tree of
 * thoughts over it. */
int cmd_judge(int argc, char **argv);
int cmd_tot(int argc, char **argv);
/* `margins` (cmd_margins.c): Writing in the Margins over one forest. */
int cmd_margins(int argc, char **argv);
/* `multidecode NAME` for a registered strategy with its own grammar, ops = strategy_find
 * (NAME) with a usage (cmd_strategy.c): argv[0] is NAME. */
struct strategy_ops;
int cmd_strategy(const struct strategy_ops *ops, int argc, char **argv);
/* `tour` (cmd_tour.c): the guided tour of one small forest, screen by screen. */
int cmd_tour(int argc, char **argv);
/* `tui` and `multidecode -m MODEL ...` (cmd_tui.c): the interactive explorer. */
int cmd_tui(int argc, char **argv);

#endif
