/* grow.c - sampling branches forward, one forest step per token. */
#include "grow.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

st_code grow_add(grow *g, const forest *f, forest_id from, const sample_params *sp,
                 int32_t budget, int32_t n_vocab, st_err *err) {
    if (!forest_get(f, from)) return st_set(err, ST_ERR_ARG, "the start node no longer exists");
    grow_branch *nb = realloc(g->br, sizeof *nb * (size_t)(g->n + 1));
    if (!nb) return st_set(err, ST_ERR_NOMEM, "out of memory");
    g->br = nb;
    grow_branch *b = &g->br[g->n];
    memset(b, 0, sizeof *b);
    b->start = b->leaf = from;
    b->budget = budget;
    b->done = budget <= 0;
    if (sampler_init(&b->smp, sp, n_vocab)) return st_set(err, ST_ERR_NOMEM, "out of memory");
    g->n++;
    if (!b->done) g->n_active++;
    return ST_OK;
}

st_code grow_init(grow *g, const forest *f, forest_id from, int32_t n, const sample_params *sp,
                  int32_t budget, int32_t n_vocab, st_err *err) {
    memset(g, 0, sizeof *g);
    for (int32_t i = 0; i < n; i++) {
        sample_params p = *sp;
        p.seed = sp->seed + (uint64_t)i;
        st_code rc = grow_add(g, f, from, &p, budget, n_vocab, err);
        if (rc) {
            grow_free(g);
            return rc;
        }
    }
    return ST_OK;
}

void grow_free(grow *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n; i++) sampler_free(&g->br[i].smp);
    free(g->br);
    memset(g, 0, sizeof *g);
}

/* log softmax(logits)[t] */
static float logprob_of(const float *logits, int32_t n, int32_t t) {
    float mx = logits[0];
    for (int32_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += exp((double)(logits[i] - mx));
    return (float)((double)(logits[t] - mx) - log(s));
}

st_code grow_step(grow *g, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                  grow_emit_fn emit, void *ud, int32_t *active, st_err *err) {
    st_code rc = step_forest(f, p, c, err);
    if (rc) return rc;
    int32_t V = p->n_vocab ? p->n_vocab : model_ctx_hparams(c)->n_vocab;
    /* sample every branch first, then append, so that branches sharing a leaf all read
     * that leaf's logits from this step */
    for (int32_t i = 0; i < g->n; i++) {
        grow_branch *b = &g->br[i];
        if (b->done) continue;
        const float *lg = step_logits_of(p, b->leaf);
        if (!lg) return st_set(err, ST_ERR_ARG, "branch %d: its leaf was not scored", i);
        int32_t t = sampler_sample(&b->smp, lg, V);
        float lp = logprob_of(lg, V, t);
        if (tk && tok_is_eog(tk, t)) {
            b->done = b->eog = true;
            forest_set_flags(f, b->leaf, FOREST_FINISHED, 0);
            g->n_active--;
            continue;
        }
        forest_id leaf;
        rc = forest_append(f, b->leaf, &t, &lp, 1, &leaf, err);
        if (rc) return rc;
        b->leaf = leaf;
        b->made++;
        if (emit) emit(ud, i, t, lp);
        if (b->made >= b->budget) {
            b->done = true;
            /* its last token stays pending and unscored until a later step computes it */
            forest_set_flags(f, leaf, FOREST_FINISHED | FOREST_NO_LOGITS, 0);
            g->n_active--;
        }
    }
    if (active) *active = g->n_active;
    return ST_OK;
}
