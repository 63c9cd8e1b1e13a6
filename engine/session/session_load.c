/* session_load.c - reading a session file (session_load in session.h). The JSON is
 * parsed whole into a flat node table and validated (types, ranges, unique ids, known
 * parents, no parent cycle, depth = parent's + 1, tokens inside the vocabulary) before
 * anything is built, so a damaged file is refused with one precise message and no forest
 * is half-built; then the forest is rebuilt in DFS order with forest_add_root /
 * forest_append, mapping the file's ids to new ones. Every access to the JSON tree is
 * type-checked, so no input can make it read out of bounds. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/infile.h"
#include "session/session.h"

#define SESSION_MAX_SLOTS (1 << 24)  /* a saved n_slots above this is damage, not a cache */
#define SESSION_MAX_DEPTH (1 << 30)

/* ======================= loading ======================= */

session_load_params session_load_default_params(void) { return (session_load_params){0}; }

/* A field of obj as an integer in [lo, hi]: ST_OK (out untouched when it is absent and
 * optional), or ST_ERR_FORMAT naming where, the key and what is wrong. */
static st_code jint(const json_t *obj, const char *key, bool required, int64_t lo, int64_t hi,
                    int64_t *out, const char *where, st_err *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? st_set(err, ST_ERR_FORMAT, "%s: '%s' is missing", where, key) : ST_OK;
    if (!json_is_integer(v))
        return st_set(err, ST_ERR_FORMAT, "%s: '%s' is not an integer", where, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return st_set(err, ST_ERR_FORMAT, "%s: '%s' is %lld, outside [%lld, %lld]", where, key,
                      (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return ST_OK;
}

static st_code jnum(const json_t *obj, const char *key, bool required, double *out,
                    const char *where, st_err *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? st_set(err, ST_ERR_FORMAT, "%s: '%s' is missing", where, key) : ST_OK;
    if (!json_is_number(v)) return st_set(err, ST_ERR_FORMAT, "%s: '%s' is not a number", where, key);
    *out = json_number_value(v);
    return ST_OK;
}

/* A string field; *out NULL when absent and optional. */
static st_code jstr(const json_t *obj, const char *key, bool required, const char **out,
                    const char *where, st_err *err) {
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v) return required ? st_set(err, ST_ERR_FORMAT, "%s: '%s' is missing", where, key) : ST_OK;
    if (!json_is_string(v)) return st_set(err, ST_ERR_FORMAT, "%s: '%s' is not a string", where, key);
    *out = json_string_value(v);
    return ST_OK;
}

static st_code jobj(const json_t *obj, const char *key, bool array, const json_t **out,
                    const char *where, st_err *err) {
    *out = json_object_get(obj, key);
    if (!*out) return st_set(err, ST_ERR_FORMAT, "%s: '%s' is missing", where, key);
    if (array ? !json_is_array(*out) : !json_is_object(*out))
        return st_set(err, ST_ERR_FORMAT, "%s: '%s' is not an %s", where, key,
                      array ? "array" : "object");
    return ST_OK;
}

/* A seed: a non-negative integer, or a decimal string for values >= 2^63. */
static st_code jseed(const json_t *obj, const char *key, uint64_t *out, const char *where,
                     st_err *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return ST_OK;
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return ST_OK;
    }
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno)
        return st_set(err, ST_ERR_FORMAT, "%s: '%s' is not a 64-bit seed", where, key);
    *out = x;
    return ST_OK;
}

/* One node as read from the file, before the forest is built. */
typedef struct load_node {
    int32_t id, parent, token, depth;
    float logprob;
    uint8_t flags;
    uint16_t tag;
    const char *strategy; /* borrowed from the JSON tree, NULL: no metadata */
    uint64_t seed;
    double score;         /* NAN: none */
    const char *name;     /* borrowed from the JSON tree, NULL: none */
    const json_t *topk;   /* NULL: none */
    int32_t ppos;         /* position of the parent in the table, -1 for a root */
    int32_t first, last, next; /* children, in file order (positions) */
} load_node;

typedef struct load_key { int32_t id, pos; } load_key;

static int load_key_cmp(const void *a, const void *b) {
    int32_t x = ((const load_key *)a)->id, y = ((const load_key *)b)->id;
    return (x > y) - (x < y);
}

static int32_t load_find(const load_key *keys, int32_t n, int32_t id) {
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (keys[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo].id == id ? keys[lo].pos : -1;
}

static st_code load_node_fields(const json_t *o, int32_t top_k, int32_t n_vocab, load_node *nd,
                                const char *where, st_err *err) {
    if (!json_is_object(o)) return st_set(err, ST_ERR_FORMAT, "%s is not an object", where);
    int64_t id, parent, token, depth, tag = 0;
    st_code rc;
    if ((rc = jint(o, "id", true, 0, INT32_MAX, &id, where, err)) ||
        (rc = jint(o, "parent", true, -1, INT32_MAX, &parent, where, err)) ||
        (rc = jint(o, "token", true, 0, INT32_MAX, &token, where, err)) ||
        (rc = jint(o, "depth", true, 0, SESSION_MAX_DEPTH, &depth, where, err)) ||
        (rc = jint(o, "tag", false, 0, UINT16_MAX, &tag, where, err)))
        return rc;
    if (n_vocab > 0 && token >= n_vocab)
        return st_set(err, ST_ERR_FORMAT, "%s: token %lld is outside the vocabulary of %d", where,
                      (long long)token, n_vocab);
    *nd = (load_node){.id = (int32_t)id, .parent = (int32_t)parent, .token = (int32_t)token,
                      .depth = (int32_t)depth, .tag = (uint16_t)tag, .logprob = NAN,
                      .first = -1, .last = -1, .next = -1};
    const json_t *lp = json_object_get(o, "logprob");
    if (lp && !json_is_null(lp)) {
        double x = 0;
        if ((rc = jnum(o, "logprob", true, &x, where, err))) return rc;
        nd->logprob = (float)x;
    }
    const json_t *fl = json_object_get(o, "flags");
    if (fl) {
        if (!json_is_array(fl)) return st_set(err, ST_ERR_FORMAT, "%s: 'flags' is not an array", where);
        for (size_t j = 0; j < json_array_size(fl); j++) {
            const char *s = json_string_value(json_array_get(fl, j));
            if (s && !strcmp(s, "finished")) nd->flags |= FOREST_FINISHED;
            else if (s && !strcmp(s, "bookmark")) nd->flags |= FOREST_BOOKMARK;
            else return st_set(err, ST_ERR_FORMAT, "%s: unknown flag (not \"finished\" or "
                               "\"bookmark\")", where);
        }
    }
    if ((rc = jstr(o, "strategy", false, &nd->strategy, where, err)) ||
        (rc = jseed(o, "seed", &nd->seed, where, err)))
        return rc;
    nd->score = NAN; /* none, unless the file has one (older files never do) */
    if ((rc = jnum(o, "score", false, &nd->score, where, err)) || (rc = jstr(o, "name", false, &nd->name, where, err)))
        return rc;
    if (nd->name && strlen(nd->name) > SESSION_MAX_NAME)
        return st_set(err, ST_ERR_FORMAT, "%s: 'name' is longer than %d bytes", where, SESSION_MAX_NAME);
    if (nd->strategy && (!*nd->strategy || strlen(nd->strategy) > SESSION_MAX_STRATEGY))
        return st_set(err, ST_ERR_FORMAT, "%s: 'strategy' is empty or longer than %d bytes", where,
                      SESSION_MAX_STRATEGY);
    const json_t *tk = json_object_get(o, "topk");
    if (tk) {
        if (!json_is_array(tk)) return st_set(err, ST_ERR_FORMAT, "%s: 'topk' is not an array", where);
        if (json_array_size(tk) > (size_t)top_k)
            return st_set(err, ST_ERR_FORMAT, "%s: %zu top-k alternatives, more than top_k %d",
                          where, json_array_size(tk), top_k);
        for (size_t j = 0; j < json_array_size(tk); j++) {
            const json_t *pr = json_array_get(tk, j), *a = json_array_get(pr, 0),
                         *b = json_array_get(pr, 1);
            json_int_t t = json_is_integer(a) ? json_integer_value(a) : -1;
            if (!json_is_array(pr) || json_array_size(pr) != 2 || t < 0 ||
                (n_vocab > 0 && t >= n_vocab) || t > INT32_MAX ||
                !(json_is_number(b) || json_is_null(b)))
                return st_set(err, ST_ERR_FORMAT, "%s: top-k entry %zu is not a [token in the "
                              "vocabulary, logprob] pair", where, j);
        }
        nd->topk = tk;
    }
    return ST_OK;
}

/* Checks the node table's graph: unique ids, known parents, no cycle, depths. Fills
 * ppos and the child lists. */
static st_code load_link(load_node *nd, int32_t n, st_err *err) {
    load_key *keys = malloc(sizeof *keys * (size_t)(n ? n : 1));
    uint8_t *mark = calloc((size_t)(n ? n : 1), 1);
    st_code rc = ST_OK;
    if (!keys || !mark) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
        goto out;
    }
    for (int32_t i = 0; i < n; i++) keys[i] = (load_key){nd[i].id, i};
    qsort(keys, (size_t)n, sizeof *keys, load_key_cmp);
    for (int32_t i = 1; i < n; i++)
        if (keys[i].id == keys[i - 1].id) {
            rc = st_set(err, ST_ERR_FORMAT, "node id %d appears twice", keys[i].id);
            goto out;
        }
    for (int32_t i = 0; i < n; i++) {
        nd[i].ppos = nd[i].parent < 0 ? -1 : load_find(keys, n, nd[i].parent);
        if (nd[i].parent >= 0 && nd[i].ppos < 0) {
            rc = st_set(err, ST_ERR_FORMAT, "node %d: parent %d is not a node of this session",
                        nd[i].id, nd[i].parent);
            goto out;
        }
    }
    /* cycles: walk up from each node, marking the walk 1; meeting a 1 is a cycle, meeting
     * a 2 (or a root) ends it; then the walk is marked 2 */
    for (int32_t i = 0; i < n; i++) {
        int32_t j = i;
        while (j >= 0 && mark[j] == 0) {
            mark[j] = 1;
            j = nd[j].ppos;
        }
        if (j >= 0 && mark[j] == 1) {
            rc = st_set(err, ST_ERR_FORMAT, "node %d is on a parent cycle", nd[j].id);
            goto out;
        }
        for (j = i; j >= 0 && mark[j] == 1; j = nd[j].ppos) mark[j] = 2;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t p = nd[i].ppos;
        if (p < 0) continue;
        if (nd[i].depth != nd[p].depth + 1) {
            rc = st_set(err, ST_ERR_FORMAT, "node %d: depth %d is not its parent %d's depth %d + 1",
                        nd[i].id, nd[i].depth, nd[p].id, nd[p].depth);
            goto out;
        }
        if (nd[p].last >= 0) nd[nd[p].last].next = i;
        else nd[p].first = i;
        nd[p].last = i;
    }
out:
    free(keys), free(mark);
    return rc;
}

/* Builds the forest from a validated table in DFS order (roots and children in file
 * order), mapping table positions to new ids. */
static forest *load_build(load_node *nd, int32_t n, int32_t n_slots, int32_t top_k,
                          session_meta **meta_out, st_err *err) {
    forest *f = forest_init(n_slots, top_k);
    forest_id *nid = malloc(sizeof *nid * (size_t)(n ? n : 1));
    session_meta *meta = NULL;
    st_code rc = ST_OK;
    if (!f || !nid) {
        rc = st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
        goto out;
    }
    int32_t ids[256];
    float lps[256];
    for (int32_t r = 0; r < n && !rc; r++) {
        if (nd[r].ppos >= 0) continue;
        /* preorder walk of r's tree through the child lists, iteratively */
        int32_t i = r;
        while (i >= 0 && !rc) {
            load_node *x = &nd[i];
            rc = x->ppos < 0
                     ? forest_add_root(f, &x->token, &x->logprob, 1, x->depth, &nid[i], err)
                     : forest_append(f, nid[x->ppos], &x->token, &x->logprob, 1, &nid[i], err);
            if (rc) break;
            forest_set_flags(f, nid[i], x->flags, 0);
            forest_set_tag(f, nid[i], x->tag);
            if (x->strategy || !isnan(x->score) || x->name) {
                if (!meta && !(meta = session_meta_init())) {
                    rc = st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
                    break;
                }
                if (x->strategy && (rc = session_meta_set(meta, f, nid[i], x->strategy, x->seed, err))) break;
                if (!isnan(x->score) && (rc = session_meta_set_score(meta, f, nid[i], x->score, err))) break;
                if (x->name && (rc = session_meta_set_name(meta, f, nid[i], x->name, err))) break;
            }
            if (x->topk) {
                int32_t k = (int32_t)json_array_size(x->topk);
                for (int32_t j = 0; j < k; j++) {
                    const json_t *pr = json_array_get(x->topk, (size_t)j), *b = json_array_get(pr, 1);
                    ids[j] = (int32_t)json_integer_value(json_array_get(pr, 0));
                    lps[j] = json_is_null(b) ? NAN : (float)json_number_value(b);
                }
                forest_store_topk(f, forest_index(nid[i]), ids, lps, k);
            }
            /* next in preorder: first child, else the next sibling of the nearest
             * ancestor (within this tree) that has one */
            if (x->first >= 0) {
                i = x->first;
                continue;
            }
            while (i >= 0 && i != r && nd[i].next < 0) i = nd[i].ppos;
            i = i >= 0 && i != r ? nd[i].next : -1;
        }
    }
out:
    free(nid);
    if (rc) {
        forest_free(f);
        session_meta_free(meta);
        return NULL;
    }
    *meta_out = meta;
    return f;
}

static st_code load_model(const json_t *root, session_model_id *mid, st_err *err) {
    const json_t *m;
    const char *file, *sha;
    int64_t size, nv;
    st_code rc;
    if ((rc = jobj(root, "model", false, &m, "the session", err)) ||
        (rc = jstr(m, "file", true, &file, "model", err)) ||
        (rc = jstr(m, "sha256", true, &sha, "model", err)) ||
        (rc = jint(m, "size", true, 0, INT64_MAX, &size, "model", err)) ||
        (rc = jint(m, "n_vocab", true, 0, INT32_MAX, &nv, "model", err)))
        return rc;
    size_t n = strlen(sha);
    if ((n != 0 && n != 64) || strspn(sha, "0123456789abcdef") != n)
        return st_set(err, ST_ERR_FORMAT, "model: 'sha256' is not 64 lower-case hex digits");
    snprintf(mid->file, sizeof mid->file, "%s", file);
    memcpy(mid->sha256, sha, n + 1);
    mid->size = (uint64_t)size;
    mid->n_vocab = (int32_t)nv;
    return ST_OK;
}

/* The informational "branches" texts into s, when the file has them as saved (an array of
 * objects with a string "text"); anything else there is ignored, as loading ignores them. */
static st_code load_branch_texts(const json_t *root, session_settings *s, st_err *err) {
    const json_t *br = json_object_get(root, "branches");
    size_t n = json_is_array(br) ? json_array_size(br) : 0;
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_object_get(json_array_get(br, i), "text"))) return ST_OK;
    if (n == 0 || n > INT32_MAX / 2) return ST_OK;
    if (!(s->branch_text = calloc(n, sizeof *s->branch_text)))
        return st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_object_get(json_array_get(br, i), "text");
        if (!(s->branch_text[i] = strndup(json_string_value(t), json_string_length(t))))
            return st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
        s->n_branch_text = (int32_t)i + 1;
    }
    return ST_OK;
}

/* The sampler's settings through sample_param_set, the check the options and :set use,
 * so that a file cannot hand the sampler what a user could not. A value it refuses keeps
 * its default, with a warning in s->warning: one bad setting (an autosave from a version
 * that took it) does not lose the tree. A missing or non-numeric field is damage. */
static st_code load_sampler(const json_t *smp, session_settings *s, st_err *err) {
    static const char *const keys[] = {"temp", "top_k", "top_p", "min_p"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        double v;
        st_err bad = {0};
        st_code rc = jnum(smp, keys[i], true, &v, "sampler", err);
        if (rc) return rc;
        if (sample_param_set(&s->sample, keys[i], v, &bad)) {
            size_t n = strlen(s->warning);
            snprintf(s->warning + n, sizeof s->warning - n, "%ssampler: %s; using the default",
                     n ? "; " : "", bad.msg);
        }
    }
    return jseed(smp, "seed", &s->sample.seed, "sampler", err);
}

static st_code load_settings(const json_t *root, session_settings *s, st_err *err) {
    const json_t *set, *smp, *extra;
    const char *tmpl;
    st_code rc;
    if ((rc = jobj(root, "settings", false, &set, "the session", err)) ||
        (rc = jobj(set, "sampler", false, &smp, "settings", err)) ||
        (rc = load_sampler(smp, s, err)) ||
        (rc = jstr(set, "chat_template", true, &tmpl, "settings", err)) ||
        (rc = jobj(set, "extra", false, &extra, "settings", err)))
        return rc;
    if (strlen(tmpl) >= sizeof s->chat_template)
        return st_set(err, ST_ERR_FORMAT, "settings: 'chat_template' is too long");
    snprintf(s->chat_template, sizeof s->chat_template, "%s", tmpl);
    if (json_object_size(extra) > SESSION_MAX_EXTRA)
        return st_set(err, ST_ERR_FORMAT, "settings: %zu extra settings, more than the %d a "
                      "session holds", json_object_size(extra), SESSION_MAX_EXTRA);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)extra, key, v) {
        if (!json_is_string(v))
            return st_set(err, ST_ERR_FORMAT, "settings: extra '%.64s' is not a string", key);
        if ((rc = session_settings_set(s, key, json_string_value(v), err)))
            return rc == ST_ERR_ARG ? st_set(err, ST_ERR_FORMAT, "settings: an empty extra key") : rc;
    }
    return ST_OK;
}

static forest *load_json(const json_t *root, const session_load_params *p, session_settings *s,
                         session_model_id *saved, st_err *err) {
    const char *fmt;
    int64_t ver, n_slots, top_k;
    const json_t *fo, *nodes;
    st_code rc;
    if (!json_is_object(root)) {
        st_set(err, ST_ERR_FORMAT, "a session file holds one JSON object");
        return NULL;
    }
    if ((rc = jstr(root, "format", true, &fmt, "the session", err)) ||
        (rc = jint(root, "version", true, 1, INT32_MAX, &ver, "the session", err)))
        return NULL;
    if (strcmp(fmt, SESSION_FORMAT)) {
        st_set(err, ST_ERR_FORMAT, "not a session file (format '%.64s', expected '%s')", fmt,
               SESSION_FORMAT);
        return NULL;
    }
    if (ver > SESSION_VERSION) {
        st_set(err, ST_ERR_UNSUPPORTED, "session format version %lld is newer than this "
               "program's (%d)", (long long)ver, SESSION_VERSION);
        return NULL;
    }
    if ((rc = load_model(root, saved, err))) return NULL;
    if (p->model && !p->force && !session_model_id_same(p->model, saved)) {
        char a[400], b[400];
        st_set(err, ST_ERR_ARG, "the session was saved with model %s, but the model in use is "
               "%s; load it with that model (or force loading with the other one)",
               session_model_id_str(saved, a, sizeof a), session_model_id_str(p->model, b, sizeof b));
        return NULL;
    }
    if ((rc = load_settings(root, s, err)) || (rc = load_branch_texts(root, s, err)) ||
        (rc = jobj(root, "forest", false, &fo, "the session", err)) ||
        (rc = jint(fo, "n_slots", true, 1, SESSION_MAX_SLOTS, &n_slots, "forest", err)) ||
        (rc = jint(fo, "top_k", true, 0, 255, &top_k, "forest", err)) ||
        (rc = jobj(fo, "nodes", true, &nodes, "forest", err)))
        return NULL;
    int32_t nv = p->n_vocab > 0 ? p->n_vocab
                 : p->model && p->model->n_vocab > 0 ? p->model->n_vocab : saved->n_vocab;
    size_t n = json_array_size(nodes);
    if (n > INT32_MAX / 2) {
        st_set(err, ST_ERR_FORMAT, "forest: too many nodes (%zu)", n);
        return NULL;
    }
    load_node *nd = malloc(sizeof *nd * (n ? n : 1));
    if (!nd) {
        st_set(err, ST_ERR_NOMEM, "out of memory loading the session");
        return NULL;
    }
    char where[48];
    for (size_t i = 0; i < n && !rc; i++) {
        snprintf(where, sizeof where, "forest node entry %zu", i);
        rc = load_node_fields(json_array_get(nodes, i), (int32_t)top_k, nv, &nd[i], where, err);
    }
    forest *f = NULL;
    session_meta *meta = NULL;
    if (!rc && !(rc = load_link(nd, (int32_t)n, err)))
        f = load_build(nd, (int32_t)n, p->n_slots > 0 ? p->n_slots : (int32_t)n_slots,
                       (int32_t)top_k, &meta, err);
    free(nd);
    if (f) s->meta = meta;
    return f;
}

forest *session_load_mem(const char *json, size_t len, const session_load_params *p,
                         session_settings *s, session_model_id *saved, st_err *err) {
    session_load_params dp = session_load_default_params();
    session_model_id sv;
    memset(&sv, 0, sizeof sv);
    *s = session_settings_default();
    if (!p) p = &dp;
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        st_set(err, ST_ERR_FORMAT, "not valid JSON at line %d, column %d: %s", je.line, je.column,
               je.text);
        return NULL;
    }
    forest *f = load_json(root, p, s, &sv, err);
    json_decref(root); /* strategy names were copied into the meta table */
    if (!f) {
        session_settings_free(s);
        memset(&sv, 0, sizeof sv);
    }
    if (saved) *saved = sv;
    return f;
}

forest *session_load(const char *path, const session_load_params *p, session_settings *s,
                     session_model_id *saved, st_err *err) {
    *s = session_settings_default();
    if (saved) memset(saved, 0, sizeof *saved);
    size_t n;
    char *buf = infile_read(path, "session", SESSION_MAX_FILE, &n, err);
    if (!buf) return NULL;
    forest *f = session_load_mem(buf, n, p, s, saved, err);
    free(buf);
    if (!f) st_prefix(err, "session '%s'", path);
    return f;
}
