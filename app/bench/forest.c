/* forest.c - `multidecode bench forest` and `bench ask`: what sharing a prefix
 * in one forest buys, measured against the two usual ways of doing the same work, side by
 * side in one run, JSON on stdout.
 *
 * A job is n_seq sequences that all start with the same prefix (synthetic tokens), each
 * followed by its own suffix (none for `forest`, a synthetic question for `ask`), each
 * generating `gen` tokens (sequence i samples with seed + i; no end-of-generation stop).
 * It is run three ways:
 *   forest      one root chain for the prefix, the suffixes under it, every sequence
 *               advanced by one shared step per token (the prefix computed and stored once);
 *   sequential  n_seq linear decodes one after the other, each its own prefill (the naive
 *               baseline: nothing reused);
 *   copied      n_seq independent roots, each holding its own copy of the prefix, advanced
 *               together in one batch per step (plain batching without prefix sharing).
 * All three make the same tokens (the same logits, the same samplers), which is checked.
 * KV figures: slots in use at the end (the last sampled token of each sequence is never
 * computed), against the exact count prefix + suffixes + computed branch tokens, and
 * bytes = slots x n_layer x 2 (K and V) x kv_dim x 4 (f32). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "forest/forest.h"
#include "strategy/strategy.h"
#include "forest/step.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"
#include "app/strategy_run.h"

/* The synthetic-token stream of seed (bench_synth's start state). */
static inline uint64_t bf_state(uint64_t seed) { return seed * 0x9E3779B97F4A7C15ULL + 12345; }
#include "app/prompt.h"

typedef struct bf_opts {
    prompt_model_opts mo;    /* -m, -t, --backend (n_ctx unused: runs size their own) */
    bool sequential, copied; /* run the baselines */
    int32_t repeat;          /* times the three runs are repeated, interleaved (>= 1) */
} bf_opts;

enum { BF_MAX_REPEAT = 99 };

typedef struct bf_job {
    const int32_t *prefix;  /* (n_prefix) */
    int32_t n_prefix;
    int32_t n_seq;
    int32_t *const *suffix; /* (n_seq) arrays of n_suffix[i] tokens; NULL: none */
    const int32_t *n_suffix;
    int32_t gen;            /* tokens sampled per sequence, >= 1 */
    sample_params sp;
} bf_job;

typedef struct bf_res {
    double prefill_s, decode_s;
    int64_t decode_tokens;  /* tokens computed after the prefill */
    int32_t steps;          /* forward passes after the prefill (all sequences) */
    double *step_s;         /* each one's seconds (room for n_seq * gen) */
    double step_med_s;      /* their median (bf_median_step) */
    double step_min_s;      /* the fastest of them */
    int64_t kv_slots, kv_expected;
    int32_t *tokens;        /* (n_seq, gen) sampled tokens */
} bf_res;

static int32_t bf_suffix_len(const bf_job *j, int32_t i) { return j->suffix ? j->n_suffix[i] : 0; }


/* Times each step after the prefill (the tick of a forest run). */
typedef struct bf_clock {
    bf_res *r;
    double last; /* when the previous step ended */
} bf_clock;

static bool bf_step_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    (void)s, (void)env;
    bf_clock *k = ud;
    double now = mono_now_s();
    if (st->steps > 1) k->r->step_s[k->r->steps++] = now - k->last;
    k->last = now;
    return true;
}

/* The prefix and the suffixes into f, shared (one prefix chain, the suffixes under it) or
 * copied (a root per sequence with its own copy of the prefix); starts[i] gets sequence
 * i's last node. buf has room for the prefix and the longest suffix. */
static st_code bf_layout(forest *f, const bf_job *j, bool share, int32_t *buf, forest_id *starts,
                         st_err *err) {
    forest_id pl = FOREST_NONE;
    st_code rc = share ? forest_add_root(f, j->prefix, NULL, j->n_prefix, 0, &pl, err) : ST_OK;
    for (int32_t i = 0; i < j->n_seq && !rc; i++) {
        int32_t ns = bf_suffix_len(j, i);
        starts[i] = pl;
        if (share && ns > 0) {
            rc = forest_append(f, pl, j->suffix[i], NULL, ns, &starts[i], err);
        } else if (!share) {
            memcpy(buf, j->prefix, sizeof(int32_t) * (size_t)j->n_prefix);
            if (ns) memcpy(buf + j->n_prefix, j->suffix[i], sizeof(int32_t) * (size_t)ns);
            rc = forest_add_root(f, buf, NULL, j->n_prefix + ns, 0, &starts[i], err);
        }
    }
    return rc;
}

/* The job in one forest through the grow strategy (strategy.h; sequence i grows from its
 * own start with seed + i): shared, or copied, the copied-prefix baseline being the same
 * strategy over a forest that shares nothing. */
static st_code bf_forest(const model *m, const bf_opts *o, const bf_job *j, bool share,
                         bf_res *r, st_err *err) {
    int64_t sum_suf = 0;
    int32_t max_suf = 0;
    for (int32_t i = 0; i < j->n_seq; i++) {
        sum_suf += bf_suffix_len(j, i);
        if (bf_suffix_len(j, i) > max_suf) max_suf = bf_suffix_len(j, i);
    }
    int64_t prefix_slots = share ? j->n_prefix : (int64_t)j->n_seq * j->n_prefix;
    r->kv_expected = prefix_slots + sum_suf + (int64_t)j->n_seq * (j->gen - 1);
    model_ctx *c = bench_ctx(m, o->mo.threads, o->mo.backend, r->kv_expected + j->n_seq, err);
    if (!c) return err->code;
    forest *f = forest_init(model_ctx_n_slots(c), 0);
    prompt_toks *out = calloc((size_t)j->n_seq, sizeof *out);
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(j->n_prefix + max_suf));
    forest_id *starts = malloc(sizeof *starts * (size_t)j->n_seq);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .emit = prompt_emit, .emit_ud = out};
    strategy_opts go = strategy_opts_for(strategy_find("grow"));
    go.sample = j->sp, go.budget = j->gen, go.n_vocab = m->hp.n_vocab;
    go.u.grow.starts = starts, go.u.grow.n_starts = j->n_seq;
    app_run_stats st;
    bf_clock clock = {.r = r};
    st_code rc = f && out && buf && starts ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = bf_layout(f, j, share, buf, starts, err);
    if (!rc && !(s = strategy_create(&go, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, bf_step_tick, &clock, err);
    if (!rc && st.full) rc = err->code; /* the step's own message */
    if (!rc) {
        r->prefill_s = st.t1 - st.t0;
        r->decode_s = st.t2 - st.t1;
        r->decode_tokens = st.rows;
        r->kv_slots = kv_alloc_used(forest_kv(f));
        for (int32_t i = 0; i < j->n_seq; i++)
            for (int32_t t = 0; t < j->gen; t++)
                r->tokens[(size_t)i * j->gen + t] = t < out[i].n ? out[i].t[t] : -1;
    }
    strategy_free(s);
    step_plan_free(&plan);
    prompt_toks_free(out, out ? j->n_seq : 0);
    free(out);
    free(buf);
    free(starts);
    forest_free(f);
    model_ctx_free(c);
    return rc;
}

/* The job as n_seq linear decodes, one after the other, each with its own prefill (the
 * baseline without a forest, by definition outside the strategy interface). */
static st_code bf_sequential(const model *m, const bf_opts *o, const bf_job *j, bf_res *r,
                             st_err *err) {
    int32_t max_suf = 0, V = m->hp.n_vocab;
    for (int32_t i = 0; i < j->n_seq; i++)
        if (bf_suffix_len(j, i) > max_suf) max_suf = bf_suffix_len(j, i);
    int32_t n_slots = j->n_prefix + max_suf + j->gen;
    r->kv_expected = n_slots - 1; /* the peak: one sequence at a time */
    model_ctx *c = bench_ctx(m, o->mo.threads, o->mo.backend, n_slots, err);
    if (!c) return err->code;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_slots);
    float *logits = malloc(sizeof(float) * (size_t)V);
    st_code rc = ST_OK;
    if (!toks || !logits) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int32_t i = 0; i < j->n_seq && !rc; i++) {
        int32_t ns = bf_suffix_len(j, i), n = j->n_prefix + ns;
        memcpy(toks, j->prefix, sizeof(int32_t) * (size_t)j->n_prefix);
        if (ns) memcpy(toks + j->n_prefix, j->suffix[i], sizeof(int32_t) * (size_t)ns);
        sample_params bp = j->sp;
        bp.seed = j->sp.seed + (uint64_t)i;
        sampler smp;
        if (sampler_init(&smp, &bp, V)) {
            rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            break;
        }
        double t0 = mono_now_s();
        rc = model_forward_linear(c, toks, n, 0, logits, err);
        double t1 = mono_now_s();
        double ts = t1;
        for (int32_t t = 0; t < j->gen && !rc; t++) {
            int32_t next = sampler_sample(&smp, logits, V);
            r->tokens[(size_t)i * j->gen + t] = next;
            if (t == j->gen - 1) break;
            toks[n] = next;
            rc = model_forward_linear(c, &toks[n], 1, n, logits, err);
            n++;
            const double te = mono_now_s();
            r->step_s[r->steps++] = te - ts;
            ts = te;
            r->decode_tokens++;
        }
        double t2 = mono_now_s();
        sampler_free(&smp);
        r->prefill_s += t1 - t0;
        r->decode_s += t2 - t1;
        if (n > r->kv_slots) r->kv_slots = n;
    }
out:
    free(toks);
    free(logits);
    model_ctx_free(c);
    return rc;
}

/* Room in r for nt generated tokens and step times; false when memory runs out. */
static bool bf_res_alloc(bf_res *r, size_t nt) {
    r->tokens = malloc(sizeof(int32_t) * nt);
    r->step_s = malloc(sizeof(double) * nt);
    return r->tokens && r->step_s;
}

static void bf_res_free(bf_res *r) {
    free(r->tokens);
    free(r->step_s);
}

/* r->step_med_s, the median step time, and r->step_min_s, the fastest (sorts r->step_s):
 * both less moved than the mean by the odd step a busy machine stretches; the fastest is
 * the step least touched by others when whole spells of it run slow. */
static void bf_median_step(bf_res *r) {
    if (r->steps > 0) r->step_med_s = bench_median(r->step_s, r->steps), r->step_min_s = r->step_s[0];
}

/* One way's figures: the times, step medians, throughput and KV slots (exact_kv: the
 * expected count is exact, else a peak). */
static json_t *bf_res_json(const bf_res *r, const model *m, bool exact_kv) {
    json_t *o = bench_times_json(r->prefill_s, r->decode_s, r->steps);
    jo_set(&o, "step_ms_median", jo_fixed(1e3 * r->step_med_s, 3));
    jo_set(&o, "step_ms_min", jo_fixed(1e3 * r->step_min_s, 3));
    jo_set(&o, "decode_tok_s", jo_fixed(r->decode_s > 0 ? (double)r->decode_tokens / r->decode_s : 0.0, 1));
    jo_set(&o, "kv_slots", json_integer(r->kv_slots));
    jo_set(&o, exact_kv ? "kv_slots_expected" : "kv_slots_peak_expected", json_integer(r->kv_expected));
    jo_set(&o, "kv_bytes", json_integer(r->kv_slots * bench_kv_bytes_per_slot(m)));
    return o;
}

/* One of the three ways into r (its arrays kept, its figures cleared): 0 the forest, 1
 * sequential decodes, 2 copied prefixes. */
static st_code bf_way(const model *m, const bf_opts *o, const bf_job *j, int way, bf_res *r,
                      st_err *err) {
    *r = (bf_res){.tokens = r->tokens, .step_s = r->step_s};
    st_code rc = way == 1 ? bf_sequential(m, o, j, r, err) : bf_forest(m, o, j, way == 0, r, err);
    if (!rc) bf_median_step(r);
    return rc;
}

/* The least of the n values of v. */
static double bf_min(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

/* The ways by index (forest, sequential, copied prefix): their objects' names, and the
 * baselines' names in the ratios. */
static const char *const bf_way_name[3] = {"forest", "sequential", "copied_prefix"};
static const char *const bf_ratio_name[3] = {NULL, "sequential", "copied"};

/* What the repeats of one job measured (bf_run3). */
typedef struct bf_reps {
    bool run[3];                       /* the ways run */
    int n;                             /* repeats */
    double t[3][4][BF_MAX_REPEAT];     /* [way][prefill, decode, step median, step min][repeat] */
    double q[4][BF_MAX_REPEAT];        /* [sequential, copied: total, decode][repeat] */
    double tot[3][BF_MAX_REPEAT];      /* [way][repeat]: prefill + decode */
    bool same, kv_same;                /* same tokens, same KV slots in every run */
} bf_reps;

/* Each repeat's value of the baselines' total ratios (before the medians sort them), and
 * each way's total per repeat. */
static void bf_runs_json(json_t **o, const bf_reps *p) {
    json_t *ratios = json_object(), *totals = json_object();
    char name[64];
    for (int w = 0; w < 3; w++) {
        if (!p->run[w]) continue;
        json_t *t = json_array();
        for (int rep = 0; rep < p->n; rep++) jo_push(&t, jo_fixed(p->tot[w][rep], 6));
        jo_set(&totals, bf_way_name[w], t);
        if (!w) continue;
        json_t *q = json_array();
        for (int rep = 0; rep < p->n; rep++) jo_push(&q, jo_fixed(p->q[2 * (w - 1)][rep], 2));
        snprintf(name, sizeof name, "%s_over_forest_total", bf_ratio_name[w]);
        jo_set(&ratios, name, q);
    }
    jo_set(o, "ratio_runs", ratios);
    jo_set(o, "total_s_runs", totals);
}

/* The baselines over the forest: medians of the repeats' ratios (best: of the fastest
 * runs). */
static json_t *bf_ratios_json(const bf_reps *p, const bf_res *rs, bool best) {
    json_t *o = json_object();
    double v[BF_MAX_REPEAT];
    char name[64];
    for (int w = 1; w < 3; w++) {
        if (!p->run[w]) continue;
        snprintf(name, sizeof name, "%s_over_forest_total", bf_ratio_name[w]);
        memcpy(v, p->q[2 * (w - 1)], sizeof v);
        jo_set(&o, name, jo_fixed(best ? bf_min(p->tot[w], p->n) / bf_min(p->tot[0], p->n)
                                       : bench_median(v, p->n), 2));
        snprintf(name, sizeof name, "%s_over_forest_decode", bf_ratio_name[w]);
        memcpy(v, p->q[2 * (w - 1) + 1], sizeof v);
        jo_set(&o, name, jo_fixed(best ? bf_min(p->t[w][1], p->n) / bf_min(p->t[0][1], p->n)
                                       : bench_median(v, p->n), 2));
        if (w == 2 && !best)
            jo_set(&o, "copied_over_forest_kv",
                   jo_fixed((double)rs[2].kv_slots / (double)rs[0].kv_slots, 2));
    }
    return o;
}

/* The job's report into *o: the repeats, each way's median figures, whether the ways
 * agree, and the ratios. rs[w] get the medians. */
static void bf_report(json_t **o, const model *m, const bf_reps *p, bf_res *rs) {
    const bool base = p->run[1] || p->run[2];
    double v[BF_MAX_REPEAT];
    jo_set(o, "repeats", json_integer(p->n));
    if (base && p->n > 1) bf_runs_json(o, p);
    for (int w = 0; w < 3; w++) {
        if (!p->run[w]) continue;
        memcpy(v, p->t[w][0], sizeof v), rs[w].prefill_s = bench_median(v, p->n);
        memcpy(v, p->t[w][1], sizeof v), rs[w].decode_s = bench_median(v, p->n);
        memcpy(v, p->t[w][2], sizeof v), rs[w].step_med_s = bench_median(v, p->n);
        rs[w].step_min_s = bf_min(p->t[w][3], p->n);
        jo_set(o, bf_way_name[w], bf_res_json(&rs[w], m, w != 1));
    }
    bool kv_exact = p->kv_same && rs[0].kv_slots == rs[0].kv_expected &&
                    (!p->run[2] || rs[2].kv_slots == rs[2].kv_expected);
    jo_set(o, "kv_exact", json_boolean(kv_exact));
    jo_set(o, "same_tokens", json_boolean(p->same));
    jo_set(o, "ratios", bf_ratios_json(p, rs, false));
    if (base && p->n > 1) jo_set(o, "ratios_best", bf_ratios_json(p, rs, true));
}

/* Runs the job the three ways, o->repeat times in turn (forest, sequential, copied, forest,
 * ...: a slow spell of the machine then falls on all three), and adds the report to *o:
 * each way's times are the medians over the repeats, each ratio the median of the
 * repeats' ratios. With repeats it also lists each way's total per repeat and the
 * best-of-repeats ratios, each way's fastest total over the forest's fastest: a spell
 * that slows the forest's short run but not a baseline's long one (or the reverse) moves
 * a repeat's ratio by a quarter on a shared machine, and the fastest run of each way is
 * the one least touched by others. r_forest gets the forest figures for the caller's
 * ratios. */
static st_code bf_run3(const model *m, const bf_opts *o, const bf_job *j, json_t **obj,
                       bf_res *r_forest, st_err *err) {
    size_t nt = (size_t)j->n_seq * (size_t)j->gen;
    bf_reps p = {.run = {true, o->sequential, o->copied}, .n = o->repeat, .same = true,
                 .kv_same = true};
    bf_res rs[3], cur = {0}; /* the first repeat's runs; a later repeat's run */
    memset(rs, 0, sizeof rs);
    st_code rc = ST_OK;
    bool mem = p.n == 1 || bf_res_alloc(&cur, nt); /* cur: for repeats after the first */
    for (int w = 0; w < 3; w++)
        if (p.run[w]) mem = bf_res_alloc(&rs[w], nt) && mem;
    if (!mem) rc = st_set(err, ST_ERR_NOMEM, "out of memory");
    for (int rep = 0; rep < p.n && !rc; rep++) {
        for (int w = 0; w < 3 && !rc; w++) {
            if (!p.run[w]) continue;
            bf_res *r = rep == 0 ? &rs[w] : &cur;
            if ((rc = bf_way(m, o, j, w, r, err))) break;
            p.t[w][0][rep] = r->prefill_s, p.t[w][1][rep] = r->decode_s;
            p.t[w][2][rep] = r->step_med_s, p.t[w][3][rep] = r->step_min_s;
            p.tot[w][rep] = r->prefill_s + r->decode_s;
            if (rep > 0) {
                p.same = p.same && !memcmp(cur.tokens, rs[w].tokens, sizeof(int32_t) * nt);
                p.kv_same = p.kv_same && cur.kv_slots == rs[w].kv_slots;
            }
        }
        for (int w = 1; w < 3 && !rc; w++) {
            if (!p.run[w]) continue;
            p.q[2 * (w - 1)][rep] = p.tot[w][rep] / p.tot[0][rep];
            p.q[2 * (w - 1) + 1][rep] = p.t[w][1][rep] / p.t[0][1][rep];
        }
    }
    if (!rc) {
        for (int w = 1; w < 3; w++)
            if (p.run[w]) p.same = p.same && !memcmp(rs[0].tokens, rs[w].tokens, sizeof(int32_t) * nt);
        bf_report(obj, m, &p, rs);
        bf_res_free(r_forest);
        *r_forest = rs[0];
        rs[0].tokens = NULL;
        rs[0].step_s = NULL;
    }
    for (int w = 0; w < 3; w++) bf_res_free(&rs[w]);
    bf_res_free(&cur);
    return rc;
}

/* Parses "1,2,4" into out (at most cap values in [lo, hi]); returns the count, -1 if bad. */
static int bf_list(const char *s, int32_t *out, int cap, int64_t lo, int64_t hi) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (n == cap || app_parse_int(t, lo, hi, &v)) return -1;
        out[n++] = (int32_t)v;
    }
    return n ? n : -1;
}

/* The report's head: the bench, the model and how it runs. */
static json_t *bf_header(const char *bench, const model *m, const bf_opts *o) {
    json_t *h = json_object();
    jo_set(&h, "bench", jo_str(bench));
    jo_set(&h, "model", jo_str(o->mo.path));
    jo_set(&h, "backend", jo_str(o->mo.backend));
    jo_set(&h, "threads", json_integer(o->mo.threads));
    jo_set(&h, "weight_type", jo_str(dtype_name(m->layers[0].w_gate.type)));
    jo_set(&h, "weight_bytes", jo_u64(m->weight_bytes));
    jo_set(&h, "packed_bytes", jo_u64(model_packed_bytes(m)));
    jo_set(&h, "n_layer", json_integer(m->hp.n_layer));
    jo_set(&h, "kv_dim", json_integer(m->hp.n_head_kv * m->hp.head_dim));
    jo_set(&h, "kv_bytes_per_slot", json_integer(bench_kv_bytes_per_slot(m)));
    /* a recurrent model's forest holds this much more per leaf (and per branch point
     * still growing), and as much again for each leaf a step extends */
    jo_set(&h, "rstate_bytes_per_leaf", json_integer(model_rstate_floats(&m->hp) * 4));
    return h;
}

/* Touches every weight once so that page faults are not timed. */
static st_code bf_warm(const model *m, bf_opts *o, st_err *err) {
    model_ctx *c = bench_ctx(m, o->mo.threads, o->mo.backend, 2, err);
    float *lg = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    st_code rc = c && lg ? ST_OK : err->code ? err->code : st_set(err, ST_ERR_NOMEM, "out of memory");
    int32_t t = 1;
    if (!rc) rc = model_forward_linear(c, &t, 1, 0, lg, err);
    if (!rc) o->mo.threads = kern_backend_threads(model_ctx_backend(c)); /* what "0" became */
    free(lg);
    model_ctx_free(c);
    return rc;
}

enum { BF_OPT_NOSEQ = 1000, BF_OPT_NOCOPY, BF_OPT_REPEAT };

/* The options both benches share; returns -1 when ch is not one of them. */
static int bf_common_opt(bf_opts *o, int ch, const char *arg) {
    int64_t v;
    switch (ch) {
    case 'm':
    case 'B':
    case 't': return prompt_model_opt(&o->mo, ch, arg);
    case BF_OPT_NOSEQ: o->sequential = false; return 0;
    case BF_OPT_NOCOPY: o->copied = false; return 0;
    case BF_OPT_REPEAT:
        if (app_opt_int("--repeat", arg, 1, BF_MAX_REPEAT, &v)) return 2;
        o->repeat = (int32_t)v;
        return 0;
    default: return -1;
    }
}

#define BF_COMMON_LONGOPTS                                                               \
    {"model", 1, 0, 'm'}, {"threads", 1, 0, 't'}, {"backend", 1, 0, 'B'},                \
        {"no-sequential", 0, 0, BF_OPT_NOSEQ}, {"no-copied", 0, 0, BF_OPT_NOCOPY},       \
        {"repeat", 1, 0, BF_OPT_REPEAT}, {"help", 0, 0, 'h'}
#define BF_COMMON_HELP                                                                   \
    "  -m, --model PATH     GGUF model file\n"                                           \
    "  -t, --threads N      CPU threads (default: one per core)\n"                       \
    "      --backend NAME   cpu (default), ref, or cuda (a GPU build)\n"                                      \
    "      --no-sequential  skip the sequential baseline\n"                              \
    "      --no-copied      skip the copied-prefix baseline\n"                              \
    "      --repeat R       run the forest and the baselines R times in turn (default 1);\n" \
    "                       times and ratios are the medians over the repeats;\n"     \
    "                       ratios_best divides each way's fastest total by the\n"   \
    "                       forest's (the runs least slowed by a busy machine)\n"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BENCH_FOREST_USAGE "usage: multidecode bench forest -m MODEL [options]"

static void bench_forest_usage(FILE *f) {
    fprintf(f, BENCH_FOREST_USAGE "\n\n"
               "k leaves grow from one shared prompt; for each k: prefill time, step latency\n"
               "(mean, median and fastest), aggregate tokens/s and KV slots, against k\n"
               "sequential decodes and k copies of the prompt batched together. JSON on stdout.\n\n"
               BF_COMMON_HELP
               "  -p, --context N      shared prompt tokens, synthetic (default 256)\n"
               "  -s, --steps N        timed steps after the prefill (default 16)\n"
               "  -k, --k LIST         leaf counts (default 1,2,4,8,16,32,64)\n"
               "      --baseline-max-k N  run the baselines only for k <= N (default 16: their\n"
               "                       cost grows as k x the prefill; 0 = for every k)\n");
}

/* The step times of cur against those of the first k's run (k = 1 by default: a single
 * sequence). */
static json_t *bf_vs_first_json(const bf_res *base, const bf_res *cur, int32_t k0) {
    double step_b = base->decode_s / base->steps, step_c = cur->decode_s / cur->steps;
    double tps_b = (double)base->decode_tokens / base->decode_s;
    json_t *o = json_object();
    jo_set(&o, "k", json_integer(k0));
    jo_set(&o, "step_latency_ratio", jo_fixed(step_c / step_b, 2));
    jo_set(&o, "step_median_ratio", jo_fixed(cur->step_med_s / base->step_med_s, 2));
    jo_set(&o, "step_min_ratio", jo_fixed(cur->step_min_s / base->step_min_s, 2));
    jo_set(&o, "decode_tok_s_ratio", jo_fixed(((double)cur->decode_tokens / cur->decode_s) / tps_b, 2));
    return o;
}

/* bench forest's command line. */
typedef struct bff_opts {
    bf_opts o;
    int64_t n_prefix, steps, base_max_k;
    int32_t ks[32];
    int n_k;
} bff_opts;

/* -1 to go on, else the exit status. */
static int bench_forest_parse(int argc, char **argv, bff_opts *p) {
    static const struct option lo[] = {
        BF_COMMON_LONGOPTS, {"context", 1, 0, 'p'}, {"steps", 1, 0, 's'}, {"k", 1, 0, 'k'},
        {"baseline-max-k", 1, 0, 'K'}, {0, 0, 0, 0}};
    p->n_k = bf_list("1,2,4,8,16,32,64", p->ks, 32, 1, 1 << 16);
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:t:p:s:k:h", lo, NULL)) != -1) {
        if ((r = bf_common_opt(&p->o, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p':
            if (app_opt_int("--context", optarg, 1, 1 << 20, &p->n_prefix)) return 2;
            break;
        case 's':
            if (app_opt_int("--steps", optarg, 1, 1 << 16, &p->steps)) return 2;
            break;
        case 'k':
            if ((p->n_k = bf_list(optarg, p->ks, 32, 1, 1 << 16)) < 0) return app_usage_error("bad --k '%s'", optarg);
            break;
        case 'K':
            if (app_opt_int("--baseline-max-k", optarg, 0, 1 << 16, &p->base_max_k)) return 2;
            break;
        case 'h': bench_forest_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode bench forest --help", BENCH_FOREST_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!p->o.mo.path) return app_usage_error("bench forest needs a model: -m MODEL");
    return -1;
}

/* Every k's runs appended to *runs, each with its step times against the first k's. */
static st_code bench_forest_runs(const model *m, const bff_opts *p, const int32_t *prefix, json_t **runs,
                                 st_err *err) {
    bf_res base = {0}, cur = {0};
    st_code rc = ST_OK;
    for (int i = 0; i < p->n_k && !rc; i++) {
        bf_job j = {.prefix = prefix, .n_prefix = (int32_t)p->n_prefix, .n_seq = p->ks[i],
                    .gen = (int32_t)p->steps + 1, .sp = sample_default_params()};
        json_t *run = json_object();
        jo_set(&run, "k", json_integer(p->ks[i]));
        bf_opts ok = p->o; /* the baselines only up to --baseline-max-k */
        if (p->base_max_k > 0 && p->ks[i] > p->base_max_k) ok.sequential = ok.copied = false;
        if ((rc = bf_run3(m, &ok, &j, &run, &cur, err))) {
            json_decref(run);
            break;
        }
        if (i == 0) {
            base = cur;
            cur.tokens = NULL;
            cur.step_s = NULL;
        }
        jo_set(&run, "vs_first_k", bf_vs_first_json(&base, &cur, p->ks[0]));
        jo_push(runs, run);
    }
    bf_res_free(&base);
    bf_res_free(&cur);
    return rc;
}

int cmd_bench_forest(int argc, char **argv) {
    bff_opts p = {.o = {.mo = prompt_model_default_opts(), .sequential = true, .copied = true, .repeat = 1},
                  .n_prefix = 256, .steps = 16, .base_max_k = 16};
    int r = bench_forest_parse(argc, argv, &p);
    if (r >= 0) return r;
    st_err err = {0};
    model *m = model_load(p.o.mo.path, &err);
    if (!m) return app_fail(&err);
    int32_t *prefix = malloc(sizeof(int32_t) * (size_t)p.n_prefix);
    json_t *doc = NULL, *runs = json_array();
    st_code rc = prefix ? bf_warm(m, &p.o, &err) : st_set(&err, ST_ERR_NOMEM, "out of memory");
    if (!rc) {
        bench_synth(prefix, (int32_t)p.n_prefix, m->hp.n_vocab, bf_state(1));
        doc = bf_header("forest", m, &p.o);
        jo_set(&doc, "prefix_tokens", json_integer(p.n_prefix));
        jo_set(&doc, "steps", json_integer(p.steps));
        jo_set(&doc, "baseline_max_k", json_integer(p.base_max_k));
        rc = bench_forest_runs(m, &p, prefix, &runs, &err);
    }
    jo_set(&doc, "runs", runs);
    if (!rc) rc = jo_print(doc, &err);
    else json_decref(doc);
    free(prefix);
    model_free(m);
    return rc ? app_fail(&err) : 0;
}

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BENCH_ASK_USAGE "usage: multidecode bench ask -m MODEL [options]"

static void bench_ask_usage(FILE *f) {
    fprintf(f, BENCH_ASK_USAGE "\n\n"
               "N questions (synthetic tokens) over one shared context, greedy answers of a\n"
               "fixed length: wall time and KV bytes for the forest, sequential decoding and\n"
               "copied-prefix batching. JSON on stdout.\n\n"
               BF_COMMON_HELP
               "  -p, --context N      context tokens, synthetic (default 1000)\n"
               "  -N, --questions LIST question counts (default 1,4,16)\n"
               "  -q, --question-tokens N  tokens per question (default 16)\n"
               "  -n, --answer N       answer tokens per question (default 64)\n");
}

/* bench ask's command line. */
typedef struct bfa_opts {
    bf_opts o;
    int64_t n_ctx, n_qtok, n_ans;
    int32_t ns[32];
    int n_n;
} bfa_opts;

/* -1 to go on, else the exit status. */
static int bench_ask_parse(int argc, char **argv, bfa_opts *p) {
    static const struct option lo[] = {
        BF_COMMON_LONGOPTS, {"context", 1, 0, 'p'}, {"questions", 1, 0, 'N'},
        {"question-tokens", 1, 0, 'q'}, {"answer", 1, 0, 'n'}, {0, 0, 0, 0}};
    p->n_n = bf_list("1,4,16", p->ns, 32, 1, 4096);
    int ch, r;
    while ((ch = getopt_long(argc, argv, "m:t:p:N:q:n:h", lo, NULL)) != -1) {
        if ((r = bf_common_opt(&p->o, ch, optarg)) >= 0) {
            if (r) return r;
            continue;
        }
        switch (ch) {
        case 'p':
            if (app_opt_int("--context", optarg, 1, 1 << 20, &p->n_ctx)) return 2;
            break;
        case 'N':
            if ((p->n_n = bf_list(optarg, p->ns, 32, 1, 4096)) < 0)
                return app_usage_error("bad --questions '%s'", optarg);
            break;
        case 'q':
            if (app_opt_int("--question-tokens", optarg, 0, 1 << 16, &p->n_qtok)) return 2;
            break;
        case 'n':
            if (app_opt_int("--answer", optarg, 1, 1 << 16, &p->n_ans)) return 2;
            break;
        case 'h': bench_ask_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode bench ask --help", BENCH_ASK_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!p->o.mo.path) return app_usage_error("bench ask needs a model: -m MODEL");
    return -1;
}

/* The synthetic context and questions (as many as the largest count): ctx, and question
 * i at qp[i] (qn[i] tokens, all in qtok). */
typedef struct bfa_data {
    int32_t *ctx, *qtok, **qp, *qn;
} bfa_data;

static void bfa_data_free(bfa_data *d) { free(d->ctx), free(d->qtok), free(d->qp), free(d->qn); }

static st_code bfa_data_init(bfa_data *d, const bfa_opts *p, int32_t n_vocab, st_err *err) {
    int32_t max_n = 0;
    for (int i = 0; i < p->n_n; i++) max_n = p->ns[i] > max_n ? p->ns[i] : max_n;
    d->ctx = malloc(sizeof(int32_t) * (size_t)p->n_ctx);
    d->qtok = malloc(sizeof(int32_t) * (size_t)(max_n * p->n_qtok + 1));
    d->qp = malloc(sizeof(int32_t *) * (size_t)max_n);
    d->qn = malloc(sizeof(int32_t) * (size_t)max_n);
    if (!d->ctx || !d->qtok || !d->qp || !d->qn) return st_set(err, ST_ERR_NOMEM, "out of memory");
    bench_synth(d->ctx, (int32_t)p->n_ctx, n_vocab, bf_state(1));
    for (int32_t i = 0; i < max_n; i++) {
        d->qp[i] = d->qtok + (size_t)i * p->n_qtok;
        d->qn[i] = (int32_t)p->n_qtok;
        bench_synth(d->qp[i], (int32_t)p->n_qtok, n_vocab, bf_state(100 + (uint64_t)i));
    }
    return ST_OK;
}

/* Every question count's runs (greedy answers) appended to *runs. */
static st_code bench_ask_runs(const model *m, const bfa_opts *p, const bfa_data *d, json_t **runs,
                              st_err *err) {
    bf_res res = {0};
    st_code rc = ST_OK;
    for (int i = 0; i < p->n_n && !rc; i++) {
        sample_params sp = sample_default_params();
        sp.temp = 0;
        bf_job j = {.prefix = d->ctx, .n_prefix = (int32_t)p->n_ctx, .n_seq = p->ns[i],
                    .suffix = p->n_qtok ? d->qp : NULL, .n_suffix = d->qn, .gen = (int32_t)p->n_ans,
                    .sp = sp};
        json_t *run = json_object();
        jo_set(&run, "questions", json_integer(p->ns[i]));
        rc = bf_run3(m, &p->o, &j, &run, &res, err);
        jo_push(runs, run);
    }
    bf_res_free(&res);
    return rc;
}

int cmd_bench_ask(int argc, char **argv) {
    bfa_opts p = {.o = {.mo = prompt_model_default_opts(), .sequential = true, .copied = true, .repeat = 1},
                  .n_ctx = 1000, .n_qtok = 16, .n_ans = 64};
    int r = bench_ask_parse(argc, argv, &p);
    if (r >= 0) return r;
    st_err err = {0};
    model *m = model_load(p.o.mo.path, &err);
    if (!m) return app_fail(&err);
    bfa_data d = {0};
    json_t *doc = NULL, *runs = json_array();
    st_code rc = bfa_data_init(&d, &p, m->hp.n_vocab, &err);
    if (!rc) rc = bf_warm(m, &p.o, &err);
    if (!rc) {
        doc = bf_header("ask", m, &p.o);
        jo_set(&doc, "context_tokens", json_integer(p.n_ctx));
        jo_set(&doc, "question_tokens", json_integer(p.n_qtok));
        jo_set(&doc, "answer_tokens", json_integer(p.n_ans));
        jo_set(&doc, "sampling", jo_str("greedy"));
        rc = bench_ask_runs(m, &p, &d, &runs, &err);
    }
    jo_set(&doc, "runs", runs);
    if (!rc) rc = jo_print(doc, &err);
    else json_decref(doc);
    bfa_data_free(&d);
    model_free(m);
    return rc ? app_fail(&err) : 0;
}
