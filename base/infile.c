/* infile.c - regular files only, opened without blocking, read with a cap (infile.h). */
#include "base/infile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *infile_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket"
           : S_ISLNK(m) ? "a symbolic link" : "not a plain file";
}

int infile_open(const char *path, const char *what, uint64_t *size, st_err *err) {
    /* O_NONBLOCK so that opening a FIFO with no writer returns at once; fstat then tells
     * what the path is before anything is read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        st_set(err, ST_ERR_IO, "cannot open %s '%s': %s", what, path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        st_set(err, ST_ERR_IO, "%s '%s' is %s, not a regular file", what, path,
               infile_kind(sb.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (size) *size = (uint64_t)sb.st_size;
    return fd;
}

char *infile_read(const char *path, const char *what, size_t max_bytes, size_t *len,
                  st_err *err) {
    uint64_t size;
    int fd = infile_open(path, what, &size, err);
    if (fd < 0) return NULL;
    if (size > max_bytes) {
        close(fd);
        st_set(err, ST_ERR_IO, "%s '%s' is %llu bytes, more than the %zu this program reads",
               what, path, (unsigned long long)size, max_bytes);
        return NULL;
    }
    /* the size is only a hint: the file may grow while it is read, so the cap is checked
     * on the bytes actually read (one past the cap is enough to know) */
    size_t cap = (size_t)size + 1, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(buf);
            close(fd);
            st_set(err, ST_ERR_IO, "cannot read %s '%s': %s", what, path, strerror(e));
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > max_bytes) break;
        if (n == cap) {
            size_t nc = cap * 2 < max_bytes + 1 ? cap * 2 : max_bytes + 1;
            char *nb = realloc(buf, nc + 1);
            if (!nb) free(buf);
            buf = nb;
            cap = nc;
        }
    }
    close(fd);
    if (!buf) {
        st_set(err, ST_ERR_NOMEM, "out of memory reading %s '%s'", what, path);
        return NULL;
    }
    if (n > max_bytes) {
        free(buf);
        st_set(err, ST_ERR_IO, "%s '%s' grew past the %zu bytes this program reads while it "
               "was read", what, path, max_bytes);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}
