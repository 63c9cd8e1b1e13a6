/* test_cuda_forest.c - the forest's promise through the cuda backend (emulated under make
 * test, the device with tools/gpu-run.sh): every leaf of a forest decoded in shared steps
 * gets the logits of decoding its root-to-leaf path alone, and greedy growth in shared
 * steps picks the tokens linear greedy decoding picks.
 *
 * Per model: a prompt with forks at several depths (a first step of more than CU_FEW_ROWS
 * rows: the many-row product; later steps of a few rows: the few-row kernel), a second
 * round of forks under computed nodes, a compaction (kv_permute) and 12 greedy steps of
 * all leaves together. Bounds: each leaf's logits within 1e-4 (max |d| / max |logit|) of
 * linear decoding on the cuda backend, and of the ref backend's (float32 accumulation;
 * 3e-2 for the Q8_0 model, whose products multiply int8 activations as the cpu
 * backend's do: 1.2e-2 seen); greedy tokens identical to linear greedy on cuda, and on
 * stories260K the prompt's 24 greedy tokens identical to the cpu backend's. Under the
 * emulator the leaf logits are in fact the same bits as linear decoding's (a row's
 * arithmetic depends only on its own keys in order), which is reported, not asserted
 * (cuBLAS on a GPU sums an F32 many-row product in its own order). Models: a random tiny one (mkmodel, Q8_0, GQA 2)
 * a Qwen2-MoE of 8 experts (3 a token, a shared expert), a gpt-oss of the same experts
 * (attention sinks, the clamped SwiGLU), a Gemma 4 (soft-capped logits), a tiny F16 and a
 * tiny BF16 (their many-row products on tensor cores; leaves asserted bitwise under the
 * emulator; against ref within 5e-3 and 3e-2: activations rounded to the weights' type),
 * a Qwen3.5 (Gated
 * DeltaNet layers and gated attention: its leaves asserted bitwise under the emulator, where
 * every op of its step is batch invariant) and stories260K;
 * without a device the test reports itself skipped.
 * The greedy steps run as replayed CUDA graphs (kernels/cuda/graphs.h), counted.
 * A step that wants only the top-k (step_plan.topk_only) gets the same top-k and
 * alternatives, bit for bit, with its logits rows left on the device: fewer bytes come
 * back than one row's; so do greedy drafts with lookahead and the judge. Leaves over a
 * prompt longer than an attention chunk share its chunks (the cascade) and keep linear
 * decoding's bits. */
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "kernels/cuda/cu.h"
#include "strategy/beam.h"
#include "spec/spec.h"
#include "strategy/grow.h"
#include "strategy/judge.h"
#include "t.h"
#include "t_model.h"

#define NERR_BOUND 1e-4
#define NERR_BOUND_Q8 3e-2 /* against ref where the weights are a block type: int8 activations */
/* against ref where the weights are F16 or BF16: every product's activations rounded to
 * them (u = 2^-11, 2^-8 each), about 10 u through the layers (seen 6.0e-4, 4.2e-3) */
#define NERR_BOUND_F16 5e-3
#define NERR_BOUND_BF16 3e-2
#define GREEDY 12

static model_ctx *ctx(const model *m, const char *backend, int32_t n_slots) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = n_slots;
    cp.backend = backend;
    cp.n_threads = 1;
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "%s context: %s", backend, err.msg);
    return c;
}

static uint64_t lcg(uint64_t *s) { return (*s = *s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; }

/* Appends k chains of len random tokens under node. */
static void add_forks(forest *f, forest_id node, int32_t k, int32_t len, uint64_t *s, int32_t V) {
    int32_t toks[16];
    st_err err = {0};
    for (int32_t j = 0; j < k; j++) {
        for (int32_t i = 0; i < len; i++) toks[i] = (int32_t)(lcg(s) % (uint64_t)V);
        T_CHECK(forest_append(f, node, toks, NULL, len, NULL, &err) == ST_OK, "append: %s", err.msg);
    }
}

/* Every leaf the last step scored against linear decoding of its path on lc (cuda) and cc
 * (ref); returns the worst error against cuda's linear logits. */
static double check_leaves(forest *f, step_plan *p, model_ctx *lc, model_ctx *cc, int32_t V,
                           const char *name, double ref_bound, int32_t *n_bitwise, int32_t *n_scored) {
    forest_id leaves[256];
    int32_t path[512];
    const int32_t n = forest_leaves(f, leaves, 256);
    float *want = malloc(sizeof(float) * V), *cpu = malloc(sizeof(float) * V);
    double worst = 0, worst_cpu = 0;
    const int32_t scored0 = *n_scored;
    for (int32_t k = 0; k < n; k++) {
        const float *lg = step_logits_of(p, leaves[k]);
        if (!lg) continue;
        const int32_t len = forest_path(f, leaves[k], path, 512);
        const int32_t pos0 = forest_get(f, leaves[k])->depth - len + 1;
        t_linear(lc, path, len, pos0, want);
        t_linear(cc, path, len, pos0, cpu);
        const double e = t_nerr(lg, want, V), ec = t_nerr(lg, cpu, V);
        worst = e > worst ? e : worst;
        worst_cpu = ec > worst_cpu ? ec : worst_cpu;
        *n_bitwise += memcmp(lg, want, sizeof(float) * V) == 0;
        ++*n_scored;
    }
    T_CHECK(*n_scored > scored0, "%s: the step scored none of %d leaves", name, n);
    T_CHECK(worst <= NERR_BOUND && worst_cpu <= ref_bound,
            "%s: leaves vs linear decoding: nerr %.3g (cuda), %.3g (ref)", name, worst, worst_cpu);
    free(want), free(cpu);
    return worst;
}

/* Returns whether every scored leaf had the bits of linear decoding. */
static bool run_model(const model *m, const char *name, double ref_bound, uint64_t seed) {
    int32_t bitwise = 0, scored = 0;
    const int32_t V = m->hp.n_vocab, n_slots = 512;
    model_ctx *c = ctx(m, "cuda", n_slots), *lc = ctx(m, "cuda", n_slots), *cc = ctx(m, "ref", n_slots);
    if (!c || !lc || !cc) goto out;
    forest *f = forest_init(n_slots, 4);
    step_plan plan;
    step_plan_init(&plan);
    st_err err = {0};
    int32_t prompt[20];
    for (int32_t i = 0; i < 20; i++) prompt[i] = (int32_t)(lcg(&seed) % (uint64_t)V);
    forest_id last;
    T_CHECK(forest_add_root(f, prompt, NULL, 20, 0, &last, &err) == ST_OK, "root: %s", err.msg);
    add_forks(f, last, 3, 5, &seed, V); /* 20 + 15 rows: the many-row product */
    double worst = 0, e;
    T_CHECK(step_forest(f, &plan, c, &err) == ST_OK, "%s step 1: %s", name, err.msg);
    worst = check_leaves(f, &plan, lc, cc, V, name, ref_bound, &bitwise, &scored);
    /* forks under computed nodes (a few rows: the few-row kernel), a prune, a compaction */
    forest_id leaves[64];
    int32_t n = forest_leaves(f, leaves, 64);
    for (int32_t k = 0; k < n; k++) add_forks(f, leaves[k], 2, 1 + k, &seed, V);
    forest_leaves(f, leaves, 64); /* all new: pruning one leaves its twin */
    T_CHECK(forest_prune(f, leaves[0], &err) == ST_OK, "prune: %s", err.msg);
    T_CHECK(step_compact(f, c, &err) == ST_OK, "%s compact: %s", name, err.msg);
    T_CHECK(step_forest(f, &plan, c, &err) == ST_OK, "%s step 2: %s", name, err.msg);
    e = check_leaves(f, &plan, lc, cc, V, name, ref_bound, &bitwise, &scored);
    worst = e > worst ? e : worst;
    /* greedy growth of every leaf together against linear greedy of each */
    n = forest_leaves(f, leaves, 64);
    int32_t *grown = malloc(sizeof(int32_t) * (size_t)n * GREEDY), path[512];
    const cu_graph_counts g0 = cu_graphs_of(model_ctx_backend(c));
    for (int32_t s = 0; s < GREEDY; s++) {
        for (int32_t k = 0; k < n; k++) {
            const int32_t t = sample_argmax(step_logits_of(&plan, leaves[k]), V);
            grown[k * GREEDY + s] = t;
            forest_append(f, leaves[k], &t, NULL, 1, &leaves[k], &err);
        }
        const uint64_t l0 = cu_emu_launches();
        T_CHECK(step_forest(f, &plan, c, &err) == ST_OK, "%s greedy step %d: %s", name, s, err.msg);
        if (s == 0 && cu_emulated())
            fprintf(stderr, "%s: a greedy step of %d rows: %llu kernel launches\n", name, plan.n_rows,
                    (unsigned long long)(cu_emu_launches() - l0));
    }
    /* the greedy steps replay graphs, so what follows checks replays (how many varies: a
     * windowed layer's segments change in number as the window slides, a new graph each) */
    const cu_graph_counts g1 = cu_graphs_of(model_ctx_backend(c));
    T_CHECK(g1.replays > g0.replays, "%s: %d greedy steps replayed %llu graphs",
            name, GREEDY, (unsigned long long)(g1.replays - g0.replays));
    fprintf(stderr, "%s: %d greedy steps: %llu graphs captured, %llu replayed\n", name, GREEDY,
            (unsigned long long)(g1.captures - g0.captures), (unsigned long long)(g1.replays - g0.replays));
    int32_t same = 0;
    for (int32_t k = 0; k < n; k++) {
        const int32_t len = forest_path(f, leaves[k], path, 512) - GREEDY;
        int32_t *lin = malloc(sizeof(int32_t) * GREEDY);
        /* (the root is at position 0; MD_BACKEND=cuda: see main) */
        const bool ok = t_greedy_linear(m, path, len, GREEDY, lin);
        same += ok && memcmp(lin, grown + k * GREEDY, sizeof(int32_t) * GREEDY) == 0;
        free(lin);
    }
    T_CHECK(same == n, "%s: greedy %d identical for %d of %d leaves", name, GREEDY, same, n);
    fprintf(stderr, "%s: worst leaf nerr %.3g against linear cuda decoding, %d of %d leaves bitwise\n",
            name, worst, bitwise, scored);
    free(grown);
    step_plan_free(&plan);
    forest_free(f);
out:
    model_ctx_free(c), model_ctx_free(lc), model_ctx_free(cc);
    return scored > 0 && bitwise == scored;
}

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
    model_ctx *c[2] = {ctx(m, "cuda", n_slots), ctx(m, "cuda", n_slots)};
    forest *f[2] = {forest_init(n_slots, 4), forest_init(n_slots, 4)};
    step_plan p[2];
    int32_t prompt[12], toks[3], n = 0;
    for (int32_t i = 0; i < 12; i++) prompt[i] = (int32_t)(lcg(&seed) % (uint64_t)V);
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
            for (int32_t i = 0; i < 3; i++) toks[i] = (int32_t)(lcg(&s) % (uint64_t)V);
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

static void grow_greedy(const model *m, const char *name) {
    const int32_t V = m->hp.n_vocab, N = 8;
    int32_t prompt[4] = {1, 5 % V, 9 % V, 13 % V}, lin[8], path[16];
    model_ctx *c = ctx(m, "cuda", 64), *lc = ctx(m, "cuda", 64);
    forest *f = forest_init(64, 0);
    float *want = malloc(sizeof(float) * (size_t)V);
    st_err err = {0};
    forest_id root;
    grow g;
    sample_params sp = sample_default_params();
    sp.temp = 0;
    step_plan p;
    step_plan_init(&p);
    if (!c || !lc || forest_add_root(f, prompt, NULL, 4, 0, &root, &err) ||
        grow_init(&g, f, root, 2, &sp, N, V, &err)) {
        T_CHECK(0, "%s grow: %s", name, err.msg);
        goto out;
    }
    uint64_t most = 0;
    int32_t active = 1;
    for (int32_t s = 0; s <= N && active > 0; s++) {
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(c));
        T_CHECK(grow_step(&g, f, &p, c, NULL, NULL, NULL, &active, &err) == ST_OK, "%s grow: %s", name, err.msg);
        const uint64_t d = cu_d2h_bytes(model_ctx_backend(c)) - d0;
        most = d > most ? d : most;
    }
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
    model_ctx *c = ctx(m, "cuda", 64), *rc = ctx(m, "cuda", 64);
    forest *f = forest_init(64, 0);
    st_err err = {0};
    forest_id root;
    grow g;
    sample_params sp = sample_default_params();
    sp.temp = 0.8f, sp.top_k = 40, sp.seed = 77;
    step_plan p;
    step_plan_init(&p);
    if (!c || !rc || forest_add_root(f, prompt, NULL, 4, 0, &root, &err) ||
        grow_init(&g, f, root, 2, &sp, N, V, &err)) {
        T_CHECK(0, "%s grow: %s", name, err.msg);
        goto out;
    }
    uint64_t most = 0;
    int32_t active = 1;
    for (int32_t s = 0; s <= N && active > 0; s++) {
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(c));
        T_CHECK(grow_step(&g, f, &p, c, NULL, NULL, NULL, &active, &err) == ST_OK, "%s grow: %s", name, err.msg);
        const uint64_t d = cu_d2h_bytes(model_ctx_backend(c)) - d0;
        most = d > most ? d : most;
    }
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
    model_ctx *c = ctx(m, backend, 128);
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

/* The prompt's greedy continuation: the same tokens on cuda as on cpu. */
static void greedy_vs_cpu(const model *m, const char *name, int32_t n) {
    int32_t prompt[4] = {1, 403, 407, 261}, a[32], b[32];
    setenv("MD_BACKEND", "cpu", 1);
    bool ok = t_greedy_linear(m, prompt, 4, n, a);
    setenv("MD_BACKEND", "cuda", 1);
    ok = ok && t_greedy_linear(m, prompt, 4, n, b);
    T_CHECK(ok && memcmp(a, b, sizeof(int32_t) * n) == 0, "%s: %d greedy tokens, cuda = cpu", name, n);
}

/* Four chains of two tokens over a prompt of 300, longer than an attention chunk: the
 * cascade takes the prompt's whole chunks once for several rows (cu_attn_shared grows),
 * and every leaf still gets linear decoding's logits (bitwise under the emulator). */
static void shared_context(const model *m, const char *name, double ref_bound, uint64_t seed) {
    enum { NP = 300, N_SLOTS = 512 };
    const int32_t V = m->hp.n_vocab;
    model_ctx *c = ctx(m, "cuda", N_SLOTS), *lc = ctx(m, "cuda", N_SLOTS), *cc = ctx(m, "ref", N_SLOTS);
    forest *f = forest_init(N_SLOTS, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t prompt[NP], bitwise = 0, scored = 0;
    for (int32_t i = 0; i < NP; i++) prompt[i] = (int32_t)(lcg(&seed) % (uint64_t)V);
    forest_id last;
    bool ok = c && lc && cc && !forest_add_root(f, prompt, NULL, NP, 0, &last, &err) &&
              !step_forest(f, &p, c, &err);
    T_CHECK(ok, "%s shared context: %s", name, err.msg);
    if (!ok) goto out;
    add_forks(f, last, 4, 2, &seed, V);
    const uint64_t s0 = cu_attn_shared(model_ctx_backend(c));
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "%s shared context step: %s", name, err.msg);
    const uint64_t saved = cu_attn_shared(model_ctx_backend(c)) - s0;
    check_leaves(f, &p, lc, cc, V, name, ref_bound, &bitwise, &scored);
    T_CHECK(saved > 0 && (bitwise == scored || !cu_emulated()),
            "%s: %d of %d leaves over a shared context bitwise linear decoding's; %llu chunk reads saved", name,
            bitwise, scored, (unsigned long long)saved);
out:
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c), model_ctx_free(lc), model_ctx_free(cc);
}

/* The tiny shape the random models here share: 64 wide, 4 heads over 2 KV heads (arch
 * NULL: mkmodel's default). */
static mkmodel_params tiny(const char *arch, uint32_t wtype, uint64_t seed) {
    mkmodel_params mp = mkmodel_default_params();
    if (arch) mp.arch = arch;
    mp.wtype = wtype, mp.seed = seed;
    mp.n_embd = 64, mp.n_head = 4, mp.n_head_kv = 2, mp.n_ff = 96;
    return mp;
}

/* A random model of mp through run_model (bound: against ref), then freed. */
static void run_random(const mkmodel_params *mp, const char *name, double bound, uint64_t seed) {
    st_err err = {0};
    model *m = t_random_model(mp, &err);
    T_CHECK(m != NULL, "%s: %s", name, err.msg);
    if (m) run_model(m, name, bound, seed);
    model_free(m);
}

/* max(most, the bytes c's device brought back since its counter read before). */
static uint64_t d2h_of(model_ctx *c, uint64_t most, uint64_t before) {
    const uint64_t d = cu_d2h_bytes(model_ctx_backend(c)) - before;
    return d > most ? d : most;
}

/* Greedy speculative decoding on cuda (prompt-lookup drafts, the n-gram pool and a
 * lookahead window of 3), whose steps want each row's top-1 alone, with log-probabilities
 * (one logit brought back per token): linear greedy decoding's tokens on cuda, each
 * token's log-probability within LP_BOUND of linear decoding's log-softmax, and less than
 * a row brought back by any step. */
static void spec_greedy_dev(const model *m, const char *name) {
    enum { N = 24, NP = 8, CAP = NP + N + 64 };
    const int32_t V = m->hp.n_vocab;
    int32_t prompt[NP], lin[N], got[N + 64], path[CAP], made = 0;
    for (int32_t i = 0; i < NP; i++) prompt[i] = (i < 2 ? 1 + 4 * i : 5 + 4 * (i % 3)) % V; /* repeats: drafts */
    model_ctx *c = ctx(m, "cuda", CAP), *lc = ctx(m, "cuda", CAP);
    forest *f = forest_init(CAP, 0);
    float *want = malloc(sizeof(float) * (size_t)V);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id tip;
    spec_params sp = spec_default_params();
    sp.adaptive = false, sp.la_adaptive = false, sp.la.w = 3, sp.logprobs = true;
    spec *s = c && lc && !forest_add_root(f, prompt, NULL, NP, 0, &tip, &err) ? spec_init(&sp, f, tip, &err) : NULL;
    T_CHECK(s != NULL, "%s spec: %s", name, err.msg);
    uint64_t most = 0;
    while (s && made < N) {
        int32_t k = 0;
        const uint64_t d0 = cu_d2h_bytes(model_ctx_backend(c));
        if (spec_step(s, f, &p, c, got + made, &k, &err)) {
            T_CHECK(0, "%s spec step: %s", name, err.msg);
            break;
        }
        most = d2h_of(c, most, d0);
        made += k;
    }
    T_CHECK(t_greedy_linear(m, prompt, NP, N, lin), "%s: linear greedy", name);
    T_CHECK(made >= N && !memcmp(got, lin, sizeof lin), "%s: greedy drafts and lookahead = linear greedy", name);
    const int32_t len = s ? forest_path(f, spec_tip(s), path, CAP) : 0;
    const double e = s ? path_lp_err(lc, f, spec_tip(s), path, len, NP, want) : NAN;
    T_CHECK(len > NP && e <= LP_BOUND, "%s: speculative log-probabilities off by %.3g", name, e);
    T_CHECK(most < (uint64_t)V * sizeof(float), "%s: a speculative step brought back %llu bytes (a row: %llu)",
            name, (unsigned long long)most, (unsigned long long)V * sizeof(float));
    spec_free(s);
    step_plan_free(&p);
    free(want);
    forest_free(f);
    model_ctx_free(c), model_ctx_free(lc);
}

/* A judge of 3 pending branches (a two-token yes, a one-token no) on its own cuda
 * context: rows = true also returns the branches' rows (full rows come back), false
 * leaves every row on the device; the scores into score, *d2h the step's bytes. */
static void judge_on(const model *m, bool rows, double score[3], uint64_t *d2h) {
    const int32_t V = m->hp.n_vocab;
    int32_t prompt[4] = {1, 5 % V, 9 % V, 13 % V}, jt[6] = {7 % V, 8 % V, 9 % V, 10 % V, 11 % V, 12 % V};
    const judge_prompt jp = {.prompt = jt, .n_prompt = 3, .yes = jt + 3, .n_yes = 2, .no = jt + 5, .n_no = 1};
    model_ctx *c = ctx(m, "cuda", 64);
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
    setenv("MD_BACKEND", "cuda", 1); /* t_greedy_linear's contexts */
    mkmodel_params mp = tiny(NULL, DT_Q8_0, 26);
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny model: %s", err.msg);
    if (m) run_model(m, "tiny q8_0 gqa2", NERR_BOUND_Q8, 7);
    if (m) topk_only(m, "tiny q8_0 gqa2", 5);
    if (m) grow_greedy(m, "tiny q8_0 gqa2"), grow_sampled(m, "tiny q8_0 gqa2");
    if (m) spec_greedy_dev(m, "tiny q8_0 gqa2");
    if (m) judge_dev(m, "tiny q8_0 gqa2");
    if (m) shared_context(m, "tiny q8_0 gqa2", NERR_BOUND_Q8, 15);
    model_free(m);
    mp.arch = "qwen2moe"; /* a mixture of experts with a shared expert: rows grouped by expert */
    mp.n_expert = 8;
    mp.n_expert_used = 3;
    mp.n_ff_exp = 64;
    run_random(&mp, "qwen2moe q8_0 8 experts top 3", NERR_BOUND_Q8, 9);
    mp.arch = "gpt-oss"; /* attention sinks, the clamped SwiGLU, biased experts, windows */
    run_random(&mp, "gpt-oss q8_0 8 experts top 3", NERR_BOUND_Q8, 10);
    /* Gemma 4's shape: a window, shared KV, per-layer embeddings, soft-capped logits */
    mp = tiny("gemma4", DT_F32, 27);
    mp.n_layer = 4, mp.n_swa = 8, mp.swa_pattern = 2, mp.n_kv_shared = 2, mp.n_embd_ple = 32;
    mp.softcap = 10.0f;
    run_random(&mp, "tiny gemma4 softcap", NERR_BOUND, 9);
    /* F16 and BF16 weights: the first step's many-row product on tensor cores (GemmEx), the
     * later ones the few-row kernel, both on activations rounded to the weights' type, so
     * under the emulator every leaf has linear decoding's bits */
    for (int ti = 0; ti < 2; ti++) {
        const char *name = ti ? "tiny bf16" : "tiny f16";
        mp = tiny(NULL, ti ? DT_BF16 : DT_F16, 29 + ti);
        m = t_random_model(&mp, &err);
        T_CHECK(m != NULL, "%s: %s", name, err.msg);
        if (m) {
            const bool exact = run_model(m, name, ti ? NERR_BOUND_BF16 : NERR_BOUND_F16, 15 + ti);
            T_CHECK(exact || !cu_emulated(), "%s: leaves not bitwise linear decoding's", name);
        }
        model_free(m);
    }
    /* Qwen3.5's shape: Gated DeltaNet layers (states continued, copied at forks, chains
     * replayed under inner nodes) between gated attention layers; every step's rows go
     * through gdn one after another, so under the emulator each leaf has linear's bits */
    mp = tiny("qwen35", DT_F32, 28);
    mp.n_layer = 4, mp.full_attn_interval = 2;
    mp.ssm_k_heads = 1, mp.ssm_v_heads = 2, mp.ssm_state = 16;
    m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny qwen35: %s", err.msg);
    if (m) {
        const bool exact = run_model(m, "tiny qwen35", NERR_BOUND, 12);
        T_CHECK(exact || !cu_emulated(), "tiny qwen35: leaves not bitwise linear decoding's");
        topk_only(m, "tiny qwen35", 14);
    }
    model_free(m);
    tok *tk;
    if (!t_stories(&m, &tk)) return t_done();
    tok_free(tk);
    if (m) {
        run_model(m, "stories260K", NERR_BOUND, 11);
        topk_only(m, "stories260K", 13);
        grow_greedy(m, "stories260K"), grow_sampled(m, "stories260K");
        spec_greedy_dev(m, "stories260K");
        judge_dev(m, "stories260K");
        /* (under ASan the tiny model's run covers the cascade: this one costs minutes there) */
        if (!T_SANITIZED) shared_context(m, "stories260K", NERR_BOUND, 16);
        beam_vs_cpu(m, "stories260K");
        greedy_vs_cpu(m, "stories260K", 24);
    }
    model_free(m);
    return t_done();
}
