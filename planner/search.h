/* search.h - from a model, a profile and a cluster to the best plan.
 *
 * Candidates are (device order x microbatch count x schedule); for each,
 * the partition-and-merge heuristic and the exact search choose stage
 * count, partition, replication and device blocks, and every candidate is
 * ranked by plan_predict (predict.h), the single ranking function.
 * docs/planner.md describes the whole search.
 */
#ifndef CL_PLAN_SEARCH_H
#define CL_PLAN_SEARCH_H

#include <stdint.h>

#include "models/model.h"
#include "profiles/cluster.h"
#include "profiles/profile.h"
#include "core/plan.h"
#include "predict.h"

/* Layers past which --algo auto plans by partition-and-merge alone (the
 * exact search is quadratic in a chain's length; search.c). */
#define PLAN_EXACT_AUTO_MAX_LAYERS 10000

typedef enum plan_algo { PLAN_ALGO_AUTO, PLAN_ALGO_EXACT, PLAN_ALGO_MERGE, PLAN_ALGO_COUNT } plan_algo;
/* "auto", "exact", "merge" to a plan_algo; -1 if unknown */
int plan_algo_from_name(const char *name);

/* The refusal of a separate gradient accumulation (`--grad-accumulation
 * separate`, plan_request.wgrad_acc) where it cannot be priced: it adds a
 * kernel per parameter tensor of a transformer, priced by bytes on a
 * device's kernel model. */
#define PLAN_GRAD_ACC_NEEDS "--grad-accumulation separate prices a kernel per parameter tensor of a transformer: it needs a model with a \"transformer\" member and a device type with a \"kernels\" member (docs/compute.md, \"Gradient accumulation\")"

typedef struct plan_request {
    const model *model;     /* required                                       */
    const prof *prof;       /* required: per-layer costs for this model        */
    const cluster *cluster; /* required                                       */
    /* the device type the profile's times were taken on; device speeds are
     * effective FLOP/s relative to it.  NULL: every device runs at the
     * profile's speed (allowed only when all devices are of one type) */
    const cluster_devtype *ref_type;
    int batch;              /* samples per iteration, >= 1                    */
    int schedule;           /* a sched_kind, or -1 to try them all            */
    int microbatches;       /* 0: try divisors of the batch                   */
    int chunks;             /* interleaved: model chunks per device (0 = 2)   */
    int stages;             /* 0: any stage count; else exactly this many     */
    plan_algo algo;
    plan_optim optimizer;
    plan_prec precision;    /* PREC_AUTO: from the model's element size       */
    int zero;               /* ZeRO stage 0..PLAN_ZERO_MAX over each stage's
                               replicas                                       */
    int comm;               /* 0: leave communication out of every cost       */
    int replication;        /* 0: never replicate a stage                     */
    double wgrad_acc;       /* plan_fixed_eval of a transformer: bytes per
                               parameter of the framework's separate weight-
                               gradient accumulation per microbatch
                               (tfm_rank_opts.wgrad_acc; `--grad-accumulation
                               separate`: plan_prec_grad_acc_bytes); 0: none */
    /* PLAN_FOR_ANY, or search only what that framework runs (its schedules,
     * one replica count for every stage dividing the microbatches, stages
     * that are runs of layers in model order), so the plan's figure is the
     * run its export describes (docs/planner.md, "Plans a framework runs") */
    plan_for framework;
    /* bytes per gradient element of the data-parallel reduction (2 or 4;
     * `--grad-reduce-bytes`); 0: plan_grad_reduce_default of the model's
     * dtype, the precision and `framework` (core/plan.h) */
    int grad_reduce;
    int64_t max_downsets;   /* cap on listed cuts of a branching model (0: default) */
    int64_t exact_budget;   /* exact-search steps per candidate (0: default)  */
    /* optional: the plan found for the first floor->plan.cluster.n_devices
     * devices of this cluster with the same request (the previous point of
     * a sweep).  The plan returned is at least as fast, and the searches on
     * fewer devices stop above that count instead of searching it again */
    const struct plan_result *floor;
    /* what to call the profile and the cluster in messages (file names, or
     * how they were made); NULL: "the profile", "the cluster", "the model" */
    const char *prof_origin, *cluster_origin, *model_origin;
} plan_request;

/* The longest iteration a plan may take, seconds (3e22 years): anything
 * slower comes from a unit mistake in an input, and sums of such times
 * would overflow to infinity in the search and the simulator. */
#define PLAN_MAX_ITERATION_S 1e30
/* The shortest whole-model iteration on the fastest device, unless it is 0:
 * below it, samples per second overflow to infinity (with 2^30 samples and
 * 2^20 devices sharing the work, 1e-30 s keeps them below 1e60). */
#define PLAN_MIN_ITERATION_S 1e-30

#define PLAN_NOTES 8

typedef struct plan_result {
    plan plan;              /* the chosen plan; plan_result_free releases it  */
    plan_timing timing;
    double bottleneck_s;    /* its slowest stage or boundary, per iteration   */
    int bottleneck_stage, bottleneck_is_boundary;
    double exact_s, merge_s;/* slowest stage each algorithm reached for the
                               chosen schedule and microbatches (NAN: not run
                               or nothing fitted)                             */
    const char *algo;       /* "exact" or "merge": where the plan came from   */
    int candidates;         /* candidates ranked                              */
    int devices_used;       /* devices the plan uses (plan.idle_why says why,
                               when fewer than the cluster's)                 */
    int cuts_dag;           /* 1: exact search saw every cut of the DAG       */
    int lattice_sets;       /* cuts (downsets or prefixes) searched           */
    int64_t exact_steps;    /* transitions priced by the exact search, in all */
    /* where the planning time went, wall-clock seconds */
    double time_prep_s;     /* instances and cut lattices, per m              */
    double time_merge_s;    /* partition-and-merge                            */
    double time_lower_s;    /* least-memory bottleneck bounds (plan_exact_lower) */
    double time_exact_s;    /* exact searches (plan_exact)                    */
    double time_rank_s;     /* plans from layouts, predictions (closed form,
                               simulator), ranking                            */
    double time_chunks_s;   /* interleaved plans: chunk splits and their
                               replays (search_interleaved)                   */
    int n_notes;            /* things the user must be told, one line each    */
    char notes[PLAN_NOTES][320];
} plan_result;

/* Plan.  CL_EINPUT for bad requests and for "nothing fits", with one line
 * naming the cause (for memory: the stage that overflows and by how much).
 * On success res->plan is valid (plan_validate) and complete. */
int plan_search(const plan_request *rq, plan_result *res, cl_err *e);
void plan_result_free(plan_result *res);

/* A lower bound on the iteration of every plan plan_search can return for
 * rq, in seconds: any schedule's iteration holds each device's share of
 * the work at its speed, so it is at least the least work over the
 * microbatch counts (rq->microbatches, or every divisor of the batch) over
 * the sum of the devices' speeds.  Cheap (no search); a caller comparing
 * questions (`--tensor auto`) skips those whose bound cannot beat a plan
 * it has. */
double plan_search_bound(const plan_request *rq);

#endif
