/* judge.h - the model judges branches: a short prompt (the judge) appended under each
 * branch, all of them computed in ONE forest step, and the log-probability of the answer
 * read at each judge's end.
 *
 * Score: with two answers (yes and no), score = log P(yes | branch + judge) - log P(no |
 * branch + judge), the log-odds of "yes" over "no" (> 0: the model leans to yes); with
 * only one answer, score = log P(answer | branch + judge). A multi-token answer's
 * log-probability is the sum over its tokens, each read from the logits of the node before
 * it: the judge's last node for the first token, then the answer's own nodes (all but the
 * last token are added to the forest under the judge, so one step still computes every
 * term). The difference rather than P(yes) alone keeps a branch whose judge spreads its
 * mass over other tokens (" Yes", "yes.") from scoring low for that alone.
 *
 * Exactness: the step gives every node the logits of decoding its path alone, so a score
 * equals the one computed from linear decoding of branch path + judge (+ answer prefix),
 * bit for bit (tests/test_judge.c). After reading, the judge chains are pruned (their
 * slots freed); the branches stay as they were, with their scores kept here.
 *
 * Branches that are pending are computed by the same step (their judge hangs under them);
 * any other pending node of the forest is computed too (a step computes the frontier).
 * The caller owns the forest, the plan and the model context. Not here: how the judge
 * text is worded per model (judge_tokens gives the default form), the judge as a strategy
 * (judge.c's table: STRAT_JUDGE), the search that uses it (tot.h). */
#ifndef MD_JUDGE_H
#define MD_JUDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "tok/chat.h"
#include "tok/tok.h"

#define JUDGE_DEFAULT_QUESTION "Is the reasoning above correct? Answer yes or no."

/* The judge's tokens, borrowed by the functions that take it (judge_tokens fills an owned
 * one: free it with judge_tokens_free). */
typedef struct judge_prompt {
    int32_t *prompt;   /* (n_prompt >= 1) appended under every branch */
    int32_t n_prompt;
    int32_t *yes;      /* (n_yes >= 1) the answer whose log-probability counts for */
    int32_t n_yes;
    int32_t *no;       /* (n_no) the answer it counts against; n_no = 0: none */
    int32_t n_no;
} judge_prompt;

/* The judge for question in chat template k: with a template, the close of the branch's
 * assistant turn, question as a user turn, the assistant's header (chat_user_turn's
 * !first form; special tokens parsed), answers "Yes" / "No"; without one (CHAT_NONE),
 * "\n" + question + "\nAnswer:" as plain text, answers " yes" / " no". yes / no not NULL
 * replace the answers' texts (no = "": a single-answer judge). question NULL:
 * JUDGE_DEFAULT_QUESTION. ST_ERR_ARG (a text with no tokens), ST_ERR_NOMEM; out zeroed on
 * failure. */
st_code judge_tokens(const tok *tk, chat_kind k, const char *default_system, const char *question,
                     const char *yes, const char *no, judge_prompt *out, st_err *err);
void judge_tokens_free(judge_prompt *j); /* zeroed or filled; leaves it zeroed */
/* An owned copy of src in *dst (free it with judge_tokens_free). ST_ERR_NOMEM (dst zeroed). */
st_code judge_tokens_copy(judge_prompt *dst, const judge_prompt *src, st_err *err);

/* Judging n branches: attach, one step, read. */
typedef struct judge {
    int32_t n;
    forest_id *branch;  /* (n) the branches judged */
    forest_id *top;     /* (n) each judge chain's first node, or its answer chain's (pruned
                           after reading) */
    forest_id *last;    /* (n) each judge chain's last node */
    forest_id *ans;     /* (n * 2) each answer prefix's last node (FOREST_NONE: one-token) */
    double *score;      /* (n) after judge_step; NAN before */
    bool attached, scored;
    bool branch_logits; /* the step keeps the branches' rows (judge_attach's want_branch_logits) */
} judge;

/* Judging what follows a thinking section (a reasoning model's answer), so that a score is
 * not decided by the thinking text: a branch whose text after `from` (an ancestor of it)
 * closes a thinking section (chat_think_close: "</think>", harmony's final channel) gets
 * its judge under a new chain from `from` holding the close mark and the answer (the text
 * re-encoded, special tokens parsed), not under the branch itself, so branches that differ
 * only in their thinking get the same score, bit for bit. A branch with no close in that
 * text has no answer yet and is judged whole, as cot's vote reads such a chain whole
 * (chat_after_think); a close before `from` is shared by every branch below it. The
 * score is then that of linear decoding of from's path + mark and answer + judge. */
typedef struct judge_cut {
    const tok *tk;   /* decodes the branch, encodes the answer chain */
    forest_id from;  /* where the branches' own text starts (usually the prompt's last) */
} judge_cut;

/* Appends the judge (and the answer prefixes) under branches[0..n) (n >= 1, live, distinct
 * or not), or under their answer chains with cut (NULL: every branch whole).
 * want_branch_logits: the step also returns each branch's own logits (tot forks the next
 * thoughts from them; read them with step_logits_of until the next step). ST_ERR_ARG (a
 * stale branch, an empty judge, cut->from not an ancestor of a branch), ST_ERR_NOMEM; the
 * forest is unchanged on failure. */
st_code judge_attach(judge *jg, forest *f, const judge_prompt *jp, const forest_id *branches, int32_t n,
                     bool want_branch_logits, const judge_cut *cut, st_err *err);
/* The step: computes everything pending, reads the scores, prunes the judge chains.
 * ST_NO_KV_SLOT: the judge chains are removed again and nothing else changed (prune
 * something and attach again); other codes from the step (the chains removed). */
st_code judge_step(judge *jg, forest *f, step_plan *p, model_ctx *c, const judge_prompt *jp, st_err *err);
/* Removes attached chains that are still there (a judge abandoned before its step). */
void judge_detach(judge *jg, forest *f);
void judge_free(judge *jg); /* zeroed or used; does not touch the forest */

/* Sorts idx[0..n) by score[idx[i]], best first (NAN last; ties keep their order). */
void judge_rank(const double *score, int32_t *idx, int32_t n);

#endif
