/* memory.c - memory over time per device, and its peak.
 *
 * Components (bytes), matching the planner's cost model (issue 3, "memory per
 * device"; docs/simulator.md, "Memory"):
 *   weights    sum of param_bytes of the stages on the device, from t = 0;
 *   grads      the same again (one gradient buffer);
 *   optim      optimiser state: 0 (SGD), 1 (momentum), 2 (Adam) x weights;
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
    int mult = (unsigned)p->optimizer < OPTIM_COUNT ? plan_optim_state_mult(p->optimizer) : 0;
    for (int w = 0; w < s->n_w; w++) {
        sim_worker *W = &s->w[w];
        double params = 0;
        for (int j = 0; j < W->n_local; j++) params += p->stages[W->local[j]].param_bytes;
        W->mem.weights = params;
        W->mem.grads = params;
        W->mem.optim = mult * params;
        W->mem_static = (2.0 + mult) * params;
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
        W->mem.versions += s->stg[W->local[j]].param_bytes;
    } else if (delta < 0 && --(*r) == 0) {
        W->vlive[j]--;
        W->mem.versions -= s->stg[W->local[j]].param_bytes;
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
