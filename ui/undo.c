/* undo.c - the prune history (undo.h): pruned subtrees kept in preorder, put back with
 * new ids, pruned again on redo. */
#include "undo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"

/* A pruned subtree: nodes in preorder, each with the index (in this list) of its parent,
 * -1 for the top, which hangs under `under` (FOREST_NONE: it was a root). old holds the
 * ids the nodes had, to move later entries' `under` onto the restored nodes. */
struct ui_undo_entry {
    forest_id under;
    int32_t pos;       /* the top's place among its siblings */
    int32_t n, branches, top_k;
    bool computed;     /* the top was computed: undo computes it again */
    int32_t *token, *parent;
    float *lp;
    double *score;     /* NAN: none */
    char **name;       /* (n) owned, NULL: none */
    uint8_t *flags;    /* FOREST_FINISHED and FOREST_BOOKMARK as they were */
    uint16_t *tag;
    int32_t *alt_id;   /* (n, top_k) each node's stored alternatives */
    float *alt_lp;     /* (n, top_k) */
    uint8_t *n_alt;    /* (n) */
    forest_id *old;
    bool joined; /* undone and redone with the entry before it (one :keep) */
};

/* The flags a restored node gets back. */
#define UNDO_FLAGS (FOREST_FINISHED | FOREST_BOOKMARK | FOREST_OWN_LINE)

static void entry_free(ui_undo_entry *e) {
    if (!e) return;
    free(e->token), free(e->parent), free(e->lp), free(e->score), free(e->flags), free(e->tag), free(e->old);
    free(e->alt_id), free(e->alt_lp), free(e->n_alt);
    for (int32_t i = 0; e->name && i < e->n; i++) free(e->name[i]);
    free(e->name);
    free(e);
}

/* The node after `at` in a preorder walk of the subtree of `root` (forest indices), -1
 * at its end. */
static int32_t subtree_next(const forest *f, int32_t root, int32_t at) {
    const forest_node *nd = forest_node_at(f, at);
    if (nd->first_child >= 0) return nd->first_child;
    while (at != root && forest_node_at(f, at)->next_sibling < 0) at = forest_node_at(f, at)->parent;
    return at == root ? -1 : forest_node_at(f, at)->next_sibling;
}

/* The subtree of id, copied with its scores and names (u's, either may be NULL); NULL when
 * memory ran out. */
static ui_undo_entry *entry_keep(const forest *f, const ui_undo *u, forest_id id) {
    const ui_scores *s = u->scores;
    int32_t root = forest_index(id), n = 0;
    for (int32_t at = root; at >= 0; at = subtree_next(f, root, at)) n++;
    ui_undo_entry *e = calloc(1, sizeof *e);
    int32_t *map = malloc(sizeof(int32_t) * (size_t)forest_capacity(f)), k = forest_top_k(f);
    if (e) {
        e->top_k = k;
        e->alt_id = malloc(sizeof(int32_t) * (size_t)(n * k + 1));
        e->alt_lp = malloc(sizeof(float) * (size_t)(n * k + 1));
        e->n_alt = malloc((size_t)n);
        e->token = malloc(sizeof(int32_t) * (size_t)n);
        e->parent = malloc(sizeof(int32_t) * (size_t)n);
        e->lp = malloc(sizeof(float) * (size_t)n);
        e->score = malloc(sizeof(double) * (size_t)n);
        e->flags = malloc((size_t)n);
        e->tag = malloc(sizeof(uint16_t) * (size_t)n);
        e->old = malloc(sizeof(forest_id) * (size_t)n);
        e->name = calloc((size_t)n, sizeof(char *));
    }
    if (!e || !map || !e->name || !e->token || !e->parent || !e->lp || !e->score || !e->flags || !e->tag || !e->old || !e->alt_id ||
        !e->alt_lp || !e->n_alt) {
        free(map);
        entry_free(e);
        return NULL;
    }
    const forest_node *top = forest_node_at(f, root);
    e->under = top->parent >= 0 ? forest_id_at(f, top->parent) : FOREST_NONE;
    e->pos = forest_sibling_pos(f, id);
    e->computed = top->state == FOREST_COMPUTED;
    for (int32_t at = root; at >= 0; at = subtree_next(f, root, at)) {
        const forest_node *nd = forest_node_at(f, at);
        map[at] = e->n;
        e->token[e->n] = nd->token;
        e->lp[e->n] = nd->logprob;
        if (!s || !ui_scores_get(s, f, forest_id_at(f, at), &e->score[e->n])) e->score[e->n] = NAN;
        e->flags[e->n] = nd->flags & UNDO_FLAGS;
        e->n_alt[e->n] = (uint8_t)forest_topk(f, forest_id_at(f, at), e->alt_id + e->n * k, e->alt_lp + e->n * k, k);
        e->tag[e->n] = nd->tag;
        const char *name = session_meta_get_name(u->names, f, forest_id_at(f, at));
        e->name[e->n] = name ? strdup(name) : NULL; /* out of memory: the name is not kept */
        e->parent[e->n] = at == root ? -1 : map[nd->parent];
        e->old[e->n] = forest_id_at(f, at);
        e->branches += nd->first_child < 0;
        e->n++;
    }
    free(map);
    return e;
}

/* Where the selection goes when idx is pruned: its next sibling, else the previous one,
 * else its parent. Roots are siblings of each other. */
static forest_id near_of(const forest *f, int32_t idx) {
    const forest_node *nd = forest_node_at(f, idx);
    if (nd->parent >= 0) {
        if (nd->next_sibling >= 0) return forest_id_at(f, nd->next_sibling);
        int32_t prev = -1;
        for (int32_t c = forest_node_at(f, nd->parent)->first_child; c >= 0 && c != idx;
             c = forest_node_at(f, c)->next_sibling)
            prev = c;
        return forest_id_at(f, prev >= 0 ? prev : nd->parent);
    }
    forest_id roots[256];
    int32_t n = forest_roots(f, roots, 256), k = 0;
    while (k < n && k < 256 && forest_index(roots[k]) != idx) k++;
    if (k + 1 < n && k + 1 < 256) return roots[k + 1];
    return k > 0 && k <= 256 ? roots[k - 1] : FOREST_NONE;
}

/* The siblings of idx keep lines of their own once it is gone (forest_view.h). */
static void keep_lines(forest *f, int32_t idx) {
    int32_t p = forest_node_at(f, idx)->parent;
    for (int32_t c = p >= 0 ? forest_node_at(f, p)->first_child : -1; c >= 0; c = forest_node_at(f, c)->next_sibling)
        if (c != idx) forest_set_flags(f, forest_id_at(f, c), FOREST_OWN_LINE, 0);
}

/* Forgets the oldest prune (with the entries joined to it) beyond UI_UNDO_MAX. */
static void trim(ui_undo *u) {
    int32_t groups = 0, drop = 1;
    for (int32_t i = 0; i < u->n_undo; i++) groups += !u->undo[i]->joined;
    if (groups <= UI_UNDO_MAX) return;
    while (drop < u->n_undo && u->undo[drop]->joined) drop++;
    for (int32_t i = 0; i < drop; i++) entry_free(u->undo[i]);
    memmove(u->undo, u->undo + drop, sizeof(u->undo[0]) * (size_t)(u->n_undo - drop));
    u->n_undo -= drop;
}

static st_code prune_keep(ui_undo *u, forest *f, forest_id id, bool joined, ui_prune_info *info, st_err *err) {
    if (!forest_get(f, id)) return st_set(err, ST_ERR_ARG, "nothing selected (that branch is gone)");
    ui_undo_entry *e = ARR_GROW_I32(u->undo, u->n_undo + 1, u->cap_undo) ? entry_keep(f, u, id) : NULL;
    if (!e) return st_set(err, ST_ERR_NOMEM, "out of memory keeping the branch for undo: nothing pruned");
    forest_id near = near_of(f, forest_index(id));
    keep_lines(f, forest_index(id));
    st_code rc = forest_prune(f, id, err);
    if (rc) {
        entry_free(e);
        return rc;
    }
    e->joined = joined;
    u->undo[u->n_undo++] = e;
    trim(u);
    *info = (ui_prune_info){e->n, e->branches, near, false};
    return ST_OK;
}

void ui_undo_init(ui_undo *u) { memset(u, 0, sizeof *u); }

void ui_undo_clear(ui_undo *u) {
    for (int32_t i = 0; i < u->n_undo; i++) entry_free(u->undo[i]);
    u->n_undo = u->n_redo = 0;
}

void ui_undo_free(ui_undo *u) {
    ui_undo_clear(u);
    free(u->undo), free(u->redo), free(u->redo_more);
    memset(u, 0, sizeof *u);
}

st_code ui_undo_prune(ui_undo *u, forest *f, forest_id id, ui_prune_info *info, st_err *err) {
    st_code rc = prune_keep(u, f, id, false, info, err);
    if (!rc) u->n_redo = 0;
    return rc;
}

/* Adds b to the sum a (near: a's, once it has one). */
static void add_info(ui_prune_info *a, const ui_prune_info *b) {
    a->near = a->nodes ? a->near : b->near;
    a->nodes += b->nodes, a->branches += b->branches;
    a->computed |= b->computed;
}

st_code ui_undo_prune_group(ui_undo *u, forest *f, const forest_id *ids, int32_t n, ui_prune_info *info,
                            st_err *err) {
    *info = (ui_prune_info){.near = FOREST_NONE};
    for (int32_t i = 0; i < n; i++) {
        ui_prune_info in = {.near = FOREST_NONE};
        st_code rc = prune_keep(u, f, ids[i], i > 0, &in, err);
        if (rc) return rc;
        add_info(info, &in);
        u->n_redo = 0;
    }
    return ST_OK;
}

/* Puts back the last entry; more: its redo goes with the one pushed before it. */
static st_code undo_one(ui_undo *u, forest *f, bool more, forest_id *top, ui_prune_info *info, st_err *err) {
    ui_undo_entry *e = u->undo[u->n_undo - 1];
    if (e->under != FOREST_NONE && !forest_get(f, e->under)) {
        u->n_undo--;
        entry_free(e);
        return st_set(err, ST_ERR_ARG, "cannot undo: the branch it hung under is gone (pruned by a strategy?)");
    }
    forest_id *ids = malloc(sizeof(forest_id) * (size_t)e->n);
    int32_t cap = u->cap_redo; /* both redo arrays share it */
    if (!ids || !ARR_GROW_I32(u->redo, u->n_redo + 1, cap) || !ARR_GROW_I32(u->redo_more, u->n_redo + 1, u->cap_redo))
        return free(ids), st_set(err, ST_ERR_NOMEM, "out of memory");
    st_code rc = ST_OK;
    int32_t i = 0;
    for (; i < e->n && !rc; i++) {
        forest_id par = e->parent[i] < 0 ? e->under : ids[e->parent[i]];
        rc = par == FOREST_NONE ? forest_add_root(f, &e->token[i], &e->lp[i], 1, 0, &ids[i], err)
                                : forest_append(f, par, &e->token[i], &e->lp[i], 1, &ids[i], err);
    }
    if (rc) { /* half put back: take it out again, and keep the entry */
        if (i > 1) forest_prune(f, ids[0], NULL);
        free(ids);
        return rc;
    }
    u->n_undo--;
    forest_move_to(f, ids[0], e->pos);
    for (i = 0; i < e->n; i++) {
        forest_set_flags(f, ids[i], e->flags[i], 0);
        forest_set_tag(f, ids[i], e->tag[i]);
        forest_store_topk(f, forest_index(ids[i]), e->alt_id + i * e->top_k, e->alt_lp + i * e->top_k, e->n_alt[i]);
        if (e->n_alt[i] && forest_n_children(f, ids[i]) == 0) /* its choices are back: no logits needed */
            forest_set_flags(f, ids[i], FOREST_NO_LOGITS, 0);
        if (u->scores && !isnan(e->score[i])) ui_scores_set(u->scores, f, ids[i], e->score[i]);
        st_err name_err = {0}; /* out of memory: the name is not put back */
        if (u->names && e->name[i]) session_meta_set_name(u->names, f, ids[i], e->name[i], &name_err);
    }
    /* older entries hanging inside this subtree move to the restored nodes */
    for (int32_t k = 0; k < u->n_undo; k++)
        for (i = 0; i < e->n; i++)
            if (u->undo[k]->under == e->old[i]) {
                u->undo[k]->under = ids[i];
                break;
            }
    u->redo_more[u->n_redo] = more;
    u->redo[u->n_redo++] = ids[0];
    *top = ids[0];
    *info = (ui_prune_info){e->n, e->branches, ids[0], e->computed};
    free(ids);
    entry_free(e);
    return ST_OK;
}

st_code ui_undo_undo(ui_undo *u, forest *f, forest_id *top, ui_prune_info *info, st_err *err) {
    if (u->n_undo == 0) return st_set(err, ST_ERR_ARG, "nothing to undo");
    *info = (ui_prune_info){.near = FOREST_NONE};
    for (bool more = true, any = false; more && u->n_undo > 0; any = true) {
        more = u->undo[u->n_undo - 1]->joined;
        ui_prune_info in = {.near = FOREST_NONE};
        forest_id t = FOREST_NONE;
        st_code rc = undo_one(u, f, any, &t, &in, err);
        if (rc) return any ? ST_OK : rc; /* what was put back stays; the rest waits */
        if (!any) *top = t;
        add_info(info, &in);
    }
    return ST_OK;
}

st_code ui_undo_redo(ui_undo *u, forest *f, ui_prune_info *info, st_err *err) {
    if (u->n_redo == 0) return st_set(err, ST_ERR_ARG, "nothing to redo");
    *info = (ui_prune_info){.near = FOREST_NONE};
    for (bool more = true, any = false; more && u->n_redo > 0; any = true) {
        more = u->redo_more[u->n_redo - 1];
        forest_id top = u->redo[--u->n_redo];
        ui_prune_info in = {.near = FOREST_NONE};
        st_code rc = forest_get(f, top) ? prune_keep(u, f, top, any, &in, err)
                                        : st_set(err, ST_ERR_ARG, "cannot redo: that branch is gone");
        if (rc && forest_get(f, top)) u->n_redo++; /* still there to redo */
        if (rc) return any ? ST_OK : rc;
        add_info(info, &in);
    }
    return ST_OK;
}
