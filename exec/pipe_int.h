/* pipe_int.h - internals of the pipelined runner shared by pipeline.c (the
 * run: checks, set-up, results), pipe_worker.c (one worker executing its op
 * list) and pipe_trace.c (the measured Chrome trace).  Not a public API. */
#ifndef CL_EXEC_PIPE_INT_H
#define CL_EXEC_PIPE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "../sim/schedule.h"
#include "chan.h"
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

    pthread_mutex_t mu;    /* guards err                                      */
    cl_err err;

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

/* The stage's layers hold weights? Used by checks and the weights file. */
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

#endif
