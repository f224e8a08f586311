/* conv_tile.h - conv2d's forward and weight gradient as direct kernels on
 * the own SGEMM's register tile, depth C k k in one pass, nothing lowered
 * (conv_avx512.c; internal to exec/nn; layers.c chooses them on AVX-512
 * CPUs for the shapes exec_convg_shape accepts; why and how fast:
 * docs/executor-sgemm.md).  Arrays follow layers.h's layouts. */
#ifndef CL_EXEC_CONV_TILE_H
#define CL_EXEC_CONV_TILE_H

#include <stdint.h>

#include "layers.h"

/* 1 for shapes these kernels take: C k >= min_ck (below it the direct
 * kernels of kern.h run) and a multiple of 16, at least 16 output
 * channels.  Depends on the shape only. */
int exec_convg_shape(const exec_conv *g, int min_ck);

/* 1 for shapes exec_convg_backward_input takes: stride 1, C <= 16, C k >=
 * min_ck, O a multiple of 16, pad <= k - 1.  Depends on the shape only. */
int exec_convg_din_shape(const exec_conv *g, int min_ck);

/* Scratch the functions below use, in floats: col (packed weights, O in
 * 32s x C k k, or d transposed, Ho Wo x O in 32s, or the input
 * gradient's O k k x 16), pad (Hp x Wp x C, or d padded, Hq x Wq x O),
 * wp (C k k x O). */
int64_t exec_convg_col_floats(const exec_conv *g);
int64_t exec_convg_pad_floats(const exec_conv *g);
typedef struct exec_conv_scr {
    float *col, *pad, *wp;
} exec_conv_scr;

/* As layers.h's exec_conv2d_forward, _backward_weight (dw and db
 * accumulate; db may be NULL) and _backward_input (din written), the last
 * for exec_convg_din_shape's shapes (conv_avx512.c says how). */
void exec_convg_forward(float *out, const float *in, const float *w, const float *b,
                        const exec_conv_scr *sc, const exec_conv *g, int B);
void exec_convg_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                const exec_conv_scr *sc, const exec_conv *g, int B);
void exec_convg_backward_input(float *din, const float *dout, const float *w,
                               const exec_conv_scr *sc, const exec_conv *g, int B);

#endif
