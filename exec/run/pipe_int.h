/* pipe_int.h - internals of the pipelined runner shared by pipeline.c (the
 * run: checks, set-up, results), pipe_worker.c (one worker executing its op
 * list) and pipe_trace.c (the measured Chrome trace).  Not a public API. */
#ifndef CL_EXEC_PIPE_INT_H
#define CL_EXEC_PIPE_INT_H

#include <pthread.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "core/schedule.h"
#include "chan.h"
#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "pipeline.h"

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
typedef struct prun {
    const plan *p;
    const exec_pipe_opts *o;
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
} prun;

/* One worker's whole life: set up its stages, run the op lists n_runs
 * times (evaluating after each), report to worker 0.  ctx is the prun. */
int pipe_worker_main(void *ctx, int w);

/* Record the run's first failure (shown to the user) and stop every
 * worker; returns code. */
int pipe_run_fail(prun *R, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Write the measured timeline from the gathered reports (rank 0). */
int pipe_write_trace(const prun *R, const char *path, cl_err *e);

/* Parse a worker's report blob: the fixed part, its arrays
 * (iter_busy[total], iter_end[total]), its spans and its parameters. */
typedef struct pblob {
    const pworker_rep *rep;
    const double *iter_busy, *iter_end;
    const pspan *spans;
    const unsigned char *params;
} pblob;
void pipe_blob_parse(const prun *R, const unsigned char *b, int64_t len, pblob *out);

/* ------------------------------------------------ one worker's state -- */

typedef struct pslot {          /* a microbatch in flight on a stage         */
    int64_t seq;                /* global microbatch                         */
    exec_acts *a;
    int64_t wver;               /* weight version its F used                 */
} pslot;

typedef struct pver {           /* a weight version still referenced         */
    int64_t ver;
    int refs;                   /* in-flight microbatches whose F used it    */
    float *stash;               /* its copy once an update replaced it       */
} pver;

typedef struct pstage {
    int stage, replica, r;
    int has_loss, needs_din;
    int64_t in_elems, out_elems, n_floats;
    exec_net *net;
    exec_sgd sgd;
    exec_acts **pool;           /* free acts (all created with mb samples)   */
    int n_pool, n_acts;
    pslot *slot;
    int n_slot, cap_slot;
    int64_t cur_ver;            /* updates applied in this run of the lists  */
    pver *ver;
    int n_ver, cap_ver;
    int n_stashed;
    int *ring;                  /* [r]: worker of each replica               */
    int ar_active, ar_done, ar_step, ar_sent;
    int64_t ar_k;               /* collectives completed                     */
    exec_acts *eval_acts;
} pstage;

typedef struct pcursor {         /* the seeded epoch order, as train.c draws it */
    gsl_rng *rng;
    int64_t *perm;
    int64_t epoch;              /* data epoch perm holds; -1 before the first */
} pcursor;

typedef struct pw {
    prun *R;
    exec_xport *x;
    int w, rep;
    pstage *st;
    int n_st;
    int *local;                 /* [S]: index in st, or -1                    */
    exec_msg **box;
    int n_box, cap_box;
    double box_bytes;
    sim_mem mem;
    double peak, peak_t, last_mem;
    sim_mem at_peak;
    int stash_now, peak_stash, peak_versions;
    double t0;
    int run;                    /* which run of the op lists                 */
    pcursor cx, cy;              /* inputs (first stage), labels (last stage) */
    float *xb;
    int32_t *yb;
    double *loss_it, *corr_it;  /* [iters] of the current run                */
    double test_loss, test_corr;
    double busy, waited, sent;
    double *iter_busy, *iter_end; /* [total]                                 */
    pspan *sp;
    int64_t n_sp, cap_sp;
} pw;

static inline double pipe_now(const pw *W) { return exec_now() - W->t0; }

/* Blocking message steps that keep all-reduces moving (pipe_worker.c);
 * CL_ERUN when the run stops.  k: op index for a stall report, or -1. */
int pipe_take_wait(pw *W, int src, uint64_t tag, int64_t bytes, int64_t k, exec_msg **out);
int pipe_post_wait(pw *W, exec_msg *m, int64_t k);
/* Worker of replica q of stage s; bytes of the tensor at boundary b. */
int pipe_worker_of(const prun *R, int s, int q);
int64_t pipe_bnd_bytes(const prun *R, int b, int batch);
/* Learning rate of op's update (iteration gi, r replicas). */
double pipe_lr_at(const prun *R, const sched_op *op, int64_t gi, int r);

/* pipe_ckpt.c.  check: can p's op lists be checkpointed (every worker's
 * iterations in order, so an iteration end is a drain point)?  CL_EINPUT
 * naming the schedule otherwise.  restore: this worker's state from
 * R->o->resume (called after set-up).  boundary: the worker has finished
 * every op of global iteration gi - 1 (run_end: and the run's evaluation and
 * report); writes a checkpoint when due (worker 0 gathers every worker's
 * state and writes the file) and decides a stop after a signal.  Returns
 * CL_OK to go on, PIPE_STOP to stop here, or a failure. */
enum { PIPE_STOP = 100 };
int pipe_ckpt_check(const prun *R, cl_err *e);
int pipe_ckpt_restore(pw *W);
int pipe_ckpt_boundary(pw *W, int64_t gi, int run_end);
/* A signal arrived: CL_ERUN with the run failed ("stopped by SIGTERM ...")
 * when this run cannot stop at an iteration end (MPI, asynchronous
 * schedules), else CL_OK (the next boundary stops).  k: op waited at. */
int pipe_ckpt_signal_check(pw *W, int64_t k);

/* pipe_report.c: evaluation after a run, the epoch's statistics to worker
 * 0 (which calls on_epoch), the final report (worker 0 keeps all in R). */
int pipe_eval_pass(pw *W);
int pipe_epoch_report(pw *W, double train_s);
int pipe_final_report(pw *W);

#endif
