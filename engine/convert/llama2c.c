/* llama2c.c - llama2.c checkpoint + tokenizer -> GGUF converter (see llama2c.h).
 *
 * Both inputs are memory-mapped read-only. The checkpoint's layout is computed from its
 * header with overflow-checked arithmetic and compared with the file size before any
 * weight is touched; the weights are then handed to the GGUF writer as pointers into the
 * mapping (the writer borrows them until it writes), so nothing is copied. The tokenizer
 * is parsed with a bounds check before every read and its pieces are turned back into
 * SentencePiece form (space -> U+2581, "\n<s>\n" -> "<s>") with token types recovered
 * from their ids and shapes. */
#include "convert/llama2c.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/dtype.h"
#include "base/infile.h"
#include "gguf/gguf.h"

/* ---- input files ---- */

typedef struct l2c_map {
    const uint8_t *base; /* NULL when the file is empty */
    size_t size;
} l2c_map;

static st_code l2c_map_open(const char *path, const char *what, l2c_map *m, st_err *err) {
    m->base = NULL;
    m->size = 0;
    uint64_t size;
    int fd = infile_open(path, what, &size, err); /* a FIFO or device is refused */
    if (fd < 0) return err ? err->code : ST_ERR_IO;
    if (size > SIZE_MAX) {
        close(fd);
        return st_set(err, ST_ERR_IO, "'%s' is too large to map", path);
    }
    m->size = (size_t)size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return st_set(err, ST_ERR_IO, "cannot map '%s'", path);
        }
        m->base = p;
    }
    close(fd); /* the mapping stays valid without the descriptor */
    return ST_OK;
}

static void l2c_map_close(l2c_map *m) {
    if (m->base) munmap((void *)m->base, m->size);
    m->base = NULL;
}

static int32_t l2c_i32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4); /* unaligned-safe; the host is little-endian (checked) */
    return v;
}

/* ---- the checkpoint ---- */

#define L2C_HEADER_BYTES 28

typedef struct l2c_config {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
} l2c_config;

/* Float offsets of every array, in file order, counted from the end of the header. */
typedef struct l2c_layout {
    uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_re, freq_im,
        wcls, n_floats;
    int32_t vocab, kv_dim, head_size;
    bool tied;
} l2c_layout;

/* Reserves a*b*c floats at the cursor and returns their offset; sets *ovf on overflow. */
static uint64_t l2c_take(uint64_t *cursor, uint64_t a, uint64_t b, uint64_t c, bool *ovf) {
    uint64_t n, off = *cursor;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) ||
        __builtin_add_overflow(*cursor, n, cursor))
        *ovf = true;
    return off;
}

static st_code l2c_check_config(const char *path, const l2c_config *c, l2c_layout *lay,
                                st_err *err) {
    const struct { const char *name; int32_t v; } pos[] = {
        {"dim", c->dim}, {"hidden_dim", c->hidden_dim}, {"n_layers", c->n_layers},
        {"n_heads", c->n_heads}, {"n_kv_heads", c->n_kv_heads}, {"seq_len", c->seq_len}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v <= 0)
            return st_set(err, ST_ERR_FORMAT, "'%s': header field %s = %" PRId32
                          " must be positive", path, pos[i].name, pos[i].v);
    if (c->vocab_size == 0 || c->vocab_size == INT32_MIN)
        return st_set(err, ST_ERR_FORMAT, "'%s': header field vocab_size = %" PRId32
                      " is invalid", path, c->vocab_size);
    if (c->dim % c->n_heads != 0)
        return st_set(err, ST_ERR_FORMAT, "'%s': dim %" PRId32 " is not a multiple of "
                      "n_heads %" PRId32, path, c->dim, c->n_heads);
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return st_set(err, ST_ERR_FORMAT, "'%s': n_heads %" PRId32 " is not a multiple of "
                      "n_kv_heads %" PRId32, path, c->n_heads, c->n_kv_heads);
    int32_t hs = c->dim / c->n_heads;
    if (hs % 2 != 0)
        return st_set(err, ST_ERR_FORMAT, "'%s': head size %" PRId32 " (dim / n_heads) is "
                      "odd, but RoPE rotates pairs", path, hs);

    lay->tied = c->vocab_size > 0;
    lay->vocab = lay->tied ? c->vocab_size : -c->vocab_size;
    lay->head_size = hs;
    lay->kv_dim = hs * c->n_kv_heads;
    uint64_t d = (uint64_t)c->dim, h = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t kv = (uint64_t)lay->kv_dim, v = (uint64_t)lay->vocab, cur = 0;
    bool ovf = false;
    lay->emb = l2c_take(&cur, v, d, 1, &ovf);
    lay->rms_att = l2c_take(&cur, L, d, 1, &ovf);
    lay->wq = l2c_take(&cur, L, d, d, &ovf);
    lay->wk = l2c_take(&cur, L, kv, d, &ovf);
    lay->wv = l2c_take(&cur, L, kv, d, &ovf);
    lay->wo = l2c_take(&cur, L, d, d, &ovf);
    lay->rms_ffn = l2c_take(&cur, L, d, 1, &ovf);
    lay->w1 = l2c_take(&cur, L, h, d, &ovf);
    lay->w2 = l2c_take(&cur, L, d, h, &ovf);
    lay->w3 = l2c_take(&cur, L, h, d, &ovf);
    lay->rms_final = l2c_take(&cur, d, 1, 1, &ovf);
    lay->freq_re = l2c_take(&cur, (uint64_t)c->seq_len, (uint64_t)hs / 2, 1, &ovf);
    lay->freq_im = l2c_take(&cur, (uint64_t)c->seq_len, (uint64_t)hs / 2, 1, &ovf);
    lay->wcls = l2c_take(&cur, lay->tied ? 0 : v, d, 1, &ovf);
    lay->n_floats = cur;
    if (ovf || cur > (UINT64_MAX - L2C_HEADER_BYTES) / 4)
        return st_set(err, ST_ERR_FORMAT, "'%s': header (dim=%" PRId32 ", n_layers=%" PRId32
                      ", vocab_size=%" PRId32 ") implies an impossible size", path, c->dim,
                      c->n_layers, c->vocab_size);
    return ST_OK;
}

static st_code l2c_check_size(const char *path, const l2c_config *c, const l2c_layout *lay,
                              uint64_t size, st_err *err) {
    uint64_t want = L2C_HEADER_BYTES + 4 * lay->n_floats;
    if (size == want) return ST_OK;
    /* The most common mix-up gets its own hint: a classifier present but not announced. */
    uint64_t cls_bytes = 4 * (uint64_t)lay->vocab * (uint64_t)c->dim;
    const char *hint = lay->tied && size == want + cls_bytes
                           ? " (the extra bytes are one vocab x dim classifier: vocab_size "
                             "should be negative)"
                           : "";
    return st_set(err, ST_ERR_FORMAT, "'%s' is %" PRIu64 " bytes but its header (dim=%"
                  PRId32 ", hidden_dim=%" PRId32 ", n_layers=%" PRId32 ", n_heads=%" PRId32
                  ", n_kv_heads=%" PRId32 ", vocab_size=%" PRId32 ", seq_len=%" PRId32
                  ") implies %" PRIu64 " bytes%s", path, size, c->dim, c->hidden_dim,
                  c->n_layers, c->n_heads, c->n_kv_heads, c->vocab_size, c->seq_len, want, hint);
}

/* ---- the tokenizer ---- */

typedef struct l2c_vocab {
    int32_t n;
    char *buf;          /* all pieces back to back */
    const char **piece; /* (n) into buf */
    size_t *len;        /* (n) bytes */
    float *score;       /* (n) */
    int32_t *type;      /* (n) tokenizer.ggml.token_type values */
} l2c_vocab;

static void l2c_vocab_free(l2c_vocab *v) {
    free(v->buf);
    free(v->piece);
    free(v->len);
    free(v->score);
    free(v->type);
    memset(v, 0, sizeof *v);
}

static bool l2c_is_byte_piece(const char *s, size_t n) {
    return n == 6 && memcmp(s, "<0x", 3) == 0 && strchr("0123456789ABCDEFabcdef", s[3]) &&
           s[3] && strchr("0123456789ABCDEFabcdef", s[4]) && s[4] && s[5] == '>';
}

/* Undoes llama2.c's export of one piece into dst (room for 3 * n bytes); returns its
 * length. Ids 1 and 2 were wrapped in newlines; SentencePiece's U+2581 became ' '. */
static size_t l2c_unexport(int32_t id, const uint8_t *s, size_t n, char *dst) {
    if ((id == 1 && n == 5 && memcmp(s, "\n<s>\n", 5) == 0) ||
        (id == 2 && n == 6 && memcmp(s, "\n</s>\n", 6) == 0)) {
        s++;
        n -= 2;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(dst + o, "\xe2\x96\x81", 3);
            o += 3;
        } else {
            dst[o++] = (char)s[i];
        }
    }
    return o;
}

#define L2C_MAX_TOKEN_LEN 65536

static st_code l2c_vocab_parse(const char *path, const l2c_map *m, int32_t n_vocab,
                               l2c_vocab *v, st_err *err) {
    memset(v, 0, sizeof *v);
    if (m->size < 4)
        return st_set(err, ST_ERR_FORMAT, "tokenizer '%s' is %zu bytes, too short for its "
                      "header", path, m->size);
    int32_t max_len = l2c_i32(m->base);
    if (max_len <= 0 || max_len > L2C_MAX_TOKEN_LEN)
        return st_set(err, ST_ERR_FORMAT, "tokenizer '%s': max_token_length = %" PRId32
                      " is out of range (1..%d)", path, max_len, L2C_MAX_TOKEN_LEN);
    size_t un = (size_t)n_vocab;
    v->n = n_vocab;
    v->buf = malloc(3 * m->size + 1);
    v->piece = calloc(un, sizeof *v->piece);
    v->len = calloc(un, sizeof *v->len);
    v->score = calloc(un, sizeof *v->score);
    v->type = calloc(un, sizeof *v->type);
    if (!v->buf || !v->piece || !v->len || !v->score || !v->type) {
        l2c_vocab_free(v);
        return st_set(err, ST_ERR_NOMEM, "out of memory for %" PRId32 " tokens", n_vocab);
    }
    size_t pos = 4, out = 0;
    for (int32_t id = 0; id < n_vocab; id++) {
        if (m->size - pos < 8) {
            l2c_vocab_free(v);
            return st_set(err, ST_ERR_FORMAT, "tokenizer '%s' is truncated at token %" PRId32
                          " of %" PRId32 " (offset %zu)", path, id, n_vocab, pos);
        }
        float score;
        memcpy(&score, m->base + pos, 4);
        int32_t len = l2c_i32(m->base + pos + 4);
        pos += 8;
        if (len <= 0 || len > max_len) {
            l2c_vocab_free(v);
            return st_set(err, ST_ERR_FORMAT, "tokenizer '%s': token %" PRId32 " has length %"
                          PRId32 ", outside 1..max_token_length (%" PRId32 ")", path, id, len,
                          max_len);
        }
        if (m->size - pos < (size_t)len) {
            l2c_vocab_free(v);
            return st_set(err, ST_ERR_FORMAT, "tokenizer '%s' is truncated inside token %"
                          PRId32 " (%" PRId32 " bytes at offset %zu)", path, id, len, pos);
        }
        if (isnan(score)) {
            l2c_vocab_free(v);
            return st_set(err, ST_ERR_FORMAT, "tokenizer '%s': token %" PRId32 " has a NaN "
                          "score", path, id);
        }
        char *dst = v->buf + out;
        size_t n = l2c_unexport(id, m->base + pos, (size_t)len, dst);
        pos += (size_t)len;
        out += n;
        v->piece[id] = dst;
        v->len[id] = n;
        v->score[id] = score;
        v->type[id] = id == 0 ? 2 /* UNKNOWN */ : id <= 2 ? 3 /* CONTROL */
                      : l2c_is_byte_piece(dst, n) ? 6 /* BYTE */ : 1 /* NORMAL */;
    }
    if (pos != m->size) {
        l2c_vocab_free(v);
        return st_set(err, ST_ERR_FORMAT, "tokenizer '%s' has %zu bytes after its %" PRId32
                      " tokens (the checkpoint's vocab_size): it belongs to another model",
                      path, m->size - pos, n_vocab);
    }
    return ST_OK;
}

/* ---- the GGUF ---- */

/* general.name: the checkpoint's file name without directory and ".bin". */
static void l2c_model_name(const char *path, char *buf, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 4 && strcmp(b + n - 4, ".bin") == 0) n -= 4;
    if (n >= cap) n = cap - 1;
    memcpy(buf, b, n);
    buf[n] = '\0';
}

static st_code l2c_set_meta(gguf_writer *w, const l2c_config *c, const l2c_layout *lay,
                            const l2c_vocab *v, const char *name) {
    st_code rc = ST_OK;
    /* Each setter returns ST_OK or ST_ERR_NOMEM; the first failure wins. */
#define L2C_SET(call) do { if (rc == ST_OK) rc = (call); } while (0)
    L2C_SET(gguf_writer_set_str(w, "general.architecture", "llama"));
    L2C_SET(gguf_writer_set_str(w, "general.name", name));
    L2C_SET(gguf_writer_set_u32(w, "llama.context_length", (uint32_t)c->seq_len));
    L2C_SET(gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)c->dim));
    L2C_SET(gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)c->hidden_dim));
    L2C_SET(gguf_writer_set_u32(w, "llama.block_count", (uint32_t)c->n_layers));
    L2C_SET(gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)c->n_heads));
    L2C_SET(gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads));
    L2C_SET(gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)lay->head_size));
    L2C_SET(gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
    L2C_SET(gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f));
    L2C_SET(gguf_writer_set_u32(w, "general.file_type", 0)); /* all F32 */
    L2C_SET(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    L2C_SET(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", v->piece, v->len,
                                    (uint64_t)v->n));
    L2C_SET(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, v->score,
                                (uint64_t)v->n));
    L2C_SET(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, v->type,
                                (uint64_t)v->n));
    L2C_SET(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    L2C_SET(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    L2C_SET(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
#undef L2C_SET
    return rc;
}

#define L2C_NAME_CAP 48

/* Adds one F32 tensor of ne0 x ne1 (ne1 == 0: a vector) whose floats start at float
 * offset off of the mapped checkpoint; the name is formatted into names (kept alive
 * by the caller until the write). */
static st_code l2c_add(gguf_writer *w, char *names, int *n_names, const float *f, uint64_t off,
                       int64_t ne0, int64_t ne1, const char *fmt, int layer) {
    char *name = names + (size_t)(*n_names)++ * L2C_NAME_CAP;
    snprintf(name, L2C_NAME_CAP, fmt, layer);
    int64_t ne[2] = {ne0, ne1};
    return gguf_writer_add_tensor(w, name, DT_F32, ne1 ? 2 : 1, ne, f + off);
}

static st_code l2c_add_tensors(gguf_writer *w, char *names, const l2c_config *c,
                               const l2c_layout *lay, const float *f) {
    int n = 0;
    int64_t d = c->dim, h = c->hidden_dim, kv = lay->kv_dim, vocab = lay->vocab;
    st_code rc = l2c_add(w, names, &n, f, lay->emb, d, vocab, "token_embd.weight", 0);
    if (rc == ST_OK) rc = l2c_add(w, names, &n, f, lay->rms_final, d, 0, "output_norm.weight", 0);
    if (rc == ST_OK && !lay->tied)
        rc = l2c_add(w, names, &n, f, lay->wcls, d, vocab, "output.weight", 0);
    for (int l = 0; l < c->n_layers && rc == ST_OK; l++) {
        uint64_t ul = (uint64_t)l;
        /* Each per-layer array is stacked over layers: layer l starts l matrices in. */
        const struct { uint64_t base, per; int64_t ne0, ne1; const char *fmt; } t[] = {
            {lay->wq, (uint64_t)(d * d), d, d, "blk.%d.attn_q.weight"},
            {lay->wk, (uint64_t)(kv * d), d, kv, "blk.%d.attn_k.weight"},
            {lay->wv, (uint64_t)(kv * d), d, kv, "blk.%d.attn_v.weight"},
            {lay->wo, (uint64_t)(d * d), d, d, "blk.%d.attn_output.weight"},
            {lay->rms_att, (uint64_t)d, d, 0, "blk.%d.attn_norm.weight"},
            {lay->w1, (uint64_t)(h * d), d, h, "blk.%d.ffn_gate.weight"},
            {lay->w2, (uint64_t)(d * h), h, d, "blk.%d.ffn_down.weight"},
            {lay->w3, (uint64_t)(h * d), d, h, "blk.%d.ffn_up.weight"},
            {lay->rms_ffn, (uint64_t)d, d, 0, "blk.%d.ffn_norm.weight"},
        };
        for (size_t i = 0; i < sizeof t / sizeof t[0] && rc == ST_OK; i++)
            rc = l2c_add(w, names, &n, f, t[i].base + ul * t[i].per, t[i].ne0, t[i].ne1,
                         t[i].fmt, l);
    }
    return rc;
}

st_code llama2c_convert(const char *model_bin, const char *tokenizer_bin, const char *out_gguf,
                        st_err *err) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    (void)model_bin; (void)tokenizer_bin; (void)out_gguf;
    return st_set(err, ST_ERR_UNSUPPORTED, "llama2.c conversion needs a little-endian host");
#else
    l2c_map mm = {0}, tm = {0};
    l2c_vocab voc = {0};
    gguf_writer *w = NULL;
    char *names = NULL;
    l2c_config c = {0};
    l2c_layout lay = {0};
    st_code rc = l2c_map_open(model_bin, "checkpoint", &mm, err);
    if (rc != ST_OK) goto done;
    if (mm.size < L2C_HEADER_BYTES) {
        rc = st_set(err, ST_ERR_FORMAT, "'%s' is %zu bytes, shorter than the 28-byte llama2.c "
                    "header", model_bin, mm.size);
        goto done;
    }
    int32_t *fields[7] = {&c.dim, &c.hidden_dim, &c.n_layers, &c.n_heads, &c.n_kv_heads,
                          &c.vocab_size, &c.seq_len};
    for (int i = 0; i < 7; i++) *fields[i] = l2c_i32(mm.base + 4 * i);
    rc = l2c_check_config(model_bin, &c, &lay, err);
    if (rc == ST_OK) rc = l2c_check_size(model_bin, &c, &lay, mm.size, err);
    if (rc == ST_OK) rc = l2c_map_open(tokenizer_bin, "tokenizer", &tm, err);
    if (rc == ST_OK) rc = l2c_vocab_parse(tokenizer_bin, &tm, lay.vocab, &voc, err);
    if (rc != ST_OK) goto done;

    w = gguf_writer_init();
    names = calloc((size_t)c.n_layers * 9 + 3, L2C_NAME_CAP);
    if (!w || !names) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory for the GGUF writer");
        goto done;
    }
    char name[256];
    l2c_model_name(model_bin, name, sizeof name);
    rc = l2c_set_meta(w, &c, &lay, &voc, name);
    if (rc == ST_OK)
        rc = l2c_add_tensors(w, names, &c, &lay, (const float *)(mm.base + L2C_HEADER_BYTES));
    if (rc != ST_OK) {
        st_set(err, rc, "cannot build the GGUF for '%s': %s", model_bin, st_str(rc));
        goto done;
    }
    rc = gguf_writer_write(w, out_gguf, err);

done:
    gguf_writer_free(w);
    free(names);
    l2c_vocab_free(&voc);
    l2c_map_close(&tm);
    l2c_map_close(&mm);
    return rc;
#endif
}
