/* worker_run.c - the strategy a TUI job starts (worker_impl.h): its options completed
 * with what the worker owns, started as its run host row says (run_host.h: the inputs
 * only the worker can build), one forest step at a time through strategy.h, and the
 * "done" message when it ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "run_host.h"
#include "worker_impl.h"

void worker_run_stop(ui_worker *w) {
    double dt = mono_now_s() - w->t_job;
    if (w->run && dt > 0) w->last_tok_s = w->job_tokens / dt;
    if (w->run_owner) w->run_owner_free(w->run_owner); /* with its strategy */
    else strategy_free(w->run);
    w->run_owner = NULL;
    w->run = NULL;
    w->paused = w->pause_next = false;
}

/* Pauses at the end of the stage after the current one plus n - 1 more. */
static void pause_after(ui_worker *w, const strategy_progress *pr, int32_t n) {
    w->pause_next = true;
    w->pause_at = pr->stage + n;
}

void worker_run_pause(ui_worker *w) {
    strategy_progress pr;
    strategy_get_progress(w->run, &pr);
    if (!w->paused && pr.staged && !w->pause_next) {
        pause_after(w, &pr, 1);
        char m[96];
        snprintf(m, sizeof m, "%s %d", pr.stage_unit, (int)pr.stage + 1);
        say(w, "pausing at the end of %s (p again pauses now)", m);
        return;
    }
    w->paused = !w->paused;
    w->pause_next = false;
    say(w, "%s", w->paused ? "paused" : "resumed");
}

void worker_run_advance(ui_worker *w, int32_t n) {
    strategy_progress pr;
    strategy_get_progress(w->run, &pr);
    if (pr.staged) {
        pause_after(w, &pr, n);
        w->paused = false;
        char m[96];
        snprintf(m, sizeof m, "%d %s%s", (int)n, pr.stage_unit, n == 1 ? "" : "s");
        say(w, "stepping %s", m);
        return;
    }
    for (int32_t i = 0; i < n && w->run; i++) worker_run_step(w);
}

strategy_env worker_env(ui_worker *w) {
    return (strategy_env){.f = w->f, .plan = &w->plan, .ctx = w->ctx, .tk = w->tk};
}

/* A strategy job's options completed with what the worker owns (job.h). */
static strategy_opts job_opts(ui_worker *w, const ui_job *j) {
    strategy_opts o = j->u.run.opts;
    o.from = j->node;
    o.sample = w->sp;
    o.n_vocab = w->n_vocab;
    if (o.budget <= 0) o.budget = w->budget;
    return o;
}

/* The run host row of a job's strategy. */
static const ui_run_host *job_host(const ui_job *j) {
    const strategy_opts *o = &j->u.run.opts;
    return ui_run_host_of(o->ops ? o->ops : strategy_get(o->kind));
}

/* Bookkeeping once w->run is set: the rate's clock, the node to show. */
static void run_begin(ui_worker *w) {
    strategy_progress pr;
    strategy_get_progress(w->run, &pr);
    w->run_focus = pr.focus;
    if (pr.focus != FOREST_NONE) w->focus = pr.focus;
    w->t_job = mono_now_s();
    w->job_tokens = 0;
}

/* Text as a chat user turn under node, in the form the branch calls for (ask_margins.h):
 * its tokens (malloc'd), and what the form was into what. */
int32_t *worker_turn_tokens(ui_worker *w, forest_id node, const char *text, int32_t *n, char *what, size_t cap,
                            st_err *err) {
    int32_t np = node == FOREST_NONE ? 0 : forest_path(w->f, node, NULL, 0);
    int32_t *path = malloc(sizeof(int32_t) * (size_t)(np > 0 ? np : 1));
    if (!path) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (np > 0) forest_path(w->f, node, path, np);
    int form = ui_turn_form(w->tk, w->chat.kind, path, np > 0 ? np : 0);
    free(path);
    ui_turn_form_name(form, w->chat.kind, what, cap);
    return ui_turn_tokens(w->tk, &w->chat, text ? text : "", form, np <= 0, n, err);
}

/* The job's node is one its strategy can start from. Steps, merge and judge (of the
 * bookmarks) need none (the first tree may be gone); ask's FOREST_NONE starts a new
 * conversation. */
static st_code check_node(ui_worker *w, const ui_job *j, st_err *err) {
    const ui_run_host *h = job_host(j);
    if (h->any_node || forest_get(w->f, j->node)) return ST_OK;
    if (h->new_tree && j->node == FOREST_NONE) return ST_OK;
    return st_set(err, ST_ERR_ARG, h->new_tree ? "the selected node is gone" : "nothing selected");
}

st_code worker_run_create(ui_worker *w, const strategy_opts *o, st_err *err) {
    strategy_env env = worker_env(w);
    return (w->run = strategy_create(o, &env, err)) ? ST_OK : err->code;
}

/* A step with a branch selected also computes that branch end's next-token choices when
 * it has none: a grow that stopped left its last token pending without them (or a step
 * computed it without keeping them), and the alternatives pane shows "(next)" from them. */
static void want_choices(ui_worker *w, forest_id id) {
    const forest_node *nd = forest_get(w->f, id);
    if (!nd || forest_top_k(w->f) == 0 || forest_n_children(w->f, id) > 0 ||
        forest_topk(w->f, id, NULL, NULL, 0) > 0)
        return; /* nothing would be kept, not a branch end, or shown already */
    if (nd->state == FOREST_PENDING) forest_set_flags(w->f, id, 0, FOREST_NO_LOGITS);
    else forest_set_flags(w->f, id, FOREST_WANT_LOGITS, 0);
}

/* A job starting a strategy: refused while one runs, but for s while it is paused,
 * which advances it. */
st_code worker_run_start(ui_worker *w, const ui_job *j, st_err *err) {
    const ui_run_host *h = job_host(j);
    if (w->run && w->paused && h->advances) {
        worker_run_advance(w, j->u.run.opts.u.steps.n > 0 ? j->u.run.opts.u.steps.n : 1);
        return ST_OK;
    }
    if (w->run) return st_set(err, ST_ERR_ARG, "%s is running: cancel it first (x)", strategy_ops_of(w->run)->name);
    st_code rc = check_node(w, j, err);
    if (rc) return rc;
    strategy_opts o = job_opts(w, j);
    w->note[0] = '\0';
    if (h->advances) want_choices(w, j->node);
    rc = h->start ? h->start(w, j, &o, err) : worker_run_create(w, &o, err);
    if (rc) return rc;
    run_begin(w);
    /* each run draws the next seed, so runs differ; :set seed repeats one */
    w->run_seed = o.sample.seed;
    w->run_sampled = o.sample.temp > 0;
    w->sp.seed = sample_next_seed(w->sp.seed);
    return ST_OK;
}

/* The "done" message of the run that just ended: its results summed up as its table
 * says, then the job's note (or the run's own progress line). */
static void say_done(ui_worker *w) {
    char sum[320], seed[48] = "";
    strategy_summarize(w->run, w->f, w->tk, w->chat.kind != CHAT_NONE, sum, sizeof sum, w->note, sizeof w->note);
    if (w->run_sampled)
        snprintf(seed, sizeof seed, "%sseed %llu", w->note[0] ? "; " : "", (unsigned long long)w->run_seed);
    bool paren = w->note[0] || seed[0];
    snprintf(w->msg, sizeof w->msg, "done%s%s%s%s%s%s", sum[0] ? ": " : "", sum, paren ? " (" : "", w->note, seed,
             paren ? ")" : "");
    w->msg_no++;
}

/* The run's results as the forest's branches (strategy_settle: what the strategy dropped
 * goes), each with the score it gave (beam's), kept with its leaf as judge scores are. */
static void keep_results(ui_worker *w) {
    int32_t n = strategy_n_results(w->run);
    forest_id *leaves = malloc(sizeof *leaves * (size_t)(n > 0 ? n : 1));
    st_err err = {0};
    if (!leaves || strategy_settle(w->run, w->f, leaves, &err)) {
        say(w, "%s", leaves ? err.msg : "out of memory keeping the results");
        free(leaves);
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        strategy_result r;
        strategy_result_at(w->run, w->f, i, &r);
        if (leaves[i] != FOREST_NONE && isfinite(r.score) && !ui_scores_set(&w->judged, w->f, leaves[i], r.score))
            say(w, "%s", "out of memory keeping the scores");
    }
    free(leaves);
    w->n_scores = 0; /* the live list's leaves are results now, or gone */
}

/* After a step the strategy took: the statistics, the mask view, the scores, the
 * node to show, and its end. */
static void step_done(ui_worker *w, double ms) {
    strategy_progress pr;
    strategy_get_progress(w->run, &pr);
    /* a speculative step's view was captured inside the step, before its drafts were
     * pruned: now they read accepted or rejected */
    bool captured = w->mv->spec && w->mv->step == w->n_steps;
    if (captured) mv_resolve_drafts(w->mv, w->f);
    w->n_steps++;
    w->rows = w->plan.n_rows;
    w->step_ms = ms;
    w->job_tokens = (double)pr.tokens;
    if (w->plan.n_rows > 0 && !captured) mv_capture(w->mv, w->f, w->tk, &w->plan, w->n_steps - 1);
    if (w->plan.n_rows > 0 || captured) { /* kept for [ and ] (without memory: not kept) */
        mv_set_kind(w->mv, strategy_ops_of(w->run)->name);
        w->mv->rope_base = model_ctx_hparams(w->ctx)->rope_base; /* for :export's picture */
        w->mv->rope_dim = model_ctx_hparams(w->ctx)->rope_dim;
        mvh_push(&w->hist, w->mv);
    }
    /* judge scores stay with their nodes; a running beam's live ones are a list until its
     * results are kept (keep_results) */
    st_err err = {0};
    if (ui_run_host_of(strategy_ops_of(w->run))->judged) {
        if (ui_scores_take(&w->judged, w->f, w->run, &err)) say(w, "%s", err.msg);
    } else if (strategy_ops_of(w->run)->scores)
        w->n_scores = strategy_scores(w->run, w->score_leaf, w->score, UI_MAX_SCORES);
    if (pr.focus != w->run_focus && pr.focus != FOREST_NONE) w->focus = w->run_focus = pr.focus;
    bool active = !strategy_done(w->run);
    if (pr.tell && active) say(w, "%s", pr.text); /* e.g. tokens per step so far */
    if (active && w->pause_next && pr.staged && pr.stage >= w->pause_at) {
        w->paused = true;
        w->pause_next = false;
        char m[240];
        snprintf(m, sizeof m, "%s: paused; s steps one %s, p resumes, x stops here and keeps the tree", pr.text,
                 pr.stage_unit);
        say(w, "%s", m);
    }
    if (!active) {
        say_done(w);
        keep_results(w);
        worker_run_stop(w);
    }
}

/* One step of the running strategy, under the lock. A full KV cache pauses it (the
 * strategy is as it was: prune, then resume); another error ends it. */
void worker_run_step(ui_worker *w) {
    st_err err = {0};
    strategy_env env = worker_env(w);
    double t0 = mono_now_s();
    st_code rc = strategy_step(w->run, &env, &err);
    if (rc == ST_NO_KV_SLOT) {
        w->paused = true;
        say(w, "%s: prune something (d), then resume (p)", err.msg[0] ? err.msg : "the KV cache is full");
    } else if (rc) {
        say(w, "stopped: %s", err.msg[0] ? err.msg : st_str(rc));
        worker_run_stop(w);
    } else
        step_done(w, 1e3 * (mono_now_s() - t0));
    changed(w, true);
}

void worker_run_forget(ui_worker *w, const ui_prune_info *in) {
    strategy_forget(w->run, w->f);
    char m[200];
    snprintf(m, sizeof m, "pruned %d node%s (%d branch%s): %s goes on without %s", (int)in->nodes,
             in->nodes == 1 ? "" : "s", (int)in->branches, in->branches == 1 ? "" : "es",
             strategy_ops_of(w->run)->name, in->branches == 1 ? "it" : "them");
    say(w, "%s", m);
    if (!strategy_done(w->run)) return;
    say_done(w);
    keep_results(w);
    worker_run_stop(w);
}
