/* pipe_run.c - run-wide helpers of a pipelined run (pipe_run.h): the run's
 * first failure, where stages live, boundary sizes, the learning rate of an
 * update, and reading back a worker's report. */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "pipe_run.h"
#include "tp_mpi.h"

int pipe_run_fail(pipe_run *R, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&R->mu);
    cl_fail(&R->err, code, "%s", msg);
    pthread_mutex_unlock(&R->mu);
    R->x->ops->abort(R->x);
    return code;
}

int pipe_world_rank(const pipe_run *R, int w)
{
    return R->tpm ? w * plan_tensor(R->p) + exec_tp_mpi_rank(R->tpm) : w;
}

int pipe_worker_of(const pipe_run *R, int s, int q)
{
    return R->sc.kind == SCHED_SEQUENTIAL ? 0 : R->pos_w0[s % R->P] + q;
}

int64_t pipe_bnd_bytes(const pipe_run *R, int b, int batch)
{
    return (int64_t)batch * R->bnd_elems[b] * PIPE_FLOAT_BYTES;
}

double pipe_lr_at(const pipe_run *R, const sched_op *op, int64_t gi, int r)
{
    const exec_pipe_opts *o = R->o;
    if (o->lr_schedule == EXEC_LR_CONSTANT) return o->lr;
    double f;
    if (sched_is_async((sched_kind)R->p->schedule)) /* the round's first microbatch */
        f = ((double)gi * R->m_micro + (op->micro - op->micro % r)) /
            ((double)R->total_iters * R->m_micro);
    else
        f = (double)gi / (double)R->total_iters;
    if (f > 1) f = 1;
    return o->lr * 0.5 * (1 + cos(M_PI * f));
}

void pipe_blob_parse(const pipe_run *R, const unsigned char *b, int64_t len, pblob *out)
{
    const unsigned char *p = b;
    out->rep = (const pworker_rep *)p;
    p += sizeof(pworker_rep);
    out->iter_busy = (const double *)p;
    p += R->total_iters * 8;
    out->iter_end = (const double *)p;
    p += R->total_iters * 8;
    out->spans = (const pspan *)p;
    p += out->rep->n_spans * (int64_t)sizeof(pspan);
    out->params = out->rep->param_bytes ? p : NULL;
    assert(p + out->rep->param_bytes == b + len);
    (void)len;
}
