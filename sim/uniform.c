/* uniform.c - uniform plans built in code, for tests and benchmarks (see
 * sim_uniform_plan in sim.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

int sim_uniform_plan(plan *p, const sim_uniform *u, cl_err *e)
{
    memset(p, 0, sizeof *p);
    int v = u->chunks > 1 ? u->chunks : 1, r = u->replicas > 1 ? u->replicas : 1;
    if (u->stages < 1 || u->micro < 1)
        return cl_fail(e, CL_EINPUT, "uniform plan: %d stages, %d microbatches (hint: both >= 1)",
                       u->stages, u->micro);
    if ((int64_t)u->stages * r > CLUSTER_MAX_DEVICES)
        return cl_fail(e, CL_EINPUT, "uniform plan: %d x %d devices is too many", u->stages, r);
    cluster_devtype t = {.peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)80 << 30,
                         .mem_bw_Bps = 1e12, .efficiency = 1};
    snprintf(t.name, sizeof t.name, "uniform");
    int rc = cluster_uniform(&p->cluster, &t, u->stages * r, u->per_node, u->intra, u->inter, e);
    if (rc) return rc;
    p->schedule = u->schedule;
    p->chunks = v;
    p->optimizer = u->optimizer;
    p->microbatch = 1;
    p->n_micro = u->micro;
    p->batch = u->micro;
    p->n_stages = u->stages * v;
    p->stages = cl_calloc((size_t)p->n_stages, sizeof *p->stages);
    snprintf(p->model.name, sizeof p->model.name, "uniform");
    for (int k = 0; k < p->n_stages; k++) {
        plan_stage *st = &p->stages[k];
        int pos = k % u->stages;
        st->first = st->last = k;
        st->n_replicas = r;
        st->devices = cl_malloc((size_t)r * sizeof *st->devices);
        for (int q = 0; q < r; q++) st->devices[q] = pos * r + q;
        st->fwd_s = u->fwd_s / v;
        st->bwd_in_s = u->bwd_in_s / v;
        st->bwd_w_s = u->bwd_w_s / v;
        st->act_out_bytes = k == p->n_stages - 1 ? 0 : u->act_bytes;
        st->stash_bytes = u->stash_bytes / v;
        st->param_bytes = u->param_bytes / v;
    }
    return CL_OK;
}

void sim_uniform_free(plan *p)
{
    for (int k = 0; k < p->n_stages; k++) {
        free(p->stages[k].layers);
        free(p->stages[k].devices);
    }
    free(p->stages);
    cluster_free(&p->cluster);
    memset(p, 0, sizeof *p);
}
