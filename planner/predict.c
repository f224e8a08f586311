/* predict.c - closed-form iteration time of a plan (see predict.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"
#include "core/schedule.h"
#include "sim/sim.h"

/* Effective FLOP/s of the slowest device in a stage (speeds only ever
 * appear as ratios). */
static double stage_flops(const plan *p, const plan_stage *st)
{
    int eb = model_dtype_bytes(p->model.dtype);
    double f = HUGE_VAL;
    for (int r = 0; r < st->n_replicas; r++) {
        const cluster_device *d = &p->cluster.devices[st->devices[r]];
        f = fmin(f, cluster_flops(&p->cluster.types[d->type], eb));
    }
    return f;
}

static int one_node(const plan *p, const plan_stage *a, const plan_stage *b)
{
    int n = p->cluster.devices[a->devices[0]].node;
    for (int r = 0; r < a->n_replicas; r++)
        if (p->cluster.devices[a->devices[r]].node != n) return 0;
    for (int r = 0; b && r < b->n_replicas; r++)
        if (p->cluster.devices[b->devices[r]].node != n) return 0;
    return 1;
}

int plan_predict(const plan *p, const plan_predict_opts *o, plan_pred *out, plan_timing *tm,
                 cl_err *e)
{
    int rc = plan_validate(p, "plan", e);
    if (rc) return rc;
    int comm = o ? o->comm : 1;
    int S = p->n_stages, v = p->chunks, pipe = S / v, m = p->n_micro;
    double period = 0, fill = 0, ar_max = 0, w_min = HUGE_VAL, work = 0, seq = 0;
    double fastest = 0;
    for (int d = 0; d < p->cluster.n_devices; d++)
        fastest = fmax(fastest, cluster_flops(&p->cluster.types[p->cluster.devices[d].type],
                                              model_dtype_bytes(p->model.dtype)));
    /* updates: after every backward for the asynchronous kinds, once per
     * iteration (all devices at the end, in parallel) for the others */
    int async = sched_is_async(p->schedule);
    /* DeepSpeed's pipeline (sched_deepspeed): a stage computes nothing
     * while it sends or receives, so its four transfers a microbatch (two
     * at each end of the pipe) join its busy time */
    int blocking = comm && sched_deepspeed(p, p->schedule);
    double upd_max = 0;
    double *dev_busy = cl_calloc((size_t)pipe, sizeof(double));
    for (int s = 0; s < S; s++) {
        const plan_stage *st = &p->stages[s];
        int r = st->n_replicas, q = (m + r - 1) / r;
        double u = st->update_s;
        /* ZeRO 1/2 under a flushing kind: each replica updates its shard
         * between the reduce-scatter and the all-gather (as the simulator) */
        double u_step = p->zero >= 1 && !async && p->schedule != SCHED_SEQUENTIAL && r > 1 ? u / r : u;
        double t = st->fwd_s + st->bwd_in_s + st->bwd_w_s + (async ? u : 0);
        double busy = (double)q * t;
        dev_busy[s % pipe] += busy;
        fill += t;
        work += (double)m * t + (async ? 0 : u);
        upd_max = fmax(upd_max, async ? 0 : u_step);
        seq += ((double)m * (st->fwd_s + st->bwd_in_s + st->bwd_w_s) + u) *
               (stage_flops(p, st) / fastest);
        w_min = fmin(w_min, st->bwd_w_s);
        if (comm) {
            const cluster_link *l = &p->cluster.links[one_node(p, st, NULL) ? CLUSTER_INTRA : CLUSTER_INTER];
            int k = r, n = 1;
            double ar = 0, red = 0, gat = 0;
            if (r > 1 && s < pipe) plan_ring_shape(p, s, &k, &n);
            if (r > 1 && s < pipe) plan_ar_bytes(p, s, p->schedule, &red, &gat);
            /* both halves take the same steps (sim/ring.c): the time of an
             * all-reduce of their mean, P itself when they are equal */
            double P = (red + gat) / 2;
            if (r > 1 && s < pipe && n > 1) { /* hierarchical (sim/ring.c) */
                const cluster_link *a = &p->cluster.links[CLUSTER_INTRA], *x = &p->cluster.links[CLUSTER_INTER];
                ar = 2.0 * (k - 1) / k * P / a->bw_Bps + 2.0 * (k - 1) * a->latency_s +
                     2.0 * (n - 1) / ((double)n * k) * P / x->bw_Bps + 2.0 * (n - 1) * x->latency_s;
            } else if (r > 1 && s < pipe) /* interleaved chunks share their device's all-reduce slot */
                ar = 2.0 * (r - 1) / r * P / l->bw_Bps + 2.0 * (r - 1) * l->latency_s;
            /* an asynchronous stage all-reduces once per round of its r
             * replicas (q rounds an iteration), and its devices wait for
             * each before the update that the next round reads */
            if (async) dev_busy[s % pipe] += (double)q * ar;
            else ar_max = fmax(ar_max, ar);
            if (s + 1 < S) {
                const plan_stage *nx = &p->stages[s + 1];
                const cluster_link *lb =
                    &p->cluster.links[one_node(p, st, nx) ? CLUSTER_INTRA : CLUSTER_INTER];
                double x = lb->latency_s + st->act_out_bytes / lb->bw_Bps;
                period = fmax(period, 2.0 * x);   /* per microbatch */
                fill += 2.0 * x;
                if (blocking) { /* an activation and a gradient, on both devices */
                    dev_busy[s % pipe] += (double)q * 2.0 * x;
                    dev_busy[(s + 1) % pipe] += (double)q * 2.0 * x;
                }
            }
        }
    }
    for (int g = 0; g < pipe; g++) period = fmax(period, dev_busy[g] / m);
    free(dev_busy);
    double T;
    switch (p->schedule) {
    case SCHED_SEQUENTIAL: T = fill * m + ar_max; break;
    case SCHED_PIPEDREAM:
    case SCHED_FBP: T = m * period + ar_max; break;
    case SCHED_INTERLEAVED: T = m * period + (fill - period) / v + ar_max; break;
    case SCHED_ZBH1: {
        double t1 = (m - 1) * period + fill + ar_max;
        T = fmax(t1 - 2.0 * (pipe - 1) * w_min, m * period + ar_max);
        break;
    }
    default: T = (m - 1) * period + fill + ar_max; break;
    }
    T += upd_max;
    if (!(T > 0)) T = 0;
    int D = plan_device_count(p);
    memset(out, 0, sizeof *out);
    out->iteration_s = T;
    out->throughput = T > 0 ? p->batch / T : 0;
    double bub = T > 0 && D > 0 ? 1.0 - work / (D * T) : 0;
    out->bubble = bub < 0 ? 0 : bub > 1 ? 1 : bub;
    out->speedup = T > 0 ? seq / T : 0;
    out->simulated = 0;
    if (tm) {
        tm->period_s = period;
        tm->fill_s = fill;
        tm->allreduce_s = ar_max;
        tm->sequential_s = seq;
    }
    return CL_OK;
}

/* Rank by the discrete-event simulator whenever a candidate is cheap to
 * replay: the closed forms of predict.h ignore how a schedule orders ops
 * around replicated stages and transfers, and the simulator is what users
 * check a plan with (`cleave sim`), so ranking by it makes `cleave plan`'s
 * prediction the one `cleave sim` prints.  Candidates with more ops than
 * PLAN_SIM_MAX_OPS (huge pipelines in the planning benchmarks) keep the
 * closed form.  CL_EINPUT when the simulator refuses the plan. */
#define PLAN_SIM_MAX_OPS 400000.0
/* Events, not seconds, so the chosen plan never depends on machine load
 * (what 2M events take: docs/planner.md, "Ranking by the simulator"). */
#define PLAN_SIM_MAX_EVENTS 2000000ull

/* The simulator reports an exhausted budget as CL_EINPUT with a message
 * naming the budget; anything else (a schedule that cannot run) is real. */
static int sim_budget_hit(const cl_err *e)
{
    return strstr(e->msg, "event budget exhausted") != NULL;
}
/* The ops (and ring transfers) a replay of n_stages stages, m
 * microbatches and the given sum of squared replica counts runs. */
static double replay_ops(sched_kind kind, int n_stages, int P, int m, double sum_r2)
{
    double iters = sched_default_iters(kind, P, m);
    /* a ring all-reduce over r replicas is 2 (r - 1) steps of r transfers,
     * each an op and a few events: it dominates for wide replica groups */
    return 4.0 * n_stages * m * iters + 2.0 * sum_r2 * iters;
}

int plan_predict_replays(sched_kind kind, int n_stages, int chunks, int m, int r)
{
    int P = n_stages / (chunks > 1 ? chunks : 1) * r;
    return replay_ops(kind, n_stages, P, m, (double)n_stages * r * r) <= PLAN_SIM_MAX_OPS;
}

int plan_predict_sim(const plan *pl, plan_pred *pr)
{
    const plan_sim_budget b = {PLAN_SIM_MAX_OPS, PLAN_SIM_MAX_EVENTS};
    return plan_predict_sim_in(pl, pr, &b);
}

int plan_predict_sim_in(const plan *pl, plan_pred *pr, const plan_sim_budget *b)
{
    int P = sched_fill_depth(pl);
    double r2 = 0;
    for (int s = 0; s < pl->n_stages; s++) r2 += (double)pl->stages[s].n_replicas * pl->stages[s].n_replicas;
    if (replay_ops(pl->schedule, pl->n_stages, P, pl->n_micro, r2) > b->max_ops) return CL_OK;
    /* Each replay also runs under an event budget, so planning time stays
     * bounded whatever the simulator meets (a replay that runs out of it
     * keeps the closed form, like a candidate too large to try). */
    sched sc;
    cl_err e = {0};
    int rc = sched_build(pl, pl->schedule, pl->n_micro,
                         sched_default_iters(pl->schedule, P, pl->n_micro), &sc, &e);
    if (rc) return rc;
    sim_opts o = {.comm_off = pl->comm_off, .max_events = b->max_events};
    sim *sm = sim_create(pl, &sc, &o, &e);
    if (!sm) {
        sched_free(&sc);
        return e.code ? e.code : CL_EINPUT;
    }
    sim_result r;
    rc = sim_run(sm, &r, &e);
    sim_destroy(sm);
    sched_free(&sc);
    if (rc) return sim_budget_hit(&e) ? CL_OK : rc;
    double seq = pr->speedup > 0 ? pr->iteration_s * pr->speedup : 0;
    pr->iteration_s = r.iteration_s;
    pr->throughput = r.throughput;
    /* 1 - mean busy fraction rounds to -2e-16 when every device is busy
     * throughout; a plan's bubble lies in [0, 1] (plan_validate) */
    pr->bubble = r.bubble < 0 ? 0 : r.bubble > 1 ? 1 : r.bubble;
    pr->speedup = seq > 0 ? seq / r.iteration_s : r.speedup;
    pr->simulated = 1;
    sim_result_free(&r);
    return CL_OK;
}
