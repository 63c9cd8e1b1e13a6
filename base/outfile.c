/* outfile.c - regular files only, written whole through a temporary file and a rename, or
 * appended to (outfile.h). */
#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/infile.h"

/* ST_OK when path does not exist or is a regular file (lstat: a link is not followed). */
static st_code check_target(const char *path, const char *what, st_err *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return errno == ENOENT ? ST_OK
                               : st_set(err, ST_ERR_IO, "cannot write %s '%s': %s", what, path,
                                        strerror(errno));
    if (S_ISLNK(sb.st_mode))
        return st_set(err, ST_ERR_IO, "%s '%s' is a symbolic link: not writing through it",
                      what, path);
    if (!S_ISREG(sb.st_mode))
        return st_set(err, ST_ERR_IO, "%s '%s' is %s, not a regular file: not writing to it",
                      what, path, infile_kind(sb.st_mode));
    return ST_OK;
}

/* Creates a new file PATH.tmp.PID.N (its name into tmp, cap bytes) in the target's
 * folder: O_EXCL | O_NOFOLLOW, so whatever is already there (a planted link, another
 * save's file, a stale one from a crash) is never opened, and a fresh name is tried
 * instead. -1 with errno set. */
static int create_unique(const char *path, char *tmp, size_t cap) {
    static _Atomic unsigned counter;
    for (int tries = 0; tries < 100; tries++) {
        snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

static void release(outfile *o) {
    free(o->path), free(o->tmp);
    o->path = o->tmp = NULL;
    o->fp = NULL;
}

st_code outfile_begin(outfile *o, const char *path, const char *what, st_err *err) {
    *o = (outfile){.what = what};
    st_code rc = check_target(path, what, err);
    if (rc) return rc;
    size_t plen = strlen(path), tcap = plen + 48;
    o->path = strdup(path);
    o->tmp = malloc(tcap);
    if (!o->path || !o->tmp) {
        release(o);
        return st_set(err, ST_ERR_NOMEM, "out of memory writing %s '%s'", what, path);
    }
    int fd = create_unique(path, o->tmp, tcap);
    if (fd < 0 || !(o->fp = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(o->tmp);
        /* the target first and the reason right after it: a status line may show no more */
        rc = st_set(err, ST_ERR_IO, "cannot write %s %s: %s (left unchanged)", what, path,
                    strerror(e));
        release(o);
        return rc;
    }
    return ST_OK;
}

/* Makes the rename itself durable; some file systems cannot fsync a directory (EINVAL),
 * and the file is in place anyway, so this is best effort. */
static void sync_folder(const char *path) {
    char *dir = strdup(path);
    int dfd = dir ? open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
}

st_code outfile_commit(outfile *o, st_err *err) {
    if (!o->fp) return st_set(err, ST_ERR_IO, "cannot write %s: it was not opened", o->what);
    const char *step = "write";
    int e = 0;
    errno = 0;
    if (ferror(o->fp) || fflush(o->fp) != 0) e = errno ? errno : EIO;
    if (!e && fsync(fileno(o->fp)) != 0) e = errno, step = "sync";
    if (fclose(o->fp) != 0 && !e) e = errno, step = "close";
    o->fp = NULL;
    if (!e && rename(o->tmp, o->path) != 0) e = errno, step = "rename";
    if (e) {
        unlink(o->tmp);
        st_code rc = st_set(err, ST_ERR_IO, "cannot %s %s '%s': %s (the old '%s' is unchanged)",
                            step, o->what, o->tmp, strerror(e), o->path);
        release(o);
        return rc;
    }
    sync_folder(o->path);
    release(o);
    return ST_OK;
}

void outfile_abort(outfile *o) {
    if (o->fp) {
        fclose(o->fp);
        unlink(o->tmp);
    }
    release(o);
}

st_code outfile_write(const char *path, const char *what, const void *data, size_t n,
                      st_err *err) {
    outfile o;
    st_code rc = outfile_begin(&o, path, what, err);
    if (rc) return rc;
    /* a short write sets the stream's error, which the commit reports with the name */
    if (n) (void)!fwrite(data, 1, n, o.fp);
    return outfile_commit(&o, err);
}

int outfile_append(const char *path, const char *what, st_err *err) {
    if (check_target(path, what, err)) return -1;
    /* the check above names what is there; O_NOFOLLOW and O_NONBLOCK still hold if the
     * path changes between the check and the open (a link fails, a FIFO does not block) */
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0644);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st_set(err, ST_ERR_IO, "cannot append to %s '%s': %s", what, path,
               fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}
