/* autosave.c - the autosave generations (autosave.h): counted, sized, moved back one,
 * the oldest dropped beyond the limits. */
#include "session/autosave.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Generations looked for at most (a folder left with more keeps the rest). */
#define AUTOSAVE_SCAN 100000

autosave_params autosave_default_params(void) {
    return (autosave_params){.max_gens = 100, .min_gens = 8, .max_bytes = (int64_t)256 << 20};
}

void autosave_name(const char *dir, int32_t i, char *out, size_t cap) {
    if (i == 0) snprintf(out, cap, "%s/autosave.json", dir);
    else snprintf(out, cap, "%s/autosave.%d.json", dir, (int)i);
}

/* The size of generation i, -1 when it is not there. */
static int64_t gen_size(const char *dir, int32_t i) {
    char path[4200];
    struct stat st;
    autosave_name(dir, i, path, sizeof path);
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

st_code autosave_rotate(const char *dir, const autosave_params *p, char *note, size_t cap, st_err *err) {
    note[0] = '\0';
    if (gen_size(dir, 0) < 0) return ST_OK;
    int32_t n = 0; /* generations there now, this run's included: 0 .. n-1 */
    while (n < AUTOSAVE_SCAN && gen_size(dir, n) >= 0) n++;
    char from[4200], to[4200];
    st_code rc = ST_OK;
    for (int32_t i = n; i >= 1; i--) {
        autosave_name(dir, i - 1, from, sizeof from);
        autosave_name(dir, i, to, sizeof to);
        if (rename(from, to) && errno != ENOENT)
            rc = st_set(err, ST_ERR_IO, "cannot keep the autosave %s: %s", from, strerror(errno));
    }
    /* generations 1..n now; the oldest go while too many, or too big above the floor */
    int64_t total = 0;
    for (int32_t i = 1; i <= n; i++) total += gen_size(dir, i) > 0 ? gen_size(dir, i) : 0;
    int32_t dropped = 0;
    int64_t freed = 0;
    while (n > p->max_gens || (n > p->min_gens && total > p->max_bytes)) {
        int64_t sz = gen_size(dir, n);
        autosave_name(dir, n, from, sizeof from);
        if (remove(from) && errno != ENOENT) break;
        total -= sz > 0 ? sz : 0, freed += sz > 0 ? sz : 0;
        dropped++, n--;
    }
    if (dropped)
        snprintf(note, cap, "dropped the %d oldest autosave%s (%.1f MiB): %d kept, %.1f MiB", (int)dropped,
                 dropped == 1 ? "" : "s", (double)freed / (1 << 20), (int)n, (double)total / (1 << 20));
    return rc;
}
