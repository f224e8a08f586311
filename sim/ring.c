/* ring.c - the all-reduce of a replicated stage's gradients (see sim.h,
 * docs/simulator.md "Resources and timing").
 *
 * The k-th ALLREDUCE op of a stage on each of its r replicas form one
 * instance; it starts when every replica has posted.  The replicas are
 * grouped by node.  When they sit k to a node on n >= 2 nodes with k >= 2
 * the all-reduce is hierarchical, as NCCL and Horovod run it across nodes:
 *   1. reduce-scatter inside each node: k - 1 steps of P / k bytes on a
 *      ring of the node's members;
 *   2. all-reduce between nodes: the members with the same place in their
 *      node form k rings of n, each all-reducing its P / k shard,
 *      2 (n - 1) steps of P / (k n) bytes;
 *   3. all-gather inside each node: k - 1 steps of P / k bytes.
 * Otherwise one flat ring over all r: 2 (r - 1) steps of P / r bytes (the
 * same schema with k = r, n = 1).  P is not the same in both halves
 * (core/plan_grad.c, plan_ar_bytes): the reduce-scatter half (steps 1 and
 * the first n - 1 of 2) moves the gradients at the reduction's element size,
 * R bytes (the op's), the all-gather half (the last n - 1 of 2, and 3) G
 * bytes: the gradients again, or under a ZeRO split the updated weights.
 * Uncontended and uniform:
 *   (k - 1) / k x (R + G) / bw_in + 2 (k - 1) lat_in
 *     + (n - 1) / (n k) x (R + G) / bw_x + 2 (n - 1) lat_x.
 *
 * A member sends its steps strictly in order, each as soon as the steps it
 * needs have arrived: the channels then see an order that does not depend
 * on timing (link.c).  Under ZeRO 1 and 2 (flushing kinds) the all-reduce
 * is a reduce-scatter, the UPDATE of the member's shard, and an
 * all-gather: the first step that sends an updated shard (the first
 * all-gather step between nodes, or inside the node when n = 1) also waits
 * for the member's UPDATE (sim_ring_gate).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

/* ------------------------------------------------------------ geometry -- */

static void ring_of(sim *s, int st, sim_ring *g)
{
    const plan_stage *ps = &s->pl->stages[st];
    const cluster *cl = &s->pl->cluster;
    int r = ps->n_replicas;
    int32_t *blk = cl_malloc((size_t)r * 4 * sizeof *blk);
    g->next_in = blk;
    g->next_x = blk + r;
    g->ch_in = blk + 2 * r;
    g->ch_x = blk + 3 * r;
    for (int q = 0; q < 4 * r; q++) blk[q] = -1;
    double reduce;
    plan_ar_bytes(s->pl, st, s->sc->kind, &reduce, &g->gather);
    plan_ring_shape(s->pl, st, &g->k, &g->n);
    if (g->n == 1) {
        for (int q = 0; q < r; q++) g->next_in[q] = (q + 1) % r;
        return;
    }
    /* nodes in order of first appearance; grid[i * k + j]: the member at
     * place j (replica order) on the i-th of them */
    int k = g->k, n = g->n;
    int *slot = cl_malloc((size_t)cl->n_nodes * sizeof *slot), *fill = cl_calloc((size_t)n, sizeof *fill);
    int *grid = cl_malloc((size_t)r * sizeof *grid), *at = cl_malloc((size_t)r * sizeof *at), seen = 0;
    for (int q = 0; q < r; q++) slot[cl->devices[ps->devices[q]].node] = -1;
    for (int q = 0; q < r; q++) {
        int *i = &slot[cl->devices[ps->devices[q]].node];
        if (*i < 0) *i = seen++;
        at[q] = *i * k + fill[*i]++;
        grid[at[q]] = q;
    }
    for (int q = 0; q < r; q++) {
        int i = at[q] / k, j = at[q] % k;
        g->next_in[q] = grid[i * k + (j + 1) % k];
        g->next_x[q] = grid[((i + 1) % n) * k + j];
    }
    free(slot);
    free(fill);
    free(grid);
    free(at);
}

void sim_ring_setup(sim *s)
{
    s->ring = cl_calloc((size_t)s->S, sizeof *s->ring);
    for (int st = 0; st < s->S; st++)
        if (s->pl->stages[st].n_replicas > 1) ring_of(s, st, &s->ring[st]);
}

void sim_ring_free(sim *s)
{
    if (!s->ring) return;
    for (int st = 0; st < s->S; st++) free(s->ring[st].next_in);
    free(s->ring);
}

/* Member q's channel to its successor inside (hop 0) or between nodes. */
static int ring_chan(sim *s, int st, int q, int hop)
{
    sim_ring *g = &s->ring[st];
    int32_t *c = hop ? &g->ch_x[q] : &g->ch_in[q];
    if (*c < 0) {
        const plan_stage *ps = &s->pl->stages[st];
        int nq = hop ? g->next_x[q] : g->next_in[q];
        *c = sim_link_lookup(s, s->worker_of_dev[ps->devices[q]], s->worker_of_dev[ps->devices[nq]],
                             1 + st);
    }
    return *c;
}

void sim_ring_channels(sim *s)
{
    for (int st = 0; st < s->S; st++) {
        const plan_stage *ps = &s->pl->stages[st];
        int complete = ps->n_replicas > 1;
        for (int q = 0; q < ps->n_replicas && complete; q++)
            complete = s->worker_of_dev[ps->devices[q]] >= 0;
        for (int q = 0; complete && q < ps->n_replicas; q++) {
            ring_chan(s, st, q, 0);
            if (s->ring[st].n > 1) ring_chan(s, st, q, 1);
        }
    }
}

/* ------------------------------------------------------------- members -- */

/* Member q's part of instance inst is done (how = 1), or under ZeRO its
 * reduce-scatter (how = 2): wake it if it waits for that. */
static void member_mark(sim *s, int64_t inst, int q, double t, int how)
{
    sim_ar *a = &s->ar[inst];
    s->ar_done[a->member_off + q] = (uint8_t)how;
    int w = sim_ar_worker(s, a, q);
    sim_worker *W = &s->w[w];
    /* the all-gather ends the member's iteration, even after its last op */
    if (how == 1 && s->zero_split && t > W->t_last) W->t_last = t;
    if (W->state == W_WAIT_AR && W->wait_ref == inst) sim_wake(s, w, t, a->last_post_t);
}

/* Send member q's next steps, in order, while what each needs is there. */
static void pump(sim *s, int64_t inst, int q)
{
    sim_ar *a = &s->ar[inst];
    const sim_ring *g = &s->ring[a->stage];
    sim_arm *M = &s->ar_m[a->member_off + q];
    int k = g->k, n = g->n, total = 2 * (k - 1) + 2 * (n - 1);
    int64_t op = s->ar_op[a->member_off + q];
    double P = s->sc->ops[op].bytes, G = g->gather;
    while (M->sent < total) {
        int j = M->sent, hop;
        double bytes;
        if (j < k - 1) { /* reduce-scatter inside the node */
            if (M->got_in < j) return;
            hop = 0;
            bytes = P / k;
        } else if (j < k - 1 + 2 * (n - 1)) { /* between nodes */
            int i = j - (k - 1);
            if (M->got_in < k - 1 || M->got_x < i || (s->zero_split && i == n - 1 && !M->gate)) return;
            hop = 1;
            bytes = (i < n - 1 ? P : G) / k / n;
        } else { /* all-gather inside the node */
            int i = j - (k - 1) - 2 * (n - 1);
            if (M->got_x < 2 * (n - 1) || M->got_in < k - 1 + i ||
                (s->zero_split && n == 1 && i == 0 && !M->gate))
                return;
            hop = 0;
            bytes = G / k;
        }
        M->sent++;
        int nq = hop ? g->next_x[q] : g->next_in[q];
        int src = sim_ar_worker(s, a, q), dst = sim_ar_worker(s, a, nq);
        sim_link_start(s, ring_chan(s, a->stage, q, hop), XF_RING, inst, op, bytes, src, dst, nq, hop);
    }
}

void sim_ring_recv(sim *s, int64_t inst, int q, int hop, double t)
{
    sim_ar *a = &s->ar[inst];
    const sim_ring *g = &s->ring[a->stage];
    sim_arm *M = &s->ar_m[a->member_off + q];
    if (hop) M->got_x++; else M->got_in++;
    int k = g->k, n = g->n;
    /* the last step received may still let it send: the all-gather inside
     * the node forwards what arrived while its ring between nodes was busy */
    if (M->got_in == 2 * (k - 1) && M->got_x == 2 * (n - 1))
        member_mark(s, inst, q, t, 1);
    else if (s->zero_split && !s->ar_done[a->member_off + q] && M->got_in >= k - 1 &&
             M->got_x >= n - 1)
        member_mark(s, inst, q, t, 2); /* its UPDATE opens the gate */
    pump(s, inst, q);
}

void sim_ring_gate(sim *s, int64_t inst, int q)
{
    s->ar_m[s->ar[inst].member_off + q].gate = 1;
    pump(s, inst, q);
}

/* The k-th all-reduce of stage st, created when its first replica posts. */
static int64_t ar_instance(sim *s, int st, int64_t k)
{
    if (k < s->ar_n[st]) return s->ar_list[st][k];
    if (s->ar_n[st] == s->ar_cap[st]) {
        s->ar_cap[st] = s->ar_cap[st] * 2 + 4;
        s->ar_list[st] = cl_realloc(s->ar_list[st], (size_t)s->ar_cap[st] * sizeof **s->ar_list);
    }
    if (s->n_ar == s->cap_ar) {
        s->cap_ar = s->cap_ar * 2 + 16;
        s->ar = cl_realloc(s->ar, (size_t)s->cap_ar * sizeof *s->ar);
    }
    int r = s->pl->stages[st].n_replicas;
    if (s->n_members + r > s->cap_members) {
        s->cap_members = (s->n_members + r) * 2 + 64;
        s->ar_done = cl_realloc(s->ar_done, (size_t)s->cap_members);
        s->ar_op = cl_realloc(s->ar_op, (size_t)s->cap_members * sizeof *s->ar_op);
        s->ar_m = cl_realloc(s->ar_m, (size_t)s->cap_members * sizeof *s->ar_m);
    }
    int64_t inst = s->n_ar++;
    s->ar[inst] = (sim_ar){.stage = st, .r = r, .member_off = s->n_members};
    for (int q = 0; q < r; q++) {
        s->ar_done[s->n_members + q] = 0;
        s->ar_op[s->n_members + q] = -1;
        s->ar_m[s->n_members + q] = (sim_arm){0, 0, 0, 0};
    }
    s->n_members += r;
    s->ar_list[st][s->ar_n[st]++] = inst;
    return inst;
}

void sim_post_ar(sim *s, int w, const sched_op *op, int64_t pc)
{
    sim_worker *W = &s->w[w];
    int li = sim_local_index(W, op->stage);
    int q = li < 0 ? -1 : W->ar_q[li];
    if (q < 0) {
        sim_run_fail(s, w, "all-reduce of a stage this device is not a replica of");
        return;
    }
    int64_t inst = ar_instance(s, op->stage, W->ar_posted[li]++);
    sim_ar *a = &s->ar[inst];
    s->ar_op[a->member_off + q] = pc;
    W->last_ar[li] = inst;
    a->posted++;
    a->last_post_t = s->now;
    if (a->posted < a->r) return;
    if (s->o.comm_off || a->r == 1) {
        for (int i = 0; i < a->r; i++) member_mark(s, inst, i, s->now, 1);
        return;
    }
    const sim_ring *g = &s->ring[op->stage];
    for (int i = 0; i < a->r; i++) {
        double P = s->sc->ops[s->ar_op[a->member_off + i]].bytes, G = g->gather;
        /* grouped so that G = P gives the bits of 2 (k - 1) P / k + ... */
        s->w[sim_ar_worker(s, a, i)].sent += ((g->k - 1) * (P / g->k) + (g->k - 1) * (G / g->k)) +
                                             ((g->n - 1) * (P / g->k / g->n) + (g->n - 1) * (G / g->k / g->n));
    }
    for (int i = 0; i < a->r; i++) pump(s, inst, i);
}
