/* roofline.c - a profile derived from a model and a device type, without
 * running anything (see profile.h, prof_derive, and docs/formats.md,
 * "Profile", which states the same rules for users).
 *
 * Each pass of each layer at batch b takes
 *     max(FLOPs(b) / (peak x efficiency), bytes moved(b) / memory bandwidth)
 * where FLOPs(b) = b x the per-sample FLOPs model_derive gives for that pass,
 * and bytes moved(b) counts each tensor the pass touches once, activations
 * per sample and weights once per pass (weights do not grow with the batch):
 *     forward        read input, read weights, write output
 *                    b (in + out) E + P E
 *     input-grad     read output-grad and the stash, read weights, write
 *                    input-grad:  b (out + stash + in) E + P E
 *     weight-grad    read output-grad and the stash, write weight-grad:
 *                    b (out + stash) E + P E; zero for layers without weights
 * with E the model's element bytes, P its parameter count, in the summed
 * output elements of the layer's inputs (the model input for -1), out its
 * output elements and stash what its backward pass keeps.  A flatten is a
 * view and costs nothing.  Peak is the fp16/bf16 one for 2-byte models when
 * the device gives it (cluster_flops).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "models/model.h"
#include "cluster.h"
#include "profile.h"

/* One pass: the slower of compute and memory traffic. */
static double roof(double flops, double bytes, double flops_per_s, double bw_Bps)
{
    double tc = flops / flops_per_s, tm = bytes / bw_Bps;
    return tc > tm ? tc : tm;
}

static double input_elems(const model *m, const model_layer *l)
{
    double s = 0;
    for (int k = 0; k < l->n_inputs; k++)
        s += l->inputs[k] < 0 ? (double)model_shape_elems(&m->input)
                              : (double)m->layers[l->inputs[k]].out_elems;
    return s;
}

int prof_derive(prof *p, const model *m, const cluster_devtype *t,
                const double *batches, int n_batches, cl_err *e)
{
    memset(p, 0, sizeof *p);
    int rc = cluster_devtype_check(t, "roofline device", e);
    if (rc) return rc;
    if (n_batches < 1 || n_batches > PROF_MAX_POINTS)
        return cl_fail(e, CL_EINPUT, "roofline: %d batch sizes (hint: give 1 to %d)", n_batches, PROF_MAX_POINTS);
    for (int k = 0; k < n_batches; k++) {
        if (!(batches[k] > 0) || !isfinite(batches[k]))
            return cl_fail(e, CL_EINPUT, "roofline: batch size %g is not positive", batches[k]);
        if (k > 0 && !(batches[k] > batches[k - 1]))
            return cl_fail(e, CL_EINPUT, "roofline: batch sizes must increase (%g after %g)",
                           batches[k], batches[k - 1]);
    }
    if (m->n_layers < 1)
        return cl_fail(e, CL_EINPUT, "roofline: model \"%s\" has no layers", m->name);

    const double E = (double)model_elem_bytes(m);
    const double rate = cluster_flops(t, (int)E), bw = t->mem_bw_Bps;
    snprintf(p->model, sizeof p->model, "%s", m->name);
    snprintf(p->device, sizeof p->device, "%s", t->name);
    p->source = PROF_DERIVED;
    snprintf(p->note, sizeof p->note,
             "roofline: %.4g FLOP/s (peak x efficiency %.3g), memory %.4g B/s, %d-byte elements",
             rate, t->efficiency, bw, (int)E);
    prof_alloc(p, m->n_layers, n_batches);
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        prof_layer *o = &p->layers[i];
        snprintf(o->name, sizeof o->name, "%s", l->name);
        o->act_bytes = (double)l->out_elems * E;
        o->stash_bytes = (double)l->stash_elems * E;
        o->param_bytes = (double)l->params * E;
        const double in = input_elems(m, l), out = (double)l->out_elems;
        const double st = (double)l->stash_elems, P = (double)l->params;
        const int view = l->kind == MODEL_FLATTEN;
        const int has_w = l->params > 0 || l->bwd_w_flops > 0;
        for (int k = 0; k < n_batches; k++) {
            const double b = batches[k];
            o->batch[k] = b;
            if (view) continue;
            o->fwd_s[k] = roof(l->fwd_flops * b, (b * (in + out) + P) * E, rate, bw);
            o->bwd_in_s[k] = roof(l->bwd_in_flops * b, (b * (out + st + in) + P) * E, rate, bw);
            o->bwd_w_s[k] = has_w ? roof(l->bwd_w_flops * b, (b * (out + st) + P) * E, rate, bw) : 0;
        }
    }
    return CL_OK;
}
