/* test_ui_judge.c - :judge and :tot in the TUI's terms: the command lines parse, :judge
 * picks the bookmarked branches or else the leaves below the selection's fork point, and
 * ui_judge_start's runs end with a score for every branch, and through the worker every
 * judged branch keeps its score (the forest pane shows it) past later runs, on a random
 * tiny model. */
#include "t.h"

#include <math.h>
#include <stdlib.h>

#include "../ui/command.h"
#include "forest/step.h"
#include "../ui/forest_view.h"
#include "../ui/judge_job.h"
#include "../ui/worker.h"
#include "t_model.h"

#include <time.h>
#include <unistd.h>

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
    T_CHECK(ui_cmd_parse(":keep 3", &c, &err) == ST_OK && c.kind == UI_CMD_KEEP && c.job.kind == UI_JOB_KEEP &&
                c.job.u.keep.n == 3, ":keep N");
    T_CHECK(ui_cmd_parse(":keep", &c, &err) == ST_ERR_ARG && ui_cmd_parse(":keep 2 3", &c, &err) == ST_ERR_ARG,
            ":keep wants one number");
    T_CHECK(ui_cmd_parse(":sort score", &c, &err) == ST_OK && c.kind == UI_CMD_SORT && c.val == UI_SORT_SCORE &&
                ui_cmd_parse(":sort prob", &c, &err) == ST_OK && c.val == UI_SORT_PROB &&
                ui_cmd_parse(":sort made", &c, &err) == ST_OK && c.val == UI_SORT_NONE,
            ":sort score|prob|made");
    T_CHECK(ui_cmd_parse(":sort up", &c, &err) == ST_ERR_ARG && ui_cmd_parse(":sort", &c, &err) == ST_ERR_ARG,
            ":sort with a bad order");
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

/* Posts j and waits (at most 60 s) until the worker has said something and nothing runs;
 * false on a timeout. */
static bool run_job(ui_worker *w, ui_job j) {
    char msg[256];
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    for (time_t t0 = time(NULL); time(NULL) - t0 < 60; usleep(2000)) {
        ui_worker_lock(w);
        bool idle = ui_worker_message(w, msg, sizeof msg) != no && !ui_worker_busy(w);
        ui_worker_unlock(w);
        if (idle) return true;
    }
    fprintf(stderr, "still running after 60 s: %s\n", msg);
    return false;
}

/* How many of ids have a score the forest pane shows. */
static int32_t n_scored(ui_worker *w, const forest_id *ids, int32_t n) {
    int32_t k = 0;
    double v;
    ui_worker_lock(w);
    for (int32_t i = 0; i < n; i++) k += ui_worker_score_of(w, ids[i], &v) && !isnan(v);
    ui_worker_unlock(w);
    return k;
}

/* The n judged leaves under one fork: :sort score puts the best one's line first under
 * the fork; :keep 3 leaves the 3 best (and prunes 67 as one undo step: u puts all back). */
static void check_sort_keep(ui_worker *w, const forest_id *leaf, int32_t n) {
    double sc[128], v;
    int32_t best = 0, order[128];
    st_err err = {0};
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    for (int32_t i = 0; i < n; i++) ui_worker_score_of(w, leaf[i], &sc[i]), best = sc[i] > sc[best] ? i : best;
    double *keys = NULL;
    int32_t cap = 0, live = forest_n_live(f);
    forest_view fv;
    fv_init(&fv, false);
    bool ok = !ui_worker_sort_keys(w, UI_SORT_SCORE, &keys, &cap, &err) && (fv.key = keys, fv.n_key = cap, true) && !fv_rebuild(&fv, f, &err);
    int32_t first = -1; /* the first line nested under the fork */
    for (int32_t i = 0; ok && i < fv.n_lines && first < 0; i++)
        if (fv.lines[i].indent == 1) first = fv.lines[i].start;
    T_CHECK(ok && first == forest_index(leaf[best]), ":sort score: the best leaf (%d, %.3f) first, got index %d %s",
            (int)forest_index(leaf[best]), sc[best], (int)first, err.msg);
    fv_free(&fv);
    free(keys);
    ui_worker_unlock(w);
    char msg[256];
    ui_job keep = {.kind = UI_JOB_KEEP, .node = leaf[0], .u.keep.n = 3};
    T_CHECK(run_job(w, keep), ":keep 3 ran");
    ui_worker_lock(w);
    ui_worker_message(w, msg, sizeof msg);
    f = ui_worker_forest(w);
    for (int32_t i = 0; i < n; i++) order[i] = i;
    judge_rank(sc, order, n);
    int32_t alive = 0, top3 = 0;
    for (int32_t i = 0; i < n; i++) alive += forest_get(f, leaf[i]) != NULL;
    for (int32_t i = 0; i < 3; i++) top3 += forest_get(f, leaf[order[i]]) && ui_worker_score_of(w, leaf[order[i]], &v);
    T_CHECK(alive == 3 && top3 == 3 && strstr(msg, "kept the 3 best of 70 scored leaves: pruned 67 branches"),
            ":keep 3: %d alive, %d of the best 3 (%s)", alive, top3, msg);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_UNDO}), "undo ran");
    ui_worker_lock(w);
    ui_worker_message(w, msg, sizeof msg);
    T_CHECK(forest_n_live(ui_worker_forest(w)) == live && strstr(msg, "restored 67 nodes (67 branches)"),
            "one undo puts the 67 back: %d of %d nodes (%s)", forest_n_live(ui_worker_forest(w)), live, msg);
    ui_worker_unlock(w);
}

/* :judge through the worker on more branches than the old list held (64): every branch
 * keeps its score, and still has it after a later run (a grow elsewhere). */
static void check_worker_scores(model *m, tok *tk) {
    enum { NB = 70 };
    st_err err = {0};
    model_ctx *c = t_new_ctx(m, 2048);
    forest *f = forest_init(2048, 0);
    static const int32_t p[] = {1, 300, 317};
    forest_id at, leaf[NB], other;
    bool ok = c && f && !forest_add_root(f, p, NULL, 3, 0, &at, &err) &&
              !forest_add_root(f, p, NULL, 2, 0, &other, &err);
    for (int32_t i = 0; ok && i < NB; i++) {
        int32_t t = 400 + i;
        ok = !forest_append(f, at, &t, NULL, 1, &leaf[i], &err);
    }
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sample_default_params(), .budget = 2,
                           .model_name = "m", .backend = "cpu"};
    ui_worker *w = ok ? ui_worker_start(&wp, &err) : NULL;
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) {
        forest_free(f);
        model_ctx_free(c);
        return;
    }
    ui_job judge = ui_job_run(STRAT_JUDGE, leaf[0]);
    judge.text = "Good?"; /* a short judge: 70 of them fit the cache */
    T_CHECK(run_job(w, judge) && n_scored(w, leaf, NB) == NB,
            ":judge of %d branches: %d scored", NB, n_scored(w, leaf, NB));
    T_CHECK(run_job(w, ui_job_run(STRAT_GROW, other)) && n_scored(w, leaf, NB) == NB,
            "after a grow: %d of %d still scored", n_scored(w, leaf, NB), NB);
    check_sort_keep(w, leaf, NB);
    ui_worker_stop(w);
    model_ctx_free(c);
}

/* Waits (at most 60 s) until the worker's job line says want ("tot 1/3 paused"); false
 * on a timeout. */
static bool wait_job(ui_worker *w, const char *want) {
    ui_stats st;
    for (time_t t0 = time(NULL); time(NULL) - t0 < 60; usleep(2000)) {
        ui_worker_lock(w);
        ui_worker_stats(w, &st);
        ui_worker_unlock(w);
        if (!strcmp(st.job, want)) return true;
    }
    fprintf(stderr, "want '%s', the job line says '%s' after 60 s\n", want, st.job);
    return false;
}

/* The leaves below at (malloc'd, *n), under the lock. */
static forest_id *leaves_under(const forest *f, forest_id at, int32_t *n) {
    forest_id *out = malloc(sizeof *out * (size_t)forest_capacity(f));
    *n = 0;
    for (int32_t i = forest_dfs_first(f); out && i >= 0; i = forest_dfs_next(f, i)) {
        forest_id id = forest_id_at(f, i);
        if (id != at && forest_n_children(f, id) == 0 && forest_common_ancestor(f, id, at) == at) out[(*n)++] = id;
    }
    return out;
}

static forest_id parent_of(const forest *f, forest_id id) { return forest_id_at(f, forest_get(f, id)->parent); }

/* The tree a paused :tot shows: every leaf below at scored, none pending (the next level
 * not forked yet); the leaves not dimmed (into out, returned; -1 when one breaks the rule)
 * each a thought below one of the non-dimmed nodes of above (n_above 0: a child of at's
 * own chain), *n_dim the dimmed ones (the search's losers, flagged FOREST_DIMMED). */
static int32_t paused_leaves(ui_worker *w, forest_id at, const forest_id *above, int32_t n_above, forest_id *out,
                             int32_t *n_dim, const char *what) {
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    int32_t n, bad = 0, nk = 0;
    forest_id *lf = leaves_under(f, at, &n);
    double v;
    *n_dim = 0;
    for (int32_t i = 0; i < n; i++) {
        bool dim = forest_get(f, lf[i])->flags & FOREST_DIMMED, under = n_above == 0;
        for (forest_id up = parent_of(f, lf[i]); n_above == 0 && up != at; up = parent_of(f, up))
            under &= forest_n_children(f, up) == 1;
        for (int32_t k = 0; k < n_above; k++)
            under |= above[k] != lf[i] && forest_common_ancestor(f, lf[i], above[k]) == above[k];
        bad += (!dim && !under) || !ui_worker_score_of(w, lf[i], &v) || isnan(v);
        if (dim) ++*n_dim;
        else out[nk++] = lf[i];
    }
    int32_t pending = forest_n_pending(f);
    T_CHECK(lf && bad == 0 && pending == 0 && n > 0, "%s: %d leaves, %d not a scored thought of that level, %d pending",
            what, n, bad, pending);
    free(lf);
    ui_worker_unlock(w);
    return bad || pending ? -1 : nk;
}

/* Nodes flagged FOREST_DIMMED in the worker's forest. */
static int32_t n_dimmed(ui_worker *w) {
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) n += !!(forest_node_at(f, i)->flags & FOREST_DIMMED);
    ui_worker_unlock(w);
    return n;
}

/* Text typed under a dimmed loser while the run is paused is refused (the run would prune
 * it with the loser), and the forest stays as it was. */
static void check_no_text_under_loser(ui_worker *w) {
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    forest_id lost = FOREST_NONE;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i))
        if (forest_node_at(f, i)->flags & FOREST_DIMMED) lost = forest_id_at(f, i);
    int32_t before = forest_n_live(f);
    char msg[256];
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_job j = {.kind = UI_JOB_APPEND, .node = lost, .text = " and"};
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    for (time_t t0 = time(NULL); time(NULL) - t0 < 60; usleep(2000)) {
        ui_worker_lock(w);
        bool said = ui_worker_message(w, msg, sizeof msg) != no;
        ui_worker_unlock(w);
        if (said) break;
    }
    ui_worker_lock(w);
    T_CHECK(lost != FOREST_NONE && strstr(msg, "lost") && forest_n_live(ui_worker_forest(w)) == before,
            "text under a dimmed loser is refused: '%s', %d nodes (%d before)", msg,
            forest_n_live(ui_worker_forest(w)), before);
    ui_worker_unlock(w);
}

/* :tot K B D from node at, paused before the worker can step (both jobs queued under the
 * lock), so the pause lands before level 1 ends. */
static void start_paused(ui_worker *w, forest_id at, const char *line) {
    ui_cmd cmd;
    st_err err = {0};
    T_CHECK(ui_cmd_parse(line, &cmd, &err) == ST_OK, "%s parses: %s", line, err.msg);
    cmd.job.node = at;
    ui_job pause = {.kind = UI_JOB_PAUSE};
    ui_worker_lock(w);
    ui_worker_post(w, &cmd.job);
    ui_worker_post(w, &pause);
    ui_worker_unlock(w);
}

/* :tot 3 2 3 on stories260K, greedy, live, through worker w with the prompts at and at2:
 * p pauses at the end of level 1 (the forest holds level 1's thoughts, scored, the loser
 * dimmed, nothing of level 2), s steps exactly one level (level 2's thoughts under level
 * 1's kept ones), p resumes to the end, which prunes the dimmed losers. Then from at2, x
 * at level 1 keeps the tree as it is, its loser still dimmed, and n grows on from a kept
 * thought. */
static void tot_live_runs(ui_worker *w, forest_id at, forest_id at2) {
    int32_t nd;
    start_paused(w, at, ":tot 3 2 3");
    forest_id l1[64], l2[64];
    int32_t n1 = wait_job(w, "tot 1/3 paused") ? paused_leaves(w, at, NULL, 0, l1, &nd, "paused after level 1") : -1;
    T_CHECK(n1 == 2 && nd == 1, "level 1: 2 thoughts kept (%d), 1 dimmed (%d)", n1, nd);
    if (n1 > 0) check_no_text_under_loser(w);
    int32_t n2 = -1;
    if (n1 > 0) {
        ui_job step = ui_job_run(STRAT_STEPS, at);
        ui_worker_post(w, &step);
        n2 = wait_job(w, "tot 2/3 paused") ? paused_leaves(w, at, l1, n1, l2, &nd, "one level stepped") : -1;
        T_CHECK(n2 == 2 && nd == 1 + 4, "level 2: 2 thoughts kept under level 1's (%d), 1 + 4 dimmed (%d)", n2, nd);
    }
    if (n2 > 0) {
        T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_PAUSE}), "resumed to the end");
        ui_worker_lock(w);
        int32_t nl;
        forest_id *lf = leaves_under(ui_worker_forest(w), at, &nl);
        T_CHECK(nl == 2 && !ui_worker_busy(w), "after the run: %d leaves (want 2)", nl);
        free(lf);
        ui_worker_unlock(w);
        T_CHECK(n_dimmed(w) == 0, "after the run no node is dimmed: %d", n_dimmed(w));
    }
    /* x at a level boundary: the tree stays as it is, losers dimmed, and n grows on */
    start_paused(w, at2, ":tot 3 2 3");
    n1 = wait_job(w, "tot 1/3 paused") ? paused_leaves(w, at2, NULL, 0, l1, &nd, "second run paused") : -1;
    T_CHECK(n1 == 2 && nd == 1 && run_job(w, (ui_job){.kind = UI_JOB_CANCEL}), "second run: %d kept, %d dimmed", n1, nd);
    int32_t n1x = paused_leaves(w, at2, NULL, 0, l1, &nd, "after x");
    T_CHECK(n1x == 2 && nd == 1 && n_dimmed(w) > 0, "x keeps level 1: %d kept, %d dimmed", n1x, nd);
    if (n1x > 0) {
        T_CHECK(run_job(w, ui_job_run(STRAT_GROW, l1[0])), "n after x");
        ui_worker_lock(w);
        T_CHECK(forest_n_children(ui_worker_forest(w), l1[0]) == 1, "n grew on from a kept thought");
        ui_worker_unlock(w);
    }
}

/* The worker tot_live_runs drives, over stories260K and two prompts. */
static void check_tot_live(void) {
    model *m;
    tok *tk;
    if (!t_stories(&m, &tk)) return;
    st_err err = {0};
    model_ctx *c = t_new_ctx(m, 1024);
    forest *f = forest_init(1024, 0);
    int32_t n, n2p;
    int32_t *p = tok_encode_alloc(tk, "Once upon a time", 16, tok_add_bos(tk), false, &n, &err);
    int32_t *p2 = tok_encode_alloc(tk, "Mom said", 8, tok_add_bos(tk), false, &n2p, &err);
    forest_id at, at2;
    sample_params sp = sample_default_params();
    sp.temp = 0;
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = 8, .model_name = "m", .backend = "cpu"};
    ui_worker *w = p && p2 && c && f && !forest_add_root(f, p, NULL, n, 0, &at, &err) &&
                           !forest_add_root(f, p2, NULL, n2p, 0, &at2, &err)
                       ? ui_worker_start(&wp, &err)
                       : NULL;
    T_CHECK(w, "stories260K worker: %s", err.msg);
    free(p), free(p2);
    if (w) {
        tot_live_runs(w, at, at2);
        ui_worker_stop(w); /* with the forest */
    } else
        forest_free(f);
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

int main(void) {
    check_parse();
    check_tot_live();
    check_many();
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "random model: %s", err.msg);
    if (!m || !tk) return t_done();
    check_worker_scores(m, tk);
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
