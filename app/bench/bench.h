/* bench.h - the benchmark commands (`multidecode bench NAME`, dispatched by bench.c) and
 * the pieces they share (common.c): an LCG, KV bytes per slot, synthetic prompt tokens, a
 * median, a KV context sized for one run, and the times of a run as JSON. */
#ifndef MD_BENCH_H
#define MD_BENCH_H

#include <stdint.h>

#include "app/json_out.h"
#include "model/model.h"

/* Each takes the arguments after `bench` (argv[0] is its name) and returns the exit status. */
int cmd_bench_forest(int argc, char **argv);    /* "forest" (forest.c) */
int cmd_bench_ask(int argc, char **argv);       /* "ask" (forest.c) */
int cmd_bench_attention(int argc, char **argv); /* "attention" (attn.c) */
int cmd_bench_memory(int argc, char **argv);    /* "memory": read bandwidth (mem.c) */
int cmd_bench_beam(int argc, char **argv);      /* "beam" (strategy.c) */
int cmd_bench_cot(int argc, char **argv);       /* "cot" (strategy.c) */
int cmd_bench_spec(int argc, char **argv);      /* "spec" (spec.c) */

/* One step of the benches' 64-bit LCG (Knuth's MMIX constants): advances *s, returns it. */
static inline uint64_t bench_lcg(uint64_t *s) {
    return *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
}

/* Bytes one KV slot takes: (K + V) x 4 (f32) over the layers that keep a cache, each with
 * its own heads (model_kv_slot_floats: Gemma 4's local and global layers differ, its
 * shared-KV layers and Qwen3.5's recurrent ones keep none). */
int64_t bench_kv_bytes_per_slot(const model *m);
/* n deterministic tokens in [1, V) (0 is often <unk>) from an LCG started at state. */
void bench_synth(int32_t *out, int32_t n, int32_t V, uint64_t state);
/* The median of the n values of v (sorts them). */
double bench_median(double *v, int n);
/* The times every bench reports for one way of doing the work: {"prefill_s", "decode_s",
 * "total_s", "steps", "step_ms"} (seconds to 4 decimals, the mean step to 3); callers add
 * their own figures. NULL when out of memory. */
json_t *bench_times_json(double prefill_s, double decode_s, int32_t steps);
/* A context of n_slots slots; ST_ERR_CONTEXT when a run would need more than 2^24. */
model_ctx *bench_ctx(const model *m, int32_t threads, const char *backend, int64_t n_slots,
                     st_err *err);

#endif
