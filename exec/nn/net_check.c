/* net_check.c - what the executor can run (net.h): the kinds and the chain
 * of a stage's layers, their sizes, and the split tensor parallelism makes
 * of its attention and mlp layers.  Each refusal is one line naming the
 * model file and the layer. */
#include <limits.h>
#include <stdio.h>

#include "models/tfm_rank.h"
#include "net.h"

static int fits_int(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

int exec_net_check(const model *m, int first, int last, const char *file, cl_err *e)
{
    if (first < 0 || last > m->n_layers || first >= last)
        return cl_fail(e, CL_EINPUT, "%s: layers [%d, %d) is not a range of the model's %d layers (hint: a stage is a non-empty run of consecutive layers)",
                       file, first, last, m->n_layers);
    if (m->dtype != MODEL_F32)
        return cl_fail(e, CL_EINPUT, "%s: input.dtype: the executor runs float32 only, got %s (hint: set \"dtype\": \"float32\")",
                       file, model_dtype_name(m->dtype));
    for (int i = first; i < last; i++) {
        const model_layer *l = &m->layers[i];
        if (l->kind == MODEL_BLOCK || l->kind == MODEL_ADD)
            return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): the executor cannot run kind %s; it is for planning only (hint: train a model built from conv2d, linear, pooling, relu, flatten, dropout, batchnorm2d and softmax_xent)",
                           file, i, l->name, model_kind_name(l->kind));
        if (!(l->n_inputs == 1 && l->inputs[0] == i - 1))
            return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): the executor runs chains only, and this layer's input is not the layer before it (hint: planning handles DAGs; training does not)",
                           file, i, l->name);
        if (!fits_int(model_shape_elems(&l->in_shape)) ||
            !fits_int(model_shape_elems(&l->out_shape)) || !fits_int((int64_t)l->params) ||
            (l->kind == MODEL_CONV2D &&
             !fits_int(l->in_shape.d[0] * l->kernel * l->kernel)))
            return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): tensors of more than 2^31 elements per sample are beyond the executor (hint: train a smaller model)",
                           file, i, l->name);
    }
    return CL_OK;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int exec_net_tp_check(const model *m, int first, int last, int size, const char *file,
                      cl_err *e)
{
    /* the degrees that would split every layer: divisors of the gcd */
    int all = 0, bad = -1;
    for (int i = first; i < last; i++) {
        const model_layer *l = &m->layers[i];
        int64_t w = l->kind == MODEL_ATTENTION ? l->heads : l->kind == MODEL_MLP ? l->out_features : 0;
        if (w <= 0 || w > INT_MAX) continue;
        all = gcd(all, (int)w);
        if (bad < 0 && w % size) bad = i;
    }
    if (!all)
        return cl_fail(e, CL_EINPUT, "%s: layers: tensor parallelism (--tensor %d) splits attention and mlp layers, and this model has none (hint: train it without --tensor)",
                       file, size);
    if (bad < 0) return CL_OK;
    char hint[160] = "";
    int len = 0, nd = 0, div[32];
    for (int d = 1; d <= all && nd < 32; d++)
        if (all % d == 0) div[nd++] = d;
    for (int k = 0; k < nd && len < (int)sizeof hint - 24; k++)
        len += snprintf(hint + len, sizeof hint - (size_t)len, "%s%d",
                        k == 0 ? "" : k == nd - 1 ? " or " : ", ", div[k]);
    const model_layer *l = &m->layers[bad];
    int attn = l->kind == MODEL_ATTENTION;
    return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): --tensor %d does not divide its %lld %s (hint: --tensor %s splits every layer evenly)",
                   file, bad, l->name, size, (long long)(attn ? l->heads : l->out_features),
                   attn ? "heads" : "hidden units", hint);
}

int exec_net_sp_check(const model *m, int first, int last, int size, const char *file,
                      cl_err *e)
{
    for (int i = first; i < last; i++) {
        const model_layer *l = &m->layers[i];
        if (l->kind != MODEL_ATTENTION && l->kind != MODEL_MLP) continue;
        const model_shape *s = &l->in_shape;
        int64_t T = s->ndim == 3 ? s->d[1] : 1;
        if (T % size)
            return cl_fail(e, CL_EINPUT, "%s: layers[%d] (%s): sequence parallelism over %d tensor ranks does not divide its %lld tokens (hint: a tensor degree that divides the sequence, or no sequence parallelism)",
                           file, i, l->name, size, (long long)T);
    }
    return CL_OK;
}

int exec_net_has_split(const model *m, int first, int last)
{
    for (int i = first; i < last; i++)
        if (m->layers[i].kind == MODEL_ATTENTION || m->layers[i].kind == MODEL_MLP) return 1;
    return 0;
}

int exec_net_create_solo(exec_net **out, const model *m, int first, int last, int max_batch,
                         uint64_t seed, int flags, int size, const char *file, cl_err *e)
{
    const int split = size > 1 && exec_net_has_split(m, first, last);
    return exec_net_create_tp(out, m, first, last, max_batch, seed, flags,
                              split ? exec_tp_comm_solo(size) : NULL, file, e);
}

int exec_net_flags_of(int recompute, int seq_par)
{
    return (recompute == TFM_RECOMP_FULL ? EXEC_NET_RECOMPUTE_FULL
            : recompute == TFM_RECOMP_SELECTIVE ? EXEC_NET_RECOMPUTE : 0) |
           (seq_par ? EXEC_NET_SEQ_PAR : 0);
}
