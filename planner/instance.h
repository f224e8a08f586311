/* instance.h - what plan_search iterates over and what it returns
 * (internal to planner/): one plan_inst per microbatch count and device
 * order, built from the request, and a found layout turned into plan
 * stages.  search.c holds the search itself. */
#ifndef CL_PLANNER_INSTANCE_H
#define CL_PLANNER_INSTANCE_H

#include "cost.h"
#include "search.h"

/* Most microbatch counts the automatic choice tries. */
#define SEARCH_MAX_MICRO 5

/* The search's view of a request. */
typedef struct search_ctx {
    const plan_request *rq;
    plan_result *res;
    int n_dev;
    double *speed;          /* per cluster device */
    int *order;             /* current device order (positions -> devices) */
} search_ctx;

/* The instance for `m` microbatches over the devices in c->order. */
void search_inst_build(const search_ctx *c, int m, plan_inst *I);

/* One optimiser step over a stage's parameters on a device of relative
 * speed spd (the profile's per-layer update_s, scaled like compute). */
double search_stage_update_s(const prof *pf, const plan_stage *st, double spd);

/* A layout as plan stages; model and cluster are shared (shallow), so
 * free with search_free_stages only. */
void search_layout_plan(const search_ctx *c, const plan_inst *I, const plan_lattice *L,
                        const plan_layout *y, plan *pl);
void search_free_stages(plan *pl);

/* Deep copies of the request's model and cluster into the final plan. */
int search_own_copies(plan *pl, const plan_request *rq, cl_err *e);

/* Microbatch counts to try (the request's, or up to SEARCH_MAX_MICRO
 * divisors of the batch spread geometrically); returns how many. */
int search_micro_candidates(const plan_request *rq, int *out);

/* CL_EINPUT, naming the profile, the device type or the link at fault,
 * when the slowest candidate at some microbatch count (every layer on the
 * slowest device, every byte over one link) would take more than
 * PLAN_MAX_ITERATION_S per iteration, or its time is not a number; or
 * when the whole model on the fastest device would take less than
 * PLAN_MIN_ITERATION_S (but not 0). */
int search_check_costs(const search_ctx *c, const int *micro, int n_micro, cl_err *e);

/* Device orders to try, each allocated into out[k]; returns how many. */
int search_device_orders(const search_ctx *c, int **out);

#endif
