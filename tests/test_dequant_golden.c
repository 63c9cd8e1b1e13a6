/* test_dequant_golden.c - kernels/dtype.c's dequantisers against goldens from an
 * implementation nobody here wrote: gguf-py's gguf.quants (llama.cpp's Python library),
 * through tests/golden/dequant.txt (made by tests/oracle/gen_dequant_golden.py; its
 * header documents the format). Each case is a few blocks of random but valid bytes of
 * one type and the float32 values gguf-py gives them. A type whose dequantiser is not
 * written yet (dtype_dequantize_row returns false) is reported skipped, by name.
 *
 * Exactness: the values must match to within 1 ulp, or to within one float epsilon of the
 * block's largest value. The second clause exists for the types whose formula is
 * d * q + m (Q4_1, Q5_1, Q4_K, Q5_K): a fused multiply-add gives a correctly rounded
 * result that may differ from numpy's two roundings by several ulps when the sum nearly
 * cancels; any real layout or scale bug is orders of magnitude larger. */
#include <float.h>
#include <stdint.h>

#include "kernels/dtype.h"
#include "t.h"

#define DQ_GOLDEN "tests/golden/dequant.txt"

typedef struct dq_case {
    char name[32];
    long n;            /* values */
    long nbytes;       /* block bytes */
    uint8_t *bytes;    /* (nbytes) */
    float *want;       /* (n) */
} dq_case;

/* Next line that is neither blank nor a '#' comment, without its newline; NULL at EOF.
 * line and cap are getline's buffer. */
static char *dq_next_line(FILE *f, char **line, size_t *cap) {
    while (getline(line, cap, f) >= 0) {
        char *s = *line;
        s[strcspn(s, "\r\n")] = '\0';
        while (*s == ' ' || *s == '\t') s++;
        if (*s && *s != '#') return s;
    }
    return NULL;
}

static int dq_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads one case. Returns 1 on success, 0 at a clean end of file, -1 on a malformed file
 * (after printing why). The caller frees c->bytes and c->want. */
static int dq_read_case(FILE *f, dq_case *c, char **line, size_t *cap) {
    char *s = dq_next_line(f, line, cap);
    if (!s) return 0;
    memset(c, 0, sizeof *c);
    if (sscanf(s, "type %31s %ld %ld", c->name, &c->n, &c->nbytes) != 3 || c->n <= 0 ||
        c->nbytes <= 0) {
        fprintf(stderr, "%s: expected 'type NAME N NBYTES', got '%.60s'\n", DQ_GOLDEN, s);
        return -1;
    }
    c->bytes = malloc((size_t)c->nbytes);
    c->want = malloc(sizeof(float) * (size_t)c->n);
    long nb = 0, nv = 0;
    while (nb < c->nbytes && (s = dq_next_line(f, line, cap))) {
        for (; s[0] && s[1] && nb < c->nbytes; s += 2) {
            int hi = dq_hex(s[0]), lo = dq_hex(s[1]);
            if (hi < 0 || lo < 0) break;
            c->bytes[nb++] = (uint8_t)(hi << 4 | lo);
        }
        if (*s) break;
    }
    while (nb == c->nbytes && nv < c->n && (s = dq_next_line(f, line, cap))) {
        char *end;
        for (float v = strtof(s, &end); end != s && nv < c->n; v = strtof(s, &end)) {
            c->want[nv++] = v;
            s = end;
        }
    }
    s = dq_next_line(f, line, cap);
    if (nb != c->nbytes || nv != c->n || !s || strcmp(s, "end") != 0) {
        fprintf(stderr, "%s: case %s: read %ld/%ld bytes, %ld/%ld values, then '%.20s'\n",
                DQ_GOLDEN, c->name, nb, c->nbytes, nv, c->n, s ? s : "EOF");
        return -1;
    }
    return 1;
}

/* Distance in units in the last place between two finite floats (sign-aware). */
static int64_t dq_ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t la = ia < 0 ? (int64_t)INT32_MIN - ia : ia; /* monotone integer order */
    int64_t lb = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return la > lb ? la - lb : lb - la;
}

static void dq_check_case(const dq_case *c) {
    int32_t type = dtype_from_name(c->name);
    T_CHECK(type >= 0, "golden type %s is unknown to dtype_from_name", c->name);
    if (type < 0) return;
    const dtype_info *info = dtype_get((uint32_t)type);
    T_CHECK(dtype_row_ok((uint32_t)type, c->n) &&
            dtype_row_bytes((uint32_t)type, c->n) == (size_t)c->nbytes,
            "%s: %ld values should take %ld bytes, dtype.c says %zu", c->name, c->n,
            c->nbytes, dtype_row_bytes((uint32_t)type, c->n));
    if (dtype_row_bytes((uint32_t)type, c->n) != (size_t)c->nbytes) return;

    float *got = malloc(sizeof(float) * (size_t)c->n);
    for (long i = 0; i < c->n; i++) got[i] = NAN;
    if (!dtype_dequantize_row((uint32_t)type, c->bytes, got, c->n)) {
        T_SKIP("%s: dtype_dequantize_row has no dequantiser for it yet", c->name);
        free(got);
        return;
    }
    long bad = -1, n_exact = 0;
    int64_t worst = 0;
    for (long b0 = 0; b0 < c->n; b0 += info->block) {
        float big = 0; /* largest |value| of this block: the scale of its rounding */
        for (long i = b0; i < b0 + info->block; i++)
            if (fabsf(c->want[i]) > big) big = fabsf(c->want[i]);
        for (long i = b0; i < b0 + info->block; i++) {
            int64_t u = got[i] == got[i] ? dq_ulps(got[i], c->want[i]) : INT64_MAX;
            if (u == 0 || (got[i] == 0 && c->want[i] == 0)) n_exact++;
            bool ok = u <= 1 || fabsf(got[i] - c->want[i]) <= FLT_EPSILON * big;
            if (!ok && (bad < 0 || u > worst)) bad = i, worst = u;
        }
    }
    T_CHECK(bad < 0, "%s: value %ld (block %ld, index %ld): got %.9g, gguf-py %.9g", c->name,
            bad, bad / info->block, bad % info->block, bad >= 0 ? got[bad] : 0.0,
            bad >= 0 ? c->want[bad] : 0.0);
    if (bad < 0)
        fprintf(stderr, "%s: %ld values match gguf-py (%ld bit-exact)\n", c->name, c->n,
                n_exact);
    free(got);
}

int main(void) {
    FILE *f = fopen(DQ_GOLDEN, "r");
    T_CHECK(f != NULL, "cannot open %s (tests run from the repository root)", DQ_GOLDEN);
    if (!f) return t_done();
    char *line = NULL;
    size_t cap = 0;
    int n_cases = 0, r;
    dq_case c;
    while ((r = dq_read_case(f, &c, &line, &cap)) == 1) {
        n_cases++;
        dq_check_case(&c);
        free(c.bytes);
        free(c.want);
    }
    T_CHECK(r == 0, "%s is malformed", DQ_GOLDEN);
    if (r < 0) free(c.bytes), free(c.want);
    T_CHECK(n_cases >= 10, "%s has %d cases, expected one per type (>= 10)", DQ_GOLDEN,
            n_cases);
    free(line);
    fclose(f);
    return t_done();
}
