/* pipe_ckpt.c - checkpoints and stops of a pipelined run (pipe_ckpt.h).
 *
 * A checkpoint is taken at an iteration end, which is a drain point for the
 * flushing schedules (gpipe, 1f1b, interleaved, zb-h1, sequential): every op
 * of iteration k on a worker comes before every op of k + 1, so once a worker
 * has done its last op of k (its UPDATEs, after their all-reduces) its state
 * is exactly "k iterations done", whatever the others are doing; messages of
 * iteration k + 1 already in flight are recomputed after a resume.  Each
 * worker serialises its own state (per stage: parameters, running
 * statistics, dropout streams, momentum, update and all-reduce counters; its
 * data cursors; the epoch's loss sums so far) and sends it to worker 0, which
 * adds the run's position and history and writes the file atomically.
 * Sections are named "w<worker>.<...>", so a resume needs the same plan.
 * A tensor-parallel stage is stored whole, its shards gathered (from the
 * crew's threads, or over MPI from the worker's tensor-rank processes to
 * rank 0, which alone sends), so the file is the same whichever carried
 * the ranks and a resume splits it into either.
 *
 * The asynchronous kinds (pipedream, fbp) keep microbatches of several
 * iterations in flight on every stage: no iteration end drains them, so they
 * are neither checkpointed nor stopped at a boundary (refused up front).
 *
 * Signals (exec_ckpt_signal; pipe_signal_check in pipe_worker.c looks in
 * every wait, pipe_ckpt_boundary at every iteration end): on threads, the
 * workers agree on one iteration end to stop at: the first worker that sees
 * the signal at an iteration end sets it to one past the furthest end any
 * worker has passed (every worker registers each end it passes under the
 * run's mutex), so no worker is already beyond it and every worker reaches
 * it.  Under MPI a signal comes
 * from mpirun tearing the job down (a rank died, or the job was cancelled);
 * mpirun follows with SIGKILL a second later, so each rank stops at once
 * with a message saying where it was; the periodic checkpoints are the
 * resume points. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/ckpt/checkpoint.h"
#include "pipe_ckpt.h"
#include "pipe_tp.h"
#include "pipe_worker.h"
#include "tp_mpi.h"

enum { HIST_F = 8 }; /* doubles per epoch record, as cmd_train writes them */

static int drains(const sched *sc, const char *file, cl_err *e)
{
    for (int w = 0; w < sc->n_dev; w++)
        for (int64_t k = sc->off[w] + 1; k < sc->off[w + 1]; k++)
            if (sc->ops[k].iter < sc->ops[k - 1].iter)
                return cl_fail(e, CL_EINPUT, "%s: schedule %s: worker %d starts iteration %d before it finishes iteration %d, so no iteration end drains the pipeline to checkpoint at (hint: checkpoint a flushing schedule: gpipe, 1f1b, interleaved, zb-h1)",
                               file, sched_kind_name((sched_kind)sc->kind), w,
                               sc->ops[k - 1].iter, sc->ops[k].iter);
    return CL_OK;
}

int pipe_ckpt_check(const pipe_run *R, cl_err *e)
{
    return drains(&R->sc, R->o->file ? R->o->file : "plan", e);
}

int exec_pipe_ckpt_check(const plan *p, const char *file, cl_err *e)
{
    sched sc; /* two iterations: enough to see them overlap */
    int rc = sched_build(p, p->schedule, p->n_micro, 2, &sc, e);
    if (!rc) rc = drains(&sc, file, e);
    sched_free(&sc);
    return rc;
}

/* ------------------------------------------------------- serialising -- */

static void put_cursor(exec_ckpt *c, const char *pre, const pcursor *x, const pipe_run *R)
{
    char name[96];
    int64_t ep = x->epoch;
    snprintf(name, sizeof name, "%s.rng", pre);
    exec_ckpt_put_rng(c, name, x->rng);
    snprintf(name, sizeof name, "%s.epoch", pre);
    exec_ckpt_put_i64(c, name, &ep, 1);
    snprintf(name, sizeof name, "%s.perm", pre);
    exec_ckpt_put_i64(c, name, x->perm, (size_t)R->o->train->n);
}

static int get_cursor(const exec_ckpt *c, const char *pre, pcursor *x, const pipe_run *R, cl_err *e)
{
    char name[96];
    int rc;
    snprintf(name, sizeof name, "%s.rng", pre);
    if ((rc = exec_ckpt_get_rng(c, name, x->rng, e))) return rc;
    snprintf(name, sizeof name, "%s.epoch", pre);
    if ((rc = exec_ckpt_get(c, name, &x->epoch, sizeof x->epoch, e))) return rc;
    if (x->epoch < -1 || x->epoch > R->start_gi / R->data_ipe)
        return cl_fail(e, CL_EINPUT, "%s: section %s: data epoch %lld does not fit iteration %lld (hint: the file is damaged)",
                       exec_ckpt_file(c), name, (long long)x->epoch, (long long)R->start_gi);
    snprintf(name, sizeof name, "%s.perm", pre);
    int64_t n = R->o->train->n;
    if ((rc = exec_ckpt_get(c, name, x->perm, (size_t)n * sizeof *x->perm, e))) return rc;
    for (int64_t i = 0; i < n; i++)
        if (x->perm[i] < 0 || x->perm[i] >= n)
            return cl_fail(e, CL_EINPUT, "%s: section %s: sample %lld is out of range (hint: the file is damaged)",
                           exec_ckpt_file(c), name, (long long)x->perm[i]);
    return CL_OK;
}

/* This worker's sections.  With tensor ranks as processes (R->tpm) every
 * rank of the worker calls it (its split stages' shards are gathered to
 * tensor rank 0, pipe_tp_mpi_put), and only tensor rank 0 gets them: the
 * others return NULL (their cursors, counters and losses are rank 0's,
 * each rank having walked the same op list with the same data). */
static exec_ckpt *worker_state(pipe_worker *W)
{
    const pipe_run *R = W->R;
    if (R->tpm && exec_tp_mpi_rank(R->tpm) != 0) {
        for (int i = 0; i < W->n_st; i++)
            if (W->st[i].tpm) pipe_tp_mpi_put(W, &W->st[i], NULL, NULL);
        return NULL;
    }
    exec_ckpt *c = exec_ckpt_new();
    char pre[64], name[96];
    assert(W->n_box == 0 && "an iteration end with messages in the mailbox");
    for (int i = 0; i < W->n_st; i++) {
        pstage *ps = &W->st[i];
        assert(ps->n_slot == 0 && !ps->ar_active && !ps->ar_done);
        snprintf(pre, sizeof pre, "w%d.s%d", W->w, ps->stage);
        if (ps->T > 1) /* the whole stage (pipe_tp.h) */
            exec_ckpt_put_net_tp(c, pre, R->m, R->stage_first[ps->stage], R->stage_end[ps->stage],
                                 ps->tnet, ps->tsgd, ps->T);
        else if (ps->tpm)
            pipe_tp_mpi_put(W, ps, c, pre);
        else
            exec_ckpt_put_net(c, pre, ps->net, &ps->sgd);
        int64_t cnt[2] = {ps->cur_ver, ps->ar_k};
        snprintf(name, sizeof name, "%s.counters", pre);
        exec_ckpt_put_i64(c, name, cnt, 2);
    }
    if (W->cx.rng) {
        snprintf(pre, sizeof pre, "w%d.cx", W->w);
        put_cursor(c, pre, &W->cx, R);
    }
    if (W->cy.rng) {
        snprintf(pre, sizeof pre, "w%d.cy", W->w);
        put_cursor(c, pre, &W->cy, R);
    }
    snprintf(name, sizeof name, "w%d.loss_it", W->w);
    exec_ckpt_put_f64(c, name, W->loss_it, (size_t)R->iters);
    snprintf(name, sizeof name, "w%d.corr_it", W->w);
    exec_ckpt_put_f64(c, name, W->corr_it, (size_t)R->iters);
    return c;
}

/* Worker 0's sections: identity, position, the epochs done. */
static void run_state(exec_ckpt *c, const pipe_run *R, int64_t gi)
{
    exec_ckpt_put_str(c, "kind", "pipelined");
    exec_ckpt_put_ids(c, R->o->ids, R->o->n_ids);
    int64_t pos[5] = {gi, R->n_epochs_done, R->iters, R->n_runs, R->n_w};
    exec_ckpt_put_i64(c, "run.position", pos, 5);
    int n = R->n_epochs_done;
    double *h = cl_malloc((size_t)(n ? n : 1) * HIST_F * sizeof *h);
    for (int i = 0; i < n; i++) {
        const exec_epoch *x = &R->epochs[i];
        double v[HIST_F] = {x->epoch, x->loss, x->train_acc, x->test_loss, x->test_acc,
                            x->samples_per_s, x->elapsed_s, x->lr};
        memcpy(h + (size_t)i * HIST_F, v, sizeof v);
    }
    exec_ckpt_put_f64(c, "run.epochs", h, (size_t)n * HIST_F);
    free(h);
    exec_ckpt_put_f64(c, "run.iter_loss", R->iter_loss, (size_t)n * (size_t)R->iters);
}

/* Every worker's state to worker 0, which writes the file. */
static int gather_write(pipe_worker *W, int64_t gi)
{
    pipe_run *R = W->R;
    exec_ckpt *mine = worker_state(W);
    if (!mine) return CL_OK; /* a tensor rank above 0: its shards went to rank 0 */
    size_t len;
    unsigned char *b = exec_ckpt_encode(mine, &len);
    uint64_t tag = exec_tag(EXEC_TAG_STAT, 1, gi);
    int rc = CL_OK;
    if (W->w != 0) {
        exec_msg *m = exec_msg_new((int64_t)len);
        memcpy(exec_msg_data(m), b, len);
        m->tag = tag;
        m->dst = 0;
        rc = pipe_post_wait(W, m, -1);
    } else {
        exec_ckpt *all = exec_ckpt_new();
        run_state(all, R, gi);
        exec_ckpt_merge(all, mine);
        for (int src = 1; src < R->n_w && !rc; src++) {
            exec_msg *m;
            if ((rc = pipe_take_wait(W, src, tag, -1, -1, &m))) break;
            exec_ckpt *theirs = NULL;
            cl_err e = {0};
            int bad = exec_ckpt_decode(&theirs, exec_msg_data(m), (size_t)m->bytes, "message", &e);
            assert(!bad && "a worker's checkpoint message does not decode");
            (void)bad;
            exec_ckpt_merge(all, theirs);
            exec_ckpt_free(theirs);
            exec_msg_free(m);
        }
        cl_err e = {0};
        if (!rc && exec_ckpt_write(all, R->o->ckpt_path, &e))
            rc = pipe_run_fail(R, e.code, "%s", e.msg);
        exec_ckpt_free(all);
    }
    free(b);
    exec_ckpt_free(mine);
    return rc;
}

/* ------------------------------------------------------------ restore -- */

int pipe_ckpt_restore(pipe_worker *W)
{
    pipe_run *R = W->R;
    const exec_ckpt *c = R->o->resume;
    if (!c) return CL_OK;
    char pre[64], name[96];
    cl_err e = {0};
    int rc = CL_OK;
    for (int i = 0; i < W->n_st && !rc; i++) {
        pstage *ps = &W->st[i];
        snprintf(pre, sizeof pre, "w%d.s%d", W->w, ps->stage);
        int64_t cnt[2];
        snprintf(name, sizeof name, "%s.counters", pre);
        rc = ps->T > 1 ? exec_ckpt_get_net_tp(c, pre, R->m, R->stage_first[ps->stage],
                                              R->stage_end[ps->stage], ps->tnet, ps->tsgd, ps->T, &e)
             : ps->tpm ? pipe_tp_mpi_get(W, ps, c, pre, &e)
                       : exec_ckpt_get_net(c, pre, ps->net, &ps->sgd, &e);
        if (!rc &&
            !(rc = exec_ckpt_get(c, name, cnt, sizeof cnt, &e))) {
            ps->cur_ver = cnt[0];
            ps->ar_k = cnt[1];
        }
    }
    if (!rc && W->cx.rng) {
        snprintf(pre, sizeof pre, "w%d.cx", W->w);
        rc = get_cursor(c, pre, &W->cx, R, &e);
    }
    if (!rc && W->cy.rng) {
        snprintf(pre, sizeof pre, "w%d.cy", W->w);
        rc = get_cursor(c, pre, &W->cy, R, &e);
    }
    if (!rc) {
        snprintf(name, sizeof name, "w%d.loss_it", W->w);
        rc = exec_ckpt_get(c, name, W->loss_it, (size_t)R->iters * sizeof *W->loss_it, &e);
    }
    if (!rc) {
        snprintf(name, sizeof name, "w%d.corr_it", W->w);
        rc = exec_ckpt_get(c, name, W->corr_it, (size_t)R->iters * sizeof *W->corr_it, &e);
    }
    return rc ? pipe_run_fail(R, rc, "%s", e.msg) : CL_OK;
}

/* ------------------------------------------------------------- stops -- */

int pipe_ckpt_boundary(pipe_worker *W, int64_t gi, int run_end)
{
    pipe_run *R = W->R;
    if (!R->ckpt) return pipe_signal_check(W, -1);
    if (!run_end && gi % R->iters == 0) return CL_OK; /* after the run's report */
    int stop = 0;
    if (R->x->rank < 0) { /* threads: agree on the iteration end to stop at */
        pthread_mutex_lock(&R->mu);
        R->passed[W->w] = gi;
        int sig = exec_ckpt_signal();
        if (R->stop_at < 0 && sig) {
            /* another worker that registered the furthest end went on past
             * it (no stop was set then): stop one later; alone at the
             * furthest end, stop here */
            int64_t far = gi;
            int others_there = 0;
            for (int w = 0; w < R->n_w; w++)
                if (R->passed[w] > far) far = R->passed[w];
            for (int w = 0; w < R->n_w; w++) others_there |= w != W->w && R->passed[w] == far;
            R->stop_at = far == gi && !others_there ? gi : far + 1;
            R->stop_sig = sig;
        }
        stop = R->stop_at == gi;
        pthread_mutex_unlock(&R->mu);
    } else {
        int rc = pipe_signal_check(W, -1);
        if (rc) return rc;
    }
    int due = R->o->ckpt_path &&
              (run_end || stop || (R->o->ckpt_every > 0 && gi % R->o->ckpt_every == 0));
    int rc = due ? gather_write(W, gi) : CL_OK;
    if (rc) return rc;
    if (stop && gi < R->total_iters) return PIPE_STOP;
    if (pipe_world_rank(R, W->w) == 0) exec_ckpt_test_pause(gi);
    return CL_OK;
}
