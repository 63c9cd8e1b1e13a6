/* test_ui_worker.c - the TUI's jobs through its worker thread, without a terminal, on
 * stories260K (skipped when absent): :ask's answers, the hosts a job reports to, a step
 * filling the next one, :export's SVG, and :draft and :lookahead (ui/spec_job.h): their
 * chains equal plain greedy decoding token for token, the budget is exact, and a lookahead
 * step's captured mask rows carry the window's roles at positions tip + i + l after the
 * window is pruned. The plain-C parts (actions, keys, commands) are test_ui.c's. */
#include <math.h>
#include <time.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "../ui/ask_margins.h"
#include "../ui/command.h"
#include "../ui/mask_view.h"
#include "../ui/status.h"
#include "../ui/spec_job.h"
#include "../ui/worker.h"
#include "t.h"

#include "strategy/margins.h"
#include "strategy/strategy.h"
#include "t_model.h"

static double now_ms(void) { return 1e3 * mono_now_s(); }

/* ---- :ask through the worker ---- */

/* Waits (at most 60 s) until the worker's message number is past no and, with idle,
 * nothing runs; the message into msg, its number returned. */
static uint64_t wait_message(ui_worker *w, uint64_t no, bool idle, char *msg, size_t cap) {
    double t0 = now_ms();
    for (;;) {
        ui_worker_lock(w);
        bool busy = ui_worker_busy(w);
        uint64_t now = ui_worker_message(w, msg, cap);
        ui_worker_unlock(w);
        if ((now != no && !(idle && busy)) || now_ms() - t0 > 60e3) return now;
        usleep(2000);
    }
}

/* A worker over a fresh forest of n_slots holding <s> + token 300 (its root in *root),
 * decoding greedily with the given budget; NULL (checked) when it cannot start. */
static ui_worker *greedy_worker(model_ctx *c, const tok *tk, int32_t n_slots, int32_t budget, forest_id *root) {
    st_err err = {0};
    forest *f = forest_init(n_slots, 8);
    int32_t prompt[2] = {tok_bos(tk), 300};
    forest_add_root(f, prompt, NULL, 2, 0, root, &err);
    sample_params sp = sample_default_params();
    sp.temp = 0;
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = budget, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) forest_free(f);
    return w;
}

/* :ask is the ask strategy: refused while another strategy runs (the forest as it was,
 * the running one untouched); once that is cancelled it appends the turn and answers. */
static void test_ask_job(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 1024)) goto out;
    forest_id leaf;
    ui_worker *w = greedy_worker(c, tk, 1024, 6, &leaf);
    if (!w) goto out;
    char msg[1024];
    ui_job grow = ui_job_run(STRAT_GROW, leaf), pause = {.kind = UI_JOB_PAUSE};
    grow.u.run.opts.budget = 500;
    /* the lock held: the worker takes the pause before the grow's first step */
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_worker_post(w, &grow);
    ui_worker_post(w, &pause);
    ui_worker_unlock(w);
    no = wait_message(w, no, false, msg, sizeof msg);
    T_CHECK(!strcmp(msg, "paused"), "grow paused: '%s'", msg);
    ui_worker_lock(w);
    int32_t nodes = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    ui_job ask = ui_job_run(STRAT_ASK, leaf);
    ask.text = "Who is there?";
    ui_worker_post(w, &ask);
    no = wait_message(w, no, false, msg, sizeof msg);
    ui_stats st;
    ui_worker_lock(w);
    ui_worker_stats(w, &st);
    T_CHECK(strstr(msg, "grow is running: cancel it first (x)") && ui_worker_busy(w) && !strncmp(st.job, "grow ", 5) &&
            forest_n_live(ui_worker_forest(w)) == nodes,
            "ask refused while grow runs: '%s', job '%s', %d nodes (%d before)", msg, st.job,
            forest_n_live(ui_worker_forest(w)), nodes);
    ui_worker_unlock(w);
    ui_job cancel = {.kind = UI_JOB_CANCEL};
    ui_worker_post(w, &cancel);
    no = wait_message(w, no, true, msg, sizeof msg);
    ui_worker_lock(w);
    nodes = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    ui_worker_post(w, &ask);
    no = wait_message(w, no, true, msg, sizeof msg);
    while (!strncmp(msg, "ask: ", 5)) no = wait_message(w, no, true, msg, sizeof msg); /* the form, then done */
    int32_t n_turn = 0;
    int32_t *turn = ui_turn_tokens(tk, &(ui_chat){CHAT_NONE, NULL}, "Who is there?", UI_TURN_RAW, false, &n_turn, &err);
    free(turn);
    ui_worker_lock(w);
    int32_t grown = forest_n_live(ui_worker_forest(w)) - nodes - n_turn;
    T_CHECK(!strncmp(msg, "done: +", 7) && strstr(msg, "1 branch") && strstr(msg, "(ask: raw text") && grown >= 1 &&
                grown <= 6 && !ui_worker_busy(w),
            "ask after the cancel: '%s', %d tokens grown", msg, grown);
    ui_worker_unlock(w);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* Posts j and waits until the worker is idle after saying "done..." (or 60 s). */
static void run_to_done(ui_worker *w, ui_job j, char *msg, size_t cap) {
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, cap);
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    do no = wait_message(w, no, true, msg, cap);
    while (strncmp(msg, "done", 4) && strncmp(msg, "nothing", 7) && msg[0]);
}

/* Grows root's branch to the budget; its last node in DFS order (the branch end). */
static forest_id grown_leaf(ui_worker *w, forest_id root, char *msg, size_t cap) {
    forest_id leaf = FOREST_NONE;
    run_to_done(w, ui_job_run(STRAT_GROW, root), msg, cap);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) leaf = forest_id_at(f, i);
    ui_worker_unlock(w);
    return leaf;
}

/* :margins and :merge through the worker start as their run host rows say (run_host.h):
 * margins' notes on the selected branch's chunks, then its answer; merge of two bookmarked
 * branches. */
static void test_worker_hosts(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 1024)) goto out;
    forest_id root, leaf = FOREST_NONE;
    ui_worker *w = greedy_worker(c, tk, 1024, 9, &root);
    if (!w) goto out;
    char msg[1024];
    leaf = grown_leaf(w, root, msg, sizeof msg);
    ui_job jobs[2] = {ui_job_run(STRAT_MARGINS, leaf), ui_job_run(STRAT_MERGE, FOREST_NONE)};
    jobs[0].text = "Who?";
    jobs[0].u.run.chunk = 4;
    const char *want[2] = {"done", "merge needs two or more bookmarked branches"};
    for (int i = 0; i < 2; i++) { /* the last message once the worker is idle again */
        ui_worker_lock(w);
        uint64_t no = ui_worker_message(w, msg, sizeof msg);
        ui_worker_post(w, &jobs[i]);
        ui_worker_unlock(w);
        wait_message(w, no, true, msg, sizeof msg);
        T_CHECK(strstr(msg, want[i]) && (i || strstr(msg, "margins: 3 notes on 4-token chunks, then the answer")),
                "%s through the worker: '%s'", i ? ":merge" : ":margins", msg);
    }
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* `s` with a branch selected after a grow stopped by its budget: the step computes that
 * branch end's next-token choices, so the alternatives pane has "(next)" entries (the grow
 * left its last token pending with no logits wanted). */
static void test_step_fills_next(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 512)) goto out;
    forest_id root, leaf = FOREST_NONE;
    ui_worker *w = greedy_worker(c, tk, 512, 4, &root);
    if (!w) goto out;
    char msg[1024];
    leaf = grown_leaf(w, root, msg, sizeof msg);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    int32_t before = forest_topk(f, leaf, NULL, NULL, 0);
    ui_worker_unlock(w);
    run_to_done(w, ui_job_run(STRAT_STEPS, leaf), msg, sizeof msg);
    ui_worker_lock(w);
    int32_t after = forest_topk(f, leaf, NULL, NULL, 0);
    T_CHECK(before == 0 && after > 0, "the branch end's choices: %d before the step, %d after ('%s')", before, after,
            msg);
    ui_worker_unlock(w);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s ? strstr(s, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* :export FILE.svg draws the forest and the last step's mask; "mask" or "tree" after the
 * name draws one part; before any step the mask alone is refused; other names stay
 * Markdown. */
static void test_export_svg(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 256)) goto out;
    forest *f = forest_init(256, 8);
    int32_t prompt[2] = {tok_bos(tk), 300};
    forest_id leaf;
    forest_add_root(f, prompt, NULL, 2, 0, &leaf, &err);
    sample_params sp = sample_default_params();
    sp.temp = 0;
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = 4, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) {
        forest_free(f);
        goto out;
    }
    char dir[] = "/tmp/md-export-XXXXXX", path[256], msg[1024];
    T_CHECK(mkdtemp(dir) != NULL, "temp dir");
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_worker_unlock(w);
    ui_job ex = {.kind = UI_JOB_EXPORT, .text = path};
    snprintf(path, sizeof path, "%s/early.svg mask", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    T_CHECK(strstr(msg, "no step to draw yet"), "the mask before any step: '%s'", msg);
    ui_job cot = ui_job_run(STRAT_COT, leaf);
    cot.u.run.opts.u.cot.k = 3;
    cot.u.run.opts.budget = 3;
    ui_worker_post(w, &cot);
    no = wait_message(w, no, true, msg, sizeof msg);
    snprintf(path, sizeof path, "%s/both.svg", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    char *svg = t_slurp(path, NULL);
    ui_worker_lock(w);
    int32_t live = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    T_CHECK(svg && !strncmp(svg, "<?xml", 5) && strstr(svg, "</svg>") && count_of(svg, "class=\"node\"") == live &&
                count_of(svg, "class=\"on\"") > 0 && strstr(msg, "exported"),
            "%s: %d node boxes for %d nodes, %d mask cells; '%s'", path, count_of(svg, "class=\"node\""), live,
            count_of(svg, "class=\"on\""), msg);
    free(svg);
    snprintf(path, sizeof path, "%s/mask.svg mask", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    snprintf(path, sizeof path, "%s/mask.svg", dir);
    svg = t_slurp(path, NULL);
    T_CHECK(svg && !strstr(svg, "class=\"node\"") && strstr(svg, "class=\"on\""), "the mask alone: '%s'", msg);
    free(svg);
    snprintf(path, sizeof path, "%s/texts.md", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    svg = t_slurp(path, NULL);
    T_CHECK(svg && !strstr(svg, "<svg"), "other names stay Markdown");
    free(svg);
    ui_worker_stop(w);
    const char *names[] = {"both.svg", "mask.svg", "texts.md"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* ---- :draft and :lookahead ---- */


/* The forest holds one chain: the prompt then tokens equal to ref[0..n) (n <= n_ref). */
static void check_chain(const forest *f, const int32_t *prompt, int32_t np, const int32_t *ref, int32_t n,
                        const char *what) {
    forest_id leaf[4];
    int32_t nl = forest_leaves(f, leaf, 4), path[512];
    int32_t len = nl == 1 ? forest_path(f, leaf[0], path, 512) : -1;
    T_CHECK(nl == 1 && len == np + n, "%s: one chain of %d + %d tokens (%d leaves, %d tokens)", what, np, n, nl, len);
    int32_t diff = -1;
    for (int32_t i = 0; len == np + n && i < len && diff < 0; i++)
        if (path[i] != (i < np ? prompt[i] : ref[i - np])) diff = i;
    T_CHECK(len == np + n && diff < 0, "%s: equals plain decoding (first difference at %d)", what, diff);
    T_CHECK(forest_n_live(f) == np + n, "%s: the rejected drafts and the window are gone (%d nodes)", what, forest_n_live(f));
    st_err err = {0};
    T_CHECK(!forest_check(f, &err), "%s: forest invariants: %s", what, err.msg);
    const forest_node *last = nl == 1 ? forest_get(f, leaf[0]) : NULL;
    T_CHECK(last && (last->flags & FOREST_FINISHED), "%s: the last node is marked finished", what);
}

/* :draft (w = 0) or :lookahead W N G as the parser builds it, budget TOKENS (0: the
 * worker's). */
static ui_job draft_job(int32_t w, int32_t n, int32_t g, int32_t tokens) {
    ui_job j = ui_job_run(w ? STRAT_LOOKAHEAD : STRAT_DRAFT, FOREST_NONE);
    strategy_opts *o = &j.u.run.opts;
    if (w) o->u.spec.p.la.w = w, o->u.spec.p.la.n = n, o->u.spec.p.la.g = g;
    o->budget = tokens;
    return j;
}

/* Posts job j to a worker over a fresh forest holding the prompt, waits until it is done
 * and checks the chain it left against ref. */
static void worker_run(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np, ui_job j,
                       const sample_params *sp0, const int32_t *ref, int32_t n, const char *what) {
    st_err err = {0};
    forest *f = forest_init(512, 8);
    forest_add_root(f, prompt, NULL, np, 0, &j.node, &err);
    sample_params sp = *sp0; /* :set temp: 0 greedy, else exact speculative sampling */
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = 32, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "%s: worker: %s", what, err.msg);
    if (!w) {
        forest_free(f);
        return;
    }
    char msg[1024] = "";
    uint64_t no0 = ui_worker_message(w, msg, sizeof msg);
    T_CHECK(ui_worker_post(w, &j), "%s: posted", what);
    /* done: idle again after a message (every end of a run says something) */
    double t0 = now_ms();
    for (;;) {
        ui_worker_lock(w);
        bool busy = ui_worker_busy(w);
        uint64_t no = ui_worker_message(w, msg, sizeof msg);
        ui_worker_unlock(w);
        if ((!busy && no != no0 && strncmp(msg, "greedy", 6)) || now_ms() - t0 > 60e3) break;
        usleep(2000);
    }
    T_CHECK(!strncmp(msg, "done (", 6) && strstr(msg, "tokens/step"), "%s: message '%s'", what, msg);
    ui_worker_lock(w);
    check_chain(ui_worker_forest(w), prompt, np, ref, n, what);
    const mask_view *mv = ui_worker_mask(w);
    char buf[256];
    mv_header(mv, buf, sizeof buf, 200, false);
    T_CHECK(mv->spec && (strstr(buf, "drafts accepted") || strstr(buf, "no drafts")),
            "%s: the mask view shows a speculative step: '%s'", what, buf);
    ui_worker_unlock(w);
    ui_worker_stop(w);
}

/* The TUI's observer, as the worker sets it: the step's view for the mask pane. */
typedef struct la_view {
    mask_view *mv;
    const tok *tk;
    int32_t step;
} la_view;

static void la_observe(void *ud, const spec *s, const forest *f, const step_plan *p) {
    la_view *v = ud;
    ui_spec_capture(v->mv, s, f, v->tk, p, v->step);
}

/* One lookahead step captured by the observer: roles and positions of the rows, kept
 * after the window and the rejected drafts are pruned. */
static void check_la_capture(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np) {
    st_err err = {0};
    forest *f = forest_init(512, 0);
    forest_id tip;
    forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
    spec_params sp = ui_spec_params(3, 3, 2);
    T_CHECK(sp.row_cost <= 0 && sp.la.w == 3 && sp.la.n == 3 && sp.la.g == 2, "lookahead params");
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    la_view lv = {mv, tk, 0};
    strategy_opts o = strategy_default_opts(STRAT_LOOKAHEAD);
    o.from = tip, o.budget = 16, o.u.spec.p = sp, o.u.spec.observe = la_observe, o.u.spec.observe_ud = &lv;
    step_plan p;
    step_plan_init(&p);
    strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
    strategy *u = strategy_create(&o, &env, &err);
    T_CHECK(u, "the lookahead strategy: %s", err.msg);
    int32_t made = 0, steps = 0;
    bool ok = true;
    /* the prefill step, then a few more: each must show the whole window */
    for (; u && ok && steps < 4 && !strategy_done(u); steps++) {
        int32_t tip_pos = forest_get(f, spec_tip(strategy_spec(u)))->depth;
        strategy_progress pr;
        strategy_get_progress(u, &pr);
        lv.step = steps;
        ok = !strategy_step(u, &env, &err);
        if (mv->spec && mv->step == steps) mv_resolve_drafts(mv, f);
        made = pr.done;
        strategy_get_progress(u, &pr);
        made = pr.done - made;
        T_CHECK(ok && made >= 1 && mv->step == steps && mv->spec, "step %d: %s", steps, err.msg);
        mv_mark_pruned(mv, f);
        int32_t n_win = 0, n_tip = 0, bad = 0, live = 0, acc = 0, rej = 0, tip_row = -1;
        char txt[160], role[32];
        for (int32_t r = 0; r < mv->n_rows; r++) {
            const mv_row *row = &mv->rows[r];
            if (row->role == MV_ROLE_WINDOW) {
                n_win++;
                bad += row->pos != tip_pos + row->la_col + row->la_level || row->la_level < 0 ||
                       row->la_level > 1 || row->la_col < 0 || row->la_col > 2 || (row->la_level == 0 && row->la_col == 0);
                live += !row->gone;
                mv_row_text(mv, r, txt, sizeof txt, 80, false);
                snprintf(role, sizeof role, "la %d,%d", row->la_level, row->la_col);
                bad += !strstr(txt, role) || strstr(txt, "pruned") || !row->text[0];
            }
            if (row->role == MV_ROLE_TIP) n_tip++, tip_row = r, bad += row->pos != tip_pos || !row->want;
            acc += row->role == MV_ROLE_ACCEPTED, rej += row->role == MV_ROLE_REJECTED;
            bad += row->role == MV_ROLE_DRAFT || row->role == MV_ROLE_NONE; /* all resolved */
            bad += (row->role == MV_ROLE_ACCEPTED && row->gone && made > acc) || (row->role == MV_ROLE_REJECTED && !row->gone);
        }
        /* W = 3, N = 3: level 0 columns 1..2, level 1 columns 0..2 */
        T_CHECK(n_win == 5 && n_tip == 1 && live == 0 && bad == 0,
                "step %d: %d window rows at tip + i + l (5), 1 tip (%d), all pruned (%d live), %d bad", steps, n_win,
                n_tip, live, bad);
        T_CHECK(acc <= made && acc + 1 >= made, "step %d: %d drafts accepted, %d tokens", steps, acc, made);
        if (steps == 0) T_CHECK(tip_row == np - 1 && mv->rows[0].role == MV_ROLE_OTHER, "the prefill's rows: the prompt, then the tip");
        char hd[256];
        mv_header(mv, hd, sizeof hd, 200, false);
        if (acc + rej > 0) snprintf(txt, sizeof txt, "; %d/%d drafts accepted, 5 window", acc, acc + rej);
        else snprintf(txt, sizeof txt, "; no drafts, 5 window");
        T_CHECK(strstr(hd, txt) && !strstr(hd, "pruned since"), "header '%s'", hd);
        mv_legend(mv, txt, sizeof txt, 80, false);
        T_CHECK(strstr(txt, " role ") && !strstr(txt, "parent"), "legend '%s'", txt);
    }
    step_plan_free(&p);
    free(mv);
    strategy_free(u);
    forest_free(f);
}

/* Plain sampling's first n tokens after the prompt (one grown branch with sp's settings
 * and seed): what :draft at that temperature must give, draw for draw. false, with a
 * skip, when an end of text comes first. */
static bool sampled_ref(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np, const sample_params *sp,
                        int32_t n, int32_t *ref) {
    st_err err = {0};
    forest *f = forest_init(512, 0);
    step_plan p;
    step_plan_init(&p);
    strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.sample = *sp, o.budget = n, o.n_vocab = tok_n_vocab(tk);
    forest_add_root(f, prompt, NULL, np, 0, &o.from, &err);
    strategy *s = strategy_create(&o, &env, &err);
    while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) {}
    strategy_result r = {0};
    if (s) strategy_result_at(s, f, 0, &r);
    int32_t path[512], len = r.leaf != FOREST_NONE ? forest_path(f, r.leaf, path, 512) : 0;
    bool ok = np >= 0 && n >= 0 && len == np + n;
    if (ok) memcpy(ref, path + np, sizeof(int32_t) * (size_t)n);
    if (!ok) T_SKIP("sampling ends after %d of %d tokens: the sampled :draft is checked only when it runs %d", len - np, n, n);
    strategy_free(s);
    step_plan_free(&p);
    forest_free(f);
    return ok;
}

static void test_spec_runs(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 512)) goto out;
    /* a repetitive prompt, so that prompt lookup's drafts are accepted */
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play. "
                       "Once upon a time, there was a little girl named Lily. She";
    int32_t np = tok_encode(tk, text, strlen(text), true, false, NULL, 0), prompt[128], ref[64];
    T_CHECK(np > 0 && np <= 128, "prompt of %d tokens", np);
    tok_encode(tk, text, strlen(text), true, false, prompt, np);
    T_CHECK(t_greedy_linear(m, prompt, np, 48, ref), "linear greedy");
    for (int32_t i = 0; i < 48; i++)
        if (tok_is_eog(tk, ref[i])) {
            T_SKIP("greedy decoding ends early: the chains are checked only when it runs 48 tokens");
            goto out;
        }
    sample_params greedy = sample_default_params(), hot = greedy;
    greedy.temp = 0, hot.temp = 0.7f, hot.seed = 3;
    worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 40), &greedy, ref, 40, ":draft 40");
    worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 0), &greedy, ref, 32, ":draft (the budget, 32)");
    worker_run(c, tk, prompt, np, draft_job(3, 3, 2, 48), &greedy, ref, 48,
               ":lookahead 3 3 2 48");
    worker_run(c, tk, prompt, np, draft_job(5, 4, 4, 7), &greedy, ref, 7,
               ":lookahead 5 4 4 7 (a budget inside accepted drafts)");
    /* :set temp 0.7: plain sampling's tokens with the same settings and seed */
    int32_t hot_ref[64];
    if (sampled_ref(c, tk, prompt, np, &hot, 40, hot_ref)) {
        worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 40), &hot, hot_ref, 40, ":draft 40 at temp 0.7");
        worker_run(c, tk, prompt, np, draft_job(3, 3, 2, 40), &hot, hot_ref, 40, ":lookahead 3 3 2 40 at temp 0.7");
    }
    check_la_capture(c, tk, prompt, np);
    /* budgets 1..12 straight through the lookahead strategy: a step that accepts more tokens than
     * are left has the rest pruned again */
    int32_t trimmed = 0;
    for (int32_t budget = 1; budget <= 12; budget++) {
        forest *f = forest_init(512, 0);
        forest_id tip;
        forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
        strategy_opts o = strategy_default_opts(STRAT_LOOKAHEAD);
        o.from = tip, o.budget = budget, o.u.spec.p = ui_spec_params(5, 4, 4);
        step_plan p;
        step_plan_init(&p);
        strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
        strategy *u = strategy_create(&o, &env, &err);
        int32_t active = 1, steps = 0;
        st_code rc = u ? ST_OK : err.code;
        while (!rc && active && steps++ < 64) rc = strategy_step(u, &env, &err), active = !strategy_done(u);
        strategy_progress pr = {0};
        if (u) strategy_get_progress(u, &pr);
        T_CHECK(!rc && !active && pr.done == budget, "budget %d: %d tokens: %s", budget, u ? pr.done : -1, err.msg);
        if (u) trimmed += spec_get_stats(strategy_spec(u))->emitted > pr.done;
        char what[32];
        snprintf(what, sizeof what, "budget %d", budget);
        check_chain(f, prompt, np, ref, budget, what);
        step_plan_free(&p);
        strategy_free(u);
        forest_free(f);
    }
    T_CHECK(trimmed > 0, "some budget ended inside a step's accepted tokens (%d)", trimmed);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

int main(void) {
    test_ask_job();
    test_step_fills_next();
    test_worker_hosts();
    test_export_svg();
    test_spec_runs();
    return t_done();
}
