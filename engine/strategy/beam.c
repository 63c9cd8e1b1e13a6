/* beam.c - beam search as a state machine over forest steps (see beam.h for the rules).
 *
 * State between steps: the live hypotheses (a pending leaf each, its cumulative sum and
 * the previous-list index it came from) and the finished list, kept sorted best first.
 * A step: compute the leaves, gather each leaf's 2B best tokens, order all candidates,
 * walk them as transformers' BeamSearchScorer.process does, append the winners, prune
 * the leaves nobody continues (with ancestors only they used), check the stop rule. */
#include "base/array.h"
#include "strategy/beam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strategy/grow.h" /* GROW_END_BUDGET, the tag of a leaf stopped by the budget */
#include "forest/sample.h"
#include "strategy/strategy_impl.h"

typedef struct beam_cand {
    double sum;     /* cumulative log-probability with this token */
    int32_t beam;   /* index of the live hypothesis it extends */
    int32_t token;
    float lp;       /* the token's log-probability */
} beam_cand;

typedef struct beam_fin {
    beam_hyp h;
    uint64_t seq;   /* insertion order, for ties */
} beam_fin;

struct beam {
    beam_params p;
    const tok *tk;
    int32_t V;
    forest_id start;
    /* live hypotheses, in choice order (B at most) */
    forest_id *leaf;   /* (B) */
    double *sum;       /* (B) */
    int32_t *parent;   /* (B) index in the previous live list; -1 at the start */
    int32_t n_live;
    /* the next list while a step builds it */
    forest_id *nleaf;
    double *nsum;
    int32_t *nparent;
    beam_fin *fin;     /* (B + 1) sorted: score desc, then seq asc */
    beam_hyp *res;     /* (B) views of fin in order, for beam_result */
    int32_t n_fin;
    uint64_t seq;
    beam_cand *cand;   /* (B * 2B) */
    beam_cand *top;    /* (2B) one beam's best tokens */
    float *lsm;        /* (V) log-softmax scratch */
    int32_t *path;     /* path scratch */
    int32_t cap_path;
    int32_t steps, cur_len, kv_peak;
    bool done;
};

beam_params beam_default_params(void) {
    return (beam_params){.width = 4, .max_tokens = 64, .alpha = 1.0f,
                         .early_stopping = BEAM_STOP_HEURISTIC, .eos = -1};
}

void beam_free(beam *b) {
    if (!b) return;
    for (int32_t i = 0; i < b->n_fin; i++) free(b->fin[i].h.tokens);
    free(b->leaf), free(b->sum), free(b->parent);
    free(b->nleaf), free(b->nsum), free(b->nparent);
    free(b->fin), free(b->res), free(b->cand), free(b->top), free(b->lsm), free(b->path);
    free(b);
}

beam *beam_init(forest *f, forest_id from, const beam_params *p, const tok *tk,
                int32_t n_vocab, st_err *err) {
    const forest_node *nd = forest_get(f, from);
    if (!nd) {
        st_set(err, ST_ERR_ARG, "beam: the start node no longer exists");
        return NULL;
    }
    bool rescore = nd->state == FOREST_COMPUTED;
    if (p->width < 1 || p->width > (1 << 16) || p->max_tokens < 0 || n_vocab < 1 ||
        p->early_stopping < BEAM_STOP_HEURISTIC || p->early_stopping > BEAM_STOP_NEVER ||
        !isfinite(p->alpha)) {
        st_set(err, ST_ERR_ARG, "beam: bad parameters (width %d, max_tokens %d, alpha %g)",
               p->width, p->max_tokens, (double)p->alpha);
        return NULL;
    }
    beam *b = calloc(1, sizeof *b);
    if (!b) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    size_t B = (size_t)p->width, K = 2 * B;
    b->p = *p;
    b->tk = tk;
    b->V = n_vocab;
    b->start = from;
    b->leaf = malloc(sizeof *b->leaf * B);
    b->sum = malloc(sizeof *b->sum * B);
    b->parent = malloc(sizeof *b->parent * B);
    b->nleaf = malloc(sizeof *b->nleaf * B);
    b->nsum = malloc(sizeof *b->nsum * B);
    b->nparent = malloc(sizeof *b->nparent * B);
    b->fin = calloc(B + 1, sizeof *b->fin);
    b->res = calloc(B, sizeof *b->res);
    b->cand = malloc(sizeof *b->cand * B * K);
    b->top = malloc(sizeof *b->top * K);
    b->lsm = malloc(sizeof(float) * (size_t)n_vocab);
    if (!b->leaf || !b->sum || !b->parent || !b->nleaf || !b->nsum || !b->nparent || !b->fin ||
        !b->res || !b->cand || !b->top || !b->lsm) {
        beam_free(b);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->leaf[0] = from;
    b->sum[0] = 0;
    b->parent[0] = -1;
    b->n_live = 1;
    b->done = p->max_tokens == 0;
    /* a pending node with pending children is not a leaf, and a computed one is re-scored:
     * ask for its logits either way */
    if (rescore || forest_n_children(f, from) > 0)
        forest_set_flags(f, from, FOREST_WANT_LOGITS, 0);
    return b;
}

static bool is_end(const beam *b, int32_t t) {
    return t == b->p.eos || (b->tk && tok_is_eog(b->tk, t));
}

/* The generated tokens of live hypothesis i (its last cur_len path tokens) into b->path;
 * returns the path length (the generated part starts at len - cur_len), -1 when out of
 * memory. One extra entry is left free for an end token. */
static int32_t live_path(beam *b, const forest *f, int32_t i) {
    int32_t len = forest_path(f, b->leaf[i], NULL, 0);
    if (len < 0) return -1;
    if (!ARR_GROW_I32(b->path, len + 1, b->cap_path)) return -1;
    return forest_path(f, b->leaf[i], b->path, len);
}

/* Adds a finished hypothesis (transformers' BeamHypotheses.add): a full list admits only
 * a strictly better score and then drops its worst, the earliest added among equals. */
static st_code fin_add(beam *b, const int32_t *toks, int32_t n, double sum, bool ended,
                       st_err *err) {
    int32_t B = b->p.width;
    double score = sum / pow((double)n, (double)b->p.alpha);
    if (b->n_fin == B && !(score > b->fin[B - 1].h.score)) return ST_OK;
    int32_t *copy = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!copy) return st_set(err, ST_ERR_NOMEM, "out of memory");
    memcpy(copy, toks, sizeof(int32_t) * (size_t)n);
    int32_t at = b->n_fin;
    while (at > 0 && b->fin[at - 1].h.score < score) at--; /* after equal scores */
    memmove(&b->fin[at + 1], &b->fin[at], sizeof *b->fin * (size_t)(b->n_fin - at));
    b->fin[at] = (beam_fin){{copy, n, sum, score, ended}, b->seq++};
    b->n_fin++;
    if (b->n_fin > B) {
        int32_t w = b->n_fin - 1; /* the worst group ends the list; drop its earliest */
        while (w > 0 && b->fin[w - 1].h.score == b->fin[b->n_fin - 1].h.score) w--;
        free(b->fin[w].h.tokens);
        memmove(&b->fin[w], &b->fin[w + 1], sizeof *b->fin * (size_t)(b->n_fin - 1 - w));
        b->n_fin--;
    }
    for (int32_t i = 0; i < b->n_fin; i++) b->res[i] = b->fin[i].h;
    return ST_OK;
}

/* The K best tokens of one log-softmax row (ties: lower id first) into top; returns K. */
static int32_t best_tokens(const float *lsm, int32_t V, int32_t K, int32_t beam_i,
                           double base, beam_cand *top) {
    int32_t k = 0;
    for (int32_t t = 0; t < V; t++) {
        float x = lsm[t];
        if (k == K && !(x > top[K - 1].lp)) continue;
        int32_t j = k < K ? k++ : K - 1;
        while (j > 0 && top[j - 1].lp < x) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = (beam_cand){base + (double)x, beam_i, t, x};
    }
    return k;
}

static int cand_cmp(const void *pa, const void *pb) {
    const beam_cand *a = pa, *b = pb;
    if (a->sum != b->sum) return a->sum > b->sum ? -1 : 1;
    if (a->beam != b->beam) return a->beam < b->beam ? -1 : 1;
    return a->token < b->token ? -1 : a->token > b->token;
}

/* Prunes node and every ancestor below the start node that leads only to it. */
static st_code prune_up(beam *b, forest *f, forest_id node, st_err *err) {
    if (node == b->start) return ST_OK;
    for (;;) {
        const forest_node *nd = forest_get(f, node);
        if (!nd || nd->parent < 0) break;
        forest_id up = forest_id_at(f, nd->parent);
        if (up == b->start || forest_n_children(f, up) != 1) break;
        node = up;
    }
    return forest_prune(f, node, err);
}

/* Every live hypothesis's 2B best tokens as candidates, ordered (see beam.h); returns
 * how many, -1 when a leaf has no logits in the step. */
static int32_t beam_candidates(beam *b, const step_plan *p) {
    int32_t K = 2 * b->p.width < b->V ? 2 * b->p.width : b->V, nc = 0;
    for (int32_t i = 0; i < b->n_live; i++) {
        const float *lg = step_logits_of(p, b->leaf[i]);
        const int32_t *ids;
        const float *lp;
        if (!lg && step_topk_of(p, b->leaf[i], &ids, &lp) >= K) { /* the rows stayed on a device */
            for (int32_t j = 0; j < K; j++)
                b->cand[nc++] = (beam_cand){b->sum[i] + (double)lp[j], i, ids[j], lp[j]};
            continue;
        }
        if (!lg) return -1 - i;
        sample_log_softmax(lg, b->V, b->lsm);
        int32_t k = best_tokens(b->lsm, b->V, K, i, b->sum[i], b->top);
        memcpy(&b->cand[nc], b->top, sizeof *b->top * (size_t)k);
        nc += k;
    }
    qsort(b->cand, (size_t)nc, sizeof *b->cand, cand_cmp);
    return nc;
}

/* Walks the first 2B of nc candidates: end tokens ranked < B finish a hypothesis, the
 * first B others are the next live list (nleaf: their parents' leaves for now, nsum,
 * nparent, top). *n_next gets how many. */
static st_code beam_walk(beam *b, const forest *f, int32_t nc, int32_t *n_next, st_err *err) {
    int32_t B = b->p.width, limit = nc < 2 * B ? nc : 2 * B, n = 0;
    for (int32_t r = 0; r < limit && n < B; r++) {
        const beam_cand *cd = &b->cand[r];
        if (is_end(b, cd->token)) {
            if (r >= B) continue;
            int32_t len = live_path(b, f, cd->beam);
            if (len < 0) return st_set(err, ST_ERR_NOMEM, "out of memory");
            int32_t *gen = b->path + (len - b->cur_len);
            gen[b->cur_len] = cd->token;
            st_code rc = fin_add(b, gen, b->cur_len + 1, cd->sum, true, err);
            if (rc) return rc;
            continue;
        }
        b->nleaf[n] = b->leaf[cd->beam]; /* the parent, replaced by the child later */
        b->nsum[n] = cd->sum;
        b->nparent[n] = cd->beam;
        b->top[n] = *cd;
        n++;
    }
    *n_next = n;
    return ST_OK;
}

/* Whether the search stops after this step (beam.h's early_stopping rules), before the
 * length limit: n_next live hypotheses go on. */
static bool beam_stops(const beam *b, int32_t n_next) {
    int32_t B = b->p.width;
    bool done = n_next == 0;
    if (b->n_fin == B) {
        if (b->p.early_stopping == BEAM_STOP_EARLY) return true;
        bool bound = b->p.early_stopping == BEAM_STOP_NEVER && b->p.alpha > 0;
        double len = bound ? (double)b->p.max_tokens : (double)b->cur_len;
        double best = b->cand[0].sum / pow(len, (double)b->p.alpha);
        done = done || b->fin[B - 1].h.score >= best;
    }
    return done;
}

/* The next live list into the forest: the children appended, the leaves nobody continues
 * pruned with the ancestors only they used, the lists swapped. */
static st_code beam_advance(beam *b, forest *f, int32_t n_next, st_err *err) {
    st_code rc;
    for (int32_t j = 0; j < n_next; j++) {
        forest_id child;
        rc = forest_append(f, b->nleaf[j], &b->top[j].token, &b->top[j].lp, 1, &child, err);
        if (rc) return rc;
        b->nleaf[j] = child;
    }
    for (int32_t i = 0; i < b->n_live; i++)
        if (forest_n_children(f, b->leaf[i]) == 0 && (rc = prune_up(b, f, b->leaf[i], err)))
            return rc;
    forest_id *tl = b->leaf;
    double *ts = b->sum;
    int32_t *tp = b->parent;
    b->leaf = b->nleaf, b->sum = b->nsum, b->parent = b->nparent;
    b->nleaf = tl, b->nsum = ts, b->nparent = tp;
    b->n_live = n_next;
    return ST_OK;
}

/* Ends the search: at the length limit the live hypotheses are candidates too
 * (transformers' finalize) unless it already stopped; the live leaves are finished. */
static st_code beam_finish(beam *b, forest *f, bool stopped, st_err *err) {
    bool at_limit = b->cur_len >= b->p.max_tokens;
    for (int32_t i = 0; !stopped && i < b->n_live; i++) {
        int32_t len = live_path(b, f, i);
        if (len < 0) return st_set(err, ST_ERR_NOMEM, "out of memory");
        st_code rc = fin_add(b, b->path + (len - b->cur_len), b->cur_len, b->sum[i], false, err);
        if (rc) return rc;
    }
    b->done = true;
    for (int32_t i = 0; i < b->n_live; i++) {
        forest_set_flags(f, b->leaf[i], FOREST_FINISHED | FOREST_NO_LOGITS, 0);
        if (at_limit) forest_set_tag(f, b->leaf[i], GROW_END_BUDGET);
    }
    return ST_OK;
}

st_code beam_step(beam *b, forest *f, step_plan *p, model_ctx *c, st_err *err) {
    if (b->done) return ST_OK;
    /* a device brings back each row's 2B best tokens alone, not its logits */
    st_code rc = step_forest_topk(f, p, c, 2 * b->p.width, err);
    if (rc) return rc;
    int32_t used = kv_alloc_used(forest_kv(f));
    if (used > b->kv_peak) b->kv_peak = used;
    int32_t nc = beam_candidates(b, p), n_next = 0;
    if (nc < 0) return st_set(err, ST_ERR_ARG, "beam: hypothesis %d's leaf was not scored", -1 - nc);
    if ((rc = beam_walk(b, f, nc, &n_next, err))) return rc;
    b->cur_len++;
    bool stopped = beam_stops(b, n_next);
    if ((rc = beam_advance(b, f, n_next, err))) return rc;
    b->steps++;
    if (stopped || b->cur_len >= b->p.max_tokens) return beam_finish(b, f, stopped, err);
    return ST_OK;
}

void beam_forget(beam *b, const forest *f) {
    int32_t n = 0;
    for (int32_t i = 0; i < b->n_live; i++)
        if (forest_get(f, b->leaf[i])) b->leaf[n] = b->leaf[i], b->sum[n] = b->sum[i], b->parent[n] = b->parent[i], n++;
    b->n_live = n;
    if (n == 0) b->done = true;
}

bool beam_done(const beam *b) { return b->done; }
int32_t beam_steps(const beam *b) { return b->steps; }
int32_t beam_cur_len(const beam *b) { return b->cur_len; }
int32_t beam_kv_peak(const beam *b) { return b->kv_peak; }
int32_t beam_n_live(const beam *b) { return b->n_live; }
forest_id beam_live_leaf(const beam *b, int32_t i) { return b->leaf[i]; }
double beam_live_sum(const beam *b, int32_t i) { return b->sum[i]; }
int32_t beam_live_parent(const beam *b, int32_t i) { return b->parent[i]; }
int32_t beam_n_results(const beam *b) { return b->n_fin; }
const beam_hyp *beam_result(const beam *b, int32_t i) { return &b->res[i]; }

/* ---- the strategy table (strategy.h) ----
 * beam search (beam.h) behind the strategy interface (strategy.h). The results are the
 * finished hypotheses, best first (their tokens, no forest leaf); the live hypotheses
 * are the running leaves, with their scores for views. */

typedef struct beam_run {
    beam *b;
    forest_id from;
    float alpha;
    int32_t budget;
} beam_run;

static void beam_run_free(void *self) {
    beam_run *r = self;
    if (!r) return;
    beam_free(r->b);
    free(r);
}

static void *beam_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    beam_params bp = o->u.beam;
    bp.max_tokens = o->budget;
    beam_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    r->from = o->from;
    r->alpha = bp.alpha;
    r->budget = o->budget;
    if (strategy_start_node(env->f, o->from, err) ||
        !(r->b = beam_init(env->f, o->from, &bp, env->tk, o->n_vocab, err))) {
        beam_run_free(r);
        return NULL;
    }
    return r;
}

static st_code beam_run_step(void *self, const strategy_env *env, st_err *err) {
    return beam_step(((beam_run *)self)->b, env->f, env->plan, env->ctx, err);
}

static bool beam_run_done(const void *self) { return beam_done(((const beam_run *)self)->b); }

static void beam_run_forget(void *self, const forest *f) { beam_forget(((beam_run *)self)->b, f); }

static void beam_run_progress(const void *self, strategy_progress *out) {
    const beam_run *r = self;
    out->done = beam_steps(r->b);
    out->goal = r->budget;
}

static int32_t beam_run_n_results(const void *self) { return beam_n_results(((const beam_run *)self)->b); }

static void beam_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    const beam_run *r = self;
    const beam_hyp *h = beam_result(r->b, i);
    *out = (strategy_result){.start = r->from, .leaf = FOREST_NONE, .tokens = h->tokens, .n_tokens = h->n,
                             .score = h->score, .end = h->ended ? STRAT_END_EOG : STRAT_END_BUDGET,
                             .stop = -1, .eog_token = h->ended && h->n > 0 ? h->tokens[h->n - 1] : -1};
}

static int32_t beam_run_running(const void *self, forest_id *out, int32_t cap) {
    const beam *b = ((const beam_run *)self)->b;
    int32_t n = 0;
    for (int32_t i = 0; i < beam_n_live(b) && n < cap; i++) out[n++] = beam_live_leaf(b, i);
    return n;
}

/* The live hypotheses scored as results are (sum / length^alpha). */
static int32_t beam_run_scores(const void *self, forest_id *ids, double *scores, int32_t cap) {
    const beam_run *r = self;
    int32_t len = beam_cur_len(r->b), n = 0;
    for (int32_t i = 0; i < beam_n_live(r->b) && n < cap; i++, n++) {
        ids[n] = beam_live_leaf(r->b, i);
        scores[n] = len > 0 ? beam_live_sum(r->b, i) / pow((double)len, (double)r->alpha) : 0;
    }
    return n;
}

const strategy_ops strat_beam_ops = {
    .name = "beam",
    .kind = STRAT_BEAM,
    .summary = STRAT_SUM_RANKED,
    .create = beam_run_create,
    .step = beam_run_step,
    .done = beam_run_done,
    .progress = beam_run_progress,
    .n_results = beam_run_n_results,
    .result = beam_run_result,
    .running = beam_run_running,
    .scores = beam_run_scores,
    .forget = beam_run_forget,
    .free = beam_run_free,
};

const beam *strategy_beam(const strategy *s) {
    return strategy_ops_of(s) == &strat_beam_ops ? ((const beam_run *)strategy_state(s))->b : NULL;
}
