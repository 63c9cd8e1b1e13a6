/* state.c - the cpu backend's own state (kern_ops init/free): its thread pool, one
 * growable scratch buffer the big ops share, and the last rope table. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

typedef struct cpu_state {
    pool *pool;
    kern_scratch scratch;
    struct {                /* the last rope table (cpu_rope_table) and its key */
        int32_t *pos;
        double *theta;
        float *cs;
        int32_t n_rows, np, cap_rows, cap_np;
    } rope;
} cpu_state;

st_code cpu_init(kern_backend *b, int32_t *n_threads, void **state, st_err *err) {
    (void)b;
    if (*n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        *n_threads = n > 0 ? (int32_t)(n < 256 ? n : 256) : 1;
    }
    cpu_state *s = calloc(1, sizeof *s);
    if (!s) return st_set(err, ST_ERR_NOMEM, "out of memory creating the cpu backend");
    s->pool = pool_init(*n_threads);
    if (!s->pool) {
        free(s);
        return st_set(err, ST_ERR_BACKEND, "cannot start %d threads for the cpu backend",
                      (int)*n_threads);
    }
    *state = s;
    return ST_OK;
}

void cpu_free(void *state) {
    cpu_state *s = state;
    if (!s) return;
    pool_free(s->pool);
    kern_scratch_free(&s->scratch);
    free(s->rope.pos);
    free(s->rope.theta);
    free(s->rope.cs);
    free(s);
}

pool *cpu_pool(kern_backend *b) { return ((cpu_state *)kern_backend_state(b))->pool; }

void *cpu_scratch(kern_backend *b, const char *op, size_t bytes) {
    return kern_scratch_get(b, &((cpu_state *)kern_backend_state(b))->scratch, op, bytes);
}

const float *cpu_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows,
                            const double *theta, int32_t np) {
    cpu_state *st = kern_backend_state(b);
    if (st->rope.cs && n_rows == st->rope.n_rows && np == st->rope.np &&
        memcmp(pos, st->rope.pos, sizeof *pos * (size_t)n_rows) == 0 &&
        memcmp(theta, st->rope.theta, sizeof *theta * (size_t)np) == 0)
        return st->rope.cs;
    if (n_rows > st->rope.cap_rows || np > st->rope.cap_np) {
        const int32_t rows = n_rows > st->rope.cap_rows ? n_rows : st->rope.cap_rows;
        const int32_t nps = np > st->rope.cap_np ? np : st->rope.cap_np;
        int32_t *p = kern_backend_alloc(b, "rope", "the rope table", sizeof *p * (size_t)rows);
        double *t = p ? kern_backend_alloc(b, "rope", "the rope table", sizeof *t * (size_t)nps)
                      : NULL;
        float *cs = t ? kern_backend_alloc(b, "rope", "the rope table",
                                           sizeof(float) * 4 * (size_t)nps * (size_t)rows)
                      : NULL;
        if (!cs) {
            free(p), free(t);
            return NULL;
        }
        free(st->rope.pos), free(st->rope.theta), free(st->rope.cs);
        st->rope.pos = p, st->rope.theta = t, st->rope.cs = cs;
        st->rope.cap_rows = rows, st->rope.cap_np = nps;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        float *c = st->rope.cs + (size_t)4 * np * r, *s = c + 2 * np;
        for (int32_t i = 0; i < np; i++) {
            /* pos * theta in double: at position 1e5 a float angle would be off by ~1e-2 */
            const double ang = (double)pos[r] * theta[i];
            c[2 * i] = c[2 * i + 1] = (float)cos(ang);
            s[2 * i] = (float)sin(ang);
            s[2 * i + 1] = -s[2 * i];
        }
    }
    memcpy(st->rope.pos, pos, sizeof *pos * (size_t)n_rows);
    memcpy(st->rope.theta, theta, sizeof *theta * (size_t)np);
    st->rope.n_rows = n_rows, st->rope.np = np;
    return st->rope.cs;
}

st_code cpu_mat_prepare(kern_backend *b, kern_mat *out, const kern_mat *stored, uint32_t flags,
                        size_t *bytes) {
    (void)b;
    *out = *stored;
    out->packed = NULL;
    size_t n = 0;
    if (!(flags & (KERN_MAT_ROWS_ONLY | KERN_MAT_AS_STORED))) out->packed = kern_mat_pack(out, &n);
    if (bytes) *bytes = out->packed ? n : 0;
    return ST_OK;
}

void cpu_mat_release(kern_backend *b, kern_mat *w) {
    (void)b;
    free((void *)w->packed);
    *w = (kern_mat){0};
}
