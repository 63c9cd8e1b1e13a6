/* judge_job.h - what the worker builds for :judge and :tot: the branches :judge scores
 * (the bookmarked ones when there are two or more, else every leaf below the fork point
 * at or above the selection: a cot's chains, a beam's hypotheses, the selection's
 * siblings), the judge's tokens in the form chat mode gives (a user turn after the branch
 * with the model's template, plain text without), and the judge or tot strategy over
 * them (engine/strategy/judge.h, engine/strategy/tot.c; a branch that closes its thinking
 * is judged on its answer, judge_cut, from the branches' common ancestor when the selection
 * is below it). Runs on the worker's thread
 * under its lock. Not here: the job queue, the scores' display (tui.c). */
#ifndef MD_UI_JUDGE_JOB_H
#define MD_UI_JUDGE_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "ask_margins.h"
#include "scores.h"
#include "strategy/strategy.h"

/* The branches :judge scores for selection sel, every one of them (no cap): a malloc'd
 * array of *n ids (the caller frees it; *n may be 0), in the forest's depth-first order,
 * and *marked whether they are the bookmarks. NULL + err (ST_ERR_NOMEM). */
forest_id *ui_judge_branches(const forest *f, forest_id sel, int32_t *n, bool *marked, st_err *err);

/* :keep N at selection sel: of the leaves below sel's fork point (as :judge picks them
 * without bookmarks), the n best scored (s) stay, and so do the unscored ones; the others
 * go. Returns the tops of the subtrees to prune (malloc'd, *n_tops, 0 when nothing goes;
 * none inside another), *n_scored the scored leaves, *best the best. NULL + err:
 * ST_ERR_ARG (no scored leaf there), ST_ERR_NOMEM. */
forest_id *ui_judge_keep(const forest *f, const ui_scores *s, forest_id sel, int32_t n, int32_t *n_tops,
                         int32_t *n_scored, forest_id *best, st_err *err);

/* What a judge or tot run needs from the worker besides the job's options. */
typedef struct ui_judge_env {
    const tok *tk;
    const ui_chat *chat;
    bool chat_on;           /* judge as a chat user turn (needs chat->kind) */
} ui_judge_env;

/* The strategy of a job whose table runs a judge (:judge [QUESTION], :tot K B D [TOKENS]):
 * o is its options (job.h) completed by the worker (from = the selection, sample, n_vocab,
 * budget: tot's tokens per thought), set up by the table's judge_setup with the judge's
 * tokens and, for a table with judge_branches, ui_judge_branches(o->from) (:judge scores
 * them; :tot runs from o->from); question "" or NULL: the default. The
 * strategy (strategy_free it) or NULL + err: ST_ERR_ARG (nothing to judge, bad numbers),
 * what judge_tokens and strategy_create report. *note gets a line for the message bar. */
strategy *ui_judge_start(const strategy_env *env, const ui_judge_env *je, const strategy_opts *o,
                         const char *question, char *note, size_t cap, st_err *err);

#endif
