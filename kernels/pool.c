/* pool.c - the persistent thread pool behind pool_run (see pool.h).
 *
 * A job is described in desc[gen & 1] and published by storing a 64-bit ticket,
 * (generation << 32) | next task. Threads claim a task by compare-and-swap on the
 * ticket, which succeeds only while the generation is still theirs, so a worker that
 * wakes late (descheduled, or still asleep) can never run a task of the wrong job and
 * can never hold the caller up: the caller claims tasks too and waits only for the
 * tasks that were claimed, counted in n_finished. Descriptors alternate between two
 * slots so that the one a late worker may still be reading is never the one being
 * rewritten; a stale read is then thrown away by the failing compare-and-swap. */
#include "pool.h"

#include "base/clock.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define POOL_RELAX() _mm_pause()
#else
#define POOL_RELAX() ((void)0)
#endif

typedef struct pool_worker {
    pool *p;
    int32_t id;
} pool_worker;

/* A job. Fields are atomics (read relaxed) only because a late worker may read a
 * slot while the caller rewrites it; such a read never leads to running a task. */
typedef struct pool_desc {
    _Atomic(pool_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
} pool_desc;

struct pool {
    int32_t n_threads;          /* the caller included */
    int32_t n_started;          /* worker threads actually running */
    pthread_t *threads;         /* (n_threads - 1) */
    pool_worker *workers;       /* (n_threads - 1) */
    pthread_mutex_t mu;         /* guards sleeping workers' wait */
    pthread_cond_t wake;

    atomic_uint_fast64_t ticket; /* (gen << 32) | next task to claim */
    atomic_int n_finished;      /* tasks of the current job that have returned */
    atomic_int n_sleeping;      /* workers blocked (or about to block) on wake */
    atomic_bool stop;
    uint32_t gen;               /* the caller's copy of the current generation */
    pool_desc desc[2];          /* the job of generation g is desc[g & 1] */
};

/* Claims and runs tasks of generation g until there are none left or the pool has
 * moved on to another job. */
static void pool_take_tasks(pool *p, uint32_t g, int32_t thread) {
    const pool_desc *d = &p->desc[g & 1];
    uint64_t v = atomic_load_explicit(&p->ticket, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(v >> 32) != g) return;
        int32_t t = (int32_t)(uint32_t)v;
        if (t >= atomic_load_explicit(&d->n_tasks, memory_order_relaxed)) return;
        pool_fn fn = atomic_load_explicit(&d->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&d->ctx, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &v, v + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue; /* v now holds the current ticket */
        fn(ctx, t, thread);
        atomic_fetch_add_explicit(&p->n_finished, 1, memory_order_release);
        v = atomic_load_explicit(&p->ticket, memory_order_acquire);
    }
}

static uint32_t pool_gen(pool *p, memory_order mo) {
    return (uint32_t)(atomic_load_explicit(&p->ticket, mo) >> 32);
}

/* Waits until the generation differs from seen and returns the new one: spins first,
 * then sleeps. The sleeping side announces itself in n_sleeping before it checks the
 * ticket (both seq_cst), and pool_run stores the ticket before it reads n_sleeping,
 * so either the worker sees the new job or pool_run sees the sleeper and wakes it. */
static uint32_t pool_wait_job(pool *p, uint32_t seen) {
    double t0 = mono_now_s();
    for (uint32_t i = 1;; i++) {
        uint32_t g = pool_gen(p, memory_order_acquire);
        if (g != seen) return g;
        POOL_RELAX();
        if ((i & 255) == 0 && (mono_now_s() - t0) * 1e9 > POOL_SPIN_NS) break;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    uint32_t g;
    while ((g = pool_gen(p, memory_order_seq_cst)) == seen) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *pool_main(void *arg) {
    pool_worker *w = arg;
    pool *p = w->p;
    uint32_t seen = 0;
    for (;;) {
        seen = pool_wait_job(p, seen);
        if (atomic_load(&p->stop)) break;
        pool_take_tasks(p, seen, w->id);
    }
    return NULL;
}

static void pool_signal(pool *p) {
    if (atomic_load(&p->n_sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
}

pool *pool_init(int32_t n_threads) {
    if (n_threads < 1) return NULL;
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    atomic_init(&p->ticket, 0);
    atomic_init(&p->n_finished, 0);
    for (int i = 0; i < 2; i++) {
        atomic_init(&p->desc[i].fn, NULL);
        atomic_init(&p->desc[i].ctx, NULL);
        atomic_init(&p->desc[i].n_tasks, 0);
    }
    atomic_init(&p->n_sleeping, 0);
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->threads || !p->workers) {
            pool_free(p);
            return NULL;
        }
        for (int32_t i = 0; i < n_threads - 1; i++) {
            p->workers[i] = (pool_worker){p, i + 1};
            if (pthread_create(&p->threads[i], NULL, pool_main, &p->workers[i]) != 0) {
                pool_free(p);
                return NULL;
            }
            p->n_started++;
        }
    }
    return p;
}

void pool_free(pool *p) {
    if (!p) return;
    if (p->n_started > 0) {
        atomic_store(&p->stop, true);
        atomic_store(&p->ticket, (uint64_t)(p->gen + 1) << 32);
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int32_t i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    }
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->workers);
    free(p);
}

int32_t pool_threads(const pool *p) { return p ? p->n_threads : 1; }

void pool_run(pool *p, int32_t n_tasks, pool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        /* Not worth waking anyone. */
        for (int32_t t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    /* All tasks of the previous job have finished, so nobody can still run one of
     * them; its descriptor slot may be read by late workers, this one may not. */
    const uint32_t g = ++p->gen;
    pool_desc *d = &p->desc[g & 1];
    atomic_store_explicit(&d->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&d->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&d->n_tasks, n_tasks, memory_order_relaxed);
    atomic_store_explicit(&p->n_finished, 0, memory_order_relaxed);
    atomic_store(&p->ticket, (uint64_t)g << 32); /* seq_cst: publish, then check sleepers */
    pool_signal(p);
    pool_take_tasks(p, g, 0);
    /* Only tasks a worker has claimed are left; wait for those. Yield now and then in
     * case that worker was descheduled (more runnable threads than cores). */
    for (uint32_t i = 1; atomic_load_explicit(&p->n_finished, memory_order_acquire) < n_tasks;
         i++) {
        POOL_RELAX();
        if ((i & 1023) == 0) sched_yield();
    }
}
