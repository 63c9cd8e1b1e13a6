/* job.c - building jobs (job.h). */
#include "job.h"

#include "spec_job.h"

ui_job ui_job_run(strategy_kind kind, forest_id node) {
    ui_job j = {.kind = UI_JOB_RUN, .node = node};
    strategy_opts *o = &j.u.run.opts;
    *o = strategy_default_opts(kind);
    o->from = node;
    o->budget = 0;
    if (kind == STRAT_DRAFT || kind == STRAT_LOOKAHEAD)
        o->u.spec.p = ui_spec_params(o->u.spec.p.la.w, o->u.spec.p.la.n, o->u.spec.p.la.g);
    return j;
}
