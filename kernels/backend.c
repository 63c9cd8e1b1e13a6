/* backend.c - kern_backend: picks an ops table by name and owns what the ops share
 * (a thread pool and a scratch buffer). See kern.h for the public contract and
 * kern_impl.h for what the ops may use. */
#include "kern_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kern_backend {
    const kern_ops *ops;
    int32_t n_threads;
    pool *pool;
    void *scratch;          /* 64-byte aligned, scratch_bytes long */
    size_t scratch_bytes;
    st_err fail;            /* the first allocation an op could not make since the last
                             * kern_backend_take_error */
    struct {                /* the last rope table (kern_backend_rope_table) and its key */
        int32_t *pos;
        double *theta;
        float *cs;
        int32_t n_rows, np, cap_rows, cap_np;
    } rope;
};

kern_backend *kern_backend_init(const char *name, int32_t n_threads, st_err *err) {
    const kern_ops *ops = NULL;
    if (name && strcmp(name, "ref") == 0) {
        ops = &kern_ref_ops;
        n_threads = 1; /* the oracle stays simple: one thread, fixed summation order */
    } else if (name && strcmp(name, "cpu") == 0) {
        ops = &kern_cpu_ops;
        if (n_threads <= 0) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            n_threads = n > 0 ? (int32_t)(n < 256 ? n : 256) : 1;
        }
    } else {
        st_set(err, ST_ERR_ARG, "unknown compute backend '%s' (known: ref, cpu)",
               name ? name : "(null)");
        return NULL;
    }
    kern_backend *b = calloc(1, sizeof *b);
    if (!b) {
        st_set(err, ST_ERR_NOMEM, "out of memory creating the %s backend", name);
        return NULL;
    }
    b->ops = ops;
    b->n_threads = n_threads;
    b->pool = pool_init(n_threads);
    if (!b->pool) {
        st_set(err, ST_ERR_BACKEND, "cannot start %d threads for the %s backend",
               (int)n_threads, name);
        free(b);
        return NULL;
    }
    return b;
}

void kern_backend_free(kern_backend *b) {
    if (!b) return;
    pool_free(b->pool);
    free(b->scratch);
    free(b->rope.pos);
    free(b->rope.theta);
    free(b->rope.cs);
    free(b);
}

const kern_ops *kern_backend_ops(const kern_backend *b) { return b->ops; }
const char *kern_backend_name(const kern_backend *b) { return b->ops->name; }
int32_t kern_backend_threads(const kern_backend *b) { return b->n_threads; }

pool *kern_backend_pool(kern_backend *b) { return b->pool; }

void kern_backend_parallel(kern_backend *b, int32_t n_tasks,
                           void (*fn)(void *ctx, int32_t task, int32_t thread), void *ctx) {
    if (n_tasks > 0) pool_run(b->pool, n_tasks, fn, ctx);
}

void *kern_aligned_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - 63) return NULL;
    return aligned_alloc(64, (bytes + 63) / 64 * 64); /* (C11 wants a multiple of 64) */
}

/* Records an op's failed allocation (the first since the last take) and returns NULL. */
static void *kern_backend_fail(kern_backend *b, const char *what, size_t bytes) {
    if (b->fail.code == ST_OK)
        st_set(&b->fail, ST_ERR_NOMEM, "out of memory: the %s backend could not allocate "
               "%zu bytes for %s", b->ops->name, bytes, what);
    return NULL;
}

st_code kern_backend_take_error(kern_backend *b, st_err *err) {
    st_code rc = b->fail.code;
    if (rc && err) *err = b->fail;
    st_clear(&b->fail);
    return rc;
}

void *kern_backend_scratch(kern_backend *b, size_t bytes) {
    if (bytes <= b->scratch_bytes) return b->scratch;
    size_t n = b->scratch_bytes ? b->scratch_bytes : 4096;
    while (n < bytes && n <= SIZE_MAX / 2) n *= 2;
    void *s = n >= bytes ? kern_aligned_alloc(n) : NULL;
    if (!s) return kern_backend_fail(b, "scratch", bytes);
    free(b->scratch);
    b->scratch = s;
    b->scratch_bytes = n;
    return b->scratch;
}

const float *kern_backend_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows,
                                     const double *theta, int32_t np) {
    if (b->rope.cs && n_rows == b->rope.n_rows && np == b->rope.np &&
        memcmp(pos, b->rope.pos, sizeof *pos * (size_t)n_rows) == 0 &&
        memcmp(theta, b->rope.theta, sizeof *theta * (size_t)np) == 0)
        return b->rope.cs;
    if (n_rows > b->rope.cap_rows || np > b->rope.cap_np) {
        const int32_t rows = n_rows > b->rope.cap_rows ? n_rows : b->rope.cap_rows;
        const int32_t nps = np > b->rope.cap_np ? np : b->rope.cap_np;
        const size_t cs_bytes = sizeof(float) * 4 * (size_t)nps * (size_t)rows;
        int32_t *p = malloc(sizeof *p * (size_t)rows);
        double *t = malloc(sizeof *t * (size_t)nps);
        float *cs = kern_aligned_alloc(cs_bytes);
        if (!p || !t || !cs) {
            free(p), free(t), free(cs);
            return kern_backend_fail(b, "the rope table", cs_bytes);
        }
        free(b->rope.pos), free(b->rope.theta), free(b->rope.cs);
        b->rope.pos = p, b->rope.theta = t, b->rope.cs = cs;
        b->rope.cap_rows = rows, b->rope.cap_np = nps;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        float *c = b->rope.cs + (size_t)4 * np * r, *s = c + 2 * np;
        for (int32_t i = 0; i < np; i++) {
            /* pos * theta in double: at position 1e5 a float angle would be off by ~1e-2 */
            const double ang = (double)pos[r] * theta[i];
            c[2 * i] = c[2 * i + 1] = (float)cos(ang);
            s[2 * i] = (float)sin(ang);
            s[2 * i + 1] = -s[2 * i];
        }
    }
    memcpy(b->rope.pos, pos, sizeof *pos * (size_t)n_rows);
    memcpy(b->rope.theta, theta, sizeof *theta * (size_t)np);
    b->rope.n_rows = n_rows, b->rope.np = np;
    return b->rope.cs;
}
