/* test_ui_runs.c - what a run leaves in the TUI's forest, through the worker thread:
 * beam keeps exactly the hypotheses the strategy returns, with their scores, and they
 * are the CLI's (`beam --json`, run through t_run.h on SmolLM2 with its chat template,
 * where a hypothesis ends by EOS before the budget); every run draws a fresh seed (said
 * in its message, set with :set seed for a run to be repeated) and a branch that repeats
 * a sibling token for token is not made twice; beam's scores outlast :keep and its undo,
 * :save and :load, and the Markdown export shows them (stories260K). */
#include <jansson.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include "forest/forest.h"
#include "forest/step.h"
#include "gguf/gguf.h"
#include "session/session.h"
#include "tok/chat.h"
#include "../ui/command.h"
#include "../ui/worker.h"
#include "t.h"
#include "t_model.h"
#include "t_run.h"

#define SMOL "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define QUESTION "What is the capital of France?"

/* Posts j and waits (at most 120 s) until the worker has said something and nothing
 * runs; the last message into msg. False on a timeout. */
static bool run_job(ui_worker *w, ui_job j, char *msg, size_t cap) {
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, cap);
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    for (time_t t0 = time(NULL); time(NULL) - t0 < 120; usleep(2000)) {
        ui_worker_lock(w);
        bool idle = ui_worker_message(w, msg, cap) != no && !ui_worker_busy(w);
        ui_worker_unlock(w);
        if (idle) return true;
    }
    fprintf(stderr, "still running after 120 s: %s\n", msg);
    return false;
}

/* The job a command line posts from node. */
static ui_job cmd_job(const char *line, forest_id node) {
    ui_cmd c;
    st_err err = {0};
    T_CHECK(!ui_cmd_parse(line, &c, &err), "%s parses: %s", line, err.msg);
    c.job.node = node;
    return c.job;
}

/* The worker's save and load (app/cmd_tui.c's, less the model check): the session with
 * the scores the worker hands over. */
static st_code save_cb(void *ud, const char *path, const forest *f, session_settings *s, st_err *err) {
    return session_save(path, f, s, NULL, ud, err);
}

static forest *load_cb(void *ud, const char *path, bool force, sample_params *sp, session_meta **meta, st_err *err) {
    (void)ud, (void)force;
    session_settings s = session_settings_default();
    session_load_params lp = session_load_default_params();
    forest *f = session_load(path, &lp, &s, NULL, err);
    if (f) *sp = s.sample, *meta = s.meta, s.meta = NULL;
    session_settings_free(&s);
    return f;
}

/* A SmolLM2 worker with its chat template over a fresh forest; NULL (skipped or
 * failed) when the model is absent. *m, *tk, *c are the caller's to free. */
/* The chat template text of m, NULL when it has none. */
static const char *t_smol_jinja(const model *m) {
    const char *jinja = NULL;
    if (gguf_get_str(m->gguf, "tokenizer.chat_template", &jinja, NULL) != ST_OK) jinja = NULL;
    return jinja;
}

static ui_worker *smol_worker(model **m, tok **tk, model_ctx **c) {
    *m = NULL, *tk = NULL, *c = NULL;
    if (access(SMOL, R_OK) != 0) {
        T_MISSING("needs " SMOL);
        return NULL;
    }
    st_err err = {0};
    *m = model_load(SMOL, &err);
    *tk = *m ? tok_from_gguf((*m)->gguf, &err) : NULL;
    *c = *tk ? t_new_ctx(*m, 1024) : NULL;
    const char *jinja = *m ? t_smol_jinja(*m) : NULL;
    static char sys[512];
    chat_default_system(jinja, sys, sizeof sys);
    ui_worker_params wp = {.ctx = *c, .tk = *tk, .f = forest_init(1024, 8), .sp = sample_default_params(),
                           .budget = 32, .model_name = "smol", .backend = "cpu", .save = save_cb, .ud = *tk,
                           .chat = {.kind = chat_detect(jinja), .system = sys[0] ? sys : NULL}};
    ui_worker *w = *c && wp.f ? ui_worker_start(&wp, &err) : NULL;
    T_CHECK(w && wp.chat.kind != CHAT_NONE, "SmolLM2 worker with a chat template: %s", err.msg);
    if (!w) forest_free(wp.f);
    return w;
}

/* The generated tokens of leaf below from (excluded) into out; how many, -1 when leaf
 * is not below from. */
static int32_t tokens_below(const forest *f, forest_id from, forest_id leaf, int32_t *out, int32_t cap) {
    int32_t np = forest_path(f, from, NULL, 0), nl = forest_path(f, leaf, NULL, 0);
    if (forest_common_ancestor(f, from, leaf) != from || nl - np > cap) return -1;
    int32_t path[4096];
    forest_path(f, leaf, path, 4096);
    memcpy(out, path + np, sizeof(int32_t) * (size_t)(nl - np));
    return nl - np;
}

/* One CLI result against the TUI's leaves below q: a finished leaf with its tokens (less
 * the end token) and its score. */
static void check_result(ui_worker *w, const tok *tk, forest_id q, const forest_id *lv, int32_t n_lv,
                         const json_t *r, int32_t rank) {
    const json_t *jt = json_object_get(r, "tokens");
    int32_t want[256], n = 0, got[256];
    for (size_t i = 0; i < json_array_size(jt) && n < 256; i++) want[n++] = (int32_t)json_integer_value(json_array_get(jt, i));
    if (n > 0 && tok_is_eog(tk, want[n - 1])) n--; /* an end token is not kept as a node */
    double score = json_number_value(json_object_get(r, "score")), sc = NAN;
    const forest *f = ui_worker_forest(w);
    int32_t hit = -1;
    for (int32_t i = 0; i < n_lv && hit < 0; i++)
        if (tokens_below(f, q, lv[i], got, 256) == n && !memcmp(got, want, sizeof(int32_t) * (size_t)n)) hit = i;
    bool scored = hit >= 0 && ui_worker_score_of(w, lv[hit], &sc);
    T_CHECK(hit >= 0 && (forest_get(f, lv[hit])->flags & FOREST_FINISHED) && scored && fabs(sc - score) < 1e-4,
            "CLI result %d ('%s', score %.4f, %s) is a finished leaf with that score: leaf %d, score %.4f",
            (int)rank, json_string_value(json_object_get(r, "text")), score,
            json_string_value(json_object_get(r, "ended")), (int)hit, sc);
}

/* `b` on a chat question: the forest keeps exactly the CLI's hypotheses, scored as it
 * ranks them; no mid-sentence live hypothesis stays behind marked finished. */
static void test_beam_agrees(void) {
    model *m = NULL;
    tok *tk = NULL;
    model_ctx *c = NULL;
    char bin[4096], stories[4096], msg[1024];
    ui_worker *w = t_cli_setup(bin, sizeof bin, stories, sizeof stories) ? smol_worker(&m, &tk, &c) : NULL;
    if (!w) goto out;
    int st;
    char *out = t_runf(&st, "%s beam -m %s --chat -p '" QUESTION "' -B 2 -n 32 --json -q -t 1", bin, SMOL);
    json_t *cli = out ? json_loads(out, 0, NULL) : NULL;
    T_CHECK(st == 0 && json_array_size(cli) == 2, "CLI beam: status %d, %d results", st, (int)json_array_size(cli));
    /* the one chat rule (prompt_chat_decide): the model's template without --chat, none with --raw */
    char *dflt = t_runf(&st, "%s beam -m %s -p '" QUESTION "' -B 2 -n 32 --json -q -t 1", bin, SMOL);
    char *raw = t_runf(&st, "%s beam -m %s --raw -p '" QUESTION "' -B 2 -n 32 --json -q -t 1", bin, SMOL);
    T_CHECK(out && dflt && raw && !strcmp(out, dflt) && strcmp(out, raw),
            "beam without --chat applies the model's template, --raw does not");
    free(dflt), free(raw);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_APPEND, .node = FOREST_NONE, .text = QUESTION}, msg, sizeof msg),
            "the question appended: %s", msg);
    ui_worker_lock(w);
    forest_id q = ui_worker_take_focus(w);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, cmd_job(":beam 2 32", q), msg, sizeof msg) && strstr(msg, "2 results"), "beam: %s", msg);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    forest_id lv[64], below[64];
    int32_t n_lv = forest_leaves(f, lv, 64), n = 0;
    for (int32_t i = 0; i < n_lv && i < 64; i++)
        if (lv[i] != q && forest_common_ancestor(f, q, lv[i]) == q) below[n++] = lv[i];
    T_CHECK(n == (int32_t)json_array_size(cli), "%d leaves below the question, the CLI has %d results", (int)n,
            (int)json_array_size(cli));
    for (size_t i = 0; i < json_array_size(cli); i++) check_result(w, tk, q, below, n, json_array_get(cli, i), (int32_t)i + 1);
    ui_worker_unlock(w);
    /* the Markdown export names the template the turns were written in (it said "none") */
    char md[64], text[4096] = "", want[64];
    snprintf(md, sizeof md, "/tmp/test_ui_runs.%d.md", (int)getpid());
    snprintf(want, sizeof want, "chat template: %s.", chat_name(chat_detect(t_smol_jinja(m))));
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_EXPORT, .text = md}, msg, sizeof msg), ":export: %s", msg);
    FILE *in = fopen(md, "r");
    if (in) text[fread(text, 1, sizeof text - 1, in)] = 0, fclose(in);
    T_CHECK(strstr(text, want) && !strstr(want, "none"), "'%s' in the export: %.300s", want, text);
    remove(md);
    /* ... and so does :save (the CLI's sessions did, the TUI's had "chat_template": "") */
    snprintf(md, sizeof md, "/tmp/test_ui_runs.%d.json", (int)getpid());
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_SAVE, .text = md}, msg, sizeof msg), ":save: %s", msg);
    json_t *saved = json_load_file(md, 0, NULL);
    const char *tmpl = json_string_value(json_object_get(json_object_get(saved, "settings"), "chat_template"));
    T_CHECK(tmpl && !strcmp(tmpl, chat_name(chat_detect(t_smol_jinja(m)))), ":save records the chat template: '%s'",
            tmpl ? tmpl : "(none)");
    json_decref(saved);
    remove(md);
    json_decref(cli);
    free(out);
out:
    ui_worker_stop(w);
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The leaves below node (at most cap, into out); how many. */
static int32_t leaves_below(ui_worker *w, forest_id node, forest_id *out, int32_t cap) {
    forest_id lv[256];
    const forest *f = ui_worker_forest(w);
    int32_t n_lv = forest_leaves(f, lv, 256), n = 0;
    for (int32_t i = 0; i < n_lv && i < 256 && n < cap; i++)
        if (lv[i] != node && forest_common_ancestor(f, node, lv[i]) == node) out[n++] = lv[i];
    return n;
}

/* The seed a "done" message names, 0 when none. */
static unsigned long long seed_of(const char *msg) {
    const char *s = strstr(msg, "seed ");
    return s ? strtoull(s + 5, NULL, 10) : 0;
}

/* A stories260K worker over a fresh forest whose one root is BOS and token 300 (*root),
 * started with wp as the caller set it but for ctx, tk, f and ud (the tokenizer, which
 * save_cb writes the session with); NULL (counted) when it cannot start. *m, *tk, *c
 * are the caller's to free, NULL where not made. */
static ui_worker *stories_worker(ui_worker_params *wp, model **m, tok **tk, model_ctx **c,
                                 forest_id *root) {
    *m = NULL, *tk = NULL, *c = NULL;
    if (!t_stories(m, tk) || !(*c = t_new_ctx(*m, 512))) return NULL;
    st_err err = {0};
    forest *f = forest_init(512, 8);
    int32_t prompt[2] = {tok_bos(*tk), 300};
    forest_add_root(f, prompt, NULL, 2, 0, root, &err);
    wp->ctx = *c, wp->tk = *tk, wp->f = f, wp->ud = *tk;
    ui_worker *w = ui_worker_start(wp, &err);
    T_CHECK(w, "worker: %s", err.msg);
    if (!w) forest_free(f);
    return w;
}

/* stories_worker with the session callbacks (save_cb, load_cb) and a grow budget. */
static ui_worker *saving_worker(int32_t budget, model **m, tok **tk, model_ctx **c, forest_id *root) {
    ui_worker_params wp = {.sp = sample_default_params(), .budget = budget, .save = save_cb, .load = load_cb,
                           .model_name = "m", .backend = "cpu"};
    return stories_worker(&wp, m, tk, c, root);
}

/* Stops w (NULL: none started) and frees what stories_worker made. */
static void stories_stop(ui_worker *w, model_ctx *c, tok *tk, model *m) {
    if (w) ui_worker_stop(w);
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The scores of the leaves below node, sorted (at most cap); how many. */
static int32_t scores_below(ui_worker *w, forest_id node, double *out, int32_t cap) {
    forest_id lv[64];
    int32_t n = leaves_below(w, node, lv, 64), k = 0;
    for (int32_t i = 0; i < n && k < cap; i++) k += ui_worker_score_of(w, lv[i], &out[k]);
    for (int32_t i = 1; i < k; i++)
        for (int32_t j = i; j > 0 && out[j] > out[j - 1]; j--) {
            double t = out[j];
            out[j] = out[j - 1], out[j - 1] = t;
        }
    return k;
}

/* The node at depth below the first root's first chain (its first child each time). */
static forest_id first_chain_at(const forest *f, int32_t depth) {
    forest_id roots[4];
    forest_id at = forest_roots(f, roots, 4) > 0 ? roots[0] : FOREST_NONE;
    for (const forest_node *nd; (nd = forest_get(f, at)) && nd->depth < depth && nd->first_child >= 0;)
        at = forest_id_at(f, nd->first_child);
    const forest_node *nd = forest_get(f, at);
    return nd && nd->depth == depth ? at : FOREST_NONE;
}

/* The tokens of leaf's path into out (at most cap); how many. */
static int32_t path_of(const forest *f, forest_id leaf, int32_t *out, int32_t cap) {
    int32_t n = 0;
    for (const forest_node *nd = forest_get(f, leaf); nd && n < cap;
         nd = nd->parent < 0 ? NULL : forest_node_at(f, nd->parent))
        out[n++] = nd->token;
    return n;
}

/* :compact after pruning one of four chains: the KV cache's free space in one run, as
 * many slots used, every leaf's tokens as they were, and a :grow goes on from a leaf. */
static void test_compact(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root, lv[8];
    ui_worker *w = saving_worker(8, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024];
    T_CHECK(run_job(w, cmd_job(":cot 4 8", root), msg, sizeof msg), "cot: %s", msg);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    forest_id top = first_chain_at(f, forest_get(f, root)->depth + 1);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_PRUNE, .node = top}, msg, sizeof msg), "d: %s", msg);
    int32_t before[8][64], len[8], runs, used;
    ui_worker_lock(w);
    f = ui_worker_forest(w);
    int32_t n = leaves_below(w, root, lv, 8);
    for (int32_t i = 0; i < n; i++) len[i] = path_of(f, lv[i], before[i], 64);
    runs = kv_alloc_free_runs(forest_kv_const(f)), used = kv_alloc_used(forest_kv_const(f));
    ui_worker_unlock(w);
    T_CHECK(n == 3 && runs > 1, "a chain pruned: %d leaves, the free space in %d runs", (int)n, (int)runs);
    T_CHECK(run_job(w, cmd_job(":compact", root), msg, sizeof msg) && !strncmp(msg, "compacted:", 10), ":compact: %s",
            msg);
    ui_worker_lock(w);
    f = ui_worker_forest(w);
    bool same = leaves_below(w, root, lv, 8) == n;
    for (int32_t i = 0; same && i < n; i++) {
        int32_t now[64];
        same = path_of(f, lv[i], now, 64) == len[i] && !memcmp(now, before[i], sizeof(int32_t) * (size_t)len[i]);
    }
    T_CHECK(same && kv_alloc_free_runs(forest_kv_const(f)) <= 1 && kv_alloc_used(forest_kv_const(f)) == used,
            ":compact: the leaves as they were, %d slots used (was %d), free space in %d run (was %d)",
            (int)kv_alloc_used(forest_kv_const(f)), (int)used, (int)kv_alloc_free_runs(forest_kv_const(f)), (int)runs);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, cmd_job(":grow", lv[0]), msg, sizeof msg) && !strncmp(msg, "done: +", 7),
            ":grow after :compact: %s", msg);
out:
    stories_stop(w, c, tk, m);
}

/* :name on a grown branch: the name outlasts d and u, and :save and :load ("name" in the
 * session's node); :name alone clears it. */
static void test_names_last(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker *w = saving_worker(6, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024], path[64];
    snprintf(path, sizeof path, "/tmp/test_ui_runs.names.%d.json", (int)getpid());
    T_CHECK(run_job(w, cmd_job(":grow", root), msg, sizeof msg), "grow: %s", msg);
    ui_worker_lock(w);
    int32_t depth = forest_get(ui_worker_forest(w), root)->depth + 1;
    forest_id top = first_chain_at(ui_worker_forest(w), depth);
    ui_worker_unlock(w);
    ui_job name = cmd_job(":name the café one", top);
    name.text = "the café one"; /* the TUI passes the command's text (run_command) */
    T_CHECK(run_job(w, name, msg, sizeof msg) && strstr(msg, "named"), ":name: %s", msg);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_PRUNE, .node = top}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_UNDO}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_SAVE, .text = path}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_LOAD, .text = path}, msg, sizeof msg),
            "d, u, :save, :load: %s", msg);
    ui_worker_lock(w);
    const char *got = ui_worker_name_of(w, first_chain_at(ui_worker_forest(w), depth));
    T_CHECK(got && !strcmp(got, "the café one"), "the name after d, u, :save and :load: '%s'", got ? got : "(none)");
    top = first_chain_at(ui_worker_forest(w), depth);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, cmd_job(":name", top), msg, sizeof msg) && strstr(msg, "cleared"), ":name alone: %s", msg);
    ui_worker_lock(w);
    T_CHECK(!ui_worker_name_of(w, top), "cleared");
    ui_worker_unlock(w);
    remove(path);
out:
    stories_stop(w, c, tk, m);
}

/* :best, a strategy the TUI knows only from the registry: its `:` line and its help and
 * completion entry; then (best_run) :best 3 6 on w from root, whose done line names the
 * best of the scores its results keep on their leaves. */
static void test_registry_command(void) {
    ui_cmd c;
    st_err err = {0};
    T_CHECK(ui_cmd_parse(":best 0", &c, &err) == ST_ERR_ARG && strstr(err.msg, "bad samples '0'"), ":best 0: %s",
            err.msg);
    bool listed = false;
    for (int32_t i = 0; ui_cmd_name(i); i++)
        listed |= !strcmp(ui_cmd_name(i), "best") && !strncmp(ui_cmd_usage(i), ":best N [TOKENS]", 16);
    T_CHECK(listed, ":best is in the command list with its usage");
    listed = false;
    for (int32_t i = 0; ui_cmd_name(i); i++)
        listed |= !strcmp(ui_cmd_name(i), "temps") && !strncmp(ui_cmd_usage(i), ":temps N [TOKENS] [STEP]", 24);
    T_CHECK(listed, ":temps is in the command list with its usage");
    T_CHECK(ui_cmd_parse(":temps 2 6 0", &c, &err) == ST_ERR_ARG && strstr(err.msg, "bad step '0'"),
            ":temps 2 6 0: %s", err.msg);
}

/* :temps 3 6 on w from root: three chains, one per temperature, summed up as branches. */
static void temps_run(ui_worker *w, forest_id root) {
    char msg[1024];
    T_CHECK(run_job(w, cmd_job(":temps 3 6 150", root), msg, sizeof msg), "temps: %s", msg);
    T_CHECK(!strncmp(msg, "done: +", 7) && strstr(msg, "3 branches;"), ":temps 3 6 150: '%s'", msg);
}

static void best_run(ui_worker *w, forest_id root) {
    char msg[1024], want[64];
    double sc[16];
    T_CHECK(run_job(w, cmd_job(":best 3 6", root), msg, sizeof msg), "best: %s", msg);
    ui_worker_lock(w);
    int32_t n = scores_below(w, root, sc, 16);
    ui_worker_unlock(w);
    snprintf(want, sizeof want, "done: 3 results, best score %.2f;", n ? sc[0] : NAN);
    T_CHECK(n >= 1 && !strncmp(msg, want, strlen(want)), ":best 3 6: %d scored leaves, '%s' (want '%s')", (int)n, msg,
            want);
}

/* :grow from root twice at temp 1: two different branches, each run's seed in its
 * message; :set seed to the first run's seed, and the third grow repeats the first
 * branch, which is not made twice. */
static void test_fresh_seeds(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 16, .model_name = "m", .backend = "cpu"};
    wp.sp.temp = 1.0f;
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[3][1024];
    ui_job set = {.kind = UI_JOB_SET, .text = "seed", .u.set.value = 7};
    ui_worker_post(w, &set);
    for (int i = 0; i < 3; i++) {
        if (i == 2) ui_worker_post(w, &set);
        T_CHECK(run_job(w, cmd_job(":grow", root), msg[i], sizeof msg[i]), "grow %d: %s", i + 1, msg[i]);
    }
    T_CHECK(seed_of(msg[0]) == 7 && seed_of(msg[1]) != 7 && seed_of(msg[1]) && seed_of(msg[2]) == 7,
            "each run says its seed: 7, a fresh one, 7 again: '%s' / '%s' / '%s'", msg[0], msg[1], msg[2]);
    forest_id lv[8];
    ui_worker_lock(w);
    int32_t n = leaves_below(w, root, lv, 8);
    T_CHECK(n == 2, "the fresh seed's branch differs, the repeated one is not made twice: %d branches", (int)n);
    ui_worker_unlock(w);
    best_run(w, root);
    temps_run(w, root);
out:
    stories_stop(w, c, tk, m);
}

/* The mask pane's attention weights: :set layer 3 and :set head 1, then a step keeps
 * that layer's and head's weights (every row's summing to 1); :set layer -1 turns them
 * off; a layer the model lacks is refused, naming its layers. */
static void test_attn_setting(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 2, .model_name = "m", .backend = "cpu"};
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024];
    ui_job set[4] = {{.kind = UI_JOB_SET, .text = "layer", .u.set.value = 3}, /* they say nothing: */
                     {.kind = UI_JOB_SET, .text = "head", .u.set.value = 1},  /* posted, not waited for */
                     {.kind = UI_JOB_SET, .text = "layer", .u.set.value = -1},
                     {.kind = UI_JOB_SET, .text = "layer", .u.set.value = 99}};
    ui_worker_post(w, &set[0]);
    ui_worker_post(w, &set[1]);
    T_CHECK(run_job(w, cmd_job(":grow 2", root), msg, sizeof msg), "grow: %s", msg);
    ui_worker_lock(w);
    mask_view *v = ui_worker_mask_mut(w);
    double worst = 0;
    for (int32_t r = 0; r < v->n_rows; r++) {
        double sum = 0;
        for (int32_t d = 0; d < v->n_dcols; d++) sum += fmax(0, mv_weight(v, r, d));
        worst = fmax(worst, fabs(sum - 1));
    }
    T_CHECK(v->attn_layer == 3 && v->attn_head == 1 && v->n_rows > 0 && worst < 2e-3,
            "the step kept layer %d head %d; rows sum within %g of 1", v->attn_layer, v->attn_head, worst);
    ui_worker_unlock(w);
    ui_worker_post(w, &set[2]);
    T_CHECK(run_job(w, cmd_job(":grow 1", root), msg, sizeof msg), "grow: %s", msg);
    ui_worker_lock(w);
    T_CHECK(ui_worker_mask(w)->attn_layer == -1, "off: no weights kept");
    ui_worker_unlock(w);
    run_job(w, set[3], msg, sizeof msg);
    T_CHECK(strstr(msg, "layers 0-4") != NULL, ":set layer 99 refused: %s", msg);
    /* [ and ]: the pane looks back at the kept steps, named, and forward again */
    ui_worker_lock(w);
    int32_t kept, last = ui_worker_mask(w)->step;
    int32_t back = ui_worker_mask_back(w, -1, &kept);
    const mask_view *old = ui_worker_mask(w);
    T_CHECK(kept == 3 && back == 1 && old->step == last - 1 && old->attn_layer == 3 &&
            !strcmp(old->kind, "grow"), "one back of %d: step %d of %d (%s), weights of layer %d",
            kept, old->step, last, old->kind, old->attn_layer);
    back = ui_worker_mask_back(w, -9, &kept);
    T_CHECK(back == 2 && ui_worker_mask(w)->step == 0 && !strcmp(ui_worker_mask(w)->kind, "prefill + grow"),
            "the oldest: step %d (%s)", ui_worker_mask(w)->step, ui_worker_mask(w)->kind);
    T_CHECK(ui_worker_mask_back(w, 5, &kept) == 0 && ui_worker_mask(w)->step == last, "] back to the last step");
    ui_worker_unlock(w);
out:
    stories_stop(w, c, tk, m);
}

/* What the nodes from leaf up to root (excluded) hold: how many are computed and how
 * many alternatives they keep; the tokens from root on into t (*n of them). */
static void branch_state(const forest *f, forest_id root, forest_id leaf, int32_t *t, int32_t *n, int32_t *computed,
                         int32_t *alts) {
    *n = tokens_below(f, root, leaf, t, 16);
    *computed = *alts = 0;
    for (int32_t i = forest_index(leaf); i >= 0 && i != forest_index(root); i = forest_node_at(f, i)->parent) {
        *computed += forest_node_at(f, i)->state == FOREST_COMPUTED;
        *alts += forest_topk(f, forest_id_at(f, i), NULL, NULL, 0);
    }
}

/* :grow, d on its branch, u: the branch comes back computed (it came back pending, to
 * be computed by hand with s), with its tokens and its choices (its end's too, which the
 * grow left pending). */
static void test_undo_computed(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 6, .model_name = "m", .backend = "cpu"};
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024];
    int32_t t0[16], t1[16], n0, n1, k0, k1, a0, a1;
    forest_id lv;
    T_CHECK(run_job(w, cmd_job(":grow", root), msg, sizeof msg), "grow: %s", msg);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    T_CHECK(leaves_below(w, root, &lv, 1) == 1, "one branch");
    branch_state(f, root, lv, t0, &n0, &k0, &a0);
    forest_id top = forest_id_at(f, forest_get(f, root)->first_child);
    ui_worker_unlock(w);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_PRUNE, .node = top}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_UNDO}, msg, sizeof msg),
            "d, u: %s", msg);
    ui_worker_lock(w);
    f = ui_worker_forest(w);
    T_CHECK(leaves_below(w, root, &lv, 1) == 1, "the branch is back");
    branch_state(f, root, lv, t1, &n1, &k1, &a1);
    ui_worker_unlock(w);
    T_CHECK(n0 > 1 && n1 == n0 && !memcmp(t0, t1, sizeof(int32_t) * (size_t)n0), "the same %d tokens", (int)n0);
    /* the step computes the grow's last token too, which it had left pending */
    T_CHECK(k0 >= n0 - 1 && k1 >= k0, "computed as before: %d of %d (before: %d)", (int)k1, (int)n1, (int)k0);
    T_CHECK(a0 > 0 && a1 >= a0, "its %d choices: %d", (int)a0, (int)a1);
    T_CHECK(strstr(msg, "as they were") != NULL, "says so: %s", msg);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The top of a chain under root that leaf is the end of (its node right below root). */
static forest_id chain_top(const forest *f, forest_id root, forest_id leaf) {
    for (const forest_node *nd; (nd = forest_get(f, leaf)) && nd->parent >= 0; leaf = forest_id_at(f, nd->parent))
        if (forest_id_at(f, nd->parent) == root) return leaf;
    return FOREST_NONE;
}

/* :cot 4 100, then p, d on one chain, p, as a user steers: the prune lands at the next
 * step boundary (it was refused: "cancel the running strategy before pruning"), the
 * chain is gone and the other three grow on to the budget; the run's summary counts it. */
/* Posts line under root and, once n_run leaves run 3 tokens deep, prunes running leaf 1's
 * chain between two steps (p d p, as a user steers); waits for the run's end message into
 * msg. Returns the pruned chain's top (FOREST_NONE: never pruned); *idle whether it ended. */
static forest_id prune_mid_run(ui_worker *w, const char *line, forest_id root, int32_t n_run, char *msg, size_t cap,
                               bool *idle) {
    forest_id top = FOREST_NONE, lv[8];
    ui_job j = cmd_job(line, root);
    ui_worker_lock(w);
    uint64_t no = ui_worker_message(w, msg, cap);
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    for (time_t t0 = time(NULL); top == FOREST_NONE && time(NULL) - t0 < 60; usleep(1000)) {
        ui_worker_lock(w);
        const forest *f = ui_worker_forest(w);
        int32_t n = ui_worker_running(w, lv, 8);
        if (n == n_run && forest_get(f, lv[1])->depth >= forest_get(f, root)->depth + 3) {
            top = chain_top(f, root, lv[1]);
            ui_job p = {.kind = UI_JOB_PAUSE}, d = {.kind = UI_JOB_PRUNE, .node = top};
            ui_worker_post(w, &p), ui_worker_post(w, &d), ui_worker_post(w, &p); /* between two steps */
        }
        ui_worker_unlock(w);
    }
    *idle = false;
    for (time_t t0 = time(NULL); !*idle && time(NULL) - t0 < 120; usleep(2000)) {
        ui_worker_lock(w);
        uint64_t at = ui_worker_message(w, msg, cap);
        *idle = at != no && !ui_worker_busy(w) && !strncmp(msg, "done", 4);
        if (at != no && !strncmp(msg, "paused", 6)) { /* a staged run (tot) stops between levels: p goes on */
            ui_job p = {.kind = UI_JOB_PAUSE};
            ui_worker_post(w, &p);
            no = at;
        }
        ui_worker_unlock(w);
    }
    return top;
}

static void test_prune_during_run(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root, lv[8];
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 8, .model_name = "m", .backend = "cpu"};
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024];
    bool idle;
    forest_id top = prune_mid_run(w, ":cot 4 100", root, 4, msg, sizeof msg, &idle);
    ui_worker_lock(w);
    const forest *f = ui_worker_forest(w);
    int32_t n = leaves_below(w, root, lv, 8), full = 0;
    for (int32_t i = 0; i < n; i++) full += forest_get(f, lv[i])->depth == forest_get(f, root)->depth + 100;
    T_CHECK(top != FOREST_NONE && !forest_get(f, top) && n == 3 && full == 3,
            "d during :cot 4 100: the chain is gone, the other %d grew to the budget (%d of them)", (int)n, (int)full);
    ui_worker_unlock(w);
    T_CHECK(idle && strstr(msg, "done: 4 of 4 chains") && strstr(msg, "budget (3), pruned (1)"), "the summary: %s",
            msg);
    /* once the run is over, u puts the chain back */
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_UNDO}, msg, sizeof msg) && strstr(msg, "restored"), "u after: %s", msg);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* :tot 3 3 1 (every thought kept) with a thought pruned while it grows (100 tokens each, so that
 * the test, descheduled on a loaded machine, still catches the growth): the search goes on
 * with the other two (it was refused: "tot cannot lose a branch while it runs") and ends. */
static void test_prune_tot_during_run(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 8, .model_name = "m", .backend = "cpu"};
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024];
    bool idle;
    forest_id top = prune_mid_run(w, ":tot 3 3 1 100", root, 3, msg, sizeof msg, &idle);
    ui_worker_lock(w);
    bool gone = top != FOREST_NONE && !forest_get(ui_worker_forest(w), top);
    ui_worker_unlock(w);
    T_CHECK(gone && idle, "d during :tot 3 3 1 (which keeps every thought): the thought is gone (%d), ended: %s",
            gone, msg);
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* What a long pass reported (forward_progress), and after how many reports it stops. */
typedef struct pass_log {
    int32_t done[16], rows, n, stop_at;
} pass_log;

static bool log_pass(void *ud, int32_t done, int32_t rows) {
    pass_log *l = ud;
    if (l->n < 16) l->done[l->n] = done;
    l->rows = rows;
    return ++l->n != l->stop_at;
}

/* A 40-token prompt in passes of 8 rows (the TUI showed nothing for 20 s while a long
 * prompt ran): the step reports 0, 8, 16, 24, 32 of 40 rows, and stopped at the third
 * report (x) it returns ST_CANCELLED with the prompt pending and the forest whole, and
 * the same step run again gives the logits of an uninterrupted one. */
static void test_prefill_progress(void) {
    model *m;
    tok *tk;
    model_ctx *c = NULL;
    if (!t_stories(&m, &tk) || !(c = t_new_ctx_rows(m, 64, 8))) goto out;
    int32_t prompt[40];
    for (int32_t i = 0; i < 40; i++) prompt[i] = i ? 300 + i : tok_bos(tk);
    st_err err = {0};
    forest *f = forest_init(64, 4);
    forest_id leaf;
    forest_add_root(f, prompt, NULL, 40, 0, &leaf, &err);
    step_plan p;
    step_plan_init(&p);
    pass_log l = {.stop_at = 3};
    p.forward_progress = log_pass, p.forward_ud = &l;
    st_code rc = step_forest(f, &p, c, &err);
    T_CHECK(rc == ST_CANCELLED && l.n == 3 && l.done[2] == 16 && l.rows == 40,
            "stopped at the third report: %d (%s), %d reports, the last %d of %d", (int)rc, err.msg, (int)l.n,
            (int)l.done[l.n > 0 ? l.n - 1 : 0], (int)l.rows);
    T_CHECK(forest_n_pending(f) == 40 && forest_check(f, &err) == ST_OK, "the prompt pending, the forest whole: %d",
            (int)forest_n_pending(f));
    l = (pass_log){.stop_at = -1};
    rc = step_forest(f, &p, c, &err);
    T_CHECK(!rc && l.n == 5 && l.done[0] == 0 && l.done[4] == 32 && forest_n_pending(f) == 0,
            "run again: %d reports, 0 .. %d of %d rows, %d pending (%s)", (int)l.n, (int)l.done[l.n > 4 ? 4 : 0],
            (int)l.rows, (int)forest_n_pending(f), err.msg);
    int32_t ids[4], ids0[4];
    float lps[4], lps0[4];
    int32_t k = forest_topk(f, leaf, ids, lps, 4);
    model_ctx *c0 = t_new_ctx_rows(m, 64, 64);
    forest *g = forest_init(64, 4);
    forest_id leaf0;
    forest_add_root(g, prompt, NULL, 40, 0, &leaf0, &err);
    step_plan p0;
    step_plan_init(&p0);
    int32_t k0 = c0 && !step_forest(g, &p0, c0, &err) ? forest_topk(g, leaf0, ids0, lps0, 4) : 0;
    T_CHECK(k == 4 && k0 == 4 && !memcmp(ids, ids0, sizeof ids) && fabsf(lps[0] - lps0[0]) < 1e-4f,
            "the same choices as one uninterrupted pass: %d %d, %d/%d", (int)k, (int)k0, (int)ids[0], (int)ids0[0]);
    step_plan_free(&p0), step_plan_free(&p);
    forest_free(g), forest_free(f);
    model_ctx_free(c0);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The timed autosave to path (quiet) after a run: true when it saved and the message
 * line still holds the run's summary (it said "saved PATH" over it); the message in msg. */
static bool quiet_save(ui_worker *w, const char *path, char *msg, size_t cap) {
    char before[1024];
    ui_worker_lock(w);
    ui_worker_message(w, before, sizeof before);
    ui_job j = {.kind = UI_JOB_SAVE, .text = path, .u.save = {.autosave = true, .quiet = true}};
    ui_worker_post(w, &j);
    ui_worker_unlock(w);
    bool saved = false;
    for (time_t t0 = time(NULL); !saved && time(NULL) - t0 < 30; usleep(2000)) {
        ui_worker_lock(w);
        saved = ui_worker_unsaved_since(w) == 0;
        ui_worker_message(w, msg, cap);
        ui_worker_unlock(w);
    }
    return saved && !strcmp(msg, before) && !strncmp(msg, "done", 4);
}

/* :beam 3 8, then :keep 1 and u: the three scores again; :save, :load: the same three on
 * the loaded forest's leaves, and :export's Markdown names them. */
static void test_scores_last(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker *w = saving_worker(8, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024], path[64], md[64];
    double before[8], after[8];
    T_CHECK(run_job(w, cmd_job(":beam 3 8", root), msg, sizeof msg), "beam: %s", msg);
    ui_worker_lock(w);
    int32_t n = scores_below(w, root, before, 8);
    ui_worker_unlock(w);
    T_CHECK(n == 3, "beam 3: %d scored leaves", (int)n);
    snprintf(path, sizeof path, "/tmp/test_ui_runs.%d.json", (int)getpid());
    T_CHECK(quiet_save(w, path, msg, sizeof msg), "the timed autosave leaves the run's summary: '%s'", msg);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_KEEP, .node = root, .u.keep.n = 1}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_UNDO}, msg, sizeof msg), ":keep 1, u: %s", msg);
    ui_worker_lock(w);
    int32_t k = scores_below(w, root, after, 8);
    ui_worker_unlock(w);
    T_CHECK(k == n && !memcmp(before, after, sizeof(double) * (size_t)n),
            "undo after :keep 1 restores the scores: %d of %d, best %.4f (was %.4f)", (int)k, (int)n, k ? after[0] : NAN,
            before[0]);
    snprintf(path, sizeof path, "/tmp/test_ui_runs.%d.json", (int)getpid());
    snprintf(md, sizeof md, "/tmp/test_ui_runs.%d.md", (int)getpid());
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_SAVE, .text = path}, msg, sizeof msg) &&
                run_job(w, (ui_job){.kind = UI_JOB_LOAD, .text = path}, msg, sizeof msg),
            ":save, :load: %s", msg);
    ui_worker_lock(w);
    forest_id roots[4];
    k = forest_roots(ui_worker_forest(w), roots, 4) == 1 ? scores_below(w, roots[0], after, 8) : 0;
    ui_worker_unlock(w);
    bool same = k == n; /* the file keeps 9 significant digits */
    for (int32_t i = 0; i < k; i++) same &= fabs(after[i] - before[i]) < 1e-6;
    T_CHECK(same, ":load restores the scores: %d of %d, best %.4f (was %.4f)", (int)k, (int)n, k ? after[0] : NAN, before[0]);
    T_CHECK(run_job(w, (ui_job){.kind = UI_JOB_EXPORT, .text = md}, msg, sizeof msg), ":export: %s", msg);
    FILE *in = fopen(md, "r");
    char text[16384] = "", want[64];
    if (in) text[fread(text, 1, sizeof text - 1, in)] = 0, fclose(in);
    snprintf(want, sizeof want, "[score %.4f]", before[0]);
    T_CHECK(strstr(text, want) != NULL, "the Markdown export names the best score: '%s' not in\n%.600s", want, text);
    remove(path), remove(md);
out:
    stories_stop(w, c, tk, m);
}

int main(void) {
    test_registry_command();
    test_compact();
    test_beam_agrees();
    test_fresh_seeds();
    test_scores_last();
    test_attn_setting();
    test_undo_computed();
    test_prune_during_run();
    test_prune_tot_during_run();
    test_names_last();
    test_prefill_progress();
    return t_done();
}
