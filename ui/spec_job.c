/* spec_job.c - :draft and :lookahead for the worker (spec_job.h): the spec driver stepped
 * one forest step at a time, its stop rules, and the mask view of its steps. */
#include "spec_job.h"

#include <stdio.h>
#include <stdlib.h>

spec_params ui_spec_params(int32_t w, int32_t n, int32_t g) {
    spec_params sp = spec_default_params();
    sp.row_cost = UI_SPEC_ROW_COST;
    sp.logprobs = true; /* the forest and text panes show every token's probability */
    sp.la_adaptive = false; /* the mask pane shows the window at every step (teaching) */
    if (w > 0) {
        sp.la.w = w;
        sp.la.n = n;
        sp.la.g = g;
    }
    return sp;
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

/* The driver's observer: the step's plan with its drafts and window still in the forest. */
static void ui_spec_observe(void *ud, const spec *s, const forest *f, const step_plan *p) {
    ui_spec *u = ud;
    if (u->mv) ui_spec_capture(u->mv, s, f, u->tk, p, u->step_no);
}

ui_spec *ui_spec_start(forest *f, forest_id from, const spec_params *sp, int32_t budget, st_err *err) {
    if (!forest_get(f, from)) {
        st_set(err, ST_ERR_ARG, "the selected node is gone");
        return NULL;
    }
    if (budget < 1) {
        st_set(err, ST_ERR_ARG, "speculative decoding: the budget must be at least one token");
        return NULL;
    }
    ui_spec *u = calloc(1, sizeof *u);
    if (!u) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (!(u->s = spec_init(sp, f, from, err))) {
        free(u);
        return NULL;
    }
    if (!(u->out = malloc(sizeof(int32_t) * (size_t)spec_max_emit(u->s)))) {
        ui_spec_free(u);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    spec_set_observer(u->s, ui_spec_observe, u);
    u->sp = *sp;
    u->from = u->last = from;
    u->budget = budget;
    /* a leaf another strategy finished (or left without logits) is extended again */
    forest_set_flags(f, from, 0, FOREST_FINISHED | FOREST_NO_LOGITS);
    return u;
}

st_code ui_spec_step(ui_spec *u, forest *f, step_plan *p, model_ctx *c, const tok *tk, mask_view *mv,
                     int32_t step_no, int32_t *made_now, int32_t *active, st_err *err) {
    *made_now = 0;
    *active = !u->done;
    if (u->done) return ST_OK;
    u->mv = mv;
    u->tk = tk;
    u->step_no = step_no;
    int32_t k = 0;
    st_code rc = spec_step(u->s, f, p, c, u->out, &k, err);
    u->mv = NULL;
    if (rc) return rc;
    u->steps++;
    if (mv && mv->spec && mv->step == step_no) mv_resolve_drafts(mv, f);
    /* the stop rules over this step's tokens: an end-of-generation token is not kept,
     * and nothing past the budget is */
    int32_t cut = k;
    bool stop = false;
    for (int32_t i = 0; i < k && !stop; i++) {
        if (tk && tok_is_eog(tk, u->out[i])) {
            cut = i;
            u->eog = stop = true;
            break;
        }
        u->made++;
        (*made_now)++;
        if (u->made >= u->budget) cut = i + 1, stop = true;
    }
    u->last = spec_tip(u->s);
    if (stop) {
        if (cut < k) {
            /* the tokens are the path ending at the tip: out[cut] is k - 1 - cut above it */
            forest_id at = u->last;
            for (int32_t j = k - 1; j > cut; j--) at = forest_id_at(f, forest_get(f, at)->parent);
            u->last = forest_id_at(f, forest_get(f, at)->parent);
            forest_prune(f, at, NULL);
        }
        const forest_node *nd = forest_get(f, u->last);
        /* a pending last token stays unscored until a later step computes it (as grow) */
        uint8_t set = FOREST_FINISHED | (nd && nd->state == FOREST_PENDING ? FOREST_NO_LOGITS : 0);
        forest_set_flags(f, u->last, set, 0);
        u->done = true;
    }
    *active = !u->done;
    return ST_OK;
}

const char *ui_spec_describe(const ui_spec *u, char *buf, size_t cap) {
    char what[48];
    if (u->sp.la.w > 0) snprintf(what, sizeof what, "lookahead %d,%d,%d", u->sp.la.w, u->sp.la.n, u->sp.la.g);
    else snprintf(what, sizeof what, "draft");
    snprintf(buf, cap, "%s: %d token%s in %d step%s, %.2f tokens/step%s", what, u->made, u->made == 1 ? "" : "s",
             u->steps, u->steps == 1 ? "" : "s", u->steps ? (double)u->made / u->steps : 0.0,
             u->eog ? " (end of text)" : "");
    return buf;
}

int32_t ui_spec_running(const ui_spec *u, forest_id *out, int32_t cap) {
    if (u->done || cap < 1) return 0;
    out[0] = spec_tip(u->s);
    return 1;
}

void ui_spec_free(ui_spec *u) {
    if (!u) return;
    spec_free(u->s);
    free(u->out);
    free(u);
}
