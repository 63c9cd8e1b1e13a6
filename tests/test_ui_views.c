/* test_ui_views.c - the TUI's panes without a terminal: the forest view on a hand-built
 * forest (exact lines, a radix-collapsed chain, folding, cursor, a 10,000-node window in
 * under 50 ms), the text view's path and alternatives, non-ASCII text measured in columns,
 * and the mask view of a known step plan (its mouse hit-testing and scrolling, and its
 * rows after a prune). The action table, commands and worker runs are in test_ui.c. */
#include <locale.h>
#include <math.h>
#include <ncursesw/curses.h>
#include <time.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "../ui/forest_view.h"
#include "../ui/mask_view.h"
#include "../ui/status.h"
#include "../ui/text_view.h"
#include "../ui/think_fold.h"
#include "../ui/uline.h"
#include "t.h"
#include "t_tok.h"

static double now_ms(void) { return 1e3 * mono_now_s(); }

/* A tokenizer over n pieces: <unk> <s> </s> at 0-2, no space prefix (checked). */
static tok *tiny_vocab(const char **pieces, const int32_t *types, int32_t n) {
    tok_vocab_desc vd = tok_vocab_desc_default();
    vd.n_vocab = n, vd.pieces = pieces, vd.types = types, vd.unk = 0, vd.bos = 1, vd.eos = 2;
    vd.add_space_prefix = false;
    st_err err = {0};
    tok *tk = tok_from_vocab(&vd, &err);
    T_CHECK(tk != NULL, "vocabulary: %s", err.msg);
    return tk;
}

/* Non-ASCII text: columns measured with wcwidth (CJK and emoji 2, combining marks 0, RTL
 * letters 1), bytes that are not UTF-8 escaped; a character split over byte tokens drawn
 * whole in a line and in the text pane, escaped where a token is shown alone. */
static void test_wide_text(void) {
    if (!setlocale(LC_CTYPE, "C.UTF-8") && !setlocale(LC_CTYPE, "en_US.UTF-8")) {
        T_SKIP("no UTF-8 locale");
        return;
    }
    char buf[256];
    struct { const char *in; int width; const char *out; int cols; } lines[] = {
        {"\xe6\x97\xa5\xe6\x9c\xac", 3, "\xe6\x97\xa5", 2},                     /* 日本 in 3 columns: 日 */
        {"\xe6\x97\xa5\xe6\x9c\xac", 4, "\xe6\x97\xa5\xe6\x9c\xac", 4},
        {"\xf0\x9f\x98\x80x", 3, "\xf0\x9f\x98\x80x", 3},                        /* emoji */
        {"\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 3, "\xf0\x9f\x98\x80", 2},
        {"Cafe\xcc\x81!", 5, "Cafe\xcc\x81!", 5},                                /* combining acute */
        {"\xcc\x81" "a", 5, "\xe2\x97\x8c\xcc\x81" "a", 2},                       /* ... alone: on U+25CC */
        {"\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd9\x85\xd8\xb1", 7, "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd9\x85\xd8\xb1", 7}, /* RTL */
        {"a\xe6\x97z\xff", 20, "a<E6><97>z<FF>", 14},                             /* not UTF-8 */
        {"\xed\xa0\x80", 20, "<ED><A0><80>", 12},                                 /* a surrogate */
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        ui_line l = ui_line_make(buf, sizeof buf, lines[i].width, true);
        ui_line_put(&l, lines[i].in);
        T_CHECK(!strcmp(buf, lines[i].out) && l.cols == lines[i].cols, "line %zu: '%s' (%d columns), want '%s' (%d)",
                i, buf, l.cols, lines[i].out, lines[i].cols);
    }
    /* a message over rows: broken after the last space that fits, the spaces skipped; a
     * word wider than the row cut where the row ends; CJK counted two columns */
    const char *msg = "the session was saved with model 'stories260K.gguf' \xe6\x97\xa5\xe6\x9c\xac xxxxxxxxxxxxxxxxxxxxxxxxx";
    const char *rows[] = {"the session was", "saved with model", "'stories260K.gguf'", "\xe6\x97\xa5\xe6\x9c\xac",
                          "xxxxxxxxxxxxxxxxxxxx", "xxxxx"};
    const char *at = msg;
    for (int r = 0; r < 6; r++) {
        ui_line l = ui_line_make(buf, sizeof buf, 20, true);
        at += ui_line_put_words(&l, at);
        T_CHECK(!strcmp(buf, rows[r]), "message row %d: '%s', want '%s'", r, buf, rows[r]);
    }
    T_CHECK(!*at, "the message used up: '%s'", at);
    /* byte tokens: 日 = E6 97 A5, 本 = E6 9C AC */
    const char *pieces[9] = {"<unk>", "<s>", "</s>", "a", "b", "<0xE6>", "<0x97>", "<0xA5>", "<0x9C>"};
    int32_t types[9] = {TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL, TOK_NORMAL, TOK_NORMAL, TOK_BYTE, TOK_BYTE, TOK_BYTE, TOK_BYTE};
    st_err err = {0};
    tok *tk = tiny_vocab(pieces, types, 9);
    if (!tk) return;
    /* root [a E6 97 A5 b E6], children [9C] and [97 A5 a] */
    forest *f = forest_init(64, 4);
    int32_t t0[6] = {3, 5, 6, 7, 4, 5}, ta[1] = {8}, tb[3] = {6, 7, 3};
    forest_id ids[3];
    forest_add_root(f, t0, NULL, 6, 0, &ids[0], NULL);
    forest_append(f, ids[0], ta, NULL, 1, &ids[1], NULL);
    forest_append(f, ids[0], tb, NULL, 3, &ids[2], NULL);
    forest_view v;
    fv_init(&v, true);
    fv_rebuild(&v, f, &err);
    const char *want[3] = {"\xe2\x96\xbe    - a\xe6\x97\xa5" "b<E6>", "  \xc2\xb7    - <E6><9C>",
                           "  \xc2\xb7    - \xe6\x97\xa5" "a"};
    for (int i = 0; i < 3 && i < v.n_lines; i++) {
        fv_render(&v, f, tk, i, NULL, 0, buf, sizeof buf, 60);
        T_CHECK(!strcmp(buf, want[i]), "byte tokens, line %d: '%s' want '%s'", i, buf, want[i]);
    }
    fv_token_text(f, tk, forest_index(ids[0]), buf, sizeof buf);
    T_CHECK(!strcmp(buf, "<E6>"), "a lone token leaving a character open: '%s'", buf);
    fv_token_text(f, tk, forest_index(ids[2]) - 2, buf, sizeof buf); /* the child's 97 */
    T_CHECK(!strcmp(buf, "<E6><97>"), "... and the next: '%s'", buf);
    fv_alt_text(f, tk, forest_index(ids[2]) - 2, 7, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "\xe6\x97\xa5"), "an alternative completing it: '%s'", buf);
    fv_alt_text(f, tk, -1, 6, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "\xef\xbf\xbd"), "a continuation byte where no character is open: U+FFFD '%s'", buf);
    /* the text pane: cells [a] [E6 97 A5] [b] [E6 97 A5] [a] */
    text_view tv;
    tv_init(&tv);
    tv_set(&tv, f, ids[2], &err);
    tok_stream ts;
    tv_stream_start(&tv, f, tk, &ts);
    char cells[512] = ""; /* room for every cell, so -O1 sees no truncation */
    for (int32_t i = 0, next; i < tv.n; i = next) {
        next = tv_cell(&tv, f, tk, &ts, i, buf, sizeof buf);
        size_t n = strlen(cells);
        snprintf(cells + n, sizeof cells - n, "%s%d:%s", i ? "|" : "", (int)i, buf);
    }
    T_CHECK(!strcmp(cells, "0:a|1:\xe6\x97\xa5|4:b|5:\xe6\x97\xa5|8:a"), "text cells '%s'", cells);
    tv_set(&tv, f, ids[1], &err);
    tv_stream_start(&tv, f, tk, &ts);
    int32_t next = tv_cell(&tv, f, tk, &ts, 5, buf, sizeof buf);
    T_CHECK(next == 7 && !strcmp(buf, "<E6><9C>"), "a branch ending inside a character: %d '%s'", (int)next, buf);
    tv_free(&tv);
    fv_free(&v);
    forest_free(f);
    tok_free(tk);
}

/* root [1 2 3] (unscored), under 3: [4 5] (p .6, .9) and [6] (p .3); under 5: nothing */
static forest *small_forest(forest_id *ids) {
    forest *f = forest_init(64, 4);
    int32_t t0[3] = {1, 2, 3}, ta[2] = {4, 5}, tb[1] = {6};
    float la[2] = {logf(0.6f), logf(0.9f)}, lb[1] = {logf(0.3f)};
    forest_add_root(f, t0, NULL, 3, 0, &ids[0], NULL);
    forest_append(f, ids[0], ta, la, 2, &ids[1], NULL);
    forest_append(f, ids[0], tb, lb, 1, &ids[2], NULL);
    return f;
}

static void test_forest_view(void) {
    forest_id ids[3];
    forest *f = small_forest(ids);
    forest_view v;
    fv_init(&v, false);
    st_err err = {0};
    T_CHECK(!fv_rebuild(&v, f, &err) && v.n_lines == 3, "3 lines, got %d", v.n_lines);
    char buf[256];
    const char *want[3] = {"-    - [1][2][3]", "     60% [4][5]", "     30% [6]"};
    for (int i = 0; i < 3; i++) {
        fv_render(&v, f, NULL, i, NULL, 0, buf, sizeof buf, 60);
        T_CHECK(!strcmp(buf, want[i]), "line %d: '%s' want '%s'", i, buf, want[i]);
    }
    T_CHECK(v.lines[1].n_nodes == 2 && v.lines[0].n_nodes == 3, "radix chains");
    fv_render(&v, f, NULL, 0, NULL, 0, buf, sizeof buf, 10);
    T_CHECK(!strcmp(buf, "-    - [1]"), "cut at width 10: '%s'", buf);
    /* running and bookmark markers */
    fv_render(&v, f, NULL, 1, &ids[1], 1, buf, sizeof buf, 60);
    T_CHECK(!strcmp(buf, "   > 60% [4][5]"), "running: '%s'", buf);
    /* cursor */
    T_CHECK(fv_selected(&v, f) == ids[0], "cursor on the root line selects its last node");
    fv_move(&v, f, 1);
    T_CHECK(fv_selected(&v, f) == ids[1], "down");
    fv_move(&v, f, 5);
    T_CHECK(v.cursor == 2 && fv_selected(&v, f) == ids[2], "clamped");
    /* the cursor stays on its line while the forest grows */
    int32_t t7 = 7;
    forest_id n7;
    forest_append(f, ids[2], &t7, NULL, 1, &n7, NULL);
    fv_rebuild(&v, f, &err);
    T_CHECK(v.cursor == 2 && fv_selected(&v, f) == n7, "follows its line");
    /* fold the root line */
    fv_set_cursor(&v, f, 0);
    T_CHECK(fv_fold(&v, f, true) && !fv_fold(&v, f, true), "fold once");
    fv_rebuild(&v, f, &err);
    fv_render(&v, f, NULL, 0, NULL, 0, buf, sizeof buf, 60);
    T_CHECK(v.n_lines == 1 && !strcmp(buf, "+    - [1][2][3] (2)"), "collapsed: %d '%s'", v.n_lines, buf);
    T_CHECK(fv_fold(&v, f, false), "expand");
    fv_rebuild(&v, f, &err);
    T_CHECK(v.n_lines == 3, "expanded");
    T_CHECK(fv_select_node(&v, f, n7) && v.cursor == 2, "select by node");
    forest_set_flags(f, ids[1], FOREST_BOOKMARK, 0);
    fv_rebuild(&v, f, &err);
    fv_render(&v, f, NULL, 1, NULL, 0, buf, sizeof buf, 60);
    T_CHECK(!strcmp(buf, "   * 60% [4][5]"), "bookmark: '%s'", buf);
    /* / searches the lines' text, forward and back, wrapping; C-n / C-p move */
    int32_t rank, total;
    T_CHECK(fv_find(&v, f, NULL, "[6]", 0, 1, &rank, &total) == 2 && rank == 1 && total == 1, "/[6]: line 2");
    T_CHECK(fv_find(&v, f, NULL, "][", 0, 1, &rank, &total) == 1 && rank == 2 && total == 3 &&
                fv_find(&v, f, NULL, "][", 2, 1, &rank, &total) == 0 && rank == 1 &&
                fv_find(&v, f, NULL, "][", 0, -1, &rank, &total) == 2 && rank == 3,
            "/][: 3 lines, forward from 0: line 1, from 2: wraps to 0, back from 0: line 2");
    T_CHECK(fv_find(&v, f, NULL, "[9]", 0, 1, &rank, &total) < 0 && total == 0, "/[9]: none");
    /* a search's dropped thought has a mark of its own, not only the dimming an unlikely
       line (the 30% [6]) gets too */
    forest_set_flags(f, ids[2], FOREST_DIMMED, 0);
    fv_rebuild(&v, f, &err);
    fv_render(&v, f, NULL, 2, NULL, 0, buf, sizeof buf, 60);
    T_CHECK(!strcmp(buf, "   x 30% [6][7]"), "dropped: '%s'", buf);
    forest_set_flags(f, ids[2], 0, FOREST_DIMMED);
    /* text view: the path of [6 7], alternatives from the stored top-k */
    text_view tv;
    tv_init(&tv);
    T_CHECK(!tv_set(&tv, f, n7, &err) && tv.n == 5 && tv.cursor == 5, "path of 5 tokens");
    int32_t alt_ids[4] = {6, 4, 9, 8};
    float alt_lp[4] = {-0.5f, -1.0f, -2.0f, -3.0f};
    forest_mark_computed(f, forest_index(ids[0]), 0); /* pretend: a computed parent with top-k */
    forest_store_topk(f, forest_index(ids[0]), alt_ids, alt_lp, 4);
    tv_move(&tv, -2);
    int32_t got[8];
    float glp[8];
    forest_id par;
    T_CHECK(tv.cursor == 3 && tv_alts(&tv, f, got, glp, 8, &par) == 4 && got[0] == 6 && par == ids[0],
            "alternatives at token 3");
    tv_token(&tv, f, NULL, 3, buf, sizeof buf);
    T_CHECK(!strcmp(buf, "[6]"), "token text '%s'", buf);
    tv_move(&tv, -10);
    T_CHECK(tv.cursor == 0 && tv_alts(&tv, f, got, glp, 8, NULL) == 0, "no alternatives at a root");
    tv_free(&tv);
    /* a strategy pruning one of two siblings (rejected drafts, :tot's losers): the chain
       left is one line (it was drawn as a nested line under the root's before); the
       user's prune keeps the survivor's line (test_ui_undo) */
    forest_prune(f, ids[2], NULL);
    fv_rebuild(&v, f, &err);
    fv_render(&v, f, NULL, 0, NULL, 0, buf, sizeof buf, 60);
    T_CHECK(v.n_lines == 1 && v.lines[0].n_nodes == 5 && !strcmp(buf, " *   - [1][2][3][4][5]"),
            "after a strategy's prune: %d lines, line 0 '%s'", v.n_lines, buf);
    forest_free(f);
    /* the same view over a new forest (a :load) whose ids are the old ones: one chain,
       one line, nothing folded */
    int32_t chain[6] = {1, 2, 3, 4, 5, 6};
    f = forest_init(64, 4);
    forest_id last;
    forest_add_root(f, chain, NULL, 3, 0, &last, NULL);
    forest_append(f, last, chain + 3, NULL, 3, &last, NULL);
    fv_rebuild(&v, f, &err);
    T_CHECK(v.n_lines == 1 && v.lines[0].n_nodes == 6 && fv_selected(&v, f) == last, "a loaded chain: %d lines",
            v.n_lines);
    fv_free(&v);
    forest_free(f);

    /* 10,000+ nodes: 100 branches of 100 tokens; rebuild + one window well under 50 ms */
    f = forest_init(20000, 0);
    int32_t one = 1, chain99[99];
    for (int i = 0; i < 99; i++) chain99[i] = 2 + i;
    forest_id root;
    forest_add_root(f, &one, NULL, 1, 0, &root, NULL);
    for (int b = 0; b < 100; b++) {
        forest_id first;
        float lp = logf(0.5f);
        forest_append(f, root, &one, &lp, 1, &first, NULL);
        forest_append(f, first, chain99, NULL, 99, &last, NULL);
    }
    fv_init(&v, true);
    double t0 = now_ms();
    fv_rebuild(&v, f, &err);
    fv_move(&v, f, 60);
    fv_scroll(&v, 30);
    for (int r = 0; r < 30; r++) fv_render(&v, f, NULL, v.top + r, NULL, 0, buf, sizeof buf, 80);
    double dt = now_ms() - t0;
    T_CHECK(forest_n_live(f) == 10001 && v.n_lines == 101, "big forest: %d nodes %d lines", forest_n_live(f), v.n_lines);
    T_CHECK(dt < 50, "rebuild + window in %.2f ms", dt);
    T_CHECK(v.top == 31 && v.cursor == 60, "scrolled window top %d", v.top);
    fv_free(&v);
    forest_free(f);
}

static void test_mask_view(void) {
    /* root [10 11], children [12] and [13] of 11: all pending, one plan of 4 rows */
    forest *f = forest_init(16, 0);
    int32_t t0[2] = {10, 11}, a = 12, b = 13;
    forest_id r, ca, cb;
    forest_add_root(f, t0, NULL, 2, 0, &r, NULL);
    forest_append(f, r, &a, NULL, 1, &ca, NULL);
    forest_append(f, r, &b, NULL, 1, &cb, NULL);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 4, "plan of 4 rows");
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    mv_capture(mv, f, NULL, &p, 0);
    T_CHECK(mv->n_rows == 4 && mv->n_cols == 4, "4x4 grid (%d x %d)", mv->n_rows, mv->n_cols);
    /* rows are parent-first: 10, 11, 12, 13 at positions 0, 1, 2, 2 */
    T_CHECK(mv->rows[0].token == 10 && mv->rows[1].token == 11 && mv->rows[2].pos == 2 && mv->rows[3].pos == 2,
            "order and RoPE positions");
    T_CHECK(mv->rows[2].parent == forest_index(r) && mv->rows[3].want && !mv->rows[1].want, "parents and logits rows");
    int32_t s12 = -1, s13 = -1;
    for (int c = 0; c < 4; c++) {
        if (mv->cols[c] == mv->rows[2].slot) s12 = c;
        if (mv->cols[c] == mv->rows[3].slot) s13 = c;
    }
    T_CHECK(mv_sees(mv, 0, 0) && !mv_sees(mv, 0, 1), "the root sees itself only");
    T_CHECK(mv_sees(mv, 2, 0) && mv_sees(mv, 2, 1) && mv_sees(mv, 2, s12) && !mv_sees(mv, 2, s13),
            "a child sees its ancestors and itself, not its sibling");
    /* a child of a branching node starts a line of its own colour: the siblings' indices
     * here (2 and 3) hash to different colours, and each row has its own node's */
    T_CHECK(mv->rows[2].colour != mv->rows[3].colour, "sibling lines share colour %d", mv->rows[2].colour);
    bool own = true;
    for (int32_t i = 0; i < mv->n_rows; i++) own = own && mv->rows[i].colour == mv_branch_colour(f, mv->rows[i].node);
    T_CHECK(own, "a row's colour is not its node's branch colour");
    T_CHECK(mv->rows[0].colour == mv->rows[1].colour, "one line, one colour");
    char buf[256];
    mv_row_text(mv, 2, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, "[12]") && strstr(buf, " L "), "row text '%s'", buf);
    mv_header(mv, buf, sizeof buf, 80, false);
    T_CHECK(!strcmp(buf, "step 0: 4 rows, 4 KV slots seen"), "header '%s'", buf);
    /* the grid follows its newest columns until scrolled; scrolling back to them follows
     * again */
    int32_t nd = mv->n_dcols; /* slots 0, 1, 2, 9: four columns and a gap mark */
    T_CHECK(nd == 5 && mv->dcols[3].n == 0 && mv_cell(mv, 0, 3) == ' ', "drawn columns %d", nd);
    T_CHECK(mv->left == -1 && mv_first_col(mv, 2) == nd - 2 && mv_first_col(mv, 8) == 0, "follows the last columns");
    mv_hscroll(mv, -1, 2);
    T_CHECK(mv->left == nd - 3 && mv_first_col(mv, 2) == nd - 3, "scrolled left by one: %d", mv->left);
    mv_hscroll(mv, -8, 2);
    T_CHECK(mv->left == 0 && mv_first_col(mv, 2) == 0, "clamped at the first column");
    T_CHECK(mv_first_col(mv, 3) == 0 && mv_first_col(mv, 8) == 0, "a wider grid starts at 0");
    mv_hscroll(mv, 8, 2);
    T_CHECK(mv->left == -1 && mv_first_col(mv, 2) == nd - 2, "back at the end: following again");
    mv_hscroll(mv, -1, 8);
    T_CHECK(mv->left == -1, "a grid that fits does not scroll");
    /* a preview: the plan cancelled without running leaves the forest as it was */
    step_plan_cancel(f, &p);
    T_CHECK(forest_n_pending(f) == 4 && kv_alloc_used(forest_kv_const(f)) == 0, "cancel frees the plan's slots");
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 4, "the preview's plan");
    mv_capture(mv, f, NULL, &p, 1);
    mv->preview = true;
    mv_header(mv, buf, sizeof buf, 80, false);
    T_CHECK(!strcmp(buf, "next step 1 (preview, not run): 4 rows, 4 KV slots seen"), "preview header '%s'", buf);
    mv_capture(mv, f, NULL, &p, 1);
    T_CHECK(!mv->preview, "a capture clears the preview flag");
    step_plan_cancel(f, &p);
    step_plan_free(&p);
    free(mv);
    forest_free(f);
    /* status line */
    ui_stats st = {.model = "m.gguf", .backend = "cpu", .threads = 2, .nodes = 5, .kv_used = 3,
                   .kv_slots = 10, .step_ms = 1.25, .rows = 4, .tok_s = 3.5};
    snprintf(st.job, sizeof st.job, "idle");
    ui_status_format(&st, buf, sizeof buf, 200);
    T_CHECK(strstr(buf, "KV 3 used 7 free") && strstr(buf, "4 rows 1.2ms") && strstr(buf, "3.5 tok/s"), "status '%s'", buf);
    /* narrower: whole fields go, least needed first (the model, which the title names, then
     * the threads), never cut inside; the line always fills the width */
    st.mode = "chat";
    snprintf(st.job, sizeof st.job, "grow 3/32");
    struct { int width; const char *want; } narrow[] = {
        {120, " m.gguf | typing: chat | cpu 2 thr | grow 3/32 | 5 nodes | KV 3 used 7 free | 4 rows 1.2ms | 3.5 tok/s"},
        {95, " typing: chat | cpu 2 thr | grow 3/32 | 5 nodes | KV 3/10 | 4 rows 1.2ms | 3.5 tok/s"},
        {80, " typing: chat | grow 3/32 | 5 nodes | KV 3/10 | 4 rows 1.2ms | 3.5 tok/s"},
        {40, " typing: chat | grow 3/32 | KV 3/10"},
    };
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++) {
        ui_status_format(&st, buf, sizeof buf, narrow[i].width);
        size_t n = strlen(narrow[i].want);
        T_CHECK(!strncmp(buf, narrow[i].want, n) && strspn(buf + n, " ") == strlen(buf + n) &&
                    strlen(buf) == (size_t)narrow[i].width, "status at %d: '%s'", narrow[i].width, buf);
    }
}

/* How many of a series of widths give mv a layout other than a fresh capture of p laid
 * out for that width (mv_layout reuses its last layout where it can). */
static int32_t stale_layouts(mask_view *mv, const forest *f, const step_plan *p, int32_t step) {
    static const int32_t widths[] = {80, 12, 12, 80, 4, INT32_MAX, 12, 3, 3};
    mask_view *fresh = malloc(sizeof *fresh);
    int32_t bad = 0;
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        mv_layout(mv, widths[i]);
        mv_init(fresh);
        mv_capture(fresh, f, NULL, p, step);
        mv_layout(fresh, widths[i]);
        bad += mv->n_dcols != fresh->n_dcols || mv->runs != fresh->runs ||
               memcmp(mv->dcols, fresh->dcols, sizeof *mv->dcols * (size_t)mv->n_dcols) != 0;
    }
    free(fresh);
    return bad;
}

/* The grid of a step where three chains grow over one prompt: one column per slot with a
 * gap mark where slots jump while it fits; too wide, each run of slots the rows see alike
 * is one column, so every chain's own slots stay in view. The legend says what the marks
 * mean; a token's spaces are visible. */
static void test_mask_layout(void) {
    forest *f = forest_init(64, 0);
    int32_t prompt[6] = {1, 2, 3, 4, 5, 6}, chain[4] = {7, 8, 9, 10};
    forest_id root, tip[3], leaf;
    forest_add_root(f, prompt, NULL, 6, 0, &root, NULL);
    for (int i = 0; i < 3; i++) forest_append(f, root, chain, NULL, 4, &tip[i], NULL);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 18, "prefill plan of 18 rows: %s", err.msg);
    for (int32_t r = 0; r < p.n_rows; r++) forest_mark_computed(f, p.node[r], p.slot[r]);
    step_plan_free(&p);
    step_plan_init(&p);
    int32_t next = 11;
    for (int i = 0; i < 3; i++) forest_append(f, tip[i], &next, NULL, 1, &leaf, NULL);
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 3, "decode plan of 3 rows: %s", err.msg);
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    mv_capture(mv, f, NULL, &p, 1);
    T_CHECK(mv->n_cols == 6 + 3 * 5, "21 slots seen (%d)", mv->n_cols);
    int32_t gaps = 0;
    for (int32_t d = 0; d < mv->n_dcols; d++) gaps += mv->dcols[d].n == 0;
    bool jumps = false;
    for (int32_t c = 1; c < mv->n_cols; c++) jumps |= mv->cols[c] != mv->cols[c - 1] + 1;
    T_CHECK(!mv->runs && mv->n_dcols == mv->n_cols + gaps && (gaps > 0) == jumps,
            "unbounded: one column per slot, %d gap marks", gaps);
    mv_layout(mv, 12);
    T_CHECK(mv->runs && mv->n_dcols <= 12, "12 wide: runs (%d columns)", mv->n_dcols);
    /* every row sees the prompt's run and its own chain's run, and no other chain's */
    int32_t seen[3] = {0}, shared = 0;
    for (int32_t d = 0; d < mv->n_dcols; d++) {
        int32_t k = 0;
        for (int32_t r = 0; r < 3; r++) k += mv_cell(mv, r, d) == '#';
        shared += k == 3;
        for (int32_t r = 0; r < 3; r++) seen[r] += mv_cell(mv, r, d) == '#' && k == 1;
    }
    T_CHECK(shared >= 1 && seen[0] >= 1 && seen[1] >= 1 && seen[2] >= 1,
            "the prompt's run for all rows (%d), each chain's for its row (%d %d %d)", shared, seen[0], seen[1], seen[2]);
    char buf[256], txt[32];
    mv_dcol_text(mv, 0, txt, sizeof txt);
    T_CHECK(!strcmp(txt, "0-5") || mv->cols[0] != 0, "the first column is the prompt's run '%s'", txt);
    mv_slot_line(mv, 0, 40, buf, sizeof buf, false);
    T_CHECK((int32_t)strlen(buf) == mv->n_dcols && buf[0] == '=', "slot line '%s'", buf);
    mv_legend(mv, buf, sizeof buf, 200, false);
    T_CHECK(strstr(buf, " L token") && strchr(buf, '|') - buf == MV_TEXT_COLS, "legend '%s'", buf);
    mv_marks(mv, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, "L logits") && strstr(buf, "# sees") && strstr(buf, "= run") &&
                (strstr(buf, "| skip") != NULL) == (gaps > 0), "marks '%s'", buf);
    mv_layout(mv, 80);
    mv_marks(mv, buf, sizeof buf, 80, false);
    T_CHECK(!mv->runs && !strstr(buf, "run"), "80 wide: one column per slot again, no run mark '%s'", buf);
    /* a token with spaces: visible in the row text, which stays MV_TEXT_COLS wide */
    snprintf(mv->rows[0].text, sizeof mv->rows[0].text, " a b");
    mv_row_text(mv, 0, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, "_a_b") && strlen(buf) == MV_TEXT_COLS, "row text '%s' (%zu)", buf, strlen(buf));
    /* redraws reuse the layout; a new capture (another step) or a width that changes
     * whether runs are needed lays it out again */
    T_CHECK(stale_layouts(mv, f, &p, 1) == 0, "each width's layout is a fresh one's");
    step_plan_cancel(f, &p);
    forest_append(f, leaf, &next, NULL, 1, NULL, NULL);
    forest_append(f, tip[1], chain, NULL, 2, NULL, NULL);
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 6, "another plan of 6 rows: %s", err.msg);
    mv_layout(mv, 80); /* (no runs before and after: only the capture says the grid is new) */
    mv_capture(mv, f, NULL, &p, 2);
    T_CHECK(stale_layouts(mv, f, &p, 2) == 0, "after a new capture too");
    step_plan_cancel(f, &p);
    step_plan_free(&p);
    free(mv);
    forest_free(f);
}

/* Mouse hit-testing and scrolling of the mask pane, and its rows after a prune. */
static void test_mask_mouse_prune(void) {
    forest *f = forest_init(16, 0);
    int32_t t0[2] = {10, 11}, a = 12, b = 13, c = 14;
    forest_id r, ca, cb, cc;
    forest_add_root(f, t0, NULL, 2, 0, &r, NULL);
    forest_append(f, r, &a, NULL, 1, &ca, NULL);
    forest_append(f, r, &b, NULL, 1, &cb, NULL);
    step_plan p;
    step_plan_init(&p);
    st_err err = {0};
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    T_CHECK(mv_row_at(mv, 5, 50, 1, 41, 20, 40) == -1, "no rows before any step");
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 4, "plan of 4 rows");
    mv_capture(mv, f, NULL, &p, 0);
    step_plan_cancel(f, &p);
    /* a pane at (y0 1, x0 41), 6 x 40: header lines 1..3, rows from line 4 */
    int y0 = 1, x0 = 41, h = 6, w = 40;
    T_CHECK(MV_HEAD_LINES == 3, "three header lines");
    T_CHECK(mv_row_at(mv, y0 + 3, x0, y0, x0, h, w) == 0 && mv_row_at(mv, y0 + 4, x0 + 39, y0, x0, h, w) == 1,
            "the first rows");
    T_CHECK(mv_row_at(mv, y0 + 2, x0 + 5, y0, x0, h, w) == -1 && mv_row_at(mv, y0, x0 + 5, y0, x0, h, w) == -1,
            "header lines are not rows");
    T_CHECK(mv_row_at(mv, y0 + 6, x0 + 5, y0, x0, h, w) == -1, "below the pane (row 3 exists but is not shown)");
    T_CHECK(mv_row_at(mv, y0 + 4, x0 - 1, y0, x0, h, w) == -1 && mv_row_at(mv, y0 + 4, x0 + w, y0, x0, h, w) == -1,
            "left and right of the pane");
    mv_vscroll(mv, 2);
    T_CHECK(mv->top == 2 && mv_row_at(mv, y0 + 3, x0, y0, x0, h, w) == 2 && mv_row_at(mv, y0 + 4, x0, y0, x0, h, w) == 3,
            "scrolled by two: the first line shows row 2");
    mv_vscroll(mv, 10);
    T_CHECK(mv->top == 3 && mv_row_at(mv, y0 + 4, x0, y0, x0, h, w) == -1, "scrolling stops at the last row (%d)", mv->top);
    mv_vscroll(mv, -10);
    T_CHECK(mv->top == 0, "and at the first");
    T_CHECK(mv_row_node(mv, 2) == ca && mv_row_node(mv, 3) == cb && mv_row_node(mv, 4) == FOREST_NONE, "rows name their nodes");
    /* prune the node of row 3; a new node then takes its index with a new generation */
    char buf[256];
    T_CHECK(mv_mark_pruned(mv, f) == 0, "nothing pruned yet");
    int32_t old_idx = mv->rows[3].node;
    T_CHECK(!forest_prune(f, cb, &err), "prune");
    T_CHECK(mv_mark_pruned(mv, f) == 1 && mv->rows[3].gone && !mv->rows[2].gone, "the pruned row is marked");
    forest_append(f, r, &c, NULL, 1, &cc, NULL);
    T_CHECK(forest_index(cc) == old_idx, "the index is reused (%d, %d)", forest_index(cc), old_idx);
    T_CHECK(mv_mark_pruned(mv, f) == 1 && mv_row_node(mv, 3) == FOREST_NONE, "the reused index does not revive the row");
    mv_row_text(mv, 3, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, " - pruned") && !strstr(buf, "[13]") && !strstr(buf, " L "), "pruned row text '%s'", buf);
    mv_row_text(mv, 2, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, "[12]") && !strstr(buf, "pruned"), "a live row is unchanged '%s'", buf);
    mv_header(mv, buf, sizeof buf, 80, false);
    T_CHECK(!strcmp(buf, "step 0: 4 rows, 4 KV slots seen; 1 pruned since"), "header '%s'", buf);
    /* pruning the root takes every row */
    forest_id root = mv_row_node(mv, 0);
    T_CHECK(root != FOREST_NONE && !forest_prune(f, root, &err) && mv_mark_pruned(mv, f) == 4 &&
            mv_row_node(mv, 0) == FOREST_NONE, "all gone");
    /* a new capture starts clean */
    int32_t t1[2] = {20, 21};
    forest_add_root(f, t1, NULL, 2, 0, &r, NULL);
    T_CHECK(!step_plan_build(f, &p, &err) && p.n_rows == 2, "a new plan");
    mv_capture(mv, f, NULL, &p, 1);
    step_plan_cancel(f, &p);
    T_CHECK(mv_mark_pruned(mv, f) == 0 && mv_row_node(mv, 1) == r, "fresh rows are live");
    step_plan_free(&p);
    free(mv);
    forest_free(f);
}

/* The text pane's rows (tv_layout): a newline is drawn as U+21B5 and breaks the row; rows
 * break after spaces, so a word moves down whole (the space stays at the row's end); a
 * word wider than the row is broken where the row ends; wide characters count two
 * columns. Each row is checked as drawn. */
/* A forest of one root chain toks[0..n) and a text view over it (tv: the caller frees
 * it, and the forest). */
static forest *chain_view(const int32_t *toks, int32_t n, text_view *tv) {
    forest *f = forest_init(n + 64, 4);
    forest_id leaf;
    st_err err = {0};
    forest_add_root(f, toks, NULL, n, 0, &leaf, NULL);
    tv_init(tv);
    tv_set(tv, f, leaf, &err);
    return f;
}

static void test_text_layout(void) {
    if (!setlocale(LC_CTYPE, "C.UTF-8") && !setlocale(LC_CTYPE, "en_US.UTF-8")) {
        T_SKIP("no UTF-8 locale");
        return;
    }
    const char *pieces[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81Once", "\xe2\x96\x81upon", "\xe2\x96\x81" "a",
                            "\xe2\x96\x81time", ",", "<0x0A>", "L", "ily", "\xe2\x96\x81said",
                            "\xe2\x96\x81" "abcdefghijklmnopq", "\xe2\x96\x81\xe6\x97\xa5\xe6\x9c\xac\xe6\x97\xa5\xe6\x9c\xac"};
    int32_t types[14] = {TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL,
                         TOK_NORMAL, TOK_BYTE, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL, TOK_NORMAL};
    st_err err = {0};
    tok *tk = tiny_vocab(pieces, types, 14);
    if (!tk) return;
    /* "<s> Once upon a time,\nLily said a abcdefghijklmnopq said 日本日本" */
    int32_t toks[] = {1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 5, 12, 11, 13};
    int32_t nt = (int32_t)(sizeof toks / sizeof toks[0]);
    text_view tv;
    forest *f = chain_view(toks, nt, &tv);
    tv_layout L = {0};
    T_CHECK(tv_layout_build(&L, &tv, f, tk, 12, true, "#", &err) == ST_OK, "layout: %s", err.msg);
    const char *want[] = {"<s> Once ", "upon a ", "time,\xe2\x86\xb5", "Lily said a ", "abcdefghijkl",
                          "mnopq said ", "\xe6\x97\xa5\xe6\x9c\xac\xe6\x97\xa5\xe6\x9c\xac#"};
    int32_t nw = (int32_t)(sizeof want / sizeof want[0]);
    T_CHECK(L.rows == nw, "%d rows, want %d", (int)L.rows, (int)nw);
    for (int32_t r = 0; r < L.rows && r < nw; r++) {
        char row[128] = "";
        int32_t col = 0;
        for (int32_t i = 0; i < L.n; i++)
            if (L.p[i].row == r) {
                T_CHECK(L.p[i].col == col, "row %d: a piece at column %d, want %d", (int)r, (int)L.p[i].col, (int)col);
                strncat(row, L.text + L.p[i].off, L.p[i].len);
                col += L.p[i].cols;
            }
        T_CHECK(!strcmp(row, want[r]) && col <= 12, "row %d: '%s' (%d columns), want '%s'", (int)r, row, (int)col, want[r]);
    }
    /* the cursor on "ily" (token 8): row 3; on the end mark: the last row */
    T_CHECK(tv_layout_cursor_row(&L, 8) == 3 && tv_layout_cursor_row(&L, nt) == nw - 1, "cursor rows %d %d",
            (int)tv_layout_cursor_row(&L, 8), (int)tv_layout_cursor_row(&L, nt));
    tv_layout_free(&L);
    tv_free(&tv);
    forest_free(f);
    tok_free(tk);
}

/* A cell longer than the layout's 500-byte slices (a letter and 300 combining accents, one
 * cell since the accents take no column) is laid out whole. */
static void test_long_cell(void) {
    if (!setlocale(LC_CTYPE, "C.UTF-8") && !setlocale(LC_CTYPE, "en_US.UTF-8")) {
        T_SKIP("no UTF-8 locale");
        return;
    }
    const char *pieces[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "\xcc\x81"};
    int32_t types[5] = {TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL, TOK_NORMAL, TOK_NORMAL};
    st_err err = {0};
    tok *tk = tiny_vocab(pieces, types, 5);
    if (!tk) return;
    int32_t toks[302] = {1, 3};
    for (int32_t i = 2; i < 302; i++) toks[i] = 4;
    text_view tv;
    forest *f = chain_view(toks, 302, &tv);
    tv_layout L = {0};
    T_CHECK(tv_layout_build(&L, &tv, f, tk, 80, true, "#", &err) == ST_OK, "layout: %s", err.msg);
    int32_t marks = 0;
    for (int32_t i = 0; i < L.n; i++)
        for (size_t k = 0; k < L.p[i].len; k++) marks += (unsigned char)L.text[L.p[i].off + k] == 0xcc;
    T_CHECK(marks == 300, "a 602-byte cell: %d of 300 accents laid out", (int)marks);
    tv_layout_free(&L);
    tv_free(&tv);
    forest_free(f);
    tok_free(tk);
}

/* The text pane's word moves (W, B) over "Once upon a time, there was a little girl"
 * (stories260K's tokens, several to a word): W lands on each word's first token in turn,
 * B comes back the same way; 0 and $ are tv_move to the ends. */
static void test_word_moves(void) {
    tok *tk = t_tok_load("models/stories260K.gguf");
    if (!tk) return;
    static const char text[] = "Once upon a time, there was a little girl";
    st_err err = {0};
    int32_t n, *t = tok_encode_alloc(tk, text, strlen(text), true, false, &n, &err);
    text_view tv;
    forest *f = chain_view(t, n, &tv);
    tv_move(&tv, -tv.n);
    char got[512] = "", tb[256];
    int32_t stops[32], k = 0;
    while (tv.cursor < tv.n - 1 && k < 32) {
        tv_move_word(&tv, f, tk, 1);
        stops[k++] = tv.cursor;
        tv_token(&tv, f, tk, tv.cursor, tb, sizeof tb);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s|", tb);
    }
    /* each stop's token starts a word: " upon", " a", ... (the end, one past the last token, ends it) */
    T_CHECK(k == 9 && !strncmp(got, " upon| a| time| there| was| a| little| girl", 40) && stops[k - 1] == tv.n,
            "W: %d stops '%s'", (int)k, got);
    int32_t back = 0;
    for (int32_t i = k - 2; i >= 0; i--) {
        tv_move_word(&tv, f, tk, -1);
        back += tv.cursor == stops[i];
    }
    tv_move_word(&tv, f, tk, -1);
    T_CHECK(back == k - 1 && tv.cursor == 0, "B: the same stops back (%d of %d), then the first token", (int)back,
            (int)(k - 1));
    tv_free(&tv);
    forest_free(f);
    free(t);
    tok_free(tk);
}

/* Line 0..n-1 of a view over f drawn into lines (each 256 bytes, 80 columns). */
static void draw(forest_view *v, const forest *f, const tok *tk, char lines[][256], int n) {
    st_err err = {0};
    fv_rebuild(v, f, &err);
    for (int i = 0; i < n; i++) fv_render(v, f, tk, i, NULL, 0, lines[i], 256, 80);
}

/* A chat prompt's line shows the user's words, not "<|im_start|>system↵You are..." (t
 * shows it all again); a child line that starts inside a word starts with an ellipsis.
 * SmolLM2's ChatML and Gemma 3's turns; skipped without the models. */
static void test_chat_lines(void) {
    static const struct { const char *model, *prompt; } cases[] = {
        {"models/SmolLM2-135M-Instruct.Q4_1.gguf",
         "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
         "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"},
        {"models/gemma-3-270m-q4_k_m.gguf",
         "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"},
    };
    if (!setlocale(LC_CTYPE, "C.UTF-8") && !setlocale(LC_CTYPE, "en_US.UTF-8")) {
        T_SKIP("no UTF-8 locale");
        return;
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tok *tk = t_tok_load(cases[c].model);
        if (!tk) continue;
        st_err err = {0};
        int32_t n, nw, na, nb, *p = tok_encode_alloc(tk, cases[c].prompt, strlen(cases[c].prompt), false, true, &n, &err);
        int32_t *w = tok_encode_alloc(tk, "The capital is Par", 18, false, false, &nw, &err);
        int32_t *a = tok_encode_alloc(tk, "is", 2, false, false, &na, &err);
        int32_t *b = tok_encode_alloc(tk, " Lyon", 5, false, false, &nb, &err);
        forest *f = forest_init(256, 0);
        forest_id root, mid, x;
        forest_add_root(f, p, NULL, n, 0, &root, NULL);
        forest_append(f, root, w, NULL, nw, &mid, NULL);
        forest_append(f, mid, a, NULL, na, &x, NULL);
        forest_append(f, mid, b, NULL, nb, &x, NULL);
        forest_view v;
        fv_init(&v, true);
        char ln[4][256];
        draw(&v, f, tk, ln, 4);
        T_CHECK(v.n_lines == 3 && strstr(ln[0], "What is the capital of France?") && !strstr(ln[0], "system") &&
                    !strstr(ln[0], "<"),
                "%s: the prompt's line shows the question: '%s'", cases[c].model, ln[0]);
        T_CHECK(strstr(ln[1], "\xe2\x80\xa6is") != NULL && strstr(ln[2], "\xe2\x80\xa6") == NULL,
                "%s: a line inside a word starts with an ellipsis, one at a word does not: '%s' / '%s'", cases[c].model,
                ln[1], ln[2]);
        v.raw = true;
        draw(&v, f, tk, ln, 1);
        T_CHECK(strstr(ln[0], "<") != NULL, "%s: t shows the scaffolding: '%s'", cases[c].model, ln[0]);
        fv_free(&v);
        forest_free(f);
        free(p), free(w), free(a), free(b);
        tok_free(tk);
    }
}

/* A section opened on a parent line and closed on a child's (Qwen3.5's prompt opens
 * <think> itself): the child's line folds its part of the thinking; a sibling still
 * thinking, whose line has no marker, is shown as it is. */
static void test_think_fold_path(const tok *tk, const int32_t *pq, int32_t nq) {
    const char *texts[] = {"<think>\nLet me add:", " 2+2 is 4.\n</think>\n\nThe answer is 4.", " carry the one"};
    int32_t n[3], *t[3];
    st_err err = {0};
    for (int i = 0; i < 3; i++) t[i] = tok_encode_alloc(tk, texts[i], strlen(texts[i]), false, false, &n[i], &err);
    forest *f = forest_init(256, 0);
    forest_id root, think, a, b;
    forest_add_root(f, pq, NULL, nq, 0, &root, NULL);
    forest_append(f, root, t[0], NULL, n[0], &think, NULL);
    forest_append(f, think, t[1], NULL, n[1], &a, NULL);
    forest_append(f, think, t[2], NULL, n[2], &b, NULL);
    forest_view v;
    fv_init(&v, false);
    char ln[3][256];
    draw(&v, f, tk, ln, 3);
    T_CHECK(v.n_lines == 3 && strstr(ln[0], "[thinking...]"), "the parent line opens the section: '%s'", ln[0]);
    T_CHECK(strstr(ln[1], "[thought] The answer is 4.") && !strstr(ln[1], "2+2"),
            "the child's line folds the thinking its parent opened: '%s'", ln[1]);
    T_CHECK(strstr(ln[2], "carry the one") != NULL, "a sibling still thinking is shown: '%s'", ln[2]);
    fv_free(&v);
    forest_free(f);
    for (int i = 0; i < 3; i++) free(t[i]);
}

/* Thinking folded to a mark: Qwen3's <think> section and gpt-oss's analysis channel (its
 * final channel's scaffolding with it), one still open, none at all; then on a forest
 * line of SmolLM2's tokens (which split "<think>"), shown again by t (raw). */
static void test_think_fold(void) {
    char out[256];
    T_CHECK(ui_think_fold("<think>\nhm, 2+2\n</think>\n\nIt is 4.", false, out, sizeof out) &&
                !strcmp(out, "[thought] It is 4."), "think section: '%s'", out);
    T_CHECK(ui_think_fold("<|channel|>analysis<|message|>sum<|end|><|start|>assistant<|channel|>"
                          "final<|message|>4", false, out, sizeof out) && !strcmp(out, "[thought] 4"),
            "analysis channel: '%s'", out);
    T_CHECK(ui_think_fold("A <think>still going", false, out, sizeof out) &&
                !strcmp(out, "A [thinking...]"), "open section: '%s'", out);
    T_CHECK(ui_think_fold("<think>x</think>y<think>z", false, out, sizeof out) &&
                !strcmp(out, "[thought] y[thinking...]"), "two sections: '%s'", out);
    T_CHECK(!ui_think_fold("no thinking here", false, out, sizeof out), "no section: not folded");
    tok *tk = t_tok_load("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if (!tk) return;
    st_err err = {0};
    const char *q = "What is 2+2?", *a = "<think>\nLet me add: 2+2 is 4.\n</think>\n\nThe answer is 4.";
    int32_t nq, na, *pq = tok_encode_alloc(tk, q, strlen(q), false, false, &nq, &err);
    int32_t *pa = tok_encode_alloc(tk, a, strlen(a), false, false, &na, &err);
    forest *f = forest_init(256, 0);
    forest_id root, x, leaf;
    forest_add_root(f, pq, NULL, nq, 0, &root, NULL);
    forest_append(f, root, pa, NULL, na, &leaf, NULL);
    forest_append(f, root, pa, NULL, 3, &x, NULL); /* "<think>" and no more */
    forest_view v;
    fv_init(&v, false);
    char ln[3][256];
    draw(&v, f, tk, ln, 3);
    T_CHECK(v.n_lines == 3 && strstr(ln[1], "[thought] The answer is 4.") && !strstr(ln[1], "Let me"),
            "a chain's thinking is folded: '%s'", ln[1]);
    T_CHECK(strstr(ln[2], "[thinking...]") != NULL, "an open section is folded: '%s'", ln[2]);
    v.raw = true;
    draw(&v, f, tk, ln, 2);
    T_CHECK(strstr(ln[1], "<think>") && strstr(ln[1], "Let me"), "t shows the thinking: '%s'", ln[1]);
    fv_free(&v);
    test_think_fold_path(tk, pq, nq);
    /* the text pane: the section's tokens one piece (the mark and the closing marker) */
    text_view tv;
    tv_init(&tv);
    tv_layout L = {0};
    char all[2][512];
    for (int show = 0; show < 2; show++) {
        tv.show_thinking = show;
        T_CHECK(tv_set(&tv, f, leaf, &err) == ST_OK && tv_layout_build(&L, &tv, f, tk, 200, false, "#", &err) == ST_OK,
                "text layout: %s", err.msg);
        size_t at = 0;
        for (int32_t i = 0; i < L.n && at + L.p[i].len < sizeof all[show]; i++)
            memcpy(all[show] + at, L.text + L.p[i].off, L.p[i].len), at += L.p[i].len;
        all[show][at] = '\0';
    }
    T_CHECK(strstr(all[0], "<think>[thought]</think>") && strstr(all[0], "The answer is 4.") &&
                !strstr(all[0], "Let me"), "text pane folded: '%s'", all[0]);
    T_CHECK(strstr(all[1], "Let me add") != NULL, "text pane with the thinking shown: '%s'", all[1]);
    tv_layout_free(&L);
    tv_free(&tv);
    forest_free(f);
    free(pq), free(pa);
    tok_free(tk);
}

int main(void) {
    test_think_fold();
    test_forest_view();
    test_chat_lines();
    test_word_moves();
    test_long_cell();
    test_wide_text();
    test_text_layout();
    test_mask_view();
    test_mask_layout();
    test_mask_mouse_prune();
    return t_done();
}
