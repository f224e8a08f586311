/* pipe_ckpt.h - checkpoints and stops of a pipelined run (pipe_ckpt.c).
 * Internal to exec/run/ (pipe_run.h lists the runner's files). */
#ifndef CL_EXEC_PIPE_CKPT_H
#define CL_EXEC_PIPE_CKPT_H

#include <stdint.h>

#include "base/status.h"
#include "pipe_run.h"
#include "pipe_worker.h"

/* check: can R's op lists be checkpointed (every worker's iterations in
 * order, so an iteration end is a drain point)?  CL_EINPUT naming the
 * schedule otherwise.  restore: this worker's state from R->o->resume
 * (called after set-up).  boundary: the worker has finished every op of
 * global iteration gi - 1 (run_end: and the run's evaluation and report);
 * writes a checkpoint when due (worker 0 gathers every worker's state and
 * writes the file) and decides a stop after a signal.  Returns CL_OK to go
 * on, PIPE_STOP to stop here, or a failure. */
enum { PIPE_STOP = 100 };
int pipe_ckpt_check(const pipe_run *R, cl_err *e);
int pipe_ckpt_restore(pipe_worker *W);
int pipe_ckpt_boundary(pipe_worker *W, int64_t gi, int run_end);

#endif
