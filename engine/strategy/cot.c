/* cot.c - chains of thought: a fork of k distinct first tokens, then grow; and the
 * self-consistency vote (answer extraction and majority). */
#include "strategy/cot.h"
#include "tok/chat.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "strategy/strategy_impl.h"

st_code cot_init(cot *c, forest *f, forest_id from, int32_t k, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err) {
    memset(c, 0, sizeof *c);
    const forest_node *nd = forest_get(f, from);
    if (!nd) return st_set(err, ST_ERR_ARG, "cot: the start node no longer exists");
    if (k < 1 || k > n_vocab)
        return st_set(err, ST_ERR_ARG, "cot: %d chains (want 1 to %d)", k, n_vocab);
    /* the first step supplies the start node's logits: a computed node is re-scored */
    if (nd->state == FOREST_COMPUTED) forest_set_flags(f, from, FOREST_WANT_LOGITS, 0);
    c->first = malloc(sizeof(int32_t) * (size_t)k);
    c->scratch = malloc(sizeof(float) * (size_t)n_vocab);
    if (!c->first || !c->scratch) {
        cot_free(c);
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    st_code rc = grow_init(&c->g, f, from, k, sp, budget, n_vocab, err);
    if (rc) {
        cot_free(c);
        return rc;
    }
    for (int32_t i = 0; i < k; i++) c->first[i] = -1;
    c->from = from;
    c->k = k;
    c->n_vocab = n_vocab;
    /* a pending node with pending children is not a leaf: ask for its logits anyway */
    if (forest_n_children(f, from) > 0) forest_set_flags(f, from, FOREST_WANT_LOGITS, 0);
    return ST_OK;
}

void cot_free(cot *c) {
    if (!c) return;
    grow_free(&c->g);
    free(c->first);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

st_code cot_set_stop(cot *c, const char *const *stops, int32_t n, st_err *err) {
    return grow_set_stop(&c->g, stops, n, err);
}

bool cot_done(const cot *c) { return c->forked && c->g.n_active == 0; }

st_code cot_fork_branches(grow *g, forest *f, int32_t i0, int32_t k, const float *lg, int32_t V, float *scratch,
                          int32_t *first, const tok *tk, grow_emit_fn emit, void *ud, st_err *err) {
    float *masked = scratch;
    memcpy(masked, lg, sizeof(float) * (size_t)V);
    for (int32_t i = 0; i < k; i++) {
        const int32_t *hist;
        int32_t nh;
        st_code rc = grow_history(g, f, i0 + i, &hist, &nh, err);
        if (rc) return rc;
        int32_t t = sampler_sample_hist(&g->br[i0 + i].smp, masked, V, hist, nh);
        if (masked[t] == -INFINITY) /* a draw can only land on a removed token by rounding */
            t = sample_argmax(masked, V);
        masked[t] = -INFINITY;
        first[i] = t;
    }
    /* log-probabilities of the true distribution, for the forest and the callback */
    sample_log_softmax(lg, V, masked);
    for (int32_t i = 0; i < k; i++) {
        st_code rc = grow_accept(g, f, i0 + i, first[i], masked[first[i]], tk, emit, ud, err);
        if (rc) return rc;
    }
    return ST_OK;
}

st_code cot_step(cot *c, forest *f, step_plan *p, model_ctx *ctx, const tok *tk,
                 grow_emit_fn emit, void *ud, int32_t *active, st_err *err) {
    st_code rc;
    if (!c->forked) {
        if ((rc = step_forest(f, p, ctx, err))) return rc;
        const float *lg = step_logits_of(p, c->from);
        if (!lg) return st_set(err, ST_ERR_ARG, "cot: the fork node was not scored");
        forest_set_flags(f, c->from, 0, FOREST_WANT_LOGITS);
        if ((rc = cot_fork_branches(&c->g, f, 0, c->k, lg, c->n_vocab, c->scratch, c->first, tk, emit, ud, err)))
            return rc;
        c->forked = true;
    } else if (c->g.n_active > 0) {
        if ((rc = grow_step(&c->g, f, p, ctx, tk, emit, ud, NULL, err))) return rc;
    }
    if (active) *active = c->g.n_active;
    return ST_OK;
}

int32_t cot_chain_tokens(const cot *c, const forest *f, int32_t i, int32_t *out, int32_t cap) {
    const forest_node *leaf = forest_get(f, c->g.br[i].leaf), *from = forest_get(f, c->from);
    if (!leaf || !from) return -1;
    int32_t n = leaf->depth - from->depth;
    /* walk up from the leaf, filling out back to front (only the first cap tokens) */
    int32_t idx = forest_index(c->g.br[i].leaf);
    for (int32_t j = n - 1; j >= 0; j--) {
        const forest_node *nd = forest_node_at(f, idx);
        if (j < cap) out[j] = nd->token;
        idx = nd->parent;
    }
    return n;
}

/* ---- vote ---- */

st_code cot_vote_parse(const char *s, cot_vote_spec *v, st_err *err) {
    if (!strcmp(s, "last-number")) {
        v->kind = COT_VOTE_LAST_NUMBER, v->marker = NULL;
        return ST_OK;
    }
    if (!strncmp(s, "marker:", 7) && s[7]) {
        v->kind = COT_VOTE_MARKER, v->marker = s + 7;
        return ST_OK;
    }
    return st_set(err, ST_ERR_ARG, "bad vote pattern '%s' (want last-number or marker:TEXT)", s);
}

static int32_t put(char *out, size_t cap, const char *s, size_t n) {
    size_t w = n < cap - 1 ? n : cap - 1;
    memcpy(out, s, w);
    out[w] = 0;
    return (int32_t)w;
}

/* The last number of text, normalised, into buf (big enough: strlen(text) + 1). */
static int32_t last_number(const char *text, char *buf) {
    const char *best = NULL;
    size_t best_len = 0;
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > text && isdigit((unsigned char)p[-1]))) continue;
        const char *s = p, *e = p;
        if (s > text && s[-1] == '-' && (s - 1 == text || !isalnum((unsigned char)s[-2]))) s--;
        while (isdigit((unsigned char)*e)) e++;
        /* thousands groups: ",ddd" not followed by another digit */
        while (e[0] == ',' && isdigit((unsigned char)e[1]) && isdigit((unsigned char)e[2]) &&
               isdigit((unsigned char)e[3]) && !isdigit((unsigned char)e[4]))
            e += 4;
        if (e[0] == '.' && isdigit((unsigned char)e[1]))
            for (e++; isdigit((unsigned char)*e); e++) {}
        best = s;
        best_len = (size_t)(e - s);
        p = e - 1;
    }
    if (!best) return -1;
    size_t n = 0;
    for (size_t i = 0; i < best_len; i++)
        if (best[i] != ',') buf[n++] = best[i];
    buf[n] = 0;
    if (strchr(buf, '.')) {
        while (n > 0 && buf[n - 1] == '0') buf[--n] = 0;
        if (n > 0 && buf[n - 1] == '.') buf[--n] = 0;
    }
    if (!strcmp(buf, "-0")) strcpy(buf, "0"), n = 1;
    return (int32_t)n;
}

int32_t cot_extract(const cot_vote_spec *v, const char *text, char *out, size_t cap) {
    if (cap == 0) return -1;
    out[0] = 0;
    text = chat_after_think(text); /* a reasoning model answers after its </think> */
    if (v->kind == COT_VOTE_LAST_NUMBER) {
        char *buf = malloc(strlen(text) + 1);
        if (!buf) return -1;
        int32_t n = last_number(text, buf);
        if (n >= 0) n = put(out, cap, buf, (size_t)n);
        free(buf);
        return n;
    }
    if (v->kind != COT_VOTE_MARKER || !v->marker || !v->marker[0]) return -1;
    const char *at = NULL;
    for (const char *p = strstr(text, v->marker); p; p = strstr(p + 1, v->marker)) at = p;
    if (!at) return -1;
    const char *s = at + strlen(v->marker), *e;
    while (*s == ' ' || *s == '\t') s++;
    for (e = s; *e && *e != '\n' && *e != '\r'; e++) {}
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (e > s && e[-1] == '.') e--;
    while (e > s && isspace((unsigned char)e[-1])) e--;
    if (e == s) return -1;
    return put(out, cap, s, (size_t)(e - s));
}

bool cot_vote_counts(const cot_vote_spec *v, strategy_end end) {
    return v->all || end == STRAT_END_EOG || end == STRAT_END_STOP;
}

static bool has_vote(const char *const *answers, const bool *counts, int32_t j) {
    return answers[j] && (!counts || counts[j]);
}

int32_t cot_majority(const char *const *answers, const bool *counts, int32_t n, int32_t *votes) {
    int32_t best = -1, best_votes = 0;
    for (int32_t i = 0; i < n; i++) {
        if (!has_vote(answers, counts, i)) continue;
        bool seen = false; /* counted already, as an earlier chain's answer */
        for (int32_t j = 0; j < i && !seen; j++) seen = has_vote(answers, counts, j) && !strcmp(answers[j], answers[i]);
        if (seen) continue;
        int32_t count = 0;
        for (int32_t j = i; j < n; j++) count += has_vote(answers, counts, j) && !strcmp(answers[j], answers[i]);
        if (count > best_votes) {
            best = i;
            best_votes = count;
        }
    }
    *votes = best_votes;
    return best;
}

/* ---- the strategy table (strategy.h) ----
 * cot (cot.h) behind the strategy interface (strategy.h): k chains with distinct first
 * tokens from one node; the results are the chains. */

typedef struct cot_run {
    cot c;
    int32_t steps, budget;
} cot_run;

static void cot_run_free(void *self) {
    cot_run *r = self;
    if (!r) return;
    cot_free(&r->c);
    free(r);
}

static void *cot_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    cot_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->budget = o->budget;
    if (strategy_start_node(env->f, o->from, err) ||
        cot_init(&r->c, env->f, o->from, o->u.cot.k, &o->sample, o->budget, o->n_vocab, err) ||
        strat_grow_stops(&r->c.g, o, err)) {
        cot_run_free(r);
        return NULL;
    }
    return r;
}

static st_code cot_run_step(void *self, const strategy_env *env, st_err *err) {
    cot_run *r = self;
    if (cot_done(&r->c)) return ST_OK;
    st_code rc = cot_step(&r->c, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (!rc) r->steps++;
    return rc;
}

static bool cot_run_done(const void *self) { return cot_done(&((const cot_run *)self)->c); }

static void cot_run_progress(const void *self, strategy_progress *out) {
    const cot_run *r = self;
    out->done = r->steps;
    out->goal = r->budget;
}

static int32_t cot_run_n_results(const void *self) { return ((const cot_run *)self)->c.g.n; }

static void cot_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    strat_grow_result(&((const cot_run *)self)->c.g, i, out);
}

static int32_t cot_run_running(const void *self, forest_id *out, int32_t cap) {
    return strat_grow_running(&((const cot_run *)self)->c.g, out, cap);
}

/* Chains whose leaf went end; a fork node that went leaves nothing to fork. */
static void cot_run_forget(void *self, const forest *f) {
    cot_run *r = self;
    grow_forget(&r->c.g, f);
    if (!forest_get(f, r->c.from)) r->c.forked = true;
}

const strategy_ops strat_cot_ops = {
    .name = "cot",
    .kind = STRAT_COT,
    .summary = STRAT_SUM_CHAINS,
    .create = cot_run_create,
    .step = cot_run_step,
    .done = cot_run_done,
    .progress = cot_run_progress,
    .n_results = cot_run_n_results,
    .result = cot_run_result,
    .running = cot_run_running,
    .forget = cot_run_forget,
    .free = cot_run_free,
};
