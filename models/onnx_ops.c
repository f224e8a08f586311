/* onnx_ops.c - shape and cost of each ONNX operator the importer knows.
 *
 * Shapes follow the ONNX operator definitions (onnx/docs/Operators.md) for
 * the operator sets ONNX_OPSET_MIN..ONNX_OPSET_MAX.  Costs are whole-tensor
 * forward FLOPs (a multiply-accumulate is two), divided by the batch by the
 * caller; the per-element counts are those of docs/formats.md, "Importing
 * ONNX", and match the model format's own rules where a native kind exists
 * (batchnorm2d 7n, softmax 5n, a pool k^2 per output).
 */
#include <string.h>

#include "onnx_graph.h"

int64_t ox_elems(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

int ox_check_dims(const ox_node *n, const char *what, int rank, const int64_t *d, cl_err *e)
{
    if (rank < 0 || rank > ONNX_MAX_RANK)
        return cl_fail(e, CL_EINPUT, "%s: %s: %s has rank %d (hint: at most %d dimensions)",
                       n->file, n->label, what, rank, ONNX_MAX_RANK);
    int64_t total = 1;
    for (int i = 0; i < rank; i++) {
        if (d[i] < 0)
            return cl_fail(e, CL_EINPUT, "%s: %s: %s has a negative dimension %lld at axis %d",
                           n->file, n->label, what, (long long)d[i], i);
        if (d[i] > ONNX_MAX_DIM)
            return cl_fail(e, CL_EINPUT, "%s: %s: %s dimension %lld at axis %d is above the limit 2^31",
                           n->file, n->label, what, (long long)d[i], i);
        if (d[i] == 0)
            return cl_fail(e, CL_EINPUT, "%s: %s: %s has an empty dimension at axis %d (hint: every size must be >= 1)",
                           n->file, n->label, what, i);
        /* d[i] <= 2^31 and total <= 2^40 x 2^31 before the check: no overflow */
        if (total > (MODEL_MAX_ELEMS * (int64_t)1024) / d[i])
            return cl_fail(e, CL_EINPUT, "%s: %s: %s has more than 2^50 elements (hint: a sane model keeps tensors far below)",
                           n->file, n->label, what);
        total *= d[i];
    }
    return CL_OK;
}

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *np, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++)
        if (np->attribute[i]->name && !strcmp(np->attribute[i]->name, name)) return np->attribute[i];
    return NULL;
}

int64_t ox_attr_i(const Onnx__NodeProto *np, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = ox_attr(np, name);
    return a && a->has_i ? a->i : def;
}

static float attr_f(const Onnx__NodeProto *np, const char *name, float def)
{
    const Onnx__AttributeProto *a = ox_attr(np, name);
    return a && a->has_f ? a->f : def;
}

/* An int list attribute of at most `cap` entries: count, or -1 absent. */
static int attr_ints(const ox_node *n, const char *name, int64_t *out, int cap, cl_err *e)
{
    const Onnx__AttributeProto *a = ox_attr(n->np, name);
    if (!a) return -1;
    if (a->n_ints > (size_t)cap) {
        cl_fail(e, CL_EINPUT, "%s: %s: attribute %s has %zu values (hint: at most %d)",
                n->file, n->label, name, a->n_ints, cap);
        return -2;
    }
    for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
    return (int)a->n_ints;
}

static int need(const ox_node *n, int k, cl_err *e)
{
    for (int i = 0; i < k; i++)
        if (i >= n->n_in || !n->in[i])
            return cl_fail(e, CL_EINPUT, "%s: %s: input %d is missing (hint: the operator needs %d inputs)",
                           n->file, n->label, i, k);
    return CL_OK;
}

static void same_as(ox_cost *c, const ox_tensor *t)
{
    c->rank = t->rank;
    memcpy(c->d, t->d, sizeof c->d);
}

/* Normalise an axis in [-rank, rank) (or [-rank, rank] when `incl`). */
static int axis_of(const ox_node *n, int64_t a, int rank, int incl, int *out, cl_err *e)
{
    int hi = rank + (incl ? 1 : 0);
    if (a < -hi || a >= hi)
        return cl_fail(e, CL_EINPUT, "%s: %s: axis %lld out of range for rank %d", n->file,
                       n->label, (long long)a, rank);
    *out = (int)(a < 0 ? a + hi : a);
    return CL_OK;
}

/* Multidirectional (numpy) broadcast of every present input. */
static int broadcast(const ox_node *n, ox_cost *c, cl_err *e)
{
    c->rank = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ox_tensor *t = n->in[i];
        if (!t) continue;
        int r = t->rank > c->rank ? t->rank : c->rank;
        int64_t d[ONNX_MAX_RANK];
        for (int k = 0; k < r; k++) {
            int ka = k - (r - c->rank), kb = k - (r - t->rank);
            int64_t a = ka >= 0 ? c->d[ka] : 1, b = kb >= 0 ? t->d[kb] : 1;
            if (a != b && a != 1 && b != 1)
                return cl_fail(e, CL_EINPUT, "%s: %s: input %d's dimension %lld does not broadcast against %lld at axis %d",
                               n->file, n->label, i, (long long)b, (long long)a, k);
            d[k] = a == 1 ? b : a;
        }
        c->rank = r;
        memcpy(c->d, d, sizeof d);
    }
    return CL_OK;
}

/* Spatial output sizes of Conv and the pools into c->d[2..]; *kprod is the
 * product of the kernel sizes.  kernel: the kernel's spatial sizes. */
static int window(const ox_node *n, const ox_tensor *x, const int64_t *kernel, ox_cost *c,
                  int64_t *kprod, cl_err *e)
{
    int sp = x->rank - 2;
    int64_t strides[ONNX_MAX_RANK], pads[2 * ONNX_MAX_RANK], dil[ONNX_MAX_RANK];
    int ns = attr_ints(n, "strides", strides, sp, e), np = attr_ints(n, "pads", pads, 2 * sp, e);
    int nd = attr_ints(n, "dilations", dil, sp, e);
    if (ns == -2 || np == -2 || nd == -2) return CL_EINPUT;
    if ((ns >= 0 && ns != sp) || (np >= 0 && np != 2 * sp) || (nd >= 0 && nd != sp))
        return cl_fail(e, CL_EINPUT, "%s: %s: strides, pads or dilations do not match %d spatial axes",
                       n->file, n->label, sp);
    const Onnx__AttributeProto *ap = ox_attr(n->np, "auto_pad");
    int same = 0, valid = 0;
    if (ap && ap->has_s) {
        same = ap->s.len >= 4 && !memcmp(ap->s.data, "SAME", 4);
        valid = ap->s.len == 5 && !memcmp(ap->s.data, "VALID", 5);
    }
    int ceil_mode = (int)ox_attr_i(n->np, "ceil_mode", 0);
    *kprod = 1;
    c->rank = x->rank;
    c->d[0] = x->d[0];
    for (int k = 0; k < sp; k++) {
        int64_t s = ns >= 0 ? strides[k] : 1, dl = nd >= 0 ? dil[k] : 1;
        int64_t pb = np >= 0 && !valid && !same ? pads[k] : 0, pe = np >= 0 && !valid && !same ? pads[k + sp] : 0;
        if (s < 1 || dl < 1 || pb < 0 || pe < 0 || kernel[k] < 1 || s > ONNX_MAX_DIM ||
            dl > ONNX_MAX_DIM || pb > ONNX_MAX_DIM || pe > ONNX_MAX_DIM || kernel[k] > ONNX_MAX_DIM)
            return cl_fail(e, CL_EINPUT, "%s: %s: kernel, stride, dilation or padding out of range at spatial axis %d",
                           n->file, n->label, k);
        int64_t span = dl * (kernel[k] - 1) + 1, in = x->d[2 + k] + pb + pe, o;
        if (same) o = (x->d[2 + k] + s - 1) / s;
        else {
            if (in < span)
                return cl_fail(e, CL_EINPUT, "%s: %s: kernel %lld is larger than the padded input %lld",
                               n->file, n->label, (long long)span, (long long)in);
            o = (in - span + (ceil_mode ? s - 1 : 0)) / s + 1;
        }
        c->d[2 + k] = o;
        *kprod *= kernel[k];
    }
    /* the native conv2d / pools: square, symmetric, no dilation, floor */
    int square = sp == 2 && kernel[0] == kernel[1] && !same && !ceil_mode;
    int64_t s0 = ns >= 0 ? strides[0] : 1, p0 = np >= 0 && !valid ? pads[0] : 0;
    for (int k = 0; square && k < sp; k++)
        square = (ns >= 0 ? strides[k] : 1) == s0 && (nd >= 0 ? dil[k] : 1) == 1 &&
                 (np >= 0 && !valid ? pads[k] == p0 && pads[k + sp] == p0 : p0 == 0);
    c->kernel = square ? kernel[0] : 0;
    c->stride = s0;
    c->padding = p0;
    return CL_OK;
}

static int op_conv(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 2, e)) return CL_EINPUT;
    const ox_tensor *x = n->in[0], *w = n->in[1];
    if (x->rank < 3 || w->rank != x->rank)
        return cl_fail(e, CL_EINPUT, "%s: %s: expected input and weight of equal rank >= 3, got %d and %d",
                       n->file, n->label, x->rank, w->rank);
    int64_t g = ox_attr_i(n->np, "group", 1);
    if (g < 1 || x->d[1] % g || w->d[0] % g || w->d[1] * g != x->d[1])
        return cl_fail(e, CL_EINPUT, "%s: %s: %lld input channels do not fit weight [%lld,%lld,...] with group %lld",
                       n->file, n->label, (long long)x->d[1], (long long)w->d[0], (long long)w->d[1], (long long)g);
    int64_t kprod;
    if (window(n, x, w->d + 2, c, &kprod, e)) return CL_EINPUT;
    c->d[1] = w->d[0];
    int64_t m = ox_elems(c->rank, c->d);
    c->macs = (double)m * (double)w->d[1] * (double)kprod;
    c->flops = 2 * c->macs;
    c->stash_inputs = 1;
    int bias = n->n_in > 2 && n->in[2];
    if (g == 1 && c->kernel && w->layer == OX_CONST && x->rank == 4) {
        c->kind = MODEL_CONV2D;
        c->out_channels = w->d[0];
        c->in_channels = w->d[1];
        c->bias = bias;
    }
    return CL_OK;
}

static int op_pool(const ox_node *n, ox_cost *c, int kind, cl_err *e)
{
    if (need(n, 1, e)) return CL_EINPUT;
    const ox_tensor *x = n->in[0];
    int sp = x->rank - 2;
    int64_t kernel[ONNX_MAX_RANK], kprod;
    if (sp < 1 || attr_ints(n, "kernel_shape", kernel, sp, e) != sp)
        return cl_fail(e, CL_EINPUT, "%s: %s: expected kernel_shape with %d values for an input of rank %d",
                       n->file, n->label, sp, x->rank);
    if (window(n, x, kernel, c, &kprod, e)) return CL_EINPUT;
    c->d[1] = x->d[1];
    c->flops = (double)kprod * (double)ox_elems(c->rank, c->d);
    c->stash_inputs = kind == MODEL_MAXPOOL2D;
    if (c->kernel && x->rank == 4 && 2 * c->padding <= c->kernel) c->kind = kind;
    return CL_OK;
}

static int op_gemm(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 2, e)) return CL_EINPUT;
    const ox_tensor *a = n->in[0], *b = n->in[1];
    if (a->rank != 2 || b->rank != 2)
        return cl_fail(e, CL_EINPUT, "%s: %s: Gemm takes 2-D inputs, got ranks %d and %d",
                       n->file, n->label, a->rank, b->rank);
    int ta = ox_attr_i(n->np, "transA", 0) != 0, tb = ox_attr_i(n->np, "transB", 0) != 0;
    int64_t M = a->d[ta], K = a->d[!ta], Kb = b->d[tb], N = b->d[!tb];
    if (K != Kb)
        return cl_fail(e, CL_EINPUT, "%s: %s: inner dimensions %lld and %lld differ",
                       n->file, n->label, (long long)K, (long long)Kb);
    c->rank = 2;
    c->d[0] = M;
    c->d[1] = N;
    c->macs = (double)M * (double)N * (double)K;
    c->flops = 2 * c->macs;
    c->stash_inputs = 1;
    if (!ta && b->layer == OX_CONST && a->layer != OX_CONST && M == n->batch) {
        c->kind = MODEL_LINEAR;
        c->out_features = N;
        c->in_features = K;
        c->bias = n->n_in > 2 && n->in[2];
    }
    return CL_OK;
}

static int op_matmul(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 2, e)) return CL_EINPUT;
    ox_tensor a = *n->in[0], b = *n->in[1];
    int a1 = a.rank == 1, b1 = b.rank == 1;
    if (a.rank < 1 || b.rank < 1)
        return cl_fail(e, CL_EINPUT, "%s: %s: MatMul of a scalar", n->file, n->label);
    if (a1) { a.rank = 2; a.d[1] = a.d[0]; a.d[0] = 1; }
    if (b1) { b.rank = 2; b.d[1] = 1; }
    int64_t M = a.d[a.rank - 2], K = a.d[a.rank - 1], Kb = b.d[b.rank - 2], N = b.d[b.rank - 1];
    if (K != Kb)
        return cl_fail(e, CL_EINPUT, "%s: %s: inner dimensions %lld and %lld differ",
                       n->file, n->label, (long long)K, (long long)Kb);
    /* batch dimensions broadcast */
    ox_node bn = *n;
    ox_tensor ba = a, bb = b;
    ba.rank -= 2;
    bb.rank -= 2;
    bn.in[0] = &ba;
    bn.in[1] = &bb;
    bn.n_in = 2;
    if (broadcast(&bn, c, e)) return CL_EINPUT;
    int64_t batch = ox_elems(c->rank, c->d);
    if (!a1) c->d[c->rank++] = M;
    if (!b1) c->d[c->rank++] = N;
    c->macs = (double)batch * (double)M * (double)N * (double)K;
    c->flops = 2 * c->macs;
    c->stash_inputs = 1;
    if (n->in[0]->rank == 2 && n->in[1]->rank == 2 && n->in[1]->layer == OX_CONST &&
        n->in[0]->layer != OX_CONST && M == n->batch) {
        c->kind = MODEL_LINEAR;
        c->out_features = N;
        c->in_features = K;
        c->bias = 0;
    }
    return CL_OK;
}

static int op_concat(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 1, e)) return CL_EINPUT;
    int ax = 0;
    if (axis_of(n, ox_attr_i(n->np, "axis", 0), n->in[0]->rank, 0, &ax, e)) return CL_EINPUT;
    same_as(c, n->in[0]);
    c->d[ax] = 0;
    int known = n->in[0]->n_vals >= 0 && n->in[0]->rank == 1;
    c->n_vals = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ox_tensor *t = n->in[i];
        if (!t) continue;
        if (t->rank != c->rank)
            return cl_fail(e, CL_EINPUT, "%s: %s: input %d has rank %d, expected %d",
                           n->file, n->label, i, t->rank, c->rank);
        for (int k = 0; k < c->rank; k++)
            if (k != ax && t->d[k] != c->d[k])
                return cl_fail(e, CL_EINPUT, "%s: %s: input %d's dimension %lld differs from %lld at axis %d",
                               n->file, n->label, i, (long long)t->d[k], (long long)c->d[k], k);
        c->d[ax] += t->d[ax];
        if (c->d[ax] > ONNX_MAX_DIM)
            return cl_fail(e, CL_EINPUT, "%s: %s: the joined dimension exceeds 2^31", n->file, n->label);
        known = known && t->n_vals >= 0 && c->n_vals + t->n_vals <= (int)(sizeof c->vals / sizeof c->vals[0]);
        for (int k = 0; known && k < t->n_vals; k++) c->vals[c->n_vals++] = t->vals[k];
    }
    if (!known) c->n_vals = -1;
    return CL_OK;
}

static int op_reshape(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 2, e)) return CL_EINPUT;
    const ox_tensor *x = n->in[0], *s = n->in[1];
    if (s->n_vals < 0 || s->rank != 1)
        return cl_fail(e, CL_EINPUT, "%s: %s: the target shape is computed at run time (hint: export with constant folding, fixed input shape)",
                       n->file, n->label);
    if (s->n_vals > ONNX_MAX_RANK)
        return cl_fail(e, CL_EINPUT, "%s: %s: target shape of rank %d (hint: at most %d)",
                       n->file, n->label, s->n_vals, ONNX_MAX_RANK);
    int64_t total = ox_elems(x->rank, x->d), known = 1;
    int infer = -1, allowzero = ox_attr_i(n->np, "allowzero", 0) != 0;
    c->rank = s->n_vals;
    for (int k = 0; k < c->rank; k++) {
        int64_t v = s->vals[k];
        if (v == 0 && !allowzero) {
            if (k >= x->rank)
                return cl_fail(e, CL_EINPUT, "%s: %s: target 0 copies axis %d the input lacks", n->file, n->label, k);
            v = x->d[k];
        }
        if (v == -1 && infer < 0) { infer = k; c->d[k] = 1; continue; }
        if (v < 1 || v > ONNX_MAX_DIM)
            return cl_fail(e, CL_EINPUT, "%s: %s: target dimension %lld at axis %d is out of range",
                           n->file, n->label, (long long)s->vals[k], k);
        c->d[k] = v;
        if (known > total / v) { known = -1; break; } /* more than the input holds */
        known *= v;
    }
    if (infer >= 0 && known > 0 && total % known == 0) c->d[infer] = total / known;
    else if (infer >= 0) known = -1;
    if (infer >= 0 ? known < 0 : known != total)
        return cl_fail(e, CL_EINPUT, "%s: %s: target shape does not hold the input's %lld elements",
                       n->file, n->label, (long long)total);
    return CL_OK;
}

static int op_transpose(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 1, e)) return CL_EINPUT;
    const ox_tensor *x = n->in[0];
    int64_t perm[ONNX_MAX_RANK];
    int np = attr_ints(n, "perm", perm, ONNX_MAX_RANK, e), seen = 0;
    if (np == -2) return CL_EINPUT;
    if (np < 0) { np = x->rank; for (int k = 0; k < np; k++) perm[k] = np - 1 - k; }
    if (np != x->rank)
        return cl_fail(e, CL_EINPUT, "%s: %s: perm has %d entries for rank %d", n->file, n->label, np, x->rank);
    c->rank = np;
    for (int k = 0; k < np; k++) {
        if (perm[k] < 0 || perm[k] >= np || (seen >> perm[k]) & 1)
            return cl_fail(e, CL_EINPUT, "%s: %s: perm is not a permutation", n->file, n->label);
        seen |= 1 << perm[k];
        c->d[k] = x->d[perm[k]];
    }
    return CL_OK;
}

static int op_flatten(const ox_node *n, ox_cost *c, cl_err *e)
{
    if (need(n, 1, e)) return CL_EINPUT;
    const ox_tensor *x = n->in[0];
    int ax = 0;
    if (axis_of(n, ox_attr_i(n->np, "axis", 1), x->rank, 1, &ax, e)) return CL_EINPUT;
    c->rank = 2;
    c->d[0] = ox_elems(ax, x->d);
    c->d[1] = ox_elems(x->rank - ax, x->d + ax);
    if (ax == 1 && x->rank == 4) c->kind = MODEL_FLATTEN;
    return CL_OK;
}

/* Elementwise, one input: forward FLOPs per element. */
static const struct { const char *op; double per; int stash; } unary[] = {
    {"Relu", 1, 1}, {"Sigmoid", 4, 1}, {"Tanh", 4, 1}, {"Gelu", 8, 1}, {"Clip", 2, 1},
    {"Softmax", 5, 1}, {"Identity", 0, 0}, {"Dropout", 1, 1},
};

static const char *const binary[] = {"Add", "Mul", "Sub", "Div", "Sum"};

int ox_infer(const ox_node *n, ox_cost *c, cl_err *e)
{
    const char *op = n->np->op_type ? n->np->op_type : "";
    memset(c, 0, sizeof *c);
    c->kind = -1;
    c->n_vals = -1;
    if (n->np->domain && n->np->domain[0] && strcmp(n->np->domain, "ai.onnx")) return 1;
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++) {
        if (strcmp(op, unary[i].op)) continue;
        if (need(n, 1, e)) return CL_EINPUT;
        same_as(c, n->in[0]);
        c->flops = unary[i].per * (double)ox_elems(c->rank, c->d);
        c->stash_inputs = unary[i].stash;
        if (!strcmp(op, "Relu")) c->kind = MODEL_RELU;
        if (!strcmp(op, "Dropout")) {
            double p = n->opset < 12 ? attr_f(n->np, "ratio", 0.5f) : 0.5;
            if (n->n_in > 1 && n->in[1] && n->opset >= 12)
                p = -1; /* the ratio is a tensor: keep it a block */
            if (p >= 0 && p < 1) { c->kind = MODEL_DROPOUT; c->dropout_p = p; }
        }
        return CL_OK;
    }
    for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++) {
        if (strcmp(op, binary[i])) continue;
        if (need(n, 1, e) || broadcast(n, c, e)) return CL_EINPUT;
        int k = 0, act = 0, same = 1;
        for (int j = 0; j < n->n_in; j++) {
            if (!n->in[j]) continue;
            k++;
            act += n->in[j]->layer != OX_CONST;
            same = same && n->in[j]->rank == c->rank &&
                   !memcmp(n->in[j]->d, c->d, sizeof(int64_t) * (size_t)c->rank);
        }
        c->flops = (double)(k > 1 ? k - 1 : 1) * (double)ox_elems(c->rank, c->d);
        c->stash_inputs = strcmp(op, "Add") && strcmp(op, "Sum") && strcmp(op, "Sub");
        if ((!strcmp(op, "Add") || !strcmp(op, "Sum")) && act == k && k >= 2 && same)
            c->kind = MODEL_ADD;
        return CL_OK;
    }
    if (!strcmp(op, "Conv")) return op_conv(n, c, e);
    if (!strcmp(op, "MaxPool")) return op_pool(n, c, MODEL_MAXPOOL2D, e);
    if (!strcmp(op, "AveragePool")) return op_pool(n, c, MODEL_AVGPOOL2D, e);
    if (!strcmp(op, "GlobalAveragePool") || !strcmp(op, "GlobalMaxPool")) {
        if (need(n, 1, e)) return CL_EINPUT;
        const ox_tensor *x = n->in[0];
        if (x->rank < 3)
            return cl_fail(e, CL_EINPUT, "%s: %s: expected an input of rank >= 3, got %d", n->file, n->label, x->rank);
        same_as(c, x);
        for (int k = 2; k < c->rank; k++) c->d[k] = 1;
        c->flops = (double)ox_elems(x->rank, x->d);
        c->stash_inputs = op[6] == 'M';
        if (x->rank == 4 && x->d[2] == x->d[3] && op[6] == 'A') {
            c->kind = MODEL_AVGPOOL2D;
            c->kernel = c->stride = x->d[2];
        }
        return CL_OK;
    }
    if (!strcmp(op, "Gemm")) return op_gemm(n, c, e);
    if (!strcmp(op, "MatMul")) return op_matmul(n, c, e);
    if (!strcmp(op, "BatchNormalization") || !strcmp(op, "LayerNormalization")) {
        if (need(n, 2, e)) return CL_EINPUT;
        same_as(c, n->in[0]);
        c->flops = 7 * (double)ox_elems(c->rank, c->d);
        c->stash_inputs = 1;
        if (op[0] == 'B' && c->rank == 4 && n->in[1]->rank == 1 && n->in[1]->d[0] == c->d[1] &&
            n->n_in > 2 && n->in[2] && n->in[2]->layer == OX_CONST && n->in[1]->layer == OX_CONST)
            c->kind = MODEL_BATCHNORM2D;
        return CL_OK;
    }
    if (!strcmp(op, "Concat")) return op_concat(n, c, e);
    if (!strcmp(op, "Reshape")) return op_reshape(n, c, e);
    if (!strcmp(op, "Flatten")) return op_flatten(n, c, e);
    if (!strcmp(op, "Transpose")) return op_transpose(n, c, e);
    if (!strcmp(op, "Pad")) {
        if (need(n, 1, e)) return CL_EINPUT;
        const ox_tensor *x = n->in[0];
        int64_t pads[2 * ONNX_MAX_RANK];
        int np;
        if (n->opset < 11) {
            if ((np = attr_ints(n, "pads", pads, 2 * ONNX_MAX_RANK, e)) == -2) return CL_EINPUT;
        } else if (n->n_in > 1 && n->in[1] && n->in[1]->n_vals >= 0 && n->in[1]->n_vals <= 2 * ONNX_MAX_RANK) {
            np = n->in[1]->n_vals;
            memcpy(pads, n->in[1]->vals, sizeof(int64_t) * (size_t)np);
        } else
            return cl_fail(e, CL_EINPUT, "%s: %s: the pads are computed at run time (hint: export with constant folding)",
                           n->file, n->label);
        if (np != 2 * x->rank || (n->n_in > 3 && n->in[3]))
            return cl_fail(e, CL_EINPUT, "%s: %s: expected %d pads for rank %d and no axes input",
                           n->file, n->label, 2 * x->rank, x->rank);
        same_as(c, x);
        for (int k = 0; k < x->rank; k++) {
            if (pads[k] < -ONNX_MAX_DIM || pads[k] > ONNX_MAX_DIM || pads[k + x->rank] < -ONNX_MAX_DIM ||
                pads[k + x->rank] > ONNX_MAX_DIM)
                return cl_fail(e, CL_EINPUT, "%s: %s: pad out of range at axis %d", n->file, n->label, k);
            c->d[k] += pads[k] + pads[k + x->rank];
        }
        return CL_OK; /* dims checked by the caller */
    }
    if (!strcmp(op, "Shape")) {
        if (need(n, 1, e)) return CL_EINPUT;
        c->rank = 1;
        c->d[0] = n->in[0]->rank;
        if (c->d[0] < 1)
            return cl_fail(e, CL_EINPUT, "%s: %s: Shape of a scalar", n->file, n->label);
        c->n_vals = n->in[0]->rank;
        memcpy(c->vals, n->in[0]->d, sizeof(int64_t) * (size_t)c->n_vals);
        return CL_OK;
    }
    return 1;
}
