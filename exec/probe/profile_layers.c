/* profile.c - per-layer and per-step timing on this machine (profile.h). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "models/tfm_rank.h"
#include "profile_layers.h"

/* Median, standard deviation and minimum of n samples (sorted in place);
 * min may be NULL. */
static void stats(double *v, int n, double *median, double *sd, double *min)
{
    gsl_sort(v, 1, (size_t)n);
    *median = gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
    *sd = n > 1 ? gsl_stats_sd(v, 1, (size_t)n) : 0;
    if (min) *min = v[0];
}

/* A random standard-normal input batch and uniform labels. */
static void random_batch(const model *m, int B, uint64_t seed, float **x, int32_t **y)
{
    int64_t dim = model_shape_elems(&m->input);
    *x = exec_falloc((int64_t)B * dim);
    *y = cl_malloc((size_t)B * sizeof **y);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, (unsigned long)(seed & 0xffffffffu));
    for (int64_t i = 0; i < B * dim; i++) (*x)[i] = (float)gsl_ran_gaussian(r, 1.0);
    int classes = m->classes > 0 ? m->classes : 1;
    for (int b = 0; b < B; b++) (*y)[b] = (int32_t)gsl_rng_uniform_int(r, (unsigned long)classes);
    gsl_rng_free(r);
}

/* The refusal of a model without a loss to train against. */
static int no_loss(const char *file, cl_err *e)
{
    return cl_fail(e, CL_EINPUT, "%s: layers: profiling runs training steps, which need a model ending in softmax_xent (hint: add the loss layer)",
                   file);
}

/* What the measurements run on: the whole model as one stage, an acts for
 * `batch` samples and a random batch.  CL_EINPUT (nothing to free) when the
 * executor cannot run m or m has no loss to train against. */
typedef struct timed_net {
    exec_net *n;
    exec_acts *a;
    float *x;
    int32_t *y;
} timed_net;

static int timed_net_create(timed_net *b, const model *m, const char *file, int batch,
                            uint64_t seed, int tensor, int flags, cl_err *e)
{
    int rc = exec_net_create_solo(&b->n, m, 0, m->n_layers, batch, seed, flags, tensor, file, e);
    if (rc) return rc;
    if (!exec_net_has_loss(b->n)) {
        exec_net_destroy(b->n);
        return no_loss(file, e);
    }
    b->a = exec_acts_create(b->n, batch);
    random_batch(m, batch, seed, &b->x, &b->y);
    return CL_OK;
}

static void timed_net_destroy(timed_net *b)
{
    free(b->x);
    free(b->y);
    exec_acts_destroy(b->a);
    exec_net_destroy(b->n);
}

/* exec_profile_batch on rank 0's share of a `tensor`-way split (1: the
 * whole model), the net built with exec_net flags `flags`. */
static int profile_batch(const model *m, const char *file, int batch, int warmup, int reps,
                         uint64_t seed, int tensor, int flags, exec_layer_time *t,
                         exec_step_time *st, cl_err *e)
{
    assert(reps >= 1 && warmup >= 0);
    timed_net b;
    int rc = timed_net_create(&b, m, file, batch, seed, tensor, flags, e);
    if (rc) return rc;
    exec_net *n = b.n;
    exec_acts *a = b.a;
    const float *x = b.x;
    const int32_t *y = b.y;
    const int L = m->n_layers;
    exec_sgd sgd;
    exec_sgd_init(&sgd, n, 0, 0.9, 5e-4); /* rate 0: the weights, and so the work, stay put */
    /* samples[(pass * L + layer) * reps + r], then the steps' three series,
     * then the clocked steps' update times */
    double *v = cl_malloc((size_t)((3 * L + 4) * reps) * sizeof *v), *w = v + 3 * L * reps,
           *u = w + 3 * reps;
    exec_layer_clock *clk = cl_malloc((size_t)L * sizeof *clk);
    for (int r = -warmup; r < reps; r++) {
        memset(clk, 0, (size_t)L * sizeof *clk);
        exec_net_set_clock(n, clk);
        exec_net_forward(n, a, x, y, batch, 1);
        exec_net_backward(n, a, NULL, NULL, 1.0f / (float)batch);
        exec_net_set_clock(n, NULL);
        double tu = exec_now();
        exec_sgd_step(&sgd, n);
        if (r >= 0) u[r] = exec_now() - tu;
        if (st) {
            double t0 = exec_now();
            exec_net_forward(n, a, x, y, batch, 1);
            exec_net_backward(n, a, NULL, NULL, 1.0f / (float)batch);
            double t1 = exec_now();
            exec_sgd_step(&sgd, n);
            double t2 = exec_now();
            if (r >= 0) {
                w[r] = t1 - t0;
                w[reps + r] = t2 - t1;
                w[2 * reps + r] = t2 - t0;
            }
        }
        if (r < 0) continue;
        for (int l = 0; l < L; l++) {
            v[(0 * L + l) * reps + r] = clk[l].fwd_s;
            v[(1 * L + l) * reps + r] = clk[l].bwd_in_s;
            v[(2 * L + l) * reps + r] = clk[l].bwd_w_s;
        }
    }
    for (int l = 0; l < L; l++) {
        exec_layer_time *lt = &t[l];
        stats(v + (0 * L + l) * reps, reps, &lt->fwd_s, &lt->fwd_sd, &lt->fwd_min);
        stats(v + (1 * L + l) * reps, reps, &lt->bwd_in_s, &lt->bwd_in_sd, &lt->bwd_in_min);
        stats(v + (2 * L + l) * reps, reps, &lt->bwd_w_s, &lt->bwd_w_sd, &lt->bwd_w_min);
    }
    /* the update's median, shared out by parameter count */
    double upd, upd_sd;
    stats(u, reps, &upd, &upd_sd, NULL);
    int64_t np_all = 0;
    for (int k = 0; k < exec_net_n_tensors(n); k++) np_all += exec_net_tensor(n, k)->n;
    for (int l = 0; l < L; l++) t[l].update_s = 0;
    for (int k = 0; k < exec_net_n_tensors(n) && np_all > 0; k++) {
        const exec_tensor *et = exec_net_tensor(n, k);
        assert(et->layer >= 0 && et->layer < L);
        t[et->layer].update_s += upd * (double)et->n / (double)np_all;
    }
    if (st) {
        double sd;
        stats(w, reps, &st->fbw_s, &sd, &st->fbw_min);
        stats(w + reps, reps, &st->update_s, &sd, NULL);
        stats(w + 2 * reps, reps, &st->step_s, &sd, NULL);
    }
    free(v);
    free(clk);
    exec_sgd_free(&sgd);
    timed_net_destroy(&b);
    return CL_OK;
}

int exec_profile_batch(const model *m, const char *file, int batch, int warmup, int reps,
                       uint64_t seed, exec_layer_time *t, exec_step_time *st, cl_err *e)
{
    return profile_batch(m, file, batch, warmup, reps, seed, 1, 0, t, st, e);
}

int exec_profile_isolated(const model *m, const char *file, int batch, int warmup, int reps,
                          uint64_t seed, exec_layer_time *t, cl_err *e)
{
    assert(reps >= 1 && warmup >= 0);
    timed_net b;
    int rc = timed_net_create(&b, m, file, batch, seed, 1, 0, e);
    if (rc) return rc;
    for (int s = 0; s < 2; s++) {
        exec_net_forward(b.n, b.a, b.x, b.y, batch, 1);
        exec_net_backward(b.n, b.a, NULL, NULL, 1.0f / (float)batch);
    }
    double *v = cl_malloc((size_t)reps * sizeof *v);
    for (int l = 0; l < m->n_layers; l++) {
        const int prod = m->layers[l].kind == MODEL_CONV2D || m->layers[l].kind == MODEL_LINEAR;
        const int runs[3] = {prod, prod && exec_net_layer_needs_din(b.n, l),
                             prod && exec_net_layer_has_weights(b.n, l)};
        double *med[3] = {&t[l].fwd_s, &t[l].bwd_in_s, &t[l].bwd_w_s},
               *sd[3] = {&t[l].fwd_sd, &t[l].bwd_in_sd, &t[l].bwd_w_sd},
               *min[3] = {&t[l].fwd_min, &t[l].bwd_in_min, &t[l].bwd_w_min};
        t[l].update_s = 0;
        for (int p = 0; p < 3; p++) {
            *med[p] = *sd[p] = *min[p] = 0;
            if (!runs[p]) continue;
            for (int r = -warmup; r < reps; r++) {
                double t0 = exec_now();
                exec_net_run_pass(b.n, b.a, l, p);
                if (r >= 0) v[r] = exec_now() - t0;
            }
            stats(v, reps, med[p], sd[p], min[p]);
        }
    }
    free(v);
    timed_net_destroy(&b);
    return CL_OK;
}

void exec_cpu_name(char *buf, size_t cap)
{
    snprintf(buf, cap, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, cap, "%s", c);
        break;
    }
    fclose(f);
}

int exec_profile(const model *m, const char *file, const int64_t *batches, int n_batches,
                 int warmup, int reps, uint64_t seed, prof *p, cl_err *e)
{
    return exec_profile_tp(m, file, batches, n_batches, warmup, reps, seed, 1, p, e);
}

int exec_profile_tp(const model *m, const char *file, const int64_t *batches, int n_batches,
                    int warmup, int reps, uint64_t seed, int tensor, prof *p, cl_err *e)
{
    return exec_profile_net(m, file, batches, n_batches, warmup, reps, seed, tensor, 0, p, e);
}

int exec_profile_net(const model *m, const char *file, const int64_t *batches, int n_batches,
                     int warmup, int reps, uint64_t seed, int tensor, int flags, prof *p,
                     cl_err *e)
{
    memset(p, 0, sizeof *p);
    assert(n_batches >= 1 && n_batches <= PROF_MAX_POINTS);
    for (int k = 1; k < n_batches; k++)
        if (batches[k] <= batches[k - 1])
            return cl_fail(e, CL_EINPUT, "--batch: %lld does not exceed %lld (hint: list batch sizes in increasing order)",
                           (long long)batches[k], (long long)batches[k - 1]);
    /* stash bytes come from the executor's memory plan (what recomputation
     * keeps, with its flags); a split's collectives from a step of it */
    exec_net *plan;
    exec_tp_counter cc;
    int rc = exec_net_create_counted(&plan, &cc, m, 0, m->n_layers, 2, seed, flags, tensor, file, e);
    if (rc) return rc;
    if (tensor > 1 && !cc.solo) {
        exec_net_destroy(plan);
        return cl_fail(e, CL_EINPUT, "%s: layers: --tensor %d splits attention and mlp layers, and this model has none (hint: drop --tensor)",
                       file, tensor);
    }
    prof_coll *per = NULL;
    if (cc.solo) {
        /* a step of one sample and one of two, the weight gradient right
         * after the input gradient: what grows with the batch and what
         * does not */
        if (!exec_net_has_loss(plan)) {
            exec_net_destroy(plan);
            return no_loss(file, e);
        }
        const size_t n = (size_t)m->n_layers * PROF_PASSES;
        per = cl_calloc(2 * n, sizeof *per);
        exec_acts *a = exec_acts_create(plan, 2);
        float *x;
        int32_t *y;
        random_batch(m, 2, seed, &x, &y);
        for (int b = 1; b <= 2; b++) {
            cc.into = per + (size_t)(b - 1) * n;
            exec_net_forward(plan, a, x, y, b, 1);
            exec_net_backward(plan, a, NULL, NULL, 1.0f / (float)b);
        }
        cc.into = NULL;
        for (size_t i = 0; i < n; i++) { /* floats(b) = fixed + b per sample */
            const double f1 = per[i].floats, f2 = per[n + i].floats;
            per[i].floats = f2 - f1;
            per[i].fixed = 2 * f1 - f2;
        }
        free(x);
        free(y);
        exec_acts_destroy(a);
    }
    exec_layer_time *t = cl_calloc((size_t)m->n_layers, sizeof *t);
    prof_alloc(p, m->n_layers, n_batches);
    p->source = PROF_MEASURED;
    snprintf(p->model, sizeof p->model, "%s", m->name);
    snprintf(p->device, sizeof p->device, "cpu-core");
    char cpu[128];
    exec_cpu_name(cpu, sizeof cpu);
    snprintf(p->note, sizeof p->note,
             "cleave profile: one core of %.100s, OpenBLAS %.24s kernel on 1 thread; median of %d runs after %d warm-up",
             cpu, exec_blas_corename(), reps, warmup);
    for (int l = 0; l < m->n_layers; l++) {
        prof_layer *pl = &p->layers[l];
        snprintf(pl->name, sizeof pl->name, "%s", m->layers[l].name);
        uint64_t stash, wgrad;
        exec_net_layer_bytes(plan, l, &stash, &wgrad);
        pl->act_bytes = (double)m->layers[l].out_elems * 4;
        pl->stash_bytes = (double)stash;
        /* the net's own tensors of the layer: a split's shard */
        pl->param_bytes = 0;
        for (int k = 0; k < exec_net_n_tensors(plan); k++)
            if (exec_net_tensor(plan, k)->layer == l) pl->param_bytes += (double)exec_net_tensor(plan, k)->n * 4;
        if (per) memcpy(prof_coll_of(p, l), per + (size_t)l * PROF_PASSES, PROF_PASSES * sizeof *per);
    }
    free(per);
    exec_net_destroy(plan);
    /* a rank profile: rank 0's share, and how it runs */
    p->tensor = tensor > 1 ? tensor : 1;
    p->seq_par = tensor > 1 && (flags & EXEC_NET_SEQ_PAR);
    p->recompute = flags & EXEC_NET_RECOMPUTE_FULL ? TFM_RECOMP_FULL
                   : flags & EXEC_NET_RECOMPUTE  ? TFM_RECOMP_SELECTIVE
                                                 : TFM_RECOMP_NONE;
    for (int k = 0; k < n_batches && !rc; k++) {
        rc = profile_batch(m, file, (int)batches[k], warmup, reps, seed, tensor, flags, t, NULL, e);
        for (int l = 0; l < m->n_layers && !rc; l++) {
            prof_layer *pl = &p->layers[l];
            pl->batch[k] = (double)batches[k];
            pl->fwd_s[k] = t[l].fwd_s;
            pl->bwd_in_s[k] = t[l].bwd_in_s;
            pl->bwd_w_s[k] = t[l].bwd_w_s;
            pl->fwd_sd[k] = t[l].fwd_sd;
            pl->update_s += t[l].update_s / n_batches;
        }
    }
    free(t);
    if (rc) prof_free(p);
    return rc;
}

