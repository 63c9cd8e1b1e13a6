/* strategy.c - the strategy registry and driver (strategy.h), and the plainest strategy:
 * forest steps over whatever is pending. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/strategy_impl.h"

/* ---- steps: run n forest steps, stopping once nothing is pending ---- */

typedef struct steps_run {
    int32_t left, goal, steps;
} steps_run;

static void *steps_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    (void)env;
    steps_run *r = strat_calloc(sizeof *r, err);
    if (r) r->left = r->goal = o->u.steps.n > 0 ? o->u.steps.n : 1;
    return r;
}

static st_code steps_step(void *self, const strategy_env *env, st_err *err) {
    steps_run *r = self;
    if (r->left == 0) return ST_OK;
    st_code rc = step_forest(env->f, env->plan, env->ctx, err);
    if (rc) return rc;
    r->steps++;
    r->left--;
    if (forest_n_pending(env->f) == 0) r->left = 0;
    return ST_OK;
}

static bool steps_done(const void *self) { return ((const steps_run *)self)->left == 0; }

static void steps_progress(const void *self, strategy_progress *out) {
    const steps_run *r = self;
    out->done = r->steps;
    out->goal = r->goal;
}

static int32_t steps_n_results(const void *self) {
    (void)self;
    return 0;
}

static int32_t steps_running(const void *self, forest_id *out, int32_t cap) {
    (void)self, (void)out, (void)cap;
    return 0;
}

/* Plain steps hold no node: a prune changes only what the next step computes. */
static void steps_forget(void *self, const forest *f) { (void)self, (void)f; }

const strategy_ops strat_steps_ops = {
    .name = "step",
    .kind = STRAT_STEPS,
    .summary = STRAT_SUM_NONE,
    .create = steps_create,
    .step = steps_step,
    .done = steps_done,
    .progress = steps_progress,
    .n_results = steps_n_results,
    .running = steps_running,
    .forget = steps_forget,
    .free = free,
};

/* ---- the registry ---- */

static const strategy_ops *const registry[] = {
#define STRATEGY(table) &table,
#include "strategy/registry.def"
#undef STRATEGY
};
#define N_REGISTERED ((int32_t)(sizeof registry / sizeof registry[0]))

const strategy_ops *strategy_get(strategy_kind kind) {
    return (int)kind >= 0 && kind < STRAT_N_KINDS ? registry[kind] : NULL;
}

const strategy_ops *strategy_at(int32_t i) { return i >= 0 && i < N_REGISTERED ? registry[i] : NULL; }

const strategy_ops *strategy_find(const char *name) {
    for (int32_t i = 0; name && i < N_REGISTERED; i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}

strategy_opts strategy_opts_for(const strategy_ops *ops) {
    strategy_opts o = strategy_default_opts(ops->kind);
    o.ops = ops;
    if (ops->defaults) ops->defaults(&o);
    return o;
}

st_code strategy_arg_set(strategy_opts *o, const strategy_arg *a, const char *val, st_err *err) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (end == val || *end || errno || v < a->lo || v > a->hi)
        return st_set(err, ST_ERR_ARG, "bad %s '%s' (want an integer from %d to %d)", a->name, val, (int)a->lo,
                      (int)a->hi);
    if (a->where == STRAT_ARG_BUDGET) o->budget = (int32_t)v;
    else memcpy(o->priv.bytes + a->offset, &(int32_t){(int32_t)v}, sizeof(int32_t));
    return ST_OK;
}

/* The usage's form, the part before its help (two spaces). */
static st_code usage_error(const strategy_ops *ops, st_err *err) {
    const char *u = ops->usage ? ops->usage : ops->name, *gap = strstr(u, "  ");
    return st_set(err, ST_ERR_ARG, "usage: %.*s", gap ? (int)(gap - u) : (int)strlen(u), u);
}

st_code strategy_args_parse(strategy_opts *o, const char *line, st_err *err) {
    const strategy_ops *ops = o->ops ? o->ops : strategy_get(o->kind);
    if (!ops) return st_set(err, ST_ERR_ARG, "unknown strategy %d", (int)o->kind);
    int32_t n = 0;
    for (const char *s = line;; n++) {
        while (isspace((unsigned char)*s)) s++;
        if (!*s) break;
        const char *w = s;
        while (*s && !isspace((unsigned char)*s)) s++;
        char word[32];
        if (n == ops->n_args || s - w >= (long)sizeof word) return usage_error(ops, err);
        snprintf(word, sizeof word, "%.*s", (int)(s - w), w);
        st_code rc = strategy_arg_set(o, &ops->args[n], word, err);
        if (rc) return rc;
    }
    if (n < ops->n_args && !ops->args[n].optional) return usage_error(ops, err);
    return ST_OK;
}

strategy_opts strategy_default_opts(strategy_kind kind) {
    strategy_opts o = {.kind = kind, .from = FOREST_NONE, .sample = sample_default_params(), .budget = 32};
    switch (kind) {
    case STRAT_GROW: o.u.grow.n = 1; break;
    case STRAT_COT: o.u.cot.k = 4; break;
    case STRAT_BEAM: o.u.beam = beam_default_params(); break;
    case STRAT_MARGINS: o.u.margins.gap = -1; break;
    case STRAT_DRAFT: o.u.spec.p = spec_default_params(); break;
    case STRAT_LOOKAHEAD:
        o.u.spec.p = spec_default_params();
        o.u.spec.p.la.w = 3, o.u.spec.p.la.n = 3, o.u.spec.p.la.g = 2;
        break;
    case STRAT_STEPS: o.u.steps.n = 1; break;
    case STRAT_TOT:
        o.u.tot.k = 3, o.u.tot.b = 2, o.u.tot.d = 3;
        o.u.tot.threshold = -INFINITY;
        o.budget = 24;
        break;
    default: break;
    }
    return o;
}

st_code strategy_start_node(forest *f, forest_id id, st_err *err) {
    const forest_node *nd = forest_get(f, id);
    if (!nd) return st_set(err, ST_ERR_ARG, "the selected node is gone");
    if (nd->state == FOREST_PENDING) forest_set_flags(f, id, 0, FOREST_FINISHED | FOREST_NO_LOGITS);
    else forest_set_flags(f, id, FOREST_WANT_LOGITS, FOREST_FINISHED);
    return ST_OK;
}

/* ---- the driver ---- */

struct strategy {
    const strategy_ops *ops;
    void *self;
    int64_t rows; /* rows of the steps run: the default progress.tokens */
};

strategy *strategy_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    const strategy_ops *ops = o->ops ? o->ops : strategy_get(o->kind);
    if (!ops) {
        st_set(err, ST_ERR_ARG, "unknown strategy %d", (int)o->kind);
        return NULL;
    }
    strategy *s = strat_calloc(sizeof *s, err);
    if (!s) return NULL;
    s->ops = ops;
    if (!(s->self = ops->create(o, env, err))) {
        free(s);
        return NULL;
    }
    return s;
}

void strategy_free(strategy *s) {
    if (!s) return;
    s->ops->free(s->self);
    free(s);
}

const strategy_ops *strategy_ops_of(const strategy *s) { return s->ops; }

st_code strategy_step(strategy *s, const strategy_env *env, st_err *err) {
    st_code rc = s->ops->step(s->self, env, err);
    if (!rc) s->rows += env->plan->n_rows;
    return rc;
}

bool strategy_done(const strategy *s) { return s->ops->done(s->self); }

void strategy_get_progress(const strategy *s, strategy_progress *out) {
    memset(out, 0, sizeof *out);
    out->tokens = s->rows;
    out->focus = FOREST_NONE;
    s->ops->progress(s->self, out);
}

int32_t strategy_n_results(const strategy *s) { return s->ops->n_results(s->self); }

void strategy_result_at(const strategy *s, const forest *f, int32_t i, strategy_result *out) {
    s->ops->result(s->self, f, i, out);
}

int32_t strategy_running(const strategy *s, forest_id *out, int32_t cap) {
    return s->ops->running(s->self, out, cap);
}

int32_t strategy_scores(const strategy *s, forest_id *ids, double *scores, int32_t cap) {
    return s->ops->scores ? s->ops->scores(s->self, ids, scores, cap) : 0;
}

bool strategy_takes_prunes(const strategy *s) { return s->ops->forget != NULL; }

void strategy_forget(strategy *s, const forest *f) {
    ASSERT(s->ops->forget);
    s->ops->forget(s->self, f);
}

const void *strategy_state(const strategy *s) { return s->self; }
