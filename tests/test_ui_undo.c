/* test_ui_undo.c - the TUI's prune history (ui/undo.h) on a hand-built forest: several
 * prunes undone in turn and redone, what each prune reports (nodes, branches) and where
 * the selection goes (a sibling, else the parent), bookmarks restored, a new prune
 * clearing the redo list, a prune inside a subtree pruned later undone in order (the
 * inner entry follows the restored nodes' new ids), finished marks, tags and scores put
 * back, a branch put back in its old place among its siblings with its alternatives, the
 * survivor of a prune kept on a line of its own, and the forest's invariants after every
 * change. */
#include "forest/forest.h"
#include "../ui/forest_view.h"
#include "../ui/undo.h"
#include "t.h"

/* root [1 2 3]; under 3: A [4 5], B [6], C [7]; under 5: [8] and [9] */
static forest *tree(forest_id *ids) {
    forest *f = forest_init(64, 4);
    int32_t t0[3] = {1, 2, 3}, ta[2] = {4, 5}, tb = 6, tc = 7, t8 = 8, t9 = 9;
    forest_add_root(f, t0, NULL, 3, 0, &ids[0], NULL);
    forest_append(f, ids[0], ta, NULL, 2, &ids[1], NULL);
    forest_append(f, ids[0], &tb, NULL, 1, &ids[2], NULL);
    forest_append(f, ids[0], &tc, NULL, 1, &ids[3], NULL);
    forest_append(f, ids[1], &t8, NULL, 1, &ids[4], NULL);
    forest_append(f, ids[1], &t9, NULL, 1, &ids[5], NULL);
    return f;
}

/* The parent of node id's top-of-chain (id - n + 1 for a chain of n appended at once). */
static forest_id chain_top(const forest *f, forest_id id, int32_t n) {
    const forest_node *nd = forest_get(f, id);
    int32_t idx = forest_index(id);
    for (int32_t i = 1; i < n && nd; i++) idx = nd->parent, nd = forest_node_at(f, idx);
    return forest_id_at(f, idx);
}

static bool valid(const forest *f) {
    st_err err = {0};
    return forest_check(f, &err) == ST_OK;
}

/* The token path of a node as "1 2 3 ..." (for checks). */
static const char *path_text(const forest *f, forest_id id) {
    static char buf[128];
    int32_t p[32];
    int32_t n = forest_path(f, id, p, 32);
    buf[0] = '\0';
    for (int32_t i = 0; i < n && i < 32; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, "%s%d", i ? " " : "", (int)p[i]);
    }
    return buf;
}

static void test_levels(void) {
    forest_id ids[6];
    forest *f = tree(ids);
    ui_undo u;
    ui_undo_init(&u);
    st_err err = {0};
    ui_prune_info in;
    forest_id a_top = chain_top(f, ids[1], 2);
    forest_set_flags(f, ids[4], FOREST_BOOKMARK, 0);
    T_CHECK(!ui_undo_prune(&u, f, ids[2], &in, &err) && in.nodes == 1 && in.branches == 1 && in.near == ids[3],
            "prune B: %d nodes %d branches, near C", (int)in.nodes, (int)in.branches);
    T_CHECK(!ui_undo_prune(&u, f, a_top, &in, &err) && in.nodes == 4 && in.branches == 2 && in.near == ids[3],
            "prune A: %d nodes %d branches, near C", (int)in.nodes, (int)in.branches);
    T_CHECK(!ui_undo_prune(&u, f, ids[3], &in, &err) && in.nodes == 1 && in.near == ids[0],
            "prune C: the last child: near its parent");
    T_CHECK(forest_n_live(f) == 3 && valid(f), "only the root left: %d", (int)forest_n_live(f));
    /* three levels of undo, newest first */
    forest_id top;
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && in.nodes == 1 && forest_get(f, top)->token == 7, "undo C");
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && in.nodes == 4 && in.branches == 2 && forest_get(f, top)->token == 4,
            "undo A: %d nodes", (int)in.nodes);
    int32_t bm = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (forest_node_at(f, i)->flags & FOREST_BOOKMARK) bm = forest_node_at(f, i)->token;
    T_CHECK(bm == 8, "A's bookmark restored on [8] (got %d)", (int)bm);
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && forest_get(f, top)->token == 6, "undo B");
    T_CHECK(forest_n_live(f) == 9 && valid(f) && forest_n_children(f, ids[0]) == 3, "all back: %d nodes",
            (int)forest_n_live(f));
    T_CHECK(ui_undo_undo(&u, f, &top, &in, &err) == ST_ERR_ARG && strstr(err.msg, "nothing to undo"), "then nothing");
    /* redo, newest undo first: B, then A */
    T_CHECK(!ui_undo_redo(&u, f, &in, &err) && in.nodes == 1 && forest_n_live(f) == 8, "redo B");
    T_CHECK(!ui_undo_redo(&u, f, &in, &err) && in.nodes == 4 && forest_n_live(f) == 4 && valid(f), "redo A");
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && forest_get(f, top)->token == 4, "undo A again");
    /* a new prune: nothing left to redo */
    T_CHECK(!ui_undo_prune(&u, f, top, &in, &err), "prune A anew");
    T_CHECK(ui_undo_redo(&u, f, &in, &err) == ST_ERR_ARG && strstr(err.msg, "nothing to redo"), "redo cleared");
    ui_undo_free(&u);
    forest_free(f);
}

/* [8] pruned, then A (which held it): undo A, then undo [8] hangs it under A's new [5]. */
static void test_nested(void) {
    forest_id ids[6];
    forest *f = tree(ids);
    ui_undo u;
    ui_undo_init(&u);
    st_err err = {0};
    ui_prune_info in;
    forest_id top;
    T_CHECK(!ui_undo_prune(&u, f, ids[4], &in, &err) && in.near == ids[5], "prune [8]: near its sibling [9]");
    T_CHECK(!ui_undo_prune(&u, f, chain_top(f, ids[1], 2), &in, &err) && in.nodes == 3, "prune A (3 nodes left in it)");
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err), "undo A");
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && !strcmp(path_text(f, top), "1 2 3 4 5 8"),
            "undo [8]: under the restored A: %s (%s)", path_text(f, top), err.msg);
    T_CHECK(forest_n_live(f) == 9 && valid(f), "whole again");
    /* an entry whose parent went another way is dropped with a message */
    T_CHECK(!ui_undo_prune(&u, f, top, &in, &err), "prune [8] again");
    forest_prune(f, chain_top(f, ids[0], 3), NULL); /* the whole tree, not through the history */
    T_CHECK(ui_undo_undo(&u, f, &top, &in, &err) == ST_ERR_ARG && strstr(err.msg, "is gone"), "stale: %s", err.msg);
    /* a root: undo puts it back as a root */
    forest_id r;
    int32_t t1 = 1;
    forest_add_root(f, &t1, NULL, 1, 0, &r, NULL);
    T_CHECK(!ui_undo_prune(&u, f, r, &in, &err) && in.near == FOREST_NONE && forest_n_live(f) == 0, "prune a lone root");
    T_CHECK(!ui_undo_undo(&u, f, &top, &in, &err) && forest_get(f, top)->parent < 0 && forest_n_live(f) == 1,
            "undo it: a root again");
    ui_undo_free(&u);
    forest_free(f);
}

/* Undo puts back a branch's marks: finished (the model's end, or the budget's tag) and
 * its score, on the nodes that had them. */
static void test_marks(void) {
    forest_id ids[6];
    forest *f = tree(ids);
    ui_scores sc;
    ui_scores_init(&sc);
    ui_undo u;
    ui_undo_init(&u);
    u.scores = &sc;
    st_err err = {0};
    ui_prune_info in;
    forest_id top, a_top = chain_top(f, ids[1], 2);
    forest_set_flags(f, ids[4], FOREST_FINISHED, 0);
    forest_set_flags(f, ids[5], FOREST_FINISHED, 0);
    forest_set_tag(f, ids[5], 2);
    ui_scores_set(&sc, f, ids[4], -0.5);
    T_CHECK(!ui_undo_prune(&u, f, a_top, &in, &err) && !ui_undo_undo(&u, f, &top, &in, &err), "prune A, undo");
    int32_t fin = 0, tagged = 0, scored = 0;
    double v;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        fin += (nd->flags & FOREST_FINISHED) && (nd->token == 8 || nd->token == 9);
        tagged += nd->tag == 2 && nd->token == 9;
        scored += ui_scores_get(&sc, f, forest_id_at(f, i), &v) && v == -0.5 && nd->token == 8;
    }
    T_CHECK(fin == 2 && tagged == 1 && scored == 1, "[8] and [9] finished again (%d), [9]'s tag (%d), [8]'s score (%d)",
            (int)fin, (int)tagged, (int)scored);
    ui_undo_free(&u);
    ui_scores_free(&sc);
    forest_free(f);
}

/* The tokens of node's children in order, as "4 6 7". */
static const char *children_text(const forest *f, forest_id node) {
    static char buf[64];
    buf[0] = '\0';
    for (int32_t c = forest_get(f, node)->first_child; c >= 0; c = forest_node_at(f, c)->next_sibling) {
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof buf - l, "%s%d", l ? " " : "", (int)forest_node_at(f, c)->token);
    }
    return buf;
}

/* tree()'s forest with an empty prune history over it. */
typedef struct undo_rig {
    forest_id ids[6], top;
    ui_undo u;
    st_err err;
    ui_prune_info in;
} undo_rig;

static forest *rig_init(undo_rig *r) {
    ui_undo_init(&r->u);
    r->err = (st_err){0};
    return tree(r->ids);
}

/* B (the middle child) pruned and undone: back between A and C with its alternatives
 * (it came back last before); C pruned and undone likewise stays last. A root too. */
static void test_place(void) {
    undo_rig r;
    forest *f = rig_init(&r);
    int32_t alt[2] = {11, 12}, got[4] = {0};
    float alp[2] = {-0.1f, -2.5f}, glp[4];
    forest_store_topk(f, forest_index(r.ids[2]), alt, alp, 2);
    T_CHECK(!ui_undo_prune(&r.u, f, r.ids[2], &r.in, &r.err) && !ui_undo_undo(&r.u, f, &r.top, &r.in, &r.err), "prune B, undo");
    T_CHECK(!strcmp(children_text(f, r.ids[0]), "4 6 7") && valid(f), "B in its place: %s", children_text(f, r.ids[0]));
    T_CHECK(forest_topk(f, r.top, got, glp, 4) == 2 && got[1] == 12 && glp[1] == -2.5f, "B's alternatives back: %d",
            (int)got[1]);
    T_CHECK(!ui_undo_prune(&r.u, f, r.ids[3], &r.in, &r.err) && !ui_undo_undo(&r.u, f, &r.top, &r.in, &r.err) &&
                !strcmp(children_text(f, r.ids[0]), "4 6 7"),
            "C, the last, stays last: %s", children_text(f, r.ids[0]));
    forest_id r2, roots[4];
    int32_t t = 20;
    forest_add_root(f, &t, NULL, 1, 0, &r2, NULL);
    T_CHECK(!ui_undo_prune(&r.u, f, chain_top(f, r.ids[0], 3), &r.in, &r.err) && !ui_undo_undo(&r.u, f, &r.top, &r.in, &r.err) &&
                forest_roots(f, roots, 4) == 2 && roots[0] == r.top && valid(f),
            "the first root comes back first");
    ui_undo_free(&r.u);
    forest_free(f);
}

/* The user's prune of B and C leaves A on a line of its own under the root's (d on it
 * prunes A, not the prompt with it); undone, the three are lines again. */
static void test_survivor_line(void) {
    undo_rig r;
    forest *f = rig_init(&r);
    forest_view v;
    fv_init(&v, false);
    T_CHECK(!ui_undo_prune(&r.u, f, r.ids[2], &r.in, &r.err) && !ui_undo_prune(&r.u, f, r.ids[3], &r.in, &r.err), "prune B, C");
    fv_rebuild(&v, f, &r.err);
    T_CHECK(v.n_lines == 4 && v.lines[0].n_nodes == 3 && v.lines[1].n_nodes == 2,
            "root, A, [8], [9]: %d lines, the first of %d nodes", v.n_lines, v.n_lines ? v.lines[0].n_nodes : 0);
    T_CHECK(fv_select_node(&v, f, r.ids[1]) && v.cursor == 1 && fv_selected(&v, f) == r.ids[1], "A's line selects A");
    T_CHECK(!ui_undo_undo(&r.u, f, &r.top, &r.in, &r.err) && !ui_undo_undo(&r.u, f, &r.top, &r.in, &r.err) && !fv_rebuild(&v, f, &r.err) &&
                v.n_lines == 6,
            "all back: %d lines", v.n_lines);
    fv_free(&v);
    ui_undo_free(&r.u);
    forest_free(f);
}

int main(void) {
    test_levels();
    test_nested();
    test_marks();
    test_place();
    test_survivor_line();
    return t_done();
}
