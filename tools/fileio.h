/* fileio.h - whole-file reads and atomic writes.
 *
 * Every output file cleave writes goes through cl_out: the data goes to a
 * temporary file in the destination's folder, is flushed and fsync'd, then
 * renamed over the destination.  An interrupted run therefore leaves either
 * the old file or the complete new one, never a truncated one.
 */
#ifndef CL_FILEIO_H
#define CL_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

/* Read a whole file into a NUL-terminated buffer the caller frees.
 * Fails with CL_EINPUT when the file is missing, unreadable or larger than
 * max_bytes (a guard against feeding cleave a disk image by mistake). */
int cl_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                 cl_err *e);

typedef struct cl_out {
    FILE *f;          /* write here (stdio); NULL after commit or abort */
    char *path;       /* destination */
    char *tmp;        /* temporary in the same folder */
} cl_out;

/* Open a temporary file beside `path`. "-" means stdout (no atomicity needed). */
int cl_out_open(cl_out *o, const char *path, cl_err *e);
/* Flush, fsync and rename into place.  On failure the temporary is removed. */
int cl_out_commit(cl_out *o, cl_err *e);
/* Drop the temporary; the destination is left untouched. Safe to call twice. */
void cl_out_abort(cl_out *o);

/* Convenience: write a buffer atomically. */
int cl_write_file(const char *path, const void *data, size_t len, cl_err *e);

/* The temporary-file name cl_out uses for `path` (caller frees); exposed so
 * tools that write through a child process (gnuplot) can rename themselves. */
char *cl_tmp_name(const char *path);

#endif
