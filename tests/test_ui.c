/* test_ui.c - the TUI's plain-C parts, without a terminal: the action table (unique
 * names, unique keys per view, the help lists every action), key names and binding
 * files, the command parser (:margins included), :ask's chat turn forms, and, on
 * stories260K when it is there, :ask's tokens, a whole :margins run, and :draft and
 * :lookahead (ui/spec_job.h) run through the worker thread: their chains equal plain
 * greedy decoding token for token, the budget is exact, and a lookahead step's captured
 * mask rows carry the window's roles at positions tip + i + l after the window is pruned.
 * The panes (forest, text, mask views) are tested in test_ui_views.c. */
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

static double now_ms(void) { return 1e3 * mono_now_s(); }

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


/* stories260K with its tokenizer and a context of n_slots; false (skipped or failed, with
 * whatever was opened in *m, *tk, *c for the caller to free) when unavailable. */
static bool open_stories(model **m, tok **tk, model_ctx **c, int32_t n_slots) {
    *m = NULL, *tk = NULL, *c = NULL;
    const char *path = t_shared("models/stories260K.gguf");
    if (!path) {
        T_MISSING("stories260K is absent");
        return false;
    }
    st_err err = {0};
    *m = model_load(path, &err);
    *tk = *m ? tok_from_gguf((*m)->gguf, &err) : NULL;
    *c = *m ? t_new_ctx(*m, n_slots) : NULL;
    T_CHECK(*m && *tk && *c, "stories260K: %s", err.msg);
    return *m && *tk && *c;
}

/* On stories260K (no chat template of its own): :ask's tokens with the BOS rules, and a
 * whole :margins run over a branch, notes then answer. */
static void test_model_runs(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 1024)) goto out;
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

/* ---- :ask through the worker ---- */

/* Waits (at most 60 s) until the worker's message number is past no and, with idle,
 * nothing runs; the message into msg, its number returned. */
static uint64_t wait_message(ui_worker *w, uint64_t no, bool idle, char *msg, size_t cap) {
    double t0 = now_ms();
    for (;;) {
        ui_worker_lock(w);
        bool busy = ui_worker_busy(w);
        uint64_t now = ui_worker_message(w, msg, cap);
        ui_worker_unlock(w);
        if ((now != no && !(idle && busy)) || now_ms() - t0 > 60e3) return now;
        usleep(2000);
    }
}

/* A worker over a fresh forest of n_slots holding <s> + token 300 (its root in *root),
 * decoding greedily with the given budget; NULL (checked) when it cannot start. */
static ui_worker *greedy_worker(model_ctx *c, const tok *tk, int32_t n_slots, int32_t budget, forest_id *root) {
    st_err err = {0};
    forest *f = forest_init(n_slots, 8);
    int32_t prompt[2] = {tok_bos(tk), 300};
    forest_add_root(f, prompt, NULL, 2, 0, root, &err);
    sample_params sp = sample_default_params();
    sp.temp = 0;
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = budget, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) forest_free(f);
    return w;
}

/* :ask is the ask strategy: refused while another strategy runs (the forest as it was,
 * the running one untouched); once that is cancelled it appends the turn and answers. */
static void test_ask_job(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 1024)) goto out;
    forest_id leaf;
    ui_worker *w = greedy_worker(c, tk, 1024, 6, &leaf);
    if (!w) goto out;
    char msg[1024];
    ui_job grow = ui_job_run(STRAT_GROW, leaf), pause = {.kind = UI_JOB_PAUSE};
    grow.u.run.opts.budget = 500;
    /* the lock held: the worker takes the pause before the grow's first step */
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_worker_post(w, &grow);
    ui_worker_post(w, &pause);
    ui_worker_unlock(w);
    no = wait_message(w, no, false, msg, sizeof msg);
    T_CHECK(!strcmp(msg, "paused"), "grow paused: '%s'", msg);
    ui_worker_lock(w);
    int32_t nodes = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    ui_job ask = ui_job_run(STRAT_ASK, leaf);
    ask.text = "Who is there?";
    ui_worker_post(w, &ask);
    no = wait_message(w, no, false, msg, sizeof msg);
    ui_stats st;
    ui_worker_lock(w);
    ui_worker_stats(w, &st);
    T_CHECK(strstr(msg, "grow is running: cancel it first (x)") && ui_worker_busy(w) && !strncmp(st.job, "grow ", 5) &&
            forest_n_live(ui_worker_forest(w)) == nodes,
            "ask refused while grow runs: '%s', job '%s', %d nodes (%d before)", msg, st.job,
            forest_n_live(ui_worker_forest(w)), nodes);
    ui_worker_unlock(w);
    ui_job cancel = {.kind = UI_JOB_CANCEL};
    ui_worker_post(w, &cancel);
    no = wait_message(w, no, true, msg, sizeof msg);
    ui_worker_lock(w);
    nodes = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    ui_worker_post(w, &ask);
    no = wait_message(w, no, true, msg, sizeof msg);
    while (!strncmp(msg, "ask: ", 5)) no = wait_message(w, no, true, msg, sizeof msg); /* the form, then done */
    int32_t n_turn = 0;
    int32_t *turn = ui_turn_tokens(tk, &(ui_chat){CHAT_NONE, NULL}, "Who is there?", UI_TURN_RAW, false, &n_turn, &err);
    free(turn);
    ui_worker_lock(w);
    int32_t grown = forest_n_live(ui_worker_forest(w)) - nodes - n_turn;
    T_CHECK(!strncmp(msg, "done: +", 7) && strstr(msg, "1 branch") && strstr(msg, "(ask: raw text") && grown >= 1 &&
                grown <= 6 && !ui_worker_busy(w),
            "ask after the cancel: '%s', %d tokens grown", msg, grown);
    ui_worker_unlock(w);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* Posts j and waits until the worker is idle after saying "done..." (or 60 s). */
static void run_to_done(ui_worker *w, ui_job j, char *msg, size_t cap) {
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, cap);
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    do no = wait_message(w, no, true, msg, cap);
    while (strncmp(msg, "done", 4) && strncmp(msg, "nothing", 7) && msg[0]);
}

/* Grows root's branch to the budget; its last node in DFS order (the branch end). */
static forest_id grown_leaf(ui_worker *w, forest_id root, char *msg, size_t cap) {
    forest_id leaf = FOREST_NONE;
    run_to_done(w, ui_job_run(STRAT_GROW, root), msg, cap);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) leaf = forest_id_at(f, i);
    ui_worker_unlock(w);
    return leaf;
}

/* :margins and :merge through the worker start as their run host rows say (run_host.h):
 * margins' notes on the selected branch's chunks, then its answer; merge of two bookmarked
 * branches. */
static void test_worker_hosts(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 1024)) goto out;
    forest_id root, leaf = FOREST_NONE;
    ui_worker *w = greedy_worker(c, tk, 1024, 9, &root);
    if (!w) goto out;
    char msg[1024];
    leaf = grown_leaf(w, root, msg, sizeof msg);
    ui_job jobs[2] = {ui_job_run(STRAT_MARGINS, leaf), ui_job_run(STRAT_MERGE, FOREST_NONE)};
    jobs[0].text = "Who?";
    jobs[0].u.run.chunk = 4;
    const char *want[2] = {"done", "merge needs two or more bookmarked branches"};
    for (int i = 0; i < 2; i++) { /* the last message once the worker is idle again */
        ui_worker_lock(w);
        uint64_t no = ui_worker_message(w, msg, sizeof msg);
        ui_worker_post(w, &jobs[i]);
        ui_worker_unlock(w);
        wait_message(w, no, true, msg, sizeof msg);
        T_CHECK(strstr(msg, want[i]) && (i || strstr(msg, "margins: 3 notes on 4-token chunks, then the answer")),
                "%s through the worker: '%s'", i ? ":merge" : ":margins", msg);
    }
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* `s` with a branch selected after a grow stopped by its budget: the step computes that
 * branch end's next-token choices, so the alternatives pane has "(next)" entries (the grow
 * left its last token pending with no logits wanted). */
static void test_step_fills_next(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 512)) goto out;
    forest_id root, leaf = FOREST_NONE;
    ui_worker *w = greedy_worker(c, tk, 512, 4, &root);
    if (!w) goto out;
    char msg[1024];
    leaf = grown_leaf(w, root, msg, sizeof msg);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    int32_t before = forest_topk(f, leaf, NULL, NULL, 0);
    ui_worker_unlock(w);
    run_to_done(w, ui_job_run(STRAT_STEPS, leaf), msg, sizeof msg);
    ui_worker_lock(w);
    int32_t after = forest_topk(f, leaf, NULL, NULL, 0);
    T_CHECK(before == 0 && after > 0, "the branch end's choices: %d before the step, %d after ('%s')", before, after,
            msg);
    ui_worker_unlock(w);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* Reads a whole file into a malloc'd string (NULL when missing). */
static char *slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(fp);
    return s;
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s ? strstr(s, needle) : NULL; p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* :export FILE.svg draws the forest and the last step's mask; "mask" or "tree" after the
 * name draws one part; before any step the mask alone is refused; other names stay
 * Markdown. */
static void test_export_svg(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 256)) goto out;
    forest *f = forest_init(256, 8);
    int32_t prompt[2] = {tok_bos(tk), 300};
    forest_id leaf;
    forest_add_root(f, prompt, NULL, 2, 0, &leaf, &err);
    sample_params sp = sample_default_params();
    sp.temp = 0;
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = 4, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) {
        forest_free(f);
        goto out;
    }
    char dir[] = "/tmp/md-export-XXXXXX", path[256], msg[1024];
    T_CHECK(mkdtemp(dir) != NULL, "temp dir");
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, sizeof msg);
    ui_worker_unlock(w);
    ui_job ex = {.kind = UI_JOB_EXPORT, .text = path};
    snprintf(path, sizeof path, "%s/early.svg mask", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    T_CHECK(strstr(msg, "no step to draw yet"), "the mask before any step: '%s'", msg);
    ui_job cot = ui_job_run(STRAT_COT, leaf);
    cot.u.run.opts.u.cot.k = 3;
    cot.u.run.opts.budget = 3;
    ui_worker_post(w, &cot);
    no = wait_message(w, no, true, msg, sizeof msg);
    snprintf(path, sizeof path, "%s/both.svg", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    char *svg = slurp(path);
    ui_worker_lock(w);
    int32_t live = forest_n_live(ui_worker_forest(w));
    ui_worker_unlock(w);
    T_CHECK(svg && !strncmp(svg, "<?xml", 5) && strstr(svg, "</svg>") && count_of(svg, "class=\"node\"") == live &&
                count_of(svg, "class=\"on\"") > 0 && strstr(msg, "exported"),
            "%s: %d node boxes for %d nodes, %d mask cells; '%s'", path, count_of(svg, "class=\"node\""), live,
            count_of(svg, "class=\"on\""), msg);
    free(svg);
    snprintf(path, sizeof path, "%s/mask.svg mask", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    snprintf(path, sizeof path, "%s/mask.svg", dir);
    svg = slurp(path);
    T_CHECK(svg && !strstr(svg, "class=\"node\"") && strstr(svg, "class=\"on\""), "the mask alone: '%s'", msg);
    free(svg);
    snprintf(path, sizeof path, "%s/texts.md", dir);
    ui_worker_post(w, &ex);
    no = wait_message(w, no, true, msg, sizeof msg);
    svg = slurp(path);
    T_CHECK(svg && !strstr(svg, "<svg"), "other names stay Markdown");
    free(svg);
    ui_worker_stop(w);
    const char *names[] = {"both.svg", "mask.svg", "texts.md"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* ---- :draft and :lookahead ---- */


/* The forest holds one chain: the prompt then tokens equal to ref[0..n) (n <= n_ref). */
static void check_chain(const forest *f, const int32_t *prompt, int32_t np, const int32_t *ref, int32_t n,
                        const char *what) {
    forest_id leaf[4];
    int32_t nl = forest_leaves(f, leaf, 4), path[512];
    int32_t len = nl == 1 ? forest_path(f, leaf[0], path, 512) : -1;
    T_CHECK(nl == 1 && len == np + n, "%s: one chain of %d + %d tokens (%d leaves, %d tokens)", what, np, n, nl, len);
    int32_t diff = -1;
    for (int32_t i = 0; len == np + n && i < len && diff < 0; i++)
        if (path[i] != (i < np ? prompt[i] : ref[i - np])) diff = i;
    T_CHECK(len == np + n && diff < 0, "%s: equals plain decoding (first difference at %d)", what, diff);
    T_CHECK(forest_n_live(f) == np + n, "%s: the rejected drafts and the window are gone (%d nodes)", what, forest_n_live(f));
    st_err err = {0};
    T_CHECK(!forest_check(f, &err), "%s: forest invariants: %s", what, err.msg);
    const forest_node *last = nl == 1 ? forest_get(f, leaf[0]) : NULL;
    T_CHECK(last && (last->flags & FOREST_FINISHED), "%s: the last node is marked finished", what);
}

/* :draft (w = 0) or :lookahead W N G as the parser builds it, budget TOKENS (0: the
 * worker's). */
static ui_job draft_job(int32_t w, int32_t n, int32_t g, int32_t tokens) {
    ui_job j = ui_job_run(w ? STRAT_LOOKAHEAD : STRAT_DRAFT, FOREST_NONE);
    strategy_opts *o = &j.u.run.opts;
    if (w) o->u.spec.p.la.w = w, o->u.spec.p.la.n = n, o->u.spec.p.la.g = g;
    o->budget = tokens;
    return j;
}

/* Posts job j to a worker over a fresh forest holding the prompt, waits until it is done
 * and checks the chain it left against ref. */
static void worker_run(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np, ui_job j,
                       const sample_params *sp0, const int32_t *ref, int32_t n, const char *what) {
    st_err err = {0};
    forest *f = forest_init(512, 8);
    forest_add_root(f, prompt, NULL, np, 0, &j.node, &err);
    sample_params sp = *sp0; /* :set temp: 0 greedy, else exact speculative sampling */
    ui_worker_params wp = {.ctx = c, .tk = tk, .f = f, .sp = sp, .budget = 32, .model_name = "m", .backend = "cpu"};
    ui_worker *w = ui_worker_start(&wp, &err);
    T_CHECK(w, "%s: worker: %s", what, err.msg);
    if (!w) {
        forest_free(f);
        return;
    }
    char msg[1024] = "";
    uint64_t no0 = ui_worker_message(w, msg, sizeof msg);
    T_CHECK(ui_worker_post(w, &j), "%s: posted", what);
    /* done: idle again after a message (every end of a run says something) */
    double t0 = now_ms();
    for (;;) {
        ui_worker_lock(w);
        bool busy = ui_worker_busy(w);
        uint64_t no = ui_worker_message(w, msg, sizeof msg);
        ui_worker_unlock(w);
        if ((!busy && no != no0 && strncmp(msg, "greedy", 6)) || now_ms() - t0 > 60e3) break;
        usleep(2000);
    }
    T_CHECK(!strncmp(msg, "done (", 6) && strstr(msg, "tokens/step"), "%s: message '%s'", what, msg);
    ui_worker_lock(w);
    check_chain(ui_worker_forest(w), prompt, np, ref, n, what);
    const mask_view *mv = ui_worker_mask(w);
    char buf[256];
    mv_header(mv, buf, sizeof buf, 200, false);
    T_CHECK(mv->spec && (strstr(buf, "drafts accepted") || strstr(buf, "no drafts")),
            "%s: the mask view shows a speculative step: '%s'", what, buf);
    ui_worker_unlock(w);
    ui_worker_stop(w);
}

/* The TUI's observer, as the worker sets it: the step's view for the mask pane. */
typedef struct la_view {
    mask_view *mv;
    const tok *tk;
    int32_t step;
} la_view;

static void la_observe(void *ud, const spec *s, const forest *f, const step_plan *p) {
    la_view *v = ud;
    ui_spec_capture(v->mv, s, f, v->tk, p, v->step);
}

/* One lookahead step captured by the observer: roles and positions of the rows, kept
 * after the window and the rejected drafts are pruned. */
static void check_la_capture(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np) {
    st_err err = {0};
    forest *f = forest_init(512, 0);
    forest_id tip;
    forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
    spec_params sp = ui_spec_params(3, 3, 2);
    T_CHECK(sp.row_cost <= 0 && sp.la.w == 3 && sp.la.n == 3 && sp.la.g == 2, "lookahead params");
    mask_view *mv = malloc(sizeof *mv);
    mv_init(mv);
    la_view lv = {mv, tk, 0};
    strategy_opts o = strategy_default_opts(STRAT_LOOKAHEAD);
    o.from = tip, o.budget = 16, o.u.spec.p = sp, o.u.spec.observe = la_observe, o.u.spec.observe_ud = &lv;
    step_plan p;
    step_plan_init(&p);
    strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
    strategy *u = strategy_create(&o, &env, &err);
    T_CHECK(u, "the lookahead strategy: %s", err.msg);
    int32_t made = 0, steps = 0;
    bool ok = true;
    /* the prefill step, then a few more: each must show the whole window */
    for (; u && ok && steps < 4 && !strategy_done(u); steps++) {
        int32_t tip_pos = forest_get(f, spec_tip(strategy_spec(u)))->depth;
        strategy_progress pr;
        strategy_get_progress(u, &pr);
        lv.step = steps;
        ok = !strategy_step(u, &env, &err);
        if (mv->spec && mv->step == steps) mv_resolve_drafts(mv, f);
        made = pr.done;
        strategy_get_progress(u, &pr);
        made = pr.done - made;
        T_CHECK(ok && made >= 1 && mv->step == steps && mv->spec, "step %d: %s", steps, err.msg);
        mv_mark_pruned(mv, f);
        int32_t n_win = 0, n_tip = 0, bad = 0, live = 0, acc = 0, rej = 0, tip_row = -1;
        char txt[160], role[32];
        for (int32_t r = 0; r < mv->n_rows; r++) {
            const mv_row *row = &mv->rows[r];
            if (row->role == MV_ROLE_WINDOW) {
                n_win++;
                bad += row->pos != tip_pos + row->la_col + row->la_level || row->la_level < 0 ||
                       row->la_level > 1 || row->la_col < 0 || row->la_col > 2 || (row->la_level == 0 && row->la_col == 0);
                live += !row->gone;
                mv_row_text(mv, r, txt, sizeof txt, 80, false);
                snprintf(role, sizeof role, "la %d,%d", row->la_level, row->la_col);
                bad += !strstr(txt, role) || strstr(txt, "pruned") || !row->text[0];
            }
            if (row->role == MV_ROLE_TIP) n_tip++, tip_row = r, bad += row->pos != tip_pos || !row->want;
            acc += row->role == MV_ROLE_ACCEPTED, rej += row->role == MV_ROLE_REJECTED;
            bad += row->role == MV_ROLE_DRAFT || row->role == MV_ROLE_NONE; /* all resolved */
            bad += (row->role == MV_ROLE_ACCEPTED && row->gone && made > acc) || (row->role == MV_ROLE_REJECTED && !row->gone);
        }
        /* W = 3, N = 3: level 0 columns 1..2, level 1 columns 0..2 */
        T_CHECK(n_win == 5 && n_tip == 1 && live == 0 && bad == 0,
                "step %d: %d window rows at tip + i + l (5), 1 tip (%d), all pruned (%d live), %d bad", steps, n_win,
                n_tip, live, bad);
        T_CHECK(acc <= made && acc + 1 >= made, "step %d: %d drafts accepted, %d tokens", steps, acc, made);
        if (steps == 0) T_CHECK(tip_row == np - 1 && mv->rows[0].role == MV_ROLE_OTHER, "the prefill's rows: the prompt, then the tip");
        char hd[256];
        mv_header(mv, hd, sizeof hd, 200, false);
        if (acc + rej > 0) snprintf(txt, sizeof txt, "; %d/%d drafts accepted, 5 window", acc, acc + rej);
        else snprintf(txt, sizeof txt, "; no drafts, 5 window");
        T_CHECK(strstr(hd, txt) && !strstr(hd, "pruned since"), "header '%s'", hd);
        mv_legend(mv, txt, sizeof txt, 80, false);
        T_CHECK(strstr(txt, " role ") && !strstr(txt, "parent"), "legend '%s'", txt);
    }
    step_plan_free(&p);
    free(mv);
    strategy_free(u);
    forest_free(f);
}

/* Plain sampling's first n tokens after the prompt (one grown branch with sp's settings
 * and seed): what :draft at that temperature must give, draw for draw. false, with a
 * skip, when an end of text comes first. */
static bool sampled_ref(model_ctx *c, const tok *tk, const int32_t *prompt, int32_t np, const sample_params *sp,
                        int32_t n, int32_t *ref) {
    st_err err = {0};
    forest *f = forest_init(512, 0);
    step_plan p;
    step_plan_init(&p);
    strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
    strategy_opts o = strategy_default_opts(STRAT_GROW);
    o.sample = *sp, o.budget = n, o.n_vocab = tok_n_vocab(tk);
    forest_add_root(f, prompt, NULL, np, 0, &o.from, &err);
    strategy *s = strategy_create(&o, &env, &err);
    while (s && !strategy_done(s) && !strategy_step(s, &env, &err)) {}
    strategy_result r = {0};
    if (s) strategy_result_at(s, f, 0, &r);
    int32_t path[512], len = r.leaf != FOREST_NONE ? forest_path(f, r.leaf, path, 512) : 0;
    bool ok = np >= 0 && n >= 0 && len == np + n;
    if (ok) memcpy(ref, path + np, sizeof(int32_t) * (size_t)n);
    if (!ok) T_SKIP("sampling ends after %d of %d tokens: the sampled :draft is checked only when it runs %d", len - np, n, n);
    strategy_free(s);
    step_plan_free(&p);
    forest_free(f);
    return ok;
}

static void test_spec_runs(void) {
    st_err err = {0};
    model *m;
    tok *tk;
    model_ctx *c;
    if (!open_stories(&m, &tk, &c, 512)) goto out;
    /* a repetitive prompt, so that prompt lookup's drafts are accepted */
    const char *text = "Once upon a time, there was a little girl named Lily. She loved to play. "
                       "Once upon a time, there was a little girl named Lily. She";
    int32_t np = tok_encode(tk, text, strlen(text), true, false, NULL, 0), prompt[128], ref[64];
    T_CHECK(np > 0 && np <= 128, "prompt of %d tokens", np);
    tok_encode(tk, text, strlen(text), true, false, prompt, np);
    T_CHECK(t_greedy_linear(m, prompt, np, 48, ref), "linear greedy");
    for (int32_t i = 0; i < 48; i++)
        if (tok_is_eog(tk, ref[i])) {
            T_SKIP("greedy decoding ends early: the chains are checked only when it runs 48 tokens");
            goto out;
        }
    sample_params greedy = sample_default_params(), hot = greedy;
    greedy.temp = 0, hot.temp = 0.7f, hot.seed = 3;
    worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 40), &greedy, ref, 40, ":draft 40");
    worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 0), &greedy, ref, 32, ":draft (the budget, 32)");
    worker_run(c, tk, prompt, np, draft_job(3, 3, 2, 48), &greedy, ref, 48,
               ":lookahead 3 3 2 48");
    worker_run(c, tk, prompt, np, draft_job(5, 4, 4, 7), &greedy, ref, 7,
               ":lookahead 5 4 4 7 (a budget inside accepted drafts)");
    /* :set temp 0.7: plain sampling's tokens with the same settings and seed */
    int32_t hot_ref[64];
    if (sampled_ref(c, tk, prompt, np, &hot, 40, hot_ref)) {
        worker_run(c, tk, prompt, np, draft_job(0, 0, 0, 40), &hot, hot_ref, 40, ":draft 40 at temp 0.7");
        worker_run(c, tk, prompt, np, draft_job(3, 3, 2, 40), &hot, hot_ref, 40, ":lookahead 3 3 2 40 at temp 0.7");
    }
    check_la_capture(c, tk, prompt, np);
    /* budgets 1..12 straight through the lookahead strategy: a step that accepts more tokens than
     * are left has the rest pruned again */
    int32_t trimmed = 0;
    for (int32_t budget = 1; budget <= 12; budget++) {
        forest *f = forest_init(512, 0);
        forest_id tip;
        forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
        strategy_opts o = strategy_default_opts(STRAT_LOOKAHEAD);
        o.from = tip, o.budget = budget, o.u.spec.p = ui_spec_params(5, 4, 4);
        step_plan p;
        step_plan_init(&p);
        strategy_env env = {.f = f, .plan = &p, .ctx = c, .tk = tk};
        strategy *u = strategy_create(&o, &env, &err);
        int32_t active = 1, steps = 0;
        st_code rc = u ? ST_OK : err.code;
        while (!rc && active && steps++ < 64) rc = strategy_step(u, &env, &err), active = !strategy_done(u);
        strategy_progress pr = {0};
        if (u) strategy_get_progress(u, &pr);
        T_CHECK(!rc && !active && pr.done == budget, "budget %d: %d tokens: %s", budget, u ? pr.done : -1, err.msg);
        if (u) trimmed += spec_get_stats(strategy_spec(u))->emitted > pr.done;
        char what[32];
        snprintf(what, sizeof what, "budget %d", budget);
        check_chain(f, prompt, np, ref, budget, what);
        step_plan_free(&p);
        strategy_free(u);
        forest_free(f);
    }
    T_CHECK(trimmed > 0, "some budget ended inside a step's accepted tokens (%d)", trimmed);
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
    test_ask_job();
    test_step_fills_next();
    test_worker_hosts();
    test_export_svg();
    test_spec_runs();
    return t_done();
}
