/* model_derive.c - shape inference and per-layer costs (see model.h).
 *
 * Every count below is per sample and documented, with its reasoning, in
 * docs/formats.md ("Model", "Costs").  In short:
 * - conv2d/linear: MACs as usual; forward FLOPs = 2 x MACs (the bias add is
 *   not counted); input-gradient = 2 x MACs; weight-gradient = 2 x MACs plus
 *   one add per output element for the bias gradient;
 * - elementwise and pooling kinds: a small stated count per element;
 * - no input-gradient is computed for a layer none of whose inputs leads
 *   back to a parameter (the model input needs no gradient), as frameworks
 *   skip it (a block keeps its explicit backward split regardless);
 * - stash (what the backward pass keeps): conv2d/linear their input, relu
 *   its output, maxpool one argmax per output, dropout its mask, batchnorm
 *   its normalised input, softmax_xent its probabilities, block as given.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct dctx {
    const model *m;
    const char *file;
    cl_err *e;
} dctx;

/* "<file>: layers[i].member (name): what" - member may be NULL. */
static int fail(dctx *c, int i, const char *member, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(dctx *c, int i, const char *member, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return cl_fail(c->e, CL_EINPUT, "%s: layers[%d]%s%s (%.*s): %s", c->file, i,
                   member ? "." : "", member ? member : "", MODEL_NAME_MAX,
                   c->m->layers[i].name, what);
}

static int mul_ok(int64_t a, int64_t b, int64_t limit, int64_t *out)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > limit) return 0;
    *out = r;
    return 1;
}

static int shape_valid(const model_shape *s)
{
    if (s->ndim != 1 && s->ndim != 3) return 0;
    int64_t n = 1;
    for (int k = 0; k < s->ndim; k++)
        if (s->d[k] < 1 || !mul_ok(n, s->d[k], MODEL_MAX_ELEMS, &n)) return 0;
    return 1;
}

static int shape_eq(const model_shape *a, const model_shape *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->d[k] != b->d[k]) return 0;
    return 1;
}

/* Output side of a sliding window: floor((n + 2p - k) / s) + 1, or 0 when
 * the window does not fit once. */
static int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t p)
{
    int64_t span = n + 2 * p;
    return span < k ? 0 : (span - k) / s + 1;
}

/* Hyper-parameters of windowed kinds (conv2d and the pools). */
static int check_window(dctx *c, int i, const model_layer *l)
{
    const int64_t big = (int64_t)1 << 31;
    if (l->kernel < 1 || l->kernel > big)
        return fail(c, i, "kernel", "%lld is out of range (hint: expected 1 to %lld)", (long long)l->kernel, (long long)big);
    if (l->stride < 1 || l->stride > big)
        return fail(c, i, "stride", "%lld is out of range (hint: expected 1 to %lld)", (long long)l->stride, (long long)big);
    if (l->padding < 0 || l->padding > big)
        return fail(c, i, "padding", "%lld is out of range (hint: expected 0 to %lld)", (long long)l->padding, (long long)big);
    return CL_OK;
}

/* The windowed kinds' output (C', H', W') from input (C, H, W). */
static int window_shape(dctx *c, int i, const model_layer *l, int64_t out_c, model_shape *out)
{
    const model_shape *in = &l->in_shape;
    char sh[96];
    model_shape_str(in, sh, sizeof sh);
    if (in->ndim != 3)
        return fail(c, i, NULL, "expected a [channels, height, width] input, got %s (hint: %s works on images; check the layers before it)",
                    sh, model_kind_name(l->kind));
    int64_t h = window_out(in->d[1], l->kernel, l->stride, l->padding);
    int64_t w = window_out(in->d[2], l->kernel, l->stride, l->padding);
    if (h < 1 || w < 1)
        return fail(c, i, "kernel", "%lld is larger than the padded input %lldx%lld (input %s, padding %lld) (hint: use a smaller kernel or more padding)",
                    (long long)l->kernel, (long long)(in->d[1] + 2 * l->padding),
                    (long long)(in->d[2] + 2 * l->padding), sh, (long long)l->padding);
    *out = (model_shape){3, {out_c, h, w}};
    int64_t n;
    if (!mul_ok(out_c, h, MODEL_MAX_ELEMS, &n) || !mul_ok(n, w, MODEL_MAX_ELEMS, &n))
        return fail(c, i, NULL, "output has more than 2^40 elements per sample (hint: check out_channels and the input size)");
    return CL_OK;
}

static uint64_t ceil_div_elems(double bytes, int elem)
{
    return (uint64_t)ceil(bytes / elem);
}

static int block_costs(dctx *c, int i, model_layer *l, int eb)
{
    struct { const char *name; double v; } f[] = {
        {"fwd_flops", l->blk_fwd_flops}, {"bwd_flops", l->blk_bwd_flops},
        {"bwd_w_flops", l->blk_bwd_w_flops}, {"params", l->blk_params},
        {"out_bytes", l->blk_out_bytes}, {"stash_bytes", l->blk_stash_bytes}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (!isfinite(f[k].v) || f[k].v < 0)
            return fail(c, i, f[k].name, "%g: expected a finite number >= 0 (hint: costs are per sample)", f[k].v);
    if (l->blk_bwd_w_flops > l->blk_bwd_flops)
        return fail(c, i, "bwd_w_flops", "%.17g is more than bwd_flops %.17g (hint: bwd_w_flops is the weight-gradient part of bwd_flops)",
                    l->blk_bwd_w_flops, l->blk_bwd_flops);
    if (l->blk_params > (double)MODEL_MAX_PARAMS || l->blk_params != floor(l->blk_params))
        return fail(c, i, "params", "%.17g: expected a whole number up to 2^53 (hint: parameters are counted, not measured in bytes)",
                    l->blk_params);
    if (!(l->blk_out_bytes > 0) || l->blk_out_bytes > (double)MODEL_MAX_ELEMS * eb)
        return fail(c, i, "out_bytes", "%.17g: expected 1 to 2^40 elements' worth of bytes (hint: the output a block hands to the next layer, per sample)",
                    l->blk_out_bytes);
    if (l->blk_stash_bytes > (double)MODEL_MAX_ELEMS * eb)
        return fail(c, i, "stash_bytes", "%.17g is more than 2^40 elements per sample (hint: bytes per sample, not per batch)",
                    l->blk_stash_bytes);
    uint64_t out = ceil_div_elems(l->blk_out_bytes, eb);
    if (l->blk_out_shape.ndim) {
        char sh[96];
        model_shape_str(&l->blk_out_shape, sh, sizeof sh);
        if (!shape_valid(&l->blk_out_shape))
            return fail(c, i, "out_shape", "%s is not a valid shape (hint: [N] or [C,H,W], sizes >= 1)", sh);
        if ((uint64_t)model_shape_elems(&l->blk_out_shape) != out)
            return fail(c, i, "out_shape", "%s holds %lld elements but out_bytes %.17g is %llu elements of %d bytes (hint: make them agree)",
                        sh, (long long)model_shape_elems(&l->blk_out_shape), l->blk_out_bytes,
                        (unsigned long long)out, eb);
        l->out_shape = l->blk_out_shape;
    } else {
        l->out_shape = (model_shape){1, {(int64_t)out}};
    }
    l->fwd_flops = l->blk_fwd_flops;
    l->bwd_w_flops = l->blk_bwd_w_flops;
    l->bwd_in_flops = l->blk_bwd_flops - l->blk_bwd_w_flops;
    l->params = (uint64_t)l->blk_params;
    l->stash_elems = ceil_div_elems(l->blk_stash_bytes, eb);
    return CL_OK;
}

/* Shape and costs of layer i, whose inputs are already checked and whose
 * in_shape is set.  needs_grad: some input leads back to a parameter. */
static int derive_layer(dctx *c, model *m, int i, int needs_grad)
{
    model_layer *l = &m->layers[i];
    const model_shape *in = &l->in_shape;
    const double n_in = (double)model_shape_elems(in);
    char sh[96];
    model_shape_str(in, sh, sizeof sh);
    int rc;
    int64_t params = 0;
    l->macs = l->fwd_flops = l->bwd_in_flops = l->bwd_w_flops = 0;
    l->stash_elems = 0;
    l->out_shape = *in;

    switch (l->kind) {
    case MODEL_CONV2D: {
        if ((rc = check_window(c, i, l))) return rc;
        if (l->out_channels < 1 || l->out_channels > MODEL_MAX_ELEMS)
            return fail(c, i, "out_channels", "%lld is out of range (hint: expected 1 to 2^40)", (long long)l->out_channels);
        if (in->ndim == 3 && l->in_channels && l->in_channels != in->d[0])
            return fail(c, i, "in_channels", "expected %lld (the input is %s), got %lld (hint: fix in_channels or the layer before)",
                        (long long)in->d[0], sh, (long long)l->in_channels);
        if ((rc = window_shape(c, i, l, l->out_channels, &l->out_shape))) return rc;
        int64_t w;
        if (!mul_ok(l->out_channels, in->d[0], MODEL_MAX_PARAMS, &w) ||
            !mul_ok(w, l->kernel, MODEL_MAX_PARAMS, &w) || !mul_ok(w, l->kernel, MODEL_MAX_PARAMS, &w) ||
            (l->bias && w > MODEL_MAX_PARAMS - l->out_channels))
            return fail(c, i, NULL, "more than 2^53 parameters (hint: check out_channels, kernel and the input channels)");
        params = w + (l->bias ? l->out_channels : 0);
        double out = (double)model_shape_elems(&l->out_shape);
        l->macs = out * (double)in->d[0] * (double)l->kernel * (double)l->kernel;
        l->fwd_flops = 2 * l->macs;
        l->bwd_in_flops = needs_grad ? 2 * l->macs : 0;
        l->bwd_w_flops = 2 * l->macs + (l->bias ? out : 0);
        l->stash_elems = (uint64_t)n_in;
        break;
    }
    case MODEL_LINEAR: {
        if (l->out_features < 1 || l->out_features > MODEL_MAX_ELEMS)
            return fail(c, i, "out_features", "%lld is out of range (hint: expected 1 to 2^40)", (long long)l->out_features);
        if (in->ndim != 1)
            return fail(c, i, NULL, "expected a [features] input, got %s (hint: put a flatten layer before it)", sh);
        if (l->in_features && l->in_features != in->d[0])
            return fail(c, i, "in_features", "expected %lld (the input is %s), got %lld (hint: fix in_features or the layer before)",
                        (long long)in->d[0], sh, (long long)l->in_features);
        int64_t w;
        if (!mul_ok(in->d[0], l->out_features, MODEL_MAX_PARAMS, &w) ||
            (l->bias && w > MODEL_MAX_PARAMS - l->out_features))
            return fail(c, i, NULL, "more than 2^53 parameters (hint: check out_features and the input size)");
        params = w + (l->bias ? l->out_features : 0);
        l->out_shape = (model_shape){1, {l->out_features}};
        l->macs = (double)w;
        l->fwd_flops = 2 * l->macs;
        l->bwd_in_flops = needs_grad ? 2 * l->macs : 0;
        l->bwd_w_flops = 2 * l->macs + (l->bias ? (double)l->out_features : 0);
        l->stash_elems = (uint64_t)n_in;
        break;
    }
    case MODEL_RELU:
        l->fwd_flops = n_in;
        l->bwd_in_flops = needs_grad ? n_in : 0;
        l->stash_elems = (uint64_t)n_in;
        break;
    case MODEL_MAXPOOL2D:
    case MODEL_AVGPOOL2D: {
        if ((rc = check_window(c, i, l))) return rc;
        if (2 * l->padding > l->kernel)
            return fail(c, i, "padding", "%lld is more than half the kernel %lld (hint: a pooling window must overlap the input; padding <= kernel / 2)",
                        (long long)l->padding, (long long)l->kernel);
        if ((rc = window_shape(c, i, l, in->ndim == 3 ? in->d[0] : 1, &l->out_shape))) return rc;
        double out = (double)model_shape_elems(&l->out_shape), kk = (double)l->kernel * (double)l->kernel;
        l->fwd_flops = kk * out;
        if (l->kind == MODEL_MAXPOOL2D) {
            l->bwd_in_flops = needs_grad ? out : 0;
            l->stash_elems = (uint64_t)out;
        } else {
            l->bwd_in_flops = needs_grad ? kk * out : 0;
        }
        break;
    }
    case MODEL_FLATTEN:
        l->out_shape = (model_shape){1, {(int64_t)n_in}};
        break;
    case MODEL_DROPOUT:
        if (!(l->dropout_p >= 0 && l->dropout_p < 1))
            return fail(c, i, "p", "%g is out of range (hint: 0 <= p < 1)", l->dropout_p);
        l->fwd_flops = n_in;
        l->bwd_in_flops = needs_grad ? n_in : 0;
        l->stash_elems = (uint64_t)n_in;
        break;
    case MODEL_BATCHNORM2D:
        if (in->ndim != 3)
            return fail(c, i, NULL, "expected a [channels, height, width] input, got %s (hint: batchnorm2d normalises image channels)", sh);
        params = 2 * in->d[0];
        l->fwd_flops = 7 * n_in;
        l->bwd_in_flops = needs_grad ? 6 * n_in : 0;
        l->bwd_w_flops = 3 * n_in;
        l->stash_elems = (uint64_t)n_in;
        break;
    case MODEL_ADD:
        l->fwd_flops = (l->n_inputs - 1) * n_in;
        break;
    case MODEL_SOFTMAX_XENT:
        if (i != m->n_layers - 1)
            return fail(c, i, NULL, "softmax_xent is the loss and must be the last layer, but %d layer%s follow%s (hint: move it to the end)",
                        m->n_layers - 1 - i, m->n_layers - 1 - i == 1 ? "" : "s",
                        m->n_layers - 1 - i == 1 ? "s" : "");
        if (in->ndim != 1)
            return fail(c, i, NULL, "expected a [classes] input of logits, got %s (hint: end with flatten and linear)", sh);
        if (in->d[0] > INT32_MAX)
            return fail(c, i, NULL, "%lld classes is more than 2^31 - 1 (hint: check the layer before)", (long long)in->d[0]);
        if (m->classes && m->classes != in->d[0])
            return fail(c, i, NULL, "expected %d logits (the model's classes), got %s (hint: make the last linear's out_features equal classes)",
                        m->classes, sh);
        m->classes = (int)in->d[0];
        l->out_shape = (model_shape){1, {1}};
        l->fwd_flops = 5 * n_in;
        l->bwd_in_flops = needs_grad ? n_in : 0;
        l->stash_elems = (uint64_t)n_in;
        break;
    case MODEL_BLOCK:
        return block_costs(c, i, l, model_dtype_bytes(m->dtype));
    case MODEL_PATCH_EMBED: case MODEL_POS_EMBED: case MODEL_LAYERNORM: case MODEL_GELU:
    case MODEL_MEANPOOL: case MODEL_ATTENTION: case MODEL_MLP: {
        char why[256];
        if ((params = model_vit_derive(l, needs_grad, why, sizeof why)) < 0)
            return fail(c, i, NULL, "%s", why);
        break;
    }
    default:
        return fail(c, i, "kind", "unknown kind %d (hint: a bug in the code that built this model)", (int)l->kind);
    }
    l->params = (uint64_t)params;
    return CL_OK;
}

static int cmp_name_ix(const void *a, const void *b)
{
    const model_name_ix *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->ix > y->ix) - (x->ix < y->ix);
}

model_name_ix *model_names_sorted(const model *m)
{
    int n = m->n_layers;
    model_name_ix *ix = cl_malloc((size_t)(n > 0 ? n : 1) * sizeof *ix);
    for (int i = 0; i < n; i++) ix[i] = (model_name_ix){m->layers[i].name, i};
    qsort(ix, (size_t)n, sizeof *ix, cmp_name_ix);
    return ix;
}

int model_names_find(const model_name_ix *names, int n, const char *name)
{
    /* the first entry with this name: a key with index -1 sorts before all */
    model_name_ix key = {name, -1};
    size_t lo = 0, hi = (size_t)n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_name_ix(&names[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < (size_t)n && strcmp(names[lo].name, name) == 0 ? names[lo].ix : -1;
}

/* Names: non-empty, NUL-terminated, not "input", unique. */
static int check_names(dctx *c, const model *m)
{
    int n = m->n_layers, rc = CL_OK;
    for (int i = 0; i < n && !rc; i++) {
        const char *s = m->layers[i].name;
        if (!memchr(s, '\0', MODEL_NAME_MAX) || !s[0])
            rc = fail(c, i, "name", "missing or longer than %d characters (hint: every layer needs a name)", MODEL_NAME_MAX - 1);
        else if (strcmp(s, "input") == 0)
            rc = fail(c, i, "name", "\"input\" is reserved for the model input (hint: choose another name)");
    }
    if (rc) return rc;
    model_name_ix *ix = model_names_sorted(m);
    for (int k = 1; k < n && !rc; k++)
        if (strcmp(ix[k - 1].name, ix[k].name) == 0)
            rc = fail(c, ix[k].ix, "name", "duplicate layer name, also used by layers[%d] (hint: names must be unique)", ix[k - 1].ix);
    free(ix);
    return rc;
}

/* Inputs: count fits the kind, indices point backwards, no repeats; sets
 * in_shape (the first input's shape; a block joining several inputs sees
 * their elements as one [N] vector). */
static int check_inputs(dctx *c, model *m, int i)
{
    model_layer *l = &m->layers[i];
    if (l->n_inputs == 0) {
        l->n_inputs = 1;
        l->inputs[0] = i - 1;
    }
    if (l->n_inputs < 0 || l->n_inputs > MODEL_MAX_INPUTS)
        return fail(c, i, "inputs", "%d inputs (hint: 1 to %d)", l->n_inputs, MODEL_MAX_INPUTS);
    for (int k = 0; k < l->n_inputs; k++) {
        if (l->inputs[k] < -1 || l->inputs[k] >= i)
            return fail(c, i, "inputs", "input %d is layer index %d, not an earlier layer (hint: layers are in topological order; -1 is the model input)",
                        k, l->inputs[k]);
        for (int t = 0; t < k; t++)
            if (l->inputs[t] == l->inputs[k])
                return fail(c, i, "inputs", "input %d repeats input %d (hint: name each input once)", k, t);
    }
    if (l->kind == MODEL_ADD && l->n_inputs < 2)
        return fail(c, i, "inputs", "add needs at least 2 inputs, got %d (hint: \"inputs\": [\"a\", \"b\"])", l->n_inputs);
    if (l->kind != MODEL_ADD && l->kind != MODEL_BLOCK && l->n_inputs != 1)
        return fail(c, i, "inputs", "%s takes one input, got %d (hint: only add and block join several inputs)",
                    model_kind_name(l->kind), l->n_inputs);
#define SHAPE_OF(ix) ((ix) < 0 ? &m->input : &m->layers[(ix)].out_shape)
    l->in_shape = *SHAPE_OF(l->inputs[0]);
    if (l->kind == MODEL_ADD) {
        for (int k = 1; k < l->n_inputs; k++)
            if (!shape_eq(SHAPE_OF(l->inputs[k]), &l->in_shape)) {
                char a[96], b[96];
                model_shape_str(&l->in_shape, a, sizeof a);
                model_shape_str(SHAPE_OF(l->inputs[k]), b, sizeof b);
                return fail(c, i, "inputs", "expected every input to have the shape %s of the first, got %s for input %d (\"%s\") (hint: a projection (1x1 conv) makes shapes agree)",
                            a, b, k, l->inputs[k] < 0 ? "input" : m->layers[l->inputs[k]].name);
            }
    } else if (l->n_inputs > 1) {
        int64_t total = 0;
        for (int k = 0; k < l->n_inputs; k++) total += model_shape_elems(SHAPE_OF(l->inputs[k]));
        if (total > MODEL_MAX_ELEMS)
            return fail(c, i, "inputs", "inputs hold more than 2^40 elements per sample (hint: check the producers)");
        l->in_shape = (model_shape){1, {total}};
    }
#undef SHAPE_OF
    return CL_OK;
}

int model_derive(model *m, const char *file, cl_err *e)
{
    dctx c = {m, file, e};
    if (m->n_layers < 1 || m->n_layers > MODEL_MAX_LAYERS || !m->layers)
        return cl_fail(e, CL_EINPUT, "%s: layers: %d layers (hint: a model has 1 to %d layers)",
                       file, m->n_layers, MODEL_MAX_LAYERS);
    if (!shape_valid(&m->input)) {
        char sh[96];
        model_shape_str(&m->input, sh, sizeof sh);
        return cl_fail(e, CL_EINPUT, "%s: input.shape: %s is not a valid shape (hint: [N] or [C,H,W], sizes >= 1, at most 2^40 elements)",
                       file, sh);
    }
    if ((unsigned)m->dtype >= MODEL_DTYPE_COUNT)
        return cl_fail(e, CL_EINPUT, "%s: input.dtype: unknown dtype %d (hint: float32, float16 or bfloat16)", file, (int)m->dtype);
    if (m->classes < 0)
        return cl_fail(e, CL_EINPUT, "%s: classes: %d (hint: a positive label count, or 0)", file, m->classes);
    int rc = check_names(&c, m);
    if (rc) return rc;

    /* grad[i]: layer i's output depends on some parameter, so its
     * consumers must propagate an input-gradient back to it */
    char *grad = cl_calloc((size_t)m->n_layers, 1);
    m->is_dag = 0;
    uint64_t params = 0; /* running total, kept <= 2^53 so model_sum cannot wrap */
    for (int i = 0; i < m->n_layers && !rc; i++) {
        model_layer *l = &m->layers[i];
        rc = check_inputs(&c, m, i);
        if (rc) break;
        if (!(l->n_inputs == 1 && l->inputs[0] == i - 1)) m->is_dag = 1;
        int need = 0;
        for (int k = 0; k < l->n_inputs; k++)
            if (l->inputs[k] >= 0 && grad[l->inputs[k]]) need = 1;
        rc = derive_layer(&c, m, i, need);
        if (rc) break;
        if (l->params > (uint64_t)MODEL_MAX_PARAMS - params) {
            rc = fail(&c, i, NULL, "the model's parameters add up to more than 2^53 here (hint: check the params of the layers so far)");
            break;
        }
        params += l->params;
        l->out_elems = (uint64_t)model_shape_elems(&l->out_shape);
        grad[i] = (char)(need || l->params > 0);
    }
    free(grad);
    return rc;
}

model_totals model_sum(const model *m)
{
    model_totals t = {0};
    for (int i = 0; i < m->n_layers; i++) {
        const model_layer *l = &m->layers[i];
        t.fwd_flops += l->fwd_flops;
        t.bwd_in_flops += l->bwd_in_flops;
        t.bwd_w_flops += l->bwd_w_flops;
        t.macs += l->macs;
        t.params += l->params;
        t.out_elems += l->out_elems;
        t.stash_elems += l->stash_elems;
    }
    return t;
}

uint64_t *model_cut_elems(const model *m)
{
    int n = m->n_layers;
    /* last[p + 1]: the last layer reading producer p (p = -1: the input) */
    int *last = cl_malloc((size_t)(n + 1) * sizeof *last);
    for (int p = 0; p <= n; p++) last[p] = -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < m->layers[i].n_inputs; k++) last[m->layers[i].inputs[k] + 1] = i;
    /* producer p crosses the cuts after p .. last - 1: a difference array */
    int64_t *diff = cl_calloc((size_t)n + 1, sizeof *diff);
    for (int p = -1; p < n; p++) {
        int end = last[p + 1];
        int start = p < 0 ? 0 : p;
        if (end <= start) continue;
        int64_t sz = p < 0 ? model_shape_elems(&m->input) : (int64_t)m->layers[p].out_elems;
        diff[start] += sz;
        diff[end] -= sz;
    }
    uint64_t *cut = cl_malloc((size_t)n * sizeof *cut);
    int64_t run = 0;
    for (int i = 0; i < n; i++) {
        run += diff[i];
        cut[i] = (uint64_t)run;
    }
    free(diff);
    free(last);
    return cut;
}
