/* run_summary.h - what a finished strategy run did, in one line for the TUI's "done"
 * message, as its table's summary style says (strategy.h, strategy_summary): branches
 * ("+12 tokens, 2 branches; stopped: budget"), chains ("5 of 6 chains, 1 ended at once,
 * +40 tokens; stopped: ..."), ranked results ("2 results, best score -1.23; stopped:
 * ..."). Built from the uniform results only, so a new strategy needs nothing here. Not
 * here: the progress line of STRAT_SUM_PROGRESS strategies and the job's note around it
 * (worker.c). */
#ifndef MD_UI_RUN_SUMMARY_H
#define MD_UI_RUN_SUMMARY_H

#include <stdbool.h>
#include <stddef.h>

#include "forest/forest.h"
#include "strategy/strategy.h"
#include "tok/tok.h"

/* The summary of run s over its forest f into out ("" for STRAT_SUM_NONE and
 * STRAT_SUM_PROGRESS). chat: the model has a chat template, so an end token other than
 * <|endoftext|> reads "end of turn". */
void ui_run_summary(const strategy *s, const forest *f, const tok *tk, bool chat, char *out, size_t cap);

#endif
