/* tensor.c - the per-rank question of tensor parallelism (see tensor.h). */
#include <stdlib.h>
#include <string.h>

#include "planner/tensor.h"

int tp_cluster(cluster *out, const cluster *c, int t, const char *file, cl_err *e)
{
    memset(out, 0, sizeof *out);
    int *count = cl_calloc((size_t)(c->n_nodes > 0 ? c->n_nodes : 1), sizeof *count);
    for (int i = 0; i < c->n_devices; i++) count[c->devices[i].node]++;
    for (int n = 0; n < c->n_nodes; n++)
        if (count[n] % t) {
            int have = count[n];
            free(count);
            return cl_fail(e, CL_EINPUT,
                           "%s: --tensor %d does not divide the %d devices of node %d (hint: a "
                           "tensor-parallel group stays inside a node; pick a divisor of the "
                           "devices per node)",
                           file, t, have, n);
        }
    free(count);
    cluster_copy(out, c);
    int k = 0, *seen = cl_calloc((size_t)(c->n_nodes > 0 ? c->n_nodes : 1), sizeof *seen);
    for (int i = 0; i < c->n_devices; i++) {
        int n = c->devices[i].node, first = seen[n]++ % t == 0;
        /* a group is t consecutive devices of one node (devices are listed
         * node by node, so i's group started at most t - 1 entries back) */
        if (!first) {
            if (c->devices[i].type != out->devices[k - 1].type) {
                free(seen);
                cluster_free(out);
                return cl_fail(e, CL_EINPUT,
                               "%s: tensor-parallel group of device %d mixes device types (hint: "
                               "the t devices of a group must be of one type)",
                               file, i);
            }
            continue;
        }
        out->devices[k++] = c->devices[i];
    }
    free(seen);
    out->n_devices = k;
    return CL_OK;
}

void tp_add_comm(prof *pf, const model *full, const tfm_rank_opts *o, cluster_link intra)
{
    const tfm_desc *d = &full->tfm;
    for (int i = 0; i < pf->n_layers; i++) {
        prof_layer *l = &pf->layers[i];
        tfm_rank_comm c = tfm_rank_layer_comm(d, full->dtype, o, i);
        for (int k = 0; k < l->n_points; k++) {
            l->fwd_s[k] += tfm_rank_coll_s(&c.fwd, o->t, l->batch[k], intra.bw_Bps, intra.latency_s);
            l->bwd_in_s[k] += tfm_rank_coll_s(&c.bwd, o->t, l->batch[k], intra.bw_Bps, intra.latency_s);
        }
    }
}

void tp_add_counted(prof *pf, int t, cluster_link intra)
{
    for (int i = 0; pf->coll && i < pf->n_layers; i++) {
        prof_layer *l = &pf->layers[i];
        const prof_coll *c = pf->coll + (size_t)i * PROF_PASSES;
        for (int k = 0; k < l->n_points; k++) {
            const double b = l->batch[k];
            l->fwd_s[k] += prof_coll_s(&c[PROF_F], t, b, intra.bw_Bps, intra.latency_s);
            l->bwd_in_s[k] += prof_coll_s(&c[PROF_B], t, b, intra.bw_Bps, intra.latency_s);
            l->bwd_w_s[k] += prof_coll_s(&c[PROF_W], t, b, intra.bw_Bps, intra.latency_s);
        }
    }
}

/* The ring's exposed seconds over `steps` steps: each step's transfer of
 * `bytes` runs beside a c-th of the attention core's `core_s` (Transformer
 * Engine posts the next block's send and receive before computing on the
 * current one), so a step lasts max(compute, transfer), and the last
 * step's compute has nothing to wait for: core_s + steps x max(0,
 * transfer - core_s / c) in all; this returns the part beyond core_s. */
static double ring_exposed(int steps, double bytes, double core_s, cluster_link l)
{
    double x = l.latency_s + bytes / l.bw_Bps, step = core_s / (steps + 1);
    return x > step ? steps * (x - step) : 0;
}

void cp_add_ring(prof *pf, const model *full, const tfm_rank_opts *o, prof_attn a, const cluster_devtype *t,
                 int shaped, cluster_link ring)
{
    const tfm_desc *d = &full->tfm;
    tfm_rank_ring r = tfm_rank_kv_ring(d, full->dtype, o);
    if (!r.steps) return;
    /* without a kernel model the layer's time is its FLOPs over one rate,
     * so the core's share of the time is its share of the FLOPs: forward
     * score + attn_v of the total, input gradient twice that of the
     * forward again (2 x total less the weight gradients) plus what
     * recomputation runs */
    tfm_block_flops f = tfm_block_fwd_flops(d, 1, o->t);
    double cf = f.score + f.attn_v;
    double again = o->recomp == TFM_RECOMP_FULL ? f.total : o->recomp == TFM_RECOMP_SELECTIVE ? cf : 0;
    double share_f = cf / f.total, share_b = 2 * cf / (f.total + cf + again);
    for (int i = 1; i <= d->layers && i < pf->n_layers; i++) {
        prof_layer *l = &pf->layers[i];
        for (int k = 0; k < l->n_points; k++) {
            double b = l->batch[k], core_f, core_b;
            if (shaped) {
                prof_tfm_pass c = prof_tfm_core_s(d, model_elem_bytes(full), o, a, t, b);
                core_f = c.fwd_s, core_b = c.bwd_in_s;
            } else {
                core_f = share_f * l->fwd_s[k], core_b = share_b * l->bwd_in_s[k];
            }
            double xf = ring_exposed(r.steps, b * r.fwd_bytes, core_f, ring);
            l->fwd_s[k] += xf;
            /* recomputation runs the forward's ring again in the backward */
            l->bwd_in_s[k] += ring_exposed(r.steps, b * r.bwd_bytes, core_b, ring) + (o->recomp ? xf : 0);
        }
    }
}

int tp_derive(prof *pf, const model *md, const model *mr, const tfm_rank_opts *o, int rs, prof_attn a,
              const cluster_devtype *t, cluster_link intra, cluster_link ring, const double *pts, int np,
              int *shaped, cl_err *e)
{
    int rc = prof_derive(pf, mr, t, pts, np, e);
    if (rc) return rc;
    *shaped = md->has_tfm && prof_tfm_priced(t);
    if (*shaped) prof_tfm_times(pf, &md->tfm, model_elem_bytes(md), o, a, t);
    /* the ring before the collectives: without a kernel model it reads
     * the core's share of the compute time alone */
    if (rs && tfm_rank_cp(o) > 1) cp_add_ring(pf, md, o, a, t, *shaped, ring);
    if (rs) tp_add_comm(pf, md, o, intra);
    return CL_OK;
}
