/* spec.c - draft trees (pack, unpack, accept) and the speculative greedy driver that
 * feeds them from prompt lookup, the n-gram pool and the lookahead window (spec.h). */
#include "spec/spec.h"

#include "base/array.h"
#include "base/clock.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forest/sample.h"

/* ---- the draft tree ---- */

void spec_tree_init(spec_tree *t) { memset(t, 0, sizeof *t); }

void spec_tree_free(spec_tree *t) {
    if (!t) return;
    free(t->tok);
    free(t->parent);
    free(t->fid);
    free(t->cand_off);
    free(t->cand_node);
    memset(t, 0, sizeof *t);
}

void spec_tree_clear(spec_tree *t) {
    t->n_nodes = 0;
    t->n_cand = 0;
    if (t->cand_off) t->cand_off[0] = 0;
}

/* The child of tree node `parent` (-1: the tip) with token tok, or -1. Parents come
 * before children, so children of `parent` are after it. */
static int32_t spec_child(const spec_tree *t, int32_t parent, int32_t tok) {
    for (int32_t k = parent + 1; k < t->n_nodes; k++)
        if (t->parent[k] == parent && t->tok[k] == tok) return k;
    return -1;
}

/* How many leading tokens of cand the tree already holds as a path from the tip. */
static int32_t spec_tree_shared(const spec_tree *t, const int32_t *cand, int32_t len) {
    int32_t j = 0;
    for (int32_t at = -1; j < len && (at = spec_child(t, at, cand[j])) >= 0;) j++;
    return j;
}

st_code spec_tree_add(spec_tree *t, const int32_t *cand, int32_t len, st_err *err) {
    if (len < 1) return st_set(err, ST_ERR_ARG, "a draft needs at least one token");
    int32_t used = t->n_cand ? t->cand_off[t->n_cand] : 0;
    int32_t cn = t->cap_nodes, cp = t->cap_nodes, cf = t->cap_nodes;
    bool ok = ARR_GROW_I32(t->tok, t->n_nodes + len, cn);
    /* parent and fid follow tok's capacity */
    ok = ok && ARR_GROW_I32(t->parent, cn, cp) && ARR_GROW_I32(t->fid, cn, cf);
    if (ok) t->cap_nodes = cn;
    ok = ok && ARR_GROW_I32(t->cand_off, t->n_cand + 2, t->cap_cand);
    ok = ok && ARR_GROW_I32(t->cand_node, used + len, t->cap_map);
    if (!ok) return st_set(err, ST_ERR_NOMEM, "out of memory for a draft tree");
    if (t->n_cand == 0) t->cand_off[0] = 0;
    int32_t at = -1;
    for (int32_t j = 0; j < len; j++) {
        int32_t k = spec_child(t, at, cand[j]);
        if (k < 0) {
            k = t->n_nodes++;
            t->tok[k] = cand[j];
            t->parent[k] = at;
            t->fid[k] = FOREST_NONE;
        }
        t->cand_node[used + j] = k;
        at = k;
    }
    t->cand_off[++t->n_cand] = used + len;
    return ST_OK;
}

/* Prunes the packed nodes whose tree parent is kept (or the tip) but which are not kept
 * themselves: every subtree off the kept path goes with its root. keep == NULL: all. */
static void spec_tree_prune(const spec_tree *t, forest *f, const uint8_t *keep) {
    for (int32_t k = 0; k < t->n_nodes; k++) {
        if (keep && keep[k]) continue;
        bool root_off = t->parent[k] < 0 || (keep && keep[t->parent[k]]);
        if (root_off && t->fid[k] != FOREST_NONE) forest_prune(f, t->fid[k], NULL);
    }
}

st_code spec_tree_pack(spec_tree *t, forest *f, forest_id tip, st_err *err) {
    if (!forest_get(f, tip)) return st_set(err, ST_ERR_ARG, "draft tree: the tip node is stale");
    for (int32_t k = 0; k < t->n_nodes; k++) t->fid[k] = FOREST_NONE;
    for (int32_t k = 0; k < t->n_nodes; k++) {
        forest_id parent = t->parent[k] < 0 ? tip : t->fid[t->parent[k]];
        st_code rc = forest_append(f, parent, &t->tok[k], NULL, 1, &t->fid[k], err);
        if (rc) {
            t->fid[k] = FOREST_NONE;
            spec_tree_prune(t, f, NULL);
            return rc;
        }
        forest_set_flags(f, t->fid[k], FOREST_WANT_LOGITS, FOREST_NO_LOGITS);
    }
    forest_set_flags(f, tip, FOREST_WANT_LOGITS, FOREST_NO_LOGITS);
    return ST_OK;
}

/* Greedy token from a node's logits in the last run, or -1 when it was not scored. */
static int32_t spec_greedy(const step_plan *p, forest_id id) { return step_argmax_of(p, id); }

int32_t spec_tree_unpack(const spec_tree *t, const step_plan *p, forest_id tip, int32_t c,
                         int32_t *pred) {
    if (c < 0 || c >= t->n_cand) return -1;
    int32_t len = t->cand_off[c + 1] - t->cand_off[c];
    const int32_t *map = t->cand_node + t->cand_off[c];
    for (int32_t j = 0; j <= len; j++)
        if ((pred[j] = spec_greedy(p, j == 0 ? tip : t->fid[map[j - 1]])) < 0) return -1;
    return len + 1;
}

/* How acceptance picks the token after a node: greedy (smp NULL), or a draw from the
 * target with the sampler (spec_sample.h's rule for one-hot drafts, in the form that
 * draws as plain sampling does), after the history hist[0..n_hist) followed by the
 * tokens accepted so far (hist has room for them). */
typedef struct spec_walk {
    sampler *smp;
    int32_t *hist;
    int32_t n_hist;
} spec_walk;

/* The sampler's token after node id, n tokens accepted so far: from its row, or from its
 * top-k's logits where the row stayed on a device; -1 when neither was kept. */
static int32_t spec_draw(const step_plan *p, spec_walk *w, forest_id id, int32_t n) {
    const float *lg = step_logits_of(p, id);
    if (lg) return sampler_sample_hist(w->smp, lg, p->n_vocab, w->hist, w->n_hist + n);
    const int32_t *ids;
    const int32_t nk = step_topk_of(p, id, &ids, NULL);
    const float *x = step_topk_x_of(p, id);
    return nk > 0 && x ? sampler_sample_top(w->smp, ids, x, nk, p->n_vocab) : -1;
}

/* The token after node id (tree node at; -1: the tip) into *tok, n tokens accepted so
 * far; returns the child of at that it names, -1 when none, -2 when id was not scored. */
static int32_t spec_next(const spec_tree *t, const step_plan *p, spec_walk *w, int32_t at,
                         forest_id id, int32_t n, int32_t *tok) {
    if (!w->smp && !step_scored(p, id)) return -2;
    *tok = w->smp ? spec_draw(p, w, id, n) : step_argmax_of(p, id);
    return *tok < 0 ? -2 : spec_child(t, at, *tok);
}

/* Walks the tree from the tip, accepting while the chosen token is a child (see
 * spec_tree_accept). */
static st_code spec_tree_walk(spec_tree *t, forest *f, const step_plan *p, forest_id tip, spec_walk *w,
                              int32_t *acc, int32_t *n_acc, forest_id *last, st_err *err) {
    uint8_t keep_small[256], *keep = t->n_nodes <= 256 ? keep_small : malloc((size_t)t->n_nodes);
    if (!keep) return st_set(err, ST_ERR_NOMEM, "out of memory accepting a draft");
    memset(keep, 0, (size_t)t->n_nodes);
    st_code rc = ST_OK;
    int32_t n = 0, at = -1, g;
    forest_id id = tip;
    int32_t k = spec_next(t, p, w, at, id, n, &g);
    if (k == -2) {
        rc = st_set(err, ST_ERR_ARG, "draft tree: the tip was not scored by the last step");
        goto out;
    }
    /* a child that was not scored (cannot happen for a packed tree) ends the walk there */
    for (; k >= 0 && step_scored(p, t->fid[k]); k = spec_next(t, p, w, at, id, n, &g)) {
        if (w->hist) w->hist[w->n_hist + n] = g;
        acc[n++] = g;
        keep[k] = 1;
        at = k;
        id = t->fid[k];
    }
    acc[n++] = g;
    spec_tree_prune(t, f, keep);
    *n_acc = n;
    *last = id;
out:
    if (keep != keep_small) free(keep);
    return rc;
}

st_code spec_tree_accept(spec_tree *t, forest *f, const step_plan *p, forest_id tip,
                         int32_t *acc, int32_t *n_acc, forest_id *last, st_err *err) {
    spec_walk w = {0};
    return spec_tree_walk(t, f, p, tip, &w, acc, n_acc, last, err);
}

/* ---- the driver ---- */

/* One draft this step: tokens at cand + i * width. */
typedef struct spec_cand {
    int32_t len;
    int bucket;
} spec_cand;

/* A (draft, depth) pair to consider, with its chance of acceptance. */
typedef struct spec_ent {
    double q;
    int32_t c, j;
} spec_ent;

struct spec {
    spec_params sp;
    forest_id tip;
    int32_t *hist;          /* (cap_hist) the tip's root-to-tip path, then emitted tokens */
    int32_t n_hist, cap_hist;
    ngram_pool pool;        /* pool.n == 0: none */
    int32_t pool_fed;       /* history length already fed to the pool */
    lookahead *la;
    spec_tree tree;
    spec_policy pol;
    int32_t width, cap_c;   /* tokens per draft row, drafts at most */
    int32_t *cand;          /* (cap_c, width) this step's drafts */
    int32_t *lk;            /* (n_drafts, draft_len) prompt lookup's proposals */
    int32_t *keys;          /* (cap_c) prompt-lookup key lengths */
    spec_cand *cd;          /* (cap_c) */
    int32_t n_cd;
    spec_ent *ent;          /* (cap_c * width) */
    int32_t *acc;           /* (max_rows + 2) */
    spec_stats st;
    spec_observe_fn observe;
    void *observe_ud;
    spec_draft_fn ext;      /* another draft source, or NULL */
    void *ext_ud;
    bool la_packed;         /* the window is in the forest (this step) */
    double la_gain;         /* adaptive lookahead: tokens per window step it alone found */
    int32_t la_idle;        /* steps since the window last ran while it did not pay */
    int32_t la_runs;        /* steps the window ran */
    sampler smp;            /* sampling: the target and its RNG (made when the first
                               step tells the vocabulary size: smp.cand NULL until then) */
};

spec_params spec_default_params(void) {
    spec_params sp = {.draft_len = 8, .n_drafts = 4, .max_rows = 16, .key_min = 1,
                      .key_max = 4, .pool_n = 4, .adaptive = true, .row_cost = 0,
                      .la_adaptive = true,
                      .la = {.w = 0, .n = 4, .g = 4, .seed = 1},
                      .samp = sample_default_params()};
    sp.samp.temp = 0;
    return sp;
}

void spec_free(spec *s) {
    if (!s) return;
    free(s->hist);
    ngram_pool_free(&s->pool);
    lookahead_free(s->la);
    spec_tree_free(&s->tree);
    free(s->cand);
    free(s->lk);
    free(s->keys);
    free(s->cd);
    free(s->ent);
    free(s->acc);
    sampler_free(&s->smp);
    free(s);
}

spec *spec_init(const spec_params *sp, forest *f, forest_id tip, st_err *err) {
    const spec_params *q = sp;
    if (q->draft_len < 0 || q->draft_len > 256 || q->n_drafts < 0 || q->n_drafts > 64 ||
        q->max_rows < 0 || q->max_rows > 4096 || q->key_min < 1 || q->key_max < q->key_min ||
        q->pool_n < 0 || q->pool_n == 1 || q->pool_n > 16 || q->la.w < 0 || q->la.g < 0 ||
        q->la.g > 1024) {
        st_set(err, ST_ERR_ARG, "speculative decoding: bad parameters (draft length 0..256, "
               "drafts 0..64, rows 0..4096, 1 <= key min <= key max, pool n 0 or 2..16)");
        return NULL;
    }
    int32_t n_path = forest_path(f, tip, NULL, 0);
    if (n_path < 0) {
        st_set(err, ST_ERR_ARG, "speculative decoding: the start node is stale");
        return NULL;
    }
    spec *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->sp = *q;
    s->tip = tip;
    spec_policy_init(&s->pol, q->row_cost);
    int32_t pn = q->la.w > 0 ? q->la.n : q->pool_n;
    int32_t per_key = q->la.w > 0 && q->la.g > 4 ? q->la.g : 4;
    /* a draft row holds any source's longest draft: lookup's, the pool's, or one that
     * fills the whole tree (another source's) */
    s->width = q->draft_len > pn - 1 ? q->draft_len : pn - 1;
    if (s->width < q->max_rows) s->width = q->max_rows;
    if (s->width < 1) s->width = 1;
    s->cap_c = SPEC_EXT_MAX + q->n_drafts + per_key;
    s->cap_hist = n_path + 256;
    s->hist = malloc(sizeof(int32_t) * (size_t)s->cap_hist);
    s->cand = malloc(sizeof(int32_t) * (size_t)s->cap_c * (size_t)s->width);
    s->keys = malloc(sizeof(int32_t) * (size_t)s->cap_c);
    s->lk = malloc(sizeof(int32_t) * (size_t)(q->n_drafts * q->draft_len + 1));
    s->cd = malloc(sizeof(spec_cand) * (size_t)s->cap_c);
    s->ent = malloc(sizeof(spec_ent) * (size_t)s->cap_c * (size_t)s->width);
    s->acc = malloc(sizeof(int32_t) * (size_t)(q->max_rows + 2));
    if (!s->hist || !s->cand || !s->lk || !s->keys || !s->cd || !s->ent || !s->acc) goto nomem;
    s->n_hist = forest_path(f, tip, s->hist, s->cap_hist);
    spec_tree_init(&s->tree);
    if (pn >= 2 && ngram_pool_init(&s->pool, pn, per_key, err)) {
        spec_free(s);
        return NULL;
    }
    if (q->la.w > 0 && !(s->la = lookahead_init(&q->la, s->hist, s->n_hist, err))) {
        spec_free(s);
        return NULL;
    }
    return s;
nomem:
    spec_free(s);
    st_set(err, ST_ERR_NOMEM, "out of memory for speculative decoding");
    return NULL;
}

int32_t spec_max_emit(const spec *s) { return s->sp.max_rows + 1; }
forest_id spec_tip(const spec *s) { return s->tip; }
const spec_stats *spec_get_stats(const spec *s) { return &s->st; }
double spec_row_cost(const spec *s) { return spec_policy_row_cost(&s->pol); }

void spec_set_draft_source(spec *s, spec_draft_fn fn, void *ud) {
    s->ext = fn;
    s->ext_ud = ud;
}

void spec_set_observer(spec *s, spec_observe_fn fn, void *ud) {
    s->observe = fn;
    s->observe_ud = ud;
}

int spec_node_role(const spec *s, forest_id id, int32_t *level, int32_t *col) {
    if (id == FOREST_NONE) return SPEC_NODE_OTHER;
    if (id == s->tip) return SPEC_NODE_TIP;
    for (int32_t k = 0; k < s->tree.n_nodes; k++)
        if (s->tree.fid[k] == id) return SPEC_NODE_DRAFT;
    int32_t W = s->la ? s->sp.la.w : 0, L = s->la ? s->sp.la.n - 1 : 0;
    for (int32_t l = 0; s->la_packed && l < L; l++)
        for (int32_t i = 0; i < W; i++)
            if (lookahead_node(s->la, l, i) == id) {
                if (level) *level = l;
                if (col) *col = i;
                return SPEC_NODE_WINDOW;
            }
    return SPEC_NODE_OTHER;
}

static const int32_t *spec_cand_toks(const spec *s, int32_t c) {
    return s->cand + (size_t)c * (size_t)s->width;
}

/* This step's drafts into s->cd: prompt lookup (longest keys first, then most recent),
 * then the pool's continuations of the tip's token (without lookahead the pool is one
 * more source, cut to the draft length like the rest). */
static void spec_collect(spec *s) {
    const spec_params *q = &s->sp;
    s->n_cd = 0;
    int32_t lens[64];
    if (s->ext) { /* another source's drafts first (a draft model, a test's oracle) */
        int32_t ne = s->ext(s->ext_ud, s->hist, s->n_hist, s->cand, s->width, lens, SPEC_EXT_MAX);
        for (int32_t c = 0; c < ne && c < SPEC_EXT_MAX; c++)
            if (lens[c] > 0) {
                if (c != s->n_cd)
                    memmove(s->cand + (size_t)s->n_cd * (size_t)s->width,
                            s->cand + (size_t)c * (size_t)s->width, sizeof(int32_t) * (size_t)s->width);
                s->cd[s->n_cd++] = (spec_cand){lens[c] < s->width ? lens[c] : s->width, SPEC_B_EXT};
            }
    }
    int32_t *lk_keys = s->keys + s->n_cd;
    int32_t nl = q->draft_len < 1 || q->n_drafts < 1 ? 0
                 : ngram_lookup(s->hist, s->n_hist, q->key_min, q->key_max, q->draft_len,
                                q->n_drafts, s->lk, lens, lk_keys);
    for (int32_t c = 0, rank = 0; c < nl; c++) {
        rank = c > 0 && lk_keys[c] == lk_keys[c - 1] ? rank + 1 : 0;
        memcpy(s->cand + (size_t)s->n_cd * (size_t)s->width, s->lk + (size_t)c * (size_t)q->draft_len,
               sizeof(int32_t) * (size_t)lens[c]);
        s->cd[s->n_cd++] = (spec_cand){lens[c], spec_policy_lookup_bucket(lk_keys[c], rank)};
    }
    if (!s->pool.n || (!s->la && q->draft_len < 1)) return;
    int32_t key = s->hist[s->n_hist - 1];
    int32_t m = ngram_pool_count(&s->pool, key), len = s->pool.n - 1;
    int32_t cap = s->la ? q->la.g : q->n_drafts;
    if (!s->la && len > q->draft_len) len = q->draft_len;
    for (int32_t i = 0; i < m && i < cap && s->n_cd < s->cap_c; i++) {
        memcpy(s->cand + (size_t)s->n_cd * (size_t)s->width, ngram_pool_get(&s->pool, key, i),
               sizeof(int32_t) * (size_t)len);
        s->cd[s->n_cd++] = (spec_cand){len, s->la ? SPEC_B_LA : SPEC_B_POOL};
    }
}

static int spec_ent_cmp(const void *a, const void *b) {
    const spec_ent *x = a, *y = b;
    if (x->q != y->q) return x->q < y->q ? 1 : -1;
    if (x->c != y->c) return x->c - y->c;
    return x->j - y->j;
}

/* The draft tree within budget nodes: every draft whole (fixed), or (adaptive) the tokens
 * worth their row by the policy, most likely first. False on no memory. */
static bool spec_build_tree(spec *s, int32_t budget) {
    spec_tree_clear(&s->tree);
    if (budget < 1) return true;
    if (!s->sp.adaptive) {
        for (int32_t c = 0; c < s->n_cd; c++) {
            const int32_t *t = spec_cand_toks(s, c);
            int32_t len = s->cd[c].len, shared = spec_tree_shared(&s->tree, t, len);
            int32_t room = budget - s->tree.n_nodes;
            if (len > shared + room) len = shared + room;
            if (len > shared && spec_tree_add(&s->tree, t, len, NULL)) return false;
        }
        return true;
    }
    int32_t ne = 0;
    for (int32_t c = 0; c < s->n_cd; c++) {
        double p = spec_policy_p(&s->pol, s->cd[c].bucket), q = 1;
        for (int32_t j = 1; j <= s->cd[c].len; j++) s->ent[ne++] = (spec_ent){q *= p, c, j};
    }
    qsort(s->ent, (size_t)ne, sizeof *s->ent, spec_ent_cmp);
    double Q = 0;
    for (int32_t e = 0; e < ne && s->tree.n_nodes < budget; e++) {
        const int32_t *t = spec_cand_toks(s, s->ent[e].c);
        int32_t j = s->ent[e].j, shared = spec_tree_shared(&s->tree, t, j);
        if (shared != j - 1) continue; /* there already, or its parent was not taken */
        if (!spec_policy_worth(&s->pol, s->ent[e].q, s->tree.n_nodes, Q)) break;
        if (spec_tree_add(&s->tree, t, j, NULL)) return false;
        Q += s->ent[e].q;
    }
    return true;
}

/* Acceptance statistics per draft: of its tokens that made it into the tree, how many
 * were checked (the accepted ones and the first wrong one) and how many were right. */
static int32_t spec_learn(spec *s, int32_t n_acc) {
    int32_t best_la = 0, best_other = 0;
    for (int32_t c = 0; c < s->n_cd; c++) {
        const int32_t *t = spec_cand_toks(s, c);
        int32_t L = spec_tree_shared(&s->tree, t, s->cd[c].len), a = 0;
        while (a < L && a < n_acc && t[a] == s->acc[a]) a++;
        if (L > 0) spec_policy_record(&s->pol, s->cd[c].bucket, a < L ? a + 1 : L, a);
        int32_t *best = s->cd[c].bucket == SPEC_B_LA ? &best_la : &best_other;
        if (a > *best) *best = a;
    }
    /* the tokens only the lookahead window's n-grams found this step */
    return best_la > best_other ? best_la - best_other : 0;
}

/* Adaptive lookahead: is the window worth its rows this step? Its value is the tokens its
 * n-grams alone got accepted (a decaying average over the steps it ran), its cost the row
 * cost times its rows; when it does not pay it still runs now and then (every 8th step,
 * or rarer for a costly window), so that its pool stays fresh enough to notice when it
 * would. */
#define SPEC_LA_EXPLORE 8
static bool spec_la_worth(spec *s) {
    /* warming up: N - 1 runs make its first n-grams */
    if (!s->sp.la_adaptive || s->la_runs < s->sp.la.n - 1) return true;
    double cost = spec_policy_row_cost(&s->pol) * lookahead_rows(s->la);
    if (s->la_gain >= cost) return true;
    /* exploring costs at most ~1/16 of a step on average, however big the window */
    int32_t every = (int32_t)(16 * cost) > SPEC_LA_EXPLORE ? (int32_t)(16 * cost) : SPEC_LA_EXPLORE;
    return ++s->la_idle % every == 0;
}

/* Room for n more history tokens. */
static bool spec_reserve_hist(spec *s, int32_t n) {
    if (s->n_hist + n <= s->cap_hist) return true;
    int32_t c = (s->n_hist + n) * 2;
    int32_t *h = realloc(s->hist, sizeof(int32_t) * (size_t)c);
    if (!h) return false;
    s->hist = h;
    s->cap_hist = c;
    return true;
}

static bool spec_push_hist(spec *s, const int32_t *t, int32_t n) {
    if (!spec_reserve_hist(s, n)) return false;
    memcpy(s->hist + s->n_hist, t, sizeof(int32_t) * (size_t)n);
    s->n_hist += n;
    return true;
}

/* Acceptance after the step: greedy, or by the sampling rule with the history (the
 * tokens it accepts are written after s->hist's end as it goes, for the repetition
 * penalty; spec_push_hist makes them part of it). */
static st_code spec_accept(spec *s, forest *f, const step_plan *p, int32_t *n, forest_id *last,
                           st_err *err) {
    if (s->sp.samp.temp <= 0) return spec_tree_accept(&s->tree, f, p, s->tip, s->acc, n, last, err);
    if ((!s->smp.cand && sampler_init(&s->smp, &s->sp.samp, p->n_vocab)) ||
        !spec_reserve_hist(s, s->tree.n_nodes + 1)) {
        spec_tree_prune(&s->tree, f, NULL);
        return st_set(err, ST_ERR_NOMEM, "out of memory for speculative sampling");
    }
    spec_walk w = {.smp = &s->smp, .hist = s->hist, .n_hist = s->n_hist};
    return spec_tree_walk(&s->tree, f, p, s->tip, &w, s->acc, n, last, err);
}

/* The step over the packed drafts. Acceptance reads of each row its greedy token, or the
 * sampler's draw; on a device the rows stay there when those need only the top-k, whose
 * logits come back for the draws (sample_top_need). */
static st_code spec_run(const spec *s, forest *f, step_plan *p, model_ctx *c, st_err *err) {
    if (s->sp.samp.temp <= 0) return step_forest_topk(f, p, c, 1, err);
    const int32_t k = step_device_topk(c, sample_top_need(&s->sp.samp));
    if (k == 0) return step_forest(f, p, c, err);
    st_code rc = step_forest_topk(f, p, c, k, err);
    return rc ? rc : step_topk_logits(p, err);
}

st_code spec_step(spec *s, forest *f, step_plan *p, model_ctx *c, int32_t *out, int32_t *n_out,
                  st_err *err) {
    *n_out = 0;
    if (!forest_get(f, s->tip)) return st_set(err, ST_ERR_ARG, "speculative decoding: the tip was pruned");
    /* Rows this step may add beyond what is pending already: drafts and the window are cut
     * to the free KV slots, the window first to go. */
    const kv_alloc *kv = forest_kv_const(f);
    int32_t room = kv_alloc_n_slots(kv) - kv_alloc_used(kv) - forest_n_pending(f);
    bool use_la = s->la && lookahead_rows(s->la) <= room && spec_la_worth(s);
    if (use_la) room -= lookahead_rows(s->la);
    int32_t budget = room < s->sp.max_rows ? room : s->sp.max_rows;
    spec_collect(s);
    if (!spec_build_tree(s, budget)) return st_set(err, ST_ERR_NOMEM, "out of memory for drafts");
    st_code rc = spec_tree_pack(&s->tree, f, s->tip, err);
    if (!rc && use_la && (rc = lookahead_pack(s->la, f, s->tip, err))) spec_tree_prune(&s->tree, f, NULL);
    double t0 = mono_now_s();
    if (!rc && (rc = spec_run(s, f, p, c, err))) {
        spec_tree_prune(&s->tree, f, NULL);
        if (use_la) lookahead_cancel(s->la, f);
    }
    if (rc) {
        forest_set_flags(f, s->tip, 0, FOREST_WANT_LOGITS);
        return rc;
    }
    spec_policy_observe(&s->pol, p->n_rows, mono_now_s() - t0);
    s->la_packed = use_la;
    if (s->observe) s->observe(s->observe_ud, s, f, p);
    s->la_packed = false;
    int32_t n = 0;
    forest_id last;
    if ((rc = spec_accept(s, f, p, &n, &last, err))) return rc;
    int32_t la_found = spec_learn(s, n - 1);
    if (use_la) {
        s->la_gain = s->la_runs ? 0.8 * s->la_gain + 0.2 * la_found : la_found;
        s->la_runs++;
    }
    int32_t bonus = s->acc[n - 1];
    float lp = NAN; /* unscored unless asked: a log-sum-exp over the vocabulary per token */
    if (s->sp.logprobs) {
        lp = step_logprob_of(p, last, bonus);
        for (forest_id id = last; id != s->tip;) {
            const forest_node *nd = forest_get(f, id);
            forest_id parent = forest_id_at(f, nd->parent);
            forest_set_logprob(f, id, step_logprob_of(p, parent, nd->token));
            id = parent;
        }
    }
    forest_id new_tip;
    if ((rc = forest_append(f, last, &bonus, &lp, 1, &new_tip, err))) {
        if (use_la) lookahead_cancel(s->la, f);
        return rc;
    }
    if (!spec_push_hist(s, s->acc, n)) rc = st_set(err, ST_ERR_NOMEM, "out of memory for the history");
    if (!rc && use_la)
        rc = lookahead_update(s->la, f, p, s->tip, &s->pool, n, bonus, s->hist, s->n_hist, err);
    else if (!rc && s->la)
        lookahead_skip(s->la, n, bonus, s->hist, s->n_hist);
    if (!rc && s->pool.n) {
        rc = ngram_pool_add_all(&s->pool, s->hist, s->n_hist, s->pool_fed, err);
        s->pool_fed = s->n_hist;
    }
    s->st.steps++;
    s->st.emitted += n;
    s->st.accepted += n - 1;
    s->st.draft_rows += s->tree.n_nodes;
    if (use_la) s->st.la_rows += lookahead_rows(s->la);
    s->tip = new_tip;
    memcpy(out, s->acc, sizeof(int32_t) * (size_t)n);
    *n_out = n;
    return rc;
}
