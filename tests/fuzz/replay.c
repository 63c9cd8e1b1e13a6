/* replay.c - a main() for a fuzz harness without libFuzzer: feeds the harness every file
 * of its regression corpus, so that `make test` replays past findings with the normal
 * compiler (and keeps every harness building).
 *
 *   build/tests/fuzz/replay_NAME [DIR|FILE ...]
 *
 * Without arguments it reads tests/fuzz/regress/NAME/ (NAME from the binary's own name,
 * after "replay_"), relative to the current folder, which `make test` sets to the
 * repository root. There: every past finding, and for the harnesses without findings
 * (session, chat, tok_bpe) the seed corpus tools/fuzz-seeds.py builds (seed-* files), so
 * that the replay exercises real inputs. The empty input always runs first. A finding crashes the process (the
 * name of the file being run is printed before it runs); otherwise the last line is
 * "N passed, 0 failed" with one pass per input. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int n_run;

static int run_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, fp)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int bad = ferror(fp) || !buf;
    fclose(fp);
    if (bad) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* a copy of exactly n bytes, so that ASan sees a read past the input's end */
    uint8_t *in = malloc(n ? n : 1);
    if (n) memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    n_run++;
    return 0;
}

static int select_file(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Runs every file of dir in name order; a missing folder is an empty corpus. */
static int run_dir(const char *dir) {
    struct dirent **names;
    int n = scandir(dir, &names, select_file, alphasort);
    if (n < 0) return 0;
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        bad |= run_file(path);
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv) {
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    const char *name = strncmp(base, "replay_", 7) == 0 ? base + 7 : base;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    n_run++;
    int bad = 0;
    if (argc < 2) {
        char dir[4096];
        snprintf(dir, sizeof dir, "tests/fuzz/regress/%s", name);
        bad = run_dir(dir);
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) bad |= run_dir(argv[i]);
        else bad |= run_file(argv[i]);
    }
    printf("%d passed, %d failed\n", n_run, bad);
    return bad;
}
