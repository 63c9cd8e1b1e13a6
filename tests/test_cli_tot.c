/* test_cli_tot.c - `multidecode judge` and `multidecode tot` on stories260K when the KV
 * cache fills up (small -c): they run on the commands' loop (app/strategy_run.h), so a
 * full cache gives the message every command gives, a clear exit status and no crash; a
 * tot search stopped after a judged level prints its best leaves (text and --json, which
 * says how it ended), one stopped before any has nothing to show and fails. The
 * breadth-first output is unchanged by the depth-first mode, which gives the same leaves
 * at depth 1. */
#include "t.h"
#include "t_run.h"

#include <string.h>

static char bin[4096], model[4096];

/* Runs the command line (after `bin -m model`) with stderr into *err_out (malloc'd) and
 * returns stdout; *status its exit status. */
static char *run2(int *status, char **err_out, const char *args) {
    char errf[] = "/tmp/md_cli_tot_XXXXXX";
    int fd = mkstemp(errf);
    if (fd < 0) return NULL;
    close(fd);
    char *out = t_runf(status, "%s %s -m %s 2>%s", bin, args, model, errf);
    FILE *f = fopen(errf, "r");
    *err_out = calloc(1, 1 << 14);
    if (f && *err_out) fread(*err_out, 1, (1 << 14) - 1, f);
    if (f) fclose(f);
    unlink(errf);
    return out;
}

/* Fails with a message naming the cache and how to raise it, nothing on stdout. */
static void check_fails(const char *args, const char *who, int slots) {
    int status;
    char *err = NULL, *out = run2(&status, &err, args);
    char want[128];
    snprintf(want, sizeof want, "%s: the KV cache of %d slots is full after", who, slots);
    T_CHECK(out && err && status == 1 && strstr(err, want) && strstr(err, "(raise it with -c)") && !out[0],
            "%s: exit %d, stderr '%s', stdout '%.80s'", args, status, err ? err : "", out ? out : "");
    free(out);
    free(err);
}

static void check_full(void) {
    check_fails("tot -p 'Once upon a time' -c 40", "tot", 40);        /* while growing level 1 */
    check_fails("tot -p 'Once upon a time' -c 150", "tot", 150);      /* at level 1's judge */
    check_fails("judge -p 'Once upon a time' -k 3 -n 20 -c 40", "cot", 40);
    check_fails("judge -p 'Once upon a time' -k 3 -n 20 -c 64", "judge", 64);
    check_fails("judge -p 'Once' -b ' upon a time there was' -b ' a cat' -c 24", "judge", 24);

    /* level 1 judged, level 2 does not fit: level 1's best leaves, then the note */
    int status;
    char *err = NULL, *out = run2(&status, &err, "tot -p 'Once upon a time' -c 300 -q");
    T_CHECK(out && err && status == 0 && strstr(out, "--- #1 score") && strstr(out, "--- #2 score") &&
                strstr(err, "multidecode: stopped: the KV cache of 300 slots is full (raise it with -c)"),
            "tot -c 300: exit %d, stdout '%.120s', stderr '%s'", status, out ? out : "", err ? err : "");
    free(out);
    free(err);
    out = run2(&status, &err, "tot -p 'Once upon a time' -c 300 -q --json");
    T_CHECK(out && status == 0 && strstr(out, "\"ended\": \"full context\"") && strstr(out, "\"leaves\""),
            "tot -c 300 --json: exit %d, '%.200s'", status, out ? out : "");
    free(out);
    free(err);
    out = run2(&status, &err, "tot -p 'Once upon a time' -d 1 -q --json");
    T_CHECK(out && status == 0 && strstr(out, "\"ended\": \"done\"") && err && !err[0],
            "tot -d 1 --json: exit %d, '%.200s', stderr '%s'", status, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

/* Breadth-first output as before depth-first search was added (captured from the
 * program before), and depth-first with one level and no threshold gives the same leaves:
 * it judges the start's k thoughts, the best is the answer and the other kept one waits. */
static void check_modes(void) {
    static const char *const bfs1 =
        "{\"leaves\": [\n"
        " {\"rank\": 1, \"score\": -0.225844324, \"text\": \" there was a boy named Tim. Tim loved playing with "
        "his toys. One day, he\"},\n"
        " {\"rank\": 2, \"score\": -0.252780437, \"text\": \" there was a boy named Tim. Tim loved his toys and "
        "always se\"}\n"
        "], \"answer\": null, \"ended\": \"done\"}\n";
    static const char *const bfs2 =
        "{\"leaves\": [\n"
        " {\"rank\": 1, \"score\": -0.271823049, \"text\": \", there was a little girl named Lily. One day, Lily "
        "went to the\"},\n"
        " {\"rank\": 2, \"score\": -0.277219951, \"text\": \", there was a little girl. She loved to play with "
        "her to\"}\n"
        "], \"answer\": null, \"ended\": \"done\"}\n";
    int status;
    char *err = NULL, *out = run2(&status, &err, "tot -p 'Once upon a time' -q --json -d 2 -n 12");
    T_CHECK(out && status == 0 && !strcmp(out, bfs1), "bfs sampled output unchanged: '%s'", out ? out : "");
    free(out), free(err);
    out = run2(&status, &err,
               "tot -p 'Once upon a time' -q --json --temp 0 -d 3 -n 8 -k 3 -b 2 --delim sentence --mode bfs");
    T_CHECK(out && status == 0 && !strcmp(out, bfs2), "bfs greedy output unchanged: '%s'", out ? out : "");
    free(out), free(err);
    char *a = run2(&status, &err, "tot -p 'Mom said' -q --json --temp 0 -d 1 -n 8");
    free(err);
    char *b = run2(&status, &err, "tot -p 'Mom said' -q --json --temp 0 -d 1 -n 8 --mode dfs");
    T_CHECK(a && b && status == 0 && strstr(a, "\"rank\": 2") && !strcmp(a, b), "dfs -d 1 = bfs -d 1: '%s' / '%s'",
            a ? a : "", b ? b : "");
    free(a), free(b), free(err);
    out = run2(&status, &err, "tot -p x --mode sideways");
    T_CHECK(status == 2 && strstr(err, "--mode: bfs or dfs"), "bad --mode: %d '%s'", status, err ? err : "");
    free(out), free(err);
    out = run2(&status, &err, "tot -p x --mode dfs --threshold high");
    T_CHECK(status == 2 && strstr(err, "--threshold: a number"), "bad --threshold: %d '%s'", status, err ? err : "");
    free(out), free(err);
}

int main(void) {
    if (!t_cli_setup(bin, sizeof bin, model, sizeof model)) return t_done();
    check_full();
    check_modes();
    return t_done();
}
