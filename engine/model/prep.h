/* prep.h - a model's weights in the form one backend computes with (kern_ops mat_prepare),
 * and its norm vectors and rope frequencies in that backend's buffers. Private to
 * engine/model.
 *
 * Prepared weights are made when the first context of a (backend, no_pack) pair is
 * created and kept by the model until model_free, so that two contexts on one model
 * share one packed copy (SmolLM2-135M Q4_1: 64 MiB) and a bench that makes a context per
 * run packs once. A backend's buffers serve every instance of that backend (host memory
 * for ref and cpu; a device backend on one device), so the model keeps the instance that
 * made them, to free them. */
#ifndef MD_MODEL_PREP_H
#define MD_MODEL_PREP_H

#include <stdbool.h>

#include "model/model.h"

typedef struct model_prep {
    struct model_prep *next;
    kern_backend *be;         /* the instance that prepared them (one thread), owned */
    bool no_pack;             /* KERN_MAT_AS_STORED */
    kern_mat tok_embd;        /* prepared for get_row (KERN_MAT_ROWS_ONLY; == output when tied) */
    kern_mat output;
    const float *out_norm;    /* into norms */
    const float *rope_freqs;  /* a buffer, or NULL: rope's frequency factors (global layers) */
    const float *rope_freqs_swa; /* the local layers' (not scaled); may be rope_freqs */
    const float *ones;        /* into norms: the V norm's gains (hparams v_norm) */
    kern_mat ple_embd;        /* per-layer embeddings (KERN_MAT_ROWS_ONLY), n_embd_ple > 0 */
    kern_mat ple_model_proj;
    const float *ple_proj_norm; /* into norms */
    model_layer *layers;      /* (n_layer) prepared matrices, norms into norms */
    kern_mat *experts;        /* (moe_n_mats) the layers' prepared experts, or NULL */
    float *norms;             /* a buffer: every norm and bias vector (model_vec_floats) */
    uint64_t bytes;           /* backend memory the prepared matrices own */
} model_prep;

/* The model's weights prepared for backend `name` (no_pack: keep the stored layouts),
 * made now when no context made them before. Valid until model_free. NULL + err
 * (ST_ERR_NOMEM naming what could not be prepared, or kern_backend_init's codes). */
const model_prep *model_prep_get(const model *m, const char *name, bool no_pack, st_err *err);

/* The model's empty list of preparations (model_from_gguf); NULL when out of memory. */
struct model_preps *model_preps_init(void);

/* Frees every preparation of m (model_free). */
void model_prep_free_all(model *m);

/* YaRN (yarn.c): the frequency factors of the n_rot / 2 rotated pairs of a layer rotating
 * with base (the file's factors `file`, or NULL, folded in) into ff; and the factor q and
 * k are scaled by, so q.k by its square. */
void model_yarn_factors(const model_hparams *hp, float base, int32_t n_rot, const float *file,
                        float *ff);
float model_yarn_mscale(float factor);

#endif
