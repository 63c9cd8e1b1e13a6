/* test_spec.c - tree-verified drafts and lookahead decoding are exact: their output equals
 * plain greedy decoding token for token.
 *
 * Units: the n-gram pool (order, refresh, eviction, growth) and prompt lookup (longest key
 * first, most recent match first, prefixes dropped); the draft tree's deduplication and
 * index map; pack / unpack against linear decoding of every candidate prefix; accept with
 * drafts that are the true greedy continuation for exactly j tokens (must accept j); the
 * lookahead window's layout (node (l, i) at depth tip + i + l under the right parent).
 * Equivalence: greedy decoding through the speculative driver - prompt lookup, the pool,
 * lookahead with many W/N/G, adaptive or fixed draft lengths, small KV caches that cut
 * the drafts - against linear greedy decoding (one token per forward pass), on random
 * weight models (F32, Q8_0 with GQA 4, Q4_K), on stories260K with its tokenizer and on
 * SmolLM2 when present; the forest's invariants are checked after every step. */
#include <string.h>

#include "forest/forest.h"
#include "spec/lookahead.h"
#include "spec/ngram.h"
#include "forest/sample.h"
#include "spec/spec.h"
#include "forest/step.h"
#include "tok/tok.h"
#include "t.h"
#include "t_model.h"

/* ---- units without a model ---- */

static void test_pool(void) {
    ngram_pool p;
    st_err err = {0};
    T_CHECK(ngram_pool_init(&p, 3, 2, &err) == ST_OK, "pool init: %s", err.msg);
    int32_t g1[] = {5, 6, 7}, g2[] = {5, 8, 9}, g3[] = {5, 1, 2};
    ngram_pool_add(&p, g1, &err);
    ngram_pool_add(&p, g2, &err);
    T_CHECK(ngram_pool_count(&p, 5) == 2, "two continuations of 5");
    T_CHECK(ngram_pool_get(&p, 5, 0)[0] == 8 && ngram_pool_get(&p, 5, 1)[0] == 6,
            "most recent first");
    ngram_pool_add(&p, g1, &err); /* refresh: 6 7 moves to the front, no duplicate */
    T_CHECK(ngram_pool_count(&p, 5) == 2 && ngram_pool_get(&p, 5, 0)[0] == 6 &&
            ngram_pool_get(&p, 5, 0)[1] == 7, "refresh moves to the front");
    ngram_pool_add(&p, g3, &err); /* full: the oldest (8 9) drops out */
    T_CHECK(ngram_pool_count(&p, 5) == 2 && ngram_pool_get(&p, 5, 0)[0] == 1 &&
            ngram_pool_get(&p, 5, 1)[0] == 6, "eviction of the oldest");
    T_CHECK(ngram_pool_get(&p, 5, 2) == NULL && ngram_pool_count(&p, 4) == 0, "absent");
    /* growth: many keys survive rehashing */
    for (int32_t k = 100; k < 1100; k++) {
        int32_t g[3] = {k, k + 1, k + 2};
        ngram_pool_add(&p, g, &err);
    }
    int ok = 1;
    for (int32_t k = 100; k < 1100; k++) {
        const int32_t *c = ngram_pool_get(&p, k, 0);
        ok &= c && c[0] == k + 1 && c[1] == k + 2 && ngram_pool_count(&p, k) == 1;
    }
    T_CHECK(ok && ngram_pool_count(&p, 5) == 2, "1000 keys after growth");
    ngram_pool_free(&p);
    /* add_all feeds a growing history incrementally */
    ngram_pool_init(&p, 2, 4, &err);
    int32_t h[] = {1, 2, 1, 3, 1, 2};
    ngram_pool_add_all(&p, h, 4, 0, &err);
    T_CHECK(ngram_pool_count(&p, 1) == 2 && ngram_pool_count(&p, 2) == 1, "add_all 4");
    ngram_pool_add_all(&p, h, 6, 4, &err);
    T_CHECK(ngram_pool_count(&p, 1) == 2 && ngram_pool_get(&p, 1, 0)[0] == 2 &&
            ngram_pool_count(&p, 3) == 1, "add_all incremental refreshes 1 2");
    ngram_pool_free(&p);
    T_CHECK(ngram_pool_init(&p, 1, 2, &err) == ST_ERR_ARG, "n = 1 refused");
}

static void test_lookup(void) {
    /*               0  1  2  3  4  5  6  7  8  9 10 11 */
    int32_t h[] = {7, 1, 2, 3, 9, 1, 2, 4, 5, 8, 1, 2};
    int32_t out[4 * 8], lens[4];
    int32_t keys[4];
    int32_t n = ngram_lookup(h, 12, 1, 3, 3, 4, out, lens, keys);
    /* key "8 1 2": none; "1 2": at 5 (-> 4 5 8) then at 1 (-> 3 9 1); "2": at 6 is a
     * prefix duplicate of 4 5 8? no: "2" at 6 -> 4 5 8 (same as before, dropped), at 2 ->
     * 3 9 1 (dropped) */
    T_CHECK(n == 2, "two proposals (got %d)", n);
    T_CHECK(n >= 2 && lens[0] == 3 && out[0] == 4 && out[1] == 5 && out[2] == 8 &&
            lens[1] == 3 && out[3] == 3 && out[4] == 9 && keys[0] == 2 && keys[1] == 2,
            "most recent match first, found by the 2-token key");
    int32_t h2[] = {4, 5, 6, 4, 5, 6, 4};
    n = ngram_lookup(h2, 7, 1, 2, 8, 4, out, lens, NULL);
    /* "6 4" at 2 -> 5 6 4 (3 tokens to the end) */
    T_CHECK(n >= 1 && lens[0] == 3 && out[0] == 5 && out[1] == 6 && out[2] == 4,
            "a match near the end proposes what there is (len %d)", n ? lens[0] : -1);
    T_CHECK(ngram_lookup(h2, 1, 1, 2, 8, 4, out, lens, NULL) == 0, "one token: nothing");
}

static void test_tree_dedup(void) {
    spec_tree t;
    spec_tree_init(&t);
    st_err err = {0};
    int32_t a[] = {1, 2, 3}, b[] = {1, 2, 4}, c[] = {1, 5}, d[] = {1, 2, 3};
    spec_tree_add(&t, a, 3, &err);
    spec_tree_add(&t, b, 3, &err);
    spec_tree_add(&t, c, 2, &err);
    spec_tree_add(&t, d, 3, &err);
    T_CHECK(t.n_nodes == 5 && t.n_cand == 4, "5 nodes for 4 candidates (got %d)", t.n_nodes);
    T_CHECK(t.cand_node[t.cand_off[1] + 2] == 3 && t.cand_node[t.cand_off[1]] == 0 &&
            t.cand_node[t.cand_off[2] + 1] == 4 && t.parent[4] == 0 && t.parent[3] == 1,
            "index map and parents");
    T_CHECK(!memcmp(t.cand_node + t.cand_off[0], t.cand_node + t.cand_off[3], 3 * sizeof(int32_t)),
            "a duplicate candidate maps to the same nodes");
    int ok = 1;
    for (int32_t k = 0; k < t.n_nodes; k++) ok &= t.parent[k] < k;
    T_CHECK(ok, "parents before children");
    T_CHECK(spec_tree_add(&t, a, 0, &err) == ST_ERR_ARG, "empty draft refused");
    spec_tree_free(&t);
}

/* ---- with a model ---- */


/* Pack / unpack / accept on one step: candidates that follow the greedy continuation g
 * for exactly j tokens, then leave it. */
static void test_pack_accept(const model *m, const int32_t *prompt, int32_t np, const char *name) {
    enum { L = 6 };
    int32_t g[L + 2];
    if (!t_greedy_linear(m, prompt, np, L + 1, g)) {
        T_CHECK(0, "%s: linear greedy", name);
        return;
    }
    int32_t V = m->hp.n_vocab;
    for (int32_t j = 0; j <= L; j++) {
        forest *f = forest_init(np + 64, 0);
        model_ctx *c = t_new_ctx(m, np + 64);
        step_plan p;
        step_plan_init(&p);
        spec_tree t;
        spec_tree_init(&t);
        st_err err = {0};
        forest_id tip;
        forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
        /* candidate 0: g[0..j) then a wrong token; candidate 1: a wrong first token;
         * candidate 2: g[0..j) then the wrong token's neighbour (a shared prefix) */
        int32_t c0[L + 1], c1[2], c2[L + 1];
        memcpy(c0, g, sizeof(int32_t) * (size_t)j);
        memcpy(c2, g, sizeof(int32_t) * (size_t)j);
        c0[j] = (g[j] + 1) % V;
        c2[j] = (g[j] + 2) % V;
        c1[0] = (g[0] + 3) % V;
        c1[1] = g[1];
        spec_tree_add(&t, c0, j + 1, &err);
        spec_tree_add(&t, c1, 2, &err);
        spec_tree_add(&t, c2, j + 1, &err);
        T_CHECK(t.n_nodes == j + 4, "%s j=%d: shared prefix stored once (%d nodes)", name, j,
                t.n_nodes);
        st_code rc = spec_tree_pack(&t, f, tip, &err);
        if (!rc) rc = step_forest(f, &p, c, &err);
        T_CHECK(rc == ST_OK, "%s j=%d: step: %s", name, j, err.msg);
        /* unpack: candidate 0's predictions are the greedy tokens of its prefixes; the
         * first j+1 equal g (the rest follow the wrong token; checked linearly below) */
        int32_t pred[L + 2];
        int32_t np0 = spec_tree_unpack(&t, &p, tip, 0, pred);
        T_CHECK(np0 == j + 2, "%s j=%d: unpack length %d", name, j, np0);
        int ok = np0 == j + 2;
        for (int32_t k = 0; ok && k <= j; k++) ok &= pred[k] == g[k];
        int32_t *seq = malloc(sizeof(int32_t) * (size_t)(np + j + 2));
        memcpy(seq, prompt, sizeof(int32_t) * (size_t)np);
        memcpy(seq + np, c0, sizeof(int32_t) * (size_t)(j + 1));
        int32_t after_wrong;
        ok &= t_greedy_linear(m, seq, np + j + 1, 1, &after_wrong) && pred[j + 1] == after_wrong;
        free(seq);
        T_CHECK(ok, "%s j=%d: unpacked predictions equal linear greedy", name, j);
        int32_t acc[L + 8], n_acc = 0;
        forest_id last;
        rc = spec_tree_accept(&t, f, &p, tip, acc, &n_acc, &last, &err);
        ok = rc == ST_OK && n_acc == j + 1;
        for (int32_t k = 0; ok && k <= j; k++) ok &= acc[k] == g[k];
        T_CHECK(ok, "%s j=%d: accepted %d tokens (want %d + the next)", name, j, n_acc - 1, j);
        T_CHECK(forest_check(f, &err) == ST_OK, "%s j=%d: invariants: %s", name, j, err.msg);
        T_CHECK(forest_n_live(f) == np + j, "%s j=%d: rejected nodes pruned (%d live)", name, j,
                forest_n_live(f));
        T_CHECK(kv_alloc_used(forest_kv(f)) == np + j, "%s j=%d: their slots freed", name, j);
        const forest_node *ln = forest_get(f, last);
        T_CHECK(ln && ln->depth == np - 1 + j && ln->state == FOREST_COMPUTED,
                "%s j=%d: last accepted node at depth %d", name, j, ln ? ln->depth : -1);
        spec_tree_free(&t);
        step_plan_free(&p);
        model_ctx_free(c);
        forest_free(f);
    }
}

/* The lookahead window's layout under a tip. */
static void test_la_layout(void) {
    int32_t hist[] = {10, 11, 12, 13, 14};
    lookahead_params lp = {.w = 4, .n = 4, .g = 2, .seed = 3};
    st_err err = {0};
    lookahead *la = lookahead_init(&lp, hist, 5, &err);
    T_CHECK(la && lookahead_rows(la) == 3 + 4 * 2, "rows (W-1) + W(N-2)");
    forest *f = forest_init(64, 0);
    forest_id tip;
    forest_add_root(f, hist, NULL, 5, 0, &tip, &err);
    T_CHECK(lookahead_pack(la, f, tip, &err) == ST_OK, "pack: %s", err.msg);
    int ok = lookahead_guess(la, 0, 0) == 14;
    for (int32_t l = 0; l < 3; l++)
        for (int32_t i = 0; i < 4; i++) {
            if (l == 0 && i == 0) continue;
            const forest_node *nd = forest_get(f, lookahead_node(la, l, i));
            forest_id want_parent = l == 0 ? (i == 1 ? tip : lookahead_node(la, 0, i - 1))
                                           : (l == 1 && i == 0 ? tip : lookahead_node(la, l - 1, i));
            if (l == 1 && i > 0) want_parent = lookahead_node(la, 0, i);
            ok &= nd && nd->depth == 4 + i + l && nd->token == lookahead_guess(la, l, i) &&
                  forest_id_at(f, nd->parent) == want_parent && (nd->flags & FOREST_WANT_LOGITS);
        }
    T_CHECK(ok, "node (l, i) at depth tip + i + l under its level-0 column / lower level");
    T_CHECK(forest_n_live(f) == 5 + 11 && forest_check(f, &err) == ST_OK, "window nodes live");
    lookahead_cancel(la, f);
    T_CHECK(forest_n_live(f) == 5 && forest_check(f, &err) == ST_OK, "cancel prunes the window");
    lookahead_free(la);
    forest_free(f);
    lp.n = 1;
    T_CHECK(lookahead_init(&lp, hist, 5, &err) == NULL && err.code == ST_ERR_ARG, "N = 1 refused");
}

/* Greedy decoding of n tokens through the driver vs linear greedy's ref[0..n). */
static void spec_case(const model *m, const int32_t *prompt, int32_t np, int32_t n,
                      const int32_t *ref, const spec_params *sp, int32_t n_slots, const char *name,
                      const char *what) {
    int32_t *got = malloc(sizeof(int32_t) * (size_t)(n + 4200));
    forest *f = forest_init(n_slots, 0);
    model_ctx *c = t_new_ctx_rows(m, n_slots, 48);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id tip;
    forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
    spec *s = spec_init(sp, f, tip, &err);
    T_CHECK(s != NULL, "%s %s: init: %s", name, what, err.msg);
    int32_t made = 0, steps = 0;
    bool inv = true;
    while (s && made < n) {
        int32_t k = 0;
        st_code rc = spec_step(s, f, &p, c, got + made, &k, &err);
        if (rc) {
            T_CHECK(0, "%s %s: step %d: %s", name, what, steps, err.msg);
            break;
        }
        made += k;
        steps++;
        inv &= forest_check(f, &err) == ST_OK;
    }
    int ok = made >= n;
    int32_t first_diff = -1;
    for (int32_t i = 0; ok && i < n; i++)
        if (got[i] != ref[i]) {
            ok = 0;
            first_diff = i;
        }
    const spec_stats *st = s ? spec_get_stats(s) : NULL;
    T_CHECK(ok, "%s %s: %d greedy tokens identical (first difference at %d)", name, what, n,
            first_diff);
    T_CHECK(inv, "%s %s: invariants after every step: %s", name, what, err.msg);
    T_CHECK(st && st->emitted == made && st->steps == steps && st->accepted == made - steps,
            "%s %s: statistics add up", name, what);
    if (getenv("MD_SPEC_VERBOSE") && st)
        fprintf(stderr, "%s %s: %d tokens in %d steps (%lld draft rows, %lld window rows)\n",
                name, what, made, steps, (long long)st->draft_rows, (long long)st->la_rows);
    spec_free(s);
    step_plan_free(&p);
    model_ctx_free(c);
    forest_free(f);
    free(got);
}

/* A draft source that knows the answer: the next `len` greedy tokens (wrong = 1: each
 * token off by one, so nothing is ever accepted). */
typedef struct oracle {
    const int32_t *ref;
    int32_t np, n, len, wrong, calls;
} oracle;

static int32_t oracle_draft(void *ud, const int32_t *hist, int32_t n_hist, int32_t *out,
                            int32_t width, int32_t *lens, int32_t max) {
    oracle *o = ud;
    (void)hist;
    o->calls++;
    int32_t g = n_hist - o->np, k = 0;
    if (max < 1) return 0;
    for (; k < o->len && k < width && g + k < o->n; k++) out[k] = o->ref[g + k] + o->wrong;
    lens[0] = k;
    return k > 0;
}

/* The plug-in point for other draft sources, with an oracle: right drafts of L tokens make
 * every step emit L + 1 tokens; wrong ones cost steps but never change the output. */
static void test_ext_source(const model *m, const int32_t *prompt, int32_t np, const char *name) {
    enum { N = 30, L = 4 };
    int32_t ref[N];
    if (!t_greedy_linear(m, prompt, np, N, ref)) return;
    for (int wrong = 0; wrong <= 1; wrong++) {
        oracle o = {ref, np, N, L, wrong, 0};
        forest *f = forest_init(np + N + 64, 0);
        model_ctx *c = t_new_ctx(m, np + N + 64);
        step_plan p;
        step_plan_init(&p);
        st_err err = {0};
        forest_id tip;
        forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
        spec_params sp = spec_default_params();
        sp.draft_len = 0; /* the oracle only */
        sp.pool_n = 0;
        sp.adaptive = false;
        sp.logprobs = true;
        spec *s = spec_init(&sp, f, tip, &err);
        spec_set_draft_source(s, oracle_draft, &o);
        int32_t got[N + 8], made = 0, steps = 0;
        while (made < N) {
            int32_t k = 0;
            if (spec_step(s, f, &p, c, got + made, &k, &err)) break;
            made += k;
            steps++;
        }
        int same = made >= N && !memcmp(got, ref, sizeof ref);
        /* every generated node's log-probability equals linear decoding's log softmax */
        int32_t V = m->hp.n_vocab, lp_ok = 0, lp_n = 0;
        float *lg = malloc(sizeof(float) * (size_t)V), *ls = malloc(sizeof(float) * (size_t)V);
        model_ctx *lc = t_new_ctx(m, np + N + 1);
        bool lin = model_forward_linear(lc, prompt, np, 0, lg, &err) == ST_OK;
        forest_id id = forest_id_at(f, forest_node_at(f, forest_index(spec_tip(s)))->parent);
        int32_t depth_last = forest_get(f, id) ? forest_get(f, id)->depth : -1;
        for (int32_t i = 0; lin && i < N && np + i <= depth_last; i++) {
            sample_log_softmax(lg, V, ls);
            /* the node at depth np + i on the tip's path */
            forest_id at = id;
            while (forest_get(f, at) && forest_get(f, at)->depth > np + i)
                at = forest_id_at(f, forest_get(f, at)->parent);
            const forest_node *nd = forest_get(f, at);
            lp_n++;
            lp_ok += nd && nd->token == ref[i] && nd->logprob == ls[ref[i]];
            lin = model_forward_linear(lc, &ref[i], 1, np + i, lg, &err) == ST_OK;
        }
        T_CHECK(lp_n >= N - L - 1 && lp_ok == lp_n, "%s: %s oracle: %d of %d log-probabilities equal "
                "linear decoding's", name, wrong ? "wrong" : "right", lp_ok, lp_n);
        free(lg), free(ls);
        model_ctx_free(lc);
        int32_t want_steps = wrong ? N : (N + L) / (L + 1);
        T_CHECK(same && steps == want_steps && o.calls == steps,
                "%s: %s oracle drafts: %d steps for %d tokens (want %d), output %s", name,
                wrong ? "wrong" : "right", steps, made, want_steps, same ? "greedy's" : "DIFFERENT");
        spec_free(s);
        step_plan_free(&p);
        model_ctx_free(c);
        forest_free(f);
    }
}

/* The grid of settings every model runs. */
static void spec_grid(const model *m, const int32_t *prompt, int32_t np, int32_t n, const char *name) {
    int32_t *ref = malloc(sizeof(int32_t) * (size_t)n);
    if (!t_greedy_linear(m, prompt, np, n, ref)) {
        T_CHECK(0, "%s: linear greedy", name);
        free(ref);
        return;
    }
    struct { int32_t dl, nd, rows, w, nn, g; bool adapt; int32_t slots; const char *what; } cs[] = {
        {8, 4, 16, 0, 4, 4, true, 0, "lookup+pool adaptive"},
        {5, 2, 8, 0, 3, 4, false, 0, "lookup+pool fixed 5"},
        {1, 1, 1, 0, 0, 0, false, 0, "lookup 1 token"},
        {0, 0, 16, 2, 2, 1, true, 0, "lookahead 2,2,1"},
        {0, 0, 16, 3, 3, 2, true, 0, "lookahead 3,3,2 always"},
        {4, 2, 24, 5, 4, 4, true, 0, "lookahead 5,4,4 + lookup"},
        {0, 0, 32, 2, 6, 3, true, 0, "lookahead 2,6,3 always"},
        {8, 4, 16, 4, 3, 4, true, 12, "small cache cuts drafts"},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        spec_params sp = spec_default_params();
        sp.draft_len = cs[i].dl;
        sp.n_drafts = cs[i].nd;
        sp.max_rows = cs[i].rows;
        sp.adaptive = cs[i].adapt;
        sp.pool_n = cs[i].w ? 0 : cs[i].nn;
        sp.la.w = cs[i].w;
        sp.la.n = cs[i].nn;
        sp.la.g = cs[i].g;
        sp.la_adaptive = !strstr(cs[i].what, "always"); /* both: the window every step, or
                                                           only while it pays (skips move it) */
        int32_t slots = cs[i].slots ? np + n + cs[i].slots : np + n + 128;
        spec_case(m, prompt, np, n, ref, &sp, slots, name, cs[i].what);
    }
    free(ref);
}

static void run_random(mkmodel_params mp, const char *name) {
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "%s: %s", name, err.msg);
    if (!m) return;
    /* a repetitive prompt (lookup drafts find matches) and a varied one */
    int32_t rep[24], var[9];
    for (int32_t i = 0; i < 24; i++) rep[i] = 300 + (i % 5) * 7;
    for (int32_t i = 0; i < 9; i++) var[i] = 260 + (int32_t)((i * 97u + 13) % (uint32_t)(mp.n_vocab - 260));
    test_pack_accept(m, var, 9, name);
    test_ext_source(m, var, 9, name);
    spec_grid(m, rep, 24, 40, name);
    spec_grid(m, var, 9, 33, name);
    /* many prompts and lengths: 1..29 prompt tokens of a few symbols (so lookups match),
     * 1..40 generated tokens, including a single token (the first step alone) */
    uint64_t st = mp.seed * 77 + 5;
    for (int k = 0; k < 6; k++) {
        int32_t pr[32];
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        int32_t np = 1 + (int32_t)((st >> 33) % 29), ng = k == 0 ? 1 : 1 + (int32_t)((st >> 45) % 40);
        for (int32_t i = 0; i < np; i++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            pr[i] = 280 + (int32_t)((st >> 33) % 6) * 11;
        }
        char what[64];
        snprintf(what, sizeof what, "%s (prompt %d, %d tokens)", name, np, ng);
        spec_grid(m, pr, np, ng, what);
    }
    model_free(m);
}

static void run_text_model(const char *path, const char *name, const char *const *texts,
                           int n_texts, int32_t n_gen) {
    st_err err = {0};
    model *m = model_load(path, &err);
    T_CHECK(m != NULL, "%s: %s", name, err.msg);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(tk != NULL, "%s tokenizer: %s", name, err.msg);
    for (int i = 0; m && tk && i < n_texts; i++) {
        int32_t prompt[512];
        int32_t np = tok_encode(tk, texts[i], strlen(texts[i]), true, false, prompt, 512);
        if (np < 1 || np > 512) continue;
        if (i == 0) test_pack_accept(m, prompt, np, name);
        spec_grid(m, prompt, np, n_gen, name);
    }
    tok_free(tk);
    model_free(m);
}

int main(void) {
    test_pool();
    test_lookup();
    test_tree_dedup();
    test_la_layout();

    mkmodel_params mp = mkmodel_default_params();
    run_random(mp, "random F32");
    mp.wtype = DT_Q8_0;
    mp.n_embd = 128;
    mp.n_head = 4;
    mp.n_head_kv = 1;
    mp.seed = 7;
    run_random(mp, "random Q8_0 GQA 4");
    mp = mkmodel_default_params();
    mp.wtype = DT_Q4_K;
    mp.n_embd = 256;
    mp.n_ff = 512;
    mp.seed = 9;
    run_random(mp, "random Q4_K");
    /* Qwen3.5: verified drafts keep a recurrent state each; the accepted path grows on */
    mp = mkmodel_default_params();
    mp.arch = "qwen35", mp.n_layer = 4, mp.head_dim = 16, mp.full_attn_interval = 2;
    mp.ssm_k_heads = 1, mp.ssm_v_heads = 2, mp.ssm_state = 16, mp.seed = 11;
    run_random(mp, "random qwen35");

    static const char *const stories[] = {
        "Once upon a time, there was a little girl named Lily. She",
        "The cat sat on the mat. The dog sat on the mat. The cat",
        "Tom had a red ball. Tom had a red ball. Tom",
    };
    const char *sp = t_shared("models/stories260K.gguf");
    if (sp) run_text_model(sp, "stories260K", stories, 3, 48);
    else T_MISSING("stories260K fixture absent");

    static const char *const smol[] = {
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
        "The capital of France is Paris. The capital of Germany is",
    };
    const char *smol_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    FILE *fp = fopen(smol_path, "rb");
    if (fp) {
        fclose(fp);
        run_text_model(smol_path, "SmolLM2", smol, 2, 40);
    } else {
        T_MISSING("SmolLM2 absent (sh tools/fetch-model.sh)");
    }
    return t_done();
}
