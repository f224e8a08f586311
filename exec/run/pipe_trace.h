/* pipe_trace.h - the measured timeline of a pipelined run (pipe_trace.c).
 * Internal to exec/run/ (pipe_run.h lists the runner's files). */
#ifndef CL_EXEC_PIPE_TRACE_H
#define CL_EXEC_PIPE_TRACE_H

#include "base/status.h"
#include "pipe_run.h"

/* Write the measured timeline from the gathered reports (rank 0). */
int pipe_write_trace(const pipe_run *R, const char *path, cl_err *e);

#endif
