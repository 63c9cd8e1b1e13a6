/* test_ui.c - the TUI's plain-C parts, without a terminal: the action table (unique
 * names, unique keys per view, the help lists every action), key names and binding
 * files, the command parser, the forest view on a hand-built forest (exact lines, a
 * radix-collapsed chain, folding, cursor, a 10,000-node window in under 50 ms), the text
 * view's path and alternatives, and the mask view of a known step plan. */
#include <math.h>
#include <ncursesw/curses.h>
#include <time.h>

#include "../engine/forest.h"
#include "../engine/step.h"
#include "../ui/action.h"
#include "../ui/command.h"
#include "../ui/forest_view.h"
#include "../ui/keys.h"
#include "../ui/mask_view.h"
#include "../ui/status.h"
#include "../ui/text_view.h"
#include "t.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static void test_actions(void) {
    ui_keymap km;
    ui_keymap_defaults(&km);
    for (int a = 0; a < UI_ACT_N; a++) {
        const ui_action_info *ai = ui_action_get(a);
        T_CHECK(ai && ai->name[0] && ai->help[0], "action %d has a name and help", a);
        T_CHECK(ui_action_by_name(ai->name) == a, "name %s is unique", ai->name);
        char keys[64];
        ui_keymap_keys_of(&km, a, keys, sizeof keys);
        T_CHECK(strcmp(keys, ai->keys) == 0, "%s: default keys '%s' all bound (got '%s')", ai->name, ai->keys, keys);
        /* every default key of this action runs it in its view */
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s", ai->keys);
        for (char *s, *k = strtok_r(tmp, " ", &s); k; k = strtok_r(NULL, " ", &s)) {
            int key = ui_key_parse(k);
            T_CHECK(key >= 0, "key name %s parses", k);
            int v = ai->view == UI_VIEW_ALL ? UI_VIEW_FOREST : ai->view;
            T_CHECK(ui_keymap_lookup(&km, v, key) == a, "%s runs %s", k, ai->name);
        }
    }
    /* a key bound in a view does not also exist in UI_VIEW_ALL (it would be shadowed) */
    int shadowed = 0;
    for (int v = 1; v < UI_VIEW_N; v++)
        for (int32_t i = 0; i < km.n[v]; i++)
            for (int32_t j = 0; j < km.n[UI_VIEW_ALL]; j++)
                shadowed += km.b[v][i].key == km.b[UI_VIEW_ALL][j].key;
    T_CHECK(shadowed == 0, "%d view keys shadow global keys", shadowed);
    /* the help lists every action */
    char line[256];
    int32_t n = ui_help_line(0, NULL, NULL, line, sizeof line);
    for (int a = 0; a < UI_ACT_N; a++) {
        int found = 0;
        for (int32_t i = 0; i < n; i++) {
            ui_help_line(i, NULL, NULL, line, sizeof line);
            char *p = strstr(line, ui_action_get(a)->name);
            found |= p && p[strlen(ui_action_get(a)->name)] == ' ';
        }
        T_CHECK(found, "help lists %s", ui_action_get(a)->name);
    }
    T_CHECK(ui_action_by_name("no-such") == UI_ACT_NONE, "unknown action");
}

static void test_keys(void) {
    char buf[16];
    T_CHECK(ui_key_parse("q") == 'q' && ui_key_parse("C-l") == 12 && ui_key_parse("Enter") == '\n', "names");
    T_CHECK(ui_key_parse("Up") == KEY_UP && ui_key_parse("F1") == KEY_F(1) && ui_key_parse("Space") == ' ', "names");
    T_CHECK(ui_key_parse("") < 0 && ui_key_parse("qq") < 0 && ui_key_parse("F13") < 0 && ui_key_parse("C-") < 0, "bad names");
    T_CHECK(!strcmp(ui_key_name(KEY_NPAGE, buf, sizeof buf), "PgDn") && !strcmp(ui_key_name(2, buf, sizeof buf), "C-b"), "key names");
    T_CHECK(ui_key_parse("\xc3\xa9") == 0xe9 && !strcmp(ui_key_name(0xe9, buf, sizeof buf), "\xc3\xa9"), "UTF-8 key");
    ui_keymap km;
    ui_keymap_defaults(&km);
    char msg[256];
    const char *good = "# my keys\n\nbind J down   # comment\nbind C-n grow\nunbind j forest\n";
    T_CHECK(ui_keymap_parse(&km, good, strlen(good), "keys", msg, sizeof msg) == 0 && msg[0] == 0, "good file: %s", msg);
    T_CHECK(ui_keymap_lookup(&km, UI_VIEW_FOREST, 'J') == UI_ACT_DOWN, "J is down");
    T_CHECK(ui_keymap_lookup(&km, UI_VIEW_FOREST, 'j') == UI_ACT_NONE, "j unbound");
    T_CHECK(ui_keymap_lookup(&km, UI_VIEW_TEXT, 14) == UI_ACT_GROW, "C-n grows everywhere");
    const char *bad = "bind x nothing\nbind Foo down\nbind j\nfrobnicate\nunbind j nowhere\nbind z quit\n";
    T_CHECK(ui_keymap_parse(&km, bad, strlen(bad), "keys", msg, sizeof msg) == 5, "five bad lines");
    T_CHECK(!strcmp(msg, "keys:1: unknown action 'nothing'"), "first error: %s", msg);
    T_CHECK(ui_keymap_lookup(&km, UI_VIEW_FOREST, 'z') == UI_ACT_QUIT, "good lines still apply");
    T_CHECK(ui_keymap_load(&km, "/nonexistent/keys", msg, sizeof msg) == 0, "missing file is fine");
}

static void test_commands(void) {
    ui_cmd c;
    st_err err = {0};
    T_CHECK(!ui_cmd_parse(":grow 32", &c, &err) && c.kind == UI_CMD_GROW && c.a == 32, "grow");
    T_CHECK(!ui_cmd_parse(":grow", &c, &err) && c.kind == UI_CMD_GROW && c.a == 0, "grow default");
    T_CHECK(!ui_cmd_parse(":cot 8", &c, &err) && c.kind == UI_CMD_COT && c.a == 8 && c.b == 0, "cot");
    T_CHECK(!ui_cmd_parse("  :beam 4 64 ", &c, &err) && c.kind == UI_CMD_BEAM && c.a == 4 && c.b == 64, "beam");
    T_CHECK(!ui_cmd_parse(":ask What is 2+2?", &c, &err) && c.kind == UI_CMD_ASK && !strcmp(c.text, "What is 2+2?"), "ask");
    T_CHECK(!ui_cmd_parse(":set temp 0.7", &c, &err) && c.kind == UI_CMD_SET && !strcmp(c.key, "temp") && fabs(c.val - 0.7) < 1e-12, "set");
    T_CHECK(!ui_cmd_parse(":save /tmp/x.json", &c, &err) && c.kind == UI_CMD_SAVE && !strcmp(c.text, "/tmp/x.json"), "save");
    T_CHECK(!ui_cmd_parse(":load", &c, &err) && c.kind == UI_CMD_LOAD && !c.text[0], "load default");
    T_CHECK(!ui_cmd_parse(":q", &c, &err) && c.kind == UI_CMD_QUIT, "prefix :q");
    T_CHECK(!ui_cmd_parse(":prune", &c, &err) && c.kind == UI_CMD_PRUNE, "prune");
    T_CHECK(!ui_cmd_parse(":merge", &c, &err) && c.kind == UI_CMD_MERGE, "merge");
    T_CHECK(!ui_cmd_parse(":help", &c, &err) && c.kind == UI_CMD_HELP, "help");
    T_CHECK(!ui_cmd_parse("Once upon", &c, &err) && c.kind == UI_CMD_APPEND && !strcmp(c.text, "Once upon"), "text");
    T_CHECK(!ui_cmd_parse("   ", &c, &err) && c.kind == UI_CMD_NONE, "empty");
    T_CHECK(ui_cmd_parse(":beam", &c, &err) == ST_ERR_ARG && strstr(err.msg, ":beam WIDTH [TOKENS]"), "beam needs a width: %s", err.msg);
    T_CHECK(ui_cmd_parse(":beam 0", &c, &err) == ST_ERR_ARG, "width 0");
    T_CHECK(ui_cmd_parse(":cot 4 8 9", &c, &err) == ST_ERR_ARG, "too many");
    T_CHECK(ui_cmd_parse(":grow x", &c, &err) == ST_ERR_ARG, "not a number");
    T_CHECK(ui_cmd_parse(":set heat 1", &c, &err) == ST_ERR_ARG && strstr(err.msg, "heat"), "unknown setting");
    T_CHECK(ui_cmd_parse(":set temp warm", &c, &err) == ST_ERR_ARG, "bad value");
    T_CHECK(ui_cmd_parse(":frob", &c, &err) == ST_ERR_ARG && strstr(err.msg, "unknown command"), "unknown");
    T_CHECK(ui_cmd_parse(":p", &c, &err) == ST_ERR_ARG && strstr(err.msg, "ambiguous"), "ambiguous :p");
    T_CHECK(ui_cmd_parse(":ask", &c, &err) == ST_ERR_ARG, "ask needs text");
    T_CHECK(ui_cmd_parse(":quit now", &c, &err) == ST_ERR_ARG, "quit takes nothing");
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
    fv_free(&v);
    forest_free(f);

    /* 10,000+ nodes: 100 branches of 100 tokens; rebuild + one window well under 50 ms */
    f = forest_init(20000, 0);
    int32_t one = 1, chain[99];
    for (int i = 0; i < 99; i++) chain[i] = 2 + i;
    forest_id root;
    forest_add_root(f, &one, NULL, 1, 0, &root, NULL);
    for (int b = 0; b < 100; b++) {
        forest_id first, last;
        float lp = logf(0.5f);
        forest_append(f, root, &one, &lp, 1, &first, NULL);
        forest_append(f, first, chain, NULL, 99, &last, NULL);
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
    T_CHECK(mv->rows[2].colour != mv->rows[3].colour || 1, "colours exist");
    T_CHECK(mv->rows[0].colour == mv->rows[1].colour, "one line, one colour");
    char buf[256];
    mv_row_text(mv, 2, buf, sizeof buf, 80, false);
    T_CHECK(strstr(buf, "[12]") && strstr(buf, " L "), "row text '%s'", buf);
    mv_header(mv, buf, sizeof buf, 80, false);
    T_CHECK(!strcmp(buf, "step 0: 4 rows, 4 KV slots seen"), "header '%s'", buf);
    /* the grid follows its newest columns until scrolled; scrolling back to them follows
     * again */
    T_CHECK(mv->left == -1 && mv_first_col(mv, 2) == 2 && mv_first_col(mv, 8) == 0, "follows the last columns");
    mv_hscroll(mv, -1, 2);
    T_CHECK(mv->left == 1 && mv_first_col(mv, 2) == 1, "scrolled left by one: %d", mv->left);
    mv_hscroll(mv, -8, 2);
    T_CHECK(mv->left == 0 && mv_first_col(mv, 2) == 0, "clamped at the first column");
    T_CHECK(mv_first_col(mv, 3) == 0 && mv_first_col(mv, 8) == 0, "a wider grid starts at 0");
    mv_hscroll(mv, 8, 2);
    T_CHECK(mv->left == -1 && mv_first_col(mv, 2) == 2, "back at the end: following again");
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
}

int main(void) {
    test_actions();
    test_keys();
    test_commands();
    test_forest_view();
    test_mask_view();
    return t_done();
}
