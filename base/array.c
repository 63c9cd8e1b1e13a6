/* array.c - arr_reserve and the monotonic clock (see array.h). */
#include "base/array.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The capacity after doubling from max(cap, 16) until it reaches need, or 0 when that
 * passes limit or the byte size overflows. */
static size_t next_cap(size_t cap, size_t need, size_t elem, size_t limit) {
    size_t c = cap < 16 ? 16 : cap;
    while (c < need) c = c > limit / 2 ? limit : c * 2;
    if (c > limit || c > SIZE_MAX / elem) return 0;
    return c;
}

static void *reserve(void *p, size_t elem, size_t need, size_t *cap, size_t limit) {
    if (need <= *cap && p) return p;
    if (!elem) elem = 1;
    size_t c = next_cap(*cap, need, elem, limit);
    if (!c) return NULL;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

void *arr_reserve(void *p, size_t elem, size_t need, size_t *cap) {
    return reserve(p, elem, need, cap, SIZE_MAX);
}

void *arr_reserve_i32(void *p, size_t elem, int32_t need, int32_t *cap) {
    if (need < 0) return NULL;
    size_t c = *cap > 0 ? (size_t)*cap : 0;
    void *q = reserve(p, elem, (size_t)need, &c, INT32_MAX);
    if (q) *cap = (int32_t)c;
    return q;
}

/* Moves the pointer stored at pa through arr_reserve's result; memcpy because pa is the
 * address of some T *, read and written here as the void * it converts to. */
static bool grow_at(void *pa, void *q) {
    if (!q) return false;
    memcpy(pa, &q, sizeof q);
    return true;
}

static void *load(const void *pa) {
    void *p;
    memcpy(&p, pa, sizeof p);
    return p;
}

bool arr_grow_(void *pa, size_t elem, size_t need, size_t *cap) {
    return grow_at(pa, arr_reserve(load(pa), elem, need, cap));
}

bool arr_grow_i32_(void *pa, size_t elem, int32_t need, int32_t *cap) {
    return grow_at(pa, arr_reserve_i32(load(pa), elem, need, cap));
}

double mono_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
