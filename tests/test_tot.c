/* test_tot.c - tree of thoughts (engine/strategy/tot.c) on a random tiny model with greedy
 * growth: one level keeps exactly the b thoughts that the linear reference judges best,
 * with the same scores bit for bit (the thoughts themselves are the k best first tokens,
 * each continued greedily); a deeper search has the right shape after every level (b kept
 * leaves, each `budget` tokens deeper per level, nothing else left in the forest, the
 * pruned nodes' slots freed) and a fixed number of steps. */
#include "t.h"

#include <math.h>
#include <string.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "strategy/judge.h"
#include "strategy/strategy.h"
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

static strategy *tot_start(rig *r, int32_t d, strategy_env *env, st_err *err) {
    *env = (strategy_env){.f = r->f, .plan = &r->plan, .ctx = r->c, .tk = NULL}; /* no end of text */
    strategy_opts o = strategy_default_opts(STRAT_TOT);
    o.n_vocab = g_m->hp.n_vocab;
    o.from = r->from;
    o.sample.temp = 0;
    o.budget = LEN;
    o.u.tot.k = K, o.u.tot.b = B, o.u.tot.d = d;
    o.u.tot.prompt = &jp;
    return strategy_create(&o, env, err);
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
    while (s && !strategy_done(s)) {
        if (strategy_step(s, &env, &err)) break;
        steps++;
        strategy_progress pr;
        strategy_get_progress(s, &pr);
        if (pr.done == level) continue;
        level = pr.done; /* a level was judged: check the forest between levels */
        forest_id kept[8], leaves[64];
        int32_t nk = strategy_scores(s, kept, (double[8]){0}, 8), nl = forest_leaves(r.f, leaves, 64);
        /* after the judge, the next level's first tokens hang under the kept leaves */
        int32_t depth_ok = 0;
        for (int32_t i = 0; i < nk; i++)
            depth_ok += forest_get(r.f, kept[i])->depth == NP - 1 + level * LEN;
        bool last = level == d;
        int32_t want_leaves = last ? B : B * K;
        int32_t used = kv_alloc_used(forest_kv(r.f));
        if (nk == B && depth_ok == B && nl == want_leaves && used == path_nodes(r.f, kept, nk) &&
            forest_n_live(r.f) == used + (last ? 0 : B * K) && forest_check(r.f, &err) == ST_OK)
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

int main(void) {
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (!m) return t_done();
    g_m = m;
    check_one_level();
    check_shape(3);
    model_free(m);
    return t_done();
}
