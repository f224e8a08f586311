/* predict.c - closed-form iteration time of a plan (see predict.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "predict.h"

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
    double *dev_busy = cl_calloc((size_t)pipe, sizeof(double));
    for (int s = 0; s < S; s++) {
        const plan_stage *st = &p->stages[s];
        int r = st->n_replicas, q = (m + r - 1) / r;
        double t = st->fwd_s + st->bwd_in_s + st->bwd_w_s;
        double busy = (double)q * t;
        dev_busy[s % pipe] += busy;
        fill += t;
        work += (double)m * t;
        seq += (double)m * t * (stage_flops(p, st) / fastest);
        w_min = fmin(w_min, st->bwd_w_s);
        if (comm) {
            const cluster_link *l = &p->cluster.links[one_node(p, st, NULL) ? CLUSTER_INTRA : CLUSTER_INTER];
            if (r > 1 && s < pipe) /* interleaved chunks share their device's all-reduce slot */
                ar_max = fmax(ar_max, 2.0 * (r - 1) / r * st->param_bytes / l->bw_Bps +
                                          2.0 * (r - 1) * l->latency_s);
            if (s + 1 < S) {
                const plan_stage *nx = &p->stages[s + 1];
                const cluster_link *lb =
                    &p->cluster.links[one_node(p, st, nx) ? CLUSTER_INTRA : CLUSTER_INTER];
                double x = lb->latency_s + st->act_out_bytes / lb->bw_Bps;
                period = fmax(period, 2.0 * x);   /* per microbatch */
                fill += 2.0 * x;
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
    if (!(T > 0)) T = 0;
    int D = plan_device_count(p);
    memset(out, 0, sizeof *out);
    out->iteration_s = T;
    out->throughput = T > 0 ? p->batch / T : 0;
    double bub = T > 0 && D > 0 ? 1.0 - work / (D * T) : 0;
    out->bubble = bub < 0 ? 0 : bub > 1 ? 1 : bub;
    out->speedup = T > 0 ? seq / T : 0;
    if (tm) {
        tm->period_s = period;
        tm->fill_s = fill;
        tm->allreduce_s = ar_max;
        tm->sequential_s = seq;
    }
    return CL_OK;
}
