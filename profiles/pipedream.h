/* pipedream.h - import PipeDream's per-layer profiles (graph.txt).
 *
 * PipeDream (msr-fiddle/pipedream) publishes, per model, a text file of
 * nodes (module, forward and backward milliseconds per minibatch, output and
 * parameter bytes) and data-flow edges; ../shared/data/pipedream/README.md
 * gives the format and docs/formats.md, "PipeDream graph import", the rules
 * this importer applies.  The result is a model (one MODEL_BLOCK layer per
 * node, in a deterministic topological order, the edges kept as inputs) and
 * a matching profile (source "imported", one point at the profiled batch).
 */
#ifndef CL_PIPEDREAM_H
#define CL_PIPEDREAM_H

#include <stddef.h>

#include "base/status.h"

struct model;
struct prof;

/* The square RGB float32 images PipeDream's image models take, by side in
 * pixels, most common first: 224 (ImageNet CNNs), 299 (Inception), 331
 * (NASNet-Large), 227 (AlexNet as Caffe cut it), 256.  An Input node whose
 * output is a whole number of one side's images gives the profiled batch
 * size (the first side that divides it).  Small sides are left out on
 * purpose: 100 images of 32 x 32 are also one of 320 x 320, so a size could
 * not tell them apart; such a profile states its batch (--batch). */
#define PIPEDREAM_IMAGE_SIDES 224, 299, 331, 227, 256

typedef struct pipedream_info {
    int n_nodes, n_edges;
    double batch;        /* batch size the times are for                      */
    int batch_inferred;  /* 1: from the Input node's size; 0: given or default */
    int image_side;      /* inferred: the images' side (3 x side x side)      */
} pipedream_info;

/* Import a graph.txt.  batch > 0 states the profiled batch size; batch 0
 * infers it from the first Input node's activation size when that is a
 * whole number of 3 x side x side float32 images (PIPEDREAM_IMAGE_SIDES),
 * else uses 1 (the numbers are then "per minibatch", and the model's unit
 * is MODEL_UNIT_MINIBATCH).  Fills *m (model_free) and *p (prof_free), and
 * *info when not NULL.  Bad input fails with CL_EINPUT and a message
 * "<file>:<line>: <problem> (hint: ...)"; nothing is left to free. */
int pipedream_import(const char *path, double batch, struct model *m, struct prof *p,
                     pipedream_info *info, cl_err *e);

/* Same from text in memory (text[len] == '\0'); `file` names it in errors
 * and its base name without extension becomes the model's name. */
int pipedream_parse(const char *file, const char *text, size_t len, double batch,
                    struct model *m, struct prof *p, pipedream_info *info, cl_err *e);

#endif
