/* pipe_ops.c - one worker's life in a pipelined run (pipe_ops.h): its
 * stages, its op list executed in order, PipeDream's weight versions,
 * memory accounting, and the main loop over the runs of the op lists with
 * the evaluation, reports and checkpoints between them.
 *
 * Messages a worker makes or receives wait in its mailbox until an op
 * consumes them: F puts its output activation there (a copy of the stage
 * output), B its input gradient; SEND takes them out and posts them, RECV
 * puts what arrived.  Adjacent stages on one worker (interleaved with one
 * position, the sequential kind) hand over through the mailbox without a
 * SEND/RECV, as the op lists have none. */
#include <assert.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/nn/optim.h"
#include "exec/nn/tensor.h"
#include "pipe_ckpt.h"
#include "pipe_ops.h"
#include "pipe_report.h"
#include "pipe_tp.h"
#include "pipe_worker.h"

/* ------------------------------------------------------------ memory -- */

static void mem_note(pipe_worker *W)
{
    W->mem.buffers = W->box_bytes + W->x->ops->out_bytes(W->x, W->w);
    double tot = sim_mem_total(&W->mem);
    if (tot > W->peak) {
        W->peak = tot;
        W->peak_t = pipe_now(W);
        W->at_peak = W->mem;
    }
    if (W->R->tracing && tot != W->last_mem) {
        pspan *s = pipe_span_add(W, PSPAN_MEM);
        s->t0 = pipe_now(W);
        s->bytes = tot;
    }
    W->last_mem = tot;
}

/* The peak inside an op, just before it lets go of anything: `held` bytes
 * of messages the op holds outside the mailbox (the input it read, the
 * output it made), on top of what mem_note counts; the stash the op reads
 * is still counted.  The simulator holds them through the op too. */
static void mem_note_in_op(pipe_worker *W, double held)
{
    sim_mem m = W->mem;
    m.buffers = W->box_bytes + W->x->ops->out_bytes(W->x, W->w) + held;
    double tot = sim_mem_total(&m);
    if (tot > W->peak) {
        W->peak = tot;
        W->peak_t = pipe_now(W);
        W->at_peak = m;
    }
}

/* ----------------------------------------------------------- mailbox -- */

static void box_put(pipe_worker *W, exec_msg *m)
{
    if (W->n_box == W->cap_box) {
        W->cap_box = W->cap_box * 2 + 8;
        W->box = cl_realloc(W->box, (size_t)W->cap_box * sizeof *W->box);
    }
    W->box[W->n_box++] = m;
    W->box_bytes += (double)m->bytes;
}

static exec_msg *box_take(pipe_worker *W, uint64_t tag)
{
    for (int i = 0; i < W->n_box; i++)
        if (W->box[i]->tag == tag) {
            exec_msg *m = W->box[i];
            W->box[i] = W->box[--W->n_box];
            W->box_bytes -= (double)m->bytes;
            return m;
        }
    return NULL;
}

/* ---------------------------------------------------- stage bookkeeping -- */

static pstage *stage_of(pipe_worker *W, int s)
{
    assert(s >= 0 && s < W->R->S && W->local[s] >= 0);
    return &W->st[W->local[s]];
}

static pver *ver_find(pstage *ps, int64_t v, int add)
{
    for (int i = 0; i < ps->n_ver; i++)
        if (ps->ver[i].ver == v) return &ps->ver[i];
    if (!add) return NULL;
    if (ps->n_ver == ps->cap_ver) {
        ps->cap_ver = ps->cap_ver * 2 + 4;
        ps->ver = cl_realloc(ps->ver, (size_t)ps->cap_ver * sizeof *ps->ver);
    }
    pver *x = &ps->ver[ps->n_ver++];
    *x = (pver){v, 0, NULL};
    return x;
}

static void ver_unref(pipe_worker *W, pstage *ps, int64_t v)
{
    pver *x = ver_find(ps, v, 0);
    assert(x && x->refs > 0);
    if (--x->refs > 0) return;
    if (x->stash) {
        free(x->stash);
        ps->n_stashed--;
        W->mem.versions -= (double)ps->n_floats * PIPE_FLOAT_BYTES;
    }
    *x = ps->ver[--ps->n_ver];
}

static pslot *slot_find(pstage *ps, int64_t seq)
{
    for (int i = 0; i < ps->n_slot; i++)
        if (ps->slot[i].seq == seq) return &ps->slot[i];
    assert(!"microbatch not in flight");
    return NULL;
}

/* A microbatch's acts on every rank of the stage; rank 0's are counted. */
static exec_acts **acts_get(pipe_worker *W, pstage *ps)
{
    exec_acts **a;
    if (ps->n_pool)
        a = ps->pool[--ps->n_pool];
    else {
        a = pipe_tp_acts_new(ps, W->R->mb);
        ps->n_acts++;
        ps->pool = cl_realloc(ps->pool, (size_t)ps->n_acts * sizeof *ps->pool);
    }
    W->mem.stash += (double)exec_acts_bytes(a[0]);
    if (++W->stash_now > W->peak_stash) W->peak_stash = W->stash_now;
    return a;
}

/* The microbatch's backward is complete: its acts go back to the pool. */
static void slot_release(pipe_worker *W, pstage *ps, pslot *sl)
{
    W->mem.stash -= (double)exec_acts_bytes(sl->a[0]);
    W->stash_now--;
    ps->pool[ps->n_pool++] = sl->a;
    if (W->R->sc.stash_weights) ver_unref(W, ps, sl->wver);
    *sl = ps->slot[--ps->n_slot];
}

/* ---------------------------------------------------------------- data -- */

static void cursor_init(pcursor *c, const pipe_run *R)
{
    c->rng = gsl_rng_alloc(gsl_rng_mt19937);
    /* train.c's shuffling stream: the same constant, the same seed */
    gsl_rng_set(c->rng, (unsigned long)((R->o->seed * 0x9e3779b97f4a7c15ULL + 0x5851f42dULL) >> 32));
    c->perm = cl_malloc((size_t)R->o->train->n * sizeof *c->perm);
    c->epoch = -1;
}

static void cursor_free(pcursor *c)
{
    if (c->rng) gsl_rng_free(c->rng);
    free(c->perm);
}

/* Sample indices of microbatch `micro` of global iteration gi.  Iterations
 * come in non-decreasing order per cursor. */
static const int64_t *cursor_idx(pcursor *c, const pipe_run *R, int64_t gi, int micro)
{
    int64_t de = gi / R->data_ipe, j = gi % R->data_ipe;
    assert(de >= c->epoch);
    while (c->epoch < de) {
        exec_shuffle(c->perm, R->o->train->n, c->rng);
        c->epoch++;
    }
    return c->perm + j * R->batch + (int64_t)micro * R->mb;
}

/* ----------------------------------------------------------------- ops -- */

static int64_t gi_of(const pipe_worker *W, const sched_op *op)
{
    return (int64_t)W->run * W->R->iters + op->iter;
}

static void compute_done(pipe_worker *W, const sched_op *op, int64_t k, double t0, double t1)
{
    int64_t gi = gi_of(W, op);
    W->busy += t1 - t0;
    W->iter_busy[gi] += t1 - t0;
    if (t1 > W->iter_end[gi]) W->iter_end[gi] = t1;
    if (W->R->tracing) {
        pspan *s = pipe_span_add(W, PSPAN_COMPUTE);
        s->t0 = t0;
        s->t1 = t1;
        s->op = k;
        s->iter = (int32_t)gi;
    }
}

static void op_f(pipe_worker *W, const sched_op *op, int64_t k)
{
    pipe_run *R = W->R;
    pstage *ps = stage_of(W, op->stage);
    int64_t gi = gi_of(W, op), seq = gi * R->m_micro + op->micro;
    const exec_data *d = R->o->train;
    const float *in;
    exec_msg *min = NULL;
    /* the op's clock covers all its work: the first stage's gather of the
     * microbatch too (the simulator's F includes it: docs/validation.md) */
    double t0 = pipe_now(W);
    if (op->stage == 0) {
        exec_data_gather(d, cursor_idx(&W->cx, R, gi, op->micro), R->mb, W->xb, W->yb);
        in = W->xb;
    } else {
        min = box_take(W, exec_tag(EXEC_TAG_ACT, op->stage - 1, seq));
        assert(min && "F before its input arrived");
        in = exec_msg_data(min);
    }
    const int32_t *lab = NULL;
    if (ps->has_loss) {
        const int64_t *idx = cursor_idx(&W->cy, R, gi, op->micro);
        for (int b = 0; b < R->mb; b++) W->yb[b] = d->y[idx[b]];
        lab = W->yb;
    }
    exec_acts **a = acts_get(W, ps);
    if (ps->n_slot == ps->cap_slot) {
        ps->cap_slot = ps->cap_slot * 2 + 4;
        ps->slot = cl_realloc(ps->slot, (size_t)ps->cap_slot * sizeof *ps->slot);
    }
    ps->slot[ps->n_slot++] = (pslot){seq, a, ps->cur_ver};
    if (R->sc.stash_weights) {
        assert(op->wver == ps->cur_ver);
        ver_find(ps, ps->cur_ver, 1)->refs++;
    }
    pipe_tp_pass(W, ps, PIPE_TP_FWD, a, in, lab, R->mb, 1, NULL, NULL, 0);
    /* the input is done with before the output's message exists, so the
     * two are never held at once (the simulator counts the output from its
     * SEND, the input until the end of the op that reads it) */
    if (min) {
        mem_note_in_op(W, (double)min->bytes);
        exec_msg_free(min);
    }
    exec_msg *out = NULL;
    if (op->stage < R->S - 1) {
        out = exec_msg_new(pipe_bnd_bytes(R, op->stage, R->mb));
        memcpy(exec_msg_data(out), exec_acts_output(a[0]), (size_t)out->bytes);
        out->tag = exec_tag(EXEC_TAG_ACT, op->stage, seq);
    }
    compute_done(W, op, k, t0, pipe_now(W));
    if (ps->has_loss) {
        W->loss_it[op->iter] += exec_acts_loss_sum(a[0]);
        W->corr_it[op->iter] += exec_acts_correct(a[0]);
    }
    if (out) box_put(W, out);
}

static void op_b(pipe_worker *W, const sched_op *op, int64_t k)
{
    pipe_run *R = W->R;
    pstage *ps = stage_of(W, op->stage);
    int64_t seq = gi_of(W, op) * R->m_micro + op->micro;
    pslot *sl = slot_find(ps, seq);
    exec_msg *mout = NULL, *mdin = NULL;
    const float *dout = NULL;
    float *din = NULL;
    if (op->stage < R->S - 1) {
        mout = box_take(W, exec_tag(EXEC_TAG_GRAD, op->stage, seq));
        assert(mout && "B before its gradient arrived");
        dout = exec_msg_data(mout);
    }
    if (op->stage > 0) {
        mdin = exec_msg_new(pipe_bnd_bytes(R, op->stage - 1, R->mb));
        mdin->tag = exec_tag(EXEC_TAG_GRAD, op->stage - 1, seq);
        if (ps->needs_din)
            din = exec_msg_data(mdin);
        else /* no parameters before: the gradient is never used */
            memset(exec_msg_data(mdin), 0, (size_t)mdin->bytes);
    }
    float *stash = NULL;
    if (R->sc.stash_weights && !R->hooks.stash_off && sl->wver != ps->cur_ver) {
        assert(op->wver == sl->wver);
        pver *v = ver_find(ps, sl->wver, 0);
        assert(v && v->stash);
        stash = v->stash;
    }
    double t0 = pipe_now(W);
    /* the stashed version is swapped in (in place, no third buffer) and
     * back; with FUSED_W, W runs layer by layer, each while its operands
     * are hot */
    if (stash) pipe_tp_swap(ps, stash);
    pipe_tp_pass(W, ps, op->flags & SCHED_FUSED_W ? PIPE_TP_BWD : PIPE_TP_BWD_IN, sl->a, NULL,
                 NULL, R->mb, 1, dout, din, 1.0f / (float)R->batch);
    if (stash) pipe_tp_swap(ps, stash);
    compute_done(W, op, k, t0, pipe_now(W));
    mem_note_in_op(W, (mout ? (double)mout->bytes : 0) + (mdin ? (double)mdin->bytes : 0));
    if (mout) exec_msg_free(mout);
    if (op->flags & SCHED_FUSED_W) slot_release(W, ps, sl);
    if (mdin) box_put(W, mdin);
}

static void op_w(pipe_worker *W, const sched_op *op, int64_t k)
{
    pstage *ps = stage_of(W, op->stage);
    pslot *sl = slot_find(ps, gi_of(W, op) * W->R->m_micro + op->micro);
    double t0 = pipe_now(W);
    pipe_tp_pass(W, ps, PIPE_TP_BWD_W, sl->a, NULL, NULL, W->R->mb, 1, NULL, NULL, 0);
    compute_done(W, op, k, t0, pipe_now(W));
    slot_release(W, ps, sl);
}

static int op_send(pipe_worker *W, const sched_op *op, int64_t k)
{
    int64_t seq = gi_of(W, op) * W->R->m_micro + op->micro;
    int grad = (op->flags & SCHED_GRAD) != 0;
    exec_msg *m = box_take(W, exec_tag(grad ? EXEC_TAG_GRAD : EXEC_TAG_ACT, sched_boundary(op), seq));
    assert(m && "SEND of something not computed");
    m->dst = op->peer;
    m->bounded = 1;
    m->t_post = pipe_now(W);
    double bytes = (double)m->bytes;
    int rc = pipe_post_wait(W, m, k);
    if (!rc) W->sent += bytes;
    return rc;
}

static int op_recv(pipe_worker *W, const sched_op *op, int64_t k)
{
    int64_t gi = gi_of(W, op), seq = gi * W->R->m_micro + op->micro;
    int grad = (op->flags & SCHED_GRAD) != 0, b = sched_boundary(op);
    exec_msg *m;
    int rc = pipe_take_wait(W, op->peer, exec_tag(grad ? EXEC_TAG_GRAD : EXEC_TAG_ACT, b, seq),
                       pipe_bnd_bytes(W->R, b, W->R->mb), k, &m);
    if (rc) return rc;
    if (W->R->tracing) {
        pspan *s = pipe_span_add(W, PSPAN_LINK);
        s->t0 = m->t_post;
        s->t1 = pipe_now(W);
        s->bytes = (double)m->bytes;
        s->op = k;
        s->src = op->peer;
        s->dst = W->w;
        s->iter = (int32_t)gi;
    }
    box_put(W, m);
    return CL_OK;
}

static int op_update(pipe_worker *W, const sched_op *op, int64_t k)
{
    pipe_run *R = W->R;
    pstage *ps = stage_of(W, op->stage);
    if (ps->r > 1) {
        int rc = pipe_ar_wait(W, ps, k);
        if (rc) return rc;
    }
    if (R->sc.stash_weights && !R->hooks.stash_off) {
        pver *v = ver_find(ps, ps->cur_ver, 0);
        if (v && v->refs > 0) { /* in-flight microbatches still need it */
            v->stash = exec_falloc(ps->n_floats * ps->T); /* every rank's shard */
            pipe_tp_copy_params(ps, v->stash);
            ps->n_stashed++;
            W->mem.versions += (double)ps->n_floats * PIPE_FLOAT_BYTES;
            if (1 + ps->n_stashed > W->peak_versions) W->peak_versions = 1 + ps->n_stashed;
        }
    }
    int async = sched_is_async((sched_kind)R->p->schedule);
    double lr = pipe_lr_at(R, op, gi_of(W, op), ps->r);
    double wd = async ? R->o->weight_decay * ps->r / R->m_micro : R->o->weight_decay;
    double t0 = pipe_now(W);
    pipe_tp_update(W, ps, lr, wd);
    compute_done(W, op, k, t0, pipe_now(W));
    ps->cur_ver++;
    return CL_OK;
}

static int run_ops(pipe_worker *W)
{
    pipe_run *R = W->R;
    const sched *sc = &R->sc;
    for (int64_t k = sc->off[W->w]; k < sc->off[W->w + 1]; k++) {
        const sched_op *op = &sc->ops[k];
        int rc = CL_OK;
        if (gi_of(W, op) < R->start_gi) continue; /* done before the resume */
        if (R->hooks.fail_worker == W->w + 1 && k - sc->off[W->w] == R->hooks.fail_op)
            return pipe_run_fail(R, CL_ERUN, "worker %d: injected failure before op %lld (test)",
                                 W->w, (long long)R->hooks.fail_op);
        switch ((sched_op_kind)op->kind) {
        case SCHED_F: op_f(W, op, k); break;
        case SCHED_B: op_b(W, op, k); break;
        case SCHED_W: op_w(W, op, k); break;
        case SCHED_SEND: rc = op_send(W, op, k); break;
        case SCHED_RECV: rc = op_recv(W, op, k); break;
        case SCHED_ALLREDUCE: pipe_ar_start(stage_of(W, op->stage)); break;
        case SCHED_UPDATE: rc = op_update(W, op, k); break;
        case SCHED_OP_COUNT: assert(0); break;
        }
        if (rc) return rc;
        pipe_ar_progress_all(W);
        mem_note(W);
        if (k + 1 == sc->off[W->w + 1] || sc->ops[k + 1].iter != op->iter) { /* its iteration end */
            if (W->w == 0 && R->o->on_iteration) R->o->on_iteration(R->o->ctx, gi_of(W, op) + 1, R->total_iters);
            if ((rc = pipe_ckpt_boundary(W, gi_of(W, op) + 1, 0))) return rc;
        }
    }
    return CL_OK;
}

/* ------------------------------------------------------- set-up, main -- */

static int setup(pipe_worker *W)
{
    pipe_run *R = W->R;
    const exec_pipe_opts *o = R->o;
    int seq = R->sc.kind == SCHED_SEQUENTIAL;
    W->rep = R->w_rep[W->w];
    W->local = cl_malloc((size_t)R->S * sizeof *W->local);
    for (int s = 0; s < R->S; s++) W->local[s] = -1;
    W->st = cl_calloc((size_t)R->S, sizeof *W->st);
    /* the evaluation's forward runs batches of eval_batch; without it
     * the nets (full recomputation's scratch among their buffers) need
     * room for a microbatch only */
    int max_batch = R->mb > R->eval_batch || !o->test ? R->mb : R->eval_batch;
    for (int s = 0; s < R->S; s++)
        if (seq || s % R->P == R->w_pos[W->w]) W->local[s] = W->n_st++;
    pipe_tp_crew_init(W);
    for (int s = 0; s < R->S; s++) {
        if (W->local[s] < 0) continue;
        pstage *ps = &W->st[W->local[s]];
        ps->stage = s;
        ps->replica = W->rep;
        ps->r = seq ? 1 : R->p->stages[s].n_replicas;
        cl_err e = {0};
        if (pipe_tp_stage_init(W, ps, max_batch, &e)) return pipe_run_fail(R, e.code, "%s", e.msg);
        ps->has_loss = exec_net_has_loss(ps->net);
        ps->needs_din = exec_net_needs_din(ps->net);
        ps->in_elems = exec_net_in_elems(ps->net);
        ps->out_elems = exec_net_out_elems(ps->net);
        exec_net_params(ps->net, &ps->n_floats);
        /* full recomputation's scratch (rank 0's) is held all along:
         * counted with the stash, as the sequential trainers count it;
         * sequence parallelism's gather scratch likewise (the sequential
         * trainer counts it with its buffers) */
        W->mem.stash += (double)(exec_net_recompute_bytes(ps->net) + exec_net_seq_bytes(ps->net));
        W->mem.weights += (double)ps->n_floats * PIPE_FLOAT_BYTES;
        W->mem.grads += (double)ps->n_floats * PIPE_FLOAT_BYTES;
        if (o->momentum != 0) W->mem.optim += (double)ps->n_floats * PIPE_FLOAT_BYTES;
        ps->ring = cl_malloc((size_t)ps->r * sizeof *ps->ring);
        for (int q = 0; q < ps->r; q++) ps->ring[q] = pipe_worker_of(R, s, q);
        if (o->test && W->rep == 0) ps->eval_acts = pipe_tp_acts_new(ps, R->eval_batch);
    }
    W->peak_versions = 1;
    int64_t dim = o->train->dim > (o->test ? o->test->dim : 0) ? o->train->dim : o->test->dim;
    W->xb = exec_falloc((int64_t)max_batch * dim);
    W->yb = cl_malloc((size_t)max_batch * sizeof *W->yb);
    if (W->local[0] >= 0) cursor_init(&W->cx, R);
    if (W->local[R->S - 1] >= 0) cursor_init(&W->cy, R);
    W->loss_it = cl_calloc((size_t)R->iters, sizeof *W->loss_it);
    W->corr_it = cl_calloc((size_t)R->iters, sizeof *W->corr_it);
    W->iter_busy = cl_calloc((size_t)R->total_iters, sizeof *W->iter_busy);
    W->iter_end = cl_calloc((size_t)R->total_iters, sizeof *W->iter_end);
    return CL_OK;
}

static void teardown(pipe_worker *W)
{
    for (int i = 0; i < W->n_st; i++) {
        pstage *ps = &W->st[i];
        assert(ps->n_slot == 0 || W->x->ops->aborted(W->x));
        for (int j = 0; j < ps->n_slot; j++) ps->pool[ps->n_pool++] = ps->slot[j].a;
        for (int j = 0; j < ps->n_pool; j++) pipe_tp_acts_free(ps, ps->pool[j]);
        for (int j = 0; j < ps->n_ver; j++) free(ps->ver[j].stash);
        free(ps->pool);
        free(ps->slot);
        free(ps->ver);
        free(ps->ring);
        pipe_tp_acts_free(ps, ps->eval_acts);
        pipe_tp_stage_free(ps);
    }
    for (int i = 0; i < W->n_box; i++) exec_msg_free(W->box[i]);
    free(W->box);
    free(W->st);
    exec_tp_crew_destroy(W->crew);
    free(W->local);
    cursor_free(&W->cx);
    cursor_free(&W->cy);
    free(W->xb);
    free(W->yb);
    free(W->loss_it);
    free(W->corr_it);
    free(W->iter_busy);
    free(W->iter_end);
    free(W->sp);
}

/* A barrier of all workers; CL_ERUN when the run stopped meanwhile. */
static int sync_all(pipe_worker *W, double *t)
{
    if (!W->x->ops->sync(W->x, W->w, W->R->stall_s, t)) return CL_OK;
    if (W->x->ops->aborted(W->x)) return CL_ERUN;
    return pipe_run_fail(W->R, CL_ERUN, "worker %d waited %.0f s for the others to finish a run of the op lists; the run cannot complete (please report it)",
                         W->w, W->R->stall_s);
}

int pipe_worker_main(void *ctx, int w)
{
    pipe_run *R = ctx;
    pipe_worker W = {.R = R, .x = R->x, .w = w};
    double t = 0;
    int rc = setup(&W);
    if (!rc) rc = pipe_ckpt_restore(&W);
    if (rc) R->x->ops->abort(R->x);
    int rs = sync_all(&W, &t);
    if (!rc) rc = rs;
    W.t0 = t;
    if (!rc) mem_note(&W);
    const int first = (int)(R->start_gi / R->iters);
    for (int run = first; run < R->n_runs && !rc; run++) {
        W.run = run;
        if ((int64_t)run * R->iters == R->start_gi || run > first) { /* not resumed mid-run */
            memset(W.loss_it, 0, (size_t)R->iters * sizeof *W.loss_it);
            memset(W.corr_it, 0, (size_t)R->iters * sizeof *W.corr_it);
            for (int i = 0; i < W.n_st; i++) W.st[i].cur_ver = 0;
        }
        double t_start = 0, t_end = 0;
        if (run > first && (rc = sync_all(&W, &t_start))) break;
        if (run > first) t_start -= W.t0;
        if ((rc = run_ops(&W))) break;
        if ((rc = sync_all(&W, &t_end))) break;
        rc = pipe_eval_pass(&W);
        if (!rc) rc = pipe_epoch_report(&W, t_end - W.t0 - t_start);
        if (!rc) rc = pipe_ckpt_boundary(&W, (int64_t)(run + 1) * R->iters, 1);
    }
    if (rc == PIPE_STOP) rc = CL_OK; /* stopped at an iteration end (signal) */
    if (!rc) rc = pipe_final_report(&W);
    if (rc) R->x->ops->abort(R->x);
    teardown(&W);
    return rc;
}
