/* infile.h - opening and reading files a user names (a model, a session, a context text,
 * key bindings): only regular files are accepted, the open never blocks (a FIFO or a
 * terminal device would wait forever; /dev/zero would be read until memory runs out), and
 * a whole-file read stops at a size cap the caller chooses, saying so.
 *
 * Not here: the formats; writing files (base/outfile.h). */
#ifndef MD_INFILE_H
#define MD_INFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/status.h"

/* Opens path read-only (close-on-exec) when it is a regular file: returns the descriptor
 * (blocking mode, the caller closes it) and its size in *size (may be NULL). -1 + err
 * ST_ERR_IO otherwise: "cannot open WHAT 'PATH': reason", or "WHAT 'PATH' is a FIFO, not
 * a regular file" (a directory, a device, a socket likewise). what names the file's role
 * ("session", "context file"). */
int infile_open(const char *path, const char *what, uint64_t *size, st_err *err);

/* What a file of mode m is, for messages: "a directory", "a FIFO", "a character device",
 * "a block device", "a socket", "a symbolic link" (static strings). */
const char *infile_kind(mode_t m);

/* Reads the regular file path whole into a malloc'd buffer (caller frees) of *len bytes
 * plus a NUL after them. NULL + err: infile_open's failures; ST_ERR_IO when the file holds
 * more than max_bytes ("WHAT 'PATH' is N bytes, more than the M this program reads") or a
 * read fails; ST_ERR_NOMEM. */
char *infile_read(const char *path, const char *what, size_t max_bytes, size_t *len,
                  st_err *err);

#endif
