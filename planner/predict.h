/* predict.h - predicted iteration time of a plan: the one function every
 * ranking goes through (docs/planner.md, "Predictions").
 *
 * plan_predict is a closed form per schedule; plan_predict_sim replaces its
 * figures with the discrete-event simulator's when a plan is cheap to replay.
 */
#ifndef CL_PLAN_PREDICT_H
#define CL_PLAN_PREDICT_H

#include "core/plan.h"

typedef struct plan_predict_opts {
    int comm;               /* 1: count communication; 0: leave it out      */
} plan_predict_opts;

/* Per-iteration figures the predictions are built from (also printed). */
typedef struct plan_timing {
    double period_s;        /* steady-state time per microbatch (slowest stage
                               or boundary), per replica-round             */
    double fill_s;          /* one microbatch through every stage and boundary */
    double allreduce_s;     /* the slowest stage's gradient all-reduce      */
    double sequential_s;    /* the same work on the fastest single device   */
} plan_timing;

/* Fill out (and tm when not NULL) for plan p.  Closed forms, m microbatches,
 * p pipeline stages (docs/planner.md):
 *   gpipe, 1f1b     (m - 1) x period + fill + all-reduce
 *   zb-h1           the 1f1b time minus 2 (p - 1) x the smallest W
 *   interleaved     m x period + (fill - period) / v + all-reduce
 *   pipedream, fbp  m x period, each stage's round all-reduces in its
 *                   devices' busy time (steady state, no flush)
 *   sequential      the stages' work back to back
 * A deepspeed plan under 1f1b (sched_deepspeed: blocking transfers) counts
 * each stage's sends and receives, two per microbatch at each of its
 * boundaries, in its busy time.
 * Fails (CL_EINPUT) only for a plan that plan_validate would reject. */
int plan_predict(const plan *p, const plan_predict_opts *o, plan_pred *out, plan_timing *tm,
                 cl_err *e);

/* Refine a closed-form prediction *pr of p with the discrete-event simulator
 * when p is cheap to replay (docs/planner.md, "Ranking by the simulator");
 * *pr is left as it is for larger plans or an exhausted event budget.
 * CL_EINPUT when the simulator refuses the plan. */
int plan_predict_sim(const plan *p, plan_pred *pr);
/* Whether plan_predict_sim replays a plan of n_stages stages (chunks per
 * device), m microbatches and r replicas for every stage, rather than
 * keeping the closed form.  (A replay that exhausts its event budget keeps
 * the closed form too; at a few events an op, the op limit makes that
 * rare.) */
int plan_predict_replays(sched_kind kind, int n_stages, int chunks, int m, int r);

/* The same under a budget of its own: at most max_ops ops (estimated before
 * building anything) and max_events events.  pr->simulated says whether the
 * simulator's figures replaced the closed form (1) or the plan was over the
 * budget and *pr kept it (unchanged). */
typedef struct plan_sim_budget {
    double max_ops;
    unsigned long long max_events;
} plan_sim_budget;
int plan_predict_sim_in(const plan *p, plan_pred *pr, const plan_sim_budget *b);

#endif
