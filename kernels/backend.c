/* backend.c - kern_backend: picks an ops table by name, holds the state its init made and
 * the sticky error, and the helpers every host backend shares (aligned allocation that
 * fails as a status, growable scratch, host buffers). See kern.h for the public contract
 * and kern_impl.h for what the ops may use. */
#include "kern_impl.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_plugin_sum.h" /* MD_CUDA_PLUGIN_SIZE, _CRC: written by the Makefile */

struct kern_backend {
    const kern_ops *ops;
    void *state;            /* what ops->init made */
    int32_t n_threads;
    size_t alloc_limit;     /* kern_backend_set_alloc_limit; at most PTRDIFF_MAX (no object
                             * is larger, and sanitizers abort on larger requests) */
    st_err fail;            /* the first failure an op met since the last kern_backend_sync */
};

/* Every backend this build may have, in the order an unknown name's message lists them;
 * NULL where it lacks one. The cuda backend (kernels/cuda/backend.cu) is linked into the
 * emulated test binaries and the device test binaries, so it is a weak reference: NULL
 * elsewhere. The program has it as a shared object instead (cuda_plugin). */
extern const kern_ops kern_cuda_ops __attribute__((weak));
static const kern_ops *const backends[] = {&kern_ref_ops, &kern_cpu_ops, &kern_cuda_ops};
#define N_BACKENDS (sizeof backends / sizeof backends[0])

#ifndef MD_LIBDIR
#define MD_LIBDIR "/usr/local/lib/multidecode"
#endif

/* The program built with nvcc has its cuda backend in multidecode-cuda.so (with cuBLAS and
 * the CUDA runtime), loaded only when asked for so that no other start pays for loading
 * them: beside the program (the build tree), else in ../lib/multidecode from its folder
 * (make install, moved as a whole), else in the LIBDIR it was installed with. Writes the
 * first that exists into path (cap bytes) and returns true; otherwise false, with the
 * places looked at in tried (cap bytes) when it is not NULL. */
static bool cuda_plugin_path(char *path, size_t cap, char *tried, size_t tried_cap) {
    char dirs[3][PATH_MAX];
    int n_dirs = 0;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = n > 0 ? (exe[n] = '\0', strrchr(exe, '/')) : NULL;
    if (slash) {
        *slash = '\0';
        snprintf(dirs[n_dirs++], PATH_MAX, "%s", exe);
        snprintf(dirs[n_dirs++], PATH_MAX, "%.*s/../lib/multidecode", PATH_MAX - 32, exe);
    }
    snprintf(dirs[n_dirs++], PATH_MAX, "%s", MD_LIBDIR);
    if (tried) tried[0] = '\0';
    for (int i = 0; i < n_dirs; i++) {
        int k = snprintf(path, cap, "%s/multidecode-cuda.so", dirs[i]);
        if (k > 0 && (size_t)k < cap && access(path, R_OK) == 0) return true;
        if (tried)
            snprintf(tried + strlen(tried), tried_cap - strlen(tried), "%s%s",
                     i == 0 ? "" : i == n_dirs - 1 ? " and " : ", ", dirs[i]);
    }
    return false;
}

/* POSIX cksum's CRC (polynomial 0x04C11DB7, the length folded in at the end): the sum
 * the Makefile records with cksum(1). */
static uint32_t cksum_update(uint32_t c, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        c ^= (uint32_t)p[i] << 24;
        for (int k = 0; k < 8; k++) c = c & 0x80000000u ? (c << 1) ^ 0x04C11DB7u : c << 1;
    }
    return c;
}

/* ST_OK when the file at path has the size and CRC the build recorded; otherwise
 * ST_ERR_UNSUPPORTED saying what differs. dlopen maps the file, so a truncated one faults
 * (SIGBUS) instead of failing: it is read whole first. */
static st_code cuda_plugin_check(const char *path, st_err *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "cannot open the CUDA backend %s: %s", path,
                      strerror(errno));
    unsigned char buf[1 << 16];
    uint64_t size = 0;
    uint32_t crc = 0;
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) > 0) {
        crc = cksum_update(crc, buf, (size_t)got);
        size += (uint64_t)got;
    }
    close(fd);
    for (uint64_t len = size; len; len >>= 8) crc = cksum_update(crc, &(unsigned char){len & 0xff}, 1);
    crc = ~crc;
    if (got < 0 || size != MD_CUDA_PLUGIN_SIZE)
        return st_set(err, ST_ERR_UNSUPPORTED, "the CUDA backend %s is %llu bytes, but this "
                      "build made it %llu bytes: it is truncated or from another build "
                      "(rebuild or reinstall it, or use --backend cpu)", path,
                      (unsigned long long)size, (unsigned long long)MD_CUDA_PLUGIN_SIZE);
    if (crc != MD_CUDA_PLUGIN_CRC)
        return st_set(err, ST_ERR_UNSUPPORTED, "the CUDA backend %s has checksum %u, but this "
                      "build made it with %u: it is damaged or from another build (rebuild "
                      "or reinstall it, or use --backend cpu)", path, (unsigned)crc,
                      (unsigned)MD_CUDA_PLUGIN_CRC);
    return ST_OK;
}

/* The cuda backend's ops from its shared object (which stays loaded), or NULL with err
 * set: no such object (said with where it was looked for), one that is not the file this
 * build made, or one that does not load (a CUDA library missing: the loader's message). */
static const kern_ops *cuda_plugin(st_err *err) {
    char path[PATH_MAX + 64], tried[3 * PATH_MAX + 16];
    if (!cuda_plugin_path(path, sizeof path, tried, sizeof tried)) {
        st_set(err, ST_ERR_UNSUPPORTED, "no CUDA backend: multidecode-cuda.so is not in %s "
               "(%s, or use --backend cpu)", tried, MD_CUDA_PLUGIN_SIZE
               ? "it is built beside the program and installed with it"
               : "this build made none: rebuild with nvcc on PATH");
        return NULL;
    }
    if (cuda_plugin_check(path, err)) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const kern_ops *ops = h ? dlsym(h, "kern_cuda_ops") : NULL;
    if (!ops) {
        const char *why = dlerror();
        st_set(err, ST_ERR_UNSUPPORTED, "the CUDA backend %s does not load: %s (use --backend cpu)",
               path, why ? why : "no kern_cuda_ops in it");
        if (h) dlclose(h);
    }
    return ops;
}

kern_backend *kern_backend_init(const char *name, int32_t n_threads, st_err *err) {
    const kern_ops *ops = NULL;
    for (size_t i = 0; name && i < N_BACKENDS; i++)
        if (backends[i] && strcmp(name, backends[i]->name) == 0) ops = backends[i];
    if (!ops && name && strcmp(name, "cuda") == 0 && !(ops = cuda_plugin(err))) return NULL;
    if (!ops) {
        char known[128] = "", path[PATH_MAX + 64];
        for (size_t i = 0; i < N_BACKENDS; i++)
            if (backends[i])
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         known[0] ? ", " : "", backends[i]->name);
        if (!&kern_cuda_ops && cuda_plugin_path(path, sizeof path, NULL, 0))
            snprintf(known + strlen(known), sizeof known - strlen(known), ", cuda");
        st_set(err, ST_ERR_ARG, "unknown compute backend '%s' (known: %s)",
               name ? name : "(null)", known);
        return NULL;
    }
    kern_backend *b = calloc(1, sizeof *b);
    if (!b) {
        st_set(err, ST_ERR_NOMEM, "out of memory creating the %s backend", name);
        return NULL;
    }
    b->ops = ops;
    b->alloc_limit = PTRDIFF_MAX;
    b->n_threads = n_threads;
    if (ops->init(b, &b->n_threads, &b->state, err) != ST_OK) {
        free(b);
        return NULL;
    }
    return b;
}

void kern_backend_free(kern_backend *b) {
    if (!b) return;
    b->ops->free(b->state);
    free(b);
}

const kern_ops *kern_backend_ops(const kern_backend *b) { return b->ops; }

void *kern_host_alloc(kern_backend *b, size_t bytes) {
    return b->ops->host_alloc ? b->ops->host_alloc(b, bytes) : malloc(bytes ? bytes : 1);
}

void kern_get_rows(kern_backend *b, float *out, const kern_mat *w, const int32_t *rows, int32_t n) {
    if (b->ops->get_rows) {
        b->ops->get_rows(b, out, w, rows, n);
        return;
    }
    for (int32_t i = 0; i < n; i++) b->ops->get_row(b, out + (size_t)i * (size_t)w->n_in, w, rows[i]);
}

void kern_matmul_swiglu(kern_backend *b, float *y, const kern_mat *w, float *gate, const float *up,
                        int32_t n_rows) {
    if (b->ops->matmul_swiglu) {
        b->ops->matmul_swiglu(b, y, w, gate, up, n_rows);
        return;
    }
    b->ops->swiglu(b, gate, gate, up, (int64_t)n_rows * w->n_in);
    b->ops->matmul(b, y, w, gate, n_rows);
}

void kern_host_free(kern_backend *b, void *p) {
    if (b->ops->host_free) b->ops->host_free(b, p);
    else free(p);
}
const char *kern_backend_name(const kern_backend *b) { return b->ops->name; }
int32_t kern_backend_threads(const kern_backend *b) { return b->n_threads; }
void *kern_backend_state(kern_backend *b) { return b->state; }

void kern_backend_fail(kern_backend *b, st_code code, const char *op, const char *fmt, ...) {
    if (b->fail.code != ST_OK) return; /* the first failure is the one to report */
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    st_set(&b->fail, code, "%s: %s (%s backend)", op, what, b->ops->name);
}

st_code kern_backend_sync(kern_backend *b, st_err *err) {
    if (b->ops->sync) b->ops->sync(b);
    st_code rc = b->fail.code;
    if (rc && err) *err = b->fail;
    st_clear(&b->fail);
    return rc;
}

void *kern_aligned_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - 63) return NULL;
    return aligned_alloc(64, (bytes + 63) / 64 * 64); /* (C11 wants a multiple of 64) */
}

void kern_backend_set_alloc_limit(kern_backend *b, size_t bytes) {
    b->alloc_limit = bytes < PTRDIFF_MAX ? bytes : PTRDIFF_MAX;
}

/* Records that op could not get bytes for what; returns NULL. */
static void *alloc_failed(kern_backend *b, const char *op, const char *what, size_t bytes) {
    if (bytes >= (size_t)1 << 20)
        kern_backend_fail(b, ST_ERR_NOMEM, op, "out of memory for %.1f MiB of %s",
                          (double)bytes / (1 << 20), what);
    else
        kern_backend_fail(b, ST_ERR_NOMEM, op, "out of memory for %zu bytes of %s", bytes, what);
    return NULL;
}

bool kern_backend_alloc_allowed(const kern_backend *b, size_t bytes) {
    return bytes <= b->alloc_limit;
}

void *kern_backend_alloc(kern_backend *b, const char *op, const char *what, size_t bytes) {
    void *p = bytes <= b->alloc_limit ? kern_aligned_alloc(bytes) : NULL;
    return p ? p : alloc_failed(b, op, what, bytes);
}

void *kern_scratch_get(kern_backend *b, kern_scratch *s, const char *op, size_t bytes) {
    if (bytes <= s->bytes) return s->p;
    size_t n = s->bytes ? s->bytes : 4096;
    while (n < bytes && n <= SIZE_MAX / 2) n *= 2;
    void *p = n >= bytes ? kern_backend_alloc(b, op, "scratch", n) : NULL;
    if (!p) return n >= bytes ? NULL : alloc_failed(b, op, "scratch", bytes);
    free(s->p);
    s->p = p;
    s->bytes = n;
    return p;
}

void kern_scratch_free(kern_scratch *s) {
    free(s->p);
    *s = (kern_scratch){0};
}

/* A host buffer is a calloc block (pages of a large one stay untouched until used, like
 * a KV cache's unused slots) with the pointer given out aligned to 64 bytes (a cache
 * line, one AVX-512 vector: a forest step's attention reads the cache once per row block,
 * and it matters most there; figures: kernels/README.md) and the block's own pointer
 * just below it, for kern_host_buf_free. */
void *kern_host_buf_alloc(kern_backend *b, size_t bytes) {
    const size_t pad = 64 + sizeof(void *);
    char *base = bytes <= b->alloc_limit && bytes <= SIZE_MAX - pad ? calloc(bytes + pad, 1) : NULL;
    if (!base) return alloc_failed(b, "buf_alloc", "a buffer", bytes);
    void **p = (void **)(((uintptr_t)base + sizeof(void *) + 63) / 64 * 64);
    p[-1] = base;
    return p;
}

void kern_host_buf_free(kern_backend *b, void *buf) {
    (void)b;
    if (buf) free(((void **)buf)[-1]);
}

void kern_host_copy(kern_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    if (bytes) memcpy(dst, src, bytes);
}

void kern_host_download_at(kern_backend *b, float *dst, const float *src, const int64_t *idx, int32_t n) {
    (void)b;
    for (int32_t i = 0; i < n; i++) dst[i] = src[idx[i]];
}

void kern_host_gather_rows(kern_backend *b, float *y, const float *x, const int32_t *idx, int32_t n,
                           int32_t width) {
    (void)b;
    for (int32_t i = 0; i < n; i++)
        if (y + (size_t)i * width != x + (size_t)idx[i] * width) /* (in place: memmove) */
            memmove(y + (size_t)i * width, x + (size_t)idx[i] * width, sizeof(float) * (size_t)width);
}

void kern_host_kv_store(kern_backend *b, float *cache, int64_t row_len, const int32_t *slot,
                        const float *x, int32_t n_rows) {
    (void)b;
    for (int32_t i = 0; i < n_rows; i++)
        memcpy(cache + (size_t)slot[i] * (size_t)row_len, x + (size_t)i * (size_t)row_len,
               sizeof(float) * (size_t)row_len);
}

bool kern_kv_moves(const int32_t *dst_of_src, int32_t s) {
    return dst_of_src[s] >= 0 && dst_of_src[s] != s;
}

void kern_host_kv_permute(kern_backend *b, float *cache, int64_t n_blocks, int32_t n_slots,
                          int64_t row_len, const int32_t *dst_of_src) {
    const size_t row = (size_t)row_len, block = (size_t)n_slots * row;
    size_t m = 0;
    for (int32_t s = 0; s < n_slots; s++) m += kern_kv_moves(dst_of_src, s);
    if (m == 0 || row == 0) return;
    /* the rows that move, copied out of a block before any is overwritten (a slot may be
     * both a source and a destination) */
    float *tmp = kern_backend_alloc(b, "kv_permute", "a copy of the rows that move",
                                    m * row * sizeof(float));
    if (!tmp) return;
    for (int64_t l = 0; l < n_blocks; l++) {
        float *c = cache + (size_t)l * block, *t = tmp;
        for (int32_t s = 0; s < n_slots; s++)
            if (kern_kv_moves(dst_of_src, s)) memcpy(t, c + (size_t)s * row, row * sizeof(float)), t += row;
        t = tmp;
        for (int32_t s = 0; s < n_slots; s++)
            if (kern_kv_moves(dst_of_src, s))
                memcpy(c + (size_t)dst_of_src[s] * row, t, row * sizeof(float)), t += row;
    }
    free(tmp);
}
