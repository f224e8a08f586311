/* validate.c - costs from a profile, prediction, measurement and their
 * comparison for one plan (validate.h). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "base/measure.h"
#include "exec/run/chan.h"
#include "exec/nn/data.h"
#include "exec/nn/gemm.h"
#include "exec/probe/linkprof.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "exec/probe/profile_layers.h"
#include "exec/run/tp_crew.h"
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
    return exec_pipe_check(p, file, e); /* the runtime's own refusals, before anything runs */
}

/* -------------------------------------------------------------- costs -- */

/* Exchange the parameter block with a stashed copy, as the runtime's
 * PipeDream backward does before and after running with an old version. */
static void swap_block(float *p, float *q, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float t = p[i];
        p[i] = q[i];
        q[i] = t;
    }
}

/* What the runtime does around a stage's layers, measured in context on
 * the stage's own net at the plan's microbatch size (medians of `reps`
 * steps on random data; a step is the forwards, input and weight gradients
 * of the microbatches one update covers, then the optimiser step with the
 * runtime's settings), into v (docs/validation.md):
 *  - update_s: the optimiser step;
 *  - copy_s (send): copying the output into a fresh message after each F;
 *  - input_s (gather): gathering the microbatch's samples from a data set
 *    of the run's size before each F on the first stage;
 *  - version_s, swap_s (versions: PipeDream on a stage whose microbatches
 *    are still in flight when it updates): copying the parameters into a
 *    new weight version before the step, and the two exchanges of the
 *    parameter block with a stashed version around each B;
 *  - acts_bytes, param_bytes, recompute_bytes: one microbatch's exec_acts,
 *    the padded parameter block and full recomputation's scratch. */
static int stage_extras(const plan *p, const plan_stage *st, int send, int gather, int versions,
                        int reps, exec_val_extra *v, const char *file, cl_err *e)
{
    const int mb = p->microbatch > 0 ? p->microbatch : 1, t = plan_tensor(p);
    /* with tensor parallelism, rank 0's share, its collectives counted
     * (exec_val_tp_comm prices them) */
    exec_tp_counter cc;
    exec_net *n;
    int rc = exec_net_create_counted(&n, &cc, &p->model, st->first, st->last + 1, mb, 1,
                                     exec_pipe_net_flags(p), t, file, e);
    if (rc) return rc;
    const int split = cc.solo != NULL;
    exec_acts *a = exec_acts_create(n, mb);
    int64_t n_par;
    float *params = exec_net_params(n, &n_par);
    v->acts_bytes = (double)exec_acts_bytes(a);
    v->recompute_bytes = (double)exec_net_recompute_bytes(n); /* the run's nets: a microbatch */
    v->seq_bytes = (double)exec_net_seq_bytes(n);
    v->param_bytes = (double)n_par * 4;
    int64_t in_n = exec_net_in_elems(n) * mb, out_n = exec_net_out_elems(n) * mb;
    float *x = exec_falloc(in_n), *dout = NULL, *din = NULL;
    int32_t *y = NULL;
    for (int64_t i = 0; i < in_n; i++) x[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    if (exec_net_has_loss(n)) {
        y = cl_malloc((size_t)mb * sizeof *y);
        for (int b = 0; b < mb; b++) y[b] = b % exec_net_classes(n);
    } else {
        dout = exec_falloc(out_n);
        for (int64_t i = 0; i < out_n; i++) dout[i] = (float)((i * 104729) % 1000) * 1e-6f - 5e-4f;
    }
    if (exec_net_needs_din(n)) din = exec_falloc(in_n);
    if (split) { /* one microbatch's passes as the schedule runs them, counted */
        const int L = st->last + 1 - st->first;
        prof_coll *per = cl_calloc((size_t)L * PROF_PASSES, sizeof *per);
        cc.into = per;
        exec_net_forward(n, a, x, y, mb, 1);
        if (p->schedule == SCHED_ZBH1) {
            exec_net_backward_input(n, a, dout, din, 1.0f / (float)p->batch);
            exec_net_backward_weight(n, a);
        } else {
            exec_net_backward(n, a, dout, din, 1.0f / (float)p->batch);
        }
        cc.into = NULL;
        exec_net_zero_grads(n);
        /* per sample; a fused weight gradient's with the input gradient's
         * (the simulator's B is both) */
        for (int l = 0; l < L; l++)
            for (int q = 0; q < PROF_PASSES; q++) {
                const prof_coll *c = &per[l * PROF_PASSES + q];
                prof_coll *to = &v->coll[q == PROF_W && p->schedule != SCHED_ZBH1 ? PROF_B : q];
                to->calls += c->calls;
                to->steps += c->steps;
                to->floats += c->floats / mb;
            }
        free(per);
    }
    exec_pipe_opts d;
    exec_pipe_defaults(&d);
    exec_sgd sgd;
    exec_sgd_init(&sgd, n, 0, p->optimizer == OPTIM_MOMENTUM ? d.momentum : 0, d.weight_decay);
    /* a data set like the one exec_val_measure trains on, read in a
     * shuffled order */
    exec_data set;
    memset(&set, 0, sizeof set);
    int64_t *perm = NULL, n_set = (int64_t)p->batch * EXEC_VAL_SET_BATCHES;
    int32_t *yb = NULL;
    if (gather) {
        const model_shape *sh = &p->model.input;
        exec_data_synthetic(&set, n_set, sh->ndim == 3 ? (int)sh->d[0] : 1,
                            sh->ndim == 3 ? (int)sh->d[1] : 1,
                            sh->ndim == 3 ? (int)sh->d[2] : (int)sh->d[0],
                            p->model.classes > 0 ? p->model.classes : 2, 1, 0);
        perm = cl_malloc((size_t)n_set * sizeof *perm);
        for (int64_t i = 0; i < n_set; i++) perm[i] = (i * 7919) % n_set; /* 7919 is prime */
        yb = cl_malloc((size_t)mb * sizeof *yb);
    }
    float *stashed = versions ? exec_falloc(n_par) : NULL;
    if (stashed) memcpy(stashed, params, (size_t)n_par * 4);
    /* between two updates the runtime runs every microbatch of the
     * iteration through the stage (flushing kinds) or one (PipeDream, FBP);
     * the update then finds the caches as those passes left them */
    int k = sched_is_async(p->schedule) ? 1 : (p->n_micro < 16 ? p->n_micro : 16);
    exec_acts **acts = cl_malloc((size_t)k * sizeof *acts);
    acts[0] = a;
    for (int j = 1; j < k; j++) acts[j] = exec_acts_create(n, mb);
    size_t nk = (size_t)reps * (size_t)k;
    double *tu = cl_malloc((size_t)reps * sizeof *tu), *tv = cl_malloc((size_t)reps * sizeof *tv),
           *tc = cl_malloc(nk * sizeof *tc), *tg = cl_malloc(nk * sizeof *tg),
           *ts = cl_malloc(nk * sizeof *ts);
    int64_t pos = 0;
    for (int r = -3; r < reps; r++) {
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)(r < 0 ? 0 : r) * (size_t)k + (size_t)j;
            if (gather) {
                double t0 = exec_now();
                exec_data_gather(&set, perm + pos, mb, x, yb);
                pos = (pos + mb) % (n_set - mb);
                if (r >= 0) tg[at] = exec_now() - t0;
            }
            exec_net_forward(n, acts[j], x, y, mb, 1);
            if (send) {
                double t0 = exec_now();
                exec_msg *m = exec_msg_new(out_n * 4);
                memcpy(exec_msg_data(m), exec_acts_output(acts[j]), (size_t)out_n * 4);
                double t1 = exec_now();
                exec_msg_free(m); /* the receiver frees it, on its own clock */
                if (r >= 0) tc[at] = t1 - t0;
            }
        }
        for (int j = 0; j < k; j++) {
            double t0 = exec_now();
            if (stashed) swap_block(params, stashed, n_par);
            double t1 = exec_now();
            exec_net_backward(n, acts[j], dout, din, 1.0f / (float)p->batch);
            double t2 = exec_now();
            if (stashed) swap_block(params, stashed, n_par);
            if (r >= 0) ts[(size_t)r * (size_t)k + (size_t)j] = (t1 - t0) + (exec_now() - t2);
        }
        double t0 = exec_now();
        float *version = NULL;
        if (versions) {
            version = exec_falloc(n_par);
            memcpy(version, params, (size_t)n_par * 4);
        }
        double t1 = exec_now();
        exec_sgd_step(&sgd, n);
        if (r >= 0) {
            tu[r] = exec_now() - t1;
            tv[r] = t1 - t0;
        }
        free(version);
    }
    for (int j = 1; j < k; j++) exec_acts_destroy(acts[j]);
    free(acts);
    v->update_s = cl_median(tu, reps);
    v->version_s = versions ? cl_median(tv, reps) : 0;
    v->swap_s = versions ? cl_median(ts, (int)nk) : 0;
    v->copy_s = send ? cl_median(tc, (int)nk) : 0;
    v->input_s = gather ? cl_median(tg, (int)nk) : 0;
    free(tu);
    free(tv);
    free(tc);
    free(tg);
    free(ts);
    free(stashed);
    free(perm);
    free(yb);
    exec_data_free(&set);
    exec_sgd_free(&sgd);
    free(x);
    free(y);
    free(dout);
    free(din);
    exec_acts_destroy(a);
    exec_net_destroy(n);
    return CL_OK;
}

static void crew_noop(void *ctx, int rank)
{
    (void)ctx, (void)rank;
}

/* Median seconds of one exec_tp_crew_run of nothing on t ranks: the two
 * rendezvous every compute op of a tensor-parallel stage pays to start its
 * ranks and to wait for them (3 warm-up runs, then reps timed). */
static double crew_run_s(int t, int reps)
{
    exec_tp_crew *c = exec_tp_crew_create(t, 0, NULL);
    double *v = cl_malloc((size_t)reps * sizeof *v);
    for (int r = -3; r < reps; r++) {
        double t0 = exec_now();
        exec_tp_crew_run(c, crew_noop, NULL);
        if (r >= 0) v[r] = exec_now() - t0;
    }
    double med = cl_median(v, reps);
    free(v);
    exec_tp_crew_destroy(c);
    return med;
}

int exec_val_costs(plan *p, const prof *pf, int reps, int ctx, exec_val_extra *x,
                   const char *file, cl_err *e)
{
    int rc = prof_check_model(pf, &p->model, file, e);
    if (rc) return rc;
    double b = p->microbatch > 0 ? p->microbatch : 1;
    const int given = x && (ctx & EXEC_VAL_CTX_REPLAY) && (ctx & EXEC_VAL_CTX_REPLAYED);
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
        if (!x) continue;
        exec_val_extra *v = &x[s];
        const exec_val_extra kept = *v; /* the caller's replay (EXEC_VAL_CTX_REPLAYED) */
        memset(v, 0, sizeof *v);
        if (given) {
            v->fwd_ctx_s = kept.fwd_ctx_s;
            v->bwd_in_ctx_s = kept.bwd_in_ctx_s;
            v->bwd_w_ctx_s = kept.bwd_w_ctx_s;
            v->ar_ctx_s = kept.ar_ctx_s;
        }
        /* PipeDream stashes a weight version at an update while microbatches
         * that used it are in flight, and runs their backward with it: on
         * every stage but the last */
        int P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
        int versions = p->schedule == SCHED_PIPEDREAM && s % P < P - 1;
        rc = stage_extras(p, st, s + 1 < p->n_stages, s == 0, versions, reps, v, file, e);
        if (rc) return rc;
        v->fwd_layers_s = f;
        v->bwd_in_layers_s = bi;
        v->bwd_w_layers_s = bw;
        v->stash_layers_bytes = stash;
    }
    if (x && (ctx & EXEC_VAL_CTX_REPLAY) && !given)
        rc = exec_val_replay(p, reps, (ctx & EXEC_VAL_CTX_XCORE) != 0, x, file, e);
    if (!x || rc) return rc;
    const double crew_s =
        plan_tensor(p) > 1 && !(ctx & EXEC_VAL_CTX_TP_MPI) ? crew_run_s(plan_tensor(p), reps) : 0;
    for (int s = 0; s < p->n_stages; s++) {
        plan_stage *st = &p->stages[s];
        exec_val_extra *v = &x[s];
        if (ctx & EXEC_VAL_CTX_REPLAY) {
            st->fwd_s = v->fwd_ctx_s;
            st->bwd_in_s = v->bwd_in_ctx_s;
            st->bwd_w_s = v->bwd_w_ctx_s;
        }
        /* a stage split over t ranks starts every compute op on its crew
         * (pipe_tp.h): W is an op of its own in zb-h1 only */
        if (exec_net_has_split(&p->model, st->first, st->last + 1)) v->crew_s = crew_s;
        st->fwd_s += v->copy_s + v->input_s + v->crew_s;
        st->bwd_in_s += v->swap_s + v->crew_s;
        if (p->schedule == SCHED_ZBH1) st->bwd_w_s += v->crew_s;
        st->stash_bytes = v->acts_bytes;
        st->param_bytes = v->param_bytes;
        st->update_s = v->update_s + v->version_s + v->crew_s;
    }
    return CL_OK;
}

void exec_val_tp_comm(plan *p, const exec_val_extra *x, const cluster_link *link)
{
    const int t = plan_tensor(p);
    const double b = p->microbatch > 0 ? p->microbatch : 1;
    for (int s = 0; s < p->n_stages && t > 1; s++) {
        plan_stage *st = &p->stages[s];
        const prof_coll *c = x[s].coll;
        st->fwd_s += prof_coll_s(&c[PROF_F], t, b, link->bw_Bps, link->latency_s);
        st->bwd_in_s += prof_coll_s(&c[PROF_B], t, b, link->bw_Bps, link->latency_s);
        st->bwd_w_s += prof_coll_s(&c[PROF_W], t, b, link->bw_Bps, link->latency_s);
    }
}

int exec_val_tp_link(const plan *p, const exec_val_extra *x, cluster_link *link)
{
    const int t = plan_tensor(p);
    const double b = p->microbatch > 0 ? p->microbatch : 1;
    double meas = 0, bytes = 0, steps = 0;
    for (int s = 0; s < p->n_stages && t > 1; s++) {
        if (!(x[s].ar_ctx_s > 0)) continue;
        for (int k = 0; k < PROF_PASSES; k++) {
            const prof_coll *c = &x[s].coll[k];
            meas += c->calls * x[s].ar_ctx_s;
            bytes += prof_coll_s(c, t, b, link->bw_Bps, 0);
            steps += c->steps * (t - 1);
        }
    }
    if (!(steps > 0)) return 0;
    link->latency_s = fmax(0, (meas - bytes) / steps);
    return 1;
}

void exec_val_layer_costs(plan *p, const exec_val_extra *x)
{
    for (int s = 0; s < p->n_stages; s++) {
        plan_stage *st = &p->stages[s];
        const exec_val_extra *v = &x[s];
        if (!(v->fwd_ctx_s > 0)) continue;
        st->fwd_s += v->fwd_layers_s - v->fwd_ctx_s;
        st->bwd_in_s += v->bwd_in_layers_s - v->bwd_in_ctx_s;
        st->bwd_w_s += v->bwd_w_layers_s - v->bwd_w_ctx_s;
    }
}

int exec_val_profile(const plan *p, int reps, prof *pf, const char *file, cl_err *e)
{
    int64_t b = p->microbatch > 0 ? p->microbatch : 1;
    return exec_profile_net(&p->model, file, &b, 1, 3, reps, 1, plan_tensor(p),
                            exec_pipe_net_flags(p), pf, e);
}

int exec_val_post_s(exec_pipe_backend backend, double *post_s, double *handoff_s, cl_err *e)
{
    exec_link_opts o;
    exec_link_opts_default(&o);
    o.backend = backend == EXEC_PIPE_MPI ? EXEC_LINK_MPI : EXEC_LINK_THREADS;
    o.max_bytes = 4096;
    o.seconds_per_size = 0.02;
    o.gap_s = EXEC_VAL_POST_GAP_S;
    exec_link_sample s[EXEC_LINK_MAX_SIZES];
    int n = 0;
    int rc = exec_link_measure(&o, s, &n, e);
    if (rc) return rc;
    double v[EXEC_LINK_MAX_SIZES];
    for (int i = 0; i < n; i++) v[i] = s[i].send_exp_s;
    *post_s = cl_median(v, n);
    if (handoff_s) {
        for (int i = 0; i < n; i++) v[i] = s[i].handoff_s;
        *handoff_s = cl_median(v, n);
    }
    return CL_OK;
}

void exec_val_add_posts(plan *p, exec_val_extra *x, double post_s)
{
    for (int s = 0; s < p->n_stages; s++) {
        double f = s + 1 < p->n_stages ? post_s : 0, b = s > 0 ? post_s : 0;
        p->stages[s].fwd_s += f;
        p->stages[s].bwd_in_s += b;
        if (x) {
            x[s].post_f_s = f;
            x[s].post_b_s = b;
        }
    }
}

cluster_link exec_val_link(const cluster_link *profiled, exec_pipe_backend backend, double post_s)
{
    cluster_link l = *profiled;
    l.latency_s -= post_s;
    if (!(l.latency_s > 0) || !isfinite(l.latency_s)) l.latency_s = 0;
    if (backend == EXEC_PIPE_THREADS || !(l.bw_Bps > 0) || !isfinite(l.bw_Bps))
        l.bw_Bps = EXEC_VAL_HANDOFF_BPS;
    return l;
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

int exec_val_predict(const plan *p, int n_iter, const char *trace, sim_result *r, cl_err *e)
{
    memset(r, 0, sizeof *r);
    if (n_iter <= 0) n_iter = sched_default_iters(p->schedule, sched_fill_depth(p), p->n_micro);
    sched sc;
    int rc = sched_build(p, p->schedule, p->n_micro, n_iter, &sc, e);
    if (!rc) {
        sim_opts o = {.record = trace != NULL};
        sim *sm = sim_create(p, &sc, &o, e);
        if (!sm) rc = e->code ? e->code : CL_EINPUT;
        else rc = sim_run(sm, r, e);
        if (!rc && trace) rc = sim_write_trace(sm, trace, e);
        sim_destroy(sm);
        sched_free(&sc);
    }
    return rc;
}

/* ----------------------------------------------------------- measure -- */

int exec_val_measure(const plan *p, exec_pipe_backend backend, int tensor_mpi, int n_iter,
                     const char *file, const char *trace, exec_pipe_result *r, cl_err *e)
{
    memset(r, 0, sizeof *r);
    const model *m = &p->model;
    const model_shape *s = &m->input;
    int C = s->ndim == 3 ? (int)s->d[0] : 1, H = s->ndim == 3 ? (int)s->d[1] : 1,
        W = s->ndim == 3 ? (int)s->d[2] : (int)s->d[0];
    int classes = m->classes > 0 ? m->classes : 2;
    exec_pipe_opts o;
    exec_pipe_defaults(&o);
    /* EXEC_VAL_SET_BATCHES batches (the runtime takes batches in a
     * shuffled order and starts a new epoch when they run out) */
    int64_t batches = EXEC_VAL_SET_BATCHES;
    exec_data train;
    exec_data_synthetic(&train, (int64_t)p->batch * batches, C, H, W, classes, o.seed, 0);
    o.backend = backend;
    o.tensor_mpi = tensor_mpi;
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

double exec_val_measured_iteration(const plan *p, const exec_pipe_result *r, int *first,
                                   int *last)
{
    int n = r->n_iter;
    int f = 1, l = n - 1; /* flushing: all but the cold first iteration */
    if (sched_is_async(p->schedule))
        sched_steady_window(p->schedule, sched_fill_depth(p), p->n_micro, n, &f, &l);
    if (f >= n) f = 0;
    *first = f;
    *last = l;
    if (n <= 0) return 0;
    return f ? (r->iter_end_s[l] - r->iter_end_s[f - 1]) / (l - f + 1) : r->iter_end_s[l] / (l + 1);
}

/* Median of v[first .. last] (copied; v is left alone); 0 for an empty window. */
static double window_median(const double *v, int first, int last)
{
    int n = last - first + 1;
    if (n <= 0) return 0;
    double *c = cl_malloc((size_t)n * sizeof *c);
    memcpy(c, v + first, (size_t)n * sizeof *c);
    double m = cl_median(c, n);
    free(c);
    return m;
}

double exec_val_measured_iteration_median(const plan *p, const exec_pipe_result *r)
{
    int first, last;
    exec_val_measured_iteration(p, r, &first, &last);
    return window_median(r->iter_s, first, last);
}

/* ----------------------------------------------------------- compare -- */

double exec_val_off_clock(const plan *p, const exec_val_extra *x, int device)
{
    double off = 0;
    int async = sched_is_async(p->schedule);
    for (int s = 0; x && s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        for (int k = 0; k < st->n_replicas; k++) {
            if (st->devices[k] != device) continue;
            int r = st->n_replicas, c = (p->n_micro - k + r - 1) / r;
            off += c * (x[s].post_f_s + x[s].post_b_s) +
                   (async ? c : 1) * x[s].version_s;
        }
    }
    return off;
}

double exec_val_held(const plan *p, const exec_val_extra *x, int device)
{
    double held = 0;
    for (int s = 0; x && s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        int mine = p->schedule == SCHED_SEQUENTIAL; /* one worker holds every stage */
        for (int k = 0; k < st->n_replicas; k++) mine |= st->devices[k] == device;
        if (mine) held += x[s].recompute_bytes + x[s].seq_bytes;
    }
    return held;
}

int exec_val_compare(const plan *p, const exec_val_extra *x, const sim_result *pred,
                     const exec_pipe_result *meas, exec_val_report *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    if (pred->n_dev != meas->n_workers)
        return cl_fail(e, CL_ERUN, "the simulator has %d workers, the run %d", pred->n_dev,
                       meas->n_workers);
    int first, last;
    out->iteration_mean_s = exec_val_measured_iteration(p, meas, &first, &last);
    double it = exec_val_measured_iteration_median(p, meas);
    out->first_iter = first;
    out->last_iter = last;
    out->n_iter = meas->n_iter;
    exec_val_qty_set(&out->iteration_s, pred->iteration_s, it);
    double samples = (double)p->microbatch * p->n_micro;
    exec_val_qty_set(&out->throughput, pred->throughput, it > 0 ? samples / it : 0);
    out->n_workers = meas->n_workers;
    out->w = cl_calloc((size_t)out->n_workers, sizeof *out->w);
    for (int i = 0; i < out->n_workers; i++) {
        const sim_dev_result *d = &pred->dev[i];
        const exec_pipe_worker *w = &meas->w[i];
        if (d->device != w->device) {
            exec_val_report_free(out);
            return cl_fail(e, CL_ERUN, "worker %d runs on device %d in the simulator, %d in the run",
                           i, d->device, w->device);
        }
        exec_val_worker *v = &out->w[i];
        v->device = d->device;
        v->stage = d->stage;
        v->n_stages = d->n_stages;
        exec_val_qty_set(&v->busy_s, d->busy_s - exec_val_off_clock(p, x, d->device),
                         window_median(w->iter_busy_s, first, last));
        exec_val_qty_set(&v->peak_mem, d->peak_mem_bytes + exec_val_held(p, x, d->device),
                         w->peak_mem_bytes);
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
