/* tp_team.c - tensor-parallel training on threads (tp_team.h). */
#include <assert.h>
#include <stdlib.h>

#include "exec/nn/gemm.h"
#include "tp_crew.h"
#include "tp_team.h"

typedef struct tworker {
    exec_net *net;
    exec_acts *acts;
    exec_sgd sgd;
} tworker;

struct exec_tp_team {
    int size, max_batch;
    double momentum;
    exec_tp_crew *crew;
    exec_tp_group *group;  /* the crew's */
    tworker *w;            /* [size] */
    /* the call in progress, written by rank 0 before the crew runs it */
    int train, B;
    const float *x;
    const int32_t *y;
    double lr;
};

static void work(void *ctx, int rank)
{
    exec_tp_team *t = ctx;
    tworker *w = &t->w[rank];
    exec_net_forward(w->net, w->acts, t->x, t->y, t->B, t->train);
    if (!t->train) return;
    exec_net_backward(w->net, w->acts, NULL, NULL, 1.0f / (float)t->B);
    w->sgd.lr = t->lr;
    exec_sgd_step(&w->sgd, w->net);
}

int exec_tp_team_create(exec_tp_team **out, const model *m, int size, int max_batch,
                        uint64_t seed, int flags, double momentum, double weight_decay,
                        const char *file, cl_err *e)
{
    *out = NULL;
    assert(size >= 2 && max_batch >= 1);
    int rc = exec_net_tp_check(m, 0, m->n_layers, size, file, e);
    if (!rc && (flags & EXEC_NET_SEQ_PAR)) rc = exec_net_sp_check(m, 0, m->n_layers, size, file, e);
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
    t->crew = exec_tp_crew_create(size, most * max_batch, NULL);
    t->group = exec_tp_crew_group(t->crew);
    t->w = cl_calloc((size_t)size, sizeof *t->w);
    for (int r = 0; r < size && !rc; r++) {
        tworker *w = &t->w[r];
        rc = exec_net_create_tp(&w->net, m, 0, m->n_layers, max_batch, seed, flags,
                                exec_tp_group_comm(t->group, r), file, e);
        if (rc) break;
        w->acts = exec_acts_create(w->net, max_batch);
        exec_sgd_init(&w->sgd, w->net, 0, momentum, weight_decay);
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
    exec_tp_crew_destroy(t->crew);
    for (int r = 0; r < t->size; r++) {
        exec_acts_destroy(t->w[r].acts);
        exec_sgd_free(&t->w[r].sgd);
        exec_net_destroy(t->w[r].net);
    }
    free(t->w);
    free(t);
}

int exec_tp_team_size(const exec_tp_team *t) { return t->size; }
exec_net *exec_tp_team_net(exec_tp_team *t, int rank) { return t->w[rank].net; }
exec_acts *exec_tp_team_acts(exec_tp_team *t, int rank) { return t->w[rank].acts; }
exec_sgd *exec_tp_team_sgd(exec_tp_team *t, int rank) { return &t->w[rank].sgd; }

void exec_tp_team_run(exec_tp_team *t, const float *x, const int32_t *y, int B, int train,
                      double lr)
{
    assert(B >= 1 && B <= t->max_batch);
    t->x = x;
    t->y = y;
    t->B = B;
    t->train = train;
    t->lr = lr;
    exec_tp_crew_run(t->crew, work, t);
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
                   .buffers = (double)(exec_tp_group_bytes(t->group) + exec_net_seq_bytes(w->net))};
}
