/* test_tot.c - tree of thoughts (engine/strategy/tot.c) on a random tiny model with greedy
 * growth: one level keeps exactly the b thoughts that the linear reference judges best,
 * with the same scores bit for bit (the thoughts themselves are the k best first tokens,
 * each continued greedily); a deeper search has the right shape after every level (b kept
 * leaves, each `budget` tokens deeper per level, nothing else left in the forest, the
 * pruned nodes' slots freed) and a fixed number of steps. On stories260K, greedy, the
 * depth-first search expands nodes in the order its rule gives (replayed here from its
 * trace), backtracks where a threshold leaves a dead end, and answers or gives up as the
 * rule says. */
#include "t.h"

#include <math.h>
#include <string.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "strategy/judge.h"
#include "strategy/strategy.h"
#include "strategy/tot.h"
#include "t_model.h"

#define SLOTS 512
#define K 3
#define B 2
#define LEN 4 /* tokens per thought */

static const model *g_m;
static const int32_t prompt[] = {1, 300, 317, 331, 300, 317, 345};
#define NP ((int32_t)(sizeof prompt / sizeof prompt[0]))
static int32_t q[] = {280, 290, 300, 317, 299}, yes[] = {350}, no[] = {352};
static const judge_prompt jp = {q, 5, yes, 1, no, 1};

typedef struct rig {
    model_ctx *c;
    forest *f;
    step_plan plan;
    forest_id from;
} rig;

static bool rig_init(rig *r) {
    st_err err = {0};
    r->c = t_new_ctx(g_m, SLOTS);
    r->f = forest_init(SLOTS, 0);
    step_plan_init(&r->plan);
    return r->c && r->f && !forest_add_root(r->f, prompt, NULL, NP, 0, &r->from, &err);
}

static void rig_free(rig *r) {
    step_plan_free(&r->plan);
    forest_free(r->f);
    model_ctx_free(r->c);
}

static strategy *tot_start_dfs(rig *r, int32_t d, bool dfs, strategy_env *env, st_err *err) {
    *env = (strategy_env){.f = r->f, .plan = &r->plan, .ctx = r->c, .tk = NULL}; /* no end of text */
    strategy_opts o = strategy_default_opts(STRAT_TOT);
    o.n_vocab = g_m->hp.n_vocab;
    o.from = r->from;
    o.sample.temp = 0;
    o.budget = LEN;
    o.u.tot.k = K, o.u.tot.b = B, o.u.tot.d = d;
    o.u.tot.prompt = &jp;
    o.u.tot.dfs = dfs, o.u.tot.threshold = -INFINITY;
    return strategy_create(&o, env, err);
}

static strategy *tot_start(rig *r, int32_t d, strategy_env *env, st_err *err) {
    return tot_start_dfs(r, d, false, env, err);
}

/* The judge's score of seq[0..n) from linear decoding. */
static double ref_score(const int32_t *seq, int32_t n) {
    int32_t all[64], V = g_m->hp.n_vocab;
    memcpy(all, seq, sizeof(int32_t) * (size_t)n);
    memcpy(all + n, q, sizeof q);
    model_ctx *c = t_new_ctx(g_m, n + 8);
    float *lg = malloc(sizeof(float) * (size_t)V), *lp = malloc(sizeof(float) * (size_t)V);
    double s = NAN;
    if (c && lg && lp && t_linear(c, all, n + 5, 0, lg) == ST_OK) {
        sample_log_softmax(lg, V, lp);
        s = lp[yes[0]];
        s -= lp[no[0]];
    }
    free(lg), free(lp);
    model_ctx_free(c);
    return s;
}

/* One level: the reference thoughts (the K best first tokens, each continued greedily),
 * their linear scores, and the B best kept. */
static void check_one_level(void) {
    int32_t V = g_m->hp.n_vocab, th[K][NP + LEN];
    double want[K];
    float *lg = malloc(sizeof(float) * (size_t)V);
    model_ctx *c = t_new_ctx(g_m, NP + 1);
    bool ok = lg && c && t_linear(c, prompt, NP, 0, lg) == ST_OK;
    for (int32_t i = 0; ok && i < K; i++) {
        memcpy(th[i], prompt, sizeof prompt);
        th[i][NP] = sample_argmax(lg, V);
        lg[th[i][NP]] = -INFINITY;
        ok = t_greedy_linear(g_m, th[i], NP + 1, LEN - 1, th[i] + NP + 1);
        want[i] = ref_score(th[i], NP + LEN);
    }
    model_ctx_free(c);
    free(lg);
    T_CHECK(ok, "reference thoughts");
    int32_t order[K] = {0, 1, 2};
    judge_rank(want, order, K);

    rig r;
    strategy_env env;
    st_err err = {0};
    strategy *s = rig_init(&r) ? tot_start(&r, 1, &env, &err) : NULL;
    int32_t steps = 0;
    while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) steps++;
    T_CHECK(s && strategy_done(s) && steps == 1 + (LEN - 1) + 1, "one level: %d steps (start, grow, judge) %s", steps,
            err.msg);
    int32_t n = s ? strategy_n_results(s) : 0, match = 0;
    for (int32_t i = 0; i < n && i < B; i++) {
        strategy_result res;
        strategy_result_at(s, r.f, i, &res);
        int32_t path[64];
        int32_t len = forest_path(r.f, res.leaf, path, 64);
        const int32_t *w = th[order[i]];
        if (len == NP + LEN && !memcmp(path, w, sizeof(int32_t) * (size_t)len) &&
            !memcmp(&res.score, &want[order[i]], sizeof(double)))
            match++;
    }
    T_CHECK(n == B && match == B, "one level keeps the %d best by the linear judge, same scores (%d of %d)", B,
            match, n);
    forest_id leaves[8];
    T_CHECK(forest_leaves(r.f, leaves, 8) == B && kv_alloc_used(forest_kv(r.f)) == NP + B * LEN &&
                forest_n_pending(r.f) == 0,
            "one level: the loser pruned, its slots freed (%d slots used)", kv_alloc_used(forest_kv(r.f)));
    strategy_free(s);
    rig_free(&r);
}

/* The slots a set of leaves needs: the distinct nodes on their paths. */
static int32_t path_nodes(const forest *f, const forest_id *leaves, int32_t n) {
    static uint8_t seen[SLOTS * 4];
    memset(seen, 0, sizeof seen);
    int32_t count = 0;
    for (int32_t i = 0; i < n; i++)
        for (int32_t at = forest_index(leaves[i]); at >= 0; at = forest_node_at(f, at)->parent)
            if (!seen[at]) seen[at] = 1, count++;
    return count;
}

static void check_shape(int32_t d) {
    rig r;
    strategy_env env;
    st_err err = {0};
    strategy *s = rig_init(&r) ? tot_start(&r, d, &env, &err) : NULL;
    int32_t steps = 0, level = 0, good = 0;
    if (s) { /* before a level is judged there is no best score to show (it read "best +nan") */
        strategy_progress pr;
        strategy_get_progress(s, &pr);
        T_CHECK(!strstr(pr.text, "nan") && !strstr(pr.text, "best"), "level 0's progress: '%s'", pr.text);
    }
    while (s && !strategy_done(s)) {
        if (strategy_step(s, &env, &err)) break;
        steps++;
        strategy_progress pr;
        strategy_get_progress(s, &pr);
        if (pr.done == level) continue;
        level = pr.done; /* a level was judged: check the forest between levels */
        forest_id kept[8], leaves[64];
        int32_t nk = strategy_scores(s, kept, (double[8]){0}, 8), nl = forest_leaves(r.f, leaves, 64);
        /* between levels the kept leaves alone: the next level is forked by the next step */
        int32_t depth_ok = 0;
        for (int32_t i = 0; i < nk; i++)
            depth_ok += forest_get(r.f, kept[i])->depth == NP - 1 + level * LEN;
        int32_t want_leaves = B;
        int32_t used = kv_alloc_used(forest_kv(r.f));
        if (nk == B && depth_ok == B && nl == want_leaves && used == path_nodes(r.f, kept, nk) &&
            forest_n_live(r.f) == used && forest_check(r.f, &err) == ST_OK)
            good++;
        else
            fprintf(stderr, "  level %d: %d kept (%d at depth), %d leaves, %d slots used, %d on kept paths, %d live\n",
                    level, nk, depth_ok, nl, used, path_nodes(r.f, kept, nk), forest_n_live(r.f));
    }
    T_CHECK(s && strategy_done(s) && level == d && good == d,
            "depth %d: %d of %d levels with %d kept leaves, nothing else left, pruned slots freed %s", d, good, level,
            B, err.msg);
    T_CHECK(steps == 1 + d * LEN, "depth %d: %d steps (1 + %d per level: %d grow, 1 judge)", d, steps, LEN, LEN - 1);
    T_CHECK(s && strategy_n_results(s) == B, "depth %d: %d results", d, s ? strategy_n_results(s) : -1);
    strategy_free(s);
    rig_free(&r);
}

/* ---- depth-first on stories260K, greedy ---- */

typedef struct sim_node {
    forest_id leaf;
    int32_t level;
} sim_node;

/* Runs a depth-first search (k 3, b 2, d 3, 8 tokens per thought, sentence ends) with the
 * threshold, one step at a time, and after every judge step checks the new expansion
 * against the rule replayed here on a stack of its own: the node expanded is the top of
 * that stack, its children come best first, the kept ones are the best b at or above the
 * threshold (still in the forest), the others are gone, a node left without children is
 * gone, and the kept ones go on the stack best on top. Returns the backtracks seen (an
 * expansion of a node that is not a child of the one before). */
static int32_t check_dfs(const model *m, const tok *tk, const char *text, double thr, bool *answered,
                         const char *what) {
    enum { DK = 3, DB = 2, DD = 3 };
    static const char *const sentence[] = {".", "!", "?", "\n"};
    st_err err = {0};
    model_ctx *c = t_new_ctx(m, 1024);
    forest *f = forest_init(1024, 0);
    step_plan plan;
    step_plan_init(&plan);
    judge_prompt j = {0};
    int32_t pt[32];
    int32_t np = tok_encode(tk, text, strlen(text), true, false, pt, 32);
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .tk = tk};
    strategy_opts o = strategy_default_opts(STRAT_TOT);
    o.n_vocab = m->hp.n_vocab, o.sample.temp = 0, o.budget = 8, o.stops = sentence, o.n_stops = 4;
    o.u.tot.k = DK, o.u.tot.b = DB, o.u.tot.d = DD, o.u.tot.dfs = true, o.u.tot.threshold = thr;
    o.u.tot.prompt = &j;
    strategy *s = NULL;
    if (c && f && !forest_add_root(f, pt, NULL, np, 0, &o.from, &err) &&
        !judge_tokens(tk, CHAT_NONE, NULL, NULL, NULL, NULL, &j, &err))
        s = strategy_create(&o, &env, &err);
    T_CHECK(s != NULL, "%s: created: %s", what, err.msg);
    sim_node sim[64] = {{o.from, 0}};
    int32_t n_sim = 1, seen = 0, bad = 0, backtracks = 0;
    int32_t last_level = -1;
    while (s && !strategy_done(s) && !bad) {
        if (strategy_step(s, &env, &err)) {
            bad = 1;
            break;
        }
        int32_t nv;
        const tot_visit *v = tot_visits(strategy_tot(s), &nv);
        const tot_child *kid = tot_children(strategy_tot(s));
        for (; seen < nv && !bad; seen++) {
            const tot_visit *x = &v[seen];
            sim_node top = n_sim > 0 ? sim[--n_sim] : (sim_node){FOREST_NONE, -1};
            if (x->node != top.leaf || x->level != top.level || top.level >= DD) bad = 2;
            backtracks += seen > 0 && x->level <= last_level; /* not a child of the one before */
            last_level = x->level;
            int32_t kept = 0;
            for (int32_t i = 0; i < x->n && !bad; i++) {
                const tot_child *ch = &kid[x->first + i];
                bool want = kept < DB && ch->score >= thr;
                if (ch->kept != want || (i > 0 && ch->score > kid[x->first + i - 1].score)) bad = 3;
                if ((forest_get(f, ch->leaf) != NULL) != want) bad = 4;
                kept += want;
            }
            if (kept == 0 && x->level > 0 && forest_get(f, x->node)) bad = 5; /* a dead end is pruned */
            for (int32_t i = kept - 1; i >= 0 && n_sim < 64; i--) sim[n_sim++] = (sim_node){kid[x->first + i].leaf, x->level + 1};
            if (bad) fprintf(stderr, "  %s: expansion %d breaks the rule (%d)\n", what, (int)seen, bad);
        }
    }
    T_CHECK(s && strategy_done(s) && !bad && seen >= 1 && seen <= 1 + (DD - 1) * DB,
            "%s: %d expansions follow the depth-first rule (%d) %s", what, (int)seen, bad, err.msg);
    /* the end: the top of the stack is the answer when it is d deep, else there is none
     * (the stack ran empty, or the expansions ran out) */
    forest_id ans = s ? tot_answer(strategy_tot(s)) : FOREST_NONE;
    bool at_depth = n_sim > 0 && sim[n_sim - 1].level == DD;
    strategy_result r = {0};
    if (s && strategy_n_results(s) > 0) strategy_result_at(s, f, 0, &r);
    T_CHECK(at_depth ? ans == sim[n_sim - 1].leaf && r.leaf == ans && forest_get(f, ans)->depth > 0
                     : ans == FOREST_NONE && (n_sim == 0 || seen == 1 + (DD - 1) * DB),
            "%s: the answer is the first node %d thoughts deep (%s)", what, DD, at_depth ? "reached" : "none");
    T_CHECK(forest_check(f, &err) == ST_OK, "%s: forest sound %s", what, err.msg);
    *answered = at_depth;
    strategy_free(s);
    judge_tokens_free(&j);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    return backtracks;
}

/* One breadth-first run (k 4, b 1, d 4, 24 tokens per thought, lines) on a cache of slots,
 * losers dimmed or not: true when it ran to the end; its results' paths hashed with their
 * scores into *sum, its steps, and the most slots used between two steps. */
static bool run_bfs(const model *m, const tok *tk, int32_t slots, bool dim, uint64_t *sum, int32_t *steps,
                    int32_t *peak) {
    enum { DK = 4, DB = 1, DD = 4, DLEN = 24 };
    static const char *const line[] = {"\n"};
    st_err err = {0};
    model_ctx *c = t_new_ctx(m, 1024);
    forest *f = forest_init(slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    judge_prompt j = {0};
    int32_t pt[32], np = tok_encode(tk, "Once upon a time", 16, true, false, pt, 32);
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .tk = tk};
    strategy_opts o = strategy_default_opts(STRAT_TOT);
    o.n_vocab = m->hp.n_vocab, o.sample.temp = 0, o.budget = DLEN, o.stops = line, o.n_stops = 1;
    o.u.tot.k = DK, o.u.tot.b = DB, o.u.tot.d = DD, o.u.tot.dim = dim, o.u.tot.prompt = &j;
    strategy *s = NULL;
    if (c && f && !forest_add_root(f, pt, NULL, np, 0, &o.from, &err) &&
        !judge_tokens(tk, CHAT_NONE, NULL, NULL, NULL, NULL, &j, &err))
        s = strategy_create(&o, &env, &err);
    *steps = *peak = 0;
    while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) {
        ++*steps;
        int32_t used = kv_alloc_used(forest_kv(f));
        if (used > *peak) *peak = used;
    }
    bool done = s && strategy_done(s);
    *sum = 14695981039346656037ull;
    for (int32_t i = 0; done && i < strategy_n_results(s); i++) {
        strategy_result r;
        strategy_result_at(s, f, i, &r);
        int32_t path[256], n = forest_path(f, r.leaf, path, 256);
        for (int32_t k = 0; k < n; k++) *sum = (*sum ^ (uint32_t)path[k]) * 1099511628211ull;
        uint64_t b;
        memcpy(&b, &r.score, sizeof b);
        *sum = (*sum ^ b) * 1099511628211ull;
    }
    strategy_free(s);
    judge_tokens_free(&j);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    return done;
}

/* Dimmed losers change nothing but when they go: the same results, scores bitwise, and
 * steps as pruning at once; on the smallest cache the undimmed run fits, the dimmed run
 * (which would need more) prunes its losers when the cache fills and ends the same. */
static void check_dim(const model *m, const tok *tk) {
    uint64_t h0, h1, h2;
    int32_t s0, s1, s2, p0, p1, p2;
    bool ok0 = run_bfs(m, tk, 1024, false, &h0, &s0, &p0), ok1 = run_bfs(m, tk, 1024, true, &h1, &s1, &p1);
    T_CHECK(ok0 && ok1 && h0 == h1 && s0 == s1 && p1 > p0, "dim: same results and %d steps, %d slots at most (%d undimmed)",
            s1, p1, p0);
    int32_t lo = 16, hi = 1024; /* the smallest cache the undimmed run fits */
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (run_bfs(m, tk, mid, false, &h2, &s2, &p2)) hi = mid;
        else lo = mid + 1;
    }
    bool ok2 = run_bfs(m, tk, lo, true, &h2, &s2, &p2);
    T_CHECK(ok2 && h2 == h0 && s2 == s0 && lo < p1, "dim on %d slots (it would use %d): %s, same results %d, %d steps",
            lo, p1, ok2 ? "ran" : "stopped", h2 == h0, s2);
}

static void check_dfs_stories(void) {
    model *m;
    tok *tk;
    if (t_stories(&m, &tk)) {
        /* no threshold: straight down the best child to depth d */
        bool ans = false;
        int32_t bt = check_dfs(m, tk, "Mom said", -INFINITY, &ans, "dfs, no threshold");
        T_CHECK(bt == 0 && ans, "no threshold: %d backtracks, answer %d", bt, ans);
        /* level 3 under the best level-2 node scores -0.795 at best: a dead end; the search
         * backtracks to the other level-2 node (-0.653), whose best child (-0.590) answers */
        bt = check_dfs(m, tk, "Mom said", -0.75, &ans, "dfs, threshold -0.75");
        T_CHECK(bt == 1 && ans, "threshold -0.75: %d backtracks (want 1), answer %d", bt, ans);
        /* a dead end at level 3, the backtrack to level 2 another: the stack runs empty */
        bt = check_dfs(m, tk, "Tom and Sue went to the park", -0.4, &ans, "dfs, threshold -0.4");
        T_CHECK(bt == 1 && !ans, "threshold -0.4: %d backtracks (want 1), answer %d (want none)", bt, ans);
        check_dim(m, tk);
    }
    tok_free(tk);
    model_free(m);
}

/* Pruning during a run, as the TUI's d does: after the first grow step, n_cut of the
 * level's K thoughts are pruned whole (their first node) and the search told. The run
 * ends cleanly; every result is a live thought, none below a pruned one; with the whole
 * level cut nothing is left to answer. */
static void check_prune(int32_t n_cut, bool dfs) {
    rig r;
    strategy_env env;
    st_err err = {0};
    strategy *s = rig_init(&r) ? tot_start_dfs(&r, 2, dfs, &env, &err) : NULL;
    int32_t steps = 0, cut = 0;
    st_code rc = s ? ST_OK : ST_ERR_ARG;
    while (!rc && !strategy_done(s) && steps++ < 100) {
        rc = strategy_step(s, &env, &err);
        forest_id run[K];
        int32_t n = steps == 2 && !rc ? strategy_running(s, run, K) : 0;
        for (int32_t i = 0; i < n && cut < n_cut; i++, cut++) {
            forest_id top = run[i];
            while (forest_get(r.f, top)->parent != forest_index(r.from))
                top = forest_id_at(r.f, forest_get(r.f, top)->parent);
            T_CHECK(forest_prune(r.f, top, &err) == ST_OK, "prune thought %d: %s", i, err.msg);
        }
        if (n > 0) strategy_forget(s, r.f);
    }
    bool live = s && strategy_done(s);
    int32_t n_res = s ? strategy_n_results(s) : 0, with_tokens = 0;
    for (int32_t i = 0; live && i < n_res; i++) {
        strategy_result res;
        strategy_result_at(s, r.f, i, &res);
        live = res.leaf == FOREST_NONE || forest_get(r.f, res.leaf);
        with_tokens += res.n_tokens > 0;
    }
    T_CHECK(!rc && cut == n_cut && live && forest_check(r.f, &err) == ST_OK,
            "%s, %d of %d thoughts pruned after step 2: ran to the end (%d steps), results live: %s",
            dfs ? "dfs" : "bfs", (int)cut, K, (int)steps, err.msg);
    bool want = n_cut < K ? with_tokens > 0 : with_tokens == 0;
    T_CHECK(want, "%s, %d of %d cut: %d results with tokens", dfs ? "dfs" : "bfs", (int)n_cut, K, (int)with_tokens);
    strategy_free(s);
    rig_free(&r);
}

/* b and d so large that 1 + (d - 1) b expansions would overflow are refused, by name. */
static void check_too_deep(void) {
    rig r;
    strategy_env env;
    st_err err = {0};
    strategy *s = rig_init(&r) ? tot_start(&r, 1000000, &env, &err) : NULL;
    T_CHECK(!s && err.code == ST_ERR_ARG && strstr(err.msg, "d 1000000"), "depth 1e6 refused: '%s'", err.msg);
    strategy_free(s);
    rig_free(&r);
}

int main(void) {
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (!m) return t_done();
    g_m = m;
    check_one_level();
    check_shape(3);
    check_too_deep();
    check_prune(1, false);
    check_prune(K, false);
    check_prune(1, true);
    check_prune(K, true);
    model_free(m);
    check_dfs_stories();
    return t_done();
}
