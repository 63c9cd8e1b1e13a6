/* margins.c - Writing in the Margins as a state machine over the forest (see margins.h). */
#include "strategy/margins.h"

#include <stdlib.h>
#include <string.h>

#include "forest/prefill.h"
#include "strategy/strategy_impl.h"

st_code margins_init(margins *m, forest *f, const int32_t *const *prompts, const int32_t *lens,
                     int32_t n_chunks, const sample_params *sp, int32_t note_tokens,
                     int32_t n_vocab, st_err *err) {
    memset(m, 0, sizeof *m);
    m->shared = m->answer_from = FOREST_NONE;
    if (n_chunks < 1) return st_set(err, ST_ERR_ARG, "margins: need at least one chunk");
    for (int32_t i = 0; i < n_chunks; i++)
        if (lens[i] < 1) return st_set(err, ST_ERR_ARG, "margins: chunk %d's prompt is empty", i);
    /* the longest common prefix, kept one token short of every prompt so that each
     * chunk's branch has a token of its own (its leaf then is not the shared node) */
    int32_t lcp = lens[0];
    for (int32_t i = 0; i < n_chunks; i++) {
        int32_t j = 0;
        while (j < lcp && j < lens[i] && prompts[i][j] == prompts[0][j]) j++;
        lcp = j;
        if (lcp > lens[i] - 1) lcp = lens[i] - 1;
    }
    const int32_t **rest = malloc(sizeof *rest * (size_t)n_chunks);
    int32_t *rlen = malloc(sizeof *rlen * (size_t)n_chunks);
    m->note_from = malloc(sizeof *m->note_from * (size_t)n_chunks);
    if (!rest || !rlen || !m->note_from) {
        free(rest), free(rlen), free(m->note_from);
        m->note_from = NULL;
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    for (int32_t i = 0; i < n_chunks; i++) rest[i] = prompts[i] + lcp, rlen[i] = lens[i] - lcp;
    st_code rc = prefill_prompts(f, prompts[0], lcp, rest, rlen, n_chunks, m->note_from, err);
    free(rest), free(rlen);
    if (rc) {
        free(m->note_from);
        memset(m, 0, sizeof *m);
        return rc;
    }
    m->n_chunks = n_chunks;
    m->n_shared = lcp;
    m->n_vocab = n_vocab;
    if (lcp > 0) { /* the shared node: the parent of chunk 0's first rest token */
        int32_t i = forest_index(m->note_from[0]);
        for (int32_t k = 1; k < lens[0] - lcp; k++) i = forest_node_at(f, i)->parent;
        m->shared = forest_id_at(f, forest_node_at(f, i)->parent);
    }
    for (int32_t i = 0; i < n_chunks && !rc; i++) {
        sample_params bp = *sp;
        bp.seed = sp->seed + (uint64_t)i;
        rc = grow_add(&m->notes, f, m->note_from[i], &bp, note_tokens, n_vocab, err);
    }
    if (rc) { /* undo the prompts */
        st_err ignore = {0};
        if (m->shared != FOREST_NONE) {
            forest_id root = m->shared;
            for (const forest_node *nd = forest_get(f, root); nd->parent >= 0; nd = forest_get(f, root))
                root = forest_id_at(f, nd->parent);
            forest_prune(f, root, &ignore);
        } else {
            for (int32_t i = 0; i < n_chunks; i++) {
                forest_id root = m->note_from[i];
                for (const forest_node *nd = forest_get(f, root); nd->parent >= 0; nd = forest_get(f, root))
                    root = forest_id_at(f, nd->parent);
                forest_prune(f, root, &ignore);
            }
        }
        margins_free(m);
        return rc;
    }
    m->phase = MARGINS_NOTES;
    return ST_OK;
}

void margins_free(margins *m) {
    if (!m) return;
    grow_free(&m->notes);
    grow_free(&m->answer);
    merge_gap_free(m->gap);
    free(m->note_from);
    memset(m, 0, sizeof *m);
    m->shared = m->answer_from = FOREST_NONE;
}

st_code margins_set_note_stop(margins *m, const char *const *stops, int32_t n, st_err *err) {
    return grow_set_stop(&m->notes, stops, n, err);
}

bool margins_done(const margins *m) { return m->phase == MARGINS_DONE; }

/* a + b + c + d + e (NULL parts skipped): malloc'd */
static char *cat5(const char *a, const char *b, const char *c, const char *d, const char *e) {
    const char *p[5] = {a, b, c, d, e};
    size_t n = 1;
    for (int i = 0; i < 5; i++) n += p[i] ? strlen(p[i]) : 0;
    char *s = malloc(n), *w = s;
    for (int i = 0; s && i < 5; i++)
        if (p[i]) w = stpcpy(w, p[i]);
    if (s) *w = '\0';
    return s;
}

char *margins_note_prompt(const char *question, const char *chunk, bool chat) {
    return chat ? cat5("Question: ", question, "\n\nHere is one part of a longer text:\n\n", chunk,
                       "\n\nWrite a short note with what this part says about the question. If it "
                       "says nothing about it, say so.")
                : cat5("Question: ", question, "\n\nText: ", chunk, "\n\nNote:");
}

char *margins_chunk_prompt(const tok *tk, const int32_t *ctx, int32_t n_ctx, int32_t chunk, int32_t i,
                           const char *question, bool chat) {
    int32_t at = i * chunk, len = n_ctx - at < chunk ? n_ctx - at : chunk;
    char *ct = tok_decode_str(tk, ctx + at, len);
    char *text = ct ? margins_note_prompt(question, ct, chat) : NULL;
    free(ct);
    return text;
}

char *margins_answer_prompt(const char *question, const char *notes, bool chat) {
    return chat ? cat5("Question: ", question, "\n\nNotes taken on the parts of a longer text:\n\n",
                       notes, "\n\nAnswer the question using the notes.")
                : cat5("Question: ", question, "\n\nNotes:\n", notes, "\n\nAnswer:");
}

/* One rope-gap step of the answer: what grow_step does, over merge_gap_step. */
static st_code gap_answer_step(margins *m, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                               grow_emit_fn emit, void *ud, st_err *err) {
    st_code rc = merge_gap_step(m->gap, f, p, c, err);
    if (rc) return rc;
    grow_branch *b = &m->answer.br[0];
    const float *lg = step_logits_of(p, b->leaf);
    if (!lg) return st_set(err, ST_ERR_ARG, "margins: the answer's leaf was not scored");
    const int32_t *hist;
    int32_t nh;
    if ((rc = grow_history(&m->answer, f, 0, &hist, &nh, err))) return rc;
    int32_t t = sampler_sample_hist(&b->smp, lg, p->n_vocab, hist, nh);
    return grow_accept(&m->answer, f, 0, t, step_logprob_of(p, b->leaf, t), tk, emit, ud, err);
}

typedef struct shift_ud {
    grow_emit_fn emit;
    void *ud;
    int32_t base;
} shift_ud;

static void shift_emit(void *ud, int32_t branch, int32_t token, float lp) {
    shift_ud *s = ud;
    if (s->emit) s->emit(s->ud, s->base + branch, token, lp);
}

st_code margins_step(margins *m, forest *f, step_plan *p, model_ctx *c, const tok *tk,
                     grow_emit_fn emit, void *ud, int32_t *active, st_err *err) {
    st_code rc = ST_OK;
    if (m->phase == MARGINS_NOTES) {
        rc = grow_step(&m->notes, f, p, c, tk, emit, ud, NULL, err);
        if (!rc && m->notes.n_active == 0) m->phase = MARGINS_READY;
        if (active) *active = m->notes.n_active;
    } else if (m->phase == MARGINS_ANSWER) {
        shift_ud s = {emit, ud, m->n_chunks};
        rc = m->gap ? gap_answer_step(m, f, p, c, tk, shift_emit, &s, err)
                    : grow_step(&m->answer, f, p, c, tk, shift_emit, &s, NULL, err);
        if (!rc && m->answer.n_active == 0) m->phase = MARGINS_DONE;
        if (active) *active = m->answer.n_active;
    } else if (active) {
        *active = 0;
    }
    return rc;
}

char *margins_note_text(const margins *m, const forest *f, const tok *tk, int32_t i, st_err *err) {
    if (i < 0 || i >= m->n_chunks) {
        st_set(err, ST_ERR_ARG, "margins: no note %d", i);
        return NULL;
    }
    return merge_branch_text(f, tk, m->note_from[i], m->notes.br[i].leaf, err);
}

/* The notes not pruned (margins_forget): their prompts' last nodes into from and their
 * leaves into leaves (n_chunks each), in order; returns how many. */
static int32_t live_notes(const margins *m, forest_id *from, forest_id *leaves) {
    int32_t n = 0;
    for (int32_t i = 0; i < m->n_chunks; i++)
        if (m->notes.br[i].leaf != FOREST_NONE) from[n] = m->note_from[i], leaves[n++] = m->notes.br[i].leaf;
    return n;
}

char *margins_notes_text(const margins *m, const forest *f, const tok *tk, const char *sep,
                         st_err *err) {
    forest_id *leaves = malloc(sizeof *leaves * (size_t)m->n_chunks * 2);
    if (!leaves) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int32_t n = live_notes(m, leaves + m->n_chunks, leaves);
    char *s = n > 0 ? merge_join_text(f, tk, leaves + m->n_chunks, leaves, n, sep, NULL, err) : NULL;
    if (n == 0) st_set(err, ST_ERR_ARG, "margins: every note was pruned");
    free(leaves);
    return s;
}

void margins_forget(margins *m, const forest *f) {
    grow_forget(&m->notes, f);
    grow_forget(&m->answer, f);
    int32_t live = 0;
    for (int32_t i = 0; i < m->n_chunks; i++) live += m->notes.br[i].leaf != FOREST_NONE;
    if (m->phase == MARGINS_NOTES && m->notes.n_active == 0) m->phase = MARGINS_READY;
    if (m->phase == MARGINS_READY && live == 0) m->phase = MARGINS_DONE; /* nothing to answer from */
    if (m->phase != MARGINS_ANSWER) return;
    m->answer_cut = m->answer.n_active > 0 && m->gap && live < m->n_gap_notes;
    if (m->answer.n_active == 0 || m->answer_cut) m->phase = MARGINS_DONE;
}

st_code margins_answer(margins *m, forest *f, const int32_t *tokens, int32_t n,
                       const sample_params *sp, int32_t budget, st_err *err) {
    if (m->phase != MARGINS_READY)
        return st_set(err, ST_ERR_ARG, "margins: the answer starts once every note is done");
    /* how much of the shared prefix the answer prompt starts with */
    int32_t *pre = malloc(sizeof(int32_t) * (size_t)(m->n_shared > 0 ? m->n_shared : 1));
    if (!pre) return st_set(err, ST_ERR_NOMEM, "out of memory");
    if (m->n_shared > 0) forest_path(f, m->shared, pre, m->n_shared);
    int32_t k = 0;
    while (k < m->n_shared && k < n && tokens[k] == pre[k]) k++;
    free(pre);
    if (k == n) return st_set(err, ST_ERR_ARG, "margins: the answer prompt adds nothing after the shared prefix");
    forest_id last;
    st_code rc;
    if (k == 0) {
        rc = forest_add_root(f, tokens, NULL, n, 0, &last, err);
    } else {
        int32_t i = forest_index(m->shared);
        for (int32_t d = m->n_shared; d > k; d--) i = forest_node_at(f, i)->parent;
        rc = forest_append(f, forest_id_at(f, i), tokens + k, NULL, n - k, &last, err);
    }
    if (rc) return rc;
    if ((rc = grow_add(&m->answer, f, last, sp, budget, m->n_vocab, err))) {
        st_err ignore = {0};
        int32_t top = forest_index(last);
        for (int32_t d = 1; d < n - k; d++) top = forest_node_at(f, top)->parent;
        forest_prune(f, forest_id_at(f, top), &ignore);
        return rc;
    }
    m->answer_from = last;
    m->phase = MARGINS_ANSWER;
    return ST_OK;
}

st_code margins_answer_gap(margins *m, forest *f, step_plan *p, model_ctx *c,
                           const int32_t *tail, int32_t n, int32_t gap,
                           const sample_params *sp, int32_t budget, st_err *err) {
    if (m->phase != MARGINS_READY)
        return st_set(err, ST_ERR_ARG, "margins: the answer starts once every note is done");
    st_code rc;
    if (forest_n_pending(f) > 0 && (rc = step_forest(f, p, c, err))) return rc;
    forest_id *leaves = malloc(sizeof *leaves * (size_t)m->n_chunks * 2), last;
    if (!leaves) return st_set(err, ST_ERR_NOMEM, "out of memory");
    m->n_gap_notes = live_notes(m, leaves + m->n_chunks, leaves);
    m->gap = merge_gap_init(f, leaves, m->n_gap_notes, gap, tail, n, &last, err);
    free(leaves);
    if (!m->gap) return err->code;
    if ((rc = grow_add(&m->answer, f, last, sp, budget, m->n_vocab, err))) {
        st_err ignore = {0};
        forest_prune(f, merge_gap_first(m->gap), &ignore);
        merge_gap_free(m->gap);
        m->gap = NULL;
        return rc;
    }
    m->answer_from = last;
    m->phase = MARGINS_ANSWER;
    return ST_OK;
}

/* ---- the strategy table (strategy.h) ----
 * Writing in the Margins (margins.h) behind the strategy interface (strategy.h): the
 * notes grow together; when the last is done, the answer's prompt (from the caller's
 * callback, around the notes' text) is added and the answer grows. Results: note i is
 * result i, the answer result n_chunks (once it has started). */

typedef struct margins_run {
    margins m;
    sample_params answer_sp; /* seed + the number of chunks */
    int32_t answer_budget, gap, steps, goal;
    strategy_answer_fn answer;
    void *answer_ud;
} margins_run;

static void margins_run_free(void *self) {
    margins_run *r = self;
    if (!r) return;
    margins_free(&r->m);
    free(r);
}

static void *margins_run_create(const strategy_opts *o, const strategy_env *env, st_err *err) {
    margins_run *r = strat_calloc(sizeof *r, err);
    if (!r) return NULL;
    int32_t n = o->u.margins.n_chunks;
    if (margins_init(&r->m, env->f, o->u.margins.prompts, o->u.margins.lens, n, &o->sample, o->budget,
                     o->n_vocab, err) ||
        (o->n_stops > 0 && margins_set_note_stop(&r->m, o->stops, o->n_stops, err))) {
        margins_run_free(r);
        return NULL;
    }
    r->answer_sp = o->sample;
    r->answer_sp.seed = o->sample.seed + (uint64_t)n;
    r->answer_budget = o->u.margins.answer_budget > 0 ? o->u.margins.answer_budget : o->budget;
    r->gap = o->u.margins.gap;
    r->goal = o->budget + r->answer_budget;
    r->answer = o->u.margins.answer;
    r->answer_ud = o->u.margins.answer_ud;
    return r;
}

/* The answer's prompt, once every note is done. */
static st_code start_answer(margins_run *r, const strategy_env *env, st_err *err) {
    char *notes = margins_notes_text(&r->m, env->f, env->tk, "\n\n", err);
    if (!notes) return err->code;
    int32_t n = 0, *t = r->answer(r->answer_ud, notes, &n, err);
    free(notes);
    if (!t) return err->code ? err->code : st_set(err, ST_ERR_ARG, "margins: no answer prompt");
    st_code rc = r->gap < 0 ? margins_answer(&r->m, env->f, t, n, &r->answer_sp, r->answer_budget, err)
                            : margins_answer_gap(&r->m, env->f, env->plan, env->ctx, t, n, r->gap,
                                                 &r->answer_sp, r->answer_budget, err);
    free(t);
    return rc;
}

static bool margins_run_done(const void *self) {
    const margins_run *r = self;
    return r->m.phase == MARGINS_DONE || (r->m.phase == MARGINS_READY && !r->answer);
}

static st_code margins_run_step(void *self, const strategy_env *env, st_err *err) {
    margins_run *r = self;
    if (margins_run_done(r)) return ST_OK;
    st_code rc = margins_step(&r->m, env->f, env->plan, env->ctx, env->tk, env->emit, env->emit_ud, NULL, err);
    if (rc) return rc;
    r->steps++;
    if (r->m.phase == MARGINS_READY && r->answer) rc = start_answer(r, env, err);
    return rc;
}

static void margins_run_progress(const void *self, strategy_progress *out) {
    const margins_run *r = self;
    out->done = r->steps;
    out->goal = r->goal;
    out->focus = r->m.phase == MARGINS_NOTES ? r->m.note_from[0] : r->m.answer_from;
}

static int32_t margins_run_n_results(const void *self) {
    const margins_run *r = self;
    return r->m.n_chunks + (r->m.answer.n > 0);
}

static void margins_run_result(const void *self, const forest *f, int32_t i, strategy_result *out) {
    (void)f;
    const margins_run *r = self;
    if (i < r->m.n_chunks) strat_grow_result(&r->m.notes, i, out);
    else strat_grow_result(&r->m.answer, 0, out);
    if (i == r->m.n_chunks && r->m.answer_cut) out->end = STRAT_END_PRUNED, out->leaf = FOREST_NONE;
}

static void margins_run_forget(void *self, const forest *f) { margins_forget(&((margins_run *)self)->m, f); }

static int32_t margins_run_running(const void *self, forest_id *out, int32_t cap) {
    const margins_run *r = self;
    const grow *g = r->m.phase == MARGINS_NOTES ? &r->m.notes : r->m.phase == MARGINS_ANSWER ? &r->m.answer : NULL;
    return g ? strat_grow_running(g, out, cap) : 0;
}

const strategy_ops strat_margins_ops = {
    .name = "margins",
    .kind = STRAT_MARGINS,
    .summary = STRAT_SUM_NONE,
    .create = margins_run_create,
    .step = margins_run_step,
    .done = margins_run_done,
    .progress = margins_run_progress,
    .n_results = margins_run_n_results,
    .result = margins_run_result,
    .running = margins_run_running,
    .forget = margins_run_forget,
    .free = margins_run_free,
};

const struct margins *strategy_margins(const strategy *s) {
    return strategy_ops_of(s) == &strat_margins_ops ? &((const margins_run *)strategy_state(s))->m : NULL;
}
