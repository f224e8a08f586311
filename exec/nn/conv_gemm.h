/* conv_gemm.h - conv2d through the own SGEMM, one product of depth C k k per
 * sample over a pixel-major im2col (internal to exec/nn; layers.c chooses
 * it on AVX-512 CPUs for the shapes exec_convg_shape accepts; why and how
 * fast: docs/executor-sgemm.md).  Arrays follow layers.h's layouts. */
#ifndef CL_EXEC_CONV_GEMM_H
#define CL_EXEC_CONV_GEMM_H

#include <stdint.h>

#include "layers.h"

/* 1 for shapes this path takes: C k >= min_ck (below it the direct
 * kernels of kern.h run), at least 16 output channels, and a lowering of
 * one sample that fits in half of L2.  Depends on the shape only. */
int exec_convg_shape(const exec_conv *g, int min_ck);

/* Scratch the functions below use, in floats: col (Ho Wo x C k k), pad
 * (Hp x Wp x C), wp (O x C k k). */
int64_t exec_convg_col_floats(const exec_conv *g);
int64_t exec_convg_pad_floats(const exec_conv *g);
typedef struct exec_conv_scr {
    float *col, *pad, *wp;
} exec_conv_scr;

/* As layers.h's exec_conv2d_forward / _backward_input / _backward_weight
 * (dw and db accumulate; db may be NULL). */
void exec_convg_forward(float *out, const float *in, const float *w, const float *b,
                        const exec_conv_scr *sc, const exec_conv *g, int B);
void exec_convg_backward_input(float *din, const float *dout, const float *w,
                               const exec_conv_scr *sc, const exec_conv *g, int B);
void exec_convg_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                const exec_conv_scr *sc, const exec_conv *g, int B);

#endif
