/* grow.c - sampling branches forward, one forest step per token, until an
 * end-of-generation token, a stop string or the budget ends each one. */
#include "base/array.h"
#include "strategy/grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "strategy/strategy_impl.h"

st_code grow_add(grow *g, const forest *f, forest_id from, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err) {
    if (!forest_get(f, from)) return st_set(err, ST_ERR_ARG, "the start node no longer exists");
    grow_branch *nb = realloc(g->br, sizeof *nb * (size_t)(g->n + 1));
    if (!nb) return st_set(err, ST_ERR_NOMEM, "out of memory");
    g->br = nb;
    grow_branch *b = &g->br[g->n];
    memset(b, 0, sizeof *b);
    b->start = b->leaf = from;
    b->budget = budget;
    b->done = budget <= 0;
    b->stop = -1;
    if (sampler_init(&b->smp, sp, n_vocab)) return st_set(err, ST_ERR_NOMEM, "out of memory");
    g->n++;
    if (!b->done) g->n_active++;
    return ST_OK;
}

st_code grow_init(grow *g, const forest *f, forest_id from, int32_t n, const sample_params *sp,
                  int32_t budget, int32_t n_vocab, st_err *err) {
    memset(g, 0, sizeof *g);
    for (int32_t i = 0; i < n; i++) {
        sample_params p = *sp;
        p.seed = sp->seed + (uint64_t)i;
        st_code rc = grow_add(g, f, from, &p, budget, n_vocab, err);
        if (rc) {
            grow_free(g);
            return rc;
        }
    }
    return ST_OK;
}

static void free_stops(grow *g) {
    for (int32_t i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
    g->stops = NULL;
    g->n_stops = g->stop_max = 0;
}

void grow_free(grow *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n; i++) {
        sampler_free(&g->br[i].smp);
        free(g->br[i].tail);
    }
    free(g->br);
    free_stops(g);
    free(g->hist);
    memset(g, 0, sizeof *g);
}

st_code grow_set_stop(grow *g, const char *const *stops, int32_t n, st_err *err) {
    char **copy = n > 0 ? calloc((size_t)n, sizeof *copy) : NULL;
    int32_t m = 0, longest = 0;
    if (n > 0 && !copy) return st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        size_t len = strlen(stops[i]);
        if (!len) continue;
        if (!(copy[m] = strdup(stops[i]))) {
            for (int32_t j = 0; j < m; j++) free(copy[j]);
            free(copy);
            return st_set(err, ST_ERR_NOMEM, "out of memory");
        }
        m++;
        if ((int32_t)len > longest) longest = (int32_t)len;
    }
    free_stops(g);
    g->stops = copy;
    g->n_stops = m;
    g->stop_max = longest;
    /* tails sized for the old strings are rebuilt on the next token */
    for (int32_t i = 0; i < g->n; i++) {
        free(g->br[i].tail);
        g->br[i].tail = NULL;
        g->br[i].n_tail = 0;
    }
    return ST_OK;
}

/* Appends the text of token t to branch b's tail and returns the index of the stop
 * string the tail now ends with, or -1. Keeps the last stop_max bytes between calls. */
static int32_t stop_match(grow *g, grow_branch *b, const forest *f, const tok *tk, int32_t t,
                          st_err *err, st_code *rc) {
    *rc = ST_OK;
    if (!g->n_stops || !tk) return -1;
    if (!b->tail) {
        if (!(b->tail = malloc((size_t)g->stop_max + 1))) {
            *rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            return -1;
        }
        b->n_tail = 0;
        /* the start token as context, so a first token's leading space reads as in the
         * running text (SentencePiece drops it only at the start of a stream) */
        tok_stream_init(&b->ts);
        const forest_node *st = forest_get(f, b->start);
        char skip[64];
        if (st) tok_stream_put(tk, &b->ts, st->token, skip, sizeof skip);
    }
    char small[256], *txt = small;
    size_t need = tok_stream_put(tk, &b->ts, t, small, sizeof small);
    if (need >= sizeof small) {
        if (!(txt = malloc(need + 1))) {
            *rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            return -1;
        }
        tok_stream_put(tk, &b->ts, t, txt, need + 1);
    }
    /* tail + txt, of which the last stop_max bytes are all a match can need */
    size_t tl = (size_t)b->n_tail, total = tl + need, max = (size_t)g->stop_max;
    char *joined = malloc(total + 1);
    int32_t hit = -1;
    if (!joined) {
        *rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    } else {
        memcpy(joined, b->tail, tl);
        memcpy(joined + tl, txt, need);
        joined[total] = 0;
        if (need > 0) /* no new text, no new match */
            for (int32_t i = 0; i < g->n_stops && hit < 0; i++) {
                size_t sl = strlen(g->stops[i]);
                if (sl <= total && !memcmp(joined + total - sl, g->stops[i], sl)) hit = i;
            }
        size_t keep = total < max ? total : max;
        memcpy(b->tail, joined + total - keep, keep);
        b->n_tail = (int32_t)keep;
        free(joined);
    }
    if (txt != small) free(txt);
    return hit;
}

st_code grow_history(grow *g, const forest *f, int32_t i, const int32_t **hist, int32_t *n,
                     st_err *err) {
    *hist = NULL;
    *n = 0;
    if (!sample_uses_history(&g->br[i].smp.p)) return ST_OK;
    int32_t len = forest_path(f, g->br[i].leaf, NULL, 0);
    if (len < 0) return st_set(err, ST_ERR_ARG, "branch %d: its leaf no longer exists", i);
    if (!ARR_GROW_I32(g->hist, len, g->cap_hist)) return st_set(err, ST_ERR_NOMEM, "out of memory");
    *n = forest_path(f, g->br[i].leaf, g->hist, len);
    *hist = g->hist;
    return ST_OK;
}

static void finish(grow *g, grow_branch *b) {
    b->done = true;
    g->n_active--;
}

st_code grow_accept(grow *g, forest *f, int32_t i, int32_t t, float lp, const tok *tk,
                    grow_emit_fn emit, void *ud, st_err *err) {
    grow_branch *b = &g->br[i];
    if (b->done) return ST_OK;
    if (tk && tok_is_eog(tk, t)) {
        b->eog = true;
        finish(g, b);
        forest_set_flags(f, b->leaf, FOREST_FINISHED, 0);
        forest_set_tag(f, b->leaf, GROW_END_EOG);
        return ST_OK;
    }
    forest_id leaf;
    st_code rc = forest_append(f, b->leaf, &t, &lp, 1, &leaf, err);
    if (rc) return rc;
    b->leaf = leaf;
    b->made++;
    if (emit) emit(ud, i, t, lp);
    int32_t hit = stop_match(g, b, f, tk, t, err, &rc);
    if (rc) return rc;
    if (hit >= 0 || b->made >= b->budget) {
        b->stop = hit;
        finish(g, b);
        /* its last token stays pending and unscored until a later step computes it */
        forest_set_flags(f, leaf, FOREST_FINISHED | FOREST_NO_LOGITS, 0);
        forest_set_tag(f, leaf, hit >= 0 ? GROW_END_STOP : GROW_END_BUDGET);
    }
    return ST_OK;
}

void grow_forget(grow *g, const forest *f) {
    for (int32_t i = 0; i < g->n; i++) {
        grow_branch *b = &g->br[i];
        if (b->leaf == FOREST_NONE || forest_get(f, b->leaf)) continue;
        if (!b->done) finish(g, b);
        b->pruned = true;
        b->leaf = FOREST_NONE;
        if (!forest_get(f, b->start)) b->start = FOREST_NONE;
    }
}

/* How many best tokens of each row a step on a device brings back for every running
 * branch to draw from them (sample_top_need; 1: all greedy), or 0: the rows (a host
 * backend, a repetition penalty, top-k off or above what the device keeps). */
static int32_t grow_topk(const grow *g, model_ctx *c) {
    int32_t k = 1;
    for (int32_t i = 0; i < g->n; i++) {
        const int32_t need = g->br[i].done ? 1 : sample_top_need(&g->br[i].smp.p);
        if (need <= 0) return 0;
        k = need > k ? need : k;
    }
    return step_device_topk(c, k);
}

/* Branch i's draw from its leaf's top-k when the rows stayed on the device: the token
 * sampler_sample gives from the whole row, and its log-probability from the top-k. */
static st_code grow_pick_top(grow *g, step_plan *p, int32_t V, int32_t i, int32_t *t, float *lp, st_err *err) {
    grow_branch *b = &g->br[i];
    const int32_t *ids;
    const float *lps;
    const int32_t nk = step_topk_of(p, b->leaf, &ids, &lps);
    if (nk <= 0) return st_set(err, ST_ERR_ARG, "branch %d: its leaf was not scored", i);
    /* (greedy reads ids[0] alone: no logits come back when every branch is greedy) */
    *t = sampler_sample_top(&b->smp, ids, step_topk_x_of(p, b->leaf), nk, V);
    for (int32_t j = 0; j < nk; j++)
        if (ids[j] == *t) *lp = lps[j];
    return *t >= 0 ? ST_OK : st_set(err, ST_ERR_ARG, "branch %d: its draw needs more than the %d best", i, nk);
}

/* Branch i's next token and its log-probability from the step's rows, or from its leaf's
 * top-k when the rows stayed on the device. */
static st_code grow_pick(grow *g, forest *f, step_plan *p, int32_t V, int32_t i, int32_t *t,
                         float *lp, st_err *err) {
    grow_branch *b = &g->br[i];
    const float *lg = step_logits_of(p, b->leaf);
    if (!lg) return grow_pick_top(g, p, V, i, t, lp, err);
    const int32_t *hist;
    int32_t nh;
    st_code rc = grow_history(g, f, i, &hist, &nh, err);
    if (rc) return rc;
    *t = sampler_sample_hist(&b->smp, lg, V, hist, nh);
    *lp = step_logprob_of(p, b->leaf, *t);
    return ST_OK;
}

st_code grow_step(grow *g, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                  grow_emit_fn emit, void *ud, int32_t *active, st_err *err) {
    const int32_t k = grow_topk(g, c);
    st_code rc = k > 0 ? step_forest_topk(f, p, c, k, err) : step_forest(f, p, c, err);
    if (!rc && k > 1) rc = step_topk_logits(p, err);
    if (rc) return rc;
    int32_t V = p->n_vocab ? p->n_vocab : model_ctx_hparams(c)->n_vocab;
    /* appending a child does not touch this step's logits, so branches that share a leaf
     * all read that leaf's logits */
    for (int32_t i = 0; i < g->n; i++) {
        grow_branch *b = &g->br[i];
        if (b->done) continue;
        int32_t t = -1;
        float lp = NAN;
        if ((rc = grow_pick(g, f, p, V, i, &t, &lp, err)) ||
            (rc = grow_accept(g, f, i, t, lp, tk, emit, ud, err)))
            return rc;
    }
    if (active) *active = g->n_active;
    return ST_OK;
}

/* ---- the strategy table (strategy.h) ----
 * grow (grow.h) behind the strategy interface (strategy.h): n branches sampled from one
 * node. The smallest complete strategy table: read it, with strategy.h, to add one. It
 * also holds the helpers every grow-based table shares (strategy_impl.h). */

/* ---- shared by the grow-based strategies ---- */

void *strat_calloc(size_t size, st_err *err) {
    void *p = calloc(1, size);
    if (!p) st_set(err, ST_ERR_NOMEM, "out of memory");
    return p;
}

void strat_grow_result(const grow *g, int32_t i, strategy_result *out) {
    const grow_branch *b = &g->br[i];
    *out = (strategy_result){.start = b->start, .leaf = b->leaf, .n_tokens = b->made, .score = NAN,
                             .stop = b->stop, .eog_token = -1};
    out->end = !b->done ? STRAT_RUNNING : b->pruned ? STRAT_END_PRUNED : b->eog ? STRAT_END_EOG
               : b->stop >= 0 ? STRAT_END_STOP : STRAT_END_BUDGET;
}

int32_t strat_grow_running(const grow *g, forest_id *out, int32_t cap) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n && n < cap; i++)
        if (!g->br[i].done) out[n++] = g->br[i].leaf;
    return n;
}

void strat_grow_want_starts(const grow *g, forest *f) {
    for (int32_t i = 0; i < g->n; i++)
        if (forest_n_children(f, g->br[i].start) > 0) forest_set_flags(f, g->br[i].start, FOREST_WANT_LOGITS, 0);
}

st_code strat_grow_stops(grow *g, const strategy_opts *o, st_err *err) {
    return o->n_stops > 0 ? grow_set_stop(g, o->stops, o->n_stops, err) : ST_OK;
}

/* ---- the grow table ---- */

void strat_grow_run_free(void *self) {
    strat_grow_run *r = self;
    if (!r) return;
    grow_free(&r->g);
    free(r);
}

st_code strat_grow_run_step(void *self, const strategy_env *env, st_err *err) {
    strat_grow_run *r = self;
    if (r->g.n_active == 0) return ST_OK;
    st_code rc = grow_step(&r->g, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (!rc) r->steps++;
    return rc;
}

bool strat_grow_run_done(const void *self) { return ((const strat_grow_run *)self)->g.n_active == 0; }

void strat_grow_run_progress(const void *self, strategy_progress *out) {
    const strat_grow_run *r = self;
    out->done = r->steps;
    out->goal = r->goal;
    out->focus = r->focus;
}

int32_t strat_grow_run_n_results(const void *self) { return ((const strat_grow_run *)self)->g.n; }

void strat_grow_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    strat_grow_result(&((const strat_grow_run *)self)->g, i, out);
}

int32_t strat_grow_run_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_running(&((const strat_grow_run *)self)->g, out, cap);
}

void strat_grow_run_forget(void *self, const forest *f) { grow_forget(&((strat_grow_run *)self)->g, f); }

/* n branches from start, the first with seed + first (o->u.grow.n branches each). */
static st_code grow_run_add(strat_grow_run *r, forest *f, forest_id start, const strategy_opts *o,
                            int32_t first, st_err *err) {
    st_code rc = strategy_start_node(f, start, err);
    for (int32_t b = 0; b < o->u.grow.n && !rc; b++) {
        sample_params sp = o->sample;
        sp.seed = o->sample.seed + (uint64_t)(first + b);
        rc = grow_add(&r->g, f, start, &sp, o->budget, o->n_vocab, err);
    }
    return rc;
}

static void *grow_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    if (o->u.grow.n < 1) {
        st_set(err, ST_ERR_ARG, "grow: %d branches (want at least 1)", o->u.grow.n);
        return NULL;
    }
    strat_grow_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    const forest_id *starts = o->u.grow.starts ? o->u.grow.starts : &o->from;
    int32_t n_starts = o->u.grow.starts ? o->u.grow.n_starts : 1;
    r->focus = n_starts > 0 ? starts[0] : FOREST_NONE;
    r->goal = o->budget;
    st_code rc = n_starts > 0 ? ST_OK : st_set(err, ST_ERR_ARG, "grow: no node to start from");
    for (int32_t s = 0; s < n_starts && !rc; s++)
        rc = grow_run_add(r, env->f, starts[s], o, s * o->u.grow.n, err);
    if (!rc) strat_grow_want_starts(&r->g, env->f);
    if (rc || strat_grow_stops(&r->g, o, err)) {
        strat_grow_run_free(r);
        return NULL;
    }
    return r;
}

const strategy_ops strat_grow_ops = {
    .name = "grow",
    .kind = STRAT_GROW,
    .summary = STRAT_SUM_BRANCHES,
    .create = grow_run_create,
    STRAT_GROW_RUN_OPS,
};
