/* run_host.c - the TUI worker's row for each strategy that needs more than its options
 * (run_host.h), and the starts that build those inputs. */
#include "run_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ask_margins.h"
#include "judge_job.h"
#include "spec_job.h"
#include "worker_impl.h"

/* The spec driver's observer: the step's plan with its drafts and window still in the
 * forest, captured for the mask pane. */
static void spec_observe(void *ud, const spec *s, const forest *f, const step_plan *p) {
    ui_worker *w = ud;
    ui_spec_capture(w->mv, s, f, w->tk, p, w->n_steps);
}

/* :margins on node's branch about the question text: ui_margins builds the prompts and
 * owns the strategy. */
static void margins_owner_free(void *mg) { ui_margins_free(mg); }

static st_code start_margins(ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err) {
    int32_t chunk = j->u.run.chunk > 0 ? j->u.run.chunk : UI_MARGINS_CHUNK;
    ui_margins *mg = ui_margins_start(w->f, w->tk, j->node, j->text ? j->text : "", chunk, &w->chat, &w->sp,
                                      o->budget, w->n_vocab, err);
    if (!mg) return err->code;
    w->run = mg->s;
    w->run_owner = mg;
    w->run_owner_free = margins_owner_free;
    snprintf(w->note, sizeof w->note, "margins: %d note%s on %d-token chunks, then the answer",
             (int)mg->n_chunks, mg->n_chunks > 1 ? "s" : "", (int)chunk);
    say(w, "%s", w->note);
    return ST_OK;
}

/* :merge: the bookmarked nodes (at least two) are merged exactly (merge.h) under their
 * common ancestor; their bookmarks are cleared (they are used up) and the merged chain,
 * pending, is prefilled by the next step and grown by the budget. */
static st_code start_merge(ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err) {
    (void)j;
    forest_id marks[64];
    int32_t n = 0;
    for (int32_t i = forest_dfs_first(w->f); i >= 0 && n < 64; i = forest_dfs_next(w->f, i))
        if (forest_node_at(w->f, i)->flags & FOREST_BOOKMARK) marks[n++] = forest_id_at(w->f, i);
    if (n < 2) return st_set(err, ST_ERR_ARG, "merge needs two or more bookmarked branches (m marks one)");
    o->u.merge.leaves = marks;
    o->u.merge.n = n;
    if (worker_run_create(w, o, err)) return err->code;
    for (int32_t i = 0; i < n; i++) forest_set_flags(w->f, marks[i], 0, FOREST_BOOKMARK);
    char m[16];
    snprintf(m, sizeof m, "%d", (int)n);
    say(w, "merged %s branches: growing the merged text", m);
    return ST_OK;
}

/* A strategy that runs a judge (:judge, :tot): judge_job.h builds the judge's prompt and
 * picks the branches for a table that wants them. */
static st_code start_judge(ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err) {
    strategy_env env = worker_env(w);
    ui_judge_env je = {.tk = w->tk, .chat = &w->chat, .chat_on = w->chat_on};
    if (!(w->run = ui_judge_start(&env, &je, o, j->text, w->note, sizeof w->note, err))) return err->code;
    say(w, "%s", w->note);
    return ST_OK;
}

/* :ask: the text as a chat user turn under node, answered by the ask strategy; the form
 * the text took is said while it grows and after. */
static st_code start_ask(ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err) {
    char what[128];
    int32_t n, *t = worker_turn_tokens(w, j->node, j->text, &n, what, sizeof what, err);
    if (!t) return err->code;
    const int32_t *prompts[1] = {t};
    o->u.ask.prompts = prompts;
    o->u.ask.lens = &n;
    o->u.ask.n = 1;
    st_code rc = worker_run_create(w, o, err);
    free(t);
    if (rc) return rc;
    strategy_result r;
    strategy_result_at(w->run, w->f, 0, &r);
    w->focus = r.start; /* the turn's last node: the answer grows under it */
    snprintf(w->note, sizeof w->note, "ask: %s", what);
    say(w, "%s", w->note);
    return ST_OK;
}


/* :draft and :lookahead: the TUI's sampler as the drafts' target, the mask pane fed by
 * the observer, the row cost the TUI was started with. */
static st_code start_spec(ui_worker *w, const ui_job *j, strategy_opts *o, st_err *err) {
    (void)j;
    o->u.spec.observe = spec_observe;
    o->u.spec.observe_ud = w;
    ui_spec_set_sampling(&o->u.spec.p, &w->sp);
    if (w->row_cost > 0) o->u.spec.p.row_cost = w->row_cost;
    st_code rc = worker_run_create(w, o, err);
    if (!rc && w->sp.temp > 0) {
        char t[32];
        snprintf(t, sizeof t, "%g", (double)w->sp.temp);
        say(w, "exact speculative sampling at temp %s (:set temp 0 for greedy)", t);
    }
    return rc;
}

/* A job's spec parameters: the TUI's (every token's probability, a fixed window). */
static void spec_defaults(strategy_opts *o) {
    o->u.spec.p = ui_spec_params(o->u.spec.p.la.w, o->u.spec.p.la.n, o->u.spec.p.la.g);
}

static const ui_run_host hosts[] = {
    {.name = "step", .any_node = true, .advances = true},
    {.name = "merge", .any_node = true, .start = start_merge},
    {.name = "judge", .any_node = true, .judged = true, .start = start_judge},
    {.name = "ask", .new_tree = true, .start = start_ask},
    {.name = "margins", .start = start_margins},
    {.name = "draft", .defaults = spec_defaults, .start = start_spec},
    {.name = "lookahead", .defaults = spec_defaults, .start = start_spec},
};

const ui_run_host *ui_run_host_of(const strategy_ops *ops) {
    static const ui_run_host none = {0}, judged = {.judged = true, .start = start_judge};
    for (size_t i = 0; ops && i < sizeof hosts / sizeof hosts[0]; i++)
        if (!strcmp(hosts[i].name, ops->name)) return &hosts[i];
    return ops && ops->judge_setup ? &judged : &none;
}
