/* test_base.c - tests of base/: the growable array (capacity rules, overflow, failure keeps
 * the old array) and the monotonic clock. */
#include "t.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/array.h"

static void test_growth(void) {
    int32_t *v = NULL, n = 0, cap = 0;
    for (int32_t i = 0; i < 1000; i++) {
        int32_t *q = arr_reserve_i32(v, sizeof *v, n + 1, &cap);
        if (!q) break;
        v = q;
        v[n++] = i;
    }
    T_CHECK(n == 1000, "appended %d of 1000", n);
    T_CHECK(cap == 1024, "capacity %d after 1000 appends from empty (doubling from 16)", cap);
    bool ok = true;
    for (int32_t i = 0; i < n; i++) ok &= v[i] == i;
    T_CHECK(ok, "the elements survive every move");
    int32_t *same = arr_reserve_i32(v, sizeof *v, 1000, &cap);
    T_CHECK(same == v && cap == 1024, "room enough: the same array, the same capacity");
    free(v);

    size_t scap = 0;
    char *s = arr_reserve(NULL, 1, 17, &scap);
    T_CHECK(s && scap == 32, "17 bytes from empty: capacity %zu (want 32)", scap);
    free(s);
}

static void test_refusals(void) {
    int32_t cap = 4;
    int32_t *v = malloc(sizeof *v * 4);
    v[3] = 7;
    T_CHECK(!arr_reserve_i32(v, sizeof *v, -1, &cap) && cap == 4, "negative count refused");
    T_CHECK(!arr_reserve_i32(v, SIZE_MAX / 8, 100, &cap) && cap == 4,
            "a byte size that overflows is refused, capacity unchanged");
    T_CHECK(v[3] == 7, "the old array is still the caller's after a refusal");
    size_t scap = 4;
    T_CHECK(!arr_reserve(v, 16, SIZE_MAX / 2, &scap) && scap == 4, "size_t overflow refused");
    free(v);
}

static void test_clock(void) {
    double a = mono_now_s(), b = mono_now_s();
    T_CHECK(a > 0 && b >= a, "monotonic: %.9f then %.9f", a, b);
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, NULL);
    double c = mono_now_s();
    T_CHECK(c - b >= 0.019 && c - b < 5, "a 20 ms sleep measures %.4f s", c - b);
}

int main(void) {
    test_growth();
    test_refusals();
    test_clock();
    return t_done();
}
