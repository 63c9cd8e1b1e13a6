/* merge.c - the exact merge (branch texts joined and re-tokenised under the common
 * ancestor) and the experimental rope-gap merge (a step whose rows also see other
 * branches' slots, at shifted positions). See merge.h. */
#include "base/array.h"
#include "strategy/merge.h"

#include <stdlib.h>
#include <string.h>
#include "strategy/strategy_impl.h"

/* ---- text ---- */

typedef struct merge_buf {
    char *s;
    size_t len, cap;
} merge_buf;

static bool buf_put(merge_buf *b, const char *s, size_t n) {
    if (!ARR_GROW(b->s, b->len + n + 1, b->cap)) return false;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return true;
}

/* Streams token id (id < 0: the flush) into b. */
static bool buf_token(merge_buf *b, const tok *tk, tok_stream *ts, int32_t id) {
    char small[64];
    size_t got = id >= 0 ? tok_stream_put(tk, ts, id, small, sizeof small)
                         : tok_stream_flush(tk, ts, small, sizeof small);
    if (got < sizeof small) return buf_put(b, small, got);
    char *big = malloc(got + 1); /* a very long piece: the stream did not advance */
    if (!big) return false;
    got = id >= 0 ? tok_stream_put(tk, ts, id, big, got + 1) : tok_stream_flush(tk, ts, big, got + 1);
    bool ok = buf_put(b, big, got);
    free(big);
    return ok;
}

/* Appends the text of from (excluded) .. leaf to b; ST_ERR_ARG when from is not an
 * ancestor of leaf. */
static st_code branch_text(const forest *f, const tok *tk, forest_id from, forest_id leaf,
                           merge_buf *b, st_err *err) {
    const forest_node *lf = forest_get(f, leaf);
    const forest_node *fr = from == FOREST_NONE ? NULL : forest_get(f, from);
    if (!lf || (from != FOREST_NONE && !fr)) return st_set(err, ST_ERR_ARG, "merge: a stale node id");
    int32_t stop = fr ? forest_index(from) : -1, n = 0;
    for (int32_t i = forest_index(leaf); i != stop; i = forest_node_at(f, i)->parent) {
        if (i < 0) return st_set(err, ST_ERR_ARG, "merge: a branch's start is not an ancestor of its leaf");
        n++;
    }
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!toks) return st_set(err, ST_ERR_NOMEM, "out of memory");
    int32_t k = n;
    for (int32_t i = forest_index(leaf); i != stop; i = forest_node_at(f, i)->parent)
        toks[--k] = forest_node_at(f, i)->token;
    tok_stream ts;
    tok_stream_init(&ts);
    if (fr) ts.prev = fr->token; /* decoded in context: a first word keeps its space */
    bool ok = true;
    for (int32_t i = 0; i < n && ok; i++) ok = buf_token(b, tk, &ts, toks[i]);
    ok = ok && buf_token(b, tk, &ts, -1) && buf_put(b, "", 0);
    free(toks);
    return ok ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
}

char *merge_branch_text(const forest *f, const tok *tk, forest_id from, forest_id leaf,
                        st_err *err) {
    merge_buf b = {0};
    if (branch_text(f, tk, from, leaf, &b, err)) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* Deepest common ancestor of leaves[0..n), or FOREST_NONE with err set. */
static forest_id common_ancestor(const forest *f, const forest_id *leaves, int32_t n,
                                 st_err *err) {
    if (n < 1) {
        st_set(err, ST_ERR_ARG, "merge: no branches given");
        return FOREST_NONE;
    }
    forest_id a = leaves[0];
    for (int32_t i = 0; i < n; i++)
        if (!forest_get(f, leaves[i])) {
            st_set(err, ST_ERR_ARG, "merge: branch %d is a stale node id", i);
            return FOREST_NONE;
        }
    for (int32_t i = 1; i < n && a != FOREST_NONE; i++) a = forest_common_ancestor(f, a, leaves[i]);
    if (a == FOREST_NONE) st_set(err, ST_ERR_ARG, "merge: the branches are in different trees");
    return a;
}

char *merge_join_text(const forest *f, const tok *tk, const forest_id *from,
                      const forest_id *leaves, int32_t n, const char *sep, forest_id *anc,
                      st_err *err) {
    forest_id a = common_ancestor(f, leaves, n, err);
    if (a == FOREST_NONE) return NULL;
    if (!sep) sep = MERGE_DEFAULT_SEP;
    merge_buf b = {0};
    for (int32_t i = 0; i < n; i++) {
        if ((i > 0 && !buf_put(&b, sep, strlen(sep))) || (b.s == NULL && !buf_put(&b, "", 0))) {
            free(b.s);
            st_set(err, ST_ERR_NOMEM, "out of memory");
            return NULL;
        }
        if (branch_text(f, tk, from ? from[i] : a, leaves[i], &b, err)) {
            free(b.s);
            return NULL;
        }
    }
    if (anc) *anc = a;
    return b.s;
}

int32_t *merge_encode(const tok *tk, const char *text, int32_t *n, st_err *err) {
    /* does the encoder put a dummy-prefix space at the start of a text? */
    int32_t probe[4];
    int32_t np = tok_encode(tk, "a", 1, false, false, probe, 4);
    const char *pc = np > 0 ? tok_piece(tk, probe[0]) : NULL;
    bool dummy = pc && !strncmp(pc, "\xe2\x96\x81", 3);
    if (dummy && text[0] == ' ') text++;
    return tok_encode_alloc(tk, text, strlen(text), false, false, n, err);
}

st_code merge_branches(forest *f, const tok *tk, const forest_id *leaves, int32_t n,
                       const char *sep, forest_id *out_last, st_err *err) {
    forest_id anc;
    char *text = merge_join_text(f, tk, NULL, leaves, n, sep, &anc, err);
    if (!text) return err->code;
    int32_t nt = 0;
    int32_t *toks = merge_encode(tk, text, &nt, err);
    free(text);
    if (!toks) return err->code;
    st_code rc = nt > 0 ? forest_append(f, anc, toks, NULL, nt, out_last, err)
                        : st_set(err, ST_ERR_ARG, "merge: the joined text is empty");
    free(toks);
    return rc;
}

/* ---- rope-gap merge ---- */

struct merge_gap {
    forest_id anc, host, first;
    forest_id *leaves; /* (n) */
    int32_t n;
    int32_t gap;
    /* scratch, grown as needed */
    int32_t *slots, cap_slots;   /* base slots, then a row's chain */
    uint8_t *mark;               /* (forest capacity) node already in the base */
    int32_t *pos, *seg_off, cap_rows;
    kern_seg *segs;
    int32_t cap_segs;
};

merge_gap *merge_gap_init(forest *f, const forest_id *leaves, int32_t n, int32_t gap,
                          const int32_t *tokens, int32_t n_tokens, forest_id *out_last,
                          st_err *err) {
    if (gap < 0 || n_tokens < 1) {
        st_set(err, ST_ERR_ARG, "rope-gap merge: need gap >= 0 and at least one token");
        return NULL;
    }
    forest_id anc = common_ancestor(f, leaves, n, err);
    if (anc == FOREST_NONE) return NULL;
    int32_t host = 0;
    for (int32_t i = 0; i < n; i++) {
        const forest_node *nd = forest_get(f, leaves[i]);
        if (nd->state != FOREST_COMPUTED) {
            st_set(err, ST_ERR_ARG, "rope-gap merge: branch %d is not computed yet", i);
            return NULL;
        }
        if (nd->depth > forest_get(f, leaves[host])->depth) host = i;
    }
    merge_gap *g = calloc(1, sizeof *g);
    if (g) g->leaves = malloc(sizeof *g->leaves * (size_t)n);
    if (!g || !g->leaves) {
        free(g);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(g->leaves, leaves, sizeof *leaves * (size_t)n);
    g->n = n;
    g->gap = gap;
    g->anc = anc;
    g->host = leaves[host];
    forest_id last;
    if (forest_append(f, g->host, tokens, NULL, n_tokens, &last, err)) {
        merge_gap_free(g);
        return NULL;
    }
    int32_t i = forest_index(last);
    for (int32_t k = 1; k < n_tokens; k++) i = forest_node_at(f, i)->parent;
    g->first = forest_id_at(f, i);
    if (out_last) *out_last = last;
    return g;
}

void merge_gap_free(merge_gap *g) {
    if (!g) return;
    free(g->leaves);
    free(g->slots);
    free(g->mark);
    free(g->pos);
    free(g->seg_off);
    free(g->segs);
    free(g);
}

forest_id merge_gap_first(const merge_gap *g) { return g->first; }

/* Pushes slots s[0..n) to g->segs as ascending runs from index *k. */
static bool push_runs(merge_gap *g, const int32_t *s, int32_t n, int32_t *k) {
    for (int32_t i = 0; i < n;) {
        int32_t j = i + 1;
        while (j < n && s[j] == s[j - 1] + 1) j++;
        if (!ARR_GROW_I32(g->segs, *k + 1, g->cap_segs)) return false;
        g->segs[(*k)++] = (kern_seg){s[i], j - i};
        i = j;
    }
    return true;
}

/* The base slots (A's path, then each chosen branch below A, shared nodes once) into
 * g->slots; returns how many, -1 when out of memory. */
static int32_t base_slots(merge_gap *g, const forest *f) {
    int32_t cap = forest_capacity(f), n = 0;
    uint8_t *mark = realloc(g->mark, (size_t)(cap > 0 ? cap : 1)); /* one flag per node index */
    if (!mark) return -1;
    g->mark = mark;
    memset(g->mark, 0, (size_t)cap);
    int32_t a = forest_index(g->anc);
    /* A's path, root first: count, then fill backwards */
    int32_t k = 0;
    for (int32_t i = a; i >= 0; i = forest_node_at(f, i)->parent) k++;
    if (!ARR_GROW_I32(g->slots, k, g->cap_slots)) return -1;
    n = k;
    for (int32_t i = a; i >= 0; i = forest_node_at(f, i)->parent) {
        g->slots[--k] = forest_node_at(f, i)->kv_slot;
        g->mark[i] = 1;
    }
    for (int32_t b = 0; b < g->n; b++) {
        int32_t m = 0, leaf = forest_index(g->leaves[b]);
        for (int32_t i = leaf; !g->mark[i]; i = forest_node_at(f, i)->parent) m++;
        if (!ARR_GROW_I32(g->slots, n + m, g->cap_slots)) return -1;
        k = n + m;
        for (int32_t i = leaf; !g->mark[i]; i = forest_node_at(f, i)->parent) {
            g->slots[--k] = forest_node_at(f, i)->kv_slot;
            g->mark[i] = 1;
        }
        n += m;
    }
    return n;
}

st_code merge_gap_step(merge_gap *g, forest *f, step_plan *p, model_ctx *c, st_err *err) {
    for (int32_t i = 0; i < g->n; i++)
        if (!forest_get(f, g->leaves[i]))
            return st_set(err, ST_ERR_ARG, "rope-gap merge: branch %d was pruned", i);
    if (!forest_get(f, g->first))
        return st_set(err, ST_ERR_ARG, "rope-gap merge: the merged chain was pruned");
    st_code rc = step_plan_build(f, p, err);
    if (rc || p->n_rows == 0) return rc;
    int32_t R = p->n_rows;
    int32_t nb = base_slots(g, f);
    bool ok = nb >= 0;
    int32_t crow = g->cap_rows;
    ok = ok && ARR_GROW_I32(g->pos, R + 1, crow);
    crow = g->cap_rows;
    ok = ok && ARR_GROW_I32(g->seg_off, R + 1, crow);
    if (ok) g->cap_rows = crow;
    if (!ok) {
        step_plan_cancel(f, p);
        return st_set(err, ST_ERR_NOMEM, "out of memory for a rope-gap step");
    }
    int32_t first = forest_index(g->first), fdepth = forest_get(f, g->first)->depth, k = 0;
    g->seg_off[0] = 0;
    for (int32_t r = 0; r < R && ok; r++) {
        /* walk up to the chain's first node: the row is in the rope-gap chain when it is
         * reached; the chain's slots are gathered on the way, after the base */
        int32_t m = nb, i = p->node[r];
        while (i >= 0 && forest_node_at(f, i)->depth >= fdepth && i != first) {
            if (!(ok = ARR_GROW_I32(g->slots, m + 1, g->cap_slots))) break;
            const forest_node *nd = forest_node_at(f, i);
            g->slots[m++] = nd->state == FOREST_COMPUTED ? nd->kv_slot : p->slot[p->row_of[i]];
            i = nd->parent;
        }
        if (!ok) break;
        if (i == first) {
            const forest_node *nd = forest_node_at(f, i);
            if (!(ok = ARR_GROW_I32(g->slots, m + 1, g->cap_slots))) break;
            g->slots[m++] = nd->state == FOREST_COMPUTED ? nd->kv_slot : p->slot[p->row_of[i]];
            for (int32_t a = nb, b = m - 1; a < b; a++, b--) { /* root-first order */
                int32_t t = g->slots[a];
                g->slots[a] = g->slots[b];
                g->slots[b] = t;
            }
            ok = push_runs(g, g->slots, m, &k);
            g->pos[r] = p->pos[r] + g->gap;
        } else { /* an ordinary row: the plan's own segments */
            int32_t s0 = p->seg_off[r], s1 = p->seg_off[r + 1];
            if ((ok = ARR_GROW_I32(g->segs, k + s1 - s0, g->cap_segs))) {
                memcpy(g->segs + k, p->segs + s0, sizeof *g->segs * (size_t)(s1 - s0));
                k += s1 - s0;
            }
            g->pos[r] = p->pos[r];
        }
        g->seg_off[r + 1] = k;
    }
    if (!ok) {
        step_plan_cancel(f, p);
        return st_set(err, ST_ERR_NOMEM, "out of memory for a rope-gap step");
    }
    /* the step itself (its hooks, top-k and re-scored rows) with these rows' placement */
    p->pos_override = g->pos;
    p->seg_off_override = g->seg_off;
    p->segs_override = g->segs;
    return step_run(f, p, c, err);
}

/* ---- the strategy table (strategy.h) ----
 * the exact merge (merge.h) as a strategy (strategy.h): the chosen branches' texts
 * joined under their common ancestor as a new pending chain, then one branch grown from
 * it (grow.h); its result is that branch. */

static void *merge_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    strat_grow_run *r = strat_calloc(sizeof *r, err); /* focus: the merged chain's last node */
    if (!r) return NULL;
    int32_t before = forest_n_live(env->f);
    if (merge_branches(env->f, env->tk, o->u.merge.leaves, o->u.merge.n, o->u.merge.sep, &r->focus, err)) {
        free(r);
        return NULL;
    }
    r->goal = o->budget;
    if (strategy_start_node(env->f, r->focus, err) ||
        grow_init(&r->g, env->f, r->focus, 1, &o->sample, o->budget, o->n_vocab, err) ||
        strat_grow_stops(&r->g, o, err)) {
        /* the forest as it was: the merged chain (its nodes are the ones just added) goes */
        forest_id top = r->focus;
        for (int32_t i = forest_n_live(env->f) - before; i > 1; i--)
            top = forest_id_at(env->f, forest_get(env->f, top)->parent);
        forest_prune(env->f, top, NULL);
        strat_grow_run_free(r);
        return NULL;
    }
    return r;
}

const strategy_ops strat_merge_ops = {
    .name = "merge",
    .kind = STRAT_MERGE,
    .summary = STRAT_SUM_BRANCHES,
    .create = merge_run_create,
    STRAT_GROW_RUN_OPS,
};
