/* session.c - model identity (SHA-256 of a GGUF file's head and ends), the per-node
 * metadata table, settings, and saving the session JSON with jansson, atomically (base/outfile.h).
 * Loading is in session_load.c, the Markdown export in session_md.c. */
#include "base/array.h"
#include "base/outfile.h"
#include "session/session.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session/sha256.h"

#define SESSION_NODES_MARK "@multidecode-session-nodes@"

/* ======================= model identity ======================= */

st_code session_model_id_of(const gguf_ctx *g, const char *path, int32_t n_vocab,
                            session_model_id *id, st_err *err) {
    /* The image's start is found from a tensor: its data lies at data_offset + offset. */
    if (gguf_n_tensors(g) < 1)
        return st_set(err, ST_ERR_FORMAT, "a GGUF file without tensors has no model identity");
    const gguf_tensor *t = gguf_tensor_at(g, 0);
    uint64_t size = gguf_file_size(g), d = gguf_data_offset(g);
    const uint8_t *base = (const uint8_t *)t->data - d - t->offset;
    if (d > size) d = size;
    uint64_t a_end = size - d > SESSION_HASH_EDGE ? d + SESSION_HASH_EDGE : size;
    uint64_t b_start = size - a_end > SESSION_HASH_EDGE ? size - SESSION_HASH_EDGE : a_end;
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, base, (size_t)a_end);                  /* [0, D) + first MiB */
    sha256_update(&c, base + b_start, (size_t)(size - b_start)); /* last MiB */
    uint8_t dig[SHA256_DIGEST_LEN];
    sha256_final(&c, dig);
    memset(id, 0, sizeof *id);
    sha256_hex(dig, id->sha256);
    id->size = size;
    id->n_vocab = n_vocab;
    if (path) {
        const char *slash = strrchr(path, '/');
        snprintf(id->file, sizeof id->file, "%s", slash ? slash + 1 : path);
    }
    return ST_OK;
}

bool session_model_id_same(const session_model_id *a, const session_model_id *b) {
    return a->size == b->size && !strcmp(a->sha256, b->sha256);
}

const char *session_model_id_str(const session_model_id *id, char *buf, size_t cap) {
    snprintf(buf, cap, "'%s' (%" PRIu64 " bytes, sha256 %.16s%s)",
             id->file[0] ? id->file : "unnamed", id->size,
             id->sha256[0] ? id->sha256 : "unknown", id->sha256[0] ? "..." : "");
    return buf;
}

/* ======================= per-node metadata ======================= */

typedef struct session_meta_ent {
    uint32_t gen;      /* the node's generation when set */
    int32_t strategy;  /* index into names, -1: none */
    uint64_t seed;
    bool has_score;
    double score;
    char *name;        /* owned, NULL: none */
} session_meta_ent;

struct session_meta {
    session_meta_ent *ent; /* (cap) by forest index */
    int32_t cap;
    char **names;          /* (n_names) interned strategy names */
    int32_t n_names, cap_names;
};

session_meta *session_meta_init(void) { return calloc(1, sizeof(session_meta)); }

void session_meta_free(session_meta *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->n_names; i++) free(m->names[i]);
    for (int32_t i = 0; i < m->cap; i++) free(m->ent[i].name);
    free(m->names);
    free(m->ent);
    free(m);
}

static int32_t meta_intern(session_meta *m, const char *name) {
    for (int32_t i = 0; i < m->n_names; i++)
        if (!strcmp(m->names[i], name)) return i;
    if (!ARR_GROW_I32(m->names, m->n_names + 1, m->cap_names)) return -1;
    if (!(m->names[m->n_names] = strdup(name))) return -1;
    return m->n_names++;
}

/* The entry of live node id, made (empty) when it has none or held an older node's.
 * NULL + err: ST_ERR_ARG (stale id), ST_ERR_NOMEM. */
static session_meta_ent *meta_entry(session_meta *m, const forest *f, forest_id id, st_err *err) {
    if (!forest_get(f, id)) {
        st_set(err, ST_ERR_ARG, "metadata for a node that no longer exists");
        return NULL;
    }
    int32_t idx = forest_index(id);
    if (idx >= m->cap) {
        int32_t cap = m->cap ? m->cap : 64;
        while (cap <= idx) cap = cap > INT32_MAX / 2 ? INT32_MAX : cap * 2;
        session_meta_ent *e = realloc(m->ent, sizeof *e * (size_t)cap);
        if (!e) {
            st_set(err, ST_ERR_NOMEM, "out of memory for node metadata");
            return NULL;
        }
        for (int32_t i = m->cap; i < cap; i++) e[i] = (session_meta_ent){.strategy = -1};
        m->ent = e;
        m->cap = cap;
    }
    session_meta_ent *e = &m->ent[idx];
    if (e->gen != (uint32_t)(id >> 32)) { /* an older node's entry: forgotten */
        free(e->name);
        *e = (session_meta_ent){.gen = (uint32_t)(id >> 32), .strategy = -1};
    }
    return e;
}

/* Node id's entry when it has one (of its generation), else NULL. */
static const session_meta_ent *meta_find(const session_meta *m, const forest *f, forest_id id) {
    if (!m || !forest_get(f, id)) return NULL;
    int32_t idx = forest_index(id);
    return idx < m->cap && m->ent[idx].gen == (uint32_t)(id >> 32) ? &m->ent[idx] : NULL;
}

st_code session_meta_set(session_meta *m, const forest *f, forest_id id, const char *strategy,
                         uint64_t seed, st_err *err) {
    if (!forest_get(f, id)) return st_set(err, ST_ERR_ARG, "metadata for a node that no longer exists");
    if (strategy && strlen(strategy) > SESSION_MAX_STRATEGY)
        return st_set(err, ST_ERR_ARG, "strategy name longer than %d bytes", SESSION_MAX_STRATEGY);
    int32_t s = -1;
    if (strategy && *strategy && (s = meta_intern(m, strategy)) < 0)
        return st_set(err, ST_ERR_NOMEM, "out of memory for node metadata");
    session_meta_ent *e = meta_entry(m, f, id, err);
    if (!e) return err->code;
    e->strategy = s;
    e->seed = seed;
    return ST_OK;
}

bool session_meta_get(const session_meta *m, const forest *f, forest_id id,
                      const char **strategy, uint64_t *seed) {
    const session_meta_ent *e = meta_find(m, f, id);
    if (!e || e->strategy < 0) return false;
    if (strategy) *strategy = m->names[e->strategy];
    if (seed) *seed = e->seed;
    return true;
}

st_code session_meta_set_score(session_meta *m, const forest *f, forest_id id, double score, st_err *err) {
    if (!isfinite(score)) return st_set(err, ST_ERR_ARG, "a score must be a finite number");
    session_meta_ent *e = meta_entry(m, f, id, err);
    if (!e) return err->code;
    e->has_score = true;
    e->score = score;
    return ST_OK;
}

bool session_meta_get_score(const session_meta *m, const forest *f, forest_id id, double *score) {
    const session_meta_ent *e = meta_find(m, f, id);
    if (!e || !e->has_score) return false;
    *score = e->score;
    return true;
}

st_code session_meta_set_name(session_meta *m, const forest *f, forest_id id, const char *name, st_err *err) {
    if (name && strlen(name) > SESSION_MAX_NAME)
        return st_set(err, ST_ERR_ARG, "a name longer than %d bytes", SESSION_MAX_NAME);
    json_t *utf8 = name ? json_string(name) : NULL; /* the file holds UTF-8 text only */
    if (name && !utf8) return st_set(err, ST_ERR_ARG, "a name must be UTF-8 text");
    json_decref(utf8);
    char *copy = name && *name ? strdup(name) : NULL;
    if (name && *name && !copy) return st_set(err, ST_ERR_NOMEM, "out of memory for node metadata");
    session_meta_ent *e = meta_entry(m, f, id, err);
    if (!e) return free(copy), err->code;
    free(e->name);
    e->name = copy;
    return ST_OK;
}

const char *session_meta_get_name(const session_meta *m, const forest *f, forest_id id) {
    const session_meta_ent *e = meta_find(m, f, id);
    return e ? e->name : NULL;
}

/* ======================= settings ======================= */

session_settings session_settings_default(void) {
    return (session_settings){.sample = sample_default_params(), .save_topk = true};
}

void session_settings_free(session_settings *s) {
    for (int32_t i = 0; i < s->n_kv; i++) {
        free(s->kv[i].key);
        free(s->kv[i].value);
    }
    free(s->kv);
    session_meta_free(s->meta);
    for (int32_t i = 0; i < s->n_branch_text; i++) free(s->branch_text[i]);
    free(s->branch_text);
    *s = session_settings_default();
}

st_code session_settings_set(session_settings *s, const char *key, const char *value,
                             st_err *err) {
    if (!key || !*key) return st_set(err, ST_ERR_ARG, "a setting needs a non-empty key");
    char *v = strdup(value ? value : "");
    if (!v) return st_set(err, ST_ERR_NOMEM, "out of memory for settings");
    for (int32_t i = 0; i < s->n_kv; i++)
        if (!strcmp(s->kv[i].key, key)) {
            free(s->kv[i].value);
            s->kv[i].value = v;
            return ST_OK;
        }
    if (s->n_kv >= SESSION_MAX_EXTRA) {
        free(v);
        return st_set(err, ST_ERR_ARG, "more than %d settings: '%.64s' not added",
                      SESSION_MAX_EXTRA, key);
    }
    char *k = strdup(key);
    /* the array's capacity is the power of two (at least 8) at or above n_kv: it grows by
     * doubling when n_kv reaches one */
    int32_t n = s->n_kv;
    bool grow = n == 0 || (n >= 8 && !(n & (n - 1)));
    session_kv *kv = !k ? NULL : grow ? realloc(s->kv, sizeof *kv * (size_t)(n ? 2 * n : 8)) : s->kv;
    if (!kv) {
        free(k), free(v);
        return st_set(err, ST_ERR_NOMEM, "out of memory for settings");
    }
    s->kv = kv;
    s->kv[s->n_kv++] = (session_kv){k, v};
    return ST_OK;
}

const char *session_settings_get(const session_settings *s, const char *key) {
    for (int32_t i = 0; i < s->n_kv; i++)
        if (!strcmp(s->kv[i].key, key)) return s->kv[i].value;
    return NULL;
}

/* ======================= saving ======================= */

/* Seeds are uint64: integers while they fit jansson's int64, decimal strings above. */
static json_t *json_u64(uint64_t v) {
    if (v <= INT64_MAX) return json_integer((json_int_t)v);
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return json_string(buf);
}

/* A float as the shortest decimal that reads back as the same float ("0.8", not
 * "0.800000012"); NaN and infinities, which JSON cannot hold, as null. */
static json_t *json_float(float x) {
    if (!isfinite(x)) return json_null();
    char buf[32];
    for (int prec = 6; prec < 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)x);
        if ((float)strtod(buf, NULL) == x) return json_real(strtod(buf, NULL));
    }
    return json_real(x);
}

/* Adds key -> v to obj, counting a failure (v NULL from a failed constructor) in *bad. */
static void jset(json_t *obj, const char *key, json_t *v, int *bad) {
    if (!v || json_object_set_new(obj, key, v)) (*bad)++;
}
static void jpush(json_t *arr, json_t *v, int *bad) {
    if (!v || json_array_append_new(arr, v)) (*bad)++;
}

static json_t *save_node(const forest *f, const session_settings *s, int32_t i, int *bad) {
    const forest_node *n = forest_node_at(f, i);
    json_t *o = json_object();
    if (!o) { (*bad)++; return NULL; }
    jset(o, "id", json_integer(i), bad);
    jset(o, "parent", json_integer(n->parent), bad);
    jset(o, "token", json_integer(n->token), bad);
    jset(o, "depth", json_integer(n->depth), bad);
    if (isfinite(n->logprob)) jset(o, "logprob", json_float(n->logprob), bad);
    if (n->flags & (FOREST_FINISHED | FOREST_BOOKMARK)) {
        json_t *fl = json_array();
        if (n->flags & FOREST_FINISHED) jpush(fl, json_string("finished"), bad);
        if (n->flags & FOREST_BOOKMARK) jpush(fl, json_string("bookmark"), bad);
        jset(o, "flags", fl, bad);
    }
    if (n->tag) jset(o, "tag", json_integer(n->tag), bad);
    forest_id id = forest_id_at(f, i);
    const char *strat;
    uint64_t seed;
    if (session_meta_get(s->meta, f, id, &strat, &seed)) {
        jset(o, "strategy", json_string(strat), bad);
        jset(o, "seed", json_u64(seed), bad);
    }
    double score;
    if (session_meta_get_score(s->meta, f, id, &score)) jset(o, "score", json_real(score), bad);
    const char *name = session_meta_get_name(s->meta, f, id);
    if (name) jset(o, "name", json_string(name), bad);
    int32_t tk = forest_top_k(f);
    if (s->save_topk && tk > 0) {
        int32_t ids[256];
        float lps[256];
        int32_t k = forest_topk(f, id, ids, lps, tk);
        if (k > 0) {
            json_t *arr = json_array();
            for (int32_t j = 0; j < k; j++) {
                json_t *pair = json_array();
                jpush(pair, json_integer(ids[j]), bad);
                jpush(pair, json_float(lps[j]), bad);
                jpush(arr, pair, bad);
            }
            jset(o, "topk", arr, bad);
        }
    }
    return o;
}

/* The informational texts of the leaves (each root-to-leaf path decoded). */
static json_t *save_branches(const forest *f, const tok *tk, int *bad) {
    json_t *arr = json_array();
    int32_t n_leaves = forest_leaves(f, NULL, 0), maxd = 1;
    forest_id *leaves = malloc(sizeof *leaves * (size_t)(n_leaves ? n_leaves : 1));
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) maxd++;
    int32_t *path = malloc(sizeof *path * (size_t)maxd);
    if (!arr || !leaves || !path) {
        (*bad)++;
        free(leaves), free(path);
        return arr;
    }
    forest_leaves(f, leaves, n_leaves);
    for (int32_t l = 0; l < n_leaves && !*bad; l++) {
        int32_t n = forest_path(f, leaves[l], path, maxd);
        char *text = tok_decode_str(tk, path, n);
        if (!text) { (*bad)++; break; }
        json_t *b = json_object();
        jset(b, "leaf", json_integer(forest_index(leaves[l])), bad);
        jset(b, "text", json_string(text), bad);
        jpush(arr, b, bad);
        free(text);
    }
    free(leaves), free(path);
    return arr;
}

/* The whole session except the nodes, which are a placeholder string (see session_text);
 * "forest" is the last key and "nodes" its last, so the placeholder is the last string. */
static json_t *save_json(const forest *f, const session_settings *s, const session_model_id *mid,
                         const tok *tk, int *bad) {
    json_t *root = json_object(), *model = json_object(), *set = json_object();
    json_t *smp = json_object(), *extra = json_object(), *fo = json_object();
    jset(root, "format", json_string(SESSION_FORMAT), bad);
    jset(root, "version", json_integer(SESSION_VERSION), bad);
    static const session_model_id none;
    if (!mid) mid = &none;
    jset(model, "file", json_string(mid->file), bad);
    jset(model, "size", json_integer((json_int_t)mid->size), bad);
    jset(model, "sha256", json_string(mid->sha256), bad);
    jset(model, "n_vocab", json_integer(mid->n_vocab), bad);
    jset(model, "hashed", json_string("sha256 of the GGUF header, metadata and tensor infos, "
                                      "then the first and the last MiB of tensor data"), bad);
    jset(root, "model", model, bad);
    jset(smp, "temp", json_float(s->sample.temp), bad);
    jset(smp, "top_k", json_integer(s->sample.top_k), bad);
    jset(smp, "top_p", json_float(s->sample.top_p), bad);
    jset(smp, "min_p", json_float(s->sample.min_p), bad);
    jset(smp, "seed", json_u64(s->sample.seed), bad);
    jset(set, "sampler", smp, bad);
    jset(set, "chat_template", json_string(s->chat_template), bad);
    for (int32_t i = 0; i < s->n_kv; i++) jset(extra, s->kv[i].key, json_string(s->kv[i].value), bad);
    jset(set, "extra", extra, bad);
    jset(root, "settings", set, bad);
    if (tk) jset(root, "branches", save_branches(f, tk, bad), bad);
    jset(fo, "n_slots", json_integer(kv_alloc_n_slots(forest_kv_const(f))), bad);
    jset(fo, "top_k", json_integer(forest_top_k(f)), bad);
    jset(fo, "nodes", json_string(SESSION_NODES_MARK), bad);
    jset(root, "forest", fo, bad);
    return root;
}

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void sbuf_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (!ARR_GROW(b->p, b->n + n + 1, b->cap)) {
        b->oom = true;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* The file's text: the envelope indented, one compact line per node (readable, diffable
 * and about a third of the size of an indented node list). NULL when out of memory or
 * when a string is not valid UTF-8 (*bad). */
static char *session_text(const forest *f, const session_settings *s,
                          const session_model_id *mid, const tok *tk, int *bad, size_t *len) {
    const size_t fl = JSON_INDENT(1) | JSON_REAL_PRECISION(9);
    json_t *root = save_json(f, s, mid, tk, bad);
    char *env = root && !*bad ? json_dumps(root, fl) : NULL;
    json_decref(root);
    if (!env) return NULL;
    const char *mark = "\"" SESSION_NODES_MARK "\"", *at = NULL;
    for (const char *q = env; (q = strstr(q, mark)); q++) at = q;
    sbuf b = {0};
    sbuf_put(&b, env, (size_t)(at - env));
    sbuf_put(&b, "[", 1);
    const char *sep = "\n   ";
    for (int32_t i = forest_dfs_first(f); i >= 0 && !*bad && !b.oom; i = forest_dfs_next(f, i)) {
        json_t *o = save_node(f, s, i, bad);
        char *line = o && !*bad ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
        json_decref(o);
        if (!line) { b.oom = true; break; }
        sbuf_put(&b, sep, strlen(sep));
        sbuf_put(&b, line, strlen(line));
        free(line);
        sep = ",\n   ";
    }
    sbuf_put(&b, forest_n_live(f) ? "\n  ]" : "]", forest_n_live(f) ? 4 : 1);
    at += strlen(mark);
    sbuf_put(&b, at, strlen(at));
    sbuf_put(&b, "\n", 1);
    free(env);
    if (b.oom || *bad) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

st_code session_save(const char *path, const forest *f, const session_settings *s,
                     const session_model_id *mid, const tok *tk, st_err *err) {
    int32_t nv = mid && mid->n_vocab > 0 ? mid->n_vocab : tk ? tok_n_vocab(tk) : 0;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) {
        int32_t t = forest_node_at(f, i)->token;
        if (t < 0 || (nv > 0 && t >= nv))
            return st_set(err, ST_ERR_ARG, "node %d has token %d, outside the vocabulary of %d",
                          i, t, nv);
    }
    int bad = 0;
    size_t n = 0;
    char *text = session_text(f, s, mid, tk, &bad, &n);
    if (!text)
        return st_set(err, bad ? ST_ERR_ARG : ST_ERR_NOMEM,
                      "cannot encode the session as JSON (%s)", bad ? "a setting, a name or "
                      "a text that is not valid UTF-8" : "out of memory");
    st_code rc = outfile_write(path, "session", text, n, err);
    free(text);
    return rc;
}

