/* pipe_run.h - the state of a pipelined run shared by its workers, and the
 * run-wide helpers (pipe_run.c).  Internal to exec/run/.
 *
 * The pipelined runner's files, bottom first; each includes only the
 * headers below it:
 *   pipe_run.{h,c}     the run: shared state, failure, report format
 *   pipe_trace.{h,c}   the measured Chrome trace, from the reports
 *   pipe_worker.{h,c}  one worker's state and its message steps (waits,
 *                      the ring all-reduce, timeline spans)
 *   pipe_tp.{h,c}      tensor parallelism: a stage's ranks, every compute
 *                      call run on all of them (a crew of threads, or
 *                      one rank per process: tp_mpi.h)
 *   pipe_ckpt.{h,c}    checkpoints and stops at iteration ends
 *   pipe_report.{h,c}  evaluation, epoch statistics, the final report
 *   pipe_ops.{h,c}     a worker's life: set-up, its op list, the main loop
 *   pipeline.c         the public entry points (pipeline.h, pipe_hooks.h) */
#ifndef CL_EXEC_PIPE_RUN_H
#define CL_EXEC_PIPE_RUN_H

#include <pthread.h>
#include <stdint.h>

#include "base/status.h"
#include "chan.h"
#include "core/schedule.h"
#include "pipe_hooks.h"
#include "pipeline.h"

/* Bytes of a float in messages, stashes and memory counts: parameters,
 * gradients and activations are float32 on every backend. */
enum { PIPE_FLOAT_BYTES = sizeof(float) };

/* A timeline entry a worker records (trace on). */
typedef enum pspan_kind {
    PSPAN_COMPUTE,   /* F/B/W/UPDATE: op is the op index in the schedule      */
    PSPAN_LINK,      /* a transfer, SEND post to RECV completion: op = RECV   */
    PSPAN_AR,        /* one all-reduce step (post to completion): op = stage  */
    PSPAN_MEM        /* memory in use changed: t0 = when, bytes = in use      */
} pspan_kind;

typedef struct pspan {
    double t0, t1;         /* seconds since the common start                  */
    double bytes;          /* LINK/AR: payload; MEM: memory in use            */
    int64_t op;
    int32_t kind;          /* pspan_kind                                      */
    int32_t epoch;         /* which run of the op lists (epochs)              */
    int32_t src, dst;      /* LINK/AR: workers                                */
    int32_t iter;          /* global iteration (LINK/COMPUTE)                 */
    int32_t pad_;
} pspan;

/* Fixed-size part of a worker's report to worker 0 (final gather). */
typedef struct pworker_rep {
    double busy_s, wait_s, peak_mem, peak_t;
    sim_mem at_peak;
    double sent_bytes, peak_rss;
    int32_t peak_stash, peak_versions;
    int64_t n_spans;       /* pspans that follow the arrays                   */
    int64_t param_bytes;   /* bytes of the parameter section at the end       */
} pworker_rep;

/* The run, shared by the workers of this process (read-only while they
 * run, apart from the fields under mu). */
typedef struct pipe_run {
    const plan *p;
    const exec_pipe_opts *o;
    exec_pipe_hooks hooks; /* tests only (pipe_hooks.h); zero: none           */
    const model *m;
    sched sc;              /* the op lists of one epoch (or of the run)       */
    int S, P, v, m_micro, mb, batch, eval_batch;
    int n_w;
    int *w_pos, *w_rep;    /* per worker: pipeline position and replica       */
    int *pos_w0;           /* per position: its first worker                  */
    int *stage_first, *stage_end; /* per stage: layers [first, end)           */
    int64_t *bnd_elems;    /* per stage: output elements per sample           */
    int n_runs;            /* epochs, or 1 for an iterations run              */
    int iters;             /* iterations per run of the op lists              */
    int64_t total_iters;   /* over the whole run                              */
    int64_t data_ipe;      /* iterations per pass over the training data      */
    int tracing;
    exec_xport *x;
    struct exec_tp_mpi *tpm; /* tensor ranks as MPI processes (tp_mpi.h):
                              this process's group, else NULL               */
    double stall_s;

    pthread_mutex_t mu;    /* guards err, stop_at, passed                     */
    cl_err err;

    /* checkpoints and stops (pipe_ckpt.c) */
    int ckpt;              /* checkpoints written or read: iteration ends drain */
    int64_t start_gi;      /* resume: global iterations already done          */
    int64_t stop_at;       /* threads: the iteration end all workers stop at
                              after a signal, -1 while none                    */
    int64_t *passed;       /* [n_w]: the last iteration end each worker passed */
    int stop_sig;          /* the signal the workers stopped for              */

    /* filled by worker 0 */
    int n_epochs_done;
    exec_epoch *epochs;    /* [n_runs]                                        */
    double *iter_loss;     /* [n_runs x iters]                                */
    unsigned char **blobs; /* [n_w]: each worker's final report (owned)       */
    int64_t *blob_len;
} pipe_run;

/* Record the run's first failure (shown to the user) and stop every
 * worker; returns code. */
int pipe_run_fail(pipe_run *R, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The MPI world rank of worker w's process of this tensor rank (tensor
 * ranks as processes: w * T + k; else w), named in messages. */
int pipe_world_rank(const pipe_run *R, int w);

/* Worker of replica q of stage s; bytes of the tensor at boundary b. */
int pipe_worker_of(const pipe_run *R, int s, int q);
int64_t pipe_bnd_bytes(const pipe_run *R, int b, int batch);
/* Learning rate of op's update (iteration gi, r replicas). */
double pipe_lr_at(const pipe_run *R, const sched_op *op, int64_t gi, int r);

/* Parse a worker's report blob (written by pipe_final_report): the fixed
 * part, its arrays (iter_busy[total], iter_end[total]), its spans and its
 * parameters. */
typedef struct pblob {
    const pworker_rep *rep;
    const double *iter_busy, *iter_end;
    const pspan *spans;
    const unsigned char *params;
} pblob;
void pipe_blob_parse(const pipe_run *R, const unsigned char *b, int64_t len, pblob *out);

#endif
