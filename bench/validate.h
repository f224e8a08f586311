/* validate.h - a plan's prediction against a real run on this machine
 * (`cleave validate`, `cleave bench validate`; docs/validation.md).
 *
 * Steps, each its own function so the benchmark and the command share them:
 *  1. costs:   the plan's per-stage times and bytes are rebuilt from a
 *              profile of this machine at the plan's microbatch size (the
 *              planner's cost model: sums over the stage's layers), and each
 *              stage's optimiser step is timed on its own parameters;
 *  2. links:   the plan's link levels become the profiled link (a cluster
 *              file from `cleave profile --links`, or a fresh measurement);
 *  3. predict: the simulator replays the plan's op lists for the same number
 *              of iterations the run will have;
 *  4. measure: the pipelined runtime (pipeline.h) trains the plan for those
 *              iterations on synthetic data of the model's shape;
 *  5. compare: iteration time, per-worker busy time per iteration and peak
 *              memory per worker, predicted against measured.
 *
 * Relative error everywhere is (predicted - measured) / measured.
 */
#ifndef CL_EXEC_VALIDATE_H
#define CL_EXEC_VALIDATE_H

#include <stdint.h>

#include "core/plan.h"
#include "profiles/profile.h"
#include "sim/sim.h"
#include "base/status.h"
#include "exec/probe/linkprof.h"
#include "exec/nn/layers_tfm.h"
#include "exec/run/pipeline.h"

/* (predicted - measured) / measured; 0 when both are 0, +-inf when only the
 * measurement is 0. */
double exec_val_error(double predicted, double measured);

/* One compared quantity. */
typedef struct exec_val_qty {
    double predicted, measured, error;
} exec_val_qty;

void exec_val_qty_set(exec_val_qty *q, double predicted, double measured);

/* Mean and largest absolute error over n errors (NAN entries skipped;
 * *mean = *max = 0 when none is left). */
void exec_val_abs_stats(const double *err, int n, double *mean, double *max);

/* Check that the runtime can run p (exec_pipe_check: layer kinds, stages
 * that cut the model in order, the loss at the end, an optimiser it
 * implements, a schedule that builds).  CL_EINPUT naming `file`. */
int exec_val_check(const plan *p, const char *file, cl_err *e);

/* What a stage costs beyond its layers' profiled times, measured on this
 * machine in context (training steps on the stage's own net). */
typedef struct exec_val_extra {
    /* on the runtime's op clock (its busy time counts them) */
    double update_s;        /* one optimiser step of the stage's parameters   */
    double copy_s;          /* copying its output into a fresh message after
                               each F; 0 for the last stage                   */
    double swap_s;          /* PipeDream, every stage but the last: the two
                               exchanges of the parameters with the stashed
                               version around each B                         */
    double input_s;         /* first stage: gathering the microbatch's samples
                               from the data set at the start of each F;
                               else 0                                        */
    /* on the worker's stream but off the op clock */
    double version_s;       /* PipeDream, every stage but the last: copying
                               the parameters into a new version before each
                               update                                        */
    double post_f_s, post_b_s; /* posting the SEND after each F / B
                               (exec_val_add_posts)                          */
    double crew_s;          /* tensor parallelism, a stage with split layers:
                               starting its ranks and waiting for them, once
                               per compute op (pipe_tp.h; measured) */
    /* memory */
    double acts_bytes;      /* one microbatch's exec_acts: what the runtime
                               keeps per stashed microbatch                   */
    double param_bytes;     /* the padded parameter block                    */
    double recompute_bytes; /* full recomputation's scratch (exec_net_recompute_bytes
                               of a net for one microbatch, as the run's nets
                               are without an evaluation): held from the
                               start, counted with the run's stash; 0 without */
    /* the stage's passes timed in the run's order (exec_val_costs with
     * ctx): forward, input gradient, weight gradient; 0 without ctx */
    double fwd_ctx_s, bwd_in_ctx_s, bwd_w_ctx_s;
    /* a split stage (tensor t > 1) replayed with ctx: rank 0's mean seconds
     * per collective (all-reduce, all-gather or reduce-scatter), in the
     * replay on the crew (left out of the passes above; exec_val_tp_link);
     * 0 otherwise */
    double ar_ctx_s;
    /* a split stage: the collectives of one microbatch's forward, input
     * gradient and weight gradient on rank 0 (PROF_F, PROF_B, PROF_W;
     * floats per sample), counted on the stage's net as the schedule runs
     * it (exec_net_create_counted): a weight gradient right after the
     * input gradient counted with it, zb-h1's own W pass apart; all 0
     * otherwise */
    prof_coll coll[PROF_PASSES];
    double seq_bytes;       /* sequence parallelism's gather scratch
                               (exec_net_seq_bytes): held from the start, as
                               recompute_bytes; 0 without */
    /* the profile's sums over the stage's layers, before the extras */
    double fwd_layers_s, bwd_in_layers_s, bwd_w_layers_s;
    double stash_layers_bytes;
} exec_val_extra;

/* Step 1.  Rebuild every stage's costs as the planner's cost model would
 * for one device of the profiled type: fwd_s, bwd_in_s, bwd_w_s,
 * act_out_bytes, stash_bytes and param_bytes are sums over the stage's
 * layers of pf at the plan's microbatch size.  With x (n_stages entries,
 * caller-allocated), also measure what the runtime does beyond the layers
 * (exec_val_extra, `reps` steps) and put it in: fwd_s += copy_s + input_s,
 * bwd_in_s += swap_s, update_s = update_s + version_s, stash_bytes =
 * acts_bytes, param_bytes = the padded block.  With x and ctx, the layer
 * sums are replaced by the stage's passes timed in the run's order: every
 * worker's op list of the plan's schedule replayed on one thread without
 * its transfers (fwd_ctx_s, bwd_in_ctx_s, bwd_w_ctx_s, medians over
 * iterations 1..), so each pass finds the caches as the run leaves them.
 * The per-layer profile times each layer alone with its data in cache; a
 * stash that outgrows the cache, or an optimiser step between iterations,
 * makes the run's passes slower than the sums (12% on fmnist-cnn's 4-deep
 * GPipe stash: docs/validation.md).  With EXEC_VAL_CTX_XCORE in ctx as
 * well, the replay runs on one core while a thread on another rewrites
 * every input that another worker would have sent just before the op that
 * reads it, so the op reads it from the other core's cache as in a
 * threads-backend run (+2 us on fmnist-mlp's second-stage forward).  pf must
 * describe p's model (prof_check_model).  The plan's predictions
 * (compute_s, comm_s, mem_bytes, pred) are left as they were. */
enum {
    EXEC_VAL_CTX_REPLAY = 1, /* ctx: the stages' passes replayed in the run's order */
    EXEC_VAL_CTX_XCORE = 2,  /* ... on one core, with every input that another
                                worker sends written by another core just before
                                the op reads it (threads backend: the run reads
                                the sender's cache lines) */
    EXEC_VAL_CTX_TP_MPI = 4, /* the run's tensor ranks are MPI processes
                                (exec_pipe_opts.tensor_mpi): no crew to start
                                and wait for (crew_s 0) */
    EXEC_VAL_CTX_REPLAYED = 8 /* with EXEC_VAL_CTX_REPLAY: x already holds the
                                replay's figures (fwd_ctx_s, bwd_in_ctx_s,
                                bwd_w_ctx_s, ar_ctx_s: exec_val_replay_procs,
                                run by the caller over the run's tensor
                                processes); kept, not replayed again */
};
int exec_val_costs(plan *p, const prof *pf, int reps, int ctx, exec_val_extra *x,
                   const char *file, cl_err *e);
/* Tensor parallelism (plan tensor t > 1, pipe_tp.h): exec_val_costs has
 * costed one rank's share of every stage (exec_net_create_solo, a profile
 * from exec_profile_tp) with its collectives left out, and the crew's start
 * and wait on every compute op (crew_s); this adds the collectives x
 * counted on each stage's net (exec_val_extra.coll: with tensor
 * parallelism alone a split layer's two all-reduces of its (microbatch, T,
 * D) output, in the forward and the input gradient, as the planner's
 * planner/tensor.c; with sequence parallelism the all-gathers and
 * reduce-scatters along the sequence, the weight gradient's gathers and
 * the layer norm's summed gradient among them) to the pass that makes
 * them, priced as rings over t ranks on `link` (prof_coll_s).
 * Nothing when t is 1. */
void exec_val_tp_comm(plan *p, const exec_val_extra *x, const cluster_link *link);
/* The ring's link for exec_val_tp_comm as the replay measured the
 * collectives (exec_val_costs with ctx; x[s].ar_ctx_s): link->bw_Bps kept,
 * link->latency_s set so that the rings price the split stages' collectives
 * of one microbatch at what they took rank 0 in the replay, in total:
 * (sum of the measured collectives - their bytes terms) / their steps, at
 * least 0.  The executor's collectives (tp_group.h) are rendezvous on a
 * condition variable around their copies, and a rank that waits there
 * sleeps: in the run each costs a partner's wake-up and whatever the
 * partner's compute came out longer, which a message probe between
 * spinning threads does not see (docs/validation-tp.md).  Returns 1 when x
 * holds a measurement (link set), 0 when not (link left alone). */
int exec_val_tp_link(const plan *p, const exec_val_extra *x, cluster_link *link);
/* The context part of exec_val_costs (validate_replay.c): the stages'
 * passes timed as the run executes them, every worker's op list of the
 * plan's schedule replayed on this thread without the transfers (xcore: a
 * thread on another core writes each input another worker would send just
 * before it is read), three times; each stage's fwd_ctx_s,
 * bwd_in_ctx_s and bwd_w_ctx_s in x are the medians of the replays'
 * medians. */
int exec_val_replay(const plan *p, int reps, int xcore, exec_val_extra *x, const char *file,
                    cl_err *e);
/* The same replay when the run's tensor ranks are processes (tp_mpi.h):
 * every rank of one tensor group calls it at once with its view of the
 * group (procs, size plan_tensor(p)), and each replays every worker's op
 * lists on its own share of each split stage, through the group's own
 * all-reduce, so rank 0's ar_ctx_s holds what an all-reduce cost it with
 * its partners as processes (their late arrivals included), the price the
 * crew's replay gives threads.  A stage with no split layer runs whole on
 * every rank, as in the run.  No cross-core writer: the processes have the
 * cores.  x: n_stages entries, rank 0's figures on rank 0 (elsewhere not
 * to be used: a split stage's are 0, an unsplit one's that rank's); then
 * exec_val_costs with EXEC_VAL_CTX_REPLAYED keeps them.  A collective of
 * the group: the same plan and reps on every rank. */
int exec_val_replay_procs(const plan *p, int reps, const exec_tp_comm *procs, exec_val_extra *x,
                          const char *file, cl_err *e);

/* The costs the planner's cost model gives (the layer sums, plus the
 * runtime's extras of x) for a plan whose costs exec_val_costs set in
 * context: swaps each stage's in-context passes back for the layer sums,
 * for a second prediction that shows the layer sums' own error. */
void exec_val_layer_costs(plan *p, const exec_val_extra *x);

/* Profile p's model on this machine at the plan's microbatch size
 * (exec_profile with `reps` timed steps after 3 warm-up).  The caller frees
 * *pf. */
int exec_val_profile(const plan *p, int reps, prof *pf, const char *file, cl_err *e);

/* Step 2.  Sending.  A SEND is not free for the worker that posts it: on
 * the threads backend posting wakes the receiver when it sleeps, a system
 * call that costs the poster ~15-20 us on this VM (~1 us when the receiver
 * spins, as a waiting worker with a core of its own does: chan.h);
 * MPI_Isend costs little.
 * exec_val_post_s measures it: a short ping-pong of small messages (8 B to
 * 4 KiB, where the copy is negligible) on `backend`, the sender computing
 * EXEC_VAL_POST_GAP_S before each (so the receiver has gone to sleep, as a
 * stage waiting for its neighbour has; a receiver woken right after it fell
 * asleep is cheaper to wake), the median over those sizes of the sender's
 * expected send call; *handoff_s (may be NULL) the median over the same
 * sizes of the expected hand-off, post to the receiver holding the message
 * (exec_link_sample.send_exp_s, handoff_s: on threads, the medians with the
 * receiver spinning and asleep weighed by their shares, the outgoing
 * message alone).  Measured with the wait behaviour the run will have: at
 * normal priority on a busy machine the waiting workers back off from
 * spinning and sleep (exec_preempt), and a message to a sleeping receiver
 * took 14-19 us there against 0.7 us to a spinning one
 * (docs/validation.md), which a fit over all sizes (the link profile) mixes
 * into one latency.
 * exec_val_add_posts adds post_s
 * to the op that each SEND follows in the op lists: F of every stage but
 * the last (activations), B of every stage but the first (gradients), and
 * records it in x (may be NULL). */
#define EXEC_VAL_POST_GAP_S 200e-6
int exec_val_post_s(exec_pipe_backend backend, double *post_s, double *handoff_s, cl_err *e);
void exec_val_add_posts(plan *p, exec_val_extra *x, double post_s);

/* The link the simulator should use for a profiled link (one-way
 * latency + bytes / bandwidth, e.g. a ping-pong fit) on `backend`, when
 * post_s of each transfer is already on the sender's stream: latency -
 * post_s (the receiver's wake-up and take).  MPI keeps the bandwidth (a
 * transfer is MPI's own copy, done while the ranks compute).  Threads: a
 * transfer is a pointer hand-off whose per-byte cost is the sender's copy
 * into the message, which the runtime does inside the F op and
 * exec_val_costs already adds there (copy_s), so no per-byte term
 * (EXEC_VAL_HANDOFF_BPS).  A latency below 0 becomes 0; a bandwidth that is
 * not positive and finite (a fit with no slope) becomes
 * EXEC_VAL_HANDOFF_BPS too. */
#define EXEC_VAL_HANDOFF_BPS 1e15
cluster_link exec_val_link(const cluster_link *profiled, exec_pipe_backend backend, double post_s);

/* Set both of p's link levels to `link`. */
void exec_val_set_link(plan *p, const cluster_link *link);

/* The largest transfer the plan's schedule makes, bytes (0 for one stage). */
double exec_val_max_transfer(const plan *p);

/* Step 3.  Simulate p under its own schedule for n_iter iterations (the
 * simulator's default when 0); trace: NULL, or where to write the predicted
 * timeline.  The caller frees *r. */
int exec_val_predict(const plan *p, int n_iter, const char *trace, sim_result *r, cl_err *e);

/* Step 4.  Train p for n_iter iterations on a synthetic set of the model's
 * shape (seeded) of EXEC_VAL_SET_BATCHES batches (exec_val_costs times the
 * first stage's input gather on a set of the same size, so both read it
 * from the same level of the memory hierarchy), as `cleave train --plan`
 * would with the plan's optimiser.  tensor_mpi: with backend EXEC_PIPE_MPI and a plan of tensor t > 1, each
 * tensor rank an MPI process of its own (exec_pipe_opts.tensor_mpi; a
 * world of workers x t ranks), else a crew of threads per worker.
 * The caller frees *r with exec_pipe_result_free (also on failure). */
#define EXEC_VAL_SET_BATCHES 32
int exec_val_measure(const plan *p, exec_pipe_backend backend, int tensor_mpi, int n_iter,
                     const char *file, const char *trace, exec_pipe_result *r, cl_err *e);

/* The measured steady state, over the same window the simulator uses:
 * flushing kinds leave out the first iteration (cold caches, first-touch
 * page faults) when there are at least 2; asynchronous kinds measure
 * sched_steady_window() (warm-up and drain left out).  *first and *last
 * receive the window's iterations (inclusive).
 * exec_val_measured_iteration is the mean over the window (the slope of
 * the iteration ends, as the simulator computes it); _median the median
 * of the window's iteration times, which a neighbour's process stealing
 * the core for one iteration does not move (the comparison uses it). */
double exec_val_measured_iteration(const plan *p, const exec_pipe_result *r, int *first,
                                   int *last);
double exec_val_measured_iteration_median(const plan *p, const exec_pipe_result *r);

/* Step 5: everything compared. */
typedef struct exec_val_worker {
    int device, stage, n_stages;
    exec_val_qty busy_s;        /* compute seconds per iteration, as the
                                   runtime's op clock counts them (measured:
                                   median over the window)                  */
    exec_val_qty peak_mem;      /* bytes                                    */
} exec_val_worker;

typedef struct exec_val_report {
    exec_val_qty iteration_s;   /* measured: median over the window          */
    double iteration_mean_s;    /* measured: mean over the window            */
    exec_val_qty throughput;    /* samples per second                       */
    int first_iter, last_iter, n_iter; /* measured window: iterations
                                   first..last of n                        */
    int n_workers;
    exec_val_worker *w;         /* owned                                    */
    double max_busy_error;      /* largest |error| over the workers          */
    double max_mem_error;
} exec_val_report;

/* Seconds per iteration of `device`'s simulated busy time that the
 * runtime does not clock as compute: the extras of x that happen between
 * ops (posts, weight-version copies) times how often the
 * device does them.  0 when x is NULL. */
double exec_val_off_clock(const plan *p, const exec_val_extra *x, int device);

/* Bytes `device` holds all run long that the simulator's memory has no
 * place for: the recompute_bytes and seq_bytes of x over the stages it holds.  0 when x
 * is NULL. */
double exec_val_held(const plan *p, const exec_val_extra *x, int device);

/* Fill *out from a prediction and a measurement of the same plan (same
 * workers in the same order).  Predicted busy time is the simulator's less
 * exec_val_off_clock (x may be NULL), so both count what the runtime's op
 * clock counts; predicted peak memory the simulator's plus exec_val_held.  CL_ERUN when they disagree on the workers.  Free with
 * exec_val_report_free. */
int exec_val_compare(const plan *p, const exec_val_extra *x, const sim_result *pred,
                     const exec_pipe_result *meas, exec_val_report *out, cl_err *e);
void exec_val_report_free(exec_val_report *r);

/* `cleave bench validate` (bench/validate_bench.c): writes <outdir>/validate.csv. */
int exec_val_bench(const char *outdir, int quick);
/* The suite's tensor-parallel cases and the same one-stage ViT plans with
 * t = 1, into <outdir>/validate-tp.csv. */
int exec_val_bench_tp(const char *outdir, int quick);
/* The suite's recomputing cases, after the same two-stage ViT plans without
 * recomputation, into <outdir>/validate-recompute.csv. */
int exec_val_bench_recompute(const char *outdir, int quick);

#endif
