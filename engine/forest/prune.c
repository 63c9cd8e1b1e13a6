/* prune.c - pruning policies (see prune.h). Each policy decides which nodes survive over
 * arrays indexed like the forest, then removes the topmost non-surviving nodes with
 * forest_prune, so a failure to decide (out of memory) changes nothing. */
#include "forest/prune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

prune_params prune_default_params(void) {
    return (prune_params){.score = PRUNE_SCORE_SUM, .keep_prompts = true};
}

/* Per-node arrays (forest capacity entries) and the DFS order. */
typedef struct prune_work {
    int32_t cap;
    int32_t *order;   /* (n) live nodes in DFS preorder */
    int32_t n;
    double *score;    /* path score of each node */
    uint8_t *protect; /* never removed */
    uint8_t *keep;    /* survives */
    int32_t *leaves;  /* candidate leaves in DFS order */
    int32_t n_leaves;
} prune_work;

static void work_free(prune_work *w) {
    free(w->order);
    free(w->score);
    free(w->protect);
    free(w->keep);
    free(w->leaves);
}

static double path_score(double sum, int32_t cnt, int32_t kind) {
    if (cnt == 0) return -INFINITY;
    return kind == PRUNE_SCORE_MEAN ? sum / cnt : sum;
}

double prune_score(const forest *f, forest_id id, int32_t kind) {
    const forest_node *nd = forest_get(f, id);
    if (!nd) return NAN;
    double sum = 0;
    int32_t cnt = 0;
    for (int32_t i = forest_index(id); i >= 0; i = forest_node_at(f, i)->parent) {
        float lp = forest_node_at(f, i)->logprob;
        if (!isnan(lp)) sum += lp, cnt++;
    }
    return path_score(sum, cnt, kind);
}

/* Scores, protection and the candidate leaves. */
static st_code work_init(prune_work *w, const forest *f, const prune_params *p, st_err *err) {
    memset(w, 0, sizeof *w);
    if (!p || (p->score != PRUNE_SCORE_SUM && p->score != PRUNE_SCORE_MEAN))
        return st_set(err, ST_ERR_ARG, "prune: unknown score kind");
    int32_t cap = w->cap = forest_capacity(f);
    size_t c = (size_t)(cap > 0 ? cap : 1);
    w->order = malloc(sizeof *w->order * c);
    w->score = malloc(sizeof *w->score * c);
    w->protect = calloc(c, 1);
    w->keep = calloc(c, 1);
    w->leaves = malloc(sizeof *w->leaves * c);
    int32_t *cnt = malloc(sizeof *cnt * c);
    double *sum = malloc(sizeof *sum * c);
    if (!w->order || !w->score || !w->protect || !w->keep || !w->leaves || !cnt || !sum) {
        free(cnt), free(sum), work_free(w);
        return st_set(err, ST_ERR_NOMEM, "out of memory pruning");
    }
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        double s = nd->parent >= 0 ? sum[nd->parent] : 0;
        int32_t k = nd->parent >= 0 ? cnt[nd->parent] : 0;
        bool scored = !isnan(nd->logprob);
        if (scored) s += nd->logprob, k++;
        sum[i] = s, cnt[i] = k;
        w->score[i] = path_score(s, k, p->score);
        w->protect[i] = p->keep_prompts && !scored;
        w->order[w->n++] = i;
    }
    /* protection goes up: nothing above a protected node is removed */
    for (int32_t j = w->n - 1; j >= 0; j--) {
        const forest_node *nd = forest_node_at(f, w->order[j]);
        if (w->protect[w->order[j]] && nd->parent >= 0) w->protect[nd->parent] = 1;
    }
    for (int32_t j = 0; j < w->n; j++) {
        int32_t i = w->order[j];
        if (forest_node_at(f, i)->first_child < 0 && !w->protect[i]) w->leaves[w->n_leaves++] = i;
    }
    free(cnt), free(sum);
    return ST_OK;
}

/* keep[] holds the kept leaves: closes it upwards (and over protected nodes), then removes
 * every topmost node that does not survive. */
static st_code work_apply(prune_work *w, forest *f, int32_t n_removed_leaves, prune_stats *st,
                          st_err *err) {
    for (int32_t j = w->n - 1; j >= 0; j--) {
        int32_t i = w->order[j];
        const forest_node *nd = forest_node_at(f, i);
        if (w->protect[i]) w->keep[i] = 1;
        /* a non-candidate leaf (e.g. protected) was kept above; an unprotected interior
         * node survives through its children */
        if (w->keep[i] && nd->parent >= 0) w->keep[nd->parent] = 1;
    }
    int32_t live0 = forest_n_live(f), used0 = kv_alloc_used(forest_kv(f)), n_top = 0;
    for (int32_t j = 0; j < w->n; j++) { /* reuse order[] for the ids to remove */
        int32_t i = w->order[j];
        const forest_node *nd = forest_node_at(f, i);
        if (!w->keep[i] && (nd->parent < 0 || w->keep[nd->parent])) w->order[n_top++] = i;
    }
    for (int32_t j = 0; j < n_top; j++) {
        st_code rc = forest_prune(f, forest_id_at(f, w->order[j]), err);
        ASSERT(rc == ST_OK); /* a live id taken from the forest just now */
    }
    if (st) {
        st->leaves = n_removed_leaves;
        st->nodes = live0 - forest_n_live(f);
        st->slots = used0 - kv_alloc_used(forest_kv(f));
    }
    return ST_OK;
}

/* Qsort context: candidate leaves by score, best first, ties in DFS order. */
typedef struct rank_item {
    double score;
    int32_t pos; /* DFS rank */
    int32_t idx;
} rank_item;

static int rank_cmp(const void *a, const void *b) {
    const rank_item *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The candidate leaves ranked best first; NULL when out of memory. */
static rank_item *work_rank(const prune_work *w) {
    rank_item *r = malloc(sizeof *r * (size_t)(w->n_leaves > 0 ? w->n_leaves : 1));
    if (!r) return NULL;
    for (int32_t j = 0; j < w->n_leaves; j++)
        r[j] = (rank_item){w->score[w->leaves[j]], j, w->leaves[j]};
    qsort(r, (size_t)w->n_leaves, sizeof *r, rank_cmp);
    return r;
}

st_code prune_keep_top(forest *f, int32_t n_keep, const prune_params *p, prune_stats *st,
                       st_err *err) {
    if (n_keep < 0) return st_set(err, ST_ERR_ARG, "prune: n_keep must be >= 0");
    prune_work w;
    st_code rc = work_init(&w, f, p, err);
    if (rc) return rc;
    rank_item *r = work_rank(&w);
    if (!r) {
        work_free(&w);
        return st_set(err, ST_ERR_NOMEM, "out of memory pruning");
    }
    int32_t kept = n_keep < w.n_leaves ? n_keep : w.n_leaves;
    for (int32_t j = 0; j < kept; j++) w.keep[r[j].idx] = 1;
    rc = work_apply(&w, f, w.n_leaves - kept, st, err);
    free(r);
    work_free(&w);
    return rc;
}

st_code prune_finished(forest *f, const prune_params *p, prune_stats *st, st_err *err) {
    prune_work w;
    st_code rc = work_init(&w, f, p, err);
    if (rc) return rc;
    int32_t gone = 0;
    for (int32_t j = 0; j < w.n_leaves; j++) {
        int32_t i = w.leaves[j];
        if (forest_node_at(f, i)->flags & FOREST_FINISHED) gone++;
        else w.keep[i] = 1;
    }
    rc = work_apply(&w, f, gone, st, err);
    work_free(&w);
    return rc;
}

st_code prune_kv_cap(forest *f, int32_t cap, const prune_params *p, prune_stats *st,
                     st_err *err) {
    if (cap < 0) return st_set(err, ST_ERR_ARG, "prune: the KV cap must be >= 0");
    int32_t used = kv_alloc_used(forest_kv(f));
    if (used <= cap) {
        if (st) *st = (prune_stats){0};
        return ST_OK;
    }
    prune_work w;
    st_code rc = work_init(&w, f, p, err);
    if (rc) return rc;
    rank_item *r = work_rank(&w);
    int32_t *kids = calloc((size_t)(w.cap > 0 ? w.cap : 1), sizeof *kids);
    uint8_t *dead = calloc((size_t)(w.cap > 0 ? w.cap : 1), 1);
    if (!r || !kids || !dead) {
        free(r), free(kids), free(dead), work_free(&w);
        return st_set(err, ST_ERR_NOMEM, "out of memory pruning");
    }
    for (int32_t j = 0; j < w.n; j++) {
        const forest_node *nd = forest_node_at(f, w.order[j]);
        if (nd->parent >= 0) kids[nd->parent]++;
    }
    /* simulate: remove the worst leaf's branch (its nodes no one else uses) until under
     * the cap; the worst is the last in rank order */
    int32_t gone = 0;
    for (int32_t j = w.n_leaves - 1; j >= 0 && used > cap; j--, gone++) {
        for (int32_t i = r[j].idx; i >= 0;) {
            const forest_node *nd = forest_node_at(f, i);
            dead[i] = 1;
            if (nd->state == FOREST_COMPUTED) used--;
            i = nd->parent;
            if (i < 0 || --kids[i] > 0 || w.protect[i]) break;
        }
    }
    if (used > cap) {
        free(r), free(kids), free(dead), work_free(&w);
        return st_set(err, ST_NO_KV_SLOT, "prune: removing every candidate branch would "
                      "still use more than %d KV slots", cap);
    }
    for (int32_t j = 0; j < w.n_leaves; j++)
        if (!dead[w.leaves[j]]) w.keep[w.leaves[j]] = 1;
    rc = work_apply(&w, f, gone, st, err);
    free(r), free(kids), free(dead);
    work_free(&w);
    return rc;
}
