/* tfm_ref.h - double-precision references of the vision transformer's
 * layer kinds (exec/nn/layers_tfm.h), for the finite-difference checks. */
#ifndef CL_TEST_TFM_REF_H
#define CL_TEST_TFM_REF_H

#include "exec/nn/layers_tfm.h"

/* y = the layer g (unsplit; g->tp is ignored) on a batch of B: x and y laid
 * out as exec_tfm_forward's, w as the unsplit layer's parameters. */
void tfm_ref_eval(double *y, const double *x, const double *w, const exec_tfm *g, int B);

/* For ATTN and MLP: a = the input of the last (row-parallel) product,
 * ctx (B T, D) or GELU(W1 LN(x) + b1) (B T, F). */
void tfm_ref_inner(double *a, const double *x, const double *w, const exec_tfm *g, int B);

#endif
