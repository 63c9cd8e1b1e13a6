/* strategy.c - `multidecode bench beam` and `bench cot`: what the shared-KV
 * forest buys the search strategies, against the usual ways of doing the same work, side
 * by side in one run, JSON on stdout.
 *
 * bench beam: for each width B, a beam search of exactly N steps (no end token, so every
 * way does the same work) after a synthetic prompt of P tokens, three ways:
 *   shared     engine/strategy/beam.h: hypotheses are leaves of one forest sharing their prefixes;
 *              one step computes the B new tokens; losers are pruned;
 *   copied     what a KV-copying implementation (Hugging Face transformers) holds: every
 *              hypothesis is its own root chain with its whole prefix, all advanced in one
 *              batch. A hypothesis that continues its parent's chain appends to it; every
 *              other child needs a copy of the parent's KV, made here by recomputing the
 *              copied prefix in the same batch (so its time is an upper bound of a memcpy;
 *              copy_bytes says how many bytes a memcpy would move);
 *   redecode   no KV reuse at all: every step decodes each hypothesis's whole path from
 *              scratch, one hypothesis after the other.
 *   The copied and redecode runs replay the shared run's choices and check that their own
 *   logits give bit for bit the same cumulative scores (same_scores).
 * bench cot: k chains of N tokens from a synthetic prompt (engine/strategy/cot.h, sampled, no end
 *   token) against k sequential linear decodes that draw the same distinct first tokens
 *   and the same samples (same_tokens).
 * KV bytes = slots x n_layer x 2 (K and V) x n_head_kv x head_dim x 4 (f32 cache). Times
 * are wall-clock; compare ratios within one run. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "strategy/beam.h"
#include "strategy/cot.h"
#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"
#include "app/prompt.h"
#include "app/strategy_run.h"

typedef struct bs_opts {
    const char *path, *backend;
    int32_t threads;
    int32_t n_prompt, n_gen;
    int32_t list[16];
    int n_list;
    bool base_a, base_b; /* beam: copied, redecode; cot: sequential (base_a) */
    float alpha;
} bs_opts;

typedef struct bs_res {
    double prefill_s, decode_s;
    int32_t steps;
    int64_t rows;          /* rows computed after the prefill */
    int64_t kv_peak;       /* slots */
    int64_t copy_slots;    /* copied: slots a memcpy-based copy would move in all */
} bs_res;


/* One way's figures: the times, rows, peak KV and (copied) the bytes a copy would move. */
static json_t *bs_res_json(const bs_res *r, const model *m) {
    json_t *o = bench_times_json(r->prefill_s, r->decode_s, r->steps);
    jo_set(&o, "rows", json_integer(r->rows));
    jo_set(&o, "kv_peak_slots", json_integer(r->kv_peak));
    jo_set(&o, "kv_peak_bytes", json_integer(r->kv_peak * bench_kv_bytes_per_slot(m)));
    if (r->copy_slots) jo_set(&o, "copy_bytes", json_integer(r->copy_slots * bench_kv_bytes_per_slot(m)));
    return o;
}

/* A baseline's time ratios over the first way's run r0 into o: "<name>_over_<first>_total"
 * and "_decode". */
static void bs_ratios(json_t **o, const char *name, const char *first, const bs_res *r,
                      const bs_res *r0) {
    char key[64];
    snprintf(key, sizeof key, "%s_over_%s_total", name, first);
    jo_set(o, key, jo_fixed((r->prefill_s + r->decode_s) / (r0->prefill_s + r0->decode_s), 2));
    snprintf(key, sizeof key, "%s_over_%s_decode", name, first);
    jo_set(o, key, jo_fixed(r->decode_s / r0->decode_s, 2));
}

/* r's peak KV slots over r0's. */
static json_t *bs_kv_ratio(const bs_res *r, const bs_res *r0) {
    return jo_fixed((double)r->kv_peak / (double)r0->kv_peak, 2);
}

/* ---- bench beam ---- */

/* The shared run's choices, step by step: new hypothesis j of step s extends hypothesis
 * parent of step s - 1 by token, reaching cumulative sum. */
typedef struct bs_trace {
    int32_t B, steps;
    int32_t *parent, *token; /* (steps, B) */
    double *sum;             /* (steps, B) */
    int32_t *n_live;         /* (steps) */
} bs_trace;

/* Records step s's live hypotheses into the trace (the tick of the shared run). */
static bool bb_trace_tick(void *ud, const strategy *s, const strategy_env *env, const app_run_stats *st) {
    bs_trace *tr = ud;
    const beam *b = strategy_beam(s);
    int32_t k = st->steps - 1, B = tr->B;
    tr->n_live[k] = beam_n_live(b);
    for (int32_t j = 0; j < beam_n_live(b); j++) {
        tr->parent[k * B + j] = beam_live_parent(b, j);
        tr->token[k * B + j] = forest_get(env->f, beam_live_leaf(b, j))->token;
        tr->sum[k * B + j] = beam_live_sum(b, j);
    }
    return true;
}

/* How bs_run runs a strategy: its options (from: the prompt's root), the KV slots, the
 * emit and tick hooks, and what a full KV cache reports (NULL: the step's own message). */
typedef struct bs_run_in {
    strategy_opts so;
    int64_t slots;
    strategy_emit_fn emit;
    void *emit_ud;
    app_run_tick_fn tick;
    void *tick_ud;
    const char *full;
} bs_run_in;

/* The forest way of a bench: in's strategy from the prompt as a root, as the commands run
 * it, into r's times, steps, rows and KV peak (beam's own peak, else the slots used). */
static st_code bs_run(const model *m, const bs_opts *o, const int32_t *prompt, bs_run_in *in, bs_res *r,
                      st_err *err) {
    model_ctx *c = bench_ctx(m, o->threads, o->backend, in->slots, err);
    if (!c) return err->code;
    forest *f = forest_init(model_ctx_n_slots(c), 0);
    step_plan plan;
    step_plan_init(&plan);
    strategy *s = NULL;
    strategy_env env = {.f = f, .plan = &plan, .ctx = c, .emit = in->emit, .emit_ud = in->emit_ud};
    in->so.budget = o->n_gen, in->so.n_vocab = m->hp.n_vocab;
    app_run_stats st;
    st_code rc = f ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = forest_add_root(f, prompt, NULL, o->n_prompt, 0, &in->so.from, err);
    if (!rc && !(s = strategy_create(&in->so, &env, err))) rc = err->code;
    if (!rc) rc = app_strategy_run(s, &env, &st, in->tick, in->tick_ud, err);
    if (!rc && st.full) rc = in->full ? st_set(err, ST_NO_KV_SLOT, "%s", in->full) : err->code;
    if (!rc) {
        r->prefill_s = st.t1 - st.t0;
        r->decode_s = st.t2 - st.t1;
        r->steps = st.steps - 1;
        r->rows = st.rows;
        r->kv_peak = strategy_beam(s) ? beam_kv_peak(strategy_beam(s)) : kv_alloc_used(forest_kv(f));
    }
    strategy_free(s);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    return rc;
}

/* The shared way: the beam strategy (strategy.h), as `multidecode beam` runs it, its
 * choices recorded for the baselines to replay. */
static st_code bb_shared(const model *m, const bs_opts *o, const int32_t *prompt, int32_t B,
                         bs_trace *tr, bs_res *r, st_err *err) {
    bs_run_in in = {.so = strategy_opts_for(strategy_find("beam")), .tick = bb_trace_tick, .tick_ud = tr};
    in.slots = o->n_prompt + (int64_t)B * (o->n_gen + 1);
    in.so.u.beam.width = B, in.so.u.beam.alpha = o->alpha;
    st_code rc = bs_run(m, o, prompt, &in, r, err);
    if (!rc) tr->steps = r->steps + 1;
    return rc;
}

/* Does the logits row give parent's sum + logprob(token) == want, bit for bit? */
static bool bb_same_sum(const float *lg, int32_t V, float *lsm, double base, int32_t token,
                        double want) {
    sample_log_softmax(lg, V, lsm);
    return base + (double)lsm[token] == want;
}

/* The copied-KV way, replaying tr: hypothesis j is root chain leaf[j]. A baseline, not a
 * strategy: it replays the shared run's choices in another forest layout (whole prefixes
 * per hypothesis) rather than deciding anything, so it steps the forest itself. */
static st_code bb_copied(const model *m, const bs_opts *o, const int32_t *prompt,
                         const bs_trace *tr, bs_res *r, bool *same, st_err *err) {
    int32_t P = o->n_prompt, N = o->n_gen, B = tr->B, V = m->hp.n_vocab;
    model_ctx *c = bench_ctx(m, o->threads, o->backend, (int64_t)(B + 1) * (P + N + 1), err);
    if (!c) return err->code;
    forest *f = forest_init(model_ctx_n_slots(c), 0);
    step_plan plan;
    step_plan_init(&plan);
    forest_id *leaf = malloc(sizeof *leaf * (size_t)B), *nleaf = malloc(sizeof *nleaf * (size_t)B);
    double *sum = calloc((size_t)B, sizeof *sum);
    bool *taken = malloc((size_t)B);
    float *lsm = malloc(sizeof(float) * (size_t)V);
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)(P + N + 1));
    st_code rc = f && leaf && nleaf && sum && taken && lsm && buf
                     ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    int32_t n_live = 1;
    if (!rc) rc = forest_add_root(f, prompt, NULL, P, 0, &leaf[0], err);
    double t0 = mono_now_s(), t1 = t0;
    for (int32_t s = 0; s < tr->steps && !rc; s++) {
        if ((rc = step_forest(f, &plan, c, err))) break;
        int32_t used = kv_alloc_used(forest_kv(f));
        if (used > r->kv_peak) r->kv_peak = used;
        if (s == 0) t1 = mono_now_s();
        else r->rows += plan.n_rows;
        memset(taken, 0, (size_t)B);
        for (int32_t j = 0; j < tr->n_live[s] && !rc; j++) {
            int32_t pa = tr->parent[s * B + j], t = tr->token[s * B + j];
            *same = *same && bb_same_sum(step_logits_of(&plan, leaf[pa]), V, lsm, sum[pa], t,
                                         tr->sum[s * B + j]);
            if (!taken[pa]) { /* the first child continues the parent's own chain */
                taken[pa] = true;
                rc = forest_append(f, leaf[pa], &t, NULL, 1, &nleaf[j], err);
            } else {          /* the others get a copy of its whole prefix */
                int32_t n = forest_path(f, leaf[pa], buf, P + N);
                buf[n] = t;
                r->copy_slots += n;
                rc = forest_add_root(f, buf, NULL, n + 1, 0, &nleaf[j], err);
            }
        }
        for (int32_t i = 0; i < n_live && !rc; i++) { /* chains nobody continues */
            if (taken[i]) continue;
            forest_id root = leaf[i];
            for (const forest_node *nd; (nd = forest_get(f, root)) && nd->parent >= 0;)
                root = forest_id_at(f, nd->parent);
            rc = forest_prune(f, root, err);
        }
        for (int32_t j = 0; j < tr->n_live[s]; j++) sum[j] = tr->sum[s * B + j];
        memcpy(leaf, nleaf, sizeof *leaf * (size_t)tr->n_live[s]);
        n_live = tr->n_live[s];
    }
    if (!rc) {
        r->prefill_s = t1 - t0;
        r->decode_s = mono_now_s() - t1;
        r->steps = tr->steps - 1;
    }
    free(leaf), free(nleaf), free(sum), free(taken), free(lsm), free(buf);
    step_plan_free(&plan);
    forest_free(f);
    model_ctx_free(c);
    return rc;
}

/* The redecode way, replaying tr: each step decodes every hypothesis's path anew (linear
 * decodes without a forest: by definition outside the strategy interface). */
static st_code bb_redecode(const model *m, const bs_opts *o, const int32_t *prompt,
                           const bs_trace *tr, bs_res *r, bool *same, st_err *err) {
    int32_t P = o->n_prompt, N = o->n_gen, B = tr->B, V = m->hp.n_vocab;
    model_ctx *c = bench_ctx(m, o->threads, o->backend, P + N + 1, err);
    if (!c) return err->code;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)B * (size_t)(P + N + 1));
    int32_t *nseq = malloc(sizeof(int32_t) * (size_t)B * (size_t)(P + N + 1));
    double *sum = calloc((size_t)B, sizeof *sum);
    float *lg = malloc(sizeof(float) * (size_t)V * (size_t)B), *lsm = malloc(sizeof(float) * (size_t)V);
    st_code rc = seq && nseq && sum && lg && lsm ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    size_t stride = (size_t)(P + N + 1);
    if (!rc) memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    int32_t n_live = 1, len = P;
    double t0 = mono_now_s(), t1 = t0;
    for (int32_t s = 0; s < tr->steps && !rc; s++) {
        for (int32_t i = 0; i < n_live && !rc; i++) {
            rc = model_forward_linear(c, seq + i * stride, len, 0, lg + (size_t)i * V, err);
            if (s > 0) r->rows += len;
        }
        if (len > r->kv_peak) r->kv_peak = len;
        if (s == 0) t1 = mono_now_s();
        for (int32_t j = 0; j < tr->n_live[s] && !rc; j++) {
            int32_t pa = tr->parent[s * B + j], t = tr->token[s * B + j];
            *same = *same && bb_same_sum(lg + (size_t)pa * V, V, lsm, sum[pa], t, tr->sum[s * B + j]);
            memcpy(nseq + j * stride, seq + pa * stride, sizeof(int32_t) * (size_t)len);
            nseq[j * stride + len] = t;
        }
        for (int32_t j = 0; j < tr->n_live[s]; j++) sum[j] = tr->sum[s * B + j];
        int32_t *tmp = seq;
        seq = nseq, nseq = tmp;
        n_live = tr->n_live[s];
        len++;
        if (s == tr->steps - 1) break; /* the last tokens are chosen, never computed */
    }
    if (!rc) {
        r->prefill_s = t1 - t0;
        r->decode_s = mono_now_s() - t1;
        r->steps = tr->steps - 1;
    }
    free(seq), free(nseq), free(sum), free(lg), free(lsm);
    model_ctx_free(c);
    return rc;
}

/* One width's three runs, their report appended to *runs. */
static st_code bb_one(const model *m, const bs_opts *o, const int32_t *prompt, int32_t B,
                      json_t **runs, st_err *err) {
    int32_t N = o->n_gen;
    bs_trace tr = {.B = B};
    tr.parent = malloc(sizeof(int32_t) * (size_t)N * (size_t)B);
    tr.token = malloc(sizeof(int32_t) * (size_t)N * (size_t)B);
    tr.sum = malloc(sizeof(double) * (size_t)N * (size_t)B);
    tr.n_live = malloc(sizeof(int32_t) * (size_t)N);
    bs_res rs[3];
    memset(rs, 0, sizeof rs);
    bool same_a = true, same_b = true;
    st_code rc = tr.parent && tr.token && tr.sum && tr.n_live
                     ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = bb_shared(m, o, prompt, B, &tr, &rs[0], err);
    if (!rc && o->base_a) rc = bb_copied(m, o, prompt, &tr, &rs[1], &same_a, err);
    if (!rc && o->base_b) rc = bb_redecode(m, o, prompt, &tr, &rs[2], &same_b, err);
    if (!rc) {
        json_t *run = json_object(), *ratios = json_object();
        jo_set(&run, "B", json_integer(B));
        jo_set(&run, "shared", bs_res_json(&rs[0], m));
        if (o->base_a) jo_set(&run, "copied", bs_res_json(&rs[1], m));
        if (o->base_b) jo_set(&run, "redecode", bs_res_json(&rs[2], m));
        jo_set(&run, "same_scores", json_boolean(same_a && same_b));
        if (o->base_a) {
            bs_ratios(&ratios, "copied", "shared", &rs[1], &rs[0]);
            jo_set(&ratios, "copied_over_shared_kv", bs_kv_ratio(&rs[1], &rs[0]));
        }
        if (o->base_b) {
            bs_ratios(&ratios, "redecode", "shared", &rs[2], &rs[0]);
            jo_set(&ratios, "redecode_over_shared_kv", bs_kv_ratio(&rs[2], &rs[0]));
        }
        jo_set(&run, "ratios", ratios);
        jo_push(runs, run);
    }
    free(tr.parent), free(tr.token), free(tr.sum), free(tr.n_live);
    return rc;
}

/* ---- bench cot ---- */

/* k chains through the cot strategy (strategy.h), as `multidecode cot` runs them. */
static st_code bc_forest(const model *m, const bs_opts *o, const int32_t *prompt, int32_t k,
                         const sample_params *sp, prompt_toks *out, bs_res *r, st_err *err) {
    bs_run_in in = {.so = strategy_opts_for(strategy_find("cot")), .emit = prompt_emit, .emit_ud = out,
                    .full = "bench cot: the KV cache is full"};
    in.slots = o->n_prompt + (int64_t)k * o->n_gen;
    in.so.sample = *sp, in.so.u.cot.k = k;
    return bs_run(m, o, prompt, &in, r, err);
}

/* k linear decodes, one after the other; chain i draws its first token without the
 * first tokens of chains 0..i-1 (as cot does). The baseline: linear decodes without a
 * forest, by definition outside the strategy interface. */
static st_code bc_sequential(const model *m, const bs_opts *o, const int32_t *prompt, int32_t k,
                             const sample_params *sp, int32_t *toks, bs_res *r, st_err *err) {
    int32_t P = o->n_prompt, N = o->n_gen, V = m->hp.n_vocab;
    model_ctx *c = bench_ctx(m, o->threads, o->backend, P + N, err);
    if (!c) return err->code;
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(P + N)), *firsts = malloc(sizeof(int32_t) * (size_t)k);
    float *lg = malloc(sizeof(float) * (size_t)V);
    st_code rc = seq && firsts && lg ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) memcpy(seq, prompt, sizeof(int32_t) * (size_t)P);
    for (int32_t i = 0; i < k && !rc; i++) {
        sample_params p = *sp;
        p.seed = sp->seed + (uint64_t)i;
        sampler s;
        if (sampler_init(&s, &p, V)) {
            rc = st_set(err, ST_ERR_NOMEM, "out of memory");
            break;
        }
        double t0 = mono_now_s();
        rc = model_forward_linear(c, seq, P, 0, lg, err);
        double t1 = mono_now_s();
        for (int32_t j = 0; j < i; j++) lg[firsts[j]] = -INFINITY;
        for (int32_t n = 0; n < N && !rc; n++) {
            int32_t t = sampler_sample_hist(&s, lg, V, seq, P + n);
            if (n == 0) firsts[i] = t;
            seq[P + n] = toks[(size_t)i * N + n] = t;
            if (n == N - 1) break;
            rc = model_forward_linear(c, &seq[P + n], 1, P + n, lg, err);
            r->rows++;
            r->steps++;
        }
        sampler_free(&s);
        r->prefill_s += t1 - t0;
        r->decode_s += mono_now_s() - t1;
    }
    r->kv_peak = P + N - 1;
    free(seq), free(firsts), free(lg);
    model_ctx_free(c);
    return rc;
}

/* One chain count's runs, their report appended to *runs. */
static st_code bc_one(const model *m, const bs_opts *o, const int32_t *prompt, int32_t k,
                      json_t **runs, st_err *err) {
    int32_t N = o->n_gen;
    sample_params sp = sample_default_params();
    prompt_toks *out = calloc((size_t)k, sizeof *out);
    int32_t *seq_toks = malloc(sizeof(int32_t) * (size_t)k * (size_t)N);
    bs_res rs[2];
    memset(rs, 0, sizeof rs);
    st_code rc = out && seq_toks ? ST_OK : st_set(err, ST_ERR_NOMEM, "out of memory");
    if (!rc) rc = bc_forest(m, o, prompt, k, &sp, out, &rs[0], err);
    if (!rc && o->base_a) rc = bc_sequential(m, o, prompt, k, &sp, seq_toks, &rs[1], err);
    if (!rc) {
        bool same = true;
        for (int32_t i = 0; i < k && o->base_a; i++)
            same = same && out[i].n == N &&
                   !memcmp(out[i].t, seq_toks + (size_t)i * N, sizeof(int32_t) * (size_t)N);
        json_t *run = json_object();
        jo_set(&run, "k", json_integer(k));
        jo_set(&run, "forest", bs_res_json(&rs[0], m));
        if (o->base_a) {
            json_t *ratios = json_object();
            jo_set(&run, "sequential", bs_res_json(&rs[1], m));
            jo_set(&run, "same_tokens", json_boolean(same));
            bs_ratios(&ratios, "sequential", "forest", &rs[1], &rs[0]);
            jo_set(&ratios, "forest_over_sequential_kv", bs_kv_ratio(&rs[0], &rs[1]));
            jo_set(&run, "ratios", ratios);
        }
        jo_set(&run, "forest_tok_s", jo_fixed((double)k * N / (rs[0].prefill_s + rs[0].decode_s), 1));
        jo_push(runs, run);
    }
    prompt_toks_free(out, out ? k : 0);
    free(out);
    free(seq_toks);
    return rc;
}

/* ---- options and driver ---- */

static int bs_parse_list(const char *s, bs_opts *o) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    o->n_list = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (o->n_list == 16 || app_parse_int(t, 1, 4096, &v)) return -1;
        o->list[o->n_list++] = (int32_t)v;
    }
    return o->n_list ? 0 : -1;
}

static void bs_usage(FILE *f, bool beam) {
    if (beam)
        fprintf(f, "usage: multidecode bench beam -m MODEL [options]\n\n"
                   "Beam search of width B for exactly N steps (no end token) over one shared KV\n"
                   "cache, against KV-copying beams and re-decoding every hypothesis each step:\n"
                   "wall time and peak KV bytes. JSON on stdout.\n\n");
    else
        fprintf(f, "usage: multidecode bench cot -m MODEL [options]\n\n"
                   "k sampled chains of N tokens (distinct first tokens) grown together in one\n"
                   "forest, against k sequential linear decodes. JSON on stdout.\n\n");
    fprintf(f, "  -m, --model PATH     GGUF model file\n"
               "  -t, --threads N      CPU threads (default: one per core)\n"
               "      --backend NAME   cpu (default), ref, or cuda (a GPU build)\n"
               "  -p, --context N      synthetic prompt tokens (default %d)\n"
               "  -n, --tokens N       tokens per hypothesis / chain (default %d)\n",
            beam ? 32 : 64, beam ? 32 : 128);
    if (beam)
        fprintf(f, "  -B, --beams LIST     widths (default 2,4,8,16)\n"
                   "      --alpha A        length penalty (default 1)\n"
                   "      --no-copied      skip the KV-copying baseline\n"
                   "      --no-redecode    skip the re-decoding baseline\n");
    else
        fprintf(f, "  -k, --chains LIST    chain counts (default 4,8,16)\n"
                   "      --no-sequential  skip the sequential baseline\n");
}

/* The report: the bench, the model, the prompt, then the runs (taken). */
static json_t *bs_report(const model *m, const bs_opts *o, bool beam, json_t *runs) {
    json_t *doc = json_object();
    jo_set(&doc, "bench", jo_str(beam ? "beam" : "cot"));
    jo_set(&doc, "model", jo_str(o->path));
    jo_set(&doc, "backend", jo_str(o->backend));
    jo_set(&doc, "threads", json_integer(o->threads));
    jo_set(&doc, "weight_type", jo_str(dtype_name(m->layers[0].w_gate.type)));
    jo_set(&doc, "n_layer", json_integer(m->hp.n_layer));
    jo_set(&doc, "kv_bytes_per_slot", json_integer(bench_kv_bytes_per_slot(m)));
    jo_set(&doc, "prompt_tokens", json_integer(o->n_prompt));
    jo_set(&doc, "tokens", json_integer(o->n_gen));
    if (beam)
        jo_set(&doc, "copy_note", jo_str("copied: copies recomputed in the batch; copy_bytes is "
                                         "what a memcpy would move"));
    jo_set(&doc, "runs", runs);
    return doc;
}

/* The command line: -1 to go on, else the exit status. */
static int bs_parse(int argc, char **argv, bool beam, bs_opts *o) {
    enum { O_NOA = 1000, O_NOB, O_ALPHA, O_BACKEND };
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"threads", 1, 0, 't'}, {"backend", 1, 0, O_BACKEND},
        {"context", 1, 0, 'p'}, {"tokens", 1, 0, 'n'}, {"beams", 1, 0, 'B'},
        {"chains", 1, 0, 'k'}, {"alpha", 1, 0, O_ALPHA}, {"no-copied", 0, 0, O_NOA},
        {"no-sequential", 0, 0, O_NOA}, {"no-redecode", 0, 0, O_NOB}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    bs_parse_list(beam ? "2,4,8,16" : "4,8,16", o);
    int64_t v;
    double fv;
    int ch;
    while ((ch = getopt_long(argc, argv, beam ? "m:t:p:n:B:h" : "m:t:p:n:k:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->path = optarg; break;
        case O_BACKEND: o->backend = optarg; break;
        case 't':
            if (app_opt_int("-t", optarg, 1, 1024, &v)) return 2;
            o->threads = (int32_t)v;
            break;
        case 'p':
            if (app_opt_int("-p", optarg, 1, 1 << 16, &v)) return 2;
            o->n_prompt = (int32_t)v;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 1, 1 << 16, &v)) return 2;
            o->n_gen = (int32_t)v;
            break;
        case 'B':
        case 'k':
            if (bs_parse_list(optarg, o)) return app_usage_error("bad list '%s'", optarg);
            break;
        case O_ALPHA:
            if (app_parse_float(optarg, &fv)) return app_usage_error("bad --alpha '%s' (want a finite number)", optarg);
            o->alpha = (float)fv;
            break;
        case O_NOA: o->base_a = false; break;
        case O_NOB: o->base_b = false; break;
        case 'h': bs_usage(stdout, beam); return 0;
        default: bs_usage(stderr, beam); return 2;
        }
    }
    if (optind < argc) return app_usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->path) return app_usage_error("bench %s needs a model: -m MODEL", beam ? "beam" : "cot");
    return -1;
}

/* Touches the weights once so that page faults are not timed, and learns the threads
 * ("0" = one per core). */
static st_code bs_warm(const model *m, bs_opts *o, st_err *err) {
    model_ctx *c = bench_ctx(m, o->threads, o->backend, 2, err);
    float *lg = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    st_code rc = c && lg ? ST_OK : c ? st_set(err, ST_ERR_NOMEM, "out of memory") : err->code;
    int32_t t1 = 1;
    if (!rc) rc = model_forward_linear(c, &t1, 1, 0, lg, err);
    if (!rc) o->threads = kern_backend_threads(model_ctx_backend(c));
    model_ctx_free(c);
    free(lg);
    return rc;
}

static int bs_main(int argc, char **argv, bool beam) {
    bs_opts o = {.backend = "cpu", .n_prompt = beam ? 32 : 64, .n_gen = beam ? 32 : 128,
                 .base_a = true, .base_b = beam, .alpha = 1.0f};
    int r = bs_parse(argc, argv, beam, &o);
    if (r >= 0) return r;
    st_err err = {0};
    model *m = model_load(o.path, &err);
    if (!m) return app_fail(&err);
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)o.n_prompt);
    st_code rc = prompt ? bs_warm(m, &o, &err) : st_set(&err, ST_ERR_NOMEM, "out of memory");
    if (!rc) bench_synth(prompt, o.n_prompt, m->hp.n_vocab, 0x9E3779B97F4A7C15ULL);
    json_t *runs = json_array();
    for (int i = 0; i < o.n_list && !rc; i++)
        rc = beam ? bb_one(m, &o, prompt, o.list[i], &runs, &err)
                  : bc_one(m, &o, prompt, o.list[i], &runs, &err);
    if (!rc) rc = jo_print(bs_report(m, &o, beam, runs), &err);
    else json_decref(runs);
    free(prompt);
    model_free(m);
    return rc ? app_fail(&err) : 0;
}

int cmd_bench_beam(int argc, char **argv) { return bs_main(argc, argv, true); }
int cmd_bench_cot(int argc, char **argv) { return bs_main(argc, argv, false); }
