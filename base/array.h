/* array.h - the one growable-array helper and the one monotonic clock, for every layer.
 *
 * An array here is a pointer, a count the caller keeps and a capacity this helper keeps:
 *
 *     if (!ARR_GROW_I32(a->v, a->n + 1, a->cap)) return st_set(err, ST_ERR_NOMEM, "...");
 *     a->v[a->n++] = x;
 *
 * The capacity doubles (from 16), so n appends cost O(n) copies in all. */
#ifndef MD_BASE_ARRAY_H
#define MD_BASE_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* p (NULL or an array of *cap elements of elem bytes, from malloc) grown so that it holds
 * at least need elements: the new pointer, with *cap set, or NULL where the size overflows
 * or memory runs out (p is then untouched and still the caller's, *cap unchanged). */
void *arr_reserve(void *p, size_t elem, size_t need, size_t *cap);
/* The same for arrays whose count and capacity are int32_t (node ids, token counts): the
 * capacity never exceeds INT32_MAX. */
void *arr_reserve_i32(void *p, size_t elem, int32_t need, int32_t *cap);

/* ARR_GROW(a, need, cap): grows the array a (an lvalue pointer; cap its size_t capacity)
 * to hold need elements; false, with a and cap untouched, when memory runs out.
 * ARR_GROW_I32 is the same for an int32_t capacity. (They store through the pointer's
 * bytes, as every POSIX platform allows: all object pointers there share one form.) */
#define ARR_GROW(a, need, cap) arr_grow_((void *)&(a), sizeof *(a), (need), &(cap))
#define ARR_GROW_I32(a, need, cap) arr_grow_i32_((void *)&(a), sizeof *(a), (need), &(cap))
bool arr_grow_(void *pa, size_t elem, size_t need, size_t *cap);
bool arr_grow_i32_(void *pa, size_t elem, int32_t need, int32_t *cap);

/* Seconds on the monotonic clock (for step times, timeouts and benches: never goes back). */
double mono_now_s(void);

#endif
