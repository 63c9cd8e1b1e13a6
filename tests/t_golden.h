/* t_golden.h - parsing helpers shared by the tests that compare with llama.cpp's goldens
 * (tests/golden/smollm2_greedy.txt, tests/golden/qmodels/golden.txt): id lists and the
 * top-5 (id, logit) pairs recorded at each step. Header-only, include after t.h. */
#ifndef MD_T_GOLDEN_H
#define MD_T_GOLDEN_H

#include <stdbool.h>
#include <stdint.h>

#define T_GOLDEN_TOP_K 5

/* One step of a golden: llama.cpp's top-5, largest first; id[0] is its pick. */
typedef struct t_golden_step {
    int32_t id[T_GOLDEN_TOP_K];
    float logit[T_GOLDEN_TOP_K];
} t_golden_step;

/* Parses n non-negative ints from s into a new array (caller frees); NULL when malformed. */
static inline int32_t *t_golden_ids(const char *s, int32_t n) {
    int32_t *v = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    for (int32_t i = 0; v && i < n; i++) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 0 || x > INT32_MAX) {
            free(v);
            return NULL;
        }
        v[i] = (int32_t)x;
        s = end;
    }
    return v;
}

/* Parses "(ID LOGIT) x T_GOLDEN_TOP_K" into st; false when malformed. */
static inline bool t_golden_step_parse(const char *s, t_golden_step *st) {
    for (int k = 0; k < T_GOLDEN_TOP_K; k++) {
        int off = 0;
        if (sscanf(s, " %d %f%n", &st->id[k], &st->logit[k], &off) != 2 || st->id[k] < 0)
            return false;
        s += off;
    }
    return true;
}

/* One line of a case body: "prompt N ids...", "gen N STOP ids...", "step I (id logit)x5" or
 * "end", filling the case's arrays (steps sized by gen). Returns 1 when the line was taken,
 * 2 at a complete case's "end", 0 when malformed or out of order. */
static inline int t_golden_case_line(const char *s, int32_t **prompt, int32_t *n_prompt,
                                     int32_t **gen, int32_t *n_gen, t_golden_step **steps) {
    int n, i, off = 0;
    char stop[16];
    if (!*prompt && sscanf(s, "prompt %d%n", &n, &off) == 1 && n > 0) {
        *n_prompt = n;
        return (*prompt = t_golden_ids(s + off, n)) != NULL;
    }
    if (!*gen && sscanf(s, "gen %d %15s%n", &n, stop, &off) == 2 && n > 0) {
        *n_gen = n;
        *steps = calloc((size_t)n, sizeof **steps);
        return (*gen = t_golden_ids(s + off, n)) != NULL;
    }
    if (*gen && sscanf(s, "step %d%n", &i, &off) == 1 && i >= 0 && i < *n_gen)
        return t_golden_step_parse(s + off, &(*steps)[i]) && (*steps)[i].id[0] == (*gen)[i];
    if (strcmp(s, "end") == 0) return *prompt && *gen ? 2 : 0;
    return 0;
}

/* Calls line(ud, s) for each line of path (newline stripped; blank and '#' lines skipped)
 * until it returns false. done(ud) then says whether the file ended where it may (no case
 * left open). Prints the malformed line, or why the file could not be read; returns
 * whether everything was taken. */
static inline bool t_golden_lines(const char *path, bool (*line)(void *ud, const char *s),
                                  bool (*done)(void *ud), void *ud) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s (tests run from the repository root)\n", path);
        return false;
    }
    char *buf = NULL;
    size_t cap = 0;
    int32_t lineno = 0;
    bool ok = true;
    while (ok && getline(&buf, &cap, f) >= 0) {
        lineno++;
        buf[strcspn(buf, "\r\n")] = '\0';
        if (*buf != '#' && *buf != '\0') ok = line(ud, buf);
    }
    bool ended = ok && done(ud);
    if (!ended) fprintf(stderr, "%s:%d: malformed: '%.60s'\n", path, lineno, ok ? "EOF" : buf);
    free(buf);
    fclose(f);
    return ended;
}

#endif
