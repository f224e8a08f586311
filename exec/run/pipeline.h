/* pipeline.h - pipelined training: a plan's per-device op lists, run for real.
 *
 * The schedule module (core/schedule.h) turns a plan into one ordered op list
 * per worker; the simulator replays those lists as events and this runner
 * executes the very same lists, one worker per device of the plan, on
 * threads of one process or on MPI ranks.  Each worker owns the stages
 * (chunks) of its pipeline position: an exec_net per stage with its
 * parameters, gradients and optimiser state, initialised from the seed so
 * that the stages together equal the sequential model's initialisation.
 * Activations travel forward and gradients backward as tagged messages over
 * bounded channels between worker pairs; replicated stages all-reduce their
 * gradients with a ring whose summation order is the same on both backends,
 * so a plan and a seed give the same weights bit for bit on threads and MPI.
 *
 * Semantics of the ops are those of schedule.h.  Updates (docs/executor.md,
 * "Pipelined training"):
 * - flushing kinds (gpipe, 1f1b, interleaved, zb-h1, sequential): every
 *   microbatch's loss is scaled by 1 / batch, so the gradients accumulated
 *   over the iteration's microbatches (summed over replicas) are the batch
 *   mean, and the one UPDATE per iteration equals a sequential step on the
 *   whole batch;
 * - pipedream, fbp: an UPDATE after every backward (every round of r
 *   microbatches on a stage with r replicas) with that gradient; weight
 *   decay is divided by the updates per iteration (m / r) so an iteration
 *   decays as much as a sequential step; pipedream stashes the weight
 *   version each in-flight microbatch's forward used and runs its backward
 *   with it; fbp keeps one version (its gradients are stale).
 *
 * Data: an iteration is one batch of the plan (microbatch x m samples) taken
 * in order from the epoch's shuffled order, drawn from the same seeded stream
 * as sequential training (exec/run/train.h); microbatch i is samples
 * [i mb, (i + 1) mb) of the batch.  An epoch is floor(n / batch) iterations
 * (the remaining n mod batch samples of each epoch's order are left out).
 *
 * MPI: exec_pipe_run with EXEC_PIPE_MPI initialises MPI on first use (one
 * rank per worker; the world size must equal the workers) and leaves it
 * initialised; the program calls exec_pipe_mpi_finalize() before it exits.
 * Every rank calls exec_pipe_run with the same plan and options (each loads
 * its own copy of the data); results are complete on rank 0 only.  With
 * exec_pipe_opts.tensor_mpi the world has workers x tensor ranks instead.
 */
#ifndef CL_EXEC_PIPELINE_H
#define CL_EXEC_PIPELINE_H

#include <stdint.h>

#include "core/plan.h"
#include "sim/sim.h"
#include "base/status.h"
#include "exec/nn/data.h"
#include "train.h"

typedef enum exec_pipe_backend {
    EXEC_PIPE_THREADS, /* one process, one thread per worker, pinned to cores   */
    EXEC_PIPE_MPI      /* one MPI rank per worker (mpirun -np workers)          */
} exec_pipe_backend;

/* "threads", "mpi"; from_name returns -1 when unknown. */
const char *exec_pipe_backend_name(exec_pipe_backend b);
int exec_pipe_backend_from_name(const char *name);

/* What one epoch did, as exec_epoch in train.h (samples_per_s counts the
 * training samples of the epoch over its training seconds). */
typedef void (*exec_pipe_epoch_fn)(void *ctx, const exec_epoch *ep);
/* Progress: iteration `done` of `total` (the whole run) has ended on the
 * first worker. */
typedef void (*exec_pipe_iter_fn)(void *ctx, int64_t done, int64_t total);

typedef struct exec_pipe_opts {
    exec_pipe_backend backend;
    int tensor_mpi;        /* MPI with a plan of tensor T > 1: each tensor rank
                              is an MPI process of its own (world = workers x
                              T, rank w * T + k is rank k of worker w; the
                              group's all-reduces go over MPI, tp_mpi.h), not
                              a thread of its worker's crew (pipe_tp.h).
                              Results and checkpoints as with the crew, bit
                              for bit, complete on world rank 0             */
    int iterations;        /* > 0: run this many iterations as one schedule,
                              then evaluate once (if test); 0: run `epochs`  */
    int epochs;            /* used when iterations == 0; each epoch is one
                              schedule, followed by an evaluation            */
    double lr, momentum, weight_decay;
    exec_lr_schedule lr_schedule; /* cosine spans the whole run              */
    uint64_t seed;         /* weights, dropout, shuffling (as exec_train_opts) */
    const exec_data *train;/* required: passes exec_data_check for the model,
                              at least one batch of samples                  */
    const exec_data *test; /* NULL: no evaluation                            */
    const char *file;      /* the plan file, named in messages               */
    const char *trace_path;/* NULL: no trace; else the measured timeline
                              (sim/trace.h layout and names), written on
                              rank 0 / the calling thread                    */
    exec_pipe_epoch_fn on_epoch; /* NULL, or called after every epoch (and
                              once after an iterations run) on rank 0 / a
                              worker thread of the threads backend           */
    exec_pipe_iter_fn on_iteration; /* NULL, or called by the first worker
                              (rank 0) at each of its iteration ends: keep
                              it cheap, it runs inside the measured loop    */
    void *ctx;
    int keep_params;       /* fill exec_pipe_result.params                    */
    int chan_cap;          /* messages a channel holds before SEND blocks;
                              0: derived from the schedule (docs/executor.md) */
    double stall_s;        /* a worker blocked this long fails the run with a
                              report of where it waits; 0: 300 s             */
    double spin_s;         /* threads backend: a waiting worker spins this
                              long before it sleeps, when every worker has a
                              core of its own (exec_notify, chan.h); 0: sleeps
                              at once.  exec_pipe_defaults: exec_spin_default() */
    /* Checkpoints (exec/ckpt/checkpoint.h, docs/testing.md "Reliability"), for
     * schedules that drain at iteration ends (not pipedream, fbp): */
    const char *ckpt_path; /* NULL: none; else written (rank 0) at the end of
                              every epoch and every ckpt_every iterations:
                              every worker's stages, optimiser state, data
                              order and the run's position and history      */
    int64_t ckpt_every;    /* iterations; 0: epoch ends only                 */
    const struct exec_ckpt *resume; /* NULL, or where to continue from: the
                              caller has checked its identity (every rank
                              reads its own copy); on_epoch is called first
                              for the epochs it records                     */
    const struct exec_ckpt_id *ids; /* identity written into checkpoints    */
    int n_ids;
} exec_pipe_opts;

/* Defaults: threads, 1 epoch, exec_train_defaults' lr, momentum, decay,
 * schedule and seed; momentum 0 when the plan's optimiser is "sgd" is the
 * caller's choice (cleave train --plan makes it). */
void exec_pipe_defaults(exec_pipe_opts *o);

/* One worker (device of the plan) as measured. */
typedef struct exec_pipe_worker {
    int device;            /* cluster device index (sched.dev[w])            */
    int stage;             /* lowest plan stage it holds                      */
    int n_stages;          /* stages (chunks) it holds                        */
    int replica;           /* its replica index within that stage            */
    double busy_s;         /* F, B, W and UPDATE seconds over the whole run   */
    double wait_s;         /* blocked: RECV, a full channel, an UPDATE waiting
                              for its all-reduce                               */
    double *iter_busy_s;   /* owned, [n_iter]: busy seconds of each iteration's
                              ops (by the op's iteration)                     */
    double peak_mem_bytes; /* most of sim_mem_total(mem) at any op boundary   */
    double peak_t_s;       /* when it was first reached, since the start      */
    sim_mem at_peak;       /* its components then (same meaning as the
                              simulator's: weights, grads, optimiser state,
                              extra weight versions, live stashed
                              activations (exec_acts_bytes), message buffers) */
    int peak_stash;        /* most microbatch(-chunk)s stashed at once        */
    int peak_versions;     /* most weight versions of one stage at once       */
    double sent_bytes;     /* payload bytes it sent (activations, gradients,
                              all-reduce chunks)                               */
    double peak_rss_bytes; /* process peak RSS (threads: the whole process)   */
} exec_pipe_worker;

typedef struct exec_pipe_tensor {
    char name[96];         /* exec_tensor's name ("conv1.weight")             */
    int64_t n;             /* floats                                          */
    int64_t offset;        /* index of its first float in params              */
} exec_pipe_tensor;

/* Everything measured, complete on rank 0 (the threads backend: always).
 * Times are seconds since the workers' common start (after setup). */
typedef struct exec_pipe_result {
    int rank;              /* MPI rank of this process (0 for threads)        */
    int n_workers;
    int n_iter;            /* iterations run (over all epochs)                */
    double *iter_end_s;    /* owned, [n_iter]: end of the last compute op of
                              iteration k on any worker (the simulator's T_k) */
    double *iter_s;        /* owned, [n_iter]: iter_end_s[k] - iter_end_s[k-1]
                              (k = 0: since the start)                        */
    double *iter_loss;     /* owned, [n_iter]: mean training loss of the
                              iteration's samples                             */
    double wall_s;         /* start to the last op's end                      */
    exec_pipe_worker *w;   /* owned, [n_workers]                              */
    int n_epochs;
    exec_epoch *epochs;    /* owned, [n_epochs] (an iterations run: 1)        */
    int n_tensors;         /* keep_params: every parameter tensor of the model
                              in model order, from replica 0 of its stage     */
    exec_pipe_tensor *tensors; /* owned                                       */
    int64_t n_params;
    float *params;         /* owned, [n_params], unpadded                     */
    double peak_rss_bytes; /* the largest process peak RSS (any rank)         */
    int stop_signal;       /* SIGINT/SIGTERM stopped the run at an iteration
                              end (a checkpoint was written when asked)     */
    int64_t iters_done;    /* global iterations completed (resume included)  */
} exec_pipe_result;

void exec_pipe_result_free(exec_pipe_result *r);

/* Check that the runner can execute plan p before anything starts: the
 * executor runs every layer kind of the embedded model (exec_net_check), it
 * ends in softmax_xent, the stages cover the model's layers as contiguous
 * ranges in pipeline order, the optimiser is sgd or momentum, the
 * schedule builds, and full recomputation has a fused backward on the
 * forward's weights (not zb-h1, not fbp).  CL_EINPUT with one line naming `file` and the JSON path. */
int exec_pipe_check(const plan *p, const char *file, cl_err *e);

/* The exec_net flags (net.h) every stage of plan p is built with: its
 * "recompute", none, selective (EXEC_NET_RECOMPUTE) or full
 * (EXEC_NET_RECOMPUTE_FULL, which exec_pipe_check refuses on a schedule
 * that splits the backward into B and W, zb-h1, and on fbp, whose
 * backward runs on newer weights than its forward). */
int exec_pipe_net_flags(const plan *p);

/* The workers plan p runs on (sched.n_dev of its schedule), or -1 with e set
 * when the schedule does not build. */
int exec_pipe_workers(const plan *p, const char *file, cl_err *e);

/* Train plan p as o says and fill *r (caller frees with
 * exec_pipe_result_free, also on failure).  Checks first (exec_pipe_check,
 * the data, the MPI world size: "plan.json: the plan runs on 2 workers but
 * MPI has 3 ranks (hint: mpirun -np 2 ...)"), so bad input fails with
 * CL_EINPUT before any training.  CL_ERUN for a run that stalls (a worker
 * blocked for stall_s: the message names the worker and the op it waits at)
 * or a trace that cannot be written.  Blocks until the run is over. */
int exec_pipe_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r, cl_err *e);

/* Can p be checkpointed (exec_pipe_opts.ckpt_path, resume)?  Its schedule
 * must drain at iteration ends (not pipedream, fbp); CL_EINPUT naming file
 * and the schedule otherwise (checked by exec_pipe_run too). */
int exec_pipe_ckpt_check(const plan *p, const char *file, cl_err *e);

/* Write r's parameters (keep_params) as a weights file: the line
 * "cleave-weights 1 <n_tensors>\n", then per tensor "<name> <n>\n" followed
 * by n little-endian float32.  Atomic (cl_out). */
int exec_pipe_save_weights(const exec_pipe_result *r, const char *path, cl_err *e);

/* MPI lifetime: rank and size of the world, initialising MPI on first use
 * (CL_ERUN if it cannot); finalize is a no-op when MPI was never
 * initialised and safe to call twice. */
int exec_pipe_mpi_world(int *rank, int *size, cl_err *e);
/* CL_OK when a world of size ranks fits a plan (file) of `workers` workers
 * with `tensor` ranks each as processes (1: one rank per worker), else
 * CL_EINPUT naming the -np it needs in a hint to rerun `cleave <cmd>`
 * ("train", "validate"). */
int exec_pipe_mpi_size_check(int size, int workers, int tensor, const char *cmd, const char *file,
                             cl_err *e);
void exec_pipe_mpi_finalize(void);

#endif
