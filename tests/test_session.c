/* test_session.c - sessions: SHA-256 against the NIST vectors, model identity (which bytes
 * are hashed, and that it is fast), round trips of random forests (structure, tokens,
 * logprobs, flags, tags, per-node metadata, top-k, settings; forest_check after load),
 * recomputing a loaded forest gives bitwise the logits it had before saving, atomic saves
 * (a failed save leaves the old file and no PATH.tmp), a corpus of damaged files (each
 * refused with ST_ERR_FORMAT naming the problem, the file untouched; every truncation; a
 * few thousand random byte edits that must never crash: run it under ASan), a model
 * mismatch (ST_ERR_ARG naming both models, and the override), and the scores kept through
 * save and load (the Markdown export and the autosaves: test_session_export.c). Uses random-weight models from engine/convert/mkmodel.h. */
#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <time.h>

#include "forest/forest.h"
#include "convert/mkmodel.h"
#include "session/session.h"
#include "session/autosave.h"
#include "session/sha256.h"
#include "strategy/grow.h"
#include "forest/step.h"
#include "base/clock.h"
#include "t.h"

typedef struct rng { uint64_t s; } rng;
static uint32_t rnd(rng *r, uint32_t n) {
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)((r->s >> 33) % n);
}

static char tmpdir[64];

static void spit(const char *path, const char *s, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(s, 1, n, f);
    fclose(f);
}

/* ---------------- SHA-256 ---------------- */

static void test_sha256(void) {
    static const struct { const char *msg, *hex; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmn"
         "opqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    uint8_t d[32];
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        sha256(v[i].msg, strlen(v[i].msg), d);
        sha256_hex(d, hex);
        T_CHECK(!strcmp(hex, v[i].hex), "sha256 vector %zu: %s", i, hex);
        /* the same fed one byte at a time */
        sha256_ctx c;
        sha256_init(&c);
        for (size_t j = 0; v[i].msg[j]; j++) sha256_update(&c, v[i].msg + j, 1);
        sha256_final(&c, d);
        sha256_hex(d, hex);
        T_CHECK(!strcmp(hex, v[i].hex), "sha256 vector %zu bytewise: %s", i, hex);
    }
    /* one million 'a', in uneven pieces that straddle block boundaries */
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_ctx c;
    sha256_init(&c);
    for (size_t off = 0, k = 1; off < 1000000; off += k, k = k * 7 % 1000 + 1)
        sha256_update(&c, a + off, off + k > 1000000 ? 1000000 - off : k);
    sha256_final(&c, d);
    sha256_hex(d, hex);
    T_CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
            "sha256 of a million 'a': %s", hex);
    free(a);
}

/* ---------------- models ---------------- */

static model *make_model(const char *name, uint64_t seed, int32_t n_vocab, int32_t embd) {
    mkmodel_params mp = mkmodel_default_params();
    mp.seed = seed;
    mp.n_vocab = n_vocab;
    mp.n_embd = embd;
    mp.n_ff = 3 * embd;
    mp.n_ctx = 2048;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    st_err err = {0};
    model *m = NULL;
    if (mkmodel_write(&mp, path, &err) == ST_OK) m = model_load(path, &err);
    T_CHECK(m != NULL, "model %s: %s", name, err.msg);
    return m;
}

static model_ctx *new_ctx(const model *m, int32_t n_slots) {
    model_ctx_params cp = model_ctx_default_params();
    cp.n_slots = n_slots;
    cp.max_rows = 64;
    cp.n_threads = 2;
    st_err err = {0};
    model_ctx *c = model_ctx_init(m, &cp, &err);
    T_CHECK(c != NULL, "ctx: %s", err.msg);
    return c;
}

/* The identity hashes [0, D + 1 MiB) and the last MiB: recompute that from the file. */
static void test_identity(const model *big, const char *path) {
    session_model_id id;
    st_err err = {0};
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    T_CHECK(session_model_id_of(big->gguf, path, big->hp.n_vocab, &id, &err) == ST_OK, "id: %s", err.msg);
    double ms = 1e3 * ((double)clock() / CLOCKS_PER_SEC - t0);
    size_t n;
    char *file = t_slurp(path, &n);
    uint64_t d = gguf_data_offset(big->gguf);
    T_CHECK(file && n == id.size && n > d + 2 * SESSION_HASH_EDGE,
            "the big model has more than 2 MiB of data (%zu bytes)", n);
    if (file && n > d + 2 * SESSION_HASH_EDGE) {
        sha256_ctx c;
        uint8_t dig[32];
        char hex[65];
        sha256_init(&c);
        sha256_update(&c, file, d + SESSION_HASH_EDGE);
        sha256_update(&c, file + n - SESSION_HASH_EDGE, SESSION_HASH_EDGE);
        sha256_final(&c, dig);
        sha256_hex(dig, hex);
        T_CHECK(!strcmp(hex, id.sha256), "identity = sha256(head + first MiB + last MiB)");
        sha256(file, n, dig);
        sha256_hex(dig, hex);
        T_CHECK(strcmp(hex, id.sha256) != 0, "the big model is not hashed whole");
    }
    T_CHECK(!strcmp(id.file, strrchr(path, '/') + 1), "identity keeps the base name: %s", id.file);
    T_CHECK(ms < 200, "identity took %.1f ms", ms);
    free(file);
}

/* ---------------- random forests ---------------- */

static const char *strategies[] = {"cot", "beam", "ask", "grow"};

/* Builds a random forest on m: roots at offsets, forks and chains, some steps run in
 * between, prunes, flags, tags, logprobs and metadata. The last step's leaf logits are
 * left in *plan. */
static forest *random_forest(const model *m, model_ctx *c, step_plan *plan, session_meta *meta,
                             uint64_t seed) {
    rng r = {seed * 977 + 3};
    int32_t V = m->hp.n_vocab;
    forest *f = forest_init(1024, 4);
    st_err err = {0};
    int32_t toks[32];
    float lps[32];
    int32_t n_roots = 1 + rnd(&r, 3);
    for (int32_t k = 0; k < n_roots; k++) {
        int32_t len = 1 + rnd(&r, 20), pos0 = rnd(&r, 2) ? 0 : (int32_t)rnd(&r, 50);
        for (int32_t i = 0; i < len; i++) toks[i] = rnd(&r, V);
        forest_add_root(f, toks, NULL, len, pos0, NULL, &err);
    }
    for (int round = 0; round < 4; round++) {
        int32_t picks = 1 + rnd(&r, 3);
        for (int32_t k = 0; k < picks; k++) {
            forest_id id = forest_id_at(f, rnd(&r, forest_capacity(f)));
            if (id == FOREST_NONE) continue;
            int32_t kids = 1 + rnd(&r, 4);
            for (int32_t j = 0; j < kids; j++) {
                int32_t len = 1 + rnd(&r, 8);
                for (int32_t i = 0; i < len; i++) {
                    toks[i] = rnd(&r, V);
                    lps[i] = -(float)rnd(&r, 100000) / 7919.0f;
                }
                forest_append(f, id, toks, rnd(&r, 2) ? lps : NULL, len, NULL, &err);
            }
        }
        if (rnd(&r, 2)) T_CHECK(step_forest(f, plan, c, &err) == ST_OK, "step: %s", err.msg);
        if (rnd(&r, 3) == 0) {
            forest_id id = forest_id_at(f, rnd(&r, forest_capacity(f)));
            const forest_node *n = forest_get(f, id);
            if (n && n->parent >= 0) forest_prune(f, id, &err);
        }
    }
    for (int32_t i = 0; i < forest_capacity(f); i++) {
        forest_id id = forest_id_at(f, i);
        if (id == FOREST_NONE) continue;
        uint32_t x = rnd(&r, 8);
        if (x == 0) forest_set_flags(f, id, FOREST_BOOKMARK, 0);
        if (x == 1) forest_set_flags(f, id, FOREST_FINISHED | FOREST_BOOKMARK, 0);
        if (rnd(&r, 4) == 0) forest_set_tag(f, id, (uint16_t)rnd(&r, 65536));
        if (meta && rnd(&r, 3) == 0) {
            uint64_t sd = (uint64_t)rnd(&r, 1u << 31) << 33 | rnd(&r, 1000);
            session_meta_set(meta, f, id, strategies[rnd(&r, 4)], sd, &err);
        }
    }
    /* fresh tips, so the last step scores some leaves */
    for (int32_t k = 0, done = 0; k < 64 && done < 3; k++) {
        forest_id id = forest_id_at(f, rnd(&r, forest_capacity(f)));
        toks[0] = rnd(&r, V);
        done += id != FOREST_NONE && forest_append(f, id, toks, NULL, 1, NULL, &err) == ST_OK;
    }
    T_CHECK(step_forest(f, plan, c, &err) == ST_OK, "final step: %s", err.msg);
    return f;
}

/* DFS positions of the live nodes of f (by index), -1 elsewhere. */
static int32_t *dfs_pos(const forest *f) {
    int32_t *p = malloc(sizeof *p * (size_t)(forest_capacity(f) + 1)), k = 0;
    for (int32_t i = 0; i < forest_capacity(f); i++) p[i] = -1;
    for (int32_t i = forest_dfs_first(f); i >= 0; i = forest_dfs_next(f, i)) p[i] = k++;
    return p;
}

/* a and b hold the same nodes in the same DFS order with equal fields and metadata. */
static void check_same(const forest *a, const session_meta *ma, const forest *b,
                       const session_meta *mb, const char *what) {
    T_CHECK(forest_n_live(a) == forest_n_live(b), "%s: %d vs %d nodes", what, forest_n_live(a),
            forest_n_live(b));
    int32_t *pa = dfs_pos(a), *pb = dfs_pos(b);
    int bad = 0, n_meta = 0;
    int32_t i = forest_dfs_first(a), j = forest_dfs_first(b);
    for (; i >= 0 && j >= 0 && !bad; i = forest_dfs_next(a, i), j = forest_dfs_next(b, j)) {
        const forest_node *x = forest_node_at(a, i), *y = forest_node_at(b, j);
        forest_id ia = forest_id_at(a, i), ib = forest_id_at(b, j);
        bool lp = isnan(x->logprob) ? isnan(y->logprob) : x->logprob == y->logprob;
        int32_t ppa = x->parent < 0 ? -1 : pa[x->parent], ppb = y->parent < 0 ? -1 : pb[y->parent];
        uint8_t keep = FOREST_FINISHED | FOREST_BOOKMARK;
        if (x->token != y->token || x->depth != y->depth || !lp || ppa != ppb ||
            (x->flags & keep) != (y->flags & keep) || x->tag != y->tag) {
            bad++;
            fprintf(stderr, "%s: node %d/%d differs\n", what, i, j);
        }
        const char *sa = NULL, *sb = NULL;
        uint64_t da = 0, db = 0;
        bool ha = session_meta_get(ma, a, ia, &sa, &da), hb = session_meta_get(mb, b, ib, &sb, &db);
        if (ha != hb || (ha && (strcmp(sa, sb) || da != db))) {
            bad++;
            fprintf(stderr, "%s: metadata of node %d differs\n", what, i);
        }
        n_meta += ha;
        int32_t ka[8], kb[8];
        float la[8], lb[8];
        int32_t na = forest_topk(a, ia, ka, la, 8), nb = forest_topk(b, ib, kb, lb, 8);
        if (na != nb || memcmp(ka, kb, sizeof *ka * (size_t)na) || memcmp(la, lb, sizeof *la * (size_t)na)) {
            bad++;
            fprintf(stderr, "%s: top-k of node %d differs (%d vs %d)\n", what, i, na, nb);
        }
    }
    T_CHECK(!bad && i < 0 && j < 0, "%s: same nodes, fields, metadata and top-k", what);
    T_CHECK(ma == NULL || n_meta > 0, "%s: some nodes carry metadata", what);
    free(pa), free(pb);
}

static void test_round_trip(const model *m, const session_model_id *mid, const tok *tk) {
    char path[160];
    snprintf(path, sizeof path, "%s/rt.json", tmpdir);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        model_ctx *c = new_ctx(m, 1024), *c2 = new_ctx(m, 1024);
        step_plan p1, p2;
        step_plan_init(&p1);
        step_plan_init(&p2);
        session_settings s = session_settings_default();
        s.meta = session_meta_init();
        forest *f = random_forest(m, c, &p1, s.meta, seed);
        s.sample.temp = 0.7f;
        s.sample.top_k = 17;
        s.sample.top_p = 0.9f;
        s.sample.min_p = 0.01f;
        s.sample.seed = UINT64_MAX - seed; /* above 2^63: written as a string */
        snprintf(s.chat_template, sizeof s.chat_template, "chatml");
        st_err err = {0};
        session_settings_set(&s, "cot.k", "8", &err);
        session_settings_set(&s, "beam.alpha", "0.6", &err);
        session_settings_set(&s, "cot.k", "4", &err); /* replaces */
        T_CHECK(session_save(path, f, &s, mid, tk, &err) == ST_OK, "save: %s", err.msg);
        T_CHECK(access(path, R_OK) == 0, "the session file exists");
        char tmp[200];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        T_CHECK(access(tmp, F_OK) != 0, "no PATH.tmp is left after a save");

        session_load_params lp = session_load_default_params();
        lp.model = mid;
        lp.n_slots = 1024;
        session_settings s2;
        session_model_id saved;
        forest *g = session_load(path, &lp, &s2, &saved, &err);
        T_CHECK(g != NULL, "load: %s", err.msg);
        if (g) {
            T_CHECK(forest_check(g, &err) == ST_OK, "loaded forest invariants: %s", err.msg);
            T_CHECK(forest_n_pending(g) == forest_n_live(g), "loaded nodes are all pending");
            check_same(f, s.meta, g, s2.meta, "round trip");
            T_CHECK(session_model_id_same(&saved, mid) && !strcmp(saved.file, mid->file) &&
                        saved.n_vocab == mid->n_vocab, "saved model identity read back");
            T_CHECK(!memcmp(&s.sample, &s2.sample, sizeof s.sample), "sampler settings read back");
            T_CHECK(!strcmp(s2.chat_template, "chatml"), "chat template read back");
            const char *k = session_settings_get(&s2, "cot.k"), *a = session_settings_get(&s2, "beam.alpha");
            T_CHECK(s2.n_kv == 2 && k && !strcmp(k, "4") && a && !strcmp(a, "0.6"),
                    "free-form settings read back");
            /* recompute: the next step gives every leaf of the last step the same logits */
            T_CHECK(step_forest(g, &p2, c2, &err) == ST_OK, "step after load: %s", err.msg);
            int32_t *pa = dfs_pos(f), *pb = dfs_pos(g), *at = malloc(sizeof(int32_t) * (size_t)forest_capacity(f) + 4);
            for (int32_t i = 0; i < forest_capacity(g); i++)
                if (pb[i] >= 0) at[pb[i]] = i;
            int32_t same = 0, close = 0;
            for (int32_t o = 0; o < p1.n_out; o++) {
                int32_t ib = at[pa[forest_index(p1.out_node[o])]];
                const float *lb = step_logits_of(&p2, forest_id_at(g, ib));
                const float *la = p1.logits + (size_t)o * p1.n_vocab;
                if (lb && !memcmp(la, lb, sizeof(float) * (size_t)p1.n_vocab)) same++;
                if (lb && t_nerr(lb, la, p1.n_vocab) <= 1e-5) close++;
            }
            T_CHECK(p1.n_out > 0 && close == p1.n_out, "recomputed logits close: %d of %d", close, p1.n_out);
            T_CHECK(same == p1.n_out, "recomputed logits bitwise equal: %d of %d", same, p1.n_out);
            free(pa), free(pb), free(at);
            /* saving the loaded forest and loading it again changes nothing */
            char path2[200];
            snprintf(path2, sizeof path2, "%s.2", path);
            session_settings s3;
            forest *h = NULL;
            if (session_save(path2, g, &s2, mid, NULL, &err) == ST_OK)
                h = session_load(path2, &lp, &s3, NULL, &err);
            T_CHECK(h != NULL, "second round trip: %s", err.msg);
            if (h) {
                check_same(g, s2.meta, h, s3.meta, "second round trip");
                forest_free(h);
                session_settings_free(&s3);
            }
            unlink(path2);
            forest_free(g);
        }
        session_settings_free(&s2);
        session_settings_free(&s);
        forest_free(f);
        step_plan_free(&p1);
        step_plan_free(&p2);
        model_ctx_free(c);
        model_ctx_free(c2);
    }
    unlink(path);
}

/* A chain of 50,000 nodes and an empty forest: nothing in the code recurses. */
static void test_deep_and_empty(void) {
    char path[160];
    snprintf(path, sizeof path, "%s/deep.json", tmpdir);
    forest *f = forest_init(64, 0);
    int32_t n = 50000, *toks = malloc(sizeof *toks * (size_t)n);
    for (int32_t i = 0; i < n; i++) toks[i] = i % 100;
    st_err err = {0};
    forest_id last;
    forest_add_root(f, toks, NULL, n, 3, &last, &err);
    forest_append(f, last, toks, NULL, 5, NULL, &err);
    forest_append(f, last, toks, NULL, 7, NULL, &err);
    session_settings s = session_settings_default();
    T_CHECK(session_save(path, f, &s, NULL, NULL, &err) == ST_OK, "save deep: %s", err.msg);
    session_settings s2;
    forest *g = session_load(path, NULL, &s2, NULL, &err);
    T_CHECK(g && forest_check(g, &err) == ST_OK, "load deep: %s", err.msg);
    if (g) check_same(f, NULL, g, NULL, "deep chain");
    FILE *devnull = fopen("/dev/null", "w");
    T_CHECK(g && session_export_markdown(devnull, g, NULL, &s2, NULL, &err) == ST_OK,
            "markdown of a deep chain: %s", err.msg);
    fclose(devnull);
    forest_free(g);
    session_settings_free(&s2);
    forest_free(f);
    f = forest_init(64, 0);
    T_CHECK(session_save(path, f, &s, NULL, NULL, &err) == ST_OK, "save empty: %s", err.msg);
    g = session_load(path, NULL, &s2, NULL, &err);
    T_CHECK(g && forest_n_live(g) == 0, "load empty: %s", err.msg);
    forest_free(g);
    forest_free(f);
    session_settings_free(&s2);
    free(toks);
    unlink(path);
}

/* CPU seconds of this process: unlike the wall clock, not stretched by the other tests
 * that make test runs beside this one. */
static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A node with 100,000 children is built and loaded in linear time (when every new child
 * walked its siblings, this load took 17 s), the children in creation order. */
static void test_wide(void) {
    char path[160];
    snprintf(path, sizeof path, "%s/wide.json", tmpdir);
    enum { N = 100000 };
    forest *f = forest_init(64, 0);
    st_err err = {0};
    forest_id root;
    int32_t one = 1;
    double t0 = cpu_now_s();
    forest_add_root(f, &one, NULL, 1, 0, &root, &err);
    for (int32_t i = 0; i < N; i++) {
        int32_t tok = i % 1000;
        forest_append(f, root, &tok, NULL, 1, NULL, &err);
    }
    double t_build = cpu_now_s() - t0;
    session_settings s = session_settings_default(), s2;
    T_CHECK(session_save(path, f, &s, NULL, NULL, &err) == ST_OK, "save wide: %s", err.msg);
    t0 = cpu_now_s();
    forest *g = session_load(path, NULL, &s2, NULL, &err);
    double t_load = cpu_now_s() - t0;
    fprintf(stderr, "wide: %d children built in %.3f s, loaded in %.3f s\n", N, t_build, t_load);
    double slack = 2; /* parsing the 5 MB of JSON dominates the load, slower under ASan */
#ifdef __SANITIZE_ADDRESS__
    slack = 8;
#endif
    T_CHECK(t_build < 1 && t_load < 1.5 * slack, "%d children: built in %.2f s, loaded in "
            "%.2f s", N, t_build, t_load);
    T_CHECK(g && forest_n_children(g, forest_id_at(g, forest_dfs_first(g))) == N,
            "load wide: %s", err.msg);
    if (g) check_same(f, NULL, g, NULL, "wide node");
    forest_free(g);
    forest_free(f);
    session_settings_free(&s2);
    unlink(path);
}

/* ---------------- atomicity ---------------- */

/* Entries of folder dir, "." and ".." not counted. */
static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

static void test_atomic(const forest *f, const session_model_id *mid) {
    char dir[160], path[200];
    snprintf(dir, sizeof dir, "%s/atomic", tmpdir);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/s.json", dir);
    session_settings s = session_settings_default();
    st_err err = {0};
    T_CHECK(session_save(path, f, &s, mid, NULL, &err) == ST_OK, "first save: %s", err.msg);
    size_t n0, n1;
    char *before = t_slurp(path, &n0), *after;
    s.sample.seed = 99; /* so a successful second save would differ */

    /* the temporary file cannot be created (the folder is gone) */
    char gone[220];
    snprintf(gone, sizeof gone, "%s/no/s.json", dir);
    T_CHECK(session_save(gone, f, &s, mid, NULL, &err) == ST_ERR_IO, "save into a missing folder fails");
    T_CHECK(strstr(err.msg, "unchanged") != NULL, "the message says the old file is kept: %s", err.msg);

    /* a token outside the vocabulary: refused before anything is written */
    session_model_id small = *mid;
    small.n_vocab = 1;
    T_CHECK(session_save(path, f, &s, &small, NULL, &err) == ST_ERR_ARG, "bad token refused");
    after = t_slurp(path, &n1);
    T_CHECK(after && n0 == n1 && !memcmp(before, after, n0), "the old file is intact (bad token)");
    free(after);

    /* the rename fails (the target is a non-empty directory): tmp is removed */
    char sub[220], subf[240];
    snprintf(sub, sizeof sub, "%s/d", dir);
    snprintf(subf, sizeof subf, "%s/x", sub);
    mkdir(sub, 0755);
    spit(subf, "x", 1);
    T_CHECK(session_save(sub, f, &s, mid, NULL, &err) == ST_ERR_IO, "rename onto a directory fails");
    T_CHECK(n_entries(dir) == 2, "the temporary file is removed after a failed rename (left: "
            "the session and the directory)");
    unlink(subf);
    rmdir(sub);

    /* a read-only directory (root ignores permissions, so only as another user) */
    chmod(dir, 0555);
    if (geteuid() != 0) {
        T_CHECK(session_save(path, f, &s, mid, NULL, &err) == ST_ERR_IO, "save into a read-only dir fails");
        after = t_slurp(path, &n1);
        T_CHECK(after && n0 == n1 && !memcmp(before, after, n0), "the old file is intact (read-only dir)");
        free(after);
    } else {
        T_SKIP("read-only directory case: running as root");
    }
    chmod(dir, 0755);

    /* and a good save replaces the file */
    T_CHECK(session_save(path, f, &s, mid, NULL, &err) == ST_OK, "second save: %s", err.msg);
    after = t_slurp(path, &n1);
    T_CHECK(after && (n0 != n1 || memcmp(before, after, n0)), "the second save replaced the file");
    T_CHECK(n_entries(dir) == 1, "no temporary file after the second save");
    free(after);
    free(before);
    unlink(path);
    rmdir(dir);
}

/* ---------------- damaged files ---------------- */

/* A small forest with every kind of field, for the damage corpus. */
static forest *small_forest(session_settings *s) {
    forest *f = forest_init(64, 3);
    st_err err = {0};
    int32_t t[] = {1, 20, 30, 40, 50};
    float lp[] = {-0.5f, -1.25f, -2.0f, -0.125f, -3.5f};
    forest_id mid, a, b;
    forest_add_root(f, t, NULL, 3, 0, &mid, &err);
    forest_append(f, mid, t + 3, lp + 3, 2, &a, &err);
    forest_append(f, mid, t + 1, lp, 2, &b, &err);
    forest_set_flags(f, a, FOREST_FINISHED | FOREST_BOOKMARK, 0);
    forest_set_tag(f, b, 7);
    int32_t ids[] = {5, 6, 7};
    float lps[] = {-0.1f, -2.5f, -3.0f};
    forest_store_topk(f, forest_index(mid), ids, lps, 3);
    s->meta = session_meta_init();
    session_meta_set(s->meta, f, a, "cot", 12345, &err);
    session_meta_set(s->meta, f, b, "beam", UINT64_MAX, &err);
    session_settings_set(s, "k", "v", &err);
    return f;
}

/* Dumps doc, loads it: it must fail with code and a message containing needle. */
static void expect_bad(json_t *doc, const session_load_params *lp, st_code code,
                       const char *needle, const char *what) {
    char *text = json_dumps(doc, JSON_ENCODE_ANY);
    session_settings s;
    st_err err = {0};
    forest *f = text ? session_load_mem(text, strlen(text), lp, &s, NULL, &err) : NULL;
    T_CHECK(f == NULL && err.code == code && strstr(err.msg, needle),
            "%s: want code %d with \"%s\", got %d \"%s\"", what, code, needle, err.code, err.msg);
    forest_free(f);
    if (f) session_settings_free(&s);
    free(text);
    json_decref(doc);
}

static json_t *node_of(json_t *doc, size_t i) {
    return json_array_get(json_object_get(json_object_get(doc, "forest"), "nodes"), i);
}

static void test_damaged(const session_model_id *mid) {
    char path[160];
    snprintf(path, sizeof path, "%s/bad.json", tmpdir);
    session_settings s = session_settings_default();
    forest *f = small_forest(&s);
    st_err err = {0};
    T_CHECK(session_save(path, f, &s, mid, NULL, &err) == ST_OK, "save small: %s", err.msg);
    size_t n;
    char *text = t_slurp(path, &n);
    json_t *doc = json_loads(text, 0, NULL);
    T_CHECK(doc != NULL, "the saved file is JSON");
    if (!doc) return;
    session_load_params lp = session_load_default_params();
    lp.model = mid;
    /* sanity: the pristine file loads, with its metadata */
    session_settings s2;
    forest *g = session_load_mem(text, n, &lp, &s2, NULL, &err);
    T_CHECK(g != NULL, "the pristine small file loads: %s", err.msg);
    if (g) check_same(f, s.meta, g, s2.meta, "small forest");
    forest_free(g);
    session_settings_free(&s2);

    /* one targeted edit per kind of damage */
    json_t *d;
    d = json_deep_copy(doc); json_object_del(d, "forest");
    expect_bad(d, &lp, ST_ERR_FORMAT, "'forest' is missing", "no forest");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 3), "parent", json_integer(999));
    expect_bad(d, &lp, ST_ERR_FORMAT, "parent 999 is not a node", "unknown parent");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 3), "parent", json_integer(-2));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'parent' is -2, outside", "parent out of range");
    d = json_deep_copy(doc); /* node 1's parent becomes its own child: a cycle 1 -> 2 -> 1 */
    json_object_set(node_of(d, 1), "parent", json_object_get(node_of(d, 2), "id"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "cycle", "parent cycle");
    d = json_deep_copy(doc);
    json_object_set(node_of(d, 4), "parent", json_object_get(node_of(d, 4), "id"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "cycle", "own parent");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 4), "depth", json_integer(9));
    expect_bad(d, &lp, ST_ERR_FORMAT, "is not its parent", "bad depth");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 0), "depth", json_integer(-1));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'depth' is -1", "negative depth");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 2), "token", json_integer(mid->n_vocab));
    expect_bad(d, &lp, ST_ERR_FORMAT, "outside the vocabulary", "token out of range");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 2), "token", json_string("x"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'token' is not an integer", "token of the wrong type");
    d = json_deep_copy(doc); json_object_del(node_of(d, 2), "depth");
    expect_bad(d, &lp, ST_ERR_FORMAT, "'depth' is missing", "missing depth");
    d = json_deep_copy(doc); json_object_set(node_of(d, 2), "id", json_object_get(node_of(d, 1), "id"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "appears twice", "duplicate id");
    d = json_deep_copy(doc); json_array_set_new(json_object_get(json_object_get(d, "forest"), "nodes"), 1, json_integer(3));
    expect_bad(d, &lp, ST_ERR_FORMAT, "entry 1 is not an object", "node not an object");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 3), "flags", json_pack("[s]", "weird"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "unknown flag", "unknown flag");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 1), "logprob", json_string("-1"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'logprob' is not a number", "logprob type");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 2), "topk", json_pack("[[i,f]]", 100000, -1.0));
    expect_bad(d, &lp, ST_ERR_FORMAT, "top-k entry 0", "top-k token out of range");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 2), "topk", json_pack("[[i,f],[i,f],[i,f],[i,f]]", 1, -1.0, 2, -1.0, 3, -1.0, 4, -1.0));
    expect_bad(d, &lp, ST_ERR_FORMAT, "more than top_k", "too many top-k");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 3), "seed", json_integer(-5));
    expect_bad(d, &lp, ST_ERR_FORMAT, "not a 64-bit seed", "negative seed");
    d = json_deep_copy(doc); json_object_set_new(node_of(d, 3), "tag", json_integer(70000));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'tag' is 70000", "tag out of range");
    d = json_deep_copy(doc); json_object_set_new(json_object_get(d, "forest"), "nodes", json_object());
    expect_bad(d, &lp, ST_ERR_FORMAT, "'nodes' is not an array", "nodes of the wrong type");
    d = json_deep_copy(doc); json_object_set_new(json_object_get(d, "forest"), "n_slots", json_integer(1LL << 40));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'n_slots' is", "huge n_slots");
    d = json_deep_copy(doc); json_object_set_new(json_object_get(d, "forest"), "top_k", json_integer(300));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'top_k' is 300", "top_k out of range");
    d = json_deep_copy(doc); json_object_set_new(d, "version", json_string("1"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'version' is not an integer", "version type");
    d = json_deep_copy(doc); json_object_set_new(d, "version", json_integer(SESSION_VERSION + 1));
    expect_bad(d, &lp, ST_ERR_UNSUPPORTED, "newer", "future version");
    d = json_deep_copy(doc); json_object_set_new(d, "format", json_string("something-else"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "not a session file", "wrong format");
    d = json_deep_copy(doc); json_object_set_new(json_object_get(d, "model"), "sha256", json_string("xyz"));
    expect_bad(d, &lp, ST_ERR_FORMAT, "'sha256' is not 64", "bad hash");
    d = json_deep_copy(doc); json_object_set_new(json_object_get(json_object_get(d, "settings"), "extra"), "n", json_integer(3));
    expect_bad(d, &lp, ST_ERR_FORMAT, "extra 'n' is not a string", "extra of the wrong type");
    d = json_deep_copy(doc); json_object_del(json_object_get(json_object_get(d, "settings"), "sampler"), "temp");
    expect_bad(d, &lp, ST_ERR_FORMAT, "'temp' is missing", "missing temp");
    expect_bad(json_array(), &lp, ST_ERR_FORMAT, "one JSON object", "an array");
    expect_bad(json_integer(5), &lp, ST_ERR_FORMAT, "not valid JSON", "a number");

    /* every truncation (but the final newline) is refused as bad JSON */
    int trunc_ok = 0, trunc_n = 0;
    for (size_t len = 0; len + 1 < n; len++) {
        session_settings st;
        forest *t = session_load_mem(text, len, &lp, &st, NULL, &err);
        trunc_n++;
        trunc_ok += t == NULL && err.code == ST_ERR_FORMAT && strstr(err.msg, "JSON");
        forest_free(t);
    }
    T_CHECK(trunc_ok == trunc_n, "truncations refused as bad JSON: %d of %d", trunc_ok, trunc_n);

    /* random edits: never a crash; what loads passes the invariants */
    rng r = {4242};
    static const char chars[] = "0123456789-+.eE{}[]\",: tfn\\u-1";
    char *buf = malloc(n + 1);
    int loaded = 0, inv_ok = 0, refused_ok = 0, refused = 0;
    for (int k = 0; k < 4000; k++) {
        memcpy(buf, text, n);
        int edits = 1 + (int)rnd(&r, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = rnd(&r, (uint32_t)n);
            buf[at] = rnd(&r, 4) ? chars[rnd(&r, sizeof chars - 1)] : (char)rnd(&r, 256);
        }
        session_settings st;
        forest *t = session_load_mem(buf, n, &lp, &st, NULL, &err);
        if (t) {
            loaded++;
            inv_ok += forest_check(t, &err) == ST_OK;
            forest_free(t);
            session_settings_free(&st);
        } else {
            refused++;
            refused_ok += err.code != ST_OK && err.msg[0] != 0;
        }
    }
    T_CHECK(inv_ok == loaded && refused_ok == refused,
            "random edits: %d loaded (%d pass the invariants), %d refused (%d with a message)",
            loaded, inv_ok, refused, refused_ok);
    T_CHECK(refused > 1000, "most random edits are refused (%d)", refused);

    /* loading a damaged file leaves it exactly as it was */
    memcpy(buf, text, n);
    buf[n / 2] = '{';
    spit(path, buf, n);
    session_settings st;
    forest *t = session_load(path, &lp, &st, NULL, &err);
    size_t n2;
    char *again = t_slurp(path, &n2);
    T_CHECK(t == NULL && err.code == ST_ERR_FORMAT && strstr(err.msg, "bad.json"),
            "a damaged file is refused, naming it: %s", err.msg);
    T_CHECK(again && n2 == n && !memcmp(again, buf, n), "the damaged file is untouched");
    forest_free(t);
    free(again);
    t = session_load("/nonexistent/x.json", &lp, &st, NULL, &err);
    T_CHECK(t == NULL && err.code == ST_ERR_IO, "a missing file is ST_ERR_IO: %s", err.msg);
    free(buf);
    free(text);
    json_decref(doc);
    session_settings_free(&s);
    forest_free(f);
    unlink(path);
}

/* ---------------- model mismatch ---------------- */

static void test_mismatch(const forest *f, const session_model_id *ida, const session_model_id *idb) {
    char path[160];
    snprintf(path, sizeof path, "%s/mm.json", tmpdir);
    session_settings s = session_settings_default(), s2;
    st_err err = {0};
    T_CHECK(session_save(path, f, &s, ida, NULL, &err) == ST_OK, "save: %s", err.msg);
    session_load_params lp = session_load_default_params();
    lp.model = idb;
    forest *g = session_load(path, &lp, &s2, NULL, &err);
    T_CHECK(g == NULL && err.code == ST_ERR_ARG, "another model: ST_ERR_ARG (%d)", err.code);
    T_CHECK(strstr(err.msg, ida->file) && strstr(err.msg, idb->file),
            "the message names both models: %s", err.msg);
    lp.force = true;
    g = session_load(path, &lp, &s2, NULL, &err);
    T_CHECK(g != NULL, "force loads it anyway: %s", err.msg);
    forest_free(g);
    session_settings_free(&s2);
    session_model_id renamed = *ida;
    snprintf(renamed.file, sizeof renamed.file, "moved.gguf");
    lp.force = false;
    lp.model = &renamed;
    g = session_load(path, &lp, &s2, NULL, &err);
    T_CHECK(g != NULL, "a renamed model file still matches: %s", err.msg);
    forest_free(g);
    session_settings_free(&s2);
    unlink(path);
}

/* A score kept with a node (a judge's or beam's) survives save and load, the Markdown
 * export names it, a file without scores loads unscored, and a score that is not a number
 * is refused. */
static void test_scores(void) {
    st_err err = {0};
    forest *f = forest_init(16, 0);
    int32_t t[] = {1, 20, 30, 40};
    forest_id mid, a;
    forest_add_root(f, t, NULL, 3, 0, &mid, &err);
    forest_append(f, mid, t + 3, NULL, 1, &a, &err);
    session_settings s = session_settings_default(), s2, s3;
    s.meta = session_meta_init();
    T_CHECK(!session_meta_set_score(s.meta, f, a, -0.123456789, &err) &&
                !session_meta_set(s.meta, f, a, "beam", 3, &err) &&
                session_meta_set_score(s.meta, f, a, NAN, &err) == ST_ERR_ARG,
            "a finite score and a strategy kept, NAN refused: %s", err.msg);
    char path[160];
    snprintf(path, sizeof path, "%s/scores.json", tmpdir);
    forest *g = !session_save(path, f, &s, NULL, NULL, &err) ? session_load(path, NULL, &s2, NULL, &err) : NULL;
    forest_id lv[2] = {FOREST_NONE, FOREST_NONE};
    if (g) forest_leaves(g, lv, 2);
    double v = 0;
    const char *strat = NULL;
    T_CHECK(g && session_meta_get_score(s2.meta, g, lv[0], &v) && fabs(v + 0.123456789) < 1e-8 &&
                session_meta_get(s2.meta, g, lv[0], &strat, NULL) && !strcmp(strat, "beam") &&
                !session_meta_get_score(s2.meta, g, forest_id_at(g, forest_get(g, lv[0])->parent), &v),
            "the leaf's score and strategy loaded, its parent unscored: %s", err.msg);
    char *md = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&md, &len);
    if (g) session_export_markdown(out, g, NULL, &s2, NULL, &err);
    fclose(out);
    T_CHECK(md && strstr(md, "*[score -0.1235]*") && strstr(md, "### Branch 1 [score -0.1235]"),
            "the export names the score:\n%s", md ? md : "");
    free(md);
    session_meta_free(s.meta);
    s.meta = NULL; /* an older file: no scores */
    forest *h = !session_save(path, f, &s, NULL, NULL, &err) ? session_load(path, NULL, &s3, NULL, &err) : NULL;
    if (h) forest_leaves(h, lv, 2);
    T_CHECK(h && !session_meta_get_score(s3.meta, h, lv[0], &v), "a file without scores loads unscored: %s", err.msg);
    json_t *doc = json_load_file(path, 0, NULL);
    json_object_set_new(node_of(doc, 0), "score", json_string("x"));
    expect_bad(doc, NULL, ST_ERR_FORMAT, "'score' is not a number", "a bad score");
    session_settings_free(&s2), session_settings_free(&s3);
    forest_free(g), forest_free(h), forest_free(f);
    unlink(path);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/md_test_session_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_sha256();
    test_deep_and_empty();
    test_wide();
    test_scores();
    model *m = make_model("a.gguf", 7, 512, 64);
    model *m2 = make_model("b.gguf", 8, 512, 64);
    model *big = make_model("big.gguf", 9, 4096, 256);
    char pa[128], pb[128], pbig[128];
    snprintf(pa, sizeof pa, "%s/a.gguf", tmpdir);
    snprintf(pb, sizeof pb, "%s/b.gguf", tmpdir);
    snprintf(pbig, sizeof pbig, "%s/big.gguf", tmpdir);
    if (big) test_identity(big, pbig);
    if (m && m2) {
        st_err err = {0};
        tok *tk = tok_from_gguf(m->gguf, &err);
        T_CHECK(tk != NULL, "tokenizer: %s", err.msg);
        session_model_id ida, idb;
        session_model_id_of(m->gguf, pa, m->hp.n_vocab, &ida, &err);
        session_model_id_of(m2->gguf, pb, m2->hp.n_vocab, &idb, &err);
        T_CHECK(!session_model_id_same(&ida, &idb), "two models, two identities");
        test_round_trip(m, &ida, tk);
        model_ctx *c = new_ctx(m, 1024);
        step_plan p;
        step_plan_init(&p);
        forest *f = random_forest(m, c, &p, NULL, 11);
        test_atomic(f, &ida);
        test_damaged(&ida);
        test_mismatch(f, &ida, &idb);
        forest_free(f);
        step_plan_free(&p);
        model_ctx_free(c);
        tok_free(tk);
    }
    model_free(m), model_free(m2), model_free(big);
    unlink(pa), unlink(pb), unlink(pbig);
    rmdir(tmpdir);
    return t_done();
}
