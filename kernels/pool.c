/* pool.c - the persistent thread pool behind pool_run (see pool.h).
 *
 * A job is published by storing fn/ctx/n_tasks and then bumping a generation counter;
 * workers watch the counter (spinning, then sleeping on a condition variable), take
 * task numbers from an atomic counter, and count themselves done. The caller takes
 * tasks too and then spins until every worker has reported, so the job's fields stay
 * untouched until nobody reads them any more. */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

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

struct pool {
    int32_t n_threads;          /* the caller included */
    int32_t n_started;          /* worker threads actually running */
    pthread_t *threads;         /* (n_threads - 1) */
    pool_worker *workers;       /* (n_threads - 1) */
    pthread_mutex_t mu;         /* guards sleeping workers' wait */
    pthread_cond_t wake;

    atomic_uint gen;            /* bumped once per job (and once to stop) */
    atomic_int next_task;       /* next task number to hand out */
    atomic_int n_done;          /* workers finished with the current job */
    atomic_int n_sleeping;      /* workers blocked (or about to block) on wake */
    atomic_bool stop;

    /* The current job: written by the caller before gen is bumped. */
    pool_fn fn;
    void *ctx;
    int32_t n_tasks;
};

static int64_t pool_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pool_take_tasks(pool *p, int32_t thread) {
    for (;;) {
        int32_t t = atomic_fetch_add_explicit(&p->next_task, 1, memory_order_relaxed);
        if (t >= p->n_tasks) break;
        p->fn(p->ctx, t, thread);
    }
}

/* Waits until gen differs from seen and returns the new value: spins first, then
 * sleeps. The sleeping side announces itself in n_sleeping before it checks gen
 * (both seq_cst), and pool_run bumps gen before it reads n_sleeping, so either the
 * worker sees the new job or pool_run sees the sleeper and signals it. */
static unsigned pool_wait_job(pool *p, unsigned seen) {
    int64_t t0 = pool_now_ns();
    for (uint32_t i = 1;; i++) {
        unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        POOL_RELAX();
        if ((i & 255) == 0 && pool_now_ns() - t0 > POOL_SPIN_NS) break;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->n_sleeping, 1);
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->n_sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *pool_main(void *arg) {
    pool_worker *w = arg;
    pool *p = w->p;
    unsigned seen = 0;
    for (;;) {
        seen = pool_wait_job(p, seen);
        if (atomic_load(&p->stop)) break;
        pool_take_tasks(p, w->id);
        atomic_fetch_add_explicit(&p->n_done, 1, memory_order_release);
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
    atomic_init(&p->gen, 0);
    atomic_init(&p->next_task, 0);
    atomic_init(&p->n_done, 0);
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
        atomic_fetch_add(&p->gen, 1);
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
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store_explicit(&p->next_task, 0, memory_order_relaxed);
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes the job, then check sleepers */
    pool_signal(p);
    pool_take_tasks(p, 0);
    /* Workers are mid-task or about to finish; yield now and then in case one of
     * them was descheduled (more threads than free cores). */
    for (uint32_t i = 1; atomic_load_explicit(&p->n_done, memory_order_acquire) < p->n_started;
         i++) {
        POOL_RELAX();
        if ((i & 4095) == 0) sched_yield();
    }
}
