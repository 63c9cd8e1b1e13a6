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

/* A SmolLM2 worker with its chat template over a fresh forest; NULL (skipped or
 * failed) when the model is absent. *m, *tk, *c are the caller's to free. */
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
    const char *jinja = NULL;
    if (*m) gguf_get_str((*m)->gguf, "tokenizer.chat_template", &jinja, NULL);
    static char sys[512];
    chat_default_system(jinja, sys, sizeof sys);
    ui_worker_params wp = {.ctx = *c, .tk = *tk, .f = forest_init(1024, 8), .sp = sample_default_params(),
                           .budget = 32, .model_name = "smol", .backend = "cpu",
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
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

/* The worker's save and load (app/cmd_tui.c's, less the model check): the session with
 * the scores the worker hands over. */
static st_code save_cb(void *ud, const char *path, const forest *f, const sample_params *sp, session_meta *meta,
                       st_err *err) {
    session_settings s = session_settings_default();
    s.sample = *sp;
    s.meta = meta;
    st_code rc = session_save(path, f, &s, NULL, ud, err);
    s.meta = NULL;
    session_settings_free(&s);
    return rc;
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

/* :beam 3 8, then :keep 1 and u: the three scores again; :save, :load: the same three on
 * the loaded forest's leaves, and :export's Markdown names them. */
static void test_scores_last(void) {
    model *m;
    tok *tk;
    model_ctx *c;
    forest_id root;
    ui_worker_params wp = {.sp = sample_default_params(), .budget = 8, .save = save_cb, .load = load_cb,
                           .model_name = "m", .backend = "cpu"};
    ui_worker *w = stories_worker(&wp, &m, &tk, &c, &root);
    if (!w) goto out;
    char msg[1024], path[64], md[64];
    double before[8], after[8];
    T_CHECK(run_job(w, cmd_job(":beam 3 8", root), msg, sizeof msg), "beam: %s", msg);
    ui_worker_lock(w);
    int32_t n = scores_below(w, root, before, 8);
    ui_worker_unlock(w);
    T_CHECK(n == 3, "beam 3: %d scored leaves", (int)n);
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
    ui_worker_stop(w);
out:
    model_ctx_free(c);
    tok_free(tk);
    model_free(m);
}

int main(void) {
    test_registry_command();
    test_beam_agrees();
    test_fresh_seeds();
    test_scores_last();
    return t_done();
}
