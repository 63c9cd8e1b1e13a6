/* state.c - the cpu backend's own state (kern_ops init/free): its thread pool, one
 * growable scratch buffer the big ops share, and the last two rope tables. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

/* A rope table and its key (pos, theta). */
typedef struct cpu_rope {
    int32_t *pos;
    double *theta;
    float *cs;
    int32_t n_rows, np, cap_rows, cap_np;
} cpu_rope;

typedef struct cpu_state {
    pool *pool;
    kern_scratch scratch;
    cpu_rope rope[2];       /* the last two rope tables (cpu_rope_table): a model whose local
                               and global layers rotate by different bases uses both */
    int32_t rope_next;      /* the entry the next new table replaces */
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
    for (int i = 0; i < 2; i++) free(s->rope[i].pos), free(s->rope[i].theta), free(s->rope[i].cs);
    free(s);
}

pool *cpu_pool(kern_backend *b) { return ((cpu_state *)kern_backend_state(b))->pool; }

void *cpu_scratch(kern_backend *b, const char *op, size_t bytes) {
    return kern_scratch_get(b, &((cpu_state *)kern_backend_state(b))->scratch, op, bytes);
}

/* Whether entry e holds the table of (pos, theta). */
static bool rope_matches(const cpu_rope *e, const int32_t *pos, int32_t n_rows, const double *theta, int32_t np) {
    return e->cs && n_rows == e->n_rows && np == e->np && memcmp(pos, e->pos, sizeof *pos * (size_t)n_rows) == 0 &&
           memcmp(theta, e->theta, sizeof *theta * (size_t)np) == 0;
}

/* Fills entry e with the table of (pos, theta), growing it first. */
static const float *rope_fill(kern_backend *b, cpu_rope *e, const int32_t *pos, int32_t n_rows,
                              const double *theta, int32_t np) {
    if (n_rows > e->cap_rows || np > e->cap_np) {
        const int32_t rows = n_rows > e->cap_rows ? n_rows : e->cap_rows;
        const int32_t nps = np > e->cap_np ? np : e->cap_np;
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
        free(e->pos), free(e->theta), free(e->cs);
        e->pos = p, e->theta = t, e->cs = cs;
        e->cap_rows = rows, e->cap_np = nps;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        float *c = e->cs + (size_t)4 * np * r, *s = c + 2 * np;
        for (int32_t i = 0; i < np; i++) {
            /* pos * theta in double: at position 1e5 a float angle would be off by ~1e-2 */
            const double ang = (double)pos[r] * theta[i];
            c[2 * i] = c[2 * i + 1] = (float)cos(ang);
            s[2 * i] = (float)sin(ang);
            s[2 * i + 1] = -s[2 * i];
        }
    }
    memcpy(e->pos, pos, sizeof *pos * (size_t)n_rows);
    memcpy(e->theta, theta, sizeof *theta * (size_t)np);
    e->n_rows = n_rows, e->np = np;
    return e->cs;
}

const float *cpu_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows,
                            const double *theta, int32_t np) {
    cpu_state *st = kern_backend_state(b);
    for (int i = 0; i < 2; i++)
        if (rope_matches(&st->rope[i], pos, n_rows, theta, np)) return st->rope[i].cs;
    cpu_rope *e = &st->rope[st->rope_next];
    st->rope_next ^= 1;
    return rope_fill(b, e, pos, n_rows, theta, np);
}

st_code cpu_mat_prepare(kern_backend *b, kern_mat *out, const kern_mat *stored, uint32_t flags,
                        size_t *bytes) {
    *out = *stored;
    out->packed = NULL;
    size_t n = 0;
    if (!(flags & (KERN_MAT_ROWS_ONLY | KERN_MAT_AS_STORED)))
        out->packed = kern_mat_pack(out, &n, cpu_pool(b));
    if (bytes) *bytes = out->packed ? n : 0;
    return ST_OK;
}

void cpu_mat_release(kern_backend *b, kern_mat *w) {
    (void)b;
    free((void *)w->packed);
    *w = (kern_mat){0};
}
