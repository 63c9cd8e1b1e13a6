/* sample.c - greedy, temperature, top-k, top-p and min-p sampling with a per-sampler
 * xorshift64* RNG, so that a given seed reproduces a branch exactly, and llama.cpp's
 * repetition penalty over a token history.
 *
 * Candidates are ranked by logit, highest first, ties by lower id (cmp_desc). With top-k
 * on, only the k best are ever ranked: one pass over the vocabulary keeps them in a
 * bounded min-heap (O(n log k), and nearly O(n) since most logits lose against the heap's
 * worst at once), then those k are sorted. Ranking is a total order, so this gives the
 * same k candidates in the same order as sorting the whole vocabulary would, and hence
 * the same draws. */
#include "forest/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/vec.h"

typedef struct sample_cand {
    int32_t id;
    float logit;
    float p;
} sample_cand;

sample_params sample_default_params(void) {
    return (sample_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 1,
                           .repeat_penalty = 1.0f, .repeat_last_n = 64};
}

#define SAMPLE_MAX_TOP_K (1 << 30)

st_code sample_param_set(sample_params *p, const char *name, double v, st_err *err) {
    const char *want = NULL; /* what the value should be, when it is not */
    bool whole = v == floor(v);
    if (!strcmp(name, "temp")) {
        if (v >= 0 && isfinite((float)v)) p->temp = (float)v; /* finite as the float kept */
        else want = "a finite number, 0 or more";
    } else if (!strcmp(name, "top_k")) {
        if (v >= 0 && v <= SAMPLE_MAX_TOP_K && whole) p->top_k = (int32_t)v;
        else want = "an integer from 0 to 1073741824";
    } else if (!strcmp(name, "top_p")) {
        if (v > 0 && v <= 1) p->top_p = (float)v;
        else want = "0 < P <= 1";
    } else if (!strcmp(name, "min_p")) {
        if (v >= 0 && v < 1) p->min_p = (float)v;
        else want = "0 <= P < 1";
    } else if (!strcmp(name, "seed")) {
        if (v >= 0 && v < 0x1p64 && whole) p->seed = (uint64_t)v;
        else want = "an integer from 0 to 18446744073709551615";
    } else {
        return st_set(err, ST_ERR_NOT_FOUND, "'%s' is not a sampler setting", name);
    }
    if (want) return st_set(err, ST_ERR_ARG, "'%s' is %.10g, want %s", name, v, want);
    return ST_OK;
}

uint64_t sample_next_seed(uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z ? z : 1;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, 1). */
static float rng_unit(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }

int sampler_init(sampler *s, const sample_params *p, int32_t n_vocab) {
    s->p = *p;
    /* splitmix the seed so that nearby seeds give unrelated streams; never zero */
    uint64_t z = p->seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    s->rng = (z ^ (z >> 31)) | 1;
    s->n_cand = n_vocab;
    s->cand = malloc(sizeof(sample_cand) * (size_t)(n_vocab > 0 ? n_vocab : 1));
    return s->cand ? 0 : -1;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->cand);
    s->cand = NULL;
}

int32_t sample_argmax(const float *logits, int32_t n) {
    return (int32_t)vec_argmax(logits, n);
}

static int cmp_desc(const void *a, const void *b) {
    float x = ((const sample_cand *)a)->logit, y = ((const sample_cand *)b)->logit;
    if (x != y) return x < y ? 1 : -1;
    return ((const sample_cand *)a)->id - ((const sample_cand *)b)->id;
}

/* a ranks below b (see cmp_desc) */
static inline bool cand_worse(const sample_cand *a, const sample_cand *b) {
    return a->logit < b->logit || (a->logit == b->logit && a->id > b->id);
}

/* Restores the min-heap h[0..k) (worst candidate at the root) below node i. */
static void heap_down(sample_cand *h, int32_t k, int32_t i) {
    sample_cand x = h[i];
    for (;;) {
        int32_t l = 2 * i + 1;
        if (l >= k) break;
        if (l + 1 < k && cand_worse(&h[l + 1], &h[l])) l++;
        if (!cand_worse(&h[l], &x)) break;
        h[i] = h[l];
        i = l;
    }
    h[i] = x;
}

/* Offers candidate x to the heap h[0..k) of the k best so far. Candidates come in
 * increasing id order, so one whose logit only ties the worst loses the tie. */
static inline void heap_offer(sample_cand *h, int32_t k, sample_cand x) {
    if (x.logit > h[0].logit) {
        h[0] = x;
        heap_down(h, k, 0);
    }
}

/* Turns c[0..n) into its k best (k < n), in c[0..k) in no particular order. */
static void select_top(sample_cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
    for (int32_t i = k; i < n; i++) heap_offer(c, k, c[i]);
}

/* The distribution over the k ranked candidates c[0..k), best first, of which top-k
 * already kept at most top_k: temperature, top-p, min-p. Sets c[i].p (unnormalised) and
 * returns how many are kept; *mass gets their total. */
static int32_t ranked_probs(const sample_params *p, sample_cand *c, int32_t k, float *mass) {
    /* softmax with temperature over the k best */
    float mx = c[0].logit, sum = 0;
    for (int32_t i = 0; i < k; i++) sum += c[i].p = expf((c[i].logit - mx) / p->temp);
    for (int32_t i = 0; i < k; i++) c[i].p /= sum;
    /* top-p: the smallest prefix whose mass reaches top_p */
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
    /* min-p: drop candidates below min_p times the best probability */
    if (p->min_p > 0) {
        int32_t keep = 1;
        while (keep < k && c[keep].p >= p->min_p * c[0].p) keep++;
        k = keep;
    }
    float m = 0;
    for (int32_t i = 0; i < k; i++) m += c[i].p;
    *mass = m;
    return k;
}

/* top-k applied to n candidates: how many are kept */
static int32_t kept_of(const sample_params *p, int32_t n) {
    return p->top_k > 0 && p->top_k < n ? p->top_k : n;
}

/* Fills c[0..k) with the k (< n) best of logits[0..n), in no particular order, straight
 * from the logits: select_top without filling all n candidates first. */
static void select_top_logits(sample_cand *c, const float *logits, int32_t n, int32_t k) {
    for (int32_t i = 0; i < k; i++) c[i] = (sample_cand){i, logits[i], 0};
    for (int32_t i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
    /* (most logits lose against the heap's worst: a vector scan finds the next that does
     * not, the same comparison heap_offer makes) */
    for (int32_t i = k; (i += (int32_t)vec_first_above(logits + i, n - i, c[0].logit)) < n; i++)
        heap_offer(c, k, (sample_cand){i, logits[i], 0});
}

bool sample_uses_history(const sample_params *p) {
    return p->repeat_penalty != 1.0f && p->repeat_last_n != 0;
}

/* The candidates c[0..n) with llama.cpp's repetition penalty over the window of
 * hist[0..n_hist) (.p zero again after); returns the first best penalised logit's id. */
static int32_t penalised_cands(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                               int32_t n_hist) {
    sample_cand *c = s->cand;
    for (int32_t i = 0; i < n; i++) c[i] = (sample_cand){i, logits[i], 0};
    /* the window: the last repeat_last_n tokens; .p marks a token already penalised, so
     * that a token repeated in the window is penalised once (llama.cpp counts them) */
    int32_t from = s->p.repeat_last_n < 0 || s->p.repeat_last_n >= n_hist
                       ? 0 : n_hist - s->p.repeat_last_n;
    float pen = s->p.repeat_penalty;
    for (int32_t i = from; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= n || c[t].p != 0) continue;
        c[t].p = 1;
        c[t].logit = c[t].logit <= 0 ? c[t].logit * pen : c[t].logit / pen;
    }
    int32_t best = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = 0;
        if (c[i].logit > c[best].logit) best = i;
    }
    return best;
}

/* The distribution a draw takes, shared by every draw and by sampler_dist so that they
 * cannot differ: the repetition penalty (when on and given a history), then top-k,
 * ranking (cmp_desc), temperature, top-p and min-p. Leaves the kept candidates, best
 * first, in s->cand[0..k) with unnormalised probabilities and their total in *mass, and
 * returns k >= 1; returns 0 when greedy, with the token in *best. n is in 1..n_cand. */
static int32_t sampler_rank(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                            int32_t n_hist, int32_t *best, float *mass) {
    sample_cand *c = s->cand;
    const int32_t k = kept_of(&s->p, n);
    if (sample_uses_history(&s->p) && n_hist > 0) {
        *best = penalised_cands(s, logits, n, hist, n_hist);
        if (s->p.temp <= 0) return 0;
        if (k < n) select_top(c, n, k);
    } else if (s->p.temp <= 0) {
        *best = sample_argmax(logits, n);
        return 0;
    } else if (k < n) {
        select_top_logits(c, logits, n, k);
    } else {
        for (int32_t i = 0; i < n; i++) c[i] = (sample_cand){i, logits[i], 0};
    }
    qsort(c, (size_t)k, sizeof *c, cmp_desc);
    return ranked_probs(&s->p, c, k, mass);
}

/* One RNG draw over the k kept candidates s->cand[0..k), of total (unnormalised) mass. */
static int32_t draw(sampler *s, int32_t k, float mass) {
    const sample_cand *c = s->cand;
    float r = rng_unit(&s->rng) * mass, acc = 0;
    for (int32_t i = 0; i < k; i++) {
        acc += c[i].p;
        if (r < acc) return c[i].id;
    }
    return c[k - 1].id;
}

int32_t sampler_sample_hist(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                            int32_t n_hist) {
    if (n <= 0 || n > s->n_cand) return sample_argmax(logits, n);
    int32_t best;
    float mass;
    const int32_t k = sampler_rank(s, logits, n, hist, n_hist, &best, &mass);
    return k == 0 ? best : draw(s, k, mass);
}

int32_t sample_top_need(const sample_params *p) {
    if (sample_uses_history(p)) return 0;
    return p->temp <= 0 ? 1 : p->top_k > 0 ? p->top_k : 0;
}

int32_t sampler_sample_top(sampler *s, const int32_t *ids, const float *x, int32_t k, int32_t n) {
    if (k < 1 || sample_uses_history(&s->p)) return -1;
    if (n <= 0 || n > s->n_cand || s->p.temp <= 0) return ids[0];
    const int32_t kk = kept_of(&s->p, n);
    if (kk > k || !x) return -1;
    sample_cand *c = s->cand;
    for (int32_t i = 0; i < kk; i++) c[i] = (sample_cand){ids[i], x[i], 0};
    /* (ranked already; sorted again all the same, so that the order is sampler_rank's) */
    qsort(c, (size_t)kk, sizeof *c, cmp_desc);
    float mass;
    const int32_t kept = ranked_probs(&s->p, c, kk, &mass);
    return draw(s, kept, mass);
}

int32_t sampler_sample(sampler *s, const float *logits, int32_t n) {
    return sampler_sample_hist(s, logits, n, NULL, 0);
}

int32_t sampler_dist(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                     int32_t n_hist, int32_t *ids, float *probs) {
    if (n <= 0 || n > s->n_cand) return 0;
    int32_t best;
    float mass;
    const int32_t k = sampler_rank(s, logits, n, hist, n_hist, &best, &mass);
    if (k == 0) {
        ids[0] = best, probs[0] = 1;
        return 1;
    }
    for (int32_t i = 0; i < k; i++) ids[i] = s->cand[i].id, probs[i] = s->cand[i].p / mass;
    return k;
}

double sampler_uniform(sampler *s) { return (double)(rng_next(&s->rng) >> 11) * 0x1p-53; }

void sample_log_softmax(const float *logits, int32_t n, float *out) {
    kern_lse l;
    l.log_sum = vec_log_sum_exp(logits, n, &l.mx);
    for (int32_t i = 0; i < n; i++) out[i] = kern_logprob(logits[i], l);
}
