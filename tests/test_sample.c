/* test_sample.c - the sampler against a plain reference: sort the whole vocabulary by
 * (logit descending, id ascending), then top-k, temperature, top-p, min-p and one draw,
 * exactly as the sampler did before it learnt to select the top k without a full sort.
 * For many random logit vectors (with ties, -inf and duplicated values), seeds and
 * settings, the token and the RNG state afterwards must be the same; likewise with a
 * repetition penalty, and for greedy; and sampler_dist gives the distribution the
 * reference draws from, bitwise. Also checks sample_log_softmax and sample_argmax on
 * small cases. */
#include "forest/sample.h"

#include <math.h>
#include <stdlib.h>

#include "t.h"

typedef struct ref_cand {
    int32_t id;
    float logit, p;
} ref_cand;

/* the sampler's xorshift64* (its contract: one draw of rng_unit per sampled token) */
static uint64_t ref_rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static float ref_unit(uint64_t *s) { return (float)(ref_rng_next(s) >> 40) / 16777216.0f; }

static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

/* The reference draw over c[0..n) (id, logit), with *rng advanced as the sampler does;
 * c[0..*kept) are left the candidates it drew from, best first, their p summing to *mass. */
static int32_t ref_draw(const sample_params *p, uint64_t *rng, ref_cand *c, int32_t n,
                        int32_t *kept, float *mass_out) {
    qsort(c, (size_t)n, sizeof *c, ref_cmp);
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    float mx = c[0].logit, sum = 0;
    for (int32_t i = 0; i < k; i++) sum += c[i].p = expf((c[i].logit - mx) / p->temp);
    for (int32_t i = 0; i < k; i++) c[i].p /= sum;
    if (p->top_p < 1.0f) {
        float acc = 0;
        for (int32_t i = 0; i < k; i++) {
            acc += c[i].p;
            if (acc >= p->top_p) {
                k = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        int32_t keep = 1;
        while (keep < k && c[keep].p >= p->min_p * c[0].p) keep++;
        k = keep;
    }
    float mass = 0;
    for (int32_t i = 0; i < k; i++) mass += c[i].p;
    *kept = k, *mass_out = mass;
    float r = ref_unit(rng) * mass, acc = 0;
    for (int32_t i = 0; i < k; i++) {
        acc += c[i].p;
        if (r < acc) return c[i].id;
    }
    return c[k - 1].id;
}

/* The reference sampler_sample_hist (penalty off or n_hist 0: sampler_sample); *kept and
 * *mass as ref_draw leaves them (*kept 0 when greedy). */
static int32_t ref_sample(const sample_params *p, uint64_t *rng, const float *logits, int32_t n,
                          const int32_t *hist, int32_t n_hist, ref_cand *c, int32_t *kept,
                          float *mass) {
    *kept = 0;
    for (int32_t i = 0; i < n; i++) c[i] = (ref_cand){i, logits[i], 0};
    if (sample_uses_history(p) && n_hist > 0) {
        int32_t from = p->repeat_last_n < 0 || p->repeat_last_n >= n_hist
                           ? 0 : n_hist - p->repeat_last_n;
        for (int32_t i = from; i < n_hist; i++) {
            int32_t t = hist[i];
            if (t < 0 || t >= n || c[t].p != 0) continue;
            c[t].p = 1;
            c[t].logit = c[t].logit <= 0 ? c[t].logit * p->repeat_penalty
                                         : c[t].logit / p->repeat_penalty;
        }
        for (int32_t i = 0; i < n; i++) c[i].p = 0;
    }
    if (p->temp <= 0) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return best;
    }
    return ref_draw(p, rng, c, n, kept, mass);
}

/* sampler_dist against the reference's distribution for the same logits and history:
 * the same ids in the same order and probabilities p / mass, bitwise (1 when greedy).
 * Returns false on a difference. */
static bool dist_matches(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                         int32_t n_hist, int32_t want, const ref_cand *rc, int32_t kept,
                         float mass, int32_t *ids, float *probs) {
    int32_t k = sampler_dist(s, logits, n, hist, n_hist, ids, probs);
    if (kept == 0) return k == 1 && ids[0] == want && probs[0] == 1.0f;
    if (k != kept) return false;
    for (int32_t i = 0; i < k; i++)
        if (ids[i] != rc[i].id || probs[i] != rc[i].p / mass) return false;
    return true;
}

static uint64_t g_state = 88172645463325252ULL;
static uint32_t rnd(void) { return (uint32_t)(ref_rng_next(&g_state) >> 32); }
static float rnd_unit(void) { return (float)(rnd() >> 8) / 16777216.0f; }

/* Random logits of one of several shapes: smooth, heavy ties (few distinct values),
 * one dominant token, some -inf, a flat row. */
static void fill_logits(float *x, int32_t n, int shape) {
    for (int32_t i = 0; i < n; i++) {
        switch (shape) {
        case 0: x[i] = 10.0f * rnd_unit() - 5.0f; break;
        case 1: x[i] = (float)(rnd() % 7) - 3.0f; break; /* many ties */
        case 2: x[i] = rnd_unit() - (i == (int32_t)(rnd() % (uint32_t)n) ? -20.0f : 0.0f); break;
        case 3: x[i] = rnd() % 5 == 0 ? -INFINITY : 4.0f * rnd_unit(); break;
        default: x[i] = 0.5f; break; /* flat: all ties */
        }
    }
    if (shape == 3) x[rnd() % (uint32_t)n] = 1.0f; /* at least one finite */
}

static void test_against_reference(void) {
    const int32_t sizes[] = {1, 2, 3, 7, 40, 41, 100, 1000, 49152};
    const int32_t ks[] = {0, 1, 2, 5, 40, 99, 100, 1001, -1};
    const float temps[] = {0.0f, 0.3f, 0.8f, 1.0f, 2.5f};
    const float top_ps[] = {1.0f, 0.95f, 0.5f, 0.0f};
    const float min_ps[] = {0.0f, 0.05f, 0.5f};
    int32_t nmax = 49152;
    float *logits = malloc(sizeof(float) * (size_t)nmax);
    ref_cand *rc = malloc(sizeof(ref_cand) * (size_t)nmax);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)nmax);
    float *probs = malloc(sizeof(float) * (size_t)nmax);
    int32_t hist[300];
    int bad_tok = 0, bad_rng = 0, bad_dist = 0, runs = 0;
    for (int it = 0; it < 1500; it++) {
        int32_t n = sizes[rnd() % (sizeof sizes / sizeof *sizes)];
        if (n == 49152 && it % 8) n = 1000 + (int32_t)(rnd() % 3000); /* keep it quick */
        sample_params p = sample_default_params();
        p.top_k = ks[rnd() % (sizeof ks / sizeof *ks)];
        p.temp = temps[rnd() % (sizeof temps / sizeof *temps)];
        p.top_p = top_ps[rnd() % (sizeof top_ps / sizeof *top_ps)];
        p.min_p = min_ps[rnd() % (sizeof min_ps / sizeof *min_ps)];
        p.seed = rnd();
        bool pen = rnd() % 3 == 0;
        p.repeat_penalty = pen ? 1.3f : 1.0f;
        p.repeat_last_n = pen ? (int32_t)(rnd() % 3) * 32 - 1 : 64;
        int32_t n_hist = pen ? (int32_t)(rnd() % 300) : 0;
        for (int32_t i = 0; i < n_hist; i++) hist[i] = (int32_t)(rnd() % (uint32_t)(n + 2)) - 1;
        fill_logits(logits, n, (int)(rnd() % 5));
        sampler s;
        if (sampler_init(&s, &p, n)) {
            T_CHECK(0, "sampler_init failed");
            break;
        }
        uint64_t rng = s.rng;
        for (int draw = 0; draw < 3; draw++) {
            int32_t kept;
            float mass;
            int32_t want = ref_sample(&p, &rng, logits, n, hist, n_hist, rc, &kept, &mass);
            uint64_t before = s.rng;
            if (draw == 0 && !dist_matches(&s, logits, n, hist, n_hist, want, rc, kept, mass, ids, probs))
                bad_dist++;
            if (s.rng != before) bad_rng++; /* sampler_dist draws nothing */
            int32_t got = n_hist ? sampler_sample_hist(&s, logits, n, hist, n_hist)
                                 : sampler_sample(&s, logits, n);
            runs++;
            if (got != want) {
                if (bad_tok++ < 5)
                    fprintf(stderr, "n %d top_k %d temp %g top_p %g min_p %g hist %d: %d, want %d\n",
                            n, p.top_k, p.temp, p.top_p, p.min_p, n_hist, got, want);
            }
            if (s.rng != rng) bad_rng++;
        }
        sampler_free(&s);
    }
    T_CHECK(bad_tok == 0, "%d of %d draws differ from the full-sort reference", bad_tok, runs);
    T_CHECK(bad_rng == 0, "%d of %d draws left a different RNG state", bad_rng, runs);
    T_CHECK(bad_dist == 0, "%d sampler_dist distributions differ from the reference's", bad_dist);
    T_CHECK(runs > 4000, "only %d draws", runs);
    free(logits);
    free(rc);
    free(ids);
    free(probs);
}

/* Ties at the top-k border go to the lower id, as the full sort puts them. */
static void test_ties_at_border(void) {
    float x[10] = {1, 3, 2, 3, 3, 0, 3, 2, 1, 3};
    sample_params p = sample_default_params();
    p.top_k = 3, p.top_p = 1.0f, p.min_p = 0, p.temp = 1e-3f;
    /* five 3s (ids 1 3 4 6 9); top-3 keeps 1, 3, 4. A tiny temperature makes the three
     * equally likely; over many draws exactly those three appear. */
    sampler s;
    T_CHECK(sampler_init(&s, &p, 10) == 0, "init");
    int seen[10] = {0};
    for (int i = 0; i < 300; i++) seen[sampler_sample(&s, x, 10)]++;
    T_CHECK(seen[1] > 0 && seen[3] > 0 && seen[4] > 0, "ids 1 3 4 drawn: %d %d %d", seen[1],
            seen[3], seen[4]);
    T_CHECK(seen[6] == 0 && seen[9] == 0 && seen[0] == 0, "ids beyond the border never drawn");
    sampler_free(&s);
}

static void test_greedy_and_softmax(void) {
    float x[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, -INFINITY};
    T_CHECK(sample_argmax(x, 6) == 1, "argmax takes the first of ties");
    sample_params p = sample_default_params();
    p.temp = 0;
    sampler s;
    T_CHECK(sampler_init(&s, &p, 6) == 0, "init");
    uint64_t r0 = s.rng;
    T_CHECK(sampler_sample(&s, x, 6) == 1, "greedy picks the argmax");
    T_CHECK(s.rng == r0, "greedy draws nothing from the RNG");
    sampler_free(&s);
    float lp[6];
    sample_log_softmax(x, 6, lp);
    double sum = 0;
    for (int i = 0; i < 6; i++) sum += exp((double)lp[i]);
    T_CHECK(fabs(sum - 1.0) < 1e-6, "log softmax sums to 1 (%g)", sum);
    T_CHECK(lp[1] == lp[3] && lp[5] == -INFINITY, "equal logits, equal log-probs; -inf stays");
}

/* sampler_sample_top from a row's best k (ranked as a device's top-k: logit descending,
 * ties to the lower id) against sampler_sample on the whole row: the same token and RNG
 * state, for random rows (ties, -inf, flat), settings and k >= min(top_k, n); -1 and no
 * draw when k is short or a repetition penalty is on. */
static void test_sample_top(void) {
    const int32_t sizes[] = {1, 3, 40, 41, 100, 2000};
    const int32_t ks[] = {1, 2, 5, 40, 64};
    const float temps[] = {0.0f, 0.3f, 0.8f, 2.5f};
    float x[2000], top_x[80];
    int32_t top_id[80];
    ref_cand rc[2000];
    int same = 0, runs = 0, refused = 0, short_rows = 0;
    for (int it = 0; it < 600; it++) {
        const int32_t n = sizes[rnd() % (sizeof sizes / sizeof *sizes)];
        sample_params p = sample_default_params();
        p.top_k = ks[rnd() % (sizeof ks / sizeof *ks)];
        p.temp = temps[rnd() % (sizeof temps / sizeof *temps)];
        p.top_p = rnd() % 2 ? 1.0f : 0.9f;
        p.min_p = rnd() % 2 ? 0.0f : 0.05f;
        p.seed = rnd();
        fill_logits(x, n, (int)(rnd() % 5));
        for (int32_t i = 0; i < n; i++) rc[i] = (ref_cand){i, x[i], 0};
        qsort(rc, (size_t)n, sizeof *rc, ref_cmp);
        const int32_t need = p.top_k < n ? p.top_k : n;
        int32_t k = need + (int32_t)(rnd() % 3);
        k = k < n ? k : n;
        for (int32_t i = 0; i < k; i++) top_id[i] = rc[i].id, top_x[i] = rc[i].logit;
        sampler a, b;
        if (sampler_init(&a, &p, n) || sampler_init(&b, &p, n)) {
            T_CHECK(0, "sampler_init failed");
            return;
        }
        for (int draw = 0; draw < 3; draw++, runs++) {
            const int32_t want = sampler_sample(&a, x, n), got = sampler_sample_top(&b, top_id, top_x, k, n);
            same += want == got && a.rng == b.rng;
        }
        const uint64_t r0 = b.rng;
        if (p.temp > 0 && need > 1) /* (greedy and top-1 need only the best) */
            short_rows++, refused += sampler_sample_top(&b, top_id, top_x, need - 1, n) == -1 && b.rng == r0;
        sampler_free(&a), sampler_free(&b);
    }
    T_CHECK(same == runs, "sampler_sample_top = sampler_sample in %d of %d draws", same, runs);
    T_CHECK(refused == short_rows && short_rows > 100, "too few candidates refused, without a draw, in %d of %d rows",
            refused, short_rows);
    sample_params p = sample_default_params();
    p.repeat_penalty = 1.3f;
    sampler s;
    T_CHECK(sampler_init(&s, &p, 3) == 0, "init");
    const int32_t id[3] = {0, 1, 2};
    const float v[3] = {3, 2, 1};
    T_CHECK(sample_top_need(&p) == 0 && sampler_sample_top(&s, id, v, 3, 3) == -1,
            "a repetition penalty reads the whole row");
    sampler_free(&s);
    p.repeat_penalty = 1, p.top_k = 0;
    T_CHECK(sample_top_need(&p) == 0, "top-k off reads the whole row");
    p.top_k = 40;
    T_CHECK(sample_top_need(&p) == 40, "top-k 40 reads 40");
    p.temp = 0;
    T_CHECK(sample_top_need(&p) == 1, "greedy reads the best");
}

int main(void) {
    test_against_reference();
    test_sample_top();
    test_ties_at_border();
    test_greedy_and_softmax();
    return t_done();
}
