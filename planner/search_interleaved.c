/* search_interleaved.c - the interleaved 1F1B plans of a search
 * (docs/planner.md, "Interleaved plans"): for each replica count, pipeline
 * depth and chunk count, the chain view split into chunks (interleave.c),
 * the plan the split makes, a bound that spares most of them their replay,
 * and the ranking of the rest beside every other candidate (search.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "core/schedule.h"
#include "cost.h"
#include "instance.h"
#include "predict.h"

/* The interleaved plan on the first p x r positions of the order with
 * I->chunks chunks each: chunk k (layers cut[k] .. cut[k + 1] - 1 of the
 * chain view L) on the block of r replicas at positions (k mod p) x r.
 * Fills pl (stages owned, model and cluster shallow) and ev; a device's
 * memory adds up its chunks' weights and buffers, and their stashes as
 * Megatron-LM's order holds them (plan_chunks_mem).  The search calls it
 * with each replica count it tries, planner/layout.c with a layout's d. */
void search_interleaved_plan(search_ctx *c, const plan_inst *I, const plan_lattice *L, int p, int r,
                             const int *cut, plan *pl, plan_eval *ev)
{
    const plan_request *rq = c->rq;
    int n = p * I->chunks;
    memset(pl, 0, sizeof *pl);
    pl->schedule = SCHED_INTERLEAVED;
    pl->chunks = I->chunks;
    pl->optimizer = rq->optimizer;
    pl->precision = plan_prec_resolve(rq->precision, model_dtype_bytes(rq->model->dtype));
    pl->zero = rq->zero;
    pl->framework = rq->framework; /* the ring's bytes follow it (plan_grad_reduce_bytes) */
    pl->grad_reduce = rq->grad_reduce;
    pl->comm_off = !rq->comm;
    pl->batch = rq->batch;
    pl->n_micro = I->m;
    pl->microbatch = rq->batch / I->m;
    pl->n_stages = n;
    pl->stages = cl_calloc((size_t)n, sizeof *pl->stages);
    pl->model = *rq->model;
    pl->cluster = *rq->cluster;
    *ev = (plan_eval){.valid = 1, .feasible = 1, .headroom_bytes = HUGE_VAL, .devices = p * r};
    double *busy = cl_calloc((size_t)p, sizeof(double)), *fixed = cl_calloc((size_t)p, sizeof(double));
    /* stash[q v + c]: chunk c of position q */
    double *stash = cl_calloc((size_t)n, sizeof(double)), *cap = cl_malloc((size_t)p * sizeof(double));
    for (int k = 0; k < n; k++) {
        plan_stage *st = &pl->stages[k];
        int a = cut[k], b = cut[k + 1], q = k % p, at = q * r;
        double spd;
        st->first = a;
        st->last = b - 1;
        st->n_layers = b - a;
        st->layers = cl_malloc((size_t)(b - a) * sizeof(int));
        for (int i = a; i < b; i++) st->layers[i - a] = i;
        st->n_replicas = r;
        st->devices = cl_malloc((size_t)r * sizeof(int));
        for (int j = 0; j < r; j++) st->devices[j] = I->dev[at + j];
        plan_block_least(I, at, r, &spd, &cap[q]);
        st->fwd_s = (L->fwd[b] - L->fwd[a]) / spd;
        st->bwd_in_s = (L->bwd_in[b] - L->bwd_in[a]) / spd;
        st->bwd_w_s = (L->bwd_w[b] - L->bwd_w[a]) / spd;
        st->update_s = instance_stage_update_s(rq, I, st, spd);
        st->act_out_bytes = k + 1 < n ? L->cut[b] : 0;
        st->stash_bytes = L->stash[b] - L->stash[a];
        st->param_bytes = L->params[b] - L->params[a];
        st->compute_s = plan_stage_time(I, L->work[b] - L->work[a], r, spd, 0);
        if (r > 1) {
            int level = I->node[at] == I->node[at + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
            st->comm_s = plan_allreduce_s(I, st->param_bytes, r, level);
            ev->comm_s += st->comm_s;
        }
        if (k + 1 < n) {
            double bnd = plan_boundary_s(I, L->cut[b], plan_link_level(I, at, r, ((k + 1) % p) * r, r));
            st->comm_s += bnd;
            ev->bottleneck_s = fmax(ev->bottleneck_s, bnd);
            ev->comm_s += bnd;
        }
        busy[q] += st->compute_s;
        fixed[q] += plan_mem_weights(I, st->param_bytes, r) + plan_mem_io(L->cut[a], L->cut[b]);
        stash[q * I->chunks + k / p] = st->stash_bytes;
    }
    for (int q = 0; q < p; q++) {
        ev->bottleneck_s = fmax(ev->bottleneck_s, busy[q]);
        double mem = plan_chunks_mem(I, fixed[q], stash + q * I->chunks, q, p, r);
        for (int k = q; k < n; k += p) pl->stages[k].mem_bytes = mem;
        double h = cap[q] - mem;
        if (h < ev->headroom_bytes) {
            ev->headroom_bytes = h;
            ev->worst_stage = q;
            ev->worst_need_bytes = mem;
            ev->worst_cap_bytes = cap[q];
        }
        if (mem > cap[q]) ev->feasible = 0;
    }
    free(busy);
    free(fixed);
    free(stash);
    free(cap);
}

/* Rank an interleaved plan (stages owned) by the simulator, as every
 * other candidate (the closed form stays for plans too large to replay);
 * one that does not fit may become the least bad, for the message.
 * Returns its predicted iteration, NAN when it has none. */
static double interleaved_rank(search_ctx *c, search_best *B, plan *pl, const plan_eval *ev)
{
    plan_pred pr;
    plan_timing tm;
    cl_err pe = {0};
    plan_predict_opts po = {.comm = c->rq->comm};
    if (ev->feasible && plan_predict(pl, &po, &pr, &tm, &pe) == CL_OK && plan_predict_sim(pl, &pr) == CL_OK) {
        search_keep(c, B, pl, &pr, &tm, ev, "chunk split", NAN, NAN);
        return pr.iteration_s;
    } else if (!ev->feasible && (!B->have_bad || ev->worst_need_bytes - ev->worst_cap_bytes <
                                                    B->bad_ev.worst_need_bytes - B->bad_ev.worst_cap_bytes)) {
        search_take_bad(B, pl, ev);
    } else {
        instance_free_stages(pl);
    }
    return NAN;
}

void search_interleaved_note(const plan_request *rq, plan_result *res)
{
    search_note(res, "interleaved plans split the layers so that the slowest chunk is as short as it can be, over each replica count%s; "
                     "a heuristic, not the exact search (communication, memory and the devices' sums are not optimised)",
                rq->chunks > 0 ? " and pipeline depth"
                               : ", pipeline depth and chunk count (whole layers a chunk, while the time falls)");
}

/* A bound no replay of an interleaved plan beats (the search replays
 * every candidate that it does not rule out: the closed form a plan too
 * large to replay keeps is priced by its busiest device and its slowest
 * ring, so there the work and the ring alone).  Each replica of position q
 * runs m / r microbatches of its chunks' work at its block's slowest
 * speed.  Every op of its chunks (k >= q) follows the forwards of chunks
 * 0 .. q - 1 of its microbatch and precedes their input gradients, one
 * after the other on positions 0 .. q - 1: q runs nothing before the first
 * forward has passed them (the pipeline's fill), and after its last op the
 * input gradients still have them to pass (its drain), beside the
 * all-reduce of the chunk that op belonged to (the least of its chunks';
 * in a replay the v chunks' rings on the same device pairs split their
 * bandwidth evenly, sim/link.c).  And the transfers between two devices go
 * one at a time in order (sim/link.c), at most at their link's bandwidth:
 * each replica pair of positions a, b carries m / r activations and
 * gradients of every chunk boundary between them (the latencies, the
 * weight gradients and updates after a device's last op only add). */
static double interleaved_least(const plan_inst *I, const plan_lattice *L, int p, int r, const double *speed,
                                const int *cut, int replayed)
{
    int n = p * I->chunks, share = replayed ? I->chunks : 1;
    double lb = 0, fill = 0, drain = 0;
    for (int q = 0; q < p; q++) {
        double w = 0, ar = HUGE_VAL;
        for (int k = q; k < n; k += p) {
            w += L->work[cut[k + 1]] - L->work[cut[k]];
            ar = fmin(ar, plan_allreduce_least(I, share * (L->params[cut[k + 1]] - L->params[cut[k]]), r));
        }
        double busy = (double)(I->m / r) * w / speed[q];
        lb = fmax(lb, replayed ? fill + busy + fmax(drain, ar) : busy + ar);
        fill += (L->fwd[cut[q + 1]] - L->fwd[cut[q]]) / speed[q];
        drain += (L->bwd_in[cut[q + 1]] - L->bwd_in[cut[q]]) / speed[q];
    }
    if (!replayed || !I->comm || p < 2) return lb * (1 - PLAN_BOUND_SLACK);
    /* bytes[2 a]: position a to a + 1, bytes[2 a + 1]: a to a - 1 (mod p;
     * the same pair of devices when p = 2) */
    double *bytes = cl_calloc((size_t)2 * p, sizeof(double));
    for (int k = 0; k + 1 < n; k++) {
        int a = k % p, b = (k + 1) % p;
        double x = L->cut[cut[k + 1]];
        bytes[2 * a] += x;                    /* the activation */
        bytes[2 * b + (p == 2 ? 0 : 1)] += x; /* its gradient */
    }
    for (int a = 0; a < p; a++)
        for (int dir = 0; dir < 2; dir++) {
            int b = dir ? (a + p - 1) % p : (a + 1) % p;
            double bw = HUGE_VAL; /* the slowest pair's link is the longest busy */
            for (int j = 0; j < r; j++)
                bw = fmin(bw, I->link[I->node[a * r + j] == I->node[b * r + j] ? CLUSTER_INTRA : CLUSTER_INTER].bw_Bps);
            if (bw > 0) lb = fmax(lb, (double)(I->m / r) * bytes[2 * a + dir] / bw);
        }
    free(bytes);
    return lb * (1 - PLAN_BOUND_SLACK);
}

/* The chunk splits of one microbatch count.  plan_chunks_minmax depends
 * on the positions' speeds, p and v alone, not on the replica count: where
 * every position has one speed (as on equal devices) the split of (p, v)
 * is made once and read again for every r with that speed. */
typedef struct splits {
    int p_max;
    int ***cut;     /* [p][v]: the split (NULL: not made; cut[0] = -1:
                       there is none) */
    int *n_v;       /* [p]: entries of cut[p] */
    double **spd;   /* [p][v]: the speed of every position it was made for */
    int *tmp;       /* a split of positions with unequal speeds */
} splits;

static void splits_free(splits *sp)
{
    for (int p = 0; sp->cut && p <= sp->p_max; p++) {
        for (int v = 0; v < sp->n_v[p]; v++) free(sp->cut[p][v]);
        free(sp->cut[p]);
        free(sp->spd[p]);
    }
    free(sp->cut);
    free(sp->spd);
    free(sp->n_v);
    free(sp->tmp);
}

/* The split of the chain view into p x v chunks over the positions'
 * speeds, or NULL when there is none; owned by sp. */
static int *split_of(splits *sp, const plan_inst *I, const plan_lattice *L, int p, int v, const double *speed)
{
    int n = p * v, one = 1;
    for (int q = 1; q < p; q++) one &= speed[q] == speed[0];
    plan_inst J = *I; /* the split sees a position's slowest device */
    J.speed = (double *)speed;
    if (!one) {
        free(sp->tmp);
        sp->tmp = cl_malloc((size_t)(n + 1) * sizeof(int));
        return plan_chunks_minmax(&J, L, p, n, sp->tmp) ? sp->tmp : NULL;
    }
    if (!sp->cut) {
        sp->cut = cl_calloc((size_t)sp->p_max + 1, sizeof *sp->cut);
        sp->spd = cl_calloc((size_t)sp->p_max + 1, sizeof *sp->spd);
        sp->n_v = cl_calloc((size_t)sp->p_max + 1, sizeof *sp->n_v);
    }
    if (v >= sp->n_v[p]) {
        int nv = v + 1 > 2 * sp->n_v[p] ? v + 1 : 2 * sp->n_v[p];
        sp->cut[p] = cl_realloc(sp->cut[p], (size_t)nv * sizeof **sp->cut);
        sp->spd[p] = cl_realloc(sp->spd[p], (size_t)nv * sizeof **sp->spd);
        for (int k = sp->n_v[p]; k < nv; k++) sp->cut[p][k] = NULL;
        sp->n_v[p] = nv;
    }
    int **at = &sp->cut[p][v];
    if (*at && sp->spd[p][v] != speed[0]) {
        free(*at);
        *at = NULL;
    }
    if (!*at) {
        *at = cl_malloc((size_t)(n + 1) * sizeof(int));
        if (!plan_chunks_minmax(&J, L, p, n, *at)) (*at)[0] = -1;
        sp->spd[p][v] = speed[0];
    }
    return (*at)[0] < 0 ? NULL : *at;
}

/* Interleaved 1F1B: for each replica count r (one data-parallel degree, as
 * Megatron-LM and torch replicate whole pipelines; r dividing m) and each
 * count p of positions (blocks of r devices inside a node or of whole
 * nodes; each replica's m / r microbatches a multiple of p, as the
 * schedule needs) and each chunk count v (rq->chunks, or the counts of
 * whole layers a chunk, below) split the chain view into p x v chunks
 * with plan_chunks_minmax over the blocks' speeds and rank the plan they
 * make, unless its least iteration loses to the best plan already.  asked: the
 * request named the schedule (else auto, pipelines of two or more
 * positions only). */
void search_interleaved(search_ctx *c, search_best *B, const int *micro, int n_micro, int asked)
{
    const plan_request *rq = c->rq;
    int v_ask = rq->chunks, v_min = v_ask > 0 ? v_ask : 2, N = c->n_dev;
    double *speed = cl_malloc((size_t)N * sizeof(double));
    for (int mi = n_micro - 1; mi >= 0; mi--) {
        int m = micro[mi];
        plan_inst I;
        instance_build(c, m, &I);
        I.sched = SCHED_INTERLEAVED;
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        splits sp = {.p_max = N};
        int rmax = rq->replication ? (m < N ? m : N) : 1;
        for (int r = rmax; r >= 1; r--) {
            if (m % r) continue;
            /* asked for, one position too; in auto, pipelines only: one
             * position of v chunks is data parallelism whose chunks'
             * all-reduces overlap the backward (gradient buckets), which
             * the other kinds' replicas would do too if it were modelled */
            for (int p = asked ? 1 : 2; p * r <= N && p * v_min <= I.n && !cl_budget_over(); p++) {
                if ((m / r) % p != 0 || (rq->stages > 0 && p != rq->stages)) continue;
                int ok = 1;
                for (int q = 0; q < p && ok; q++) {
                    ok = plan_block_ok(&I, q * r, r);
                    speed[q] = HUGE_VAL;
                    for (int j = 0; j < r; j++) speed[q] = fmin(speed[q], I.speed[q * r + j]);
                }
                if (!ok) continue;
                /* no split onto these positions beats the work spread
                 * over their speeds (interleaved_least, any chunk count) */
                double spd = 0;
                for (int q = 0; q < p; q++) spd += speed[q];
                if (B->have && !c->no_prune &&
                    (double)(m / r) * L.work[L.n_layers] / spd * (1 - PLAN_BOUND_SLACK) > B->pred.iteration_s)
                    continue;
                /* the chunk counts: the one asked for, else those of k
                 * layers a chunk, k = I.n / 2p .. 1 (v = I.n / (p k),
                 * Megatron-LM's --num-layers-per-virtual-pipeline-stage;
                 * the counts between split the layers unevenly), fewest
                 * chunks first, while the replayed iteration falls: more
                 * chunks shorten the pipeline's fill and drain but add
                 * transfers (a heuristic stop, as the split is one).  The
                 * stop reads only replays the bound does not rule out, so
                 * the search stops where the unpruned one (c->no_prune,
                 * tests) does and picks its plan. */
                double last = HUGE_VAL;
                for (int k = I.n / (2 * p), v = 0; !cl_budget_over();) {
                    if (v_ask) {
                        if (v == v_ask) break;
                        v = v_ask;
                    } else {
                        while (k >= 1 && I.n / (p * k) <= v) k--;
                        if (k < 1) break;
                        v = I.n / (p * k);
                    }
                    if (p * v > I.n) break;
                    I.chunks = v;
                    int n = p * v, *cut = split_of(&sp, &I, &L, p, v, speed);
                    ok = cut != NULL;
                    for (int j = 1; j < n && ok; j++) ok = cut[j] <= c->cut_max;
                    if (!ok) continue;
                    int out = B->have && interleaved_least(&I, &L, p, r, speed, cut,
                                                           plan_predict_replays(SCHED_INTERLEAVED, n, v, m, r)) >
                                             B->pred.iteration_s;
                    if (out && !c->no_prune) continue;
                    plan pl;
                    plan_eval ev;
                    search_interleaved_plan(c, &I, &L, p, r, cut, &pl, &ev);
                    double t = interleaved_rank(c, B, &pl, &ev);
                    if (out || t != t) continue;
                    if (t > last) break;
                    last = t;
                }
            }
        }
        splits_free(&sp);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    free(speed);
    if (asked) search_interleaved_note(rq, c->res);
}
