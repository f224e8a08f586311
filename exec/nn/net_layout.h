/* net_layout.h - what a net and its acts hold (private to net.c, which
 * builds them, and net_pass.c, which runs the passes over them; net.h is
 * the interface). */
#ifndef CL_EXEC_NET_LAYOUT_H
#define CL_EXEC_NET_LAYOUT_H

#include <gsl/gsl_rng.h>

#include "layers.h"
#include "layers_tfm.h"
#include "net.h"

typedef struct xlayer {
    int index;                /* model layer index */
    const model_layer *ml;
    model_kind kind;
    int64_t in_elems, out_elems; /* per sample */
    exec_conv conv;
    exec_pool pool;
    int IC, O;                 /* linear */
    int C, HW;                /* batchnorm2d */
    exec_tfm tg; int is_tfm;  /* the vision transformer's kinds (tfm_blocks.c) */
    int has_w, need_din;
    float *w, *b, *dw, *db;   /* into the blocks (b, db NULL without bias) */
    float *run_mean, *run_var;
    gsl_rng *rng;             /* dropout */
    /* memory plan */
    int keep_out, out_slot;   /* output kept in the acts, else this scratch slot */
    int keep_dout, dout_slot; /* output gradient likewise */
    int64_t aux_sample;       /* aux bytes per sample (argmax, mask, xhat, probs) */
    int64_t aux_fixed;        /* aux bytes per acts (batchnorm invstd) */
    uint64_t stash_bytes;     /* per sample, see exec_net_layer_bytes */
} xlayer;

struct exec_net {
    const model *m;
    int first, last, L, max_batch, flags;
    xlayer *ly;
    float *params, *grads, *bufs;
    int64_t n_params, n_bufs;
    exec_tensor *tensors;
    int n_tensors;
    int keep_x0;
    float *slot[2]; /* scratch for outputs and gradients not kept */
    float *col;     /* conv lowering scratch, for one call at a time */
    float *tfm_scratch; /* full recomputation's, likewise (max_batch samples) */
    int64_t n_tfm_scratch;
    float *seqbuf;      /* sequence parallelism's, likewise (exec_tfm.seqbuf) */
    int64_t n_seqbuf;
    const exec_tp_comm *tp; /* tensor parallelism: this worker's split, or NULL */
    exec_layer_clock *clock; /* per-layer timing, or NULL */
    int pass, at;            /* the pass running and its layer (exec_net_pass) */
};

struct exec_acts {
    const exec_net *net;
    int max_batch, batch, train;
    void *mem;
    uint64_t bytes;
    float *x0, *dx0;
    float **out, **dout;
    void **aux;
    int32_t *labels;
    double loss_sum;
    int correct;
};

#endif
