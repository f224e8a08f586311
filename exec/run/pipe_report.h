/* pipe_report.h - what a pipelined run's workers do besides their op lists
 * (pipe_report.c).  Internal to exec/run/ (pipe_run.h lists the runner's
 * files). */
#ifndef CL_EXEC_PIPE_REPORT_H
#define CL_EXEC_PIPE_REPORT_H

#include "pipe_worker.h"

/* The evaluation after a run of the op lists, the epoch's statistics to
 * worker 0 (which calls on_epoch), the final report (worker 0 keeps all in
 * R->blobs, read back with pipe_blob_parse).  CL_ERUN when the run stops. */
int pipe_eval_pass(pipe_worker *W);
int pipe_epoch_report(pipe_worker *W, double train_s);
int pipe_final_report(pipe_worker *W);

#endif
