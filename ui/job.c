/* job.c - building jobs (job.h). */
#include "job.h"

#include "run_host.h"

ui_job ui_job_of(const strategy_ops *ops, forest_id node) {
    ui_job j = {.kind = UI_JOB_RUN, .node = node};
    strategy_opts *o = &j.u.run.opts;
    *o = strategy_opts_for(ops);
    o->from = node;
    o->budget = 0;
    const ui_run_host *h = ui_run_host_of(ops);
    if (h->defaults) h->defaults(o);
    return j;
}

ui_job ui_job_run(strategy_kind kind, forest_id node) { return ui_job_of(strategy_get(kind), node); }
