/* draft.c - exact greedy decoding with verified drafts (spec.h) as the "draft" and
 * "lookahead" strategies (strategy.h): the spec driver stepped one forest step at a time,
 * with the stop rules. The accepted tokens stay in the forest as one chain under the start
 * node, token for token what plain greedy decoding gives; the rejected drafts and the
 * window are pruned every step. It stops at an end-of-generation token (not kept: the
 * chain's last node is marked finished, as grow does) or at its budget: a step may accept
 * more tokens than are left, and those are pruned again, so the chain holds exactly the
 * budget. Its progress counts tokens kept (a step keeps several). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "strategy/strategy_impl.h"

typedef struct spec_run {
    spec *s;
    spec_params sp;
    int32_t *out;       /* (spec_max_emit) one step's tokens */
    forest_id *ids;     /* (spec_max_emit) their nodes, for emit */
    forest_id from;     /* the start node */
    forest_id last;     /* the chain's last node (pending: the tip, until done) */
    int32_t budget, made, steps;
    bool done, eog, pruned; /* pruned: the host pruned the chain's tip (strategy_forget) */
} spec_run;

static void spec_run_free(void *self) {
    spec_run *u = self;
    if (!u) return;
    spec_free(u->s);
    free(u->out);
    free(u->ids);
    free(u);
}

static void *spec_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    if (!forest_get(env->f, o->from)) {
        st_set(err, ST_ERR_ARG, "the selected node is gone");
        return NULL;
    }
    if (o->budget < 1) {
        st_set(err, ST_ERR_ARG, "speculative decoding: the budget must be at least one token");
        return NULL;
    }
    if ((o->kind == STRAT_LOOKAHEAD) != (o->u.spec.p.la.w > 0)) {
        st_set(err, ST_ERR_ARG, "%s: the window W must be %s", o->kind == STRAT_LOOKAHEAD ? "lookahead" : "draft",
               o->kind == STRAT_LOOKAHEAD ? "at least 1" : "0");
        return NULL;
    }
    spec_run *u = strat_calloc(sizeof *u, err);
    if (!u) return NULL;
    if (!(u->s = spec_init(&o->u.spec.p, env->f, o->from, err))) {
        free(u);
        return NULL;
    }
    size_t n = (size_t)spec_max_emit(u->s);
    if (!(u->out = malloc(sizeof *u->out * n)) || !(u->ids = malloc(sizeof *u->ids * n))) {
        spec_run_free(u);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (o->u.spec.observe) spec_set_observer(u->s, o->u.spec.observe, o->u.spec.observe_ud);
    u->sp = o->u.spec.p;
    u->from = u->last = o->from;
    u->budget = o->budget;
    /* a leaf another strategy finished (or left without logits) is extended again */
    forest_set_flags(env->f, o->from, 0, FOREST_FINISHED | FOREST_NO_LOGITS);
    return u;
}

/* Calls emit for the last n tokens of the chain ending at u->last, in order. */
static void emit_kept(spec_run *u, const strategy_env *env, int32_t n) {
    forest_id at = u->last;
    for (int32_t i = n - 1; i >= 0; i--) {
        u->ids[i] = at;
        at = forest_id_at(env->f, forest_get(env->f, at)->parent);
    }
    for (int32_t i = 0; i < n; i++) {
        const forest_node *nd = forest_get(env->f, u->ids[i]);
        env->emit(env->emit_ud, 0, nd->token, nd->logprob);
    }
}

static st_code spec_run_step(void *self, const strategy_env *env, st_err *err) {
    spec_run *u = self;
    if (u->done) return ST_OK;
    forest *f = env->f;
    int32_t k = 0;
    st_code rc = spec_step(u->s, f, env->plan, env->ctx, u->out, &k, err);
    if (rc) return rc;
    u->steps++;
    /* the stop rules over this step's tokens: an end-of-generation token is not kept,
     * and nothing past the budget is */
    int32_t cut = k, kept = 0;
    bool stop = false;
    for (int32_t i = 0; i < k && !stop; i++) {
        if (env->tk && tok_is_eog(env->tk, u->out[i])) {
            cut = i;
            u->eog = stop = true;
            break;
        }
        u->made++;
        kept++;
        if (u->made >= u->budget) cut = i + 1, stop = true;
    }
    u->last = spec_tip(u->s);
    if (stop) {
        if (cut < k) {
            /* the tokens are the path ending at the tip: out[cut] is k - 1 - cut above it */
            forest_id at = u->last;
            for (int32_t j = k - 1; j > cut; j--) at = forest_id_at(f, forest_get(f, at)->parent);
            u->last = forest_id_at(f, forest_get(f, at)->parent);
            forest_prune(f, at, NULL);
        }
        const forest_node *nd = forest_get(f, u->last);
        /* a pending last token stays unscored until a later step computes it (as grow) */
        uint8_t set = FOREST_FINISHED | (nd && nd->state == FOREST_PENDING ? FOREST_NO_LOGITS : 0);
        forest_set_flags(f, u->last, set, 0);
        u->done = true;
    }
    if (env->emit && kept > 0) emit_kept(u, env, kept);
    return ST_OK;
}

/* Between steps the spec driver holds only the chain's tip (the drafts and the window are
 * pruned every step), so a prune that took the tip ends the run, what was accepted above
 * the pruned node staying in the forest, and any other prune does not touch it. */
static void spec_run_forget(void *self, const forest *f) {
    spec_run *u = self;
    if (forest_get(f, u->done ? u->last : spec_tip(u->s))) return;
    u->done = u->pruned = true;
    u->last = FOREST_NONE;
}

static bool spec_run_done(const void *self) { return ((const spec_run *)self)->done; }

/* "lookahead 3,3,2: 12 tokens in 5 steps, 2.40 tokens/step" (or "draft: ..."). */
static void spec_run_progress(const void *self, strategy_progress *out) {
    const spec_run *u = self;
    out->done = u->made;
    out->goal = u->budget;
    out->tokens = u->made;
    out->focus = u->from;
    out->tell = true;
    char what[48];
    if (u->sp.la.w > 0) snprintf(what, sizeof what, "lookahead %d,%d,%d", u->sp.la.w, u->sp.la.n, u->sp.la.g);
    else snprintf(what, sizeof what, "draft");
    snprintf(out->text, sizeof out->text, "%s: %d token%s in %d step%s, %.2f tokens/step%s", what, u->made,
             u->made == 1 ? "" : "s", u->steps, u->steps == 1 ? "" : "s",
             u->steps ? (double)u->made / u->steps : 0.0, u->eog ? " (end of text)" : "");
}

static int32_t spec_run_n_results(const void *self) {
    (void)self;
    return 1;
}

static void spec_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f, (void)i;
    const spec_run *u = self;
    *out = (strategy_result){.start = u->from, .leaf = u->last, .n_tokens = u->made, .score = NAN, .stop = -1,
                             .eog_token = -1};
    out->end = !u->done ? STRAT_RUNNING : u->pruned ? STRAT_END_PRUNED : u->eog ? STRAT_END_EOG : STRAT_END_BUDGET;
}

static int32_t spec_run_running(const void *self, forest_id *out, int32_t cap) {
    const spec_run *u = self;
    if (u->done || cap < 1) return 0;
    out[0] = spec_tip(u->s);
    return 1;
}

/* Draft and lookahead are one driver: the tables differ in name and kind only. */
#define SPEC_RUN_OPS(NAME, KIND)                                                             \
    {                                                                                        \
        .name = NAME, .kind = KIND, .summary = STRAT_SUM_PROGRESS, .create = spec_run_create, \
        .step = spec_run_step, .done = spec_run_done, .progress = spec_run_progress,          \
        .n_results = spec_run_n_results, .result = spec_run_result,                         \
        .running = spec_run_running, .forget = spec_run_forget, .free = spec_run_free,      \
    }

const strategy_ops strat_draft_ops = SPEC_RUN_OPS("draft", STRAT_DRAFT);
const strategy_ops strat_lookahead_ops = SPEC_RUN_OPS("lookahead", STRAT_LOOKAHEAD);

const spec *strategy_spec(const strategy *s) {
    const strategy_ops *o = strategy_ops_of(s);
    return o == &strat_draft_ops || o == &strat_lookahead_ops ? ((const spec_run *)strategy_state(s))->s : NULL;
}
