/* instance.c - the search's instances and plans (instance.h). */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"

/* ------------------------------------------------------------ instance -- */

/* One optimiser step over a stage's parameters on a device of relative
 * speed spd: the profile's per-layer update_s (measured on the reference
 * device, the same at any batch size; 0 when the profile has none), scaled
 * like compute.  A derived profile prices every kernel from the device's
 * peak and memory bandwidth; the optimiser step, element-wise over the
 * model state, is priced the same way: its traffic over the bandwidth. */
double instance_stage_update_s(const plan_request *rq, const plan_inst *I, const plan_stage *st, double spd)
{
    const prof *pf = rq->prof;
    double u = 0, bytes = 0;
    for (int k = 0; k < st->n_layers; k++) {
        u += pf->layers[st->layers[k]].update_s;
        bytes += pf->layers[st->layers[k]].param_bytes;
    }
    if (pf->source == PROF_DERIVED && rq->ref_type && rq->ref_type->mem_bw_Bps > 0)
        u += bytes * plan_update_traffic(&I->state) / rq->ref_type->mem_bw_Bps;
    return u / spd;
}

double instance_work_s(const plan_request *rq, int m)
{
    double b = (double)rq->batch / m, w = 0;
    for (int i = 0; i < rq->prof->n_layers; i++) {
        const prof_layer *pl = &rq->prof->layers[i];
        w += prof_fwd_s(pl, b) + prof_bwd_in_s(pl, b) + prof_bwd_w_s(pl, b);
    }
    return m * w;
}

double plan_search_bound(const plan_request *rq)
{
    /* the devices' speeds as the search takes them; none it can take (a
     * mixed cluster without a reference type, which plan_search refuses):
     * no bound */
    search_ctx c = {.rq = rq};
    cl_err e = {0};
    if (search_speeds(&c, &e)) return 0;
    double spd = 0, w = HUGE_VAL;
    for (int d = 0; d < rq->cluster->n_devices; d++) spd += c.speed[d];
    free(c.speed);
    for (int m = 1; m <= rq->batch; m++)
        if (rq->batch % m == 0 && (!rq->microbatches || m == rq->microbatches))
            w = fmin(w, instance_work_s(rq, m));
    return w / spd;
}

/* Build the instance for `m` microbatches over the devices in c->order. */
void instance_build(const search_ctx *c, int m, plan_inst *I)
{
    const model *md = c->rq->model;
    const prof *pf = c->rq->prof;
    const cluster *cl = c->view;
    int n = md->n_layers, n_in = 0;
    for (int i = 0; i < n; i++) n_in += md->layers[i].n_inputs;
    plan_inst_alloc(I, n, n_in, cl->n_devices);
    double b = (double)c->rq->batch / m;
    int at = 0;
    for (int i = 0; i < n; i++) {
        const prof_layer *pl = &pf->layers[i];
        I->fwd_s[i] = prof_fwd_s(pl, b);
        I->bwd_in_s[i] = prof_bwd_in_s(pl, b);
        I->bwd_w_s[i] = prof_bwd_w_s(pl, b);
        I->out_bytes[i] = pl->act_bytes * b;
        I->stash_bytes[i] = pl->stash_bytes * b;
        I->param_bytes[i] = pl->param_bytes;
        I->in_off[i] = at;
        for (int k = 0; k < md->layers[i].n_inputs; k++) I->in_idx[at++] = md->layers[i].inputs[k];
    }
    I->in_off[n] = at;
    I->input_bytes = (double)model_shape_elems(&md->input) * model_dtype_bytes(md->dtype) * b;
    for (int q = 0; q < cl->n_devices; q++) {
        int d = c->order[q];
        I->dev[q] = d;
        I->speed[q] = c->speed[d];
        I->mem_cap[q] = (double)cluster_usable_bytes(&cl->types[cl->devices[d].type]);
        I->node[q] = cl->devices[d].node;
    }
    int *per = cl_calloc((size_t)cl->n_nodes, sizeof *per); /* devices per node */
    for (int d = 0; d < cl->n_devices; d++)
        if (++per[cl->devices[d].node] > I->node_max) I->node_max = per[cl->devices[d].node];
    free(per);
    I->link[CLUSTER_INTRA] = cl->links[CLUSTER_INTRA];
    I->link[CLUSTER_INTER] = cl->links[CLUSTER_INTER].bw_Bps > 0 ? cl->links[CLUSTER_INTER]
                                                                 : cl->links[CLUSTER_INTRA];
    I->m = m;
    int reduce = plan_grad_reduce_resolve(c->rq->grad_reduce, md->dtype, c->rq->precision, c->rq->framework);
    I->state = plan_state_factors(model_dtype_bytes(md->dtype),
                                  plan_prec_resolve(c->rq->precision, model_dtype_bytes(md->dtype)),
                                  c->rq->optimizer, c->rq->zero,
                                  plan_grad_keep_bytes(md->dtype, c->rq->precision, c->rq->framework, reduce));
    for (int z = 0; z < 2; z++) {
        plan_ar_f f = plan_ar_factors(md->dtype, reduce, z, c->rq->framework);
        I->ar_scale[z] = (f.reduce + f.gather) / 2;
    }
    I->zero = c->rq->zero;
    I->comm = c->rq->comm;
    I->max_replicas = c->rq->replication ? cl->n_devices : 1;
    if (c->rep > 0) I->max_replicas = I->rep_fixed = c->rep;
    I->cut_max = c->cut_max;
    I->chunks = 1;
}

/* --------------------------------------------------------------- plans -- */

/* Turn a layout into plan stages; model and cluster are shared (shallow),
 * so free with instance_free_stages only. */
void instance_layout_plan(const search_ctx *c, const plan_inst *I, const plan_lattice *L,
                          const plan_layout *y, plan *pl)
{
    memset(pl, 0, sizeof *pl);
    pl->schedule = I->sched;
    pl->chunks = 1;
    pl->optimizer = c->rq->optimizer;
    pl->precision = plan_prec_resolve(c->rq->precision, model_dtype_bytes(c->rq->model->dtype));
    pl->zero = c->rq->zero;
    pl->framework = c->rq->framework; /* the ring's bytes follow it (plan_grad_reduce_bytes) */
    pl->grad_reduce = c->rq->grad_reduce;
    pl->comm_off = !c->rq->comm;
    pl->batch = c->rq->batch;
    pl->n_micro = I->m;
    pl->microbatch = c->rq->batch / I->m;
    pl->n_stages = y->p;
    pl->stages = cl_calloc((size_t)y->p, sizeof *pl->stages);
    pl->model = *c->rq->model;
    pl->cluster = *c->rq->cluster;
    int total = 0, depth = 0;
    for (int s = 0; s < y->p; s++) total += y->r[s];
    for (int s = 0; s < y->p; s++) depth += y->r[s];
    for (int s = 0; s < y->p; s++) {
        plan_stage *st = &pl->stages[s];
        int lo = y->cut[s], hi = y->cut[s + 1], pos = y->pos[s], r = y->r[s];
        int cnt = L->size[hi] - L->size[lo];
        st->layers = cl_malloc((size_t)cnt * sizeof(int));
        for (int i = 0; i < I->n; i++)
            if (plan_lattice_has(L, hi, i) && !plan_lattice_has(L, lo, i)) st->layers[st->n_layers++] = i;
        assert(st->n_layers == cnt);
        st->first = st->layers[0];
        st->last = st->layers[cnt - 1];
        st->n_replicas = r;
        st->devices = cl_malloc((size_t)r * sizeof(int));
        double spd, cap;
        for (int k = 0; k < r; k++) st->devices[k] = I->dev[pos + k];
        plan_block_least(I, pos, r, &spd, &cap);
        st->fwd_s = (L->fwd[hi] - L->fwd[lo]) / spd;
        st->bwd_in_s = (L->bwd_in[hi] - L->bwd_in[lo]) / spd;
        st->bwd_w_s = (L->bwd_w[hi] - L->bwd_w[lo]) / spd;
        st->update_s = instance_stage_update_s(c->rq, I, st, spd);
        st->act_out_bytes = s + 1 < y->p ? L->cut[hi] : 0;
        st->stash_bytes = L->stash[hi] - L->stash[lo];
        st->param_bytes = L->params[hi] - L->params[lo];
        int level = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
        double ar = plan_allreduce_s(I, st->param_bytes, r, level);
        st->compute_s = plan_stage_time(I, L->work[hi] - L->work[lo], r, spd, 0);
        double bnd = 0;
        if (s + 1 < y->p) {
            int lv = plan_link_level(I, pos, r, y->pos[s + 1], y->r[s + 1]);
            bnd = plan_boundary_s(I, L->cut[hi], lv);
        }
        st->comm_s = ar + bnd;
        st->mem_bytes = plan_stage_mem(I, st->param_bytes, st->stash_bytes, L->cut[lo], L->cut[hi],
                                       depth, r, total);
        depth -= r;
    }
}

void instance_free_stages(plan *pl)
{
    for (int s = 0; s < pl->n_stages; s++) {
        free(pl->stages[s].layers);
        free(pl->stages[s].devices);
    }
    free(pl->stages);
    pl->stages = NULL;
    pl->n_stages = 0;
}

/* ------------------------------------------------------------ choices -- */

int instance_micro_candidates(const plan_request *rq, int *out)
{
    if (rq->microbatches > 0) {
        out[0] = rq->microbatches;
        return 1;
    }
    int all[4096], n = 0;
    for (int d = 1; d <= rq->batch && n < 4096; d++)
        if (rq->batch % d == 0) all[n++] = d;
    if (n <= INSTANCE_MAX_MICRO) {
        memcpy(out, all, (size_t)n * sizeof(int));
        return n;
    }
    /* thin geometrically, keeping 1 and the largest */
    int k = 0;
    for (int i = 0; i < INSTANCE_MAX_MICRO; i++) {
        int at = (int)lround((double)i * (n - 1) / (INSTANCE_MAX_MICRO - 1));
        double x = log((double)all[n - 1]) * i / (INSTANCE_MAX_MICRO - 1);
        int want = (int)lround(exp(x)), best = at;
        for (int j = 0; j < n; j++)
            if (fabs(log((double)all[j]) - log((double)want)) < fabs(log((double)all[best]) - log((double)want)))
                best = j;
        if (k == 0 || out[k - 1] != all[best]) out[k++] = all[best];
    }
    return k;
}

static int cmp_speed_ctx_asc(const void *a, const void *b, void *cx)
{
    const double *sp = cx;
    double x = sp[*(const int *)a], y = sp[*(const int *)b];
    if (x != y) return x < y ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* Device orders to try: the cluster's, and for mixed clusters the nodes
 * sorted by their slowest device, both ways (unused devices end up first). */
int instance_device_orders(const search_ctx *c, int **out)
{
    const cluster *cl = c->view;
    int N = cl->n_devices, mixed = 0;
    for (int d = 1; d < N; d++) mixed |= c->speed[d] != c->speed[0];
    int k = 0;
    /* cluster order, grouped by node: a counting sort by node, stable, so
     * O(nodes + devices) (a scan of every device per node was quadratic on
     * clusters of one device per node) */
    int *start = cl_calloc((size_t)cl->n_nodes + 1, sizeof(int));
    for (int d = 0; d < N; d++) start[cl->devices[d].node + 1]++;
    for (int nd = 0; nd < cl->n_nodes; nd++) start[nd + 1] += start[nd];
    int *grouped = cl_malloc((size_t)N * sizeof(int)), *fill = cl_malloc((size_t)cl->n_nodes * sizeof(int));
    memcpy(fill, start, (size_t)cl->n_nodes * sizeof(int));
    for (int d = 0; d < N; d++) grouped[fill[cl->devices[d].node]++] = d;
    free(fill);
    out[k++] = grouped;
    if (!mixed) {
        free(start);
        return k;
    }
    double *nspeed = cl_malloc((size_t)cl->n_nodes * sizeof(double));
    for (int nd = 0; nd < cl->n_nodes; nd++) nspeed[nd] = HUGE_VAL;
    for (int d = 0; d < N; d++)
        nspeed[cl->devices[d].node] = fmin(nspeed[cl->devices[d].node], c->speed[d]);
    int *nodes = cl_malloc((size_t)cl->n_nodes * sizeof(int));
    for (int nd = 0; nd < cl->n_nodes; nd++) nodes[nd] = nd;
    qsort_r(nodes, (size_t)cl->n_nodes, sizeof(int), cmp_speed_ctx_asc, nspeed);
    for (int dir = 0; dir < 2; dir++) {
        int *o = cl_malloc((size_t)N * sizeof(int));
        int at = 0;
        for (int i = 0; i < cl->n_nodes; i++) {
            int nd = nodes[dir == 0 ? i : cl->n_nodes - 1 - i];
            /* inside a node, slower devices first too */
            int from = at;
            for (int j = start[nd]; j < start[nd + 1]; j++) o[at++] = grouped[j];
            qsort_r(o + from, (size_t)(at - from), sizeof(int), cmp_speed_ctx_asc, c->speed);
            if (dir == 1) /* fastest first */
                for (int a = from, b = at - 1; a < b; a++, b--) {
                    int t = o[a];
                    o[a] = o[b];
                    o[b] = t;
                }
        }
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = memcmp(o, out[j], (size_t)N * sizeof(int)) == 0;
        if (dup) free(o);
        else out[k++] = o;
    }
    free(nspeed);
    free(nodes);
    free(start);
    return k;
}


/* ---------------------------------------------------------- cost range -- */

/* The slowest a candidate can be: every layer on the slowest device, every
 * microbatch, every byte over one link.  Below PLAN_MAX_ITERATION_S every
 * sum the search, the closed form and the simulator form stays finite.
 * And the fastest: the whole model on the fastest device, at least
 * PLAN_MIN_ITERATION_S unless the profile costs nothing at all, so samples
 * per second stay finite. */
int instance_check_costs(const search_ctx *c, const int *micro, int n_micro, cl_err *e)
{
    const plan_request *rq = c->rq;
    const prof *pf = rq->prof;
    const cluster *cl = rq->cluster;
    const char *pname = rq->prof_origin ? rq->prof_origin : "the profile";
    const char *cname = rq->cluster_origin ? rq->cluster_origin : "the cluster";
    /* the link levels that count (as in sim_create): intra always, inter
     * across nodes (a one-node cluster's inter link carries nothing) */
    int used[CLUSTER_LEVELS] = {1, cl->n_nodes > 1};
    /* speeds are ratios of FLOP/s: a product of peak and efficiency that
     * underflows to 0 (or overflows) would make them 0/0 */
    int eb = model_dtype_bytes(rq->model->dtype);
    for (int k = 0; k < cl->n_types; k++) {
        const cluster_devtype *t = &cl->types[k];
        double f = cluster_flops(t, eb);
        if (!(f >= DBL_MIN && f <= DBL_MAX))
            return cl_fail(e, CL_EINPUT, "%s: device type \"%s\": peak %g FLOP/s x efficiency %g = %g FLOP/s, not a usable speed (hint: peak_fp32_flops is FLOP/s, efficiency a fraction in (0, 1])",
                           cname, t->name, eb == 2 && t->peak_fp16_flops > 0 ? t->peak_fp16_flops : t->peak_fp32_flops,
                           t->efficiency, f);
    }
    int slow = 0, fast = 0;
    for (int d = 1; d < c->n_dev; d++) {
        if (!(c->speed[d] >= c->speed[slow])) slow = d;
        if (c->speed[d] > c->speed[fast]) fast = d;
    }
    for (int mi = 0; mi < n_micro; mi++) {
        int m = micro[mi];
        double b = (double)rq->batch / m, total = 0, worst = -1, bytes = 0, params = 0;
        int wl = 0;
        for (int i = 0; i < pf->n_layers; i++) {
            const prof_layer *l = &pf->layers[i];
            double t = prof_fwd_s(l, b) + prof_bwd_in_s(l, b) + prof_bwd_w_s(l, b) + l->update_s;
            if (!(t <= worst)) { worst = t; wl = i; }
            total += m * t;
            bytes += 2.0 * m * l->act_bytes * b;
            params += l->param_bytes;
        }
        if (!(total <= PLAN_MAX_ITERATION_S))
            return cl_fail(e, CL_EINPUT, "%s: layer %d (\"%s\") takes %g s per microbatch of %g samples (forward, both backward passes, update), so one iteration (%d microbatches) takes %g s on the profiled device, more than %g s (hint: %s)",
                           pname, wl, pf->layers[wl].name, worst, b, m, total, PLAN_MAX_ITERATION_S,
                           pf->source == PROF_DERIVED
                               ? "peak_fp32_flops and memory_bw_Bps are per second, efficiency a fraction in (0, 1]"
                               : "profile times are seconds for the whole batch of the point");
        const cluster_devtype *t = &cl->types[cl->devices[slow].type];
        double on_slow = total / c->speed[slow];
        if (!(c->speed[slow] > 0) || !(on_slow <= PLAN_MAX_ITERATION_S))
            return cl_fail(e, CL_EINPUT, "%s: device type \"%s\" (peak_fp32_flops %g, efficiency %g) runs at %g times the speed of the profiled device, so one iteration takes %g s on device \"%s\", more than %g s (hint: peak_fp32_flops is FLOP/s, efficiency a fraction in (0, 1])",
                           cname, t->name, t->peak_fp32_flops, t->efficiency, c->speed[slow], on_slow,
                           cl->devices[slow].id, PLAN_MAX_ITERATION_S);
        const cluster_devtype *ft = &cl->types[cl->devices[fast].type];
        double on_fast = total / c->speed[fast];
        if (total > 0 && !(on_fast >= PLAN_MIN_ITERATION_S)) /* 0 by underflow counts too */
            return cl_fail(e, CL_EINPUT, "%s: one iteration (%d microbatches) takes %g s on the profiled device and %g s on device \"%s\" (type \"%s\", peak_fp32_flops %g, efficiency %g), less than %g s (hint: times are seconds, speeds per second; check the units)",
                           total > 0 && !(total >= PLAN_MIN_ITERATION_S) ? pname : cname, m, total, on_fast,
                           cl->devices[fast].id, ft->name, ft->peak_fp32_flops, ft->efficiency,
                           PLAN_MIN_ITERATION_S);
        if (!rq->comm) continue;
        for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
            const cluster_link *k = &cl->links[lv];
            if (!(k->bw_Bps > 0) || !used[lv]) continue; /* a level no two devices talk over */
            /* every boundary and a ring all-reduce over every device */
            double s = bytes / k->bw_Bps + 2.0 * params / k->bw_Bps +
                       2.0 * (m + c->n_dev) * (double)pf->n_layers * k->latency_s;
            if (!(s <= PLAN_MAX_ITERATION_S))
                return cl_fail(e, CL_EINPUT, "%s: the %s-node link (bandwidth %g B/s, latency %g s) would take up to %g s per iteration to move %g bytes of activations and gradients and all-reduce %g bytes of parameters, more than %g s (hint: bandwidth is bytes per second, latency seconds)",
                               cname, lv == CLUSTER_INTRA ? "intra" : "inter", k->bw_Bps, k->latency_s, s,
                               bytes, params, PLAN_MAX_ITERATION_S);
        }
    }
    return CL_OK;
}
