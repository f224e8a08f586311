/* train.c - the sequential training loop (train.h). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/ckpt/checkpoint.h"
#include "exec/nn/gemm.h"
#include "exec/nn/optim.h"
#include "tp_team.h"
#include "train.h"

struct exec_trainer {
    const model *m;
    exec_train_opts o;
    exec_net *net;         /* with tensor parallelism: the team's worker 0's */
    exec_acts *acts;       /* likewise */
    exec_sgd sgd;          /* with tensor parallelism: lr only (each worker has its own) */
    exec_tp_team *team;    /* tensor parallelism, or NULL */
    gsl_rng *shuffle;
    float *xb;             /* (batch, dim) minibatch being assembled */
    int32_t *yb;
    int64_t *perm;         /* current epoch's order */
    int64_t perm_n;
    int epoch;
    int64_t step, total_steps; /* for the schedule; total set by the first epoch */
    double t0;
    /* the epoch in progress (in_epoch): its next minibatch and sums so far */
    int in_epoch;
    int64_t pos, ep_ok;
    double ep_loss, ep_train_s;
    exec_step_hook hook;
    void *hook_ctx;
};

void exec_train_defaults(exec_train_opts *o)
{
    /* chosen by the measurements in docs/executor.md */
    *o = (exec_train_opts){.epochs = 10, .batch = 64, .lr = 0.02, .momentum = 0.9,
                           .weight_decay = 5e-4, .schedule = EXEC_LR_COSINE, .seed = 1,
                           .tensor = 1};
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
    exec_tp_team *team = NULL;
    const int flags = (o->recompute == 2 ? EXEC_NET_RECOMPUTE_FULL
                       : o->recompute == 1 ? EXEC_NET_RECOMPUTE : 0) |
                      (o->seq_par ? EXEC_NET_SEQ_PAR : 0);
    int rc = o->tensor > 1 ? exec_tp_team_create(&team, m, o->tensor, o->batch, o->seed, flags,
                                                 o->momentum, o->weight_decay, file, e)
                           : exec_net_create(&net, m, 0, m->n_layers, o->batch, o->seed, flags,
                                             file, e);
    if (rc) return rc;
    exec_trainer *t = cl_calloc(1, sizeof *t);
    t->m = m;
    t->o = *o;
    if ((t->team = team)) {
        t->net = exec_tp_team_net(team, 0);
        t->acts = exec_tp_team_acts(team, 0);
        t->sgd = (exec_sgd){.lr = o->lr, .momentum = o->momentum, .weight_decay = o->weight_decay};
    } else {
        t->net = net;
        t->acts = exec_acts_create(net, o->batch);
        exec_sgd_init(&t->sgd, net, o->lr, o->momentum, o->weight_decay);
    }
    t->shuffle = gsl_rng_alloc(gsl_rng_mt19937);
    /* its own stream: a different constant from the net's per-layer ones */
    gsl_rng_set(t->shuffle, (unsigned long)((o->seed * 0x9e3779b97f4a7c15ULL + 0x5851f42dULL) >> 32));
    int64_t dim = exec_net_in_elems(t->net);
    t->xb = exec_falloc((int64_t)o->batch * dim);
    t->yb = cl_malloc((size_t)o->batch * sizeof *t->yb);
    *out = t;
    return CL_OK;
}

void exec_trainer_destroy(exec_trainer *t)
{
    if (!t) return;
    if (t->team) {
        exec_tp_team_destroy(t->team);
    } else {
        exec_acts_destroy(t->acts);
        exec_sgd_free(&t->sgd);
        exec_net_destroy(t->net);
    }
    gsl_rng_free(t->shuffle);
    free(t->xb);
    free(t->yb);
    free(t->perm);
    free(t);
}

exec_net *exec_trainer_net(exec_trainer *t) { return t->net; }
exec_tp_team *exec_trainer_team(exec_trainer *t) { return t->team; }

exec_net *exec_trainer_gather(exec_trainer *t)
{
    exec_net *whole;
    cl_err e = {0};
    int rc = exec_net_create(&whole, t->m, 0, t->m->n_layers, 1, t->o.seed, 0, "", &e);
    assert(rc == CL_OK && "the model made a trainer already");
    (void)rc;
    if (!t->team) {
        int64_t n;
        const float *p = exec_net_params(t->net, &n);
        memcpy(exec_net_params(whole, NULL), p, (size_t)n * sizeof *p);
        return whole;
    }
    const int T = exec_tp_team_size(t->team);
    exec_net **shards = cl_malloc((size_t)T * sizeof *shards);
    for (int r = 0; r < T; r++) shards[r] = exec_tp_team_net(t->team, r);
    exec_net_tp_gather(whole, shards, T);
    free(shards);
    return whole;
}

void exec_trainer_mem(const exec_trainer *t, int rank, sim_mem *m)
{
    if (t->team) {
        exec_tp_team_mem(t->team, rank, m);
        return;
    }
    assert(rank == 0);
    int64_t n;
    exec_net_params(t->net, &n);
    const double block = (double)n * sizeof(float);
    *m = (sim_mem){.weights = block, .grads = block, .optim = t->o.momentum != 0 ? block : 0,
                   .stash = (double)(exec_acts_bytes(t->acts) + exec_net_recompute_bytes(t->net))};
}

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
    if (t->team) {
        t->sgd.lr = current_lr(t);
        exec_tp_team_run(t->team, x, y, B, 1, t->sgd.lr);
    } else {
        exec_net_forward(t->net, t->acts, x, y, B, 1);
        exec_net_backward(t->net, t->acts, NULL, NULL, 1.0f / (float)B);
        t->sgd.lr = current_lr(t);
        exec_sgd_step(&t->sgd, t->net);
    }
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
        if (t->team) exec_tp_team_run(t->team, t->xb, t->yb, B, 0, 0);
        else exec_net_forward(t->net, t->acts, t->xb, t->yb, B, 0);
        l += exec_acts_loss_sum(t->acts);
        ok += exec_acts_correct(t->acts);
    }
    free(idx);
    *loss = d->n ? l / (double)d->n : NAN;
    *acc = d->n ? (double)ok / (double)d->n : NAN;
}

void exec_trainer_set_hook(exec_trainer *t, exec_step_hook hook, void *ctx)
{
    t->hook = hook;
    t->hook_ctx = ctx;
}

void exec_trainer_position(const exec_trainer *t, int *epoch, int64_t *pos, int64_t *step)
{
    *epoch = t->epoch;
    *pos = t->in_epoch ? t->pos : 0;
    *step = t->step;
}

int exec_trainer_epoch(exec_trainer *t, const exec_data *train, const exec_data *test,
                       exec_progress_fn progress, void *ctx, exec_epoch *out)
{
    const int Bmax = t->o.batch;
    const int64_t n = train->n, steps = (n + Bmax - 1) / Bmax;
    memset(out, 0, sizeof *out);
    if (!t->in_epoch) {
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
        t->in_epoch = 1;
        t->pos = t->ep_ok = 0;
        t->ep_loss = t->ep_train_s = 0;
    }
    assert(t->perm_n == n);
    double t_start = exec_now();
    const int64_t every = steps / 100 > 0 ? steps / 100 : 1;
    for (int64_t s = t->pos; s < steps; s++) {
        int64_t first = s * Bmax;
        int B = (int)(n - first < Bmax ? n - first : Bmax);
        exec_data_gather(train, t->perm + first, B, t->xb, t->yb);
        t->ep_loss += exec_trainer_step(t, t->xb, t->yb, B) * B;
        t->ep_ok += exec_acts_correct(t->acts);
        t->pos = s + 1;
        if (progress && ((s + 1) % every == 0 || s + 1 == steps))
            progress(ctx, t->epoch, first + B, n, t->ep_loss / (double)(first + B));
        if (t->hook) {
            t->ep_train_s += exec_now() - t_start;
            t_start = exec_now();
            if (t->hook(t->hook_ctx, t)) return 0; /* resumable: in_epoch stays */
        }
    }
    t->ep_train_s += exec_now() - t_start;
    t->in_epoch = 0;
    out->epoch = t->epoch;
    out->loss = t->ep_loss / (double)n;
    out->train_acc = (double)t->ep_ok / (double)n;
    out->samples_per_s = (double)n / t->ep_train_s;
    out->lr = t->sgd.lr;
    out->test_loss = out->test_acc = NAN;
    if (test) exec_trainer_evaluate(t, test, &out->test_loss, &out->test_acc);
    out->elapsed_s = exec_now() - t->t0;
    return 1;
}

/* ------------------------------------------------------- checkpoints -- */

/* With tensor parallelism the team's nets and optimisers, rank by rank
 * (caller frees both arrays). */
static void team_nets(exec_trainer *t, exec_net ***nets, exec_sgd ***sgd)
{
    const int T = exec_tp_team_size(t->team);
    *nets = cl_malloc((size_t)T * sizeof **nets);
    *sgd = cl_malloc((size_t)T * sizeof **sgd);
    for (int r = 0; r < T; r++) {
        (*nets)[r] = exec_tp_team_net(t->team, r);
        (*sgd)[r] = exec_tp_team_sgd(t->team, r);
    }
}

void exec_trainer_save(exec_trainer *t, exec_ckpt *c)
{
    if (t->team) { /* the whole model, as without (a resume may use another degree) */
        exec_net **nets;
        exec_sgd **sgd;
        team_nets(t, &nets, &sgd);
        exec_ckpt_put_net_tp(c, "s0", t->m, 0, t->m->n_layers, nets, sgd, exec_tp_team_size(t->team));
        free(nets);
        free(sgd);
    } else {
        exec_ckpt_put_net(c, "s0", t->net, &t->sgd);
    }
    exec_ckpt_put_rng(c, "train.shuffle", t->shuffle);
    exec_ckpt_put_i64(c, "train.perm", t->perm, t->perm ? (size_t)t->perm_n : 0);
    int64_t iv[7] = {t->epoch, t->in_epoch, t->pos, t->step, t->total_steps, t->ep_ok, t->perm_n};
    double dv[3] = {t->ep_loss, t->ep_train_s, t->epoch ? exec_now() - t->t0 : 0};
    exec_ckpt_put_i64(c, "train.position", iv, 7);
    exec_ckpt_put_f64(c, "train.sums", dv, 3);
}

int exec_trainer_restore(exec_trainer *t, const exec_ckpt *c, int64_t n_train, cl_err *e)
{
    int64_t iv[7];
    double dv[3];
    int rc;
    if ((rc = exec_ckpt_get(c, "train.position", iv, sizeof iv, e)) ||
        (rc = exec_ckpt_get(c, "train.sums", dv, sizeof dv, e)))
        return rc;
    const int64_t steps = (n_train + t->o.batch - 1) / t->o.batch;
    if (iv[0] < 0 || iv[0] > t->o.epochs || (iv[1] != 0 && iv[1] != 1) || iv[2] < 0 ||
        iv[2] > steps || iv[3] < 0 || iv[4] < 0 || iv[5] < 0 || iv[6] < 0 ||
        (iv[0] > 0 && iv[6] != n_train) || !(dv[2] >= 0))
        return cl_fail(e, CL_EINPUT, "%s: section train.position does not fit this run (epoch %lld of %d, minibatch %lld of %lld) (hint: resume with the same data and options)",
                       exec_ckpt_file(c), (long long)iv[0], t->o.epochs, (long long)iv[2],
                       (long long)steps);
    if (t->team) {
        exec_net **nets;
        exec_sgd **sgd;
        team_nets(t, &nets, &sgd);
        rc = exec_ckpt_get_net_tp(c, "s0", t->m, 0, t->m->n_layers, nets, sgd,
                                  exec_tp_team_size(t->team), e);
        free(nets);
        free(sgd);
    } else {
        rc = exec_ckpt_get_net(c, "s0", t->net, &t->sgd, e);
    }
    if (rc || (rc = exec_ckpt_get_rng(c, "train.shuffle", t->shuffle, e))) return rc;
    free(t->perm);
    t->perm = NULL;
    t->perm_n = 0;
    if (iv[6] > 0) {
        t->perm = cl_malloc((size_t)iv[6] * sizeof *t->perm);
        if ((rc = exec_ckpt_get(c, "train.perm", t->perm, (size_t)iv[6] * sizeof *t->perm, e)))
            return rc;
        for (int64_t i = 0; i < iv[6]; i++)
            if (t->perm[i] < 0 || t->perm[i] >= n_train)
                return cl_fail(e, CL_EINPUT, "%s: section train.perm: sample %lld is out of range (hint: the file is damaged)",
                               exec_ckpt_file(c), (long long)t->perm[i]);
        t->perm_n = iv[6];
    }
    t->epoch = (int)iv[0];
    t->in_epoch = (int)iv[1];
    t->pos = iv[2];
    t->step = iv[3];
    t->total_steps = iv[4];
    t->ep_ok = iv[5];
    t->ep_loss = dv[0];
    t->ep_train_s = dv[1];
    t->t0 = exec_now() - dv[2];
    return CL_OK;
}
