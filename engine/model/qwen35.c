/* qwen35.c - what Qwen3.5 (general.architecture "qwen35", the dense 0.8B .. 27B models)
 * is, read from its GGUF: three of every four layers are Gated DeltaNet layers (a
 * recurrent state per sequence, kern_gdn) and every fourth a full-attention layer whose
 * Q projection also gives a sigmoid gate on its output. Both kinds end in the SwiGLU
 * feed-forward after post_attention_norm. The forward pass is forward.c's.
 *
 * Facts from llama.cpp 0c1e5709 (src/models/qwen35.cpp, delta-net-base.cpp, models.h's
 * build_gdn_l2_norm, ggml-cpu's gated_delta_net), checked against its source: layer l is
 * recurrent unless (l + 1) % full_attention_interval == 0 (4 when absent), or as the
 * array attention.recurrent_layers says; the DeltaNet has ssm.group_count key heads and
 * ssm.time_step_rank value heads of ssm.state_size, value head h reading key head
 * h % group_count; attn_qkv feeds a conv of ssm.conv_kernel taps without bias, then
 * SiLU; q and k are divided by sqrt(sum x^2 + rms_eps); beta = sigmoid(ssm_beta x), the
 * decay is exp(softplus(ssm_alpha x + ssm_dt.bias) * ssm_a); the output is
 * ssm_out (RMSNorm(o; ssm_norm) * silu(attn_gate x)). Full-attention layers: attn_q gives
 * [q | gate] per head, Q/K RMSNorm, NeoX rotary on rope.dimension_count dims (IMROPE,
 * whose sections all see the same position for text), output attn_output (attn *
 * sigmoid(gate)). The multi-token-prediction layers (nextn_predict_layers) are not
 * read: they are not part of a decoding pass. Qwen3.5-MoE ("qwen35moe",
 * src/models/qwen35moe.cpp) has the same layers with moe.c's feed-forward in place of the
 * SwiGLU: a softmax router, the top k renormalised, and a shared expert gated by a sigmoid. */
#include "model/arch.h"
#include "model/moe.h"

#include <stdio.h>
#include <string.h>

/* Key "<arch>.<name>" into key: its index in *i (-1: absent), ST_ERR_FORMAT when it is
 * there but not an array of at least n values. */
static st_code find_array(const gguf_ctx *g, const char *arch, const char *name, uint64_t n,
                          char *key, int64_t *i, st_err *err) {
    snprintf(key, 128, "%s.%s", arch, name);
    *i = gguf_find_key(g, key);
    if (*i >= 0 && (gguf_kv_type(g, *i) != GGUF_ARRAY || gguf_arr_n(g, *i) < n))
        return st_set(err, ST_ERR_FORMAT, "%s must be an array of at least %llu values", key,
                      (unsigned long long)n);
    return ST_OK;
}

/* The recurrent layers from attention.recurrent_layers when the file has it: they must
 * be the pattern of full_attn_interval, the only one this build runs. */
static st_code check_recurrent_array(const gguf_ctx *g, const char *arch, const model_hparams *hp,
                                     st_err *err) {
    char key[128];
    int64_t i;
    st_code rc = find_array(g, arch, "attention.recurrent_layers", (uint64_t)hp->n_layer, key, &i, err);
    if (rc || i < 0) return rc;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        bool v = false;
        if (gguf_arr_bool(g, i, (uint64_t)l, &v) != ST_OK)
            return st_set(err, ST_ERR_FORMAT, "%s[%d] is not a boolean", key, l);
        if (v != model_layer_is_recurrent(hp, l))
            return st_set(err, ST_ERR_UNSUPPORTED, "%s: layer %d breaks the pattern of a "
                          "full-attention layer every %d (this build runs only that pattern)",
                          key, l, hp->full_attn_interval);
    }
    return ST_OK;
}

/* The M-RoPE sections (rope.dimension_sections), when the file has them: interleaved,
 * rotated pair i takes section i % 3 while i < 3 x that section's size, and text gives
 * the three one position and the fourth position 0. So they must cover every pair, as
 * Qwen3.5's files do (11, 11, 10 of 32 pairs), for the rotary to be plain NeoX. */
static st_code check_sections(const gguf_ctx *g, const char *arch, const model_hparams *hp,
                              st_err *err) {
    char key[128];
    int64_t i;
    st_code rc = find_array(g, arch, "rope.dimension_sections", 3, key, &i, err);
    if (rc || i < 0) return rc;
    const int64_t pairs = hp->rope_dim / 2;
    for (int64_t k = 0; k < 3; k++) {
        int64_t v = -1;
        if (gguf_arr_i64(g, i, (uint64_t)k, &v) != ST_OK)
            return st_set(err, ST_ERR_FORMAT, "%s[%lld] is not an integer", key, (long long)k);
        if (v != (pairs + 2 - k) / 3)
            return st_set(err, ST_ERR_UNSUPPORTED, "%s[%lld] = %lld leaves rotated pairs to the "
                          "fourth section (position 0 for text); this build rotates all %lld "
                          "pairs by the token's position", key, (long long)k, (long long)v,
                          (long long)pairs);
    }
    return ST_OK;
}

st_code qwen35_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp, st_err *err) {
    int32_t inner = 0;
    st_code rc;
    if ((rc = load_hp_int(g, arch, "full_attention_interval", 4, &hp->full_attn_interval, err)) ||
        (rc = load_hp_int(g, arch, "ssm.conv_kernel", -1, &hp->ssm_conv, err)) ||
        (rc = load_hp_int(g, arch, "ssm.state_size", -1, &hp->ssm_state, err)) ||
        (rc = load_hp_int(g, arch, "ssm.group_count", -1, &hp->ssm_k_heads, err)) ||
        (rc = load_hp_int(g, arch, "ssm.time_step_rank", -1, &hp->ssm_v_heads, err)) ||
        (rc = load_hp_int(g, arch, "ssm.inner_size", -1, &inner, err)))
        return rc;
    if (hp->full_attn_interval < 1 || hp->ssm_conv < 1 || hp->ssm_conv > 64 ||
        hp->ssm_state < 1 || hp->ssm_state > KERN_GDN_MAX_STATE || hp->ssm_k_heads < 1 ||
        hp->ssm_v_heads % hp->ssm_k_heads != 0 || inner != hp->ssm_v_heads * hp->ssm_state)
        return st_set(err, ST_ERR_FORMAT, "%s: full_attention_interval %d, ssm.conv_kernel %d "
                      "(1 to 64), ssm.state_size %d (1 to %d), ssm.group_count %d dividing "
                      "ssm.time_step_rank %d, ssm.inner_size %d (their product): out of range",
                      arch, hp->full_attn_interval, hp->ssm_conv, hp->ssm_state,
                      KERN_GDN_MAX_STATE, hp->ssm_k_heads, hp->ssm_v_heads, inner);
    hp->attn_out_gate = true;
    if ((rc = check_sections(g, arch, hp, err))) return rc;
    return check_recurrent_array(g, arch, hp, err);
}

st_code qwen35moe_load_hparams(const gguf_ctx *g, const char *arch, model_hparams *hp,
                               st_err *err) {
    st_code rc = qwen35_load_hparams(g, arch, hp, err);
    return rc ? rc : moe_load_hparams(g, arch, hp, err);
}

/* A float32 matrix of small parameters (the conv's taps) as a vector of n_in * n_out:
 * F32 in place, F16/BF16 converted into m->f32_copies at *used. */
static st_code load_f32_mat(model *m, const char *name, int64_t n_in, int64_t n_out,
                            const float **out, size_t *used, st_err *err) {
    kern_mat t;
    st_code rc = load_want_mat(m->gguf, name, n_in, n_out, &t, err);
    if (rc) return rc;
    if (t.type == DT_F32 && (uintptr_t)t.data % sizeof(float) == 0) {
        *out = t.data;
        return ST_OK;
    }
    if (t.type != DT_F16 && t.type != DT_BF16 && t.type != DT_F32)
        return st_set(err, ST_ERR_UNSUPPORTED, "tensor '%s' has type %s (expected F32, F16 or "
                      "BF16)", name, dtype_name(t.type));
    float *dst = m->f32_copies + *used;
    dtype_dequantize_row(t.type, t.data, dst, n_in * n_out);
    *used += (size_t)(n_in * n_out);
    *out = dst;
    return ST_OK;
}

/* A Gated DeltaNet layer's mixer. */
static st_code load_deltanet(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, S = hp->ssm_state, HV = hp->ssm_v_heads, VD = HV * S;
    const int64_t CD = (2 * hp->ssm_k_heads + HV) * S;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s, (int)l), nm)
    L->recurrent = true;
    if ((rc = load_want_mat(m->gguf, NAME("attn_qkv.weight"), E, CD, &L->ssm_qkv, err)) ||
        (rc = load_want_mat(m->gguf, NAME("attn_gate.weight"), E, VD, &L->ssm_z, err)) ||
        (rc = load_want_mat(m->gguf, NAME("ssm_beta.weight"), E, HV, &L->ssm_beta, err)) ||
        (rc = load_want_mat(m->gguf, NAME("ssm_alpha.weight"), E, HV, &L->ssm_alpha, err)) ||
        (rc = load_want_mat(m->gguf, NAME("ssm_out.weight"), VD, E, &L->wo, err)) ||
        (rc = load_f32_mat(m, NAME("ssm_conv1d.weight"), hp->ssm_conv, CD, &L->ssm_conv_w, used, err)) ||
        (rc = load_want_vec(m, NAME("ssm_dt.bias"), HV, &L->ssm_dt, used, err)) ||
        (rc = load_want_vec(m, NAME("ssm_a"), HV, &L->ssm_a, used, err)) ||
        (rc = load_want_vec(m, NAME("ssm_norm.weight"), S, &L->ssm_norm, used, err)))
        return rc;
#undef NAME
    return ST_OK;
}

/* A full-attention layer's mixer: Q with its gate, K, V, output, Q/K norms. */
static st_code load_gated_attention(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    const model_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, hd = L->head_dim, QD = (int64_t)hp->n_head * hd;
    const int64_t KD = (int64_t)L->n_head_kv * hd;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    if ((rc = load_want_mat(m->gguf, NAME("attn_q"), E, 2 * QD, &L->wq, err)) ||
        (rc = load_want_mat(m->gguf, NAME("attn_k"), E, KD, &L->wk, err)) ||
        (rc = load_want_mat(m->gguf, NAME("attn_v"), E, KD, &L->wv, err)) ||
        (rc = load_want_mat(m->gguf, NAME("attn_output"), QD, E, &L->wo, err)) ||
        (rc = load_want_vec(m, NAME("attn_q_norm"), hd, &L->q_norm, used, err)) ||
        (rc = load_want_vec(m, NAME("attn_k_norm"), hd, &L->k_norm, used, err)))
        return rc;
#undef NAME
    return ST_OK;
}

st_code qwen35_load_block(model *m, int32_t l, model_layer *L, size_t *used, st_err *err) {
    const int64_t E = m->hp.n_embd, F = L->n_ff;
    char nm[96];
    st_code rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d." s ".weight", (int)l), nm)
    if ((rc = load_want_vec(m, NAME("attn_norm"), E, &L->attn_norm, used, err)) ||
        (rc = load_want_vec(m, NAME("post_attention_norm"), E, &L->ffn_norm, used, err)))
        return rc;
    if (m->hp.n_expert > 0) { /* qwen35moe: the router and experts (moe.c) */
        if ((rc = moe_load_layer(m, l, L, used, err))) return rc;
    } else if ((rc = load_want_mat(m->gguf, NAME("ffn_gate"), E, F, &L->w_gate, err)) ||
               (rc = load_want_mat(m->gguf, NAME("ffn_up"), E, F, &L->w_up, err)) ||
               (rc = load_want_mat(m->gguf, NAME("ffn_down"), F, E, &L->w_down, err))) {
        return rc;
    }
#undef NAME
    rc = model_layer_is_recurrent(&m->hp, l) ? load_deltanet(m, l, L, used, err)
                                             : load_gated_attention(m, l, L, used, err);
    if (rc) return rc;
    const kern_mat *ms[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                            &L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha};
    load_count_mats(m, ms, sizeof ms / sizeof ms[0]);
    return ST_OK;
}

size_t qwen35_vec_floats(const model_hparams *hp) {
    if (hp->full_attn_interval <= 0) return 0;
    const size_t S = (size_t)hp->ssm_state, HV = (size_t)hp->ssm_v_heads;
    const size_t CD = (2 * (size_t)hp->ssm_k_heads + HV) * S;
    return (size_t)hp->n_layer * (CD * (size_t)hp->ssm_conv + 2 * HV + S);
}
