/* schedule.h - pipeline schedules as per-device ordered op lists.
 *
 * One module turns (plan, schedule kind, microbatches, iterations) into one
 * ordered list of ops per device.  The simulator replays these lists as
 * events and the executor runs the very same lists on threads or MPI ranks,
 * so a list is complete and self-describing: every op names its kind, stage,
 * chunk, microbatch, iteration, the peer worker and bytes of a transfer, and
 * the weight version a PipeDream forward/backward computes with.
 *
 * Semantics a runner must honour (docs/simulator.md, "Op lists"):
 * - A device runs its list in order.  F, B, W and UPDATE occupy its compute
 *   stream one at a time.
 * - SEND posts a transfer and returns at once (the send engine overlaps
 *   compute); RECV blocks until that transfer has arrived.  Lists with
 *   blocking_p2p (DeepSpeed's pipeline) instead meet: the transfer starts
 *   when the sender is at its SEND and the receiver at its RECV, and both
 *   wait until it has arrived.  A SEND matches
 *   the RECV with the same (stage pair, microbatch, iteration, direction);
 *   activations flow from stage s to s + 1, gradients from s + 1 to s.
 * - ALLREDUCE posts this replica's part in the ring all-reduce of its stage's
 *   gradients and returns at once; the next UPDATE of that stage waits for
 *   it.  The k-th ALLREDUCE of a stage on each replica form one collective.
 * - Data dependencies between ops on one device are satisfied by list order.
 *
 * Workers are the indices of the lists (0..n_dev-1); dev[w] is the cluster
 * device worker w runs on.  Microbatch i of an iteration runs on replica
 * (i mod r) of a stage with r replicas.
 */
#ifndef CL_SIM_SCHEDULE_H
#define CL_SIM_SCHEDULE_H

#include <stdint.h>

#include "plan.h"
#include "base/status.h"

typedef enum sched_op_kind {
    SCHED_F,          /* forward of (stage, microbatch)                       */
    SCHED_B,          /* backward: input gradient, plus the weight gradient
                         when flags has SCHED_FUSED_W                          */
    SCHED_W,          /* weight gradient (schedules that split the backward)  */
    SCHED_SEND,       /* post a transfer to worker `peer`                      */
    SCHED_RECV,       /* wait for the transfer from worker `peer`              */
    SCHED_ALLREDUCE,  /* post this replica's part of the stage's all-reduce   */
    SCHED_UPDATE,     /* optimiser step of `stage` (waits for its all-reduce) */
    SCHED_OP_COUNT
} sched_op_kind;

enum {
    SCHED_FUSED_W = 1, /* B also computes the weight gradient                 */
    SCHED_GRAD = 2     /* SEND/RECV carries a gradient (else an activation)   */
};

typedef struct sched_op {
    uint8_t kind;        /* sched_op_kind                                     */
    uint8_t flags;       /* SCHED_FUSED_W, SCHED_GRAD                         */
    uint16_t chunk;      /* model chunk of `stage` on its device (interleaved:
                            stage / p), else 0                                */
    int32_t stage;       /* plan stage the op belongs to (for SEND/RECV: the
                            stage on this device; the other end's stage is
                            sched_peer_stage(op))                             */
    int32_t peer;        /* SEND: destination worker, RECV: source, else -1   */
    int32_t micro;       /* microbatch within its iteration; -1 for an
                            iteration's ALLREDUCE/UPDATE in flushing kinds    */
    int32_t iter;        /* iteration                                         */
    int32_t wver;        /* F/B of PipeDream: weight version computed with
                            (updates of this stage applied so far when the F
                            ran); -1 = the current weights                    */
    double bytes;        /* SEND/RECV: payload; ALLREDUCE: the gradient bytes
                            its reduce-scatter half moves (plan_ar_bytes)  */
} sched_op;                /* 32 bytes: two to a cache line                   */

/* SEND/RECV: the stage at the other end.  Activations go from stage s to
 * s + 1, gradients from s + 1 to s, so kind and SCHED_GRAD decide it. */
static inline int sched_peer_stage(const sched_op *op)
{
    int up = (op->kind == SCHED_SEND) != ((op->flags & SCHED_GRAD) != 0);
    return up ? op->stage + 1 : op->stage - 1;
}

/* SEND/RECV: the boundary crossed, numbered by its lower stage. */
static inline int sched_boundary(const sched_op *op)
{
    int p = sched_peer_stage(op);
    return p < op->stage ? p : op->stage;
}

typedef struct sched {
    int kind;            /* sched_kind, or -1 for an explicit schedule        */
    int n_stages;        /* plan stages (p x v)                               */
    int chunks;          /* v (interleaved), else 1                           */
    int n_micro;         /* microbatches per iteration                        */
    int n_iter;          /* iterations in the lists                           */
    int split_bw;        /* some B has its W as a separate op                 */
    int stash_weights;   /* PipeDream weight stashing (wver is meaningful)    */
    int blocking_p2p;    /* SEND/RECV are blocking rendezvous (DeepSpeed's
                            p2p.send/recv): built for a plan `for` deepspeed
                            under 1f1b, whose lists are DeepSpeed's
                            TrainSchedule with its transfers in place       */
    int n_dev;           /* workers                                           */
    int *dev;            /* owned: cluster device index of each worker        */
    int64_t *off;        /* owned: worker w's ops are ops[off[w] .. off[w+1]) */
    sched_op *ops;       /* owned                                             */
    int64_t n_ops;
} sched;

/* Build the op lists of schedule `kind` for plan p with m microbatches per
 * iteration and n_iter iterations (asynchronous kinds run all iterations as
 * one stream without a flush).  Fails with CL_EINPUT, naming the cause, when
 * the combination cannot be built (e.g. interleaved with m not a multiple of
 * p, a plan with chunks > 1 under a kind other than interleaved).  The caller
 * frees *s with sched_free. */
int sched_build(const plan *p, sched_kind kind, int m, int n_iter, sched *s, cl_err *e);
void sched_free(sched *s);

/* 1 when sched_build gives plan pl under kind DeepSpeed's TrainSchedule
 * with blocking transfers (sched.blocking_p2p): kind 1f1b, the plan `for`
 * deepspeed, every stage on the same number of replicas (DeepSpeed
 * replicates whole pipelines; other plans keep cleave's order).  The
 * planner's closed form prices the same plans as blocking. */
int sched_deepspeed(const plan *pl, sched_kind kind);

/* Check that s is a complete, consistent schedule for plan p: every (stage,
 * microbatch, iteration) has one F and one B (and one W if split) on a
 * device of that stage, same-device dependencies come in list order, every
 * cross-device dependency has a matching SEND/RECV pair with the right
 * workers and bytes, all-reduce counts agree across replicas.  `file` is
 * named in messages; CL_EINPUT on the first problem.  Does not detect
 * deadlocks (the simulator does). */
int sched_check(const plan *p, const sched *s, const char *file, cl_err *e);

/* Explicit schedules: "format": "cleave-schedule" (docs/formats.md).  Loading
 * inserts SEND/RECV pairs when the file has none, then runs sched_check.
 * The caller frees *s. */
int sched_load(const plan *p, const char *path, sched *s, cl_err *e);
struct cJSON;
int sched_from_json(const plan *p, const struct cJSON *root, const char *file, sched *s,
                    cl_err *e);
struct cJSON *sched_to_json(const sched *s);   /* caller owns (cJSON_Delete) */
int sched_save(const sched *s, const char *path, cl_err *e);

/* Closed-form memory of the built-in schedules, shared with the planner's
 * cost model (the simulator's measured peaks must equal these; a test checks).
 *
 * sched_inflight: the most microbatches whose stashed activations are alive at
 * once on pipeline position s of p (0-based) with m microbatches per
 * iteration, v chunks (interleaved; otherwise pass 1), unreplicated.  A stash
 * lives from the start of its F to the end of its B (fused) or W (split).
 *   sequential 1;  gpipe m;  1f1b min(p - s, m);
 *   zb-h1 min(p, m) (W is deferred by s microbatches on position s);
 *   interleaved (counted in chunk-microbatches on device s; v = 1 is 1f1b)
 *   min(2(p - s - 1) + (v - 1)p + 1, m v);
 *   pipedream, fbp p - s (no flush: the stream keeps the pipeline full
 *   whatever m is, once the simulated stream has p microbatches).
 *
 * sched_versions: weight versions alive at once on position s (including
 * the current one): pipedream p - s, every other kind 1. */
int sched_inflight(sched_kind kind, int p, int s, int m, int v);
int sched_versions(sched_kind kind, int p, int s, int m);

/* The same on one replica of a replicated stage.  devices: devices in the
 * whole pipeline (sum of replicas); depth: devices from this stage to the
 * last, its own replicas included (p - s unreplicated); r: its replicas.
 * Each replica runs its own microbatches (i mod r) with its share of the
 * depth, ld = ceil(depth / r), as PipeDream's 1F1B-RR does:
 *   gpipe ceil(m / r);  1f1b min(ld, ceil(m / r));  pipedream, fbp ld;
 *   zb-h1 min(ld + ceil((devices - depth) / r), ceil(m / r));
 *   interleaved: the unreplicated count divided by r, rounded up (an
 *   estimate; exact when r = 1).
 * Weight versions (pipedream): ld.  With every r = 1 these are the
 * functions above. */
int sched_inflight_rep(sched_kind kind, int devices, int depth, int r, int m, int v);
int sched_versions_rep(sched_kind kind, int depth, int r);
/* Both for every depth of one replica count r at once: in[depth] =
 * sched_inflight_rep(kind, max(devices, depth), depth, r, m, v) and
 * ver[depth] = sched_versions_rep(kind, depth, r) for depth = r .. dmax
 * (devices 0: the pipeline is as deep as the stage).  The same values
 * without a division per depth: the planner tabulates them for every depth
 * and replica count of every exact search. */
void sched_inflight_depths(sched_kind kind, int devices, int r, int m, int v, int dmax, int *in, int *ver);
/* Interleaved 1F1B (v chunks per device; v = 1 is 1F1B): the most stash bytes alive
 * at once on one replica of pipeline position j of p, each position r
 * replicas and the m microbatches shared among them as the simulator's
 * order shares them (each replica its own m / r when that is a multiple of
 * p), walking Megatron-LM's order with stash[c] bytes per microbatch of the
 * device's chunk c (c = 0 .. v - 1).  Exact: equal to the simulator's peak
 * stash on that device, where sched_inflight_rep times the largest chunk's
 * stash is a bound (r = 1) or an estimate (r > 1). */
double sched_interleaved_stash_peak(int p, int v, int j, int m, int r, const double *stash);

/* Short label of an op, shared by the simulator's and the executor's traces:
 * F3 / F3.1 (microbatch 3, chunk 1, shown when chunks > 1), B3, W3, U (an
 * update), AR (all-reduce), A3 / G3 (an activation / gradient transfer).
 * Returns buf. */
char *sched_op_label(const sched *s, const sched_op *op, char *buf, int cap);

/* "F", "B", "W", "SEND", "RECV", "ALLREDUCE", "UPDATE". */
const char *sched_op_kind_name(sched_op_kind k);

/* Default iterations to simulate, and the first iteration counted in the
 * steady state: sync kinds simulate 1 and measure all; async kinds skip
 * w = ceil(p / m) warm-up iterations (p from sched_fill_depth), measure 4, and leave out w more at the
 * end (docs/simulator.md). */
int sched_warmup_iters(sched_kind kind, int p, int m);
/* The p those take for plan pl: its pipeline positions times its widest
 * stage's replicas.  A replica runs m / r of an iteration's microbatches,
 * so an async pipeline fills in r times as many iterations (the window
 * measured from ceil(p / m) alone was not yet steady: negative bubbles). */
int sched_fill_depth(const plan *pl);
int sched_default_iters(sched_kind kind, int p, int m);

/* The steady-state window of a run of n_iter iterations: iterations
 * [*first, *last] are measured.  Sync kinds: all of them (each iteration
 * flushes, so they are alike).  Async kinds never flush: the first
 * w = sched_warmup_iters() fill the pipeline, and the last w drain it -
 * they lack the next iteration's forwards, so they run short and a slope
 * through them reads below the busiest device's work per iteration.  Both
 * are left out when at least one iteration remains (else only the warm-up,
 * else nothing: a run too short for a steady state). */
void sched_steady_window(sched_kind kind, int p, int m, int n_iter, int *first, int *last);

#endif
