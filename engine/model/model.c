/* model.c - loading a GGUF of a supported architecture (arch.c): hyperparameters from
 * the "<arch>.*" metadata, weights as views into the file mapping, every tensor checked
 * for presence, shape and type.
 *
 * Nothing is copied except norm and bias vectors stored in F16/BF16 (the kernels take
 * float32 vectors). The forward pass is in forward.c. */
#include "model/model.h"
#include "model/arch.h"
#include "model/prep.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads "<arch>.<name>" as an integer. Missing: *out = def (def < 0 means required). */
st_code load_hp_int(const gguf_ctx *g, const char *arch, const char *name, int64_t def,
                      int32_t *out, st_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t v;
    st_code rc = gguf_get_i64(g, key, &v, err);
    if (rc == ST_ERR_NOT_FOUND && def >= 0) {
        st_clear(err);
        v = def;
    } else if (rc != ST_OK) {
        return rc;
    }
    if (v < 0 || v > (1 << 30))
        return st_set(err, ST_ERR_FORMAT, "metadata %s = %lld is out of range", key, (long long)v);
    *out = (int32_t)v;
    return ST_OK;
}

st_code load_hp_float(const gguf_ctx *g, const char *arch, const char *name, double def,
                        float *out, st_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    double v;
    st_code rc = gguf_get_f64(g, key, &v, err);
    if (rc == ST_ERR_NOT_FOUND) {
        st_clear(err);
        v = def;
    } else if (rc != ST_OK) {
        return rc;
    }
    if (!(v > 0) || v > 1e12)
        return st_set(err, ST_ERR_FORMAT, "metadata %s = %g is out of range", key, v);
    *out = (float)v;
    return ST_OK;
}

st_code load_hp_int_at(const gguf_ctx *g, const char *arch, const char *name, int32_t l,
                       int64_t def, int32_t *out, st_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t i = gguf_find_key(g, key);
    if (i < 0 || gguf_kv_type(g, i) != GGUF_ARRAY) return load_hp_int(g, arch, name, def, out, err);
    int64_t v = -1;
    if ((uint64_t)l >= gguf_arr_n(g, i))
        return st_set(err, ST_ERR_FORMAT, "metadata %s has %llu values, fewer than the layers",
                      key, (unsigned long long)gguf_arr_n(g, i));
    if (gguf_arr_i64(g, i, (uint64_t)l, &v) != ST_OK || v < 0 || v > (1 << 30))
        return st_set(err, ST_ERR_FORMAT, "metadata %s[%d] is not an integer in range", key, l);
    *out = (int32_t)v;
    return ST_OK;
}

/* The largest value of a per-layer array "<arch>.<name>", or its one value. */
static st_code hp_int_max(const gguf_ctx *g, const char *arch, const char *name, int64_t def,
                          int32_t *out, st_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t i = gguf_find_key(g, key);
    if (i < 0 || gguf_kv_type(g, i) != GGUF_ARRAY) return load_hp_int(g, arch, name, def, out, err);
    if (gguf_arr_n(g, i) == 0) return st_set(err, ST_ERR_FORMAT, "metadata %s is empty", key);
    int32_t mx = 0, v;
    for (int32_t l = 0; (uint64_t)l < gguf_arr_n(g, i); l++) {
        st_code rc = load_hp_int_at(g, arch, name, l, def, &v, err);
        if (rc) return rc;
        mx = v > mx ? v : mx;
    }
    *out = mx;
    return ST_OK;
}

/* YaRN of factor f (prep.h): its original context and correction range; the magnitude
 * factor it puts on q and k goes into the attention scale. Variants llama.cpp reads from
 * further keys (a log multiplier, an extrapolation factor) are refused. */
static st_code load_yarn(const gguf_ctx *g, const char *arch, float f, model_hparams *hp,
                         st_err *err) {
    static const char *const refused[] = {"rope.scaling.yarn_log_multiplier",
                                          "rope.scaling.yarn_ext_factor",
                                          "rope.scaling.yarn_attn_factor"};
    char key[96];
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, refused[i]);
        if (gguf_find_key(g, key) >= 0)
            return st_set(err, ST_ERR_UNSUPPORTED, "%s is not supported (plain YaRN is)", key);
    }
    if (!(f > 1.0f && f <= 1e6f))
        return st_set(err, ST_ERR_FORMAT, "%s.rope.scaling.factor = %g is out of range for YaRN "
                      "(above 1, up to 1e6)", arch, (double)f);
    st_code rc;
    if ((rc = load_hp_int(g, arch, "rope.scaling.original_context_length", hp->n_ctx_train,
                          &hp->yarn_orig_ctx, err)) ||
        (rc = load_hp_float(g, arch, "rope.scaling.yarn_beta_fast", 32.0, &hp->yarn_beta_fast, err)) ||
        (rc = load_hp_float(g, arch, "rope.scaling.yarn_beta_slow", 1.0, &hp->yarn_beta_slow, err)))
        return rc;
    if (hp->yarn_orig_ctx <= 0)
        return st_set(err, ST_ERR_FORMAT, "%s.rope.scaling.original_context_length is 0", arch);
    hp->yarn_factor = f;
    const float ms = model_yarn_mscale(f);
    hp->attn_scale *= ms * ms;
    return ST_OK;
}

/* Linear RoPE scaling (angles divided by the factor) is what Gemma 3 4B+ and older
 * long-context llamas use; like llama.cpp, a factor without a type means linear, and the
 * old key rope.scale_linear is read too. Other types are refused rather than decoded
 * wrongly. Sets hp->rope_scale (1: none). */
static st_code load_rope_scaling(const gguf_ctx *g, const char *arch, model_hparams *hp,
                                 st_err *err) {
    char key[96];
    const char *type = "linear";
    hp->rope_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    if (gguf_find_key(g, key) >= 0) {
        st_code rc = gguf_get_str(g, key, &type, err);
        if (rc) return rc;
    }
    if (strcmp(type, "none") == 0) return ST_OK; /* a factor beside it means nothing */
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
    const char *name = gguf_find_key(g, key) >= 0 ? "rope.scaling.factor" : "rope.scale_linear";
    float f = 1.0f;
    st_code rc = load_hp_float(g, arch, name, 1.0, &f, err);
    if (rc) return rc;
    if (f == 1.0f) return ST_OK;
    if (strcmp(type, "yarn") == 0) return load_yarn(g, arch, f, hp, err);
    if (strcmp(type, "linear") != 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "%s.rope.scaling.type = '%s' (factor %g) is not "
                      "supported (supported: none, linear, yarn)", arch, type, (double)f);
    /* angles divided by a tiny factor become infinite: no real model is near these */
    if (!(f >= 1e-3f && f <= 1e6f))
        return st_set(err, ST_ERR_FORMAT, "%s.%s = %g is out of range (1e-3 to 1e6)", arch, name,
                      (double)f);
    hp->rope_scale = f;
    return ST_OK;
}

/* What the family adds: embedding and attention scales, sliding windows, and whatever
 * its own loader reads (arch.h). */
static st_code load_family_hparams(const gguf_ctx *g, const char *arch, const arch_desc *ad,
                                   model_hparams *hp, st_err *err) {
    hp->embd_scale = ad->embd_scaled ? sqrtf((float)hp->n_embd) : 1.0f;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (ad->arch == MODEL_ARCH_GEMMA3 && hp->n_layer == 62) /* the 27B model, see arch.c */
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    hp->head_dim_swa = hp->head_dim;
    hp->rope_dim_swa = hp->rope_dim;
    hp->n_head_kv_swa = hp->n_head_kv;
    if (ad->swa_pattern > 0) {
        st_code rc = load_hp_int(g, arch, "attention.sliding_window", 0, &hp->n_swa, err);
        if (rc) return rc;
        hp->swa_pattern = hp->n_swa > 0 ? ad->swa_pattern : 0;
        hp->rope_base_swa = ad->rope_base_swa;
    }
    st_code rc = ad->load_hparams ? ad->load_hparams(g, arch, hp, err) : ST_OK;
    if (rc) return rc;
    char key[96];
    snprintf(key, sizeof key, "%s.final_logit_softcapping", arch);
    if (!ad->load_hparams && gguf_find_key(g, key) >= 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "%s (logit soft-capping) is not supported", key);
    return load_rope_scaling(g, arch, hp, err);
}

/* Architectures llama.cpp runs that this build refuses by name, with why. */
static st_code refuse_known(const char *arch, st_err *err) {
    static const struct { const char *name, *why; } known[] = {
        {"qwen3next", "Qwen3-Next's layer layout (fused q, k, v, z projections and experts) "
                      "is not implemented (the qwen35 and qwen35moe models are)"},
        {"gemma3n", "Gemma 3n's AltUp and Laurel blocks are not implemented (Gemma 4 is)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(arch, known[i].name) == 0)
            return st_set(err, ST_ERR_UNSUPPORTED, "architecture '%s' is not supported: %s "
                          "(supported: %s)", arch, known[i].why, model_arch_names());
    return ST_OK;
}

static st_code load_hparams(const gguf_ctx *g, model_hparams *hp, st_err *err) {
    const char *arch = NULL;
    if (gguf_get_str(g, "general.architecture", &arch, err) != ST_OK) {
        st_prefix(err, "not a model file");
        return err ? err->code : ST_ERR_FORMAT;
    }
    const arch_desc *ad = arch_find(arch);
    st_code rc = ad ? ST_OK : refuse_known(arch, err);
    if (rc) return rc;
    if (!ad)
        return st_set(err, ST_ERR_UNSUPPORTED,
                      "architecture '%s' is not supported (supported: %s; llama covers "
                      "Llama 2/3, SmolLM2, TinyLlama, Mistral)", arch, model_arch_names());
    hp->arch = ad->arch;
    hp->rope_neox = ad->rope_neox;
    hp->qkv_bias = ad->qkv_bias;
    hp->qk_norm = ad->qk_norm;
    hp->post_norms = ad->post_norms;
    hp->act = ad->act;
    if ((rc = load_hp_int(g, arch, "embedding_length", -1, &hp->n_embd, err)) ||
        (rc = load_hp_int(g, arch, "block_count", -1, &hp->n_layer, err)) ||
        (rc = load_hp_int(g, arch, "attention.head_count", -1, &hp->n_head, err)) ||
        (rc = hp_int_max(g, arch, "feed_forward_length", ad->moe ? 0 : -1, &hp->n_ff, err)) ||
        (rc = load_hp_int(g, arch, "context_length", 2048, &hp->n_ctx_train, err)) ||
        (rc = load_hp_float(g, arch, "attention.layer_norm_rms_epsilon", 1e-5, &hp->rms_eps, err)) ||
        (rc = load_hp_float(g, arch, "rope.freq_base", 10000.0, &hp->rope_base, err)))
        return rc;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_ff < 0 ||
        (hp->n_ff == 0 && !ad->moe))
        return st_set(err, ST_ERR_FORMAT, "model dimensions must be positive (embd %d, layers %d, "
                      "heads %d, ffn %d)", hp->n_embd, hp->n_layer, hp->n_head, hp->n_ff);
    /* The head size is embedding_length / head_count unless key_length gives it. */
    char klen[96];
    snprintf(klen, sizeof klen, "%s.attention.key_length", arch);
    if (gguf_find_key(g, klen) < 0 && hp->n_embd % hp->n_head != 0)
        return st_set(err, ST_ERR_FORMAT, "embedding_length %d is not a multiple of head_count "
                      "%d, and no attention.key_length gives the head size", hp->n_embd,
                      hp->n_head);
    if ((rc = hp_int_max(g, arch, "attention.head_count_kv", hp->n_head, &hp->n_head_kv, err)) ||
        (rc = load_hp_int(g, arch, "attention.key_length", hp->n_embd / hp->n_head, &hp->head_dim, err)))
        return rc;
    int32_t vlen;
    if ((rc = load_hp_int(g, arch, "attention.value_length", hp->head_dim, &vlen, err))) return rc;
    if ((rc = load_hp_int(g, arch, "rope.dimension_count", hp->head_dim, &hp->rope_dim, err))) return rc;
    if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv != 0)
        return st_set(err, ST_ERR_FORMAT, "head_count %d is not a multiple of head_count_kv %d",
                      hp->n_head, hp->n_head_kv);
    if (hp->head_dim <= 0)
        return st_set(err, ST_ERR_FORMAT, "attention.key_length %d must be positive",
                      hp->head_dim);
    if (vlen != hp->head_dim)
        return st_set(err, ST_ERR_UNSUPPORTED, "key_length %d != value_length %d is not supported",
                      hp->head_dim, vlen);
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return st_set(err, ST_ERR_FORMAT, "rope.dimension_count %d must be even and <= head dim %d",
                      hp->rope_dim, hp->head_dim);
    if (hp->rope_dim > KERN_ROPE_MAX_DIM)
        return st_set(err, ST_ERR_UNSUPPORTED, "rope.dimension_count %d is more than the %d "
                      "this build rotates", hp->rope_dim, KERN_ROPE_MAX_DIM);
    return load_family_hparams(g, arch, ad, hp, err);
}

/* Finds tensor `name`, checks it is 2-D (n_in, n_out) or 1-D (n_in) when n_out == 0. */
static const gguf_tensor *want(const gguf_ctx *g, const char *name, int64_t n_in, int64_t n_out,
                               st_err *err) {
    const gguf_tensor *t = gguf_find_tensor(g, name);
    if (!t) {
        st_set(err, ST_ERR_FORMAT, "tensor '%s' is missing", name);
        return NULL;
    }
    int64_t n1 = t->n_dims > 1 ? t->ne[1] : 0;
    bool ok = t->ne[0] == n_in && (n_out == 0 ? t->n_dims == 1 : (t->n_dims == 2 && n1 == n_out));
    if (!ok) {
        st_set(err, ST_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
               (long long)t->ne[0], (long long)n1, (long long)n_in, (long long)n_out);
        return NULL;
    }
    return t;
}

st_code load_want_mat(const gguf_ctx *g, const char *name, int64_t n_in, int64_t n_out,
                        kern_mat *m, st_err *err) {
    const gguf_tensor *t = want(g, name, n_in, n_out, err);
    if (!t) return err ? err->code : ST_ERR_FORMAT;
    const dtype_info *d = dtype_get(t->type);
    if (!d || !d->compute) {
        char names[256];
        dtype_compute_names(names, sizeof names);
        return st_set(err, ST_ERR_UNSUPPORTED,
                      "tensor '%s' has type %s, which this build cannot compute with "
                      "(supported: %s)", name, dtype_name(t->type), names);
    }
    *m = (kern_mat){.type = t->type, .n_out = n_out, .n_in = n_in, .data = t->data};
    return ST_OK;
}

/* ST_ERR_FORMAT naming tensor name when one of v[0..n) is a NaN or an infinity: a norm,
 * a bias or a RoPE factor read at load turns every token into garbage without a word. */
static st_code check_finite(const char *name, const float *v, int64_t n, st_err *err) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return st_set(err, ST_ERR_FORMAT, "tensor '%s' has a value that is not finite "
                          "(%g at %lld)", name, (double)v[i], (long long)i);
    return ST_OK;
}

/* A float32 norm or bias vector, every value finite; F16/BF16 ones are converted into
 * m->f32_copies at *used. */
st_code load_want_vec(model *m, const char *name, int64_t n, const float **out, size_t *used,
                        st_err *err) {
    const gguf_tensor *t = want(m->gguf, name, n, 0, err);
    if (!t) return err ? err->code : ST_ERR_FORMAT;
    if (t->type == DT_F32) {
        if ((uintptr_t)t->data % sizeof(float) == 0) {
            *out = t->data;
            return check_finite(name, *out, n, err);
        }
    } else if (t->type != DT_F16 && t->type != DT_BF16) {
        return st_set(err, ST_ERR_UNSUPPORTED, "vector tensor '%s' has type %s (expected F32, "
                      "F16 or BF16)", name, dtype_name(t->type));
    }
    float *dst = m->f32_copies + *used;
    dtype_dequantize_row(t->type, t->data, dst, n);
    *used += (size_t)n;
    *out = dst;
    return check_finite(name, dst, n, err);
}

/* The tokenizer's vocabulary (when the file has one) must have one token per embedding
 * row: fewer would leave the model sampling ids no text stands for, more would give the
 * prompt ids without an embedding. llama.cpp refuses both too (it sizes token_embd by
 * the tokenizer); converters pad a short vocabulary with [PAD] tokens. */
static st_code check_vocab(const gguf_ctx *g, int32_t n_rows, st_err *err) {
    int64_t ti = gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || gguf_kv_type(g, ti) != GGUF_ARRAY) return ST_OK; /* tok.c reports these */
    uint64_t n = gguf_arr_n(g, ti);
    if (n == (uint64_t)n_rows) return ST_OK;
    return st_set(err, ST_ERR_FORMAT, "the tokenizer has %llu tokens but token_embd.weight has "
                  "%d rows (one a token): the file's vocabulary and weights do not belong "
                  "together", (unsigned long long)n, n_rows);
}

size_t model_vec_floats(const model_hparams *hp) {
    const size_t E = (size_t)hp->n_embd;
    const size_t hd = (size_t)(hp->head_dim > hp->head_dim_swa ? hp->head_dim : hp->head_dim_swa);
    const size_t QD = (size_t)hp->n_head * hd, KD = (size_t)hp->n_head_kv * hd;
    const size_t layer = 2 * E + (hp->qkv_bias ? QD + 2 * KD : 0) + (hp->qk_norm ? 2 * hd : 0) +
                         (hp->post_norms ? 2 * E : 0) + (hp->n_embd_ple > 0 ? E : 0);
    /* gpt-oss: sinks, the output bias, the router's and the experts' biases */
    const size_t NE = (size_t)hp->n_expert, FE = (size_t)hp->n_ff_exp;
    const size_t oss = hp->attn_sinks ? (size_t)hp->n_head + E + NE + NE * (2 * FE + E) : 0;
    /* + a layer's output scale (1 float), the per-layer projection's norm, the V norm's ones */
    return E + (size_t)hp->n_layer * (layer + oss + 1) + (size_t)hp->n_embd_ple +
           (hp->v_norm ? hd : 0) + qwen35_vec_floats(hp);
}

/* The tensors a family adds to layer l's llama block (arch.h). */
static st_code load_family_tensors(model *m, int32_t l, model_layer *L, size_t *used,
                                   st_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, hd = L->head_dim;
    const int64_t QD = (int64_t)hp->n_head * hd, KD = (int64_t)L->n_head_kv * hd;
    char nm[96];
    st_code rc = ST_OK;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, (int)l), nm)
    if (hp->qkv_bias &&
        ((rc = load_want_vec(m, NAME("attn_q.bias"), QD, &L->bq, used, err)) ||
         (rc = load_want_vec(m, NAME("attn_k.bias"), KD, &L->bk, used, err)) ||
         (rc = load_want_vec(m, NAME("attn_v.bias"), KD, &L->bv, used, err))))
        return rc;
    /* Gemma 3's files store its norms' gains as 1 + w already: llama.cpp's converter adds
     * the 1 (convert_hf_to_gguf.py, Gemma3Model.norm_shift and modify_tensors: "Gemma3RMSNorm
     * adds 1.0 to the norm value"), so every norm here is the plain x * gain. A layer that
     * reads another's cache (Gemma 4's shared KV) has no K and no K norm. */
    if (hp->qk_norm &&
        ((rc = load_want_vec(m, NAME("attn_q_norm.weight"), hd, &L->q_norm, used, err)) ||
         (L->kv_src == l &&
          (rc = load_want_vec(m, NAME("attn_k_norm.weight"), hd, &L->k_norm, used, err)))))
        return rc;
    if (hp->post_norms &&
        ((rc = load_want_vec(m, NAME("post_attention_norm.weight"), E, &L->post_attn_norm, used, err)) ||
         (rc = load_want_vec(m, NAME("post_ffw_norm.weight"), E, &L->post_ffn_norm, used, err))))
        return rc;
#undef NAME
    const arch_desc *ad = arch_get(hp->arch);
    return ad->load_layer ? ad->load_layer(m, l, L, used, err) : ST_OK;
}

/* Layer l's shape, its llama block and what its family adds. */
static st_code load_layer(model *m, int32_t l, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    const gguf_ctx *g = m->gguf;
    model_layer *L = &m->layers[l];
    L->head_dim = model_layer_head_dim(hp, l);
    L->n_head_kv = model_layer_n_head_kv(hp, l);
    L->rope_dim = model_layer_rope_dim(hp, l);
    L->kv_src = model_layer_kv_source(hp, l);
    L->out_scale = 1.0f;
    const bool moe = arch_get(hp->arch)->moe;
    st_code rc = load_hp_int_at(g, model_arch_name(hp->arch), "feed_forward_length", l,
                                moe ? 0 : -1, &L->n_ff, err);
    if (rc) return rc;
    if (L->n_ff < 0 || (L->n_ff == 0 && !moe))
        return st_set(err, ST_ERR_FORMAT, "layer %d: feed_forward_length is 0", l);
    if (arch_get(hp->arch)->load_block) return arch_get(hp->arch)->load_block(m, l, L, used, err);
    const int64_t E = hp->n_embd, F = L->n_ff, QD = (int64_t)hp->n_head * L->head_dim,
                  KD = (int64_t)L->n_head_kv * L->head_dim;
    char nm[96], fnorm[96];
    const char *fn = arch_get(hp->arch)->ffn_norm;
    snprintf(fnorm, sizeof fnorm, "blk.%d.%s.weight", (int)l, fn ? fn : "ffn_norm");
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    if ((rc = load_want_vec(m, NAME("attn_norm"), E, &L->attn_norm, used, err)) ||
        (rc = load_want_mat(g, NAME("attn_q"), E, QD, &L->wq, err)) ||
        (rc = load_want_mat(g, NAME("attn_output"), QD, E, &L->wo, err)) ||
        (rc = load_want_vec(m, fnorm, E, &L->ffn_norm, used, err)))
        return rc;
    if (hp->n_expert == 0 && /* a mixture of experts has its own (moe.c) */
        ((rc = load_want_mat(g, NAME("ffn_gate"), E, F, &L->w_gate, err)) ||
         (rc = load_want_mat(g, NAME("ffn_up"), E, F, &L->w_up, err)) ||
         (rc = load_want_mat(g, NAME("ffn_down"), F, E, &L->w_down, err))))
        return rc;
    if (L->kv_src == l) {
        if ((rc = load_want_mat(g, NAME("attn_k"), E, KD, &L->wk, err))) return rc;
        if (arch_get(hp->arch)->v_from_k && !gguf_find_tensor(g, NAME("attn_v")))
            L->wv = L->wk; /* llama.cpp's gemma4.cpp: "if v_proj is not present, use Kcur" */
        else if ((rc = load_want_mat(g, NAME("attn_v"), E, KD, &L->wv, err)))
            return rc;
    }
#undef NAME
    if ((rc = load_family_tensors(m, l, L, used, err))) return rc;
    const kern_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                            &L->ple_gate, &L->ple_proj};
    load_count_mats(m, ms, sizeof ms / sizeof ms[0]);
    return ST_OK;
}

void load_count_mats(model *m, const kern_mat *const *ms, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ms[i]->data && !(i == 2 && ms[2]->data == ms[1]->data))
            m->weight_bytes += dtype_row_bytes(ms[i]->type, ms[i]->n_in) * (uint64_t)ms[i]->n_out;
}

static st_code load_weights(model *m, st_err *err) {
    const model_hparams *hp = &m->hp;
    const gguf_ctx *g = m->gguf;
    const gguf_tensor *emb = gguf_find_tensor(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2)
        return st_set(err, ST_ERR_FORMAT, "tensor 'token_embd.weight' is missing or not 2-D");
    m->hp.n_vocab = (int32_t)emb->ne[1];
    if (emb->ne[1] <= 0 || emb->ne[1] > (1 << 24))
        return st_set(err, ST_ERR_FORMAT, "vocabulary size %lld is out of range",
                      (long long)emb->ne[1]);
    int64_t E = hp->n_embd, V = hp->n_vocab;
    st_code rc = load_want_mat(g, "token_embd.weight", E, V, &m->tok_embd, err);
    if (rc) return rc;
    if ((rc = check_vocab(g, hp->n_vocab, err))) return rc;
    /* Every layer has 9 tensors or more: bound block_count by the file's tensors before
     * anything is sized by it (a small file must not make the loader allocate gigabytes).
     * Only llama's 9 count, so that a family tensor missing from a file that holds its
     * layers is named by the layer's own check, not taken for a wrong block_count. */
    const int per_layer = 9;
    int64_t room = (gguf_n_tensors(g) - 2) / per_layer;
    if (hp->n_layer > room)
        return st_set(err, ST_ERR_FORMAT, "%s.block_count is %d, but the file's %lld tensors "
                      "hold at most %lld layers of %d or more (blk.0 .. blk.%lld)",
                      model_arch_name(hp->arch), hp->n_layer, (long long)gguf_n_tensors(g),
                      (long long)(room > 0 ? room : 0), per_layer,
                      (long long)(room > 0 ? room - 1 : 0));

    /* room for every norm and bias vector, in case all need converting */
    m->f32_copies = malloc(sizeof(float) * model_vec_floats(hp));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->f32_copies || !m->layers) return st_set(err, ST_ERR_NOMEM, "out of memory");
    size_t used = 0;
    if ((rc = load_want_vec(m, "output_norm.weight", E, &m->out_norm, &used, err))) return rc;
    if (gguf_find_tensor(g, "output.weight")) {
        if ((rc = load_want_mat(g, "output.weight", E, V, &m->output, err))) return rc;
        m->hp.tied_output = false;
    } else {
        m->output = m->tok_embd;
        m->hp.tied_output = true;
    }
    const gguf_tensor *rf = gguf_find_tensor(g, "rope_freqs.weight");
    if (rf) {
        if (rf->type != DT_F32 || rf->n_dims != 1 || rf->ne[0] != hp->rope_dim / 2)
            return st_set(err, ST_ERR_FORMAT, "tensor 'rope_freqs.weight' must be F32 of %d values",
                          hp->rope_dim / 2);
        m->rope_freqs = rf->data;
        if ((rc = check_finite("rope_freqs.weight", m->rope_freqs, rf->ne[0], err))) return rc;
    }
    m->weight_bytes = dtype_row_bytes(m->output.type, E) * (uint64_t)V;
    const arch_desc *ad = arch_get(hp->arch);
    if (ad->load_tensors && (rc = ad->load_tensors(m, &used, err))) return rc;
    for (int32_t l = 0; l < hp->n_layer; l++)
        if ((rc = load_layer(m, l, &used, err))) return rc;
    return ST_OK;
}

model *model_from_gguf(gguf_ctx *g, st_err *err) {
    model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->gguf = g;
    m->preps = model_preps_init();
    if (!m->preps) {
        model_free(m);
        st_set(err, ST_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (load_hparams(g, &m->hp, err) != ST_OK || load_weights(m, err) != ST_OK) {
        model_free(m);
        return NULL;
    }
    return m;
}

model *model_load(const char *path, st_err *err) {
    gguf_ctx *g = gguf_open(path, err);
    if (!g) return NULL;
    model *m = model_from_gguf(g, err);
    if (!m) st_prefix(err, "%s", path);
    return m;
}

void model_free(model *m) {
    if (!m) return;
    model_prep_free_all(m);
    gguf_close(m->gguf);
    free(m->layers);
    free(m->experts);
    free(m->f32_copies);
    free(m);
}
