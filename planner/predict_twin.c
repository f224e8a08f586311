/* predict_twin.c - replays shared between fbp and pipedream plans (see
 * predict_twin.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "core/schedule.h"
#include "predict_twin.h"

/* Do stages a and b carry the same figures for the simulator?  (mem_bytes,
 * the schedule's own memory estimate, is left out: the simulator does not
 * read it.) */
static int same_stage(const plan_stage *a, const plan_stage *b)
{
    if (a->first != b->first || a->last != b->last || a->n_layers != b->n_layers || a->n_replicas != b->n_replicas)
        return 0;
    if (memcmp(a->layers, b->layers, (size_t)a->n_layers * sizeof *a->layers) ||
        memcmp(a->devices, b->devices, (size_t)a->n_replicas * sizeof *a->devices))
        return 0;
    /* (both plans' figures come from the same sums: equal values) */
    return a->fwd_s == b->fwd_s && a->bwd_in_s == b->bwd_in_s && a->bwd_w_s == b->bwd_w_s &&
           a->update_s == b->update_s && a->act_out_bytes == b->act_out_bytes &&
           a->stash_bytes == b->stash_bytes && a->param_bytes == b->param_bytes &&
           a->compute_s == b->compute_s && a->comm_s == b->comm_s;
}

static int same_pred(const plan_pred *a, const plan_pred *b)
{
    return a->iteration_s == b->iteration_s && a->throughput == b->throughput && a->bubble == b->bubble &&
           a->speedup == b->speedup && a->simulated == b->simulated;
}

/* Plans that time alike: both asynchronous (fbp or pipedream, in either
 * order), the same scalars, model and cluster (the search's own), stages. */
static int same_timing(const plan *a, const plan *b)
{
    if (!sched_is_async(a->schedule) || !sched_is_async(b->schedule)) return 0;
    if (a->chunks != b->chunks || a->optimizer != b->optimizer || a->precision != b->precision ||
        a->zero != b->zero || a->batch != b->batch || a->microbatch != b->microbatch ||
        a->n_micro != b->n_micro || a->comm_off != b->comm_off || a->n_stages != b->n_stages ||
        a->framework != b->framework || a->grad_reduce != b->grad_reduce || a->tensor != b->tensor ||
        a->seq_par != b->seq_par || a->recompute != b->recompute || a->context != b->context)
        return 0;
    if (a->model.layers != b->model.layers || a->model.n_layers != b->model.n_layers ||
        a->model.dtype != b->model.dtype || a->cluster.devices != b->cluster.devices ||
        a->cluster.n_devices != b->cluster.n_devices)
        return 0;
    for (int s = 0; s < a->n_stages; s++)
        if (!same_stage(&a->stages[s], &b->stages[s])) return 0;
    return 1;
}

int pred_twin_find(const pred_twins *T, const plan *pl, const plan_pred *closed, plan_pred *out)
{
    for (int i = 0; i < T->n; i++) {
        const pred_twin *t = &T->slot[i];
        if (same_pred(&t->closed, closed) && same_timing(&t->pl, pl)) {
            *out = t->sim;
            return 1;
        }
    }
    return 0;
}

static void drop(pred_twin *t)
{
    for (int s = 0; s < t->pl.n_stages; s++) {
        free(t->pl.stages[s].layers);
        free(t->pl.stages[s].devices);
    }
    free(t->pl.stages);
    memset(t, 0, sizeof *t);
}

void pred_twin_keep(pred_twins *T, const plan *pl, const plan_pred *closed, const plan_pred *sim)
{
    pred_twin *t = &T->slot[T->next];
    if (T->next < T->n) drop(t);
    else T->n++;
    T->next = (T->next + 1) % PRED_TWINS;
    t->pl = *pl;
    t->pl.stages = cl_calloc((size_t)pl->n_stages, sizeof *t->pl.stages);
    for (int s = 0; s < pl->n_stages; s++) {
        plan_stage *d = &t->pl.stages[s];
        const plan_stage *o = &pl->stages[s];
        *d = *o;
        d->layers = cl_malloc((size_t)o->n_layers * sizeof *d->layers);
        memcpy(d->layers, o->layers, (size_t)o->n_layers * sizeof *d->layers);
        d->devices = cl_malloc((size_t)o->n_replicas * sizeof *d->devices);
        memcpy(d->devices, o->devices, (size_t)o->n_replicas * sizeof *d->devices);
    }
    t->closed = *closed;
    t->sim = *sim;
}

void pred_twins_free(pred_twins *T)
{
    for (int i = 0; i < T->n; i++) drop(&T->slot[i]);
    T->n = T->next = 0;
}
