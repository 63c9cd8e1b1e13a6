/* test_session_hostile.c - session files written by someone else: a file with
 * more free-form settings than a session holds is refused with a message naming the limit
 * (a cap instead of minutes of quadratic loading), and session_settings_set refuses the
 * key after the last; a FIFO, /dev/zero or a directory given as a session is refused at
 * once, saying what it is (an alarm ends the test if the open blocks), and a file over the
 * size cap is refused before it is read; a sampler value outside what the options accept
 * is reset to its default with the options' message as a warning, the file still loaded
 *; a save never follows a link planted where its temporary
 * file goes, and leaves no temporary file behind. Every check is by count or message,
 * never by time. */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>

#include "forest/forest.h"
#include "session/session.h"
#include "t.h"

static char tmpdir[64];

/* A valid session document with no nodes and n_extra extra settings. */
static json_t *doc_with_extra(int32_t n_extra) {
    json_t *extra = json_object();
    char key[32];
    for (int32_t i = 0; i < n_extra; i++) {
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(extra, key, json_string("v"));
    }
    return json_pack("{s:s, s:i, s:{s:s, s:i, s:s, s:i}, s:{s:{s:f, s:i, s:f, s:f, s:i}, "
                     "s:s, s:o}, s:{s:i, s:i, s:[]}}",
                     "format", SESSION_FORMAT, "version", SESSION_VERSION, "model", "file", "",
                     "size", 0, "sha256", "", "n_vocab", 0, "settings", "sampler", "temp", 0.8,
                     "top_k", 40, "top_p", 0.95, "min_p", 0.05, "seed", 1, "chat_template", "",
                     "extra", extra, "forest", "n_slots", 16, "top_k", 0, "nodes");
}

/* Loads doc; returns the forest (NULL + err on failure), s filled. */
static forest *load_doc(json_t *doc, session_settings *s, st_err *err) {
    char *text = json_dumps(doc, JSON_COMPACT);
    forest *f = text ? session_load_mem(text, strlen(text), NULL, s, NULL, err) : NULL;
    free(text);
    json_decref(doc);
    return f;
}

static void test_extra_cap(void) {
    session_settings s;
    st_err err = {0};
    forest *f = load_doc(doc_with_extra(SESSION_MAX_EXTRA), &s, &err);
    T_CHECK(f && s.n_kv == SESSION_MAX_EXTRA, "a session with %d extra settings loads: %s",
            SESSION_MAX_EXTRA, err.msg);
    if (f) {
        T_CHECK(!strcmp(session_settings_get(&s, "k0"), "v"), "the first key is kept");
        /* one more key is refused by the setter, and an existing one still replaces */
        T_CHECK(session_settings_set(&s, "one-more", "x", &err) == ST_ERR_ARG &&
                    strstr(err.msg, "4096"),
                "the key after the last is refused naming the limit: %s", err.msg);
        T_CHECK(session_settings_set(&s, "k7", "w", &err) == ST_OK &&
                    !strcmp(session_settings_get(&s, "k7"), "w") && s.n_kv == SESSION_MAX_EXTRA,
                "replacing a key at the limit works");
        session_settings_free(&s);
    }
    forest_free(f);
    st_clear(&err);
    f = load_doc(doc_with_extra(SESSION_MAX_EXTRA + 1), &s, &err);
    T_CHECK(!f && err.code == ST_ERR_FORMAT && strstr(err.msg, "4097") && strstr(err.msg, "4096"),
            "a session with one more extra setting is refused with its count and the limit: %d %s",
            err.code, err.msg);
    forest_free(f);
}

/* session_load of path must fail with ST_ERR_IO and a message holding needle. */
static void expect_refused(const char *path, const char *needle, const char *what) {
    session_settings s;
    st_err err = {0};
    forest *f = session_load(path, NULL, &s, NULL, &err);
    T_CHECK(!f && err.code == ST_ERR_IO && strstr(err.msg, needle) && strstr(err.msg, path),
            "%s: want ST_ERR_IO with \"%s\", got %d \"%s\"", what, needle, err.code, err.msg);
    forest_free(f);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char m[] = "test_session_hostile: FAIL: session_load blocked on a FIFO\n";
    (void)!write(2, m, sizeof m - 1);
    t_fail++; /* main is blocked in open(), not inside stdio: t_done can print */
    _exit(t_done());
}

static void test_not_regular(void) {
    char fifo[128], big[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmpdir);
    snprintf(big, sizeof big, "%s/big.json", tmpdir);
    signal(SIGALRM, on_alarm);
    alarm(20);
    if (mkfifo(fifo, 0600) == 0) expect_refused(fifo, "is a FIFO, not a regular file", "a FIFO");
    else T_SKIP("mkfifo failed");
    alarm(0);
    unlink(fifo);
    if (access("/dev/zero", R_OK) == 0)
        expect_refused("/dev/zero", "is a character device, not a regular file", "/dev/zero");
    expect_refused(tmpdir, "is a directory, not a regular file", "a directory");
    /* a sparse file one byte over the cap: refused from its size, nothing read */
    int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    T_CHECK(fd >= 0 && ftruncate(fd, (off_t)SESSION_MAX_FILE + 1) == 0, "sparse file");
    if (fd >= 0) close(fd);
    expect_refused(big, "more than the 1073741824 this program reads", "a file over the cap");
    unlink(big);
}

/* A document whose sampler field key is set to v (outside what the options and :set
 * accept) still loads its tree, with the sampler at its defaults and a warning with the
 * message the options and :set give (the autosave of a TUI run whose :set took
 * such a value could not be loaded at all). */
static void expect_reset_sampler(const char *key, json_t *v, const char *msg) {
    json_t *doc = doc_with_extra(0);
    json_object_set_new(json_object_get(json_object_get(doc, "settings"), "sampler"), key, v);
    session_settings s, s0;
    st_err err = {0};
    forest *g = load_doc(doc_with_extra(0), &s0, &err), *f = load_doc(doc, &s, &err);
    sample_params d = sample_default_params();
    T_CHECK(f && g && forest_n_live(f) == forest_n_live(g) && s.sample.temp == d.temp &&
                s.sample.top_k == d.top_k && s.sample.top_p == d.top_p &&
                s.sample.min_p == d.min_p && strstr(s.warning, msg),
            "sampler %s out of range: want the tree loaded, the default and a warning \"%s\", "
            "got %d \"%s\" (warning \"%s\")", key, msg, err.code, err.msg, f ? s.warning : "");
    if (f) session_settings_free(&s);
    if (g) session_settings_free(&s0);
    forest_free(f), forest_free(g);
}

static void test_sampler_ranges(void) {
    expect_reset_sampler("temp", json_real(-1), "'temp' is -1, want a finite number, 0 or more");
    /* finite as a double, infinite as a float */
    expect_reset_sampler("temp", json_real(1e300), "'temp' is 1e+300, want a finite number");
    expect_reset_sampler("top_p", json_real(0), "'top_p' is 0, want 0 < P <= 1");
    expect_reset_sampler("top_p", json_real(1.5), "'top_p' is 1.5, want 0 < P <= 1");
    expect_reset_sampler("min_p", json_real(-0.5), "'min_p' is -0.5, want 0 <= P < 1");
    expect_reset_sampler("min_p", json_real(1), "'min_p' is 1, want 0 <= P < 1");
    expect_reset_sampler("top_k", json_integer(-5), "'top_k' is -5, want an integer from 0 to "
                         "1073741824");
    expect_reset_sampler("top_k", json_integer(INT32_MAX), "'top_k' is 2147483647, want an "
                         "integer from 0 to 1073741824");
    session_settings s;
    st_err err = {0};
    forest *f = load_doc(doc_with_extra(0), &s, &err);
    T_CHECK(f && s.sample.top_k == 40, "the in-range sampler loads: %s", err.msg);
    if (f) session_settings_free(&s);
    forest_free(f);
}

/* Files in tmpdir whose name starts with prefix. */
static int count_prefixed(const char *prefix) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c '^%s'", tmpdir, prefix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void test_save_link(void) {
    char path[128], tmp[140], victim[128];
    snprintf(path, sizeof path, "%s/s.json", tmpdir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(victim, sizeof victim, "%s/victim", tmpdir);
    FILE *v = fopen(victim, "w");
    if (v) fputs("precious", v), fclose(v);
    T_CHECK(symlink(victim, tmp) == 0, "plant a link at PATH.tmp");
    forest *f = forest_init(16, 0);
    session_settings s = session_settings_default();
    st_err err = {0};
    T_CHECK(session_save(path, f, &s, NULL, NULL, &err) == ST_OK, "save beside a planted link: %s",
            err.msg);
    char buf[64] = "";
    v = fopen(victim, "r");
    if (v) (void)!fgets(buf, sizeof buf, v), fclose(v);
    T_CHECK(!strcmp(buf, "precious"), "the link's target is untouched: \"%s\"", buf);
    struct stat sb;
    T_CHECK(lstat(path, &sb) == 0 && S_ISREG(sb.st_mode), "the session is a regular file");
    unlink(tmp);
    T_CHECK(count_prefixed("s.json.") == 0, "no temporary file is left");
    /* a save that fails at the rename (the target is a non-empty directory) removes its
     * temporary file */
    char dir[140], inner[160];
    snprintf(dir, sizeof dir, "%s/d", tmpdir);
    snprintf(inner, sizeof inner, "%s/x", dir);
    mkdir(dir, 0755);
    v = fopen(inner, "w");
    if (v) fclose(v);
    T_CHECK(session_save(dir, f, &s, NULL, NULL, &err) == ST_ERR_IO && count_prefixed("d.") == 0,
            "a failed rename leaves no temporary file: %s", err.msg);
    unlink(inner), rmdir(dir), unlink(path), unlink(victim);
    forest_free(f);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/md_test_hostile_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_extra_cap();
    test_not_regular();
    test_sampler_ranges();
    test_save_link();
    rmdir(tmpdir);
    return t_done();
}
