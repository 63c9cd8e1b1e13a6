/* test_cuda_graphs.c - the cuda backend's step graphs (kernels/cuda/graphs.h), emulated
 * under make test: a greedy decode whose steps are captured once per shape and replayed
 * gives bitwise the logits and tokens of the same decode with graphs off
 * (MD_CUDA_GRAPHS=0), on a random Q8_0 model (the int8 few-row product, GQA), a Qwen3.5
 * (its Gated DeltaNet rows recorded too: a decode step is one graph) and stories260K (F32:
 * the prompt's many-row product through cuBLAS ends recordings early).
 *
 * Each run: a prompt of 20 tokens in one step, then STEPS greedy steps of one leaf, then
 * a fork into two leaves grown together for STEPS more (a new shape). Counted through
 * cu_graphs_of: a shape's first step runs as recorded, its second is captured into a
 * graph and every later one replays it: 1 capture and STEPS - 2 replays for the one-leaf
 * steps, and as many or one more for the two-leaf ones after the fork's step; the fork
 * grows the logits buffer, whose free drops the one-leaf graph. A 200-token prompt
 * overflows the arena of batch arrays (the rest of its step runs as it comes, the arena
 * grows). With graphs off nothing is recorded. */
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "kernels/cuda/cu.h"
#include "t.h"
#include "t_model.h"

#define STEPS 6
#define PROMPT 20
#define LONG_PROMPT 200 /* more than the arena's first 4 KiB of batch arrays */

typedef struct decode_run {
    int32_t toks[3 * STEPS];     /* the greedy tokens, in the order they were taken */
    float *logits;               /* (3 * STEPS, V) the logits each token was taken from */
    cu_graph_counts at[4];       /* counts after the prompt, the one-leaf steps, the fork, the
                                    two-leaf steps */
    uint64_t arena;              /* the arena's bytes in the prompt's step */
} decode_run;

/* One greedy step of every leaf in leaves (n of them, their logits from plan), each
 * leaf's token appended and its logits kept in r at *at. */
static bool grow_leaves(forest *f, step_plan *p, forest_id *leaves, int32_t n, int32_t V,
                        decode_run *r, int32_t *at) {
    st_err err = {0};
    for (int32_t k = 0; k < n; k++) {
        const float *lg = step_logits_of(p, leaves[k]);
        if (!lg) return false;
        const int32_t t = sample_argmax(lg, V);
        memcpy(r->logits + (size_t)*at * V, lg, sizeof(float) * V);
        r->toks[(*at)++] = t;
        if (forest_append(f, leaves[k], &t, NULL, 1, &leaves[k], &err) != ST_OK) return false;
    }
    return true;
}

/* The decode described above on a fresh cuda context, graphs on or off, after a prompt
 * of np tokens. */
static bool decode(const model *m, bool graphs, int32_t np, uint64_t seed, decode_run *r) {
    const int32_t V = m->hp.n_vocab;
    setenv("MD_CUDA_GRAPHS", graphs ? "1" : "0", 1);
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = 256;
    cp.backend = "cuda";
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "cuda context: %s", err.msg);
    if (!c) return false;
    kern_backend *be = model_ctx_backend(c);
    forest *f = forest_init(cp.n_slots, 0);
    step_plan p;
    step_plan_init(&p);
    int32_t prompt[LONG_PROMPT], at = 0;
    for (int32_t i = 0; i < np; i++) prompt[i] = (int32_t)((seed = seed * 6364136223846793005ULL + 1) >> 33) % V;
    forest_id leaves[2];
    bool ok = forest_add_root(f, prompt, NULL, np, 0, &leaves[0], &err) == ST_OK &&
              step_forest(f, &p, c, &err) == ST_OK;
    r->arena = cu_graphs_of(be).arena;
    r->at[0] = cu_graphs_of(be);
    for (int32_t s = 0; ok && s < STEPS; s++)
        ok = grow_leaves(f, &p, leaves, 1, V, r, &at) && step_forest(f, &p, c, &err) == ST_OK;
    r->at[1] = cu_graphs_of(be);
    /* the fork: the leaf's greedy token and the one after it, both under it, then both grow */
    const float *lg = ok ? step_logits_of(&p, leaves[0]) : NULL;
    const int32_t t[2] = {lg ? sample_argmax(lg, V) : 0, lg ? (sample_argmax(lg, V) + 1) % V : 0};
    const forest_id parent = leaves[0];
    for (int32_t k = 0; k < 2; k++)
        ok = ok && lg && forest_append(f, parent, &t[k], NULL, 1, &leaves[k], &err) == ST_OK;
    ok = ok && step_forest(f, &p, c, &err) == ST_OK;
    r->at[2] = cu_graphs_of(be);
    for (int32_t s = 0; ok && s < STEPS; s++)
        ok = grow_leaves(f, &p, leaves, 2, V, r, &at) && step_forest(f, &p, c, &err) == ST_OK;
    r->at[3] = cu_graphs_of(be);
    T_CHECK(ok, "decode with graphs %s: %s", graphs ? "on" : "off", err.msg);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    return ok;
}

static void print_counts(const char *name, const char *when, cu_graph_counts g) {
    fprintf(stderr, "%s: %s: %llu captures, %llu replays, %llu run as recorded, %llu graphs kept\n",
            name, when, (unsigned long long)g.captures, (unsigned long long)g.replays,
            (unsigned long long)g.eager, (unsigned long long)g.graphs);
}

static void graphs_vs_none(const model *m, const char *name, int32_t np, uint64_t seed) {
    const int32_t V = m->hp.n_vocab;
    decode_run on = {.logits = malloc(sizeof(float) * 3 * STEPS * V)};
    decode_run off = {.logits = malloc(sizeof(float) * 3 * STEPS * V)};
    if (decode(m, true, np, seed, &on) && decode(m, false, np, seed, &off)) {
        T_CHECK(memcmp(on.toks, off.toks, sizeof on.toks) == 0, "%s: greedy tokens differ with graphs", name);
        T_CHECK(memcmp(on.logits, off.logits, sizeof(float) * 3 * STEPS * V) == 0,
                "%s: logits with graphs are not the bits of logits without", name);
        print_counts(name, "after the prompt", on.at[0]);
        print_counts(name, "after the one-leaf steps", on.at[1]);
        print_counts(name, "after the two-leaf steps", on.at[3]);
        /* the one-leaf steps' graph captured in their second step, replayed in every later
         * one; the two-leaf steps' likewise, or a step later where the fork's step differs
         * from theirs (a recurrent model's fork copies its parent's state cell) */
        const cu_graph_counts *a = on.at;
        T_CHECK(a[1].captures - a[0].captures == 1 && a[1].replays - a[0].replays == STEPS - 2,
                "%s: %d one-leaf steps: %llu captures and %llu replays (want 1 and %d)", name,
                STEPS, (unsigned long long)(a[1].captures - a[0].captures),
                (unsigned long long)(a[1].replays - a[0].replays), STEPS - 2);
        T_CHECK(a[3].captures - a[2].captures <= 1 && a[3].replays - a[2].replays >= STEPS - 2,
                "%s: %d two-leaf steps: %llu captures and %llu replays (want 1 and %d or more)",
                name, STEPS, (unsigned long long)(a[3].captures - a[2].captures),
                (unsigned long long)(a[3].replays - a[2].replays), STEPS - 2);
        /* growing the logits buffer for two rows freed the old one: the one-row graph,
         * which wrote into it, was dropped with every other */
        T_CHECK(a[1].graphs == 1 && a[3].graphs == 1, "%s: graphs kept: %llu after the "
                "one-leaf steps, %llu after the two-leaf ones (want 1 and 1)", name,
                (unsigned long long)a[1].graphs, (unsigned long long)a[3].graphs);
        /* a long prompt's arrays left its step's arena: the next step's is larger */
        T_CHECK((np == LONG_PROMPT) == (on.at[1].arena > on.arena), "%s: arena %llu bytes in the "
                "prompt's step, %llu after", name, (unsigned long long)on.arena,
                (unsigned long long)on.at[1].arena);
        const cu_graph_counts z = off.at[3];
        T_CHECK(z.captures == 0 && z.replays == 0 && z.eager == 0,
                "%s: MD_CUDA_GRAPHS=0 still recorded steps", name);
    }
    free(on.logits);
    free(off.logits);
}

int main(void) {
    st_err err = {0};
    if (!t_cuda_device()) return t_done();
    mkmodel_params mp = mkmodel_default_params();
    mp.wtype = DT_Q8_0, mp.seed = 31;
    mp.n_embd = 64, mp.n_head = 4, mp.n_head_kv = 2, mp.n_ff = 96;
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny model: %s", err.msg);
    if (m) graphs_vs_none(m, "tiny q8_0 gqa2", PROMPT, 3);
    /* a prompt whose arrays overflow the arena: the rest of its step runs as it comes */
    if (m) graphs_vs_none(m, "tiny q8_0 gqa2, a long prompt", LONG_PROMPT, 4);
    model_free(m);
    /* Qwen3.5's shape: Gated DeltaNet layers, each row's state cell picked on the host */
    mp = mkmodel_default_params();
    mp.arch = "qwen35", mp.wtype = DT_F32, mp.seed = 28;
    mp.n_embd = 64, mp.n_head = 4, mp.n_head_kv = 2, mp.n_ff = 96;
    mp.n_layer = 4, mp.full_attn_interval = 2;
    mp.ssm_k_heads = 1, mp.ssm_v_heads = 2, mp.ssm_state = 16;
    m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "tiny qwen35: %s", err.msg);
    if (m) graphs_vs_none(m, "tiny qwen35", PROMPT, 6);
    model_free(m);
    tok *tk;
    if (!t_stories(&m, &tk)) return t_done();
    tok_free(tk);
    if (m) graphs_vs_none(m, "stories260K", PROMPT, 5);
    model_free(m);
    return t_done();
}
