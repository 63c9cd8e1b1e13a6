/* sample.c - greedy, temperature, top-k, top-p and min-p sampling with a per-sampler
 * xorshift64* RNG, so that a given seed reproduces a branch exactly, and llama.cpp's
 * repetition penalty over a token history. */
#include "sample.h"

#include <math.h>
#include <stdlib.h>

typedef struct sample_cand {
    int32_t id;
    float logit;
    float p;
} sample_cand;

sample_params sample_default_params(void) {
    return (sample_params){.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 1,
                           .repeat_penalty = 1.0f, .repeat_last_n = 64};
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
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

static int cmp_desc(const void *a, const void *b) {
    float x = ((const sample_cand *)a)->logit, y = ((const sample_cand *)b)->logit;
    if (x != y) return x < y ? 1 : -1;
    return ((const sample_cand *)a)->id - ((const sample_cand *)b)->id;
}

/* The draw over candidates c[0..n) holding (id, logit): sorts them, then top-k,
 * temperature, top-p, min-p and one RNG draw. */
static int32_t sample_from_cands(sampler *s, sample_cand *c, int32_t n) {
    const sample_params *p = &s->p;
    qsort(c, (size_t)n, sizeof *c, cmp_desc);
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
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
    float mass = 0;
    for (int32_t i = 0; i < k; i++) mass += c[i].p;
    float r = rng_unit(&s->rng) * mass, acc = 0;
    for (int32_t i = 0; i < k; i++) {
        acc += c[i].p;
        if (r < acc) return c[i].id;
    }
    return c[k - 1].id;
}

int32_t sampler_sample(sampler *s, const float *logits, int32_t n) {
    if (s->p.temp <= 0 || n > s->n_cand) return sample_argmax(logits, n);
    sample_cand *c = s->cand;
    for (int32_t i = 0; i < n; i++) c[i] = (sample_cand){i, logits[i], 0};
    return sample_from_cands(s, c, n);
}

bool sample_uses_history(const sample_params *p) {
    return p->repeat_penalty != 1.0f && p->repeat_last_n != 0;
}

int32_t sampler_sample_hist(sampler *s, const float *logits, int32_t n, const int32_t *hist,
                            int32_t n_hist) {
    if (!sample_uses_history(&s->p) || n_hist <= 0 || n > s->n_cand)
        return sampler_sample(s, logits, n);
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
    if (s->p.temp <= 0) { /* greedy over the penalised logits; first index on ties */
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (c[i].logit > c[best].logit) best = i;
        return best;
    }
    for (int32_t i = 0; i < n; i++) c[i].p = 0;
    return sample_from_cands(s, c, n);
}

void sample_log_softmax(const float *logits, int32_t n, float *out) {
    float mx = logits[0];
    for (int32_t i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)(logits[i] - mx));
    double lse = log(sum);
    for (int32_t i = 0; i < n; i++) out[i] = (float)((double)(logits[i] - mx) - lse);
}
