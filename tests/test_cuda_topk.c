/* test_cuda_topk.c - what crosses from the device per step through the cuda backend
 * (emulated under make test, the device with tools/gpu-run.sh): a step that wants only the
 * top-k (step_plan.topk_only) gets the same top-k and alternatives, bit for bit, with its
 * logits rows left on the device, and fewer bytes come back than its rows'; the logits
 * it then asks for come back together (download_at). So do greedy and sampled growth
 * (each draw from the top-k's logits: the tokens of draws from full rows), greedy and
 * sampled drafts with lookahead (the tokens of linear decoding: greedy, or plain sampling
 * with the same seed), beam search and the judge (scores bitwise those of full rows).
 * Models: a random tiny one (mkmodel, Q8_0, GQA 2), a Qwen3.5 and stories260K; without a
 * device the test reports itself skipped. */
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "strategy/beam.h"
#include "spec/spec.h"
#include "strategy/grow.h"
#include "strategy/judge.h"
#include "t.h"
#include "t_model.h"
#include "t_cuda.h"

/* Leaves of f[0] and f[1] (the same shape) whose last step's top-k (p[j]) and alternatives
 * are the same bits, rows kept by p[0] only. */
static int32_t same_topk(forest *const f[2], step_plan p[2], int32_t K, int32_t *n) {
    forest_id leaves[2][16];
    *n = forest_leaves(f[0], leaves[0], 16);
    if (forest_leaves(f[1], leaves[1], 16) != *n) return -1;
    int32_t same = 0, alt_ids[2][4];
    float alt_lp[2][4];
    for (int32_t k = 0; k < *n; k++) {
        const int32_t *ids[2];
        const float *lp[2];
        const int32_t nk = step_topk_of(&p[0], leaves[0][k], &ids[0], &lp[0]);
        const bool topk = nk == K && step_topk_of(&p[1], leaves[1][k], &ids[1], &lp[1]) == nk &&
                          !memcmp(ids[0], ids[1], sizeof(int32_t) * (size_t)nk) &&
                          !memcmp(lp[0], lp[1], sizeof(float) * (size_t)nk);
        const int32_t na = forest_topk(f[0], leaves[0][k], alt_ids[0], alt_lp[0], 4);
        const bool alts = na == 4 && forest_topk(f[1], leaves[1][k], alt_ids[1], alt_lp[1], 4) == na &&
                          !memcmp(alt_ids[0], alt_ids[1], sizeof alt_ids[0]) &&
                          !memcmp(alt_lp[0], alt_lp[1], sizeof alt_lp[0]);
        const float lp0 = step_logprob_of(&p[0], leaves[0][k], 0), lp1 = step_logprob_of(&p[1], leaves[1][k], 0);
        same += topk && alts && step_logits_of(&p[0], leaves[0][k]) && !step_logits_of(&p[1], leaves[1][k]) &&
                !memcmp(&lp0, &lp1, sizeof lp0) && !isnan(lp1);
    }
    return same;
}

/* Leaves of f whose step_logprob_of of each top-k token of p's last step is the top-k's
 * log-probability, bit for bit, with nothing brought back from c's device for it. */
static int32_t topk_logprobs_free(const forest *f, step_plan *p, model_ctx *c) {
    forest_id leaves[16];
    const int32_t n = forest_leaves(f, leaves, 16);
    int32_t good = 0;
    for (int32_t k = 0; k < n; k++) {
        const int32_t *ids;
        const float *lp;
        const int32_t nk = step_topk_of(p, leaves[k], &ids, &lp);
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(c));
        bool same = nk > 0;
        for (int32_t i = 0; i < nk; i++) {
            const float x = step_logprob_of(p, leaves[k], ids[i]);
            same = same && !memcmp(&x, &lp[i], sizeof x);
        }
        good += same && cu_d2h_bytes(model_ctx_backend(c)) == d0;
    }
    return good;
}

/* Of each leaf of f[1] (rows left on the device by p[1]), three tokens outside its top-k:
 * their step_logprobs_of in one call are the bits of step_logprob_of from f[0]'s full rows
 * (p[0]), and come back in one copy of 4 bytes each (cu_d2h_copies, cu_d2h_bytes). */
static void logprobs_batched(forest *const f[2], step_plan p[2], kern_backend *be1, const char *name, int step) {
    forest_id leaves[2][16], node[48];
    int32_t t[48], m = 0;
    const int32_t n = forest_leaves(f[0], leaves[0], 16);
    if (forest_leaves(f[1], leaves[1], 16) != n) return;
    for (int32_t k = 0; k < n; k++) {
        const int32_t *ids;
        const int32_t nk = step_topk_of(&p[1], leaves[1][k], &ids, NULL);
        for (int32_t tok = 0, got = 0; got < 3 && tok < p[1].n_vocab; tok++) {
            bool in = false;
            for (int32_t i = 0; i < nk; i++) in |= ids[i] == tok;
            if (!in) node[m] = leaves[1][k], t[m++] = tok, got++;
        }
    }
    float lp[48];
    const uint64_t c0 = cu_d2h_copies(be1), b0 = cu_d2h_bytes(be1);
    step_logprobs_of(&p[1], m, node, t, lp);
    const uint64_t copies = cu_d2h_copies(be1) - c0, bytes = cu_d2h_bytes(be1) - b0;
    int32_t same = 0;
    for (int32_t i = 0; i < m; i++) {
        const float want = step_logprob_of(&p[0], leaves[0][i / 3], t[i]);
        same += !memcmp(&want, &lp[i], sizeof want) && !isnan(want);
    }
    T_CHECK(m == 3 * n && same == m && copies == 1 && bytes == 4 * (uint64_t)m,
            "%s step %d: %d of %d logits outside the top-k as from full rows, brought back in %llu "
            "copies of %llu bytes", name, step + 1, same, m, (unsigned long long)copies,
            (unsigned long long)bytes);
}

/* Each leaf of f grown by its best token of p's last step (greedy from the top-k). */
static void grow_top1(forest *f, const step_plan *p) {
    forest_id leaves[16];
    const int32_t n = forest_leaves(f, leaves, 16);
    st_err err = {0};
    for (int32_t k = 0; k < n; k++) {
        const int32_t *ids;
        if (step_topk_of(p, leaves[k], &ids, NULL) > 0)
            forest_append(f, leaves[k], ids, NULL, 1, NULL, &err);
    }
}

/* The same forest stepped three times (each step after the first grown greedily from the
 * last's top-k),
 * with full rows and with topk_only, each on its own cuda context: the same top-k (ids
 * and log-probabilities), the same alternatives in the forest and the same
 * step_logprob_of of token 0 (from its one logit brought back), bit for bit; the
 * top-k-only steps bring back less than a row of logits each (cu_d2h_bytes) and keep no
 * rows; no step sends rows back up for their log-sum-exp (cu_h2d_bytes), and the third
 * step allocates no device memory (its logits buffers are the context's; the second may
 * still fill the backend's cache of small arrays). */
static void topk_only(const model *m, const char *name, uint64_t seed) {
    const int32_t V = m->hp.n_vocab, n_slots = 256, K = 8;
    model_ctx *c[2] = {t_ctx_on(m, "cuda", n_slots), t_ctx_on(m, "cuda", n_slots)};
    forest *f[2] = {forest_init(n_slots, 4), forest_init(n_slots, 4)};
    step_plan p[2];
    int32_t prompt[12], toks[3], n = 0;
    for (int32_t i = 0; i < 12; i++) prompt[i] = (int32_t)(t_lcg(&seed) % (uint64_t)V);
    uint64_t d2h[2] = {0, 0}, h2d[2] = {0, 0}, allocs[2] = {0, 0};
    st_err err = {0};
    if (!c[0] || !c[1]) goto out;
    for (int j = 0; j < 2; j++) {
        step_plan_init(&p[j]);
        p[j].top_k = K;
        p[j].topk_only = j == 1;
        forest_id root;
        uint64_t s = seed;
        T_CHECK(forest_add_root(f[j], prompt, NULL, 12, 0, &root, &err) == ST_OK, "root: %s", err.msg);
        for (int32_t k = 0; k < 4; k++) {
            for (int32_t i = 0; i < 3; i++) toks[i] = (int32_t)(t_lcg(&s) % (uint64_t)V);
            forest_append(f[j], root, toks, NULL, 1 + k % 3, NULL, &err);
        }
    }
    for (int step = 0; step < 3; step++) {
        for (int j = 0; j < 2; j++) {
            kern_backend *be = model_ctx_backend(c[j]);
            const uint64_t d0 = cu_d2h_bytes(be), u0 = cu_h2d_bytes(be), a0 = cu_dev_allocs(be);
            if (step > 0) grow_top1(f[j], &p[j]);
            T_CHECK(step_forest(f[j], &p[j], c[j], &err) == ST_OK, "%s step: %s", name, err.msg);
            if (step == 0) d2h[j] = cu_d2h_bytes(be) - d0;
            if (step == 2) allocs[j] = cu_dev_allocs(be) - a0;
            const uint64_t u = cu_h2d_bytes(be) - u0;
            h2d[j] = u > h2d[j] ? u : h2d[j];
        }
        const int32_t same = same_topk(f, p, K, &n), free_lp = topk_logprobs_free(f[1], &p[1], c[1]);
        T_CHECK(n == 4 && same == n, "%s step %d: topk_only gives the same top-k and alternatives "
                "for %d of %d leaves, no rows", name, step + 1, same, n);
        T_CHECK(free_lp == n, "%s step %d: the log-probabilities of the top-k tokens read from the "
                "top-k without a download for %d of %d leaves", name, step + 1, free_lp, n);
        logprobs_batched(f, p, model_ctx_backend(c[1]), name, step);
    }
    T_CHECK(d2h[0] >= (uint64_t)n * V * sizeof(float) && d2h[1] < (uint64_t)V * sizeof(float),
            "%s: bytes brought back by a step of %d rows: %llu with full rows, %llu top-k only", name,
            n, (unsigned long long)d2h[0], (unsigned long long)d2h[1]);
    T_CHECK(h2d[0] < (uint64_t)V * sizeof(float) && h2d[1] < (uint64_t)V * sizeof(float),
            "%s: most bytes sent up by a step: %llu with full rows, %llu top-k only (a row: %llu)",
            name, (unsigned long long)h2d[0], (unsigned long long)h2d[1],
            (unsigned long long)V * sizeof(float));
    T_CHECK(allocs[0] == 0 && allocs[1] == 0,
            "%s: device allocations in a third step: %llu with full rows, %llu top-k only", name,
            (unsigned long long)allocs[0], (unsigned long long)allocs[1]);
    step_plan_free(&p[0]), step_plan_free(&p[1]);
out:
    forest_free(f[0]), forest_free(f[1]);
    model_ctx_free(c[0]), model_ctx_free(c[1]);
}

/* Greedy grow of two branches on cuda, whose steps want the top-1 alone (the rows stay on
 * the device), against linear greedy decoding on the same backend: the same tokens, each
 * token's log-probability within LP_BOUND of the log-softmax of linear decoding's logits,
 * and less than a row brought back by any step. */
#define LP_BOUND 1e-5

/* The worst distance of the log-probabilities stored on the nodes of leaf's path
 * path[0..len) below depth from, from the log-softmax of linear decoding on lc (NAN when
 * one is NAN); want: (n_vocab) scratch. */
static double path_lp_err(model_ctx *lc, const forest *f, forest_id leaf, const int32_t *path, int32_t len,
                          int32_t from, float *want) {
    const int32_t V = model_ctx_hparams(lc)->n_vocab;
    double worst = 0;
    int32_t at = forest_index(leaf);
    for (int32_t k = len - 1; k >= from && at >= 0; k--, at = forest_node_at(f, at)->parent) {
        t_linear(lc, path, k, 0, want);
        sample_log_softmax(want, V, want);
        const double e = fabs((double)forest_node_at(f, at)->logprob - want[path[k]]);
        worst = e > worst || isnan(e) ? e : worst;
    }
    return worst;
}

/* Two branches grown N tokens from prompt[0..4) with sp on c into f and *g (grow_init's;
 * the caller frees it): the most bytes a step brought back, or UINT64_MAX (a failed
 * check) when growing failed. */
static uint64_t grow_two(model_ctx *c, forest *f, grow *g, step_plan *p, const int32_t *prompt,
                         const sample_params *sp, int32_t N, const char *name) {
    st_err err = {0};
    forest_id root;
    if (forest_add_root(f, prompt, NULL, 4, 0, &root, &err) ||
        grow_init(g, f, root, 2, sp, N, model_ctx_hparams(c)->n_vocab, &err)) {
        T_CHECK(0, "%s grow: %s", name, err.msg);
        return UINT64_MAX;
    }
    uint64_t most = 0;
    int32_t active = 1;
    for (int32_t s = 0; s <= N && active > 0; s++) {
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(c));
        T_CHECK(grow_step(g, f, p, c, NULL, NULL, NULL, &active, &err) == ST_OK, "%s grow: %s", name, err.msg);
        const uint64_t d = cu_d2h_bytes(model_ctx_backend(c)) - d0;
        most = d > most ? d : most;
    }
    return most;
}

static void grow_greedy(const model *m, const char *name) {
    const int32_t V = m->hp.n_vocab, N = 8;
    int32_t prompt[4] = {1, 5 % V, 9 % V, 13 % V}, lin[8], path[16];
    model_ctx *c = t_ctx_on(m, "cuda", 64), *lc = t_ctx_on(m, "cuda", 64);
    forest *f = forest_init(64, 0);
    float *want = malloc(sizeof(float) * (size_t)V);
    grow g;
    sample_params sp = sample_default_params();
    sp.temp = 0;
    step_plan p;
    step_plan_init(&p);
    const uint64_t most = c && lc ? grow_two(c, f, &g, &p, prompt, &sp, N, name) : UINT64_MAX;
    if (most == UINT64_MAX) goto out;
    T_CHECK(t_greedy_linear(m, prompt, 4, N, lin), "%s: linear greedy", name);
    double worst = 0;
    int32_t same = 0;
    for (int32_t i = 0; i < g.n; i++) {
        const int32_t len = forest_path(f, g.br[i].leaf, path, 16);
        same += len == 4 + N && !memcmp(path + 4, lin, sizeof lin);
        const double e = path_lp_err(lc, f, g.br[i].leaf, path, len, 4, want);
        worst = e > worst || isnan(e) ? e : worst;
    }
    T_CHECK(same == g.n, "%s: greedy grow = linear greedy for %d of %d branches", name, same, g.n);
    T_CHECK(worst <= LP_BOUND, "%s: greedy grow's log-probabilities off by %.3g", name, worst);
    T_CHECK(most < (uint64_t)V * sizeof(float), "%s: a greedy step brought back %llu bytes (a row: %llu)",
            name, (unsigned long long)most, (unsigned long long)V * sizeof(float));
    grow_free(&g);
out:
    step_plan_free(&p);
    free(want);
    forest_free(f);
    model_ctx_free(c), model_ctx_free(lc);
}

/* The tokens and log-probabilities of the N-token paths below root of two branches drawn
 * with sp (seeds sp.seed + i, as grow's) from full rows on c: each step brings the rows
 * back (step_forest) and sampler_sample reads them. */
static bool sampled_full_rows(model_ctx *c, const int32_t *prompt, int32_t np, const sample_params *sp,
                              int32_t N, int32_t toks[2][16], float lps[2][16]) {
    const int32_t V = model_ctx_hparams(c)->n_vocab;
    forest *f = forest_init(64, 0);
    step_plan p;
    step_plan_init(&p);
    sampler s[2] = {0};
    forest_id leaf[2];
    st_err err = {0};
    bool ok = !forest_add_root(f, prompt, NULL, np, 0, &leaf[0], &err);
    leaf[1] = leaf[0];
    for (int32_t i = 0; ok && i < 2; i++) {
        sample_params q = *sp;
        q.seed = sp->seed + (uint64_t)i;
        ok = !sampler_init(&s[i], &q, V);
    }
    for (int32_t k = 0; ok && k < N; k++) {
        ok = !step_forest(f, &p, c, &err);
        for (int32_t i = 0; ok && i < 2; i++) {
            const float *lg = step_logits_of(&p, leaf[i]);
            ok = lg != NULL;
            if (!ok) break;
            toks[i][k] = sampler_sample(&s[i], lg, V), lps[i][k] = step_logprob_of(&p, leaf[i], toks[i][k]);
            ok = !forest_append(f, leaf[i], &toks[i][k], &lps[i][k], 1, &leaf[i], &err);
        }
    }
    sampler_free(&s[0]), sampler_free(&s[1]);
    step_plan_free(&p);
    forest_free(f);
    return ok;
}

/* Grow of two branches at temperature 0.8, top-k 40 on cuda, whose steps bring back each
 * row's top 40 and their logits instead of the rows: the same tokens and log-probabilities,
 * bit for bit, as draws from full rows on another cuda context, and less than a row back
 * from the device by any step. */
static void grow_sampled(const model *m, const char *name) {
    const int32_t V = m->hp.n_vocab, N = 8;
    int32_t prompt[4] = {1, 5 % V, 9 % V, 13 % V}, toks[2][16], path[16];
    float lps[2][16];
    model_ctx *c = t_ctx_on(m, "cuda", 64), *rc = t_ctx_on(m, "cuda", 64);
    forest *f = forest_init(64, 0);
    grow g;
    sample_params sp = sample_default_params();
    sp.temp = 0.8f, sp.top_k = 40, sp.seed = 77;
    step_plan p;
    step_plan_init(&p);
    const uint64_t most = c && rc ? grow_two(c, f, &g, &p, prompt, &sp, N, name) : UINT64_MAX;
    if (most == UINT64_MAX) goto out;
    T_CHECK(sampled_full_rows(rc, prompt, 4, &sp, N, toks, lps), "%s: draws from full rows", name);
    int32_t same = 0;
    for (int32_t i = 0; i < g.n; i++) {
        const int32_t len = forest_path(f, g.br[i].leaf, path, 16);
        bool ok = len == 4 + N && !memcmp(path + 4, toks[i], sizeof(int32_t) * (size_t)N);
        int32_t at = forest_index(g.br[i].leaf);
        for (int32_t k = N - 1; ok && k >= 0; k--, at = forest_node_at(f, at)->parent)
            ok = !memcmp(&forest_node_at(f, at)->logprob, &lps[i][k], sizeof(float));
        same += ok;
    }
    T_CHECK(same == g.n, "%s: sampled grow from the top-k = draws from full rows for %d of %d branches", name,
            same, g.n);
    T_CHECK(most < (uint64_t)V * sizeof(float), "%s: a sampled step brought back %llu bytes (a row: %llu)", name,
            (unsigned long long)most, (unsigned long long)V * sizeof(float));
    grow_free(&g);
out:
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c), model_ctx_free(rc);
}

/* Beam search (width 4, 10 tokens) of the prompt on backend name; its results into
 * toks / sums (at most 4), *n their count; *most the most bytes a step brought back
 * (cuda only). */
static void beam_on(const model *m, const char *backend, int32_t toks[4][10], double sums[4],
                    int32_t *n, uint64_t *most) {
    int32_t prompt[4] = {1, 403, 407, 261};
    model_ctx *c = t_ctx_on(m, backend, 128);
    forest *f = forest_init(128, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id last;
    beam_params bp = beam_default_params();
    bp.width = 4, bp.max_tokens = 10;
    beam *b = c && !forest_add_root(f, prompt, NULL, 4, 0, &last, &err)
                  ? beam_init(f, last, &bp, NULL, m->hp.n_vocab, &err) : NULL;
    T_CHECK(b != NULL, "beam on %s: %s", backend, err.msg);
    *n = 0, *most = 0;
    while (b && !beam_done(b)) {
        const bool dev = !strcmp(backend, "cuda");
        const uint64_t d0 = dev ? cu_d2h_bytes(model_ctx_backend(c)) : 0;
        if (beam_step(b, f, &p, c, &err)) {
            T_CHECK(0, "beam step on %s: %s", backend, err.msg);
            break;
        }
        const uint64_t d = dev ? cu_d2h_bytes(model_ctx_backend(c)) - d0 : 0;
        *most = d > *most ? d : *most;
    }
    for (int32_t i = 0; b && i < beam_n_results(b) && i < 4; i++, ++*n) {
        const beam_hyp *h = beam_result(b, i);
        memset(toks[i], 0xff, sizeof toks[i]);
        memcpy(toks[i], h->tokens, sizeof(int32_t) * (size_t)(h->n < 10 ? h->n : 10));
        sums[i] = h->sum;
    }
    beam_free(b);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

/* Beam search on cuda, whose steps bring back each row's top-k alone, against the same
 * search on the cpu backend (reading full rows): the same hypotheses in the same order,
 * their sums of log-probabilities within BEAM_BOUND, and no step bringing back a row. */
#define BEAM_BOUND 1e-4
static void beam_vs_cpu(const model *m, const char *name) {
    int32_t t[2][4][10], n[2];
    double sums[2][4], worst = 0;
    uint64_t most[2];
    beam_on(m, "cpu", t[0], sums[0], &n[0], &most[0]);
    beam_on(m, "cuda", t[1], sums[1], &n[1], &most[1]);
    for (int32_t i = 0; i < n[0] && i < n[1]; i++) {
        const double e = fabs(sums[0][i] - sums[1][i]);
        worst = e > worst || isnan(e) ? e : worst;
    }
    T_CHECK(n[0] > 0 && n[0] == n[1] && !memcmp(t[0], t[1], sizeof t[0][0] * (size_t)n[0]),
            "%s: beam on cuda gives cpu's %d hypotheses (%d)", name, n[0], n[1]);
    T_CHECK(worst <= BEAM_BOUND, "%s: beam sums off by %.3g", name, worst);
    T_CHECK(most[1] < (uint64_t)m->hp.n_vocab * sizeof(float),
            "%s: a beam step brought back %llu bytes (a row: %llu)", name,
            (unsigned long long)most[1], (unsigned long long)m->hp.n_vocab * sizeof(float));
}

enum { SD_N = 24, SD_NP = 8, SD_CAP = SD_NP + SD_N + 64 };

/* A speculative decoder on cuda over a prompt of repeats (drafts find them): its context c,
 * a context lc for linear decoding, the forest, plan and a row of scratch. */
typedef struct spec_dev {
    model_ctx *c, *lc;
    forest *f;
    step_plan p;
    spec *s;
    float *want;
    int32_t path[SD_CAP], got[SD_N + 64], made; /* the prompt, then what came out */
    uint64_t most;                              /* the most bytes a step brought back */
    double share;                               /* the largest share of its rows' bytes */
} spec_dev;

/* Runs a decoder with sp until SD_N tokens are out (or a failed check). */
static void spec_dev_run(spec_dev *d, const model *m, const spec_params *sp, const char *name) {
    const int32_t V = m->hp.n_vocab;
    memset(d, 0, sizeof *d);
    for (int32_t i = 0; i < SD_NP; i++) d->path[i] = (i < 2 ? 1 + 4 * i : 5 + 4 * (i % 3)) % V;
    d->c = t_ctx_on(m, "cuda", SD_CAP), d->lc = t_ctx_on(m, "cuda", SD_CAP);
    d->f = forest_init(SD_CAP, 0);
    d->want = malloc(sizeof(float) * (size_t)V);
    step_plan_init(&d->p);
    st_err err = {0};
    forest_id tip;
    if (d->c && d->lc && !forest_add_root(d->f, d->path, NULL, SD_NP, 0, &tip, &err))
        d->s = spec_init(sp, d->f, tip, &err);
    T_CHECK(d->s != NULL, "%s spec: %s", name, err.msg);
    while (d->s && d->made < SD_N) {
        int32_t k = 0;
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(d->c));
        if (spec_step(d->s, d->f, &d->p, d->c, d->got + d->made, &k, &err)) {
            T_CHECK(0, "%s spec step: %s", name, err.msg);
            break;
        }
        const uint64_t b = cu_d2h_bytes(model_ctx_backend(d->c)) - d0;
        const double share = (double)b / ((double)d->p.n_out * V * sizeof(float));
        d->most = b > d->most ? b : d->most;
        d->share = share > d->share ? share : d->share;
        d->made += k;
    }
}

static void spec_dev_free(spec_dev *d) {
    spec_free(d->s);
    step_plan_free(&d->p);
    free(d->want);
    forest_free(d->f);
    model_ctx_free(d->c), model_ctx_free(d->lc);
}

/* Greedy speculative decoding on cuda (prompt-lookup drafts, the n-gram pool and a
 * lookahead window of 3), whose steps want each row's top-1 alone, with log-probabilities
 * (one logit brought back per token): linear greedy decoding's tokens on cuda, each
 * token's log-probability within LP_BOUND of linear decoding's log-softmax, and less than
 * a row brought back by any step. */
static void spec_greedy_dev(const model *m, const char *name) {
    const int32_t V = m->hp.n_vocab;
    int32_t lin[SD_N], path[SD_CAP];
    spec_params sp = spec_default_params();
    sp.adaptive = false, sp.la_adaptive = false, sp.la.w = 3, sp.logprobs = true;
    spec_dev d;
    spec_dev_run(&d, m, &sp, name);
    T_CHECK(t_greedy_linear(m, d.path, SD_NP, SD_N, lin), "%s: linear greedy", name);
    T_CHECK(d.made >= SD_N && !memcmp(d.got, lin, sizeof lin), "%s: greedy drafts and lookahead = linear greedy",
            name);
    const int32_t len = d.s ? forest_path(d.f, spec_tip(d.s), path, SD_CAP) : 0;
    const double e = d.s ? path_lp_err(d.lc, d.f, spec_tip(d.s), path, len, SD_NP, d.want) : NAN;
    T_CHECK(len > SD_NP && e <= LP_BOUND, "%s: speculative log-probabilities off by %.3g", name, e);
    T_CHECK(d.most < (uint64_t)V * sizeof(float), "%s: a speculative step brought back %llu bytes (a row: %llu)",
            name, (unsigned long long)d.most, (unsigned long long)V * sizeof(float));
    spec_dev_free(&d);
}

/* Sampled drafts and lookahead (temperature 0.8, top-k 40) on cuda, whose steps bring back
 * each row's top 40 and their logits: the tokens of plain sampling with the same seed from
 * linear decoding's logits on cuda, and no step brings back more than those (and its
 * rows' log-sum-exp). */
static void spec_sampled_dev(const model *m, const char *name) {
    const int32_t V = m->hp.n_vocab;
    spec_params sp = spec_default_params();
    sp.adaptive = false, sp.la_adaptive = false, sp.la.w = 3;
    sp.samp.temp = 0.8f, sp.samp.top_k = 40, sp.samp.seed = 9;
    spec_dev d;
    spec_dev_run(&d, m, &sp, name);
    sampler r;
    bool ok = d.s && !sampler_init(&r, &sp.samp, V);
    for (int32_t i = 0; ok && i < SD_N; i++) {
        ok = !t_linear(d.lc, d.path, SD_NP + i, 0, d.want);
        d.path[SD_NP + i] = sampler_sample(&r, d.want, V);
    }
    if (d.s) sampler_free(&r);
    T_CHECK(ok && d.made >= SD_N && !memcmp(d.got, d.path + SD_NP, sizeof(int32_t) * SD_N),
            "%s: sampled drafts and lookahead = plain sampling", name);
    /* (each row's top 40 comes back as ids, log-probabilities and logits: 480 bytes) */
    T_CHECK(d.share <= (40.0 * 12 + 64) / (V * 4.0),
            "%s: a sampled speculative step brought back %.3g of its rows' bytes", name, d.share);
    spec_dev_free(&d);
}

/* A judge of 3 pending branches (a two-token yes, a one-token no) on its own cuda
 * context: rows = true also returns the branches' rows (full rows come back), false
 * leaves every row on the device; the scores into score, *d2h the step's bytes. */
static void judge_on(const model *m, bool rows, double score[3], uint64_t *d2h) {
    const int32_t V = m->hp.n_vocab;
    int32_t prompt[4] = {1, 5 % V, 9 % V, 13 % V}, jt[6] = {7 % V, 8 % V, 9 % V, 10 % V, 11 % V, 12 % V};
    const judge_prompt jp = {.prompt = jt, .n_prompt = 3, .yes = jt + 3, .n_yes = 2, .no = jt + 5, .n_no = 1};
    model_ctx *c = t_ctx_on(m, "cuda", 64);
    forest *f = forest_init(64, 0);
    step_plan p;
    step_plan_init(&p);
    judge jg = {0};
    st_err err = {0};
    forest_id root, br[3];
    bool ok = c && !forest_add_root(f, prompt, NULL, 4, 0, &root, &err);
    for (int32_t i = 0; ok && i < 3; i++) {
        const int32_t t[2] = {(20 + 3 * i) % V, (40 + i) % V};
        ok = !forest_append(f, root, t, NULL, 1 + i % 2, &br[i], &err);
    }
    ok = ok && !judge_attach(&jg, f, &jp, br, 3, rows, NULL, &err);
    const uint64_t d0 = ok ? cu_d2h_bytes(model_ctx_backend(c)) : 0;
    ok = ok && !judge_step(&jg, f, &p, c, &jp, &err);
    T_CHECK(ok, "judge on cuda: %s", err.msg);
    *d2h = ok ? cu_d2h_bytes(model_ctx_backend(c)) - d0 : 0;
    for (int32_t i = 0; i < 3; i++) score[i] = ok ? jg.score[i] : NAN;
    judge_free(&jg);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

/* The judge's scores from rows left on the device are those from full rows, bit for bit
 * (the same logits and log-sum-exp), and its step brings back less than a row. */
static void judge_dev(const model *m, const char *name) {
    double full[3], dev[3];
    uint64_t d_full, d_dev;
    const uint64_t row = (uint64_t)m->hp.n_vocab * sizeof(float);
    judge_on(m, true, full, &d_full);
    judge_on(m, false, dev, &d_dev);
    T_CHECK(!memcmp(full, dev, sizeof full) && !isnan(dev[0]),
            "%s judge: scores %.9g %.9g %.9g from device rows, %.9g %.9g %.9g from full rows", name, dev[0],
            dev[1], dev[2], full[0], full[1], full[2]);
    T_CHECK(d_full >= 3 * row && d_dev < row, "%s judge: %llu bytes back with full rows, %llu from device rows",
            name, (unsigned long long)d_full, (unsigned long long)d_dev);
}

int main(void) {
    st_err err = {0};
    if (!t_cuda_device()) return t_done();
    mkmodel_params mp = t_tiny(NULL, DT_Q8_0, 26);
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny model: %s", err.msg);
    if (m) {
        topk_only(m, "tiny q8_0 gqa2", 5);
        grow_greedy(m, "tiny q8_0 gqa2"), grow_sampled(m, "tiny q8_0 gqa2");
        spec_greedy_dev(m, "tiny q8_0 gqa2"), spec_sampled_dev(m, "tiny q8_0 gqa2");
        judge_dev(m, "tiny q8_0 gqa2");
    }
    model_free(m);
    mp = t_tiny("qwen35", DT_F32, 28); /* (Gated DeltaNet layers: states, not only KV) */
    mp.n_layer = 4, mp.full_attn_interval = 2;
    mp.ssm_k_heads = 1, mp.ssm_v_heads = 2, mp.ssm_state = 16;
    m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny qwen35: %s", err.msg);
    if (m) topk_only(m, "tiny qwen35", 14);
    model_free(m);
    tok *tk;
    if (!t_stories(&m, &tk)) return t_done();
    tok_free(tk);
    if (m) {
        topk_only(m, "stories260K", 13);
        grow_greedy(m, "stories260K"), grow_sampled(m, "stories260K");
        spec_greedy_dev(m, "stories260K"), spec_sampled_dev(m, "stories260K");
        judge_dev(m, "stories260K");
        beam_vs_cpu(m, "stories260K");
    }
    model_free(m);
    return t_done();
}
