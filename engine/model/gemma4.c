/* gemma4.c - what Gemma 4 (general.architecture "gemma4", the dense E2B/E4B/31B text
 * models) adds to the Gemma 3 block, read from its GGUF: the keys and tensors the
 * loader's shared code does not know (arch.h's load hooks). The forward pass is
 * forward.c's, steered by the hyperparameters and tensors filled here.
 *
 * Facts from llama.cpp 0c1e5709 (src/models/gemma4.cpp, conversion/gemma.py), checked
 * against its source: the window pattern is a per-layer array
 * (attention.sliding_window_pattern, true = local); local layers have their own head size
 * (attention.key_length_swa), rotated dims (rope.dimension_count_swa) and base
 * (rope.freq_base_swa, 10000 when absent), and rotate without rope_freqs, which only the
 * global layers use ("proportional" rotary: factors 1 on the rotated pairs, 1e30 on the
 * rest); the attention scale is 1; V gets an RMSNorm without a gain; the last
 * attention.shared_kv_layers layers compute only Q; the E models add per-layer embeddings
 * (embedding_length_per_layer_input); each layer may scale its output
 * (layer_output_scale); final_logit_softcapping caps the logits. The MoE model
 * (26B-A4B, expert_count > 0) and fused attn_qkv files are refused by name. */
#include "model/arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The window pattern from the per-layer array: Gemma 4's layers are local except every
 * p-th, which is what model_layer_is_swa describes; any other pattern is refused. */
static st_code load_pattern(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    int64_t i = gguf_find_key(g, key);
    if (i < 0 || gguf_kv_type(g, i) != GGUF_ARRAY || gguf_arr_n(g, i) != (uint64_t)hp->n_layer)
        return st_set(err, ST_ERR_FORMAT, "%s must be an array of one value a layer (%d)", key,
                      hp->n_layer);
    int32_t p = hp->n_layer + 1; /* no global layer: every layer local */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        bool v = false;
        if (gguf_arr_bool(g, i, (uint64_t)l, &v) != ST_OK)
            return st_set(err, ST_ERR_FORMAT, "%s[%d] is not a boolean", key, l);
        if (!v) {
            p = l + 1;
            break;
        }
    }
    hp->swa_pattern = hp->n_swa > 0 ? p : 0;
    for (int32_t l = 0; l < hp->n_layer && hp->n_swa > 0; l++) {
        bool v = false;
        gguf_arr_bool(g, i, (uint64_t)l, &v);
        if (v != model_layer_is_swa(hp, l))
            return st_set(err, ST_ERR_UNSUPPORTED, "%s: layer %d breaks the pattern of a global "
                          "layer every %d (this build runs only that pattern)", key, l, p);
    }
    return ST_OK;
}

/* KV heads per kind of layer (head_count_kv may hold one value a layer). */
static st_code load_kv_heads(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    int32_t kind[2] = {-1, -1}; /* [0] global, [1] local */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        int32_t v;
        st_code rc = load_hp_int_at(g, arch, "attention.head_count_kv", l, hp->n_head, &v, err);
        if (rc) return rc;
        int k = model_layer_is_swa(hp, l);
        if (v <= 0 || hp->n_head % v != 0 || (kind[k] >= 0 && kind[k] != v))
            return st_set(err, ST_ERR_FORMAT, "%s.attention.head_count_kv of layer %d (%d) must "
                          "divide head_count %d and be the same on every %s layer", arch, l, v,
                          hp->n_head, k ? "local" : "global");
        kind[k] = v;
    }
    hp->n_head_kv = kind[0] > 0 ? kind[0] : kind[1];
    hp->n_head_kv_swa = kind[1] > 0 ? kind[1] : kind[0];
    return ST_OK;
}

/* The local layers' head shape and rotary. */
static st_code load_local_heads(const gguf_ctx *g, const char *arch, model_hparams *hp,
                                st_err *err) {
    int32_t vlen;
    st_code rc;
    if ((rc = load_hp_int(g, arch, "attention.key_length_swa", hp->head_dim, &hp->head_dim_swa, err)) ||
        (rc = load_hp_int(g, arch, "attention.value_length_swa", hp->head_dim_swa, &vlen, err)) ||
        (rc = load_hp_int(g, arch, "rope.dimension_count_swa", hp->rope_dim, &hp->rope_dim_swa, err)) ||
        (rc = load_hp_float(g, arch, "rope.freq_base_swa", 10000.0, &hp->rope_base_swa, err)))
        return rc;
    if (hp->head_dim_swa <= 0 || vlen != hp->head_dim_swa)
        return st_set(err, ST_ERR_FORMAT, "%s.attention.key_length_swa %d must be positive and "
                      "equal value_length_swa %d", arch, hp->head_dim_swa, vlen);
    if (hp->rope_dim_swa <= 0 || hp->rope_dim_swa > hp->head_dim_swa || hp->rope_dim_swa % 2 ||
        hp->rope_dim_swa > KERN_ROPE_MAX_DIM)
        return st_set(err, ST_ERR_FORMAT, "%s.rope.dimension_count_swa %d must be even and at "
                      "most the local head size %d", arch, hp->rope_dim_swa, hp->head_dim_swa);
    return ST_OK;
}

/* Shared-KV layers read layer model_layer_kv_source's cache, which must be of their kind
 * (a file whose last caching layers are not local then global would not fit it). */
static st_code check_shared(const char *arch, const model_hparams *hp, st_err *err) {
    if (hp->n_kv_shared == 0) return ST_OK;
    const int32_t first = hp->n_layer - hp->n_kv_shared;
    if (first < 2)
        return st_set(err, ST_ERR_FORMAT, "%s.attention.shared_kv_layers %d leaves fewer than 2 "
                      "layers with their own cache (of %d)", arch, hp->n_kv_shared, hp->n_layer);
    for (int32_t l = first; l < hp->n_layer; l++)
        if (model_layer_is_swa(hp, model_layer_kv_source(hp, l)) != model_layer_is_swa(hp, l))
            return st_set(err, ST_ERR_UNSUPPORTED, "%s: shared-KV layer %d would read layer %d's "
                          "cache, which is of the other kind", arch, l, model_layer_kv_source(hp, l));
    return ST_OK;
}

st_code gemma4_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    int32_t experts = 0;
    st_code rc = load_hp_int(g, arch, "expert_count", 0, &experts, err);
    if (rc) return rc;
    if (experts > 0)
        return st_set(err, ST_ERR_UNSUPPORTED, "Gemma 4 with experts (%s.expert_count %d, the "
                      "26B-A4B model) is not supported: mixture-of-experts feed-forwards are "
                      "not implemented; the dense Gemma 4 models are", arch, experts);
    if ((rc = load_hp_int(g, arch, "attention.sliding_window", 0, &hp->n_swa, err)) ||
        (rc = load_pattern(g, arch, hp, err)) || (rc = load_kv_heads(g, arch, hp, err)) ||
        (rc = load_local_heads(g, arch, hp, err)) ||
        (rc = load_hp_int(g, arch, "attention.shared_kv_layers", 0, &hp->n_kv_shared, err)) ||
        (rc = load_hp_int(g, arch, "embedding_length_per_layer_input", 0, &hp->n_embd_ple, err)))
        return rc;
    if (hp->n_kv_shared >= hp->n_layer || (rc = check_shared(arch, hp, err)))
        return rc ? rc : st_set(err, ST_ERR_FORMAT, "%s.attention.shared_kv_layers %d is not "
                                "below block_count %d", arch, hp->n_kv_shared, hp->n_layer);
    char key[96];
    snprintf(key, sizeof key, "%s.final_logit_softcapping", arch);
    hp->final_softcap = 0.0f;
    if (gguf_find_key(g, key) >= 0 &&
        (rc = load_hp_float(g, arch, "final_logit_softcapping", 0.0, &hp->final_softcap, err)))
        return rc;
    hp->attn_scale = 1.0f; /* gemma4.cpp: "Gemma4 uses self.scaling = 1.0" */
    hp->v_norm = true;
    hp->rope_freqs_global = true;
    return ST_OK;
}

st_code gemma4_load_tensors(model *m, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    if (gguf_find_tensor(m->gguf, "blk.0.attn_qkv.weight"))
        return st_set(err, ST_ERR_UNSUPPORTED, "Gemma 4 with fused attn_qkv tensors is not "
                      "supported (separate attn_q, attn_k, attn_v are)");
    /* the V norm's gains: ones as long as the longest head */
    const int32_t hd = hp->head_dim > hp->head_dim_swa ? hp->head_dim : hp->head_dim_swa;
    float *ones = m->f32_copies + *used;
    for (int32_t i = 0; i < hd; i++) ones[i] = 1.0f;
    m->ones = ones;
    *used += (size_t)hd;
    if (hp->n_embd_ple == 0) return ST_OK;
    const int64_t pl = (int64_t)hp->n_layer * hp->n_embd_ple;
    st_code rc;
    if ((rc = load_want_mat(m->gguf, "per_layer_token_embd.weight", pl, hp->n_vocab, &m->ple_embd, err)) ||
        (rc = load_want_mat(m->gguf, "per_layer_model_proj.weight", hp->n_embd, pl, &m->ple_model_proj, err)) ||
        (rc = load_want_vec(m, "per_layer_proj_norm.weight", hp->n_embd_ple, &m->ple_proj_norm, used, err)))
        return rc;
    m->weight_bytes += dtype_row_bytes(m->ple_model_proj.type, hp->n_embd) * (uint64_t)pl +
                       dtype_row_bytes(m->ple_embd.type, pl); /* one row a token */
    return ST_OK;
}

st_code gemma4_load_layer(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    if (gguf_find_tensor(m->gguf, NAME("ffn_gate_inp")))
        return st_set(err, ST_ERR_UNSUPPORTED, "layer %d has a mixture-of-experts router "
                      "(ffn_gate_inp): Gemma 4 MoE is not supported", l);
    if (gguf_find_tensor(m->gguf, NAME("layer_output_scale"))) {
        const float *s;
        if ((rc = load_want_vec(m, NAME("layer_output_scale"), 1, &s, used, err))) return rc;
        L->out_scale = s[0];
    }
    if (hp->n_embd_ple > 0 &&
        ((rc = load_want_mat(m->gguf, NAME("inp_gate"), hp->n_embd, hp->n_embd_ple, &L->ple_gate, err)) ||
         (rc = load_want_mat(m->gguf, NAME("proj"), hp->n_embd_ple, hp->n_embd, &L->ple_proj, err)) ||
         (rc = load_want_vec(m, NAME("post_norm"), hp->n_embd, &L->ple_norm, used, err))))
        return rc;
#undef NAME
    return ST_OK;
}
