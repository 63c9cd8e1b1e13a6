/* test_gguf.c - the GGUF reader and writer: a full round trip through the writer, the
 * shared fixture files, a corpus of hand-broken images (each with its expected status
 * code), and a seeded mutation loop that must never crash (run it under ASan).
 *
 * The broken images come from a small byte builder that records where each field it
 * writes lies, so each case patches exactly one known field of a valid image. Images
 * are copied into buffers of exactly their length, so any over-read hits ASan's redzone. */
#include <inttypes.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/dtype.h"
#include "t.h"

/* ---- helpers ---- */

/* Opens an exact-size heap copy of img[0..n), so over-reads are caught; returns the
 * context and keeps the copy alive in *copy (free it after gguf_close). */
static gguf_ctx *open_copy(const uint8_t *img, size_t n, uint8_t **copy, st_err *err) {
    *copy = malloc(n ? n : 1);
    memcpy(*copy, img, n);
    return gguf_open_mem(*copy, n, err);
}

/* xorshift64*: a fixed-seed generator for the mutation loop. */
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

/* Every prefix of img shorter than data_end + 3 (all of the header, metadata and tensor
 * infos, and the start of the data), and a few longer ones, must fail with ST_ERR_FORMAT
 * and a message. */
static void check_truncations(const uint8_t *img, size_t n, size_t data_end, const char *label) {
    int bad = 0;
    for (size_t len = 0; len < n; len++) {
        if (len > data_end + 2 && len != n - 1 && len != (data_end + n) / 2) continue;
        st_err err = {ST_OK, ""};
        uint8_t *copy;
        gguf_ctx *g = open_copy(img, len, &copy, &err);
        if (g || err.code != ST_ERR_FORMAT || !err.msg[0]) {
            bad++;
            fprintf(stderr, "%s truncated at %zu: ctx %p, code %d, '%s'\n", label, len, (void *)g,
                    err.code, err.msg);
        }
        gguf_close(g);
        free(copy);
    }
    T_CHECK(bad == 0, "%s: %d truncations did not fail cleanly with ST_ERR_FORMAT", label, bad);
}

static void check_mutations(const uint8_t *img, size_t n, int iters, uint64_t seed,
                            const char *label);

/* ---- round trip ---- */

typedef struct {
    const char *key;
    gguf_type type;
    uint64_t bits;        /* the value in host order, widened */
} scalar_case;

static void test_round_trip(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_gguf_%d.gguf", (int)getpid());
    gguf_writer *w = gguf_writer_init();
    T_CHECK(w != NULL, "writer init");

    /* One scalar of every fixed-size type, through the generic setter. */
    const scalar_case sc[] = {
        {"s.u8", GGUF_U8, 200},       {"s.i8", GGUF_I8, (uint8_t)-100},
        {"s.u16", GGUF_U16, 60000},   {"s.i16", GGUF_I16, (uint16_t)-30000},
        {"s.u32", GGUF_U32, 4000000000u}, {"s.i32", GGUF_I32, (uint32_t)-2000000000},
        {"s.u64", GGUF_U64, UINT64_MAX}, {"s.i64", GGUF_I64, (uint64_t)INT64_MIN},
        {"s.bool", GGUF_BOOL, 1},
    };
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
        uint8_t b[8];
        switch (sc[k].type) {
        case GGUF_U8: case GGUF_I8: case GGUF_BOOL: b[0] = (uint8_t)sc[k].bits; break;
        case GGUF_U16:
        case GGUF_I16: {
            uint16_t x = (uint16_t)sc[k].bits;
            memcpy(b, &x, 2);
            break;
        }
        case GGUF_U32:
        case GGUF_I32: {
            uint32_t x = (uint32_t)sc[k].bits;
            memcpy(b, &x, 4);
            break;
        }
        default: memcpy(b, &sc[k].bits, 8); break;
        }
        T_CHECK(gguf_writer_set_val(w, sc[k].key, sc[k].type, b) == ST_OK, "set %s", sc[k].key);
    }
    double f64 = -1.25e-300;
    uint8_t two = 2;
    T_CHECK(gguf_writer_set_val(w, "s.f64", GGUF_F64, &f64) == ST_OK, "set f64");
    T_CHECK(gguf_writer_set_val(w, "s.bad", GGUF_BOOL, &two) == ST_ERR_ARG, "bool 2 rejected");
    T_CHECK(gguf_writer_set_val(w, "s.bad", GGUF_STRING, "x") == ST_ERR_ARG, "string rejected");
    T_CHECK(gguf_writer_set_f32(w, "s.f32", 1e-5f) == ST_OK, "set f32");
    T_CHECK(gguf_writer_set_u32(w, "s.replaced", 1) == ST_OK, "set u32");
    T_CHECK(gguf_writer_set_str(w, "s.replaced", "second") == ST_OK, "replace");
    T_CHECK(gguf_writer_set_str(w, "s.str", "llama") == ST_OK, "set str");
    T_CHECK(gguf_writer_set_str(w, "s.empty", "") == ST_OK, "set empty str");
    T_CHECK(gguf_writer_set_i32(w, "s.neg", -7) == ST_OK, "set i32");
    T_CHECK(gguf_writer_set_u64(w, "s.big", 1ull << 40) == ST_OK, "set u64");
    T_CHECK(gguf_writer_set_bool(w, "s.false", false) == ST_OK, "set bool");
    T_CHECK(gguf_writer_set_f32(w, "s.nan", NAN) == ST_OK, "set nan");

    const int32_t ai[] = {1, -2, 3, 2147483647, -2147483647 - 1};
    const float af[] = {0.5f, -1.0f, 3.25f};
    const uint8_t ab[] = {1, 0, 1};
    const int64_t al[] = {INT64_MAX, -1};
    const char *as[] = {"<unk>", "", "<s>", "h\xc3\xa9llo"};
    const size_t asl[] = {5, 0, 3, 6};
    T_CHECK(gguf_writer_set_arr(w, "a.i32", GGUF_I32, ai, 5) == ST_OK, "arr i32");
    T_CHECK(gguf_writer_set_arr(w, "a.f32", GGUF_F32, af, 3) == ST_OK, "arr f32");
    T_CHECK(gguf_writer_set_arr(w, "a.bool", GGUF_BOOL, ab, 3) == ST_OK, "arr bool");
    T_CHECK(gguf_writer_set_arr(w, "a.i64", GGUF_I64, al, 2) == ST_OK, "arr i64");
    T_CHECK(gguf_writer_set_arr(w, "a.empty", GGUF_U16, NULL, 0) == ST_OK, "empty arr");
    T_CHECK(gguf_writer_set_arr(w, "a.bad", GGUF_STRING, as, 1) == ST_ERR_ARG, "arr of str");
    T_CHECK(gguf_writer_set_arr_str(w, "a.str", as, NULL, 4) == ST_OK, "arr str");
    T_CHECK(gguf_writer_set_arr_str(w, "a.strl", as, asl, 4) == ST_OK, "arr str lens");
    T_CHECK(gguf_writer_set_arr_str(w, "a.str0", NULL, NULL, 0) == ST_OK, "empty str arr");

    /* Tensors of the compute types in several shapes. */
    float f32a[7], f32b[2 * 3 * 1 * 2];
    uint16_t f16[5 * 3], bf16[4 * 2 * 3];
    uint8_t q8[2 * 2 * sizeof(block_q8_0)];
    for (int k = 0; k < 7; k++) f32a[k] = (float)k * 0.5f - 1.0f;
    for (int k = 0; k < 12; k++) f32b[k] = (float)k;
    for (int k = 0; k < 15; k++) f16[k] = f32_to_fp16((float)k / 3.0f);
    for (int k = 0; k < 24; k++) bf16[k] = f32_to_bf16((float)-k);
    for (size_t k = 0; k < sizeof q8; k++) q8[k] = (uint8_t)(k * 7 + 1);
    struct {
        const char *name;
        uint32_t type, nd;
        int64_t ne[4];
        const void *data;
        size_t nb;
    } ts[] = {
        {"t.f32", DT_F32, 1, {7}, f32a, sizeof f32a},
        {"t.f16", DT_F16, 2, {5, 3}, f16, sizeof f16},
        {"t.bf16", DT_BF16, 3, {4, 2, 3}, bf16, sizeof bf16},
        {"t.q8_0", DT_Q8_0, 2, {64, 2}, q8, sizeof q8},
        {"t.f32.4d", DT_F32, 4, {2, 3, 1, 2}, f32b, sizeof f32b},
        {"t.empty", DT_F32, 2, {0, 3}, NULL, 0},
    };
    const size_t nts = sizeof ts / sizeof ts[0];
    for (size_t k = 0; k < nts; k++)
        T_CHECK(gguf_writer_add_tensor(w, ts[k].name, ts[k].type, ts[k].nd, ts[k].ne, ts[k].data) ==
                    ST_OK,
                "add %s", ts[k].name);
    const int64_t bad_ne[2] = {33, 1};
    T_CHECK(gguf_writer_add_tensor(w, "t.f32", DT_F32, 1, bad_ne, f32a) == ST_ERR_ARG, "dup name");
    T_CHECK(gguf_writer_add_tensor(w, "t.x", DT_Q8_0, 2, bad_ne, q8) == ST_ERR_ARG, "bad block");
    T_CHECK(gguf_writer_add_tensor(w, "t.x", 3, 2, bad_ne, q8) == ST_ERR_ARG, "unknown type");
    T_CHECK(gguf_writer_add_tensor(w, "t.x", DT_F32, 5, bad_ne, q8) == ST_ERR_ARG, "5 dims");

    st_err err;
    T_CHECK(gguf_writer_write(w, path, &err) == ST_OK, "write: %s", err.msg);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    T_CHECK(access(tmp, F_OK) != 0, "no tmp file left behind");
    T_CHECK(gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err) == ST_ERR_IO && err.msg[0],
            "write into a missing folder fails with a message");
    T_CHECK(access("/nonexistent-dir/x.gguf.tmp", F_OK) != 0, "no tmp file on failure");
    gguf_writer_free(w);

    gguf_ctx *g = gguf_open(path, &err);
    T_CHECK(g != NULL, "open round trip: %s", err.msg);
    if (!g) return;
    T_CHECK(gguf_version(g) == 3 && gguf_alignment(g) == 32, "v3, alignment 32");
    T_CHECK(gguf_find_key(g, "general.alignment") < 0, "alignment key not written by default");
    T_CHECK(gguf_n_kv(g) == 26, "26 keys, got %" PRId64, gguf_n_kv(g));
    for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) {
        int64_t i = gguf_find_key(g, sc[k].key);
        T_CHECK(i >= 0 && gguf_kv_type(g, i) == sc[k].type, "%s type", sc[k].key);
        if (i < 0) continue;
        int64_t v;
        uint64_t u;
        switch (sc[k].type) {
        case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
            T_CHECK(gguf_kv_u64(g, i, &u) == ST_OK && u == sc[k].bits, "%s value", sc[k].key);
            break;
        case GGUF_I8: T_CHECK(gguf_kv_i64(g, i, &v) == ST_OK && v == -100, "i8"); break;
        case GGUF_I16: T_CHECK(gguf_kv_i64(g, i, &v) == ST_OK && v == -30000, "i16"); break;
        case GGUF_I32: T_CHECK(gguf_kv_i64(g, i, &v) == ST_OK && v == -2000000000, "i32"); break;
        case GGUF_I64: T_CHECK(gguf_kv_i64(g, i, &v) == ST_OK && v == INT64_MIN, "i64"); break;
        default: break;
        }
    }
    int64_t v = 42;
    uint64_t u = 42;
    double d = 0;
    bool b = false;
    const char *s = NULL;
    size_t len = 0;
    T_CHECK(gguf_kv_i64(g, gguf_find_key(g, "s.u64"), &v) == ST_ERR_TYPE && v == 42,
            "u64 max !fit i64");
    T_CHECK(gguf_kv_u64(g, gguf_find_key(g, "s.i8"), &u) == ST_ERR_TYPE && u == 42, "neg !fit u64");
    T_CHECK(gguf_kv_i64(g, gguf_find_key(g, "s.u8"), &v) == ST_OK && v == 200, "u8 -> i64");
    T_CHECK(gguf_kv_f64(g, gguf_find_key(g, "s.i16"), &d) == ST_OK && d == -30000.0, "int -> f64");
    T_CHECK(gguf_kv_i64(g, gguf_find_key(g, "s.f32"), &v) == ST_ERR_TYPE, "f32 !-> i64");
    T_CHECK(gguf_kv_bool(g, gguf_find_key(g, "s.u8"), &b) == ST_ERR_TYPE, "u8 !-> bool");
    T_CHECK(gguf_kv_str(g, gguf_find_key(g, "s.u8"), &s) == ST_ERR_TYPE, "u8 !-> str");
    T_CHECK(gguf_get_f64(g, "s.f64", &d, &err) == ST_OK && d == f64, "f64 value");
    T_CHECK(gguf_get_f64(g, "s.f32", &d, &err) == ST_OK && d == (double)1e-5f, "f32 value");
    T_CHECK(gguf_get_bool(g, "s.bool", &b, &err) == ST_OK && b, "bool true");
    T_CHECK(gguf_get_bool(g, "s.false", &b, &err) == ST_OK && !b, "bool false");
    T_CHECK(gguf_get_str(g, "s.str", &s, &err) == ST_OK && strcmp(s, "llama") == 0, "str");
    T_CHECK(gguf_get_str(g, "s.empty", &s, &err) == ST_OK && s[0] == '\0', "empty str");
    T_CHECK(gguf_get_str(g, "s.replaced", &s, &err) == ST_OK && strcmp(s, "second") == 0,
            "replaced");
    T_CHECK(gguf_get_i64(g, "s.neg", &v, &err) == ST_OK && v == -7, "i32 -7");
    T_CHECK(gguf_get_i64(g, "s.big", &v, &err) == ST_OK && v == 1ll << 40, "u64 2^40");
    v = 42;
    T_CHECK(gguf_get_i64(g, "no.such", &v, &err) == ST_ERR_NOT_FOUND && v == 42 &&
                err.code == ST_ERR_NOT_FOUND && strstr(err.msg, "no.such"),
            "not found: %s", err.msg);
    T_CHECK(gguf_get_i64(g, "s.str", &v, &err) == ST_ERR_TYPE && strstr(err.msg, "s.str"),
            "type error names the key: %s", err.msg);

    int64_t i = gguf_find_key(g, "a.i32");
    T_CHECK(gguf_kv_type(g, i) == GGUF_ARRAY && gguf_arr_type(g, i) == GGUF_I32 &&
                gguf_arr_n(g, i) == 5,
            "i32 array header");
    for (uint64_t j = 0; j < 5; j++)
        T_CHECK(gguf_arr_i64(g, i, j, &v) == ST_OK && v == ai[j], "a.i32[%" PRIu64 "]", j);
    T_CHECK(gguf_arr_str(g, i, 0, &s, &len) == ST_ERR_TYPE, "i32 array is not strings");
    T_CHECK(gguf_kv_i64(g, i, &v) == ST_ERR_TYPE, "array is not a scalar");
    i = gguf_find_key(g, "a.f32");
    for (uint64_t j = 0; j < 3; j++)
        T_CHECK(gguf_arr_f64(g, i, j, &d) == ST_OK && d == af[j], "a.f32[%" PRIu64 "]", j);
    T_CHECK(gguf_arr_i64(g, i, 0, &v) == ST_ERR_TYPE, "f32 element !-> i64");
    i = gguf_find_key(g, "a.i64");
    T_CHECK(gguf_arr_i64(g, i, 0, &v) == ST_OK && v == INT64_MAX, "a.i64[0]");
    T_CHECK(gguf_arr_i64(g, i, 1, &v) == ST_OK && v == -1, "a.i64[1]");
    i = gguf_find_key(g, "a.bool");
    T_CHECK(gguf_arr_type(g, i) == GGUF_BOOL && gguf_arr_n(g, i) == 3, "bool array");
    i = gguf_find_key(g, "a.empty");
    T_CHECK(gguf_arr_type(g, i) == GGUF_U16 && gguf_arr_n(g, i) == 0, "empty array");
    i = gguf_find_key(g, "a.str0");
    T_CHECK(gguf_arr_type(g, i) == GGUF_STRING && gguf_arr_n(g, i) == 0, "empty string array");
    const char *names[] = {"a.str", "a.strl"};
    for (int k = 0; k < 2; k++) {
        i = gguf_find_key(g, names[k]);
        T_CHECK(gguf_arr_type(g, i) == GGUF_STRING && gguf_arr_n(g, i) == 4, "%s header", names[k]);
        for (uint64_t j = 0; j < 4; j++)
            T_CHECK(gguf_arr_str(g, i, j, &s, &len) == ST_OK && len == asl[j] &&
                        memcmp(s, as[j], len) == 0, "%s[%" PRIu64 "]", names[k], j);
    }
    T_CHECK(gguf_arr_type(g, gguf_find_key(g, "s.u8")) == GGUF_N_TYPES, "scalar has no arr type");

    char buf[128];
    gguf_kv_format(g, gguf_find_key(g, "s.str"), buf, sizeof buf);
    T_CHECK(strcmp(buf, "\"llama\"") == 0, "format str: %s", buf);
    gguf_kv_format(g, gguf_find_key(g, "s.neg"), buf, sizeof buf);
    T_CHECK(strcmp(buf, "-7") == 0, "format int: %s", buf);
    gguf_kv_format(g, gguf_find_key(g, "s.nan"), buf, sizeof buf);
    T_CHECK(strcmp(buf, "nan") == 0 || strcmp(buf, "-nan") == 0, "format nan: %s", buf);
    gguf_kv_format(g, gguf_find_key(g, "s.f32"), buf, sizeof buf);
    T_CHECK(strcmp(buf, "1e-05") == 0, "format f32: %s", buf);
    gguf_kv_format(g, gguf_find_key(g, "a.i32"), buf, sizeof buf);
    T_CHECK(strncmp(buf, "[5 i32: 1, -2, 3, 2147483647, ...]", sizeof buf) == 0, "format arr: %s",
            buf);
    gguf_kv_format(g, gguf_find_key(g, "a.str"), buf, sizeof buf);
    T_CHECK(strncmp(buf, "[4 strings", 10) == 0, "format str arr: %s", buf);
    gguf_kv_format(g, gguf_find_key(g, "a.str"), buf, 8);
    T_CHECK(strlen(buf) == 7, "format truncates to the buffer: %s", buf);

    T_CHECK(gguf_n_tensors(g) == (int64_t)nts, "tensor count");
    for (size_t k = 0; k < nts; k++) {
        const gguf_tensor *t = gguf_find_tensor(g, ts[k].name);
        T_CHECK(t && t == gguf_tensor_at(g, (int64_t)k), "find %s", ts[k].name);
        if (!t) continue;
        T_CHECK(t->type == ts[k].type && t->n_dims == ts[k].nd, "%s type/dims", t->name);
        int64_t n = 1;
        for (uint32_t dd = 0; dd < 4; dd++) {
            int64_t want = dd < ts[k].nd ? ts[k].ne[dd] : 1;
            T_CHECK(t->ne[dd] == want, "%s ne[%u]", t->name, dd);
            n *= want;
        }
        T_CHECK(gguf_tensor_nelem(t) == n, "%s nelem", t->name);
        T_CHECK(t->offset % 32 == 0 && t->nbytes == ts[k].nb, "%s offset/nbytes", t->name);
        T_CHECK((gguf_data_offset(g) + t->offset) % 32 == 0, "%s file offset aligned", t->name);
        T_CHECK(!ts[k].nb || memcmp(t->data, ts[k].data, ts[k].nb) == 0, "%s data", t->name);
    }
    T_CHECK(gguf_find_tensor(g, "nope") == NULL, "missing tensor");
    gguf_close(g);

    /* The same bytes through gguf_open_mem. */
    size_t n;
    uint8_t *img = (uint8_t *)t_slurp(path, &n), *copy = NULL;
    g = img ? open_copy(img, n, &copy, &err) : NULL;
    T_CHECK(g && gguf_n_tensors(g) == (int64_t)nts && gguf_file_size(g) == n, "open_mem");
    size_t data_off = g ? (size_t)gguf_data_offset(g) : 0;
    gguf_close(g);
    if (img) {
        check_truncations(img, n, data_off, "writer image");
        check_mutations(img, n, 10000, 12345, "writer image");
    }
    free(copy);
    free(img);
    remove(path);
}

/* A caller-set general.alignment is used for the layout and written; a bad one is refused. */
static void test_writer_alignment(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_gguf_align_%d.gguf", (int)getpid());
    gguf_writer *w = gguf_writer_init();
    float x[3] = {1, 2, 3};
    const int64_t ne[1] = {3};
    st_err err;
    gguf_writer_add_tensor(w, "a", DT_F32, 1, ne, x);
    gguf_writer_add_tensor(w, "b", DT_F32, 1, ne, x);
    gguf_writer_set_u32(w, "general.alignment", 3);
    T_CHECK(gguf_writer_write(w, path, &err) == ST_ERR_ARG && err.msg[0], "alignment 3 refused");
    gguf_writer_set_u32(w, "general.alignment", 4); /* a file the reader would refuse */
    T_CHECK(gguf_writer_write(w, path, &err) == ST_ERR_ARG && err.msg[0], "alignment 4 refused");
    gguf_writer_set_u32(w, "general.alignment", 64);
    T_CHECK(gguf_writer_write(w, path, &err) == ST_OK, "write: %s", err.msg);
    gguf_writer_free(w);
    gguf_ctx *g = gguf_open(path, &err);
    const gguf_tensor *b = g ? gguf_find_tensor(g, "b") : NULL;
    T_CHECK(g && gguf_alignment(g) == 64 && gguf_data_offset(g) % 64 == 0, "alignment 64");
    T_CHECK(b && b->offset == 64 && memcmp(b->data, x, sizeof x) == 0, "second tensor at 64");
    gguf_close(g);
    remove(path);
}

/* ---- shared fixtures ---- */

static void test_fixtures(void) {
    st_err err;
    const char *p = t_shared("models/stories260K.gguf");
    if (!p) {
        T_MISSING("models/stories260K.gguf not found");
    } else {
        gguf_ctx *g = gguf_open(p, &err);
        T_CHECK(g != NULL, "open stories260K: %s", err.msg);
        if (g) {
            int64_t v = 0;
            const char *s = NULL;
            size_t len = 0;
            T_CHECK(gguf_version(g) == 3, "version %u", gguf_version(g));
            T_CHECK(gguf_n_kv(g) == 19, "19 keys, got %" PRId64, gguf_n_kv(g));
            T_CHECK(gguf_n_tensors(g) == 48, "48 tensors, got %" PRId64, gguf_n_tensors(g));
            T_CHECK(gguf_get_str(g, "general.architecture", &s, &err) == ST_OK &&
                        strcmp(s, "llama") == 0,
                    "architecture");
            T_CHECK(gguf_get_i64(g, "llama.embedding_length", &v, &err) == ST_OK && v == 64, "dim");
            T_CHECK(gguf_get_i64(g, "llama.block_count", &v, &err) == ST_OK && v == 5, "layers");
            int64_t i = gguf_find_key(g, "tokenizer.ggml.tokens");
            T_CHECK(i >= 0 && gguf_arr_type(g, i) == GGUF_STRING && gguf_arr_n(g, i) == 512,
                    "tokens");
            T_CHECK(i >= 0 && gguf_arr_str(g, i, 1, &s, &len) == ST_OK && len == 3 &&
                        memcmp(s, "<s>", 3) == 0, "token 1 is <s>");
            const gguf_tensor *t = gguf_find_tensor(g, "token_embd.weight");
            T_CHECK(t && t->type == DT_F32 && t->ne[0] == 64 && t->ne[1] == 512, "token_embd");
            uint64_t end = 0;
            for (int64_t k = 0; k < gguf_n_tensors(g); k++) {
                const gguf_tensor *tk = gguf_tensor_at(g, k);
                if (gguf_data_offset(g) + tk->offset + tk->nbytes > end)
                    end = gguf_data_offset(g) + tk->offset + tk->nbytes;
            }
            T_CHECK(end <= gguf_file_size(g) && end + 32 > gguf_file_size(g), "data ends the file");
            char buf[160];
            for (int64_t k = 0; k < gguf_n_kv(g); k++) gguf_kv_format(g, k, buf, sizeof buf);
            gguf_kv_format(g, i, buf, sizeof buf);
            T_CHECK(strncmp(buf, "[512 strings", 12) == 0, "format tokens: %s", buf);
            gguf_close(g);
        }
    }
    p = t_shared("models/ggml-vocab-llama-spm.gguf");
    if (!p) {
        T_MISSING("models/ggml-vocab-llama-spm.gguf not found");
        return;
    }
    gguf_ctx *g = gguf_open(p, &err);
    T_CHECK(g != NULL, "open vocab: %s", err.msg);
    if (!g) return;
    int64_t i = gguf_find_key(g, "tokenizer.ggml.tokens");
    T_CHECK(gguf_n_tensors(g) == 0, "vocab has no tensors");
    T_CHECK(i >= 0 && gguf_arr_n(g, i) == 32000, "32000 tokens");
    gguf_close(g);
}

/* ---- broken files ---- */

/* A growing byte image; each writer returns the offset of what it wrote. */
typedef struct {
    uint8_t p[1024];
    size_t n;
} bb;

static size_t bb_int(bb *b, uint64_t v, size_t n) {
    size_t at = b->n;
    for (size_t k = 0; k < n; k++) b->p[b->n++] = (uint8_t)(v >> (8 * k));
    return at;
}

static size_t bb_str(bb *b, const char *s) {
    size_t at = bb_int(b, strlen(s), 8);
    memcpy(b->p + b->n, s, strlen(s));
    b->n += strlen(s);
    return at;
}

/* Where the fields that the broken cases patch lie in the valid image. */
typedef struct {
    size_t n_tensors, n_kv, key0_len, str_val_len, align_val, bool_val, kv_type, arr_elem,
        strs_n, strs_key, t0_ndims, t0_ne0, t1_ne0, t1_ne1, t0_type, t1_name, t1_offset,
        meta_end, data;
} fields;

/* A valid image: six metadata entries and two F32 tensors of 32 bytes each. */
static void build_valid(bb *b, fields *f) {
    b->n = 0;
    bb_int(b, 0x46554747, 4); /* "GGUF" */
    bb_int(b, 3, 4);
    f->n_tensors = bb_int(b, 2, 8);
    f->n_kv = bb_int(b, 6, 8);
    f->key0_len = bb_str(b, "general.architecture");
    bb_int(b, GGUF_STRING, 4);
    f->str_val_len = bb_str(b, "llama");
    bb_str(b, "general.alignment");
    bb_int(b, GGUF_U32, 4);
    f->align_val = bb_int(b, 32, 4);
    bb_str(b, "x.flag");
    bb_int(b, GGUF_BOOL, 4);
    f->bool_val = bb_int(b, 1, 1);
    bb_str(b, "x.arr");
    bb_int(b, GGUF_ARRAY, 4);
    f->arr_elem = bb_int(b, GGUF_I32, 4);
    bb_int(b, 3, 8);
    for (int k = 1; k <= 3; k++) bb_int(b, (uint64_t)k, 4);
    f->strs_key = bb_str(b, "x.strs") + 8;
    bb_int(b, GGUF_ARRAY, 4);
    bb_int(b, GGUF_STRING, 4);
    f->strs_n = bb_int(b, 2, 8);
    bb_str(b, "a");
    bb_str(b, "bc");
    bb_str(b, "x.f");
    f->kv_type = bb_int(b, GGUF_F32, 4);
    bb_int(b, 0x3f800000, 4);
    f->meta_end = b->n;
    bb_str(b, "ta");
    f->t0_ndims = bb_int(b, 1, 4);
    f->t0_ne0 = bb_int(b, 8, 8);
    f->t0_type = bb_int(b, DT_F32, 4);
    bb_int(b, 0, 8);
    f->t1_name = bb_str(b, "tb") + 9; /* the 'b' */
    bb_int(b, 2, 4);
    f->t1_ne0 = bb_int(b, 4, 8);
    f->t1_ne1 = bb_int(b, 2, 8);
    bb_int(b, DT_F32, 4);
    f->t1_offset = bb_int(b, 32, 8);
    while (b->n % 32) b->p[b->n++] = 0;
    f->data = b->n;
    for (int k = 0; k < 64; k++) b->p[b->n++] = (uint8_t)k;
}

/* One broken image: the valid one with `width` bytes at `at` replaced by `value` (or by
 * the bytes of `bytes`), and optionally a second u64 at `at2`. */
typedef struct {
    const char *what;
    size_t at, width;
    uint64_t value;
    st_code want;
    const char *msg_has;   /* a fragment the message must contain */
    const char *bytes;
    size_t at2;            /* 0: none */
    uint64_t value2;
} patch_case;

static void test_broken(void) {
    bb b;
    fields f;
    build_valid(&b, &f);
    st_err err;
    uint8_t *copy;
    gguf_ctx *g = open_copy(b.p, b.n, &copy, &err);
    T_CHECK(g && gguf_n_kv(g) == 6 && gguf_n_tensors(g) == 2, "valid base image: %s", err.msg);
    T_CHECK(g && gguf_data_offset(g) == f.data, "data offset");
    gguf_close(g);
    free(copy);

    check_truncations(b.p, b.n, f.data, "builder image");

    const patch_case pc[] = {
        {"bad magic", 0, 1, 'X', ST_ERR_FORMAT, "not a GGUF file", NULL, 0, 0},
        {"version 1", 4, 4, 1, ST_ERR_UNSUPPORTED, "version 1", NULL, 0, 0},
        {"version 99", 4, 4, 99, ST_ERR_UNSUPPORTED, "version 99", NULL, 0, 0},
        {"big-endian version", 4, 4, 0x03000000, ST_ERR_UNSUPPORTED, "big-endian", NULL, 0, 0},
        {"n_kv 2^62", f.n_kv, 8, 1ull << 62, ST_ERR_FORMAT, "metadata count", NULL, 0, 0},
        {"n_tensors 2^63-1", f.n_tensors, 8, INT64_MAX, ST_ERR_FORMAT, "tensor count", NULL, 0, 0},
        {"n_tensors 3", f.n_tensors, 8, 3, ST_ERR_FORMAT, "tensor 2", NULL, 0, 0},
        /* as many entries as the bytes left could hold if there were no tensors: both
         * counts are named, not the honest tensor count */
        {"n_kv fills the file", f.n_kv, 8, (b.n - 24) / 13, ST_ERR_FORMAT,
         "metadata count", NULL, 0, 0},
        {"key length max", f.key0_len, 8, UINT64_MAX, ST_ERR_FORMAT, "exceeds the remaining", NULL,
         0, 0},
        {"string length 2^40", f.str_val_len, 8, 1ull << 40, ST_ERR_FORMAT, "metadata key 0", NULL,
         0, 0},
        {"string array 2^61", f.strs_n, 8, 1ull << 61, ST_ERR_FORMAT, "x.strs", NULL, 0, 0},
        {"unknown value type", f.kv_type, 4, 13, ST_ERR_FORMAT, "unknown value type 13", NULL, 0,
         0},
        {"nested array", f.arr_elem, 4, GGUF_ARRAY, ST_ERR_UNSUPPORTED, "nested", NULL, 0, 0},
        {"unknown element type", f.arr_elem, 4, 77, ST_ERR_FORMAT, "x.arr", NULL, 0, 0},
        {"bool 2", f.bool_val, 1, 2, ST_ERR_FORMAT, "x.flag", NULL, 0, 0},
        {"alignment 0", f.align_val, 4, 0, ST_ERR_FORMAT, "power of two", NULL, 0, 0},
        {"alignment 3", f.align_val, 4, 3, ST_ERR_FORMAT, "power of two", NULL, 0, 0},
        /* Tensor data at 2-byte boundaries would reach the kernels' float loads. */
        {"alignment 2", f.align_val, 4, 2, ST_ERR_FORMAT, "alignment 2 is not a power of two and "
         "a multiple of 8", NULL, 0, 0},
        {"alignment 4", f.align_val, 4, 4, ST_ERR_FORMAT, "multiple of 8", NULL, 0, 0},
        {"alignment as i32", f.align_val - 4, 4, GGUF_I32, ST_ERR_FORMAT, "must be u32", NULL, 0,
         0},
        {"duplicate key", f.strs_key, 6, 0, ST_ERR_FORMAT, "duplicate name 'x.flag'", "x.flag", 0,
         0},
        {"n_dims 0", f.t0_ndims, 4, 0, ST_ERR_FORMAT, "n_dims is 0", NULL, 0, 0},
        {"n_dims 9", f.t0_ndims, 4, 9, ST_ERR_FORMAT, "n_dims is 9", NULL, 0, 0},
        {"negative ne", f.t0_ne0, 8, UINT64_MAX, ST_ERR_FORMAT, "'ta'", NULL, 0, 0},
        {"ne product overflow", f.t1_ne0, 8, 1ull << 32, ST_ERR_FORMAT, "2^63", NULL, f.t1_ne1,
         1ull << 32},
        {"unknown tensor type", f.t0_type, 4, 5, ST_ERR_UNSUPPORTED, "type id 5", NULL, 0, 0},
        {"Q8_0 with ne[0] 8", f.t0_type, 4, DT_Q8_0, ST_ERR_FORMAT, "multiple of the Q8_0 block",
         NULL, 0, 0},
        {"tensor type 1000", f.t0_type, 4, 1000, ST_ERR_UNSUPPORTED, "'ta'", NULL, 0, 0},
        {"offset out of range", f.t1_offset, 8, 1ull << 40, ST_ERR_FORMAT, "runs past the end",
         NULL, 0, 0},
        {"offset at the end", f.t1_offset, 8, 64, ST_ERR_FORMAT, "runs past the end", NULL, 0, 0},
        {"offset max", f.t1_offset, 8, UINT64_MAX - 31, ST_ERR_FORMAT, "runs past the end", NULL, 0,
         0},
        {"misaligned offset", f.t1_offset, 8, 33, ST_ERR_FORMAT, "not a multiple of the alignment",
         NULL, 0, 0},
        {"overlapping tensors", f.t1_offset, 8, 0, ST_ERR_FORMAT, "overlaps", NULL, 0, 0},
        {"duplicate tensor names", f.t1_name, 1, 0, ST_ERR_FORMAT, "duplicate name 'ta'", "a", 0,
         0},
    };
    for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++) {
        bb c = b;
        for (size_t j = 0; j < pc[k].width; j++)
            c.p[pc[k].at + j] =
                pc[k].bytes ? (uint8_t)pc[k].bytes[j] : (uint8_t)(pc[k].value >> (8 * j));
        for (size_t j = 0; pc[k].at2 && j < 8; j++)
            c.p[pc[k].at2 + j] = (uint8_t)(pc[k].value2 >> (8 * j));
        err.code = ST_OK, err.msg[0] = '\0';
        g = open_copy(c.p, c.n, &copy, &err);
        if (getenv("GGUF_TEST_VERBOSE")) fprintf(stderr, "%-24s -> %s\n", pc[k].what, err.msg);
        T_CHECK(g == NULL && err.code == pc[k].want && strstr(err.msg, pc[k].msg_has),
                "%s: got code %d, '%s'", pc[k].what, err.code, err.msg);
        gguf_close(g);
        free(copy);
    }

    /* Version 2 has the same layout and is accepted. */
    bb v2 = b;
    v2.p[4] = 2;
    g = open_copy(v2.p, v2.n, &copy, &err);
    T_CHECK(g && gguf_version(g) == 2 && gguf_n_tensors(g) == 2, "version 2: %s", err.msg);
    gguf_close(g);
    free(copy);

    /* Files on disk: empty, tiny, truncated, a folder, a missing path. */
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_gguf_broken_%d.gguf", (int)getpid());
    const size_t lens[] = {0, 3, 24, f.meta_end};
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        FILE *fp = fopen(path, "wb");
        if (fp) fwrite(b.p, 1, lens[k], fp), fclose(fp);
        g = gguf_open(path, &err);
        T_CHECK(g == NULL && err.code == ST_ERR_FORMAT && strstr(err.msg, path),
                "file of %zu bytes: code %d, '%s'", lens[k], err.code, err.msg);
        gguf_close(g);
    }
    remove(path);
    g = gguf_open("/tmp", &err);
    T_CHECK(g == NULL && err.code == ST_ERR_IO && err.msg[0], "folder: %s", err.msg);
    g = gguf_open("/nonexistent/x.gguf", &err);
    T_CHECK(g == NULL && err.code == ST_ERR_IO && strstr(err.msg, "/nonexistent"), "missing: %s",
            err.msg);
    g = gguf_open_mem(NULL, 0, &err);
    T_CHECK(g == NULL && err.code == ST_ERR_FORMAT, "NULL buffer");
    /* An image at an odd address would put its tensors' floats at odd addresses. */
    uint64_t words[8] = { 0 };
    g = gguf_open_mem((const char *)words + 2, 32, &err);
    T_CHECK(g == NULL && err.code == ST_ERR_ARG && strstr(err.msg, "8-byte aligned"),
            "misaligned image: %s", err.msg);
}

/* Uses everything an opened context exposes, so ASan sees every pointer it hands out;
 * counts lookups that do not find what the context listed in *lost. */
static uint64_t touch_all(const gguf_ctx *g, int *lost) {
    uint64_t sum = 0;
    char buf[96];
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        gguf_kv_format(g, i, buf, sizeof buf);
        sum += strlen(buf) + strlen(gguf_kv_key(g, i));
        *lost += gguf_find_key(g, gguf_kv_key(g, i)) != i;
        uint64_t n = gguf_arr_n(g, i);
        for (uint64_t j = 0; j < n; j++) {
            const char *s;
            size_t len;
            double d;
            if (gguf_arr_str(g, i, j, &s, &len) == ST_OK)
                for (size_t k = 0; k < len; k++) sum += (uint8_t)s[k];
            else if (gguf_arr_f64(g, i, j, &d) == ST_OK)
                sum += (uint64_t)(d != d);
        }
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        for (uint64_t k = 0; k < t->nbytes; k++) sum += ((const uint8_t *)t->data)[k];
        *lost += gguf_find_tensor(g, t->name) != t;
    }
    return sum;
}

/* Random byte changes and truncations of img: every outcome must be a clean open (then
 * everything it exposes is touched) or a failure with a code and a message. */
static void check_mutations(const uint8_t *img, size_t n, int iters, uint64_t seed,
                            const char *label) {
    const char *env = getenv("GGUF_TEST_ITERS"); /* longer runs by hand */
    if (env) iters = atoi(env);
    uint8_t *c = malloc(n);
    int opened = 0, failed = 0, silent = 0, lost = 0;
    uint64_t sink = 0;
    for (int it = 0; it < iters; it++) {
        size_t len = n;
        memcpy(c, img, n);
        uint64_t r = rng_next(&seed);
        int flips = 1 + (int)(r % 4);
        for (int k = 0; k < flips; k++) {
            uint64_t q = rng_next(&seed);
            size_t at = (size_t)(q % n);
            switch ((q >> 32) % 4) {
            case 0: c[at] ^= (uint8_t)(1u << ((q >> 40) % 8)); break;
            case 1: c[at] = (uint8_t)(q >> 48); break;
            case 2: c[at] = 0xff; break;
            default: c[at] = 0; break;
            }
        }
        if ((r >> 8) % 4 == 0) len = (size_t)(rng_next(&seed) % (n + 1));
        st_err err = {ST_OK, ""};
        uint8_t *copy;
        gguf_ctx *g = open_copy(c, len, &copy, &err);
        if (g) {
            opened++;
            sink += touch_all(g, &lost);
        } else {
            failed++;
            if (err.code == ST_OK || !err.msg[0]) silent++;
        }
        gguf_close(g);
        free(copy);
    }
    free(c);
    fprintf(stderr, "mutations of the %s: %d opened, %d failed (checksum %" PRIu64 ")\n", label,
            opened, failed, sink);
    T_CHECK(opened + failed == iters && opened > 0 && failed > 0, "%s: both outcomes occur", label);
    T_CHECK(lost == 0, "%s: %d keys or tensors not found by name", label, lost);
    T_CHECK(silent == 0, "%s: %d failures without a code or message", label, silent);
}

static void test_mutations(void) {
    bb b;
    fields f;
    build_valid(&b, &f);
    check_mutations(b.p, b.n, 20000, 0x9e3779b97f4a7c15ull, "builder image");
}

int main(void) {
    test_round_trip();
    test_writer_alignment();
    test_fixtures();
    test_broken();
    test_mutations();
    return t_done();
}
