/* fewer.c - the best plan on N devices may leave some idle: it is the
 * best of the searches on the first k <= N devices, each as on those
 * devices alone (docs/planner.md, "Fewer devices").  search.c holds the search
 * on one set of devices (search_view). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* A candidate built and simulated, in exact-search steps (a replay of a
 * few thousand ops against the cost of one transition; docs/planner.md,
 * "Measured", gives both). */
#define FEWER_CANDIDATE_STEPS ((int64_t)20000)

/* The work done so far, without the equal-replica searches of an
 * unrestricted request (search_view): the budget is what the search
 * on all devices took before they were added, and the searches on fewer
 * devices it pays for leave them out. */
static int64_t work_done(const search_ctx *c)
{
    return c->res->exact_steps - c->equal_steps - c->sched_prune_steps +
           FEWER_CANDIDATE_STEPS * (c->res->candidates - c->equal_cands);
}

/* Bk into B when strictly faster (on a tie the plan on more devices
 * stays); the least bad infeasible layout likewise, for the message. */
static void take_best(search_best *B, search_best *Bk)
{
    if (Bk->have && (!B->have || Bk->pred.iteration_s < B->pred.iteration_s))
        search_take(B, &Bk->pl, &Bk->pred, &Bk->tm, &Bk->ev, Bk->algo, Bk->exact_s, Bk->merge_s, Bk->view_n);
    else if (Bk->have)
        instance_free_stages(&Bk->pl);
    if (Bk->have_bad && !B->have_bad) {
        search_take_bad(B, &Bk->bad_pl, &Bk->bad_ev);
    } else if (Bk->have_bad) {
        instance_free_stages(&Bk->bad_pl);
    }
}

/* The plan for N devices may leave some idle, so it is the best of the
 * search on all N and the plan for N - 1 (docs/planner.md, "Fewer
 * devices"): plan(N) = best of search(k) over k <= N, each search(k) the
 * very search `cleave plan` makes on the first k devices as their own
 * cluster (a fresh best: nothing found on more devices prunes or steers
 * it), so plan(N + 1) is never slower than plan(N) for any input.  The one
 * prune is exact: any schedule's iteration holds each device's share of
 * the work at its speed (the sum of the work is at most the iteration
 * times the sum of the speeds), so once the least work over the
 * microbatch counts, over the first k devices' speeds, is no faster than
 * the best plan, no search on k or fewer devices can beat it strictly.
 * Beyond FEWER_EXACT_DEVICES the searches get the work of the search on
 * all N and take whole nodes only: an approximation; when that left out
 * a count above the work bound, *stopped is the fewest devices searched
 * (N: none), else 0. */
int search_fewer(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                 const sched_kind *kinds, int n_kinds, int *stopped, cl_err *e)
{
    const plan_request *rq = c->rq;
    const cluster *cl = rq->cluster;
    int N = cl->n_devices, rc = CL_OK, exact = N <= FEWER_EXACT_DEVICES;
    int64_t start = work_done(c), last = 0;
    *stopped = 0;
    double spd = 0, wmin = HUGE_VAL;
    for (int d = 0; d < N; d++) spd += c->speed[d];
    for (int mi = 0; mi < n_micro; mi++) wmin = fmin(wmin, instance_work_s(rq, micro[mi]));
    cluster view = *cl;
    int last_k = N, left_out = 0;
    /* the floor is the plan for its device count: the counts above it */
    int lo = rq->floor ? rq->floor->plan.cluster.n_devices + 1 : 1;
    for (int k = N - 1; k >= lo && k >= rq->stages && !rc; k--) {
        spd -= c->speed[k];
        if (B->have && !c->no_prune && wmin / spd * (1 - PLAN_BOUND_SLACK) >= B->pred.iteration_s) break;
        if (!exact) {
            /* whole nodes only (a budget of about one more search
             * reaches further down a node at a time, and a count ending
             * inside a node still costs partition and merge a state per
             * position), and no search the last one says would pass the
             * budget */
            if (cl->n_nodes > 1 && cl->devices[k - 1].node == cl->devices[k].node) {
                left_out = 1;
                continue;
            }
            if (work_done(c) - start + last > start) {
                left_out = 1;
                break;
            }
        }
        /* the first k devices as their own cluster (devices are numbered
         * node by node: the nodes they use are a prefix) */
        view.n_devices = k;
        view.n_nodes = 0;
        for (int d = 0; d < k; d++) view.n_nodes = cl->devices[d].node >= view.n_nodes ? cl->devices[d].node + 1 : view.n_nodes;
        c->view = &view;
        c->n_dev = k;
        int64_t w0 = work_done(c);
        search_best Bk = {0};
        rc = search_view(c, &Bk, lt, micro, n_micro, kinds, n_kinds + (k == 1 && rq->schedule < 0), e);
        take_best(B, &Bk);
        last = work_done(c) - w0;
        last_k = k;
    }
    *stopped = left_out ? last_k : 0;
    c->view = cl;
    c->n_dev = N;
    return rc;
}

/* The floor plan (plan_request.floor) as a candidate on this cluster: the
 * same stages, predicted again here; it wins only when strictly faster. */
void search_consider_floor(search_ctx *c, search_best *B)
{
    const plan_result *f = c->rq->floor;
    plan pl = f->plan;
    pl.model = *c->rq->model;
    pl.cluster = *c->rq->cluster;
    pl.stages = cl_calloc((size_t)pl.n_stages, sizeof *pl.stages);
    for (int s = 0; s < pl.n_stages; s++) {
        plan_stage *st = &pl.stages[s];
        *st = f->plan.stages[s];
        st->layers = cl_malloc((size_t)st->n_layers * sizeof(int));
        memcpy(st->layers, f->plan.stages[s].layers, (size_t)st->n_layers * sizeof(int));
        st->devices = cl_malloc((size_t)st->n_replicas * sizeof(int));
        memcpy(st->devices, f->plan.stages[s].devices, (size_t)st->n_replicas * sizeof(int));
    }
    plan_pred pr;
    plan_timing tm;
    cl_err e = {0};
    plan_predict_opts po = {.comm = c->rq->comm};
    /* predicted as its search predicted it: by the simulator */
    if (plan_predict(&pl, &po, &pr, &tm, &e) != CL_OK || plan_predict_sim(&pl, &pr) != CL_OK ||
        (B->have && !(pr.iteration_s < B->pred.iteration_s))) {
        instance_free_stages(&pl);
        return;
    }
    pl.pred = pr;
    /* of the evaluation, only what the result reports (search.c) */
    plan_eval ev = {.bottleneck_s = f->bottleneck_s, .bottleneck_stage = f->bottleneck_stage,
                    .bottleneck_is_boundary = f->bottleneck_is_boundary};
    search_take(B, &pl, &pr, &tm, &ev, f->algo, f->exact_s, f->merge_s, f->plan.cluster.n_devices);
}

/* Is the floor plan a plan for the first devices of this cluster, for the
 * same question? */
int search_floor_ok(const plan_request *rq)
{
    const plan *f = &rq->floor->plan;
    int ok = f->cluster.n_devices < rq->cluster->n_devices && f->batch == rq->batch &&
             f->model.n_layers == rq->model->n_layers && (rq->schedule < 0 || (int)f->schedule == rq->schedule) &&
             (rq->microbatches == 0 || f->n_micro == rq->microbatches) &&
             (rq->stages == 0 || f->n_stages == rq->stages) && f->framework == rq->framework &&
             f->grad_reduce == rq->grad_reduce &&
             plan_device_count(f) > 0;
    for (int s = 0; s < f->n_stages && ok; s++)
        for (int r = 0; r < f->stages[s].n_replicas; r++) ok &= f->stages[s].devices[r] < f->cluster.n_devices;
    return ok;
}

/* The search on all N devices of c (c->view), then on fewer
 * (search_fewer), then the floor plan; B->why says why the plan leaves
 * devices idle, if it does. */
int search_counts(search_ctx *c, search_best *B, const int *micro, int n_micro, const sched_kind *kinds,
                  int n_kinds, cl_err *e)
{
    const plan_request *rq = c->rq;
    const cluster *cl = rq->cluster;
    plan_result *res = c->res;
    int N = cl->n_devices;
    dag_state lt = {0};
    c->view = cl;
    c->n_dev = N;
    int rc = search_view(c, B, &lt, micro, n_micro, kinds, n_kinds + (N == 1 && rq->schedule < 0), e);
    plan_pred full_pred = B->pred;
    int full_have = B->have, full_used = B->have ? plan_device_count(&B->pl) : 0;
    int full_sched = B->pl.schedule, full_stages = B->pl.n_stages, full_notes = res->n_notes;
    int cuts_dag = res->cuts_dag, lattice_sets = res->lattice_sets;
    int stopped = 0;
    rc = rc ? rc : search_fewer(c, B, &lt, micro, n_micro, kinds, n_kinds, &stopped, e);
    if (!rc && rq->floor) search_consider_floor(c, B);
    if (lt.have) plan_lattice_free(&lt.dag);
    if (!(B->have && B->view_n < N)) {
        /* the plan is the one on all N devices: what the searches on fewer
         * devices noted does not concern it, except warnings */
        int k = full_notes;
        for (int i = full_notes; i < res->n_notes; i++)
            if (strncmp(res->notes[i], "WARNING", 7) == 0) memmove(res->notes[k++], res->notes[i], sizeof res->notes[0]);
        res->n_notes = k;
        res->cuts_dag = cuts_dag;
        res->lattice_sets = lattice_sets;
    }
    if (stopped)
        search_note(res, "on more than %d devices the searches on fewer devices are budgeted (%swithin the work of the search on all; fewest searched: %d of the %d): a plan on fewer devices might predict a faster iteration (on up to %d devices, and along a sweep, never)",
                    FEWER_EXACT_DEVICES, cl->n_nodes > 1 ? "whole nodes only, " : "", stopped, N, FEWER_EXACT_DEVICES);
    int used = B->have ? plan_device_count(&B->pl) : N;
    B->why[0] = '\0';
    if (used < N) {
        if (B->view_n < N && full_have)
            snprintf(B->why, sizeof B->why,
                     "the best plan found on all %d devices (%s, %d stage%s on %d devices) predicts %.6f s per iteration, this one %.6f s",
                     N, sched_kind_name((sched_kind)full_sched), full_stages, full_stages == 1 ? "" : "s", full_used,
                     full_pred.iteration_s, B->pred.iteration_s);
        else if (B->view_n < N)
            snprintf(B->why, sizeof B->why, "the search on all %d devices found no plan that fits, the one on the first %d did",
                     N, B->view_n);
        else if (B->pl.schedule == SCHED_INTERLEAVED)
            snprintf(B->why, sizeof B->why, "no chunk split over more devices predicts a faster iteration");
        else
            snprintf(B->why, sizeof B->why,
                     "more devices would not shorten its slowest stage (%.6f s per iteration) or cut its communication",
                     B->ev.bottleneck_s);
    }
    return rc;
}
