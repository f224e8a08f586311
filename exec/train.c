/* train.c - the sequential training loop (train.h). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "gemm.h"
#include "optim.h"
#include "train.h"

struct exec_trainer {
    const model *m;
    exec_train_opts o;
    exec_net *net;
    exec_acts *acts;
    exec_sgd sgd;
    gsl_rng *shuffle;
    float *xb;             /* (batch, dim) minibatch being assembled */
    int32_t *yb;
    int64_t *perm;         /* current epoch's order */
    int64_t perm_n;
    int epoch;
    int64_t step, total_steps; /* for the schedule; total set by the first epoch */
    double t0;
};

void exec_train_defaults(exec_train_opts *o)
{
    /* chosen by the measurements in docs/executor.md */
    *o = (exec_train_opts){.epochs = 10, .batch = 64, .lr = 0.02, .momentum = 0.9,
                           .weight_decay = 5e-4, .schedule = EXEC_LR_COSINE, .seed = 1};
}

int exec_data_check(const exec_data *d, const model *m, const char *file, const char *what,
                    cl_err *e)
{
    const model_shape *s = &m->input;
    int64_t elems = model_shape_elems(s);
    int shape_ok = elems == d->dim &&
                   (s->ndim == 1 || (s->d[0] == d->C && s->d[1] == d->H && s->d[2] == d->W));
    if (!shape_ok) {
        char sh[96];
        model_shape_str(s, sh, sizeof sh);
        return cl_fail(e, CL_EINPUT, "%s: input.shape: the model takes %s, but the %s samples are [%d,%d,%d] (hint: train a model made for this data)",
                       file, sh, what, d->C, d->H, d->W);
    }
    if (d->classes > m->classes)
        return cl_fail(e, CL_EINPUT, "%s: classes: the model has %d classes, but the %s labels go up to %d (hint: make the last linear's out_features match the data)",
                       file, m->classes, what, d->classes - 1);
    if (d->n < 1)
        return cl_fail(e, CL_EINPUT, "the %s set is empty (hint: check --limit or the data files)", what);
    return CL_OK;
}

int exec_trainer_create(exec_trainer **out, const model *m, const char *file,
                        const exec_train_opts *o, cl_err *e)
{
    *out = NULL;
    assert(o->epochs >= 1 && o->batch >= 1);
    if (m->n_layers < 1 || m->layers[m->n_layers - 1].kind != MODEL_SOFTMAX_XENT)
        return cl_fail(e, CL_EINPUT, "%s: layers: training needs a model ending in softmax_xent (hint: add {\"kind\": \"softmax_xent\"} as the last layer)",
                       file);
    exec_net *net;
    int rc = exec_net_create(&net, m, 0, m->n_layers, o->batch, o->seed, 0, file, e);
    if (rc) return rc;
    exec_trainer *t = cl_calloc(1, sizeof *t);
    t->m = m;
    t->o = *o;
    t->net = net;
    t->acts = exec_acts_create(net, o->batch);
    exec_sgd_init(&t->sgd, net, o->lr, o->momentum, o->weight_decay);
    t->shuffle = gsl_rng_alloc(gsl_rng_mt19937);
    /* its own stream: a different constant from the net's per-layer ones */
    gsl_rng_set(t->shuffle, (unsigned long)((o->seed * 0x9e3779b97f4a7c15ULL + 0x5851f42dULL) >> 32));
    int64_t dim = exec_net_in_elems(net);
    t->xb = exec_falloc((int64_t)o->batch * dim);
    t->yb = cl_malloc((size_t)o->batch * sizeof *t->yb);
    *out = t;
    return CL_OK;
}

void exec_trainer_destroy(exec_trainer *t)
{
    if (!t) return;
    exec_acts_destroy(t->acts);
    exec_sgd_free(&t->sgd);
    exec_net_destroy(t->net);
    gsl_rng_free(t->shuffle);
    free(t->xb);
    free(t->yb);
    free(t->perm);
    free(t);
}

exec_net *exec_trainer_net(exec_trainer *t) { return t->net; }

static double current_lr(const exec_trainer *t)
{
    if (t->o.schedule == EXEC_LR_CONSTANT || t->total_steps <= 0) return t->o.lr;
    double f = (double)t->step / (double)t->total_steps;
    if (f > 1) f = 1;
    return t->o.lr * 0.5 * (1 + cos(M_PI * f));
}

double exec_trainer_step(exec_trainer *t, const float *x, const int32_t *y, int B)
{
    assert(B >= 1 && B <= t->o.batch);
    exec_net_forward(t->net, t->acts, x, y, B, 1);
    exec_net_backward_input(t->net, t->acts, NULL, NULL, 1.0f / (float)B);
    exec_net_backward_weight(t->net, t->acts);
    t->sgd.lr = current_lr(t);
    exec_sgd_step(&t->sgd, t->net);
    t->step++;
    return exec_acts_loss_sum(t->acts) / B;
}

void exec_trainer_evaluate(exec_trainer *t, const exec_data *d, double *loss, double *acc)
{
    double l = 0;
    int64_t ok = 0;
    int64_t *idx = cl_malloc((size_t)t->o.batch * sizeof *idx);
    for (int64_t s = 0; s < d->n; s += t->o.batch) {
        int B = (int)(d->n - s < t->o.batch ? d->n - s : t->o.batch);
        for (int b = 0; b < B; b++) idx[b] = s + b;
        exec_data_gather(d, idx, B, t->xb, t->yb);
        exec_net_forward(t->net, t->acts, t->xb, t->yb, B, 0);
        l += exec_acts_loss_sum(t->acts);
        ok += exec_acts_correct(t->acts);
    }
    free(idx);
    *loss = d->n ? l / (double)d->n : NAN;
    *acc = d->n ? (double)ok / (double)d->n : NAN;
}

void exec_trainer_epoch(exec_trainer *t, const exec_data *train, const exec_data *test,
                        exec_progress_fn progress, void *ctx, exec_epoch *out)
{
    const int Bmax = t->o.batch;
    const int64_t n = train->n, steps = (n + Bmax - 1) / Bmax;
    if (t->epoch == 0) {
        t->t0 = exec_now();
        t->total_steps = steps * t->o.epochs;
    }
    t->epoch++;
    if (t->perm_n != n) {
        free(t->perm);
        t->perm = cl_malloc((size_t)n * sizeof *t->perm);
        t->perm_n = n;
    }
    exec_shuffle(t->perm, n, t->shuffle);
    double t_start = exec_now(), loss = 0;
    int64_t ok = 0;
    const int64_t every = steps / 100 > 0 ? steps / 100 : 1;
    for (int64_t s = 0; s < steps; s++) {
        int64_t first = s * Bmax;
        int B = (int)(n - first < Bmax ? n - first : Bmax);
        exec_data_gather(train, t->perm + first, B, t->xb, t->yb);
        loss += exec_trainer_step(t, t->xb, t->yb, B) * B;
        ok += exec_acts_correct(t->acts);
        if (progress && ((s + 1) % every == 0 || s + 1 == steps))
            progress(ctx, t->epoch, first + B, n, loss / (double)(first + B));
    }
    double train_s = exec_now() - t_start;
    memset(out, 0, sizeof *out);
    out->epoch = t->epoch;
    out->loss = loss / (double)n;
    out->train_acc = (double)ok / (double)n;
    out->samples_per_s = (double)n / train_s;
    out->lr = t->sgd.lr;
    out->test_loss = out->test_acc = NAN;
    if (test) exec_trainer_evaluate(t, test, &out->test_loss, &out->test_acc);
    out->elapsed_s = exec_now() - t->t0;
}
