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

int tp_derive(prof *pf, const model *md, const model *mr, const tfm_rank_opts *o, int rs, prof_attn a,
              const cluster_devtype *t, cluster_link intra, const double *pts, int np, int *shaped,
              cl_err *e)
{
    int rc = prof_derive(pf, mr, t, pts, np, e);
    if (rc) return rc;
    *shaped = md->has_tfm && prof_tfm_priced(t);
    if (*shaped) prof_tfm_times(pf, &md->tfm, model_elem_bytes(md), o, a, t);
    if (rs) tp_add_comm(pf, md, o, intra);
    return CL_OK;
}
