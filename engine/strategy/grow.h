/* grow.h - the "grow" policy over the forest step: extend a set of branches by sampling,
 * one shared step per token, until each hits an end-of-generation token, a stop string
 * (grow_set_stop) or its budget.
 *
 * Each branch owns its sampler (so its seed reproduces it) and its current leaf. Several
 * branches may start from the same node: each then samples its own first token from that
 * node's logits and becomes its own child chain. Finished branches stop costing rows. The
 * caller owns the forest, the plan and the model context; grow only decides tokens.
 * With a repetition penalty in the sampling parameters, a branch's history is its whole
 * root-to-leaf path (prompt included, as llama.cpp feeds the prompt to its sampler).
 * Not here: choosing distinct first tokens (cot), beam pruning (beam). */
#ifndef MD_GROW_H
#define MD_GROW_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "tok/tok.h"

/* Why a branch ended, written as the tag (forest_node.tag) of the leaf grow finishes, so
 * views can tell an end of text from a budget stop (sessions keep tags). */
enum { GROW_END_NONE = 0, GROW_END_EOG = 1, GROW_END_BUDGET = 2, GROW_END_STOP = 3 };

typedef struct grow_branch {
    forest_id start;   /* the node the branch grows from */
    forest_id leaf;    /* its current tip */
    sampler smp;
    int32_t budget;    /* tokens to generate at most */
    int32_t made;      /* tokens generated so far */
    bool done;
    bool eog;          /* ended by an end-of-generation token (not the budget) */
    bool pruned;       /* ended because its leaf was pruned from outside (grow_forget) */
    int32_t stop;      /* index of the stop string that ended it, -1 for none */
    /* stop-string matching: the tail of the branch's decoded text (owned) */
    char *tail;
    int32_t n_tail;
    tok_stream ts;     /* its stream state (the start token as context) */
} grow_branch;

typedef struct grow {
    grow_branch *br;
    int32_t n;
    int32_t n_active;
    char **stops;      /* (n_stops) owned copies, see grow_set_stop */
    int32_t n_stops;
    int32_t stop_max;  /* longest stop string, bytes */
    int32_t *hist;     /* scratch for repetition-penalty histories */
    int32_t cap_hist;
} grow;

/* n branches from node `from`, branch i sampling with sp and seed sp->seed + i, each with
 * the given budget. ST_ERR_NOMEM / ST_ERR_ARG (stale node). */
st_code grow_init(grow *g, const forest *f, forest_id from, int32_t n, const sample_params *sp,
                  int32_t budget, int32_t n_vocab, st_err *err);
/* Adds one branch (for per-branch starts, as in `ask`). */
st_code grow_add(grow *g, const forest *f, forest_id from, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err);
void grow_free(grow *g);

/* Stop strings: a branch also ends once its generated text (decoded as a stream that
 * starts after its start node's token) ends with one of stops[0..n) (empty strings are
 * ignored). The token that completes the match is kept (appended and emitted), and the
 * branch is then done with b->stop set. Copies the strings; replaces earlier ones; n = 0
 * clears them. Needs the tokenizer in grow_step (no tokenizer: never matches).
 * ST_ERR_NOMEM (nothing changed). */
st_code grow_set_stop(grow *g, const char *const *stops, int32_t n, st_err *err);

/* Called for every token a branch generates (not for its end-of-generation token). */
typedef void (*grow_emit_fn)(void *ud, int32_t branch, int32_t token, float logprob);

/* One step: computes every pending node (step_forest), then lets each active branch
 * sample its next token from its leaf's logits and append it. Returns the step's status
 * (ST_NO_KV_SLOT leaves everything unchanged); *active (may be NULL) gets the number of
 * branches still running. */
st_code grow_step(grow *g, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                  grow_emit_fn emit, void *ud, int32_t *active, st_err *err);

/* The sampling half of a step, for strategies that pick a branch's token themselves (cot
 * picks distinct first tokens): branch i takes `token` with log-probability lp exactly as
 * grow_step would after sampling it (end-of-generation, append, emit, budget, stop
 * strings). ST_ERR_NOMEM / ST_ERR_ARG from forest_append. */
st_code grow_accept(grow *g, forest *f, int32_t i, int32_t token, float lp, const tok *tk,
                    grow_emit_fn emit, void *ud, st_err *err);

/* After nodes of f were pruned from outside between two steps: a branch whose leaf went
 * ends, pruned (done, its leaf FOREST_NONE); the others go on as they were. */
void grow_forget(grow *g, const forest *f);

/* The repetition-penalty history of branch i: its root-to-leaf path, in g's scratch
 * (*hist valid until the next call on g), *n its length. With no penalty in the branch's
 * parameters: *hist = NULL, *n = 0 (nothing to gather). ST_OK, ST_ERR_NOMEM, ST_ERR_ARG
 * (the leaf was pruned). */
st_code grow_history(grow *g, const forest *f, int32_t i, const int32_t **hist, int32_t *n,
                     st_err *err);

#endif
