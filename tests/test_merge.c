/* test_merge.c - multi-prompt prefill, the exact merge and the experimental rope-gap merge.
 *
 * Prefill: several prompts under one context computed in one step; every prompt's leaf
 * gets bitwise the logits of decoding "context + prompt" linearly, and the step uses
 * exactly n_ctx + sum(lens) KV slots. Exact merge: three greedy completions of a prompt
 * (cot) are merged under their common ancestor; after one step the merged leaf's logits
 * equal linear decoding of its whole path (ancestor path + merged tokens), bitwise, and
 * the merged tokens are the tokenisation of the joined texts. Rope-gap: with one branch
 * and gap 0 it is an ordinary continuation (bitwise linear: this checks the hand-built
 * batch); with several branches it is measured, not asserted: over N prompts on a random
 * model and on stories260K, greedy continuations after a fixed suffix are compared with
 * those of the exact merge (token agreement by position, identical continuations), for
 * gaps 0, 16, 32 and 64, next to a control (one branch alone, no merge), printed on
 * stderr as "rope-gap vs exact: ..." and "control: ...". The rope-gap step is also checked
 * to be a step (hooks, top-k alternatives, re-scored rows). */
#include <math.h>
#include <string.h>

#include "strategy/cot.h"
#include "strategy/merge.h"
#include "convert/mkmodel.h"
#include "forest/prefill.h"
#include "forest/step.h"
#include "t.h"
#include "t_model.h"

#define MAXSEQ 1024


static void check_inv(forest *f, const char *what) {
    st_err err = {0};
    T_CHECK(forest_check(f, &err) == ST_OK, "invariants after %s: %s", what, err.msg);
}

/* Compares node id's logits from the last step against linear decoding of its path. */
static void check_linear(model_ctx *lc, const forest *f, const step_plan *p, forest_id id,
                         int32_t V, const char *what) {
    int32_t seq[MAXSEQ];
    int32_t n = forest_path(f, id, seq, MAXSEQ);
    const float *got = step_logits_of(p, id);
    float *ref = malloc(sizeof(float) * (size_t)V);
    st_err err = {0};
    T_CHECK(got != NULL, "%s: the step scored the node", what);
    T_CHECK(model_forward_linear(lc, seq, n, 0, ref, &err) == ST_OK, "%s: linear: %s", what, err.msg);
    if (got) {
        T_CHECK(t_nerr(got, ref, V) <= 1e-4, "%s: nerr %g", what, t_nerr(got, ref, V));
        T_CHECK(!memcmp(got, ref, sizeof(float) * (size_t)V), "%s: bitwise equal to linear", what);
    }
    free(ref);
}

/* ---- multi-prompt prefill ---- */

static void test_prefill(const model *m, const char *name) {
    int32_t V = m->hp.n_vocab;
    model_ctx *c = t_new_ctx(m, 512), *lc = t_new_ctx(m, 512);
    forest *f = forest_init(512, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t ctx[20], pr[5][12], lens[5] = {3, 12, 1, 0, 7};
    for (int i = 0; i < 20; i++) ctx[i] = (i * 37 + 5) % V;
    ctx[0] = 1;
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 12; i++) pr[k][i] = (k * 101 + i * 13 + 7) % V;
    const int32_t *pp[5] = {pr[0], pr[1], pr[2], pr[3], pr[4]};
    forest_id leaves[5];
    char what[96];
    T_CHECK(prefill_prompts(f, ctx, 20, pp, lens, 5, leaves, &err) == ST_OK, "prefill: %s", err.msg);
    check_inv(f, "prefill");
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "step: %s", err.msg);
    check_inv(f, "prefill step");
    int32_t sum = 3 + 12 + 1 + 0 + 7;
    T_CHECK(p.n_rows == 20 + sum, "%s: one step of %d rows (%d)", name, 20 + sum, p.n_rows);
    T_CHECK(kv_alloc_used(forest_kv(f)) == 20 + sum, "%s: KV slots used = n_ctx + sum(lens) (%d)",
            name, kv_alloc_used(forest_kv(f)));
    T_CHECK(forest_n_pending(f) == 0, "nothing left pending");
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "%s prefill prompt %d", name, k);
        const forest_node *nd = forest_get(f, leaves[k]);
        T_CHECK(nd && nd->depth == 20 + lens[k] - 1, "%s: position continues at c", what);
        check_linear(lc, f, &p, leaves[k], V, what);
    }
    /* errors leave the forest as it was */
    int32_t live = forest_n_live(f), bad[2] = {-1, 2};
    T_CHECK(prefill_prompts(f, ctx, 20, pp, bad, 2, leaves, &err) == ST_ERR_ARG, "negative length refused");
    int32_t zero[1] = {0};
    T_CHECK(prefill_prompts(f, ctx, 0, pp, zero, 1, leaves, &err) == ST_ERR_ARG, "nothing to add refused");
    T_CHECK(forest_n_live(f) == live, "refusals change nothing");
    /* no context: each prompt its own root at position 0 */
    forest_free(f);
    f = forest_init(512, 0);
    int32_t lens2[2] = {4, 6};
    T_CHECK(prefill_prompts(f, NULL, 0, pp, lens2, 2, leaves, &err) == ST_OK, "no context: %s", err.msg);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK && p.n_rows == 10, "no context: one step");
    check_linear(lc, f, &p, leaves[1], V, "prefill without context");
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

/* ---- exact merge and rope-gap ---- */

/* k greedy chains of len tokens from prompt (cot: distinct first tokens); leaves out. */
static bool make_branches(forest *f, step_plan *p, model_ctx *c, const tok *tk, int32_t V,
                          const int32_t *prompt, int32_t n_prompt, int32_t k, int32_t len,
                          forest_id *leaves, forest_id *fork) {
    st_err err = {0};
    forest_id last;
    if (forest_add_root(f, prompt, NULL, n_prompt, 0, &last, &err)) return false;
    sample_params sp = sample_default_params();
    sp.temp = 0;
    cot ct;
    if (cot_init(&ct, f, last, k, &sp, len, V, &err)) return false;
    while (!cot_done(&ct))
        if (cot_step(&ct, f, p, c, NULL, NULL, NULL, NULL, &err)) {
            cot_free(&ct);
            return false;
        }
    /* compute the last tokens too, so every branch's K/V exists */
    bool ok = step_forest(f, p, c, &err) == ST_OK;
    for (int32_t i = 0; i < k; i++) leaves[i] = ct.g.br[i].leaf;
    *fork = last;
    (void)tk;
    cot_free(&ct);
    return ok;
}

/* Greedy: n tokens after leaf, each from the last step's logits, stepping with the
 * rope-gap step when g is given. */
static int32_t greedy(forest *f, step_plan *p, model_ctx *c, merge_gap *g, forest_id leaf,
                      int32_t n, int32_t *out) {
    st_err err = {0};
    for (int32_t i = 0; i < n; i++) {
        st_code rc = g ? merge_gap_step(g, f, p, c, &err) : step_forest(f, p, c, &err);
        const float *lg = rc ? NULL : step_logits_of(p, leaf);
        if (!lg) return i;
        out[i] = sample_argmax(lg, p->n_vocab);
        if (forest_append(f, leaf, &out[i], NULL, 1, &leaf, &err)) return i;
    }
    return n;
}

typedef struct gap_stats {
    int32_t prompts, same, agree, total, first;
    int32_t base; /* positions where one branch alone agrees with the exact merge */
} gap_stats;

static void test_merge_one(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                           bool check, gap_stats *gs, int32_t gap, const char *name) {
    int32_t V = m->hp.n_vocab, K = 3, LEN = 12, ANS = 16;
    model_ctx *c = t_new_ctx(m, 1024), *lc = check ? t_new_ctx(m, 1024) : NULL;
    forest *f = forest_init(1024, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id leaves[8], fork, merged;
    char what[128];
    bool ok = make_branches(f, &p, c, tk, V, prompt, P, K, LEN, leaves, &fork);
    T_CHECK(ok, "%s: branches", name);
    if (!ok) goto out;
    /* the exact merge: one step, then linear equality of the merged leaf */
    int32_t live = forest_n_live(f);
    forest_id other = FOREST_NONE;
    int32_t lone = 5;
    if (check) {
        T_CHECK(forest_add_root(f, &lone, NULL, 1, 0, &other, &err) == ST_OK, "a second tree");
        forest_id two[2] = {leaves[0], other};
        T_CHECK(merge_branches(f, tk, two, 2, NULL, NULL, &err) == ST_ERR_ARG,
                "%s: branches of different trees refused", name);
        forest_prune(f, other, &err);
        forest_id stale = other;
        T_CHECK(merge_branches(f, tk, &stale, 1, NULL, NULL, &err) == ST_ERR_ARG, "stale id refused");
        T_CHECK(forest_n_live(f) == live, "refusals change nothing");
    }
    T_CHECK(merge_branches(f, tk, leaves, K, NULL, &merged, &err) == ST_OK, "%s: merge: %s", name, err.msg);
    check_inv(f, "merge");
    if (check) {
        char *joined = merge_join_text(f, tk, NULL, leaves, K, NULL, NULL, &err);
        int32_t nt = 0, *mt = joined ? merge_encode(tk, joined, &nt, &err) : NULL;
        int32_t path[MAXSEQ], np = forest_path(f, merged, path, MAXSEQ);
        T_CHECK(mt && np == P + nt && !memcmp(path + P, mt, sizeof(int32_t) * (size_t)nt),
                "%s: the merged chain hangs under the ancestor and holds the joined text's tokens", name);
        T_CHECK(joined && strstr(joined, "\n\n"), "%s: the texts are joined with the separator", name);
        const forest_node *fn = forest_get(f, merged);
        int32_t top = forest_index(merged);
        for (int32_t i = 1; i < nt; i++) top = forest_node_at(f, top)->parent;
        T_CHECK(fn && forest_node_at(f, top)->parent == forest_index(fork), "%s: parent is the fork", name);
        free(joined);
        free(mt);
    }
    int32_t before = kv_alloc_used(forest_kv(f));
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "%s: merge step: %s", name, err.msg);
    T_CHECK(kv_alloc_used(forest_kv(f)) - before == p.n_rows, "one prefill step");
    if (check) {
        snprintf(what, sizeof what, "%s merged leaf", name);
        check_linear(lc, f, &p, merged, V, what);
    }
    /* the answer suffix, then greedy continuations: exact merge vs rope-gap */
    int32_t ns = 0, *suffix = merge_encode(tk, "\n\nOne day", &ns, &err);
    forest_id a_last, g_last;
    int32_t exact[64], viagap[64];
    forest_append(f, merged, suffix, NULL, ns, &a_last, &err);
    int32_t ne = greedy(f, &p, c, NULL, a_last, ANS, exact);
    merge_gap *g = merge_gap_init(f, leaves, K, gap, suffix, ns, &g_last, &err);
    T_CHECK(g != NULL, "%s: rope-gap init: %s", name, err.msg);
    int32_t ng = g ? greedy(f, &p, c, g, g_last, ANS, viagap) : 0;
    T_CHECK(ne == ANS && ng == ANS, "%s: both continuations ran (%d, %d)", name, ne, ng);
    check_inv(f, "rope-gap steps");
    /* the control: one branch alone (the first), no merge at all */
    forest_id b_last;
    int32_t alone[64];
    forest_append(f, leaves[0], suffix, NULL, ns, &b_last, &err);
    int32_t nb = greedy(f, &p, c, NULL, b_last, ANS, alone);
    int32_t agree = 0;
    for (int32_t i = 0; i < ANS; i++) agree += exact[i] == viagap[i];
    for (int32_t i = 0; i < nb; i++) gs->base += exact[i] == alone[i];
    gs->prompts++;
    gs->agree += agree;
    gs->total += ANS;
    gs->same += agree == ANS;
    gs->first += exact[0] == viagap[0];
    merge_gap_free(g);
    free(suffix);
out:
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

/* One branch, gap 0: the rope-gap step must be plain linear decoding of the path. */
static void test_gap_single(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                            const char *name) {
    int32_t V = m->hp.n_vocab;
    model_ctx *c = t_new_ctx(m, 512), *lc = t_new_ctx(m, 512);
    forest *f = forest_init(512, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id leaves[2], fork, last;
    T_CHECK(make_branches(f, &p, c, tk, V, prompt, P, 2, 6, leaves, &fork), "branches");
    int32_t t[3] = {7 % V, 11 % V, 13 % V};
    merge_gap *g = merge_gap_init(f, leaves, 1, 0, t, 3, &last, &err);
    T_CHECK(g && merge_gap_step(g, f, &p, c, &err) == ST_OK, "%s: single rope-gap step: %s", name, err.msg);
    char what[96];
    snprintf(what, sizeof what, "%s rope-gap, one branch, gap 0", name);
    if (g) check_linear(lc, f, &p, last, V, what);
    /* pruning a chosen branch makes the next rope-gap step refuse */
    forest_id extra;
    forest_append(f, last, t, NULL, 1, &extra, &err);
    forest_prune(f, leaves[0], &err); /* takes the chain with it */
    T_CHECK(g && merge_gap_step(g, f, &p, c, &err) == ST_ERR_ARG, "%s: a pruned branch is refused", name);
    T_CHECK(!merge_gap_init(f, leaves, 2, 0, t, 3, NULL, &err), "a stale leaf refused at init");
    merge_gap_free(g);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

static void count_hook(void *ud) { (*(int32_t *)ud)++; }

/* The rope-gap step is a step in every way but its rows' placement: the forward hooks
 * run, the forest's top-k alternatives are stored, and a re-scored node (computed,
 * flagged FOREST_WANT_LOGITS) runs again in its own slot at its shifted position and gets
 * bitwise the logits it had (it reached forest_mark_computed's assert before). */
static void test_gap_is_step(const model *m, const tok *tk, const int32_t *prompt, int32_t P,
                             const char *name) {
    enum { K = 4 };
    int32_t V = m->hp.n_vocab, hooks = 0;
    model_ctx *c = t_new_ctx(m, 512);
    forest *f = forest_init(512, K);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    forest_id leaves[2], fork, last;
    T_CHECK(make_branches(f, &p, c, tk, V, prompt, P, 2, 6, leaves, &fork), "branches");
    int32_t t[3] = {7 % V, 11 % V, 13 % V};
    merge_gap *g = merge_gap_init(f, leaves, 2, 16, t, 3, &last, &err);
    p.forward_begin = count_hook;
    p.forward_end = count_hook;
    p.forward_ud = &hooks; /* (both hooks count here) */
    T_CHECK(g && merge_gap_step(g, f, &p, c, &err) == ST_OK, "%s: rope-gap step: %s", name, err.msg);
    T_CHECK(hooks == 2, "%s: the rope-gap step calls the forward hooks (%d calls)", name, hooks);
    bool mapped = p.n_rows > 0;
    for (int32_t r = 0; r < p.n_rows; r++) mapped &= p.row_of[p.node[r]] == r;
    T_CHECK(mapped, "%s: the plan maps each row's node to its row (the rope-gap step reads it)", name);
    int32_t ids[K];
    T_CHECK(forest_topk(f, last, ids, NULL, K) == K, "%s: the rope-gap step stores top-k alternatives", name);
    const float *lg = step_logits_of(&p, last);
    float *before = malloc(sizeof(float) * (size_t)V);
    if (lg) memcpy(before, lg, sizeof(float) * (size_t)V);
    forest_set_flags(f, last, FOREST_WANT_LOGITS, 0);
    T_CHECK(g && merge_gap_step(g, f, &p, c, &err) == ST_OK, "%s: re-scoring step: %s", name, err.msg);
    lg = step_logits_of(&p, last);
    T_CHECK(lg && !memcmp(lg, before, sizeof(float) * (size_t)V),
            "%s: a re-scored rope-gap node gets bitwise its logits back", name);
    check_inv(f, "a re-scoring rope-gap step");
    free(before);
    merge_gap_free(g);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

static void report(const gap_stats *s, const char *name, int32_t gap) {
    fprintf(stderr, "rope-gap vs exact: %s gap %d: %d prompts, %d/%d tokens agree by position "
            "(%.0f%%), first token agrees in %d, identical continuations %d\n", name, gap,
            s->prompts, s->agree, s->total, s->total ? 100.0 * s->agree / s->total : 0.0,
            s->first, s->same);
    fprintf(stderr, "  control: %s, one branch alone (no merge): %d/%d tokens agree with the exact "
            "merge (%.0f%%)\n", name, s->base, s->total, s->total ? 100.0 * s->base / s->total : 0.0);
    T_CHECK(s->prompts > 0 && s->total > 0, "%s: the comparison ran", name);
}

static void run_model(const model *m, const tok *tk, const char *name, const char *const *texts,
                      int32_t n_texts) {
    int32_t prompts[16][64], lens[16];
    for (int32_t i = 0; i < n_texts; i++)
        lens[i] = tok_encode(tk, texts[i], strlen(texts[i]), true, false, prompts[i], 64);
    test_prefill(m, name);
    test_gap_single(m, tk, prompts[0], lens[0], name);
    test_gap_is_step(m, tk, prompts[1], lens[1], name);
    int32_t gaps[4] = {0, 16, 32, 64};
    for (int32_t gi = 0; gi < 4; gi++) {
        gap_stats gs = {0};
        for (int32_t i = 0; i < n_texts; i++)
            test_merge_one(m, tk, prompts[i], lens[i], gi == 0 && i < 2, &gs, gaps[gi], name);
        report(&gs, name, gaps[gi]);
    }
}

int main(void) {
    static const char *const texts[16] = {
        "Once upon a time, there was a little girl named Lily.",
        "Tom and his dog went to the park.",
        "The sun was hot. Sam wanted to swim in the lake.",
        "One day, a big bird flew over the farm.",
        "Mia had a red ball. She loved to play with it.",
        "There was a small cat who lived in a box.",
        "Ben found a shiny stone near the river.",
        "Anna and her mom baked a cake for dad.",
        "Max the dog liked to dig holes in the garden.",
        "It was raining, so Lucy stayed inside with her toys.",
        "A little fish swam in the big blue sea.",
        "Jack wanted to fly a kite with his friend.",
        "The old tree in the park had a secret door.",
        "Sara saw a rainbow after the storm.",
        "Tim lost his hat on a windy day.",
        "The bunny hopped to the garden to find a carrot.",
    };
    char path[] = "/tmp/md_test_merge_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    mkmodel_params mp = mkmodel_default_params();
    mp.n_ctx = 2048;
    st_err err = {0};
    model *m = NULL;
    if (mkmodel_write(&mp, path, &err) == ST_OK) m = model_load(path, &err);
    unlink(path);
    tok *tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "random model: %s", err.msg);
    if (m && tk) run_model(m, tk, "random", texts, 16);
    tok_free(tk);
    model_free(m);

    const char *spath = t_shared("models/stories260K.gguf");
    if (!spath) {
        T_MISSING("stories260K fixture absent");
        return t_done();
    }
    m = model_load(spath, &err);
    tk = m ? tok_from_gguf(m->gguf, &err) : NULL;
    T_CHECK(m && tk, "stories260K: %s", err.msg);
    if (m && tk) run_model(m, tk, "stories260K", texts, 16);
    tok_free(tk);
    model_free(m);
    return t_done();
}
