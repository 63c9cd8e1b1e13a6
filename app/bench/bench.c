/* bench.c - `multidecode bench decode`: prompt and generation throughput, JSON out
 * (`bench forest` and `bench ask` are passed on to forest.c).
 *
 * Measures, for each thread count, the prefill of a synthetic prompt (one batch) and
 * single-token greedy decoding, and reports the model's weight bytes so tokens/s can be
 * set against memory bandwidth (decode reads every weight once per token). Figures are
 * meant to be compared as ratios within one run. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "model/model.h"
#include "forest/sample.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"
#include "app/prompt.h"

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BENCH_DECODE_USAGE "usage: multidecode bench decode -m MODEL [options]"

static void bench_usage(FILE *f) {
    fprintf(f, BENCH_DECODE_USAGE "\n"
               "       multidecode bench forest|ask --help  (forest step and ask benchmarks)\n"
               "       multidecode bench beam|cot --help  (beam search and chains of thought)\n"
               "       multidecode bench spec --help  (drafts and lookahead vs plain greedy)\n"
               "       multidecode bench attention --help  (the attention kernel, shared vs alone)\n"
               "       multidecode bench memory --help  (read bandwidth: decode's ceiling)\n\n"
               "  -m, --model PATH     GGUF model file\n"
               "  -p, --prompt N       prompt tokens to prefill (default 128)\n"
               "  -n, --tokens N       tokens to generate (default 64)\n"
               "  -t, --threads LIST   comma-separated thread counts (default 1,2)\n"
               "      --backend NAME   cpu (default), ref, or cuda (a GPU build)\n"
               "      --warmup N       untimed decode steps first (default 2)\n");
}

typedef struct bench_run {
    int32_t threads;
    double prompt_s, gen_s;
} bench_run;

static int bench_one(const model *m, const char *backend, int32_t threads, int32_t n_prompt,
                     int32_t n_gen, int32_t warmup, bench_run *out, st_err *err) {
    model_ctx_params cp = prompt_ctx_params();
    cp.n_threads = threads;
    cp.backend = backend;
    cp.n_slots = n_prompt + n_gen + warmup + 1;
    model_ctx *c = model_ctx_init(m, &cp, err);
    if (!c) return -1;
    int32_t V = m->hp.n_vocab;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(n_prompt + 1));
    float *logits = malloc(sizeof(float) * (size_t)V);
    int rc = -1;
    if (!toks || !logits) {
        st_set(err, ST_ERR_NOMEM, "out of memory");
        goto done;
    }
    uint64_t s = 12345;
    for (int32_t i = 0; i < n_prompt; i++) {
        toks[i] = (int32_t)((bench_lcg(&s) >> 33) % (uint64_t)V);
    }
    /* warm up: touch the weights once so page faults are not timed */
    if (model_forward_linear(c, toks, 1, 0, logits, err)) goto done;
    for (int32_t i = 0; i < warmup; i++)
        if (model_forward_linear(c, toks, 1, 1 + i, logits, err)) goto done;
    double t0 = mono_now_s();
    if (model_forward_linear(c, toks, n_prompt, 0, logits, err)) goto done;
    double t1 = mono_now_s();
    for (int32_t i = 0; i < n_gen; i++) {
        int32_t next = sample_argmax(logits, V);
        if (model_forward_linear(c, &next, 1, n_prompt + i, logits, err)) goto done;
    }
    double t2 = mono_now_s();
    *out = (bench_run){.threads = kern_backend_threads(model_ctx_backend(c)),
                       .prompt_s = t1 - t0, .gen_s = t2 - t1};
    rc = 0;
done:
    free(toks);
    free(logits);
    model_ctx_free(c);
    return rc;
}

/* One run's figures: tokens and tokens per second of the prompt and of the generation, and
 * the weight bytes read per second while generating. */
static json_t *bench_run_json(const bench_run *r, const model *m, int64_t n_prompt, int64_t n_gen) {
    double gen_tps = (double)n_gen / r->gen_s;
    json_t *o = json_object();
    jo_set(&o, "threads", json_integer(r->threads));
    jo_set(&o, "prompt_tokens", json_integer(n_prompt));
    jo_set(&o, "prompt_tok_s", jo_fixed((double)n_prompt / r->prompt_s, 2));
    jo_set(&o, "gen_tokens", json_integer(n_gen));
    jo_set(&o, "gen_tok_s", jo_fixed(gen_tps, 2));
    jo_set(&o, "gen_weight_GBps", jo_fixed(gen_tps * (double)m->weight_bytes / 1e9, 2));
    return o;
}

/* The report: the model's shape, then the runs (taken). */
static json_t *bench_decode_json(const model *m, const char *path, const char *backend, json_t *runs) {
    const model_hparams *h = &m->hp;
    json_t *o = json_object();
    jo_set(&o, "bench", jo_str("decode"));
    jo_set(&o, "model", jo_str(path));
    jo_set(&o, "backend", jo_str(backend));
    jo_set(&o, "weight_bytes", jo_u64(m->weight_bytes));
    jo_set(&o, "n_layer", json_integer(h->n_layer));
    jo_set(&o, "n_embd", json_integer(h->n_embd));
    jo_set(&o, "n_ff", json_integer(h->n_ff));
    jo_set(&o, "n_head", json_integer(h->n_head));
    jo_set(&o, "n_head_kv", json_integer(h->n_head_kv));
    jo_set(&o, "n_vocab", json_integer(h->n_vocab));
    jo_set(&o, "weight_type", jo_str(dtype_name(m->layers[0].w_gate.type)));
    jo_set(&o, "runs", runs);
    return o;
}

/* bench decode's options. */
typedef struct bench_decode_opts {
    const char *path, *backend;
    int64_t n_prompt, n_gen, warmup;
    int32_t threads[16];
    int n_t;
} bench_decode_opts;

/* The command line (after "decode"): -1 to go on, else the exit status. */
static int bench_decode_parse(int argc, char **argv, bench_decode_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"prompt", 1, 0, 'p'}, {"tokens", 1, 0, 'n'},
        {"threads", 1, 0, 't'}, {"backend", 1, 0, 'B'}, {"warmup", 1, 0, 'W'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *tlist = "1,2";
    int ch;
    while ((ch = getopt_long(argc, argv, "m:p:n:t:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->path = optarg; break;
        case 'p':
            if (app_opt_int("-p", optarg, 1, 1 << 20, &o->n_prompt)) return 2;
            break;
        case 'n':
            if (app_opt_int("-n", optarg, 1, 1 << 20, &o->n_gen)) return 2;
            break;
        case 't': tlist = optarg; break;
        case 'B': o->backend = optarg; break;
        case 'W':
            if (app_opt_int("--warmup", optarg, 0, 1000, &o->warmup)) return 2;
            break;
        case 'h': bench_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode bench decode --help", BENCH_DECODE_USAGE);
        }
    }
    if (!o->path) return app_usage_error("bench decode needs a model: -m MODEL");
    char tl[128];
    snprintf(tl, sizeof tl, "%s", tlist);
    for (char *tokp = strtok(tl, ","); tokp && o->n_t < 16; tokp = strtok(NULL, ",")) {
        int64_t v;
        if (app_opt_int("thread count", tokp, 1, 1024, &v)) return 2;
        o->threads[o->n_t++] = (int32_t)v;
    }
    return -1;
}

static int bench_decode(int argc, char **argv) {
    bench_decode_opts o = {.backend = "cpu", .n_prompt = 128, .n_gen = 64, .warmup = 2};
    int rc = bench_decode_parse(argc, argv, &o);
    if (rc >= 0) return rc;
    st_err err = {0};
    model *m = model_load(o.path, &err);
    if (!m) return app_fail(&err);
    json_t *runs = json_array();
    rc = 0;
    for (int i = 0; i < o.n_t && !rc; i++) {
        bench_run r;
        if (bench_one(m, o.backend, o.threads[i], (int32_t)o.n_prompt, (int32_t)o.n_gen, (int32_t)o.warmup,
                      &r, &err))
            rc = app_fail(&err);
        else
            jo_push(&runs, bench_run_json(&r, m, o.n_prompt, o.n_gen));
    }
    /* the runs done so far, also after a failed one */
    if (jo_print(bench_decode_json(m, o.path, o.backend, runs), &err)) rc = app_fail(&err);
    model_free(m);
    return rc;
}

/* The benches by name: decode here, the others in their files (forest.c,
 * attn.c, strategy.c, spec.c). */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} bench_subs[] = {
    {"forest", cmd_bench_forest}, {"ask", cmd_bench_ask},   {"attention", cmd_bench_attention},
    {"beam", cmd_bench_beam},     {"cot", cmd_bench_cot},   {"spec", cmd_bench_spec},
    {"decode", bench_decode},     {"memory", cmd_bench_memory},
};

int cmd_bench(int argc, char **argv) {
    for (size_t i = 0; argc >= 2 && i < sizeof bench_subs / sizeof bench_subs[0]; i++)
        if (!strcmp(argv[1], bench_subs[i].name)) return bench_subs[i].run(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        bench_usage(stdout);
        return 0;
    }
    bench_usage(stderr);
    return 2;
}
