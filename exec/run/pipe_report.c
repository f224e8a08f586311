/* pipe_report.c - what a pipelined run's workers do besides their op
 * lists (pipe_report.h): the evaluation pass through the stages after each
 * run of the lists, the per-epoch statistics and the final report each
 * worker sends worker 0 (timings, memory, spans, parameters; read back by
 * pipe_blob_parse, pipe_run.c). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "pipe_report.h"
#include "pipe_tp.h"
#include "pipe_worker.h"

/* ---------------------------------------------------------- evaluation -- */

/* Forward the test set through the stages in evaluation mode, one batch at
 * a time: replica 0 of every position takes part; the last stage sums the
 * loss and the correct answers. */
int pipe_eval_pass(pipe_worker *W)
{
    pipe_run *R = W->R;
    const exec_data *d = R->o->test;
    W->test_loss = W->test_corr = 0;
    if (!d || W->rep != 0) return CL_OK;
    int64_t eb = R->eval_batch, nb = (d->n + eb - 1) / eb;
    int64_t *idx = cl_malloc((size_t)eb * sizeof *idx);
    int rc = CL_OK;
    for (int64_t b = 0; b < nb && !rc; b++) {
        int B = (int)(d->n - b * eb < eb ? d->n - b * eb : eb);
        for (int i = 0; i < B; i++) idx[i] = b * eb + i;
        for (int i = 0; i < W->n_st && !rc; i++) {
            pstage *ps = &W->st[i];
            int s = ps->stage;
            exec_msg *m = NULL;
            const float *in;
            if (s == 0) {
                exec_data_gather(d, idx, B, W->xb, W->yb);
                in = W->xb;
            } else if (W->local[s - 1] >= 0) {
                in = exec_acts_output(W->st[W->local[s - 1]].eval_acts[0]);
            } else {
                rc = pipe_take_wait(W, pipe_worker_of(R, s - 1, 0), exec_tag(EXEC_TAG_EVAL, s - 1, b),
                               pipe_bnd_bytes(R, s - 1, B), -1, &m);
                if (rc) break;
                in = exec_msg_data(m);
            }
            if (ps->has_loss)
                for (int j = 0; j < B; j++) W->yb[j] = d->y[idx[j]];
            pipe_tp_pass(W, ps, PIPE_TP_FWD, ps->eval_acts, in, ps->has_loss ? W->yb : NULL, B, 0,
                         NULL, NULL, 0);
            if (m) exec_msg_free(m);
            if (ps->has_loss) {
                W->test_loss += exec_acts_loss_sum(ps->eval_acts[0]);
                W->test_corr += exec_acts_correct(ps->eval_acts[0]);
            } else if (s + 1 < R->S && W->local[s + 1] < 0) {
                exec_msg *o = exec_msg_new(pipe_bnd_bytes(R, s, B));
                memcpy(exec_msg_data(o), exec_acts_output(ps->eval_acts[0]), (size_t)o->bytes);
                o->tag = exec_tag(EXEC_TAG_EVAL, s, b);
                o->dst = pipe_worker_of(R, s + 1, 0);
                o->bounded = 1;
                rc = pipe_post_wait(W, o, -1);
            }
        }
    }
    free(idx);
    return rc;
}

/* ------------------------------------------------------------- reports -- */

/* After each run: every worker sends worker 0 its sums (training loss and
 * correct answers, test loss and correct, the loss of each iteration); worker
 * 0 adds them up into the epoch record and calls on_epoch. */
int pipe_epoch_report(pipe_worker *W, double train_s)
{
    pipe_run *R = W->R;
    int n = 4 + R->iters;
    exec_msg *m = exec_msg_new((int64_t)n * 8);
    double *v = exec_msg_data(m);
    v[0] = v[1] = 0;
    for (int i = 0; i < R->iters; i++) {
        v[0] += W->loss_it[i];
        v[1] += W->corr_it[i];
        v[4 + i] = W->loss_it[i];
    }
    v[2] = W->test_loss;
    v[3] = W->test_corr;
    uint64_t tag = exec_tag(EXEC_TAG_STAT, 0, (int64_t)W->run * 2);
    if (W->w != 0) {
        m->tag = tag;
        m->dst = 0;
        return pipe_post_wait(W, m, -1);
    }
    int rc = CL_OK;
    for (int src = 1; src < R->n_w && !rc; src++) {
        exec_msg *o;
        rc = pipe_take_wait(W, src, tag, (int64_t)n * 8, -1, &o);
        if (rc) break;
        const double *u = exec_msg_data(o);
        for (int i = 0; i < n; i++) v[i] += u[i];
        exec_msg_free(o);
    }
    if (!rc) {
        double samples = (double)R->iters * R->batch;
        exec_epoch *ep = &R->epochs[W->run];
        memset(ep, 0, sizeof *ep);
        ep->epoch = W->run + 1;
        ep->loss = v[0] / samples;
        ep->train_acc = v[1] / samples;
        ep->test_loss = ep->test_acc = NAN;
        if (R->o->test) {
            ep->test_loss = v[2] / (double)R->o->test->n;
            ep->test_acc = v[3] / (double)R->o->test->n;
        }
        ep->samples_per_s = samples / train_s;
        ep->elapsed_s = pipe_now(W);
        ep->lr = pipe_lr_at(R, &(sched_op){.micro = R->m_micro - 1}, (int64_t)(W->run + 1) * R->iters - 1, 1);
        for (int i = 0; i < R->iters; i++) R->iter_loss[(int64_t)W->run * R->iters + i] = v[4 + i];
        R->n_epochs_done = W->run + 1;
        if (R->o->on_epoch) R->o->on_epoch(R->o->ctx, ep);
    }
    exec_msg_free(m);
    return rc;
}

/* The final report: fixed part, per-iteration arrays, spans, and the
 * parameters of the stages this worker holds as replica 0. */
int pipe_final_report(pipe_worker *W)
{
    pipe_run *R = W->R;
    int64_t total = R->total_iters, pbytes = 0;
    /* the stages' whole parameters (gathered from tensor-parallel shards) */
    exec_net **whole = cl_calloc((size_t)W->n_st + 1, sizeof *whole);
    int *made = cl_calloc((size_t)W->n_st + 1, sizeof *made);
    if (W->rep == 0 && R->o->keep_params)
        for (int i = 0; i < W->n_st; i++) {
            whole[i] = pipe_tp_whole(W, &W->st[i], &made[i]);
            pbytes += 8;
            for (int t = 0; t < exec_net_n_tensors(whole[i]); t++)
                pbytes += 96 + 8 + exec_net_tensor(whole[i], t)->n * 4;
        }
    int64_t len = (int64_t)sizeof(pworker_rep) + 2 * total * 8 + W->n_sp * (int64_t)sizeof(pspan) + pbytes;
    exec_msg *m = exec_msg_new(len);
    unsigned char *b = exec_msg_data(m);
    pworker_rep rep = {0};
    rep.busy_s = W->busy;
    rep.wait_s = W->waited;
    rep.peak_mem = W->peak;
    rep.peak_t = W->peak_t;
    rep.at_peak = W->at_peak;
    rep.sent_bytes = W->sent;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    rep.peak_rss = (double)ru.ru_maxrss * 1024.0;
    rep.peak_stash = W->peak_stash;
    rep.peak_versions = W->peak_versions;
    rep.n_spans = W->n_sp;
    rep.param_bytes = pbytes;
    unsigned char *p = b;
    memcpy(p, &rep, sizeof rep);
    p += sizeof rep;
    memcpy(p, W->iter_busy, (size_t)total * 8);
    p += total * 8;
    memcpy(p, W->iter_end, (size_t)total * 8);
    p += total * 8;
    if (W->n_sp) memcpy(p, W->sp, (size_t)W->n_sp * sizeof(pspan));
    p += W->n_sp * (int64_t)sizeof(pspan);
    if (pbytes)
        for (int i = 0; i < W->n_st; i++) {
            exec_net *net = whole[i];
            int32_t hdr[2] = {W->st[i].stage, exec_net_n_tensors(net)};
            memcpy(p, hdr, 8);
            p += 8;
            for (int t = 0; t < hdr[1]; t++) {
                const exec_tensor *x = exec_net_tensor(net, t);
                memcpy(p, x->name, 96);
                memcpy(p + 96, &x->n, 8);
                memcpy(p + 104, x->data, (size_t)x->n * 4);
                p += 104 + x->n * 4;
            }
        }
    assert(p == b + len);
    for (int i = 0; i < W->n_st; i++)
        if (made[i]) exec_net_destroy(whole[i]);
    free(whole);
    free(made);
    uint64_t tag = exec_tag(EXEC_TAG_STAT, 0, (int64_t)R->n_runs * 2 + 1);
    if (W->w != 0) {
        m->tag = tag;
        m->dst = 0;
        return pipe_post_wait(W, m, -1);
    }
    R->blobs[0] = cl_malloc((size_t)len);
    memcpy(R->blobs[0], b, (size_t)len);
    R->blob_len[0] = len;
    exec_msg_free(m);
    for (int src = 1; src < R->n_w; src++) {
        exec_msg *o;
        int rc = pipe_take_wait(W, src, tag, -1, -1, &o);
        if (rc) return rc;
        R->blobs[src] = cl_malloc((size_t)o->bytes);
        memcpy(R->blobs[src], exec_msg_data(o), (size_t)o->bytes);
        R->blob_len[src] = o->bytes;
        exec_msg_free(o);
    }
    return CL_OK;
}
