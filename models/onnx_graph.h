/* onnx_graph.h - internals of the ONNX importer shared by onnx_import.c
 * (decoding, graph walk, layers) and onnx_ops.c (shape and cost of each
 * operator).  Not an interface for other folders: see onnx_import.h. */
#ifndef CL_ONNX_GRAPH_H
#define CL_ONNX_GRAPH_H

#include <stdint.h>

#include "base/status.h"
#include "onnx_import.h"
#include "onnx_subset.pb-c.h"

/* One tensor of the graph. */
typedef struct ox_tensor {
    const char *name;
    int rank;
    int64_t d[ONNX_MAX_RANK];
    int layer;          /* producing layer; -1 the model input; OX_CONST a constant */
    const Onnx__TensorProto *init; /* an initializer: its parameters (if float) */
    int counted;        /* its parameters were given to a layer already */
    int is_float;       /* floating-point element type (a parameter when initializer) */
    int n_vals;         /* known int64 values (shape arguments), -1 unknown */
    int64_t *vals;      /* owned */
} ox_tensor;

#define OX_CONST (-2)

/* The result of one operator's shape rule. */
typedef struct ox_cost {
    int rank;
    int64_t d[ONNX_MAX_RANK];     /* output 0 */
    double flops;                 /* forward, whole tensor (the caller divides by the batch) */
    double macs;                  /* Conv/Gemm/MatMul multiply-accumulates, whole tensor */
    double params;                /* float initializers among the inputs, uncounted so far */
    int stash_inputs;             /* 1: backward keeps the inputs (stash = input bytes) */
    /* a native layer kind fits exactly (-1: a block) and its hyper-parameters */
    int kind;
    int64_t out_channels, kernel, stride, padding, out_features, in_channels, in_features;
    int bias;
    double dropout_p;
    /* a constant result (no layer): values when known */
    int n_vals;
    int64_t vals[ONNX_MAX_RANK * 2];
} ox_cost;

/* What the shape rules see of a node. */
typedef struct ox_node {
    const Onnx__NodeProto *np;
    const char *file, *label;     /* for messages: the file, "node NAME (OP)" */
    int n_in;
    ox_tensor *in[64];            /* NULL for an omitted optional input */
    int64_t batch;                /* the model input's first dimension */
    int64_t opset;
} ox_node;

/* Apply the shape and cost rule of n's operator into *c.  Returns CL_OK,
 * CL_EINPUT with a message, or 1 when the operator is unknown. */
int ox_infer(const ox_node *n, ox_cost *c, cl_err *e);

/* Attributes. */
const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *np, const char *name);
int64_t ox_attr_i(const Onnx__NodeProto *np, const char *name, int64_t def);

/* Elements of a shape (caller checked the dims). */
int64_t ox_elems(int rank, const int64_t *d);
/* Check dims: each 0 <= d <= ONNX_MAX_DIM and the product within
 * MODEL_MAX_ELEMS x batch; CL_EINPUT naming `what` otherwise. */
int ox_check_dims(const ox_node *n, const char *what, int rank, const int64_t *d, cl_err *e);

#endif
