/* test_beam.c - beam search over the shared-KV forest against a reference beam search that
 * scores every hypothesis by decoding its whole token path linearly in its own context.
 *
 * The reference (written here, independently of engine/strategy/beam.c) follows the same published
 * rules (beam.h): 2B candidates per hypothesis, candidates ordered by cumulative sum then
 * hypothesis index then token id, end tokens ranked below B finish a hypothesis, the
 * finished list is transformers' BeamHypotheses, and the three early-stopping modes.
 * Since a forest leaf's logits are bitwise those of linear decoding, the two searches
 * must return the same hypotheses with the same scores, exactly. Checked on random-weight
 * models (no end token, and an end token chosen so that hypotheses do end) and on
 * stories260K with its tokenizer's EOS, for several widths, length penalties and stop
 * modes. After every step: forest invariants, rows = live hypotheses, and KV slots in use
 * = prompt + distinct computed prefixes of the live hypotheses (no copies, nothing
 * leaked). B = 1 equals greedy decoding. The CLI (when built): `beam` says "ended by
 * budget" as generate and cot do, and `generate --branches` prints each branch after the
 * prompt, as plain generate does; a mistyped option prints the error and one usage line. */
#include "strategy/beam.h"
#include "convert/mkmodel.h"
#include "forest/sample.h"
#include "t.h"
#include "t_model.h"
#include "t_run.h"

#define MAXLEN 512

/* ---- the reference ---- */

typedef struct rhyp {
    int32_t t[MAXLEN];
    int32_t n;
    double sum, score;
    uint64_t seq;
} rhyp;

typedef struct rcand {
    double sum;
    int32_t beam, token;
} rcand;

static int rcand_cmp(const void *pa, const void *pb) {
    const rcand *a = pa, *b = pb;
    if (a->sum != b->sum) return a->sum > b->sum ? -1 : 1;
    if (a->beam != b->beam) return a->beam - b->beam;
    return a->token - b->token;
}

typedef struct ridx {
    float lp;
    int32_t id;
} ridx;

static int ridx_cmp(const void *pa, const void *pb) {
    const ridx *a = pa, *b = pb;
    if (a->lp != b->lp) return a->lp > b->lp ? -1 : 1;
    return a->id - b->id;
}

/* transformers' BeamHypotheses.add, literally: append; when over B, delete the lowest
 * (score, index) pair. */
static void rfin_add(rhyp *fin, int32_t *n_fin, int32_t B, const rhyp *h, float alpha) {
    double score = h->sum / pow((double)h->n, (double)alpha);
    double worst = 1e300;
    for (int32_t i = 0; i < *n_fin; i++) worst = fin[i].score < worst ? fin[i].score : worst;
    if (*n_fin == B && !(score > worst)) return;
    fin[*n_fin] = *h;
    fin[*n_fin].score = score;
    (*n_fin)++;
    if (*n_fin > B) {
        int32_t w = 0;
        for (int32_t i = 1; i < *n_fin; i++)
            if (fin[i].score < fin[w].score) w = i;
        memmove(&fin[w], &fin[w + 1], sizeof *fin * (size_t)(*n_fin - 1 - w));
        (*n_fin)--;
    }
}

typedef struct rres {
    rhyp *fin;
    int32_t n;
} rres;

static bool ris_end(const tok *tk, int32_t eos, int32_t t) {
    return t == eos || (tk && tok_is_eog(tk, t));
}

static void reference(model_ctx *lc, const int32_t *prompt, int32_t P, const beam_params *bp,
                      const tok *tk, int32_t V, rres *out) {
    int32_t B = bp->width, K = 2 * B;
    rhyp *live = calloc((size_t)B, sizeof *live), *next = calloc((size_t)B, sizeof *next);
    rhyp *fin = calloc((size_t)B + 1, sizeof *fin);
    rcand *cand = malloc(sizeof *cand * (size_t)(B * K));
    ridx *all = malloc(sizeof *all * (size_t)V);
    float *lg = malloc(sizeof(float) * (size_t)V), *lsm = malloc(sizeof(float) * (size_t)V);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(P + MAXLEN));
    int32_t n_live = 1, n_fin = 0;
    uint64_t nseq = 0;
    bool done = bp->max_tokens == 0;
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    for (int32_t cur = 0; !done; cur++) {
        int32_t nc = 0;
        for (int32_t i = 0; i < n_live; i++) {
            /* the whole path, from scratch */
            memcpy(seq + P, live[i].t, sizeof(int32_t) * (size_t)live[i].n);
            st_err err = {0};
            T_CHECK(model_forward_linear(lc, seq, P + live[i].n, 0, lg, &err) == ST_OK, "ref: %s",
                    err.msg);
            sample_log_softmax(lg, V, lsm);
            for (int32_t t = 0; t < V; t++) all[t] = (ridx){lsm[t], t};
            qsort(all, (size_t)V, sizeof *all, ridx_cmp);
            for (int32_t j = 0; j < K && j < V; j++)
                cand[nc++] = (rcand){live[i].sum + (double)all[j].lp, i, all[j].id};
        }
        qsort(cand, (size_t)nc, sizeof *cand, rcand_cmp);
        int32_t n_next = 0;
        for (int32_t r = 0; r < nc && r < K; r++) {
            rhyp h = live[cand[r].beam];
            h.t[h.n++] = cand[r].token;
            h.sum = cand[r].sum;
            if (ris_end(tk, bp->eos, cand[r].token)) {
                if (r < B) {
                    h.seq = nseq++;
                    rfin_add(fin, &n_fin, B, &h, bp->alpha);
                }
                continue;
            }
            next[n_next++] = h;
            if (n_next == B) break;
        }
        int32_t len = cur + 1;
        if (n_next == 0) done = true;
        if (n_fin == B) {
            double worst = 1e300;
            for (int32_t i = 0; i < n_fin; i++) worst = fin[i].score < worst ? fin[i].score : worst;
            if (bp->early_stopping == BEAM_STOP_EARLY) done = true;
            else if (bp->early_stopping == BEAM_STOP_HEURISTIC)
                done = done || worst >= cand[0].sum / pow((double)len, (double)bp->alpha);
            else
                done = done || worst >= cand[0].sum / pow((double)(bp->alpha > 0 ? bp->max_tokens : len),
                                                          (double)bp->alpha);
        }
        memcpy(live, next, sizeof *live * (size_t)n_next);
        n_live = n_next;
        if (!done && len >= bp->max_tokens) {
            for (int32_t i = 0; i < n_live; i++) {
                live[i].seq = nseq++;
                rfin_add(fin, &n_fin, B, &live[i], bp->alpha);
            }
            done = true;
        }
    }
    /* best first; equal scores in the order they were added (insertion sort is stable) */
    for (int32_t i = 1; i < n_fin; i++) {
        rhyp h = fin[i];
        int32_t j = i;
        while (j > 0 && fin[j - 1].score < h.score) {
            fin[j] = fin[j - 1];
            j--;
        }
        fin[j] = h;
    }
    out->fin = fin;
    out->n = n_fin;
    free(live), free(next), free(cand), free(all), free(lg), free(lsm), free(seq);
}

/* ---- the forest search, with its per-step checks ---- */


/* Distinct prefixes of lengths 1..n-1 among the live hypotheses' generated tokens: the
 * computed nodes below the prompt (each hypothesis's last token is still pending). */
static int32_t distinct_prefixes(int32_t (*g)[MAXLEN], int32_t n_live, int32_t n) {
    int32_t count = 0;
    for (int32_t len = 1; len < n; len++)
        for (int32_t i = 0; i < n_live; i++) {
            bool seen = false;
            for (int32_t j = 0; j < i && !seen; j++)
                seen = !memcmp(g[i], g[j], sizeof(int32_t) * (size_t)len);
            count += !seen;
        }
    return count;
}

static void run_case(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                     const beam_params *bp, const char *name) {
    int32_t V = m->hp.n_vocab, n_slots = 1024;
    char what[200];
    snprintf(what, sizeof what, "%s B=%d n=%d alpha=%g stop=%d eos=%d", name, bp->width,
             bp->max_tokens, (double)bp->alpha, bp->early_stopping, bp->eos);
    model_ctx *c = t_new_ctx(m, n_slots), *lc = t_new_ctx(m, n_slots);
    forest *f = forest_init(n_slots, 0);
    step_plan plan;
    step_plan_init(&plan);
    st_err err = {0};
    forest_id last;
    forest_add_root(f, prompt, NULL, P, 0, &last, &err);
    beam *b = beam_init(f, last, bp, tk, V, &err);
    T_CHECK(b != NULL, "%s: init: %s", what, err.msg);
    if (!b) return;
    int32_t(*g)[MAXLEN] = malloc(sizeof *g * (size_t)bp->width);
    int32_t *path = malloc(sizeof(int32_t) * MAXLEN);
    bool inv = true, rows = true, kv = true;
    while (!beam_done(b)) {
        int32_t before = beam_n_live(b), steps = beam_steps(b);
        st_code rc = beam_step(b, f, &plan, c, &err);
        if (rc) {
            T_CHECK(0, "%s: step: %s", what, err.msg);
            break;
        }
        inv = inv && forest_check(f, &err) == ST_OK;
        if (steps > 0) rows = rows && plan.n_rows == before;
        int32_t L = beam_cur_len(b), nl = beam_n_live(b);
        for (int32_t i = 0; i < nl; i++) {
            int32_t len = forest_path(f, beam_live_leaf(b, i), path, MAXLEN);
            memcpy(g[i], path + len - L, sizeof(int32_t) * (size_t)L);
        }
        int32_t want = P + distinct_prefixes(g, nl, L), used = kv_alloc_used(forest_kv(f));
        if (used != want) {
            fprintf(stderr, "%s step %d: %d slots used, %d expected\n", what, beam_steps(b), used,
                    want);
            kv = false;
        }
    }
    T_CHECK(inv, "%s: forest invariants after every step (%s)", what, err.msg);
    T_CHECK(rows, "%s: each step computes exactly the live hypotheses", what);
    T_CHECK(kv, "%s: KV slots = prompt + distinct tokens of the live hypotheses", what);

    rres ref;
    reference(lc, prompt, P, bp, tk, V, &ref);
    bool same = ref.n == beam_n_results(b);
    int32_t ended = 0;
    for (int32_t i = 0; i < ref.n && same; i++) {
        const beam_hyp *h = beam_result(b, i);
        same = h->n == ref.fin[i].n && h->score == ref.fin[i].score && h->sum == ref.fin[i].sum &&
               !memcmp(h->tokens, ref.fin[i].t, sizeof(int32_t) * (size_t)h->n);
        ended += h->ended;
        if (!same)
            fprintf(stderr, "%s: result %d: forest n=%d score %.9g, reference n=%d score %.9g\n",
                    what, i, h->n, h->score, ref.fin[i].n, ref.fin[i].score);
    }
    T_CHECK(same, "%s: results equal the linear reference (%d vs %d hypotheses)", what,
            beam_n_results(b), ref.n);
    if (getenv("MD_VERBOSE"))
        fprintf(stderr, "%s: %d steps, %d results (%d ended), best %.4f\n", what, beam_steps(b),
                beam_n_results(b), ended, beam_n_results(b) ? beam_result(b, 0)->score : 0.0);

    /* B = 1 with no end tokens is greedy decoding */
    if (bp->width == 1 && bp->eos < 0 && !tk && beam_n_results(b) == 1) {
        int32_t seq[MAXLEN];
        float *lg = malloc(sizeof(float) * (size_t)V);
        memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
        bool eq = true;
        for (int32_t i = 0; i < bp->max_tokens && eq; i++) {
            model_forward_linear(lc, seq, P + i, 0, lg, &err);
            seq[P + i] = sample_argmax(lg, V);
            eq = seq[P + i] == beam_result(b, 0)->tokens[i];
        }
        T_CHECK(eq, "%s: width 1 equals greedy decoding", what);
        free(lg);
    }
    free(ref.fin), free(g), free(path);
    beam_free(b);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

/* The greedy token after `steps` greedy tokens of the prompt: a top candidate there, so
 * as an end token it makes hypotheses finish. */
static int32_t greedy_token(const model *m, const int32_t *prompt, int32_t P, int32_t steps) {
    model_ctx *c = t_new_ctx(m, 64);
    int32_t V = m->hp.n_vocab, seq[64];
    float *lg = malloc(sizeof(float) * (size_t)V);
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    st_err err = {0};
    for (int32_t i = 0; i <= steps; i++) {
        model_forward_linear(c, seq, P + i, 0, lg, &err);
        seq[P + i] = sample_argmax(lg, V);
    }
    free(lg);
    model_ctx_free(c);
    return seq[P + steps];
}

static void test_errors(const model *m) {
    forest *f = forest_init(64, 0);
    model_ctx *c = t_new_ctx(m, 64);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t toks[3] = {1, 5, 9};
    forest_id last;
    forest_add_root(f, toks, NULL, 3, 0, &last, &err);
    step_forest(f, &p, c, &err);
    beam_params bp = beam_default_params();
    bp.width = 3;
    bp.max_tokens = 6;
    /* a computed start node is re-scored by the first step: the same search as from a fresh
     * pending prompt in another forest */
    beam_hyp got[2] = {{0}}, want = {0};
    for (int pass = 0; pass < 2; pass++) {
        forest *g = pass ? forest_init(64, 0) : f;
        model_ctx *gc = pass ? t_new_ctx(m, 64) : c; /* its own cache: g's slots overlap f's */
        forest_id from = last;
        if (pass) forest_add_root(g, toks, NULL, 3, 0, &from, &err);
        beam *b = beam_init(g, from, &bp, NULL, m->hp.n_vocab, &err);
        T_CHECK(b != NULL, "beam from a %s start node: %s", pass ? "pending" : "computed", err.msg);
        while (b && !beam_done(b) && beam_step(b, g, &p, gc, &err) == ST_OK) {}
        if (b && beam_n_results(b) > 0) (pass ? &want : &got[0])->score = beam_result(b, 0)->score;
        if (b && beam_n_results(b) > 0) (pass ? &want : &got[0])->n = beam_result(b, 0)->n;
        beam_free(b);
        if (pass) forest_free(g), model_ctx_free(gc);
    }
    T_CHECK(got[0].n > 0 && got[0].n == want.n && got[0].score == want.score,
            "beam from a computed node = from a pending one (score %g vs %g)", got[0].score,
            want.score);
    forest_add_root(f, toks, NULL, 3, 0, &last, &err);
    bp.width = 0;
    T_CHECK(beam_init(f, last, &bp, NULL, m->hp.n_vocab, &err) == NULL && err.code == ST_ERR_ARG,
            "width 0 is refused");
    bp = beam_default_params();
    bp.max_tokens = 0;
    beam *b = beam_init(f, last, &bp, NULL, m->hp.n_vocab, &err);
    T_CHECK(b && beam_done(b) && beam_n_results(b) == 0, "max_tokens 0: done, no results");
    beam_free(b);
    beam_free(NULL);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

/* The wording and the prompt of the CLI's multi-result outputs, on stories260K. */
static void test_cli_words(const char *model_path) {
    char bin[512];
    snprintf(bin, sizeof bin, "%s/multidecode", getenv("BUILD") ? getenv("BUILD") : "build");
    if (access(bin, X_OK)) {
        T_MISSING("no %s", bin);
        return;
    }
    int st;
    char *out = t_runf(&st, "%s beam -m %s -p 'Once upon a time' -n 8 -q", bin, model_path);
    T_CHECK(st == 0 && strstr(out, "ended by budget") && !strstr(out, "length"), "beam: %.200s", out);
    free(out);
    out = t_runf(&st, "%s generate -m %s -p 'Once upon a time' -n 8 --temp 0 -q --branches 2", bin, model_path);
    T_CHECK(st == 0 && strstr(out, "ended by budget)\nOnce upon a time, there") &&
                strstr(strstr(out, "--- branch 1"), "\nOnce upon a time, there"),
            "generate --branches shows the prompt: %.300s", out);
    free(out);
    /* a mistyped option: the error, one usage line and where the help is (not 40 lines
       of help with the error scrolled away at the top) */
    const char *cmds[] = {"beam", "cot", "generate", "session", "tui", "ask", "margins", "plan",
                          "info", "mkmodel", "bench decode", "bench attention", "bench forest",
                          "bench ask", "bench spec"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        out = t_runf(&st, "%s %s --bogus 2>&1", bin, cmds[i]);
        int lines = 0;
        for (const char *c = out; *c; c++) lines += *c == '\n';
        char see[64];
        snprintf(see, sizeof see, "see multidecode %s --help", cmds[i]);
        T_CHECK(st == 2 && lines == 2 && strstr(out, "unrecognized option '--bogus'") && strstr(out, "usage: ") &&
                    strstr(out, see),
                "%s --bogus: exit %d, %d lines: %.300s", cmds[i], st, lines, out);
        free(out);
    }
}

int main(void) {
    mkmodel_params mp = mkmodel_default_params();
    mp.n_ctx = 1024;
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (m) {
        test_errors(m);
        int32_t prompt[6] = {1, 300, 17, 42, 260, 99};
        /* end: -1 none, else the greedy token after that many greedy steps */
        struct { int32_t B, n; float alpha; int32_t stop, end; } cases[] = {
            {1, 12, 1.0f, BEAM_STOP_HEURISTIC, -1}, {2, 12, 1.0f, BEAM_STOP_HEURISTIC, 1},
            {4, 12, 1.0f, BEAM_STOP_EARLY, 2},      {4, 12, 0.0f, BEAM_STOP_HEURISTIC, 1},
            {3, 10, 2.0f, BEAM_STOP_NEVER, 2},      {8, 10, 1.0f, BEAM_STOP_HEURISTIC, -1},
            {8, 10, -0.5f, BEAM_STOP_NEVER, 3},     {5, 14, 1.0f, BEAM_STOP_EARLY, 1},
            {4, 12, 1.0f, BEAM_STOP_HEURISTIC, 0},  {1, 12, 1.0f, BEAM_STOP_EARLY, 1},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            beam_params bp = beam_default_params();
            bp.width = cases[i].B;
            bp.max_tokens = cases[i].n;
            bp.alpha = cases[i].alpha;
            bp.early_stopping = cases[i].stop;
            bp.eos = cases[i].end >= 0 ? greedy_token(m, prompt, 6, cases[i].end) : -1;
            run_case(m, NULL, prompt, 6, &bp, "random tiny");
        }
        model_free(m);
    }
    const char *sp = t_shared("models/stories260K.gguf");
    if (!sp) {
        T_MISSING("stories260K fixture absent");
        return t_done();
    }
    test_cli_words(sp);
    m = model_load(sp, &err);
    T_CHECK(m != NULL, "stories260K: %s", err.msg);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(tk != NULL, "stories260K tokenizer: %s", err.msg);
    if (m && tk) {
        int32_t prompt[64];
        const char *text = "Once upon a time, there was a little girl named Lily. She";
        int32_t P = tok_encode(tk, text, strlen(text), true, false, prompt, 64);
        struct { int32_t B, n; float alpha; int32_t stop; } cases[] = {
            {4, 24, 1.0f, BEAM_STOP_HEURISTIC}, {8, 16, 0.5f, BEAM_STOP_EARLY},
            {2, 40, 1.0f, BEAM_STOP_NEVER},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            beam_params bp = beam_default_params();
            bp.width = cases[i].B;
            bp.max_tokens = cases[i].n;
            bp.alpha = cases[i].alpha;
            bp.early_stopping = cases[i].stop;
            run_case(m, tk, prompt, P, &bp, "stories260K");
        }
        /* sentences: a full stop as the end token, so hypotheses end (and the model's EOS
         * stays an end token too) */
        int32_t dot[8];
        int32_t nd = tok_encode(tk, "Lily.", 5, false, false, dot, 8);
        beam_params bp = beam_default_params();
        bp.width = 4;
        bp.max_tokens = 40;
        bp.eos = dot[nd - 1];
        run_case(m, tk, prompt, P, &bp, "stories260K sentences");
        bp.width = 6;
        bp.early_stopping = BEAM_STOP_EARLY;
        run_case(m, tk, prompt, P, &bp, "stories260K sentences");
    }
    tok_free(tk);
    model_free(m);
    return t_done();
}
