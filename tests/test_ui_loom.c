/* test_ui_loom.c - the loom's edits (ui/loom.h) on stories260K's tokenizer, without a
 * terminal: an edited text forks where the edit begins and the original stays, the same
 * text twice makes nothing, a line's text written back is the line itself, a fork with
 * your own words at a token sits beside that token, and two branches' first difference;
 * and, on stories260K (SentencePiece) and SmolLM2 (byte-level BPE), that a text written
 * under a node is spelled as the whole would be, not as it was typed alone. */
#include <string.h>
#include <unistd.h>

#include "forest/forest.h"
#include "gguf/gguf.h"
#include "../ui/loom.h"
#include "t.h"
#include "t_model.h"

/* The tokens of the root-to-node path of id as text. */
static char *path_text(const forest *f, const tok *tk, forest_id id) {
    int32_t t[512], n = forest_path(f, id, t, 512);
    return tok_decode_str(tk, t, n);
}

static void test_write(const tok *tk) {
    forest *f = forest_init(512, 0);
    st_err err = {0};
    forest_id cat, dog, again, line;
    bool made_cat, made_dog, made_again, made_line;
    T_CHECK(!ui_loom_write(f, tk, FOREST_NONE, "Once upon a time there was a cat.", &cat, &made_cat, &err) && made_cat,
            "a new root: %s", err.msg);
    int32_t n_cat = forest_n_live(f);
    /* the edit of the whole line: only what differs is new, beside the original */
    T_CHECK(!ui_loom_write(f, tk, FOREST_NONE, "Once upon a time there was a dog.", &dog, &made_dog, &err) && made_dog,
            "the edit: %s", err.msg);
    forest_id fork = forest_common_ancestor(f, cat, dog);
    char *a = path_text(f, tk, cat), *b = path_text(f, tk, dog), *common = path_text(f, tk, fork);
    T_CHECK(forest_roots(f, NULL, 0) == 1 && forest_leaves(f, NULL, 0) == 2 && a && b && common &&
                strstr(a, "a cat.") && strstr(b, "a dog.") && strstr(common, "there was a") && !strstr(common, "cat"),
            "one tree, two leaves forking after '%s': '%s' / '%s'", common ? common : "", a ? a : "", b ? b : "");
    T_CHECK(forest_n_live(f) - n_cat < n_cat / 2, "the edit shares the tokens before it: %d new of %d",
            (int)(forest_n_live(f) - n_cat), (int)n_cat);
    free(a), free(b), free(common);
    /* the same text again makes nothing and finds the branch */
    int32_t live = forest_n_live(f);
    T_CHECK(!ui_loom_write(f, tk, FOREST_NONE, "Once upon a time there was a dog.", &again, &made_again, &err) &&
                !made_again && again == dog && forest_n_live(f) == live,
            "the same text twice: nothing made, the branch found");
    /* a line's text written back under its parent is the line itself */
    const forest_node *top = forest_get(f, forest_id_at(f, forest_node_at(f, forest_index(dog))->parent));
    int32_t start = forest_get(f, fork)->first_child; /* the first line below the fork */
    int32_t end = start;
    while (forest_node_at(f, end)->first_child >= 0) end = forest_node_at(f, end)->first_child;
    char *text = ui_loom_line_text(f, tk, start, end);
    T_CHECK(text && top && !ui_loom_write(f, tk, fork, text, &line, &made_line, &err) && !made_line &&
                line == forest_id_at(f, end),
            "the line '%s' written back under its parent is itself: %s", text ? text : "", err.msg);
    free(text);
    /* your own words at a token: a branch beside it, under its parent */
    forest_id mine;
    bool made;
    T_CHECK(!ui_loom_write(f, tk, fork, " bird sang.", &mine, &made, &err) && made &&
                forest_common_ancestor(f, mine, cat) == fork && forest_leaves(f, NULL, 0) == 3,
            "a fork with your own words beside the token: %s", err.msg);
    T_CHECK(ui_loom_write(f, tk, fork, "", &mine, &made, &err) == ST_ERR_ARG, "no text: %s", err.msg);
    forest_free(f);
}

static void test_first_diff(const tok *tk) {
    forest *f = forest_init(512, 0);
    st_err err = {0};
    forest_id x, y, z;
    bool made;
    ui_loom_write(f, tk, FOREST_NONE, "Once upon a time there was a cat.", &x, &made, &err);
    ui_loom_write(f, tk, FOREST_NONE, "Once upon a time there was a dog.", &y, &made, &err);
    forest_id fork = forest_common_ancestor(f, x, y);
    int32_t depth = forest_get(f, fork)->depth;
    T_CHECK(ui_loom_first_diff(f, x, y) == depth + 1 && ui_loom_first_diff(f, y, x) == depth + 1,
            "cat / dog differ right after the fork: %d (fork at depth %d)", (int)ui_loom_first_diff(f, x, y), (int)depth);
    T_CHECK(ui_loom_first_diff(f, x, x) == -1, "a branch and itself: no difference");
    T_CHECK(ui_loom_first_diff(f, fork, x) == depth + 1, "a branch's beginning: where the shorter ends");
    ui_loom_write(f, tk, FOREST_NONE, "A dog", &z, &made, &err);
    T_CHECK(ui_loom_first_diff(f, x, z) >= 0 && ui_loom_first_diff(f, x, FOREST_NONE) == -1,
            "two trees differ early; a stale id: -1");
    forest_free(f);
}

/* base as a root, then edit written under its leaf: the branch is base + edit as the
 * tokenizer spells the whole (a typed leading space is not a token of its own, a word
 * finished across the boundary is one token, forking before it), and base stays. */
static void check_in_context(const tok *tk, const char *base, const char *edit) {
    forest *f = forest_init(512, 0);
    st_err err = {0};
    forest_id a, b;
    bool made_a, made_b;
    char whole[256];
    snprintf(whole, sizeof whole, "%s%s", base, edit);
    int32_t nw = 0, *w = tok_encode_alloc(tk, whole, strlen(whole), tok_add_bos(tk), true, &nw, &err);
    T_CHECK(w && !ui_loom_write(f, tk, FOREST_NONE, base, &a, &made_a, &err) &&
                !ui_loom_write(f, tk, a, edit, &b, &made_b, &err) && made_b,
            "%s + %s: %s", base, edit, err.msg);
    int32_t t[512], n = made_b ? forest_path(f, b, t, 512) : 0;
    T_CHECK(n == nw && w && !memcmp(t, w, sizeof *t * (size_t)nw), "%s|%s: %d tokens, the whole spells %d (%s)",
            base, edit, n, nw, tok_model_name(tk));
    T_CHECK(forest_get(f, a) && forest_roots(f, NULL, 0) == 1, "%s: one tree, the original in it", base);
    free(w);
    forest_free(f);
}

static void test_in_context_spm(const tok *tk) {
    check_in_context(tk, "Once upon a time there was a", " dog.");
    check_in_context(tk, "Once upon a time there was a", " big dog");
    check_in_context(tk, "Once upon a ti", "me there was");
}

/* The same on SmolLM2's byte-level BPE (models/, absent: missing). */
static void test_in_context_bpe(void) {
    const char *rel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    const char *path = access(rel, R_OK) == 0 ? rel : t_shared(rel);
    if (!path) {
        T_MISSING("%s absent (sh tools/fetch-model.sh fetches it)", rel);
        return;
    }
    st_err err = {0};
    gguf_ctx *g = gguf_open(path, &err);
    tok *tk = g ? tok_from_gguf(g, &err) : NULL;
    T_CHECK(tk != NULL, "tokenizer of %s: %s", path, err.msg);
    if (tk) {
        check_in_context(tk, "Once upon a ti", "me there was");
        check_in_context(tk, "Once upon a time there was a", " dog.");
        check_in_context(tk, "The answer is 12", "34.");
    }
    tok_free(tk);
    gguf_close(g);
}

int main(void) {
    model *m;
    tok *tk;
    if (!t_stories(&m, &tk)) return t_done();
    test_write(tk);
    test_first_diff(tk);
    test_in_context_spm(tk);
    test_in_context_bpe();
    tok_free(tk);
    model_free(m);
    return t_done();
}
