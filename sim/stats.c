/* stats.c - a finished run's summary (sim_result) and its release.
 *
 * Iteration time: flushing kinds (and explicit schedules) run n_iter
 * identical iterations, so iteration_s = makespan / n_iter.  Asynchronous
 * kinds never flush: iterations [k0, k1] of sched_steady_window() are
 * measured (the w warm-up iterations that fill the pipeline and the w that
 * drain it are left out), and iteration_s is the slope between iteration
 * ends, (T[k1] - T[k0-1]) / (k1 - k0 + 1), where T[k] is the end of the last
 * compute op of iteration k on any device.
 *
 * Per device, per iteration of the measured window: busy is its compute
 * time, comm_wait the time it sat in a RECV or an UPDATE after the data or
 * all-reduce had been posted (waiting on the link), idle the rest (waiting on
 * other devices' compute: the bubble).  The overall bubble is 1 - mean busy
 * fraction, i.e. idle and communication wait together.
 */
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

void sim_result_free(sim_result *r)
{
    if (!r) return;
    free(r->dev);
    memset(r, 0, sizeof *r);
}

void sim_fill_result(const sim *s, sim_result *out)
{
    const plan *p = s->pl;
    const sched *sc = s->sc;
    memset(out, 0, sizeof *out);
    out->kind = sc->kind;
    out->n_micro = s->m;
    out->n_iter = s->n_iter;
    out->events = ev_dispatched(s->k);
    out->samples = (double)(p->microbatch > 0 ? p->microbatch : 1) * s->m;
    double makespan = 0;
    for (int w = 0; w < s->n_w; w++)
        if (s->w[w].t_last > makespan) makespan = s->w[w].t_last;
    out->makespan_s = makespan;

    int k0 = 0, k1 = s->n_iter - 1;
    if (sc->kind >= 0) {
        sched_steady_window((sched_kind)sc->kind, sched_fill_depth(p), s->m, s->n_iter, &k0, &k1);
    }
    int warm = k0, nk = k1 - k0 + 1;
    out->warmup_iters = warm;
    out->measured_iters = nk;
    out->iteration_s = warm ? (s->iter_end[k1] - s->iter_end[warm - 1]) / nk
                            : makespan / s->n_iter;
    out->throughput = out->iteration_s > 0 ? out->samples / out->iteration_s : 0;

    double seq = 0;
    double upd = 0; /* one device: one optimiser step per iteration */
    for (int i = 0; i < s->S; i++) {
        seq += p->stages[i].fwd_s + p->stages[i].bwd_in_s + p->stages[i].bwd_w_s;
        upd += p->stages[i].update_s;
    }
    out->sequential_s = seq * s->m + upd;
    out->speedup = out->iteration_s > 0 ? out->sequential_s / out->iteration_s : 0;
    for (int l = 0; l < CLUSTER_LEVELS; l++) out->sent_bytes[l] = s->sent_level[l];

    out->n_dev = s->n_w;
    out->dev = cl_calloc((size_t)s->n_w, sizeof *out->dev);
    double busy_sum = 0, comm_sum = 0;
    for (int w = 0; w < s->n_w; w++) {
        const sim_worker *W = &s->w[w];
        sim_dev_result *d = &out->dev[w];
        d->device = sc->dev[w];
        d->stage = W->n_local ? W->local[0] : -1;
        d->n_stages = W->n_local;
        double busy = 0, comm = 0;
        for (int k = k0; k <= k1; k++) {
            busy += s->busy_it[(int64_t)w * s->n_iter + k];
            comm += s->comm_it[(int64_t)w * s->n_iter + k];
        }
        double per = warm ? out->iteration_s : makespan / s->n_iter;
        d->busy_s = busy / nk;
        d->comm_wait_s = comm / nk;
        d->idle_s = per - d->busy_s - d->comm_wait_s;
        if (d->idle_s < 0) d->idle_s = 0;
        if (per > 0) {
            d->busy = d->busy_s / per;
            d->comm_wait = d->comm_wait_s / per;
            d->idle = d->idle_s / per;
        }
        busy_sum += d->busy;
        comm_sum += d->comm_wait;
        d->peak_mem_bytes = W->peak;
        d->peak_t_s = W->peak_t;
        d->at_peak = W->at_peak;
        d->peak_stash = W->peak_stash;
        d->peak_versions = W->peak_versions;
        d->sent_bytes = W->sent;
    }
    out->bubble = 1 - busy_sum / s->n_w;
    /* busy fractions summed in floating point may pass 1 by an ulp: that is
     * no bubble (anything beyond rounding stays visible, a bug to find) */
    if (out->bubble < 0 && out->bubble > -1e-9) out->bubble = 0;
    out->comm_wait = comm_sum / s->n_w;
}
