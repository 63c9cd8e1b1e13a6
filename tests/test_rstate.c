/* test_rstate.c - a forest on a model with recurrent layers (Qwen3.5's Gated DeltaNet,
 * rstate.h), step by step: which nodes hold a state cell after each step (the leaves and
 * the branch points still growing, nothing else), forks copying a state, a fork under an
 * inner node running its chain again, pruning giving cells back, a full set of cells as
 * ST_NO_KV_SLOT with the forest unchanged, a tree of verified drafts keeping a state per
 * draft until the rejected ones are pruned, re-scoring, nodes computed elsewhere (a loaded
 * session) run again on the first step; and after every step each leaf's
 * logits bitwise those of its path decoded alone (cpu, then ref). The random forests of
 * test_forest.c cover the same promise on more shapes. */
#include <string.h>

#include "convert/mkmodel.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "t.h"
#include "t_model.h"

typedef struct rig {
    const model *m;
    forest *f;
    model_ctx *c, *lc; /* the forest's context, and linear decoding's */
    step_plan plan;
    float *ref;
    const char *be;
} rig;

static void rig_init(rig *g, const model *m, const char *be, int32_t n_cells) {
    memset(g, 0, sizeof *g);
    g->m = m, g->be = be;
    g->f = forest_init(256, 0);
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 256, cp.backend = be, cp.n_rstates = n_cells;
    st_err err = {0};
    g->c = model_ctx_init(m, &cp, &err);
    cp.n_rstates = 1;
    g->lc = model_ctx_init(m, &cp, &err);
    step_plan_init(&g->plan);
    g->ref = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
}

static void rig_free(rig *g) {
    step_plan_free(&g->plan);
    forest_free(g->f);
    model_ctx_free(g->c);
    model_ctx_free(g->lc);
    free(g->ref);
}

/* A step, the invariants, and every scored leaf against its path alone. */
static void step_exact(rig *g, const char *what) {
    st_err err = {0};
    T_CHECK(step_forest(g->f, &g->plan, g->c, &err) == ST_OK, "%s %s: step: %s", g->be, what, err.msg);
    T_CHECK(forest_check(g->f, &err) == ST_OK, "%s %s: invariants: %s", g->be, what, err.msg);
    forest_id leaves[64];
    int32_t n = forest_leaves(g->f, leaves, 64), scored = 0, same = 0, path[256];
    for (int32_t k = 0; k < n; k++) {
        const float *lg = step_logits_of(&g->plan, leaves[k]);
        if (!lg) continue;
        const int32_t len = forest_path(g->f, leaves[k], path, 256);
        t_linear(g->lc, path, len, 0, g->ref);
        scored++;
        same += memcmp(lg, g->ref, sizeof(float) * (size_t)g->m->hp.n_vocab) == 0;
    }
    T_CHECK(scored > 0 && same == scored, "%s %s: %d of %d scored leaves equal their paths "
            "alone", g->be, what, same, scored);
}

/* Nodes holding a cell, and whether each is a leaf or has a pending child. */
static int32_t held(const forest *f, bool *only_tips) {
    int32_t n = 0;
    *only_tips = true;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        if (nd->rs_cell < 0) continue;
        n++;
        *only_tips &= nd->first_child < 0;
    }
    return n;
}

static forest_id chain(rig *g, forest_id under, int32_t n, int32_t t0) {
    int32_t toks[16];
    for (int32_t i = 0; i < n; i++) toks[i] = (t0 + 37 * i) % g->m->hp.n_vocab;
    forest_id last = FOREST_NONE;
    st_err err = {0};
    if (under == FOREST_NONE) forest_add_root(g->f, toks, NULL, n, 0, &last, &err);
    else forest_append(g->f, under, toks, NULL, n, &last, &err);
    return last;
}

static void test_tree(const model *m, const char *be) {
    rig g;
    rig_init(&g, m, be, 8);
    bool tips;
    forest_id leaf = chain(&g, FOREST_NONE, 10, 5);
    step_exact(&g, "prompt");
    T_CHECK(held(g.f, &tips) == 1 && tips && forest_get(g.f, leaf)->rs_cell >= 0,
            "%s: after the prompt only its leaf holds a state (%d)", be, held(g.f, &tips));
    forest_id kids[4];
    for (int32_t k = 0; k < 3; k++) kids[k] = chain(&g, leaf, 1, 100 + k);
    kids[3] = chain(&g, leaf, 4, 200);
    step_exact(&g, "four forks");
    T_CHECK(held(g.f, &tips) == 4 && tips, "%s: four leaves hold states, the branch point "
            "none (%d held)", be, held(g.f, &tips));
    /* a fork under the prompt's 5th node, which holds no state: its chain runs again */
    forest_id roots[1];
    forest_roots(g.f, roots, 1);
    int32_t idx = forest_index(roots[0]);
    for (int32_t i = 0; i < 4; i++) idx = forest_node_at(g.f, idx)->first_child;
    chain(&g, forest_id_at(g.f, idx), 3, 300);
    step_exact(&g, "fork under an inner node");
    T_CHECK(held(g.f, &tips) == 5 && tips, "%s: five leaves, five states (%d)", be, held(g.f, &tips));
    st_err err = {0};
    forest_prune(g.f, kids[3], &err);
    T_CHECK(forest_rstate_used(g.f) == 4 && forest_check(g.f, &err) == ST_OK,
            "%s: a pruned leaf gives its state back (%d in use)", be, forest_rstate_used(g.f));
    /* re-scoring a computed leaf: its logits again, its state kept */
    forest_set_flags(g.f, kids[0], FOREST_WANT_LOGITS, 0);
    step_exact(&g, "re-scoring");
    T_CHECK(forest_rstate_used(g.f) == 4, "%s: re-scoring keeps 4 states (%d)", be,
            forest_rstate_used(g.f));
    /* more forks than cells: ST_NO_KV_SLOT, the forest as it was */
    for (int32_t k = 0; k < 6; k++) chain(&g, kids[1], 2, 400 + k);
    const int32_t pending = forest_n_pending(g.f);
    T_CHECK(step_forest(g.f, &g.plan, g.c, &err) == ST_NO_KV_SLOT &&
            forest_n_pending(g.f) == pending && forest_rstate_used(g.f) == 4 &&
            forest_check(g.f, &err) == ST_OK, "%s: out of state cells: %s", be, err.msg);
    rig_free(&g);
}

/* A verified draft: a chain flagged for logits keeps a state per node; pruning the
 * rejected tail leaves the last accepted node a leaf with its own state. */
static void test_drafts(const model *m, const char *be) {
    rig g;
    rig_init(&g, m, be, 16);
    forest_id leaf = chain(&g, FOREST_NONE, 6, 9);
    step_exact(&g, "draft prompt");
    int32_t toks[5] = {11, 12, 13, 14, 15};
    forest_id d[5], at = leaf;
    st_err err = {0};
    for (int32_t i = 0; i < 5; i++) {
        forest_append(g.f, at, &toks[i], NULL, 1, &d[i], &err);
        forest_set_flags(g.f, d[i], FOREST_WANT_LOGITS, 0);
        at = d[i];
    }
    step_exact(&g, "draft verification");
    bool tips;
    T_CHECK(held(g.f, &tips) == 5, "%s: every draft node keeps a state (%d)", be, held(g.f, &tips));
    forest_prune(g.f, d[2], &err); /* drafts 2-4 rejected: d[1] is the last accepted */
    chain(&g, d[1], 1, 77);
    step_exact(&g, "after the accepted drafts");
    T_CHECK(held(g.f, &tips) == 1 && tips, "%s: the drafts' states went back (%d held)", be,
            held(g.f, &tips));
    rig_free(&g);
}

/* A forest whose nodes came computed from elsewhere (a loaded session: their K/V in the
 * cache, no state anywhere): the first step runs their chain again, exactly. */
static void test_restored(const model *m, const char *be) {
    rig g;
    rig_init(&g, m, be, 4);
    forest_id last = chain(&g, FOREST_NONE, 7, 21);
    int32_t path[8], n = forest_path(g.f, last, path, 8);
    T_CHECK(model_forward_linear(g.c, path, n, 0, g.ref, NULL) == ST_OK, "%s: the K/V", be);
    for (int32_t i = forest_dfs_first(g.f), s = 0; i >= 0; i = forest_dfs_next(g.f, i), s++) {
        kv_alloc_take(forest_kv(g.f), s, 1);
        forest_mark_computed(g.f, i, s);
    }
    chain(&g, last, 2, 55);
    step_exact(&g, "restored nodes");
    bool tips;
    T_CHECK(held(g.f, &tips) == 1 && tips, "%s: the restored chain's states are not kept (%d)",
            be, held(g.f, &tips));
    rig_free(&g);
}

static bool stop_after_first(void *ud, int32_t done, int32_t n) {
    (void)ud, (void)n;
    return done == 0;
}

/* A step cancelled after its first chunk, which grew a leaf in place: the leaf loses its
 * half-updated state, the forest is otherwise as before, and the next step runs the
 * leaf's chain again, exactly. */
static void test_cancelled(const model *m, const char *be) {
    rig g;
    rig_init(&g, m, be, 4);
    model_ctx_free(g.c);
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 256, cp.backend = be, cp.n_rstates = 4, cp.max_rows = 2;
    g.c = model_ctx_init(m, &cp, NULL);
    forest_id leaf = chain(&g, FOREST_NONE, 5, 31);
    step_exact(&g, "before the cancel");
    chain(&g, leaf, 3, 61);
    g.plan.forward_progress = stop_after_first;
    st_err err = {0};
    T_CHECK(step_forest(g.f, &g.plan, g.c, &err) == ST_CANCELLED &&
            forest_get(g.f, leaf)->rs_cell < 0 && forest_rstate_used(g.f) == 0 &&
            forest_n_pending(g.f) == 3 && forest_check(g.f, &err) == ST_OK,
            "%s: a cancelled step: the leaf's state dropped (cell %d, %d in use): %s", be,
            forest_get(g.f, leaf)->rs_cell, forest_rstate_used(g.f), err.msg);
    g.plan.forward_progress = NULL;
    step_exact(&g, "after the cancel");
    rig_free(&g);
}

int main(void) {
    mkmodel_params p = mkmodel_default_params();
    p.arch = "qwen35", p.n_layer = 4, p.head_dim = 16;
    p.ssm_k_heads = 1, p.ssm_v_heads = 2, p.ssm_state = 16, p.full_attn_interval = 2;
    st_err err = {0};
    model *m = t_random_model(&p, &err);
    T_CHECK(m != NULL, "qwen35 random model: %s", err.msg);
    if (!m) return t_done();
    const char *bes[] = {"cpu", "ref"};
    for (size_t i = 0; i < 2; i++) {
        test_tree(m, bes[i]);
        test_drafts(m, bes[i]);
        test_restored(m, bes[i]);
        test_cancelled(m, bes[i]);
    }
    model_free(m);
    return t_done();
}
