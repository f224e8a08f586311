/* linkprof.h - profiling the link between two workers: ping-pong over
 * message sizes, a least-squares fit of time = latency + bytes / bandwidth,
 * and a cluster file describing this machine (`cleave profile --links`).
 *
 * Method (docs/validation.md, "Profiled links"): two workers bounce one
 * message back and forth; a round trip is two one-way transfers, so a
 * one-way time is half of it.  For each size (8 B to 64 MiB, doubling) the
 * median one-way time over the repetitions is kept, with its spread.  The
 * line is fitted with GSL's weighted least squares, weights 1 / t^2, so
 * each size counts by its relative error (an unweighted fit would be
 * decided by the 64 MiB point alone and leave the latency to noise).
 *
 * Each sample also keeps the sender's share: how long the send call itself
 * takes, which a runtime pays on the sending worker's own stream (waking a
 * sleeping thread costs the waker a system call: docs/validation.md).
 *
 * Backends:
 *  - threads: two threads of this process, pinned to separate cores,
 *    exchange the message through the pipelined runtime's own transport
 *    (chan.h, exec_xport_threads): the sender allocates a message, copies
 *    the payload into it and posts it to a bounded channel, waking the
 *    receiver, which takes it and reads it.  That is what one activation
 *    costs the threads runtime (copy in, hand-off, take).
 *  - mpi: ranks 0 and 1 of MPI_COMM_WORLD with MPI_Send / MPI_Recv.
 */
#ifndef CL_EXEC_LINKPROF_H
#define CL_EXEC_LINKPROF_H

#include <stdint.h>

#include "profiles/cluster.h"
#include "base/status.h"

typedef enum exec_link_backend {
    EXEC_LINK_THREADS,
    EXEC_LINK_MPI,
    EXEC_LINK_BACKEND_COUNT
} exec_link_backend;

/* "threads", "mpi"; exec_link_backend_from_name returns -1 when unknown. */
const char *exec_link_backend_name(exec_link_backend b);
int exec_link_backend_from_name(const char *name);

#define EXEC_LINK_MIN_BYTES 8
#define EXEC_LINK_MAX_BYTES ((uint64_t)64 << 20)
#define EXEC_LINK_MAX_SIZES 64

/* One message size: one-way times in seconds. */
typedef struct exec_link_sample {
    double bytes;
    double time_s;      /* median one-way time */
    double sd_s;        /* standard deviation of the one-way times */
    double min_s;       /* fastest */
    double send_s;      /* median time the sender spends in its send call
                           (threads: allocate, copy in, post and wake the
                           receiver; MPI: MPI_Send), part of time_s     */
    int reps;           /* round trips timed */
    /* threads: round trips in which a receiver had gone to sleep (its wait
     * outlasted the spin, or it backed off from spinning because other
     * processes took its core: chan.h) and was woken, a futex wake and a
     * scheduler wake-up instead of a cache line, and the median one-way
     * time of those and of the others (0 when there are none); MPI: woke 0 */
    double woke;        /* fraction of the round trips                   */
    double time_spin_s, time_woke_s;
    /* the expected one-way time: the medians of the round trips with and
     * without a woken receiver weighed by their shares (woke), so wake-ups
     * count by how often they happen while a stall by another process (a
     * few round trips) moves neither median; MPI: the median */
    double time_mean_s;
    /* threads, the outgoing message alone (both threads read one clock):
     * the expected send call and hand-off (post to the receiver holding
     * the message), each the medians with the receiver spinning and asleep
     * weighed by the share of each; a round trip's halves differ when one
     * receiver sleeps and the other spins, as in a pipeline whose waiting
     * stage sleeps.  MPI: the median send call, and half a round trip less
     * it */
    double send_exp_s, handoff_s;
} exec_link_sample;

/* A fit of time = latency_s + bytes / bw_Bps. */
typedef struct exec_link_fit {
    double latency_s;   /* intercept (may come out < 0 on noisy data; the
                           cluster file then gets 0 and says so)          */
    double bw_Bps;      /* 1 / slope (HUGE_VAL when the slope is <= 0)    */
    double latency_se;  /* standard errors from the fit's covariance      */
    double inv_bw_se;   /* of the slope, s per byte                       */
    double r2;          /* weighted coefficient of determination          */
    double rms_rel;     /* root mean square of residual / measured        */
    double max_rel;     /* largest |residual| / measured                  */
    double max_rel_bytes; /* the size where max_rel occurs                */
    int n;
} exec_link_fit;

/* Weighted least squares (gsl_fit_wlinear) of t against bytes over n >= 2
 * points with weights w (NULL: 1 / t^2, relative errors).  Fills *out.
 * Fails with CL_EINPUT when fewer than 2 distinct sizes or a time <= 0. */
int exec_link_fit_ls(const double *bytes, const double *t, const double *w, int n,
                     exec_link_fit *out, cl_err *e);

/* When the fit has no positive slope (times that do not grow with the
 * size: a loaded machine), out->bw_Bps is infinite, which would price
 * every byte at nothing.  This sets it to the rate the largest message
 * reached end to end, latency included (no faster link undercuts it),
 * writes why into why (cap bytes, the text after "the fit is") and
 * returns 1; 0, changing nothing, when the fit has a bandwidth. */
int exec_link_fit_slopeless(const double *bytes, const double *t, int n, exec_link_fit *out,
                            char *why, size_t cap);

typedef struct exec_link_opts {
    exec_link_backend backend;
    uint64_t min_bytes, max_bytes; /* powers of two between them, both included */
    int min_reps;          /* round trips per size at least (default 10)      */
    double seconds_per_size; /* and until this much time is spent (0.05)    */
    int warmup;            /* untimed round trips first (3)                   */
    double gap_s;          /* threads: the pinger computes this long (untimed)
                              before each round trip, so the echo has been
                              asleep that long when the message comes, as a
                              pipeline stage waiting for its neighbour is (0) */
    double spin_s;         /* threads: how long a waiting worker spins before
                              it sleeps, as in the pipelined runtime
                              (exec_pipe_opts.spin_s; default
                              exec_spin_default())                            */
} exec_link_opts;

void exec_link_opts_default(exec_link_opts *o);

/* Ping-pong every size and fill samples[0 .. *n) (at most
 * EXEC_LINK_MAX_SIZES).  threads: runs in this process.  mpi: needs an MPI
 * job of at least 2 ranks (exec_link_mpi_init); ranks 0 and 1 measure, the
 * others wait; every rank returns the same samples.  CL_EINPUT for bad
 * options or too few ranks. */
int exec_link_measure(const exec_link_opts *o, exec_link_sample *samples, int *n, cl_err *e);

/* Why a fit is poor, in words (empty when R^2 >= EXEC_LINK_R2_OK):
 * - receivers woken from sleep in some of the round trips (woke): the time
 *   per message is two costs, not one line; the fit over the round trips
 *   without a sleeping receiver (time_spin_s) and its R^2;
 * - else, or as well, the per-byte cost changing with the size: the best
 *   split of the sizes into two lines (each fitted alone), e.g. messages
 *   that fit the core's cache against those that stream past it.
 * Writes at most cap bytes (NUL-terminated) into buf; returns 1 when the
 * fit was poor. */
#define EXEC_LINK_R2_OK 0.9
int exec_link_explain(const exec_link_sample *s, int n, const exec_link_fit *fit, char *buf,
                      size_t cap);

/* MPI helpers: initialise MPI if it is not yet (idempotent), and report
 * this process's rank and the world size.  exec_link_mpi_finalize
 * finalises it when this module initialised it. */
int exec_link_mpi_init(int *rank, int *size, cl_err *e);
void exec_link_mpi_finalize(void);
/* 1 when this process was started by mpirun / mpiexec (Open MPI's
 * environment), so an MPI world of several ranks exists. */
int exec_link_in_mpi_job(void);

/* Run this program's subcommand `sub` again as an MPI job of np ranks:
 * mpirun -np np --oversubscribe (--allow-run-as-root when root)
 * /proc/<pid>/exe sub argv[1..argc).  For commands started without mpirun.
 * Returns mpirun's exit status (1 when it cannot be run). */
int exec_link_mpirun(int np, const char *sub, int argc, char **argv);
/* The same job with its stdout into out_path and its stderr into err_path
 * (NULL: into out_path too; out_path NULL: both shared, as
 * cl_spawn_wait_err): mpirun's wait status, -1 when it could not start. */
int exec_link_mpirun_wait(int np, const char *sub, int argc, char **argv, const char *out_path,
                          const char *err_path);

/* What this machine looks like, for the cluster file. */
typedef struct exec_machine {
    int cores;              /* online CPUs                                    */
    double peak_flops;      /* one core's SGEMM peak (exec_gemm_peak)          */
    int peak_n;             /* the square size that reached it                */
    double efficiency;      /* fraction of peak real layers reach, (0, 1]     */
    char efficiency_note[256];
    double mem_bytes;       /* physical memory / cores                        */
    double mem_bw_Bps;      /* one core's memcpy rate, read + write bytes     */
} exec_machine;

/* Measure cores, peak and memory bandwidth (about `seconds` in all);
 * efficiency is the SGEMM rate of a training-sized product (64 x 784 by
 * 784 x 256, a batch-64 linear layer) over the peak. */
void exec_machine_measure(double seconds, exec_machine *mc);

/* A cluster for this machine: one node "host" of mc->cores devices
 * "core0".."coreN-1" of type "cpu-core" (mc's figures), intra-node link
 * from the fit (a negative latency becomes 0).  `note` goes into the
 * links note.  The caller frees *c with cluster_free. */
int exec_link_cluster(cluster *c, const exec_machine *mc, const exec_link_fit *fit,
                      exec_link_backend backend, const char *note, cl_err *e);

#endif
