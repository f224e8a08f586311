/* fewer.c - the best plan on N devices may leave some idle: searches on
 * the first k < N devices, and what carries over to them from the search
 * on more (docs/planner.md, "Fewer devices").  search.c holds the search
 * on one set of devices (search_view). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* On up to this many devices the searches on fewer cover every count;
 * beyond, they get the work of the search on all (search_fewer). */
#define FEWER_ALL_DEVICES 16
/* A candidate built and simulated, in exact-search steps (a replay of a
 * few thousand ops against transitions at 15 to 25 ns each). */
#define FEWER_CANDIDATE_STEPS ((int64_t)20000)

static int64_t work_done(const plan_result *res)
{
    return res->exact_steps + FEWER_CANDIDATE_STEPS * res->candidates;
}

fewer_memo *search_memo_new(const search_ctx *c, int mixed)
{
    fewer_memo *fm = cl_malloc(sizeof *fm);
    const cluster *cl = c->rq->cluster;
    int N = cl->n_devices;
    /* layouts carry over to fewer devices when all devices are alike;
     * shifted by whole nodes when the nodes are equal */
    fm->on = !mixed && c->rq->schedule != SCHED_INTERLEAVED;
    fm->K = cl->n_nodes <= 1 ? 0 : N % cl->n_nodes == 0 ? N / cl->n_nodes : -1;
    for (int d = 0; d < N && fm->K > 0; d++)
        if (cl->devices[d].node != d / fm->K) fm->K = -1;
    for (int i = 0; i <= SEARCH_MAX_MICRO; i++) {
        fm->dead[i] = 0;
        for (int k = 0; k < SCHED_COUNT; k++) {
            fm->need[i][k] = INT_MAX;
            fm->used[i][k] = fm->devfix[i][k] = 0;
        }
    }
    return fm;
}

int search_layout_need(const plan_inst *I, const plan_layout *y, int K)
{
    int hi = -1, used = 0, nodes = 0, least = INT_MAX, n_nodes = 0;
    for (int q = 0; q < I->n_dev; q++) n_nodes = I->node[q] >= n_nodes ? I->node[q] + 1 : n_nodes;
    int *cnt = cl_calloc((size_t)n_nodes, sizeof *cnt);
    for (int s = 0; s < y->p; s++)
        for (int q = y->pos[s]; q < y->pos[s] + y->r[s]; q++) {
            used++;
            hi = I->dev[q] > hi ? I->dev[q] : hi;
            nodes += cnt[I->node[q]]++ == 0;
        }
    for (int nd = 0; nd < n_nodes; nd++)
        if (cnt[nd] && cnt[nd] < least) least = cnt[nd];
    free(cnt);
    /* equal nodes: nodes are interchangeable and so are the devices in a
     * node, so the copy fills whole nodes and ends in the least used one */
    return K == 0 ? used : K > 0 ? (nodes - 1) * K + least : hi + 1;
}

/* Can microbatch count mi be left out on these N devices altogether: every
 * schedule's layout has a copy here, and zb-h1 would be held to the same
 * device count (the first fitting layout's before it, skipping those the
 * critical-path bound skips)? */
int search_memo_covers(const fewer_memo *fm, int mi, int N, const sched_kind *kinds, int n_kinds,
                       double crit, const search_best *B, const plan_request *rq)
{
    int u = 0;
    for (int ki = 0; ki < n_kinds; ki++) {
        if (B->have && !sched_is_async(kinds[ki]) && crit > B->pred.iteration_s && !rq->no_prune)
            continue; /* as the critical-path bound leaves it out */
        if (fm->need[mi][ki] > N || (fm->devfix[mi][ki] && fm->devfix[mi][ki] != u)) return 0;
        if (!u && fm->need[mi][ki] > 0) u = fm->used[mi][ki];
    }
    return 1;
}

/* The plan for N devices may leave some idle, so the best one is the best
 * over the plans for the first k <= N devices (docs/planner.md, "Fewer
 * devices"): after the search on all N, search the first N - 1, N - 2, ...
 * with the best plan so far carried along (its bounds prune each search),
 * a plan on fewer devices winning only when strictly faster.  Any
 * schedule's iteration holds each device's share of the work at its speed,
 * so once the least work over the microbatch counts, over the sum of the
 * speeds of the first k devices, is slower than the best plan, no k or
 * fewer devices can beat it and the search stops. */
int search_fewer(search_ctx *c, search_best *B, dag_state *lt, fewer_memo *fm, const int *micro, int n_micro,
                 const sched_kind *kinds, int n_kinds, int *stopped, cl_err *e)
{
    const plan_request *rq = c->rq;
    int N = rq->cluster->n_devices, rc = CL_OK;
    /* beyond FEWER_ALL_DEVICES, as much work as the search on all N
     * devices took, so the planning time at most about doubles */
    int64_t start = work_done(c->res), budget = N <= FEWER_ALL_DEVICES ? INT64_MAX : start, last = 0;
    *stopped = 0;
    double spd = 0, wmin = HUGE_VAL;
    for (int d = 0; d < N; d++) spd += c->speed[d];
    for (int mi = 0; mi < n_micro; mi++) wmin = fmin(wmin, search_work_s(rq, micro[mi]));
    cluster view = *rq->cluster;
    int last_k = N;
    int lo = rq->floor ? rq->floor->plan.cluster.n_devices + 1 : 1;
    for (int k = N - 1; k >= lo && !rc && B->have && k >= rq->stages; k--) {
        spd -= c->speed[k];
        if (wmin / spd * (1 - 1e-9) > B->pred.iteration_s) break;
        /* beyond FEWER_ALL_DEVICES, on several nodes: whole nodes only (a
         * count ending inside a node makes the nodes unequal, and the exact
         * search then prices every position on its own: far dearer) */
        if (N > FEWER_ALL_DEVICES && rq->cluster->devices[k - 1].node == rq->cluster->devices[k].node &&
            rq->cluster->n_nodes > 1)
            continue;
        /* stop before a search the last one says would pass the budget */
        if (work_done(c->res) - start + last > budget) {
            *stopped = last_k;
            break;
        }
        view.n_devices = k;
        c->view = &view;
        c->n_dev = k;
        int64_t w0 = work_done(c->res);
        rc = search_view(c, B, lt, fm, micro, n_micro, kinds, n_kinds + (k == 1 && rq->schedule < 0), e);
        last = work_done(c->res) - w0;
        last_k = k;
    }
    c->view = rq->cluster;
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
    /* predicted as its search predicted it: interleaved plans by the
     * closed form (search_interleaved), the others by the simulator */
    if (plan_predict(&pl, &po, &pr, &tm, &e) != CL_OK ||
        (pl.schedule != SCHED_INTERLEAVED && plan_predict_sim(&pl, &pr) != CL_OK) ||
        (B->have && !(pr.iteration_s < B->pred.iteration_s))) {
        search_free_stages(&pl);
        return;
    }
    pl.pred = pr;
    if (B->have) search_free_stages(&B->pl);
    B->pl = pl;
    B->pred = pr;
    B->tm = tm;
    memset(&B->ev, 0, sizeof B->ev);
    B->ev.bottleneck_s = f->bottleneck_s;
    B->ev.bottleneck_stage = f->bottleneck_stage;
    B->ev.bottleneck_is_boundary = f->bottleneck_is_boundary;
    B->algo = f->algo;
    B->exact_s = f->exact_s;
    B->merge_s = f->merge_s;
    B->view_n = f->plan.cluster.n_devices;
    B->have = 1;
}

/* Is the floor plan a plan for the first devices of this cluster, for the
 * same question? */
int search_floor_ok(const plan_request *rq)
{
    const plan *f = &rq->floor->plan;
    int ok = f->cluster.n_devices < rq->cluster->n_devices && f->batch == rq->batch &&
             f->model.n_layers == rq->model->n_layers && (rq->schedule < 0 || (int)f->schedule == rq->schedule) &&
             (rq->microbatches == 0 || f->n_micro == rq->microbatches) &&
             (rq->stages == 0 || f->n_stages == rq->stages) && plan_device_count(f) > 0;
    for (int s = 0; s < f->n_stages && ok; s++)
        for (int r = 0; r < f->stages[s].n_replicas; r++) ok &= f->stages[s].devices[r] < f->cluster.n_devices;
    return ok;
}

/* The search on all N devices of c (c->view), then on fewer
 * (search_fewer), then the floor plan; B->why says why the plan leaves
 * devices idle, if it does. */
int search_counts(search_ctx *c, search_best *B, int mixed, const int *micro, int n_micro, const sched_kind *kinds,
                  int n_kinds, cl_err *e)
{
    const plan_request *rq = c->rq;
    const cluster *cl = rq->cluster;
    plan_result *res = c->res;
    int N = cl->n_devices;
    dag_state lt = {0};
    fewer_memo *fm = search_memo_new(c, mixed);
    c->view = cl;
    c->n_dev = N;
    int rc = search_view(c, B, &lt, fm, micro, n_micro, kinds, n_kinds + (N == 1 && rq->schedule < 0), e);
    plan_pred full_pred = B->pred;
    int full_have = B->have, full_used = B->have ? plan_device_count(&B->pl) : 0;
    int full_sched = B->pl.schedule, full_stages = B->pl.n_stages, full_notes = res->n_notes;
    int cuts_dag = res->cuts_dag, lattice_sets = res->lattice_sets;
    B->strict = 1;
    int stopped = 0;
    rc = rc ? rc : search_fewer(c, B, &lt, fm, micro, n_micro, kinds, n_kinds, &stopped, e);
    free(fm);
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
        search_note(res, "the searches on fewer devices stopped at %d of the %d (work budget): a plan on fewer devices might predict a faster iteration",
                    stopped, N);
    int used = B->have ? plan_device_count(&B->pl) : N;
    B->why[0] = '\0';
    if (used < N) {
        if (B->view_n < N && full_have)
            snprintf(B->why, sizeof B->why,
                     "the best plan found on all %d devices (%s, %d stage%s on %d devices) predicts %.6f s per iteration, this one %.6f s",
                     N, sched_kind_name((sched_kind)full_sched), full_stages, full_stages == 1 ? "" : "s", full_used,
                     full_pred.iteration_s, B->pred.iteration_s);
        else if (B->pl.schedule == SCHED_INTERLEAVED)
            snprintf(B->why, sizeof B->why, "no chunk split over more devices predicts a faster iteration");
        else
            snprintf(B->why, sizeof B->why,
                     "more devices would not shorten its slowest stage (%.6f s per iteration) or cut its communication",
                     B->ev.bottleneck_s);
    }
    return rc;
}
