/* command.c - the command-line parser (command.h): a table of commands with their
 * argument shapes, so the parser, the completion and the help share one list. */
#include "command.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forest/sample.h"

/* Argument shapes. */
enum { ARG_NONE, ARG_INT01, ARG_INT12, ARG_INT02, ARG_TEXT, ARG_TEXT_OPT, ARG_INT_TEXT, ARG_SET, ARG_BIND, ARG_LA, ARG_TOT, ARG_INT11, ARG_SORT };

/* Each command: its name, its argument shape, the job it posts (UI_JOB_RUN: the strategy
 * of that name, strategy_find) and its usage line. */
static const struct {
    const char *name;
    ui_cmd_kind kind;
    int args;
    ui_job_kind job;
    const char *usage;
} ui_cmds[] = {
    {"grow", UI_CMD_GROW, ARG_INT01, UI_JOB_RUN, ":grow [TOKENS]      grow the selected branch"},
    {"cot", UI_CMD_COT, ARG_INT12, UI_JOB_RUN, ":cot K [TOKENS]      K chains of thought from the selected node"},
    {"beam", UI_CMD_BEAM, ARG_INT12, UI_JOB_RUN, ":beam WIDTH [TOKENS] beam search from the selected leaf"},
    {"ask", UI_CMD_ASK, ARG_TEXT, UI_JOB_RUN, ":ask TEXT           TEXT as a chat user turn under the selection, grown"},
    {"margins", UI_CMD_MARGINS, ARG_INT_TEXT, UI_JOB_RUN, ":margins [CHUNK] QUESTION  notes on each CHUNK tokens of the branch, then an answer"},
    {"draft", UI_CMD_DRAFT, ARG_INT01, UI_JOB_RUN, ":draft [TOKENS]      exact decoding from the selection (greedy, or sampling at :set temp), drafts verified in the forest"},
    {"lookahead", UI_CMD_LOOKAHEAD, ARG_LA, UI_JOB_RUN, ":lookahead W N G [TOKENS]  :draft plus lookahead's W x (N-1) window, G pool drafts"},
    {"append", UI_CMD_APPEND, ARG_TEXT, UI_JOB_APPEND, ":append TEXT        append TEXT under the selection"},
    {"prune", UI_CMD_PRUNE, ARG_NONE, UI_JOB_PRUNE, ":prune              prune the selected subtree"},
    {"merge", UI_CMD_MERGE, ARG_NONE, UI_JOB_RUN, ":merge              merge bookmarked branches"},
    {"judge", UI_CMD_JUDGE, ARG_TEXT_OPT, UI_JOB_RUN, ":judge [QUESTION]    score the bookmarked branches (else the selection's siblings) in one step"},
    {"tot", UI_CMD_TOT, ARG_TOT, UI_JOB_RUN, ":tot K B D [TOKENS] [dfs [MIN]]  tree of thoughts: K per node, keep B, D levels; dfs: depth-first, pruning scores below MIN"},
    {"keep", UI_CMD_KEEP, ARG_INT11, UI_JOB_KEEP, ":keep N              keep the N best scored leaves below the selection, prune the other scored ones"},
    {"name", UI_CMD_NAME, ARG_TEXT_OPT, UI_JOB_NAME, ":name [TEXT]         name the selected branch (drawn on its line, saved with it; alone: clear it)"},
    {"sort", UI_CMD_SORT, ARG_SORT, UI_JOB_NONE, ":sort score|prob|made  order siblings by best score below, by probability, or as made"},
    {"step", UI_CMD_STEP, ARG_INT01, UI_JOB_RUN, ":step [N]            run N engine steps (paused :tot: N levels)"},
    {"save", UI_CMD_SAVE, ARG_TEXT_OPT, UI_JOB_NONE, ":save [FILE]         save the session (no FILE: the autosave)"},
    {"load", UI_CMD_LOAD, ARG_TEXT_OPT, UI_JOB_NONE, ":load[!] [FILE]      load a session (no FILE: the last run's); asks first when work is unsaved; ! even one saved with another model"},
    {"compact", UI_CMD_COMPACT, ARG_NONE, UI_JOB_COMPACT, ":compact            move the KV cache's used slots together (after many prunes)"},
    {"export", UI_CMD_EXPORT, ARG_TEXT, UI_JOB_EXPORT, ":export FILE         the tree's texts as Markdown; FILE.svg [tree|mask]: a picture of the tree and the last step's mask"},
    {"set", UI_CMD_SET, ARG_SET, UI_JOB_NONE, ":set [NAME VALUE]    temp top_k top_p min_p seed budget; chat on|off; layer L, head H (-1: none, mean): the mask's weights (alone: show them)"},
    {"bind", UI_CMD_BIND, ARG_BIND, UI_JOB_NONE, ":bind KEY ACTION     bind a key (see the help for names)"},
    {"pause", UI_CMD_PAUSE, ARG_NONE, UI_JOB_PAUSE, ":pause               pause or resume the strategy"},
    {"cancel", UI_CMD_CANCEL, ARG_NONE, UI_JOB_CANCEL, ":cancel              cancel the strategy"},
    {"help", UI_CMD_HELP, ARG_NONE, UI_JOB_NONE, ":help                the help screen"},
    {"tour", UI_CMD_TOUR, ARG_TEXT_OPT, UI_JOB_NONE, ":tour [PROMPT]       a guided tour: a small forest built step by step, each screen explained"},
    {"quit", UI_CMD_QUIT, ARG_NONE, UI_JOB_NONE, ":quit                autosave and quit"},
};
#define N_CMDS ((int32_t)(sizeof ui_cmds / sizeof ui_cmds[0]))

static const char *const ui_settings[] = {"temp", "top_k", "top_p", "min_p", "seed", "budget", "chat",
                                          "layer", "head"};

/* After the table: the registered strategies that bring their own `:` grammar (a usage),
 * the (i - N_CMDS)-th of them; NULL past the last. */
static const strategy_ops *strategy_cmd(int32_t i) {
    const strategy_ops *ops;
    for (int32_t k = 0; (ops = strategy_at(k)); k++)
        if (ops->usage && i-- == N_CMDS) return ops;
    return NULL;
}

const char *ui_cmd_name(int32_t i) {
    const strategy_ops *ops = i >= N_CMDS ? strategy_cmd(i) : NULL;
    return i >= 0 && i < N_CMDS ? ui_cmds[i].name : ops ? ops->name : NULL;
}

const char *ui_cmd_usage(int32_t i) {
    const strategy_ops *ops = i >= N_CMDS ? strategy_cmd(i) : NULL;
    return i >= 0 && i < N_CMDS ? ui_cmds[i].usage : ops ? ops->usage : NULL;
}

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

/* The command a (possibly shortened) name names: its index, or -1 + err. */
static int32_t find_cmd(const char *name, st_err *err) {
    int32_t hit = -1, n_prefix = 0;
    const char *cmd;
    for (int32_t i = 0; (cmd = ui_cmd_name(i)); i++) {
        if (!strcmp(name, cmd)) return i;
        if (!strncmp(name, cmd, strlen(name)) && n_prefix++ == 0) hit = i;
    }
    if (hit < 0) st_set(err, ST_ERR_ARG, "unknown command ':%s' (:help lists them)", name);
    else if (n_prefix > 1) st_set(err, ST_ERR_ARG, "ambiguous command ':%s'", name);
    return n_prefix > 1 ? -1 : hit;
}

/* The numbers a command took (0: not given), into its job's options. */
static void put_numbers(ui_cmd *c, const int32_t *v) {
    strategy_opts *o = &c->job.u.run.opts;
    switch (c->kind) {
    case UI_CMD_GROW: case UI_CMD_DRAFT: o->budget = v[0]; break;
    case UI_CMD_COT: o->u.cot.k = v[0], o->budget = v[1]; break;
    case UI_CMD_BEAM: o->u.beam.width = v[0], o->budget = v[1]; break;
    case UI_CMD_TOT: o->u.tot.k = v[0], o->u.tot.b = v[1], o->u.tot.d = v[2], o->budget = v[3]; break;
    case UI_CMD_KEEP: c->job.u.keep.n = v[0]; break;
    case UI_CMD_STEP: o->u.steps.n = v[0] > 0 ? v[0] : 1; break;
    case UI_CMD_MARGINS: c->job.u.run.chunk = v[0]; break;
    case UI_CMD_LOOKAHEAD:
        o->u.spec.p.la.w = v[0], o->u.spec.p.la.n = v[1], o->u.spec.p.la.g = v[2], o->budget = v[3];
        break;
    default: break;
    }
}

/* Text to the end of the line into c->text; a file name's leading ~/ is the home folder,
 * as in a shell. */
static st_code put_text(ui_cmd *c, const char *s, st_err *err) {
    bool file = c->kind == UI_CMD_SAVE || c->kind == UI_CMD_LOAD || c->kind == UI_CMD_EXPORT;
    const char *home = getenv("HOME");
    if (file && !strncmp(s, "~/", 2) && home && *home) {
        if (snprintf(c->text, sizeof c->text, "%s%s", home, s + 1) >= (int)sizeof c->text)
            return st_set(err, ST_ERR_ARG, "file name too long");
    } else
        snprintf(c->text, sizeof c->text, "%s", s);
    return ST_OK;
}

/* :set NAME VALUE: false for a malformed line; an unknown name or a bad chat value is an
 * error of its own (*rc). */
static bool parse_set(const char *s, ui_cmd *c, st_code *rc, st_err *err) {
    char w[1024], *end;
    if (!next_word(&s, c->key, sizeof c->key)) return true; /* :set alone shows the settings */
    if (!next_word(&s, w, sizeof w)) return false;
    if (!ui_cmd_is_setting(c->key)) {
        *rc = st_set(err, ST_ERR_ARG, "unknown setting '%s' (temp top_k top_p min_p seed budget chat layer head)", c->key);
        return true;
    }
    if (!strcmp(c->key, "chat")) { /* on: typed text becomes a user turn; off: raw text */
        if (strcmp(w, "on") && strcmp(w, "off")) {
            *rc = st_set(err, ST_ERR_ARG, "usage: :set chat on|off");
            return true;
        }
        c->val = !strcmp(w, "on");
    } else {
        c->val = strtod(w, &end);
        if (end == w || *end || c->val != c->val) return false;
        sample_params scratch = sample_default_params(); /* the sampler's own check */
        if (sample_param_set(&scratch, c->key, c->val, err) == ST_ERR_ARG) {
            *rc = ST_ERR_ARG;
            return true;
        }
    }
    return !next_word(&s, w, sizeof w);
}

/* The arguments s of a command of shape args into c: false for a malformed line; *rc gets
 * the errors with a message of their own. */
static bool parse_args(const char *s, int args, ui_cmd *c, st_code *rc, st_err *err) {
    char w[1024];
    int32_t v[4] = {0};
    int n = 0;
    switch (args) {
    case ARG_NONE:
        return !next_word(&s, w, sizeof w);
    case ARG_INT01: case ARG_INT11: case ARG_INT12: case ARG_INT02: {
        int lo = args == ARG_INT12 || args == ARG_INT11, hi = args == ARG_INT01 || args == ARG_INT11 ? 1 : 2;
        for (; next_word(&s, w, sizeof w); n++)
            if (n == hi || !parse_int(w, &v[n])) return false;
        put_numbers(c, v);
        return n >= lo;
    }
    case ARG_TEXT: case ARG_TEXT_OPT:
        while (isspace((unsigned char)*s)) s++;
        if (!*s && args == ARG_TEXT) return false;
        *rc = put_text(c, s, err);
        return true;
    case ARG_INT_TEXT: { /* an optional number, then text: ":margins 64 Who?" */
        const char *at = s;
        if (next_word(&s, w, sizeof w) && !parse_int(w, &v[0])) s = at;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) return false;
        put_numbers(c, v);
        snprintf(c->text, sizeof c->text, "%s", s);
        return true;
    }
    case ARG_TOT: { /* K B D [TOKENS] [bfs|dfs [THRESHOLD]] */
        bool more;
        while ((more = next_word(&s, w, sizeof w)) && n < 4 && parse_int(w, &v[n])) n++;
        put_numbers(c, v);
        strategy_opts *o = &c->job.u.run.opts;
        if (n < 3 || (more && strcmp(w, "dfs") && strcmp(w, "bfs"))) return false;
        o->u.tot.dfs = more && !strcmp(w, "dfs");
        if (!more || !next_word(&s, w, sizeof w)) return true;
        char *end;
        o->u.tot.threshold = strtod(w, &end);
        return o->u.tot.dfs && end != w && !*end && o->u.tot.threshold == o->u.tot.threshold &&
               !next_word(&s, w, sizeof w);
    }
    case ARG_SET:
        return parse_set(s, c, rc, err);
    case ARG_SORT: { /* the order's name, as ui_sort counts them */
        static const char *const orders[] = {"made", "score", "prob"};
        if (!next_word(&s, w, sizeof w)) return false;
        for (int i = 0; i < 3; i++)
            if (!strcmp(w, orders[i])) return c->val = i, !next_word(&s, w, sizeof w);
        return false;
    }
    case ARG_LA: /* W N G [TOKENS]: G may be 0 (the window only feeds the pool) */
        for (; next_word(&s, w, sizeof w); n++)
            if (n == 4 || !parse_int_from(w, n == 2 ? 0 : 1, &v[n])) return false;
        if (n < 3) return false;
        if (v[1] < 2 || v[1] > 16 || v[2] > 1024 || (int64_t)v[0] * v[1] > 4096)
            *rc = st_set(err, ST_ERR_ARG, "lookahead: want W >= 1, 2 <= N <= 16, 0 <= G <= 1024 and "
                         "W x N <= 4096 (e.g. :lookahead 5 4 4)");
        put_numbers(c, v);
        return true;
    case ARG_BIND:
        return next_word(&s, c->key, sizeof c->key) && next_word(&s, c->text, sizeof c->text) &&
               !next_word(&s, w, sizeof w);
    }
    return true;
}

/* :NAME ARGS of a strategy with its own grammar: a job running it at the selection, its
 * options from its defaults and ARGS; the budget the `budget` setting unless ARGS give it. */
static st_code parse_strategy(const strategy_ops *ops, const char *args, ui_cmd *c, st_err *err) {
    c->kind = UI_CMD_RUN;
    c->job = (ui_job){.kind = UI_JOB_RUN, .node = FOREST_NONE};
    strategy_opts *o = &c->job.u.run.opts;
    *o = strategy_opts_for(ops);
    o->budget = 0;
    st_code rc = strategy_args_parse(o, args, err);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

st_code ui_cmd_parse(const char *line, ui_cmd *c, st_err *err) {
    memset(c, 0, sizeof *c);
    while (isspace((unsigned char)*line)) line++;
    if (!*line) return ST_OK;
    if (*line != ':') { /* plain text: append it */
        c->kind = UI_CMD_APPEND;
        c->job.kind = UI_JOB_APPEND;
        snprintf(c->text, sizeof c->text, "%s", line);
        return ST_OK;
    }
    const char *s = line + 1;
    char name[32];
    if (!next_word(&s, name, sizeof name)) return ST_OK;
    size_t nn = strlen(name);
    bool bang = nn > 1 && name[nn - 1] == '!';
    if (bang) name[nn - 1] = '\0';
    int32_t hit = find_cmd(name, err);
    if (hit < 0) return err->code;
    if (hit >= N_CMDS && !bang) return parse_strategy(strategy_cmd(hit), s, c, err);
    if (bang && (hit >= N_CMDS || ui_cmds[hit].kind != UI_CMD_LOAD))
        return st_set(err, ST_ERR_ARG, "':%s!': only :load! takes a '!' (to load a session saved with another model)", ui_cmds[hit].name);
    c->force = bang;
    c->kind = ui_cmds[hit].kind;
    if (ui_cmds[hit].job == UI_JOB_RUN) c->job = ui_job_of(strategy_find(ui_cmds[hit].name), FOREST_NONE);
    else c->job.kind = ui_cmds[hit].job;
    st_code rc = ST_OK;
    if (parse_args(s, ui_cmds[hit].args, c, &rc, err) && !rc) return ST_OK;
    memset(c, 0, sizeof *c); /* kind UI_CMD_NONE, no job */
    if (rc) return rc;
    const char *usage = ui_cmds[hit].usage;
    const char *gap = strstr(usage, "  "); /* the usage form ends where its help starts */
    int n = gap ? (int)(gap - usage) : (int)strlen(usage);
    return st_set(err, ST_ERR_ARG, "usage: %.*s", n, usage);
}
