/* model.h - model descriptions: layers, shapes, and what each layer costs.
 *
 * One model file feeds the cost model, the planner, the simulator and the
 * executor (docs/formats.md, "Model").  A model is an ordered list of layers;
 * by default each layer consumes the one before it (a chain), and a layer may
 * name its inputs instead, which makes the model a DAG (ResNet's residual
 * adds).  Layers are stored in a topological order: every input of layer i
 * has an index below i.
 *
 * Conventions (also in docs/formats.md):
 * - shapes are per sample, without the batch dimension: (C, H, W) or (N);
 * - FLOPs count a multiply-accumulate as two operations; `macs` counts it as
 *   one and covers conv2d and linear only (the convention of published totals
 *   such as torchvision's 15.47 GMAC for VGG-16);
 * - all per-layer costs are per sample; the planner multiplies by the batch.
 */
#ifndef CL_MODEL_H
#define CL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "models/transformer.h"

typedef enum model_kind {
    MODEL_CONV2D,
    MODEL_LINEAR,
    MODEL_RELU,
    MODEL_MAXPOOL2D,
    MODEL_AVGPOOL2D,
    MODEL_FLATTEN,
    MODEL_DROPOUT,
    MODEL_BATCHNORM2D,
    MODEL_ADD,          /* elementwise sum of its inputs (residual joins)   */
    MODEL_SOFTMAX_XENT, /* loss: logits (N) -> scalar per sample            */
    MODEL_BLOCK,        /* opaque layer with explicit costs (transformer...) */
    /* the vision transformer's kinds (models/model_vit.c); tokens [1,T,D] */
    MODEL_PATCH_EMBED,  /* [C,H,W] -> [1, patches, width]: patches + linear */
    MODEL_POS_EMBED,    /* + a learned [T,D] table                          */
    MODEL_LAYERNORM,    /* over the last dimension                          */
    MODEL_GELU,
    MODEL_MEANPOOL,     /* [1,T,D] -> [D], mean over the tokens             */
    MODEL_ATTENTION,    /* pre-norm multi-head self-attention + residual    */
    MODEL_MLP,          /* pre-norm two-layer GELU MLP + residual           */
    MODEL_KIND_COUNT
} model_kind;

/* Name in files and tables ("conv2d", ...); model_kind_from_name returns -1
 * for an unknown name. */
const char *model_kind_name(model_kind k);
int model_kind_from_name(const char *name);

typedef enum model_dtype { MODEL_F32, MODEL_F16, MODEL_BF16, MODEL_DTYPE_COUNT } model_dtype;
const char *model_dtype_name(model_dtype t);
int model_dtype_bytes(model_dtype t);

/* What one unit of the batch is: a sample, or, for a PipeDream profile
 * whose batch size cannot be told from its input (a sequence model), one of
 * the minibatches it was profiled at; throughputs are counted in it. */
typedef enum model_unit { MODEL_UNIT_SAMPLE, MODEL_UNIT_MINIBATCH, MODEL_UNIT_COUNT } model_unit;
const char *model_unit_name(model_unit u);   /* "sample", "minibatch" */
const char *model_unit_plural(model_unit u); /* "samples", "minibatches" */

#define MODEL_MAX_DIMS 3
#define MODEL_NAME_MAX 64
#define MODEL_MAX_INPUTS 8
#define MODEL_MAX_LAYERS 1000000 /* loader limit; sizes stay far from overflow */
/* Largest tensor (elements per sample) and parameter count a layer may have
 * (the parameter limit also bounds the whole model's total): products and
 * sums of user-given sizes are checked against these, so every count and
 * total fits an int64 and converts to double exactly. */
#define MODEL_MAX_ELEMS ((int64_t)1 << 40)
#define MODEL_MAX_PARAMS ((int64_t)1 << 53)

typedef struct model_shape {
    int ndim;                   /* 1 (features) or 3 (C, H, W) */
    int64_t d[MODEL_MAX_DIMS];
} model_shape;

int64_t model_shape_elems(const model_shape *s);
/* "[16,7,7]" into buf (always NUL-terminated). */
void model_shape_str(const model_shape *s, char *buf, size_t cap);

typedef struct model_layer {
    char name[MODEL_NAME_MAX];
    model_kind kind;

    /* inputs: indices of earlier layers; -1 means the model's input.  A chain
     * layer has one input, i - 1 (or -1 for the first layer). */
    int n_inputs;
    int inputs[MODEL_MAX_INPUTS];

    /* hyper-parameters as given (0 when not applicable) */
    int64_t out_channels, kernel, stride, padding; /* conv2d, pools       */
    int64_t out_features;                          /* linear; mlp hidden  */
    int64_t heads;                                 /* attention           */
    /* optional declared input sizes, checked against the inferred input
     * shape by model_derive (0 = not given, nothing to check) */
    int64_t in_channels;                           /* conv2d              */
    int64_t in_features;                           /* linear              */
    int bias;                                      /* conv2d, linear      */
    double dropout_p;                              /* dropout             */
    /* block: explicit per-sample costs as given in the file */
    double blk_fwd_flops, blk_bwd_flops;           /* bwd defaults to 2 x fwd */
    double blk_params, blk_out_bytes, blk_stash_bytes;
    /* weight-gradient part of blk_bwd_flops (the rest is input-gradient);
     * the loader's default is half of blk_bwd_flops when blk_params > 0,
     * else 0.  model_derive takes both backward fields literally. */
    double blk_bwd_w_flops;
    /* optional output shape (ndim 0: derive uses [ceil(out_bytes / elem)]);
     * when given its element count must be ceil(blk_out_bytes / elem) */
    model_shape blk_out_shape;

    /* derived by model_derive() */
    model_shape in_shape, out_shape;
    double fwd_flops;        /* forward, per sample                          */
    double bwd_in_flops;     /* input-gradient (dL/dx), per sample           */
    double bwd_w_flops;      /* weight-gradient (dL/dW), per sample          */
    double macs;             /* conv2d/linear multiply-accumulates, forward  */
    uint64_t params;         /* trainable parameters                         */
    uint64_t out_elems;      /* output elements per sample (crosses a cut)   */
    uint64_t stash_elems;    /* elements the backward pass keeps per sample  */
} model_layer;

typedef struct model {
    char name[MODEL_NAME_MAX];
    model_shape input;       /* per-sample input shape                       */
    model_dtype dtype;       /* sample and activation element type           */
    int classes;             /* label count for a model ending in softmax_xent, else 0 */
    model_unit unit;         /* what a batch counts ("unit" in files; default sample) */
    int n_layers;
    model_layer *layers;     /* owned */
    int is_dag;              /* derived: some layer's inputs are not just the
                              * layer before it (a residual join, a skip)    */
    /* optional "transformer" member (models/model_tfm.c): the architecture
     * the block layers were built from, which tensor parallelism needs to
     * split them (planner/tensor.h); has_tfm 0: none given */
    int has_tfm;
    tfm_desc tfm;
} model;

/* Load and validate a model file; derives shapes and costs.  On failure the
 * model is left empty (nothing to free) and e names file and JSON path. */
int model_load(model *m, const char *path, cl_err *e);
/* Same, from a parsed document (used by the plan loader and tests). */
struct cJSON;
int model_from_json(model *m, const struct cJSON *root, const char *file, cl_err *e);
/* Serialise: model_from_json(model_to_json(m)) reproduces m exactly.  The
 * caller owns the result (cJSON_Delete). */
struct cJSON *model_to_json(const model *m);
int model_save(const model *m, const char *path, cl_err *e);
void model_free(model *m);
/* A deep copy of src into *dst (nothing shared: either may be freed or
 * changed without touching the other); model_free releases it. */
void model_copy(model *dst, const model *src);

/* Shape inference and cost derivation over the layers as set; fills the
 * derived fields.  Reports shape mismatches and size overflow as CL_EINPUT
 * naming `file` and `layers[i]`.  Loaders call it; code that builds models
 * in memory (importers, tests) calls it too. */
int model_derive(model *m, const char *file, cl_err *e);

/* Building a model in code (importers, tests).  Allocate layers with
 * cl_calloc(n_layers, sizeof(model_layer)) and set:
 *   model: name, input (ndim and d[]), dtype, classes (0 = taken from a final
 *          softmax_xent, else left 0), n_layers, layers;
 *   layer: name (non-empty, unique, not "input"), kind, n_inputs and inputs[]
 *          (n_inputs 0 = the chain default: layer i - 1, or the model input
 *          for layer 0; derive writes the default back), and the kind's
 *          hyper-parameters exactly as the file would give them: conv2d
 *          out_channels, kernel, stride (>= 1), padding, bias; pools kernel,
 *          stride (>= 1), padding; linear out_features, bias; dropout
 *          dropout_p; block every blk_* field (model_block_init sets the
 *          loader's defaults).  Leave the derived fields zero.
 * Then call model_derive; model_free releases the layers. */

/* Reset *l to a block layer named `name` with the loader's defaults:
 * bwd = 2 x fwd, weight-gradient half of it when params > 0, inputs = the
 * chain default (set n_inputs/inputs afterwards for a DAG). */
void model_block_init(model_layer *l, const char *name, double fwd_flops,
                      double params, double out_bytes, double stash_bytes);

/* The "transformer" member (models/model_tfm.c).  Read: absent leaves
 * m->has_tfm 0; present, it must pass tfm_check and describe the layers
 * (L + 2 of them, the whole model's parameters = tfm_params), else
 * CL_EINPUT naming "transformer".  Write: adds it to root when has_tfm. */
struct jx;
int model_tfm_read(struct jx *j, const struct cJSON *root, model *m);
void model_tfm_write(struct cJSON *root, const model *m);

/* Shape and costs of a vision transformer kind (models/model_vit.c), for
 * model_derive: l->in_shape set; fills out_shape and the costs; returns
 * the parameter count, or -1 with a one-line reason in why. */
int64_t model_vit_derive(model_layer *l, int needs_grad, char *why, size_t cap);

/* Index of the layer called `name`, or -1 (linear search). */
int model_find(const model *m, const char *name);

/* Totals over all layers. */
typedef struct model_totals {
    double fwd_flops, bwd_in_flops, bwd_w_flops, macs;
    uint64_t params, out_elems, stash_elems;
} model_totals;
model_totals model_sum(const model *m);

/* Bytes of one element of activations for this model. */
static inline uint64_t model_elem_bytes(const model *m) { return (uint64_t)model_dtype_bytes(m->dtype); }

/* Do `bytes` of parameters (a profile's or a plan's) describe `params`
 * parameters of k layers?  Profiles store them at the model's element size
 * (derived) or as float32 (measured, imported): true when for one of those
 * sizes s, s x params - s x k < bytes <= s x params (an import rounds each
 * layer's bytes up to whole elements), within rounding of the sums. */
int model_param_bytes_match(const model *m, double bytes, uint64_t params, int k);

/* Chain view of a DAG, in layer order: cut_elems[i] is the per-sample number
 * of elements that cross a cut placed after layer i, i.e. the outputs of
 * every layer <= i (or the model input) consumed by some layer > i.
 * cut_elems has n_layers entries (the last is 0).  Caller frees. */
uint64_t *model_cut_elems(const model *m);

/* The layers' names in sorted order (ties by layer index), for the loader's
 * and the checker's duplicate test and the name lookup; caller frees. */
typedef struct model_name_ix { const char *name; int ix; } model_name_ix;
model_name_ix *model_names_sorted(const model *m);
/* The first layer called `name` in names[0..n) (sorted as above), or -1. */
int model_names_find(const model_name_ix *names, int n, const char *name);

#endif
