/* tp_team.c - tensor-parallel training on threads (tp_team.h). */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#include "exec/nn/gemm.h"
#include "tp_group.h"
#include "tp_team.h"

typedef struct tworker {
    exec_tp_team *team;
    int rank;
    exec_net *net;
    exec_acts *acts;
    exec_sgd sgd;
    pthread_t th;
} tworker;

struct exec_tp_team {
    int size, max_batch, started;
    double momentum;
    exec_tp_group *group;
    tworker *w;            /* [size] */
    /* the call in progress, written by worker 0 before the barrier that
     * starts it, read by all after it */
    int quit, train, B;
    const float *x;
    const int32_t *y;
    double lr;
};

static void work(exec_tp_team *t, tworker *w)
{
    exec_net_forward(w->net, w->acts, t->x, t->y, t->B, t->train);
    if (!t->train) return;
    exec_net_backward(w->net, w->acts, NULL, NULL, 1.0f / (float)t->B);
    w->sgd.lr = t->lr;
    exec_sgd_step(&w->sgd, w->net);
}

/* Workers 1 ..: a barrier starts each call (or the end), another ends it. */
static void *worker_main(void *arg)
{
    tworker *w = arg;
    exec_tp_team *t = w->team;
    exec_blas_init();
    for (;;) {
        exec_tp_group_barrier(t->group);
        if (t->quit) return NULL;
        work(t, w);
        exec_tp_group_barrier(t->group);
    }
}

int exec_tp_team_create(exec_tp_team **out, const model *m, int size, int max_batch,
                        uint64_t seed, int flags, double momentum, double weight_decay,
                        const char *file, cl_err *e)
{
    *out = NULL;
    assert(size >= 2 && max_batch >= 1);
    int rc = exec_net_tp_check(m, 0, m->n_layers, size, file, e);
    if (rc) return rc;
    /* the largest all-reduce: a split layer's (B, T, D) output */
    int64_t most = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == MODEL_ATTENTION || m->layers[i].kind == MODEL_MLP) {
            int64_t el = model_shape_elems(&m->layers[i].out_shape);
            if (el > most) most = el;
        }
    exec_tp_team *t = cl_calloc(1, sizeof *t);
    t->size = size;
    t->max_batch = max_batch;
    t->momentum = momentum;
    t->group = exec_tp_group_create(size, most * max_batch);
    t->w = cl_calloc((size_t)size, sizeof *t->w);
    for (int r = 0; r < size && !rc; r++) {
        tworker *w = &t->w[r];
        w->team = t;
        w->rank = r;
        rc = exec_net_create_tp(&w->net, m, 0, m->n_layers, max_batch, seed, flags,
                                exec_tp_group_comm(t->group, r), file, e);
        if (rc) break;
        w->acts = exec_acts_create(w->net, max_batch);
        exec_sgd_init(&w->sgd, w->net, 0, momentum, weight_decay);
    }
    for (int r = 1; r < size && !rc; r++) {
        if (pthread_create(&t->w[r].th, NULL, worker_main, &t->w[r])) abort();
        t->started = r;
    }
    if (rc) {
        exec_tp_team_destroy(t);
        return rc;
    }
    *out = t;
    return CL_OK;
}

void exec_tp_team_destroy(exec_tp_team *t)
{
    if (!t) return;
    if (t->started) {
        assert(t->started == t->size - 1);
        t->quit = 1;
        exec_tp_group_barrier(t->group);
        for (int r = 1; r < t->size; r++) pthread_join(t->w[r].th, NULL);
    }
    for (int r = 0; r < t->size; r++) {
        exec_acts_destroy(t->w[r].acts);
        exec_sgd_free(&t->w[r].sgd);
        exec_net_destroy(t->w[r].net);
    }
    exec_tp_group_destroy(t->group);
    free(t->w);
    free(t);
}

int exec_tp_team_size(const exec_tp_team *t) { return t->size; }
exec_net *exec_tp_team_net(exec_tp_team *t, int rank) { return t->w[rank].net; }
exec_acts *exec_tp_team_acts(exec_tp_team *t, int rank) { return t->w[rank].acts; }

void exec_tp_team_run(exec_tp_team *t, const float *x, const int32_t *y, int B, int train,
                      double lr)
{
    assert(B >= 1 && B <= t->max_batch);
    t->x = x;
    t->y = y;
    t->B = B;
    t->train = train;
    t->lr = lr;
    exec_tp_group_barrier(t->group);
    work(t, &t->w[0]);
    exec_tp_group_barrier(t->group);
}

double exec_tp_team_wait_s(const exec_tp_team *t, int rank)
{
    return exec_tp_group_wait_s(t->group, rank);
}

void exec_tp_team_mem(const exec_tp_team *t, int rank, sim_mem *m)
{
    const tworker *w = &t->w[rank];
    int64_t n;
    exec_net_params(w->net, &n);
    const double block = (double)n * sizeof(float);
    *m = (sim_mem){.weights = block, .grads = block, .optim = t->momentum != 0 ? block : 0,
                   .stash = (double)(exec_acts_bytes(w->acts) + exec_net_recompute_bytes(w->net)),
                   .buffers = (double)exec_tp_group_bytes(t->group)};
}
