/* tot.h - what the tree-of-thoughts strategy (tot.c, STRAT_TOT) shows beyond the strategy
 * interface: the depth-first search's trace, one entry per node it expanded with the
 * children it judged there, in the order it expanded them (tests check the search order
 * against the rule with it; a view can replay it). The breadth-first search records no
 * trace. Read it through strategy_tot (strategy.h); pointers stay valid until the next
 * step or strategy_free. Not here: the options (strategy_opts.u.tot), the search itself. */
#ifndef MD_TOT_H
#define MD_TOT_H

#include <stdbool.h>
#include <stdint.h>

#include "forest/forest.h"

/* A child judged at an expansion. */
typedef struct tot_child {
    forest_id leaf;  /* its thought's last node (pruned when !kept, or later as a dead end) */
    double score;    /* its judge's score */
    bool kept;       /* at or above the threshold and among the best b: pushed to the stack */
} tot_child;

/* One expansion of the depth-first search. */
typedef struct tot_visit {
    forest_id node;  /* the node expanded (the search's start first) */
    int32_t level;   /* its thoughts below the start (0 for the start) */
    int32_t first, n; /* its children: tot_children(r) + first, n of them, best first */
} tot_visit;

struct tot_run;
/* The expansions so far, in order; *n gets how many. */
const tot_visit *tot_visits(const struct tot_run *r, int32_t *n);
/* Every expansion's children, indexed by tot_visit.first. */
const tot_child *tot_children(const struct tot_run *r);
/* The answer the depth-first search reached (a kept node at depth d, or one whose thought
 * ended the text), FOREST_NONE while none (or when it gave up: its stack ran empty or its
 * expansions ran out). */
forest_id tot_answer(const struct tot_run *r);

#endif
