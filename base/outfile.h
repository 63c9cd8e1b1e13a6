/* outfile.h - the one way the program writes a file a user names (a model, a session, an
 * autosave, a picture, a Markdown export, a log): the target must be a regular file or
 * not exist yet. A FIFO, a device, a directory or a socket is refused (a FIFO would block
 * the write forever, a device would be replaced by a file), and so is a symbolic link:
 * the program never writes through a link, nor replaces one with a file, so a planted link
 * cannot turn a save into a write somewhere else. A whole file is written to a new
 * temporary file beside the target (O_CREAT | O_EXCL | O_NOFOLLOW, a fresh name each try),
 * synced, then renamed over the target, so the target holds either the old or the new
 * contents, never half of them. A log is appended to in place instead (outfile_append).
 *
 * Not here: reading (base/infile.h); the formats. */
#ifndef MD_OUTFILE_H
#define MD_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"

/* A file being written: fill fp, then outfile_commit or outfile_abort. */
typedef struct outfile {
    FILE *fp;         /* where the caller writes; NULL when outfile_begin failed */
    char *path, *tmp; /* the target and the temporary file beside it (owned) */
    const char *what; /* the file's role for messages ("session", "picture"), borrowed */
} outfile;

/* Checks path (see above) and creates its temporary file: ST_OK with o->fp open for
 * writing; otherwise o->fp is NULL, nothing was created and err says why: ST_ERR_IO
 * ("WHAT 'PATH' is a FIFO, not a regular file: not writing to it", "... is a symbolic
 * link: not writing through it", "cannot write WHAT PATH: reason (left unchanged)"),
 * ST_ERR_NOMEM. what
 * must outlive o. */
st_code outfile_begin(outfile *o, const char *path, const char *what, st_err *err);

/* Flushes, syncs and closes the temporary file and renames it over the target (then
 * syncs the folder, best effort). ST_ERR_IO when a step fails: the temporary file is
 * removed and the target is as it was. Frees what o holds either way. */
st_code outfile_commit(outfile *o, st_err *err);

/* Closes and removes the temporary file, leaving the target as it was; frees what o
 * holds. A no-op after a failed outfile_begin or a commit. */
void outfile_abort(outfile *o);

/* outfile_begin + writing n bytes of data + outfile_commit. */
st_code outfile_write(const char *path, const char *what, const void *data, size_t n,
                      st_err *err);

/* Opens path for appending (a log), creating it when missing, refusing what
 * outfile_begin refuses (the open never blocks on a FIFO nor follows a link): the
 * descriptor (close-on-exec; the caller closes it), or -1 + err ST_ERR_IO. */
int outfile_append(const char *path, const char *what, st_err *err);

#endif
