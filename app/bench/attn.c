/* attn.c - `multidecode bench attention`: the attention kernel alone, on the
 * shape of a forest step, JSON out.
 *
 * R rows (leaves) attend to one shared context of C keys plus O keys of their own, over L
 * layers, each layer with its own KV (so, as in a model, a layer's keys are not in cache
 * when its attention starts). Two ways, taken in turn every repetition so that a slow
 * spell of the machine falls on both: "shared", all R rows in one call (what a forest
 * step does), and "alone", R calls of one row (what R sequential decodes do). Reports the
 * median time of each, their ratio, the rate in (row, head, key) triples per second and
 * the K and V bytes each way reads, and checks that every row gets the same bits both
 * ways (the kernel's exactness promise). Shapes come from the options or from a model's
 * header (-m). Random q, K and V from a fixed seed. --no-alone times the shared way only
 * (its "alone" figures and same_bits are then null), so that a profile of the run is a
 * profile of the forest's path: the alone way otherwise takes most of the samples. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "model/model.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"

#define BA_MAX_REPS 999

/* The first line of --help, which a mistyped option prints instead of the whole help. */
#define BENCH_ATTN_USAGE "usage: multidecode bench attention [options]"

static void ba_usage(FILE *f) {
    fprintf(f, BENCH_ATTN_USAGE "\n\n"
               "The attention kernel alone on a forest step's shape: R rows over one shared\n"
               "context plus keys of their own, all rows in one call vs each row alone.\n"
               "JSON on stdout.\n\n"
               "  -m, --model PATH     take heads, KV heads, head size and layers from a model\n"
               "  -r, --rows N         rows (leaves) (default 16)\n"
               "  -p, --context N      shared context keys (default 1000)\n"
               "  -o, --own N          keys of each row's own (default 80)\n"
               "  -l, --layers N       layers, each with its own KV (default 30)\n"
               "      --heads H/K      query heads / KV heads (default 9/3)\n"
               "      --head-dim N     head size (default 64)\n"
               "  -n, --reps N         repetitions (default 20); times are medians\n"
               "  -t, --threads N      CPU threads (default: one per core)\n"
               "      --no-alone       time the rows in one call only (to profile that path)\n"
               "      --backend NAME   cpu (default), ref, or cuda (a GPU build)\n");
}

static float *ba_rand(int64_t n, float amp, uint64_t *s) {
    float *x = aligned_alloc(64, ((size_t)n * sizeof *x + 63) / 64 * 64); /* as the model's KV */
    if (!x) return NULL;
    for (int64_t i = 0; i < n; i++) {
        x[i] = amp * ((float)(bench_lcg(s) >> 40) / (float)(1 << 24) - 0.5f);
    }
    return x;
}

typedef struct ba_shape {
    int64_t rows, ctx, own, layers, n_head, n_head_kv, head_dim;
} ba_shape;

/* One repetition of both ways (of the shared way only when !alone) over the rows of call
 * (its k, v and out set here per layer); each way's seconds into *ts / *ta. same: cleared
 * when a row's output differs between them. */
static void ba_rep(kern_backend *be, const ba_shape *s, const kern_attn *call,
                   float *const *k, float *const *v, float *out_s, float *out_a, bool alone,
                   double *ts, double *ta, bool *same) {
    const kern_ops *o = kern_backend_ops(be);
    const int64_t qrow = s->n_head * s->head_dim;
    kern_attn a = *call;
    double t0 = mono_now_s();
    for (int64_t l = 0; l < s->layers; l++) {
        a.k = k[l], a.v = v[l], a.out = out_s + l * s->rows * qrow;
        o->attention(be, &a);
    }
    double t1 = mono_now_s();
    *ts = t1 - t0, *ta = 0;
    if (!alone) return;
    for (int64_t r = 0; r < s->rows; r++) /* a row through every layer, as a decode step goes */
        for (int64_t l = 0; l < s->layers; l++) {
            kern_attn a1 = a;
            a1.n_rows = 1, a1.k = k[l], a1.v = v[l], a1.q = a.q + r * qrow;
            a1.seg_off = a.seg_off + r;
            a1.out = out_a + (l * s->rows + r) * qrow;
            o->attention(be, &a1);
        }
    *ta = mono_now_s() - t1;
    if (memcmp(out_s, out_a, (size_t)(s->layers * s->rows * qrow) * sizeof(float))) *same = false;
}

/* One way's figures: the median call in ms, (query, key, head) triples per second and the
 * K/V bytes it reads. */
static json_t *ba_way_json(double ms, double triples, double kv_bytes) {
    json_t *o = json_object();
    jo_set(&o, "ms", jo_fixed(ms, 4));
    jo_set(&o, "triples_per_s", jo_sig(triples / (ms * 1e-3), 4));
    jo_set(&o, "kv_bytes", json_integer((json_int_t)kv_bytes));
    return o;
}

/* The bench's buffers: random q, K and V (from a fixed seed, in that order), the outputs
 * of both ways, each row's segments (the context, then its own keys) and the times. */
typedef struct ba_data {
    float **k, **v;          /* (layers) each (slots, kv_dim) */
    float *q, *out_s, *out_a;
    int32_t *off;            /* (rows + 1) */
    kern_seg *segs;          /* (2 rows) */
    double *ts, *ta;         /* (reps) */
} ba_data;

static void ba_data_free(ba_data *d, const ba_shape *s) {
    for (int64_t l = 0; d->k && d->v && l < s->layers; l++) free(d->k[l]), free(d->v[l]);
    free(d->k), free(d->v), free(d->q), free(d->out_s), free(d->out_a), free(d->off), free(d->segs);
    free(d->ts), free(d->ta);
}

/* d's buffers for shape s; false when memory runs out (free d then). */
static bool ba_data_init(ba_data *d, const ba_shape *s, int64_t reps) {
    const int64_t slots = s->ctx + s->rows * s->own, kvd = s->n_head_kv * s->head_dim;
    const int64_t qn = s->rows * s->n_head * s->head_dim;
    uint64_t seed = 42;
    *d = (ba_data){0};
    d->k = calloc((size_t)s->layers, sizeof *d->k), d->v = calloc((size_t)s->layers, sizeof *d->v);
    d->q = ba_rand(qn, 6.0f, &seed);
    d->out_s = malloc((size_t)(s->layers * qn) * sizeof(float));
    d->out_a = malloc((size_t)(s->layers * qn) * sizeof(float));
    d->off = malloc((size_t)(s->rows + 1) * sizeof *d->off);
    d->segs = malloc((size_t)(2 * s->rows) * sizeof *d->segs);
    d->ts = malloc((size_t)reps * sizeof *d->ts), d->ta = malloc((size_t)reps * sizeof *d->ta);
    bool ok = d->k && d->v && d->q && d->out_s && d->out_a && d->off && d->segs && d->ts && d->ta;
    for (int64_t l = 0; ok && l < s->layers; l++) {
        d->k[l] = ba_rand(slots * kvd, 2.0f, &seed);
        d->v[l] = ba_rand(slots * kvd, 2.0f, &seed);
        ok = d->k[l] && d->v[l];
    }
    for (int64_t r = 0; ok && r < s->rows; r++) { /* the context, then the row's own keys */
        d->off[r] = (int32_t)(2 * r);
        d->segs[2 * r] = (kern_seg){0, (int32_t)s->ctx};
        d->segs[2 * r + 1] = (kern_seg){(int32_t)(s->ctx + r * s->own), (int32_t)s->own};
    }
    if (ok) d->off[s->rows] = (int32_t)(2 * s->rows);
    return ok;
}

/* The report: the shape, and each way's median ms (ms shared, ma alone), rate and bytes. */
static json_t *ba_report(const ba_shape *s, int64_t reps, const char *backend, int32_t threads, double ms,
                         double ma, bool alone, bool same) {
    const int64_t slots = s->ctx + s->rows * s->own, kvd = s->n_head_kv * s->head_dim;
    const double triples = (double)s->layers * (double)s->rows * (double)s->n_head *
                           (double)(s->ctx + s->own);
    /* bytes of K and V each way reads from the cache: the shared context once per call */
    const double kv_row = 2.0 * (double)kvd * sizeof(float) * (double)s->layers;
    const double bytes_s = kv_row * (double)slots;
    const double bytes_a = kv_row * (double)s->rows * (double)(s->ctx + s->own);
    json_t *doc = json_object();
    jo_set(&doc, "bench", jo_str("attention"));
    jo_set(&doc, "backend", jo_str(backend));
    jo_set(&doc, "threads", json_integer(threads));
    jo_set(&doc, "rows", json_integer(s->rows));
    jo_set(&doc, "context", json_integer(s->ctx));
    jo_set(&doc, "own", json_integer(s->own));
    jo_set(&doc, "layers", json_integer(s->layers));
    jo_set(&doc, "n_head", json_integer(s->n_head));
    jo_set(&doc, "n_head_kv", json_integer(s->n_head_kv));
    jo_set(&doc, "head_dim", json_integer(s->head_dim));
    jo_set(&doc, "reps", json_integer(reps));
    jo_set(&doc, "shared", ba_way_json(ms, triples, bytes_s));
    jo_set(&doc, "alone", alone ? ba_way_json(ma, triples, bytes_a) : json_null());
    jo_set(&doc, "alone_over_shared", alone ? jo_fixed(ma / ms, 3) : json_null());
    jo_set(&doc, "same_bits", alone ? json_boolean(same) : json_null());
    return doc;
}

static int ba_run(const ba_shape *s, int64_t reps, int64_t threads, const char *backend,
                  bool alone) {
    st_err err = {0};
    kern_backend *be = kern_backend_init(backend, (int32_t)threads, &err);
    if (!be) return app_fail(&err);
    ba_data d;
    st_code rc = ST_OK;
    if (!ba_data_init(&d, s, reps))
        rc = st_set(&err, ST_ERR_NOMEM, "out of memory for %lld layers of %lld KV slots",
                    (long long)s->layers, (long long)(s->ctx + s->rows * s->own));
    bool same = true;
    double t_s, t_a;
    const kern_attn call = {.n_rows = (int32_t)s->rows, .n_head = (int32_t)s->n_head,
                            .n_head_kv = (int32_t)s->n_head_kv, .head_dim = (int32_t)s->head_dim,
                            .scale = 1.0f / sqrtf((float)s->head_dim), .q = d.q, .seg_off = d.off,
                            .segs = d.segs};
    if (!rc) ba_rep(be, s, &call, d.k, d.v, d.out_s, d.out_a, alone, &t_s, &t_a, &same); /* warm up */
    for (int64_t i = 0; i < reps && !rc; i++)
        ba_rep(be, s, &call, d.k, d.v, d.out_s, d.out_a, alone, &d.ts[i], &d.ta[i], &same);
    if (!rc) {
        const double ms = bench_median(d.ts, (int)reps) * 1e3, ma = bench_median(d.ta, (int)reps) * 1e3;
        rc = jo_print(ba_report(s, reps, backend, kern_backend_threads(be), ms, ma, alone, same), &err);
    }
    if (!rc && !same) rc = st_set(&err, ST_ERR_BACKEND, "rows in one call and rows alone got different bits");
    ba_data_free(&d, s);
    kern_backend_free(be);
    return rc ? app_fail(&err) : 0;
}

int cmd_bench_attention(int argc, char **argv) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"rows", 1, 0, 'r'}, {"context", 1, 0, 'p'}, {"own", 1, 0, 'o'},
        {"layers", 1, 0, 'l'}, {"heads", 1, 0, 'H'}, {"head-dim", 1, 0, 'D'},
        {"reps", 1, 0, 'n'}, {"threads", 1, 0, 't'}, {"backend", 1, 0, 'B'},
        {"no-alone", 0, 0, 'A'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    ba_shape s = {.rows = 16, .ctx = 1000, .own = 80, .layers = 30, .n_head = 9, .n_head_kv = 3,
                  .head_dim = 64};
    int64_t reps = 20, threads = 0;
    const char *backend = "cpu", *path = NULL;
    bool set_layers = false, set_heads = false, set_hd = false, alone = true;
    int ch;
    while ((ch = getopt_long(argc, argv, "m:r:p:o:l:n:t:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': path = optarg; break;
        case 'r':
            if (app_opt_int("--rows", optarg, 1, 4096, &s.rows)) return 2;
            break;
        case 'p':
            if (app_opt_int("--context", optarg, 0, 1 << 20, &s.ctx)) return 2;
            break;
        case 'o':
            if (app_opt_int("--own", optarg, 0, 1 << 20, &s.own)) return 2;
            break;
        case 'l':
            if (app_opt_int("--layers", optarg, 1, 1024, &s.layers)) return 2;
            set_layers = true;
            break;
        case 'H': {
            char *sl = strchr(optarg, '/');
            if (!sl) return app_usage_error("bad --heads '%s': want H/K, e.g. 9/3", optarg);
            *sl = '\0';
            if (app_parse_int(optarg, 1, 1024, &s.n_head) || app_parse_int(sl + 1, 1, 1024, &s.n_head_kv) ||
                s.n_head % s.n_head_kv)
                return app_usage_error("bad --heads: K must divide H");
            set_heads = true;
            break;
        }
        case 'D':
            if (app_opt_int("--head-dim", optarg, 1, 1024, &s.head_dim)) return 2;
            set_hd = true;
            break;
        case 'n':
            if (app_opt_int("--reps", optarg, 1, BA_MAX_REPS, &reps)) return 2;
            break;
        case 't':
            if (app_opt_int("--threads", optarg, 1, 1024, &threads)) return 2;
            break;
        case 'B': backend = optarg; break;
        case 'A': alone = false; break;
        case 'h': ba_usage(stdout); return 0;
        default: return app_usage_error("%s; see multidecode bench attention --help", BENCH_ATTN_USAGE);
        }
    }
    if (optind < argc) return app_usage_error("bench attention takes no arguments ('%s')", argv[optind]);
    if (s.ctx + s.own == 0) return app_usage_error("bench attention needs keys: --context or --own");
    if (path) { /* the model's shape, where the options did not set it */
        st_err err = {0};
        model *m = model_load(path, &err);
        if (!m) return app_fail(&err);
        if (!set_layers) s.layers = m->hp.n_layer;
        if (!set_heads) s.n_head = m->hp.n_head, s.n_head_kv = m->hp.n_head_kv;
        if (!set_hd) s.head_dim = m->hp.head_dim;
        model_free(m);
    }
    const int64_t slots = s.ctx + s.rows * s.own;
    if (slots > (1 << 24))
        return app_usage_error("bench attention: %lld KV slots is too many", (long long)slots);
    return ba_run(&s, reps, threads, backend, alone);
}
