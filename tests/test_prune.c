/* test_prune.c - pruning policies: keep the top-n leaves, drop finished branches, cap the
 * KV cache's use. Forests are built by hand (prompt chains unscored, completions scored)
 * and partly computed (slots marked taken as a step would), the forest's invariants are
 * checked after every policy, and the freed counts are compared with the counts of the
 * nodes and slots that disappeared. A random property part checks keep-top against a
 * brute-force reference of which leaves survive, and a random KV cap. */
#include <math.h>

#include "forest/forest.h"
#include "forest/prune.h"
#include "t.h"

static void check(forest *f, const char *what) {
    st_err err = {0};
    T_CHECK(forest_check(f, &err) == ST_OK, "invariants after %s: %s", what, err.msg);
}

/* Marks every pending node computed, in DFS order, each in the slot after its parent's
 * when free (what a step does, without a model). */
static void compute_all(forest *f) {
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        const forest_node *nd = forest_node_at(f, i);
        if (nd->state != FOREST_PENDING) continue;
        int32_t hint = nd->parent >= 0 ? forest_node_at(f, nd->parent)->kv_slot + 1 : -1;
        int32_t s = kv_alloc_take(forest_kv(f), hint, 1);
        forest_mark_computed(f, i, s);
    }
}

/* A prompt of 4 unscored tokens and k scored completions of len tokens each, completion j
 * with logprob -(j + 1) * 0.1 per token (so completion 0 is best). */
static forest *fan(int32_t k, int32_t len, forest_id *leaves) {
    forest *f = forest_init(1024, 0);
    int32_t p[4] = {1, 2, 3, 4}, t[64];
    float lp[64];
    forest_id last;
    st_err err = {0};
    forest_add_root(f, p, NULL, 4, 0, &last, &err);
    for (int32_t j = 0; j < k; j++) {
        for (int32_t i = 0; i < len; i++) t[i] = 10 + j, lp[i] = -(float)(j + 1) * 0.1f;
        forest_append(f, last, t, lp, len, &leaves[j], &err);
    }
    return f;
}

static void test_keep_top(void) {
    forest_id lv[8];
    forest *f = fan(8, 5, lv);
    compute_all(f);
    prune_params pp = prune_default_params();
    prune_stats st;
    st_err err = {0};
    int32_t used0 = kv_alloc_used(forest_kv(f));
    T_CHECK(prune_keep_top(f, 3, &pp, &st, &err) == ST_OK, "keep top: %s", err.msg);
    check(f, "keep top 3");
    T_CHECK(st.leaves == 5 && st.nodes == 25 && st.slots == 25, "freed %d leaves %d nodes %d slots",
            st.leaves, st.nodes, st.slots);
    T_CHECK(kv_alloc_used(forest_kv(f)) == used0 - 25, "slots freed in the allocator");
    for (int32_t j = 0; j < 8; j++)
        T_CHECK((forest_get(f, lv[j]) != NULL) == (j < 3), "leaf %d kept iff among the best 3", j);
    /* keep 0 with keep_prompts: the prompt stays */
    T_CHECK(prune_keep_top(f, 0, &pp, &st, &err) == ST_OK, "keep 0");
    check(f, "keep top 0");
    T_CHECK(forest_n_live(f) == 4 && st.leaves == 3, "only the prompt is left (%d live)", forest_n_live(f));
    /* without keep_prompts a tree with no kept leaf disappears */
    pp.keep_prompts = false;
    T_CHECK(prune_keep_top(f, 0, &pp, &st, &err) == ST_OK, "keep 0, no prompt protection");
    T_CHECK(forest_n_live(f) == 0 && st.nodes == 4 && st.slots == 4, "the tree is gone");
    check(f, "keep top 0 without prompts");
    forest_free(f);

    /* mean vs sum: a long good branch vs a short less good one */
    f = forest_init(256, 0);
    int32_t p[2] = {1, 2}, t[16] = {0};
    float a[16], b[1] = {-0.5f};
    for (int i = 0; i < 16; i++) a[i] = -0.1f;
    forest_id last, la, lb;
    forest_add_root(f, p, NULL, 2, 0, &last, &err);
    forest_append(f, last, t, a, 16, &la, &err); /* sum -1.6, mean -0.1 */
    forest_append(f, last, t, b, 1, &lb, &err);  /* sum -0.5, mean -0.5 */
    T_CHECK(fabs(prune_score(f, la, PRUNE_SCORE_SUM) + 1.6) < 1e-5 &&
            fabs(prune_score(f, la, PRUNE_SCORE_MEAN) + 0.1) < 1e-6, "scores of a path");
    T_CHECK(isinf(prune_score(f, last, PRUNE_SCORE_SUM)), "an unscored path scores -inf");
    pp = prune_default_params();
    pp.score = PRUNE_SCORE_MEAN;
    prune_keep_top(f, 1, &pp, &st, &err);
    T_CHECK(forest_get(f, la) && !forest_get(f, lb), "mean keeps the long branch");
    check(f, "keep top by mean");
    forest_free(f);
}

static void test_finished(void) {
    forest_id lv[6];
    forest *f = fan(6, 3, lv);
    compute_all(f);
    /* a fork inside completion 0: two leaves share its first two nodes */
    st_err err = {0};
    const forest_node *nd = forest_get(f, lv[0]);
    forest_id mid = forest_id_at(f, nd->parent);
    int32_t t[2] = {50, 51};
    float lp[2] = {-0.2f, -0.2f};
    forest_id extra;
    forest_append(f, mid, t, lp, 2, &extra, &err); /* pending */
    forest_set_flags(f, lv[1], FOREST_FINISHED, 0);
    forest_set_flags(f, lv[3], FOREST_FINISHED, 0);
    forest_set_flags(f, lv[0], FOREST_FINISHED, 0);
    prune_params pp = prune_default_params();
    prune_stats st;
    int32_t live0 = forest_n_live(f);
    T_CHECK(prune_finished(f, &pp, &st, &err) == ST_OK, "finished: %s", err.msg);
    check(f, "prune finished");
    /* lv[1], lv[3]: 3 nodes each; lv[0] alone: its last node only (the fork keeps the rest) */
    T_CHECK(st.leaves == 3 && st.nodes == 7 && st.slots == 7, "freed %d leaves %d nodes %d slots",
            st.leaves, st.nodes, st.slots);
    T_CHECK(forest_n_live(f) == live0 - 7, "live count");
    T_CHECK(!forest_get(f, lv[0]) && !forest_get(f, lv[1]) && forest_get(f, lv[2]) &&
            !forest_get(f, lv[3]) && forest_get(f, extra) && forest_get(f, mid), "which went");
    forest_free(f);
}

static void test_kv_cap(void) {
    forest_id lv[8];
    forest *f = fan(8, 5, lv); /* 4 + 40 slots */
    compute_all(f);
    prune_params pp = prune_default_params();
    prune_stats st;
    st_err err = {0};
    T_CHECK(prune_kv_cap(f, 100, &pp, &st, &err) == ST_OK && st.nodes == 0, "under the cap: nothing");
    T_CHECK(prune_kv_cap(f, 30, &pp, &st, &err) == ST_OK, "cap 30: %s", err.msg);
    check(f, "kv cap 30");
    /* 44 -> <= 30: three branches of 5 go (29 left), the three worst */
    T_CHECK(kv_alloc_used(forest_kv(f)) == 29 && st.slots == 15 && st.leaves == 3,
            "used %d, freed %d", kv_alloc_used(forest_kv(f)), st.slots);
    T_CHECK(!forest_get(f, lv[7]) && !forest_get(f, lv[6]) && !forest_get(f, lv[5]) &&
            forest_get(f, lv[4]), "the worst went");
    int32_t live = forest_n_live(f);
    T_CHECK(prune_kv_cap(f, 3, &pp, &st, &err) == ST_NO_KV_SLOT, "an unreachable cap is refused");
    T_CHECK(forest_n_live(f) == live, "and changes nothing");
    check(f, "refused kv cap");
    pp.keep_prompts = false;
    T_CHECK(prune_kv_cap(f, 3, &pp, &st, &err) == ST_OK && forest_n_live(f) == 0,
            "without protection everything may go");
    forest_free(f);
}

/* Random forests: keep_top's survivors are exactly the n best leaves and their ancestors. */
static void test_random(void) {
    uint64_t s = 12345;
#define RND(n) ((s = s * 6364136223846793005ULL + 1442695040888963407ULL), (int32_t)((s >> 33) % (n)))
    for (int iter = 0; iter < 200; iter++) {
        forest *f = forest_init(4096, 0);
        st_err err = {0};
        int32_t t[8] = {0};
        float lp[8];
        forest_add_root(f, t, NULL, 1 + RND(3), 0, NULL, &err);
        for (int k = 0; k < 30; k++) {
            forest_id at = forest_id_at(f, RND(forest_capacity(f)));
            if (at == FOREST_NONE) continue;
            int32_t len = 1 + RND(4);
            for (int i = 0; i < len; i++) lp[i] = -(float)RND(1000) / 100.0f;
            forest_append(f, at, t, lp, len, NULL, &err);
        }
        if (RND(2)) compute_all(f);
        forest_id lv[256];
        int32_t nl = forest_leaves(f, lv, 256);
        double sc[256];
        for (int i = 0; i < nl; i++) sc[i] = prune_score(f, lv[i], PRUNE_SCORE_SUM);
        int32_t keep = RND(nl + 1);
        bool want[256];
        int32_t cand = 0;
        for (int i = 0; i < nl; i++) {
            cand += !isinf(sc[i]);
            int32_t better = 0;
            for (int j = 0; j < nl; j++)
                if (!isinf(sc[j]) && (sc[j] > sc[i] || (sc[j] == sc[i] && j < i))) better++;
            want[i] = isinf(sc[i]) || better < keep; /* unscored leaves are prompts: kept */
        }
        prune_params pp = prune_default_params();
        prune_stats st;
        int32_t live0 = forest_n_live(f), used0 = kv_alloc_used(forest_kv(f));
        prune_keep_top(f, keep, &pp, &st, &err);
        check(f, "random keep top");
        bool ok = true;
        for (int i = 0; i < nl; i++) ok &= (forest_get(f, lv[i]) != NULL) == want[i];
        T_CHECK(ok, "iter %d: survivors are the %d best of %d candidates", iter, keep, cand);
        T_CHECK(st.nodes == live0 - forest_n_live(f) && st.slots == used0 - kv_alloc_used(forest_kv(f)),
                "iter %d: stats", iter);
        /* every surviving leaf is an original leaf or prompt text (nothing half-removed) */
        forest_id lv2[256];
        int32_t nl2 = forest_leaves(f, lv2, 256), orig = 0;
        for (int i = 0; i < nl2; i++) {
            bool was = isnan(forest_get(f, lv2[i])->logprob);
            for (int j = 0; j < nl; j++) was |= lv2[i] == lv[j];
            orig += was;
        }
        T_CHECK(orig == nl2, "iter %d: no scored node became a leaf", iter);
        /* then a random KV cap: reached, or refused with nothing changed; the surviving
         * candidates all score at least as well as the removed ones */
        int32_t used = kv_alloc_used(forest_kv(f)), cap = RND(used + 1), live = forest_n_live(f);
        nl = forest_leaves(f, lv, 256);
        for (int i = 0; i < nl; i++) sc[i] = prune_score(f, lv[i], PRUNE_SCORE_SUM);
        st_code rc = prune_kv_cap(f, cap, &pp, &st, &err);
        check(f, "random kv cap");
        if (rc == ST_OK) {
            T_CHECK(kv_alloc_used(forest_kv(f)) <= cap, "iter %d: under the cap", iter);
            double worst_kept = INFINITY, best_gone = -INFINITY;
            for (int i = 0; i < nl; i++) {
                if (isinf(sc[i])) continue;
                if (forest_get(f, lv[i])) worst_kept = fmin(worst_kept, sc[i]);
                else best_gone = fmax(best_gone, sc[i]);
            }
            T_CHECK(best_gone <= worst_kept, "iter %d: the worst leaves went", iter);
        } else {
            T_CHECK(rc == ST_NO_KV_SLOT && forest_n_live(f) == live, "iter %d: refused, unchanged", iter);
        }
        forest_free(f);
    }
#undef RND
}

int main(void) {
    test_keep_top();
    test_finished();
    test_kv_cap();
    test_random();
    return t_done();
}
