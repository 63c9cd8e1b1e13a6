/* ask.c - the "ask" strategy (strategy.h): several prompts (a shared context and one
 * question each) answered together. The prompts' longest common token prefix is stored
 * and computed once, as one chain (under opts.from, or a new root); each prompt's rest
 * hangs under it, and answer i grows from its prompt's last node with seed + i (grow.h),
 * one forest step per token. So each answer is what decoding its own prompt alone gives,
 * while the context costs its KV slots and its prefill once. Not here: building and
 * rendering the prompts (app/cmd_ask.c), checking that they fit the KV cache. */
#include <stdlib.h>

#include "strategy/strategy_impl.h"

static int32_t common_prefix(const strategy_opts *o) {
    int32_t lcp = o->u.ask.lens[0];
    for (int32_t i = 1; i < o->u.ask.n; i++) {
        int32_t j = 0;
        while (j < lcp && j < o->u.ask.lens[i] && o->u.ask.prompts[i][j] == o->u.ask.prompts[0][j]) j++;
        lcp = j;
    }
    return lcp;
}

/* Adds a chain under `under` (FOREST_NONE: a new root); *last gets its last node, and
 * tops[(*n_tops)++] its first (to take it out again on failure). */
static st_code add_chain(forest *f, forest_id under, const int32_t *t, int32_t n, forest_id *last,
                         forest_id *tops, int32_t *n_tops, st_err *err) {
    st_code rc = under == FOREST_NONE ? forest_add_root(f, t, NULL, n, 0, last, err)
                                      : forest_append(f, under, t, NULL, n, last, err);
    if (rc) return rc;
    forest_id top = *last;
    for (int32_t i = 1; i < n; i++) top = forest_id_at(f, forest_get(f, top)->parent);
    tops[(*n_tops)++] = top;
    return ST_OK;
}

/* The prompts into the forest and one branch per prompt. */
static st_code ask_build(strat_grow_run *r, const strategy_opts *o, forest *f, forest_id *tops, int32_t *n_tops,
                         st_err *err) {
    int32_t lcp = common_prefix(o);
    forest_id prefix = o->from;
    st_code rc;
    if (lcp > 0 && (rc = add_chain(f, o->from, o->u.ask.prompts[0], lcp, &prefix, tops, n_tops, err))) return rc;
    for (int32_t i = 0; i < o->u.ask.n; i++) {
        forest_id start = prefix;
        int32_t rest = o->u.ask.lens[i] - lcp;
        if (rest > 0 && (rc = add_chain(f, prefix, o->u.ask.prompts[i] + lcp, rest, &start, tops, n_tops, err)))
            return rc;
        sample_params bp = o->sample;
        bp.seed = o->sample.seed + (uint64_t)i;
        int32_t budget = o->u.ask.budgets ? o->u.ask.budgets[i] : o->budget;
        if (budget > r->goal) r->goal = budget;
        if ((rc = grow_add(&r->g, f, start, &bp, budget, o->n_vocab, err))) return rc;
    }
    strat_grow_want_starts(&r->g, f); /* a question that is all prefix */
    return strat_grow_stops(&r->g, o, err);
}

static void *ask_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    if (o->u.ask.n < 1 || !o->u.ask.prompts || !o->u.ask.lens) {
        st_set(err, ST_ERR_ARG, "ask: no prompts");
        return NULL;
    }
    for (int32_t i = 0; i < o->u.ask.n; i++)
        if (o->u.ask.lens[i] < 1) {
            st_set(err, ST_ERR_ARG, "ask: prompt %d is empty", i);
            return NULL;
        }
    if (o->from != FOREST_NONE && !forest_get(env->f, o->from)) {
        st_set(err, ST_ERR_ARG, "ask: the node to ask under is gone");
        return NULL;
    }
    strat_grow_run *r = strat_calloc(sizeof *r, err);
    if (r) r->focus = FOREST_NONE; /* no one start to show */
    forest_id *tops = r ? malloc(sizeof *tops * (size_t)(o->u.ask.n + 1)) : NULL;
    int32_t n_tops = 0;
    if (r && !tops) st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!tops || ask_build(r, o, env->f, tops, &n_tops, err)) {
        /* the forest as it was: the chains added so far go again */
        for (int32_t i = n_tops - 1; i >= 0; i--) forest_prune(env->f, tops[i], NULL);
        free(tops);
        strat_grow_run_free(r);
        return NULL;
    }
    free(tops);
    return r;
}

const strategy_ops strat_ask_ops = {
    .name = "ask",
    .kind = STRAT_ASK,
    .summary = STRAT_SUM_BRANCHES,
    .create = ask_create,
    STRAT_GROW_RUN_OPS,
};
