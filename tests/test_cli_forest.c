/* test_cli_forest.c - the forest commands as a user runs them: `plan` (packed order and
 * masks, read back from --json), `generate --branches` (every branch equals the linear
 * `generate` with its seed, greedy and sampled), `ask` (answers equal asking each question
 * alone; the shared context saves KV slots), `bench forest` / `bench ask` (valid JSON,
 * exact KV counts, the same tokens three ways; with --repeat, the per-repeat, median and
 * best-of ratios), `bench attention` (its K and V byte counts, the same bits both ways),
 * the draft commands (`generate --draft` and
 * `--lookahead` print greedy's text, `plan --lookahead` places the window, `bench spec`
 * runs equal plain greedy) and bad inputs (exit 1, a clear message).
 * Runs $BUILD/multidecode (BUILD defaults to "build") on stories260K; skips without it. */
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "gguf/gguf.h"
#include "tok/tok.h"
#include "t.h"
#include "t_run.h"

/* ---- a small JSON reader: enough to walk the commands' output ---- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
    int type;
    double num;        /* J_NUM, J_BOOL (0/1) */
    char *str;         /* J_STR */
    struct jv *items;  /* J_ARR, J_OBJ values */
    char **keys;       /* J_OBJ */
    int n;
} jv;

static void j_ws(const char **p) {
    while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
}

static bool j_parse(const char **p, jv *v);

static bool j_string(const char **p, char **out) {
    if (**p != '"') return false;
    (*p)++;
    size_t cap = 64, n = 0;
    char *s = malloc(cap);
    while (**p && **p != '"') {
        if (n + 8 > cap) s = realloc(s, cap *= 2);
        char c = *(*p)++;
        if ((unsigned char)c < 0x20) { free(s); return false; } /* raw control: invalid */
        if (c != '\\') { s[n++] = c; continue; }
        c = *(*p)++;
        switch (c) {
        case 'n': s[n++] = '\n'; break;
        case 't': s[n++] = '\t'; break;
        case 'r': s[n++] = '\r'; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case '"': case '\\': case '/': s[n++] = c; break;
        case 'u': {
            unsigned u = 0;
            for (int i = 0; i < 4; i++) {
                char h = *(*p)++;
                u = u * 16 + (unsigned)(h >= 'a' ? h - 'a' + 10 : h >= 'A' ? h - 'A' + 10 : h - '0');
            }
            if (u < 0x80) s[n++] = (char)u;
            else if (u < 0x800) { s[n++] = (char)(0xC0 | u >> 6); s[n++] = (char)(0x80 | (u & 63)); }
            else { s[n++] = (char)(0xE0 | u >> 12); s[n++] = (char)(0x80 | ((u >> 6) & 63));
                   s[n++] = (char)(0x80 | (u & 63)); }
            break;
        }
        default: free(s); return false;
        }
    }
    if (**p != '"') { free(s); return false; }
    (*p)++;
    s[n] = '\0';
    *out = s;
    return true;
}

static bool j_list(const char **p, jv *v, char close, bool obj) {
    (*p)++;
    int cap = 8;
    v->items = malloc(sizeof(jv) * (size_t)cap);
    v->keys = obj ? malloc(sizeof(char *) * (size_t)cap) : NULL;
    j_ws(p);
    if (**p == close) { (*p)++; return true; }
    for (;;) {
        if (v->n == cap) {
            cap *= 2;
            v->items = realloc(v->items, sizeof(jv) * (size_t)cap);
            if (obj) v->keys = realloc(v->keys, sizeof(char *) * (size_t)cap);
        }
        j_ws(p);
        if (obj) {
            if (!j_string(p, &v->keys[v->n])) return false;
            j_ws(p);
            if (*(*p)++ != ':') return false;
        }
        if (!j_parse(p, &v->items[v->n])) return false;
        v->n++;
        j_ws(p);
        if (**p == ',') { (*p)++; continue; }
        if (**p == close) { (*p)++; return true; }
        return false;
    }
}

static bool j_parse(const char **p, jv *v) {
    memset(v, 0, sizeof *v);
    j_ws(p);
    if (**p == '{') { v->type = J_OBJ; return j_list(p, v, '}', true); }
    if (**p == '[') { v->type = J_ARR; return j_list(p, v, ']', false); }
    if (**p == '"') { v->type = J_STR; return j_string(p, &v->str); }
    if (!strncmp(*p, "true", 4)) { v->type = J_BOOL; v->num = 1; *p += 4; return true; }
    if (!strncmp(*p, "false", 5)) { v->type = J_BOOL; *p += 5; return true; }
    if (!strncmp(*p, "null", 4)) { *p += 4; return true; }
    char *end;
    v->num = strtod(*p, &end);
    if (end == *p) return false;
    v->type = J_NUM;
    *p = end;
    return true;
}

static void j_free_in(jv *v) {
    for (int i = 0; i < v->n; i++) {
        j_free_in(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

/* Frees a value from j_read; NULL is a no-op. */
static void j_free(jv *v) {
    if (!v) return;
    j_free_in(v);
    free(v);
}

/* Parses a whole text; NULL when it is not one valid JSON value (a value that failed
 * half-way may leak: the test has failed then anyway). */
static jv *j_read(const char *text) {
    if (!text) return NULL;
    jv *v = malloc(sizeof *v);
    const char *p = text;
    bool ok = j_parse(&p, v);
    j_ws(&p);
    if (ok && !*p) return v;
    if (ok) j_free(v);
    else free(v);
    return NULL;
}

static const jv j_none = {0};
static const jv *jkey(const jv *o, const char *key) {
    if (o && o->type == J_OBJ)
        for (int i = 0; i < o->n; i++)
            if (!strcmp(o->keys[i], key)) return &o->items[i];
    return &j_none;
}
static const jv *jat(const jv *a, int i) {
    return a && a->type == J_ARR && i >= 0 && i < a->n ? &a->items[i] : &j_none;
}
static int jnum(const jv *v) { return (int)v->num; }
static int jlen(const jv *v) { return v->type == J_ARR ? v->n : -1; }

/* ---- running the program ---- */

static char bin[512];
static char model_path[4096];

static int32_t n_tokens(const char *text) {
    st_err err = {0};
    gguf_ctx *g = gguf_open(model_path, &err);
    tok *tk = g ? tok_from_gguf(g, &err) : NULL;
    int32_t n = tk ? tok_encode(tk, text, strlen(text), tok_add_bos(tk), false, NULL, 0) : -1;
    tok_free(tk);
    gguf_close(g);
    return n;
}

/* Does the mask list of a row hold exactly the given slots (in any order)? */
static bool mask_is(const jv *row_mask, const int *slots, int n) {
    if (jlen(row_mask) != n) return false;
    for (int i = 0; i < n; i++) {
        bool found = false;
        for (int j = 0; j < n; j++) found = found || jnum(jat(row_mask, j)) == slots[i];
        if (!found) return false;
    }
    return true;
}

/* ---- plan ---- */

static void test_plan(void) {
    const char *prompt = "Once upon a time";
    int32_t P = n_tokens(prompt), st;
    T_CHECK(P > 2, "tokenising the prompt gives %d tokens", P);
    char *out = t_runf(&st, "%s plan -m %s -p '%s' --branches 2 --steps 3 --seed 5 --json", bin,
                     model_path, prompt);
    jv *j = j_read(out);
    T_CHECK(st == 0 && j, "plan --json: exit %d, valid JSON: %s", st, j ? "yes" : out);
    if (!j) {
        free(out);
        return;
    }
    const jv *steps = jkey(j, "steps");
    T_CHECK(jlen(steps) == 3, "3 steps, got %d", jlen(steps));
    /* step 0: the prompt, P rows, lower-triangular mask, logits on the last row only */
    const jv *rows = jkey(jat(steps, 0), "rows"), *mask = jkey(jat(steps, 0), "mask");
    T_CHECK(jlen(rows) == P && jlen(mask) == P, "step 0 has %d rows and %d mask rows, want %d",
            jlen(rows), jlen(mask), P);
    int slots[64], n_ok = 0;
    for (int r = 0; r < P && r < 64 && jlen(rows) == P; r++) {
        const jv *row = jat(rows, r);
        slots[r] = jnum(jkey(row, "slot"));
        bool ok = jnum(jkey(row, "pos")) == r &&
                  jnum(jkey(row, "parent")) == (r ? jnum(jkey(jat(rows, r - 1), "id")) : -1) &&
                  jnum(jkey(row, "logits")) == (r == P - 1) && mask_is(jat(mask, r), slots, r + 1) &&
                  jkey(row, "text")->type == J_STR;
        n_ok += ok;
    }
    T_CHECK(n_ok == P, "step 0: %d of %d rows have pos = row, parent = previous row, the "
            "lower-triangular mask and logits only on the last", n_ok, P);
    /* steps 1 and 2: two branches, each sees the prompt and its own chain, not its sibling */
    int own[2][2] = {{-1, -1}, {-1, -1}}, last_id[2] = {-1, -1};
    int prompt_last = jlen(rows) == P ? jnum(jkey(jat(rows, P - 1), "id")) : -2;
    for (int s = 1; s <= 2; s++) {
        rows = jkey(jat(steps, s), "rows");
        mask = jkey(jat(steps, s), "mask");
        T_CHECK(jlen(rows) == 2 && jlen(mask) == 2, "step %d: %d rows, want 2", s, jlen(rows));
        if (jlen(rows) != 2 || jlen(mask) != 2) continue;
        for (int b = 0; b < 2; b++) own[b][s - 1] = jnum(jkey(jat(rows, b), "slot"));
        for (int b = 0; b < 2; b++) {
            const jv *row = jat(rows, b);
            int want_parent = s == 1 ? prompt_last : last_id[b];
            T_CHECK(jnum(jkey(row, "pos")) == P + s - 1, "step %d row %d: pos %d, want %d (its depth)",
                    s, b, jnum(jkey(row, "pos")), P + s - 1);
            T_CHECK(jnum(jkey(row, "parent")) == want_parent, "step %d row %d: parent %d, want %d", s,
                    b, jnum(jkey(row, "parent")), want_parent);
            int vis[80], nv = 0;
            for (int r = 0; r < P && r < 64; r++) vis[nv++] = slots[r];
            for (int k = 0; k < s; k++) vis[nv++] = own[b][k];
            T_CHECK(mask_is(jat(mask, b), vis, nv), "step %d row %d: sees the prompt and its own "
                    "branch only (%d slots), got %d slots", s, b, nv, jlen(jat(mask, b)));
            for (int k = 0; k < s; k++)
                for (int m = 0; m < jlen(jat(mask, b)); m++)
                    T_CHECK(jnum(jat(jat(mask, b), m)) != own[1 - b][k], "step %d: branch %d sees its "
                            "sibling's slot %d", s, b, own[1 - b][k]);
        }
        for (int b = 0; b < 2; b++) last_id[b] = jnum(jkey(jat(rows, b), "id"));
    }
    T_CHECK(jnum(jkey(j, "kv_slots_used")) == P + 4, "KV slots used %d, want prompt %d + 2 x 2",
            jnum(jkey(j, "kv_slots_used")), P);
    j_free(j);
    free(out);

    /* a shared context: the second prompt sees the context but not the first prompt */
    out = t_runf(&st, "%s plan -m %s --context 'Lily had a dog.' -p ' The dog' -p ' She' -k 1 -s 1 "
               "--json", bin, model_path);
    j = j_read(out);
    T_CHECK(st == 0 && j, "plan --context --json: exit %d", st);
    int32_t C = n_tokens("Lily had a dog.");
    rows = jkey(jat(jkey(j, "steps"), 0), "rows");
    mask = jkey(jat(jkey(j, "steps"), 0), "mask");
    int n = jlen(rows);
    T_CHECK(n > C + 2, "the prefill packs the context and both prompts (%d rows)", n);
    if (n > C + 2 && n < 64) {
        const jv *last = jat(rows, n - 1); /* the second prompt's last token */
        int vis[64], nv = 0;
        for (int r = 0; r < C; r++) vis[nv++] = jnum(jkey(jat(rows, r), "slot"));
        int first2 = n - 1;
        while (first2 > C && jnum(jkey(jat(rows, first2), "parent")) != jnum(jkey(jat(rows, C - 1), "id")))
            first2--;
        for (int r = first2; r < n; r++) vis[nv++] = jnum(jkey(jat(rows, r), "slot"));
        T_CHECK(first2 > C && mask_is(jat(mask, n - 1), vis, nv), "the second prompt's last row "
                "sees the context and its own tokens only (%d slots), got %d", nv,
                jlen(jat(mask, n - 1)));
        T_CHECK(jnum(jkey(last, "pos")) == C + (n - first2) - 1, "its position is its depth");
    }
    j_free(j);
    free(out);

    out = t_runf(&st, "%s plan -m %s -p '%s' -k 3 -s 2 2>&1", bin, model_path, prompt);
    T_CHECK(st == 0 && strstr(out, "mask:") && strstr(out, "#####") && strstr(out, "row 2"),
            "plan prints the mask grid: exit %d\n%s", st, out);
    free(out);
}

/* plan on a random Qwen3.5: each step says how many recurrent states the forest holds
 * (the prompt's leaf, then one a branch) and their size, in text and JSON. */
static void test_plan_recurrent(void) {
    char path[] = "/tmp/md_q35_XXXXXX";
    int fd = mkstemp(path), st;
    if (fd >= 0) close(fd);
    char *out = t_runf(&st, "%s mkmodel --arch qwen35 --layers 4 %s 2>&1", bin, path);
    T_CHECK(fd >= 0 && st == 0, "mkmodel --arch qwen35: exit %d\n%s", st, out);
    free(out);
    out = t_runf(&st, "%s plan -m %s -k 3 -s 3 --json", bin, path);
    jv *j = j_read(out);
    const jv *steps = jkey(j, "steps");
    T_CHECK(st == 0 && jlen(steps) == 3 && jnum(jkey(jat(steps, 0), "rstate_cells")) == 1 &&
                jnum(jkey(jat(steps, 2), "rstate_cells")) == 3 &&
                jnum(jkey(jat(steps, 2), "rstate_bytes_each")) == 3 * ((4 - 1) * 8 * 16 + 4 * 16 * 16) * 4,
            "plan --json on qwen35: 1 then 3 states held, their bytes: exit %d\n%s", st, out);
    j_free(j);
    free(out);
    out = t_runf(&st, "%s plan -m %s -k 3 -s 2 2>&1", bin, path);
    T_CHECK(st == 0 && strstr(out, "3 of every 4 layers are Gated DeltaNet") &&
                strstr(out, "3 states of 16.5 KiB held"), "plan's text on qwen35: exit %d\n%s", st, out);
    free(out);
    unlink(path);
}

/* ---- generate --branches ---- */

static void test_generate_branches(void) {
    const char *prompt = "Once upon a time";
    int st;
    char *lin = t_runf(&st, "%s generate -m %s -p '%s' -n 48 --temp 0 -q", bin, model_path, prompt);
    T_CHECK(st == 0 && strlen(lin) > strlen(prompt) + 20, "greedy generate runs (exit %d)", st);
    size_t ll = strlen(lin);
    if (ll && lin[ll - 1] == '\n') lin[ll - 1] = '\0';
    char *out = t_runf(&st, "%s generate -m %s -p '%s' -n 48 --temp 0 -q --branches 4 --json", bin,
                     model_path, prompt);
    jv *j = j_read(out);
    T_CHECK(st == 0 && jlen(j) == 4, "generate --branches 4 --json: exit %d, %d branches", st,
            j ? jlen(j) : -1);
    char want[8192];
    for (int b = 0; j && b < jlen(j); b++) {
        snprintf(want, sizeof want, "%s%s", prompt, jkey(jat(j, b), "text")->str);
        T_CHECK(!strcmp(want, lin), "greedy branch %d differs from linear generate:\n  branch: "
                "%s\n  linear: %s", b, want, lin);
        T_CHECK(jlen(jkey(jat(j, b), "tokens")) == 48, "branch %d has %d tokens, want 48", b,
                jlen(jkey(jat(j, b), "tokens")));
    }
    free(lin);
    j_free(j);
    free(out);

    /* sampled: branch i with seed S is linear generate with seed S + i */
    out = t_runf(&st, "%s generate -m %s -p '%s' -n 64 --temp 0.8 --seed 11 -q --branches 3 --json",
               bin, model_path, prompt);
    j = j_read(out);
    T_CHECK(st == 0 && jlen(j) == 3, "sampled --branches 3: exit %d", st);
    int distinct = 0;
    for (int b = 0; j && b < jlen(j); b++) {
        lin = t_runf(&st, "%s generate -m %s -p '%s' -n 64 --temp 0.8 --seed %d -q", bin, model_path,
                   prompt, 11 + b);
        ll = strlen(lin);
        if (ll && lin[ll - 1] == '\n') lin[ll - 1] = '\0';
        snprintf(want, sizeof want, "%s%s", prompt, jkey(jat(j, b), "text")->str);
        T_CHECK(!strcmp(want, lin), "sampled branch %d (seed %d) differs from linear generate "
                "--seed %d:\n  branch: %s\n  linear: %s", b, 11 + b, 11 + b, want, lin);
        T_CHECK(jnum(jkey(jat(j, b), "seed")) == 11 + b, "branch %d reports seed %d", b,
                jnum(jkey(jat(j, b), "seed")));
        if (b && strcmp(jkey(jat(j, b), "text")->str, jkey(jat(j, 0), "text")->str)) distinct++;
        free(lin);
    }
    T_CHECK(distinct > 0, "sampled branches with different seeds all made the same text");
    j_free(j);
    free(out);

    out = t_runf(&st, "%s generate -m %s -p '%s' -n 8 --temp 0 --branches 2 2>&1", bin, model_path, prompt);
    T_CHECK(st == 0 && strstr(out, "--- branch 1 (seed 2, 8 tokens, ended by budget)") &&
            strstr(out, "steps"), "the text form names each branch and reports steps:\n%s", out);
    free(out);
}

/* `best`, a command only the strategy registry names: its samples are generate
 * --branches' (the same seeds), ranked best score first; a bad argument is a usage error. */
static void test_best_cli(void) {
    int st;
    char *b = t_runf(&st, "%s best -m %s -p 'Once' --samples 3 --tokens 16 --temp 1.5 --seed 11 -q --json",
                     bin, model_path);
    char *g = t_runf(&st, "%s generate -m %s -p 'Once' --branches 3 -n 16 --temp 1.5 --seed 11 -q --json",
                     bin, model_path);
    jv *jb = j_read(b), *jg = j_read(g);
    const jv *jr = jb ? jkey(jb, "results") : NULL;
    T_CHECK(jr && jlen(jr) == 3 && jlen(jg) == 3, "best --samples 3 --json: 3 results (%s)", b);
    bool same = jr && jlen(jr) == 3 && jlen(jg) == 3, ranked = same;
    for (int i = 0; same && i < 3; i++) {
        int hits = 0;
        for (int k = 0; k < 3; k++) hits += !strcmp(jkey(jat(jr, i), "text")->str, jkey(jat(jg, k), "text")->str);
        same = hits >= 1;
        if (i) ranked = ranked && jkey(jat(jr, i - 1), "score")->num >= jkey(jat(jr, i), "score")->num;
    }
    T_CHECK(same, "each of best's samples is one of generate --branches 3's:\n%s\n%s", b, g);
    ranked = ranked && jkey(jat(jr, 0), "score")->num > jkey(jat(jr, 2), "score")->num; /* not all one sample */
    T_CHECK(ranked, "best's results come best score first:\n%s", b);
    j_free(jb), j_free(jg), free(b), free(g);
    b = t_runf(&st, "%s best -m %s --samples 0 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(b, "bad samples '0'"), "best --samples 0: exit %d, %s", st, b);
    free(b);
}

/* `temps`, a command only the strategy registry names: its chain i is generate's first
 * branch at temperature i * 0.75 with seed 11 + i, decoded without the others. */
static void test_temps_cli(void) {
    int st;
    char *b = t_runf(&st, "%s temps -m %s -p 'Once' --chains 3 --tokens 16 --step 75 --seed 11 -q --json", bin,
                     model_path);
    jv *jb = j_read(b);
    const jv *jr = jb ? jkey(jb, "results") : NULL;
    T_CHECK(st == 0 && jr && jlen(jr) == 3, "temps --chains 3 --json: 3 results (%s)", b);
    for (int i = 0; jr && jlen(jr) == 3 && i < 3; i++) {
        char *g = t_runf(&st, "%s generate -m %s -p 'Once' --branches 2 -n 16 --temp %g --seed %d -q --json", bin,
                         model_path, i * 0.75, 11 + i);
        jv *jg = j_read(g);
        T_CHECK(jg && jlen(jg) == 2 && !strcmp(jkey(jat(jr, i), "text")->str, jkey(jat(jg, 0), "text")->str),
                "temps' chain %d is generate's at temperature %g:\n%s\n%s", i, i * 0.75, b, g);
        j_free(jg), free(g);
    }
    j_free(jb), free(b);
    b = t_runf(&st, "%s temps -m %s --step 0 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(b, "bad step '0'"), "temps --step 0: exit %d, %s", st, b);
    free(b);
    /* its chains' temperatures are its own: --temp is neither offered nor taken */
    b = t_runf(&st, "%s temps --help", bin);
    T_CHECK(st == 0 && strstr(b, "--step") && !strstr(b, "--temp "), "temps --help offers no --temp:\n%s", b);
    free(b);
    b = t_runf(&st, "%s temps -m %s --temp 0.5 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(b, "--temp"), "temps --temp: exit %d, %s", st, b);
    free(b);
}

/* `session export --keep N`: a saved cot run of 4 chains exported with the 2 best kept
 * has 2 branches, each one of the whole export's (the ranking is test_prune's); --keep 4
 * exports them all; --keep on info, or a bad count, is a usage error. */
static void test_session_keep(void) {
    char path[] = "/tmp/md_keep_XXXXXX";
    int fd = mkstemp(path), st;
    if (fd >= 0) close(fd);
    char *out = t_runf(&st, "%s cot -m %s -p 'Once' -k 4 -n 10 --seed 5 -q --save %s", bin, model_path, path);
    T_CHECK(fd >= 0 && st == 0, "cot --save: exit %d", st);
    free(out);
    char *all = t_runf(&st, "%s session export %s --markdown -m %s", bin, path, model_path);
    char *two = t_runf(&st, "%s session export %s --markdown -m %s --keep 2", bin, path, model_path);
    T_CHECK(st == 0 && strstr(all, "4 branches.") && strstr(two, "2 branches."), "--keep 2: exit %d\n%s", st, two);
    bool subset = true;
    for (const char *at = strstr(two, "```text\n"); subset && at; at = strstr(at + 1, "```text\n")) {
        const char *end = strstr(at + 8, "```");
        char text[512];
        snprintf(text, sizeof text, "%.*s", end ? (int)(end - at) : 0, at);
        subset = end && strstr(all, text);
    }
    T_CHECK(subset, "each kept branch is one of the whole export's:\n%s\n---\n%s", two, all);
    free(two);
    two = t_runf(&st, "%s session export %s --markdown -m %s --keep 4", bin, path, model_path);
    T_CHECK(st == 0 && !strcmp(two, all), "--keep 4 of 4 exports them all");
    free(two), free(all);
    out = t_runf(&st, "%s session info %s --keep 2 2>&1", bin, path);
    T_CHECK(st == 2 && strstr(out, "--keep"), "session info --keep: exit %d, %s", st, out);
    free(out);
    out = t_runf(&st, "%s session export %s --markdown --keep -1 2>&1", bin, path);
    T_CHECK(st == 2 && strstr(out, "bad --keep '-1'"), "--keep -1: exit %d, %s", st, out);
    free(out);
    unlink(path);
}

/* ---- ask ---- */

static void test_ask(const char *ctx_file) {
    int st;
    const char *q[3] = {"Who is Lily?", "What did she find?", "Where was the ball?"};
    char *out = t_runf(&st, "%s ask -m %s --raw --context %s -q '%s' -q '%s' -q '%s' -n 24 --json "
                     "--quiet", bin, model_path, ctx_file, q[0], q[1], q[2]);
    jv *j = j_read(out);
    T_CHECK(st == 0 && j, "ask --json: exit %d, valid JSON", st);
    const jv *ans = jkey(j, "answers");
    T_CHECK(jlen(ans) == 3, "3 answers, got %d", jlen(ans));
    for (int i = 0; i < jlen(ans); i++)
        T_CHECK(!strcmp(jkey(jat(ans, i), "question")->str, q[i]) && jkey(jat(ans, i), "answer")->str,
                "answer %d names its question", i);
    int used3 = jnum(jkey(j, "kv_slots_used")), shared = jnum(jkey(j, "shared_prefix_tokens"));
    T_CHECK(shared > 20, "the context is a shared prefix (%d tokens)", shared);
    /* each answer is what asking its question alone gives */
    int used1 = 0;
    for (int i = 0; i < 3 && jlen(ans) == 3; i++) {
        char *o1 = t_runf(&st, "%s ask -m %s --raw --context %s -q '%s' -n 24 --json --quiet", bin,
                        model_path, ctx_file, q[i]);
        jv *j1 = j_read(o1);
        T_CHECK(st == 0 && j1, "ask one question: exit %d", st);
        const char *a1 = jkey(jat(jkey(j1, "answers"), 0), "answer")->str;
        const char *a3 = jkey(jat(ans, i), "answer")->str;
        T_CHECK(a1 && a3 && !strcmp(a1, a3), "question %d: answered with the others '%s', alone "
                "'%s'", i, a3 ? a3 : "", a1 ? a1 : "");
        if (i == 0) used1 = jnum(jkey(j1, "kv_slots_used"));
        j_free(j1);
        free(o1);
    }
    T_CHECK(used1 > 0 && used3 < 3 * used1, "KV slots: 3 questions use %d, one alone %d (want "
            "fewer than 3x)", used3, used1);
    j_free(j);
    free(out);
    /* per-question budgets: the first answers in at most 3 tokens, the second in 9 */
    out = t_runf(&st, "%s ask -m %s --raw --context %s -q '%s' -q '%s' -n 30 --budgets 3,9 --json "
               "--quiet", bin, model_path, ctx_file, q[0], q[1]);
    j = j_read(out);
    ans = j ? jkey(j, "answers") : NULL;
    T_CHECK(st == 0 && jlen(ans) == 2 && jnum(jkey(jat(ans, 0), "tokens")) <= 3 &&
                jnum(jkey(jat(ans, 1), "tokens")) <= 9 &&
                (jnum(jkey(jat(ans, 1), "tokens")) == 9 ||
                 !strcmp(jkey(jat(ans, 1), "ended")->str, "EOS")),
            "--budgets 3,9 bounds each answer: %s", out);
    j_free(j);
    free(out);
    out = t_runf(&st, "%s ask -m %s --raw --context %s -q '%s' --budgets 3,9 2>&1", bin, model_path,
               ctx_file, q[0]);
    T_CHECK(st == 2 && strstr(out, "budgets"), "more budgets than questions is a usage error: %s", out);
    free(out);
    out = t_runf(&st, "%s ask -m %s --raw --context %s -q '%s' -q '%s' -n 8 2>/dev/null", bin,
               model_path, ctx_file, q[0], q[1]);
    T_CHECK(st == 0 && strstr(out, "Q1: Who is Lily?\nA1:") && strstr(out, "Q2: "),
            "ask's text form prints questions and answers:\n%s", out);
    free(out);
}

/* ---- bench ---- */

static void test_bench(void) {
    int st;
    char *out = t_runf(&st, "%s bench forest -m %s --k 1,3 --context 32 --steps 4", bin, model_path);
    jv *j = j_read(out);
    T_CHECK(st == 0 && j, "bench forest: exit %d, valid JSON", st);
    const jv *r = jat(jkey(j, "runs"), 1);
    T_CHECK(jnum(jkey(r, "k")) == 3 && jnum(jkey(jkey(r, "forest"), "kv_slots")) == 32 + 3 * 4,
            "bench forest k=3: %d KV slots, want 32 + 3 x 4", jnum(jkey(jkey(r, "forest"), "kv_slots")));
    T_CHECK(jnum(jkey(jkey(r, "copied_prefix"), "kv_slots")) == 3 * (32 + 4), "copied prefix: %d KV "
            "slots, want 3 x (32 + 4)", jnum(jkey(jkey(r, "copied_prefix"), "kv_slots")));
    T_CHECK(jnum(jkey(r, "kv_exact")) == 1 && jnum(jkey(r, "same_tokens")) == 1,
            "bench forest: kv_exact and same_tokens");
    j_free(j);
    free(out);
    out = t_runf(&st, "%s bench ask -m %s --context 64 --questions 2 --question-tokens 4 --answer 8",
               bin, model_path);
    j = j_read(out);
    r = jat(jkey(j, "runs"), 0);
    T_CHECK(st == 0 && j && jnum(jkey(jkey(r, "forest"), "kv_slots")) == 64 + 2 * 4 + 2 * 7 &&
            jnum(jkey(r, "same_tokens")) == 1, "bench ask: exit %d, forest KV slots %d, want 86", st,
            jnum(jkey(jkey(r, "forest"), "kv_slots")));
    j_free(j);
    free(out);
    /* --repeat 3: each repeat's ratio listed, the ratio printed is their median */
    out = t_runf(&st, "%s bench ask -m %s --context 32 --questions 2 --question-tokens 2 --answer 4 "
               "--no-copied --repeat 3", bin, model_path);
    j = j_read(out);
    r = jat(jkey(j, "runs"), 0);
    const jv *runs = jkey(jkey(r, "ratio_runs"), "sequential_over_forest_total");
    double med = -1;
    if (jlen(runs) == 3) {
        double a = jat(runs, 0)->num, b = jat(runs, 1)->num, c = jat(runs, 2)->num;
        med = a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
    }
    const double got = jkey(jkey(r, "ratios"), "sequential_over_forest_total")->num;
    T_CHECK(st == 0 && j && jnum(jkey(r, "repeats")) == 3 && jlen(runs) == 3 && got == med &&
                jkey(r, "copied_prefix") == &j_none && jnum(jkey(r, "same_tokens")) == 1,
            "bench ask --repeat 3: exit %d, 3 ratio runs (%d), the median of them (%g vs %g)", st,
            jlen(runs), got, med);
    /* and the best-of-repeats ratio: the sequential way's fastest total over the forest's */
    const jv *fr = jkey(jkey(r, "total_s_runs"), "forest"), *sr = jkey(jkey(r, "total_s_runs"), "sequential");
    double fmin = 1e9, smin = 1e9;
    for (int i = 0; i < jlen(fr) && i < jlen(sr); i++) {
        if (jat(fr, i)->num < fmin) fmin = jat(fr, i)->num;
        if (jat(sr, i)->num < smin) smin = jat(sr, i)->num;
    }
    const double best = jkey(jkey(r, "ratios_best"), "sequential_over_forest_total")->num;
    T_CHECK(jlen(fr) == 3 && jlen(sr) == 3 && fmin > 0 && fabs(best - smin / fmin) <= 0.006 + 0.001 * best,
            "bench ask --repeat 3: best-of-repeats ratio %g, want %g / %g from total_s_runs (%d, %d runs)",
            best, smin, fmin, jlen(fr), jlen(sr));
    j_free(j);
    free(out);
    out = t_runf(&st, "%s bench ask -m %s --repeat 0", bin, model_path);
    T_CHECK(st == 2, "bench ask --repeat 0: usage error (exit %d)", st);
    free(out);
    /* bench attention: the model's heads, the layers asked for; the K and V bytes each way
     * reads (the shared context once, or once per row); the same bits both ways */
    out = t_runf(&st, "%s bench attention -m %s --rows 3 --context 70 --own 9 --layers 2 --reps 3",
               bin, model_path);
    j = j_read(out);
    const int kvd = jnum(jkey(j, "n_head_kv")) * jnum(jkey(j, "head_dim"));
    T_CHECK(st == 0 && j && jnum(jkey(j, "layers")) == 2 && jnum(jkey(j, "n_head")) == 8 &&
                jnum(jkey(j, "n_head_kv")) == 4 && jnum(jkey(j, "head_dim")) == 8 &&
                jnum(jkey(jkey(j, "shared"), "kv_bytes")) == 2 * kvd * 4 * 2 * (70 + 3 * 9) &&
                jnum(jkey(jkey(j, "alone"), "kv_bytes")) == 2 * kvd * 4 * 2 * 3 * (70 + 9) &&
                jnum(jkey(j, "same_bits")) == 1,
            "bench attention: exit %d, stories260K's 8/4 heads of 8, 2 layers, KV bytes %d / %d, "
            "same bits", st, jnum(jkey(jkey(j, "shared"), "kv_bytes")),
            jnum(jkey(jkey(j, "alone"), "kv_bytes")));
    j_free(j);
    free(out);
    /* --no-alone: the shared way timed, the alone way and its comparison null */
    out = t_runf(&st, "%s bench attention -m %s --rows 3 --context 70 --own 9 --layers 2 --reps 3 "
               "--no-alone", bin, model_path);
    j = j_read(out);
    const jv *alone = jkey(j, "alone"), *same = jkey(j, "same_bits");
    T_CHECK(st == 0 && j && jkey(jkey(j, "shared"), "ms")->type == J_NUM &&
                jkey(jkey(j, "shared"), "ms")->num > 0 && alone != &j_none &&
                alone->type == J_NULL && same != &j_none && same->type == J_NULL,
            "bench attention --no-alone: exit %d, shared timed, alone and same_bits null", st);
    j_free(j);
    free(out);
    out = t_runf(&st, "%s bench attention --heads 9/4", bin);
    T_CHECK(st == 2, "bench attention --heads 9/4: usage error (exit %d)", st);
    free(out);
}

/* ---- drafts and lookahead ---- */

/* `generate --draft` / `--lookahead` print exactly what greedy `generate` prints; `plan
 * --lookahead` shows the window at positions tip + i + l; `bench spec` runs every
 * setting with the same tokens as plain greedy (and as plain sampling at 0.7); with
 * --temp 0.7 the draft commands print plain sampling's text. */
static void test_spec_cli(void) {
    const char *prompt = "Tom had a red ball. Tom had a red ball. Tom";
    int st;
    char *ref = t_runf(&st, "%s generate -m %s -p '%s' -n 40 --temp 0 -q 2>/dev/null", bin, model_path, prompt);
    T_CHECK(st == 0 && strlen(ref) > strlen(prompt), "greedy generate: exit %d", st);
    const char *modes[] = {"--draft", "--lookahead 3,3,2", "--lookahead 4,4,4 --draft-len 0",
                           "--draft --draft-fixed --draft-len 4 --drafts 2"};
    for (int i = 0; i < 4; i++) {
        char *out = t_runf(&st, "%s generate -m %s -p '%s' -n 40 %s -q 2>/dev/null", bin, model_path,
                         prompt, modes[i]);
        T_CHECK(st == 0 && !strcmp(out, ref), "generate %s prints greedy's text (exit %d):\n%s\nvs\n%s",
                modes[i], st, out, ref);
        free(out);
    }
    free(ref);
    /* sampled: the very tokens of plain sampling with the same seed */
    ref = t_runf(&st, "%s generate -m %s -p '%s' -n 40 --temp 0.7 --seed 9 -q 2>/dev/null", bin, model_path, prompt);
    for (int i = 0; i < 2; i++) {
        char *out = t_runf(&st, "%s generate -m %s -p '%s' -n 40 --temp 0.7 --seed 9 %s -q 2>/dev/null", bin,
                           model_path, prompt, modes[i]);
        T_CHECK(st == 0 && !strcmp(out, ref), "generate %s --temp 0.7 prints plain sampling's text (exit %d):\n%s\n"
                "vs\n%s", modes[i], st, out, ref);
        free(out);
    }
    free(ref);
    char *out = t_runf(&st, "%s plan -m %s -p '%s' --lookahead 3,4,2 --steps 2 --json", bin, model_path, prompt);
    jv *j = j_read(out);
    T_CHECK(st == 0 && j, "plan --lookahead --json: exit %d, valid JSON", st);
    const jv *steps = j ? jkey(j, "steps") : &j_none;
    T_CHECK(jlen(steps) == 2, "plan --lookahead: 2 steps, got %d", jlen(steps));
    int n_win = 0, bad = 0, tip_pos = -1;
    const jv *rows = jkey(jat(steps, 1), "rows");
    for (int r = 0; r < jlen(rows); r++) {
        const jv *row = jat(rows, r);
        const jv *role = jkey(row, "role");
        if (role->type != J_STR) {
            bad++;
            continue;
        }
        if (!strcmp(role->str, "tip")) tip_pos = jnum(jkey(row, "pos"));
        int l, c;
        if (sscanf(role->str, "la %d,%d", &l, &c) == 2) {
            n_win++;
            if (tip_pos < 0 || jnum(jkey(row, "pos")) != tip_pos + l + c || !jnum(jkey(row, "logits"))) bad++;
        }
    }
    T_CHECK(n_win == 2 + 3 * 2 && bad == 0 && tip_pos > 0,
            "plan --lookahead 3,4,2: %d window rows (want (W-1) + W(N-2) = 8), %d misplaced", n_win, bad);
    T_CHECK(jlen(jkey(jat(steps, 1), "emitted")) >= 1, "each step emits at least one token");
    j_free(j);
    free(out);
    out = t_runf(&st, "%s bench spec -m %s -n 24 --raw --tasks code,story --settings 'draft;la:2,3,2+draft' --temps 0,0.7",
               bin, model_path);
    j = j_read(out);
    const jv *tasks = j ? jkey(j, "tasks") : &j_none;
    int same = 0, runs = 0;
    for (int t = 0; t < jlen(tasks); t++)
        for (int r = 0; r < jlen(jkey(jat(tasks, t), "runs")); r++) {
            runs++;
            same += jnum(jkey(jat(jkey(jat(tasks, t), "runs"), r), "same_as_plain")) == 1;
        }
    T_CHECK(st == 0 && jlen(tasks) == 2 && runs == 12 && same == 12,
            "bench spec: exit %d, %d tasks, %d of %d runs equal plain decoding (greedy and at 0.7)", st, jlen(tasks), same, runs);
    j_free(j);
    free(out);
    out = t_runf(&st, "%s generate -m %s --lookahead 3,1,2 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(out, "--lookahead"), "--lookahead with N = 1 is a usage error: %d %s", st, out);
    free(out);
    out = t_runf(&st, "%s generate -m %s --draft --branches 2 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(out, "--branches"), "--draft with --branches is a usage error: %d %s", st, out);
    free(out);
}

/* ---- bad inputs ---- */

static void test_bad_inputs(const char *ctx_file) {
    int st;
    char *out = t_runf(&st, "%s ask -m %s --context /nonexistent/ctx.txt -q 'Why?' 2>&1", bin, model_path);
    T_CHECK(st == 1 && strstr(out, "cannot open context file '/nonexistent/ctx.txt'"),
            "missing context file: exit %d, message: %s", st, out);
    free(out);
    out = t_runf(&st, "%s ask -m %s --raw --context %s -q 'Why?' -c 16 2>&1", bin, model_path, ctx_file);
    T_CHECK(st == 1 && strstr(out, "KV cache of 16") && strstr(out, "-c"),
            "context longer than the cache: exit %d, message: %s", st, out);
    free(out);
    out = t_runf(&st, "%s generate -m %s -p 'Once upon a time there was a girl' -c 4 2>&1", bin, model_path);
    T_CHECK(st == 1 && strstr(out, "more than the KV cache of 4") && strstr(out, "-c"),
            "prompt longer than -c: exit %d, message: %s", st, out);
    free(out);
    out = t_runf(&st, "%s generate -m %s -p 'Once upon a time there was a girl' -c 4 --branches 2 2>&1",
               bin, model_path);
    T_CHECK(st == 1 && strstr(out, "raise it with -c"), "branches, prompt longer than -c: exit %d: %s",
            st, out);
    free(out);
    out = t_runf(&st, "%s plan -m %s -p 'Once upon a time there was a girl' -c 4 2>&1", bin, model_path);
    T_CHECK(st == 1 && strstr(out, "raise it with -c"), "plan, prompt longer than -c: exit %d: %s", st, out);
    free(out);
    out = t_runf(&st, "%s generate -m %s --branches 0 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(out, "--branches"), "--branches 0 is a usage error: exit %d: %s", st, out);
    free(out);
    out = t_runf(&st, "%s ask -m %s -q 'Why?' 2>&1", bin, model_path);
    T_CHECK(st == 2 && strstr(out, "--context"), "ask without a context: exit %d: %s", st, out);
    free(out);
}

int main(void) {
    if (!t_cli_setup(bin, sizeof bin, model_path, sizeof model_path)) return t_done();
    char ctx_file[] = "/tmp/md_ctx_XXXXXX";
    int fd = mkstemp(ctx_file);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    T_CHECK(f != NULL, "cannot create a temporary context file");
    if (!f) return t_done();
    fputs("Once upon a time, there was a little girl named Lily. She liked to play with her red "
          "ball in the park. One day, she found a big box under a tree. Inside the box there was "
          "a small puppy. Lily took the puppy home and called him Max.", f);
    fclose(f);
    test_plan();
    test_plan_recurrent();
    test_generate_branches();
    test_best_cli();
    test_temps_cli();
    test_session_keep();
    test_ask(ctx_file);
    test_bench();
    test_spec_cli();
    test_bad_inputs(ctx_file);
    unlink(ctx_file);
    return t_done();
}
