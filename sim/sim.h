/* sim.h - replay a pipeline schedule on a cluster, event by event.
 *
 * The simulator runs the per-device op lists of a schedule (schedule.h) on
 * top of the event kernel (event.h): each device has a compute stream (one
 * F/B/W/UPDATE at a time, durations from the plan's stages) and send and
 * receive engines that overlap compute; transfers travel over directed
 * channels with the cluster's bandwidth and latency, one at a time in the
 * order posted (link.c), and replicated stages all-reduce their gradients
 * with a ring, hierarchical across nodes (ring.c).  Memory is
 * tracked per device over time.  What is and is not modelled:
 * docs/simulator.md.
 *
 * Usage: sim_create / sim_run / (sim_write_trace) / sim_destroy, or
 * sim_predict for the planner (one call, no trace).
 */
#ifndef CL_SIM_SIM_H
#define CL_SIM_SIM_H

#include <stdint.h>

#include "core/plan.h"
#include "base/status.h"
#include "core/schedule.h"

typedef struct sim sim;

typedef struct sim_opts {
    int comm_off;          /* transfers and all-reduces take no time          */
    int record;            /* keep the timeline for sim_write_trace           */
    uint64_t max_events;   /* event budget; 0 = SIM_MAX_EVENTS                */
    double max_wall_s;     /* real-time budget in seconds; 0 = SIM_MAX_WALL_S  */
} sim_opts;

#define SIM_MAX_EVENTS 2000000000ull
#define SIM_MAX_WALL_S 600.0

/* Memory of one device by component, bytes. */
typedef struct sim_mem {
    double weights;        /* parameters of the stages it holds               */
    double grads;          /* their gradients                                 */
    double optim;          /* optimiser state: moments (0, 1 or 2 per
                              parameter) and, in mixed precision, the fp32
                              master weights                                 */
    double versions;       /* extra stashed weight versions (PipeDream)       */
    double stash;          /* activations kept for the backward pass          */
    double buffers;        /* transfers sent but not yet arrived, and arrived
                              but not yet consumed                            */
} sim_mem;

static inline double sim_mem_total(const sim_mem *m)
{
    return m->weights + m->grads + m->optim + m->versions + m->stash + m->buffers;
}

typedef struct sim_dev_result {
    int device;            /* cluster device index                            */
    int stage;             /* lowest plan stage on it                         */
    int n_stages;          /* stages (chunks) it holds                        */
    /* steady state, per iteration: busy + idle + comm_wait = iteration_s    */
    double busy_s, idle_s, comm_wait_s;
    double busy, idle, comm_wait;   /* the same as fractions                 */
    double peak_mem_bytes;
    double peak_t_s;       /* when the peak was first reached                 */
    sim_mem at_peak;
    int peak_stash;        /* most stashed microbatch(-chunk)s alive at once  */
    int peak_versions;     /* most weight versions of one stage alive at once */
    double sent_bytes;     /* bytes this device sent over links               */
} sim_dev_result;

typedef struct sim_result {
    int kind;              /* sched_kind, or -1 for an explicit schedule      */
    int n_micro, n_iter;   /* per iteration, simulated                        */
    int warmup_iters;      /* iterations left out of the steady state at the
                              start (async kinds: as many drain at the end)  */
    int measured_iters;    /* iterations in the steady-state window          */
    double samples;        /* samples per iteration                           */
    double iteration_s;    /* time per iteration (steady state for async)     */
    double throughput;     /* samples per second                              */
    double bubble;         /* 1 - mean busy fraction over devices             */
    double comm_wait;      /* mean communication-wait fraction                */
    double sequential_s;   /* one device, no pipelining, same stage times     */
    double speedup;        /* sequential_s / iteration_s                      */
    double makespan_s;     /* end of the last op of the simulated run         */
    double sent_bytes[CLUSTER_LEVELS]; /* over intra- / inter-node links, whole run */
    uint64_t events;
    int n_dev;
    sim_dev_result *dev;   /* owned: one per worker of the schedule          */
} sim_result;

void sim_result_free(sim_result *r);

/* Prepare a simulation of schedule s on plan p.  Both must outlive the
 * handle.  Fails with CL_EINPUT if s does not fit p (sizes, stage times not
 * finite and >= 0, all-reduce groups that do not line up).  Free with
 * sim_destroy. */
sim *sim_create(const plan *p, const sched *s, const sim_opts *o, cl_err *e);
void sim_destroy(sim *s);

/* Run to completion and fill *out (caller frees with sim_result_free).
 * CL_EINPUT for a schedule that cannot complete (the message names every
 * waiting device and what it waits for) or an exhausted budget. */
int sim_run(sim *s, sim_result *out, cl_err *e);

/* Chrome trace JSON of the last run (needs opts.record), written atomically:
 * one track per device compute stream and per link (docs/formats.md, "Trace"). */
int sim_write_trace(const sim *s, const char *path, cl_err *e);

/* The planner's entry point: simulate plan p under its own schedule and
 * microbatch count (default iterations, communication as the plan was made,
 * no trace). */
int sim_predict(const plan *p, sim_result *out, cl_err *e);

/* A uniform plan for tests and benchmarks: p stages (x v chunks) on p x r
 * devices, each stage with the given per-microbatch times and sizes, chunk
 * times divided by v.  Devices `per_node` to a node (0: one node); links
 * `intra`, `inter`.  The model is left empty.  Free with sim_uniform_free. */
typedef struct sim_uniform {
    int stages, chunks, replicas, micro, per_node;
    sched_kind schedule;
    double fwd_s, bwd_in_s, bwd_w_s;          /* per stage, per microbatch */
    double act_bytes, stash_bytes, param_bytes;
    cluster_link intra, inter;
    plan_optim optimizer;
} sim_uniform;
int sim_uniform_plan(plan *p, const sim_uniform *u, cl_err *e);
void sim_uniform_free(plan *p);

#endif
