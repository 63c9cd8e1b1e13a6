/* test_cli_tot.c - `multidecode judge` and `multidecode tot` on stories260K when the KV
 * cache fills up (small -c): they run on the commands' loop (app/strategy_run.h), so a
 * full cache gives the message every command gives, a clear exit status and no crash; a
 * tot search stopped after a judged level prints its best leaves (text and --json, which
 * says how it ended), one stopped before any has nothing to show and fails. The
 * breadth-first output is unchanged by the depth-first mode (its texts as captured, its
 * scores the ref backend's within a tolerance), which gives the same leaves at depth 1. */
#include "t.h"
#include "t_run.h"

#include <jansson.h>
#include <math.h>
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

/* Does a `tot --json` output match the expected one: the same end, answer and leaves
 * (rank and text exactly, scores within TOT_SCORE_TOL)? On a mismatch, why into msg. */
#define TOT_SCORE_TOL 1e-4
static bool tot_json_match(const char *out, const char *want, char *msg, size_t cap) {
    json_t *a = out ? json_loads(out, 0, NULL) : NULL, *b = want ? json_loads(want, 0, NULL) : NULL;
    json_t *la = json_object_get(a, "leaves"), *lb = json_object_get(b, "leaves");
    bool ok = false;
    if (!json_is_array(la) || !json_is_array(lb)) snprintf(msg, cap, "no leaves array");
    else if (json_array_size(la) != json_array_size(lb))
        snprintf(msg, cap, "%zu leaves, want %zu", json_array_size(la), json_array_size(lb));
    else if (!json_equal(json_object_get(a, "ended"), json_object_get(b, "ended")) ||
             !json_equal(json_object_get(a, "answer"), json_object_get(b, "answer")))
        snprintf(msg, cap, "another end or answer");
    else {
        ok = true;
        for (size_t i = 0; ok && i < json_array_size(la); i++) {
            json_t *x = json_array_get(la, i), *y = json_array_get(lb, i);
            double sx = json_number_value(json_object_get(x, "score"));
            double sy = json_number_value(json_object_get(y, "score"));
            ok = json_equal(json_object_get(x, "rank"), json_object_get(y, "rank")) &&
                 json_equal(json_object_get(x, "text"), json_object_get(y, "text")) &&
                 json_is_number(json_object_get(x, "score")) && fabs(sx - sy) <= TOT_SCORE_TOL;
            if (!ok) snprintf(msg, cap, "leaf %zu: score %.9g, want %.9g", i, sx, sy);
        }
    }
    json_decref(a);
    json_decref(b);
    return ok;
}

/* The breadth-first search is unchanged by the depth-first mode: its leaves' texts are
 * the ones captured from the program before depth-first search was added (token choices,
 * the same on every machine but for near ties far below these scores' gaps), and their
 * scores are the ref backend's for the same command, within TOT_SCORE_TOL (the scores'
 * last digits depend on the CPU's vector width: AVX-512 and AVX2 differ in the 6th).
 * Depth-first with one level and no threshold gives the same leaves: it judges the
 * start's k thoughts, the best is the answer and the other kept one waits. */
static void check_bfs(const char *args, const char *const texts[2], const char *what) {
    int status, st_ref;
    char *err = NULL, *err_ref = NULL, *out = run2(&status, &err, args), msg[160] = "";
    char ref_args[512];
    snprintf(ref_args, sizeof ref_args, "%s --backend ref", args);
    char *ref = run2(&st_ref, &err_ref, ref_args);
    json_t *r = ref ? json_loads(ref, 0, NULL) : NULL, *leaves = json_object_get(r, "leaves");
    bool texts_ok = json_array_size(leaves) == 2;
    for (size_t i = 0; texts_ok && i < 2; i++) {
        const char *t = json_string_value(json_object_get(json_array_get(leaves, i), "text"));
        texts_ok = t && !strcmp(t, texts[i]);
    }
    T_CHECK(st_ref == 0 && texts_ok, "%s, ref backend: the leaves' texts changed: '%s'", what, ref ? ref : "");
    T_CHECK(status == 0 && tot_json_match(out, ref, msg, sizeof msg), "%s: %s: '%s' vs ref '%s'", what, msg,
            out ? out : "", ref ? ref : "");
    json_decref(r);
    free(out), free(err), free(ref), free(err_ref);
}

static void check_modes(void) {
    static const char *const bfs1[2] = {
        " there was a boy named Tim. Tim loved playing with his toys. One day, he",
        " there was a boy named Tim. Tim loved his toys and always se"};
    static const char *const bfs2[2] = {
        ", there was a little girl named Lily. One day, Lily went to the",
        ", there was a little girl. She loved to play with her to"};
    check_bfs("tot -p 'Once upon a time' -q --json -d 2 -n 12", bfs1, "bfs sampled");
    check_bfs("tot -p 'Once upon a time' -q --json --temp 0 -d 3 -n 8 -k 3 -b 2 --delim sentence --mode bfs", bfs2,
              "bfs greedy");
    int status;
    char *err = NULL, *out;
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

/* The vote's figures recomputed from the chains the JSON lists (key: "chains" for cot,
 * "branches" for judge): only those marked counted vote, and a chain counts when it ended
 * (an end token, a stop string; judge's given texts too), or always with --vote-all. */
static void check_vote_json(const char *args, const char *key, bool all) {
    int status;
    char *err = NULL, *out = run2(&status, &err, args);
    json_t *doc = out ? json_loads(out, 0, NULL) : NULL, *ch = json_object_get(doc, key);
    json_t *vote = json_object_get(doc, "vote");
    int32_t counted = 0, best = 0, n = (int32_t)json_array_size(ch);
    bool marks = n > 0;
    for (int32_t i = 0; i < n; i++) {
        json_t *c = json_array_get(ch, i);
        const char *ended = json_string_value(json_object_get(c, "ended"));
        bool counts = json_is_true(json_object_get(c, "counted"));
        marks &= ended && counts == (all || strcmp(ended, "budget") != 0);
        counted += counts;
        const char *a = json_string_value(json_object_get(c, "answer"));
        int32_t same = 0;
        for (int32_t j = 0; a && counts && j < n; j++) {
            json_t *d = json_array_get(ch, j);
            const char *b = json_string_value(json_object_get(d, "answer"));
            same += b && json_is_true(json_object_get(d, "counted")) && !strcmp(a, b);
        }
        if (same > best) best = same;
    }
    T_CHECK(status == 0 && marks, "%s: every %s entry says how it ended and counts only when it ended: '%.600s'", args,
            key, out ? out : err ? err : "");
    T_CHECK(json_integer_value(json_object_get(vote, "counted")) == counted &&
                json_integer_value(json_object_get(vote, "votes")) == best,
            "%s: the vote counts the %d counted entries (%d votes for the winner): '%.300s'", args, (int)counted,
            (int)best, out ? out : "");
    json_decref(doc);
    free(out), free(err);
}

/* Votes count the chains that ended: a chain the budget cut voted its half-written last
 * number before; --vote-all counts them too. judge --json says how each branch ended. */
static void check_votes(void) {
    check_vote_json("cot -p 'Once upon a time' -q --json --temp 0 -k 6 -n 9 --stop . --vote 'marker: '", "chains",
                    false);
    check_vote_json("cot -p 'Once upon a time' -q --json --temp 0 -k 6 -n 9 --stop . --vote 'marker: ' --vote-all",
                    "chains", true);
    check_vote_json("judge -p 'Once upon a time' -q --json --temp 0 -k 4 -n 24 --vote 'marker: '", "branches", false);
    check_vote_json("judge -p 'Once upon a time' -q --json --temp 0 -k 4 -n 24 --vote 'marker: ' --vote-all",
                    "branches", true);
    int status;
    char *err = NULL, *out = run2(&status, &err, "judge -p 'Once' -b ' upon a time' -b ' a cat' -q --json");
    json_t *doc = out ? json_loads(out, 0, NULL) : NULL, *br = json_object_get(doc, "branches");
    const char *e0 = json_string_value(json_object_get(json_array_get(br, 0), "ended"));
    const char *e1 = json_string_value(json_object_get(json_array_get(br, 1), "ended"));
    T_CHECK(status == 0 && e0 && e1 && !strcmp(e0, "given") && !strcmp(e1, "given"),
            "judge -b: each branch ended 'given': '%.300s'", out ? out : "");
    json_decref(doc);
    free(out), free(err);
}

int main(void) {
    if (!t_cli_setup(bin, sizeof bin, model, sizeof model)) return t_done();
    check_full();
    check_modes();
    check_votes();
    return t_done();
}
