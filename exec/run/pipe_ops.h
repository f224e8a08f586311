/* pipe_ops.h - one worker's life in a pipelined run (pipe_ops.c).
 * Internal to exec/run/ (pipe_run.h lists the runner's files). */
#ifndef CL_EXEC_PIPE_OPS_H
#define CL_EXEC_PIPE_OPS_H

/* Set up worker w's stages, run the op lists R->n_runs times (evaluating
 * after each), report to worker 0.  ctx is the pipe_run (pipe_run.h); the
 * signature is exec_xport_ops.run's worker function (chan.h). */
int pipe_worker_main(void *ctx, int w);

#endif
