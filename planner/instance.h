/* instance.h - the search's internals (internal to planner/).
 *
 * instance.c (prefix instance_): what plan_search iterates over and what
 * it returns: one plan_inst per microbatch count and device order, built
 * from the request, and a found layout turned into plan stages.
 * search.c (search_), count.c (count_), fewer.c and search_interleaved.c
 * hold the search itself. */
#ifndef CL_PLANNER_INSTANCE_H
#define CL_PLANNER_INSTANCE_H

#include "cost.h"
#include "search.h"
#include "predict.h"
#include "predict_twin.h"

/* On up to this many devices the searches on fewer are exact: every count
 * down to the work bound (fewer.c, search_fewer).  Beyond, they get the
 * work of the search on all (a budgeted approximation, said in a note). */
#define FEWER_EXACT_DEVICES 16

/* Most microbatch counts the automatic choice tries. */
#define INSTANCE_MAX_MICRO 5

/* The search's view of a request. */
typedef struct search_ctx {
    const plan_request *rq;
    plan_result *res;
    /* the devices searched: rq->cluster, or its first n_dev devices (a
     * shallow copy; plans still name rq->cluster and its device indices) */
    const cluster *view;
    int n_dev;
    double *speed;          /* per cluster device */
    int *order;             /* current device order (positions -> devices) */
    /* rq->framework: the replica count every stage of the instances built
     * now has (search_view), and the last layer a stage may start at
     * (plan_target_model); 0 and the layer count otherwise */
    int rep, cut_max;
    /* an unrestricted request on a model Megatron takes whose head has two
     * or more layers: the last layer a stage may start at in Megatron's
     * searches (plan_target_model); cut_max otherwise */
    int cut_head;
    /* the work of those equal-replica searches (search_view): not part of
     * the budget the searches on fewer devices get (fewer.c) */
    int64_t equal_steps;
    int equal_cands;
    /* count.c's schedule_loses: off (tests, search_test.h), how many
     * schedule searches it left out, and the steps of its passes outside
     * the equal-replica searches (not part of fewer.c's budget) */
    int no_sched_prune, sched_pruned;
    int64_t sched_prune_steps;
    /* count.c's count_shadows: schedules whose memory can bind riding along
     * another's exact search off (tests, search_test.h), and how many
     * schedule searches such a ride replaced */
    int no_sched_share, sched_shared;
    int passes_answered;    /* exact passes answered by a search they rode
                               along (plan_exact_opts.memo_in)            */
    int passes_skipped;     /* exact passes known to find nothing, not run
                               (plan_exact_opts.lower_failed, no_skip)      */
    int no_prune;           /* plan_search_unpruned (search_test.h): no bound
                               skips a candidate, no exact search is shared */
    pred_twins *twins;      /* replays of asynchronous plans, shared with
                               their twins (predict_twin.h); NULL: none    */
    int no_twins, twin_hits; /* (tests, search_test.h) off; replays shared */
    int fine;               /* (tests) 0: every exact search climbs finely
                               (plan_exact_opts.fine_climb); -1: none      */
    int lb_checked, lb_broken; /* (tests) with no_prune: replays compared with
                               the bound that skips them (search.c), and
                               those that beat it                          */
} search_ctx;

/* The instance for `m` microbatches over the devices in c->order. */
void instance_build(const search_ctx *c, int m, plan_inst *I);

/* The work of one iteration at m microbatches, forward and backward over
 * every layer, in seconds on the profiled device (speed 1). */
double instance_work_s(const plan_request *rq, int m);

/* One optimiser step over a stage's parameters on a device of relative
 * speed spd, scaled like compute: the profile's per-layer update_s where it
 * was measured; a profile derived from the device's figures (which has
 * none) prices it as the step's memory traffic (plan_update_traffic with
 * I->state) over rq->ref_type's memory bandwidth. */
double instance_stage_update_s(const plan_request *rq, const plan_inst *I, const plan_stage *st, double spd);

/* A layout as plan stages; model and cluster are shared (shallow), so
 * free with instance_free_stages only. */
void instance_layout_plan(const search_ctx *c, const plan_inst *I, const plan_lattice *L,
                          const plan_layout *y, plan *pl);
void instance_free_stages(plan *pl);

/* Microbatch counts to try (the request's, or up to INSTANCE_MAX_MICRO
 * divisors of the batch spread geometrically); returns how many. */
int instance_micro_candidates(const plan_request *rq, int *out);

/* CL_EINPUT, naming the profile, the device type or the link at fault,
 * when the slowest candidate at some microbatch count (every layer on the
 * slowest device, every byte over one link) would take more than
 * PLAN_MAX_ITERATION_S per iteration, or its time is not a number; or
 * when the whole model on the fastest device would take less than
 * PLAN_MIN_ITERATION_S (but not 0). */
int instance_check_costs(const search_ctx *c, const int *micro, int n_micro, cl_err *e);

/* Device orders to try, each allocated into out[k]; returns how many. */
int instance_device_orders(const search_ctx *c, int **out);

typedef struct search_best {
    int have;
    plan pl;                /* stages owned, model/cluster shallow          */
    plan_pred pred;
    plan_timing tm;
    plan_eval ev;
    double exact_s, merge_s;
    const char *algo;
    int view_n;             /* devices offered to the search that found it */
    char why[320];          /* why the plan leaves devices idle ("": it does not) */
    /* the least bad infeasible layout, for the message */
    int have_bad;
    plan_eval bad_ev;
    plan bad_pl;
} search_best;

/* The cut lattice of a branching model is the same for every microbatch
 * count and device count: listed once, re-summed per instance. */
typedef struct dag_state {
    plan_lattice dag;
    int have, failed;
} dag_state;

/* search.c: tell the user (one line, kept once, PLAN_NOTES at most). */
void search_note(plan_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* search.c: CL_OK, or the failure when the command's wall-clock budget
 * (base/budget.h) is spent. */
int search_budget_out(cl_err *e);

/* search.c: rank layout y of instance I (cuts L) into *B, by the simulator
 * (a layout it cannot replay, or an asynchronous one whose replica counts
 * do not divide the microbatches, is left out with a note); `algo`,
 * exact_s and merge_s are what the result reports about where it came
 * from. */
void search_consider(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                     const plan_layout *y, const plan_eval *ev, const char *algo, double exact_s,
                     double merge_s);
/* search.c: a layout that does not fit, kept when it overflows its devices
 * by less than the least bad so far (for the message when nothing fits). */
void search_consider_bad(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                         const plan_layout *y);
/* search.c: pl (its stages now owned by B) becomes B's plan, with its
 * prediction, timing, evaluation and where it came from (algo, exact_s,
 * merge_s; found on the first view_n devices); B's plan before is freed.
 * The caller has decided it is better.  B's least bad layout stays. */
void search_take(search_best *B, const plan *pl, const plan_pred *pr, const plan_timing *tm,
                 const plan_eval *ev, const char *algo, double exact_s, double merge_s, int view_n);
/* search.c: pl (stages now owned by B) and ev become B's least bad layout,
 * freeing the one before. */
void search_take_bad(search_best *B, const plan *pl, const plan_eval *ev);

/* search.c: CL_EINPUT for a request plan_search cannot answer as asked. */
int search_check(const plan_request *rq, cl_err *e);
/* search.c: c->speed (allocated; the caller frees it), each device's
 * effective FLOP/s over the profiled device's; CL_EINPUT when a mixed
 * cluster's speeds cannot be scaled. */
int search_speeds(search_ctx *c, cl_err *e);
/* search.c: B's plan as the result (the plan owns copies of the model and
 * the cluster, B's stages move into it), with its notes. */
int search_result(const plan_request *rq, search_best *B, plan_result *res, cl_err *e);
/* search.c: a predicted candidate pl (stages owned) into *B when it beats
 * B's plan (counted as ranked), else freed. */
void search_keep(search_ctx *c, search_best *B, plan *pl, const plan_pred *pr, const plan_timing *tm,
                 const plan_eval *ev, const char *algo, double exact_s, double merge_s);
/* search_interleaved.c: the interleaved plans of c->view over c->order at
 * the microbatch counts micro[], ranked into *B (asked: the request named
 * the schedule, else auto); and the note that says how they were made. */
void search_interleaved(search_ctx *c, search_best *B, const int *micro, int n_micro, int asked);
void search_interleaved_note(const plan_request *rq, plan_result *res);
/* search_interleaved.c: the interleaved plan of the chunk cut (n + 1 layer indices of
 * the chain view L, n = p x I->chunks) on p blocks of r replicas, the
 * block of position q at positions q x r ..; pl's stages owned, ev its
 * evaluation (memory, feasibility, bottleneck). */
void search_interleaved_plan(search_ctx *c, const plan_inst *I, const plan_lattice *L, int p, int r,
                             const int *cut, plan *pl, plan_eval *ev);

/* count.c: the search at m microbatches over c->order, every schedule of
 * kinds, ranking every candidate into *B.  *hint carries the least-memory
 * bottleneck from one count to the next (0: none yet). */
int count_search(search_ctx *c, search_best *B, dag_state *lt, int m, const sched_kind *kinds, int n_kinds,
                 double *hint, cl_err *e);

/* Search the devices of c->view (every device order, microbatch count and
 * schedule), ranking every candidate into *B (search.c). */
int search_view(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                const sched_kind *kinds, int n_kinds, cl_err *e);

/* fewer.c: the searches on the first k < N devices (each as `cleave plan`
 * on those devices alone), the floor plan as a candidate, and the search
 * on all N devices followed by both. */
int search_fewer(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                 const sched_kind *kinds, int n_kinds, int *stopped, cl_err *e);
void search_consider_floor(search_ctx *c, search_best *B);
int search_floor_ok(const plan_request *rq);
int search_counts(search_ctx *c, search_best *B, const int *micro, int n_micro, const sched_kind *kinds,
                  int n_kinds, cl_err *e);

#endif
