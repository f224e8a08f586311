/* pipe_tp.c - tensor parallelism inside a pipelined run (pipe_tp.h). */
#include <assert.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/ckpt/checkpoint.h"
#include "exec/nn/tensor.h"
#include "pipe_tp.h"
#include "tp_mpi.h"

void pipe_tp_crew_init(pipe_worker *W)
{
    const pipe_run *R = W->R;
    const int T = plan_tensor(R->p);
    int64_t most = 0; /* the largest all-reduce: a split layer's output */
    int max_batch = R->mb > R->eval_batch ? R->mb : R->eval_batch;
    for (int s = 0; s < R->S; s++) {
        if (W->local[s] < 0) continue;
        for (int i = R->stage_first[s]; i < R->stage_end[s]; i++) {
            const model_layer *l = &R->m->layers[i];
            int64_t el = model_shape_elems(&l->out_shape);
            if ((l->kind == MODEL_ATTENTION || l->kind == MODEL_MLP) && el > most) most = el;
        }
    }
    if (T < 2 || most == 0 || R->tpm) return; /* R->tpm: the ranks are processes */
    /* Cores: worker w (rank 0) is on core w mod n (backend_threads.c).
     * With a core for every thread, the crews take the cores after the
     * workers'; oversubscribed, rank k of worker w goes to core w + k, so
     * the ranks of a stage, which compute at once, are spread over cores
     * rather than stacked on their worker's. */
    int *cpu = cl_malloc((size_t)T * sizeof *cpu), n = 0, list[CPU_SETSIZE];
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(getpid(), sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) list[n++] = c;
    for (int k = 0; k < T; k++) {
        int idx = R->n_w * T <= n ? R->n_w + W->w * (T - 1) + k - 1 : W->w + k;
        cpu[k] = n > 0 && R->o->backend == EXEC_PIPE_THREADS ? list[idx % n] : -1;
    }
    W->crew = exec_tp_crew_create(T, most * max_batch, cpu);
    free(cpu);
}

int pipe_tp_stage_init(pipe_worker *W, pstage *ps, int max_batch, cl_err *e)
{
    const pipe_run *R = W->R;
    const int first = R->stage_first[ps->stage], end = R->stage_end[ps->stage];
    const int split = exec_net_has_split(R->m, first, end);
    const int T = W->crew && split ? plan_tensor(R->p) : 1;
    const exec_pipe_opts *o = R->o;
    ps->T = T;
    ps->tpm = R->tpm && split;
    ps->tnet = cl_calloc((size_t)T, sizeof *ps->tnet);
    ps->tsgd = cl_calloc((size_t)T, sizeof *ps->tsgd);
    ps->tdin = cl_calloc((size_t)T, sizeof *ps->tdin);
    for (int r = 0; r < T; r++) {
        const exec_tp_comm *tp = T > 1      ? exec_tp_group_comm(exec_tp_crew_group(W->crew), r)
                                 : ps->tpm ? exec_tp_mpi_comm(R->tpm)
                                           : NULL;
        int rc = exec_net_create_tp(&ps->tnet[r], R->m, first, end, max_batch, o->seed,
                                    exec_pipe_net_flags(R->p), tp, o->file, e);
        if (rc) return rc;
        ps->tsgd[r] = r ? cl_calloc(1, sizeof *ps->tsgd[r]) : &ps->sgd;
        exec_sgd_init(ps->tsgd[r], ps->tnet[r], o->lr, o->momentum, o->weight_decay);
        if (r && exec_net_needs_din(ps->tnet[r]))
            ps->tdin[r] = exec_falloc((int64_t)R->mb * exec_net_in_elems(ps->tnet[r]));
    }
    ps->net = ps->tnet[0];
    return CL_OK;
}

void pipe_tp_stage_free(pstage *ps)
{
    for (int r = 0; r < ps->T; r++) {
        if (ps->tsgd && ps->tsgd[r]) exec_sgd_free(ps->tsgd[r]);
        if (r && ps->tsgd) free(ps->tsgd[r]);
        if (ps->tnet) exec_net_destroy(ps->tnet[r]);
        if (ps->tdin) free(ps->tdin[r]);
    }
    free(ps->tnet);
    free(ps->tsgd);
    free(ps->tdin);
    ps->net = NULL;
}

exec_acts **pipe_tp_acts_new(const pstage *ps, int B)
{
    exec_acts **a = cl_malloc((size_t)ps->T * sizeof *a);
    for (int r = 0; r < ps->T; r++) a[r] = exec_acts_create(ps->tnet[r], B);
    return a;
}

void pipe_tp_acts_free(const pstage *ps, exec_acts **a)
{
    if (!a) return;
    for (int r = 0; r < ps->T; r++) exec_acts_destroy(a[r]);
    free(a);
}

/* ------------------------------------------------------------ the calls -- */

/* The call the crew runs: written by rank 0 before, read by every rank. */
typedef struct tjob {
    pstage *ps;
    int pass, B, train;
    exec_acts **a;
    const float *in, *dout;
    const int32_t *lab;
    float *din, loss_scale;
    double lr, wd;
} tjob;

static void run_pass(void *ctx, int r)
{
    const tjob *j = ctx;
    pstage *ps = j->ps;
    exec_net *net = ps->tnet[r];
    float *din = j->din && r ? ps->tdin[r] : j->din;
    switch (j->pass) {
    case PIPE_TP_FWD: exec_net_forward(net, j->a[r], j->in, j->lab, j->B, j->train); break;
    case PIPE_TP_BWD: exec_net_backward(net, j->a[r], j->dout, din, j->loss_scale); break;
    case PIPE_TP_BWD_IN: exec_net_backward_input(net, j->a[r], j->dout, din, j->loss_scale); break;
    case PIPE_TP_BWD_W: exec_net_backward_weight(net, j->a[r]); break;
    default: /* the update */
        ps->tsgd[r]->lr = j->lr;
        ps->tsgd[r]->weight_decay = j->wd;
        exec_sgd_step(ps->tsgd[r], net);
    }
}

enum { PIPE_TP_UPDATE = PIPE_TP_BWD_W + 1 };

static void run_job(pipe_worker *W, tjob *j)
{
    if (j->ps->T > 1) exec_tp_crew_run(W->crew, run_pass, j);
    else run_pass(j, 0);
}

void pipe_tp_pass(pipe_worker *W, pstage *ps, int pass, exec_acts **a, const float *in,
                  const int32_t *lab, int B, int train, const float *dout, float *din,
                  float loss_scale)
{
    assert(pass >= PIPE_TP_FWD && pass <= PIPE_TP_BWD_W);
    tjob j = {.ps = ps, .pass = pass, .B = B, .train = train, .a = a, .in = in, .dout = dout,
              .lab = lab, .din = din, .loss_scale = loss_scale};
    run_job(W, &j);
}

void pipe_tp_update(pipe_worker *W, pstage *ps, double lr, double wd)
{
    tjob j = {.ps = ps, .pass = PIPE_TP_UPDATE, .lr = lr, .wd = wd};
    run_job(W, &j);
}

/* ----------------------------------------------------------- parameters -- */

void pipe_tp_swap(pstage *ps, float *stash)
{
    for (int r = 0; r < ps->T; r++) {
        int64_t n;
        float *p = exec_net_params(ps->tnet[r], &n), *q = stash + (int64_t)r * ps->n_floats;
        assert(n == ps->n_floats);
        for (int64_t i = 0; i < n; i++) {
            float t = p[i];
            p[i] = q[i];
            q[i] = t;
        }
    }
}

void pipe_tp_copy_params(pstage *ps, float *stash)
{
    for (int r = 0; r < ps->T; r++) {
        int64_t n;
        const float *p = exec_net_params(ps->tnet[r], &n);
        assert(n == ps->n_floats); /* every rank's shard is as large (tp_check) */
        memcpy(stash + (int64_t)r * ps->n_floats, p, (size_t)n * sizeof *stash);
    }
}

/* Nets laid out as every rank r's shard of stage ps (net[r]), made for
 * exec_net_tp_move, which needs a rank's layout; no passes run on them.
 * keep >= 0: that rank's entry is ps->net itself.  Freed by layouts_free. */
typedef struct layouts {
    exec_net **net;
    exec_tp_comm *view; /* the nets keep a pointer to theirs */
    int T, keep;
} layouts;

static layouts layouts_make(const pipe_run *R, pstage *ps, int keep)
{
    const int T = plan_tensor(R->p);
    const int first = R->stage_first[ps->stage], end = R->stage_end[ps->stage];
    layouts L = {cl_calloc((size_t)T, sizeof *L.net), cl_calloc((size_t)T, sizeof *L.view), T, keep};
    cl_err e = {0};
    for (int r = 0; r < T; r++) {
        if (r == keep) {
            L.net[r] = ps->net;
            continue;
        }
        L.view[r] = (exec_tp_comm){.rank = r, .size = T};
        int rc = exec_net_create_tp(&L.net[r], R->m, first, end, 1, R->o->seed, 0, &L.view[r], "", &e);
        assert(rc == CL_OK && "the stage made its shard already");
        (void)rc;
    }
    return L;
}

static void layouts_free(layouts *L)
{
    for (int r = 0; r < L->T; r++)
        if (r != L->keep) exec_net_destroy(L->net[r]);
    free(L->net);
    free(L->view);
}

/* The whole stage on tensor rank 0 from the shards of the group's
 * processes, their blocks gathered over MPI. */
static exec_net *whole_mpi(pipe_worker *W, pstage *ps, exec_net *whole)
{
    const pipe_run *R = W->R;
    const int T = plan_tensor(R->p), root = exec_tp_mpi_rank(R->tpm) == 0;
    float *all = root ? exec_falloc(T * ps->n_floats) : NULL;
    exec_tp_mpi_gather(R->tpm, exec_net_params(ps->net, NULL), all, ps->n_floats);
    if (!root) return ps->net;
    layouts L = layouts_make(R, ps, -1);
    float **sb = cl_calloc((size_t)T, sizeof *sb);
    for (int r = 0; r < T; r++) sb[r] = all + (int64_t)r * ps->n_floats;
    exec_net_tp_move(whole, exec_net_params(whole, NULL), L.net, sb, T, 1);
    layouts_free(&L);
    free(sb);
    free(all);
    return whole;
}

exec_net *pipe_tp_whole(pipe_worker *W, pstage *ps, int *made)
{
    *made = 0;
    if (ps->T == 1 && !ps->tpm) return ps->net;
    const pipe_run *R = W->R;
    if (ps->tpm && exec_tp_mpi_rank(R->tpm) != 0) return whole_mpi(W, ps, NULL);
    exec_net *whole;
    cl_err e = {0};
    int rc = exec_net_create(&whole, R->m, R->stage_first[ps->stage], R->stage_end[ps->stage], 1,
                             R->o->seed, 0, "", &e);
    assert(rc == CL_OK && "the stage made its shards already");
    (void)rc;
    if (ps->tpm) whole_mpi(W, ps, whole);
    else exec_net_tp_gather(whole, ps->tnet, ps->T);
    *made = 1;
    return whole;
}

/* ---------------------------------------------------------- checkpoints -- */

void pipe_tp_mpi_put(pipe_worker *W, pstage *ps, exec_ckpt *c, const char *prefix)
{
    const pipe_run *R = W->R;
    const int T = plan_tensor(R->p), root = exec_tp_mpi_rank(R->tpm) == 0;
    assert(ps->tpm && ps->T == 1 && ps->sgd.n == ps->n_floats && (root == (c != NULL)));
    const int64_t n = ps->n_floats;
    float *par = root ? exec_falloc(T * n) : NULL, *vel = root ? exec_falloc(T * n) : NULL;
    exec_tp_mpi_gather(R->tpm, exec_net_params(ps->net, NULL), par, n);
    exec_tp_mpi_gather(R->tpm, ps->sgd.velocity, vel, n);
    if (root) {
        /* rank 0 is ps->net itself: its running statistics and dropout
         * streams are the ones stored, as with the crew's rank 0 */
        layouts L = layouts_make(R, ps, 0);
        exec_sgd *sv = cl_calloc((size_t)T, sizeof *sv);
        exec_sgd **sp = cl_calloc((size_t)T, sizeof *sp);
        for (int r = 0; r < T; r++) {
            if (r) memcpy(exec_net_params(L.net[r], NULL), par + r * n, (size_t)n * sizeof *par);
            sv[r] = (exec_sgd){.velocity = vel + r * n, .n = n};
            sp[r] = &sv[r];
        }
        exec_ckpt_put_net_tp(c, prefix, R->m, R->stage_first[ps->stage], R->stage_end[ps->stage],
                             L.net, sp, T);
        layouts_free(&L);
        free(sv);
        free(sp);
    }
    free(par);
    free(vel);
}

int pipe_tp_mpi_get(pipe_worker *W, pstage *ps, const exec_ckpt *c, const char *prefix,
                    cl_err *e)
{
    const pipe_run *R = W->R;
    const int T = plan_tensor(R->p), k = exec_tp_mpi_rank(R->tpm);
    const int64_t n = ps->n_floats;
    assert(ps->tpm && ps->T == 1 && ps->sgd.n == n);
    /* every rank splits the whole stage itself and keeps its own part: the
     * file is on every rank already, so no message is needed */
    layouts L = layouts_make(R, ps, k);
    float *scratch = exec_falloc(T * n);
    exec_sgd *sv = cl_calloc((size_t)T, sizeof *sv);
    exec_sgd **sp = cl_calloc((size_t)T, sizeof *sp);
    for (int r = 0; r < T; r++) {
        sv[r] = r == k ? ps->sgd : (exec_sgd){.velocity = scratch + r * n, .n = n};
        sp[r] = &sv[r];
    }
    int rc = exec_ckpt_get_net_tp(c, prefix, R->m, R->stage_first[ps->stage],
                                  R->stage_end[ps->stage], L.net, sp, T, e);
    if (!rc) exec_net_zero_grads(ps->net);
    layouts_free(&L);
    free(scratch);
    free(sv);
    free(sp);
    return rc;
}
