/* prep.c - a model's weights prepared per backend (see prep.h): made on the first context
 * of each (backend, no_pack) pair, shared by the later ones, freed with the model. */
#include "model/prep.h"
#include "model/moe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct model_preps {
    pthread_mutex_t mu;       /* contexts may be made on several threads */
    model_prep *list;
};

struct model_preps *model_preps_init(void) {
    struct model_preps *p = calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        p = NULL;
    }
    return p;
}

/* The stored bytes of a matrix the backend repacked are read only by other backends, so
 * where they come from the file mapping their pages are let go (they come back from the
 * file if read): the process does not hold the model twice. That includes tied
 * embeddings, which packing read whole: the rows tokens look up come back a page at a
 * time (SmolLM2: 130 -> 101 MB resident). */
static void drop_stored(const model *m, const kern_mat *w) {
    if (!w->packed || !gguf_mapped(m->gguf)) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)w->data;
    const uintptr_t e = a + dtype_row_bytes(w->type, w->n_in) * (size_t)w->n_out;
    const uintptr_t lo = (a + page - 1) / page * page, hi = e / page * page;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void prep_free(const model *m, model_prep *p) {
    if (!p || !p->be) {
        free(p);
        return;
    }
    const kern_ops *o = kern_backend_ops(p->be);
    for (int32_t l = 0; p->layers && l < m->hp.n_layer; l++) {
        model_layer *L = &p->layers[l];
        if (L->wv.data == L->wk.data) L->wv = (kern_mat){0}; /* V is K's projection */
        kern_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                          &L->ple_gate, &L->ple_proj, &L->gate_inp, &L->shexp_gate_inp,
                          &L->shexp_gate, &L->shexp_up, &L->shexp_down, &L->ssm_qkv, &L->ssm_z,
                          &L->ssm_beta, &L->ssm_alpha};
        for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) o->mat_release(p->be, ms[i]);
    }
    for (size_t i = 0; p->experts && i < moe_n_mats(&m->hp); i++) o->mat_release(p->be, &p->experts[i]);
    free(p->experts);
    o->mat_release(p->be, &p->ple_embd);
    o->mat_release(p->be, &p->ple_model_proj);
    if (!m->hp.tied_output) o->mat_release(p->be, &p->tok_embd);
    o->mat_release(p->be, &p->output);
    o->buf_free(p->be, p->norms);
    if (p->rope_freqs != p->rope_freqs_swa) o->buf_free(p->be, (void *)p->rope_freqs);
    o->buf_free(p->be, (void *)p->rope_freqs_swa);
    free(p->layers);
    kern_backend_free(p->be);
    free(p);
}

/* One matrix prepared for p's backend (flags: KERN_MAT_*). */
static st_code prep_mat(const model *m, model_prep *p, kern_mat *out, const kern_mat *stored,
                        uint32_t flags) {
    size_t bytes = 0;
    st_code rc = kern_backend_ops(p->be)->mat_prepare(p->be, out, stored, flags, &bytes);
    p->bytes += bytes;
    if (rc == ST_OK) drop_stored(m, out);
    return rc;
}

/* A float vector of n copied into p's buffer at *at (upload), which moves past it; NULL
 * stays NULL (a tensor the architecture does not have). */
static const float *prep_vec(model_prep *p, float **at, const float *src, int64_t n) {
    if (!src) return NULL;
    float *dst = *at;
    kern_backend_ops(p->be)->upload(p->be, dst, src, sizeof(float) * (size_t)n);
    *at += n;
    return dst;
}

/* The frequency factors rope divides its angles by: the file's rope_freqs, times the
 * linear scaling factor on the global layers (rope_freqs); the local layers of a windowed
 * model are not scaled (rope_freqs_swa: the file's factors alone), as in llama.cpp. */
/* YaRN's factors (yarn.c) for the global layers and, with their own base and rotated
 * dims, the local ones. */
static st_code prep_yarn(const model *m, model_prep *p) {
    const model_hparams *hp = &m->hp;
    const kern_ops *o = kern_backend_ops(p->be);
    const int32_t n = (hp->rope_dim > hp->rope_dim_swa ? hp->rope_dim : hp->rope_dim_swa) / 2;
    float *ff = malloc(sizeof(float) * (size_t)n);
    float *rf = o->buf_alloc(p->be, sizeof(float) * (size_t)n);
    float *rs = o->buf_alloc(p->be, sizeof(float) * (size_t)n);
    st_code rc = ff && rf && rs ? ST_OK : ST_ERR_NOMEM;
    if (rc == ST_OK) {
        model_yarn_factors(hp, hp->rope_base, hp->rope_dim, m->rope_freqs, ff);
        p->rope_freqs = prep_vec(p, &rf, ff, hp->rope_dim / 2);
        model_yarn_factors(hp, hp->rope_base_swa > 0 ? hp->rope_base_swa : hp->rope_base,
                           hp->rope_dim_swa, hp->rope_freqs_global ? NULL : m->rope_freqs, ff);
        p->rope_freqs_swa = prep_vec(p, &rs, ff, hp->rope_dim_swa / 2);
    } else {
        o->buf_free(p->be, rf);
        o->buf_free(p->be, rs);
    }
    free(ff);
    return rc;
}

static st_code prep_rope_freqs(const model *m, model_prep *p) {
    const model_hparams *hp = &m->hp;
    const kern_ops *o = kern_backend_ops(p->be);
    const int32_t n = hp->rope_dim / 2;
    if (hp->yarn_factor > 0) return prep_yarn(m, p);
    const bool scaled = hp->rope_scale > 0 && hp->rope_scale != 1.0f;
    if (m->rope_freqs) {
        float *rf = o->buf_alloc(p->be, sizeof(float) * (size_t)n);
        if (!rf) return ST_ERR_NOMEM;
        p->rope_freqs_swa = prep_vec(p, &rf, m->rope_freqs, n);
    }
    p->rope_freqs = p->rope_freqs_swa;
    if (hp->rope_freqs_global) p->rope_freqs_swa = NULL; /* (freed through rope_freqs) */
    if (!scaled) return ST_OK;
    float *ff = malloc(sizeof(float) * (size_t)n);
    float *rf = o->buf_alloc(p->be, sizeof(float) * (size_t)n);
    if (!ff || !rf) {
        free(ff);
        o->buf_free(p->be, rf);
        return ST_ERR_NOMEM;
    }
    for (int32_t i = 0; i < n; i++) ff[i] = (m->rope_freqs ? m->rope_freqs[i] : 1.0f) * hp->rope_scale;
    p->rope_freqs = prep_vec(p, &rf, ff, n);
    free(ff);
    return ST_OK;
}

/* Every layer's experts (a mixture-of-experts model), each its own prepared matrix. */
static st_code prep_experts(const model *m, model_prep *p, uint32_t flags) {
    const size_t n = m->experts ? moe_n_mats(&m->hp) : 0;
    if (n == 0) return ST_OK;
    if (!(p->experts = calloc(n, sizeof *p->experts))) return ST_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        st_code rc = prep_mat(m, p, &p->experts[i], &m->experts[i], flags);
        if (rc) return rc;
    }
    for (int32_t l = 0; l < m->hp.n_layer; l++) moe_layer_mats(&m->hp, p->experts, l, &p->layers[l]);
    return ST_OK;
}

/* A recurrent layer's vectors (the conv's taps, dt bias, decay rates, output norm). */
static void prep_ssm_vecs(const model_hparams *hp, model_prep *p, float **at,
                          const model_layer *S, model_layer *L) {
    const int64_t HV = hp->ssm_v_heads, CD = (2 * (int64_t)hp->ssm_k_heads + HV) * hp->ssm_state;
    L->ssm_conv_w = prep_vec(p, at, S->ssm_conv_w, CD * hp->ssm_conv);
    L->ssm_dt = prep_vec(p, at, S->ssm_dt, HV);
    L->ssm_a = prep_vec(p, at, S->ssm_a, HV);
    L->ssm_norm = prep_vec(p, at, S->ssm_norm, hp->ssm_state);
}

static st_code prep_make(const model *m, model_prep *p) {
    const model_hparams *hp = &m->hp;
    const kern_ops *o = kern_backend_ops(p->be);
    const uint32_t mul = p->no_pack ? KERN_MAT_AS_STORED : 0;
    p->layers = calloc((size_t)hp->n_layer, sizeof *p->layers);
    p->norms = o->buf_alloc(p->be, sizeof(float) * model_vec_floats(hp));
    if (!p->layers || !p->norms) return ST_ERR_NOMEM;
    if (prep_rope_freqs(m, p)) return ST_ERR_NOMEM;
    float *at = p->norms;
    p->out_norm = prep_vec(p, &at, m->out_norm, hp->n_embd);
    p->ones = prep_vec(p, &at, m->ones, hp->head_dim > hp->head_dim_swa ? hp->head_dim : hp->head_dim_swa);
    p->ple_proj_norm = prep_vec(p, &at, m->ple_proj_norm, hp->n_embd_ple);
    st_code rc = prep_mat(m, p, &p->output, &m->output, mul);
    if (rc) return rc;
    if (hp->n_embd_ple > 0 &&
        ((rc = prep_mat(m, p, &p->ple_embd, &m->ple_embd, KERN_MAT_ROWS_ONLY)) ||
         (rc = prep_mat(m, p, &p->ple_model_proj, &m->ple_model_proj, mul))))
        return rc;
    if (hp->tied_output) p->tok_embd = p->output; /* get_row reads the stored rows */
    else if ((rc = prep_mat(m, p, &p->tok_embd, &m->tok_embd, KERN_MAT_ROWS_ONLY))) return rc;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        const model_layer *S = &m->layers[l];
        model_layer *L = &p->layers[l];
        const int64_t hd = S->head_dim, QD = (int64_t)hp->n_head * hd, KD = (int64_t)S->n_head_kv * hd;
        *L = *S; /* the shape; matrices and vectors are replaced below */
        L->attn_norm = prep_vec(p, &at, S->attn_norm, hp->n_embd);
        L->ffn_norm = prep_vec(p, &at, S->ffn_norm, hp->n_embd);
        L->bq = prep_vec(p, &at, S->bq, QD);
        L->bk = prep_vec(p, &at, S->bk, KD);
        L->bv = prep_vec(p, &at, S->bv, KD);
        L->q_norm = prep_vec(p, &at, S->q_norm, hd);
        L->k_norm = prep_vec(p, &at, S->k_norm, hd);
        L->post_attn_norm = prep_vec(p, &at, S->post_attn_norm, hp->n_embd);
        L->post_ffn_norm = prep_vec(p, &at, S->post_ffn_norm, hp->n_embd);
        L->ple_norm = prep_vec(p, &at, S->ple_norm, hp->n_embd);
        const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
        L->sinks = prep_vec(p, &at, S->sinks, hp->n_head);
        L->bo = prep_vec(p, &at, S->bo, hp->n_embd);
        L->gate_inp_b = prep_vec(p, &at, S->gate_inp_b, NE);
        L->exp_gate_b = prep_vec(p, &at, S->exp_gate_b, NE * FE);
        L->exp_up_b = prep_vec(p, &at, S->exp_up_b, NE * FE);
        L->exp_down_b = prep_vec(p, &at, S->exp_down_b, NE * hp->n_embd);
        prep_ssm_vecs(hp, p, &at, S, L);
        const bool v_is_k = S->wv.data == S->wk.data;
        kern_mat *dst[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                           &L->ple_gate, &L->ple_proj, &L->gate_inp, &L->shexp_gate_inp,
                           &L->shexp_gate, &L->shexp_up, &L->shexp_down, &L->ssm_qkv, &L->ssm_z,
                           &L->ssm_beta, &L->ssm_alpha};
        const kern_mat *src[] = {&S->wq, &S->wk, &S->wv, &S->wo, &S->w_gate, &S->w_up,
                                 &S->w_down, &S->ple_gate, &S->ple_proj, &S->gate_inp,
                                 &S->shexp_gate_inp, &S->shexp_gate, &S->shexp_up,
                                 &S->shexp_down, &S->ssm_qkv, &S->ssm_z, &S->ssm_beta,
                                 &S->ssm_alpha};
        for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++) *dst[i] = (kern_mat){0};
        for (size_t i = 0; i < sizeof dst / sizeof dst[0]; i++) {
            if (src[i]->data && !(i == 2 && v_is_k) && (rc = prep_mat(m, p, dst[i], src[i], mul)))
                return rc;
        }
        if (v_is_k) L->wv = L->wk;
    }
    return prep_experts(m, p, mul);
}

const model_prep *model_prep_get(const model *m, const char *name, bool no_pack, st_err *err) {
    struct model_preps *ps = m->preps;
    pthread_mutex_lock(&ps->mu);
    model_prep *p = ps->list;
    while (p && !(p->no_pack == no_pack && strcmp(kern_backend_name(p->be), name) == 0))
        p = p->next;
    if (!p && (p = calloc(1, sizeof *p)) == NULL)
        st_set(err, ST_ERR_NOMEM, "out of memory preparing the weights");
    else if (!p->be) {
        p->no_pack = no_pack;
        p->be = kern_backend_init(name, 1, err);
        st_code rc = p->be ? prep_make(m, p) : ST_ERR_ARG;
        if (p->be && rc && kern_backend_sync(p->be, err) == ST_OK)
            st_set(err, rc, "out of memory preparing the weights");
        if (rc) {
            if (p->be) st_prefix(err, "preparing the weights for the %s backend", name);
            prep_free(m, p);
            p = NULL;
        } else {
            p->next = ps->list;
            ps->list = p;
        }
    }
    pthread_mutex_unlock(&ps->mu);
    return p;
}

void model_prep_free_all(model *m) {
    if (!m->preps) return;
    for (model_prep *p = m->preps->list, *next; p; p = next) {
        next = p->next;
        prep_free(m, p);
    }
    pthread_mutex_destroy(&m->preps->mu);
    free(m->preps);
    m->preps = NULL;
}

uint64_t model_packed_bytes(const model *m) {
    uint64_t n = 0;
    pthread_mutex_lock(&m->preps->mu);
    for (const model_prep *p = m->preps->list; p; p = p->next) n += p->bytes;
    pthread_mutex_unlock(&m->preps->mu);
    return n;
}
