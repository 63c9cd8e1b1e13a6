/* tot.c - tree of thoughts behind the strategy interface (strategy.h, STRAT_TOT): a search
 * over thoughts where the candidates of an expansion are grown, judged and pruned together
 * over one shared KV cache.
 *
 * A thought is a grown chain that ends at a delimiter (the options' stop strings: a
 * newline, a sentence end), at the token budget, or at an end of text. Expanding a node
 * forks k thoughts with distinct first tokens under it (cot_fork_branches, from logits the
 * previous step returned), all grown together one step per token; then ONE judge step
 * (judge.h) scores every new thought: once the search's text closes a thinking section,
 * what follows it (judge_cut: the answer so far), not the thinking.
 *
 * Breadth-first (the default): level L expands every kept node that can go on (not ended
 * by an end of text); the best b of the new thoughts and of the kept thoughts that had
 * ended the text are kept; every other branch is pruned back to the nearest kept path (its
 * slots freed); with u.tot.dim (the TUI, which shows the search) the losers stay, flagged
 * FOREST_DIMMED, until the run ends or the cache fills, and are pruned then in the order
 * they lost, which leaves the same forest. After d levels (or when nothing can go on) the results are the kept
 * leaves, best first: the answer is the first one's text.
 *
 * Depth-first (u.tot.dfs): a stack of judged nodes, the start at first. Pop the top: a
 * node at depth d, or whose thought ended the text, is the answer and the search stops;
 * else expand it. Its children scoring at least the threshold, the best b of them, go on
 * the stack best on top (so the best child is expanded next); the others are pruned. A
 * node left with no child is a dead end: pruned, and the search backtracks to the next
 * node on the stack (re-scored by one step, since its logits are no longer the last
 * step's). At most 1 + (d - 1) * b expansions, the breadth-first search's count; when
 * they run out or the stack empties there is no answer. Results: the answer, then the
 * stack from its top. The expansions are traced (tot.h).
 *
 * Steps: one to compute the start node, per expansion (breadth-first: per level) up to
 * `budget` grow steps and one judge step (which also returns the logits the next
 * expansion forks from), depth-first one more per backtrack. Thought j of the search
 * samples with seed sp.seed + j (j counts thoughts across levels), so a run repeats
 * exactly. Not here: the judge's wording (judge_tokens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "strategy/cot.h"
#include "strategy/judge.h"
#include "strategy/strategy_impl.h"
#include "strategy/tot.h"

/* TOT_EXPAND: a round (a level, a dfs expansion) was judged and the next one is forked
 * by the next step, from the logits the judge step returned: between the two, the forest
 * holds the round's result alone (progress.stage), where a view may pause. */
enum { TOT_START, TOT_EXPAND, TOT_GROW, TOT_JUDGE, TOT_DONE };

/* One candidate of a level: a thought below a kept node. */
typedef struct tot_cand {
    forest_id top, leaf; /* the thought's first and last node */
    double score;
    int32_t level;       /* thoughts below the start */
    bool ended;          /* ended by an end of text: judged once, never expanded */
} tot_cand;

typedef struct tot_run {
    forest_id from;
    int32_t k, b, d, budget, n_vocab;
    sample_params sp;
    judge_prompt jp;
    char **stops;
    int32_t n_stops;
    int phase;
    int32_t level;       /* levels judged so far */
    tot_cand *kept;      /* (n_kept <= b) best first */
    int32_t n_kept;
    tot_cand *cand;      /* (n_cand) this level's: new thoughts, then kept ones that ended */
    bool dim;            /* losers dimmed until the end (strategy_opts.u.tot.dim) */
    tot_cand *dimmed;    /* (n_dimmed) the losers not pruned yet, in the order they lost */
    int32_t n_dimmed, cap_dimmed;
    int32_t n_cand, cap_cand;
    grow g;              /* this level's thoughts; thought i is g.br[i] */
    judge jg;
    int32_t *first, *order;
    double *cscore;      /* (n_cand) scores for ranking */
    float *scratch;      /* (n_vocab) */
    int64_t thoughts, judged, pruned_nodes;
    int32_t steps;
    /* depth-first */
    bool dfs;
    double threshold;
    tot_cand *stack;     /* (n_stack) nodes to expand, the next on top (last) */
    int32_t n_stack, cap_stack;
    tot_cand answer;     /* leaf FOREST_NONE: none yet */
    int32_t expansions, max_expansions, backtracks;
    tot_visit *visits;   /* (n_visits) the trace (tot.h) */
    int32_t n_visits, cap_visits;
    tot_child *kids;     /* (n_kids) */
    int32_t n_kids, cap_kids;
} tot_run;

static void tot_free(void *self) {
    tot_run *r = self;
    if (!r) return;
    judge_tokens_free(&r->jp);
    for (int32_t i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->kept);
    free(r->cand);
    grow_free(&r->g);
    judge_free(&r->jg);
    free(r->first);
    free(r->order);
    free(r->cscore);
    free(r->scratch);
    free(r->stack);
    free(r->visits);
    free(r->kids);
    free(r->dimmed);
    free(r);
}

#define TOT_MAX_BD 32768

static void *tot_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    int32_t k = o->u.tot.k, b = o->u.tot.b, d = o->u.tot.d;
    /* b and d bounded so that 1 + (d - 1) b expansions fit an int32 */
    if (k < 1 || b < 1 || d < 1 || k > o->n_vocab || b > TOT_MAX_BD || d > TOT_MAX_BD || !o->u.tot.prompt) {
        st_set(err, ST_ERR_ARG, "tot: k %d, b %d, d %d (want each at least 1, k at most the vocabulary, b and d at "
               "most %d)%s", k, b, d, TOT_MAX_BD, o->u.tot.prompt ? "" : "; no judge prompt");
        return NULL;
    }
    tot_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    *r = (tot_run){.from = o->from, .k = k, .b = b, .d = d, .budget = o->budget, .n_vocab = o->n_vocab,
                   .sp = o->sample, .dfs = o->u.tot.dfs, .dim = o->u.tot.dim && !o->u.tot.dfs, .threshold = o->u.tot.threshold,
                   .answer = {.leaf = FOREST_NONE}, .expansions = 1, .max_expansions = 1 + (d - 1) * b};
    r->kept = malloc(sizeof *r->kept * (size_t)b);
    r->first = malloc(sizeof(int32_t) * (size_t)k);
    r->scratch = malloc(sizeof(float) * (size_t)o->n_vocab);
    r->stops = o->n_stops > 0 ? calloc((size_t)o->n_stops, sizeof *r->stops) : NULL;
    bool ok = r->kept && r->first && r->scratch && (o->n_stops == 0 || r->stops);
    for (int32_t i = 0; ok && i < o->n_stops; i++, r->n_stops++) ok = (r->stops[i] = strdup(o->stops[i])) != NULL;
    if (!ok) st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!ok || strategy_start_node(env->f, o->from, err) || judge_tokens_copy(&r->jp, o->u.tot.prompt, err)) {
        tot_free(r);
        return NULL;
    }
    r->kept[0] = (tot_cand){.top = FOREST_NONE, .leaf = o->from, .score = NAN};
    r->n_kept = 1;
    return r;
}

static st_code add_cand(tot_run *r, tot_cand c, st_err *err) {
    if (r->n_cand == r->cap_cand) {
        int32_t cap = r->cap_cand ? 2 * r->cap_cand : 16;
        tot_cand *nc = realloc(r->cand, sizeof *nc * (size_t)cap);
        if (nc) r->cand = nc;
        int32_t *no = nc ? realloc(r->order, sizeof(int32_t) * (size_t)cap) : NULL;
        if (no) r->order = no;
        double *ns = no ? realloc(r->cscore, sizeof(double) * (size_t)cap) : NULL;
        if (ns) r->cscore = ns;
        if (!ns) return st_set(err, ST_ERR_NOMEM, "out of memory");
        r->cap_cand = cap;
    }
    r->cand[r->n_cand++] = c;
    return ST_OK;
}

/* The next level: k thoughts forked under every kept node that can go on, from the logits
 * the last step returned for it. */
static st_code expand(tot_run *r, const strategy_env *env, st_err *err) {
    grow_free(&r->g);
    st_code rc = r->n_stops > 0 ? grow_set_stop(&r->g, (const char *const *)r->stops, r->n_stops, err) : ST_OK;
    for (int32_t j = 0; j < r->n_kept && !rc; j++) {
        if (r->kept[j].ended) continue;
        const float *lg = step_logits_of(env->plan, r->kept[j].leaf);
        if (!lg) return st_set(err, ST_ERR_ARG, "tot: kept node %d was not scored", j);
        int32_t i0 = r->g.n;
        for (int32_t i = 0; i < r->k && !rc; i++) {
            sample_params p = r->sp;
            p.seed = r->sp.seed + (uint64_t)r->thoughts++;
            rc = grow_add(&r->g, env->f, r->kept[j].leaf, &p, r->budget, r->n_vocab, err);
        }
        if (!rc)
            rc = cot_fork_branches(&r->g, env->f, i0, r->k, lg, r->n_vocab, r->scratch, r->first, env->tk, env->emit,
                                   env->emit_ud, err);
    }
    r->phase = r->g.n_active > 0 ? TOT_GROW : TOT_JUDGE;
    return rc;
}

/* The first node of branch i's thought (the child of its start on its path). */
static forest_id thought_top(const forest *f, const grow_branch *br) {
    forest_id at = br->leaf;
    for (;;) {
        forest_id up = forest_id_at(f, forest_get(f, at)->parent);
        if (up == br->start) return at;
        at = up;
    }
}

/* Removes cand's thought and the single-child chain above it, up to the nearest node that
 * still has other children (or the search's start). */
static void prune_cand(tot_run *r, forest *f, const tot_cand *c) {
    forest_id cut = c->top;
    for (;;) {
        forest_id up = forest_id_at(f, forest_get(f, cut)->parent);
        if (up == r->from || forest_n_children(f, up) != 1) break;
        cut = up;
    }
    int32_t before = forest_n_live(f);
    forest_prune(f, cut, NULL);
    r->pruned_nodes += before - forest_n_live(f);
}

/* A loser kept for a view: its thought flagged FOREST_DIMMED, pruned by prune_dimmed. */
static st_code dim_cand(tot_run *r, forest *f, const tot_cand *c, st_err *err) {
    if (!ARR_GROW_I32(r->dimmed, r->n_dimmed + 1, r->cap_dimmed)) return st_set(err, ST_ERR_NOMEM, "out of memory");
    r->dimmed[r->n_dimmed++] = *c;
    for (forest_id at = c->leaf;; at = forest_id_at(f, forest_get(f, at)->parent)) {
        forest_set_flags(f, at, FOREST_DIMMED, 0);
        if (at == c->top) break;
    }
    return ST_OK;
}

/* The dimmed losers pruned, in the order they lost: the forest is then the one pruning
 * each at once would have left. */
static void prune_dimmed(tot_run *r, forest *f) {
    for (int32_t i = 0; i < r->n_dimmed; i++)
        if (forest_get(f, r->dimmed[i].top)) prune_cand(r, f, &r->dimmed[i]);
    r->n_dimmed = 0;
}

/* The candidates of this level: the new thoughts (a thought whose first token ended the
 * text has none), then the kept ones that had ended the text; returns how many are new. */
static int32_t gather(tot_run *r, const forest *f, st_err *err) {
    r->n_cand = 0;
    for (int32_t i = 0; i < r->g.n; i++) {
        const grow_branch *br = &r->g.br[i];
        if (br->made > 0 && !br->pruned &&
            add_cand(r, (tot_cand){.top = thought_top(f, br), .leaf = br->leaf, .score = NAN, .ended = br->eog}, err))
            return -1;
    }
    int32_t n_new = r->n_cand;
    for (int32_t j = 0; j < r->n_kept; j++)
        if (r->kept[j].ended && add_cand(r, r->kept[j], err)) return -1;
    return n_new;
}

/* The judge step over the new thoughts gathered (want_logits: they also get their own
 * logits, to be expanded next); returns how many are new, -1 on failure (err set). */
static int32_t judge_new(tot_run *r, const strategy_env *env, bool want_logits, st_err *err) {
    int32_t n_new = gather(r, env->f, err);
    if (n_new <= 0) return n_new;
    forest_id *ids = malloc(sizeof *ids * (size_t)n_new);
    if (!ids) return st_set(err, ST_ERR_NOMEM, "out of memory"), -1;
    for (int32_t i = 0; i < n_new; i++) ids[i] = r->cand[i].leaf;
    const judge_cut cut = {.tk = env->tk, .from = r->from};
    st_code rc = judge_attach(&r->jg, env->f, &r->jp, ids, n_new, want_logits, env->tk ? &cut : NULL,
                              err);
    free(ids);
    if (!rc) rc = judge_step(&r->jg, env->f, env->plan, env->ctx, &r->jp, err);
    if (rc) return -1; /* the next try gathers again */
    for (int32_t i = 0; i < n_new; i++) r->cand[i].score = r->jg.score[i];
    r->judged += n_new;
    return n_new;
}

/* The candidates ranked into r->order, best first. */
static void rank_cands(tot_run *r) {
    for (int32_t i = 0; i < r->n_cand; i++) r->order[i] = i, r->cscore[i] = r->cand[i].score;
    judge_rank(r->cscore, r->order, r->n_cand);
}

/* Breadth-first: the judge step over this level's new thoughts, then the best b of all
 * candidates kept and the rest pruned. */
static st_code judge_level(tot_run *r, const strategy_env *env, st_err *err) {
    int32_t n_new = judge_new(r, env, r->level + 1 < r->d, err);
    if (n_new < 0) return err->code;
    r->level++;
    bool more = false;
    if (n_new > 0) { /* else no new thought: the kept ones stay, and nothing can go on */
        rank_cands(r);
        r->n_kept = r->n_cand < r->b ? r->n_cand : r->b;
        for (int32_t i = 0; i < r->n_kept; i++) r->kept[i] = r->cand[r->order[i]], more |= !r->kept[i].ended;
        for (int32_t i = r->n_kept; i < r->n_cand; i++)
            if (!r->dim) prune_cand(r, env->f, &r->cand[r->order[i]]);
            else if (dim_cand(r, env->f, &r->cand[r->order[i]], err)) return err->code;
    }
    r->phase = r->level < r->d && more ? TOT_EXPAND : TOT_DONE;
    if (r->phase == TOT_DONE) prune_dimmed(r, env->f);
    return ST_OK;
}

/* ---- depth-first ---- */

static st_code push_stack(tot_run *r, tot_cand c, st_err *err) {
    if (!ARR_GROW_I32(r->stack, r->n_stack + 1, r->cap_stack)) return st_set(err, ST_ERR_NOMEM, "out of memory");
    r->stack[r->n_stack++] = c;
    return ST_OK;
}

/* The trace entry of the expansion just judged (kept[0]) and its children, best first
 * (the first n_keep kept). */
static st_code trace_visit(tot_run *r, int32_t n_keep, st_err *err) {
    if (!ARR_GROW_I32(r->visits, r->n_visits + 1, r->cap_visits) ||
        !ARR_GROW_I32(r->kids, r->n_kids + r->n_cand, r->cap_kids))
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    r->visits[r->n_visits++] = (tot_visit){.node = r->kept[0].leaf, .level = r->kept[0].level, .first = r->n_kids,
                                           .n = r->n_cand};
    for (int32_t i = 0; i < r->n_cand; i++) {
        const tot_cand *c = &r->cand[r->order[i]];
        r->kids[r->n_kids++] = (tot_child){.leaf = c->leaf, .score = c->score, .kept = i < n_keep};
    }
    return ST_OK;
}

/* The next node from the stack: the answer (the search ends), or the next expansion, at
 * once when the last step returned its logits, else after a step that re-scores it. */
static st_code dfs_next(tot_run *r, const strategy_env *env, st_err *err) {
    r->phase = TOT_DONE;
    if (r->n_stack == 0) return ST_OK;
    tot_cand c = r->stack[r->n_stack - 1];
    if (c.level == r->d || c.ended) {
        r->answer = c;
        r->n_stack--;
        return ST_OK;
    }
    if (r->expansions == r->max_expansions) return ST_OK;
    r->n_stack--;
    r->expansions++;
    r->kept[0] = c;
    r->n_kept = 1;
    r->level = c.level;
    if (step_logits_of(env->plan, c.leaf)) {
        r->phase = TOT_EXPAND;
        return ST_OK;
    }
    r->backtracks++;
    r->phase = TOT_START;
    return strategy_start_node(env->f, c.leaf, err);
}

/* Depth-first: the judge step over the expanded node's thoughts; the best b at or above
 * the threshold go on the stack, the others are pruned, a node left without children is
 * pruned as a dead end; then the next node. */
static st_code judge_dfs(tot_run *r, const strategy_env *env, st_err *err) {
    const tot_cand cur = r->kept[0];
    int32_t n_new = judge_new(r, env, cur.level + 1 < r->d, err);
    if (n_new < 0) return err->code;
    rank_cands(r);
    /* ranked best first (NAN last), so the children kept are a prefix */
    int32_t n_keep = 0;
    while (n_keep < r->n_cand && n_keep < r->b && r->cand[r->order[n_keep]].score >= r->threshold) n_keep++;
    for (int32_t i = 0; i < r->n_cand; i++) r->cand[i].level = cur.level + 1;
    st_code rc = trace_visit(r, n_keep, err);
    for (int32_t i = n_keep - 1; i >= 0 && !rc; i--) rc = push_stack(r, r->cand[r->order[i]], err); /* best on top */
    if (rc) return rc;
    /* a dead end goes with its children (pruning them one by one would take it with the
     * last, and its ancestors that have no other child) */
    if (n_keep == 0 && cur.top != FOREST_NONE && forest_get(env->f, cur.top)) prune_cand(r, env->f, &cur);
    else
        for (int32_t i = n_keep; i < r->n_cand; i++) prune_cand(r, env->f, &r->cand[r->order[i]]);
    return dfs_next(r, env, err);
}

static st_code tot_step(void *self, const strategy_env *env, st_err *err) {
    tot_run *r = self;
    st_code rc = ST_OK;
    if (r->phase == TOT_EXPAND && (rc = expand(r, env, err))) return rc;
    switch (r->phase) {
    case TOT_START: /* the start node's logits */
        if ((rc = step_forest(env->f, env->plan, env->ctx, err))) return rc;
        rc = expand(r, env, err);
        break;
    case TOT_GROW:
        rc = grow_step(&r->g, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
        if (!rc && r->g.n_active == 0) r->phase = TOT_JUDGE;
        break;
    case TOT_JUDGE: rc = r->dfs ? judge_dfs(r, env, err) : judge_level(r, env, err); break;
    default: return ST_OK;
    }
    if (rc == ST_NO_KV_SLOT && r->n_dimmed > 0) { /* the dimmed losers make room first */
        prune_dimmed(r, env->f);
        return tot_step(self, env, err);
    }
    if (!rc) r->steps++;
    return rc;
}

/* The candidates of c[0..*n) whose thought's leaf is still in f, in their order. */
static void keep_live(const forest *f, tot_cand *c, int32_t *n) {
    int32_t m = 0;
    for (int32_t i = 0; i < *n; i++)
        if (forest_get(f, c[i].leaf)) c[m++] = c[i];
    *n = m;
}

/* A pruned thought leaves the search: its growing branch ends (grow_forget), a kept or
 * stacked one is dropped, so the level goes on with the others (breadth-first) or the
 * search backtracks (depth-first); with nothing left the next steps end it. */
static void tot_forget(void *self, const forest *f) {
    tot_run *r = self;
    grow_forget(&r->g, f);
    if (r->phase == TOT_GROW && r->g.n_active == 0) r->phase = TOT_JUDGE;
    keep_live(f, r->kept, &r->n_kept);
    keep_live(f, r->stack, &r->n_stack);
    if (r->answer.leaf != FOREST_NONE && !forest_get(f, r->answer.leaf)) r->answer.leaf = FOREST_NONE;
    int32_t m = 0;
    for (int32_t i = 0; i < r->n_dimmed; i++)
        if (forest_get(f, r->dimmed[i].top)) r->dimmed[m++] = r->dimmed[i];
    r->n_dimmed = m;
}

static bool tot_done(const void *self) { return ((const tot_run *)self)->phase == TOT_DONE; }

static void tot_progress(const void *self, strategy_progress *out) {
    const tot_run *r = self;
    out->tell = out->staged = true;
    out->stage = r->dfs ? r->n_visits : r->level;
    out->stage_unit = r->dfs ? "expansion" : "level";
    if (r->dfs) {
        out->done = r->phase == TOT_DONE ? r->max_expansions : r->expansions - (r->phase != TOT_DONE);
        out->goal = r->max_expansions;
        out->focus = r->answer.leaf != FOREST_NONE ? r->answer.leaf : r->kept[0].leaf;
        snprintf(out->text, sizeof out->text,
                 "tot dfs: %d of %d expansions, depth %d/%d, %d backtracks, %lld thoughts judged, %lld nodes pruned%s",
                 (int)r->expansions, (int)r->max_expansions, (int)r->kept[0].level, (int)r->d, (int)r->backtracks,
                 (long long)r->judged, (long long)r->pruned_nodes,
                 r->phase != TOT_DONE ? "" : r->answer.leaf != FOREST_NONE ? "; answered" : "; no answer");
        return;
    }
    out->done = r->level;
    out->goal = r->d;
    out->focus = r->n_kept > 0 && r->level > 0 ? r->kept[0].leaf : r->from;
    int n = snprintf(out->text, sizeof out->text, "tot: level %d/%d, %lld thoughts judged, %lld nodes pruned",
                     (int)r->level, (int)r->d, (long long)r->judged, (long long)r->pruned_nodes);
    if (r->level > 0 && r->n_kept > 0 && isfinite(r->kept[0].score) && n > 0 && (size_t)n < sizeof out->text)
        n += snprintf(out->text + n, sizeof out->text - (size_t)n, ", best %+.3f", r->kept[0].score);
    if (r->n_dimmed > 0 && n > 0 && (size_t)n < sizeof out->text)
        snprintf(out->text + n, sizeof out->text - (size_t)n, ", %d dimmed", (int)r->n_dimmed);
}

/* Depth-first result i: the answer, then the stack from its top. */
static const tot_cand *dfs_result(const tot_run *r, int32_t i) {
    bool ans = r->answer.leaf != FOREST_NONE;
    return ans && i == 0 ? &r->answer : &r->stack[r->n_stack - 1 - (i - ans)];
}

static int32_t tot_n_results(const void *self) {
    const tot_run *r = self;
    if (r->dfs) return (r->answer.leaf != FOREST_NONE) + (r->n_visits > 0 ? r->n_stack : 0);
    return r->level > 0 ? r->n_kept : 0;
}

static void tot_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    const tot_run *r = self;
    const tot_cand *c = r->dfs ? dfs_result(r, i) : &r->kept[i];
    const forest_node *leaf = forest_get(f, c->leaf), *st = forest_get(f, r->from);
    *out = (strategy_result){.start = r->from, .leaf = leaf ? c->leaf : FOREST_NONE,
                             .n_tokens = leaf && st ? leaf->depth - st->depth : 0, .score = c->score,
                             .end = c->ended ? STRAT_END_EOG : STRAT_END_STOP, .stop = -1, .eog_token = -1};
}

static int32_t tot_running(const void *self, forest_id *out, int32_t cap) {
    const tot_run *r = self;
    return r->phase == TOT_GROW ? strat_grow_running(&r->g, out, cap) : 0;
}

static int32_t tot_scores(const void *self, forest_id *ids, double *scores, int32_t cap) {
    const tot_run *r = self;
    int32_t n = 0;
    if (r->dfs)
        for (int32_t i = 0; i < tot_n_results(r) && n < cap; i++, n++)
            ids[n] = dfs_result(r, i)->leaf, scores[n] = dfs_result(r, i)->score;
    for (int32_t i = 0; !r->dfs && r->level > 0 && i < r->n_kept && n < cap; i++, n++)
        ids[n] = r->kept[i].leaf, scores[n] = r->kept[i].score;
    for (int32_t i = 0; i < r->n_dimmed && n < cap; i++, n++) ids[n] = r->dimmed[i].leaf, scores[n] = r->dimmed[i].score;
    return n;
}

const tot_visit *tot_visits(const struct tot_run *r, int32_t *n) {
    *n = r->n_visits;
    return r->visits;
}

const tot_child *tot_children(const struct tot_run *r) { return r->kids; }

forest_id tot_answer(const struct tot_run *r) { return r->answer.leaf; }

/* Thoughts end at a newline; the forest pane shows a level's losers dimmed while the
 * search runs. */
static void tot_judge_setup(strategy_opts *o, const strategy_judge_in *in, char *note, size_t cap) {
    static const char *const newline[] = {"\n"};
    o->stops = newline, o->n_stops = 1;
    o->u.tot.prompt = in->prompt;
    o->u.tot.dim = true;
    snprintf(note, cap, "tot%s: %d thoughts per node, keep %d, %d levels, %d tokens per thought%s",
             o->u.tot.dfs ? " dfs" : "", (int)o->u.tot.k, (int)o->u.tot.b, (int)o->u.tot.d, (int)o->budget,
             o->u.tot.dfs && isfinite(o->u.tot.threshold) ? ", scores below the threshold pruned" : "");
}

const strategy_ops strat_tot_ops = {
    .name = "tot",
    .kind = STRAT_TOT,
    .summary = STRAT_SUM_PROGRESS,
    .judge_setup = tot_judge_setup,
    .create = tot_create,
    .step = tot_step,
    .done = tot_done,
    .progress = tot_progress,
    .n_results = tot_n_results,
    .result = tot_result,
    .running = tot_running,
    .scores = tot_scores,
    .forget = tot_forget,
    .free = tot_free,
};

const struct tot_run *strategy_tot(const strategy *s) {
    return strategy_ops_of(s) == &strat_tot_ops ? strategy_state(s) : NULL;
}
