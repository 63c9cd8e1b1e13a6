/* test_ui_judge.c - :judge and :tot in the TUI's terms: the command lines parse, :judge
 * picks the bookmarked branches or else the leaves below the selection's fork point, and
 * ui_judge_start's runs end with a score for every branch (the scores the forest pane
 * shows), on a random tiny model. */
#include "t.h"

#include <math.h>
#include <stdlib.h>

#include "../ui/command.h"
#include "forest/step.h"
#include "../ui/judge_job.h"
#include "t_model.h"

static void check_parse(void) {
    ui_cmd c;
    st_err err = {0};
    const strategy_opts *o = &c.job.u.run.opts;
    T_CHECK(ui_cmd_parse(":tot 3 2 4", &c, &err) == ST_OK && c.kind == UI_CMD_TOT && o->u.tot.k == 3 &&
                o->u.tot.b == 2 && o->u.tot.d == 4 && o->budget == 0, ":tot K B D");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 16", &c, &err) == ST_OK && o->budget == 16, ":tot K B D TOKENS");
    T_CHECK(ui_cmd_parse(":tot 3 2", &c, &err) == ST_ERR_ARG && strstr(err.msg, ":tot K B D"), ":tot K B: %s", err.msg);
    T_CHECK(ui_cmd_parse(":tot 3 2 4", &c, &err) == ST_OK && !o->u.tot.dfs && isinf(o->u.tot.threshold), ":tot is bfs");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 dfs", &c, &err) == ST_OK && o->u.tot.dfs && o->budget == 0 &&
                isinf(o->u.tot.threshold), ":tot K B D dfs");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 16 dfs -0.5", &c, &err) == ST_OK && o->u.tot.dfs && o->budget == 16 &&
                o->u.tot.threshold == -0.5, ":tot K B D TOKENS dfs MIN");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 bfs", &c, &err) == ST_OK && !o->u.tot.dfs, ":tot K B D bfs");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 bfs -0.5", &c, &err) == ST_ERR_ARG, ":tot bfs takes no threshold");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 sideways", &c, &err) == ST_ERR_ARG, ":tot with a bad mode");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 dfs x", &c, &err) == ST_ERR_ARG, ":tot with a bad threshold");
    T_CHECK(ui_cmd_parse(":tot 3 2 4 8 9", &c, &err) == ST_ERR_ARG, ":tot with five numbers");
    T_CHECK(ui_cmd_parse(":judge", &c, &err) == ST_OK && c.kind == UI_CMD_JUDGE && !c.text[0], ":judge alone");
    T_CHECK(ui_cmd_parse(":judge Is it kind?", &c, &err) == ST_OK && !strcmp(c.text, "Is it kind?"), ":judge QUESTION");
}

/* More branches than the old fixed arrays held (64 judged of 4096 leaves looked at): every
 * leaf below the fork is picked, in order, none dropped. */
static void check_many(void) {
    enum { N = 5000 };
    st_err err = {0};
    forest *f = forest_init(N + 64, 0);
    static const int32_t p[] = {1, 300};
    forest_id at, other, first = FOREST_NONE, last = FOREST_NONE;
    bool ok = f && !forest_add_root(f, p, NULL, 2, 0, &at, &err) && !forest_add_root(f, p, NULL, 2, 0, &other, &err);
    for (int32_t i = 0; ok && i < N; i++) {
        int32_t t = 3 + i % 400;
        ok = !forest_append(f, at, &t, NULL, 1, &last, &err);
        if (i == 0) first = last;
    }
    int32_t n = 0;
    bool marked = true;
    forest_id *br = ok ? ui_judge_branches(f, last, &n, &marked, &err) : NULL;
    T_CHECK(br && n == N && !marked && br[0] == first && br[N - 1] == last,
            "%d leaves under one fork: %d picked (%s)", N, n, err.msg);
    free(br);
    forest_free(f);
}

int main(void) {
    check_parse();
    check_many();
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "random model: %s", err.msg);
    if (!m || !tk) return t_done();
    model_ctx *c = t_new_ctx(m, 512);
    forest *f = forest_init(512, 0);
    step_plan plan;
    step_plan_init(&plan);
    static const int32_t p[] = {1, 300, 317, 331}, a[] = {400, 401}, b[] = {410}, cc[] = {420, 421, 422};
    forest_id at, la, lb, lc, mid;
    forest_add_root(f, p, NULL, 4, 0, &at, &err);
    forest_append(f, at, a, NULL, 2, &la, &err);
    forest_append(f, at, b, NULL, 1, &lb, &err);
    forest_append(f, at, cc, NULL, 3, &lc, &err);
    mid = forest_id_at(f, forest_get(f, lc)->parent);
    bool marked;
    int32_t n;
    forest_id *br = ui_judge_branches(f, mid, &n, &marked, &err);
    T_CHECK(br && n == 3 && !marked && br[0] == la && br[1] == lb && br[2] == lc, "the selection's siblings: %d", n);
    free(br);
    forest_set_flags(f, la, FOREST_BOOKMARK, 0);
    forest_set_flags(f, lc, FOREST_BOOKMARK, 0);
    br = ui_judge_branches(f, mid, &n, &marked, &err);
    T_CHECK(br && n == 2 && marked && br[0] == la && br[1] == lc, "the bookmarked branches: %d", n);
    free(br);

    ui_chat ch = {CHAT_NONE, NULL};
    ui_judge_env je = {.tk = tk, .chat = &ch};
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .tk = tk};
    char note[160];
    for (int tot = 0; tot < 2; tot++) {
        /* the options as the worker completes a :judge or :tot 2 2 2 job (budget 3) */
        strategy_opts o = strategy_default_opts(tot ? STRAT_TOT : STRAT_JUDGE);
        o.from = tot ? la : mid, o.sample = sample_default_params(), o.n_vocab = m->hp.n_vocab, o.budget = 3;
        if (tot) o.u.tot.k = o.u.tot.b = o.u.tot.d = 2;
        strategy *s = ui_judge_start(&env, &je, &o, "", note, sizeof note, &err);
        int32_t steps = 0;
        while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) steps++;
        forest_id ids[8];
        double sc[8];
        int32_t ns = s ? strategy_scores(s, ids, sc, 8) : 0, live = 0;
        for (int32_t i = 0; i < ns; i++) live += forest_get(f, ids[i]) && !isnan(sc[i]);
        T_CHECK(s && strategy_done(s) && ns == 2 && live == 2, "%s: %d scored branches in %d steps (%s) %s",
                tot ? ":tot 2 2 2" : ":judge", ns, steps, note, err.msg);
        strategy_free(s);
    }
    T_CHECK(forest_check(f, &err) == ST_OK && forest_n_pending(f) == 0, "the forest is sound after both %s", err.msg);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
    return t_done();
}
