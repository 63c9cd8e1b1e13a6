/* test_backend.c - the backend contract of kern.h beside the compute ops, for the ref and
 * cpu backends: buffers (zeroed, aligned, upload/download), kv_store and kv_permute
 * bitwise against host loops, ops that cannot get memory (ST_ERR_NOMEM naming the op,
 * nothing written, kern_backend_sync reporting it once), and mat_prepare (the cpu
 * backend's prepared matrix the same bits as the stored matrix with kern_mat_pack's rows,
 * as the loader made them before). test_kernels.c checks the compute ops against ref. */
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/kern.h"
#include "t.h"
#include "t_kern.h"
#include "t_backend.h"

/* An op that cannot get its memory records ST_ERR_NOMEM naming itself, writes nothing, and
 * sync reports it once: the cpu backend's matmul (scratch) and rope (its table), the ref
 * backend's matmul and attention (per-call buffers). */
static void test_op_nomem(uint64_t seed) {
    const char *names[2] = {"cpu", "ref"};
    for (int bi = 0; bi < 2; bi++) {
        st_err err = {0};
        kern_backend *b = kern_backend_init(names[bi], 1, &err);
        if (!b) continue;
        const kern_ops *o = kern_backend_ops(b);
        kern_backend_set_alloc_limit(b, 16);
        kern_mat w = {DT_Q8_0, 32, 256, make_weights(&seed, DT_Q8_0, 32, 256), NULL};
        float *x = rand_floats(&seed, 4 * 256, 1.0f), y[4 * 32];
        for (int i = 0; i < 4 * 32; i++) y[i] = 12345.0f;
        o->matmul(b, y, &w, x, 4);
        bool untouched = true;
        for (int i = 0; i < 4 * 32; i++) untouched = untouched && y[i] == 12345.0f;
        T_CHECK(kern_backend_sync(b, &err) == ST_ERR_NOMEM &&
                strncmp(err.msg, "matmul: out of memory for ", 26) == 0 && untouched,
                "%s: matmul without memory: nothing written, %s", names[bi], err.msg);
        T_CHECK(kern_backend_sync(b, &err) == ST_OK, "%s: reported once", names[bi]);
        const char *op2 = bi == 0 ? "rope" : "attention";
        float q[2 * 64], k[2 * 64], v[2 * 64], out[2 * 64], q0[2 * 64];
        for (int i = 0; i < 128; i++) q[i] = k[i] = v[i] = rng_unif(&seed), out[i] = 7.0f;
        memcpy(q0, q, sizeof q);
        const int32_t pos[2] = {3, 4}, off[3] = {0, 1, 2};
        const kern_seg segs[2] = {{0, 1}, {0, 2}};
        if (bi == 0) {
            o->rope(b, q, pos, 2, 1, 64, 64, 10000.0f, NULL);
        } else {
            kern_attn a = {.n_rows = 2, .n_head = 1, .n_head_kv = 1, .head_dim = 64, .scale = 0.125f,
                           .q = q, .k = k, .v = v, .seg_off = off, .segs = segs, .out = out};
            o->attention(b, &a);
        }
        untouched = memcmp(q, q0, sizeof q) == 0 && out[0] == 7.0f && out[127] == 7.0f;
        T_CHECK(kern_backend_sync(b, &err) == ST_ERR_NOMEM && strncmp(err.msg, op2, strlen(op2)) == 0 &&
                err.msg[strlen(op2)] == ':' && untouched,
                "%s: %s without memory: nothing written, %s", names[bi], op2, err.msg);
        kern_backend_set_alloc_limit(b, SIZE_MAX);
        o->matmul(b, y, &w, x, 4);
        T_CHECK(kern_backend_sync(b, &err) == ST_OK && y[0] != 12345.0f,
                "%s: with memory again it computes", names[bi]);
        free((void *)w.data), free(x);
        kern_backend_free(b);
    }
}

/* mat_prepare: the cpu backend's prepared matrix multiplies to the same bits as the stored
 * matrix with kern_mat_pack's rows (what the loader made before) and owns that many bytes;
 * KERN_MAT_AS_STORED and KERN_MAT_ROWS_ONLY keep the stored form (bitwise the stored
 * matmul); ref keeps the stored form; mat_release clears. */
static void test_mat_prepare(kern_backend *ref, kern_backend *cpu, uint64_t seed) {
    static const uint32_t types[] = {DT_Q4_1, DT_Q8_0, DT_Q6_K, DT_F16};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        const int64_t n_out = 48, n_in = 512;
        const int32_t R = 5;
        kern_mat st = {types[ti], n_out, n_in, make_weights(&seed, types[ti], n_out, n_in), NULL};
        float *x = rand_floats(&seed, R * n_in, 1.0f);
        float *y0 = malloc(sizeof(float) * R * n_out), *y1 = malloc(sizeof(float) * R * n_out);
        kern_mat old = st;
        size_t old_bytes = 0;
        old.packed = kern_mat_pack(&old, &old_bytes, NULL);
        kern_backend_ops(cpu)->matmul(cpu, y0, &old, x, R);
        const kern_ops *o = kern_backend_ops(cpu);
        kern_mat pw;
        size_t bytes = 1;
        T_CHECK(o->mat_prepare(cpu, &pw, &st, 0, &bytes) == ST_OK, "cpu mat_prepare");
        o->matmul(cpu, y1, &pw, x, R);
        T_CHECK(memcmp(y0, y1, sizeof(float) * R * n_out) == 0 && bytes == old_bytes &&
                (pw.packed != NULL) == (old.packed != NULL) && pw.data == st.data,
                "%s: prepared (cpu) = stored + kern_mat_pack, bitwise; %zu bytes", dtype_name(types[ti]),
                bytes);
        o->mat_release(cpu, &pw);
        T_CHECK(pw.data == NULL && pw.packed == NULL, "mat_release clears");
        free((void *)old.packed);
        old.packed = NULL;
        kern_backend_ops(cpu)->matmul(cpu, y0, &old, x, R);
        for (uint32_t fl = KERN_MAT_ROWS_ONLY; fl <= KERN_MAT_AS_STORED; fl++) {
            T_CHECK(o->mat_prepare(cpu, &pw, &st, fl, &bytes) == ST_OK && pw.packed == NULL &&
                    bytes == 0, "cpu flags %u: stored form", fl);
            o->matmul(cpu, y1, &pw, x, R);
            T_CHECK(memcmp(y0, y1, sizeof(float) * R * n_out) == 0, "%s flags %u: the stored matmul's bits",
                    dtype_name(types[ti]), fl);
            o->mat_release(cpu, &pw);
        }
        const kern_ops *r = kern_backend_ops(ref);
        kern_backend_ops(ref)->matmul(ref, y0, &st, x, R);
        T_CHECK(r->mat_prepare(ref, &pw, &st, 0, &bytes) == ST_OK && pw.packed == NULL && bytes == 0,
                "ref keeps the stored form");
        r->matmul(ref, y1, &pw, x, R);
        T_CHECK(memcmp(y0, y1, sizeof(float) * R * n_out) == 0, "ref prepared: same bits");
        r->mat_release(ref, &pw);
        free((void *)st.data), free(x), free(y0), free(y1);
    }
}

/* A build without the cuda backend (this test binary is one) names what to do. */
static void test_no_cuda(void) {
    st_err err = {0};
    kern_backend *b = kern_backend_init("cuda", 1, &err);
    T_CHECK(!b && err.code == ST_ERR_UNSUPPORTED && strstr(err.msg, "no CUDA backend") &&
            strstr(err.msg, "--backend cpu"), "cuda in a build without it: %s", err.msg);
    kern_backend_free(b);
    b = kern_backend_init("gpu", 1, &err);
    T_CHECK(!b && err.code == ST_ERR_ARG && strstr(err.msg, "(known: ref, cpu)"),
            "an unknown name lists the backends this build has: %s", err.msg);
}

int main(void) {
    test_no_cuda();
    st_err err = {0};
    kern_backend *ref = kern_backend_init("ref", 1, &err), *cpu = kern_backend_init("cpu", 2, &err);
    T_CHECK(ref && cpu, "backends: %s", err.msg);
    if (!ref || !cpu) return t_done();
    test_buffers(ref);
    test_buffers(cpu);
    test_kv_ops(ref, 31);
    test_kv_ops(cpu, 32);
    test_op_nomem(41);
    test_mat_prepare(ref, cpu, 51);
    kern_backend_free(ref);
    kern_backend_free(cpu);
    return t_done();
}
