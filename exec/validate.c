/* validate.c - costs from a profile, prediction, measurement and their
 * comparison for one plan (validate.h). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "../sim/schedule.h"
#include "data.h"
#include "gemm.h"
#include "net.h"
#include "optim.h"
#include "profile.h"
#include "validate.h"

/* --------------------------------------------------------- arithmetic -- */

double exec_val_error(double predicted, double measured)
{
    if (measured == 0) return predicted == 0 ? 0 : copysign(HUGE_VAL, predicted);
    return (predicted - measured) / measured;
}

void exec_val_qty_set(exec_val_qty *q, double predicted, double measured)
{
    q->predicted = predicted;
    q->measured = measured;
    q->error = exec_val_error(predicted, measured);
}

void exec_val_abs_stats(const double *err, int n, double *mean, double *max)
{
    double s = 0, mx = 0;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(err[i])) continue;
        double a = fabs(err[i]);
        s += a;
        if (a > mx) mx = a;
        k++;
    }
    *mean = k ? s / k : 0;
    *max = mx;
}

/* ------------------------------------------------------------- checks -- */

int exec_val_check(const plan *p, const char *file, cl_err *e)
{
    const model *m = &p->model;
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        for (int k = 1; k < st->n_layers; k++)
            if (st->layers[k] != st->layers[k - 1] + 1)
                return cl_fail(e, CL_EINPUT, "%s: stages[%d].layers: the executor runs a stage as a range of consecutive layers, this one skips from %d to %d",
                               file, s, st->layers[k - 1], st->layers[k]);
        int rc = exec_net_check(m, st->layers[0], st->layers[st->n_layers - 1] + 1, file, e);
        if (rc) return rc;
    }
    if (m->n_layers < 1 || m->layers[m->n_layers - 1].kind != MODEL_SOFTMAX_XENT)
        return cl_fail(e, CL_EINPUT, "%s: model.layers: training needs the model to end in softmax_xent (hint: add the loss layer)",
                       file);
    if (p->optimizer != OPTIM_SGD && p->optimizer != OPTIM_MOMENTUM)
        return cl_fail(e, CL_EINPUT, "%s: optimizer: the executor implements sgd and momentum, not %s (hint: plan with --optimizer momentum)",
                       file, plan_optim_name(p->optimizer));
    return CL_OK;
}

/* -------------------------------------------------------------- costs -- */

/* Median seconds of `reps` optimiser steps on the stage's parameters, with
 * the runtime's settings for the plan's optimiser. */
static int time_update(const plan *p, const plan_stage *st, int reps, double *out,
                       const char *file, cl_err *e)
{
    exec_net *n;
    int rc = exec_net_create(&n, &p->model, st->first, st->last + 1, 1, 1, 0, file, e);
    if (rc) return rc;
    exec_pipe_opts d;
    exec_pipe_defaults(&d);
    exec_sgd sgd;
    exec_sgd_init(&sgd, n, 0, p->optimizer == OPTIM_MOMENTUM ? d.momentum : 0, d.weight_decay);
    double *v = cl_malloc((size_t)reps * sizeof *v);
    for (int r = -3; r < reps; r++) {
        double t0 = exec_now();
        exec_sgd_step(&sgd, n);
        double t = exec_now() - t0;
        if (r >= 0) v[r] = t;
    }
    gsl_sort(v, 1, (size_t)reps);
    *out = gsl_stats_median_from_sorted_data(v, 1, (size_t)reps);
    free(v);
    exec_sgd_free(&sgd);
    exec_net_destroy(n);
    return CL_OK;
}

int exec_val_costs(plan *p, const prof *pf, int reps, double *update_s, const char *file,
                   cl_err *e)
{
    int rc = prof_check_model(pf, &p->model, file, e);
    if (rc) return rc;
    double b = p->microbatch > 0 ? p->microbatch : 1;
    for (int s = 0; s < p->n_stages; s++) {
        plan_stage *st = &p->stages[s];
        double f = 0, bi = 0, bw = 0, stash = 0, params = 0;
        for (int k = 0; k < st->n_layers; k++) {
            const prof_layer *l = &pf->layers[st->layers[k]];
            f += prof_fwd_s(l, b);
            bi += prof_bwd_in_s(l, b);
            bw += prof_bwd_w_s(l, b);
            stash += l->stash_bytes * b;
            params += l->param_bytes;
        }
        st->fwd_s = f;
        st->bwd_in_s = bi;
        st->bwd_w_s = bw;
        st->stash_bytes = stash;
        st->param_bytes = params;
        st->act_out_bytes = s + 1 < p->n_stages ? pf->layers[st->layers[st->n_layers - 1]].act_bytes * b : 0;
        if (update_s && (rc = time_update(p, st, reps, &update_s[s], file, e))) return rc;
    }
    return CL_OK;
}

int exec_val_profile(const plan *p, int reps, prof *pf, const char *file, cl_err *e)
{
    int64_t b = p->microbatch > 0 ? p->microbatch : 1;
    return exec_profile(&p->model, file, &b, 1, 3, reps, 1, pf, e);
}

void exec_val_set_link(plan *p, const cluster_link *link)
{
    p->cluster.links[CLUSTER_INTRA] = *link;
    p->cluster.links[CLUSTER_INTER] = *link;
}

double exec_val_max_transfer(const plan *p)
{
    double mx = 0;
    for (int s = 0; s + 1 < p->n_stages; s++)
        if (p->stages[s].act_out_bytes > mx) mx = p->stages[s].act_out_bytes;
    return mx;
}

/* ----------------------------------------------------------- predict -- */

int exec_val_predict(const plan *p, const double *update_s, int n_iter, const char *trace,
                     sim_result *r, cl_err *e)
{
    memset(r, 0, sizeof *r);
    int P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
    if (n_iter <= 0) n_iter = sched_default_iters(p->schedule, P, p->n_micro);
    plan q = *p; /* shallow: only the stage array is replaced */
    q.stages = cl_malloc((size_t)p->n_stages * sizeof *q.stages);
    memcpy(q.stages, p->stages, (size_t)p->n_stages * sizeof *q.stages);
    for (int s = 0; s < p->n_stages && update_s; s++) q.stages[s].update_s = update_s[s];
    sched sc;
    int rc = sched_build(&q, p->schedule, p->n_micro, n_iter, &sc, e);
    if (!rc) {
        sim_opts o = {.record = trace != NULL};
        sim *sm = sim_create(&q, &sc, &o, e);
        if (!sm) rc = e->code ? e->code : CL_EINPUT;
        else rc = sim_run(sm, r, e);
        if (!rc && trace) rc = sim_write_trace(sm, trace, e);
        sim_destroy(sm);
        sched_free(&sc);
    }
    free(q.stages);
    return rc;
}

/* ----------------------------------------------------------- measure -- */

int exec_val_measure(const plan *p, exec_pipe_backend backend, int n_iter, const char *file,
                     const char *trace, exec_pipe_result *r, cl_err *e)
{
    memset(r, 0, sizeof *r);
    const model *m = &p->model;
    const model_shape *s = &m->input;
    int C = s->ndim == 3 ? (int)s->d[0] : 1, H = s->ndim == 3 ? (int)s->d[1] : 1,
        W = s->ndim == 3 ? (int)s->d[2] : (int)s->d[0];
    int classes = m->classes > 0 ? m->classes : 2;
    exec_pipe_opts o;
    exec_pipe_defaults(&o);
    /* every iteration its own samples, up to 64 batches (the runtime takes
     * batches in order and starts a new epoch when they run out) */
    int64_t batches = n_iter < 64 ? n_iter : 64;
    exec_data train;
    exec_data_synthetic(&train, (int64_t)p->batch * batches, C, H, W, classes, o.seed, 0);
    o.backend = backend;
    o.iterations = n_iter;
    o.train = &train;
    o.test = NULL;
    o.file = file;
    o.trace_path = trace;
    o.lr_schedule = EXEC_LR_CONSTANT;
    if (p->optimizer == OPTIM_SGD) o.momentum = 0;
    int rc = exec_pipe_run(p, &o, r, e);
    exec_data_free(&train);
    return rc;
}

double exec_val_measured_iteration(const plan *p, const exec_pipe_result *r, int *first)
{
    int n = r->n_iter, P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
    int w = sched_is_async(p->schedule) ? sched_warmup_iters(p->schedule, P, p->n_micro) : 1;
    if (w >= n) w = 0;
    *first = w;
    if (n <= 0) return 0;
    return w ? (r->iter_end_s[n - 1] - r->iter_end_s[w - 1]) / (n - w) : r->iter_end_s[n - 1] / n;
}

/* ----------------------------------------------------------- compare -- */

int exec_val_compare(const plan *p, const sim_result *pred, const exec_pipe_result *meas,
                     exec_val_report *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    if (pred->n_dev != meas->n_workers)
        return cl_fail(e, CL_ERUN, "the simulator has %d workers, the run %d", pred->n_dev,
                       meas->n_workers);
    int first;
    double it = exec_val_measured_iteration(p, meas, &first);
    out->first_iter = first;
    out->n_iter = meas->n_iter;
    exec_val_qty_set(&out->iteration_s, pred->iteration_s, it);
    double samples = (double)p->microbatch * p->n_micro;
    exec_val_qty_set(&out->throughput, pred->throughput, it > 0 ? samples / it : 0);
    out->n_workers = meas->n_workers;
    out->w = cl_calloc((size_t)out->n_workers, sizeof *out->w);
    for (int i = 0; i < out->n_workers; i++) {
        const sim_dev_result *d = &pred->dev[i];
        const exec_pipe_worker *x = &meas->w[i];
        if (d->device != x->device) {
            exec_val_report_free(out);
            return cl_fail(e, CL_ERUN, "worker %d runs on device %d in the simulator, %d in the run",
                           i, d->device, x->device);
        }
        exec_val_worker *v = &out->w[i];
        v->device = d->device;
        v->stage = d->stage;
        v->n_stages = d->n_stages;
        double busy = 0;
        int k = 0;
        for (int j = first; j < meas->n_iter; j++, k++) busy += x->iter_busy_s[j];
        exec_val_qty_set(&v->busy_s, d->busy_s, k ? busy / k : 0);
        exec_val_qty_set(&v->peak_mem, d->peak_mem_bytes, x->peak_mem_bytes);
        if (fabs(v->busy_s.error) > out->max_busy_error) out->max_busy_error = fabs(v->busy_s.error);
        if (fabs(v->peak_mem.error) > out->max_mem_error) out->max_mem_error = fabs(v->peak_mem.error);
    }
    return CL_OK;
}

void exec_val_report_free(exec_val_report *r)
{
    if (!r) return;
    free(r->w);
    memset(r, 0, sizeof *r);
}
