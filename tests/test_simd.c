/* test_simd.c - the float vector layer (kernels/cpu/simd.h) on its own, as built for this
 * target: the branch the compiler's target selects (so an AArch64 build is on NEON, not
 * on the plain C fallback), and the semantics every branch must share, exactly, because
 * the kernels' bits depend on them: the horizontal sum's fixed tree (lanes i and
 * i + VF_N/2, then i + VF_N/4, ..., i + 1), max and min keeping their second operand
 * when either is NaN (x86's maxps/minps), rounding half to even, pair swaps, 2^n, and
 * fp16/bf16 loads equal to kernels/dtype.h's scalar conversions. make test-isa runs it
 * at every level. */
#include <stdint.h>

#include "kernels/cpu/simd.h"
#include "t.h"

/* the width this target's macros say the layer must have */
static int want_width(void) {
#if defined(SIMD_SCALAR)
    return 1;
#elif defined(__AVX512F__) && !defined(SIMD_256)
    return 16;
#elif defined(__AVX2__) && defined(__FMA__)
    return 8;
#elif defined(__SSE2__) || (defined(__aarch64__) && defined(__ARM_NEON))
    return 4;
#else
    return 1;
#endif
}

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* vf_hsum against the documented tree, on values whose sum depends on the order */
static void test_hsum(void) {
    float x[VF_N], s[VF_N];
    int bad = 0;
    for (int trial = 0; trial < 64; trial++) {
        for (int i = 0; i < VF_N; i++)
            x[i] = (float)(((i * 7 + trial * 13) % 11) - 5) * (i % 3 == trial % 3 ? 1e7f : 1.0f) + 0.1f * (float)i;
        memcpy(s, x, sizeof s);
        for (int w = VF_N / 2; w >= 1; w /= 2)
            for (int i = 0; i < w; i++) s[i] = s[i] + s[i + w];
        bad += bits(vf_hsum(vf_load(x))) != bits(s[0]);
    }
    T_CHECK(bad == 0, "vf_hsum differs from the fixed tree in %d of 64 trials", bad);
#if VF_HSUMN
    /* vf_hsumn: lane k is vf_hsum(v[k]), bit for bit */
    int badn = 0;
    for (int trial = 0; trial < 64; trial++) {
        vf v[VF_N];
        float y[VF_N];
        for (int k = 0; k < VF_N; k++) {
            for (int i = 0; i < VF_N; i++)
                x[i] = (float)(((i * 7 + k * 5 + trial * 13) % 11) - 5) * ((i + k) % 3 == trial % 3 ? 1e7f : 1.0f) +
                       0.1f * (float)(i + k);
            v[k] = vf_load(x);
        }
        vf_store(y, vf_hsumn(v));
        for (int k = 0; k < VF_N; k++) badn += bits(y[k]) != bits(vf_hsum(v[k]));
    }
    T_CHECK(badn == 0, "vf_hsumn differs from vf_hsum in %d of %d lanes", badn, 64 * VF_N);
#endif
}

static void test_lanes(void) {
    float a[VF_N], b[VF_N], y[VF_N];
    const float nan = NAN;
    int bad_max = 0, bad_min = 0, bad_round = 0, bad_pow = 0, bad_swap = 0, bad_hmax = 0;
    for (int trial = 0; trial < 8; trial++) {
        for (int i = 0; i < VF_N; i++) {
            a[i] = (i + trial) % 4 == 0 ? nan : (float)((i * 5 + trial) % 7) - 3.0f;
            b[i] = (i + trial) % 3 == 0 ? nan : (float)((i * 3 + trial) % 5) - 2.0f;
        }
        vf_store(y, vf_max(vf_load(a), vf_load(b)));
        for (int i = 0; i < VF_N; i++) bad_max += bits(y[i]) != bits(a[i] > b[i] ? a[i] : b[i]);
        vf_store(y, vf_min(vf_load(a), vf_load(b)));
        for (int i = 0; i < VF_N; i++) bad_min += bits(y[i]) != bits(a[i] < b[i] ? a[i] : b[i]);
        for (int i = 0; i < VF_N; i++) a[i] = (float)(i + trial) - 0.5f * (float)VF_N - 0.5f;
        vf_store(y, vf_round(vf_load(a)));
        for (int i = 0; i < VF_N; i++) bad_round += y[i] != rintf(a[i]);
        for (int i = 0; i < VF_N; i++) a[i] = (float)((i * 37 + trial * 11) % 250 - 125);
        vf_store(y, vf_pow2i(vf_load(a)));
        for (int i = 0; i < VF_N; i++) bad_pow += y[i] != ldexpf(1.0f, (int)a[i]);
        float m = a[0];
        for (int i = 1; i < VF_N; i++) m = a[i] > m ? a[i] : m;
        bad_hmax += vf_hmax(vf_load(a)) != m;
#if VF_N > 1
        vf_store(y, vf_swap_pairs(vf_load(a)));
        for (int i = 0; i < VF_N; i++) bad_swap += y[i] != a[i ^ 1];
#endif
    }
    T_CHECK(!bad_max && !bad_min, "vf_max/vf_min are not (a > b ? a : b)/(a < b ? a : b) in %d/%d lanes",
            bad_max, bad_min);
    T_CHECK(!bad_round, "vf_round is not half to even in %d lanes", bad_round);
    T_CHECK(!bad_pow, "vf_pow2i is not 2^n in %d lanes", bad_pow);
    T_CHECK(!bad_hmax, "vf_hmax is not the largest lane in %d trials", bad_hmax);
    T_CHECK(!bad_swap, "vf_swap_pairs does not swap pairs in %d lanes", bad_swap);
}

/* every fp16 value with the top bits that change each lane, and bf16 alike */
static void test_half_loads(void) {
    uint16_t h[VF_N];
    float y[VF_N];
    long bad16 = 0, bad_bf = 0;
    for (uint32_t base = 0; base < 65536; base += VF_N) {
        for (int i = 0; i < VF_N; i++) h[i] = (uint16_t)(base + (uint32_t)i);
        vf_store(y, vf_load_f16(h));
        for (int i = 0; i < VF_N; i++) {
            float w = fp16_to_f32(h[i]);
            bad16 += w == w ? bits(y[i]) != bits(w) : y[i] == y[i];
        }
        vf_store(y, vf_load_bf16(h));
        for (int i = 0; i < VF_N; i++) bad_bf += bits(y[i]) != bits(bf16_to_f32(h[i]));
    }
    T_CHECK(!bad16, "vf_load_f16 differs from fp16_to_f32 for %ld values", bad16);
    T_CHECK(!bad_bf, "vf_load_bf16 differs from bf16_to_f32 for %ld values", bad_bf);
}

int main(void) {
    T_CHECK(VF_N == want_width(), "the vector layer has %d lanes, this target's branch %d", VF_N, want_width());
    fprintf(stderr, "vector layer: %d lanes\n", VF_N);
    test_hsum();
    test_lanes();
    test_half_loads();
    return t_done();
}
