/* spec_job.c - :draft and :lookahead's parameters and the mask view of their steps
 * (spec_job.h). */
#include "spec_job.h"

#include <stdio.h>
#include <stdlib.h>

spec_params ui_spec_params(int32_t w, int32_t n, int32_t g) {
    spec_params sp = spec_default_params();
    sp.logprobs = true; /* the forest and text panes show every token's probability */
    sp.la_adaptive = false; /* the mask pane shows the window at every step (teaching) */
    if (w > 0) {
        sp.la.w = w;
        sp.la.n = n;
        sp.la.g = g;
    }
    return sp;
}

void ui_spec_set_sampling(spec_params *p, const sample_params *sp) {
    p->samp = *sp;
    if (p->samp.temp < 0) p->samp.temp = 0;
}

void ui_spec_capture(mask_view *v, const spec *s, const forest *f, const tok *tk, const step_plan *p,
                     int32_t step) {
    mv_capture(v, f, tk, p, step);
    v->spec = true;
    for (int32_t r = 0; r < v->n_rows; r++) {
        int32_t l = 0, i = 0;
        int role = spec_node_role(s, v->rows[r].id, &l, &i);
        mv_set_role(v, r, role == SPEC_NODE_TIP ? MV_ROLE_TIP : role == SPEC_NODE_DRAFT ? MV_ROLE_DRAFT
                          : role == SPEC_NODE_WINDOW ? MV_ROLE_WINDOW : MV_ROLE_OTHER, l, i);
    }
}
