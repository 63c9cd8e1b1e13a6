/* test_window.c - sliding-window attention (model_hparams n_swa) in linear decoding and
 * in a forest.
 *
 * On a windowed layer a row at position P sees only the keys of its own path at positions
 * (P - n_swa, P]. Checked here on random llama models with a small window forced on:
 * - a one-layer model, every layer windowed: the last token's logits after a sequence
 *   longer than the window are those of the window's tokens alone at the same positions
 *   (nothing else reaches it), bit for bit, and differ from the unwindowed model's;
 * - a forest whose prompt is longer than the window, with forks beyond the window and
 *   within it, grown greedily in shared steps, a branch pruned and the cache compacted:
 *   every leaf equal bit for bit to its path decoded alone, on a model with windowed and
 *   global layers, and on one where every layer is windowed;
 * - the same on Gemma 3 270M when fetched, with a prompt of 530 tokens (window 512);
 * - the plan's windowed segments: exactly the ancestors within the window, in path order;
 * - a batch without windowed segments on a windowed model is refused;
 * - the teaching views: the mask pane marks ancestors outside the window ':' apart from
 *   non-ancestors '.', and says which layers are windowed; `plan --window` likewise. */
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "t.h"
#include "t_model.h"
#include "t_run.h"
#include "../ui/mask_view.h"

#define W 8          /* the window forced on */
#define N_SLOTS 256  /* the small tests' cache */
#define PROMPT 20    /* longer than the window */
#define GROW 12      /* greedy steps */

static model *random_model(int32_t n_layer, uint64_t seed) {
    mkmodel_params mp = mkmodel_default_params();
    mp.n_layer = n_layer;
    mp.seed = seed;
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    return m;
}

/* One layer, windowed: after PROMPT tokens, the last one sees only the last W. */
static void test_one_layer(void) {
    model *m = random_model(1, 3);
    if (!m) return;
    const int32_t V = m->hp.n_vocab;
    int32_t toks[PROMPT];
    for (int32_t i = 0; i < PROMPT; i++) toks[i] = (i * 37 + 11) % V;
    float *win = malloc(sizeof(float) * V), *alone = malloc(sizeof(float) * V),
          *full = malloc(sizeof(float) * V);
    model_ctx *c = t_new_ctx(m, N_SLOTS);
    st_err err = {0};
    model_hparams_set_window(&m->hp, W, 0);
    T_CHECK(model_forward_linear(c, toks, PROMPT, 0, win, &err) == ST_OK, "windowed: %s", err.msg);
    model_hparams_set_window(&m->hp, 0, 0);
    T_CHECK(t_linear(c, toks + PROMPT - W, W, PROMPT - W, alone) == ST_OK, "the window alone");
    T_CHECK(t_linear(c, toks, PROMPT, 0, full) == ST_OK, "no window");
    T_CHECK(!memcmp(win, alone, sizeof(float) * V),
            "one windowed layer: the last token's logits are those of its window alone (nerr %.3g)",
            t_nerr(win, alone, V));
    T_CHECK(memcmp(win, full, sizeof(float) * V) != 0, "the window changes the logits");
    /* the same through a forest step: a root chain of PROMPT tokens */
    model_hparams_set_window(&m->hp, W, 0);
    forest *f = forest_init(N_SLOTS, 0);
    step_plan p;
    step_plan_init(&p);
    forest_id last;
    forest_add_root(f, toks, NULL, PROMPT, 0, &last, &err);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "forest step: %s", err.msg);
    const float *lg = step_logits_of(&p, last);
    T_CHECK(lg && !memcmp(lg, alone, sizeof(float) * V),
            "one windowed layer, forest: the last token's logits are those of its window alone");
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    free(win), free(alone), free(full);
    model_free(m);
}

/* Every leaf scored by the last step against its path decoded alone (lc, windowed as
 * the model is; a leaf's decoding starts where its path leaves the previous leaf's, whose
 * rows lc still holds); returns the leaves that differ in any bit. */
static int32_t leaves_differ(forest *f, const step_plan *p, model_ctx *lc, int32_t V,
                             int32_t n_slots, int32_t *scored) {
    forest_id leaves[64];
    int32_t n = forest_leaves(f, leaves, 64), bad = 0, prev_len = 0;
    int32_t *path = malloc(sizeof(int32_t) * 2 * n_slots), *prev = path + n_slots;
    float *ref = malloc(sizeof(float) * V);
    *scored = 0;
    for (int32_t k = 0; k < n; k++) {
        const float *lg = step_logits_of(p, leaves[k]);
        if (!lg) continue;
        int32_t len = forest_path(f, leaves[k], path, n_slots), from = 0;
        while (from < len - 1 && from < prev_len && path[from] == prev[from]) from++;
        t_linear_from(lc, path, from, len, 0, ref);
        memcpy(prev, path, sizeof(int32_t) * (size_t)len);
        prev_len = len;
        bad += memcmp(lg, ref, sizeof(float) * V) != 0;
        (*scored)++;
    }
    free(ref);
    free(path);
    return bad;
}

/* One greedy token under every leaf; false when a step failed. */
static bool grow_leaves(forest *f, step_plan *p, int32_t V) {
    forest_id leaves[64];
    int32_t n = forest_leaves(f, leaves, 64);
    st_err err = {0};
    for (int32_t k = 0; k < n; k++) {
        const float *lg = step_logits_of(p, leaves[k]);
        int32_t t = lg ? sample_argmax(lg, V) : 0;
        if (forest_append(f, leaves[k], &t, NULL, 1, NULL, &err)) return false;
    }
    return true;
}

/* The plan's windowed segments: row r sees, on windowed layers, exactly its ancestors
 * (and itself) at depth > pos - W, and its segments list them in path order. */
static void check_plan_windows(forest *f, const step_plan *p, int32_t w, const char *name) {
    bool ok = p->n_swa == w;
    for (int32_t r = 0; r < p->n_rows && ok; r++) {
        int32_t in = 0, keys = 0, prev = -1;
        for (int32_t i = p->node[r]; i >= 0; i = forest_node_at(f, i)->parent) {
            const forest_node *nd = forest_node_at(f, i);
            int32_t s = i == p->node[r] ? p->slot[r] : nd->kv_slot;
            if (nd->state == FOREST_PENDING) /* a pending ancestor: its slot is its row's */
                for (int32_t q = 0; q < p->n_rows; q++)
                    if (p->node[q] == i) s = p->slot[q];
            bool want = nd->depth > p->pos[r] - w;
            ok = ok && step_plan_sees_window(p, r, s) == want && step_plan_sees(p, r, s);
            in += want;
        }
        for (int32_t i = p->seg_off_swa[r]; i < p->seg_off_swa[r + 1]; i++) {
            keys += p->segs_swa[i].len;
            ok = ok && p->segs_swa[i].start != prev; /* no segment repeated */
            prev = p->segs_swa[i].start;
        }
        ok = ok && keys == in;
    }
    T_CHECK(ok, "%s: each row's windowed segments are its ancestors within the window", name);
}

/* A forest on model m: two branches forked at depth 3, one short, one going on with a
 * prompt (so a fork beyond the window of everything after it; prompt tokens in all, more
 * than the window), three forks at that prompt's end (within the window); greedy growth
 * of the four leaves in grow shared steps, one leaf pruned and the cache compacted
 * halfway. The leaves are checked after the first step, the compaction and the last. */
static void test_forest_window(model *m, const char *name, int32_t prompt, int32_t grow) {
    const int32_t V = m->hp.n_vocab, n_slots = prompt + 8 * grow + 32;
    forest *f = forest_init(n_slots, 0);
    model_ctx *c = t_new_ctx_rows(m, n_slots, 16), *lc = t_new_ctx_rows(m, n_slots, 0);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)prompt), br[6];
    for (int32_t i = 0; i < prompt; i++) toks[i] = (i * 53 + 7) % V;
    forest_id fork3, last, victim = FOREST_NONE;
    forest_add_root(f, toks, NULL, 3, 0, &fork3, &err);
    for (int32_t b = 0; b < 2; b++) { /* beyond: 17 more tokens each, then more */
        for (int32_t i = 0; i < 6; i++) br[i] = (b * 101 + i * 13 + 5) % V;
        forest_append(f, fork3, br, NULL, 6, &last, &err);
    }
    forest_append(f, last, toks + 3, NULL, prompt - 3, &last, &err);
    for (int32_t b = 0; b < 3; b++) { /* within: forks at the end of a long path */
        br[0] = (b * 29 + 3) % V;
        forest_append(f, last, br, NULL, 1, b == 1 ? &victim : NULL, &err);
    }
    int32_t bad = 0, scored = 0, total = 0, s;
    for (s = 0; s < grow; s++) {
        if (s == grow / 2) { /* prune a branch, compact, and go on */
            T_CHECK(forest_prune(f, victim, &err) == ST_OK, "prune: %s", err.msg);
            T_CHECK(step_compact(f, c, &err) == ST_OK, "compact: %s", err.msg);
        }
        if (step_plan_build(f, &p, &err) != ST_OK) break;
        T_CHECK(step_plan_window(&p, &m->hp, &err) == ST_OK, "window: %s", err.msg);
        if (s == 0 || s == grow - 1) check_plan_windows(f, &p, m->hp.n_swa, name);
        if (step_run(f, &p, c, &err) != ST_OK) break;
        if (s == 0 || s == grow / 2 || s == grow - 1) {
            bad += leaves_differ(f, &p, lc, V, n_slots, &scored);
            total += scored;
        }
        if (!grow_leaves(f, &p, V)) break;
    }
    T_CHECK(s == grow, "%s: step %d: %s", name, s, err.msg);
    T_CHECK(bad == 0 && total == 4 + 3 + 3, "%s: %d of %d leaf rows differ from their path "
            "decoded alone (bitwise)", name, bad, total);
    free(toks);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
    model_ctx_free(lc);
}

/* A windowed model needs windowed segments: a batch without them changes nothing. */
static void test_batch_needs_window(model *m) {
    model_ctx *c = t_new_ctx(m, N_SLOTS);
    int32_t tok = 1, pos = 0, off[2] = {0, 1};
    kern_seg seg = {0, 1};
    model_batch b = {.n_rows = 1, .tokens = &tok, .pos = &pos, .slot = &pos, .seg_off = off,
                     .segs = &seg};
    float *lg = malloc(sizeof(float) * m->hp.n_vocab);
    st_err err = {0};
    T_CHECK(model_forward(c, &b, lg, &err) == ST_ERR_ARG && strstr(err.msg, "window"),
            "a batch without windowed segments is refused: %s", err.msg);
    free(lg);
    model_ctx_free(c);
}

/* The mask pane of a step on a window of 4 (layer 0 of 2): a prompt of 10 tokens and two
 * children of its last token. */
static void test_mask_view(model *m) {
    model_hparams_set_window(&m->hp, 4, 2);
    forest *f = forest_init(64, 0);
    model_ctx *c = t_new_ctx(m, 64);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    int32_t toks[10] = {5, 9, 12, 40, 41, 42, 43, 44, 45, 46}, t2[2] = {70, 71};
    forest_id last, kid[2];
    forest_add_root(f, toks, NULL, 10, 0, &last, &err);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "prompt: %s", err.msg);
    for (int i = 0; i < 2; i++) forest_append(f, last, &t2[i], NULL, 1, &kid[i], &err);
    T_CHECK(step_forest(f, &p, c, &err) == ST_OK, "children: %s", err.msg);
    mask_view *v = malloc(sizeof *v);
    mv_init(v);
    mv_capture(v, f, NULL, &p, 1);
    /* row 0 is the first child (depth 10): it sees depths 7-10 in its window, 0-6 only on
     * the global layer, and not its sibling's slot */
    int32_t s_kid1 = forest_get(f, kid[1])->kv_slot;
    bool ok = v->n_rows == 2 && v->n_swa == 4;
    for (int32_t col = 0; col < v->n_cols && ok; col++) {
        int32_t slot = v->cols[col];
        char want = slot == s_kid1 ? '.' : slot < 7 ? ':' : '#';
        char got = !mv_sees(v, 0, col) ? '.' : mv_outside_window(v, 0, col) ? ':' : '#';
        ok = got == want;
    }
    T_CHECK(ok, "the first child's cells: ':' for depths 0-6, '#' for 7-10 and itself, '.' its sibling");
    char buf[256];
    mv_layout(v, 4); /* narrow: runs of slots, which must not join ':' and '#' */
    int32_t colon = 0, hash = 0;
    for (int32_t d = 0; d < v->n_dcols; d++) {
        colon += mv_cell(v, 0, d) == ':';
        hash += mv_cell(v, 0, d) == '#';
    }
    T_CHECK(v->runs && colon == 1 && hash >= 1, "runs keep the window apart: %d ':' columns, %d '#'",
            colon, hash);
    mv_marks(v, buf, sizeof buf, 200, false);
    T_CHECK(strstr(buf, ": beyond window") != NULL, "the marks say what ':' is: %s", buf);
    mv_header(v, buf, sizeof buf, 200, false);
    T_CHECK(strstr(buf, "window 4 on layer 0; layer 1 global") != NULL, "the header names the layers: %s", buf);
    model_window_text(&m->hp, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "window 4 on layer 0; layer 1 global"), "window text: %s", buf);
    free(v);
    step_plan_free(&p);
    forest_free(f);
    model_ctx_free(c);
}

/* `plan --window`: the grid marks ':' and the JSON has each row's windowed slots. */
static void test_plan_cli(void) {
    char bin[512], model_path[4096];
    if (!t_cli_setup(bin, sizeof bin, model_path, sizeof model_path)) return;
    int st;
    char *out = t_runf(&st, "%s plan -m %s -p 'Once upon a time there was' -k 2 -s 2 --window 4,2 2>&1",
                       bin, model_path);
    T_CHECK(st == 0 && strstr(out, "sliding window 4 on layer") && strstr(out, "':' = an ancestor") &&
            strstr(out, "#:") == NULL && strstr(out, ":#") != NULL,
            "plan --window: ':' before '#' in the rows\n%s", out);
    free(out);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' -k 2 -s 2 --window 3 --json", bin, model_path);
    T_CHECK(st == 0 && strstr(out, "\"mask_window\"") && strstr(out, "\"n_swa\": 3"),
            "plan --window --json: %.400s", out);
    free(out);
    char svg[] = "/tmp/md_test_window_XXXXXX";
    int fd = mkstemp(svg);
    if (fd >= 0) close(fd);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time there was' -k 2 -s 2 --window 4 --svg %s >/dev/null "
                 "&& grep -c 'class=\"outwin\"' %s && grep -o 'Sliding window 4 on layers 0-4' %s",
                 bin, model_path, svg, svg, svg);
    T_CHECK(st == 0 && atoi(out) > 0 && strstr(out, "Sliding window 4"),
            "plan --window --svg draws pale cells and says so: %.200s", out);
    free(out);
    unlink(svg);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time' -k 2 -s 1 --window 0 2>&1", bin, model_path);
    T_CHECK(st == 2, "plan --window 0 is a usage error: %d", st);
    free(out);
}

int main(void) {
    test_one_layer();
    test_plan_cli();
    model *m = random_model(3, 7);
    if (m) {
        model_hparams_set_window(&m->hp, W, 2); /* layers 0 and 2 windowed, 1 global */
        T_CHECK(model_layer_is_swa(&m->hp, 0) && !model_layer_is_swa(&m->hp, 1) &&
                    model_layer_is_swa(&m->hp, 2),
                "pattern 2: every second layer global");
        test_forest_window(m, "window 8 on layers 0, 2 of 3", PROMPT, GROW);
        test_batch_needs_window(m);
        model_hparams_set_window(&m->hp, W, 0);
        test_forest_window(m, "window 8 on every layer", PROMPT, GROW);
        model_free(m);
    }
    m = random_model(2, 9);
    if (m) {
        test_mask_view(m);
        model_free(m);
    }
    /* Gemma 3 270M (make model MODEL=gemma3): window 512 on layers 0-4, 6-10, 12-16, a
     * prompt of 530 tokens */
    const char *gemma = "models/gemma-3-270m-q4_k_m.gguf";
    st_err err = {0};
    if (T_SANITIZED) {
        T_SKIP("%s under ASan (make test runs it)", gemma);
    } else if (access(gemma, R_OK) != 0) {
        T_MISSING("%s absent (make model MODEL=gemma3 fetches it)", gemma);
    } else if (!(m = model_load(gemma, &err))) {
        T_CHECK(0, "Gemma 3: %s", err.msg);
    } else {
        T_CHECK(m->hp.n_swa == 512, "Gemma 3's window: %d", m->hp.n_swa);
        test_forest_window(m, "Gemma 3 270M", 530, 4);
        model_free(m);
    }
    return t_done();
}
