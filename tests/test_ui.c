/* test_ui.c - the TUI's plain-C parts, without a terminal: the action table (unique
 * names, unique keys per view, the help lists every action), key names and binding
 * files, the command parser (:margins included), :ask's chat turn forms, and, on
 * stories260K when it is there, :ask's tokens and a whole :margins run. The jobs through
 * the worker thread (:ask, :export, :draft, :lookahead) are test_ui_worker.c's; the panes
 * (forest, text, mask views) test_ui_views.c's. */
#include <math.h>
#include <ncursesw/curses.h>
#include <time.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "forest/step.h"
#include "../ui/action.h"
#include "../ui/ask_margins.h"
#include "../ui/command.h"
#include "../ui/keys.h"
#include "../ui/mask_view.h"
#include "../ui/status.h"
#include "../ui/spec_job.h"
#include "../ui/worker.h"
#include "t.h"

#include "strategy/margins.h"
#include "strategy/strategy.h"
#include "t_model.h"

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
    const lookahead_params *la = &c.job.u.run.opts.u.spec.p.la;
    T_CHECK(!ui_cmd_parse(":grow 32", &c, &err) && c.kind == UI_CMD_GROW && c.job.u.run.opts.budget == 32, "grow");
    T_CHECK(!ui_cmd_parse(":grow", &c, &err) && c.kind == UI_CMD_GROW && c.job.u.run.opts.budget == 0, "grow default");
    T_CHECK(!ui_cmd_parse(":cot 8", &c, &err) && c.kind == UI_CMD_COT && c.job.u.run.opts.u.cot.k == 8 && c.job.u.run.opts.budget == 0, "cot");
    T_CHECK(!ui_cmd_parse("  :beam 4 64 ", &c, &err) && c.kind == UI_CMD_BEAM && c.job.u.run.opts.u.beam.width == 4 && c.job.u.run.opts.budget == 64, "beam");
    T_CHECK(!ui_cmd_parse(":ask What is 2+2?", &c, &err) && c.kind == UI_CMD_ASK && !strcmp(c.text, "What is 2+2?"), "ask");
    T_CHECK(!ui_cmd_parse(":set temp 0.7", &c, &err) && c.kind == UI_CMD_SET && !strcmp(c.key, "temp") && fabs(c.val - 0.7) < 1e-12, "set");
    T_CHECK(!ui_cmd_parse(":set chat off", &c, &err) && c.kind == UI_CMD_SET && !strcmp(c.key, "chat") && c.val == 0,
            "set chat off");
    T_CHECK(!ui_cmd_parse(":set chat on", &c, &err) && c.val == 1, "set chat on");
    T_CHECK(ui_cmd_parse(":set chat 2", &c, &err) && strstr(err.msg, "chat on|off"), "set chat 2: '%s'", err.msg);
    T_CHECK(!ui_cmd_parse(":save /tmp/x.json", &c, &err) && c.kind == UI_CMD_SAVE && !strcmp(c.text, "/tmp/x.json"), "save");
    T_CHECK(!ui_cmd_parse(":load", &c, &err) && c.kind == UI_CMD_LOAD && !c.text[0] && !c.force, "load default");
    /* :load! loads a session saved with another model; no other command takes a '!' */
    T_CHECK(!ui_cmd_parse(":load! /tmp/x.json", &c, &err) && c.kind == UI_CMD_LOAD && c.force &&
            !strcmp(c.text, "/tmp/x.json"), ":load! FILE: force %d '%s'", c.force, c.text);
    T_CHECK(!ui_cmd_parse(":loa!", &c, &err) && c.kind == UI_CMD_LOAD && c.force, ":loa! is :load!");
    T_CHECK(!ui_cmd_parse(":load /tmp/x.json", &c, &err) && !c.force, ":load FILE does not force");
    T_CHECK(ui_cmd_parse(":grow! 3", &c, &err) == ST_ERR_ARG && strstr(err.msg, "only :load!") && c.kind == UI_CMD_NONE,
            ":grow!: '%s'", err.msg);
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
    T_CHECK(!ui_cmd_parse(":set", &c, &err) && c.kind == UI_CMD_SET && !c.key[0], ":set alone: show the settings");
    T_CHECK(ui_cmd_parse(":set temp", &c, &err) == ST_ERR_ARG, ":set NAME without a value");
    /* a file's ~/ is the home folder (":export ~/x.md" said "cannot write ~/x.md") */
    setenv("HOME", "/home/someone", 1);
    T_CHECK(!ui_cmd_parse(":export ~/x.md", &c, &err) && !strcmp(c.text, "/home/someone/x.md"), "export ~: '%s'", c.text);
    T_CHECK(!ui_cmd_parse(":save ~/s.json", &c, &err) && !strcmp(c.text, "/home/someone/s.json"), "save ~: '%s'", c.text);
    T_CHECK(!ui_cmd_parse(":load ~/s.json", &c, &err) && !strcmp(c.text, "/home/someone/s.json"), "load ~: '%s'", c.text);
    T_CHECK(!ui_cmd_parse(":ask ~/x", &c, &err) && !strcmp(c.text, "~/x"), "not in text: '%s'", c.text);
    T_CHECK(!ui_cmd_parse(":export ~x.md", &c, &err) && !strcmp(c.text, "~x.md"), "only ~/: '%s'", c.text);
    T_CHECK(ui_cmd_parse(":set temp warm", &c, &err) == ST_ERR_ARG, "bad value");
    /* the sampler's ranges, with the options' and the session loader's message (:set
     * took them, and the autosave could not be loaded again) */
    T_CHECK(ui_cmd_parse(":set top_k -5", &c, &err) == ST_ERR_ARG &&
                strstr(err.msg, "'top_k' is -5, want an integer from 0 to 1073741824"), ":set top_k -5: %s", err.msg);
    T_CHECK(ui_cmd_parse(":set temp -1", &c, &err) == ST_ERR_ARG &&
                strstr(err.msg, "'temp' is -1, want a finite number, 0 or more"), ":set temp -1: %s", err.msg);
    T_CHECK(ui_cmd_parse(":set top_p 0", &c, &err) == ST_ERR_ARG &&
                strstr(err.msg, "'top_p' is 0, want 0 < P <= 1"), ":set top_p 0: %s", err.msg);
    T_CHECK(ui_cmd_parse(":set min_p 1", &c, &err) == ST_ERR_ARG &&
                strstr(err.msg, "'min_p' is 1, want 0 <= P < 1"), ":set min_p 1: %s", err.msg);
    T_CHECK(ui_cmd_parse(":set seed -1", &c, &err) == ST_ERR_ARG, ":set seed -1: %s", err.msg);
    T_CHECK(!ui_cmd_parse(":set min_p 0", &c, &err) && c.val == 0, ":set min_p 0: %s", err.msg);
    T_CHECK(ui_cmd_parse(":frob", &c, &err) == ST_ERR_ARG && strstr(err.msg, "unknown command"), "unknown");
    T_CHECK(ui_cmd_parse(":p", &c, &err) == ST_ERR_ARG && strstr(err.msg, "ambiguous"), "ambiguous :p");
    T_CHECK(ui_cmd_parse(":ask", &c, &err) == ST_ERR_ARG, "ask needs text");
    T_CHECK(ui_cmd_parse(":quit now", &c, &err) == ST_ERR_ARG, "quit takes nothing");
    /* :margins [CHUNK] QUESTION */
    T_CHECK(!ui_cmd_parse(":margins 64 Who is Lily?", &c, &err) && c.kind == UI_CMD_MARGINS && c.job.u.run.chunk == 64 &&
            !strcmp(c.text, "Who is Lily?"), "margins with a chunk: %d '%s'", c.job.u.run.chunk, c.text);
    T_CHECK(!ui_cmd_parse(":margins  Who is Lily? ", &c, &err) && c.kind == UI_CMD_MARGINS && c.job.u.run.chunk == 0 &&
            !strcmp(c.text, "Who is Lily? "), "margins, default chunk: '%s'", c.text);
    T_CHECK(!ui_cmd_parse(":margins 2+2?", &c, &err) && c.job.u.run.chunk == 0 && !strcmp(c.text, "2+2?"), "a question that is not a number");
    T_CHECK(!ui_cmd_parse(":ma 8 why", &c, &err) && c.kind == UI_CMD_MARGINS && c.job.u.run.chunk == 8 && !strcmp(c.text, "why"), ":ma is :margins");
    T_CHECK(!ui_cmd_parse(":me", &c, &err) && c.kind == UI_CMD_MERGE, ":me is still :merge");
    T_CHECK(ui_cmd_parse(":m", &c, &err) == ST_ERR_ARG && strstr(err.msg, "ambiguous"), ":m is ambiguous now");
    T_CHECK(ui_cmd_parse(":margins", &c, &err) == ST_ERR_ARG && strstr(err.msg, "usage: :margins [CHUNK] QUESTION") &&
            !strstr(err.msg, "notes"), "margins needs a question: '%s'", err.msg);
    T_CHECK(ui_cmd_parse(":margins 64  ", &c, &err) == ST_ERR_ARG && c.kind == UI_CMD_NONE, "a chunk alone is not a question");
    int found = 0;
    for (int32_t i = 0; ui_cmd_name(i); i++)
        found += !strcmp(ui_cmd_name(i), "margins") && strstr(ui_cmd_usage(i), ":margins [CHUNK] QUESTION") != NULL;
    T_CHECK(found == 1, "margins is in the table completion and help read");
    /* :draft [TOKENS], :lookahead W N G [TOKENS] */
    T_CHECK(!ui_cmd_parse(":draft", &c, &err) && c.kind == UI_CMD_DRAFT && c.job.u.run.opts.budget == 0, "draft default");
    T_CHECK(!ui_cmd_parse(":draft 64", &c, &err) && c.kind == UI_CMD_DRAFT && c.job.u.run.opts.budget == 64, "draft 64");
    T_CHECK(!ui_cmd_parse(":d 8", &c, &err) && c.kind == UI_CMD_DRAFT && c.job.u.run.opts.budget == 8, ":d is :draft");
    T_CHECK(ui_cmd_parse(":draft 0", &c, &err) == ST_ERR_ARG && strstr(err.msg, "usage: :draft [TOKENS]") &&
            c.kind == UI_CMD_NONE, "draft 0: '%s'", err.msg);
    T_CHECK(ui_cmd_parse(":draft 8 9", &c, &err) == ST_ERR_ARG && ui_cmd_parse(":draft many", &c, &err) == ST_ERR_ARG,
            "draft takes one number");
    T_CHECK(!ui_cmd_parse(":lookahead 3 3 2 4", &c, &err) && c.kind == UI_CMD_LOOKAHEAD && la->w == 3 && la->n == 3 &&
            la->g == 2 && c.job.u.run.opts.budget == 4, "lookahead W N G TOKENS");
    T_CHECK(!ui_cmd_parse(":lookahead 5 4 0", &c, &err) && c.kind == UI_CMD_LOOKAHEAD && la->w == 5 && la->n == 4 &&
            la->g == 0 && c.job.u.run.opts.budget == 0, "lookahead, G 0, default tokens");
    T_CHECK(!ui_cmd_parse(":look 2 2 1", &c, &err) && c.kind == UI_CMD_LOOKAHEAD, ":look is :lookahead");
    T_CHECK(!ui_cmd_parse(":loa", &c, &err) && c.kind == UI_CMD_LOAD && ui_cmd_parse(":l", &c, &err) == ST_ERR_ARG &&
            strstr(err.msg, "ambiguous"),
            ":l is ambiguous now (load, lookahead)");
    T_CHECK(ui_cmd_parse(":lookahead 3 3", &c, &err) == ST_ERR_ARG && strstr(err.msg, "usage: :lookahead W N G [TOKENS]") &&
            !strstr(err.msg, "window"), "lookahead needs W N G: '%s'", err.msg);
    T_CHECK(ui_cmd_parse(":lookahead 3 3 2 4 5", &c, &err) == ST_ERR_ARG, "too many numbers");
    T_CHECK(ui_cmd_parse(":lookahead 0 3 2", &c, &err) == ST_ERR_ARG && ui_cmd_parse(":lookahead 3 3 2 0", &c, &err) == ST_ERR_ARG &&
            ui_cmd_parse(":lookahead 3 x 2", &c, &err) == ST_ERR_ARG, "W and TOKENS >= 1, numbers only");
    T_CHECK(ui_cmd_parse(":lookahead 3 1 2", &c, &err) == ST_ERR_ARG && strstr(err.msg, "2 <= N <= 16") && c.kind == UI_CMD_NONE,
            "N 1: '%s'", err.msg);
    T_CHECK(ui_cmd_parse(":lookahead 3 17 2", &c, &err) == ST_ERR_ARG && ui_cmd_parse(":lookahead 1000 5 2", &c, &err) == ST_ERR_ARG &&
            ui_cmd_parse(":lookahead 3 3 2000", &c, &err) == ST_ERR_ARG, "N 17, W x N > 4096, G > 1024");
    found = 0;
    for (int32_t i = 0; ui_cmd_name(i); i++)
        found += (!strcmp(ui_cmd_name(i), "draft") && !strncmp(ui_cmd_usage(i), ":draft [TOKENS] ", 16)) +
                 (!strcmp(ui_cmd_name(i), "lookahead") && !strncmp(ui_cmd_usage(i), ":lookahead W N G [TOKENS] ", 26));
    T_CHECK(found == 2, "draft and lookahead are in the table");
}

/* :ask's text forms: the conversation's start is exactly what `multidecode ask` renders
 * for a question (chat_apply_with_default), a follow-up closes the open answer first,
 * and without a template the text stays as it is. */
static void test_ask_turns(void) {
    ui_chat chatml = {CHAT_CHATML, "SYS"}, none = {CHAT_NONE, NULL}, llama3 = {CHAT_LLAMA3, NULL};
    char *s = ui_turn_text(&chatml, "Hi", UI_TURN_FIRST);
    T_CHECK(s && !strcmp(s, "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            "chatml start '%s'", s ? s : "(null)");
    char ref[256];
    chat_msg um = {"user", "Hi"};
    chat_apply_with_default(CHAT_CHATML, "SYS", &um, 1, true, ref, sizeof ref);
    T_CHECK(s && !strcmp(s, ref), "the start is ask's rendering");
    free(s);
    s = ui_turn_text(&chatml, "Hi", UI_TURN_FOLLOW);
    T_CHECK(s && !strcmp(s, "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), "chatml follow-up '%s'",
            s ? s : "(null)");
    free(s);
    s = ui_turn_text(&llama3, "Hi", UI_TURN_FOLLOW);
    T_CHECK(s && !strcmp(s, "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n"), "llama3 follow-up '%s'", s ? s : "(null)");
    free(s);
    s = ui_turn_text(&none, "Hi there", UI_TURN_FIRST);
    T_CHECK(s && !strcmp(s, "Hi there"), "no template: raw '%s'", s ? s : "(null)");
    free(s);
    s = ui_turn_text(&chatml, "Hi there", UI_TURN_RAW);
    T_CHECK(s && !strcmp(s, "Hi there"), "the raw form '%s'", s ? s : "(null)");
    free(s);
    T_CHECK(chat_user_turn(CHAT_NONE, NULL, "x", false, ref, sizeof ref) == 1 && !strcmp(ref, "x"), "chat_user_turn raw");
    /* the form a branch calls for: BOS 1, a control token 3, text 4 5 */
    const char *pieces[6] = {"<unk>", "<s>", "</s>", "<|im_start|>", "a", "b"};
    int32_t types[6] = {TOK_UNKNOWN, TOK_CONTROL, TOK_CONTROL, TOK_CONTROL, TOK_NORMAL, TOK_NORMAL};
    tok_vocab_desc vd = tok_vocab_desc_default();
    vd.n_vocab = 6, vd.pieces = pieces, vd.types = types, vd.unk = 0, vd.bos = 1, vd.eos = 2;
    st_err err = {0};
    tok *tk = tok_from_vocab(&vd, &err);
    T_CHECK(tk != NULL, "vocabulary: %s", err.msg);
    if (tk) {
        int32_t plain[3] = {1, 4, 5}, chat[4] = {1, 3, 4, 5};
        T_CHECK(ui_turn_form(tk, CHAT_CHATML, NULL, 0) == UI_TURN_FIRST, "a new root starts a conversation");
        T_CHECK(ui_turn_form(tk, CHAT_CHATML, plain, 3) == UI_TURN_OPEN, "after plain text (BOS is not a turn)");
        T_CHECK(ui_turn_form(tk, CHAT_CHATML, chat, 4) == UI_TURN_FOLLOW, "after a chat");
        T_CHECK(ui_turn_form(tk, CHAT_NONE, chat, 4) == UI_TURN_RAW, "no template");
    }
    tok_free(tk);
    /* after plain text, a ChatML turn opens with <|im_start|> even where that is BOS
     * (SmolLM2): only a template that writes BOS itself has it dropped mid-sequence */
    vd.bos = 3;
    tk = tok_from_vocab(&vd, &err);
    int32_t n = 0, *open = tk ? ui_turn_tokens(tk, &chatml, "a", UI_TURN_OPEN, false, &n, &err) : NULL;
    T_CHECK(open && n > 1 && open[0] == 3, "chatml after text starts with <|im_start|>: %d tokens, first %d", (int)n,
            open ? (int)open[0] : -1);
    free(open);
    tok_free(tk);
    char name[128];
    T_CHECK(strstr(ui_turn_form_name(UI_TURN_FOLLOW, CHAT_CHATML, name, sizeof name), "chatml") &&
            strstr(ui_turn_form_name(UI_TURN_RAW, CHAT_NONE, name, sizeof name), "no chat template"), "form names");
}


/* On stories260K (no chat template of its own): :ask's tokens with the BOS rules, and a
 * whole :margins run over a branch, notes then answer. */
static void test_model_runs(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!t_stories_ctx(&m, &tk, &c, 1024)) goto out;
    int32_t bos = tok_bos(tk), n = 0, *t;
    ui_chat none = {CHAT_NONE, NULL}, llama2 = {CHAT_LLAMA2, NULL};
    t = ui_turn_tokens(tk, &none, "Hello", UI_TURN_FIRST, true, &n, &err);
    T_CHECK(t && n > 1 && t[0] == bos, "raw at a root: BOS first");
    free(t);
    t = ui_turn_tokens(tk, &none, "Hello", UI_TURN_FOLLOW, false, &n, &err);
    T_CHECK(t && n >= 1 && t[0] != bos, "raw under a node: no BOS");
    free(t);
    /* Llama-2's template writes "<s>" itself: once at a root, never in mid-sequence */
    t = ui_turn_tokens(tk, &llama2, "Hello", UI_TURN_FIRST, true, &n, &err);
    T_CHECK(t && n > 2 && t[0] == bos && t[1] != bos, "llama2 start: one BOS");
    free(t);
    t = ui_turn_tokens(tk, &llama2, "Hello", UI_TURN_OPEN, false, &n, &err);
    T_CHECK(t && n > 1 && t[0] != bos, "llama2 after text: its BOS left out");
    free(t);
    T_CHECK(!ui_turn_tokens(tk, &none, "", UI_TURN_RAW, false, &n, &err) && err.code == ST_ERR_ARG, "nothing to append");

    /* :margins over a 30-odd-token branch in chunks of 12 */
    forest *f = forest_init(1024, 0);
    const char *story = "Once upon a time, there was a little girl named Lily. She loved to play with her red ball in the park.";
    int32_t nt = tok_encode(tk, story, strlen(story), true, false, NULL, 0), *st = malloc(sizeof(int32_t) * (size_t)nt);
    tok_encode(tk, story, strlen(story), true, false, st, nt);
    forest_id leaf;
    forest_add_root(f, st, NULL, nt, 0, &leaf, &err);
    free(st);
    sample_params sp = sample_default_params();
    sp.temp = 0;
    /* refusals leave the forest as it was; the chunk limit is the CLI's (margins.h) */
    enum { N_MANY = MARGINS_MAX_CHUNKS + 16 };
    forest *small = forest_init(2 * N_MANY, 0);
    int32_t many[N_MANY], two[2] = {bos, 100};
    for (int i = 0; i < N_MANY; i++) many[i] = 300 + i % 100;
    forest_id sl;
    forest_add_root(small, many, NULL, N_MANY, 0, &sl, &err);
    ui_margins *um = ui_margins_start(small, tk, sl, "Who?", 1, &none, &sp, 6, m->hp.n_vocab, &err);
    char want[32];
    snprintf(want, sizeof want, "%d chunks", (int)N_MANY);
    T_CHECK(!um && err.code == ST_ERR_ARG && strstr(err.msg, want) && forest_n_live(small) == N_MANY,
            "too many chunks refused: %s", err.msg);
    forest_free(small);
    /* 80 chunks are taken, as the CLI takes them */
    small = forest_init(4096, 0);
    forest_add_root(small, many, NULL, 80, 0, &sl, &err);
    um = ui_margins_start(small, tk, sl, "Who?", 1, &none, &sp, 6, m->hp.n_vocab, &err);
    T_CHECK(um && um->n_chunks == 80, "80 one-token chunks: %s", um ? "" : err.msg);
    ui_margins_free(um);
    forest_free(small);
    small = forest_init(40, 0);
    forest_add_root(small, two, NULL, 2, 0, &sl, &err);
    um = ui_margins_start(small, tk, sl, "Who?", 12, &none, &sp, 6, m->hp.n_vocab, &err);
    T_CHECK(um, "one chunk fits: %s", err.msg);
    ui_margins_free(um);
    forest_free(small);
    small = forest_init(8, 0);
    forest_add_root(small, two, NULL, 2, 0, &sl, &err);
    um = ui_margins_start(small, tk, sl, "Who?", 12, &none, &sp, 6, m->hp.n_vocab, &err);
    T_CHECK(!um && err.code == ST_ERR_CONTEXT && forest_n_live(small) == 2, "prompts beyond the KV cache refused: %s", err.msg);
    forest_free(small);
    um = ui_margins_start(f, tk, leaf, "Who is Lily?", 12, &none, &sp, 6, m->hp.n_vocab, &err);
    T_CHECK(um && um->n_chunks == (nt - 1 + 11) / 12, "chunks: %d", um ? um->n_chunks : -1);
    if (um) {
        step_plan p;
        step_plan_init(&p);
        strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
        const margins *mg = strategy_margins(um->s);
        forest_id run[64];
        T_CHECK(strategy_running(um->s, run, 64) == um->n_chunks, "every note is growing");
        int32_t active = 1, steps = 0;
        st_code rc = ST_OK;
        while (active > 0 && steps < 40 && !rc) rc = strategy_step(um->s, &env, &err), active = !strategy_done(um->s), steps++;
        T_CHECK(!rc && active == 0 && margins_done(mg), "notes and answer done in %d steps: %s", steps, err.msg);
        T_CHECK(strategy_running(um->s, run, 64) == 0, "nothing runs after");
        /* the answer's prompt: the raw request around the notes */
        int32_t np = forest_path(f, mg->answer_from, NULL, 0);
        int32_t *pt = malloc(sizeof(int32_t) * (size_t)np);
        forest_path(f, mg->answer_from, pt, np);
        char txt[4096];
        tok_decode(tk, pt, np, txt, sizeof txt);
        free(pt);
        T_CHECK(strstr(txt, "Question: Who is Lily?\n\nNotes:\n") && strlen(txt) > 8 &&
                !strcmp(txt + strlen(txt) - 8, "\nAnswer:"), "answer prompt '%s'", txt);
        char *note = margins_note_text(mg, f, tk, 0, &err);
        T_CHECK(note != NULL, "note 0");
        free(note);
        step_plan_free(&p);
        ui_margins_free(um);
    }
    forest_free(f);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

int main(void) {
    test_actions();
    test_keys();
    test_commands();
    test_ask_turns();
    test_model_runs();
    return t_done();
}
