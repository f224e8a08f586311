/* layers.h - forward and backward passes of every layer kind the executor
 * runs, on raw float32 arrays (llm.c style: outputs first, shapes in
 * comments, B = batch).
 *
 * Conventions shared by every pair:
 * - Activations are row-major with the batch first: (B, C, H, W) or (B, N).
 * - x_forward(out, ..., in, ...) overwrites `out`.
 * - x_backward_input(din, dout, ...) overwrites `din` with dL/d(in) given
 *   dout = dL/d(out).  It never reads `din` first.
 * - x_backward_weight(dw, ..., dout, in, ...) ADDS dL/dW into the gradient
 *   arrays, so gradients of several microbatches accumulate until the
 *   optimiser consumes (and zeroes) them.
 * - The input- and weight-gradient calls are independent of each other and
 *   may run in either order (zero-bubble schedules run W later).
 * - Scratch arrays (`col`) are caller-owned; sizes come from the *_floats
 *   helpers.  Nothing here allocates.
 */
#ifndef CL_EXEC_LAYERS_H
#define CL_EXEC_LAYERS_H

#include <stdint.h>

#include <gsl/gsl_rng.h>

/* ------------------------------------------------------------------------ */
/* linear: out = in W^T + b                                                  */

/* out (B,OC), in (B,IC), w (OC,IC), b (OC) or NULL */
void exec_linear_forward(float *out, const float *in, const float *w, const float *b,
                         int B, int IC, int OC);
/* din (B,IC) = dout (B,OC) w (OC,IC) */
void exec_linear_backward_input(float *din, const float *dout, const float *w,
                                int B, int IC, int OC);
/* dw (OC,IC) += dout^T in; db (OC) += sum over the batch of dout (db may be NULL) */
void exec_linear_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 int B, int IC, int OC);

/* ------------------------------------------------------------------------ */
/* conv2d, lowered onto matrix products through im2col                      */

typedef struct exec_conv {
    int C, H, W;        /* input channels and size */
    int O;              /* output channels */
    int k, stride, pad; /* square kernel, stride >= 1, zero padding */
    int Ho, Wo;         /* output size: (H + 2 pad - k) / stride + 1 */
} exec_conv;

/* Fill Ho and Wo; returns 0, or -1 when the kernel does not fit. */
int exec_conv_init(exec_conv *g, int C, int H, int W, int O, int k, int stride, int pad);
/* Floats of the `col` scratch the conv calls need (0 for a 1x1 kernel with
 * stride 1 and no padding, which multiplies the input directly). */
int64_t exec_conv_col_floats(const exec_conv *g);

/* out (B,O,Ho,Wo), in (B,C,H,W), w (O,C,k,k), b (OC) or NULL, col scratch */
void exec_conv2d_forward(float *out, const float *in, const float *w, const float *b,
                         float *col, const exec_conv *g, int B);
/* din (B,C,H,W), dout (B,O,Ho,Wo), w (O,C,k,k) */
void exec_conv2d_backward_input(float *din, const float *dout, const float *w,
                                float *col, const exec_conv *g, int B);
/* dw (O,C,k,k) += ..., db (OC) += ... (may be NULL); in (B,C,H,W) */
void exec_conv2d_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 float *col, const exec_conv *g, int B);

/* ------------------------------------------------------------------------ */
/* pooling (square window; padding cells never win a max and count as zeros
 * in an average, whose divisor is always k*k)                               */

typedef struct exec_pool {
    int C, H, W, k, stride, pad, Ho, Wo;
} exec_pool;

/* Fill Ho and Wo; returns 0, or -1 when the window does not fit or
 * pad >= k (a window could then lie entirely in the padding). */
int exec_pool_init(exec_pool *g, int C, int H, int W, int k, int stride, int pad);

/* out (B,C,Ho,Wo), idx (B,C,Ho,Wo): position h*W+w of each max in its
 * input plane (the first one on ties), in (B,C,H,W) */
void exec_maxpool2d_forward(float *out, int32_t *idx, const float *in, const exec_pool *g,
                            int B);
/* din (B,C,H,W), dout (B,C,Ho,Wo), idx from the forward pass */
void exec_maxpool2d_backward_input(float *din, const float *dout, const int32_t *idx,
                                   const exec_pool *g, int B);
void exec_avgpool2d_forward(float *out, const float *in, const exec_pool *g, int B);
void exec_avgpool2d_backward_input(float *din, const float *dout, const exec_pool *g, int B);

/* ------------------------------------------------------------------------ */
/* elementwise                                                               */

/* out (n) = max(in, 0) */
void exec_relu_forward(float *out, const float *in, int64_t n);
/* din (n) = dout where out > 0, else 0 (out: the forward output; din may
 * alias dout) */
void exec_relu_backward_input(float *din, const float *dout, const float *out, int64_t n);

/* Inverted dropout: keep each element with probability 1 - p and scale it
 * by 1 / (1 - p), so evaluation is the identity.  mask (n): 1 kept, 0
 * dropped, drawn from rng (one uniform per element, in order). */
void exec_dropout_forward(float *out, uint8_t *mask, const float *in, int64_t n, double p,
                          gsl_rng *rng);
void exec_dropout_backward_input(float *din, const float *dout, const uint8_t *mask,
                                 int64_t n, double p);

/* ------------------------------------------------------------------------ */
/* batchnorm2d over (B, H, W) per channel; a 1-D input (B, N) is HW = 1     */

#define EXEC_BN_EPS 1e-5      /* PyTorch's defaults */
#define EXEC_BN_MOMENTUM 0.1

/* Training: normalise with the batch's mean and biased variance; keep xhat
 * (B,C,HW) and invstd (C) for the backward pass; update the running mean
 * and the running (unbiased) variance with EXEC_BN_MOMENTUM.
 * out, xhat, in (B,C,HW); gamma, beta, run_mean, run_var, invstd (C) */
void exec_batchnorm2d_forward_train(float *out, float *xhat, float *invstd, float *run_mean,
                                    float *run_var, const float *in, const float *gamma,
                                    const float *beta, int B, int C, int HW);
/* Evaluation: normalise with the running statistics. */
void exec_batchnorm2d_forward_eval(float *out, const float *in, const float *gamma,
                                   const float *beta, const float *run_mean,
                                   const float *run_var, int B, int C, int HW);
/* din (B,C,HW) from dout, the forward's xhat and invstd (training mode) */
void exec_batchnorm2d_backward_input(float *din, const float *dout, const float *xhat,
                                     const float *invstd, const float *gamma, int B, int C,
                                     int HW);
/* dgamma (C) += sum dout * xhat; dbeta (C) += sum dout */
void exec_batchnorm2d_backward_weight(float *dgamma, float *dbeta, const float *dout,
                                      const float *xhat, int B, int C, int HW);

/* ------------------------------------------------------------------------ */
/* softmax cross-entropy                                                     */

/* probs (B,K) = softmax(logits (B,K)); loss (B) = -log probs[label];
 * labels (B) in [0, K).  Returns the sum of the losses. */
double exec_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                 const int32_t *labels, int B, int K);
/* dlogits (B,K) = scale * (probs - onehot(label)); scale is dL/d(loss_b),
 * 1 / (samples in the minibatch) for a mean loss. */
void exec_softmax_xent_backward_input(float *dlogits, const float *probs,
                                      const int32_t *labels, int B, int K, float scale);
/* Number of rows whose largest score (first on ties) is the label. */
int exec_count_correct(const float *scores, const int32_t *labels, int B, int K);

#endif
