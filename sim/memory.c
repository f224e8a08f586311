/* memory.c - memory over time per device, and its peak.
 *
 * Components (bytes), matching the planner's cost model (issue 3, "memory per
 * device"; docs/simulator.md, "Memory"), per parameter as the plan's
 * precision keeps them (core/plan.h, plan_state_factors; fp32 below):
 *   weights    sum of param_bytes of the stages on the device, from t = 0
 *              (mixed precision: 16-bit weights);
 *   grads      one gradient buffer in the element size the framework
 *              keeps (plan_grad_keep: fp32, or 16-bit under DeepSpeed's
 *              fp16 engine and Megatron-LM's fp16), divided by the stage's
 *              replicas under ZeRO 2;
 *   optim      optimiser state: 0 (SGD), 1 (momentum), 2 (Adam) x weights,
 *              plus fp32 master weights in mixed precision and their fp32
 *              gradients where the kept ones are 16-bit; divided by the
 *              stage's replicas under ZeRO 1 and 2;
 *   versions   PipeDream's stashed weight versions beyond the current one: a
 *              version stays alive while an in-flight microbatch's F used it
 *              (released when its stash is freed) or while it is current;
 *   stash      stash_bytes of a stage from the start of each F to the end of
 *              its B (fused) or W (split backward);
 *   buffers    a transfer's bytes on the sender from its SEND until the
 *              receiver takes them (its RECV, once they have arrived), then
 *              on the receiver until the end of the op that reads them (the
 *              first compute op after the RECV).
 * The peak is checked after every increase; its time is the first time the
 * maximum was reached.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static void check_peak(sim *s, int w) { sim_mem_peak(s, &s->w[w]); }

void sim_mem_sample(sim *s, sim_worker *W, double tot)
{
    int w = (int)(W - s->w);
    if (W->last_sample >= 0) {
        sim_memsample *last = &s->mem_samples[W->last_sample];
        if (last->bytes == tot) return;
        if (last->t == s->now) { /* several changes at one instant: keep the last */
            last->bytes = tot;
            return;
        }
    }
    if (s->n_mem == s->cap_mem) {
        s->cap_mem = s->cap_mem * 2 + 1024;
        s->mem_samples = cl_realloc(s->mem_samples, (size_t)s->cap_mem * sizeof *s->mem_samples);
    }
    W->last_sample = s->n_mem;
    s->mem_samples[s->n_mem++] = (sim_memsample){s->now, w, tot};
}

void sim_mem_init(sim *s)
{
    const plan *p = s->pl;
    int elem = model_dtype_bytes(p->model.dtype);
    plan_optim o = (unsigned)p->optimizer < OPTIM_COUNT ? p->optimizer : OPTIM_SGD;
    int zero = p->zero >= 0 && p->zero <= PLAN_ZERO_MAX ? p->zero : 0;
    plan_prec prec = (unsigned)p->precision < PREC_COUNT ? p->precision : PREC_AUTO;
    s->state = plan_state_factors(elem, plan_prec_resolve(prec, elem), o, zero, plan_grad_keep(p));
    const plan_state_f *f = &s->state;
    double opt = f->optim;
    for (int w = 0; w < s->n_w; w++) {
        sim_worker *W = &s->w[w];
        /* the whole sums first, so that unsharded state keeps the bits
         * params x factor; sharded state stage by stage over its replicas */
        double params = 0, grads = 0, optim = 0;
        for (int j = 0; j < W->n_local; j++) {
            const plan_stage *st = &p->stages[W->local[j]];
            /* the sequential kind runs every stage on one device: nothing
             * to shard over */
            int r = s->sc->kind == SCHED_SEQUENTIAL ? 1 : st->n_replicas;
            params += st->param_bytes;
            grads += st->param_bytes * f->grads / r;
            optim += st->param_bytes * opt / r;
        }
        W->mem.weights = params * f->weights;
        W->mem.grads = f->grads_sharded ? grads : params * f->grads;
        W->mem.optim = f->opt_sharded ? optim : params * opt;
        W->peak = -1;
        W->last_sample = -1;
        check_peak(s, w);
        W->peak_versions = 1;
        if (!s->sc->stash_weights || W->n_local == 0) continue;
        /* one refcount array per local stage, indexed by version, grown
         * as updates create versions */
        W->vref = cl_calloc((size_t)W->n_local, sizeof *W->vref);
        W->vcur = cl_calloc((size_t)W->n_local, sizeof(int));
        W->vlive = cl_calloc((size_t)W->n_local, sizeof(int));
        W->vcap = cl_calloc((size_t)W->n_local, sizeof(int));
        for (int j = 0; j < W->n_local; j++) {
            W->vcap[j] = 16;
            W->vref[j] = cl_calloc(16, sizeof(int));
            W->vref[j][0] = 1; /* the current weights */
            W->vlive[j] = 1;
        }
    }
}

void sim_mem_free(sim *s)
{
    for (int w = 0; w < s->n_w; w++) {
        sim_worker *W = &s->w[w];
        if (W->vref)
            for (int j = 0; j < W->n_local; j++) free(W->vref[j]);
        free(W->vref);
        free(W->vcur);
        free(W->vlive);
        free(W->vcap);
    }
}

/* Version refcounts of local stage j; keeps the versions component exact. */
static void vref_add(sim *s, int w, int j, int ver, int delta)
{
    sim_worker *W = &s->w[w];
    if (j < 0 || ver < 0 || ver > (1 << 30)) return; /* sched_check bounds explicit wver */
    if (ver >= W->vcap[j]) {
        int cap = W->vcap[j];
        while (cap <= ver) cap *= 2;
        W->vref[j] = cl_realloc(W->vref[j], (size_t)cap * sizeof(int));
        memset(W->vref[j] + W->vcap[j], 0, (size_t)(cap - W->vcap[j]) * sizeof(int));
        W->vcap[j] = cap;
    }
    int *r = &W->vref[j][ver];
    if (delta > 0 && (*r)++ == 0) {
        W->vlive[j]++;
        if (W->vlive[j] > W->peak_versions) W->peak_versions = W->vlive[j];
        W->mem.versions += s->stg[W->local[j]].param_bytes * s->state.version;
    } else if (delta < 0 && --(*r) == 0) {
        W->vlive[j]--;
        W->mem.versions -= s->stg[W->local[j]].param_bytes * s->state.version;
    }
    assert(*r >= 0);
}

void sim_mem_version(sim *s, int w, const sched_op *op, int delta)
{
    vref_add(s, w, sim_local_index(&s->w[w], op->stage), op->wver, delta);
}


void sim_mem_update(sim *s, int w, const sched_op *op)
{
    sim_worker *W = &s->w[w];
    if (!W->vref) return;
    int j = sim_local_index(W, op->stage);
    if (j < 0) return;
    int cur = W->vcur[j];
    /* in place: the old weights stay only if a stashed microbatch uses them */
    vref_add(s, w, j, cur, -1);
    vref_add(s, w, j, cur + 1, +1);
    W->vcur[j] = cur + 1;
    check_peak(s, w);
}
