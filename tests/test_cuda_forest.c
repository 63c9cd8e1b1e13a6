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
 * The greedy steps run as replayed CUDA graphs (kernels/cuda/graphs.h), counted. Leaves
 * over a prompt longer than an attention chunk share its chunks (the cascade) and keep
 * linear decoding's bits. Steps that leave their rows on the device: test_cuda_topk.c. */
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "t.h"
#include "t_model.h"
#include "t_cuda.h"

#define NERR_BOUND 1e-4
#define NERR_BOUND_Q8 3e-2 /* against ref where the weights are a block type: int8 activations */
/* against ref where the weights are F16 or BF16: every product's activations rounded to
 * them (u = 2^-11, 2^-8 each), about 10 u through the layers (seen 6.0e-4, 4.2e-3) */
#define NERR_BOUND_F16 5e-3
#define NERR_BOUND_BF16 3e-2
#define GREEDY 12

/* Appends k chains of len random tokens under node. */
static void add_forks(forest *f, forest_id node, int32_t k, int32_t len, uint64_t *s, int32_t V) {
    int32_t toks[16];
    st_err err = {0};
    for (int32_t j = 0; j < k; j++) {
        for (int32_t i = 0; i < len; i++) toks[i] = (int32_t)(t_lcg(s) % (uint64_t)V);
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
    model_ctx *c = t_ctx_on(m, "cuda", n_slots), *lc = t_ctx_on(m, "cuda", n_slots), *cc = t_ctx_on(m, "ref", n_slots);
    if (!c || !lc || !cc) goto out;
    forest *f = forest_init(n_slots, 4);
    step_plan plan;
    step_plan_init(&plan);
    st_err err = {0};
    int32_t prompt[20];
    for (int32_t i = 0; i < 20; i++) prompt[i] = (int32_t)(t_lcg(&seed) % (uint64_t)V);
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
    model_ctx *c = t_ctx_on(m, "cuda", N_SLOTS), *lc = t_ctx_on(m, "cuda", N_SLOTS), *cc = t_ctx_on(m, "ref", N_SLOTS);
    forest *f = forest_init(N_SLOTS, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t prompt[NP], bitwise = 0, scored = 0;
    for (int32_t i = 0; i < NP; i++) prompt[i] = (int32_t)(t_lcg(&seed) % (uint64_t)V);
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

/* A random model of mp through run_model (bound: against ref), then freed. */
static void run_random(const mkmodel_params *mp, const char *name, double bound, uint64_t seed) {
    st_err err = {0};
    model *m = t_random_model(mp, &err);
    T_CHECK(m != NULL, "%s: %s", name, err.msg);
    if (m) run_model(m, name, bound, seed);
    model_free(m);
}

int main(void) {
    st_err err = {0};
    if (!t_cuda_device()) return t_done();
    setenv("MD_BACKEND", "cuda", 1); /* t_greedy_linear's contexts */
    mkmodel_params mp = t_tiny(NULL, DT_Q8_0, 26);
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny model: %s", err.msg);
    if (m) run_model(m, "tiny q8_0 gqa2", NERR_BOUND_Q8, 7);
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
    mp = t_tiny("gemma4", DT_F32, 27);
    mp.n_layer = 4, mp.n_swa = 8, mp.swa_pattern = 2, mp.n_kv_shared = 2, mp.n_embd_ple = 32;
    mp.softcap = 10.0f;
    run_random(&mp, "tiny gemma4 softcap", NERR_BOUND, 9);
    /* F16 and BF16 weights: the first step's many-row product on tensor cores (GemmEx), the
     * later ones the few-row kernel, both on activations rounded to the weights' type, so
     * under the emulator every leaf has linear decoding's bits */
    for (int ti = 0; ti < 2; ti++) {
        const char *name = ti ? "tiny bf16" : "tiny f16";
        mp = t_tiny(NULL, ti ? DT_BF16 : DT_F16, 29 + ti);
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
    mp = t_tiny("qwen35", DT_F32, 28);
    mp.n_layer = 4, mp.full_attn_interval = 2;
    mp.ssm_k_heads = 1, mp.ssm_v_heads = 2, mp.ssm_state = 16;
    m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny qwen35: %s", err.msg);
    if (m) {
        const bool exact = run_model(m, "tiny qwen35", NERR_BOUND, 12);
        T_CHECK(exact || !cu_emulated(), "tiny qwen35: leaves not bitwise linear decoding's");
    }
    model_free(m);
    tok *tk;
    if (!t_stories(&m, &tk)) return t_done();
    tok_free(tk);
    if (m) {
        run_model(m, "stories260K", NERR_BOUND, 11);
        /* (under ASan the tiny model's run covers the cascade: this one costs minutes there) */
        if (!T_SANITIZED) shared_context(m, "stories260K", NERR_BOUND, 16);
        greedy_vs_cpu(m, "stories260K", 24);
    }
    model_free(m);
    return t_done();
}
