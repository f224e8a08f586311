/* fileio.h - how cleave opens the files it reads and writes.
 *
 * Inputs (cl_in_open, cl_read_file) must be regular files: a pipe, a device
 * or a directory is refused, and opening never blocks (O_NONBLOCK, then
 * fstat), so a FIFO named as an input cannot hang a run.  Whole-file reads
 * check the size from fstat against a limit before reading anything.
 *
 * Outputs all go through cl_out.  A regular file (new or existing) is written
 * to a fresh temporary beside it (O_CREAT|O_EXCL|O_NOFOLLOW, unpredictable
 * name), flushed, fsync'd and renamed over it: an interrupted run leaves
 * either the old file or the complete new one.  A symbolic link is written
 * through: the temporary goes beside the link's final target and replaces
 * the target, the link stays.  A character device or a pipe (/dev/null,
 * /dev/stdout, a FIFO) and the names of open descriptors (/dev/stdout,
 * /dev/fd/N, /proc/self/fd/N) are written directly, never replaced.  An
 * output that is the same file (st_dev, st_ino) as an input the command
 * read is refused (CL_EINPUT) before anything is written.  The rules are
 * documented in docs/testing.md, "Threat model: files".
 */
#ifndef CL_FILEIO_H
#define CL_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "status.h"

/* The environment variable that replaces every input size limit, in MiB. */
#define CL_MAX_INPUT_ENV "CLEAVE_MAX_INPUT_MB"

/* Flags for cl_in_open / cl_read_file_flags. */
enum {
    /* An output of the same command may replace this input: a checkpoint
     * (--resume run.ckpt --checkpoint run.ckpt) is read whole first. */
    CL_IN_REPLACEABLE = 1,
    /* cleave's own file (gnuplot's messages): not the user's input, so not
     * remembered and not subject to CLEAVE_MAX_INPUT_MB. */
    CL_IN_INTERNAL = 2,
};

/* Open `path` read-only; it must be a regular file.  On success *fd is open
 * (caller closes) and *st its fstat.  Unless flagged, the file is
 * remembered as an input of the command (see cl_inputs_track). */
int cl_in_open(const char *path, int flags, int *fd, struct stat *st, cl_err *e);

/* Read a whole file into a NUL-terminated buffer the caller frees.
 * Fails with CL_EINPUT when the file is missing, unreadable, not a regular
 * file or larger than max_bytes (or CLEAVE_MAX_INPUT_MB when set): the
 * message names the limit and how to raise it. */
int cl_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                 cl_err *e);
int cl_read_file_flags(const char *path, size_t max_bytes, int flags, char **out,
                       size_t *len, cl_err *e);

/* The input limit in force for a kind whose default is def_bytes:
 * CLEAVE_MAX_INPUT_MB when set to a positive integer, else def_bytes. */
size_t cl_in_limit(size_t def_bytes);
/* Record the refusal of a file of `size` bytes over `limit` (CL_EINPUT),
 * naming the limit and CLEAVE_MAX_INPUT_MB; returns CL_EINPUT. */
int cl_in_too_big(cl_err *e, const char *path, unsigned long long size, size_t limit);

/* Remember inputs from now on (on = 1), or stop and forget them (0).  The
 * command line turns this on for each command; library users and the
 * in-process tests, which rewrite files they read, leave it off. */
void cl_inputs_track(int on);

typedef struct cl_out_sink cl_out_sink;

typedef struct cl_out {
    FILE *f;          /* write here (stdio); NULL after commit or abort */
    char *path;       /* destination as the user named it (messages) */
    char *target;     /* the file replaced (the link's target for a link) */
    char *tmp;        /* temporary beside target; NULL when written directly */
    cl_out_sink *sink; /* the descriptor and the first write error */
} cl_out;

/* Open an output as described above. "-" means stdout. */
int cl_out_open(cl_out *o, const char *path, cl_err *e);
/* Flush, fsync and rename into place.  On failure the temporary is removed
 * and the message names the file and the reason (strerror). */
int cl_out_commit(cl_out *o, cl_err *e);
/* Drop the temporary; the destination is left untouched. Safe to call twice. */
void cl_out_abort(cl_out *o);
/* Would cl_out_open succeed?  Checks early, before a long run, without
 * opening a device or pipe (which would block or send an early EOF). */
int cl_out_check(const char *path, cl_err *e);

/* Convenience: write a buffer atomically. */
int cl_write_file(const char *path, const void *data, size_t len, cl_err *e);

/* Create a new empty file beside `near` (same folder) with an unpredictable
 * name, O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 & ~umask.  Returns the
 * descriptor (O_CLOEXEC) and its name in *name (caller frees), or -1 with
 * errno set.  For tools that write through a child process (gnuplot). */
int cl_tmp_create(const char *near, char **name);

/* Remove folder dir and everything below it, following no link (a link is
 * removed, not what it points to); 0, or -1 when something stayed. */
int cl_rmtree(const char *dir);

#endif
