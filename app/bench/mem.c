/* mem.c - `multidecode bench memory`: how fast this machine's threads read
 * memory, the ceiling of decode (which reads every weight once per token), so that
 * `bench decode`'s gen_weight_GBps can be read as a fraction of it. Each thread reads its
 * own slice of one buffer far larger than the caches (a task of the kernels' thread pool,
 * as the products are) with 32-byte vector loads (GCC's vector extension: no intrinsics),
 * a few passes; the fastest pass counts. JSON on stdout. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "kernels/pool.h"
#include "app/app.h"
#include "app/json_out.h"
#include "bench.h"

#define BENCH_MEM_USAGE "usage: multidecode bench memory [options]"

typedef long long mem_vec __attribute__((vector_size(32)));

typedef struct mem_job {
    const mem_vec *p;
    size_t per;            /* vectors a task reads */
    long long sink[64];    /* (one per task, so the loads are not optimised away) */
} mem_job;

/* Task i reads its slice with four independent accumulators, so the loads are not
 * serialised behind one. */
static void mem_read(void *ctx, int32_t task, int32_t thread) {
    (void)thread;
    mem_job *j = ctx;
    const mem_vec *p = j->p + (size_t)task * j->per;
    mem_vec a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i + 4 <= j->per; i += 4) a ^= p[i], b ^= p[i + 1], c ^= p[i + 2], d ^= p[i + 3];
    a ^= b ^ c ^ d;
    j->sink[task] = a[0] ^ a[1] ^ a[2] ^ a[3];
}

/* One pass of the pool's threads over n vectors at p, a slice each: seconds. */
static double mem_pass(pool *pl, const mem_vec *p, size_t n) {
    const int32_t t = pool_threads(pl);
    mem_job j = {p, n / (size_t)t, {0}};
    const double t0 = mono_now_s();
    pool_run(pl, t, mem_read, &j);
    return mono_now_s() - t0;
}

static void bench_mem_usage(FILE *f) {
    fprintf(f, BENCH_MEM_USAGE "\n\n"
               "Reads a buffer with 1..T threads, fastest of the passes; JSON on stdout.\n\n"
               "  -t, --threads LIST   comma-separated thread counts (default 1,2; at most 64)\n"
               "      --mib N          buffer size in MiB (default 1024)\n"
               "      --passes N       passes per thread count (default 5)\n");
}

int cmd_bench_memory(int argc, char **argv) {
    static const struct option opts[] = {{"threads", required_argument, 0, 't'},
                                         {"mib", required_argument, 0, 'M'},
                                         {"passes", required_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *threads = "1,2";
    int64_t mib = 1024, passes = 5;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
        if (c == 't') threads = optarg;
        else if (c == 'M' && app_opt_int("--mib", optarg, 1, 65536, &mib)) return 2;
        else if (c == 'P' && app_opt_int("--passes", optarg, 1, 1000, &passes)) return 2;
        else if (c == 'h') return bench_mem_usage(stdout), 0;
        else if (c == '?') return app_usage_error("%s; see multidecode bench memory --help", BENCH_MEM_USAGE);
    }
    const size_t bytes = (size_t)mib << 20, n = bytes / sizeof(mem_vec);
    mem_vec *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "multidecode: bench memory: cannot allocate %lld MiB\n", (long long)mib);
        return 1;
    }
    memset(p, 1, bytes); /* (pages made resident before timing) */
    json_t *runs = json_array();
    for (const char *t = threads; *t;) {
        char *end;
        const long nt = strtol(t, &end, 10);
        if (end == t || nt < 1 || nt > 64 || (*end && *end != ',')) {
            free(p), json_decref(runs);
            return app_usage_error("bad --threads '%s': want a list of counts 1..64", threads);
        }
        pool *pl = pool_init((int32_t)nt);
        double best = 1e30;
        for (int64_t i = 0; pl && i < passes; i++) {
            const double s = mem_pass(pl, p, n);
            if (s < best) best = s;
        }
        pool_free(pl);
        json_t *r = json_object();
        jo_set(&r, "threads", json_integer(nt));
        jo_set(&r, "read_GBps", jo_fixed(best < 1e30 ? (double)bytes / best / 1e9 : NAN, 2));
        jo_push(&runs, r);
        t = *end ? end + 1 : end;
    }
    free(p);
    json_t *doc = json_object();
    jo_set(&doc, "bench", jo_str("memory"));
    jo_set(&doc, "bytes", json_integer((json_int_t)bytes));
    jo_set(&doc, "runs", runs);
    st_err err = {0};
    return jo_print(doc, &err) ? app_fail(&err) : 0;
}
