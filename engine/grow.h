/* grow.h - the "grow" policy over the forest step: extend a set of branches by sampling,
 * one shared step per token, until each hits an end-of-generation token or its budget.
 *
 * Each branch owns its sampler (so its seed reproduces it) and its current leaf. Several
 * branches may start from the same node: each then samples its own first token from that
 * node's logits and becomes its own child chain. Finished branches stop costing rows. The
 * caller owns the forest, the plan and the model context; grow only decides tokens.
 * Not here: choosing distinct first tokens (cot), beam pruning (beam). */
#ifndef MD_GROW_H
#define MD_GROW_H

#include <stdbool.h>
#include <stdint.h>

#include "forest.h"
#include "sample.h"
#include "step.h"
#include "tok.h"

typedef struct grow_branch {
    forest_id start;   /* the node the branch grows from */
    forest_id leaf;    /* its current tip */
    sampler smp;
    int32_t budget;    /* tokens to generate at most */
    int32_t made;      /* tokens generated so far */
    bool done;
    bool eog;          /* ended by an end-of-generation token (not the budget) */
} grow_branch;

typedef struct grow {
    grow_branch *br;
    int32_t n;
    int32_t n_active;
} grow;

/* n branches from node `from`, branch i sampling with sp and seed sp->seed + i, each with
 * the given budget. ST_ERR_NOMEM / ST_ERR_ARG (stale node). */
st_code grow_init(grow *g, const forest *f, forest_id from, int32_t n, const sample_params *sp,
                  int32_t budget, int32_t n_vocab, st_err *err);
/* Adds one branch (for per-branch starts, as in `ask`). */
st_code grow_add(grow *g, const forest *f, forest_id from, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err);
void grow_free(grow *g);

/* Called for every token a branch generates (not for its end-of-generation token). */
typedef void (*grow_emit_fn)(void *ud, int32_t branch, int32_t token, float logprob);

/* One step: computes every pending node (step_forest), then lets each active branch
 * sample its next token from its leaf's logits and append it. Returns the step's status
 * (ST_NO_KV_SLOT leaves everything unchanged); *active (may be NULL) gets the number of
 * branches still running. */
st_code grow_step(grow *g, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                  grow_emit_fn emit, void *ud, int32_t *active, st_err *err);

#endif
