/* sim.c - the replay: workers running their op lists on the event kernel,
 * pipeline transfers, ring all-reduces, deadlock and budget reports (see
 * sim.h; links and bandwidth sharing are in link.c, memory in memory.c).
 *
 * Workers run their op lists (schedule.h).  A compute op is one event (its
 * end).  A transfer is handed to its link (link.c) and comes back through
 * sim_arrive.  A ring all-reduce among r replicas is 2(r - 1) steps; in each
 * step every member sends bytes / r to its successor as soon as it has
 * received the previous step, over the same links.  Under ZeRO 1 and 2
 * (flushing kinds) the first r - 1 steps are the reduce-scatter of the
 * gradients: a member then runs the UPDATE of its shard (update_s / r) and
 * only after it sends its step r, the first of the all-gather of the
 * updated weights (the same bytes: a ring all-reduce is a reduce-scatter
 * and an all-gather); the stage's next F on that member waits for the
 * all-gather.
 *
 * Everything that wakes a worker puts it on a FIFO run queue drained at the
 * end of each callback, so ties resolve in a fixed order and the run is
 * deterministic.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* ------------------------------------------------------------- helpers -- */

/* Transfer slots are laid out boundary by boundary, microbatch by microbatch
 * within one (activation and gradient side by side): a boundary's sender and
 * receiver walk its slots in order, which keeps them in cache. */
static inline int64_t slot_of(const sim *s, const sched_op *op)
{
    int64_t g = (int64_t)op->iter * s->m + op->micro;
    return ((int64_t)sched_boundary(op) * s->G + g) * 2 + ((op->flags & SCHED_GRAD) ? 1 : 0);
}

static inline double op_dur(const sim *s, const sched_op *op)
{
    const sim_stage *st = &s->stg[op->stage];
    switch (op->kind) {
    case SCHED_F: return st->fwd;
    case SCHED_B: return (op->flags & SCHED_FUSED_W) ? st->bfused : st->bin;
    case SCHED_W: return st->bw;
    case SCHED_UPDATE: return st->up; /* the plan's update_s (0: not modelled) */
    default: return 0;
    }
}

int sim_local_index(const sim_worker *w, int stage)
{
    for (int i = 0; i < w->n_local; i++)
        if (w->local[i] == stage) return i;
    return -1;
}

/* A bad op met during the run: keep the first message, stop the kernel. */
void sim_run_fail(sim *s, int w, const char *what)
{
    if (!s->err.code) {
        const sim_worker *W = &s->w[w];
        const sched_op *op = &s->sc->ops[W->pc];
        cl_fail(&s->err, CL_EINPUT, "schedule: worker %d (device %d) op %lld (%s stage %d mb %d "
                "iter %d): %s", w, s->sc->dev[w], (long long)(W->pc - s->sc->off[w]),
                op->kind < SCHED_OP_COUNT ? sched_op_kind_name((sched_op_kind)op->kind) : "?",
                op->stage, op->micro, op->iter, what);
    }
    s->w[w].state = W_DONE;
    ev_stop(s->k);
}

/* Fields of an op within range (explicit schedules may be unchecked). */
static inline int op_ok(const sim *s, int w, const sched_op *op)
{
    /* one test for the fields every op has (negatives wrap to large) */
    if ((op->kind >= SCHED_OP_COUNT) | ((unsigned)op->stage >= (unsigned)s->S) |
        ((unsigned)op->iter >= (unsigned)s->n_iter) |
        ((uint64_t)((int64_t)op->micro + 1) > (uint64_t)s->m))
        return 0;
    if (op->kind <= SCHED_RECV && op->micro < 0) return 0;
    if (op->kind == SCHED_SEND || op->kind == SCHED_RECV)
        return (unsigned)op->peer < (unsigned)s->n_w && op->peer != w &&
               (unsigned)sched_peer_stage(op) < (unsigned)s->S;
    return 1;
}

static void enqueue(sim *s, int w)
{
    if (s->w[w].queued) return;
    s->w[w].queued = 1;
    int at = s->rq_head + s->rq_n++;
    s->runq[at >= s->n_w ? at - s->n_w : at] = w;
}

static void record(sim *s, double t0, double t1, double bytes, int track, int link, int64_t op)
{
    if (!s->o.record) return;
    if (s->n_spans == s->cap_spans) {
        s->cap_spans = s->cap_spans * 2 + 1024;
        s->spans = cl_realloc(s->spans, (size_t)s->cap_spans * sizeof *s->spans);
    }
    s->spans[s->n_spans++] = (sim_span){t0, t1, bytes, track, link, op};
}

/* ------------------------------------------------------- pipeline data -- */

void sim_wake(sim *s, int w, double t, double ready_t)
{
    sim_worker *W = &s->w[w];
    double from = W->block_t > ready_t ? W->block_t : ready_t;
    sim_acc(s, W, W->wait_iter)[1] += t - from;
    W->state = W_READY;
    enqueue(s, w);
}

/* The data has arrived; its bytes stay the sender's until the receiver
 * takes them at its RECV (the executor's threads channel and MPI's
 * rendezvous both keep a message in the sender's buffer until then). */
static void deliver_pipe(sim *s, int64_t slot, double t)
{
    sim_slot *sl = &s->slots[slot];
    int w = sl->arrive_t < 0 ? (int)-sl->arrive_t - 2 : -1; /* the waiter (see sim_slot) */
    sl->arrive_t = t;
    if (w >= 0) sim_wake(s, w, t, sl->post_t);
}

static void post_send(sim *s, int w, const sched_op *op, int64_t pc)
{
    double t = s->now;
    int64_t slot = slot_of(s, op);
    s->slots[slot].post_t = t;
    /* the next microbatches on this boundary come next: warm their slots */
    if (slot + 6 < s->n_slots) __builtin_prefetch(&s->slots[slot + 6]);
    sim_mem_buffers(s, w, op->bytes);
    s->w[w].sent += op->bytes;
    if (s->o.comm_off) {
        const cluster *cl = &s->pl->cluster;
        int a = s->sc->dev[w], b = s->sc->dev[op->peer];
        s->sent_level[cl->devices[a].node == cl->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER] +=
            op->bytes;
        deliver_pipe(s, slot, t);
        return;
    }
    /* the receiver is likely woken when this arrives, a few events from now:
     * start loading its state and its next op */
    const sim_worker *R = &s->w[op->peer];
    __builtin_prefetch(R);
    __builtin_prefetch(&s->sc->ops[R->pc]);
    sim_link_start(s, sim_link_get(s, w, op->peer), XF_PIPE, slot, pc, op->bytes, w, op->peer, 0, 0);
}

/* Blocking transfers (sched.blocking_p2p, DeepSpeed's pipeline): a SEND
 * and its RECV meet.  Whichever side comes second starts the transfer on
 * the sender's channel (post_send: priced as any other); both sides are
 * then held until it arrives.  The sender waits in W_WAIT_SEND, named in
 * its slot's post_t until the receiver comes; the receiver waits as for
 * any RECV. */

/* Sender ws's transfer has arrived (or, communication off, started): its
 * SEND is done.  Idle until the transfer started (ready_t), then waiting
 * on communication. */
static void release_sender(sim *s, int ws, double t, double ready_t)
{
    sim_worker *W = &s->w[ws];
    assert(W->state == W_WAIT_SEND);
    W->pc++;
    sim_wake(s, ws, t, ready_t);
}

/* Worker w at a blocking SEND.  Returns 1 when it must wait, 0 when the
 * transfer is already done (communication off and the receiver there). */
static int meet_send(sim *s, int w, const sched_op *op, int64_t pc)
{
    sim_worker *W = &s->w[w];
    int64_t slot = slot_of(s, op);
    sim_slot *sl = &s->slots[slot];
    if (sl->arrive_t <= -2) { /* the receiver waits at its RECV: go */
        post_send(s, w, op, pc);
        if (sl->arrive_t >= 0) return 0;
    } else {
        sl->post_t = -2.0 - w;
    }
    W->state = W_WAIT_SEND;
    W->wait_ref = slot;
    W->wait_iter = op->iter;
    W->block_t = s->now;
    return 1;
}

/* A receiver at a blocking RECV whose sender waits at its SEND: start the
 * transfer as the sender. */
static void meet_recv(sim *s, sim_slot *sl)
{
    int ws = (int)-sl->post_t - 2;
    sim_worker *S = &s->w[ws];
    assert(S->state == W_WAIT_SEND);
    post_send(s, ws, &s->sc->ops[S->pc], S->pc);
    if (sl->arrive_t >= 0) release_sender(s, ws, s->now, s->now); /* communication off */
}

/* Transfer x has arrived.  sim_ring_recv may start the next ring step, whose
 * xf_alloc can move s->xf: read what the dispatch needs first, and index
 * s->xf afresh afterwards (no pointer into it lives across the call). */
void sim_arrive(sim *s, int32_t x, double t)
{
    const sim_xfer *X = &s->xf[x];
    record(s, X->start_t, t, X->bytes, X->chan, 1, X->op);
    int kind = X->kind, member = X->member, hop = X->hop, src = X->src;
    int64_t ref = X->ref;
    if (kind == XF_PIPE) {
        deliver_pipe(s, ref, t);
        if (s->blocking) release_sender(s, src, t, s->slots[ref].post_t);
    } else
        sim_ring_recv(s, ref, member, hop, t);
    s->xf[x].next_free = s->xf_free;
    s->xf_free = x;
}

/* ------------------------------------------------------------- workers -- */

static void on_compute_done(ev_kernel *k, void *ctx, uint64_t w);

static void finish_compute(sim *s, int w, double t)
{
    sim_worker *W = &s->w[w];
    const sched_op *op = &s->sc->ops[W->pc];
    sim_acc(s, W, op->iter)[0] += t - W->run_t0;
    if (t > s->iter_end[op->iter]) s->iter_end[op->iter] = t;
    if ((op->kind == SCHED_B && (op->flags & SCHED_FUSED_W)) || op->kind == SCHED_W)
        sim_mem_stash_free(s, w, op);
    else if (op->kind == SCHED_UPDATE) {
        sim_mem_update(s, w, op);
        /* ZeRO: the updated shard starts the all-gather */
        int li = s->zero_split ? sim_local_index(W, op->stage) : -1;
        int64_t inst = li >= 0 ? W->last_ar[li] : -1;
        if (inst >= 0 && s->ar[inst].r > 1 && !s->o.comm_off && W->ar_q[li] >= 0)
            sim_ring_gate(s, inst, W->ar_q[li]);
    }
    if (W->held > 0) { /* the RECVs before this op were its inputs */
        sim_mem_buffers(s, w, -W->held);
        W->held = 0;
    }
    record(s, W->run_t0, t, 0, w, 0, W->pc);
    W->t_last = t;
    W->pc++;
    W->state = W_READY;
}

/* Run worker w's list from its current op until it blocks or ends. */
static void advance(sim *s, int w)
{
    sim_worker *W = &s->w[w];
    const sched_op *ops = s->sc->ops;
    double t = s->now;
    while (W->pc < W->end) {
        const sched_op *op = &ops[W->pc];
        if (!op_ok(s, w, op)) {
            sim_run_fail(s, w, "kind, stage, microbatch, iteration or transfer peer out of range");
            return;
        }
        switch ((sched_op_kind)op->kind) {
        case SCHED_SEND:
            if (s->blocking) {
                if (meet_send(s, w, op, W->pc)) return;
            } else {
                post_send(s, w, op, W->pc);
            }
            W->pc++;
            continue;
        case SCHED_ALLREDUCE:
            sim_post_ar(s, w, op, W->pc);
            if (s->err.code) return;
            W->pc++;
            continue;
        case SCHED_RECV: {
            int64_t slot = slot_of(s, op);
            sim_slot *sl = &s->slots[slot];
            if (slot + 6 < s->n_slots) __builtin_prefetch(&s->slots[slot + 6]);
            if (sl->arrive_t < 0 && s->blocking && sl->post_t <= -2)
                meet_recv(s, sl); /* blocking: its sender waits at the SEND */
            if (sl->arrive_t < 0) {
                W->state = W_WAIT_RECV;
                W->wait_ref = slot;
                W->wait_iter = op->iter;
                W->block_t = t;
                sl->arrive_t = -2.0 - w;
                __builtin_prefetch(op + 1); /* for when the data arrives */
                __builtin_prefetch(op + 3);
                return;
            }
            /* taken: from the sender's buffers into this worker's, until the
             * op that reads them ends */
            sim_mem_buffers(s, op->peer, -op->bytes);
            sim_mem_buffers(s, w, op->bytes);
            W->held += op->bytes;
            W->pc++;
            continue;
        }
        case SCHED_UPDATE: {
            int li = sim_local_index(W, op->stage);
            if (li < 0) {
                sim_run_fail(s, w, "update of a stage this device does not hold");
                return;
            }
            int64_t inst = W->last_ar[li];
            if (inst >= 0 && !s->ar_done[s->ar[inst].member_off + W->ar_q[li]]) {
                W->state = W_WAIT_AR;
                W->wait_ref = inst;
                W->wait_iter = op->iter;
                W->block_t = t;
                return;
            }
        }
        /* FALLTHROUGH - an update is a compute op of update_s seconds */
        case SCHED_F:
        case SCHED_B:
        case SCHED_W: {
            if (s->zero_split && op->kind == SCHED_F) { /* the weights' all-gather */
                int li = sim_local_index(W, op->stage);
                int64_t inst = li >= 0 ? W->last_ar[li] : -1;
                if (inst >= 0 && W->ar_q[li] >= 0 && s->ar_done[s->ar[inst].member_off + W->ar_q[li]] != 1) {
                    W->state = W_WAIT_AR;
                    W->wait_ref = inst;
                    W->wait_iter = op->iter;
                    W->block_t = t;
                    return;
                }
            }
            double d = op_dur(s, op);
            if (op->kind == SCHED_F) sim_mem_f_start(s, w, op);
            W->run_t0 = t;
            if (d > 0) {
                W->state = W_RUN;
                ev_at(s->k, t + d, on_compute_done, s, (uint64_t)w);
                /* the worker resumes here when the op ends: with many workers
                 * interleaving, its next ops would otherwise miss the cache */
                __builtin_prefetch(op + 1);
                __builtin_prefetch(op + 3);
                __builtin_prefetch(op + 5);
                __builtin_prefetch(op + 7);
                return;
            }
            finish_compute(s, w, t);
            continue;
        }
        case SCHED_OP_COUNT: assert(0);
        }
    }
    W->state = W_DONE;
}

void sim_drain(sim *s)
{
    while (s->rq_n) {
        int w = s->runq[s->rq_head];
        if (++s->rq_head == s->n_w) s->rq_head = 0;
        s->rq_n--;
        s->w[w].queued = 0;
        advance(s, w);
    }
}

static void on_compute_done(ev_kernel *k, void *ctx, uint64_t w)
{
    sim *s = ctx;
    finish_compute(s, (int)w, s->now = ev_now(k));
    advance(s, (int)w);
    sim_drain(s);
}

/* ------------------------------------------------------------- create -- */

static int check_num(double v, const char *what, int stage, cl_err *e)
{
    if (isfinite(v) && v >= 0) return CL_OK;
    return cl_fail(e, CL_EINPUT, "plan: stages[%d].%s: %g is not a finite number >= 0", stage, what, v);
}

static int setup_workers(sim *s, cl_err *e);

sim *sim_create(const plan *p, const sched *sc, const sim_opts *o, cl_err *e)
{
    if (sc->n_stages != p->n_stages || sc->n_micro < 1 || sc->n_iter < 1 || sc->n_dev < 1) {
        cl_fail(e, CL_EINPUT, "schedule: %d stages, %d microbatches, %d iterations, %d devices "
                "do not fit the plan's %d stages", sc->n_stages, sc->n_micro, sc->n_iter, sc->n_dev,
                p->n_stages);
        return NULL;
    }
    for (int i = 0; i < p->n_stages; i++) {
        const plan_stage *st = &p->stages[i];
        if (check_num(st->fwd_s, "fwd_s", i, e) || check_num(st->bwd_in_s, "bwd_in_s", i, e) ||
            check_num(st->bwd_w_s, "bwd_w_s", i, e) || check_num(st->act_out_bytes, "act_out_bytes", i, e) ||
            check_num(st->stash_bytes, "stash_bytes", i, e) || check_num(st->param_bytes, "param_bytes", i, e) ||
            check_num(st->update_s, "update_s", i, e))
            return NULL;
    }
    int64_t G = (int64_t)sc->n_micro * sc->n_iter;
    if (G * (p->n_stages > 1 ? p->n_stages - 1 : 1) > ((int64_t)1 << 36)) {
        cl_fail(e, CL_EINPUT, "schedule: %lld microbatches x %d stages is too large to simulate",
                (long long)G, p->n_stages);
        return NULL;
    }
    /* every time in the run stays finite: a bound on the makespan from the
     * longest op and the slowest transfer, times the ops */
    double op_max = 0, bytes_max = 0;
    for (int i = 0; i < p->n_stages; i++) {
        const plan_stage *st = &p->stages[i];
        double d = st->fwd_s + st->bwd_in_s + st->bwd_w_s + st->update_s;
        if (d > op_max) op_max = d;
        if (st->act_out_bytes > bytes_max) bytes_max = st->act_out_bytes;
        double red, gat; /* the all-reduce's halves (core/plan_grad.c) */
        plan_ar_bytes(p, i, sc->kind, &red, &gat);
        bytes_max = fmax(bytes_max, fmax(red, gat));
    }
    /* links count when transfers take time, over the levels some two
     * devices use (inter only across nodes) */
    double link_min = HUGE_VAL, lat_max = 0;
    for (int l = 0; l < CLUSTER_LEVELS && !(o && o->comm_off); l++)
        if (p->cluster.links[l].bw_Bps > 0 && (l == CLUSTER_INTRA || p->cluster.n_nodes > 1)) {
            if (p->cluster.links[l].bw_Bps < link_min) link_min = p->cluster.links[l].bw_Bps;
            if (p->cluster.links[l].latency_s > lat_max) lat_max = p->cluster.links[l].latency_s;
        }
    double bound = (double)(sc->n_ops + 1) * 2 * CLUSTER_MAX_DEVICES *
                   (op_max + lat_max + (link_min < HUGE_VAL ? bytes_max / link_min : 0));
    if (!(bound < 1e300)) {
        cl_fail(e, CL_EINPUT, "plan: stage times and sizes this large would overflow the simulated "
                "clock (hint: check the units, seconds and bytes)");
        return NULL;
    }
    sim *s = cl_calloc(1, sizeof *s);
    s->pl = p;
    s->sc = sc;
    if (o) s->o = *o;
    if (!s->o.max_events) s->o.max_events = SIM_MAX_EVENTS;
    if (!(s->o.max_wall_s > 0)) s->o.max_wall_s = SIM_MAX_WALL_S;
    s->S = p->n_stages;
    s->m = sc->n_micro;
    s->n_iter = sc->n_iter;
    s->G = G;
    s->n_w = sc->n_dev;
    s->blocking = sc->blocking_p2p != 0;
    s->stg = aligned_alloc(64, (size_t)(s->S > 0 ? s->S : 1) * sizeof *s->stg);
    if (!s->stg) abort();
    /* ZeRO 1/2 splits the all-reduce around the UPDATE under the flushing
     * kinds; the asynchronous ones and explicit schedules keep one ring */
    s->zero_split = plan_zero_splits(p->zero, sc->kind);
    for (int i = 0; i < s->S; i++) {
        const plan_stage *st = &p->stages[i];
        int shard = s->zero_split && st->n_replicas > 1 ? st->n_replicas : 1;
        s->stg[i] = (sim_stage){.fwd = st->fwd_s, .bin = st->bwd_in_s,
                                .bfused = st->bwd_in_s + st->bwd_w_s, .bw = st->bwd_w_s,
                                .up = st->update_s / shard, .stash_bytes = st->stash_bytes,
                                .param_bytes = st->param_bytes};
    }
    s->n_slots = s->S > 1 ? G * (s->S - 1) * 2 : 0;
    s->slots = cl_malloc((size_t)(s->n_slots ? s->n_slots : 1) * sizeof *s->slots);
    /* every slot {-1, -1}: the first, then copies of what is filled (memcpy
     * writes whole vectors, where a loop would store 16 bytes at a time) */
    s->slots[0] = (sim_slot){-1, -1};
    for (int64_t done = 1; done < s->n_slots; done *= 2)
        memcpy(s->slots + done, s->slots,
               (size_t)(done < s->n_slots - done ? done : s->n_slots - done) * sizeof *s->slots);
    s->xf_free = -1;
    s->runq = cl_malloc((size_t)s->n_w * sizeof *s->runq);
    s->iter_end = cl_calloc((size_t)s->n_iter, sizeof(double));
    s->busy_it = cl_calloc((size_t)s->n_w * s->n_iter, sizeof(double));
    s->comm_it = cl_calloc((size_t)s->n_w * s->n_iter, sizeof(double));
    if (setup_workers(s, e)) {
        sim_destroy(s);
        return NULL;
    }
    sim_ring_setup(s);
    sim_links_setup(s);
    if (s->err.code) {
        *e = s->err;
        sim_destroy(s);
        return NULL;
    }
    s->k = ev_create();
    return s;
}

/* Worker tables from the plan: the stages each worker holds (the stages
 * whose replicas include its device; every stage for the sequential kind) and
 * its replica index in each; no pass over the ops (they are checked as they
 * run). */
static int setup_workers(sim *s, cl_err *e)
{
    const plan *p = s->pl;
    const sched *sc = s->sc;
    s->worker_of_dev = cl_malloc((size_t)p->cluster.n_devices * sizeof(int));
    for (int d = 0; d < p->cluster.n_devices; d++) s->worker_of_dev[d] = -1;
    for (int w = 0; w < s->n_w; w++) {
        int d = sc->dev[w];
        if (d < 0 || d >= p->cluster.n_devices)
            return cl_fail(e, CL_EINPUT, "schedule: worker %d: device %d is not in the cluster", w, d);
        if (s->worker_of_dev[d] >= 0)
            return cl_fail(e, CL_EINPUT, "schedule: device %d has two op lists (workers %d and %d)", d,
                           s->worker_of_dev[d], w);
        s->worker_of_dev[d] = w;
    }
    for (int w = 0; w < s->n_w; w++)
        if (sc->off[w] > sc->off[w + 1] || sc->off[w] < 0 || sc->off[w + 1] > sc->n_ops)
            return cl_fail(e, CL_EINPUT, "schedule: worker %d: op list bounds out of range", w);
    /* 64-byte aligned, so a worker's hot fields share as few lines as can be */
    s->w = aligned_alloc(64, (size_t)s->n_w * sizeof *s->w);
    if (!s->w) abort();
    memset(s->w, 0, (size_t)s->n_w * sizeof *s->w);
    int all = sc->kind == SCHED_SEQUENTIAL;
    for (int st = 0; st < s->S; st++)
        for (int q = 0; q < (all ? 0 : p->stages[st].n_replicas); q++) {
            int w = s->worker_of_dev[p->stages[st].devices[q]];
            if (w >= 0) s->w[w].n_local++;
        }
    /* the per-stage arrays of all workers come from two blocks (thousands
     * of small allocations were a tenth of setting up a large run) */
    int64_t n_all = 0;
    for (int w = 0; w < s->n_w; w++) n_all += all ? s->S : s->w[w].n_local ? s->w[w].n_local : 1;
    s->pool_i = cl_malloc((size_t)n_all * 2 * sizeof *s->pool_i);
    s->pool_l = cl_calloc((size_t)n_all * 2, sizeof *s->pool_l);
    for (int w = 0, *pi = s->pool_i; w < s->n_w; w++) {
        sim_worker *W = &s->w[w];
        if (all) W->n_local = s->S;
        int n1 = W->n_local ? W->n_local : 1;
        int64_t *pl = s->pool_l + (pi - s->pool_i); /* the same offsets */
        W->local = pi;
        W->ar_q = pi + n1;
        W->last_ar = pl;
        W->ar_posted = pl + n1;
        pi += 2 * n1;
        W->pc = sc->off[w];
        W->end = sc->off[w + 1];
        W->cpeer[0] = W->cpeer[1] = -1;
        W->acc_iter = -1;
        W->n_local = 0;
    }
    for (int st = 0; st < s->S; st++) {
        if (all) {
            for (int w = 0; w < s->n_w; w++) {
                sim_worker *W = &s->w[w];
                W->local[W->n_local] = st;
                W->ar_q[W->n_local] = -1;
                W->last_ar[W->n_local++] = -1;
            }
            continue;
        }
        int r = p->stages[st].n_replicas, complete = 1;
        for (int q = 0; q < r; q++) complete &= s->worker_of_dev[p->stages[st].devices[q]] >= 0;
        for (int q = 0; q < r; q++) {
            int w = s->worker_of_dev[p->stages[st].devices[q]];
            if (w < 0) continue;
            sim_worker *W = &s->w[w];
            W->local[W->n_local] = st;
            W->ar_q[W->n_local] = complete ? q : -1; /* a ring needs every replica */
            W->last_ar[W->n_local++] = -1;
        }
    }
    s->ar_list = cl_calloc((size_t)s->S, sizeof *s->ar_list);
    s->ar_n = cl_calloc((size_t)s->S, sizeof *s->ar_n);
    s->ar_cap = cl_calloc((size_t)s->S, sizeof *s->ar_cap);
    sim_mem_init(s);
    return CL_OK;
}

void sim_destroy(sim *s)
{
    if (!s) return;
    ev_destroy(s->k);
    if (s->w) sim_mem_free(s);
    sim_ring_free(s);
    free(s->ch);
    free(s->ch_hash);
    free(s->ch_hval);
    free(s->w);
    free(s->worker_of_dev);
    free(s->pool_i);
    free(s->pool_l);
    free(s->stg);
    free(s->slots);
    free(s->xf);
    free(s->ar);
    if (s->ar_list)
        for (int i = 0; i < s->S; i++) free(s->ar_list[i]);
    free(s->ar_list);
    free(s->ar_n);
    free(s->ar_cap);
    free(s->ar_done);
    free(s->ar_op);
    free(s->ar_m);
    free(s->runq);
    free(s->iter_end);
    free(s->busy_it);
    free(s->comm_it);
    free(s->spans);
    free(s->mem_samples);
    free(s);
}

/* ---------------------------------------------------------------- run -- */

/* Append "worker w waits ..." for a blocked worker to buf. */
static void describe_wait(const sim *s, int w, char *buf, size_t cap)
{
    const sim_worker *W = &s->w[w];
    const sched_op *op = &s->sc->ops[W->pc];
    long long idx = (long long)(W->pc - s->sc->off[w]);
    size_t n = strlen(buf);
    if (W->state == W_WAIT_RECV) {
        snprintf(buf + n, cap - n, "; device %d (worker %d) waits at op %lld RECV %s of stage %d "
                 "microbatch %d iteration %d from worker %d (stage %d), never sent",
                 s->sc->dev[w], w, idx, (op->flags & SCHED_GRAD) ? "gradient" : "activation",
                 op->stage, op->micro, op->iter, op->peer, sched_peer_stage(op));
    } else if (W->state == W_WAIT_SEND) {
        snprintf(buf + n, cap - n, "; device %d (worker %d) waits at op %lld blocking SEND %s of "
                 "stage %d microbatch %d iteration %d to worker %d (stage %d), never received",
                 s->sc->dev[w], w, idx, (op->flags & SCHED_GRAD) ? "gradient" : "activation",
                 op->stage, op->micro, op->iter, op->peer, sched_peer_stage(op));
    } else if (W->state == W_WAIT_AR) {
        const sim_ar *a = &s->ar[W->wait_ref];
        snprintf(buf + n, cap - n, "; device %d (worker %d) waits at op %lld %s of stage %d "
                 "for its all-reduce (%d of %d replicas posted)", s->sc->dev[w], w, idx,
                 op->kind == SCHED_F ? "F" : "UPDATE", op->stage, a->posted, a->r);
    } else {
        snprintf(buf + n, cap - n, "; device %d (worker %d) stopped at op %lld", s->sc->dev[w], w, idx);
    }
}

int sim_run(sim *s, sim_result *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    assert(!s->ran && "sim_run: one run per handle");
    s->ran = 1;
    for (int w = 0; w < s->n_w; w++) enqueue(s, w);
    sim_drain(s);
    ev_status st = ev_run(s->k, s->o.max_events, s->o.max_wall_s);
    if (s->err.code) {
        *e = s->err;
        return e->code;
    }
    if (st == EV_EVENT_BUDGET || st == EV_WALL_BUDGET)
        return cl_fail(e, CL_EINPUT, "simulation stopped at t = %.6g s after %llu events: %s "
                       "(hint: %s, or simulate fewer microbatches or iterations)", ev_now(s->k),
                       (unsigned long long)ev_dispatched(s->k),
                       st == EV_EVENT_BUDGET ? "event budget exhausted" : "wall-time budget exhausted",
                       st == EV_EVENT_BUDGET ? "raise --max-events" : "raise --max-seconds");
    int stuck = 0;
    for (int w = 0; w < s->n_w; w++) stuck += s->w[w].state != W_DONE;
    if (stuck) {
        char buf[900] = "";
        int shown = 0;
        for (int w = 0; w < s->n_w && shown < 4; w++)
            if (s->w[w].state != W_DONE) {
                describe_wait(s, w, buf, sizeof buf);
                shown++;
            }
        return cl_fail(e, CL_EINPUT, "schedule: cannot complete (deadlock at t = %.6g s, %d of %d "
                       "devices waiting)%s%s (hint: every RECV needs its SEND posted earlier in the "
                       "sender's list%s)", ev_now(s->k), stuck, s->n_w, buf,
                       stuck > shown ? "; ..." : "",
                       s->sc->blocking_p2p ? "; with blocking transfers both lists must reach "
                       "each SEND/RECV pair in the same order" : "");
    }
    for (int64_t i = 0; i < s->n_ar; i++)
        if (s->ar[i].posted < s->ar[i].r)
            return cl_fail(e, CL_EINPUT, "schedule: an all-reduce of stage %d never completed: %d of "
                           "%d replicas posted it (hint: every replica takes part in each)",
                           s->ar[i].stage, s->ar[i].posted, s->ar[i].r);
    for (int w = 0; w < s->n_w; w++) { /* write back the workers' accumulators */
        const sim_worker *W = &s->w[w];
        if (W->acc_iter < 0) continue;
        s->busy_it[(int64_t)w * s->n_iter + W->acc_iter] = W->acc[0];
        s->comm_it[(int64_t)w * s->n_iter + W->acc_iter] = W->acc[1];
    }
    sim_fill_result(s, out);
    return CL_OK;
}

int sim_predict(const plan *p, sim_result *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    sched sc;
    int rc = sched_build(p, p->schedule, p->n_micro,
                         sched_default_iters(p->schedule, sched_fill_depth(p), p->n_micro), &sc, e);
    if (rc) return rc;
    sim_opts o = {.comm_off = p->comm_off};
    sim *s = sim_create(p, &sc, &o, e);
    if (!s) {
        sched_free(&sc);
        return e->code ? e->code : CL_EINPUT;
    }
    rc = sim_run(s, out, e);
    sim_destroy(s);
    sched_free(&sc);
    return rc;
}
