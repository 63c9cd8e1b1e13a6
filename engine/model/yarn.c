/* yarn.c - YaRN rotary scaling (rope.scaling.type "yarn": gpt-oss, long-context Qwen) as
 * what this build's rope already takes: a frequency factor per rotated pair and a factor
 * on the attention scale. No kernel changes: YaRN's angle for pair i is the plain angle
 * times fs (1 - r_i) + r_i (fs = 1 / factor, r_i a ramp between the pairs that rotate
 * faster than the original context and those that do not), and its magnitude factor
 * multiplies q and k alike, so q.k by its square.
 *
 * From ggml (ggml/src/ggml.c ggml_rope_yarn_corr_dims, ggml-cpu/ops.cpp rope_yarn and
 * rope_yarn_ramp) and llama.cpp's llama-context.cpp (yarn_attn_factor): correction dims
 * floor/ceil of n_rot ln(n_ctx_orig / (beta 2 pi)) / (2 ln base) for beta_fast and
 * beta_slow, clamped to [0, n_rot - 1]; ramp r_i = 1 - clamp((i - lo) / max(0.001, hi -
 * lo), 0, 1); magnitude 1 + 0.1 ln(factor) (ext_factor 1, attn_factor 1). */
#include "model/prep.h"

#include <math.h>

static float corr_dim(int32_t n_rot, int32_t n_ctx_orig, float beta, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (beta * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void model_yarn_factors(const model_hparams *hp, float base, int32_t n_rot, const float *file,
                        float *ff) {
    const float fs = 1.0f / hp->yarn_factor;
    float lo = floorf(corr_dim(n_rot, hp->yarn_orig_ctx, hp->yarn_beta_fast, base));
    float hi = ceilf(corr_dim(n_rot, hp->yarn_orig_ctx, hp->yarn_beta_slow, base));
    lo = lo > 0 ? lo : 0;
    hi = hi < (float)(n_rot - 1) ? hi : (float)(n_rot - 1);
    for (int32_t i = 0; i < n_rot / 2; i++) {
        float y = ((float)i - lo) / (hi - lo > 0.001f ? hi - lo : 0.001f);
        y = y < 0 ? 0 : y > 1 ? 1 : y;
        const float r = 1.0f - y;
        ff[i] = (file ? file[i] : 1.0f) / (fs * (1.0f - r) + r);
    }
}

float model_yarn_mscale(float factor) { return factor > 1.0f ? 1.0f + 0.1f * logf(factor) : 1.0f; }
