/* pool.h - a small persistent pthread thread pool for the CPU kernels.
 *
 * pool_run(p, n_tasks, fn, ctx) calls fn(ctx, task, thread) once for every task in
 * [0, n_tasks) and returns when all have finished. The calling thread works too (it is
 * thread 0; the pool's own threads are 1 .. n_threads - 1), and tasks are handed out
 * one at a time from a shared counter, so uneven tasks balance themselves, and a
 * worker that is descheduled (more runnable threads than cores) delays a job only by
 * the task it holds: the caller does the rest.
 *
 * Latency matters more than throughput here: a decode step runs ~10 short parallel
 * ops per layer, each a few tens of microseconds. So idle workers first spin (for
 * POOL_SPIN_NS) watching for the next job, and only then sleep on a condition
 * variable; a job posted while they spin starts within a fraction of a microsecond,
 * one posted to sleeping workers pays a futex wake-up (tens of microseconds).
 *
 * It is not a general executor: one caller at a time, no nesting (fn must not call
 * pool_run), no futures. */
#ifndef MD_POOL_H
#define MD_POOL_H

#include <stdint.h>

/* How long an idle worker spins before it sleeps, in nanoseconds. */
#define POOL_SPIN_NS 300000

typedef struct pool pool;

/* One task. task is in [0, n_tasks); thread is in [0, pool_threads(p)) and is unique
 * among the tasks running at the same moment (for per-thread scratch). */
typedef void (*pool_fn)(void *ctx, int32_t task, int32_t thread);

/* Starts n_threads - 1 worker threads (n_threads >= 1; 1 means everything runs in the
 * caller). Returns NULL when a thread or an allocation fails. Free with pool_free. */
pool *pool_init(int32_t n_threads);

/* Stops and joins the workers and frees the pool; NULL is a no-op. */
void pool_free(pool *p);

/* Threads that run tasks, the caller included. */
int32_t pool_threads(const pool *p);

/* Runs fn for every task and waits for all of them. n_tasks <= 0 does nothing.
 * Not reentrant; ctx is only read by the tasks while pool_run runs. */
void pool_run(pool *p, int32_t n_tasks, pool_fn fn, void *ctx);

#endif
