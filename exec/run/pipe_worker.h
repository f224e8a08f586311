/* pipe_worker.h - one worker of a pipelined run: its state, and the message
 * steps the layers above share (pipe_worker.c): blocking waits that keep
 * all-reduces moving, the ring all-reduce itself, timeline spans.  Internal
 * to exec/run/ (pipe_run.h lists the runner's files). */
#ifndef CL_EXEC_PIPE_WORKER_H
#define CL_EXEC_PIPE_WORKER_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "chan.h"
#include "core/schedule.h"
#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "pipe_run.h"
#include "tp_crew.h"

typedef struct pslot {          /* a microbatch in flight on a stage         */
    int64_t seq;                /* global microbatch                         */
    exec_acts **a;              /* [T]: each tensor-parallel rank's (pipe_tp.h) */
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
    exec_net *net;              /* rank 0's (the whole stage when T == 1)    */
    exec_sgd sgd;
    int tpm;                    /* a split stage whose tensor ranks are MPI
                                   processes (tp_mpi.h): T is 1 here, net
                                   this process's shard                      */
    int T;                      /* tensor-parallel ranks (pipe_tp.h): the
                                   plan's tensor when the stage has a split
                                   layer, else 1                             */
    exec_net **tnet;            /* [T]: rank r's shard; tnet[0] == net       */
    exec_sgd **tsgd;            /* [T]: tsgd[0] == &sgd                      */
    float **tdin;               /* [T]: ranks >= 1, their input gradient's
                                   scratch (needs_din); tdin[0] NULL         */
    exec_acts ***pool;          /* free acts [T] (all created with mb samples) */
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
    exec_acts **eval_acts;      /* [T], replica 0 with a test set, or NULL   */
} pstage;

typedef struct pcursor {         /* the seeded epoch order, as train.c draws it */
    gsl_rng *rng;
    int64_t *perm;
    int64_t epoch;              /* data epoch perm holds; -1 before the first */
} pcursor;

typedef struct pipe_worker {
    pipe_run *R;
    exec_xport *x;
    int w, rep;
    pstage *st;
    int n_st;
    int *local;                 /* [S]: index in st, or -1                    */
    exec_msg **box;
    int n_box, cap_box;
    double box_bytes;
    exec_tp_crew *crew;         /* tensor parallelism: ranks 1 .. T-1 of its
                                   stages, or NULL (pipe_tp.h)               */
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
} pipe_worker;

static inline double pipe_now(const pipe_worker *W) { return exec_now() - W->t0; }

/* A new span of the given kind (pspan_kind) in this run of the op lists,
 * zeroed otherwise; valid until the next pipe_span_add. */
pspan *pipe_span_add(pipe_worker *W, int kind);

/* Blocking message steps that keep all-reduces moving; CL_ERUN when the
 * run stops.  k: op index for a stall report, or -1 (the evaluation, the
 * reports, checkpoints).  post_wait frees m when the run stops. */
int pipe_take_wait(pipe_worker *W, int src, uint64_t tag, int64_t bytes, int64_t k, exec_msg **out);
int pipe_post_wait(pipe_worker *W, exec_msg *m, int64_t k);

/* Ring all-reduce of a replicated stage's gradients: start it (the
 * ALLREDUCE op), move every stage's along as far as messages allow
 * (returns whether anything moved), and wait until ps's is done (its
 * UPDATE; CL_ERUN when the run stops). */
void pipe_ar_start(pstage *ps);
int pipe_ar_progress_all(pipe_worker *W);
int pipe_ar_wait(pipe_worker *W, pstage *ps, int64_t k);

/* A signal arrived (exec_ckpt_signal): CL_ERUN with the run failed ("stopped
 * by SIGTERM ...") when this run cannot stop at an iteration end (MPI,
 * asynchronous schedules), else CL_OK (the next boundary stops,
 * pipe_ckpt.h).  k: op waited at, or -1. */
int pipe_signal_check(pipe_worker *W, int64_t k);

#endif
