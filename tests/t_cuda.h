/* t_cuda.h - helpers of the cuda backend's C tests (header-only, include after t.h and
 * t_model.h): contexts on a named backend, the random models' tiny shape, a seeded LCG. */
#ifndef MD_T_CUDA_H
#define MD_T_CUDA_H

#include "kernels/cuda/cu.h"

/* A context of n_slots on backend (one thread), or NULL with a failed check. */
static inline model_ctx *t_ctx_on(const model *m, const char *backend, int32_t n_slots) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = n_slots;
    cp.backend = backend;
    cp.n_threads = 1;
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "%s context: %s", backend, err.msg);
    return c;
}

static inline uint64_t t_lcg(uint64_t *s) {
    return (*s = *s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
}

/* The tiny shape the random models here share: 64 wide, 4 heads over 2 KV heads (arch
 * NULL: mkmodel's default). */
static inline mkmodel_params t_tiny(const char *arch, uint32_t wtype, uint64_t seed) {
    mkmodel_params mp = mkmodel_default_params();
    if (arch) mp.arch = arch;
    mp.wtype = wtype, mp.seed = seed;
    mp.n_embd = 64, mp.n_head = 4, mp.n_head_kv = 2, mp.n_ff = 96;
    return mp;
}

#endif
