/* pipe_worker.c - a worker's message steps in a pipelined run
 * (pipe_worker.h): timeline spans, blocking waits that keep every
 * all-reduce moving and give up when the run stops (a failure elsewhere, a
 * stall, a signal), and the ring all-reduce of replicated stages.  The op
 * list itself: pipe_ops.c. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "exec/ckpt/checkpoint.h"
#include "pipe_worker.h"

pspan *pipe_span_add(pipe_worker *W, int kind)
{
    if (W->n_sp == W->cap_sp) {
        W->cap_sp = W->cap_sp * 2 + 256;
        W->sp = cl_realloc(W->sp, (size_t)W->cap_sp * sizeof *W->sp);
    }
    pspan *s = &W->sp[W->n_sp++];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->epoch = W->run;
    return s;
}

/* --------------------------------------------------------- all-reduce -- */

static int imod(int a, int r) { return ((a % r) + r) % r; }

/* Rank k's gradient block of ps (every rank's is n_floats long). */
static float *shard_grads(pstage *ps, int k)
{
    int64_t n;
    float *g = exec_net_grads(ps->tnet[k], &n);
    assert(n == ps->n_floats);
    return g;
}

static void chunk_range(const pstage *ps, int c, int64_t *lo, int64_t *hi)
{
    *lo = ps->n_floats * c / ps->r;
    *hi = ps->n_floats * (c + 1) / ps->r;
}

/* Ring all-reduce of ps's gradient block over its r replicas: r - 1
 * reduce-scatter steps (send chunk q - t, add the received chunk q - t - 1)
 * then r - 1 all-gather steps (send chunk q + 1 - t, copy chunk q - t).
 * The same steps and additions on both backends, so the same bits.  With
 * tensor parallelism (ps->T > 1) the replicas' rank k shards reduce with
 * one another, each in chunks of its own (pipe_tp.h): a step's message
 * carries chunk c of every rank's shard, rank 0 moving them (the crew is
 * idle between the calls it runs, and this thread is the one that starts
 * them).  Returns whether anything moved. */
static int ar_progress(pipe_worker *W, pstage *ps)
{
    int moved = 0;
    const int r = ps->r, q = ps->replica, nsteps = 2 * (r - 1), T = ps->T;
    while (ps->ar_active) {
        if (ps->ar_step == nsteps) {
            ps->ar_active = 0;
            ps->ar_done = 1;
            ps->ar_k++;
            return 1;
        }
        int t = ps->ar_step, rs = t < r - 1, tt = rs ? t : t - (r - 1);
        int c_send = rs ? imod(q - tt, r) : imod(q + 1 - tt, r);
        int c_recv = rs ? imod(q - tt - 1, r) : imod(q - tt, r);
        int64_t lo, hi;
        uint64_t tag = exec_tag(EXEC_TAG_AR, ps->stage, ps->ar_k * nsteps + t);
        if (!ps->ar_sent) {
            chunk_range(ps, c_send, &lo, &hi);
            exec_msg *m = exec_msg_new(T * (hi - lo) * PIPE_FLOAT_BYTES);
            for (int k = 0; k < T; k++)
                memcpy((float *)exec_msg_data(m) + k * (hi - lo), shard_grads(ps, k) + lo,
                       (size_t)(hi - lo) * PIPE_FLOAT_BYTES);
            m->tag = tag;
            m->dst = ps->ring[(q + 1) % r];
            m->t_post = pipe_now(W);
            int rc = W->x->ops->post(W->x, W->w, m);
            assert(rc == 0); /* unbounded */
            (void)rc;
            W->sent += (double)(T * (hi - lo)) * PIPE_FLOAT_BYTES;
            ps->ar_sent = 1;
            moved = 1;
        }
        chunk_range(ps, c_recv, &lo, &hi);
        int src = ps->ring[(q + r - 1) % r];
        exec_msg *m = W->x->ops->take(W->x, W->w, src, tag, T * (hi - lo) * PIPE_FLOAT_BYTES);
        if (!m) break;
        if (W->R->tracing) {
            pspan *s = pipe_span_add(W, PSPAN_AR);
            s->t0 = m->t_post;
            s->t1 = pipe_now(W);
            s->bytes = (double)m->bytes;
            s->op = ps->stage;
            s->src = src;
            s->dst = W->w;
            s->iter = -1;
        }
        for (int k = 0; k < T; k++) {
            float *g = shard_grads(ps, k) + lo;
            const float *in = (const float *)exec_msg_data(m) + k * (hi - lo);
            if (rs)
                for (int64_t i = 0; i < hi - lo; i++) g[i] += in[i];
            else
                memcpy(g, in, (size_t)(hi - lo) * PIPE_FLOAT_BYTES);
        }
        exec_msg_free(m);
        ps->ar_step++;
        ps->ar_sent = 0;
        moved = 1;
    }
    return moved;
}

void pipe_ar_start(pstage *ps)
{
    assert(!ps->ar_active && !ps->ar_done);
    ps->ar_active = 1;
    ps->ar_step = ps->ar_sent = 0;
}

int pipe_ar_progress_all(pipe_worker *W)
{
    int moved = 0;
    for (int i = 0; i < W->n_st; i++) moved |= ar_progress(W, &W->st[i]);
    return moved;
}

/* ------------------------------------------------------------ signals -- */

int pipe_signal_check(pipe_worker *W, int64_t k)
{
    pipe_run *R = W->R;
    int sig = exec_ckpt_signal();
    if (!sig) return CL_OK;
    if (R->ckpt && R->x->rank < 0) return CL_OK; /* threads: the next iteration end */
    char where[160];
    if (k >= 0) {
        const sched_op *op = &R->sc.ops[k];
        if (op->kind == SCHED_RECV)
            snprintf(where, sizeof where, "waiting for a message from %s %d (iteration %d)",
                     R->x->rank >= 0 ? "rank" : "worker", pipe_world_rank(R, op->peer), op->iter);
        else
            snprintf(where, sizeof where, "at op %lld of iteration %d",
                     (long long)(k - R->sc.off[W->w]), op->iter);
    } else {
        snprintf(where, sizeof where, "between iterations");
    }
    if (R->x->rank >= 0)
        return pipe_run_fail(R, CL_ERUN, "rank %d: %s while %s; under mpirun that means another rank died or the job was stopped (hint: %s)",
                             pipe_world_rank(R, W->w), exec_ckpt_signal_name(sig), where,
                             R->o->ckpt_path ? "resume from the last checkpoint with --resume" : "--checkpoint FILE --checkpoint-every N makes MPI runs resumable");
    return pipe_run_fail(R, CL_ERUN, "%s: stopped %s; schedule %s keeps microbatches in flight across iterations, so nothing was saved",
                         exec_ckpt_signal_name(sig), where, sched_kind_name((sched_kind)R->sc.kind));
}

/* ------------------------------------------------------------- waits -- */

typedef int (*try_fn)(pipe_worker *W, void *arg); /* 1 when done */

static const char *what_op(const sched_op *op, char *buf, size_t cap)
{
    static const char *const kinds[] = {"F", "B", "W", "SEND", "RECV", "ALLREDUCE", "UPDATE"};
    if (op->kind == SCHED_SEND || op->kind == SCHED_RECV)
        snprintf(buf, cap, "%s %s of stage %d microbatch %d iteration %d %s worker %d",
                 kinds[op->kind], op->flags & SCHED_GRAD ? "gradient" : "activation", op->stage,
                 op->micro, op->iter, op->kind == SCHED_SEND ? "to" : "from", op->peer);
    else
        snprintf(buf, cap, "%s of stage %d microbatch %d iteration %d", kinds[op->kind], op->stage,
                 op->micro, op->iter);
    return buf;
}

/* Block until f says done, making all-reduce progress meanwhile; the time
 * counts as waiting.  CL_ERUN when the run stops (a stall here or in
 * another worker); `k` is the op index for the stall report (-1: not in
 * the op list). */
static int wait_until(pipe_worker *W, try_fn f, void *arg, int64_t k)
{
    if (f(W, arg)) return CL_OK;
    const exec_xport_ops *X = W->x->ops;
    double t0 = exec_now();
    for (;;) {
        uint64_t seen = X->events(W->x, W->w);
        if (f(W, arg)) break;
        if (pipe_ar_progress_all(W)) continue;
        if (X->aborted(W->x)) return CL_ERUN;
        int rc = pipe_signal_check(W, k);
        if (rc) return rc;
        double t = exec_now();
        if (t - t0 > W->R->stall_s) {
            char what[256] = "the evaluation or the final report";
            if (k >= 0) what_op(&W->R->sc.ops[k], what, sizeof what);
            if (W->x->rank >= 0 && k >= 0 && W->R->sc.ops[k].kind == SCHED_RECV)
                return pipe_run_fail(W->R, CL_ERUN, "rank %d: no message from rank %d for %.0f s at op %lld (%s) in run %d (did rank %d die or hang?)",
                                     pipe_world_rank(W->R, W->w),
                                     pipe_world_rank(W->R, W->R->sc.ops[k].peer), t - t0,
                                     (long long)(k - W->R->sc.off[W->w]), what, W->run,
                                     pipe_world_rank(W->R, W->R->sc.ops[k].peer));
            /* under MPI any other wait (an all-reduce, the evaluation, the
             * final report) is a wait on the other ranks as well: a silent
             * rank is the likely cause, not the schedule */
            if (W->x->rank >= 0)
                return pipe_run_fail(W->R, CL_ERUN, "rank %d: no message from the other ranks for %.0f s at %s in run %d (did one die or hang?)",
                                     pipe_world_rank(W->R, W->w), t - t0, what, W->run);
            return pipe_run_fail(W->R, CL_ERUN, "worker %d (stage %d) waited %.0f s at op %lld (%s) in run %d; the schedule cannot complete (please report it)",
                                 W->w, W->st[0].stage, t - t0,
                                 (long long)(k >= 0 ? k - W->R->sc.off[W->w] : -1), what, W->run);
        }
        X->wait(W->x, W->w, seen, 0.05);
    }
    if (k >= 0) /* waits of the op lists only (exec_pipe_worker.wait_s), not
                   of the evaluation or the final report after them */
        W->waited += exec_now() - t0;
    return CL_OK;
}

typedef struct take_arg {
    int src;
    uint64_t tag;
    int64_t bytes;
    exec_msg *got;
} take_arg;

static int try_take(pipe_worker *W, void *arg)
{
    take_arg *a = arg;
    a->got = W->x->ops->take(W->x, W->w, a->src, a->tag, a->bytes);
    return a->got != NULL;
}

static int try_post(pipe_worker *W, void *arg)
{
    exec_msg *m = arg;
    return W->x->ops->post(W->x, W->w, m) == 0;
}

int pipe_take_wait(pipe_worker *W, int src, uint64_t tag, int64_t bytes, int64_t k, exec_msg **out)
{
    take_arg a = {src, tag, bytes, NULL};
    int rc = wait_until(W, try_take, &a, k);
    *out = a.got;
    return rc;
}

/* Post m (bounded or not); on a stopped run m is freed. */
int pipe_post_wait(pipe_worker *W, exec_msg *m, int64_t k)
{
    int rc = wait_until(W, try_post, m, k);
    if (rc) exec_msg_free(m);
    return rc;
}

static int try_ar(pipe_worker *W, void *arg)
{
    (void)W;
    return ((pstage *)arg)->ar_done;
}

int pipe_ar_wait(pipe_worker *W, pstage *ps, int64_t k)
{
    int rc = wait_until(W, try_ar, ps, k);
    if (!rc) ps->ar_done = 0;
    return rc;
}
