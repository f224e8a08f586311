/* onnx_import.h - an ONNX graph as a cleave model (`cleave import`).
 *
 * The importer decodes an ONNX file with our own subset of the ONNX schema
 * (models/onnx/onnx_subset.proto, compiled by protoc-c), walks its nodes in
 * topological order, infers every tensor's shape from the graph input's
 * shape, and turns each node into one layer of the model format: a native
 * kind where one fits exactly (conv2d, linear, relu, batchnorm2d, maxpool2d,
 * avgpool2d, add, flatten, dropout), else a `block` carrying the FLOPs,
 * parameters and bytes computed for that node.  The DAG is kept: a layer
 * names the layers producing its inputs.  Costs and the rules are in
 * docs/formats.md, "Importing ONNX".
 *
 * Bad input (truncated protobuf, missing input, cycle, unknown operator,
 * negative or oversized dimension, ...) fails with CL_EINPUT and one line
 * naming the file and the node.
 */
#ifndef CL_ONNX_IMPORT_H
#define CL_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"
#include "models/model.h"

/* Default cap on the size of an ONNX file (CLEAVE_MAX_INPUT_MB overrides). */
#define ONNX_MAX_FILE_BYTES ((size_t)1 << 30)
/* Largest single dimension accepted (elements per tensor are also capped by
 * MODEL_MAX_ELEMS per sample). */
#define ONNX_MAX_DIM ((int64_t)1 << 31)
#define ONNX_MAX_RANK 8
/* Operator-set versions of the default domain the shape rules follow. */
#define ONNX_OPSET_MIN 7
#define ONNX_OPSET_MAX 22

typedef struct onnx_import_opts {
    /* Price an operator the importer does not know as memory-bound (a block
     * with no FLOPs: the roofline charges bytes in + out) instead of failing;
     * each such node is reported on `notes`. */
    int price_unknown_memory;
    FILE *notes;            /* where notes go (NULL: nowhere) */
} onnx_import_opts;

typedef struct onnx_import_stats {
    int64_t opset;          /* default-domain operator set */
    int nodes;              /* ONNX nodes read                          */
    int constants;          /* nodes folded away as constants           */
    int blocks;             /* layers written as `block`                */
    int unknown_priced;     /* unknown operators priced as memory-bound */
    double macs;            /* Conv, Gemm and MatMul multiply-accumulates per sample,
                             * including those written as blocks (grouped convolutions) */
    uint64_t params;        /* parameters counted from initializers     */
} onnx_import_stats;

/* Import the ONNX file at `path` into *m (derived, ready to use; model_free
 * releases it).  `name` names the model (NULL: the graph's name, else the
 * file's base name).  On failure *m is left empty. */
int onnx_import(model *m, const char *path, const char *name, const onnx_import_opts *o,
                onnx_import_stats *st, cl_err *e);
/* The same from bytes in memory; `file` names them in messages. */
int onnx_import_buf(model *m, const uint8_t *buf, size_t len, const char *file,
                    const char *name, const onnx_import_opts *o, onnx_import_stats *st,
                    cl_err *e);

#endif
