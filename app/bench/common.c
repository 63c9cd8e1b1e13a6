/* common.c - the pieces of bench.h every benchmark shares. */
#include "bench.h"
#include "app/prompt.h"

#include <stdlib.h>

static int bench_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json_t *bench_times_json(double prefill_s, double decode_s, int32_t steps) {
    json_t *o = json_object();
    jo_set(&o, "prefill_s", jo_fixed(prefill_s, 4));
    jo_set(&o, "decode_s", jo_fixed(decode_s, 4));
    jo_set(&o, "total_s", jo_fixed(prefill_s + decode_s, 4));
    jo_set(&o, "steps", json_integer(steps));
    jo_set(&o, "step_ms", jo_fixed(steps ? 1e3 * decode_s / steps : 0.0, 3));
    return o;
}

int64_t bench_kv_bytes_per_slot(const model *m) {
    return 2 * model_kv_slot_floats(&m->hp) * 4;
}

void bench_synth(int32_t *out, int32_t n, int32_t V, uint64_t s) {
    for (int32_t i = 0; i < n; i++) {
        out[i] = 1 + (int32_t)((bench_lcg(&s) >> 33) % (uint64_t)(V > 1 ? V - 1 : 1));
    }
}

model_ctx *bench_ctx(const model *m, int32_t threads, const char *backend, int64_t n_slots,
                     st_err *err) {
    if (n_slots > (1 << 24)) {
        st_set(err, ST_ERR_CONTEXT, "this run needs %lld KV slots; shrink it", (long long)n_slots);
        return NULL;
    }
    model_ctx_params cp = prompt_ctx_params();
    cp.n_threads = threads;
    cp.backend = backend;
    cp.n_slots = (int32_t)n_slots;
    return model_ctx_init(m, &cp, err);
}
