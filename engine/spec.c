/* spec.c - draft trees (pack, unpack, accept) and the speculative greedy driver that
 * feeds them from prompt lookup, the n-gram pool and the lookahead window (spec.h). */
#include "spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

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

static bool spec_grow(void **a, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap * 2 : 32;
    while (c < need) c *= 2;
    void *n = realloc(*a, elem * (size_t)c);
    if (!n) return false;
    *a = n;
    *cap = c;
    return true;
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
    int32_t cn = t->cap_nodes, cc = t->cap_cand, cm = t->cap_map;
    bool ok = true;
    int32_t need = t->n_nodes + len;
    cn = t->cap_nodes;
    ok = ok && spec_grow((void **)&t->tok, &cn, need, sizeof *t->tok);
    cn = t->cap_nodes;
    ok = ok && spec_grow((void **)&t->parent, &cn, need, sizeof *t->parent);
    cn = t->cap_nodes;
    ok = ok && spec_grow((void **)&t->fid, &cn, need, sizeof *t->fid);
    if (ok) t->cap_nodes = cn;
    ok = ok && spec_grow((void **)&t->cand_off, &cc, t->n_cand + 2, sizeof *t->cand_off);
    if (ok) t->cap_cand = cc;
    int32_t used = t->n_cand ? t->cand_off[t->n_cand] : 0;
    ok = ok && spec_grow((void **)&t->cand_node, &cm, used + len, sizeof *t->cand_node);
    if (ok) t->cap_map = cm;
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
static int32_t spec_greedy(const step_plan *p, forest_id id) {
    const float *lg = step_logits_of(p, id);
    return lg ? sample_argmax(lg, p->n_vocab) : -1;
}

int32_t spec_tree_unpack(const spec_tree *t, const step_plan *p, forest_id tip, int32_t c,
                         int32_t *pred) {
    if (c < 0 || c >= t->n_cand) return -1;
    int32_t len = t->cand_off[c + 1] - t->cand_off[c];
    const int32_t *map = t->cand_node + t->cand_off[c];
    for (int32_t j = 0; j <= len; j++)
        if ((pred[j] = spec_greedy(p, j == 0 ? tip : t->fid[map[j - 1]])) < 0) return -1;
    return len + 1;
}

st_code spec_tree_accept(spec_tree *t, forest *f, const step_plan *p, forest_id tip,
                         int32_t *acc, int32_t *n_acc, forest_id *last, st_err *err) {
    uint8_t keep_small[256], *keep = t->n_nodes <= 256 ? keep_small : calloc((size_t)t->n_nodes, 1);
    if (!keep) return st_set(err, ST_ERR_NOMEM, "out of memory accepting a draft");
    memset(keep, 0, (size_t)t->n_nodes);
    int32_t n = 0, at = -1;
    forest_id id = tip;
    int32_t g = spec_greedy(p, tip);
    st_code rc = ST_OK;
    if (g < 0) {
        rc = st_set(err, ST_ERR_ARG, "draft tree: the tip was not scored by the last step");
        goto out;
    }
    for (;;) {
        int32_t k = spec_child(t, at, g);
        if (k < 0) break;
        int32_t gk = spec_greedy(p, t->fid[k]);
        if (gk < 0) break; /* not scored (cannot happen for a packed tree): stop here */
        acc[n++] = g;
        keep[k] = 1;
        at = k;
        id = t->fid[k];
        g = gk;
    }
    acc[n++] = g;
    spec_tree_prune(t, f, keep);
    *n_acc = n;
    *last = id;
out:
    if (keep != keep_small) free(keep);
    return rc;
}

/* ---- the driver ---- */

struct spec {
    spec_params sp;
    forest_id tip;
    int32_t *hist;          /* (cap_hist) the tip's root-to-tip path, then emitted tokens */
    int32_t n_hist, cap_hist;
    ngram_pool pool;        /* pool.n == 0: none */
    int32_t pool_fed;       /* history length already fed to the pool */
    lookahead *la;
    spec_tree tree;
    int32_t *cand, *lens;   /* (n_drafts, draft_len), (n_drafts) */
    int32_t *acc;           /* (max_rows + 1) */
    int32_t cur_len;        /* adaptive draft length */
    spec_stats st;
};

spec_params spec_default_params(void) {
    return (spec_params){.draft_len = 8, .n_drafts = 4, .max_rows = 16, .key_min = 1,
                         .key_max = 4, .pool_n = 4, .adaptive = true,
                         .la = {.w = 0, .n = 4, .g = 4, .seed = 1}};
}

void spec_free(spec *s) {
    if (!s) return;
    free(s->hist);
    ngram_pool_free(&s->pool);
    lookahead_free(s->la);
    spec_tree_free(&s->tree);
    free(s->cand);
    free(s->lens);
    free(s->acc);
    free(s);
}

spec *spec_init(const spec_params *sp, forest *f, forest_id tip, st_err *err) {
    const spec_params *q = sp;
    if (q->draft_len < 0 || q->draft_len > 256 || q->n_drafts < 0 || q->n_drafts > 64 ||
        q->max_rows < 0 || q->max_rows > 4096 || q->key_min < 1 || q->key_max < q->key_min ||
        q->pool_n < 0 || q->pool_n == 1 || q->pool_n > 16 || q->la.w < 0 || q->la.g < 0) {
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
    s->cur_len = q->draft_len < 4 ? q->draft_len : 4;
    s->cap_hist = n_path + 256;
    s->hist = malloc(sizeof(int32_t) * (size_t)s->cap_hist);
    s->cand = malloc(sizeof(int32_t) * (size_t)(q->n_drafts * q->draft_len + 1));
    s->lens = malloc(sizeof(int32_t) * (size_t)(q->n_drafts + 1));
    s->acc = malloc(sizeof(int32_t) * (size_t)(q->max_rows + 2));
    if (!s->hist || !s->cand || !s->lens || !s->acc) goto nomem;
    s->n_hist = forest_path(f, tip, s->hist, s->cap_hist);
    spec_tree_init(&s->tree);
    int32_t pn = q->la.w > 0 ? q->la.n : q->pool_n;
    if (pn >= 2 && ngram_pool_init(&s->pool, pn, q->la.w > 0 && q->la.g > 4 ? q->la.g : 4, err)) {
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
const spec_tree *spec_last_tree(const spec *s) { return &s->tree; }

/* Adds cand (cut so that the tree stays within budget nodes); false on no memory. */
static bool spec_offer(spec *s, const int32_t *cand, int32_t len, int32_t budget) {
    int32_t shared = spec_tree_shared(&s->tree, cand, len);
    int32_t room = budget - s->tree.n_nodes;
    if (len > shared + room) len = shared + room;
    if (len <= shared) return true; /* nothing new (or no room) */
    return spec_tree_add(&s->tree, cand, len, NULL) == ST_OK;
}

/* This step's drafts: prompt lookup first (longest keys first), then the pool's
 * continuations of the tip's token, within budget tree nodes. */
static bool spec_draft(spec *s, int32_t budget) {
    spec_tree_clear(&s->tree);
    const spec_params *q = &s->sp;
    int32_t K = q->adaptive ? s->cur_len : q->draft_len;
    if (budget < 1) return true;
    int32_t nc = K < 1 ? 0 : ngram_lookup(s->hist, s->n_hist, q->key_min, q->key_max, K,
                                         q->n_drafts, s->cand, s->lens);
    for (int32_t c = 0; c < nc; c++)
        if (!spec_offer(s, s->cand + (size_t)c * K, s->lens[c], budget)) return false;
    /* the pool: without lookahead it is one more draft source, cut to K like the rest */
    if (s->pool.n && (s->la || K >= 1)) {
        int32_t key = s->hist[s->n_hist - 1];
        int32_t cap = s->la ? q->la.g : q->n_drafts;
        int32_t m = ngram_pool_count(&s->pool, key), len = s->pool.n - 1;
        if (!s->la && len > K) len = K;
        for (int32_t i = 0; i < m && i < cap; i++)
            if (!spec_offer(s, ngram_pool_get(&s->pool, key, i), len, budget)) return false;
    }
    return true;
}

static bool spec_push_hist(spec *s, const int32_t *t, int32_t n) {
    if (s->n_hist + n > s->cap_hist) {
        int32_t c = (s->n_hist + n) * 2;
        int32_t *h = realloc(s->hist, sizeof(int32_t) * (size_t)c);
        if (!h) return false;
        s->hist = h;
        s->cap_hist = c;
    }
    memcpy(s->hist + s->n_hist, t, sizeof(int32_t) * (size_t)n);
    s->n_hist += n;
    return true;
}

st_code spec_step(spec *s, forest *f, step_plan *p, model_ctx *c, int32_t *out, int32_t *n_out,
                  st_err *err) {
    *n_out = 0;
    const forest_node *tn = forest_get(f, s->tip);
    if (!tn) return st_set(err, ST_ERR_ARG, "speculative decoding: the tip was pruned");
    /* (tn is not used past the first append: adding nodes may move the array) */
    /* Rows this step may add beyond what is pending already: drafts and the window are cut
     * to the free KV slots, the window first to go. */
    const kv_alloc *kv = forest_kv_const(f);
    int32_t room = kv_alloc_n_slots(kv) - kv_alloc_used(kv) - forest_n_pending(f);
    bool use_la = s->la && lookahead_rows(s->la) <= room;
    if (use_la) room -= lookahead_rows(s->la);
    int32_t budget = room < s->sp.max_rows ? room : s->sp.max_rows;
    if (!spec_draft(s, budget)) return st_set(err, ST_ERR_NOMEM, "out of memory for drafts");
    st_code rc = spec_tree_pack(&s->tree, f, s->tip, err);
    if (!rc && use_la && (rc = lookahead_pack(s->la, f, s->tip, err))) spec_tree_prune(&s->tree, f, NULL);
    if (!rc && (rc = step_forest(f, p, c, err))) {
        spec_tree_prune(&s->tree, f, NULL);
        if (use_la) lookahead_cancel(s->la, f);
    }
    if (rc) {
        forest_set_flags(f, s->tip, 0, FOREST_WANT_LOGITS);
        return rc;
    }
    int32_t n = 0;
    forest_id last;
    if ((rc = spec_tree_accept(&s->tree, f, p, s->tip, s->acc, &n, &last, err))) return rc;
    int32_t bonus = s->acc[n - 1];
    float lp = step_logprob_of(p, last, bonus);
    forest_id new_tip;
    if ((rc = forest_append(f, last, &bonus, &lp, 1, &new_tip, err))) {
        if (use_la) lookahead_cancel(s->la, f);
        return rc;
    }
    if (!spec_push_hist(s, s->acc, n)) rc = st_set(err, ST_ERR_NOMEM, "out of memory for the history");
    if (!rc && use_la)
        rc = lookahead_update(s->la, f, p, s->tip, &s->pool, n, bonus, s->hist, s->n_hist, err);
    if (!rc && s->pool.n) {
        rc = ngram_pool_add_all(&s->pool, s->hist, s->n_hist, s->pool_fed, err);
        s->pool_fed = s->n_hist;
    }
    /* adaptive length: grow after a fully accepted draft, shrink after a rejected one */
    int32_t drafted = s->tree.n_nodes;
    if (drafted > 0) {
        if (n - 1 >= s->cur_len) s->cur_len = s->cur_len * 2 < s->sp.draft_len ? s->cur_len * 2 : s->sp.draft_len;
        else if (n == 1 && s->cur_len > 1) s->cur_len--;
    }
    s->st.steps++;
    s->st.emitted += n;
    s->st.accepted += n - 1;
    s->st.draft_rows += drafted;
    if (use_la) s->st.la_rows += lookahead_rows(s->la);
    s->tip = new_tip;
    memcpy(out, s->acc, sizeof(int32_t) * (size_t)n);
    *n_out = n;
    return rc;
}
