/* kern.h - the executor's own AVX-512 kernels for the shapes OpenBLAS runs
 * slowly (internal to exec/; layers.c chooses them).
 *
 * Which shapes and why (docs/executor.md, "Performance"):
 * - conv2d with few input channels (C k < 16, stride 1): a direct
 *   convolution, no lowering at all; lanes are a row's output pixels,
 *   registers hold 8 output channels x 32 pixels.  Its weight gradient
 *   likewise (lanes over pixels, 4 channels x 5 taps in registers).
 * - conv2d weight gradient with O a multiple of 32 (stride 1): dW^T
 *   (K, O) accumulated over pixels with the input read in place (implicit
 *   im2col), lanes over output channels.
 * - linear layers with at most 12 outputs: forward (lanes over 2 outputs
 *   x 8 input features, then a fixed reduction tree), input gradient and
 *   weight gradient (lanes over the input features).
 * - linear layers with more: a blocked SGEMM (gemm_avx512.c,
 *   docs/executor-sgemm.md).
 * - conv2d forward and weight gradient with C k a multiple of 16: the
 *   SGEMM's register tile run directly on the input (conv_tile.h).
 *
 * Every kernel is compiled for AVX-512F, AVX-512DQ and FMA only (function target
 * attributes; the rest of the build stays baseline x86-64) and runs only
 * when exec_kern_avx512() says the CPU and OS support it, so the binary
 * still runs anywhere: elsewhere layers.c keeps its OpenBLAS path.  The
 * choice depends on the layer's shape and the CPU only, never on timing or
 * thread count, and every kernel sums in a fixed order: results are bit for
 * bit reproducible (they differ from the OpenBLAS path's by rounding).
 *
 * Arrays follow layers.h's layouts; nothing here allocates.
 */
#ifndef CL_EXEC_KERN_H
#define CL_EXEC_KERN_H

#include <stdint.h>

#include "layers.h"

/* 1 when the AVX-512 kernels run: the CPU has AVX-512F and FMA, the OS
 * saves the registers, and exec_kern_disable() has not turned them off. */
int exec_kern_avx512(void);

/* Builds linear_avx512.c's tables of where the forward's results go; the
 * detection behind exec_kern_avx512() calls it once, when the kernels can
 * run. */
void exec_kern_linear_tables(void);

/* Tests only: off != 0 sends every layer down the portable path (OpenBLAS),
 * so both paths can be checked on an AVX-512 machine.  Returns the previous
 * setting.  Not for use while other threads run layers. */
int exec_kern_disable(int off);

/* Largest output count the small-linear kernels take, and largest input
 * count for the forward one (its regrouped weights live on the stack). */
#define EXEC_KERN_LINEAR_MAX_OC 12
#define EXEC_KERN_LINEAR_FWD_MAX_IC 512

/* linear with OC <= EXEC_KERN_LINEAR_MAX_OC (and for the forward IC <=
 * EXEC_KERN_LINEAR_FWD_MAX_IC), as in layers.h */
void exec_kern_linear_forward(float *out, const float *in, const float *w, const float *b,
                              int B, int IC, int OC);
void exec_kern_linear_backward_input(float *din, const float *dout, const float *w, int B,
                                     int IC, int OC);
void exec_kern_linear_backward_weight(float *dw, float *db, const float *dout,
                                      const float *in, int B, int IC, int OC);

/* Direct conv2d, stride 1, one sample, on the row-shift lowering colx
 * (C k, Hp Wo) of layers.c: colx[(c, kj)][r Wo + ow] = padded input
 * [c][r][ow + kj], so tap (c, ki, kj) of flat output pixel p = oh Wo + ow
 * is colx[(c, kj)][ki Wo + p] and lanes run over flat pixels with no
 * waste.  wt (C k k, Opad): the weights transposed so one tap's output
 * channels are adjacent, Opad = O rounded up to 8, zero beyond O
 * (exec_kern_conv_wt fills it); b (O) or NULL.  Overwrites out (O, Ho, Wo). */
void exec_kern_conv_wt(float *wt, const float *w, const exec_conv *g);
/* colx (C k, Hp Wo) of one sample's input in (C, H, W), zero padding
 * included (stride 1). */
void exec_kern_conv_shifts(float *colx, const float *in, const exec_conv *g);
void exec_kern_conv_forward(float *out, const float *colx, const float *wt, const float *b,
                            const exec_conv *g);

/* Direct weight gradient, stride 1, lanes over flat pixels, `ns` samples:
 * acc (O, C k k, 16) += per-lane partial sums of d (ns, O, Ho, Wo) times
 * the taps of colx (ns, C k, Hp Wo), the samples' row-shift lowerings;
 * bacc (O, 16) += per-lane sums of d (the bias gradient; bacc may be
 * NULL).  next (or NULL): the gradients the following call will read,
 * (O, Ho, Wo), prefetched meanwhile.  exec_kern_conv_acc_finish adds the
 * lane sums into dw (O, C, k, k) and db (O; NULL skips it). */
void exec_kern_conv_bw_pixels(float *acc, float *bacc, const float *d, const float *colx,
                              const exec_conv *g, int ns, const float *next);
void exec_kern_conv_acc_finish(float *dw, float *db, const float *acc, const float *bacc,
                               const exec_conv *g);
/* Samples exec_kern_conv_bw_pixels takes at a time (layers.c's scratch
 * holds this many lowerings for such shapes). */
#define EXEC_KERN_BWP_SAMPLES 1

/* Direct weight gradient, stride 1, O % 32 == 0, one sample: dwT (C k k, O)
 * += taps x d^T, with dT (Ho Wo, O) the caller's scratch for d transposed. */
void exec_kern_conv_bw_channels(float *dwT, float *dT, const float *d, const float *pad,
                                const exec_conv *g);

/* Elementwise passes with the same results as vec.h's (and layers.c's
 * dropout loops): max(in, 0); sel > 0 ? in : 0; mask ? in * scale : 0.
 * Besides being wider, they keep the 512-bit units busy between the
 * products: after a few microseconds without 512-bit instructions this CPU
 * runs the next ones slowly while the units power up (measured:
 * docs/executor.md, "Own kernels"). */
void exec_kern_relu(float *out, const float *in, int64_t n);
void exec_kern_pass_positive(float *out, const float *in, const float *sel, int64_t n);
void exec_kern_mask_scale(float *out, const float *in, const uint8_t *mask, int64_t n,
                          float scale);

/* softmax cross-entropy, as in layers.h: lanes over a row's classes, e^x
 * by a polynomial (within 2 ulp of expf, so probabilities and losses differ
 * from the portable path's by rounding); the backward gives the portable
 * loop's bits.  Run on 512-bit vectors, the loss also keeps the wide units
 * awake between the classifier's forward and its input gradient. */
double exec_kern_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                      const int32_t *labels, int B, int K);
void exec_kern_softmax_xent_backward_input(float *dlogits, const float *probs,
                                           const int32_t *labels, int B, int K, float scale);

/* Own blocked SGEMM (gemm_avx512.c): row-major C (M, N) = op(A) op(B),
 * plus bias[j] on every row when bias is not NULL, plus C when beta (0 or
 * 1) is 1; ta / tb as exec_gemm's.  A x B^T with
 * M < N runs as C^T = B A^T so that the smaller operand is packed.
 * Reproducible: the summation order depends on the shape only.  Callers
 * choose it by shape (layers.c, exec_kern_gemm_wins). */
void exec_kern_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, const float *bias, int beta, float *C, int ldc);

/* db (cols) += the column sums of d (rows, cols), row by row: the same
 * additions in the same order as the portable loop (the linear layer's bias
 * gradient; at 4 lanes it took 12% of a ViT weight-gradient pass). */
void exec_kern_colsum_add(float *db, const float *d, int rows, int cols);

/* Sum of n floats in a fixed order (16 lanes x 4 accumulators, then a
 * tree), for bias gradients. */
float exec_kern_sum(const float *a, int64_t n);

#endif
