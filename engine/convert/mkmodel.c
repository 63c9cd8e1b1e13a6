/* mkmodel.c - random-weight GGUF generator of the llama family (see mkmodel.h).
 *
 * Sections: parameters (presets, checks, counts); the synthetic vocabulary; weights
 * (one splitmix64 stream per tensor, so a tensor's values do not depend on the order or
 * presence of the others, drawn as center + spread * U(-1, 1) row by row and converted
 * to the weight type with dtype_quantize_row); and the write. */
#include "convert/mkmodel.h"
#include "convert/mkmodel_impl.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/dtype.h"
#include "gguf/gguf.h"

/* ---- parameters ---- */

mkmodel_params mkmodel_default_params(void) {
    mkmodel_params p;
    st_code rc = mkmodel_preset("tiny", &p);
    ASSERT(rc == ST_OK);
    return p;
}

st_code mkmodel_preset(const char *name, mkmodel_params *p) {
    /* vocab, embd, layers, heads, kv heads, ff, ctx, tied, wtype */
    static const struct {
        const char *name;
        int32_t v, e, l, h, kv, ff, ctx;
        bool tied;
        uint32_t wtype;
    } presets[] = {
        {"tiny", 512, 64, 2, 4, 2, 192, 512, false, DT_F32},
        {"25m", 32000, 384, 8, 6, 6, 1024, 1024, true, DT_F32},
        {"110m", 32000, 768, 12, 12, 12, 2048, 1024, true, DT_F32},
        {"1b", 32000, 2048, 22, 32, 4, 5632, 2048, false, DT_F16},
    };
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(name, presets[i].name) != 0) continue;
        *p = (mkmodel_params){
            .n_vocab = presets[i].v, .n_embd = presets[i].e, .n_layer = presets[i].l,
            .n_head = presets[i].h, .n_head_kv = presets[i].kv, .head_dim = 0,
            .n_ff = presets[i].ff, .n_ctx = presets[i].ctx, .rope_base = 10000.0f,
            .tied = presets[i].tied, .wtype = presets[i].wtype, .seed = 1};
        return ST_OK;
    }
    return ST_ERR_ARG;
}

int32_t mk_head_dim(const mkmodel_params *p) {
    return p->head_dim ? p->head_dim : p->n_embd / p->n_head;
}

/* The architectures and the tensors each adds to a llama layer. */
typedef struct mk_arch {
    const char *name;
    bool bias, qk_norm, post_norms;
} mk_arch;

static const mk_arch mk_archs[] = {
    {"llama", false, false, false},
    {"qwen2", true, false, false},
    {"qwen3", false, true, false},
    {"gemma3", false, true, true},
    {"gemma4", false, true, true}, /* its layers: mkmodel_gemma4.c */
    {"qwen3moe", false, true, false}, /* its feed-forwards: mkmodel_moe.c */
    {"qwen2moe", true, false, false},  /* likewise, with a shared expert */
    {"gpt-oss", true, false, false},   /* likewise, with sinks and biases */
    {"qwen35", false, true, false}, /* its layers: mkmodel_qwen35.c */
    {"qwen35moe", false, true, false}, /* likewise, with mkmodel_moe.c's experts */
};

static const mk_arch *mk_arch_of(const mkmodel_params *p) {
    const char *name = p->arch ? p->arch : "llama";
    for (size_t i = 0; i < sizeof mk_archs / sizeof mk_archs[0]; i++)
        if (strcmp(mk_archs[i].name, name) == 0) return &mk_archs[i];
    return NULL;
}

st_code mkmodel_check(const mkmodel_params *p, st_err *err) {
    st_code rc;
    if (!mk_arch_of(p))
        return st_set(err, ST_ERR_ARG, "mkmodel: architecture '%s' is not one of llama, qwen2, "
                      "qwen3, gemma3, gemma4, qwen35, qwen35moe, qwen3moe, qwen2moe, gpt-oss", p->arch);
    if (p->n_swa < 0)
        return st_set(err, ST_ERR_ARG, "mkmodel: n_swa %" PRId32 " is negative", p->n_swa);
    const struct { const char *name; int32_t v, lo, hi; } r[] = {
        {"n_vocab", p->n_vocab, MKMODEL_MIN_VOCAB, MKMODEL_MAX_VOCAB},
        {"n_embd", p->n_embd, 1, 1 << 16},
        {"n_layer", p->n_layer, 1, 1024},
        {"n_head", p->n_head, 1, 1024},
        {"n_head_kv", p->n_head_kv, 1, 1024},
        {"head_dim", p->head_dim, 0, 1 << 12},
        {"n_ff", p->n_ff, 1, 1 << 18},
        {"n_ctx", p->n_ctx, 1, 1 << 24},
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
        if (r[i].v < r[i].lo || r[i].v > r[i].hi)
            return st_set(err, ST_ERR_ARG, "mkmodel: %s = %" PRId32 " is outside %" PRId32
                          "..%" PRId32, r[i].name, r[i].v, r[i].lo, r[i].hi);
    if (p->n_head % p->n_head_kv != 0)
        return st_set(err, ST_ERR_ARG, "mkmodel: n_head %" PRId32 " is not a multiple of "
                      "n_head_kv %" PRId32, p->n_head, p->n_head_kv);
    if (p->head_dim == 0 && p->n_embd % p->n_head != 0)
        return st_set(err, ST_ERR_ARG, "mkmodel: n_embd %" PRId32 " is not a multiple of "
                      "n_head %" PRId32 " (set head_dim)", p->n_embd, p->n_head);
    int32_t hd = mk_head_dim(p);
    if (hd % 2 != 0)
        return st_set(err, ST_ERR_ARG, "mkmodel: head_dim %" PRId32 " is odd, but RoPE "
                      "rotates pairs", hd);
    if (!(p->rope_scale >= 0 && p->rope_scale <= 1e6) || !(p->yarn >= 0 && p->yarn <= 1e6))
        return st_set(err, ST_ERR_ARG, "mkmodel: rope scale %g is out of range",
                      (double)p->rope_scale);
    if (!(p->rope_base > 0 && isfinite(p->rope_base)))
        return st_set(err, ST_ERR_ARG, "mkmodel: rope_base %g must be positive",
                      (double)p->rope_base);
    static const uint32_t wtypes[] = {DT_F32,  DT_F16,  DT_BF16,   DT_Q8_0,   DT_Q4_0,
                                      DT_Q4_1, DT_Q5_0, DT_Q5_1,   DT_Q2_K,   DT_Q3_K,
                                      DT_Q4_K, DT_Q5_K, DT_Q6_K,   DT_IQ4_NL, DT_IQ4_XS,
                                      DT_MXFP4};
    bool wtype_ok = false;
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++) wtype_ok |= p->wtype == wtypes[i];
    if (!wtype_ok)
        return st_set(err, ST_ERR_ARG, "mkmodel: weight type %s is not one of F32, F16, "
                      "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
                      "IQ4_NL, IQ4_XS, MXFP4", dtype_name(p->wtype));
    /* Every 2-D weight's rows are n_embd, n_head * head_dim or n_ff long. */
    const struct { const char *name; int32_t n; } rows[] = {
        {"n_embd", p->n_embd}, {"n_head * head_dim", p->n_head * hd}, {"n_ff", p->n_ff}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!dtype_row_ok(p->wtype, rows[i].n))
            return st_set(err, ST_ERR_ARG, "mkmodel: %s = %" PRId32 " is not a multiple of "
                          "%" PRId32 ", the block size of weight type %s (every weight row "
                          "must be whole blocks)", rows[i].name, rows[i].n,
                          dtype_get(p->wtype)->block, dtype_name(p->wtype));
    if (mk_moe(p) && (rc = mk_moe_check(p, err))) return rc;
    if (mk_qwen35(p)) return mk_qwen35_check(p, err);
    return strcmp(mk_arch_of(p)->name, "gemma4") == 0 ? mk_gemma4_check(p, err) : ST_OK;
}

/* ---- tensors ---- */

void mk_add(mk_tensor *t, int *n, const char *name, int64_t ne0, int64_t ne1, uint32_t type,
            float center, float spread) {
    mk_tensor *x = &t[(*n)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->n_dims = ne1 > 1 ? 2 : 1;
    x->ne[0] = ne0;
    x->ne[1] = ne1;
    x->ne[2] = 1;
    x->type = type;
    x->center = center;
    x->spread = spread;
    x->data = NULL;
}

void mk_add3(mk_tensor *t, int *n, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
             uint32_t type, float center, float spread) {
    mk_add(t, n, name, ne0, ne1, type, center, spread);
    t[*n - 1].n_dims = 3;
    t[*n - 1].ne[2] = ne2;
}

/* Lists the model's tensors (without data) into t (room for MK_MAX_PER_LAYER * n_layer +
 * 3); returns how many. The order and names follow llama.cpp's GGUF files. */
/* The vectors an architecture adds to layer l (mk_arch), appended at t[n]; returns the
 * new count. Biases are small (+-0.1); norm gains are 1 +- 0.1 as stored (Gemma's files
 * hold 1 + w, see engine/model/model.c). */
static int mk_list_extras(const mkmodel_params *p, mk_tensor *t, int n, int l) {
    const mk_arch *a = mk_arch_of(p);
    int64_t e = p->n_embd, hd = mk_head_dim(p), q = p->n_head * hd, kv = p->n_head_kv * hd;
    const struct { bool on; const char *suffix; int64_t ne0; float center, spread; } x[] = {
        {a->bias, "attn_q.bias", q, 0.0f, 0.1f},
        {a->bias, "attn_k.bias", kv, 0.0f, 0.1f},
        {a->bias, "attn_v.bias", kv, 0.0f, 0.1f},
        {a->qk_norm, "attn_q_norm.weight", hd, 1.0f, 0.1f},
        {a->qk_norm, "attn_k_norm.weight", hd, 1.0f, 0.1f},
        {a->post_norms, "post_attention_norm.weight", e, 1.0f, 0.1f},
        {a->post_norms, "post_ffw_norm.weight", e, 1.0f, 0.1f},
    };
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
        if (!x[i].on) continue;
        char name[48];
        snprintf(name, sizeof name, "blk.%d.%s", l, x[i].suffix);
        mk_add(t, &n, name, x[i].ne0, 1, DT_F32, x[i].center, x[i].spread);
    }
    return n;
}

static int mk_list(const mkmodel_params *p, mk_tensor *t) {
    int64_t e = p->n_embd, hd = mk_head_dim(p), q = p->n_head * hd, kv = p->n_head_kv * hd;
    int64_t ff = p->n_ff, v = p->n_vocab;
    uint32_t wt = mk_moe_dense_type(p);
    float s_e = 1.0f / sqrtf((float)e), s_q = 1.0f / sqrtf((float)q);
    float s_ff = 1.0f / sqrtf((float)ff);
    /* Normalised activations have rms 1, so a classifier row of U(-a, a) gives logits of
     * std a * sqrt(n_embd / 3); a = 2 sqrt(3 / n_embd) aims at std 2: peaked enough for
     * a varied argmax, flat enough for sampling. Embeddings are small (std 1 / sqrt(n_embd),
     * as in trained models) so that the layers' outputs, not the input token, dominate the
     * final residual: with a tied classifier a large embedding would make every model
     * predict its input token. When tied, the output norm's gain supplies the scale. */
    float a_emb = sqrtf(3.0f / (float)e), a_out = 2.0f * a_emb;
    float g_out = p->tied ? 2.0f : 1.0f;
    int n = 0;
    mk_add(t, &n, "token_embd.weight", e, v, wt, 0.0f, a_emb);
    mk_add(t, &n, "output_norm.weight", e, 1, DT_F32, g_out, 0.1f * g_out);
    if (!p->tied) mk_add(t, &n, "output.weight", e, v, wt, 0.0f, a_out);
    if (strcmp(mk_arch_of(p)->name, "gemma4") == 0) return mk_gemma4_list(p, t, n);
    if (mk_qwen35(p)) return mk_qwen35_list(p, t, n);
    for (int l = 0; l < p->n_layer; l++) {
        const struct { const char *suffix; int64_t ne0, ne1; float center, spread; } b[] = {
            {"attn_q", e, q, 0.0f, s_e},       {"attn_k", e, kv, 0.0f, s_e},
            {"attn_v", e, kv, 0.0f, s_e},      {"attn_output", q, e, 0.0f, s_q},
            {"attn_norm", e, 1, 1.0f, 0.1f},   {"ffn_gate", e, ff, 0.0f, s_e},
            {"ffn_down", ff, e, 0.0f, s_ff},   {"ffn_up", e, ff, 0.0f, s_e},
            {"ffn_norm", e, 1, 1.0f, 0.1f},
        };
        for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
            if (mk_moe_skips(p, b[i].suffix, b[i].ne1 > 1)) continue;
            char name[48];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, b[i].suffix);
            mk_add(t, &n, name, b[i].ne0, b[i].ne1, b[i].ne1 > 1 ? wt : DT_F32,
                   b[i].center, b[i].spread);
        }
        n = mk_list_extras(p, t, n, l);
        if (mk_moe(p)) n = mk_moe_layer(p, t, n, l);
    }
    return n;
}

int64_t mkmodel_n_params(const mkmodel_params *p) {
    mk_tensor *t = calloc((size_t)p->n_layer * MK_MAX_PER_LAYER + MK_MAX_GLOBAL, sizeof *t);
    if (!t) return -1;
    int64_t sum = 0;
    for (int i = 0, n = mk_list(p, t); i < n; i++) sum += t[i].ne[0] * t[i].ne[1] * t[i].ne[2];
    free(t);
    return sum;
}

/* splitmix64: tiny, fast, and every seed (0 included) gives a good stream. */
static uint64_t mk_next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) with 24 bits. */
static float mk_unit(uint64_t *s) {
    return (float)(int64_t)(mk_next(s) >> 40) * 0x1.0p-23f - 1.0f;
}

/* Allocates and fills tensor number idx: its own stream, seeded from (seed, idx), so the
 * result does not depend on which thread fills it or when. */
static st_code mk_fill(const mkmodel_params *p, mk_tensor *t, int idx, float *row) {
    size_t rb = dtype_row_bytes(t->type, t->ne[0]);
    t->data = malloc(rb * (size_t)(t->ne[1] * t->ne[2]));
    if (!t->data) return ST_ERR_NOMEM;
    uint64_t s = p->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(idx + 1));
    mk_next(&s);
    for (int64_t r = 0; r < t->ne[1] * t->ne[2]; r++) {
        for (int64_t i = 0; i < t->ne[0]; i++) row[i] = t->center + t->spread * mk_unit(&s);
        mk_gemma4_fixed(p, t, row);
        bool ok = dtype_quantize_row(t->type, row, (char *)t->data + (size_t)r * rb, t->ne[0]);
        ASSERT(ok); /* mkmodel_check admits only types with a quantiser */
    }
    return ST_OK;
}

/* Fills all tensors on a few threads that take the next unfilled tensor in turn: a 1B
 * model is about a billion draws and conversions, seconds per core. */
typedef struct mk_pool {
    const mkmodel_params *p;
    mk_tensor *t;
    int n;
    int64_t row_max;
    atomic_int next;
    atomic_int failed;
} mk_pool;

static void *mk_worker(void *arg) {
    mk_pool *pool = arg;
    float *row = malloc((size_t)pool->row_max * sizeof *row);
    if (!row) {
        atomic_store(&pool->failed, 1);
        return NULL;
    }
    for (;;) {
        int i = atomic_fetch_add(&pool->next, 1);
        if (i >= pool->n || atomic_load(&pool->failed)) break;
        if (mk_fill(pool->p, &pool->t[i], i, row) != ST_OK) atomic_store(&pool->failed, 1);
    }
    free(row);
    return NULL;
}

#define MK_MAX_THREADS 16

static st_code mk_fill_all(const mkmodel_params *p, mk_tensor *t, int n) {
    /* (the longest row of any tensor: Gemma 4's per-layer embeddings are n_layer x their
     * width, which can exceed n_embd, n_ff and the heads) */
    int64_t row_max = 1;
    for (int i = 0; i < n; i++)
        if (t[i].ne[0] > row_max) row_max = t[i].ne[0];
    mk_pool pool = {.p = p, .t = t, .n = n, .row_max = row_max};
    atomic_init(&pool.next, 0);
    atomic_init(&pool.failed, 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n_extra = (int)(cores < 1 ? 0 : cores > MK_MAX_THREADS ? MK_MAX_THREADS - 1 : cores - 1);
    pthread_t th[MK_MAX_THREADS];
    int started = 0;
    /* A thread that cannot start is no error: the calling thread does the rest. */
    while (started < n_extra && pthread_create(&th[started], NULL, mk_worker, &pool) == 0)
        started++;
    mk_worker(&pool);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    return atomic_load(&pool.failed) ? ST_ERR_NOMEM : ST_OK;
}

/* ---- the vocabulary ---- */

#define MK_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's visible space */

/* Writes the i-th ordinary piece (i >= 0) to out (room for 16) and returns its length.
 * Order: "\u2581", the 94 printable ASCII characters, "\u2581" + a letter, then for k = 2,
 * 3, ...: all k-letter lowercase words, then the same with a "\u2581" prefix. Every piece
 * longer than one character is an earlier piece plus one character, so BPE can build it. */
static size_t mk_piece(int64_t i, char *out) {
    if (i == 0) {
        memcpy(out, MK_SPACE, 4);
        return 3;
    }
    i -= 1;
    if (i < 94) {
        out[0] = (char)(0x21 + i);
        out[1] = '\0';
        return 1;
    }
    i -= 94;
    if (i < 52) {
        memcpy(out, MK_SPACE, 3);
        out[3] = (char)(i < 26 ? 'a' + i : 'A' + (i - 26));
        out[4] = '\0';
        return 4;
    }
    i -= 52;
    for (int k = 2;; k++) {
        int64_t n = 1;
        for (int j = 0; j < k; j++) n *= 26;
        for (int pre = 0; pre < 2; pre++, i -= n) {
            if (i >= n) continue;
            size_t o = pre ? 3 : 0;
            memcpy(out, MK_SPACE, o);
            for (int d = k - 1; d >= 0; d--, i /= 26) out[o + (size_t)d] = (char)('a' + i % 26);
            out[o + (size_t)k] = '\0';
            return o + (size_t)k;
        }
    }
}

typedef struct mk_vocab {
    char (*piece)[16];  /* (n) NUL-terminated */
    const char **ptr;   /* (n) into piece */
    float *score;       /* (n) */
    int32_t *type;      /* (n) */
} mk_vocab;

static void mk_vocab_free(mk_vocab *v) {
    free(v->piece);
    free(v->ptr);
    free(v->score);
    free(v->type);
}

static st_code mk_vocab_build(int32_t n, mk_vocab *v) {
    size_t un = (size_t)n;
    v->piece = malloc(un * sizeof *v->piece);
    v->ptr = malloc(un * sizeof *v->ptr);
    v->score = malloc(un * sizeof *v->score);
    v->type = malloc(un * sizeof *v->type);
    if (!v->piece || !v->ptr || !v->score || !v->type) return ST_ERR_NOMEM;
    static const char *const special[3] = {"<unk>", "<s>", "</s>"};
    for (int32_t id = 0; id < n; id++) {
        v->ptr[id] = v->piece[id];
        if (id < 3) {
            snprintf(v->piece[id], 16, "%s", special[id]);
            v->type[id] = id == 0 ? 2 /* UNKNOWN */ : 3 /* CONTROL */;
            v->score[id] = 0.0f;
        } else if (id < 259) {
            snprintf(v->piece[id], 16, "<0x%02X>", id - 3);
            v->type[id] = 6; /* BYTE */
            v->score[id] = 0.0f;
        } else {
            mk_piece(id - 259, v->piece[id]);
            v->type[id] = 1; /* NORMAL */
            v->score[id] = -(float)(id - 259); /* distinct; shorter pieces merge first */
        }
    }
    return ST_OK;
}

/* ---- the write ---- */

static uint32_t mk_file_type(uint32_t wtype) {
    switch (wtype) {
    case DT_F16: return 1;   /* LLAMA_FTYPE_MOSTLY_F16 */
    case DT_Q8_0: return 7;  /* LLAMA_FTYPE_MOSTLY_Q8_0 */
    case DT_BF16: return 32; /* LLAMA_FTYPE_MOSTLY_BF16 */
    default: return 0;       /* ALL_F32 */
    }
}

static st_code mk_set_meta(gguf_writer *w, const mkmodel_params *p, const mk_vocab *v) {
    int32_t hd = mk_head_dim(p);
    const char *arch = mk_arch_of(p)->name;
    st_code rc = ST_OK;
    char key[96];
#define MK_SET(call) do { if (rc == ST_OK) rc = (call); } while (0)
#define KEY(s) (snprintf(key, sizeof key, "%s." s, arch), key)
    MK_SET(gguf_writer_set_str(w, "general.architecture", arch));
    MK_SET(gguf_writer_set_str(w, "general.name", "mkmodel random weights"));
    MK_SET(gguf_writer_set_u32(w, "general.file_type", mk_file_type(p->wtype)));
    MK_SET(gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)p->n_ctx));
    MK_SET(gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)p->n_embd));
    if (!p->no_ff_key)
        MK_SET(gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)p->n_ff));
    MK_SET(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)p->n_layer));
    MK_SET(gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)p->n_head));
    MK_SET(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)p->n_head_kv));
    if (p->n_embd != p->n_head * hd) {
        MK_SET(gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)hd));
        MK_SET(gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)hd));
    }
    MK_SET(gguf_writer_set_u32(w, KEY("rope.dimension_count"),
                               (uint32_t)(mk_qwen35(p) ? mk_qwen35_rope_dim(p) : hd)));
    MK_SET(gguf_writer_set_f32(w, KEY("rope.freq_base"), p->rope_base));
    MK_SET(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-5f));
    if (p->yarn > 1.0f) {
        MK_SET(gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn"));
        MK_SET(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), p->yarn));
        MK_SET(gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"),
                                   (uint32_t)((float)p->n_ctx / p->yarn)));
    } else if (p->rope_scale > 1.0f) {
        MK_SET(gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear"));
        MK_SET(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), p->rope_scale));
    }
    if (mk_arch_of(p)->post_norms)
        MK_SET(gguf_writer_set_u32(w, KEY("attention.sliding_window"),
                                   (uint32_t)(p->n_swa > 0 ? p->n_swa : p->n_ctx)));
    if (strcmp(arch, "gemma4") == 0) MK_SET(mk_gemma4_meta(w, p));
    if (mk_moe(p)) MK_SET(mk_moe_meta(w, p, arch));
    if (mk_qwen35(p)) MK_SET(mk_qwen35_meta(w, p, arch));
#undef KEY
    MK_SET(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    MK_SET(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v->ptr, NULL,
                                   (uint64_t)p->n_vocab));
    MK_SET(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, v->score,
                               (uint64_t)p->n_vocab));
    MK_SET(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v->type,
                               (uint64_t)p->n_vocab));
    MK_SET(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    MK_SET(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    MK_SET(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    MK_SET(gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    MK_SET(gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false));
#undef MK_SET
    return rc;
}

st_code mkmodel_write(const mkmodel_params *p, const char *path, st_err *err) {
    st_code rc = mkmodel_check(p, err);
    if (rc != ST_OK) return rc;
    mk_tensor *t = calloc((size_t)p->n_layer * MK_MAX_PER_LAYER + MK_MAX_GLOBAL, sizeof *t);
    mk_vocab voc = {0};
    gguf_writer *w = gguf_writer_init();
    int n = 0;
    rc = t && w ? ST_OK : ST_ERR_NOMEM;
    if (rc == ST_OK) rc = mk_vocab_build(p->n_vocab, &voc);
    if (rc == ST_OK) rc = mk_set_meta(w, p, &voc);
    if (rc == ST_OK) n = mk_list(p, t);
    if (rc == ST_OK) rc = mk_fill_all(p, t, n);
    if (rc == ST_OK && mk_moe(p) && p->fused_gate_up) rc = mk_moe_fuse(t, &n);
    for (int i = 0; i < n && rc == ST_OK; i++)
        rc = gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, t[i].data);
    if (rc != ST_OK)
        st_set(err, rc, "mkmodel: cannot build the model for '%s': %s", path, st_str(rc));
    else
        rc = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    for (int i = 0; t && i < n; i++) free(t[i].data);
    free(t);
    mk_vocab_free(&voc);
    return rc;
}
