/* search.c - candidates, their partitions, their ranking (see search.h).
 *
 * plan_search checks the request (search_check), works out device speeds
 * and the schedules to try, and has search_counts (fewer.c) run
 * search_view on all devices and on fewer.  search_view walks the device
 * orders and microbatch counts, largest count first, and hands each to
 * count_search (count.c), the named steps of one count; interleaved plans
 * come from chunk splits instead (search_interleaved.c).  Every candidate is
 * ranked here (search_consider); the best becomes the result
 * (search_result). */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "base/measure.h"
#include "core/schedule.h"
#include "cost.h"
#include "export.h"
#include "instance.h"
#include "search.h"
#include "search_test.h"

static const char *const algo_names[] = {"auto", "exact", "merge"};
_Static_assert(sizeof algo_names / sizeof algo_names[0] == PLAN_ALGO_COUNT, "algo names");

int plan_algo_from_name(const char *name)
{
    for (int a = 0; a < PLAN_ALGO_COUNT; a++)
        if (name && strcmp(name, algo_names[a]) == 0) return a;
    return -1;
}

void plan_result_free(plan_result *res)
{
    plan_free(&res->plan);
    memset(res, 0, sizeof *res);
}

void search_note(plan_result *res, const char *fmt, ...)
{
    char buf[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = 0; i < res->n_notes; i++)
        if (strcmp(res->notes[i], buf) == 0) return;
    if (res->n_notes < PLAN_NOTES) snprintf(res->notes[res->n_notes++], sizeof res->notes[0], "%s", buf);
}

/* The command's wall-clock budget (budget.h): polled before each candidate
 * and after each search that may have stopped for it (an exact search or a
 * cut listing over it returns "over budget", which must not turn into a
 * fallback). */
int search_budget_out(cl_err *e)
{
    return cl_budget_over() ? cl_budget_fail(e, "searching plans",
                                             "narrow the search: one --schedule, one --microbatches count, or --algo merge in cleave plan")
                            : CL_OK;
}

/* ------------------------------------------------------------ ranking -- */

static int better(const search_best *B, const plan_pred *a, const plan_eval *ea)
{
    if (!B->have) return 1;
    const plan_pred *b = &B->pred;
    if (a->iteration_s != b->iteration_s) return a->iteration_s < b->iteration_s;
    return plan_eval_cmp(ea, &B->ev) < 0;
}

void search_take(search_best *B, const plan *pl, const plan_pred *pr, const plan_timing *tm,
                 const plan_eval *ev, const char *algo, double exact_s, double merge_s, int view_n)
{
    if (B->have) instance_free_stages(&B->pl);
    B->pl = *pl;
    B->pred = *pr;
    B->tm = *tm;
    B->ev = *ev;
    B->algo = algo;
    B->exact_s = exact_s;
    B->merge_s = merge_s;
    B->view_n = view_n;
    B->have = 1;
}

void search_take_bad(search_best *B, const plan *pl, const plan_eval *ev)
{
    if (B->have_bad) instance_free_stages(&B->bad_pl);
    B->bad_pl = *pl;
    B->bad_ev = *ev;
    B->have_bad = 1;
}

void search_keep(search_ctx *c, search_best *B, plan *pl, const plan_pred *pr, const plan_timing *tm,
                 const plan_eval *ev, const char *algo, double exact_s, double merge_s)
{
    pl->pred = *pr;
    c->res->candidates++;
    if (better(B, pr, ev))
        search_take(B, pl, pr, tm, ev, algo, exact_s, merge_s, c->n_dev);
    else
        instance_free_stages(pl);
}

/* A bound no replay of plan pl beats (docs/planner.md,
 * "Skipped candidates"): every replica of stage s runs at least floor(m /
 * r_s) microbatches of its work at the plan's times (the simulator's); under
 * a flushing schedule it then waits for its stage's all-reduce (at best on
 * the faster link) and runs its update.  Under an asynchronous one (fbp,
 * pipedream) it all-reduces once per round of its replicas, and its update
 * after each backward waits for that round's ring, which starts when its
 * backward ends, on a device that runs its ops in order: every
 * microbatch's work is followed by at least one ring (m / r_s of them: r_s
 * divides m).  A flushing stage's first op is a forward, of a microbatch
 * that went forward through every stage before it first (head); where the
 * backward is fused (GPipe, 1F1B) its last op is a backward whose gradient
 * then goes back through every stage before it (tail), beside its own
 * all-reduce and update.  Transfers take no time in the bound. */
static double least_iteration(const plan_inst *I, const plan *pl)
{
    int async = sched_is_async(I->sched), flushing = pl->chunks <= 1 && !async; /* (one chunk a device) */
    int fused = flushing && (I->sched == SCHED_GPIPE || I->sched == SCHED_1F1B);
    double lb = 0, head = 0, tail = 0;
    for (int s = 0; s < pl->n_stages; s++) {
        const plan_stage *st = &pl->stages[s];
        int r = st->n_replicas;
        double w = st->fwd_s + st->bwd_in_s + st->bwd_w_s;
        double ar = plan_allreduce_least(I, st->param_bytes, r);
        double t = async ? (I->m / r) * (w + ar)
                         : (flushing ? head : 0) + (I->m / r) * w + fmax(ar + st->update_s / r, fused ? tail : 0);
        lb = fmax(lb, t);
        head += st->fwd_s;
        tail += st->bwd_in_s + st->bwd_w_s;
    }
    return lb * (1 - PLAN_BOUND_SLACK);
}

/* Does plan pl lose to the best plan by that bound, so that it need not be
 * simulated? */
static int cannot_win(const search_ctx *c, const search_best *B, const plan_inst *I, const plan *pl)
{
    if (!B->have || c->no_prune) return 0;
    return least_iteration(I, pl) > B->pred.iteration_s;
}

void search_consider(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                     const plan_layout *y, const plan_eval *ev, const char *algo, double exact_s,
                     double merge_s)
{
    plan pl;
    instance_layout_plan(c, I, L, y, &pl);
    /* Asynchronous schedules all-reduce a replicated stage once per round of
     * its r replicas (docs/simulator.md), so the simulator and the executor
     * need r to divide the microbatch count; such a layout is not a plan. */
    if (sched_is_async(pl.schedule))
        for (int s = 0; s < pl.n_stages; s++)
            if (pl.n_micro % pl.stages[s].n_replicas != 0) {
                /* no count in the note: it would be a candidate's, which
                 * the chosen plan need not share */
                search_note(c->res, "%s: left out layouts whose replica counts do not divide their microbatch count (an asynchronous stage all-reduces once per round of its replicas)",
                            sched_kind_name(pl.schedule));
                instance_free_stages(&pl);
                return;
            }
    if (cannot_win(c, B, I, &pl)) {
        c->res->candidates++; /* counted as ranked: the budget of fewer.c stays as it was */
        instance_free_stages(&pl);
        return;
    }
    plan_pred pr;
    plan_timing tm;
    cl_err e = {0};
    plan_predict_opts po = {.comm = c->rq->comm};
    int rc = plan_predict(&pl, &po, &pr, &tm, &e);
    assert(rc == CL_OK); /* layouts are valid plans by construction */
    (void)rc;
    /* an fbp plan and the pipedream plan of the same stages replay alike
     * (predict_twin.h): the second takes the first's replay */
    plan_pred closed = pr;
    if (c->twins && pred_twin_find(c->twins, &pl, &closed, &pr)) {
        c->twin_hits++;
    } else {
        if (plan_predict_sim(&pl, &pr) != CL_OK) {
            search_note(c->res, "%s: left out layouts the simulator cannot replay", sched_kind_name(pl.schedule));
            instance_free_stages(&pl);
            return;
        }
        if (c->twins && sched_is_async(pl.schedule)) pred_twin_keep(c->twins, &pl, &closed, &pr);
    }
    if (c->no_prune && pr.simulated) { /* (tests: the bound against the replay) */
        c->lb_checked++;
        c->lb_broken += least_iteration(I, &pl) > pr.iteration_s;
    }
    search_keep(c, B, &pl, &pr, &tm, ev, algo, exact_s, merge_s);
}

void search_consider_bad(search_ctx *c, search_best *B, const plan_inst *I, const plan_lattice *L,
                         const plan_layout *y)
{
    plan_eval ev;
    plan_layout_eval(I, L, y, &ev);
    if (!ev.valid) return;
    double over = ev.worst_need_bytes - ev.worst_cap_bytes;
    if (B->have_bad && over >= B->bad_ev.worst_need_bytes - B->bad_ev.worst_cap_bytes) return;
    plan pl;
    instance_layout_plan(c, I, L, y, &pl);
    search_take_bad(B, &pl, &ev);
}

/* ------------------------------------------------------------- search -- */

/* The searches of one replica count r for every stage, dividing the
 * microbatches (each data-parallel replica runs m / r): every r at every
 * count, largest count first, over c->order.  What a --for search runs,
 * and what the unrestricted search adds (search_view). */
static int search_equal_reps(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                             const sched_kind *kinds, int n_kinds, cl_err *e)
{
    const plan_request *rq = c->rq;
    int rc = CL_OK;
    double hint = 0;
    for (int mi = n_micro - 1; mi >= 0 && !rc; mi--) {
        int m = micro[mi], rmax = rq->replication ? (m < c->n_dev ? m : c->n_dev) : 1;
        for (int r = rmax; r >= 1 && !rc; r--) {
            if (m % r) continue;
            c->rep = r;
            if (!(rc = search_budget_out(e))) rc = count_search(c, B, lt, m, kinds, n_kinds, &hint, e);
        }
        c->rep = 0;
    }
    return rc;
}

/* Search the devices of c->view (every device order, microbatch count and
 * schedule), ranking every candidate into *B. */
int search_view(search_ctx *c, search_best *B, dag_state *lt, const int *micro, int n_micro,
                const sched_kind *kinds, int n_kinds, cl_err *e)
{
    const plan_request *rq = c->rq;
    int *orders[3];
    int n_orders = instance_device_orders(c, orders);
    int rc = CL_OK;
    /* The equal-replica searches of an unrestricted request take the
     * schedules in torch's order (1f1b, gpipe, zb-h1) before the others,
     * so zb-h1 is searched on the device count a torch search gives it
     * (count_schedule); Megatron's head rule applies to 1f1b alone. */
    sched_kind equal_kinds[SCHED_COUNT + 1], head_kinds[1];
    int n_equal = 0, n_head = 0;
    static const sched_kind torch_first[] = {SCHED_1F1B, SCHED_GPIPE, SCHED_ZBH1};
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n_kinds; k++) {
            int first = 0;
            for (int j = 0; j < 3; j++) first |= kinds[k] == torch_first[j];
            if (first == (pass == 0)) equal_kinds[n_equal++] = kinds[k];
        }
    for (int k = 0; k < n_kinds; k++)
        if (kinds[k] == SCHED_1F1B) head_kinds[n_head++] = SCHED_1F1B;
    /* not in the budgeted searches on fewer devices (fewer.c): an
     * approximation already, they would only take longer */
    int N = rq->cluster->n_devices, equal_here = c->n_dev == N || N <= FEWER_EXACT_DEVICES;
    for (int oi = 0; oi < n_orders && !rc && rq->schedule != SCHED_INTERLEAVED; oi++) {
        c->order = orders[oi];
        if (rq->framework != PLAN_FOR_ANY) {
            rc = search_equal_reps(c, B, lt, micro, n_micro, kinds, n_kinds, e);
            continue;
        }
        /* largest count first: it usually wins, and bounds the rest */
        double hint = 0; /* the last least-memory bottleneck: a first guess for the next count */
        for (int mi = n_micro - 1; mi >= 0 && !rc; mi--)
            if (!(rc = search_budget_out(e))) rc = count_search(c, B, lt, micro[mi], kinds, n_kinds, &hint, e);
        /* then every layout the --for searches rank (docs/planner.md,
         * "Equal replica counts"): the least bottleneck per count leaves
         * out the pipeline's fill and drain, so one replica count for all
         * stages can simulate faster */
        int64_t steps0 = c->res->exact_steps;
        int cands0 = c->res->candidates;
        if (!rc && equal_here) rc = search_equal_reps(c, B, lt, micro, n_micro, equal_kinds, n_equal, e);
        if (!rc && equal_here && c->cut_head < c->cut_max && n_head) {
            /* Megatron keeps two or more head layers on the last stage:
             * its searches (1f1b) see fewer cuts */
            int keep = c->cut_max;
            c->cut_max = c->cut_head;
            rc = search_equal_reps(c, B, lt, micro, n_micro, head_kinds, n_head, e);
            c->cut_max = keep;
        }
        c->equal_steps += c->res->exact_steps - steps0;
        c->equal_cands += c->res->candidates - cands0;
    }
    /* Interleaved chunk splits: when asked for (the loop above then ran
     * nothing), and in auto where the framework runs them (Megatron-LM's
     * virtual stages, torch's ScheduleInterleaved1F1B; any without --for),
     * after the others so that their best plan bounds its replays; not with
     * --algo exact (a chunk split is not the exact search) and, as the
     * equal-replica searches, not in the budgeted searches on fewer devices */
    int asked = rq->schedule == SCHED_INTERLEAVED;
    if (!rc && (asked || (rq->schedule < 0 && rq->algo != PLAN_ALGO_EXACT && equal_here &&
                          (rq->framework == PLAN_FOR_ANY || plan_for_runs(rq->framework, SCHED_INTERLEAVED))))) {
        for (int oi = 0; oi < n_orders && !rc; oi++) {
            c->order = orders[oi];
            double ti = cl_now_s();
            search_interleaved(c, B, micro, n_micro, asked);
            c->res->time_chunks_s += cl_now_s() - ti;
            rc = search_budget_out(e);
        }
    }
    for (int k = 0; k < n_orders; k++) free(orders[k]);
    return rc;
}

/* --------------------------------------------------------- the request -- */

/* CL_EINPUT for a request plan_search cannot answer as asked. */
int search_check(const plan_request *rq, cl_err *e)
{
    const model *md = rq->model;
    int N = rq->cluster->n_devices;
    if (rq->batch < 1) return cl_fail(e, CL_EINPUT, "batch %d: expected a positive sample count", rq->batch);
    if ((unsigned)rq->precision >= PREC_COUNT || rq->zero < 0 || rq->zero > PLAN_ZERO_MAX)
        return cl_fail(e, CL_EINPUT, "precision %d or ZeRO stage %d is not modelled (hint: --precision fp32|mixed, --zero 0|1|2)",
                       (int)rq->precision, rq->zero);
    if (rq->microbatches > 0 && rq->batch % rq->microbatches != 0)
        return cl_fail(e, CL_EINPUT,
                       "--microbatches %d does not divide the batch of %d (hint: pick a divisor, or auto)",
                       rq->microbatches, rq->batch);
    if (rq->prof->n_layers != md->n_layers)
        return cl_fail(e, CL_EINPUT, "the profile has %d layers, the model %d (hint: profile this model)",
                       rq->prof->n_layers, md->n_layers);
    if (rq->stages > 0 && rq->stages > N)
        return cl_fail(e, CL_EINPUT, "--stages %d: the cluster has only %d devices", rq->stages, N);
    if (rq->stages > 0 && rq->stages > md->n_layers)
        return cl_fail(e, CL_EINPUT, "--stages %d: the model has only %d layers", rq->stages, md->n_layers);
    if (rq->chunks > md->n_layers)
        return cl_fail(e, CL_EINPUT, "--chunks %d: the model has only %d layers, one a chunk at most (hint: --chunks %d or fewer, or leave it out)",
                       rq->chunks, md->n_layers, md->n_layers);
    if (rq->schedule == SCHED_INTERLEAVED && rq->algo == PLAN_ALGO_EXACT)
        return cl_fail(e, CL_EINPUT,
                       "interleaved plans come from a balanced chunk split, not the exact search (hint: --algo auto or merge)");
    if (rq->schedule == SCHED_SEQUENTIAL && rq->stages > 1)
        return cl_fail(e, CL_EINPUT, "--schedule sequential runs one stage, not %d", rq->stages);
    if (rq->framework != PLAN_FOR_ANY) {
        const char *fw = plan_for_name(rq->framework);
        if (rq->schedule >= 0 && !plan_for_runs(rq->framework, (sched_kind)rq->schedule))
            return cl_fail(e, CL_EINPUT, "--schedule %s: %s does not run it (hint: --schedule %s, or auto)",
                           sched_kind_name((sched_kind)rq->schedule), fw, plan_for_schedules(rq->framework));
        int head;
        cl_err me = {0};
        if (plan_target_model(rq->model, plan_for_target(rq->framework),
                              rq->model_origin ? rq->model_origin : "the model", &head, &me))
            return cl_fail(e, CL_EINPUT, "--for %s: %s (hint: --for torch or deepspeed)", fw, me.msg);
    }
    if (rq->grad_reduce != 0 && rq->grad_reduce != 2 && rq->grad_reduce != 4)
        return cl_fail(e, CL_EINPUT, "--grad-reduce-bytes %d: expected 2 or 4 (bytes per gradient element of the data-parallel reduction; hint: leave it out for the framework's default)",
                       rq->grad_reduce);
    if (rq->floor && !search_floor_ok(rq))
        return cl_fail(e, CL_EINPUT, "plan_search: the floor plan does not answer the same question on fewer devices");
    return CL_OK;
}

/* c->speed: each device's effective FLOP/s over the profiled device's
 * (1 when the profiled device is unknown, which only a cluster of one
 * type allows). */
int search_speeds(search_ctx *c, cl_err *e)
{
    const plan_request *rq = c->rq;
    const cluster *cl = rq->cluster;
    int N = cl->n_devices, eb = model_dtype_bytes(rq->model->dtype);
    c->speed = cl_malloc((size_t)N * sizeof(double));
    double ref = rq->ref_type ? cluster_flops(rq->ref_type, eb) : 0;
    int mixed = 0;
    for (int d = 0; d < N; d++) {
        double f = cluster_flops(&cl->types[cl->devices[d].type], eb);
        c->speed[d] = ref > 0 ? f / ref : 1.0;
        if (cl->devices[d].type != cl->devices[0].type) mixed = 1;
    }
    if (!ref && mixed) {
        free(c->speed);
        return cl_fail(e, CL_EINPUT,
                       "the cluster mixes device types but the profile's device (\"%s\") is not one of them or a preset, so its times cannot be scaled (hint: name the profiled device with --profiled-on TYPE)",
                       rq->prof->device);
    }
    return CL_OK;
}

/* The schedules to try: the request's, or every kind (every kind the
 * request's framework runs) with the method's first (it wins ties) and
 * sequential after the count returned (the caller adds it on one device
 * only). */
static int search_kinds(const plan_request *rq, sched_kind *kinds)
{
    int n_kinds = 0;
    if (rq->schedule >= 0) {
        kinds[n_kinds++] = (sched_kind)rq->schedule;
        return n_kinds;
    }
    static const sched_kind auto_kinds[] = {SCHED_FBP, SCHED_1F1B, SCHED_GPIPE, SCHED_ZBH1, SCHED_PIPEDREAM};
    for (size_t k = 0; k < sizeof auto_kinds / sizeof auto_kinds[0]; k++)
        if (rq->framework == PLAN_FOR_ANY || plan_for_runs(rq->framework, auto_kinds[k]))
            kinds[n_kinds++] = auto_kinds[k];
    kinds[n_kinds] = SCHED_SEQUENTIAL; /* tried on one device only */
    return n_kinds;
}

static void gib(char *buf, size_t cap, double bytes)
{
    if (bytes >= 1e15) snprintf(buf, cap, "%.3g PB", bytes / 1e15);
    else if (bytes >= (double)(1 << 30)) snprintf(buf, cap, "%.2f GiB", bytes / (double)(1 << 30));
    else snprintf(buf, cap, "%.1f MiB", bytes / (double)(1 << 20));
}

/* Nothing fits: say how close the least bad layout came. */
static int search_none_fits(const plan_request *rq, const search_best *B, cl_err *e)
{
    if (!B->have_bad) return cl_fail(e, CL_EINPUT, "no plan fits the cluster (hint: more devices, or allow replication)");
    const plan_stage *st = &B->bad_pl.stages[B->bad_ev.worst_stage];
    char need[32], cap[32], over[32];
    gib(need, sizeof need, B->bad_ev.worst_need_bytes);
    gib(cap, sizeof cap, B->bad_ev.worst_cap_bytes);
    gib(over, sizeof over, B->bad_ev.worst_need_bytes - B->bad_ev.worst_cap_bytes);
    /* an interleaved position holds v chunks: name them all */
    char what[160] = "";
    int v = B->bad_pl.chunks;
    if (v > 1) {
        const plan_stage *end = &B->bad_pl.stages[B->bad_ev.worst_stage + (B->bad_pl.n_stages / v) * (v - 1)];
        snprintf(what, sizeof what, " and %d more chunk%s, the last ending at %s", v - 1, v > 2 ? "s" : "",
                 rq->model->layers[end->last].name);
    }
    return cl_fail(e, CL_EINPUT,
                   "no plan fits in memory: at best, stage %d (layers %s .. %s%s, %s) needs %s per device but device %s has %s, over by %s (hint: more devices, a smaller batch, fewer microbatches in flight (1f1b, fbp), or replication%s)",
                   B->bad_ev.worst_stage, rq->model->layers[st->first].name, rq->model->layers[st->last].name, what,
                   sched_kind_name(B->bad_pl.schedule), need, rq->cluster->devices[st->devices[0]].id, cap, over,
                   rq->replication && rq->zero < PLAN_ZERO_MAX ? "; with replicas, --zero 1 or 2 shards the optimiser state over them" : "");
}

/* The best candidate as the result; the plan owns copies of the model and
 * the cluster. */
/* How far below the profile's smallest measured batch a plan's microbatch
 * may go before the plan says its times are extrapolated. */
#define MICRO_BELOW_PROFILE 4

int search_result(const plan_request *rq, search_best *B, plan_result *res, cl_err *e)
{
    plan *pl = &res->plan;
    *pl = B->pl;
    model_copy(&pl->model, rq->model);
    cluster_copy(&pl->cluster, rq->cluster);
    pl->pred = B->pred;
    pl->framework = rq->framework;
    /* (count.c, count_schedule and count_twin) */
    if (pl->schedule == SCHED_ZBH1 && rq->schedule == SCHED_ZBH1)
        search_note(res, "zb-h1 was searched on as many devices as its partition-and-merge layout uses, else on all (its memory depends on the device count)");
    else if (pl->schedule == SCHED_ZBH1)
        search_note(res, "zb-h1 was searched on as many devices as 1f1b (or gpipe) chose before it (its memory depends on the device count), or, where those are at least the microbatches, as gpipe (then every stage keeps all its microbatches in flight)");
    /* Below its smallest measured batch a profile's times are scaled in
     * proportion to the batch, which a GPU does not do (small GEMMs leave
     * it idle): say so when the plan relies on that far below the data. */
    double least = HUGE_VAL;
    for (int i = 0; i < rq->prof->n_layers; i++)
        if (rq->prof->layers[i].n_points > 0) least = fmin(least, rq->prof->layers[i].batch[0]);
    if (least < HUGE_VAL && pl->microbatch * MICRO_BELOW_PROFILE < least)
        search_note(res, "the microbatch of %d sample%s is far below the profile's smallest measured batch (%g): its times are scaled in proportion to the batch, which overstates small microbatches on most accelerators (hint: profile at smaller batches, or fix --microbatches)",
                    pl->microbatch, pl->microbatch == 1 ? "" : "s", least);
    res->timing = B->tm;
    res->bottleneck_s = B->ev.bottleneck_s;
    res->bottleneck_stage = B->ev.bottleneck_stage;
    res->bottleneck_is_boundary = B->ev.bottleneck_is_boundary;
    res->exact_s = B->exact_s;
    res->merge_s = B->merge_s;
    res->algo = B->algo;
    res->devices_used = plan_device_count(pl);
    snprintf(pl->idle_why, sizeof pl->idle_why, "%s", B->why);
    int rc = plan_validate(pl, "plan", e);
    assert(rc == CL_OK);
    return rc;
}

/* plan_search, with the test knobs of k (search_test.h): no_prune every
 * candidate searched on its own, no_sched_prune without count.c's
 * schedule_loses, no_sched_share without count.c's shadows whose memory can
 * bind; k's counters (sched_pruned, sched_shared, passes_skipped) are set
 * from the search. */
static int search_run(const plan_request *rq, plan_result *res, search_ctx *k, cl_err *e)
{
    memset(res, 0, sizeof *res);
    res->exact_s = res->merge_s = NAN;
    int rc = search_check(rq, e);
    if (rc) return rc;
    /* Past PLAN_EXACT_AUTO_MAX_LAYERS, --algo auto keeps to partition-and-
     * merge (n log n) and says so (the exact search on a chain tries every
     * stage start for every stage end: quadratic in the layers, see
     * docs/planner.md); --algo exact still runs it. */
    plan_request rq_merge;
    if (rq->algo == PLAN_ALGO_AUTO && rq->model->n_layers > PLAN_EXACT_AUTO_MAX_LAYERS) {
        rq_merge = *rq;
        rq_merge.algo = PLAN_ALGO_MERGE;
        rq = &rq_merge;
        search_note(res, "the exact search was skipped: %d layers, more than the %d --algo auto searches exactly (hint: --algo exact runs it, within --max-seconds)",
                    rq->model->n_layers, PLAN_EXACT_AUTO_MAX_LAYERS);
    }
    search_ctx c = {.rq = rq, .res = res, .n_dev = rq->cluster->n_devices, .no_prune = k->no_prune,
                    .no_sched_prune = k->no_sched_prune, .no_sched_share = k->no_sched_share,
                    .no_twins = k->no_twins, .fine = k->fine, .cut_max = rq->model->n_layers};
    if (rq->framework != PLAN_FOR_ANY) {
        /* Megatron: no stage starts inside the head layers (checked above) */
        cl_err he = {0};
        rc = plan_target_model(rq->model, plan_for_target(rq->framework), "", &c.cut_max, &he);
        assert(rc == CL_OK);
    }
    c.cut_head = c.cut_max;
    if (rq->framework == PLAN_FOR_ANY) {
        /* a head of one layer restricts nothing (a stage starts before it) */
        int head;
        cl_err he = {0};
        if (plan_target_model(rq->model, PLAN_TO_MEGATRON, "", &head, &he) == CL_OK && head < rq->model->n_layers - 1)
            c.cut_head = head;
    }
    if ((rc = search_speeds(&c, e))) return rc;
    int micro[INSTANCE_MAX_MICRO + 1];
    int n_micro = instance_micro_candidates(rq, micro);
    sched_kind kinds[SCHED_COUNT];
    int n_kinds = search_kinds(rq, kinds);
    if (instance_check_costs(&c, micro, n_micro, e)) {
        free(c.speed);
        return e->code;
    }
    /* All N devices first, then fewer (docs/planner.md, "Fewer devices"). */
    search_best B = {0};
    pred_twins twins = {0};
    c.twins = c.no_prune || c.no_twins ? NULL : &twins; /* (unpruned: every candidate replayed) */
    rc = search_counts(&c, &B, micro, n_micro, kinds, n_kinds, e);
    pred_twins_free(&twins);
    c.twins = NULL;
    k->twin_hits = c.twin_hits;
    k->lb_checked = c.lb_checked;
    k->lb_broken = c.lb_broken;
    k->sched_pruned = c.sched_pruned;
    k->sched_shared = c.sched_shared;
    k->passes_skipped = c.passes_skipped;
    k->passes_answered = c.passes_answered;
    free(c.speed);
    /* a budget spent during the last candidate (its simulation left it out)
     * must not pass for a complete search */
    if (!rc) rc = search_budget_out(e);
    if (!rc && !B.have) rc = search_none_fits(rq, &B, e);
    if (B.have_bad) instance_free_stages(&B.bad_pl);
    if (rc) {
        if (B.have) instance_free_stages(&B.pl);
        return rc;
    }
    /* an interleaved plan auto chose is a chunk split: say so */
    if (rq->schedule < 0 && B.pl.schedule == SCHED_INTERLEAVED) search_interleaved_note(rq, res);
    return search_result(rq, &B, res, e);
}

int plan_search(const plan_request *rq, plan_result *res, cl_err *e)
{
    search_ctx k = {0};
    return search_run(rq, res, &k, e);
}

int plan_search_unpruned(const plan_request *rq, plan_result *res, cl_err *e)
{
    return plan_search_unpruned_bound(rq, NULL, NULL, res, e);
}

int plan_search_unpruned_bound(const plan_request *rq, int *checked, int *broken, plan_result *res, cl_err *e)
{
    search_ctx k = {.no_prune = 1};
    int rc = search_run(rq, res, &k, e);
    if (checked) *checked = k.lb_checked;
    if (broken) *broken = k.lb_broken;
    return rc;
}

int plan_search_sched_prune(const plan_request *rq, int prune, int *pruned, plan_result *res, cl_err *e)
{
    search_ctx k = {.no_sched_prune = !prune};
    int rc = search_run(rq, res, &k, e);
    if (pruned) *pruned = k.sched_pruned;
    return rc;
}

int plan_search_sched_share(const plan_request *rq, int share, int *shared, int *skipped, plan_result *res,
                            cl_err *e)
{
    return plan_search_share_stats(rq, share, shared, skipped, NULL, res, e);
}

int plan_search_share_stats(const plan_request *rq, int share, int *shared, int *skipped, int *answered,
                            plan_result *res, cl_err *e)
{
    search_ctx k = {.no_sched_share = !share};
    int rc = search_run(rq, res, &k, e);
    if (shared) *shared = k.sched_shared;
    if (skipped) *skipped = k.passes_skipped;
    if (answered) *answered = k.passes_answered;
    return rc;
}

int plan_search_twins(const plan_request *rq, int share, int *hits, plan_result *res, cl_err *e)
{
    search_ctx k = {.no_twins = !share};
    int rc = search_run(rq, res, &k, e);
    if (hits) *hits = k.twin_hits;
    return rc;
}

int plan_search_climb(const plan_request *rq, int fine, plan_result *res, cl_err *e)
{
    search_ctx k = {.fine = fine};
    return search_run(rq, res, &k, e);
}
