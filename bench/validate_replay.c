/* validate_replay.c - the stages' passes timed as the run executes them
 * (exec_val_replay, validate.h): every worker's op list replayed on one
 * core without the transfers, optionally with a second thread on the other
 * core writing the inputs other workers would send, three times over.  A
 * stage split over t ranks (plan tensor t > 1) replays on a crew of t
 * threads as the run does (pipe_tp.h), or, when the run's tensor ranks are
 * MPI processes, over those processes (exec_val_replay_procs): every rank
 * its share, at once, with the run's collectives (all-reduces, and with
 * sequence parallelism all-gathers and reduce-scatters), whose time rank 0
 * spent in them is taken out of the passes and reported apart
 * (exec_val_extra.ar_ctx_s). */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "base/measure.h"
#include "exec/nn/gemm.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "exec/run/pipeline.h"
#include "exec/run/tp_crew.h"
#include "validate.h"

/* One stage of a worker being replayed (replay_passes). */
typedef struct rstage {
    exec_net *net;
    exec_sgd sgd;
    float *x, *dout, *din;
    float *x0, *dout0;       /* their contents, for the cross-core writer    */
    int64_t in_n, out_n;
    int32_t *y;
    exec_acts **pool;        /* free acts                                    */
    int n_pool;
    exec_acts **slot_a;      /* in flight: acts of global microbatch slot_seq */
    int64_t *slot_seq;
    int n_slot, cap;
    double *tf, *ti, *tw;    /* timed passes                                 */
    int nf, ni, nw, cap_t;
    exec_layer_clock *clk;   /* per layer, to split a fused backward         */
    int n_layers;
    double ar_s;             /* seconds in collectives (rank of a split stage) */
    double pass_ar_s[PROF_PASSES]; /* the same by the pass that made them (exec_net_pass) */
    int64_t n_ar;            /* and how many                                */
    double ar_sum_s;         /* rank 0: over the timed ops                   */
    int64_t ar_sum_n;
} rstage;

/* A rank's collectives, timed: the group's on this rank (the crew's,
 * tp_group.h, or the processes', tp_mpi.h: the run's own either way), the
 * seconds each took added to the rank's stage (the one running the op). */
typedef struct tcomm {
    exec_tp_comm c;
    const exec_tp_comm *inner;
    rstage *cur;
} tcomm;

static void tcomm_took(tcomm *t, double t0)
{
    const double s = exec_now() - t0;
    t->cur->ar_s += s;
    t->cur->pass_ar_s[exec_net_pass(t->cur->net)] += s;
    t->cur->n_ar++;
}

static void tcomm_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    tcomm *t = ctx;
    double t0 = exec_now();
    t->inner->allreduce(t->inner->ctx, rank, buf, n);
    tcomm_took(t, t0);
}

static void tcomm_reduce_scatter(void *ctx, int rank, float *dst, const float *src,
                                 int64_t blocks, int64_t chunk)
{
    tcomm *t = ctx;
    double t0 = exec_now();
    t->inner->reduce_scatter(t->inner->ctx, rank, dst, src, blocks, chunk);
    tcomm_took(t, t0);
}

static void tcomm_all_gather(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                             int64_t chunk)
{
    tcomm *t = ctx;
    double t0 = exec_now();
    t->inner->all_gather(t->inner->ctx, rank, dst, src, blocks, chunk);
    tcomm_took(t, t0);
}

static exec_acts *rs_take(rstage *r, int64_t seq, int mb, int remove)
{
    for (int i = 0; i < r->n_slot; i++)
        if (r->slot_seq[i] == seq) {
            exec_acts *a = r->slot_a[i];
            if (remove) {
                r->slot_a[i] = r->slot_a[--r->n_slot];
                r->slot_seq[i] = r->slot_seq[r->n_slot];
                r->pool[r->n_pool++] = a;
            }
            return a;
        }
    assert(!remove && "B or W of a microbatch with no F");
    exec_acts *a = r->n_pool ? r->pool[--r->n_pool] : exec_acts_create(r->net, mb);
    if (r->n_slot == r->cap) {
        r->cap = r->cap * 2 + 8;
        r->slot_a = cl_realloc(r->slot_a, (size_t)r->cap * sizeof *r->slot_a);
        r->slot_seq = cl_realloc(r->slot_seq, (size_t)r->cap * sizeof *r->slot_seq);
        r->pool = cl_realloc(r->pool, (size_t)r->cap * sizeof *r->pool);
    }
    r->slot_a[r->n_slot] = a;
    r->slot_seq[r->n_slot++] = seq;
    return a;
}

/* A thread on another core that rewrites a replayed op's input just before
 * the op reads it, as the neighbour that sent it did in the run (its cache
 * lines then come from the other core). */
typedef struct xwriter {
    pthread_t th;
    atomic_int req;          /* 0 idle, 1 write requested, 2 quit           */
    float *dst;
    const float *src;
    int64_t n;
    int cpu;
} xwriter;

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
}

static void *xw_main(void *arg)
{
    xwriter *w = arg;
    pin_to(w->cpu);
    for (;;) {
        int r = atomic_load(&w->req);
        if (r == 2) break;
        if (r == 1) {
            memcpy(w->dst, w->src, (size_t)w->n * sizeof *w->dst);
            atomic_store(&w->req, 0);
        } else { /* between writes, spin as a waiting worker does (exec_notify) */
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    }
    return NULL;
}

static void xw_write(xwriter *w, float *dst, const float *src, int64_t n)
{
    if (!w) return;
    w->dst = dst;
    w->src = src;
    w->n = n;
    atomic_store(&w->req, 1);
    while (atomic_load(&w->req) == 1) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static float *rand_buf(int64_t n, int64_t salt)
{
    float *b = exec_falloc(n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) b[i] = (float)(((i + salt) * 7919) % 1000) * 1e-3f - 0.5f;
    return b;
}

/* Stage `stage` of p for rank tp->rank of its split (tp NULL: rank 0's
 * share on exec_tp_comm_solo, whose collectives sum nothing, or the whole
 * stage when it holds nothing to split): its net, optimiser and buffers. */
static int rs_init(rstage *r, const plan *p, int stage, int iters, const exec_tp_comm *tp,
                   const char *file, cl_err *e)
{
    const int mb = p->microbatch > 0 ? p->microbatch : 1, m = p->n_micro > 0 ? p->n_micro : 1;
    const plan_stage *st = &p->stages[stage];
    exec_pipe_opts d;
    exec_pipe_defaults(&d);
    const int flags = exec_pipe_net_flags(p); /* recomputation, as the run's nets */
    int rc = tp ? exec_net_create_tp(&r->net, &p->model, st->first, st->last + 1, mb, 1, flags,
                                     tp, file, e)
                : exec_net_create_solo(&r->net, &p->model, st->first, st->last + 1, mb, 1, flags,
                                       plan_tensor(p), file, e);
    if (rc) return rc;
    exec_sgd_init(&r->sgd, r->net, 0, p->optimizer == OPTIM_MOMENTUM ? d.momentum : 0,
                  d.weight_decay);
    int64_t in_n = exec_net_in_elems(r->net) * mb, out_n = exec_net_out_elems(r->net) * mb;
    r->x = rand_buf(in_n, stage);
    r->x0 = rand_buf(in_n, stage);
    r->in_n = in_n;
    r->out_n = out_n;
    if (exec_net_has_loss(r->net)) {
        r->y = cl_malloc((size_t)mb * sizeof *r->y);
        for (int b = 0; b < mb; b++) r->y[b] = b % exec_net_classes(r->net);
    } else {
        r->dout = rand_buf(out_n, 17);
        for (int64_t i = 0; i < out_n; i++) r->dout[i] *= 1e-3f;
        r->dout0 = exec_falloc(out_n);
        memcpy(r->dout0, r->dout, (size_t)out_n * sizeof *r->dout);
    }
    if (exec_net_needs_din(r->net)) r->din = exec_falloc(in_n);
    r->cap_t = 4 * iters * m + 16;
    r->tf = cl_malloc((size_t)r->cap_t * sizeof *r->tf);
    r->ti = cl_malloc((size_t)r->cap_t * sizeof *r->ti);
    r->tw = cl_malloc((size_t)r->cap_t * sizeof *r->tw);
    r->n_layers = st->last - st->first + 1;
    r->clk = cl_malloc((size_t)r->n_layers * sizeof *r->clk);
    return CL_OK;
}

static void rs_free(rstage *r)
{
    if (!r->net) return;
    for (int i = 0; i < r->n_slot; i++) exec_acts_destroy(r->slot_a[i]);
    for (int i = 0; i < r->n_pool; i++) exec_acts_destroy(r->pool[i]);
    free(r->slot_a);
    free(r->slot_seq);
    free(r->pool);
    free(r->tf);
    free(r->ti);
    free(r->tw);
    free(r->clk);
    free(r->x);
    free(r->x0);
    free(r->dout0);
    free(r->y);
    free(r->dout);
    free(r->din);
    exec_sgd_free(&r->sgd);
    exec_net_destroy(r->net);
}

/* Op `op` on r (one rank's share); `timed`: record its passes, less the
 * seconds the rank spent in collectives during them (priced apart:
 * exec_val_tp_comm), and those seconds. */
static void rs_op(rstage *r, const plan *p, const sched_op *op, int timed)
{
    const int mb = p->microbatch > 0 ? p->microbatch : 1, m = p->n_micro > 0 ? p->n_micro : 1;
    int64_t seq = (int64_t)op->iter * m + op->micro;
    const double ar0 = r->ar_s;
    const int64_t n0 = r->n_ar;
    double t0 = exec_now(), t1;
    switch (op->kind) {
    case SCHED_F:
        exec_net_forward(r->net, rs_take(r, seq, mb, 0), r->x, r->y, mb, 1);
        if (timed && r->nf < r->cap_t) r->tf[r->nf++] = exec_now() - t0 - (r->ar_s - ar0);
        break;
    case SCHED_B: {
        exec_acts *a = rs_take(r, seq, mb, 0);
        if (op->flags & SCHED_FUSED_W) {
            /* as the run does it, layer by layer (exec_net_backward);
             * the whole call is timed, less its collectives, and the
             * per-layer clock, less each half's collectives (the weight
             * gradient makes some with sequence parallelism), splits it
             * into its two halves */
            const double in0 = r->pass_ar_s[PROF_B], w0 = r->pass_ar_s[PROF_W];
            memset(r->clk, 0, (size_t)r->n_layers * sizeof *r->clk);
            exec_net_set_clock(r->net, r->clk);
            exec_net_backward(r->net, a, r->dout, r->din, 1.0f / (float)p->batch);
            t1 = exec_now();
            exec_net_set_clock(r->net, NULL);
            double bi = -(r->pass_ar_s[PROF_B] - in0), bw = -(r->pass_ar_s[PROF_W] - w0);
            for (int l = 0; l < r->n_layers; l++)
                bi += r->clk[l].bwd_in_s, bw += r->clk[l].bwd_w_s;
            bi = fmax(0, bi), bw = fmax(0, bw);
            double in_share = bi + bw > 0 ? bi / (bi + bw) : 1, c = t1 - t0 - (r->ar_s - ar0);
            if (timed && r->ni < r->cap_t) r->ti[r->ni++] = c * in_share;
            if (timed && r->nw < r->cap_t) r->tw[r->nw++] = c * (1 - in_share);
            rs_take(r, seq, mb, 1);
        } else {
            exec_net_backward_input(r->net, a, r->dout, r->din, 1.0f / (float)p->batch);
            t1 = exec_now();
            if (timed && r->ni < r->cap_t) r->ti[r->ni++] = t1 - t0 - (r->ar_s - ar0);
        }
        break;
    }
    case SCHED_W:
        exec_net_backward_weight(r->net, rs_take(r, seq, mb, 0));
        if (timed && r->nw < r->cap_t) r->tw[r->nw++] = exec_now() - t0 - (r->ar_s - ar0);
        rs_take(r, seq, mb, 1);
        break;
    default:
        exec_sgd_step(&r->sgd, r->net);
    }
    if (timed) {
        r->ar_sum_s += r->ar_s - ar0;
        r->ar_sum_n += r->n_ar - n0;
    }
}

/* One op on every rank of a split stage, run by the crew. */
typedef struct rjob {
    rstage *rs;              /* the stage's ranks                           */
    const plan *p;
    const sched_op *op;
    int timed;
} rjob;

static void rjob_run(void *ctx, int rank)
{
    const rjob *j = ctx;
    rs_op(&j->rs[rank], j->p, j->op, rank == 0 && j->timed);
}

/* The stages' passes timed in the order the run executes them: every
 * worker's op list of the plan's schedule (sched_build) replayed on this
 * thread, one worker after the other, without the transfers: F, B, W and
 * UPDATE on the worker's own nets, activations stashed from F to B/W as
 * the run keeps them, so each pass finds the caches as the run leaves them
 * (a stash deeper than the cache, an optimiser step between iterations).
 * A split stage (tensor T > 1) runs each op on every rank of its group,
 * as the run does, each rank on its share with the run's collectives, so
 * its passes are timed with the other ranks computing at the same time;
 * rank 0's seconds in collectives (its partners' lateness included) are
 * left out of them and their mean per collective goes to ar_ctx_s.  The
 * group is either a crew of T threads started here (procs NULL; cpu: where
 * rank k's thread goes, NULL: anywhere), or, when the run's tensor ranks
 * are processes, this process as rank procs->rank of procs' group, whose
 * other ranks replay the same op lists at the same time (a stage with no
 * split layer then runs whole on every rank, as in the run).
 * Iteration 0 is not timed; medians of the rest go to x[s].fwd_ctx_s,
 * bwd_in_ctx_s, bwd_w_ctx_s (a fused B is timed in its two halves): rank
 * 0's, so only rank 0's x is meaningful. */
static int replay_body(const plan *p, int reps, exec_val_extra *x, xwriter *xw, const int *cpu,
                       const exec_tp_comm *procs, const char *file, cl_err *e)
{
    const int mb = p->microbatch > 0 ? p->microbatch : 1, m = p->n_micro > 0 ? p->n_micro : 1;
    int iters = 1 + (reps + m - 1) / m;
    if (iters < 3) iters = 3;
    sched sc;
    int rc = sched_build(p, (sched_kind)p->schedule, m, iters, &sc, e);
    if (rc) return rc;
    const int S = p->n_stages, T = plan_tensor(p);
    rstage *rs = cl_calloc((size_t)S * (size_t)T, sizeof *rs); /* [s * T + rank] */
    tcomm *tc = cl_calloc((size_t)S * (size_t)T, sizeof *tc);
    int *split = cl_calloc((size_t)S, sizeof *split);
    exec_tp_crew *crew = NULL;
    int64_t most = 0; /* the largest collective: a split layer's output */
    for (int s = 0; s < S && T > 1; s++) {
        const plan_stage *st = &p->stages[s];
        split[s] = exec_net_has_split(&p->model, st->first, st->last + 1);
        for (int i = st->first; i <= st->last && split[s]; i++) {
            const model_layer *l = &p->model.layers[i];
            if ((l->kind == MODEL_ATTENTION || l->kind == MODEL_MLP) && (int64_t)l->out_elems > most)
                most = (int64_t)l->out_elems;
        }
    }
    if (most > 0 && !procs) crew = exec_tp_crew_create(T, most * mb, cpu);
    const int me = procs ? procs->rank : 0; /* this thread's rank (procs) */
    assert(!procs || (procs->size == T && me >= 0 && me < T));
    for (int w = 0; w < sc.n_dev && !rc; w++) {
        for (int64_t k = sc.off[w]; k < sc.off[w + 1] && !rc; k++) {
            const sched_op *op = &sc.ops[k];
            if (op->kind != SCHED_F && op->kind != SCHED_B && op->kind != SCHED_W &&
                op->kind != SCHED_UPDATE)
                continue;
            rstage *r = &rs[(size_t)op->stage * (size_t)T];
            /* the ranks this thread runs: all of the crew's, or its own */
            const int q0 = split[op->stage] ? me : 0, q1 = split[op->stage] && crew ? T : q0 + 1;
            if (!r[q0].net) { /* first op of this stage on this worker */
                for (int q = q0; q < q1 && !rc; q++) {
                    tcomm *c = &tc[(size_t)op->stage * (size_t)T + (size_t)q];
                    *c = (tcomm){{.rank = q, .size = T, .allreduce = tcomm_allreduce,
                                  .reduce_scatter = tcomm_reduce_scatter,
                                  .all_gather = tcomm_all_gather, .ctx = c},
                                 procs ? procs : crew ? exec_tp_group_comm(exec_tp_crew_group(crew), q) : NULL,
                                 &r[q]};
                    /* without a split, rank 0's share alone (solo) */
                    rc = rs_init(&r[q], p, op->stage, iters, split[op->stage] ? &c->c : NULL, file, e);
                }
                if (rc) break;
            }
            int timed = op->iter >= 1;
            /* an input that came from another worker was written by its core */
            int dev = p->stages[op->stage].devices[0];
            if (op->kind == SCHED_F && op->stage > 0 && p->stages[op->stage - 1].devices[0] != dev)
                xw_write(xw, r->x, r->x0, r->in_n);
            if (op->kind == SCHED_B && r->dout0 && p->stages[op->stage + 1].devices[0] != dev)
                xw_write(xw, r->dout, r->dout0, r->out_n);
            if (split[op->stage] && crew) {
                rjob j = {r, p, op, timed};
                exec_tp_crew_run(crew, rjob_run, &j);
            } else {
                rs_op(&r[q0], p, op, timed && q0 == 0);
            }
        }
    }
    for (int s = 0; s < S; s++) {
        rstage *r = &rs[(size_t)s * (size_t)T];
        if (!rc) {
            x[s].fwd_ctx_s = r->nf ? cl_median(r->tf, r->nf) : 0;
            x[s].bwd_in_ctx_s = r->ni ? cl_median(r->ti, r->ni) : 0;
            x[s].bwd_w_ctx_s = r->nw ? cl_median(r->tw, r->nw) : 0;
            x[s].ar_ctx_s = r->ar_sum_n ? r->ar_sum_s / (double)r->ar_sum_n : 0;
        }
        for (int q = 0; q < T; q++) rs_free(&r[q]);
    }
    exec_tp_crew_destroy(crew);
    free(split);
    free(tc);
    free(rs);
    sched_free(&sc);
    return rc;
}

typedef struct replay_job {
    const plan *p;
    int reps;
    exec_val_extra *x;
    xwriter *xw;
    const int *crew_cpu;
    const char *file;
    cl_err *e;
    int cpu, rc;
} replay_job;

static void *replay_main(void *arg)
{
    replay_job *j = arg;
    pin_to(j->cpu);
    exec_blas_init();
    j->rc = replay_body(j->p, j->reps, j->x, j->xw, j->crew_cpu, NULL, j->file, j->e);
    return NULL;
}

/* replay_body on this thread, or (xcore, with two cores to use) on a thread
 * pinned to one core while an xwriter on another rewrites every input that
 * came from another worker just before the op that reads it.  With tensor
 * parallelism the other cores are the crew's, rank k on the k-th allowed
 * core (mod their number) as in the run (pipe_tp_crew_init with one
 * worker), and there is no xwriter: t x p <= 2 leaves it no core. */
static int replay_passes(const plan *p, int reps, int xcore, exec_val_extra *x, const char *file,
                         cl_err *e)
{
    cpu_set_t set;
    int cpus[CPU_SETSIZE], n = 0;
    const int T = plan_tensor(p);
    CPU_ZERO(&set);
    if ((xcore || T > 1) && sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpus[n++] = c;
    int *crew_cpu = NULL;
    if (T > 1 && n > 0) {
        crew_cpu = cl_malloc((size_t)T * sizeof *crew_cpu);
        for (int k = 0; k < T; k++) crew_cpu[k] = cpus[k % n];
    }
    if (n < 2) {
        int rc = replay_body(p, reps, x, NULL, crew_cpu, NULL, file, e);
        free(crew_cpu);
        return rc;
    }
    xwriter xw;
    memset(&xw, 0, sizeof xw);
    atomic_init(&xw.req, 0);
    xw.cpu = cpus[1];
    const int writer = xcore && T == 1;
    replay_job j = {p, reps, x, writer ? &xw : NULL, crew_cpu, file, e, cpus[0], CL_OK};
    pthread_t th;
    if (writer && pthread_create(&xw.th, NULL, xw_main, &xw)) abort();
    if (pthread_create(&th, NULL, replay_main, &j)) abort();
    pthread_join(th, NULL);
    if (writer) {
        atomic_store(&xw.req, 2);
        pthread_join(xw.th, NULL);
    }
    free(crew_cpu);
    return j.rc;
}

/* replay_passes EXEC_VAL_REPLAYS times, each stage's times the median of
 * the replays' medians: another job slowing the machine for a good part of
 * one replay (a tenth of a second on fmnist-cnn) moved a whole stage's
 * costs by up to 40%; it only ever slows, and one replay in three is
 * outvoted. */
#define EXEC_VAL_REPLAYS 3
static int replays(const plan *p, int reps, int xcore, const exec_tp_comm *procs,
                   exec_val_extra *x, const char *file, cl_err *e)
{
    int S = p->n_stages;
    double *v = cl_malloc((size_t)S * 4 * EXEC_VAL_REPLAYS * sizeof *v);
    int rc = CL_OK;
    if (procs) exec_blas_init();
    for (int k = 0; k < EXEC_VAL_REPLAYS && !rc; k++) {
        /* over processes: this thread, where the launcher put the process */
        rc = procs ? replay_body(p, reps, x, NULL, NULL, procs, file, e)
                   : replay_passes(p, reps, xcore, x, file, e);
        for (int s = 0; s < S && !rc; s++) {
            v[(s * 4 + 0) * EXEC_VAL_REPLAYS + k] = x[s].fwd_ctx_s;
            v[(s * 4 + 1) * EXEC_VAL_REPLAYS + k] = x[s].bwd_in_ctx_s;
            v[(s * 4 + 2) * EXEC_VAL_REPLAYS + k] = x[s].bwd_w_ctx_s;
            v[(s * 4 + 3) * EXEC_VAL_REPLAYS + k] = x[s].ar_ctx_s;
        }
    }
    for (int s = 0; s < S && !rc; s++) {
        x[s].fwd_ctx_s = cl_median(v + (s * 4 + 0) * EXEC_VAL_REPLAYS, EXEC_VAL_REPLAYS);
        x[s].bwd_in_ctx_s = cl_median(v + (s * 4 + 1) * EXEC_VAL_REPLAYS, EXEC_VAL_REPLAYS);
        x[s].bwd_w_ctx_s = cl_median(v + (s * 4 + 2) * EXEC_VAL_REPLAYS, EXEC_VAL_REPLAYS);
        x[s].ar_ctx_s = cl_median(v + (s * 4 + 3) * EXEC_VAL_REPLAYS, EXEC_VAL_REPLAYS);
    }
    free(v);
    return rc;
}

int exec_val_replay(const plan *p, int reps, int xcore, exec_val_extra *x, const char *file,
                    cl_err *e)
{
    return replays(p, reps, xcore, NULL, x, file, e);
}

int exec_val_replay_procs(const plan *p, int reps, const exec_tp_comm *procs, exec_val_extra *x,
                          const char *file, cl_err *e)
{
    assert(procs && procs->size == plan_tensor(p));
    return replays(p, reps, 0, procs, x, file, e);
}
