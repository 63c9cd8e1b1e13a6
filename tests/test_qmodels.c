/* test_qmodels.c - our engine against llama.cpp on models llama.cpp itself quantised:
 * tests/golden/qmodels/ holds one small random-weight llama (made by our mkmodel in F32)
 * quantised by llama_model_quantize to Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_M, Q4_K_S,
 * Q5_K_S and Q6_K, and golden.txt with, per file, the type llama.cpp gave each tensor and
 * its greedy decoding of four prompts of random ids (32 tokens, top-5 logits per step);
 * tests/oracle/gen_quant_models.py makes them and documents the format in its header.
 *
 * Per file the test checks that the file is the one the goldens were made from (size and
 * SHA-256), that our loader sees the tensor types llama.cpp wrote, then runs every prompt
 * on the cpu and on the ref backend, feeding llama.cpp's tokens onwards (teacher forcing,
 * so one disagreement does not hide the rest), and requires: our argmax equal to
 * llama.cpp's pick unless llama.cpp rated ours within the tie margin of it; every
 * reported logit within a bound of llama.cpp's, their mean error within another; and the
 * cpu backend's full logit rows near the ref backend's (normalised error): qm_bounds, per
 * folder.
 *
 * Tolerances, from measurement on these goldens (logits span about +-6; the weights are
 * noise, so the top few are close: 83 of the 1152 steps have llama.cpp's top two within
 * 0.05). Both sides multiply the same quantised weights; what differs is how activations
 * are rounded before each quantised matmul: llama.cpp to Q8_0/Q8_1 blocks of 32 with an
 * fp16 scale, or Q8_K blocks of 256 for K-quant weights; our cpu backend to int8 blocks
 * of 32 with a float scale for every type; our ref backend not at all. On a random model
 * that rounding alone moves logits by a few hundredths. Measured over the nine files:
 * cpu |dlogit| max 0.136, mean per file 0.016-0.034; ref max 0.131, mean 0.019-0.028 (a
 * numpy float forward pass on gguf-py's dequantised weights gives the ref's numbers to
 * four decimals; with llama.cpp's Q8_0 rounding added it matches the Q8_0 file to a
 * mean of 0.0002, so the noise is the rounding); cpu vs ref normalised error <= 0.021;
 * every greedy pick that differed was a near tie, llama.cpp's logits for the two within
 * 0.116. For scale, reading the Q6_K file instead of the Q8_0 one (6-bit rounding of
 * every weight) moves logits by 0.057 on average and 0.23 at most, and Q4_0 instead of
 * Q8_0 by 0.23 and 0.88; a wrong scale, nibble or high bit anywhere does more. Hence the
 * bounds below, under 2x the measurement (the tie margin: two logits each off by up to
 * tol_max / 2 can swap): QM_QUANT. */
#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "forest/sample.h"
#include "session/sha256.h"
#include "t.h"
#include "t_golden.h"

/* Each folder holds a golden.txt and the files it names (at least n_models); the second
 * one the other architectures (qwen2 and qwen3 in Q8_0 and Q4_K_M, gemma3 with a sliding
 * window in Q8_0; linear RoPE scaling on qwen2 and gemma3), from gen_quant_models.py
 * --set arch; the third a Gemma 4 with every feature this build runs, in F32, from
 * gen_gemma4_models.sh; then a Qwen3-MoE (8 experts, 3 a token, weights renormalised)
 * and a Qwen2-MoE (the same plus a gated shared expert, weights as routed) in F32, from
 * gen_gemma4_models.sh qwen3moe and qwen2moe; a gpt-oss (sinks, biases, clamped SwiGLU,
 * a window of 8 on every other layer) likewise; and a Qwen3.5 (Gated DeltaNet and gated
 * attention layers) in F32, from gen_qwen35_models.sh, and a Qwen3.5-MoE (those layers with
 * 8 experts, 3 a token, renormalised, and a gated shared expert) from its qwen35moe; a
 * one-layer gpt-oss as its files are stored (MXFP4 experts, Q8_0 matrices) by
 * gen_gemma4_models.sh gpt-oss-mxfp4, within QM_QUANT (measured max 0.086, mean 0.018, cpu
 * vs ref 0.019; with two layers the second layer's router meets near ties (gaps of 1e-4)
 * that rounded activations flip, and single logits move by 2); then the qmodels llama in Q2_K,
 * Q3_K, IQ4_NL, IQ4_XS and MXFP4 as our mkmodel writes them, and in llama.cpp's Q2_K,
 * Q3_K_M, IQ4_NL and IQ4_XS mixes, from gen_qtype_models.sh. Measured there: max 0.135,
 * mean <= 0.035, flips <= 0.144, cpu vs ref <= 0.020: inside QM_QUANT. */
typedef struct qm_bounds {
    float tol_max;  /* any |logit - llama.cpp| */
    float tol_mean; /* mean |logit - llama.cpp| per file and backend */
    float tie;      /* near-tie margin */
    double cpu_ref; /* cpu vs ref, max |d| / max |ref| per row */
} qm_bounds;

/* The quantised files' bounds: measured <= 0.136, mean <= 0.034, flips <= 0.116, cpu vs
 * ref <= 0.021 (see the top). */
#define QM_QUANT {0.25f, 0.05f, 0.2f, 0.04}
/* F32 (Gemma 4): no rounding of activations on either side; measured max 0.0027, mean
 * 0.0005, one flip at 0.0008, cpu vs ref 0.00000. Switching off any one Gemma 4 feature
 * (soft-capping, the V norm, per-layer embeddings, shared KV, plain local rotary, the
 * layer output scale) moves logits by 0.1 or more. Qwen3.5: measured max and mean under
 * 0.00005, no flip; without the attention's output gate max 4.0, without the conv window
 * 10.6, without q's 1 / sqrt(d_state) 6.6, value heads reading key head h / 2 instead of
 * h % 2 10.2, without the dt bias 1.5. Qwen3.5-MoE: max and mean under 0.00005, no flip;
 * the top-k weights not renormalised max 1.24 (108 of 128 ids), the shared expert's sigmoid
 * gate left out max 6.94 (38 of 128 ids). */
#define QM_F32 {0.01f, 0.002f, 0.01f, 0.001}

static const struct {
    const char *dir;
    int32_t n_models;
    qm_bounds b;
} qm_dirs[] = {{"tests/golden/qmodels/", 9, QM_QUANT}, {"tests/golden/archmodels/", 5, QM_QUANT},
               {"tests/golden/gemma4models/", 1, QM_F32}, {"tests/golden/qwen3moe/", 1, QM_F32},
               {"tests/golden/qwen2moe/", 1, QM_F32}, {"tests/golden/gptoss/", 1, QM_F32},
               {"tests/golden/qwen35models/", 1, QM_F32}, {"tests/golden/qwen35moe/", 1, QM_F32},
               {"tests/golden/gptoss-mxfp4/", 1, QM_QUANT},
               {"tests/golden/qtypemodels/", 9, QM_QUANT}};
#define QM_TOP_K T_GOLDEN_TOP_K

typedef t_golden_step qm_step;

typedef struct qm_case {
    char name[16];
    int32_t n_prompt, n_gen;
    int32_t *prompt;    /* (n_prompt) */
    int32_t *gen;       /* (n_gen) llama.cpp's greedy tokens */
    qm_step *steps;     /* (n_gen) step i: the logits gen[i] was picked from */
} qm_case;

typedef struct qm_tensor {
    char name[64], type[16];
} qm_tensor;

typedef struct qm_model {
    char type[16], file[64], sha[65];
    long bytes;
    qm_tensor *tensors; /* (n_tensors) */
    qm_case *cases;     /* (n_cases) */
    int32_t n_tensors, n_cases;
} qm_model;

typedef struct qm_golden {
    qm_model *models;
    int32_t n_models;
} qm_golden;

/* Grows *v (elements of size sz, *cap of them) to hold n + 1; returns the new slot. */
static void *qm_push(void **v, int32_t *n, int32_t *cap, size_t sz) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *v = realloc(*v, sz * (size_t)*cap);
    }
    char *slot = (char *)*v + sz * (size_t)(*n)++;
    memset(slot, 0, sz);
    return slot;
}



static void qm_golden_free(qm_golden *g) {
    for (int32_t i = 0; i < g->n_models; i++) {
        qm_model *m = &g->models[i];
        for (int32_t j = 0; j < m->n_cases; j++) {
            free(m->cases[j].prompt);
            free(m->cases[j].gen);
            free(m->cases[j].steps);
        }
        free(m->cases);
        free(m->tensors);
    }
    free(g->models);
}

/* The reader's state: the golden being filled, the model and the case being read. */
typedef struct qm_reader {
    qm_golden *g;
    int32_t cap_models, cap_tensors, cap_cases;
    qm_model *m;
    qm_case *c;
} qm_reader;

static bool qm_line(void *ud, const char *s) {
    qm_reader *r = ud;
    qm_model *m = r->m;
    if (strncmp(s, "model ", 6) == 0 && !r->c) {
        r->m = m = qm_push((void **)&r->g->models, &r->g->n_models, &r->cap_models, sizeof *m);
        r->cap_tensors = r->cap_cases = 0;
        return sscanf(s, "model %15s %63s %ld %64s", m->type, m->file, &m->bytes, m->sha) == 4;
    }
    if (strncmp(s, "tensor ", 7) == 0 && m && !r->c && !m->n_cases) {
        qm_tensor *t = qm_push((void **)&m->tensors, &m->n_tensors, &r->cap_tensors, sizeof *t);
        return sscanf(s, "tensor %63s %15s", t->name, t->type) == 2;
    }
    if (strncmp(s, "case ", 5) == 0 && m && !r->c) {
        r->c = qm_push((void **)&m->cases, &m->n_cases, &r->cap_cases, sizeof *r->c);
        return sscanf(s, "case %15s", r->c->name) == 1;
    }
    if (!r->c) return false;
    qm_case *c = r->c;
    int k = t_golden_case_line(s, &c->prompt, &c->n_prompt, &c->gen, &c->n_gen, &c->steps);
    if (k == 2) r->c = NULL;
    return k > 0;
}

static bool qm_done(void *ud) { return ((qm_reader *)ud)->c == NULL; }

/* Reads the golden file into g (freed with qm_golden_free, also on failure). Returns
 * false, after printing the offending line, when the file is missing or malformed. */
static bool qm_golden_read(const char *path, qm_golden *g) {
    memset(g, 0, sizeof *g);
    qm_reader r = {.g = g};
    return t_golden_lines(path, qm_line, qm_done, &r);
}

/* Whether the file at path has the given size and SHA-256 (hex). */
static bool qm_file_is(const char *path, long bytes, const char *sha) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char *buf = malloc((size_t)bytes + 1);
    size_t got = fread(buf, 1, (size_t)bytes + 1, f);
    fclose(f);
    uint8_t d[SHA256_DIGEST_LEN];
    char hex[2 * SHA256_DIGEST_LEN + 1];
    sha256(buf, got, d);
    sha256_hex(d, hex);
    free(buf);
    return got == (size_t)bytes && strcmp(hex, sha) == 0;
}

/* How far below its own pick llama.cpp rated token t at this step; INFINITY when t is
 * not in its top QM_TOP_K. */
static float qm_gap(const qm_step *st, int32_t t) {
    for (int k = 0; k < QM_TOP_K; k++)
        if (st->id[k] == t) return st->logit[0] - st->logit[k];
    return INFINITY;
}

/* What one backend did on one file, summed over its cases. */
typedef struct qm_stats {
    int32_t n_same, n_ties, n_steps;
    float max_gap;      /* the widest near tie taken */
    double sum_err, max_err;
    long n_err;
} qm_stats;

/* Runs case c on ctx, teacher-forced with llama.cpp's tokens, writing the logits of
 * every step to rows (n_gen, n_vocab), checking the picks and adding to *s. */
static void qm_run_case(model_ctx *ctx, int32_t nv, const char *tag, const qm_case *c,
                        const qm_bounds *b, float *rows, qm_stats *s) {
    bool ids_ok = true;
    for (int32_t i = 0; i < c->n_prompt; i++) ids_ok = ids_ok && c->prompt[i] < nv;
    for (int32_t i = 0; i < c->n_gen; i++)
        for (int k = 0; k < QM_TOP_K; k++) ids_ok = ids_ok && c->steps[i].id[k] < nv;
    T_CHECK(ids_ok, "%s/%s: a golden token id is >= n_vocab %d", tag, c->name, nv);
    if (!ids_ok) return;

    st_err err = {0};
    st_code rc = model_forward_linear(ctx, c->prompt, c->n_prompt, 0, rows, &err);
    int32_t first_diff = -1;
    for (int32_t i = 0; rc == ST_OK && i < c->n_gen; i++) {
        const float *lg = rows + (size_t)i * (size_t)nv;
        const qm_step *st = &c->steps[i];
        int32_t ours = sample_argmax(lg, nv);
        float gap = qm_gap(st, ours);
        if (ours == c->gen[i]) {
            s->n_same++;
        } else if (gap <= b->tie) {
            s->n_ties++;
            if (gap > s->max_gap) s->max_gap = gap;
        } else if (first_diff < 0) {
            first_diff = i;
            fprintf(stderr, "%s/%s step %d: we pick %d (our logit %.4f), llama.cpp %d (its "
                    "logit %.4f, ours %.4f)\n", tag, c->name, i, ours, lg[ours], c->gen[i],
                    st->logit[0], lg[c->gen[i]]);
        }
        s->n_steps++;
        for (int k = 0; k < QM_TOP_K; k++) {
            double d = fabs((double)lg[st->id[k]] - st->logit[k]);
            if (d != d) d = INFINITY;
            s->sum_err += d;
            s->n_err++;
            if (d > s->max_err) s->max_err = d;
        }
        if (i + 1 < c->n_gen)
            rc = model_forward_linear(ctx, &c->gen[i], 1, c->n_prompt + i,
                                      rows + (size_t)(i + 1) * (size_t)nv, &err);
    }
    T_CHECK(rc == ST_OK, "%s/%s: forward pass failed: %s", tag, c->name, err.msg);
    T_CHECK(first_diff < 0, "%s/%s: greedy ids differ from llama.cpp's beyond a near tie "
            "from step %d", tag, c->name, first_diff);
}

/* Runs every case of gm on backend be, keeping all logit rows in out (per case, n_gen
 * rows of n_vocab, cases one after another), and checks them against llama.cpp. */
static void qm_run_backend(const model *m, const qm_model *gm, const qm_bounds *b,
                           const char *be, int32_t n_slots, float *out) {
    char tag[48];
    snprintf(tag, sizeof tag, "%s %s", gm->type, be);
    st_err err = {0};
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = n_slots;
    cp.backend = be;
    model_ctx *ctx = model_ctx_init(m, &cp, &err);
    T_CHECK(ctx != NULL, "%s: model_ctx_init: %s", tag, err.msg);
    if (!ctx) return;
    qm_stats s = {0};
    int32_t nv = m->hp.n_vocab;
    for (int32_t i = 0; i < gm->n_cases; i++) {
        qm_run_case(ctx, nv, tag, &gm->cases[i], b, out, &s);
        out += (size_t)gm->cases[i].n_gen * (size_t)nv;
    }
    double mean = s.n_err ? s.sum_err / (double)s.n_err : INFINITY;
    T_CHECK(s.n_err > 0 && s.max_err <= b->tol_max, "%s: max |logit - llama.cpp| is %.4f, "
            "more than %.3f", tag, s.max_err, b->tol_max);
    T_CHECK(mean <= b->tol_mean, "%s: mean |logit - llama.cpp| is %.4f, more than %.3f", tag,
            mean, b->tol_mean);
    fprintf(stderr, "%-11s %3d/%d ids identical, %d near ties (<= %.4f), |dlogit| max %.4f "
            "mean %.4f\n", tag, s.n_same, s.n_steps, s.n_ties, s.max_gap, s.max_err, mean);
    model_ctx_free(ctx);
}

/* Everything for one quantised file. */
static void qm_check_model(const char *dir, const qm_model *gm, const qm_bounds *b) {
    char path[256];
    snprintf(path, sizeof path, "%s%s", dir, gm->file);
    T_CHECK(qm_file_is(path, gm->bytes, gm->sha), "%s is missing or not the file the goldens "
            "were made from (%ld bytes, sha256 %s)", path, gm->bytes, gm->sha);
    st_err err = {0};
    model *m = model_load(path, &err);
    T_CHECK(m != NULL, "model_load(%s): %s", path, err.msg);
    if (!m) return;
    int32_t n_bad = 0;
    for (int32_t i = 0; i < gm->n_tensors; i++) {
        const gguf_tensor *t = gguf_find_tensor(m->gguf, gm->tensors[i].name);
        if (!t || t->type != (uint32_t)dtype_from_name(gm->tensors[i].type)) {
            if (!n_bad++)
                fprintf(stderr, "%s: tensor %s is %s, llama.cpp wrote %s\n", path,
                        gm->tensors[i].name, t ? dtype_name(t->type) : "absent",
                        gm->tensors[i].type);
        }
    }
    T_CHECK(gm->n_tensors > 0 && n_bad == 0, "%s: %d of %d tensor types differ from the "
            "goldens", path, n_bad, gm->n_tensors);

    int32_t nv = m->hp.n_vocab, need = 1;
    size_t n_rows = 0;
    for (int32_t i = 0; i < gm->n_cases; i++) {
        const qm_case *c = &gm->cases[i];
        if (c->n_prompt + c->n_gen > need) need = c->n_prompt + c->n_gen;
        n_rows += (size_t)c->n_gen;
    }
    float *cpu = calloc(n_rows * (size_t)nv, sizeof(float));
    float *ref = calloc(n_rows * (size_t)nv, sizeof(float));
    qm_run_backend(m, gm, b, "cpu", need, cpu);
    qm_run_backend(m, gm, b, "ref", need, ref);
    double worst = 0;
    for (size_t r = 0; r < n_rows; r++) {
        double e = t_nerr(cpu + r * (size_t)nv, ref + r * (size_t)nv, nv);
        if (e > worst || e != e) worst = e;
    }
    T_CHECK(n_rows > 0 && worst <= b->cpu_ref, "%s: cpu and ref logits differ by %.5f "
            "(normalised), more than %.3f", gm->type, worst, b->cpu_ref);
    fprintf(stderr, "%-11s cpu vs ref: normalised max |d| %.5f over %zu rows\n", gm->type,
            worst, n_rows);
    free(cpu);
    free(ref);
    model_free(m);
}

/* Every model of one golden folder. */
static void qm_check_dir(const char *dir, int32_t n_models, const qm_bounds *b) {
    char golden[256];
    snprintf(golden, sizeof golden, "%sgolden.txt", dir);
    qm_golden g;
    bool parsed = qm_golden_read(golden, &g);
    T_CHECK(parsed, "%s could not be read", golden);
    T_CHECK(g.n_models >= n_models, "%s has %d models, expected >= %d", golden, g.n_models,
            n_models);
    if (parsed)
        for (int32_t i = 0; i < g.n_models; i++) {
            T_CHECK(g.models[i].n_cases >= 4, "%s: %s has %d cases, expected >= 4", golden,
                    g.models[i].type, g.models[i].n_cases);
            qm_check_model(dir, &g.models[i], b);
        }
    qm_golden_free(&g);
}

int main(void) {
    for (size_t i = 0; i < sizeof qm_dirs / sizeof qm_dirs[0]; i++)
        qm_check_dir(qm_dirs[i].dir, qm_dirs[i].n_models, &qm_dirs[i].b);
    return t_done();
}
