/* model.c - model files: names, loading, saving (see model.h).
 *
 * The loader reads the JSON into a model struct, resolves layer names to
 * indices and hands the struct to model_derive (model_derive.c), which does
 * every check that does not depend on the file's syntax: shapes, sizes,
 * ordering.  The serialiser writes the fields as given, never the derived
 * ones, so load(save(m)) derives exactly m again.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base/jsonx.h"
#include "model.h"

#define FORMAT "cleave-model"
#define VERSION 1

static const char *const kind_names[] = {
    [MODEL_CONV2D] = "conv2d",       [MODEL_LINEAR] = "linear",
    [MODEL_RELU] = "relu",           [MODEL_MAXPOOL2D] = "maxpool2d",
    [MODEL_AVGPOOL2D] = "avgpool2d", [MODEL_FLATTEN] = "flatten",
    [MODEL_DROPOUT] = "dropout",     [MODEL_BATCHNORM2D] = "batchnorm2d",
    [MODEL_ADD] = "add",             [MODEL_SOFTMAX_XENT] = "softmax_xent",
    [MODEL_BLOCK] = "block",         [MODEL_PATCH_EMBED] = "patch_embed",
    [MODEL_POS_EMBED] = "pos_embed", [MODEL_LAYERNORM] = "layernorm",
    [MODEL_GELU] = "gelu",           [MODEL_MEANPOOL] = "meanpool",
    [MODEL_ATTENTION] = "attention", [MODEL_MLP] = "mlp",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == MODEL_KIND_COUNT,
               "kind_names out of sync with model_kind");

static const char *const dtype_names[] = {
    [MODEL_F32] = "float32", [MODEL_F16] = "float16", [MODEL_BF16] = "bfloat16"};
static const int dtype_bytes[] = {[MODEL_F32] = 4, [MODEL_F16] = 2, [MODEL_BF16] = 2};
_Static_assert(sizeof dtype_names / sizeof dtype_names[0] == MODEL_DTYPE_COUNT,
               "dtype_names out of sync with model_dtype");
_Static_assert(sizeof dtype_bytes / sizeof dtype_bytes[0] == MODEL_DTYPE_COUNT,
               "dtype_bytes out of sync with model_dtype");

const char *model_kind_name(model_kind k)
{
    return (unsigned)k < MODEL_KIND_COUNT ? kind_names[k] : "?";
}

int model_kind_from_name(const char *name)
{
    for (int k = 0; k < MODEL_KIND_COUNT; k++)
        if (strcmp(kind_names[k], name) == 0) return k;
    return -1;
}

static const char *const unit_names[] = {"sample", "minibatch"};
static const char *const unit_plurals[] = {"samples", "minibatches"};
_Static_assert(sizeof unit_names / sizeof unit_names[0] == MODEL_UNIT_COUNT &&
                   sizeof unit_plurals / sizeof unit_plurals[0] == MODEL_UNIT_COUNT,
               "unit names out of sync with model_unit");

const char *model_unit_name(model_unit u)
{
    return (unsigned)u < MODEL_UNIT_COUNT ? unit_names[u] : "?";
}

const char *model_unit_plural(model_unit u)
{
    return (unsigned)u < MODEL_UNIT_COUNT ? unit_plurals[u] : "?";
}

const char *model_dtype_name(model_dtype t)
{
    return (unsigned)t < MODEL_DTYPE_COUNT ? dtype_names[t] : "?";
}

int model_dtype_bytes(model_dtype t)
{
    return (unsigned)t < MODEL_DTYPE_COUNT ? dtype_bytes[t] : 0;
}

int64_t model_shape_elems(const model_shape *s)
{
    int64_t n = 1;
    for (int k = 0; k < s->ndim; k++) n *= s->d[k];
    return n;
}

void model_shape_str(const model_shape *s, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    n += (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < s->ndim && n < cap; k++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", k ? "," : "", (long long)s->d[k]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

void model_free(model *m)
{
    free(m->layers);
    memset(m, 0, sizeof *m);
}

void model_copy(model *dst, const model *src)
{
    *dst = *src; /* a layer holds no pointers: the layers copy as bytes */
    dst->layers = NULL;
    if (src->n_layers > 0) {
        dst->layers = cl_malloc((size_t)src->n_layers * sizeof *dst->layers);
        memcpy(dst->layers, src->layers, (size_t)src->n_layers * sizeof *dst->layers);
    }
}

void model_block_init(model_layer *l, const char *name, double fwd_flops,
                      double params, double out_bytes, double stash_bytes)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->kind = MODEL_BLOCK;
    l->blk_fwd_flops = fwd_flops;
    l->blk_bwd_flops = 2 * fwd_flops;
    l->blk_bwd_w_flops = params > 0 ? fwd_flops : 0;
    l->blk_params = params;
    l->blk_out_bytes = out_bytes;
    l->blk_stash_bytes = stash_bytes;
}

int model_param_bytes_match(const model *m, double bytes, uint64_t params, int k)
{
    const int sizes[2] = {model_dtype_bytes(m->dtype), 4};
    for (int i = 0; i < 2; i++) {
        double s = sizes[i], full = s * (double)params, slack = 1e-9 * full;
        if (bytes <= full + slack && bytes > full - s * k - slack) return 1;
    }
    return 0;
}

int model_find(const model *m, const char *name)
{
    for (int i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i].name, name) == 0) return i;
    return -1;
}

/* ---------------------------------------------------------------- loading */

/* Members each kind accepts besides kind, name and inputs. */
static const char *const *kind_members(model_kind k)
{
    static const char *const conv[] = {"kind", "name", "inputs", "in_channels", "out_channels",
                                       "kernel", "stride", "padding", "bias", NULL};
    static const char *const lin[] = {"kind", "name", "inputs", "in_features",
                                      "out_features", "bias", NULL};
    static const char *const pool[] = {"kind", "name", "inputs", "kernel", "stride",
                                       "padding", NULL};
    static const char *const drop[] = {"kind", "name", "inputs", "p", NULL};
    static const char *const blk[] = {"kind", "name", "inputs", "fwd_flops", "bwd_flops",
                                      "bwd_w_flops", "params", "out_bytes", "stash_bytes",
                                      "out_shape", NULL};
    static const char *const patch[] = {"kind", "name", "inputs", "patch", "width", NULL};
    static const char *const attn[] = {"kind", "name", "inputs", "heads", NULL};
    static const char *const mlp[] = {"kind", "name", "inputs", "hidden", NULL};
    static const char *const plain[] = {"kind", "name", "inputs", NULL};
    switch (k) {
    case MODEL_PATCH_EMBED: return patch;
    case MODEL_ATTENTION: return attn;
    case MODEL_MLP: return mlp;
    case MODEL_CONV2D: return conv;
    case MODEL_LINEAR: return lin;
    case MODEL_MAXPOOL2D:
    case MODEL_AVGPOOL2D: return pool;
    case MODEL_DROPOUT: return drop;
    case MODEL_BLOCK: return blk;
    default: return plain;
    }
}

/* A shape member: [N] or [C,H,W], every dimension >= 1, product within
 * MODEL_MAX_ELEMS (checked multiplication). */
static int read_shape(jx *j, const cJSON *obj, const char *path, const char *key,
                      int required, model_shape *s)
{
    const cJSON *a;
    int rc = jx_array(j, obj, path, key, required, 1, 16, &a);
    if (rc || !a) return rc;
    char p[256], pi[280];
    jx_join(p, sizeof p, path, key);
    int n = cJSON_GetArraySize(a);
    if (n != 1 && n != 3)
        return jx_fail(j, p, "has %d dimensions (hint: a shape is [features] or [channels, height, width])", n);
    model_shape t = {.ndim = n};
    int64_t prod = 1;
    int k = 0;
    for (const cJSON *it = a->child; it; it = it->next, k++) {
        jx_index(pi, sizeof pi, p, k);
        rc = jx_int_item(j, it, pi, 1, MODEL_MAX_ELEMS, &t.d[k]);
        if (rc) return rc;
        if (__builtin_mul_overflow(prod, t.d[k], &prod) || prod > MODEL_MAX_ELEMS)
            return jx_fail(j, p, "more than 2^40 elements per sample (hint: sizes are per sample, without the batch dimension)");
    }
    *s = t;
    return CL_OK;
}

/* One layer's own members (not its inputs: those need every name first). */
static int read_layer(jx *j, const cJSON *lj, const char *p, int i, model_layer *l,
                      const cJSON **inputs)
{
    if (!cJSON_IsObject(lj))
        return jx_fail(j, p, "expected an object (hint: {\"kind\": \"relu\"} and the kind's members)");
    const cJSON *kv;
    char pk[280];
    int rc = jx_member(j, lj, p, "kind", 1, &kv);
    if (rc) return rc;
    jx_join(pk, sizeof pk, p, "kind");
    if (!cJSON_IsString(kv))
        return jx_fail(j, pk, "expected a string (hint: the layer kind, e.g. \"conv2d\")");
    int k = model_kind_from_name(kv->valuestring);
    if (k < 0)
        return jx_fail(j, pk, "unknown layer kind \"%.40s\" (hint: one of conv2d, linear, relu, maxpool2d, avgpool2d, flatten, dropout, batchnorm2d, add, softmax_xent, block, patch_embed, pos_embed, layernorm, gelu, meanpool, attention, mlp)",
                       kv->valuestring);
    l->kind = (model_kind)k;
    const char *kind = kind_names[k];
    if ((rc = jx_only(j, lj, p, kind_members(l->kind)))) return rc;

    if ((rc = jx_name(j, lj, p, "name", 0, l->name, sizeof l->name))) return rc;
    if (!l->name[0]) snprintf(l->name, sizeof l->name, "%s_%d", kind, i);
    if ((rc = jx_array(j, lj, p, "inputs", 0, 1, MODEL_MAX_INPUTS, inputs))) return rc;

    const int64_t big = (int64_t)1 << 31;
    int64_t v;
    switch (l->kind) {
    case MODEL_CONV2D:
        l->stride = 1;
        l->bias = 1;
        if ((rc = jx_int(j, lj, p, "in_channels", 0, 1, MODEL_MAX_ELEMS, &l->in_channels)) ||
            (rc = jx_int(j, lj, p, "out_channels", 1, 1, MODEL_MAX_ELEMS, &l->out_channels)) ||
            (rc = jx_int(j, lj, p, "kernel", 1, 1, big, &l->kernel)) ||
            (rc = jx_int(j, lj, p, "stride", 0, 1, big, &l->stride)) ||
            (rc = jx_int(j, lj, p, "padding", 0, 0, big, &l->padding)) ||
            (rc = jx_bool(j, lj, p, "bias", 0, &l->bias)))
            return rc;
        break;
    case MODEL_LINEAR:
        l->bias = 1;
        if ((rc = jx_int(j, lj, p, "in_features", 0, 1, MODEL_MAX_ELEMS, &l->in_features)) ||
            (rc = jx_int(j, lj, p, "out_features", 1, 1, MODEL_MAX_ELEMS, &l->out_features)) ||
            (rc = jx_bool(j, lj, p, "bias", 0, &l->bias)))
            return rc;
        break;
    case MODEL_MAXPOOL2D:
    case MODEL_AVGPOOL2D:
        if ((rc = jx_int(j, lj, p, "kernel", 1, 1, big, &l->kernel))) return rc;
        l->stride = l->kernel;
        if ((rc = jx_int(j, lj, p, "stride", 0, 1, big, &l->stride)) ||
            (rc = jx_int(j, lj, p, "padding", 0, 0, big, &l->padding)))
            return rc;
        break;
    case MODEL_DROPOUT:
        l->dropout_p = 0.5;
        if ((rc = jx_num(j, lj, p, "p", 0, 0, 1, &l->dropout_p))) return rc;
        if (l->dropout_p >= 1) {
            char pp[280];
            jx_join(pp, sizeof pp, p, "p");
            return jx_fail(j, pp, "dropout probability must be below 1 (hint: p is the fraction of elements zeroed, 0 <= p < 1)");
        }
        break;
    case MODEL_PATCH_EMBED:
        if ((rc = jx_int(j, lj, p, "patch", 1, 1, big, &l->kernel)) ||
            (rc = jx_int(j, lj, p, "width", 1, 1, big, &l->out_features)))
            return rc;
        break;
    case MODEL_ATTENTION:
        if ((rc = jx_int(j, lj, p, "heads", 1, 1, big, &l->heads))) return rc;
        break;
    case MODEL_MLP:
        if ((rc = jx_int(j, lj, p, "hidden", 1, 1, big, &l->out_features))) return rc;
        break;
    case MODEL_BLOCK: {
        const double huge = HUGE_VAL;
        const int64_t exact = (int64_t)1 << 53;
        if ((rc = jx_num(j, lj, p, "fwd_flops", 1, 0, huge, &l->blk_fwd_flops))) return rc;
        l->blk_bwd_flops = 2 * l->blk_fwd_flops;
        if ((rc = jx_num(j, lj, p, "bwd_flops", 0, 0, huge, &l->blk_bwd_flops))) return rc;
        if ((rc = jx_int(j, lj, p, "params", 1, 0, MODEL_MAX_PARAMS, &v))) return rc;
        l->blk_params = (double)v;
        l->blk_bwd_w_flops = v > 0 ? l->blk_bwd_flops / 2 : 0;
        if ((rc = jx_num(j, lj, p, "bwd_w_flops", 0, 0, huge, &l->blk_bwd_w_flops))) return rc;
        if ((rc = jx_int(j, lj, p, "out_bytes", 1, 1, exact, &v))) return rc;
        l->blk_out_bytes = (double)v;
        if ((rc = jx_int(j, lj, p, "stash_bytes", 1, 0, exact, &v))) return rc;
        l->blk_stash_bytes = (double)v;
        if ((rc = read_shape(j, lj, p, "out_shape", 0, &l->blk_out_shape))) return rc;
        break;
    }
    default:
        break;
    }
    return CL_OK;
}


/* Resolve the "inputs" names of every layer to indices (-1: the model
 * input).  Names must be unique; an input must name an earlier layer. */
static int resolve_inputs(jx *j, model *m, const cJSON **inputs)
{
    int n = m->n_layers, rc = CL_OK;
    model_name_ix *ix = model_names_sorted(m);
    char p[256], q[300];
    for (int k = 1; k < n && !rc; k++)
        if (strcmp(ix[k - 1].name, ix[k].name) == 0) {
            jx_index(q, sizeof q, "layers", ix[k].ix);
            jx_join(p, sizeof p, q, "name");
            rc = jx_fail(j, p, "duplicate layer name \"%s\", also used by layers[%d] (hint: names must be unique; an unnamed layer is called <kind>_<index>)",
                         ix[k].name, ix[k - 1].ix);
        }
    for (int i = 0; i < n && !rc; i++) {
        model_layer *l = &m->layers[i];
        if (strcmp(l->name, "input") == 0) {
            jx_index(p, sizeof p, "layers", i);
            jx_join(q, sizeof q, p, "name");
            rc = jx_fail(j, q, "\"input\" is reserved for the model input (hint: choose another name)");
            break;
        }
        if (!inputs[i]) {
            l->n_inputs = 1;
            l->inputs[0] = i - 1;
            continue;
        }
        int k = 0;
        for (const cJSON *it = inputs[i]->child; it && !rc; it = it->next, k++) {
            jx_index(p, sizeof p, "layers", i);
            jx_join(q, sizeof q, p, "inputs");
            jx_index(p, sizeof p, q, k);
            if (!cJSON_IsString(it)) {
                rc = jx_fail(j, p, "expected a layer name (hint: a string such as \"input\" or an earlier layer's name)");
                break;
            }
            int src = -2;
            if (strcmp(it->valuestring, "input") == 0) src = -1;
            else {
                int found = model_names_find(ix, n, it->valuestring);
                if (found >= 0) src = found;
            }
            if (src == -2)
                rc = jx_fail(j, p, "no layer is called \"%s\" (hint: name an earlier layer, or \"input\" for the model input)",
                             it->valuestring);
            else if (src >= i)
                rc = jx_fail(j, p, "\"%s\" is layers[%d], %s (hint: list layers in topological order: producers before consumers)",
                             it->valuestring, src, src == i ? "this layer itself" : "which comes later");
            for (int t = 0; t < k && !rc; t++)
                if (l->inputs[t] == src)
                    rc = jx_fail(j, p, "\"%s\" is named twice (hint: an add of x with itself is a scale; name each input once)",
                                 it->valuestring);
            if (!rc) l->inputs[k] = src;
        }
        l->n_inputs = k;
    }
    free(ix);
    return rc;
}

static int model_read(jx *j, const cJSON *root, int version, void *out)
{
    static const char *const in_members[] = {"shape", "dtype", NULL};
    model *m = out;
    (void)version;
    int rc;
    if ((rc = jx_name(j, root, "", "name", 1, m->name, sizeof m->name))) return rc;
    const cJSON *in, *layers;
    if ((rc = jx_object(j, root, "", "input", 1, &in)) ||
        (rc = jx_only(j, in, "input", in_members)) ||
        (rc = read_shape(j, in, "input", "shape", 1, &m->input)))
        return rc;
    int dt = MODEL_F32;
    if ((rc = jx_enum(j, in, "input", "dtype", 0, dtype_names, MODEL_DTYPE_COUNT, &dt))) return rc;
    m->dtype = (model_dtype)dt;
    int64_t classes = 0;
    if ((rc = jx_int(j, root, "", "classes", 0, 1, INT32_MAX, &classes))) return rc;
    m->classes = (int)classes;
    int unit = MODEL_UNIT_SAMPLE;
    if ((rc = jx_enum(j, root, "", "unit", 0, unit_names, MODEL_UNIT_COUNT, &unit))) return rc;
    m->unit = (model_unit)unit;

    if ((rc = jx_member(j, root, "", "layers", 0, &layers))) return rc;
    if (!layers)
        return jx_fail(j, "layers", "missing (hint: a model is a list of layers: \"layers\": [{\"kind\": ...}, ...])");
    if (cJSON_IsArray(layers) && cJSON_GetArraySize(layers) == 0)
        return jx_fail(j, "layers", "empty (hint: a model needs at least one layer)");
    if ((rc = jx_array(j, root, "", "layers", 1, 1, MODEL_MAX_LAYERS, &layers))) return rc;

    int n = cJSON_GetArraySize(layers);
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    const cJSON **inputs = cl_calloc((size_t)n, sizeof *inputs);
    char p[64];
    int i = 0;
    for (const cJSON *lj = layers->child; lj && !rc; lj = lj->next, i++) {
        jx_index(p, sizeof p, "layers", i);
        rc = read_layer(j, lj, p, i, &m->layers[i], &inputs[i]);
    }
    if (!rc) rc = resolve_inputs(j, m, inputs);
    free(inputs);
    if (!rc) rc = model_derive(m, j->file, j->e);
    if (!rc) rc = model_tfm_read(j, root, m);
    return rc;
}

static void model_release(void *m) { model_free(m); }

static const char *const model_members[] = {"format", "version", "name", "input", "classes",
                                            "unit", "layers", "transformer", NULL};
static const jx_format model_format = {FORMAT, VERSION, model_members, sizeof(model),
                                       model_read, model_release};

int model_from_json(model *m, const cJSON *root, const char *file, cl_err *e)
{
    return jx_decode(&model_format, root, file, NULL, m, e);
}

int model_load(model *m, const char *path, cl_err *e)
{
    return jx_load(&model_format, path, NULL, m, e);
}

/* ---------------------------------------------------------------- saving */

static cJSON *shape_json(const model_shape *s)
{
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < s->ndim; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->d[k]));
    return a;
}

static cJSON *layer_json(const model *m, int i)
{
    const model_layer *l = &m->layers[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", model_kind_name(l->kind));
    cJSON_AddStringToObject(o, "name", l->name);
    if (!(l->n_inputs == 1 && l->inputs[0] == i - 1)) {
        cJSON *a = cJSON_AddArrayToObject(o, "inputs");
        for (int k = 0; k < l->n_inputs; k++)
            cJSON_AddItemToArray(a, cJSON_CreateString(l->inputs[k] < 0 ? "input"
                                                       : m->layers[l->inputs[k]].name));
    }
    switch (l->kind) {
    case MODEL_CONV2D:
        if (l->in_channels) cJSON_AddNumberToObject(o, "in_channels", (double)l->in_channels);
        cJSON_AddNumberToObject(o, "out_channels", (double)l->out_channels);
        cJSON_AddNumberToObject(o, "kernel", (double)l->kernel);
        cJSON_AddNumberToObject(o, "stride", (double)l->stride);
        cJSON_AddNumberToObject(o, "padding", (double)l->padding);
        cJSON_AddBoolToObject(o, "bias", l->bias);
        break;
    case MODEL_LINEAR:
        if (l->in_features) cJSON_AddNumberToObject(o, "in_features", (double)l->in_features);
        cJSON_AddNumberToObject(o, "out_features", (double)l->out_features);
        cJSON_AddBoolToObject(o, "bias", l->bias);
        break;
    case MODEL_MAXPOOL2D:
    case MODEL_AVGPOOL2D:
        cJSON_AddNumberToObject(o, "kernel", (double)l->kernel);
        cJSON_AddNumberToObject(o, "stride", (double)l->stride);
        cJSON_AddNumberToObject(o, "padding", (double)l->padding);
        break;
    case MODEL_DROPOUT:
        cJSON_AddNumberToObject(o, "p", l->dropout_p);
        break;
    case MODEL_PATCH_EMBED:
        cJSON_AddNumberToObject(o, "patch", (double)l->kernel);
        cJSON_AddNumberToObject(o, "width", (double)l->out_features);
        break;
    case MODEL_ATTENTION:
        cJSON_AddNumberToObject(o, "heads", (double)l->heads);
        break;
    case MODEL_MLP:
        cJSON_AddNumberToObject(o, "hidden", (double)l->out_features);
        break;
    case MODEL_BLOCK:
        cJSON_AddNumberToObject(o, "fwd_flops", l->blk_fwd_flops);
        cJSON_AddNumberToObject(o, "bwd_flops", l->blk_bwd_flops);
        cJSON_AddNumberToObject(o, "bwd_w_flops", l->blk_bwd_w_flops);
        cJSON_AddNumberToObject(o, "params", l->blk_params);
        cJSON_AddNumberToObject(o, "out_bytes", l->blk_out_bytes);
        cJSON_AddNumberToObject(o, "stash_bytes", l->blk_stash_bytes);
        if (l->blk_out_shape.ndim) cJSON_AddItemToObject(o, "out_shape", shape_json(&l->blk_out_shape));
        break;
    default:
        break;
    }
    return o;
}

cJSON *model_to_json(const model *m)
{
    cJSON *root = jx_doc_new(&model_format);
    cJSON_AddStringToObject(root, "name", m->name);
    cJSON *in = cJSON_AddObjectToObject(root, "input");
    cJSON_AddItemToObject(in, "shape", shape_json(&m->input));
    cJSON_AddStringToObject(in, "dtype", model_dtype_name(m->dtype));
    if (m->classes > 0) cJSON_AddNumberToObject(root, "classes", m->classes);
    if (m->unit != MODEL_UNIT_SAMPLE) cJSON_AddStringToObject(root, "unit", model_unit_name(m->unit));
    cJSON *a = cJSON_AddArrayToObject(root, "layers");
    for (int i = 0; i < m->n_layers; i++) cJSON_AddItemToArray(a, layer_json(m, i));
    model_tfm_write(root, m);
    return root;
}

int model_save(const model *m, const char *path, cl_err *e)
{
    return jx_save(path, model_to_json(m), e);
}
