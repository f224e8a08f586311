/* test_pipe_ref.c - helpers and references of the pipe_* suites (test_pipe.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "test.h"
#include "test_pipe.h"

int tp_plan(const char *name, plan *p)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/pipe/%s", name);
    cl_err e = {0};
    int rc = plan_load(p, path, &e);
    if (rc) {
        fprintf(stderr, "\n%s\n", e.msg);
        CU_FAIL("fixture plan does not load");
    }
    return rc;
}

void tp_data(exec_data *train, exec_data *test)
{
    double mean, sd;
    exec_data_synthetic(train, 256, 1, 6, 6, 4, 3, 0);
    exec_data_synthetic(test, 64, 1, 6, 6, 4, 3, 1);
    exec_data_normalise(train, test, &mean, &sd);
}

void tp_opts(exec_pipe_opts *o, const exec_data *train, const char *file, int iterations)
{
    exec_pipe_defaults(o);
    o->train = train;
    o->file = file;
    o->iterations = iterations;
    o->lr = 0.05;
    o->momentum = 0.9;
    o->weight_decay = 1e-3;
    o->lr_schedule = EXEC_LR_CONSTANT;
    o->seed = 7;
    o->keep_params = 1;
    o->stall_s = 60;
}

int tp_setup(tp_fixture *f, const char *name, const char *file, int iterations)
{
    if (tp_plan(name, &f->p)) return 1;
    tp_data(&f->train, &f->test);
    tp_opts(&f->o, &f->train, file, iterations);
    return 0;
}

void tp_free(tp_fixture *f)
{
    exec_data_free(&f->train);
    exec_data_free(&f->test);
    plan_free(&f->p);
}

void tp_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r)
{
    cl_err e = {0};
    int rc = exec_pipe_run(p, o, r, &e);
    if (rc) fprintf(stderr, "\n%s: %s\n", o->file, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
}

/* The epoch order of sequential training (exec/run/train.c): an mt19937 stream
 * seeded from the seed through a fixed constant, one shuffle per epoch. */
typedef struct order {
    gsl_rng *rng;
    int64_t *perm, n, epoch;
} order;

static void order_init(order *o, uint64_t seed, int64_t n)
{
    o->rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(o->rng, (unsigned long)((seed * 0x9e3779b97f4a7c15ULL + 0x5851f42dULL) >> 32));
    o->perm = cl_malloc((size_t)n * sizeof *o->perm);
    o->n = n;
    o->epoch = -1;
}

static const int64_t *order_at(order *o, int64_t it, int batch, int micro, int mb)
{
    int64_t ipe = o->n / batch;
    while (o->epoch < it / ipe) {
        exec_shuffle(o->perm, o->n, o->rng);
        o->epoch++;
    }
    return o->perm + (it % ipe) * batch + (int64_t)micro * mb;
}

static void order_free(order *o)
{
    gsl_rng_free(o->rng);
    free(o->perm);
}

static float *flatten(exec_net **nets, int n_nets, int64_t *n)
{
    int64_t tot = 0;
    for (int s = 0; s < n_nets; s++)
        for (int t = 0; t < exec_net_n_tensors(nets[s]); t++) tot += exec_net_tensor(nets[s], t)->n;
    float *out = cl_malloc((size_t)(tot ? tot : 1) * sizeof *out);
    int64_t k = 0;
    for (int s = 0; s < n_nets; s++)
        for (int t = 0; t < exec_net_n_tensors(nets[s]); t++) {
            const exec_tensor *x = exec_net_tensor(nets[s], t);
            memcpy(out + k, x->data, (size_t)x->n * sizeof *out);
            k += x->n;
        }
    *n = tot;
    return out;
}

void tp_ref_sync(const plan *p, const exec_pipe_opts *o, int iters, float **params,
                 int64_t *n_params, double *iter_loss)
{
    const model *m = &p->model;
    const exec_data *d = o->train;
    cl_err e = {0};
    exec_net *net;
    CU_ASSERT_EQUAL_FATAL(exec_net_create(&net, m, 0, m->n_layers, p->microbatch, o->seed, 0, "ref", &e), CL_OK);
    exec_acts *a = exec_acts_create(net, p->microbatch);
    exec_sgd sgd;
    exec_sgd_init(&sgd, net, o->lr, o->momentum, o->weight_decay);
    order ord;
    order_init(&ord, o->seed, d->n);
    float *x = cl_malloc((size_t)p->microbatch * (size_t)d->dim * sizeof *x);
    int32_t *y = cl_malloc((size_t)p->microbatch * sizeof *y);
    for (int it = 0; it < iters; it++) {
        double loss = 0;
        for (int i = 0; i < p->n_micro; i++) {
            exec_data_gather(d, order_at(&ord, it, p->batch, i, p->microbatch), p->microbatch, x, y);
            exec_net_forward(net, a, x, y, p->microbatch, 1);
            loss += exec_acts_loss_sum(a);
            exec_net_backward_input(net, a, NULL, NULL, 1.0f / (float)p->batch);
            exec_net_backward_weight(net, a);
        }
        exec_sgd_step(&sgd, net);
        if (iter_loss) iter_loss[it] = loss / p->batch;
    }
    *params = flatten(&net, 1, n_params);
    free(x);
    free(y);
    order_free(&ord);
    exec_sgd_free(&sgd);
    exec_acts_destroy(a);
    exec_net_destroy(net);
}

void tp_ref_async(const plan *p, const exec_pipe_opts *o, int iters, int stash, float **params,
                  int64_t *n_params)
{
    const model *m = &p->model;
    const exec_data *d = o->train;
    int S = p->n_stages, G = iters * p->n_micro, mb = p->microbatch;
    cl_err e = {0};
    exec_net **net = cl_calloc((size_t)S, sizeof *net);
    exec_acts **a = cl_calloc((size_t)S, sizeof *a);
    exec_sgd *sgd = cl_calloc((size_t)S, sizeof *sgd);
    float ***ver = cl_calloc((size_t)S, sizeof *ver); /* ver[s][v]: weights after v updates */
    int64_t *nf = cl_calloc((size_t)S, sizeof *nf);
    for (int s = 0; s < S; s++) {
        CU_ASSERT_EQUAL_FATAL(exec_net_create(&net[s], m, p->stages[s].first, p->stages[s].last + 1, mb,
                                              o->seed, 0, "ref", &e), CL_OK);
        a[s] = exec_acts_create(net[s], mb);
        exec_sgd_init(&sgd[s], net[s], o->lr, o->momentum, o->weight_decay / p->n_micro);
        ver[s] = cl_calloc((size_t)G + 1, sizeof *ver[s]);
        float *w = exec_net_params(net[s], &nf[s]);
        ver[s][0] = cl_malloc((size_t)nf[s] * sizeof(float));
        memcpy(ver[s][0], w, (size_t)nf[s] * sizeof(float));
    }
    order ord;
    order_init(&ord, o->seed, d->n);
    float *x = cl_malloc((size_t)mb * (size_t)d->dim * sizeof *x);
    int32_t *y = cl_malloc((size_t)mb * sizeof *y);
    float **buf = cl_calloc((size_t)S + 1, sizeof *buf); /* stage inputs / gradients */
    for (int g = 0; g < G; g++) {
        exec_data_gather(d, order_at(&ord, g / p->n_micro, p->batch, g % p->n_micro, mb), mb, x, y);
        const float *in = x;
        for (int s = 0; s < S; s++) {
            int fv = g - (S - s) + 1 > 0 ? g - (S - s) + 1 : 0;
            memcpy(exec_net_params(net[s], NULL), ver[s][fv], (size_t)nf[s] * sizeof(float));
            exec_net_forward(net[s], a[s], in, s == S - 1 ? y : NULL, mb, 1);
            in = exec_acts_output(a[s]);
        }
        float *dout = NULL;
        for (int s = S - 1; s >= 0; s--) {
            int fv = g - (S - s) + 1 > 0 ? g - (S - s) + 1 : 0;
            memcpy(exec_net_params(net[s], NULL), ver[s][stash ? fv : g], (size_t)nf[s] * sizeof(float));
            float *din = NULL;
            if (s > 0) din = cl_calloc((size_t)mb * (size_t)exec_net_in_elems(net[s]), sizeof *din);
            exec_net_backward_input(net[s], a[s], dout, din, 1.0f / (float)p->batch);
            exec_net_backward_weight(net[s], a[s]);
            free(dout);
            dout = din;
            /* the update applies to the current weights (version g) */
            memcpy(exec_net_params(net[s], NULL), ver[s][g], (size_t)nf[s] * sizeof(float));
            exec_sgd_step(&sgd[s], net[s]);
            ver[s][g + 1] = cl_malloc((size_t)nf[s] * sizeof(float));
            memcpy(ver[s][g + 1], exec_net_params(net[s], NULL), (size_t)nf[s] * sizeof(float));
        }
        free(dout);
    }
    *params = flatten(net, S, n_params); /* every net holds its version G */
    for (int s = 0; s < S; s++) {
        for (int v = 0; v <= G; v++) free(ver[s][v]);
        free(ver[s]);
        exec_sgd_free(&sgd[s]);
        exec_acts_destroy(a[s]);
        exec_net_destroy(net[s]);
    }
    free(buf);
    free(ver);
    free(nf);
    free(sgd);
    free(a);
    free(net);
    free(x);
    free(y);
    order_free(&ord);
}

double tp_rel_err(const exec_pipe_result *r, const float *ref, int64_t n_ref)
{
    if (!r->params || r->n_params != n_ref) return 1e30;
    double all = 1e-30, worst = 0;
    for (int64_t i = 0; i < n_ref; i++) all = fmax(all, fabs((double)ref[i]));
    for (int t = 0; t < r->n_tensors; t++) {
        const exec_pipe_tensor *x = &r->tensors[t];
        double diff = 0, mag = 0;
        for (int64_t i = 0; i < x->n; i++) {
            diff = fmax(diff, fabs((double)r->params[x->offset + i] - ref[x->offset + i]));
            mag = fmax(mag, fabs((double)ref[x->offset + i]));
        }
        /* a tensor that stays at rounding level (conv1.bias before a
         * batchnorm: its gradient is zero up to rounding) is measured
         * against the model's largest weight */
        double err = diff / fmax(mag, 1e-3 * all);
        if (getenv("TP_DEBUG") && err > 1e-6) fprintf(stderr, "  %s: %g of %g\n", x->name, diff, mag);
        worst = fmax(worst, err);
    }
    return worst;
}

/* Set name=value for the child, remembering the old value in *old (NULL:
 * unset); restore_env puts it back. */
static void push_env(const char *name, const char *value, char **old)
{
    *old = getenv(name) ? cl_strdup(getenv(name)) : NULL;
    setenv(name, value, 1);
}

static void restore_env(const char *name, char *old)
{
    if (old) setenv(name, old, 1);
    else unsetenv(name);
    free(old);
}

int tp_mpirun(int np, const char *args, char **out, char **err)
{
    if (!test_which("mpirun")) {
        CU_FAIL("mpirun is missing (hint: apt-get install openmpi-bin, or make deps)");
        *out = cl_strdup("");
        *err = cl_strdup("mpirun missing");
        return -1;
    }
    const char *bin = getenv("CLEAVE_BIN");
    if (!bin) bin = "build/cleave";
    /* Root allowed; under ASan, LSan's report leaves out what Open MPI keeps
     * until exit (tests/lsan.supp): MCA components stay mapped and stacks
     * are unwound fully so those frames can be named.  Set in this
     * process's environment for the child (test_run_cli starts it without
     * a shell), then restored. */
    enum { N_ENV = 6 };
    static const char *const names[N_ENV] = {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                                             "OMPI_MCA_mca_base_component_disable_dlclose", "LSAN_OPTIONS",
                                             "ASAN_OPTIONS", "CLEAVE_BIN"};
    char *cwd = getcwd(NULL, 0), lsan[1024], asan_opts[2048], *old[N_ENV];
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(lsan, sizeof lsan, "suppressions=%s/tests/lsan.supp:print_suppressions=0", cwd);
    snprintf(asan_opts, sizeof asan_opts, "fast_unwind_on_malloc=0%s%s", asan ? ":" : "", asan ? asan : "");
    free(cwd);
    char *bin_copy = cl_strdup(bin);
    const char *values[N_ENV] = {"1", "1", "1", lsan, asan_opts, np > 0 ? "mpirun" : bin_copy};
    for (int i = 0; i < N_ENV; i++) push_env(names[i], values[i], &old[i]);
    char full[4096];
    if (np <= 0)
        snprintf(full, sizeof full, "%s", args);
    else
        snprintf(full, sizeof full,
             "--oversubscribe --bind-to none -np %d --mca btl self,vader "
             "--mca btl_vader_single_copy_mechanism none -x LSAN_OPTIONS -x ASAN_OPTIONS %s %s",
             np, bin_copy, args);
    /* test_run_cli runs CLEAVE_BIN with the arguments: mpirun, found on PATH */
    int st = test_run_cli(full, out, err);
    for (int i = N_ENV - 1; i >= 0; i--) restore_env(names[i], old[i]);
    free(bin_copy);
    return st;
}
