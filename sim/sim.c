/* sim.c - devices, links and collectives on the event kernel (see sim.h).
 *
 * Workers run their op lists (schedule.h).  A compute op is one event (its
 * end).  A transfer runs on the directed link (src worker, dst worker): alone
 * it takes bytes / bw and arrives `latency` later, one event; when k
 * transfers overlap on a link each progresses at bw / k, recomputed at every
 * start and finish (one pending event per link for the next finish), and the
 * latency follows each transfer's last byte.  Links between different pairs
 * are independent.  A ring all-reduce among r replicas is 2(r - 1) steps; in
 * each step every member sends bytes / r to its successor as soon as it has
 * received the previous step, over the same links.
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

static inline int64_t slot_of(const sim *s, const sched_op *op)
{
    int lo = op->stage < op->peer_stage ? op->stage : op->peer_stage;
    int64_t g = (int64_t)op->iter * s->m + op->micro;
    return (g * (s->S - 1) + lo) * 2 + ((op->flags & SCHED_GRAD) ? 1 : 0);
}

static inline double op_dur(const sim *s, const sched_op *op)
{
    switch (op->kind) {
    case SCHED_F: return s->dur_f[op->stage];
    case SCHED_B:
        return (op->flags & SCHED_FUSED_W) ? s->dur_bin[op->stage] + s->dur_bw[op->stage]
                                           : s->dur_bin[op->stage];
    case SCHED_W: return s->dur_bw[op->stage];
    default: return 0; /* UPDATE: the optimiser step is not modelled */
    }
}

int sim_local_index(const sim_worker *w, int stage)
{
    for (int i = 0; i < w->n_local; i++)
        if (w->local[i] == stage) return i;
    assert(0 && "stage not on this worker");
    return -1;
}

static void enqueue(sim *s, int w)
{
    if (s->w[w].queued) return;
    s->w[w].queued = 1;
    s->runq[(s->rq_head + s->rq_n++) % s->n_w] = w;
}

static void record(sim *s, double t0, double t1, int track, int link, int64_t op)
{
    if (!s->o.record) return;
    if (s->n_spans == s->cap_spans) {
        s->cap_spans = s->cap_spans * 2 + 1024;
        s->spans = cl_realloc(s->spans, (size_t)s->cap_spans * sizeof *s->spans);
    }
    s->spans[s->n_spans++] = (sim_span){t0, t1, track, link, op};
}

/* ------------------------------------------------------------ channels -- */

static int get_chan(sim *s, int src, int dst)
{
    int64_t key = (int64_t)src * s->n_w + dst;
    if (2 * (int64_t)(s->n_ch + 1) > s->ch_hcap) {
        int64_t cap = s->ch_hcap ? s->ch_hcap * 2 : 64;
        int64_t *keys = cl_malloc((size_t)cap * sizeof *keys);
        int32_t *vals = cl_malloc((size_t)cap * sizeof *vals);
        for (int64_t i = 0; i < cap; i++) keys[i] = -1;
        for (int64_t i = 0; i < s->ch_hcap; i++) {
            if (s->ch_hash[i] < 0) continue;
            int64_t h = (int64_t)((uint64_t)s->ch_hash[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
            while (keys[h] >= 0) h = (h + 1) & (cap - 1);
            keys[h] = s->ch_hash[i];
            vals[h] = s->ch_hval[i];
        }
        free(s->ch_hash);
        free(s->ch_hval);
        s->ch_hash = keys;
        s->ch_hval = vals;
        s->ch_hcap = cap;
    }
    int64_t h = (int64_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (s->ch_hcap - 1);
    while (s->ch_hash[h] >= 0) {
        if (s->ch_hash[h] == key) return s->ch_hval[h];
        h = (h + 1) & (s->ch_hcap - 1);
    }
    if (s->n_ch == s->cap_ch) {
        s->cap_ch = s->cap_ch * 2 + 16;
        s->ch = cl_realloc(s->ch, (size_t)s->cap_ch * sizeof *s->ch);
    }
    int c = s->n_ch++;
    sim_chan *ch = &s->ch[c];
    memset(ch, 0, sizeof *ch);
    ch->src = src;
    ch->dst = dst;
    const cluster *cl = &s->pl->cluster;
    int a = s->sc->dev[src], b = s->sc->dev[dst];
    ch->level = cl->devices[a].node == cl->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER;
    const cluster_link *l = cluster_link_between(cl, a, b);
    ch->bw = l->bw_Bps;
    ch->lat = l->latency_s;
    s->ch_hash[h] = key;
    s->ch_hval[h] = c;
    return c;
}

static int32_t xf_alloc(sim *s)
{
    if (s->xf_free < 0) {
        int32_t old = s->cap_xf, cap = old * 2 + 64;
        s->xf = cl_realloc(s->xf, (size_t)cap * sizeof *s->xf);
        for (int32_t i = cap; i-- > old;) {
            s->xf[i].next_free = s->xf_free;
            s->xf_free = i;
        }
        s->cap_xf = cap;
    }
    int32_t x = s->xf_free;
    s->xf_free = s->xf[x].next_free;
    return x;
}

static void chan_add(sim_chan *ch, int32_t x)
{
    if (ch->n_active == ch->cap_active) {
        ch->cap_active = ch->cap_active * 2 + 4;
        ch->active = cl_realloc(ch->active, (size_t)ch->cap_active * sizeof *ch->active);
    }
    ch->active[ch->n_active++] = x;
}

/* Shared mode: advance every active transfer to time t. */
static void chan_progress(sim *s, sim_chan *ch, double t)
{
    double delta = (t - ch->last_t) * ch->bw / ch->n_active;
    for (int i = 0; i < ch->n_active; i++) s->xf[ch->active[i]].remaining -= delta;
    ch->last_t = t;
}

static void on_chan(ev_kernel *k, void *ctx, uint64_t c);
static void on_solo_arrive(ev_kernel *k, void *ctx, uint64_t x);
static void on_arrive(ev_kernel *k, void *ctx, uint64_t x);
static void arrive(sim *s, int32_t x, double t);
static void drain(sim *s);

static void chan_schedule_shared(sim *s, int c)
{
    sim_chan *ch = &s->ch[c];
    if (ch->ev) ev_cancel(s->k, ch->ev);
    double best = HUGE_VAL;
    for (int i = 0; i < ch->n_active; i++)
        if (s->xf[ch->active[i]].remaining < best) best = s->xf[ch->active[i]].remaining;
    if (best < 0) best = 0;
    ch->ev = ev_at(s->k, ch->last_t + best * ch->n_active / ch->bw, on_chan, s, (uint64_t)c);
}

static void make_solo(sim *s, sim_chan *ch, int32_t x, double t, double remaining)
{
    sim_xfer *X = &s->xf[x];
    X->finish_t = t + (remaining > 0 ? remaining : 0) / ch->bw;
    X->ev = ev_at(s->k, X->finish_t + ch->lat, on_solo_arrive, s, (uint64_t)x);
}

static void start_xfer(sim *s, int c, int kind, int64_t ref, int64_t op, double bytes,
                       int src, int dst, int member)
{
    double t = ev_now(s->k);
    int32_t x = xf_alloc(s);
    sim_xfer *X = &s->xf[x];
    X->kind = kind;
    X->chan = c;
    X->ref = ref;
    X->op = op;
    X->src = src;
    X->dst = dst;
    X->member = member;
    X->bytes = bytes;
    X->remaining = bytes;
    X->start_t = t;
    X->ev = 0;
    sim_chan *ch = &s->ch[c];
    s->sent_level[ch->level] += bytes;
    if (ch->n_active == 1 && s->xf[ch->active[0]].finish_t <= t)
        ch->n_active = 0; /* the solo transfer is past its last byte */
    if (ch->n_active == 0) {
        chan_add(ch, x);
        make_solo(s, ch, x, t, bytes);
        return;
    }
    if (ch->n_active == 1) { /* a solo transfer becomes shared */
        sim_xfer *Y = &s->xf[ch->active[0]];
        ev_cancel(s->k, Y->ev);
        Y->ev = 0;
        Y->remaining = (Y->finish_t - t) * ch->bw;
        ch->last_t = t;
    } else {
        chan_progress(s, ch, t);
    }
    chan_add(ch, x);
    chan_schedule_shared(s, c);
}

static void on_chan(ev_kernel *k, void *ctx, uint64_t c)
{
    sim *s = ctx;
    double t = ev_now(k);
    sim_chan *ch = &s->ch[c];
    ch->ev = 0;
    chan_progress(s, ch, t);
    int best = 0;
    for (int i = 1; i < ch->n_active; i++)
        if (s->xf[ch->active[i]].remaining < s->xf[ch->active[best]].remaining) best = i;
    int32_t x = ch->active[best];
    memmove(ch->active + best, ch->active + best + 1,
            (size_t)(ch->n_active - best - 1) * sizeof *ch->active);
    ch->n_active--;
    s->xf[x].finish_t = t;
    if (ch->n_active == 1) {
        int32_t y = ch->active[0];
        make_solo(s, ch, y, t, s->xf[y].remaining);
    } else if (ch->n_active > 1) {
        chan_schedule_shared(s, (int)c);
    }
    if (ch->lat > 0)
        ev_at(k, t + ch->lat, on_arrive, s, (uint64_t)x);
    else
        arrive(s, x, t);
    drain(s);
}

static void on_solo_arrive(ev_kernel *k, void *ctx, uint64_t x)
{
    sim *s = ctx;
    sim_chan *ch = &s->ch[s->xf[x].chan];
    if (ch->n_active == 1 && ch->active[0] == (int32_t)x) ch->n_active = 0;
    arrive(s, (int32_t)x, ev_now(k));
    drain(s);
}

static void on_arrive(ev_kernel *k, void *ctx, uint64_t x)
{
    sim *s = ctx;
    arrive(s, (int32_t)x, ev_now(k));
    drain(s);
}

/* ------------------------------------------------------- pipeline data -- */

static void wake(sim *s, int w, double t, double ready_t, int iter)
{
    sim_worker *W = &s->w[w];
    double from = W->block_t > ready_t ? W->block_t : ready_t;
    s->comm_it[(int64_t)w * s->n_iter + iter] += t - from;
    W->state = W_READY;
    enqueue(s, w);
}

static void deliver_pipe(sim *s, int64_t slot, int src, int dst, double bytes, double t)
{
    sim_slot *sl = &s->slots[slot];
    sl->arrive_t = t;
    sim_mem_add(s, src, MEM_BUFFERS, -bytes);
    sim_mem_add(s, dst, MEM_BUFFERS, bytes);
    if (sl->waiter >= 0) {
        int w = sl->waiter;
        sl->waiter = -1;
        wake(s, w, t, sl->post_t, s->sc->ops[s->w[w].pc].iter);
    }
}

static void post_send(sim *s, int w, const sched_op *op, int64_t pc)
{
    double t = ev_now(s->k);
    int64_t slot = slot_of(s, op);
    s->slots[slot].post_t = t;
    sim_mem_add(s, w, MEM_BUFFERS, op->bytes);
    s->w[w].sent += op->bytes;
    if (s->o.comm_off) {
        const cluster *cl = &s->pl->cluster;
        int a = s->sc->dev[w], b = s->sc->dev[op->peer];
        s->sent_level[cl->devices[a].node == cl->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER] +=
            op->bytes;
        deliver_pipe(s, slot, w, op->peer, op->bytes, t);
        return;
    }
    start_xfer(s, get_chan(s, w, op->peer), XF_PIPE, slot, pc, op->bytes, w, op->peer, 0);
}

/* ---------------------------------------------------------- all-reduce -- */

static int ar_member_worker(const sim *s, const sim_ar *a, int q)
{
    return s->worker_of_dev[s->pl->stages[a->stage].devices[q]];
}

static void ar_member_done(sim *s, int64_t inst, int q, double t)
{
    sim_ar *a = &s->ar[inst];
    s->ar_done[a->member_off + q] = 1;
    int w = ar_member_worker(s, a, q);
    sim_worker *W = &s->w[w];
    if (W->state == W_WAIT_AR && W->wait_ref == inst)
        wake(s, w, t, a->last_post_t, s->sc->ops[W->pc].iter);
}

static void ring_send(sim *s, int64_t inst, int q)
{
    sim_ar *a = &s->ar[inst];
    int nq = (q + 1) % a->r;
    int src = ar_member_worker(s, a, q), dst = ar_member_worker(s, a, nq);
    start_xfer(s, get_chan(s, src, dst), XF_RING, inst, s->ar_op[a->member_off + q],
               s->sc->ops[s->ar_op[a->member_off + q]].bytes / a->r, src, dst, nq);
}

static void ring_recv(sim *s, int64_t inst, int q, double t)
{
    sim_ar *a = &s->ar[inst];
    int got = ++s->ar_step[a->member_off + q];
    if (got == 2 * (a->r - 1))
        ar_member_done(s, inst, q, t);
    else
        ring_send(s, inst, q);
}

static void post_ar(sim *s, int w, const sched_op *op, int64_t pc)
{
    sim_worker *W = &s->w[w];
    int li = sim_local_index(W, op->stage);
    int64_t inst = s->ar_base[op->stage] + W->ar_posted[li]++;
    assert(W->ar_posted[li] <= s->ar_count[op->stage]);
    sim_ar *a = &s->ar[inst];
    int q = W->ar_q[li];
    s->ar_op[a->member_off + q] = pc;
    W->last_ar[li] = inst;
    a->posted++;
    a->last_post_t = ev_now(s->k);
    if (a->posted < a->r) return;
    if (s->o.comm_off || a->r == 1) {
        for (int i = 0; i < a->r; i++) ar_member_done(s, inst, i, ev_now(s->k));
        return;
    }
    for (int i = 0; i < a->r; i++) {
        double bytes = s->sc->ops[s->ar_op[a->member_off + i]].bytes / a->r;
        s->w[ar_member_worker(s, a, i)].sent += 2.0 * (a->r - 1) * bytes;
        ring_send(s, inst, i);
    }
}

static void arrive(sim *s, int32_t x, double t)
{
    sim_xfer *X = &s->xf[x];
    record(s, X->start_t, t, X->chan, 1, X->op);
    if (X->kind == XF_PIPE)
        deliver_pipe(s, X->ref, X->src, X->dst, X->bytes, t);
    else
        ring_recv(s, X->ref, X->member, t);
    X->next_free = s->xf_free;
    s->xf_free = x;
}

/* ------------------------------------------------------------- workers -- */

static void on_compute_done(ev_kernel *k, void *ctx, uint64_t w);

static void finish_compute(sim *s, int w, double t)
{
    sim_worker *W = &s->w[w];
    const sched_op *op = &s->sc->ops[W->pc];
    s->busy_it[(int64_t)w * s->n_iter + op->iter] += t - W->run_t0;
    if (t > s->iter_end[op->iter]) s->iter_end[op->iter] = t;
    if ((op->kind == SCHED_B && (op->flags & SCHED_FUSED_W)) || op->kind == SCHED_W)
        sim_mem_stash_free(s, w, op);
    else if (op->kind == SCHED_UPDATE)
        sim_mem_update(s, w, op);
    record(s, W->run_t0, t, w, 0, W->pc);
    W->t_last = t;
    W->pc++;
    W->state = W_READY;
}

/* Run worker w's list from its current op until it blocks or ends. */
static void advance(sim *s, int w)
{
    sim_worker *W = &s->w[w];
    const sched_op *ops = s->sc->ops;
    double t = ev_now(s->k);
    while (W->pc < W->end) {
        const sched_op *op = &ops[W->pc];
        switch ((sched_op_kind)op->kind) {
        case SCHED_SEND:
            post_send(s, w, op, W->pc);
            W->pc++;
            continue;
        case SCHED_ALLREDUCE:
            post_ar(s, w, op, W->pc);
            W->pc++;
            continue;
        case SCHED_RECV: {
            int64_t slot = slot_of(s, op);
            sim_slot *sl = &s->slots[slot];
            if (sl->arrive_t < 0) {
                W->state = W_WAIT_RECV;
                W->wait_ref = slot;
                W->block_t = t;
                sl->waiter = w;
                return;
            }
            sim_mem_add(s, w, MEM_BUFFERS, -op->bytes);
            W->pc++;
            continue;
        }
        case SCHED_UPDATE: {
            int li = sim_local_index(W, op->stage);
            int64_t inst = W->last_ar[li];
            if (inst >= 0 && !s->ar_done[s->ar[inst].member_off + W->ar_q[li]]) {
                W->state = W_WAIT_AR;
                W->wait_ref = inst;
                W->block_t = t;
                return;
            }
        }
        /* FALLTHROUGH - an update is a zero-time compute op */
        case SCHED_F:
        case SCHED_B:
        case SCHED_W: {
            double d = op_dur(s, op);
            if (op->kind == SCHED_F) sim_mem_f_start(s, w, op);
            W->run_t0 = t;
            if (d > 0) {
                W->state = W_RUN;
                ev_at(s->k, t + d, on_compute_done, s, (uint64_t)w);
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

static void drain(sim *s)
{
    while (s->rq_n) {
        int w = s->runq[s->rq_head];
        s->rq_head = (s->rq_head + 1) % s->n_w;
        s->rq_n--;
        s->w[w].queued = 0;
        advance(s, w);
    }
}

static void on_compute_done(ev_kernel *k, void *ctx, uint64_t w)
{
    sim *s = ctx;
    finish_compute(s, (int)w, ev_now(k));
    enqueue(s, (int)w);
    drain(s);
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
            check_num(st->stash_bytes, "stash_bytes", i, e) || check_num(st->param_bytes, "param_bytes", i, e))
            return NULL;
    }
    int64_t G = (int64_t)sc->n_micro * sc->n_iter;
    if (G * (p->n_stages > 1 ? p->n_stages - 1 : 1) > ((int64_t)1 << 36)) {
        cl_fail(e, CL_EINPUT, "schedule: %lld microbatches x %d stages is too large to simulate",
                (long long)G, p->n_stages);
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
    s->n_w = sc->n_dev;
    s->dur_f = cl_malloc((size_t)s->S * sizeof(double));
    s->dur_bin = cl_malloc((size_t)s->S * sizeof(double));
    s->dur_bw = cl_malloc((size_t)s->S * sizeof(double));
    for (int i = 0; i < s->S; i++) {
        s->dur_f[i] = p->stages[i].fwd_s;
        s->dur_bin[i] = p->stages[i].bwd_in_s;
        s->dur_bw[i] = p->stages[i].bwd_w_s;
    }
    s->n_slots = s->S > 1 ? G * (s->S - 1) * 2 : 0;
    s->slots = cl_malloc((size_t)(s->n_slots ? s->n_slots : 1) * sizeof *s->slots);
    for (int64_t i = 0; i < s->n_slots; i++) s->slots[i] = (sim_slot){-1, -1, -1};
    s->xf_free = -1;
    s->runq = cl_malloc((size_t)s->n_w * sizeof *s->runq);
    s->iter_end = cl_calloc((size_t)s->n_iter, sizeof(double));
    s->busy_it = cl_calloc((size_t)s->n_w * s->n_iter, sizeof(double));
    s->comm_it = cl_calloc((size_t)s->n_w * s->n_iter, sizeof(double));
    if (setup_workers(s, e)) {
        sim_destroy(s);
        return NULL;
    }
    s->k = ev_create();
    return s;
}

/* Worker tables, op bounds, all-reduce groups. */
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
    s->w = cl_calloc((size_t)s->n_w, sizeof *s->w);
    s->ar_count = cl_calloc((size_t)s->S, sizeof(int64_t));
    s->ar_base = cl_calloc((size_t)s->S + 1, sizeof(int64_t));
    int *mark = cl_malloc((size_t)s->S * sizeof(int));
    int64_t *arc = cl_calloc((size_t)s->S, sizeof(int64_t));
    int rc = CL_OK;
    for (int w = 0; w < s->n_w && !rc; w++) {
        sim_worker *W = &s->w[w];
        W->pc = sc->off[w];
        W->end = sc->off[w + 1];
        for (int i = 0; i < s->S; i++) mark[i] = 0, arc[i] = 0;
        for (int64_t i = W->pc; i < W->end && !rc; i++) {
            const sched_op *op = &sc->ops[i];
            if (op->kind >= SCHED_OP_COUNT || op->stage < 0 || op->stage >= s->S || op->iter < 0 ||
                op->iter >= s->n_iter || op->micro < -1 || op->micro >= s->m)
                rc = cl_fail(e, CL_EINPUT, "schedule: worker %d op %lld: stage, microbatch or "
                             "iteration out of range", w, (long long)(i - W->pc));
            else if ((op->kind == SCHED_SEND || op->kind == SCHED_RECV) &&
                     (op->peer < 0 || op->peer >= s->n_w || op->peer == w || op->micro < 0 ||
                      abs(op->peer_stage - op->stage) != 1 || op->peer_stage >= s->S))
                rc = cl_fail(e, CL_EINPUT, "schedule: worker %d op %lld: bad transfer (peer worker "
                             "%d, stages %d -> %d)", w, (long long)(i - W->pc), op->peer, op->stage,
                             op->peer_stage);
            else if (op->kind <= SCHED_W && op->micro < 0)
                rc = cl_fail(e, CL_EINPUT, "schedule: worker %d op %lld: compute op without a "
                             "microbatch", w, (long long)(i - W->pc));
            else {
                mark[op->stage] = 1;
                if (op->kind == SCHED_ALLREDUCE) arc[op->stage]++;
            }
        }
        if (rc) break;
        for (int i = 0; i < s->S; i++) W->n_local += mark[i];
        W->local = cl_malloc((size_t)(W->n_local ? W->n_local : 1) * sizeof(int));
        W->last_ar = cl_malloc((size_t)(W->n_local ? W->n_local : 1) * sizeof(int64_t));
        W->ar_posted = cl_calloc((size_t)(W->n_local ? W->n_local : 1), sizeof(int64_t));
        W->ar_q = cl_calloc((size_t)(W->n_local ? W->n_local : 1), sizeof(int));
        for (int i = 0, j = 0; i < s->S; i++) {
            if (!mark[i]) continue;
            W->local[j] = i;
            W->last_ar[j] = -1;
            if (arc[i]) {
                const plan_stage *st = &p->stages[i];
                int q = -1;
                for (int r = 0; r < st->n_replicas; r++)
                    if (st->devices[r] == sc->dev[w]) q = r;
                if (q < 0) {
                    rc = cl_fail(e, CL_EINPUT, "schedule: worker %d (device %d) all-reduces stage "
                                 "%d but is not one of its replicas", w, sc->dev[w], i);
                    break;
                }
                for (int r = 0; r < st->n_replicas; r++)
                    if (s->worker_of_dev[st->devices[r]] < 0) {
                        rc = cl_fail(e, CL_EINPUT, "schedule: stage %d all-reduces but its replica "
                                     "on device %d has no op list", i, st->devices[r]);
                        break;
                    }
                if (rc) break;
                W->ar_q[j] = q;
                if (q == 0) s->ar_count[i] = arc[i];
            }
            j++;
        }
    }
    /* every replica of a stage must post the same number of all-reduces */
    for (int w = 0; w < s->n_w && !rc; w++) {
        sim_worker *W = &s->w[w];
        for (int i = 0; i < s->S; i++) arc[i] = 0;
        for (int64_t i = W->pc; i < W->end; i++)
            if (sc->ops[i].kind == SCHED_ALLREDUCE) arc[sc->ops[i].stage]++;
        for (int j = 0; j < W->n_local && !rc; j++) {
            int st = W->local[j];
            if (arc[st] != s->ar_count[st])
                rc = cl_fail(e, CL_EINPUT, "schedule: stage %d: worker %d posts %lld all-reduces but "
                             "its first replica posts %lld (hint: every replica takes part in each)",
                             st, w, (long long)arc[st], (long long)s->ar_count[st]);
        }
    }
    free(mark);
    free(arc);
    if (rc) return rc;
    int64_t members = 0;
    for (int i = 0; i < s->S; i++) {
        s->ar_base[i + 1] = s->ar_base[i] + s->ar_count[i];
        members += s->ar_count[i] * p->stages[i].n_replicas;
    }
    s->n_ar = s->ar_base[s->S];
    s->ar = cl_calloc((size_t)(s->n_ar ? s->n_ar : 1), sizeof *s->ar);
    s->ar_done = cl_calloc((size_t)(members ? members : 1), 1);
    s->ar_op = cl_calloc((size_t)(members ? members : 1), sizeof(int64_t));
    s->ar_step = cl_calloc((size_t)(members ? members : 1), sizeof(int32_t));
    for (int i = 0, off = 0; i < s->S; i++)
        for (int64_t k = 0; k < s->ar_count[i]; k++) {
            sim_ar *a = &s->ar[s->ar_base[i] + k];
            a->stage = i;
            a->r = p->stages[i].n_replicas;
            a->member_off = off;
            off += a->r;
        }
    sim_mem_init(s);
    return CL_OK;
}

void sim_destroy(sim *s)
{
    if (!s) return;
    ev_destroy(s->k);
    if (s->w) {
        sim_mem_free(s);
        for (int w = 0; w < s->n_w; w++) {
            free(s->w[w].local);
            free(s->w[w].last_ar);
            free(s->w[w].ar_posted);
            free(s->w[w].ar_q);
        }
    }
    for (int c = 0; c < s->n_ch; c++) free(s->ch[c].active);
    free(s->ch);
    free(s->ch_hash);
    free(s->ch_hval);
    free(s->w);
    free(s->worker_of_dev);
    free(s->dur_f);
    free(s->dur_bin);
    free(s->dur_bw);
    free(s->slots);
    free(s->xf);
    free(s->ar);
    free(s->ar_base);
    free(s->ar_count);
    free(s->ar_done);
    free(s->ar_op);
    free(s->ar_step);
    free(s->runq);
    free(s->iter_end);
    free(s->busy_it);
    free(s->comm_it);
    free(s->spans);
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
                 op->stage, op->micro, op->iter, op->peer, op->peer_stage);
    } else if (W->state == W_WAIT_AR) {
        const sim_ar *a = &s->ar[W->wait_ref];
        snprintf(buf + n, cap - n, "; device %d (worker %d) waits at op %lld UPDATE of stage %d "
                 "for its all-reduce (%d of %d replicas posted)", s->sc->dev[w], w, idx, op->stage,
                 a->posted, a->r);
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
    drain(s);
    ev_status st = ev_run(s->k, s->o.max_events, s->o.max_wall_s);
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
        return cl_fail(e, CL_EINPUT, "schedule cannot complete (deadlock at t = %.6g s, %d of %d "
                       "devices waiting)%s%s (hint: every RECV needs its SEND posted earlier in the "
                       "sender's list)", ev_now(s->k), stuck, s->n_w, buf,
                       stuck > shown ? "; ..." : "");
    }
    sim_fill_result(s, out);
    return CL_OK;
}

int sim_predict(const plan *p, sim_result *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    int P = p->n_stages / (p->chunks > 1 ? p->chunks : 1);
    sched sc;
    int rc = sched_build(p, p->schedule, p->n_micro,
                         sched_default_iters(p->schedule, P, p->n_micro), &sc, e);
    if (rc) return rc;
    sim_opts o = {0};
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
