/* onnx_import.c - decode an ONNX file, walk its graph in topological order,
 * and build a cleave model from it (see onnx_import.h; the per-operator
 * shape and cost rules are in onnx_ops.c). */
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "onnx_graph.h"

#define OX_MAX_NODE_INPUTS ((int)(sizeof(((ox_node *)0)->in) / sizeof(ox_tensor *)))

/* ------------------------------------------------------- name -> index */

typedef struct strmap {
    const char **k;
    int *v;
    size_t cap, n;
} strmap;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int sm_get(const strmap *m, const char *key)
{
    if (!m->cap) return -1;
    for (size_t i = fnv(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->k[i]) return -1;
        if (!strcmp(m->k[i], key)) return m->v[i];
    }
}

static void sm_put(strmap *m, const char *key, int v)
{
    if (2 * (m->n + 1) > m->cap) {
        strmap g = {0};
        g.cap = m->cap ? 2 * m->cap : 64;
        g.k = cl_calloc(g.cap, sizeof *g.k);
        g.v = cl_calloc(g.cap, sizeof *g.v);
        for (size_t i = 0; i < m->cap; i++)
            if (m->k[i]) sm_put(&g, m->k[i], m->v[i]);
        free(m->k);
        free(m->v);
        *m = g;
    }
    size_t i = fnv(key) & (m->cap - 1);
    while (m->k[i] && strcmp(m->k[i], key)) i = (i + 1) & (m->cap - 1);
    if (!m->k[i]) m->n++;
    m->k[i] = key;
    m->v[i] = v;
}

static void sm_free(strmap *m)
{
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------- state */

typedef struct ox {
    const char *file;
    const onnx_import_opts *o;
    onnx_import_stats *st;
    const Onnx__GraphProto *g;
    ox_tensor *t;
    int nt, capt;
    strmap tix;          /* tensor name -> index in t */
    char *counted;       /* per initializer: parameters already given out */
    model_layer *L;
    int nl, capl;
    strmap lnames;       /* layer names taken (keys in names[]) */
    char **names;        /* owned copies of the layer names */
    int nnames;
    double *out_ps;      /* per layer: output elements per sample, as computed here */
    int64_t batch, opset;
    model_dtype dtype;
} ox;

static int new_tensor(ox *x, const char *name)
{
    if (x->nt == x->capt) {
        x->capt = x->capt ? 2 * x->capt : 256;
        x->t = cl_realloc(x->t, sizeof *x->t * (size_t)x->capt);
    }
    ox_tensor *t = &x->t[x->nt];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->n_vals = -1;
    t->init = NULL;
    sm_put(&x->tix, name, x->nt);
    return x->nt++;
}

/* A node's name for messages: printable ASCII, bounded. */
static void label_of(const Onnx__NodeProto *np, int ix, char *buf, size_t cap)
{
    char nm[96], op[48];
    snprintf(nm, sizeof nm, "%s", np->name && np->name[0] ? np->name : "");
    snprintf(op, sizeof op, "%s", np->op_type ? np->op_type : "");
    for (char *p = nm; *p; p++) if (*p < 0x20 || *p > 0x7e) *p = '?';
    for (char *p = op; *p; p++) if (*p < 0x20 || *p > 0x7e) *p = '?';
    if (nm[0]) snprintf(buf, cap, "node %s (%s)", nm, op);
    else snprintf(buf, cap, "node #%d (%s)", ix, op);
}

/* Known int64 values of a small tensor (shape arguments). */
static void tensor_vals(ox_tensor *t, const Onnx__TensorProto *tp)
{
    int64_t n = ox_elems(t->rank, t->d);
    if (tp->data_type != 7 /* INT64 */ || n > 2 * ONNX_MAX_RANK) return;
    if (tp->has_raw_data && tp->raw_data.len == (size_t)n * 8) {
        t->vals = cl_calloc((size_t)n + 1, sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = 0;
            for (int b = 7; b >= 0; b--) v = v << 8 | tp->raw_data.data[i * 8 + b];
            t->vals[i] = (int64_t)v;
        }
        t->n_vals = (int)n;
    } else if (!tp->has_raw_data && tp->n_int64_data == (size_t)n) {
        t->vals = cl_calloc((size_t)n + 1, sizeof(int64_t));
        memcpy(t->vals, tp->int64_data, sizeof(int64_t) * (size_t)n);
        t->n_vals = (int)n;
    }
}

static int is_float_type(int32_t dt) { return dt == 1 || dt == 10 || dt == 11 || dt == 16; }

/* A constant tensor from a TensorProto (initializer or Constant value). */
static int const_tensor(ox *x, const ox_node *n, const char *name, const Onnx__TensorProto *tp,
                        int init_ix, cl_err *e)
{
    if (tp->n_dims > ONNX_MAX_RANK)
        return cl_fail(e, CL_EINPUT, "%s: %s: tensor %s has rank %zu (hint: at most %d dimensions)",
                       x->file, n->label, name, tp->n_dims, ONNX_MAX_RANK);
    if (ox_check_dims(n, "the tensor", (int)tp->n_dims, tp->dims, e)) return CL_EINPUT;
    int ti = new_tensor(x, name);
    ox_tensor *t = &x->t[ti];
    t->rank = (int)tp->n_dims;
    if (tp->n_dims) memcpy(t->d, tp->dims, sizeof(int64_t) * tp->n_dims); /* dims NULL when none */
    t->layer = OX_CONST;
    t->is_float = is_float_type(tp->data_type);
    t->init = init_ix >= 0 ? tp : NULL;
    t->counted = init_ix; /* index into x->counted, -1 none */
    tensor_vals(t, tp);
    return CL_OK;
}

/* ------------------------------------------------------- layer naming */

static void layer_name(ox *x, const char *want, char out[MODEL_NAME_MAX])
{
    char buf[MODEL_NAME_MAX];
    while (*want == '/') want++;
    size_t len = strlen(want);
    if (len > MODEL_NAME_MAX - 1) want += len - (MODEL_NAME_MAX - 1); /* keep the end: the op */
    snprintf(buf, sizeof buf, "%s", want);
    esc_name_fix(buf);
    snprintf(out, MODEL_NAME_MAX, "%s", buf);
    for (int k = 2; sm_get(&x->lnames, out) >= 0; k++) {
        char suf[16];
        int sl = snprintf(suf, sizeof suf, "#%d", k);
        snprintf(out, MODEL_NAME_MAX, "%.*s%s", MODEL_NAME_MAX - 1 - sl, buf, suf);
    }
    char *keep = cl_strdup(out);
    x->names[x->nnames++] = keep;
    sm_put(&x->lnames, keep, 1);
}

static model_layer *new_layer(ox *x, const char *want)
{
    if (x->nl == x->capl) {
        x->capl = x->capl ? 2 * x->capl : 256;
        x->L = cl_realloc(x->L, sizeof *x->L * (size_t)x->capl);
        x->names = cl_realloc(x->names, sizeof *x->names * (size_t)x->capl);
        x->out_ps = cl_realloc(x->out_ps, sizeof *x->out_ps * (size_t)x->capl);
    }
    model_layer *l = &x->L[x->nl++];
    memset(l, 0, sizeof *l);
    layer_name(x, want, l->name);
    return l;
}

/* Per-sample shape of a whole tensor as the model format holds it. */
static model_shape ps_shape(const ox *x, int rank, const int64_t *d)
{
    model_shape s = {0};
    if (rank == 4 && d[0] == x->batch) {
        s.ndim = 3;
        memcpy(s.d, d + 1, 3 * sizeof(int64_t));
    } else if (rank == 2 && d[0] == x->batch) {
        s.ndim = 1;
        s.d[0] = d[1];
    } else {
        s.ndim = 1;
        s.d[0] = ox_elems(rank, d) / x->batch;
    }
    return s;
}

/* ---------------------------------------------------------- the walk */

/* Topological order of the nodes (file order when it already is one). */
static int topo_order(ox *x, int *order, cl_err *e)
{
    const Onnx__GraphProto *g = x->g;
    int nn = (int)g->n_node, rc = CL_OK, no = 0;
    strmap prod = {0};
    char lab[160];
    for (int i = 0; i < nn && !rc; i++)
        for (size_t k = 0; k < g->node[i]->n_output; k++) {
            const char *o = g->node[i]->output[k];
            if (!o[0]) continue;
            if (sm_get(&prod, o) >= 0 || sm_get(&x->tix, o) >= 0) {
                label_of(g->node[i], i, lab, sizeof lab);
                rc = cl_fail(e, CL_EINPUT, "%s: %s: output \"%.64s\" is already produced elsewhere (hint: ONNX values have one producer)",
                             x->file, lab, o);
                break;
            }
            sm_put(&prod, o, i);
        }
    char *state = cl_calloc((size_t)nn + 1, 1);
    int *stk = cl_calloc((size_t)nn + 1, sizeof(int)), *pos = cl_calloc((size_t)nn + 1, sizeof(int));
    for (int r = 0; r < nn && !rc; r++) {
        if (state[r]) continue;
        int sp = 0;
        stk[sp] = r; pos[sp++] = 0; state[r] = 1;
        while (sp && !rc) {
            int v = stk[sp - 1];
            const Onnx__NodeProto *np = g->node[v];
            if ((size_t)pos[sp - 1] < np->n_input) {
                const char *in = np->input[pos[sp - 1]++];
                int p = in[0] ? sm_get(&prod, in) : -1;
                if (p < 0 || state[p] == 2) continue;
                if (state[p] == 1) {
                    label_of(g->node[p], p, lab, sizeof lab);
                    rc = cl_fail(e, CL_EINPUT, "%s: %s: the graph has a cycle through this node (hint: ONNX graphs are acyclic)",
                                 x->file, lab);
                    break;
                }
                state[p] = 1;
                stk[sp] = p; pos[sp++] = 0;
            } else {
                state[v] = 2;
                order[no++] = v;
                sp--;
            }
        }
    }
    free(state); free(stk); free(pos);
    sm_free(&prod);
    return rc;
}

static int check_opset(ox *x, const Onnx__ModelProto *mp, cl_err *e)
{
    x->opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        if ((!d || !d[0] || !strcmp(d, "ai.onnx")) && mp->opset_import[i]->has_version)
            x->opset = mp->opset_import[i]->version;
    }
    if (x->opset < ONNX_OPSET_MIN || x->opset > ONNX_OPSET_MAX)
        return cl_fail(e, CL_EINPUT, "%s: opset_import: default-domain operator set %lld is not supported (hint: export with opset %d to %d)",
                       x->file, (long long)x->opset, ONNX_OPSET_MIN, ONNX_OPSET_MAX);
    return CL_OK;
}

/* The one graph input that is not an initializer: the model input. */
static int graph_input(ox *x, model *m, cl_err *e)
{
    const Onnx__ValueInfoProto *vi = NULL;
    ox_node n = {.file = x->file, .label = "graph input", .batch = 1};
    for (size_t i = 0; i < x->g->n_input; i++) {
        const Onnx__ValueInfoProto *v = x->g->input[i];
        if (!v->name || sm_get(&x->tix, v->name) >= 0) continue;
        if (vi)
            return cl_fail(e, CL_EINPUT, "%s: graph.input: more than one input (\"%.64s\" and \"%.64s\") (hint: a cleave model has one input)",
                           x->file, vi->name, v->name);
        vi = v;
    }
    if (!vi)
        return cl_fail(e, CL_EINPUT, "%s: graph.input: no input besides the initializers", x->file);
    const Onnx__TypeProto *tp = vi->type;
    const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
    if (!tt || !tt->shape)
        return cl_fail(e, CL_EINPUT, "%s: graph input \"%.64s\": not a tensor of known shape", x->file, vi->name);
    switch (tt->elem_type) {
    case 1: m->dtype = MODEL_F32; break;
    case 10: m->dtype = MODEL_F16; break;
    case 16: m->dtype = MODEL_BF16; break;
    default:
        return cl_fail(e, CL_EINPUT, "%s: graph input \"%.64s\": element type %d (hint: cleave models take float32, float16 or bfloat16 inputs)",
                       x->file, vi->name, tt->elem_type);
    }
    int rank = (int)tt->shape->n_dim;
    if (rank < 2 || rank > ONNX_MAX_RANK)
        return cl_fail(e, CL_EINPUT, "%s: graph input \"%.64s\": rank %d (hint: a batch axis and 1 to %d more)",
                       x->file, vi->name, rank, ONNX_MAX_RANK - 1);
    int ti = new_tensor(x, vi->name);
    ox_tensor *t = &x->t[ti];
    t->rank = rank;
    t->layer = -1;
    t->counted = -1;
    for (int k = 0; k < rank; k++) {
        const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[k];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) t->d[k] = d->dim_value;
        else if (k == 0) t->d[k] = 1; /* a symbolic batch: per-sample costs need no size */
        else
            return cl_fail(e, CL_EINPUT, "%s: graph input \"%.64s\": axis %d has no fixed size (hint: export with a fixed input shape)",
                           x->file, vi->name, k);
    }
    if (ox_check_dims(&n, "the input", rank, t->d, e)) return CL_EINPUT;
    x->batch = t->d[0];
    x->dtype = m->dtype;
    m->input = ps_shape(x, rank, t->d);
    return CL_OK;
}

/* The model-format kinds fit only when the layer's input is a per-sample
 * [C, H, W] (the 2-D ones) and the parameters are exactly the kind's own. */
static int native_fits(const ox *x, const ox_node *n, const ox_cost *c, double params)
{
    const ox_tensor *in = n->in[0];
    int img = in->rank == 4 && in->d[0] == x->batch;
    for (int i = 1; i < n->n_in; i++)
        if (n->in[i] && n->in[i]->layer != OX_CONST && c->kind != MODEL_ADD) return 0;
    switch (c->kind) {
    case MODEL_CONV2D:
        return img && params == (double)c->out_channels * (double)c->in_channels * (double)c->kernel *
                                (double)c->kernel + (c->bias ? (double)c->out_channels : 0);
    case MODEL_LINEAR:
        return params == (double)c->in_features * (double)c->out_features + (c->bias ? (double)c->out_features : 0);
    case MODEL_BATCHNORM2D: return img && params == 2.0 * (double)in->d[1];
    case MODEL_MAXPOOL2D: case MODEL_AVGPOOL2D: case MODEL_FLATTEN: return img && params == 0;
    case MODEL_RELU: case MODEL_DROPOUT: case MODEL_ADD: return params == 0;
    default: return 0;
    }
}

/* Give the uncounted float initializers among n's inputs to this node
 * (batch norm's running mean and variance are buffers, not parameters). */
static double take_params(ox *x, const ox_node *n)
{
    double p = 0;
    int bn = n->np->op_type && !strcmp(n->np->op_type, "BatchNormalization");
    for (int i = 0; i < n->n_in; i++) {
        ox_tensor *t = n->in[i];
        if (!t || !t->init || !t->is_float || t->counted < 0 || x->counted[t->counted]) continue;
        if (bn && i >= 3) continue;
        x->counted[t->counted] = 1;
        p += (double)ox_elems(t->rank, t->d);
    }
    return p;
}

/* The shape a graph's value_info records for `name` (shape inference), for
 * an operator the importer does not know; 0 when absent or not static. */
static int value_info_shape(const ox *x, const char *name, ox_cost *c)
{
    for (size_t i = 0; i < x->g->n_value_info; i++) {
        const Onnx__ValueInfoProto *v = x->g->value_info[i];
        if (!v->name || strcmp(v->name, name) || !v->type ||
            v->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !v->type->tensor_type->shape)
            continue;
        const Onnx__TensorShapeProto *s = v->type->tensor_type->shape;
        if (s->n_dim > ONNX_MAX_RANK) return 0;
        for (size_t k = 0; k < s->n_dim; k++) {
            if (s->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) return 0;
            c->d[k] = s->dim[k]->dim_value;
        }
        c->rank = (int)s->n_dim;
        return 1;
    }
    return 0;
}

/* Write a block for the node; `acts` are its activation inputs' layers. */
static void add_block(ox *x, const char *name, const ox_cost *c, double in_elems_ps, double params,
                      const int *acts, int n_acts)
{
    /* bytes at the model's element size, which model_derive divides back */
    double E = (double)model_dtype_bytes(x->dtype), out_ps = (double)ox_elems(c->rank, c->d) / (double)x->batch;
    model_layer *l = new_layer(x, name);
    char keep[MODEL_NAME_MAX];
    memcpy(keep, l->name, sizeof keep);
    model_block_init(l, keep, c->flops / (double)x->batch, params, out_ps * E,
                     c->stash_inputs ? in_elems_ps * E : 0);
    l->n_inputs = n_acts;
    memcpy(l->inputs, acts, sizeof(int) * (size_t)n_acts);
    l->blk_out_shape = ps_shape(x, c->rank, c->d);
    x->st->blocks++;
}

static int do_node(ox *x, int ix, cl_err *e)
{
    const Onnx__NodeProto *np = x->g->node[ix];
    char lab[160];
    label_of(np, ix, lab, sizeof lab);
    ox_node n = {.np = np, .file = x->file, .label = lab, .batch = x->batch, .opset = x->opset};
    const char *op = np->op_type ? np->op_type : "";
    if ((int)np->n_input > OX_MAX_NODE_INPUTS)
        return cl_fail(e, CL_EINPUT, "%s: %s: %zu inputs (hint: at most %d)", x->file, lab,
                       np->n_input, OX_MAX_NODE_INPUTS);
    if (!np->n_output || !np->output[0][0])
        return cl_fail(e, CL_EINPUT, "%s: %s: no output", x->file, lab);
    n.n_in = (int)np->n_input;
    int act = 0;
    for (int i = 0; i < n.n_in; i++) {
        if (!np->input[i][0]) { n.in[i] = NULL; continue; }
        int ti = sm_get(&x->tix, np->input[i]);
        if (ti < 0)
            return cl_fail(e, CL_EINPUT, "%s: %s: input \"%.64s\" is not produced by any node, initializer or graph input",
                           x->file, lab, np->input[i]);
        n.in[i] = &x->t[ti];
        if (n.in[i]->rank < 0)
            return cl_fail(e, CL_EINPUT, "%s: %s: reads \"%.64s\", an extra output of its producer that cleave does not model",
                           x->file, lab, np->input[i]);
        act += n.in[i]->layer != OX_CONST;
    }
    const char *out = np->output[0];
    if (!strcmp(op, "Constant")) {
        const Onnx__AttributeProto *a = ox_attr(np, "value");
        x->st->constants++;
        if (a && a->t) return const_tensor(x, &n, out, a->t, -1, e);
        if ((a = ox_attr(np, "value_int")) || (a = ox_attr(np, "value_float"))) {
            int ti = new_tensor(x, out);
            x->t[ti].layer = OX_CONST;
            x->t[ti].counted = -1;
            if (a->has_i) { x->t[ti].vals = cl_calloc(1, sizeof(int64_t)); x->t[ti].vals[0] = a->i; x->t[ti].n_vals = 1; }
            return CL_OK;
        }
        if ((a = ox_attr(np, "value_ints")) || (a = ox_attr(np, "value_floats"))) {
            int ti = new_tensor(x, out);
            ox_tensor *t = &x->t[ti];
            t->layer = OX_CONST;
            t->counted = -1;
            t->rank = 1;
            t->d[0] = a->n_ints ? (int64_t)a->n_ints : (int64_t)a->n_floats;
            if (t->d[0] < 1) t->d[0] = 1;
            if (a->n_ints && a->n_ints <= 2 * ONNX_MAX_RANK) {
                t->vals = cl_calloc(a->n_ints, sizeof(int64_t));
                memcpy(t->vals, a->ints, sizeof(int64_t) * a->n_ints);
                t->n_vals = (int)a->n_ints;
            }
            return CL_OK;
        }
        return cl_fail(e, CL_EINPUT, "%s: %s: a Constant without a value cleave reads (hint: value, value_int(s) or value_float(s))",
                       x->file, lab);
    }
    if (!strcmp(op, "Identity") && n.n_in == 1 && n.in[0]) { /* an alias, no layer */
        ox_tensor src = *n.in[0];
        int ti = new_tensor(x, out);
        x->t[ti] = src;
        x->t[ti].name = out;
        if (src.n_vals > 0) {
            x->t[ti].vals = cl_calloc((size_t)src.n_vals, sizeof(int64_t));
            memcpy(x->t[ti].vals, src.vals, sizeof(int64_t) * (size_t)src.n_vals);
        }
        if (act == 0) x->st->constants++;
        return CL_OK;
    }
    ox_cost c;
    int rc = ox_infer(&n, &c, e);
    if (rc == CL_EINPUT) return rc;
    int unknown = rc == 1;
    if (unknown && (!x->o->price_unknown_memory || act == 0))
        return cl_fail(e, CL_EINPUT, "%s: %s: operator %s%s%s is not known to cleave import (hint: --price-unknown memory prices it by bytes in and out)",
                       x->file, lab, np->domain && np->domain[0] ? np->domain : "", np->domain && np->domain[0] ? "." : "", op);
    if (unknown) {
        memset(&c, 0, sizeof c);
        c.kind = -1;
        c.n_vals = -1;
        int from_vi = value_info_shape(x, out, &c);
        for (int i = 0; !from_vi && i < n.n_in; i++)
            if (n.in[i] && n.in[i]->layer != OX_CONST) {
                c.rank = n.in[i]->rank;
                memcpy(c.d, n.in[i]->d, sizeof c.d);
                break;
            }
        x->st->unknown_priced++;
        if (x->o->notes) { /* the path and the node's name come from outside: escaped */
            char note[1024];
            snprintf(note, sizeof note, "cleave: note: %s: %s: unknown operator priced as memory-bound (no FLOPs, bytes in + out), output shape %s",
                     x->file, lab, from_vi ? "from value_info" : "assumed equal to its first input's");
            char *safe = esc_term(note);
            fprintf(x->o->notes, "%s\n", safe);
            free(safe);
        }
    }
    if (ox_check_dims(&n, "the output", c.rank, c.d, e)) return CL_EINPUT;
    int64_t total = ox_elems(c.rank, c.d);
    if (total % x->batch || total / x->batch > MODEL_MAX_ELEMS)
        return cl_fail(e, CL_EINPUT, "%s: %s: output of %lld elements is not a whole per-sample tensor of at most 2^40 elements for batch %lld",
                       x->file, lab, (long long)total, (long long)x->batch);
    if (act == 0 || !strcmp(op, "Shape")) { /* folded: a constant, no layer */
        int ti = new_tensor(x, out);
        ox_tensor *t = &x->t[ti];
        t->rank = c.rank;
        memcpy(t->d, c.d, sizeof t->d);
        t->counted = -1;
        t->layer = OX_CONST;
        t->is_float = 1;
        if (c.n_vals >= 0) {
            t->vals = cl_calloc((size_t)c.n_vals + 1, sizeof(int64_t));
            memcpy(t->vals, c.vals, sizeof(int64_t) * (size_t)c.n_vals);
            t->n_vals = c.n_vals;
        }
        x->st->constants++;
        return CL_OK;
    }
    double params = take_params(x, &n);
    x->st->params += (uint64_t)params;
    x->st->macs += c.macs / (double)x->batch;
    int acts[OX_MAX_NODE_INPUTS], na = 0;
    double in_ps = 0;
    for (int i = 0; i < n.n_in; i++)
        if (n.in[i] && n.in[i]->layer != OX_CONST) {
            acts[na++] = n.in[i]->layer;
            in_ps += (double)ox_elems(n.in[i]->rank, n.in[i]->d) / (double)x->batch;
        }
    const char *want = np->name && np->name[0] ? np->name : op;
    if (na > MODEL_MAX_INPUTS) {
        /* more inputs than a layer takes (DenseNet's concatenations): join
         * them in steps, each a free block holding the partial result */
        if (strcmp(op, "Concat"))
            return cl_fail(e, CL_EINPUT, "%s: %s: %d activation inputs (hint: cleave layers take at most %d, Concat excepted)",
                           x->file, lab, na, MODEL_MAX_INPUTS);
        int ax = (int)ox_attr_i(np, "axis", 0);
        if (ax < 0) ax += c.rank;
        int64_t axis_in[OX_MAX_NODE_INPUTS]; /* each activation input's size on the axis */
        for (int i = 0, k = 0; i < n.n_in; i++)
            if (n.in[i] && n.in[i]->layer != OX_CONST) axis_in[k++] = n.in[i]->d[ax];
        ox_cost part = c;
        part.flops = 0;
        part.d[ax] = 0;
        int used = 0, prev = -1;
        while (na - used > MODEL_MAX_INPUTS - (prev >= 0)) {
            int in[MODEL_MAX_INPUTS], k = 0;
            if (prev >= 0) in[k++] = prev;
            while (k < MODEL_MAX_INPUTS) {
                part.d[ax] += axis_in[used];
                in[k++] = acts[used++];
            }
            char pn[MODEL_NAME_MAX];
            snprintf(pn, sizeof pn, "%.55s/part", want);
            add_block(x, pn, &part, 0, 0, in, k);
            x->out_ps[x->nl - 1] = (double)ox_elems(part.rank, part.d) / (double)x->batch;
            prev = x->nl - 1;
        }
        int in[MODEL_MAX_INPUTS], k = 0;
        in[k++] = prev;
        while (used < na) in[k++] = acts[used++];
        memcpy(acts, in, sizeof(int) * (size_t)k);
        na = k;
    }
    if (c.kind >= 0 && !unknown && native_fits(x, &n, &c, params)) {
        model_layer *l = new_layer(x, want);
        l->kind = (model_kind)c.kind;
        l->n_inputs = na;
        memcpy(l->inputs, acts, sizeof(int) * (size_t)na);
        l->out_channels = c.out_channels;
        l->in_channels = c.in_channels;
        l->kernel = c.kernel;
        l->stride = c.stride;
        l->padding = c.padding;
        l->out_features = c.out_features;
        l->in_features = c.in_features;
        l->bias = c.bias;
        l->dropout_p = c.dropout_p;
    } else {
        add_block(x, want, &c, in_ps, params, acts, na);
    }
    x->out_ps[x->nl - 1] = (double)total / (double)x->batch;
    /* n.in[] point into x->t, which new_tensor may move: they are done with */
    for (size_t k = 1; k < np->n_output; k++) /* optional extra outputs (batch norm's running stats, masks) */
        if (np->output[k][0] && sm_get(&x->tix, np->output[k]) < 0) {
            int tk = new_tensor(x, np->output[k]);
            x->t[tk].rank = -1; /* refused if a node reads it */
            x->t[tk].counted = -1;
        }
    int ti = new_tensor(x, out);
    ox_tensor *t = &x->t[ti];
    t->rank = c.rank;
    memcpy(t->d, c.d, sizeof t->d);
    t->counted = -1;
    t->layer = x->nl - 1;
    return CL_OK;
}

int onnx_import_buf(model *m, const uint8_t *buf, size_t len, const char *file, const char *name,
                    const onnx_import_opts *o, onnx_import_stats *st, cl_err *e)
{
    static const onnx_import_opts none = {0};
    onnx_import_stats dummy;
    memset(m, 0, sizeof *m);
    if (!o) o = &none;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
    if (!mp)
        return cl_fail(e, CL_EINPUT, "%s: not an ONNX model: the protobuf is truncated or malformed (hint: a .onnx file from torch.onnx.export or onnx.save)",
                       file);
    ox x = {.file = file, .o = o, .st = st, .g = mp->graph, .batch = 1};
    int rc = CL_OK;
    int *order = NULL;
    if (!x.g || !x.g->n_node) {
        rc = cl_fail(e, CL_EINPUT, "%s: graph: no graph or no nodes", file);
        goto out;
    }
    if ((rc = check_opset(&x, mp, e))) goto out;
    st->opset = x.opset;
    if (x.g->n_node > MODEL_MAX_LAYERS) {
        rc = cl_fail(e, CL_EINPUT, "%s: graph: %zu nodes (hint: at most %d)", file, x.g->n_node, MODEL_MAX_LAYERS);
        goto out;
    }
    x.counted = cl_calloc(x.g->n_initializer + 1, 1);
    sm_put(&x.lnames, "input", 1); /* reserved by the model format */
    for (size_t i = 0; i < x.g->n_initializer && !rc; i++) {
        const Onnx__TensorProto *tp = x.g->initializer[i];
        char lab[120];
        snprintf(lab, sizeof lab, "initializer %.64s", tp->name ? tp->name : "");
        for (char *p = lab; *p; p++) if (*p < 0x20 || *p > 0x7e) *p = '?';
        ox_node n = {.file = file, .label = lab, .batch = 1};
        if (!tp->name || !tp->name[0] || sm_get(&x.tix, tp->name) >= 0)
            rc = cl_fail(e, CL_EINPUT, "%s: %s: missing or duplicate name", file, lab);
        else
            rc = const_tensor(&x, &n, tp->name, tp, (int)i, e);
    }
    if (rc || (rc = graph_input(&x, m, e))) goto out;
    order = cl_calloc(x.g->n_node, sizeof(int));
    if ((rc = topo_order(&x, order, e))) goto out;
    st->nodes = (int)x.g->n_node;
    for (size_t i = 0; i < x.g->n_node && !rc; i++) rc = do_node(&x, order[i], e);
    if (rc) goto out;
    if (!x.nl) {
        rc = cl_fail(e, CL_EINPUT, "%s: graph: no node depends on the input", file);
        goto out;
    }
    char mname[MODEL_NAME_MAX];
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    snprintf(mname, sizeof mname, "%s", name ? name : base);
    char *dot = name ? NULL : strrchr(mname, '.');
    if (dot && dot != mname) *dot = 0;
    esc_name_fix(mname);
    memcpy(m->name, mname, sizeof m->name);
    m->n_layers = x.nl;
    m->layers = x.L;
    x.L = NULL;
    if ((rc = model_derive(m, file, e))) goto out;
    /* the format's own rules must give back what the importer computed */
    for (int i = 0; i < m->n_layers; i++)
        if ((double)m->layers[i].out_elems != x.out_ps[i]) {
            rc = cl_fail(e, CL_ERUN, "%s: layers[%d] (%s): internal error: shapes disagree", file, i,
                         m->layers[i].name);
            goto out;
        }
out:
    if (rc) model_free(m), memset(m, 0, sizeof *m);
    free(order);
    free(x.L);
    for (int i = 0; i < x.nt; i++) free(x.t[i].vals);
    free(x.t);
    free(x.counted);
    for (int i = 0; i < x.nnames; i++) free(x.names[i]);
    free(x.names);
    free(x.out_ps);
    sm_free(&x.tix);
    sm_free(&x.lnames);
    onnx__model_proto__free_unpacked(mp, NULL);
    return rc;
}

int onnx_import(model *m, const char *path, const char *name, const onnx_import_opts *o,
                onnx_import_stats *st, cl_err *e)
{
    char *buf = NULL;
    size_t len = 0;
    memset(m, 0, sizeof *m);
    int rc = cl_read_file(path, ONNX_MAX_FILE_BYTES, &buf, &len, e);
    if (rc) return rc;
    rc = onnx_import_buf(m, (const uint8_t *)buf, len, path, name, o, st, e);
    free(buf);
    return rc;
}
