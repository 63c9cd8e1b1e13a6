/* state.c - the cpu backend's own state (kern_ops init/free): its thread pool, one
 * growable scratch buffer the big ops share, and the last two rope tables (their
 * frequencies computed once per key, their sines once per set of positions). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

#define ROPE_PAIRS (KERN_ROPE_MAX_DIM / 2)

/* A rope table: the frequencies theta_i of one (base, rope_dim, freq_factors), computed
 * when that key is first seen, and the sines of the positions pos it was last filled for. */
typedef struct cpu_rope {
    float base;
    int32_t rope_dim;       /* 0: the entry is unused */
    bool has_ff;
    float ff[ROPE_PAIRS];   /* (rope_dim / 2) a copy of the freq factors, when has_ff */
    double theta[ROPE_PAIRS];
    int32_t *pos;           /* (cap_rows) */
    float *cs;              /* (cap_rows, 4 * cap_np) */
    int32_t n_rows;         /* rows of cs filled for pos; -1: none */
    int32_t cap_rows, cap_np;
} cpu_rope;

typedef struct cpu_state {
    pool *pool;
    kern_scratch scratch;
    cpu_rope rope[2];       /* the last two rope tables (cpu_rope_table): a model whose local
                               and global layers rotate by different bases uses both */
    int32_t rope_next;      /* the entry a new key replaces: the one used least recently */
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
    for (int i = 0; i < 2; i++) free(s->rope[i].pos), free(s->rope[i].cs);
    free(s);
}

pool *cpu_pool(kern_backend *b) { return ((cpu_state *)kern_backend_state(b))->pool; }

void *cpu_scratch(kern_backend *b, const char *op, size_t bytes) {
    return kern_scratch_get(b, &((cpu_state *)kern_backend_state(b))->scratch, op, bytes);
}

/* Whether entry e's frequencies are those of (base, rope_dim, ff); the factors are compared
 * by value, since a caller may rewrite them in place. */
static bool rope_key_matches(const cpu_rope *e, float base, int32_t rope_dim, const float *ff) {
    return e->rope_dim == rope_dim && e->base == base && e->has_ff == (ff != NULL) &&
           (!ff || memcmp(ff, e->ff, sizeof *ff * (size_t)(rope_dim / 2)) == 0);
}

/* Makes e the entry of (base, rope_dim, ff): its theta_i = base^(-2i / rope_dim) / ff[i],
 * as the ref backend computes them, and no rows. */
static void rope_set_key(cpu_rope *e, float base, int32_t rope_dim, const float *ff) {
    e->base = base, e->rope_dim = rope_dim, e->has_ff = ff != NULL, e->n_rows = -1;
    for (int32_t i = 0; i < rope_dim / 2; i++) {
        e->theta[i] = pow((double)base, -2.0 * i / rope_dim);
        if (ff) e->ff[i] = ff[i], e->theta[i] /= ff[i];
    }
}

/* Fills entry e's table for pos, growing it first; NULL (e left without rows) when memory
 * runs out. */
static const float *rope_fill(kern_backend *b, cpu_rope *e, const int32_t *pos, int32_t n_rows) {
    const int32_t np = e->rope_dim / 2;
    e->n_rows = -1;
    if (n_rows > e->cap_rows || np > e->cap_np) {
        const int32_t rows = n_rows > e->cap_rows ? n_rows : e->cap_rows;
        const int32_t nps = np > e->cap_np ? np : e->cap_np;
        int32_t *p = kern_backend_alloc(b, "rope", "the rope table", sizeof *p * (size_t)rows);
        float *cs = p ? kern_backend_alloc(b, "rope", "the rope table",
                                           sizeof(float) * 4 * (size_t)nps * (size_t)rows)
                      : NULL;
        if (!cs) {
            free(p);
            return NULL;
        }
        free(e->pos), free(e->cs);
        e->pos = p, e->cs = cs;
        e->cap_rows = rows, e->cap_np = nps;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        float *c = e->cs + (size_t)4 * np * r, *s = c + 2 * np;
        for (int32_t i = 0; i < np; i++) {
            /* pos * theta in double: at position 1e5 a float angle would be off by ~1e-2 */
            const double ang = (double)pos[r] * e->theta[i];
            c[2 * i] = c[2 * i + 1] = (float)cos(ang);
            s[2 * i] = (float)sin(ang);
            s[2 * i + 1] = -s[2 * i];
        }
    }
    memcpy(e->pos, pos, sizeof *pos * (size_t)n_rows);
    e->n_rows = n_rows;
    return e->cs;
}

const float *cpu_rope_table(kern_backend *b, const int32_t *pos, int32_t n_rows, float base,
                            int32_t rope_dim, const float *freq_factors) {
    ASSERT(rope_dim > 0 && rope_dim <= KERN_ROPE_MAX_DIM && rope_dim % 2 == 0);
    cpu_state *st = kern_backend_state(b);
    int i = 0;
    while (i < 2 && !rope_key_matches(&st->rope[i], base, rope_dim, freq_factors)) i++;
    if (i == 2) {
        i = st->rope_next;
        rope_set_key(&st->rope[i], base, rope_dim, freq_factors);
    }
    cpu_rope *e = &st->rope[i];
    st->rope_next = i ^ 1;
    if (e->n_rows == n_rows && memcmp(pos, e->pos, sizeof *pos * (size_t)n_rows) == 0)
        return e->cs;
    return rope_fill(b, e, pos, n_rows);
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
