/* test_base.c - tests of base/: the growable array (capacity rules, overflow, failure keeps
 * the old array), the monotonic clock and the one writer of files (outfile.h). */
#include "t.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/outfile.h"

#include <fcntl.h>
#include <sys/stat.h>

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

/* The bytes of path ("" when it cannot be read) into buf. */
static const char *slurp(const char *path, char *buf, size_t cap) {
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (f) buf[fread(buf, 1, cap - 1, f)] = '\0', fclose(f);
    return buf;
}

/* Entries of dir whose names start with prefix (temporary files left behind). */
static int n_prefixed(const char *dir, const char *prefix) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c '^%s'", dir, prefix);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

static void test_outfile(void) {
    char dir[] = "/tmp/md_test_base_XXXXXX", path[64], other[64], fifo[64], buf[64];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/f.txt", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    st_err err = {0};
    T_CHECK(outfile_write(path, "test file", "one", 3, &err) == ST_OK, "write: %s", err.msg);
    T_CHECK(outfile_write(path, "test file", "two", 3, &err) == ST_OK &&
                !strcmp(slurp(path, buf, sizeof buf), "two"), "replace: %s", err.msg);
    outfile o;
    T_CHECK(outfile_begin(&o, path, "test file", &err) == ST_OK && o.fp, "begin: %s", err.msg);
    if (o.fp) fputs("half", o.fp);
    outfile_abort(&o);
    T_CHECK(!strcmp(slurp(path, buf, sizeof buf), "two") && n_prefixed(dir, "f.txt.") == 0,
            "an aborted write leaves the old file and no temporary file: '%s'", buf);
    /* refused: a link (not written through nor replaced), a FIFO, a directory, a device */
    outfile_write(other, "test file", "precious", 8, &err);
    char link[64];
    snprintf(link, sizeof link, "%s/link", dir);
    struct stat sb;
    T_CHECK(symlink(other, link) == 0 &&
                outfile_write(link, "test file", "x", 1, &err) == ST_ERR_IO &&
                strstr(err.msg, "is a symbolic link") && lstat(link, &sb) == 0 &&
                S_ISLNK(sb.st_mode) && !strcmp(slurp(other, buf, sizeof buf), "precious"),
            "a link is refused and kept: %s", err.msg);
    T_CHECK(mkfifo(fifo, 0600) == 0 && outfile_write(fifo, "test file", "x", 1, &err) == ST_ERR_IO &&
                strstr(err.msg, "'/tmp/md_test_base_") && strstr(err.msg, "is a FIFO, not a regular file"),
            "a FIFO is refused: %s", err.msg);
    T_CHECK(outfile_write(dir, "test file", "x", 1, &err) == ST_ERR_IO &&
                strstr(err.msg, "is a directory"), "a directory is refused: %s", err.msg);
    T_CHECK(outfile_write("/dev/null", "test file", "x", 1, &err) == ST_ERR_IO &&
                strstr(err.msg, "is a character device") && stat("/dev/null", &sb) == 0 &&
                S_ISCHR(sb.st_mode), "a device is refused: %s", err.msg);
    T_CHECK(outfile_write("/nonexistent-dir/x", "test file", "x", 1, &err) == ST_ERR_IO &&
                strstr(err.msg, "unchanged"), "a missing folder: %s", err.msg);
    /* appending (a log): a regular file grows, a FIFO or a link is refused at once */
    int fd = outfile_append(path, "log", &err);
    T_CHECK(fd >= 0 && write(fd, "+", 1) == 1, "append: %s", err.msg);
    if (fd >= 0) close(fd);
    T_CHECK(!strcmp(slurp(path, buf, sizeof buf), "two+"), "appended: '%s'", buf);
    T_CHECK(outfile_append(fifo, "log", &err) < 0 && strstr(err.msg, "is a FIFO"),
            "append to a FIFO is refused: %s", err.msg);
    T_CHECK(outfile_append(link, "log", &err) < 0 && strstr(err.msg, "is a symbolic link"),
            "append through a link is refused: %s", err.msg);
    T_CHECK(n_prefixed(dir, "") == 4, "only the four files made are left");
    unlink(path), unlink(other), unlink(fifo), unlink(link);
    rmdir(dir);
}

int main(void) {
    test_growth();
    test_refusals();
    test_clock();
    test_outfile();
    return t_done();
}
