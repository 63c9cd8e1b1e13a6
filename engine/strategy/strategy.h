/* strategy.h - one interface for every decoding strategy: a table of operations per
 * strategy (create from its options, advance one forest step, done, progress, results,
 * free), so that the CLI commands, the TUI worker and the benches drive grow, cot, beam,
 * ask, margins, merge, draft, lookahead and plain steps all the same way:
 *
 *     strategy_env env = {.f = f, .plan = &plan, .ctx = ctx, .tk = tk};
 *     strategy_opts o = strategy_default_opts(STRAT_GROW);
 *     o.from = prompt_last; o.budget = 64;
 *     strategy *s = strategy_create(&o, &env, &err);        (NULL + err on failure)
 *     while (s && !strategy_done(s))
 *         if ((rc = strategy_step(s, &env, &err))) break;   (one forest step each)
 *     for (int32_t i = 0; i < strategy_n_results(s); i++) strategy_result(s, f, i, &r);
 *     strategy_free(s);
 *
 * The caller owns the forest, the step plan and the model context (strategy_env); a
 * strategy only decides which nodes to add, keep and prune, and runs its steps through the
 * plan (so the plan's forward hooks, such as the TUI's unlock, apply to every strategy).
 * ST_NO_KV_SLOT from strategy_step leaves the strategy and the forest as they were: prune
 * something, then step again (or stop and read the results).
 *
 * ADDING A STRATEGY: read this header, then engine/strategy/best.c (a small complete one;
 * every strategy file ends with its table). A new strategy is one file that defines a
 * `const strategy_ops NAME_ops` table with its kind STRAT_OTHER, its usage, its argument
 * grammar (args) and its private options (priv_size bytes of opts.priv, set up by
 * defaults), and one line in engine/strategy/registry.def; no caller changes: the TUI's
 * `:NAME` line, its help and completion, and the CLI's `multidecode NAME` find it with
 * strategy_find and drive it through this interface, and the hosts print its results with
 * strategy_end_name and strategy_summarize. (The STRAT_* kinds name the older
 * strategies, whose options are still the union below and whose hosts still build their
 * inputs themselves.)
 *
 * Not here: how prompts are built and rendered (app/, ui/), the vote over chains
 * (cot.h), what a view draws. */
#ifndef MD_STRATEGY_H
#define MD_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "spec/spec.h"
#include "strategy/beam.h"
#include "strategy/judge.h"
#include "tok/tok.h"

/* Every registered strategy. */
typedef enum {
    STRAT_GROW = 0, /* sample n branches from one node (grow.h) */
    STRAT_COT,      /* k chains with distinct first tokens (cot.h) */
    STRAT_BEAM,     /* beam search (beam.h) */
    STRAT_ASK,      /* several prompts sharing their common prefix, answered together */
    STRAT_MARGINS,  /* notes on chunks, then an answer from them (margins.h) */
    STRAT_MERGE,    /* exact merge of branches (merge.h), then grow the merged text */
    STRAT_DRAFT,    /* exact greedy decoding with verified drafts (spec.h) */
    STRAT_LOOKAHEAD,/* the same with lookahead decoding's window (lookahead.h) */
    STRAT_STEPS,    /* plain forest steps over whatever is pending */
    STRAT_JUDGE,    /* the model judges branches in one step (judge.h) */
    STRAT_TOT,      /* tree of thoughts: breadth- or depth-first search, judged (tot.h) */
    STRAT_N_KINDS,
    STRAT_OTHER = -1 /* a strategy no caller names: found by name, options in opts.priv */
} strategy_kind;

/* Why a result ended (strategy_result.end). */
typedef enum {
    STRAT_RUNNING = 0, /* still growing */
    STRAT_END_EOG,     /* an end-of-generation token (grow: not kept in the forest) */
    STRAT_END_BUDGET,  /* its token budget (or beam's max_tokens) */
    STRAT_END_STOP,    /* a stop string (result.stop says which) */
    STRAT_END_PRUNED,  /* the host pruned it while the run went on (strategy_forget): no leaf */
} strategy_end;

/* Margins' answer prompt: given the notes' text joined (margins_notes_text with "\n\n"),
 * the answer prompt's tokens (malloc'd, *n >= 1; caller of the callback frees), or, with
 * opts.u.margins.gap >= 0, the tail read after the notes (margins_answer_gap). NULL + err
 * to stop the run with that error. */
typedef int32_t *(*strategy_answer_fn)(void *ud, const char *notes, int32_t *n, st_err *err);

/* Called for every token a strategy keeps (grow_emit_fn's contract): branch is the
 * result index (strategy_result i), logprob the token's log-probability. */
typedef void (*strategy_emit_fn)(void *ud, int32_t branch, int32_t token, float logprob);

/* Bytes of private options a strategy may keep in strategy_opts.priv (its priv_size). */
#define STRAT_PRIV_MAX 64

struct strategy_ops;

/* Options: the common part, then one member per kind (the one named by kind is read), or
 * a strategy's own private options. Start from strategy_default_opts(kind) or
 * strategy_opts_for(ops); pointers are borrowed during strategy_create only, unless a
 * member says otherwise. */
typedef struct strategy_opts {
    strategy_kind kind;
    const struct strategy_ops *ops; /* the table to run; NULL: strategy_get(kind) */
    forest_id from;       /* the node to start from (grow, cot, beam, draft, lookahead: a
                             pending node is computed by the first step, a computed one
                             re-scored; ask: the prompts hang under it, FOREST_NONE: new
                             roots). Unused by margins, merge and steps. */
    sample_params sample; /* grow, cot, ask, margins, merge: branch i uses seed + i */
    int32_t budget;       /* tokens per branch at most (>= 1; steps: unused) */
    const char *const *stops; /* stop strings (grow, cot, ask, merge; see grow_set_stop) */
    int32_t n_stops;
    int32_t n_vocab;      /* the model's vocabulary size */
    union {
        struct {
            int32_t n;                     /* branches per start (>= 1) */
            const forest_id *starts;       /* (n_starts) nodes to grow n branches from each
                                              (plan: k branches from every prompt): branch
                                              s * n + b from starts[s] with seed + s * n + b;
                                              NULL: `from` alone */
            int32_t n_starts;
        } grow;
        struct { int32_t k; } cot;       /* chains (>= 1) */
        beam_params beam;                /* width, max_tokens (budget overrides it), ... */
        struct {
            const int32_t *const *prompts; /* (n) each question's whole prompt */
            const int32_t *lens;           /* (n) their lengths, >= 1 */
            const int32_t *budgets;        /* (n) per-question budgets; NULL: budget */
            int32_t n;
        } ask;
        struct {
            const int32_t *const *prompts; /* (n_chunks) the note prompts (margins_init) */
            const int32_t *lens;
            int32_t n_chunks;
            int32_t answer_budget;         /* the answer's tokens at most (0: budget) */
            int32_t gap;                   /* < 0: exact answer; >= 0: rope-gap (EXPERIMENTAL) */
            strategy_answer_fn answer;     /* NULL: the run ends when the notes are done */
            void *answer_ud;               /* borrowed for the strategy's life */
        } margins;
        struct {
            const forest_id *leaves;       /* (n >= 2) the branches to merge */
            int32_t n;
            const char *sep;               /* NULL: MERGE_DEFAULT_SEP */
        } merge;
        struct {                           /* env.tk NULL: no end-token stop, so every
                                              token a step accepts is kept and emitted
                                              (plan shows the driver's steps so) */
            spec_params p;                 /* draft: la.w = 0; lookahead: la.w >= 1 */
            spec_observe_fn observe;       /* NULL: none (spec_set_observer) */
            void *observe_ud;              /* borrowed for the strategy's life */
        } spec;
        struct { int32_t n; } steps;     /* steps to run at most (stops early when nothing
                                            is pending) */
        struct {
            const forest_id *branches;     /* (n >= 1) the branches to judge */
            int32_t n;
            const judge_prompt *prompt;    /* the judge (judge_tokens); copied */
        } judge;
        struct {
            int32_t k, b, d;               /* thoughts per kept node, kept per level (dfs:
                                              per expanded node), levels */
            const judge_prompt *prompt;    /* the judge of every level; copied. The thought
                                              delimiters are `stops`, the tokens per
                                              thought at most `budget` */
            bool dfs;                      /* depth-first with backtracking (tot.c) */
            double threshold;              /* dfs: a child scoring below it is pruned
                                              (-INFINITY: none is) */
            bool dim;                      /* breadth-first: a level's losers stay in the
                                              forest flagged FOREST_DIMMED, with their
                                              scores (strategy_scores), for a view to show
                                              until the run ends or the cache fills; then
                                              they are pruned. False: pruned at once */
        } tot;
    } u;
    union {
        unsigned char bytes[STRAT_PRIV_MAX];
        max_align_t align;
    } priv;               /* ops->priv_size bytes, the strategy's own (ops->defaults, args) */
} strategy_opts;

/* One argument of a strategy's grammar, a whole number: `--NAME N` on the command line,
 * the args in order on the TUI's `:` line. */
typedef enum {
    STRAT_ARG_PRIV = 0, /* an int32_t at offset in opts.priv */
    STRAT_ARG_BUDGET,   /* opts.budget (tokens per branch) */
} strategy_arg_where;

typedef struct strategy_arg {
    const char *name;  /* "chains" */
    const char *help;  /* one line for --help: "samples drawn (default 4)" */
    strategy_arg_where where;
    size_t offset;     /* STRAT_ARG_PRIV: offsetof in the strategy's private options */
    int32_t lo, hi;    /* the range a value must be in */
    bool optional;     /* the `:` line may leave it out (the default stays) */
} strategy_arg;

/* What a step needs, all borrowed; the same env for every call on one strategy. */
typedef struct strategy_env {
    forest *f;
    step_plan *plan;
    model_ctx *ctx;
    const tok *tk;           /* end-of-generation tokens, stop strings, merge text (may
                                be NULL where a strategy needs none) */
    strategy_emit_fn emit;   /* may be NULL */
    void *emit_ud;
} strategy_env;

/* One result: a branch, chain, hypothesis, note or answer. */
typedef struct strategy_result {
    forest_id start;       /* the node it grew from */
    forest_id leaf;        /* its last node; FOREST_NONE when not in the forest (pruned,
                              or a beam hypothesis: read tokens) */
    const int32_t *tokens; /* (n_tokens) when the strategy keeps them (beam: the end token
                              included when it ended by one); NULL: the path start..leaf */
    int32_t n_tokens;      /* tokens it generated */
    double score;          /* beam: sum / len^alpha; others: NAN (the forest's node
                              log-probabilities give the sum) */
    strategy_end end;
    int32_t stop;          /* STRAT_END_STOP: the index of the stop string; else -1 */
    int32_t eog_token;     /* STRAT_END_EOG: the end token when the strategy knows it; -1 */
} strategy_result;

/* How a finished run is summed up in a one-line "done" message (the TUI's, a bench's). */
typedef enum {
    STRAT_SUM_NONE = 0,  /* nothing (plain steps) */
    STRAT_SUM_BRANCHES,  /* "+12 tokens, 2 branches; stopped: budget" (grow, ask, merge) */
    STRAT_SUM_CHAINS,    /* "5 of 6 chains, 1 ended at once, ..." (cot) */
    STRAT_SUM_RANKED,    /* "2 results, best score -1.23; stopped: ..." (beam) */
    STRAT_SUM_PROGRESS,  /* the progress text (margins, draft, lookahead) */
} strategy_summary;

/* Where a run is. */
typedef struct strategy_progress {
    int32_t done, goal;  /* units done of those planned, for "grow 3/32": steps, or tokens
                            kept for strategies whose steps keep several (draft) */
    int64_t tokens;      /* tokens generated so far (a rate's numerator) */
    forest_id focus;     /* the node a view should show now (the start, or the answer once
                            margins starts it); FOREST_NONE: no preference */
    bool tell;           /* the text changes every step and is worth showing while it runs */
    bool staged;         /* the strategy runs in rounds (tot's levels): stage counts them */
    int32_t stage;       /* rounds completed (tot: levels judged, dfs: expansions judged);
                            between two steps where it changed, the forest holds the round's
                            result and nothing of the next round yet, so a view can pause
                            there */
    const char *stage_unit; /* staged: what a round is called ("level"), a static string */
    char text[160];      /* one line, "draft: 12 tokens in 5 steps, 2.40 tokens/step";
                            "" when the strategy has nothing to say */
} strategy_progress;

/* What a host gives a strategy that runs a judge (its table's judge_setup). */
typedef struct strategy_judge_in {
    const judge_prompt *prompt; /* the judge (judge_tokens); borrowed until strategy_create */
    const forest_id *branches;  /* (n) the host's branches to judge, for a table with
                                   judge_branches; borrowed until strategy_create */
    int32_t n;
    const char *which;          /* what those branches are, for the note ("sibling") */
} strategy_judge_in;

/* The table. Every function but create receives the strategy's own state (self). */
typedef struct strategy_ops {
    const char *name;          /* "grow": the CLI's and the TUI's name */
    strategy_kind kind;        /* STRAT_OTHER for a strategy no caller names */
    strategy_summary summary;
    /* The `:` line's usage and help, ":best N [TOKENS]  what it does"; NULL: the hosts
     * have their own command for it (the older kinds). */
    const char *usage;
    const strategy_arg *args;  /* (n_args) its grammar, in the `:` line's order */
    int32_t n_args;
    size_t priv_size;          /* bytes of opts.priv it reads (<= STRAT_PRIV_MAX) */
    bool own_temp;             /* it sets each branch's temperature itself: hosts offer no
                                  temperature option for it */
    void (*defaults)(strategy_opts *o); /* its defaults into *o (priv, budget); may be NULL */
    /* A strategy that runs a judge (NULL for the others): the host's judge into *o, set
     * for a host that shows the run live (tot: thoughts end at a newline, a level's
     * losers stay dimmed), and one line on what the run does into note. */
    void (*judge_setup)(strategy_opts *o, const strategy_judge_in *in, char *note, size_t cap);
    bool judge_branches;       /* judge_setup wants the host's branches to judge */
    /* The state for options o over env's forest (the forest may get nodes: ask's and
     * margins' prompts, merge's text). NULL + err; the forest is unchanged then. */
    void *(*create)(const strategy_opts *o, const strategy_env *env, st_err *err);
    /* One forest step (on env->plan) and the strategy's decision after it. ST_OK (also
     * when already done); ST_NO_KV_SLOT with nothing changed; other codes from the step
     * (then the strategy can only be freed). */
    st_code (*step)(void *self, const strategy_env *env, st_err *err);
    bool (*done)(const void *self);
    void (*progress)(const void *self, strategy_progress *out);
    int32_t (*n_results)(const void *self);
    /* Result i (0 <= i < n_results) into *out; pointers in it stay valid until the next
     * step or free. f is the strategy's forest. */
    void (*result)(const void *self, const forest *f, int32_t i, strategy_result *out);
    /* The leaves being extended now (for views); returns how many (writes at most cap). */
    int32_t (*running)(const void *self, forest_id *out, int32_t cap);
    /* Leaves with a score to show (beam's live hypotheses); may be NULL (none). */
    int32_t (*scores)(const void *self, forest_id *ids, double *scores, int32_t cap);
    /* The host pruned nodes of f between two steps (the TUI's d while a run goes on): the
     * strategy lets go of what went, a branch whose leaf is gone ending STRAT_END_PRUNED,
     * and never reads a freed node again. NULL: a strategy that cannot lose nodes while it
     * runs (its hosts must not prune under it). */
    void (*forget)(void *self, const forest *f);
    void (*free)(void *self); /* NULL is a no-op; leaves the forest as it is */
} strategy_ops;

/* ---- the registry ---- */

/* The table of a kind; NULL for an unknown kind. */
const strategy_ops *strategy_get(strategy_kind kind);
/* The table named name ("grow", "cot", "beam", "ask", "margins", "merge", "draft",
 * "lookahead", "step", "judge", "tot"); NULL when none has that name. */
const strategy_ops *strategy_find(const char *name);
/* The i-th registered table (the STRAT_* kinds first, in their order), NULL past the end:
 * for help lists. */
const strategy_ops *strategy_at(int32_t i);

/* ops's defaults: the common ones (as strategy_default_opts), then ops->defaults. */
strategy_opts strategy_opts_for(const struct strategy_ops *ops);
/* Argument a of o's table set from the text val: ST_OK, or ST_ERR_ARG with "bad NAME 'VAL'
 * (want an integer from LO to HI)" (o unchanged). */
st_code strategy_arg_set(strategy_opts *o, const strategy_arg *a, const char *val, st_err *err);
/* The `:` line's arguments (whitespace-separated words, in the grammar's order; the
 * optional ones may be left out) into o: ST_OK, or ST_ERR_ARG with a bad value's message
 * or "usage: " and the usage's form. */
st_code strategy_args_parse(strategy_opts *o, const char *line, st_err *err);

/* ---- driving one ---- */

typedef struct strategy strategy; /* a table and its state */

/* kind's defaults: from FOREST_NONE, sample_default_params(), budget 32, grow.n 1,
 * cot.k 4, beam_default_params(), margins.gap -1, draft / lookahead: the spec defaults
 * (lookahead with W 3, N 3, G 2), steps.n 1, tot: k 3, b 2, d 3, budget 24, breadth-first,
 * threshold -INFINITY. */
strategy_opts strategy_default_opts(strategy_kind kind);

/* A running strategy (ops->create). NULL + err: ST_ERR_ARG (an unknown kind, a stale node,
 * bad options), ST_ERR_NOMEM, or what the strategy's create reports. */
strategy *strategy_create(const strategy_opts *o, const strategy_env *env, st_err *err);
void strategy_free(strategy *s); /* NULL is a no-op; leaves the forest as it is */

const strategy_ops *strategy_ops_of(const strategy *s);
st_code strategy_step(strategy *s, const strategy_env *env, st_err *err);
bool strategy_done(const strategy *s);
void strategy_get_progress(const strategy *s, strategy_progress *out);
int32_t strategy_n_results(const strategy *s);
void strategy_result_at(const strategy *s, const forest *f, int32_t i, strategy_result *out);
int32_t strategy_running(const strategy *s, forest_id *out, int32_t cap);
int32_t strategy_scores(const strategy *s, forest_id *ids, double *scores, int32_t cap);
/* Whether nodes may be pruned under s while it runs (its table has forget). */
bool strategy_takes_prunes(const strategy *s);
/* After the host pruned nodes of f between two of s's steps: s lets go of them
 * (ops->forget; s must take prunes). s may be done afterwards (nothing left to grow). */
void strategy_forget(strategy *s, const forest *f);
/* The state behind the table, for a caller that knows the kind and needs more than the
 * interface gives (a bench reading spec_get_stats): strategy_spec returns the spec
 * driver of a draft / lookahead run, NULL for other kinds. */
const spec *strategy_spec(const strategy *s);
/* Likewise the beam search of a beam run (its live hypotheses, their parents and the KV
 * peak, which a bench replays; the finished hypotheses' log-probability sums, which
 * strategy_result leaves out), NULL for other kinds. */
const beam *strategy_beam(const strategy *s);
/* Likewise the margins state of a margins run (its phase, note and answer nodes, for
 * margins_note_text), NULL for other kinds. */
struct margins;
const struct margins *strategy_margins(const strategy *s);
/* Likewise the tree-of-thoughts run of a tot run (its depth-first trace, tot.h), NULL for
 * other kinds. */
struct tot_run;
const struct tot_run *strategy_tot(const strategy *s);

/* ---- naming and summing up results (summary.c) ---- */

/* How a result ended as the hosts print it: "EOS", "stop", "budget", "pruned"; NULL for a
 * result still running (STRAT_RUNNING), which each host names itself. */
const char *strategy_end_name(strategy_end e);
/* The one-line summary of finished run s over its forest f, as its table's summary style
 * says, into out: "+12 tokens, 2 branches; stopped: budget", "5 of 6 chains, 1 ended at
 * once, +40 tokens; stopped: ...", "2 results, best score -1.23; stopped: ..."; "" for the
 * other styles. A STRAT_SUM_PROGRESS strategy's progress text goes into note instead
 * (note is left alone for the others). chat: the model has a chat template, so an end
 * token other than <|endoftext|> reads "end of turn". */
void strategy_summarize(const strategy *s, const forest *f, const tok *tk, bool chat, char *out, size_t cap,
                        char *note, size_t note_cap);

/* After a run is done: its results as branches of the forest, so that a view shows
 * exactly what the strategy returned (strategy_results.c). A result kept as tokens
 * (leaf FOREST_NONE: beam's hypotheses) is walked down from its start, sharing the nodes
 * that have its tokens and appending the rest (pending, unscored; an end token left
 * out, as grow leaves it out); its last node is flagged FOREST_FINISHED, and tagged
 * GROW_END_BUDGET when the budget ended it. The leaves still running (beam's live
 * hypotheses when it stopped early) that are no result's are pruned with the ancestors
 * only they used, never above a start, and so is a result that repeats another leaf of
 * its tree token for token (an older branch, or an earlier result: sampling the same text
 * twice leaves one branch). leaves (n_results entries, may be NULL) receives
 * each result's leaf, FOREST_NONE for one not in the forest. ST_ERR_NOMEM, or the
 * forest's code (the forest then holds the results placed so far). */
st_code strategy_settle(const strategy *s, forest *f, forest_id *leaves, st_err *err);

/* Makes node id a node a strategy can start from: a pending node is computed by the next
 * step with its logits; a computed one is re-scored (FOREST_WANT_LOGITS: it runs again in
 * its own KV slot), so a strategy starts from the model's own distribution at any node.
 * ST_ERR_ARG for a stale id. */
st_code strategy_start_node(forest *f, forest_id id, st_err *err);

#endif
