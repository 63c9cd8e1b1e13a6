/* test_spec_sample.c - exact speculative sampling gives the target's distribution.
 *
 * The rule alone: a fixed target p over 8 tokens, drafts drawn from other distributions q
 * (and one-hot drafts, right and wrong), 40000 picks: the picked tokens' counts against p
 * by a chi-square test. Through the driver: a tiny random model, fixed prompts, drafts
 * from an oracle that proposes the likeliest continuation (often right), the second
 * likeliest first token (sometimes right) and a token the target never keeps (always
 * wrong), besides prompt lookup and the pool; each sample is a fresh run with its own
 * seed, and the joint distribution of its first 2 or 3 tokens is compared with the exact
 * one (products of sampler_dist over the prefixes, from linear decoding), and so is plain
 * sampling's (sampler_sample_hist over linear decoding, which ties the exact
 * distribution to what plain sampling does). Cells whose expected count is under 5 are
 * pooled; the bound is the chi-square quantile at p = 0.001 (Wilson-Hilferty). The
 * seeds are fixed, so the outcome is too. A wrong rule fails it by far: accepting every
 * draft, drawing a rejection from p instead of the residual, or not renormalising
 * between siblings (the commit message gives the statistics). MD_SPEC_VERBOSE=1 prints
 * the statistics. */
#include <string.h>

#include "forest/forest.h"
#include "forest/sample.h"
#include "forest/step.h"
#include "spec/spec.h"
#include "spec/spec_sample.h"
#include "t.h"
#include "t_model.h"

/* The chi-square quantile at p = 0.001 for df degrees of freedom (Wilson-Hilferty). */
static double chi2_bound(int32_t df) {
    double d = df < 1 ? 1 : df, z = 3.0902, a = 2.0 / (9.0 * d);
    double c = 1 - a + z * sqrt(a);
    return d * c * c * c;
}

/* Pearson's statistic of counts obs[0..n) (total N) against probabilities p[0..n),
 * pooling cells expected under 5 into one; *df gets the degrees of freedom. */
static double chi2(const int64_t *obs, const double *p, int32_t n, int64_t N, int32_t *df) {
    double x = 0, pool_e = 0, pool_o = 0, psum = 0;
    int32_t cells = 0;
    for (int32_t i = 0; i < n; i++) {
        double e = p[i] * (double)N;
        psum += p[i];
        if (e < 5) {
            pool_e += e, pool_o += (double)obs[i];
            continue;
        }
        x += ((double)obs[i] - e) * ((double)obs[i] - e) / e;
        cells++;
    }
    /* whatever the table misses (mass beyond it) goes with the pool */
    pool_e += (1 - psum) * (double)N;
    if (pool_e >= 5) {
        x += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        cells++;
    } else if (pool_o > 10) {
        x += 1e9; /* counts where nothing is expected */
    }
    *df = cells - 1;
    return x;
}

static bool verbose(void) { return getenv("MD_SPEC_VERBOSE") != NULL; }

/* ---- the rule alone ---- */

static void test_rule(void) {
    enum { V = 8, N = 40000 };
    const double p[V] = {0.30, 0.22, 0.15, 0.12, 0.09, 0.07, 0.05, 0.0};
    const float q1[V] = {0.05f, 0.05f, 0.40f, 0.05f, 0.05f, 0.05f, 0.05f, 0.30f};
    const float q2[V] = {0.60f, 0.10f, 0.05f, 0.05f, 0.05f, 0.05f, 0.05f, 0.05f};
    sample_params sp = sample_default_params();
    sp.seed = 7;
    sampler rng, dr; /* the rule's draws; the drafts' draws from their q */
    sampler_init(&rng, &sp, V);
    sample_params dp = sp;
    dp.seed = 8;
    sampler_init(&dr, &dp, V);
    float pt[V];
    static const char *const names[] = {"drafts from q1, q2", "one-hot drafts 0, 1",
                                        "one-hot drafts 7 (p = 0), 4", "no drafts"};
    for (int mode = 0; mode < 4; mode++) {
        int64_t cnt[V] = {0}, acc = 0;
        for (int32_t it = 0; it < N; it++) {
            for (int32_t j = 0; j < V; j++) pt[j] = (float)p[j];
            int32_t x[2], m = 2, tok;
            const float *q[2] = {q1, q2};
            if (mode == 0) {
                for (int32_t d = 0; d < 2; d++) {
                    double u = sampler_uniform(&dr), a = 0;
                    x[d] = V - 1;
                    for (int32_t j = 0; j < V; j++)
                        if (u < (a += q[d][j])) {
                            x[d] = j;
                            break;
                        }
                }
            } else if (mode == 1) {
                x[0] = 0, x[1] = 1;
            } else if (mode == 2) {
                x[0] = 7, x[1] = 4;
            } else {
                m = 0;
            }
            int32_t i = spec_sample_pick(&rng, pt, V, x, mode == 0 ? q : NULL, m, &tok);
            cnt[tok]++;
            acc += i >= 0;
            T_CHECK(i < 0 || tok == x[i], "the accepted draft's token");
        }
        int32_t df;
        double x2 = chi2(cnt, p, V, N, &df);
        if (verbose()) fprintf(stderr, "rule, %s: chi2 %.1f, df %d, bound %.1f, accepted %.3f\n",
                               names[mode], x2, df, chi2_bound(df), (double)acc / N);
        T_CHECK(x2 < chi2_bound(df), "rule, %s: chi2 %.1f >= %.1f (df %d)", names[mode], x2,
                chi2_bound(df), df);
        T_CHECK(mode == 3 || acc > N / 20, "rule, %s: drafts are accepted (%lld)", names[mode], (long long)acc);
    }
    sampler_free(&dr);
    sampler_free(&rng);
}

/* ---- through the driver ---- */

#define L_MAX 3

/* The exact distribution of the first L tokens: every prefix's sampler_dist, from linear
 * decoding of prompt + prefix; cells are the sequences in a table. */
typedef struct exact {
    int32_t n, cap;
    int32_t (*seq)[L_MAX];
    double *p;
} exact;

static void exact_add(exact *e, const int32_t *seq, int32_t L, double p) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 256;
        e->seq = realloc(e->seq, sizeof *e->seq * (size_t)e->cap);
        e->p = realloc(e->p, sizeof *e->p * (size_t)e->cap);
    }
    memset(e->seq[e->n], 0, sizeof *e->seq);
    memcpy(e->seq[e->n], seq, sizeof(int32_t) * (size_t)L);
    e->p[e->n++] = p;
}

static int32_t exact_find(const exact *e, const int32_t *seq, int32_t L) {
    for (int32_t i = 0; i < e->n; i++)
        if (!memcmp(e->seq[i], seq, sizeof(int32_t) * (size_t)L)) return i;
    return -1;
}

/* The sampling case: prompt, target, how many tokens, the oracle's drafts. */
typedef struct scase {
    const model *m;
    int32_t *toks;      /* (np + L) prompt, then the prefix being expanded */
    int32_t np, L;
    sample_params sp;
    model_ctx *c;
    float *lg;
    sampler smp;
    int32_t *ids;
    float *probs;
    int32_t top[L_MAX]; /* the likeliest continuation (argmax of each dist) */
    int32_t second;     /* the second likeliest first token (or the likeliest) */
    int32_t never;      /* a token the first dist does not keep */
} scase;

/* Logits after toks[0..n) by linear decoding, of which toks[0..from) are in the cache
 * already (slots 0..from-1). */
static bool sc_logits(scase *s, int32_t from, int32_t n) {
    st_err err = {0};
    return model_forward_linear(s->c, s->toks + from, n - from, from, s->lg, &err) == ST_OK;
}

/* Expands every prefix of length d with probability pr into the table. */
static void sc_expand(scase *s, exact *e, int32_t d, double pr) {
    if (d == s->L) {
        exact_add(e, s->toks + s->np, s->L, pr);
        return;
    }
    if (!sc_logits(s, 0, s->np + d)) return;
    int32_t V = s->m->hp.n_vocab;
    int32_t k = sampler_dist(&s->smp, s->lg, V, s->toks, s->np + d, s->ids, s->probs);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)k);
    float *ps = malloc(sizeof(float) * (size_t)k);
    memcpy(ids, s->ids, sizeof(int32_t) * (size_t)k);
    memcpy(ps, s->probs, sizeof(float) * (size_t)k);
    if (d == 0) {
        s->second = ids[k > 1 ? 1 : 0];
        s->never = ids[0];
        for (int32_t t = 0; t < V; t++) {
            bool kept = false;
            for (int32_t i = 0; i < k; i++) kept |= ids[i] == t;
            if (!kept) {
                s->never = t;
                break;
            }
        }
    }
    if (!memcmp(s->toks + s->np, s->top, sizeof(int32_t) * (size_t)d)) s->top[d] = ids[0];
    for (int32_t i = 0; i < k; i++) {
        s->toks[s->np + d] = ids[i];
        sc_expand(s, e, d + 1, pr * ps[i]);
    }
    free(ids);
    free(ps);
}

/* The oracle: the likeliest continuation's remainder while the text follows it, the
 * second likeliest first token (with the likeliest second token after it) and a token
 * never kept, at the first step; later, the likeliest continuation's next token. */
static int32_t sc_draft(void *ud, const int32_t *hist, int32_t n_hist, int32_t *out, int32_t width,
                        int32_t *lens, int32_t max) {
    const scase *s = ud;
    int32_t g = n_hist - s->np, nd = 0;
    if (max < 3 || width < L_MAX) return 0;
    bool on_top = g < s->L;
    for (int32_t i = 0; on_top && i < g; i++) on_top = hist[s->np + i] == s->top[i];
    if (on_top) {
        lens[nd] = s->L - g;
        memcpy(out + nd++ * width, s->top + g, sizeof(int32_t) * (size_t)(s->L - g));
    } else if (g < s->L) {
        lens[nd] = 1;
        out[nd++ * width] = s->top[g];
    }
    if (g == 0) {
        out[nd * width] = s->second, out[nd * width + 1] = s->top[1];
        lens[nd++] = 2;
        out[nd * width] = s->never;
        lens[nd++] = 1;
    }
    return nd;
}

/* One case: n_samples speculative runs and as many plain draws, both against the exact
 * distribution. */
static void sample_case(const model *m, const int32_t *prompt, int32_t np, int32_t L,
                        const sample_params *sp, int32_t n_samples, const char *name) {
    int32_t V = m->hp.n_vocab;
    scase s = {.m = m, .np = np, .L = L, .sp = *sp};
    s.toks = malloc(sizeof(int32_t) * (size_t)(np + L));
    memcpy(s.toks, prompt, sizeof(int32_t) * (size_t)np);
    s.c = t_new_ctx(m, np + L + 1);
    s.lg = malloc(sizeof(float) * (size_t)V);
    s.ids = malloc(sizeof(int32_t) * (size_t)V);
    s.probs = malloc(sizeof(float) * (size_t)V);
    sampler_init(&s.smp, sp, V);
    exact e = {0};
    sc_expand(&s, &e, 0, 1.0);

    /* plain sampling: one sampler drawing token after token over linear decoding */
    int64_t *plain = calloc((size_t)e.n + 1, sizeof(int64_t)), *spec_n = calloc((size_t)e.n + 1, sizeof(int64_t));
    sampler ps;
    sample_params pp = *sp;
    pp.seed = sp->seed + 1000003;
    sampler_init(&ps, &pp, V);
    float *lg0 = malloc(sizeof(float) * (size_t)V);
    sc_logits(&s, 0, np);
    memcpy(lg0, s.lg, sizeof(float) * (size_t)V);
    for (int32_t it = 0; it < n_samples; it++) {
        for (int32_t d = 0; d < L; d++) {
            if (d > 0) sc_logits(&s, np + d - 1, np + d);
            s.toks[np + d] = sampler_sample_hist(&ps, d ? s.lg : lg0, V, s.toks, np + d);
        }
        int32_t i = exact_find(&e, s.toks + np, L);
        plain[i < 0 ? e.n : i]++;
    }
    sampler_free(&ps);
    free(lg0);

    /* speculative sampling: a fresh driver per sample, seeds seed, seed + 1, ... */
    st_err err = {0};
    forest *f = forest_init(np + 64, 0);
    model_ctx *c = t_new_ctx(m, np + 64);
    step_plan p;
    step_plan_init(&p);
    forest_id pre, tip;
    bool ok = forest_add_root(f, prompt, NULL, np - 1, 0, &pre, &err) == ST_OK &&
              step_forest(f, &p, c, &err) == ST_OK;
    spec_params q = spec_default_params();
    q.adaptive = false; /* every draft is tried, however rarely it is accepted */
    q.draft_len = 4;
    int64_t steps = 0, emitted = 0, accepted = 0;
    for (int32_t it = 0; ok && it < n_samples; it++) {
        ok = forest_append(f, pre, &prompt[np - 1], NULL, 1, &tip, &err) == ST_OK;
        q.samp = *sp;
        q.samp.seed = sp->seed + (uint64_t)it;
        spec *d = ok ? spec_init(&q, f, tip, &err) : NULL;
        if (!d) break;
        spec_set_draft_source(d, sc_draft, &s);
        int32_t got[L_MAX + 32], made = 0;
        while (ok && made < L) {
            int32_t k = 0;
            ok = spec_step(d, f, &p, c, got + made, &k, &err) == ST_OK;
            made += k;
        }
        const spec_stats *st = spec_get_stats(d);
        steps += st->steps, emitted += st->emitted, accepted += st->accepted;
        int32_t i = exact_find(&e, got, L);
        spec_n[i < 0 ? e.n : i]++;
        spec_free(d);
        forest_prune(f, tip, NULL);
    }
    T_CHECK(ok, "%s: runs: %s", name, err.msg);
    T_CHECK(forest_check(f, &err) == ST_OK && forest_n_live(f) == np - 1, "%s: the forest is back to the prompt",
            name);
    int32_t df_p, df_s;
    double x_p = chi2(plain, e.p, e.n, n_samples, &df_p), x_s = chi2(spec_n, e.p, e.n, n_samples, &df_s);
    /* a sequence outside the table is impossible: pooled, it gives a huge statistic */
    x_p += plain[e.n] ? 1e9 : 0;
    x_s += spec_n[e.n] ? 1e9 : 0;
    if (verbose())
        fprintf(stderr, "%s: %d sequences; plain chi2 %.1f (df %d), speculative chi2 %.1f (df %d), "
                "bound %.1f / %.1f; %.2f tokens per step, %lld drafts accepted\n", name, e.n, x_p, df_p,
                x_s, df_s, chi2_bound(df_p), chi2_bound(df_s), (double)emitted / (double)(steps ? steps : 1),
                (long long)accepted);
    T_CHECK(x_p < chi2_bound(df_p), "%s: plain sampling against the exact distribution: chi2 %.1f >= %.1f "
            "(df %d)", name, x_p, chi2_bound(df_p), df_p);
    T_CHECK(x_s < chi2_bound(df_s), "%s: speculative sampling against the exact distribution: chi2 %.1f "
            ">= %.1f (df %d)", name, x_s, chi2_bound(df_s), df_s);
    T_CHECK(accepted > n_samples / 4, "%s: drafts are accepted (%lld in %d runs)", name, (long long)accepted,
            n_samples);
    step_plan_free(&p);
    model_ctx_free(c);
    forest_free(f);
    free(plain);
    free(spec_n);
    free(e.seq);
    free(e.p);
    sampler_free(&s.smp);
    free(s.ids);
    free(s.probs);
    free(s.lg);
    model_ctx_free(s.c);
    free(s.toks);
}

/* Plain sampling of n tokens after prompt[0..np): linear decoding, one sampler seeded
 * with sp->seed drawing every token with the history (as grow does). */
static bool plain_sample(const model *m, const int32_t *prompt, int32_t np, int32_t n,
                         const sample_params *sp, int32_t *out) {
    int32_t V = m->hp.n_vocab;
    int32_t *h = malloc(sizeof(int32_t) * (size_t)(np + n));
    float *lg = malloc(sizeof(float) * (size_t)V);
    model_ctx *c = t_new_ctx(m, np + n + 1);
    sampler smp;
    sampler_init(&smp, sp, V);
    memcpy(h, prompt, sizeof(int32_t) * (size_t)np);
    st_err err = {0};
    bool ok = model_forward_linear(c, h, np, 0, lg, &err) == ST_OK;
    for (int32_t i = 0; ok && i < n; i++) {
        h[np + i] = out[i] = sampler_sample_hist(&smp, lg, V, h, np + i);
        if (i + 1 < n) ok = model_forward_linear(c, &h[np + i], 1, np + i, lg, &err) == ST_OK;
    }
    sampler_free(&smp);
    model_ctx_free(c);
    free(lg);
    free(h);
    return ok;
}

/* Drafts that are plain sampling's next tokens (ref[0..n) after np prompt tokens). */
typedef struct oracle {
    const int32_t *ref;
    int32_t np, n;
} oracle;

static int32_t oracle_draft(void *ud, const int32_t *hist, int32_t n_hist, int32_t *out, int32_t width,
                            int32_t *lens, int32_t max) {
    const oracle *o = ud;
    (void)hist;
    int32_t g = n_hist - o->np, k = 0;
    for (; max > 0 && k < 6 && k < width && g + k < o->n; k++) out[k] = o->ref[g + k];
    lens[0] = k;
    return k > 0;
}

/* Token for token: the driver's sampling is plain sampling's draw for draw, whatever the
 * drafts (lookup, pool, lookahead, fixed or adaptive, an oracle's that are always right)
 * and the target's filters; temp 0 is plain greedy. */
static void test_same_as_plain(const model *m, const int32_t *prompt, int32_t np) {
    enum { N = 40 };
    sample_params targets[4];
    targets[0] = sample_default_params(), targets[0].temp = 0.7f, targets[0].seed = 3;
    targets[1] = targets[0], targets[1].temp = 1.0f, targets[1].top_k = 0, targets[1].top_p = 1,
    targets[1].min_p = 0, targets[1].seed = 4;
    targets[2] = targets[0], targets[2].temp = 1.0f, targets[2].repeat_penalty = 1.3f, targets[2].seed = 5;
    targets[3] = targets[0], targets[3].temp = 0;
    for (int t = 0; t < 4; t++)
        for (int set = 0; set < 4; set++) {
            int32_t ref[N], got[N + 32], made = 0;
            if (!plain_sample(m, prompt, np, N, &targets[t], ref)) {
                T_CHECK(0, "plain sampling failed");
                return;
            }
            st_err err = {0};
            forest *f = forest_init(np + N + 64, 0);
            model_ctx *c = t_new_ctx(m, np + N + 64);
            step_plan p;
            step_plan_init(&p);
            forest_id tip;
            forest_add_root(f, prompt, NULL, np, 0, &tip, &err);
            spec_params q = spec_default_params();
            q.samp = targets[t];
            if (set == 1) q.adaptive = false;
            if (set == 2) q.la = (lookahead_params){.w = 3, .n = 3, .g = 2, .seed = 1}, q.la_adaptive = false;
            spec *d = spec_init(&q, f, tip, &err);
            oracle o = {ref, np, N};
            if (d && set == 3) spec_set_draft_source(d, oracle_draft, &o);
            bool inv = true;
            while (d && made < N) {
                int32_t k = 0;
                if (spec_step(d, f, &p, c, got + made, &k, &err)) break;
                made += k;
                inv &= forest_check(f, &err) == ST_OK;
            }
            int32_t diff = -1;
            for (int32_t i = 0; i < N && i < made && diff < 0; i++)
                if (got[i] != ref[i]) diff = i;
            T_CHECK(made >= N && diff < 0 && inv, "target %d, drafts %d: %d tokens, plain sampling's "
                    "(first difference at %d): %s", t, set, made, diff, err.msg);
            if (verbose() && d)
                fprintf(stderr, "target %d, drafts %d: %.2f tokens per step\n", t, set,
                        (double)spec_get_stats(d)->emitted / (double)spec_get_stats(d)->steps);
            spec_free(d);
            step_plan_free(&p);
            model_ctx_free(c);
            forest_free(f);
        }
}

int main(void) {
    test_rule();
    mkmodel_params mp = mkmodel_default_params();
    st_err err = {0};
    model *m = t_random_model(&mp, &err);
    T_CHECK(m != NULL, "random model: %s", err.msg);
    if (m) {
        /* repeats, so that prompt lookup and the pool draft too */
        const int32_t p1[] = {1, 300, 301, 302, 300, 301, 302, 300, 301};
        const int32_t p2[] = {1, 77, 140, 263, 390, 77, 140};
        sample_params a = sample_default_params();
        a.temp = 1.0f, a.top_k = 6, a.top_p = 1.0f, a.min_p = 0, a.seed = 11;
        sample_case(m, p1, 9, 3, &a, 4000, "temp 1, top-k 6, 3 tokens");
        sample_params b = sample_default_params(); /* top-k 40, top-p 0.95, min-p 0.05 */
        b.temp = 0.7f, b.seed = 21;
        sample_case(m, p2, 7, 2, &b, 4000, "temp 0.7, the default filters, 2 tokens");
        sample_params r = b;
        r.temp = 1.0f, r.repeat_penalty = 1.5f, r.seed = 31;
        sample_case(m, p1, 9, 2, &r, 3000, "temp 1, repetition penalty 1.5, 2 tokens");
        test_same_as_plain(m, p1, 9);
        model_free(m);
    }
    return t_done();
}
