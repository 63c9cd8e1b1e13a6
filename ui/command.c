/* command.c - the command-line parser (command.h): a table of commands with their
 * argument shapes, so the parser, the completion and the help share one list. */
#include "command.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Argument shapes. */
enum { ARG_NONE, ARG_INT01, ARG_INT12, ARG_INT02, ARG_TEXT, ARG_TEXT_OPT, ARG_INT_TEXT, ARG_SET, ARG_BIND, ARG_LA, ARG_INT34 };

static const struct {
    const char *name;
    ui_cmd_kind kind;
    int args;
    const char *usage;
} ui_cmds[] = {
    {"grow", UI_CMD_GROW, ARG_INT01, ":grow [TOKENS]      grow the selected branch"},
    {"cot", UI_CMD_COT, ARG_INT12, ":cot K [TOKENS]      K chains of thought from the selected node"},
    {"beam", UI_CMD_BEAM, ARG_INT12, ":beam WIDTH [TOKENS] beam search from the selected leaf"},
    {"ask", UI_CMD_ASK, ARG_TEXT, ":ask TEXT           TEXT as a chat user turn under the selection, grown"},
    {"margins", UI_CMD_MARGINS, ARG_INT_TEXT, ":margins [CHUNK] QUESTION  notes on each CHUNK tokens of the branch, then an answer"},
    {"draft", UI_CMD_DRAFT, ARG_INT01, ":draft [TOKENS]      exact greedy from the selection, drafts verified in the forest"},
    {"lookahead", UI_CMD_LOOKAHEAD, ARG_LA, ":lookahead W N G [TOKENS]  :draft plus lookahead's W x (N-1) window, G pool drafts"},
    {"append", UI_CMD_APPEND, ARG_TEXT, ":append TEXT        append TEXT under the selection"},
    {"prune", UI_CMD_PRUNE, ARG_NONE, ":prune              prune the selected subtree"},
    {"merge", UI_CMD_MERGE, ARG_NONE, ":merge              merge bookmarked branches"},
    {"judge", UI_CMD_JUDGE, ARG_TEXT_OPT, ":judge [QUESTION]    score the bookmarked branches (else the selection's siblings) in one step"},
    {"tot", UI_CMD_TOT, ARG_INT34, ":tot K B D [TOKENS]  tree of thoughts: K per node, keep B, D levels"},
    {"step", UI_CMD_STEP, ARG_INT01, ":step [N]            run N engine steps"},
    {"save", UI_CMD_SAVE, ARG_TEXT_OPT, ":save [FILE]         save the session (no FILE: the autosave)"},
    {"load", UI_CMD_LOAD, ARG_TEXT_OPT, ":load [FILE]         load a session (no FILE: the last run's); asks first when work is unsaved"},
    {"export", UI_CMD_EXPORT, ARG_TEXT, ":export FILE         the tree's texts as Markdown"},
    {"set", UI_CMD_SET, ARG_SET, ":set [NAME VALUE]    temp top_k top_p min_p seed budget; chat on|off (alone: show them)"},
    {"bind", UI_CMD_BIND, ARG_BIND, ":bind KEY ACTION     bind a key (see the help for names)"},
    {"pause", UI_CMD_PAUSE, ARG_NONE, ":pause               pause or resume the strategy"},
    {"cancel", UI_CMD_CANCEL, ARG_NONE, ":cancel              cancel the strategy"},
    {"help", UI_CMD_HELP, ARG_NONE, ":help                the help screen"},
    {"quit", UI_CMD_QUIT, ARG_NONE, ":quit                autosave and quit"},
};
#define N_CMDS ((int32_t)(sizeof ui_cmds / sizeof ui_cmds[0]))

static const char *const ui_settings[] = {"temp", "top_k", "top_p", "min_p", "seed", "budget", "chat"};

const char *ui_cmd_name(int32_t i) { return i >= 0 && i < N_CMDS ? ui_cmds[i].name : NULL; }
const char *ui_cmd_usage(int32_t i) { return i >= 0 && i < N_CMDS ? ui_cmds[i].usage : NULL; }

bool ui_cmd_is_setting(const char *key) {
    for (size_t i = 0; i < sizeof ui_settings / sizeof ui_settings[0]; i++)
        if (!strcmp(key, ui_settings[i])) return true;
    return false;
}

/* Next whitespace-separated word of *s into out; false at the end. */
static bool next_word(const char **s, char *out, size_t cap) {
    const char *p = *s;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return false;
    size_t n = 0;
    while (*p && !isspace((unsigned char)*p)) {
        if (n + 1 < cap) out[n++] = *p;
        p++;
    }
    out[n] = '\0';
    *s = p;
    return true;
}

static bool parse_int_from(const char *w, long lo, int32_t *out) {
    char *end;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (end == w || *end || errno || v < lo || v > 1000000) return false;
    *out = (int32_t)v;
    return true;
}

static bool parse_int(const char *w, int32_t *out) { return parse_int_from(w, 1, out); }

st_code ui_cmd_parse(const char *line, ui_cmd *c, st_err *err) {
    memset(c, 0, sizeof *c);
    while (isspace((unsigned char)*line)) line++;
    if (!*line) return ST_OK;
    if (*line != ':') { /* plain text: append it */
        c->kind = UI_CMD_APPEND;
        snprintf(c->text, sizeof c->text, "%s", line);
        return ST_OK;
    }
    const char *s = line + 1;
    char name[32], w[1024];
    if (!next_word(&s, name, sizeof name)) return ST_OK;
    int32_t i = 0, hit = -1, n_prefix = 0;
    for (i = 0; i < N_CMDS; i++) {
        if (!strcmp(name, ui_cmds[i].name)) { hit = i; n_prefix = 1; break; }
        if (!strncmp(name, ui_cmds[i].name, strlen(name)) && n_prefix++ == 0) hit = i;
    }
    if (hit < 0) return st_set(err, ST_ERR_ARG, "unknown command ':%s' (:help lists them)", name);
    if (n_prefix > 1) return st_set(err, ST_ERR_ARG, "ambiguous command ':%s'", name);
    c->kind = ui_cmds[hit].kind;
    const char *usage = ui_cmds[hit].usage;
    int32_t *ints[4] = {&c->a, &c->b, &c->c, &c->d};
    int args = ui_cmds[hit].args;
    switch (args) {
    case ARG_NONE:
        if (next_word(&s, w, sizeof w)) goto bad;
        break;
    case ARG_INT01: case ARG_INT12: case ARG_INT02: case ARG_INT34: {
        int lo = args == ARG_INT34 ? 3 : args == ARG_INT12, hi = args == ARG_INT34 ? 4 : args == ARG_INT01 ? 1 : 2, n = 0;
        while (next_word(&s, w, sizeof w)) {
            if (n == hi || !parse_int(w, ints[n])) goto bad;
            n++;
        }
        if (n < lo) goto bad;
        break;
    }
    case ARG_TEXT: case ARG_TEXT_OPT: {
        while (isspace((unsigned char)*s)) s++;
        if (!*s && args == ARG_TEXT) goto bad;
        /* a file name's leading ~/ is the home folder, as in a shell */
        bool file = c->kind == UI_CMD_SAVE || c->kind == UI_CMD_LOAD || c->kind == UI_CMD_EXPORT;
        const char *home = getenv("HOME");
        if (file && !strncmp(s, "~/", 2) && home && *home) {
            if (snprintf(c->text, sizeof c->text, "%s%s", home, s + 1) >= (int)sizeof c->text)
                return st_set(err, ST_ERR_ARG, "file name too long");
        } else
            snprintf(c->text, sizeof c->text, "%s", s);
        break;
    }
    case ARG_INT_TEXT: { /* an optional number, then text: ":margins 64 Who?" */
        const char *at = s;
        if (next_word(&s, w, sizeof w) && !parse_int(w, &c->a)) s = at;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) goto bad;
        snprintf(c->text, sizeof c->text, "%s", s);
        break;
    }
    case ARG_SET: {
        char *end;
        if (!next_word(&s, c->key, sizeof c->key)) break; /* :set alone shows the settings */
        if (!next_word(&s, w, sizeof w)) goto bad;
        if (!ui_cmd_is_setting(c->key))
            return st_set(err, ST_ERR_ARG, "unknown setting '%s' (temp top_k top_p min_p seed budget chat)", c->key);
        if (!strcmp(c->key, "chat")) { /* on: typed text becomes a user turn; off: raw text */
            if (strcmp(w, "on") && strcmp(w, "off")) return st_set(err, ST_ERR_ARG, "usage: :set chat on|off");
            c->val = !strcmp(w, "on");
        } else {
            c->val = strtod(w, &end);
            if (end == w || *end || c->val != c->val) goto bad;
        }
        if (next_word(&s, w, sizeof w)) goto bad;
        break;
    }
    case ARG_LA: { /* W N G [TOKENS]: G may be 0 (the window only feeds the pool) */
        int n = 0;
        while (next_word(&s, w, sizeof w)) {
            if (n == 4 || !parse_int_from(w, n == 2 ? 0 : 1, ints[n])) goto bad;
            n++;
        }
        if (n < 3) goto bad;
        if (c->b < 2 || c->b > 16 || c->c > 1024 || (int64_t)c->a * c->b > 4096) {
            c->kind = UI_CMD_NONE;
            return st_set(err, ST_ERR_ARG, "lookahead: want W >= 1, 2 <= N <= 16, 0 <= G <= 1024 and "
                          "W x N <= 4096 (e.g. :lookahead 5 4 4)");
        }
        break;
    }
    case ARG_BIND:
        if (!next_word(&s, c->key, sizeof c->key) || !next_word(&s, c->text, sizeof c->text)) goto bad;
        if (next_word(&s, w, sizeof w)) goto bad;
        break;
    }
    return ST_OK;
bad:
    c->kind = UI_CMD_NONE;
    {
        const char *gap = strstr(usage, "  "); /* the usage form ends where its help starts */
        int n = gap ? (int)(gap - usage) : (int)strlen(usage);
        return st_set(err, ST_ERR_ARG, "usage: %.*s", n, usage);
    }
}
