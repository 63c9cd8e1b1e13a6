/* spec.c - `multidecode bench spec`: exact speculative decoding (drafts
 * verified as a tree, lookahead decoding) against plain decoding, greedy and sampled,
 * JSON out.
 *
 * Three tasks: code completion (a Python class as plain text, for the model to go on
 * writing: code repeats its own patterns), and, as user messages in the model's chat
 * template when it has one, summarisation of a given document (copies phrases of it) and
 * free story writing (little to copy). For each task the
 * prompt but its last token is prefilled untimed; then each setting decodes up to -n
 * greedy tokens (stopping at end-of-generation) and is timed from there: plain greedy
 * (one token per forward pass, the `generate` path) first, then every draft setting, in
 * one run, side by side. Each run reports steps, tokens per step, draft and window rows,
 * seconds, tokens/s, the speedup over plain, and whether its tokens equal plain greedy's
 * (they must: the methods are exact). Each setting runs --repeat times, interleaved with
 * the others, and its fastest run is reported. Sampled cases (--temps, default 0, 0.7
 * and 1: the default top-k, top-p and min-p, seed 1) run the same way against plain
 * sampling, whose tokens they must equal too (the same seed draws the same tokens);
 * each run says its temperature. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "forest/sample.h"
#include "spec/spec.h"
#include "forest/step.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"
#include "app/strategy_run.h"
#include "app/prompt.h"

static const char bs_code[] =
    "import math\n\n\n"
    "class Vector:\n"
    "    \"\"\"A 3-D vector.\"\"\"\n\n"
    "    def __init__(self, x, y, z):\n"
    "        self.x = x\n"
    "        self.y = y\n"
    "        self.z = z\n\n"
    "    def __add__(self, other):\n"
    "        return Vector(self.x + other.x, self.y + other.y, self.z + other.z)\n\n"
    "    def __sub__(self, other):\n"
    "        return Vector(self.x - other.x, self.y - other.y, self.z - other.z)\n\n"
    "    def __mul__(self, k):\n"
    "        return Vector(self.x * k, self.y * k, self.z * k)\n\n"
    "    def dot(self, other):\n"
    "        return self.x * other.x + self.y * other.y + self.z * other.z\n";

static const char bs_summary[] =
    "Summarize the following article in a few sentences.\n\n"
    "The city council of Riverton voted on Tuesday to build a new public library on the site "
    "of the old train station. The library will have three floors, a children's reading room, "
    "a makerspace with 3D printers, and a rooftop garden that will be open to the public. The "
    "project is expected to cost 24 million dollars, of which 15 million will come from a "
    "state grant and the rest from a local bond approved by voters last year. Construction "
    "will begin in the spring and is planned to take two years. Mayor Elena Ortiz said the "
    "new library would be a place where people of all ages could learn, meet and share ideas. "
    "Some residents had asked the council to keep the old train station as a museum, but the "
    "council decided that the building was too damaged to repair. The train station's clock "
    "tower will be kept and placed at the entrance of the new library. The current library, "
    "which opened in 1962, will close when the new one opens, and its building will become a "
    "community center.\n";

static const char bs_story[] =
    "Write a short story about a robot who learns to paint.\n";

static const struct {
    const char *name, *text;
    bool chat; /* a user message in the chat template (when the model has one) */
} bs_tasks[] = {{"code", bs_code, false}, {"summary", bs_summary, true}, {"story", bs_story, true}};
#define BS_N_TASKS ((int)(sizeof bs_tasks / sizeof bs_tasks[0]))

/* The default settings: drafts (adaptive and fixed lengths) and a lookahead grid. */
static const char *const bs_default_settings =
    "draft;draft:len=4,fixed,drafts=1;la:5,4,4;la:5,4,4+always;la:2,3,2+draft";

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BENCH_SPEC_USAGE "usage: multidecode bench spec -m MODEL [options]"

static void bs_usage(FILE *f) {
    fprintf(f,
            BENCH_SPEC_USAGE "\n\n"
            "  -m, --model PATH     GGUF model file (its tokenizer makes the prompts)\n"
            "  -t, --threads N      CPU threads (default: one per core)\n"
            "  -n, --tokens N       greedy tokens per task (default 128; fewer when the\n"
            "                       model ends its answer)\n"
            "      --tasks LIST     comma-separated subset of code,summary,story\n"
            "      --settings LIST  ';'-separated settings (default \"%s\"):\n"
            "                       draft[:len=K,drafts=M,rows=R,key=G,pool=N,fixed] or\n"
            "                       la:W,N,G[+draft][+always] (lookahead; +draft adds prompt\n"
            "                       lookup, +always runs the window at every step)\n"
            "      --raw            prompts as plain text, no chat template\n"
            "      --repeat N       runs of every setting, interleaved; the fastest counts\n"
            "                       (default 3: timings on a shared machine wander)\n"
            "      --temps LIST     comma-separated temperatures, each against plain decoding\n"
            "                       at it (default 0,0.7,1; 0 = greedy)\n",
            bs_default_settings);
}

/* Parses "0,0.7,1" into t[0..cap); the count, 0 when malformed. */
static int bs_parse_temps(const char *s, double *t, int cap) {
    int n = 0;
    for (;;) {
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 0 || v > 10 || n == cap) return 0;
        t[n++] = v;
        if (!*end) return n;
        if (*end != ',') return 0;
        s = end + 1;
    }
}

/* Parses one setting; false when malformed. */
static bool bs_parse_setting(const char *s, spec_params *sp) {
    *sp = spec_default_params();
    if (!strncmp(s, "la:", 3)) {
        int w, n, g, end = 0;
        if (sscanf(s + 3, "%d,%d,%d%n", &w, &n, &g, &end) != 3 || w < 1 || n < 2 || n > 16 || g < 0)
            return false;
        sp->la = (lookahead_params){.w = w, .n = n, .g = g, .seed = 1};
        sp->draft_len = 0;
        for (const char *r = s + 3 + end; *r;) {
            if (!strncmp(r, "+draft", 6)) {
                sp->draft_len = spec_default_params().draft_len;
                r += 6;
            } else if (!strncmp(r, "+always", 7)) {
                sp->la_adaptive = false;
                r += 7;
            } else {
                return false;
            }
        }
        return true;
    }
    if (strncmp(s, "draft", 5)) return false;
    s += 5;
    if (!*s) return true;
    if (*s++ != ':') return false;
    while (*s) {
        int v, end = 0;
        if (!strncmp(s, "fixed", 5)) {
            sp->adaptive = false;
            end = 5;
        } else if (sscanf(s, "len=%d%n", &v, &end) == 1 && v >= 0 && v <= 256) sp->draft_len = v;
        else if (sscanf(s, "drafts=%d%n", &v, &end) == 1 && v >= 0 && v <= 64) sp->n_drafts = v;
        else if (sscanf(s, "rows=%d%n", &v, &end) == 1 && v >= 0 && v <= 4096) sp->max_rows = v;
        else if (sscanf(s, "key=%d%n", &v, &end) == 1 && v >= 1 && v <= 16) {
            sp->key_min = v;
            if (sp->key_max < v) sp->key_max = v;
        } else if (sscanf(s, "pool=%d%n", &v, &end) == 1 && (v == 0 || (v >= 2 && v <= 16))) sp->pool_n = v;
        else return false;
        s += end;
        if (*s == ',') s++;
        else if (*s) return false;
    }
    return true;
}

typedef struct bs_run {
    int32_t *toks;
    int32_t n;
    int64_t steps, draft_rows, la_rows;
    double secs;
    double row_cost; /* the policy's row cost at the end (0: plain) */
} bs_run;

/* Plain decoding (greedy at temp 0): one token per forward pass after the prefilled
 * prompt[0..np-1), drawn as `generate` draws. */
static st_code bs_plain(prompt_model *pm, const int32_t *prompt, int32_t np, int32_t n_gen,
                        const sample_params *smp, bs_run *r, st_err *err) {
    int32_t V = pm->m->hp.n_vocab;
    float *lg = malloc(sizeof(float) * (size_t)V);
    sampler sm = {0};
    if (!lg || sampler_init(&sm, smp, V)) {
        free(lg);
        sampler_free(&sm);
        return st_set(err, ST_ERR_NOMEM, "out of memory");
    }
    st_code rc = model_forward_linear(pm->ctx, prompt, np - 1, 0, lg, err);
    double t0 = mono_now_s();
    int32_t cur = prompt[np - 1];
    r->n = 0;
    for (int32_t i = 0; !rc && r->n < n_gen; i++) {
        if ((rc = model_forward_linear(pm->ctx, &cur, 1, np - 1 + i, lg, err))) break;
        r->steps++;
        cur = sampler_sample(&sm, lg, V);
        if (tok_is_eog(pm->tk, cur)) break;
        r->toks[r->n++] = cur;
    }
    r->secs = mono_now_s() - t0;
    sampler_free(&sm);
    free(lg);
    return rc;
}

static void bs_collect(void *ud, int32_t branch, int32_t token, float logprob) {
    (void)branch, (void)logprob;
    bs_run *r = ud; /* the strategy's budget keeps r->n below n_gen */
    r->toks[r->n++] = token;
}

/* The draft or lookahead strategy (strategy.h) after the prefilled prompt[0..np-1) (its
 * last token pending), as `generate --draft` runs it. */
static st_code bs_spec(prompt_model *pm, const int32_t *prompt, int32_t np, int32_t n_gen,
                       const spec_params *sp, bs_run *r, st_err *err) {
    forest *f = forest_init(pm->n_slots, 0);
    step_plan p;
    step_plan_init(&p);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &p, .ctx = pm->ctx, .tk = pm->tk, .emit = bs_collect,
                        .emit_ud = r};
    strategy_opts so = strategy_opts_for(strategy_find(sp->la.w > 0 ? "lookahead" : "draft"));
    so.u.spec.p = *sp, so.budget = n_gen, so.n_vocab = pm->m->hp.n_vocab;
    app_run_stats st = {0};
    forest_id last;
    r->n = 0;
    st_code rc = f ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = forest_add_root(f, prompt, NULL, np - 1, 0, &last, err);
    if (!rc) rc = step_forest(f, &p, pm->ctx, err);
    if (!rc) rc = forest_append(f, last, &prompt[np - 1], NULL, 1, &so.from, err);
    if (!rc && !(s = strategy_create(&so, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, NULL, NULL, err);
    if (!rc && st.full) rc = st_set(err, ST_NO_KV_SLOT, "bench spec: the KV cache is full");
    r->secs = st.t2 - st.t0;
    if (s) {
        const spec *d = strategy_spec(s);
        const spec_stats *ss = spec_get_stats(d);
        r->steps = ss->steps;
        r->draft_rows = ss->draft_rows;
        r->la_rows = ss->la_rows;
        r->row_cost = spec_row_cost(d);
    }
    strategy_free(s);
    step_plan_free(&p);
    forest_free(f);
    return rc;
}

/* One setting's fastest run at temperature temp against plain decoding's. */
static json_t *bs_run_json(const char *setting, double temp, const bs_run *r, const bs_run *plain, bool same) {
    json_t *o = json_object();
    jo_set(&o, "setting", jo_str(setting));
    jo_set(&o, "temp", json_real(temp));
    jo_set(&o, "tokens", json_integer(r->n));
    jo_set(&o, "steps", json_integer(r->steps));
    jo_set(&o, "tokens_per_step", jo_fixed(r->steps ? (double)r->n / (double)r->steps : 0.0, 3));
    jo_set(&o, "draft_rows", json_integer(r->draft_rows));
    jo_set(&o, "window_rows", json_integer(r->la_rows));
    jo_set(&o, "seconds", jo_fixed(r->secs, 4));
    jo_set(&o, "tok_s", jo_fixed(r->n / (r->secs + 1e-12), 2));
    jo_set(&o, "speedup", jo_fixed(plain->secs / (r->secs + 1e-12) *
                                   ((double)r->n / (plain->n ? plain->n : 1)), 3));
    jo_set(&o, "row_cost", jo_fixed(r->row_cost, 3));
    jo_set(&o, "same_as_plain", json_boolean(same));
    return o;
}

/* The bench's settings and scratch: setting 0 is plain greedy, setting i > 0 is
 * names[i - 1] with sps[i - 1]; best[i] keeps setting i's fastest run of a task. */
typedef struct bs_bench {
    prompt_model pm;
    char *names[64];
    spec_params sps[64];
    int n_sets;
    int64_t n_gen, repeats;
    bool raw;
    double temps[8];          /* each run at every one of these temperatures */
    int n_temps;
    bs_run run, best[65];
    bool same[65];            /* setting i made plain greedy's tokens every time */
} bs_bench;

/* Task t's prompt tokens (malloc'd): chat-templated when the task is a chat and the
 * model has a template. *chat says which. NULL with err set. */
static int32_t *bs_task_prompt(bs_bench *b, int t, int32_t *np, bool *chat, st_err *err) {
    prompt_chat pc = {.on = !b->raw && bs_tasks[t].chat, .raw = b->raw || !bs_tasks[t].chat};
    chat_kind kind = CHAT_NONE;
    int32_t *prompt = prompt_tokens(&b->pm, &pc, bs_tasks[t].text, np, &kind, err);
    if (!prompt && pc.on) { /* no chat template: the text as it is */
        pc.on = false;
        prompt = prompt_tokens(&b->pm, &pc, bs_tasks[t].text, np, &kind, err);
    }
    *chat = kind != CHAT_NONE;
    return prompt;
}

/* Every setting run b->repeats times on one prompt, interleaved; each keeps its fastest
 * run, and must make plain greedy's tokens every time. */
static st_code bs_settings(bs_bench *b, const int32_t *prompt, int32_t np, const sample_params *smp,
                           st_err *err) {
    st_code rc = ST_OK;
    spec_params st[64];
    for (int i = 0; i <= b->n_sets; i++) {
        b->best[i].secs = -1;
        b->same[i] = true;
        if (i) st[i - 1] = b->sps[i - 1], st[i - 1].samp = *smp;
    }
    for (int64_t rep = 0; rep < b->repeats && !rc; rep++)
        for (int i = 0; i <= b->n_sets && !rc; i++) {
            bs_run *run = &b->run, *best = &b->best[i];
            run->steps = run->draft_rows = run->la_rows = 0;
            run->row_cost = 0;
            rc = i == 0 ? bs_plain(&b->pm, prompt, np, (int32_t)b->n_gen, smp, run, err)
                        : bs_spec(&b->pm, prompt, np, (int32_t)b->n_gen, &st[i - 1], run, err);
            if (rc) break;
            if (i > 0) b->same[i] = b->same[i] && run->n == b->best[0].n &&
                                    !memcmp(run->toks, b->best[0].toks, sizeof(int32_t) * (size_t)run->n);
            if (best->secs < 0 || run->secs < best->secs) {
                int32_t *keep = best->toks;
                *best = *run;
                best->toks = keep;
                memcpy(keep, run->toks, sizeof(int32_t) * (size_t)run->n);
            }
        }
    return rc;
}

/* Task t: its report appended to *tasks. ST_ERR_CONTEXT when it does not fit. */
static st_code bs_task(bs_bench *b, int t, json_t **tasks, st_err *err) {
    int32_t np = 0;
    bool chat = false;
    int32_t *prompt = bs_task_prompt(b, t, &np, &chat, err);
    if (!prompt) return err->code;
    st_code rc = ST_OK;
    if (np < 2 || np + b->n_gen + 64 > b->pm.n_slots)
        rc = st_set(err, ST_ERR_CONTEXT, "task %s: %d prompt tokens + %lld do not fit %d "
                    "KV slots (raise -c or lower -n)", bs_tasks[t].name, np, (long long)b->n_gen,
                    b->pm.n_slots);
    json_t *runs = json_array();
    for (int ti = 0; ti < b->n_temps && !rc; ti++) {
        sample_params smp = sample_default_params();
        smp.temp = (float)b->temps[ti];
        if ((rc = bs_settings(b, prompt, np, &smp, err))) break;
        for (int i = 0; i <= b->n_sets; i++)
            jo_push(&runs, bs_run_json(i ? b->names[i - 1] : "plain", b->temps[ti], &b->best[i], &b->best[0],
                                       b->same[i]));
    }
    free(prompt);
    if (rc) {
        json_decref(runs);
        return rc;
    }
    json_t *task = json_object();
    jo_set(&task, "task", jo_str(bs_tasks[t].name));
    jo_set(&task, "prompt_tokens", json_integer(np));
    jo_set(&task, "chat", json_boolean(chat));
    jo_set(&task, "repeats", json_integer(b->repeats));
    jo_set(&task, "runs", runs);
    jo_push(tasks, task);
    return ST_OK;
}

/* Opens the model, runs the tasks named in `tasks` and prints the report. */
static st_code bs_bench_run(bs_bench *b, const prompt_model_opts *mo, const char *tasks, st_err *err) {
    int n_sets = b->n_sets;
    int64_t n_gen = b->n_gen;
    if (prompt_model_open(&b->pm, mo, err)) return err->code;
    b->run.toks = malloc(sizeof(int32_t) * (size_t)n_gen);
    st_code rc = b->run.toks ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int i = 0; i <= n_sets && !rc; i++)
        if (!(b->best[i].toks = malloc(sizeof(int32_t) * (size_t)n_gen)))
            rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    json_t *list = json_array();
    for (int t = 0; t < BS_N_TASKS && !rc; t++)
        if (strstr(tasks, bs_tasks[t].name)) rc = bs_task(b, t, &list, err);
    if (!rc) {
        json_t *doc = json_object();
        jo_set(&doc, "bench", jo_str("spec"));
        jo_set(&doc, "model", jo_str(mo->path));
        jo_set(&doc, "threads", json_integer(kern_backend_threads(model_ctx_backend(b->pm.ctx))));
        jo_set(&doc, "max_tokens", json_integer(n_gen));
        jo_set(&doc, "tasks", list);
        rc = jo_print(doc, err);
    } else {
        json_decref(list);
    }
    for (int i = 0; i <= n_sets; i++) free(b->best[i].toks);
    free(b->run.toks);
    prompt_model_close(&b->pm);
    return rc;
}

int cmd_bench_spec(int argc, char **argv) {
    enum { O_TASKS = 1000, O_SETTINGS, O_RAW, O_BACKEND, O_REPEAT, O_TEMPS };
    static const struct option lo[] = {
        {"model", 1, 0, 'm'},     {"threads", 1, 0, 't'},        {"tokens", 1, 0, 'n'},
        {"tasks", 1, 0, O_TASKS}, {"settings", 1, 0, O_SETTINGS}, {"raw", 0, 0, O_RAW},
        {"backend", 1, 0, O_BACKEND}, {"repeat", 1, 0, O_REPEAT}, {"temps", 1, 0, O_TEMPS}, {"help", 0, 0, 'h'},       {0, 0, 0, 0}};
    prompt_model_opts mo = prompt_model_default_opts();
    const char *tasks = "code,summary,story", *settings = bs_default_settings;
    int64_t n_gen = 128, v, repeats = 3;
    bool raw = false;
    double temps[8] = {0, 0.7, 1.0};
    int n_temps = 3, ch;
    while ((ch = getopt_long(argc, argv, "m:t:n:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': mo.path = optarg; break;
        case 't':
            if (app_opt_int("-t", optarg, 1, 1024, &v)) return 2;
            mo.threads = (int32_t)v;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 1, 1 << 16, &n_gen)) return 2;
            break;
        case O_TASKS: tasks = optarg; break;
        case O_SETTINGS: settings = optarg; break;
        case O_RAW: raw = true; break;
        case O_REPEAT:
            if (app_opt_int("--repeat", optarg, 1, 100, &repeats)) return 2;
            break;
        case O_TEMPS:
            if (!(n_temps = bs_parse_temps(optarg, temps, 8)))
                return app_usage_error("bad --temps '%s' (want up to 8 numbers 0..10, e.g. 0,0.7,1)", optarg);
            break;
        case O_BACKEND: mo.backend = optarg; break;
        case 'h': bs_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode bench spec --help", BENCH_SPEC_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!mo.path) return app_usage_error("bench spec needs a model: -m MODEL");
    /* settings, checked before the model loads */
    char *sets = strdup(settings);
    char *names[64];
    spec_params sps[64];
    int n_sets = 0;
    for (char *save = NULL, *tkn = strtok_r(sets, ";", &save); tkn; tkn = strtok_r(NULL, ";", &save)) {
        if (n_sets == 64 || !bs_parse_setting(tkn, &sps[n_sets])) {
            free(sets);
            return app_usage_error("bad setting '%s' (see --help)", tkn);
        }
        names[n_sets++] = tkn;
    }
    st_err err = {0};
    bs_bench *b = calloc(1, sizeof *b);
    st_code rc = b ? ST_OK : st_set(&err, ST_ERR_NOMEM, "out of memory");
    if (b) {
        *b = (bs_bench){.n_sets = n_sets, .n_gen = n_gen, .repeats = repeats, .raw = raw, .n_temps = n_temps};
        memcpy(b->names, names, sizeof(char *) * (size_t)n_sets);
        memcpy(b->sps, sps, sizeof(spec_params) * (size_t)n_sets);
        memcpy(b->temps, temps, sizeof(double) * (size_t)n_temps);
        rc = bs_bench_run(b, &mo, tasks, &err);
    }
    free(b);
    free(sets);
    return rc ? app_fail(&err) : 0;
}
