/* test_strategy.c - every registered strategy driven through the one interface
 * (engine/strategy/strategy.h) gives what the strategy's own calls give: the same tokens
 * per branch, chain, hypothesis, note or answer, the same end states and scores, and the
 * tokens the emit callback saw, on a random tiny model (engine/convert/mkmodel.h). Also:
 * the registry (names, kinds, defaults) and the refusals of bad options. */
#include "t.h"

#include "forest/forest.h"
#include "forest/prune.h"
#include "forest/step.h"
#include "strategy/cot.h"
#include "strategy/grow.h"
#include "strategy/margins.h"
#include "strategy/merge.h"
#include "strategy/strategy.h"
#include "tok/tok.h"
#include "t_model.h"

#define MAXR 8    /* results compared at most */
#define MAXT 96   /* tokens per result at most */
#define SLOTS 1024

typedef struct run_out {
    int32_t n;
    int32_t len[MAXR];
    int32_t tok[MAXR][MAXT];
    int end[MAXR];
    double score[MAXR];
    int32_t emitted[MAXR + 1]; /* tokens the emit callback saw, per branch */
    int32_t gone[MAXT];        /* table_run_pruning: the pruned leaf's tokens after the start */
    int32_t n_gone;
    bool ok;
} run_out;

/* One run's engine: a fresh context, forest and plan. */
typedef struct rig {
    model_ctx *c;
    forest *f;
    step_plan plan;
    const tok *tk;
    int32_t V;
} rig;

static const model *g_m;
static const tok *g_tk;

static bool rig_init(rig *r) {
    r->c = t_new_ctx(g_m, SLOTS);
    r->f = forest_init(SLOTS, 0);
    step_plan_init(&r->plan);
    r->tk = g_tk;
    r->V = g_m->hp.n_vocab;
    return r->c && r->f;
}

static void rig_free(rig *r) {
    step_plan_free(&r->plan);
    forest_free(r->f);
    model_ctx_free(r->c);
}

static const int32_t prompt[] = {1, 300, 317, 331, 300, 317, 345, 280, 290, 300, 317};
#define NP ((int32_t)(sizeof prompt / sizeof prompt[0]))

static forest_id add_prompt(rig *r, const int32_t *t, int32_t n) {
    forest_id last = FOREST_NONE;
    st_err err = {0};
    forest_add_root(r->f, t, NULL, n, 0, &last, &err);
    return last;
}

/* The tokens of start..leaf (start excluded) into out; returns how many, -1 when the
 * leaf is gone. */
static int32_t path_tokens(const forest *f, forest_id start, forest_id leaf, int32_t *out) {
    int32_t buf[SLOTS], n = 0;
    for (forest_id at = leaf; at != start; n++) {
        const forest_node *nd = forest_get(f, at);
        if (!nd || n == SLOTS) return -1;
        buf[n] = nd->token;
        at = nd->parent < 0 ? FOREST_NONE : forest_id_at(f, nd->parent);
        if (at == FOREST_NONE && start != FOREST_NONE) return -1;
    }
    for (int32_t i = 0; i < n && i < MAXT; i++) out[i] = buf[n - 1 - i];
    return n;
}

static void put(run_out *o, int32_t i, const forest *f, forest_id start, forest_id leaf, const int32_t *toks,
                int32_t n, int end, double score) {
    if (i >= MAXR) return;
    if (o->n < i + 1) o->n = i + 1;
    if (toks) {
        o->len[i] = n;
        memcpy(o->tok[i], toks, sizeof(int32_t) * (size_t)(n < MAXT ? n : MAXT));
    } else {
        o->len[i] = path_tokens(f, start, leaf, o->tok[i]);
    }
    o->end[i] = end;
    o->score[i] = score;
}

static void count_emit(void *ud, int32_t branch, int32_t token, float lp) {
    (void)token, (void)lp;
    run_out *o = ud;
    if (branch >= 0 && branch <= MAXR) o->emitted[branch]++;
}

static int grow_end(const grow_branch *b) {
    return !b->done ? STRAT_RUNNING : b->eog ? STRAT_END_EOG : b->stop >= 0 ? STRAT_END_STOP : STRAT_END_BUDGET;
}

static void put_grow(run_out *o, int32_t base, const forest *f, const grow *g) {
    for (int32_t i = 0; i < g->n; i++) put(o, base + i, f, g->br[i].start, g->br[i].leaf, NULL, 0, grow_end(&g->br[i]), NAN);
}

/* ---- through the table ---- */

/* Sets up the forest for a table run (adds the prompt, or what merge needs) and fills o. */
typedef void (*setup_fn)(rig *r, strategy_opts *o);

/* The running leaf victim after the third step (FOREST_NONE: none), its tokens after
 * start kept in out->gone. */
static forest_id elsewhere = FOREST_NONE; /* a branch outside the run, for VICTIM_ELSEWHERE */
#define VICTIM_ELSEWHERE (-2)

static forest_id victim_leaf(const strategy *s, const forest *f, forest_id start, int32_t victim, run_out *out) {
    forest_id run[MAXR];
    if (victim == VICTIM_ELSEWHERE) return elsewhere;
    if (strategy_running(s, run, MAXR) <= victim) return FOREST_NONE;
    out->n_gone = path_tokens(f, start, run[victim], out->gone);
    return run[victim];
}

/* After the third step, the running leaf `victim` is pruned and the strategy told so
 * (strategy_forget), as the TUI does when d is pressed during a run; -1: never;
 * VICTIM_ELSEWHERE: the branch the setup put in `elsewhere`. */
static void table_run_pruning(strategy_opts o, setup_fn setup, run_out *out, int32_t victim, const char *what) {
    memset(out, 0, sizeof *out);
    rig r;
    if (!rig_init(&r)) return;
    o.n_vocab = r.V;
    setup(&r, &o);
    strategy_env env = {.f = r.f, .plan = &r.plan, .ctx = r.c, .tk = r.tk, .emit = count_emit, .emit_ud = out};
    st_err err = {0};
    strategy *s = strategy_create(&o, &env, &err);
    T_CHECK(s != NULL, "%s: create: %s", what, err.msg);
    st_code rc = ST_OK;
    int32_t steps = 0;
    while (s && !rc && !strategy_done(s) && steps++ < 500) {
        rc = strategy_step(s, &env, &err);
        forest_id top = steps == 3 && victim != -1 && !rc ? victim_leaf(s, r.f, o.from, victim, out) : FOREST_NONE;
        if (top == FOREST_NONE) continue;
        T_CHECK(forest_prune(r.f, top, &err) == ST_OK, "%s: prune: %s", what, err.msg);
        strategy_forget(s, r.f);
    }
    T_CHECK(s && !rc && strategy_done(s), "%s: ran to the end: %s", what, err.msg);
    for (int32_t i = 0; s && i < strategy_n_results(s); i++) {
        strategy_result res;
        strategy_result_at(s, r.f, i, &res);
        put(out, i, r.f, res.start, res.leaf, res.tokens, res.n_tokens, res.end, res.score);
        if (!res.tokens && res.leaf != FOREST_NONE)
            T_CHECK(out->len[i < MAXR ? i : 0] == res.n_tokens || i >= MAXR, "%s: result %d: n_tokens %d = its path",
                    what, i, res.n_tokens);
    }
    out->ok = s && !rc;
    T_CHECK(forest_check(r.f, &err) == ST_OK, "%s: forest invariants: %s", what, err.msg);
    strategy_free(s);
    rig_free(&r);
}

static void table_run(strategy_opts o, setup_fn setup, run_out *out, const char *what) {
    table_run_pruning(o, setup, out, -1, what);
}

static void compare(const run_out *a, const run_out *b, bool emits, const char *what) {
    bool same = a->ok && b->ok && a->n == b->n && a->n > 0;
    for (int32_t i = 0; same && i < a->n; i++) {
        int32_t n = a->len[i] < MAXT ? a->len[i] : MAXT;
        same = a->len[i] == b->len[i] && !memcmp(a->tok[i], b->tok[i], sizeof(int32_t) * (size_t)(n > 0 ? n : 0)) &&
               a->end[i] == b->end[i] && (isnan(a->score[i]) ? isnan(b->score[i]) : a->score[i] == b->score[i]);
        if (!same)
            fprintf(stderr, "%s: result %d: %d vs %d tokens, end %d vs %d, score %g vs %g\n", what, i, a->len[i],
                    b->len[i], a->end[i], b->end[i], a->score[i], b->score[i]);
    }
    if (getenv("T_VERBOSE")) for (int32_t i = 0; i < a->n; i++) fprintf(stderr, "%s[%d]: %d tokens end %d first %d\n", what, i, a->len[i], a->end[i], a->len[i] > 0 ? a->tok[i][0] : -1);
    T_CHECK(same, "%s: the table's results equal the direct calls' (%d results)", what, a->n);
    if (emits) {
        bool em = true;
        for (int32_t i = 0; i <= MAXR; i++) em = em && a->emitted[i] == b->emitted[i];
        T_CHECK(em, "%s: emit saw the same tokens per branch", what);
    }
}

/* ---- the direct calls, and the matching table runs ---- */

static sample_params sampling(void) {
    sample_params sp = sample_default_params();
    sp.temp = 0.9f;
    sp.top_k = 40;
    sp.seed = 11;
    return sp;
}

static void setup_prompt(rig *r, strategy_opts *o) { o->from = add_prompt(r, prompt, NP); }

/* n branches of budget tokens from the prompt, sampling(), grown to their ends on r by
 * direct calls (their tokens counted into emits when not NULL); g is the caller's to free. */
static st_code grow_direct(rig *r, grow *g, int32_t n, int32_t budget, run_out *emits) {
    sample_params sp = sampling();
    st_err err = {0};
    st_code rc = grow_init(g, r->f, add_prompt(r, prompt, NP), n, &sp, budget, r->V, &err);
    while (!rc && g->n_active > 0)
        rc = grow_step(g, r->f, &r->plan, r->c, r->tk, emits ? count_emit : NULL, emits, NULL, &err);
    return rc;
}

/* best: N independent samples ranked by their mean log-probability, against grow's N
 * branches ranked here by prune_score's mean (the generated tokens' log-probabilities);
 * its grammar sets its private options and the budget, and refuses bad lines. */
static void check_best(void) {
    run_out d = {0}, t;
    rig r;
    grow g;
    st_err err = {0};
    sample_params sp = sampling();
    if (!rig_init(&r)) return;
    st_code rc = grow_direct(&r, &g, 4, 24, NULL);
    int32_t order[4];
    double mean[4];
    for (int32_t i = 0; i < 4; i++) {
        mean[i] = prune_score(r.f, g.br[i].leaf, PRUNE_SCORE_MEAN);
        int32_t j = i;
        for (; j > 0 && mean[order[j - 1]] < mean[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int32_t i = 0; i < 4; i++) {
        const grow_branch *b = &g.br[order[i]];
        put(&d, i, r.f, b->start, b->leaf, NULL, 0, grow_end(b), mean[order[i]]);
    }
    d.ok = !rc;
    grow_free(&g);
    rig_free(&r);
    const strategy_ops *ops = strategy_find("best");
    T_CHECK(ops && ops->kind == STRAT_OTHER && ops->usage && ops->priv_size <= STRAT_PRIV_MAX, "best is registered");
    if (!ops) return;
    strategy_opts o = strategy_opts_for(ops);
    T_CHECK(strategy_args_parse(&o, " 4  24 ", &err) == ST_OK && o.budget == 24, "best 4 24: %s", err.msg);
    o.sample = sp;
    table_run(o, setup_prompt, &t, "best");
    compare(&d, &t, false, "best (grow's branches ranked by their mean log-probability)");
    bool ranked = t.n == 4;
    for (int32_t i = 1; i < t.n; i++) ranked = ranked && t.score[i - 1] >= t.score[i] && isfinite(t.score[i]);
    T_CHECK(ranked, "best: 4 results, scores non-increasing");
    strategy_opts bad = strategy_opts_for(ops);
    T_CHECK(strategy_args_parse(&bad, "0", &err) == ST_ERR_ARG && strstr(err.msg, "bad samples '0'"), "best 0: %s", err.msg);
    T_CHECK(strategy_args_parse(&bad, "", &err) == ST_ERR_ARG && !strcmp(err.msg, "usage: :best N [TOKENS]"),
            "best alone: %s", err.msg);
    T_CHECK(strategy_args_parse(&bad, "2 8 9", &err) == ST_ERR_ARG && strstr(err.msg, "usage: "), "best 2 8 9: %s",
            err.msg);
    T_CHECK(strategy_args_parse(&bad, "2 x", &err) == ST_ERR_ARG && strstr(err.msg, "bad tokens 'x'"), "best 2 x: %s",
            err.msg);
}

/* temps: chain i at temperature i * STEP / 100 with seed + i, each chain's tokens and end
 * equal to grow's of that one chain decoded alone on a fresh engine; its grammar's
 * optional tokens and step. */
static void check_temps(void) {
    const strategy_ops *ops = strategy_find("temps");
    T_CHECK(ops && ops->kind == STRAT_OTHER && ops->usage && ops->priv_size <= STRAT_PRIV_MAX, "temps is registered");
    if (!ops) return;
    run_out d = {.ok = true}, t;
    sample_params sp = sampling();
    st_err err = {0};
    for (int32_t i = 0; i < 3; i++) {
        rig r;
        grow g;
        if (!rig_init(&r)) return;
        sample_params one = sp;
        one.temp = (float)i * 60.0f / 100.0f, one.seed = sp.seed + (uint64_t)i;
        st_code rc = grow_init(&g, r.f, add_prompt(&r, prompt, NP), 1, &one, 20, r.V, &err);
        while (!rc && g.n_active > 0) rc = grow_step(&g, r.f, &r.plan, r.c, r.tk, NULL, NULL, NULL, &err);
        put_grow(&d, i, r.f, &g);
        d.ok = d.ok && !rc;
        grow_free(&g);
        rig_free(&r);
    }
    strategy_opts o = strategy_opts_for(ops);
    T_CHECK(strategy_args_parse(&o, "3 20 60", &err) == ST_OK && o.budget == 20, "temps 3 20 60: %s", err.msg);
    o.sample = sp;
    table_run(o, setup_prompt, &t, "temps");
    compare(&d, &t, false, "temps (each chain decoded alone at its temperature)");
    strategy_opts bad = strategy_opts_for(ops);
    T_CHECK(strategy_args_parse(&bad, "2", &err) == ST_OK, "temps 2 (tokens and step left out): %s", err.msg);
    T_CHECK(strategy_args_parse(&bad, "2 8 0", &err) == ST_ERR_ARG && strstr(err.msg, "bad step '0'"), "temps 2 8 0: %s",
            err.msg);
}

static void check_grow(void) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    sample_params sp = sampling();
    grow g;
    st_code rc = grow_direct(&r, &g, 3, 40, &d);
    put_grow(&d, 0, r.f, &g);
    d.ok = !rc;
    grow_free(&g);
    rig_free(&r);
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.sample = sp, o.budget = 40, o.u.grow.n = 3;
    table_run(o, setup_prompt, &t, "grow");
    compare(&d, &t, true, "grow");
}

static void check_cot(void) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    sample_params sp = sampling();
    cot c;
    st_err err = {0};
    static const char *const stop[] = {"a"};
    st_code rc = cot_init(&c, r.f, add_prompt(&r, prompt, NP), 5, &sp, 30, r.V, &err);
    if (!rc) rc = cot_set_stop(&c, stop, 1, &err);
    while (!rc && !cot_done(&c)) rc = cot_step(&c, r.f, &r.plan, r.c, r.tk, count_emit, &d, NULL, &err);
    put_grow(&d, 0, r.f, &c.g);
    d.ok = !rc;
    cot_free(&c);
    rig_free(&r);
    strategy_opts o = strategy_default_opts(STRAT_COT);
    o.sample = sp, o.budget = 30, o.u.cot.k = 5, o.stops = stop, o.n_stops = 1;
    table_run(o, setup_prompt, &t, "cot");
    compare(&d, &t, true, "cot (with a stop string)");
}

static void check_beam(void) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    beam_params bp = beam_default_params();
    bp.width = 3, bp.max_tokens = 12;
    st_err err = {0};
    beam *b = beam_init(r.f, add_prompt(&r, prompt, NP), &bp, r.tk, r.V, &err);
    st_code rc = b ? ST_OK : err.code;
    while (!rc && !beam_done(b)) rc = beam_step(b, r.f, &r.plan, r.c, &err);
    for (int32_t i = 0; !rc && i < beam_n_results(b); i++) {
        const beam_hyp *h = beam_result(b, i);
        put(&d, i, r.f, FOREST_NONE, FOREST_NONE, h->tokens, h->n, h->ended ? STRAT_END_EOG : STRAT_END_BUDGET,
            h->score);
    }
    d.ok = !rc;
    beam_free(b);
    rig_free(&r);
    strategy_opts o = strategy_default_opts(STRAT_BEAM);
    o.u.beam = bp, o.budget = 12;
    table_run(o, setup_prompt, &t, "beam");
    compare(&d, &t, false, "beam");
}

/* ask: each answer is what growing its own prompt alone gives (seed + i). */
static const int32_t q0[] = {1, 300, 317, 331, 300, 317, 345, 280, 290, 300, 317, 400, 401};
static const int32_t q1[] = {1, 300, 317, 331, 300, 317, 345, 280, 290, 300, 317, 402};
static const int32_t q2[] = {1, 300, 317, 331, 300, 317, 345, 280, 290, 300, 317};
static const int32_t *const qs[] = {q0, q1, q2};
static const int32_t qlen[] = {13, 12, 11};
static const int32_t qbudget[] = {20, 7, 15};

static void setup_none(rig *r, strategy_opts *o) { (void)r, (void)o; }

static void check_ask(void) {
    run_out d = {0}, t;
    sample_params sp = sampling();
    for (int32_t i = 0; i < 3; i++) {
        rig r;
        if (!rig_init(&r)) return;
        sample_params bp = sp;
        bp.seed = sp.seed + (uint64_t)i;
        grow g = {0};
        st_err err = {0};
        st_code rc = grow_add(&g, r.f, add_prompt(&r, qs[i], qlen[i]), &bp, qbudget[i], r.V, &err);
        while (!rc && g.n_active > 0) rc = grow_step(&g, r.f, &r.plan, r.c, r.tk, NULL, NULL, NULL, &err);
        put(&d, i, r.f, g.br[0].start, g.br[0].leaf, NULL, 0, grow_end(&g.br[0]), NAN);
        d.ok = !rc && (i == 0 || d.ok);
        grow_free(&g);
        rig_free(&r);
    }
    strategy_opts o = strategy_default_opts(STRAT_ASK);
    o.sample = sp;
    o.u.ask.prompts = qs, o.u.ask.lens = qlen, o.u.ask.budgets = qbudget, o.u.ask.n = 3;
    table_run(o, setup_none, &t, "ask");
    compare(&d, &t, false, "ask (each answer as its prompt alone)");
}

/* grow from several starts (plan's k branches per prompt): a context chain with one
 * prompt under it and an empty one (its start, the context's last node, also has the other
 * prompt as a child); branch s * n + b is what growing its start's text alone gives with
 * seed + s * n + b. */
static const int32_t gs_ctx[] = {1, 300, 317, 331, 300};
static const int32_t gs_q[] = {317, 345, 280};
static const int32_t gs_alone0[] = {1, 300, 317, 331, 300, 317, 345, 280};
static forest_id gs_starts[2];

static void setup_starts(rig *r, strategy_opts *o) {
    st_err err = {0};
    forest_id ctx_last = add_prompt(r, gs_ctx, 5);
    forest_append(r->f, ctx_last, gs_q, NULL, 3, &gs_starts[0], &err);
    gs_starts[1] = ctx_last;
    o->u.grow.starts = gs_starts, o->u.grow.n_starts = 2;
}

static void check_grow_starts(void) {
    run_out d = {0}, t;
    sample_params sp = sampling();
    const int32_t n = 2;
    for (int32_t i = 0; i < 2 * n; i++) {
        rig r;
        if (!rig_init(&r)) return;
        sample_params bp = sp;
        bp.seed = sp.seed + (uint64_t)i;
        grow g = {0};
        st_err err = {0};
        forest_id from = i < n ? add_prompt(&r, gs_alone0, 8) : add_prompt(&r, gs_ctx, 5);
        st_code rc = grow_add(&g, r.f, from, &bp, 17, r.V, &err);
        while (!rc && g.n_active > 0) rc = grow_step(&g, r.f, &r.plan, r.c, r.tk, NULL, NULL, NULL, &err);
        put(&d, i, r.f, g.br[0].start, g.br[0].leaf, NULL, 0, grow_end(&g.br[0]), NAN);
        d.ok = !rc && (i == 0 || d.ok);
        grow_free(&g);
        rig_free(&r);
    }
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.sample = sp, o.budget = 17, o.u.grow.n = n;
    table_run(o, setup_starts, &t, "grow from several starts");
    compare(&d, &t, false, "grow from several starts (each branch as its start's text alone)");
}

/* margins: notes on two chunks, then an answer whose prompt is fixed tokens. */
static const int32_t n0[] = {1, 300, 317, 331, 300, 317, 345};
static const int32_t n1[] = {1, 300, 317, 280, 290, 300};
static const int32_t *const notes_p[] = {n0, n1};
static const int32_t notes_len[] = {7, 6};

static int32_t *answer_prompt(void *ud, const char *notes, int32_t *n, st_err *err) {
    (void)ud, (void)notes;
    static const int32_t a[] = {1, 300, 317, 333, 334};
    int32_t *t = malloc(sizeof a);
    if (!t) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(t, a, sizeof a);
    *n = 5;
    return t;
}

static void check_margins(void) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    sample_params sp = sampling(), ap = sp;
    ap.seed = sp.seed + 2;
    margins m;
    st_err err = {0};
    st_code rc = margins_init(&m, r.f, notes_p, notes_len, 2, &sp, 10, r.V, &err);
    while (!rc && m.phase == MARGINS_NOTES) rc = margins_step(&m, r.f, &r.plan, r.c, r.tk, count_emit, &d, NULL, &err);
    int32_t n = 0, *a = rc ? NULL : answer_prompt(NULL, "", &n, &err);
    if (a) rc = margins_answer(&m, r.f, a, n, &ap, 12, &err);
    free(a);
    while (!rc && !margins_done(&m)) rc = margins_step(&m, r.f, &r.plan, r.c, r.tk, count_emit, &d, NULL, &err);
    put_grow(&d, 0, r.f, &m.notes);
    put_grow(&d, 2, r.f, &m.answer);
    d.ok = !rc;
    margins_free(&m);
    rig_free(&r);
    strategy_opts o = strategy_default_opts(STRAT_MARGINS);
    o.sample = sp, o.budget = 10;
    o.u.margins.prompts = notes_p, o.u.margins.lens = notes_len, o.u.margins.n_chunks = 2;
    o.u.margins.answer_budget = 12, o.u.margins.answer = answer_prompt;
    table_run(o, setup_none, &t, "margins");
    compare(&d, &t, true, "margins (notes, then the answer)");
}

/* answer_prompt, keeping the notes' text it was given in ud (a char[1024]). */
static int32_t *answer_prompt_kept(void *ud, const char *notes, int32_t *n, st_err *err) {
    snprintf(ud, 1024, "%s", notes);
    return answer_prompt(NULL, notes, n, err);
}

/* margins: note 0 pruned after step 3 ends 'pruned' and is left out of the answer's
 * prompt, which gets note 1's text alone (the text a run without the prune ends with). */
static void check_margins_prune(void) {
    char full[1024] = "", cut[1024] = "";
    run_out a, b;
    strategy_opts o = strategy_default_opts(STRAT_MARGINS);
    o.sample = sampling(), o.budget = 10;
    o.u.margins.prompts = notes_p, o.u.margins.lens = notes_len, o.u.margins.n_chunks = 2;
    o.u.margins.answer_budget = 12, o.u.margins.answer = answer_prompt_kept, o.u.margins.answer_ud = full;
    table_run(o, setup_none, &a, "margins");
    o.u.margins.answer_ud = cut;
    table_run_pruning(o, setup_none, &b, 0, "margins, note 0 pruned");
    size_t lf = strlen(full), lc = strlen(cut);
    T_CHECK(b.ok && b.n == 3 && b.end[0] == STRAT_END_PRUNED && b.end[1] != STRAT_END_PRUNED && lc > 0 && lc < lf &&
                !strcmp(full + lf - lc, cut),
            "margins: the pruned note ends 'pruned' (end %d) and the answer reads the other alone: '%s' of '%s'",
            (int)b.end[0], cut, full);
}

/* merge: three greedy chains of a cot merged, then grown. */
static forest_id g_leaves[3];

static void make_chains(rig *r) {
    sample_params sp = sample_default_params();
    sp.temp = 0;
    cot c;
    st_err err = {0};
    st_code rc = cot_init(&c, r->f, add_prompt(r, prompt, NP), 3, &sp, 6, r->V, &err);
    while (!rc && !cot_done(&c)) rc = cot_step(&c, r->f, &r->plan, r->c, r->tk, NULL, NULL, NULL, &err);
    if (!rc) rc = step_forest(r->f, &r->plan, r->c, &err);
    for (int32_t i = 0; i < 3; i++) g_leaves[i] = rc ? FOREST_NONE : c.g.br[i].leaf;
    cot_free(&c);
}

static void setup_merge(rig *r, strategy_opts *o) {
    make_chains(r);
    o->u.merge.leaves = g_leaves;
    o->u.merge.n = 3;
}

static void check_merge(void) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    make_chains(&r);
    sample_params sp = sampling();
    forest_id last;
    grow g = {0};
    st_err err = {0};
    st_code rc = merge_branches(r.f, r.tk, g_leaves, 3, NULL, &last, &err);
    if (!rc) rc = grow_init(&g, r.f, last, 1, &sp, 16, r.V, &err);
    while (!rc && g.n_active > 0) rc = grow_step(&g, r.f, &r.plan, r.c, r.tk, count_emit, &d, NULL, &err);
    put_grow(&d, 0, r.f, &g);
    d.ok = !rc;
    grow_free(&g);
    rig_free(&r);
    strategy_opts o = strategy_default_opts(STRAT_MERGE);
    o.sample = sp, o.budget = 16;
    table_run(o, setup_merge, &t, "merge");
    compare(&d, &t, true, "merge (then grown)");
}

/* draft / lookahead: the spec driver's own tokens, cut at the budget or an end token. */
static void check_spec(strategy_kind kind, int32_t budget, const char *what) {
    run_out d = {0}, t;
    rig r;
    if (!rig_init(&r)) return;
    strategy_opts o = strategy_default_opts(kind);
    forest_id tip = add_prompt(&r, prompt, NP);
    st_err err = {0};
    spec *s = spec_init(&o.u.spec.p, r.f, tip, &err);
    int32_t *out = s ? malloc(sizeof(int32_t) * (size_t)spec_max_emit(s)) : NULL, got[MAXT], n = 0;
    st_code rc = s && out ? ST_OK : ST_ERR_NOMEM;
    bool eog = false;
    while (!rc && n < budget && !eog) {
        int32_t k = 0;
        rc = spec_step(s, r.f, &r.plan, r.c, out, &k, &err);
        for (int32_t i = 0; !rc && i < k && n < budget && !eog; i++) {
            eog = tok_is_eog(r.tk, out[i]);
            if (!eog) got[n++] = out[i];
        }
    }
    put(&d, 0, r.f, FOREST_NONE, FOREST_NONE, got, n, eog ? STRAT_END_EOG : STRAT_END_BUDGET, NAN);
    d.emitted[0] = n;
    d.ok = !rc;
    free(out);
    spec_free(s);
    rig_free(&r);
    o.budget = budget;
    table_run(o, setup_prompt, &t, what);
    compare(&d, &t, true, what);
}

/* What plan --draft relies on: without a tokenizer and with no budget in reach, the draft
 * strategy emits every token each spec_step accepted (an end token included) and leaves
 * the forest as the driver alone does. */
typedef struct raw_emit {
    int32_t n, t[512];
} raw_emit;

static void raw_put(void *ud, int32_t branch, int32_t token, float lp) {
    (void)branch, (void)lp;
    raw_emit *e = ud;
    if (e->n < 512) e->t[e->n++] = token;
}

static void check_spec_raw(void) {
    enum { STEPS = 12 };
    raw_emit d = {0}, t = {0};
    int32_t d_used = -1, t_used = -2, d_k[STEPS] = {0}, t_k[STEPS] = {0};
    rig r;
    if (!rig_init(&r)) return;
    strategy_opts o = strategy_default_opts(STRAT_LOOKAHEAD);
    o.u.spec.p.adaptive = o.u.spec.p.la_adaptive = false; /* no timing in the choices */
    st_err err = {0};
    spec *sp = spec_init(&o.u.spec.p, r.f, add_prompt(&r, prompt, NP), &err);
    int32_t *out = sp ? malloc(sizeof(int32_t) * (size_t)spec_max_emit(sp)) : NULL;
    st_code rc = sp && out ? ST_OK : ST_ERR_NOMEM;
    for (int32_t i = 0; i < STEPS && !rc; i++) {
        rc = spec_step(sp, r.f, &r.plan, r.c, out, &d_k[i], &err);
        for (int32_t j = 0; !rc && j < d_k[i]; j++) raw_put(&d, 0, out[j], 0);
    }
    d_used = rc ? -1 : kv_alloc_used(forest_kv(r.f));
    free(out);
    spec_free(sp);
    rig_free(&r);
    if (!rig_init(&r)) return;
    strategy_env env = {.f = r.f, .plan = &r.plan, .ctx = r.c, .emit = raw_put, .emit_ud = &t};
    o.from = add_prompt(&r, prompt, NP), o.budget = INT32_MAX, o.n_vocab = r.V;
    strategy *s = strategy_create(&o, &env, &err);
    rc = s ? ST_OK : err.code;
    for (int32_t i = 0; i < STEPS && !rc && !strategy_done(s); i++) {
        int32_t before = t.n;
        rc = strategy_step(s, &env, &err);
        t_k[i] = t.n - before;
    }
    if (!rc) t_used = kv_alloc_used(forest_kv(r.f));
    strategy_free(s);
    rig_free(&r);
    T_CHECK(!rc && d.n == t.n && !memcmp(d.t, t.t, sizeof(int32_t) * (size_t)d.n) && !memcmp(d_k, t_k, sizeof d_k) &&
                d_used == t_used,
            "lookahead without a tokenizer: every step's tokens as spec_step emits them (%d vs %d tokens, KV %d vs %d)",
            d.n, t.n, d_used, t_used);
}

/* steps: the same forest as plain step_forest calls. */
static void check_steps(void) {
    rig r;
    if (!rig_init(&r)) return;
    add_prompt(&r, prompt, NP);
    add_prompt(&r, q0, 13);
    strategy_env env = {.f = r.f, .plan = &r.plan, .ctx = r.c, .tk = r.tk};
    strategy_opts o = strategy_default_opts(STRAT_STEPS);
    o.u.steps.n = 3;
    st_err err = {0};
    strategy *s = strategy_create(&o, &env, &err);
    int32_t steps = 0;
    while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) steps++;
    strategy_progress pr;
    if (s) strategy_get_progress(s, &pr);
    T_CHECK(s && steps == 1 && pr.done == 1 && pr.goal == 3 && forest_n_pending(r.f) == 0 && pr.tokens == NP + 13,
            "steps: one step computes everything pending, then it stops (%d steps)", steps);
    T_CHECK(s && strategy_n_results(s) == 0, "steps: no results");
    strategy_free(s);
    rig_free(&r);
}

/* A branch pruned during a run (the TUI's d): the strategy lets it go and the others
 * grow on exactly as in a run without the prune, each its own tokens (the forest hands a
 * leaf the same logits whatever else is in the step); best ranks the ones left. */
static void check_prune_midrun(strategy_opts o, const char *what) {
    run_out a, b;
    table_run(o, setup_prompt, &a, what);
    table_run_pruning(o, setup_prompt, &b, 1, what);
    int32_t pruned = 0, matched = 0;
    for (int32_t i = 0; i < b.n; i++) {
        if (b.end[i] == STRAT_END_PRUNED) {
            pruned++;
            continue;
        }
        bool hit = false;
        for (int32_t j = 0; j < a.n && !hit; j++)
            hit = a.len[j] == b.len[i] && a.end[j] == b.end[i] && b.len[i] >= 0 &&
                  !memcmp(a.tok[j], b.tok[i], sizeof(int32_t) * (size_t)(b.len[i] < MAXT ? b.len[i] : MAXT));
        matched += hit;
    }
    T_CHECK(a.ok && b.ok && b.n == a.n && pruned == 1 && matched == a.n - 1,
            "%s: one branch pruned mid-run ends 'pruned', the other %d as without the prune: %d pruned, %d matched",
            what, (int)(a.n - 1), (int)pruned, (int)matched);
}

/* The prompt, and a second tree beside it to prune while the run goes on. */
static void setup_prompt_beside(rig *r, strategy_opts *o) {
    o->from = add_prompt(r, prompt, NP);
    elsewhere = add_prompt(r, prompt + 1, 4);
}

/* draft / lookahead: a prune that takes the chain's tip ends the run 'pruned', the
 * accepted tokens above it kept; a prune elsewhere leaves the run as it was. */
static void check_spec_prunes(strategy_kind kind, const char *what) {
    strategy_opts o = strategy_default_opts(kind);
    o.budget = 30;
    run_out plain, tip, beside;
    table_run(o, setup_prompt, &plain, what);
    table_run_pruning(o, setup_prompt, &tip, 0, what);
    T_CHECK(tip.ok && tip.n == 1 && tip.end[0] == STRAT_END_PRUNED && tip.n_gone > 0,
            "%s: the chain's tip pruned after step 3 ends the run 'pruned' (end %d, %d results)", what,
            (int)tip.end[0], (int)tip.n);
    table_run_pruning(o, setup_prompt_beside, &beside, VICTIM_ELSEWHERE, what);
    compare(&plain, &beside, true, what);
}

static void check_prunes(void) {
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.sample = sampling(), o.budget = 24, o.u.grow.n = 3;
    check_prune_midrun(o, "grow");
    o = strategy_default_opts(STRAT_COT);
    o.sample = sampling(), o.budget = 24, o.u.cot.k = 4;
    check_prune_midrun(o, "cot");
    o = strategy_opts_for(strategy_find("best"));
    o.sample = sampling(), o.budget = 24;
    check_prune_midrun(o, "best");
    /* beam drops the pruned hypothesis and refills from the others: no result goes on
       from the pruned tokens */
    run_out b;
    o = strategy_default_opts(STRAT_BEAM);
    o.budget = 16, o.u.beam.width = 3;
    table_run_pruning(o, setup_prompt, &b, 1, "beam");
    bool free_of = b.ok && b.n > 0 && b.n_gone == 3;
    for (int32_t i = 0; free_of && i < b.n; i++)
        free_of = b.len[i] < b.n_gone || memcmp(b.tok[i], b.gone, sizeof(int32_t) * (size_t)b.n_gone) != 0;
    T_CHECK(free_of, "beam: a hypothesis pruned after step 3 (%d tokens) is not continued by any of %d results",
            (int)b.n_gone, (int)b.n);
    check_spec_prunes(STRAT_DRAFT, "draft");
    check_spec_prunes(STRAT_LOOKAHEAD, "lookahead");
    /* the others hold nodes they cannot lose mid-run: a host must not prune under them */
    static const char *const takes[] = {"grow",  "cot",       "ask", "merge",  "step", "best",
                                        "beam",  "draft",     "lookahead", "tot", "margins", "temps"};
    for (int32_t i = 0; strategy_at(i); i++) {
        bool want = false;
        for (size_t k = 0; k < sizeof takes / sizeof takes[0]; k++) want |= !strcmp(takes[k], strategy_at(i)->name);
        T_CHECK((strategy_at(i)->forget != NULL) == want, "%s %s prunes during a run", strategy_at(i)->name,
                want ? "takes" : "refuses");
    }
}

static void check_registry(void) {
    static const char *const names[] = {"grow", "cot", "beam", "ask", "margins", "merge", "draft", "lookahead", "step", "judge", "tot", "best", "temps"};
    int32_t n = 0;
    for (int32_t i = 0; strategy_at(i); i++, n++) {
        const strategy_ops *ops = strategy_at(i);
        T_CHECK(i < STRAT_N_KINDS ? (int32_t)ops->kind == i && strategy_get(ops->kind) == ops
                                  : ops->kind == STRAT_OTHER && !strategy_get(ops->kind),
                "%s: found by kind", ops->name);
        T_CHECK(strategy_find(ops->name) == ops, "%s: found by name", ops->name);
        T_CHECK(ops->create && ops->step && ops->done && ops->progress && ops->n_results && ops->running && ops->free,
                "%s: the table is complete", ops->name);
        T_CHECK(strategy_default_opts(ops->kind).kind == ops->kind, "%s: default options", ops->name);
    }
    T_CHECK(n == STRAT_N_KINDS + 2 && n == (int32_t)(sizeof names / sizeof names[0]), "%d strategies registered", n);
    for (int32_t i = 0; i < n; i++) T_CHECK(strategy_find(names[i]) != NULL, "%s is registered", names[i]);
    T_CHECK(!strategy_find("nothing") && !strategy_find(NULL) && !strategy_get(STRAT_N_KINDS), "unknown names");

    rig r;
    if (!rig_init(&r)) return;
    strategy_env env = {.f = r.f, .plan = &r.plan, .ctx = r.c, .tk = r.tk};
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.n_vocab = r.V;
    st_err err = {0};
    T_CHECK(!strategy_create(&o, &env, &err) && err.code == ST_ERR_ARG, "grow from no node: %s", err.msg);
    o.from = add_prompt(&r, prompt, NP);
    o.u.grow.n = 0;
    T_CHECK(!strategy_create(&o, &env, &err) && err.code == ST_ERR_ARG, "grow with 0 branches: %s", err.msg);
    o = strategy_default_opts(STRAT_ASK);
    T_CHECK(!strategy_create(&o, &env, &err) && err.code == ST_ERR_ARG, "ask without prompts: %s", err.msg);
    o = strategy_default_opts(STRAT_DRAFT);
    o.from = forest_dfs_first(r.f) >= 0 ? forest_id_at(r.f, forest_dfs_first(r.f)) : FOREST_NONE;
    o.budget = 0;
    T_CHECK(!strategy_create(&o, &env, &err) && err.code == ST_ERR_ARG, "draft with budget 0: %s", err.msg);
    int32_t live = forest_n_live(r.f);
    o = strategy_default_opts(STRAT_MERGE);
    forest_id one = o.from = forest_id_at(r.f, forest_dfs_first(r.f));
    o.u.merge.leaves = &one, o.u.merge.n = 0;
    T_CHECK(!strategy_create(&o, &env, &err) && forest_n_live(r.f) == live, "merge of nothing: forest unchanged");
    rig_free(&r);
}

int main(void) {
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "random model: %s", err.msg);
    if (!m || !tk) return t_done();
    g_m = m, g_tk = tk;
    check_registry();
    check_grow();
    check_best();
    check_temps();
    check_grow_starts();
    check_cot();
    check_beam();
    check_ask();
    check_margins();
    check_margins_prune();
    check_merge();
    check_spec(STRAT_DRAFT, 40, "draft");
    check_spec(STRAT_LOOKAHEAD, 33, "lookahead");
    check_spec_raw();
    check_steps();
    check_prunes();
    tok_free(tk);
    model_free(m);
    return t_done();
}
