/* layers.c - forward/backward pairs (layers.h).  Matrix products go through
 * exec_gemm (OpenBLAS); everything else is plain loops the compiler
 * vectorises.  Reductions run in a fixed order, so results are bit-for-bit
 * reproducible. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "layers.h"

/* ======================================================================== */
/* linear                                                                    */

void exec_linear_forward(float *out, const float *in, const float *w, const float *b,
                         int B, int I, int O)
{
    /* out (B,O) = b broadcast, then += in (B,I) . w^T (I,O) */
    if (b) {
        for (int r = 0; r < B; r++) memcpy(out + (int64_t)r * O, b, (size_t)O * sizeof *out);
    }
    exec_gemm(0, 1, B, O, I, 1.0f, in, I, w, I, b ? 1.0f : 0.0f, out, O);
}

void exec_linear_backward_input(float *din, const float *dout, const float *w,
                                int B, int I, int O)
{
    /* din (B,I) = dout (B,O) . w (O,I) */
    exec_gemm(0, 0, B, I, O, 1.0f, dout, O, w, I, 0.0f, din, I);
}

void exec_linear_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 int B, int I, int O)
{
    /* dw (O,I) += dout^T (O,B) . in (B,I) */
    exec_gemm(1, 0, O, I, B, 1.0f, dout, O, in, I, 1.0f, dw, I);
    if (db) {
        for (int r = 0; r < B; r++) {
            const float *d = dout + (int64_t)r * O;
            for (int o = 0; o < O; o++) db[o] += d[o];
        }
    }
}

/* ======================================================================== */
/* conv2d                                                                    */

int exec_conv_init(exec_conv *g, int C, int H, int W, int O, int k, int stride, int pad)
{
    memset(g, 0, sizeof *g);
    if (C < 1 || H < 1 || W < 1 || O < 1 || k < 1 || stride < 1 || pad < 0) return -1;
    if (H + 2 * pad < k || W + 2 * pad < k) return -1;
    *g = (exec_conv){C, H, W, O, k, stride, pad, (H + 2 * pad - k) / stride + 1,
                     (W + 2 * pad - k) / stride + 1};
    return 0;
}

static int conv_is_direct(const exec_conv *g)
{
    return g->k == 1 && g->stride == 1 && g->pad == 0;
}

int64_t exec_conv_col_floats(const exec_conv *g)
{
    if (conv_is_direct(g)) return 0;
    return (int64_t)g->C * g->k * g->k * g->Ho * g->Wo;
}

/* Output columns ow whose input column ow*s - p + kj lies in [0, W):
 * [*lo, *hi). */
static void valid_range(int n_out, int n_in, int s, int p, int kj, int *lo, int *hi)
{
    /* smallest ow with ow*s >= p - kj; largest with ow*s - p + kj <= n_in - 1 */
    int a = p - kj;
    int l = a <= 0 ? 0 : (a + s - 1) / s;
    int b = n_in - 1 + p - kj; /* ow*s <= b */
    int h = b < 0 ? 0 : b / s + 1;
    if (h > n_out) h = n_out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* col (C*k*k, Ho*Wo) from one sample's in (C,H,W). */
static void im2col(float *col, const float *in, const exec_conv *g)
{
    const int k = g->k, s = g->stride, p = g->pad, Ho = g->Ho, Wo = g->Wo;
    for (int c = 0; c < g->C; c++) {
        const float *plane = in + (int64_t)c * g->H * g->W;
        for (int ki = 0; ki < k; ki++) {
            for (int kj = 0; kj < k; kj++) {
                float *row = col + ((int64_t)(c * k + ki) * k + kj) * Ho * Wo;
                int lo, hi;
                valid_range(Wo, g->W, s, p, kj, &lo, &hi);
                for (int oh = 0; oh < Ho; oh++) {
                    float *dst = row + (int64_t)oh * Wo;
                    int ih = oh * s - p + ki;
                    if (ih < 0 || ih >= g->H) {
                        memset(dst, 0, (size_t)Wo * sizeof *dst);
                        continue;
                    }
                    const float *src = plane + (int64_t)ih * g->W - p + kj;
                    for (int ow = 0; ow < lo; ow++) dst[ow] = 0;
                    if (s == 1) {
                        memcpy(dst + lo, src + lo, (size_t)(hi - lo) * sizeof *dst);
                    } else {
                        for (int ow = lo; ow < hi; ow++) dst[ow] = src[ow * s];
                    }
                    for (int ow = hi; ow < Wo; ow++) dst[ow] = 0;
                }
            }
        }
    }
}

/* din (C,H,W) = sum of col (C*k*k, Ho*Wo) entries onto the input positions
 * they were copied from (the adjoint of im2col); din is overwritten. */
static void col2im(float *din, const float *col, const exec_conv *g)
{
    const int k = g->k, s = g->stride, p = g->pad, Ho = g->Ho, Wo = g->Wo;
    memset(din, 0, (size_t)g->C * g->H * g->W * sizeof *din);
    for (int c = 0; c < g->C; c++) {
        float *plane = din + (int64_t)c * g->H * g->W;
        for (int ki = 0; ki < k; ki++) {
            for (int kj = 0; kj < k; kj++) {
                const float *row = col + ((int64_t)(c * k + ki) * k + kj) * Ho * Wo;
                int lo, hi;
                valid_range(Wo, g->W, s, p, kj, &lo, &hi);
                for (int oh = 0; oh < Ho; oh++) {
                    int ih = oh * s - p + ki;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *src = row + (int64_t)oh * Wo;
                    float *dst = plane + (int64_t)ih * g->W - p + kj;
                    if (s == 1) {
                        for (int ow = lo; ow < hi; ow++) dst[ow] += src[ow];
                    } else {
                        for (int ow = lo; ow < hi; ow++) dst[ow * s] += src[ow];
                    }
                }
            }
        }
    }
}

void exec_conv2d_forward(float *out, const float *in, const float *w, const float *b,
                         float *col, const exec_conv *g, int B)
{
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W;
    const int K = g->C * g->k * g->k;
    for (int n = 0; n < B; n++) {
        float *o = out + (int64_t)n * g->O * HWo; /* (O, Ho*Wo) */
        const float *x = in + (int64_t)n * CHW;
        const float *cols = x;                    /* (K, Ho*Wo) */
        if (!conv_is_direct(g)) {
            im2col(col, x, g);
            cols = col;
        }
        if (b) {
            for (int c = 0; c < g->O; c++) {
                float *r = o + (int64_t)c * HWo;
                for (int64_t i = 0; i < HWo; i++) r[i] = b[c];
            }
        }
        /* o (O, HWo) (+)= w (O, K) . cols (K, HWo) */
        exec_gemm(0, 0, g->O, (int)HWo, K, 1.0f, w, K, cols, (int)HWo, b ? 1.0f : 0.0f, o,
                  (int)HWo);
    }
}

void exec_conv2d_backward_input(float *din, const float *dout, const float *w,
                                float *col, const exec_conv *g, int B)
{
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W;
    const int K = g->C * g->k * g->k;
    for (int n = 0; n < B; n++) {
        const float *d = dout + (int64_t)n * g->O * HWo;
        float *x = din + (int64_t)n * CHW;
        /* dcol (K, HWo) = w^T (K, O) . d (O, HWo) */
        float *dcol = conv_is_direct(g) ? x : col;
        exec_gemm(1, 0, K, (int)HWo, g->O, 1.0f, w, K, d, (int)HWo, 0.0f, dcol, (int)HWo);
        if (!conv_is_direct(g)) col2im(x, dcol, g);
    }
}

void exec_conv2d_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 float *col, const exec_conv *g, int B)
{
    const int64_t HWo = (int64_t)g->Ho * g->Wo, CHW = (int64_t)g->C * g->H * g->W;
    const int K = g->C * g->k * g->k;
    for (int n = 0; n < B; n++) {
        const float *d = dout + (int64_t)n * g->O * HWo;
        const float *x = in + (int64_t)n * CHW;
        const float *cols = x;
        if (!conv_is_direct(g)) {
            im2col(col, x, g);
            cols = col;
        }
        /* dw (O, K) += d (O, HWo) . cols^T (HWo, K) */
        exec_gemm(0, 1, g->O, K, (int)HWo, 1.0f, d, (int)HWo, cols, (int)HWo, 1.0f, dw, K);
        if (db) {
            for (int c = 0; c < g->O; c++) {
                const float *r = d + (int64_t)c * HWo;
                float s = 0;
                for (int64_t i = 0; i < HWo; i++) s += r[i];
                db[c] += s;
            }
        }
    }
}

/* ======================================================================== */
/* pooling                                                                   */

int exec_pool_init(exec_pool *g, int C, int H, int W, int k, int stride, int pad)
{
    memset(g, 0, sizeof *g);
    if (C < 1 || H < 1 || W < 1 || k < 1 || stride < 1 || pad < 0 || pad >= k) return -1;
    if (H + 2 * pad < k || W + 2 * pad < k) return -1;
    *g = (exec_pool){C, H, W, k, stride, pad, (H + 2 * pad - k) / stride + 1,
                     (W + 2 * pad - k) / stride + 1};
    return 0;
}

/* Window rows/cols of output (oh, ow) clipped to the input: [*h0,*h1) x [*w0,*w1). */
static void pool_window(const exec_pool *g, int oh, int ow, int *h0, int *h1, int *w0, int *w1)
{
    int a = oh * g->stride - g->pad, b = ow * g->stride - g->pad;
    *h0 = a < 0 ? 0 : a;
    *h1 = a + g->k > g->H ? g->H : a + g->k;
    *w0 = b < 0 ? 0 : b;
    *w1 = b + g->k > g->W ? g->W : b + g->k;
}

void exec_maxpool2d_forward(float *out, int32_t *idx, const float *in, const exec_pool *g,
                            int B)
{
    const int64_t planes = (int64_t)B * g->C;
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = in + pl * g->H * g->W;
        float *o = out + pl * g->Ho * g->Wo;
        int32_t *ix = idx + pl * g->Ho * g->Wo;
        for (int oh = 0; oh < g->Ho; oh++) {
            for (int ow = 0; ow < g->Wo; ow++) {
                int h0, h1, w0, w1;
                pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
                int best = h0 * g->W + w0;
                float m = x[best];
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++)
                        if (x[h * g->W + w] > m) {
                            m = x[h * g->W + w];
                            best = h * g->W + w;
                        }
                o[oh * g->Wo + ow] = m;
                ix[oh * g->Wo + ow] = best;
            }
        }
    }
}

void exec_maxpool2d_backward_input(float *din, const float *dout, const int32_t *idx,
                                   const exec_pool *g, int B)
{
    const int64_t planes = (int64_t)B * g->C, HW = (int64_t)g->H * g->W,
                  HWo = (int64_t)g->Ho * g->Wo;
    memset(din, 0, (size_t)(planes * HW) * sizeof *din);
    for (int64_t pl = 0; pl < planes; pl++) {
        float *x = din + pl * HW;
        const float *d = dout + pl * HWo;
        const int32_t *ix = idx + pl * HWo;
        for (int64_t i = 0; i < HWo; i++) x[ix[i]] += d[i];
    }
}

void exec_avgpool2d_forward(float *out, const float *in, const exec_pool *g, int B)
{
    const int64_t planes = (int64_t)B * g->C;
    const float inv = 1.0f / (float)(g->k * g->k);
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = in + pl * g->H * g->W;
        float *o = out + pl * g->Ho * g->Wo;
        for (int oh = 0; oh < g->Ho; oh++) {
            for (int ow = 0; ow < g->Wo; ow++) {
                int h0, h1, w0, w1;
                pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
                float s = 0;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) s += x[h * g->W + w];
                o[oh * g->Wo + ow] = s * inv;
            }
        }
    }
}

void exec_avgpool2d_backward_input(float *din, const float *dout, const exec_pool *g, int B)
{
    const int64_t planes = (int64_t)B * g->C, HW = (int64_t)g->H * g->W;
    const float inv = 1.0f / (float)(g->k * g->k);
    memset(din, 0, (size_t)(planes * HW) * sizeof *din);
    for (int64_t pl = 0; pl < planes; pl++) {
        float *x = din + pl * HW;
        const float *d = dout + pl * g->Ho * g->Wo;
        for (int oh = 0; oh < g->Ho; oh++) {
            for (int ow = 0; ow < g->Wo; ow++) {
                int h0, h1, w0, w1;
                pool_window(g, oh, ow, &h0, &h1, &w0, &w1);
                float v = d[oh * g->Wo + ow] * inv;
                for (int h = h0; h < h1; h++)
                    for (int w = w0; w < w1; w++) x[h * g->W + w] += v;
            }
        }
    }
}

/* ======================================================================== */
/* relu, dropout                                                             */

void exec_relu_forward(float *out, const float *in, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = in[i] > 0 ? in[i] : 0.0f;
}

void exec_relu_backward_input(float *din, const float *dout, const float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) din[i] = out[i] > 0 ? dout[i] : 0.0f;
}

void exec_dropout_forward(float *out, uint8_t *mask, const float *in, int64_t n, double p,
                          gsl_rng *rng)
{
    if (p <= 0) {
        memmove(out, in, (size_t)n * sizeof *out);
        memset(mask, 1, (size_t)n);
        return;
    }
    const float scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    for (int64_t i = 0; i < n; i++) {
        mask[i] = gsl_rng_uniform(rng) >= p;
        out[i] = mask[i] ? in[i] * scale : 0.0f;
    }
}

void exec_dropout_backward_input(float *din, const float *dout, const uint8_t *mask,
                                 int64_t n, double p)
{
    const float scale = p <= 0 ? 1.0f : p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    for (int64_t i = 0; i < n; i++) din[i] = mask[i] ? dout[i] * scale : 0.0f;
}

/* ======================================================================== */
/* batchnorm2d                                                               */

void exec_batchnorm2d_forward_train(float *out, float *xhat, float *invstd, float *run_mean,
                                    float *run_var, const float *in, const float *gamma,
                                    const float *beta, int B, int C, int HW)
{
    const int64_t N = (int64_t)B * HW; /* values per channel */
    assert(N >= 1);
    for (int c = 0; c < C; c++) {
        /* two passes in double: mean, then the centred sum of squares */
        double sum = 0;
        for (int n = 0; n < B; n++) {
            const float *x = in + ((int64_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) sum += x[i];
        }
        double mean = sum / (double)N, ss = 0;
        for (int n = 0; n < B; n++) {
            const float *x = in + ((int64_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
        }
        double var = ss / (double)N;
        double is = 1.0 / sqrt(var + EXEC_BN_EPS);
        invstd[c] = (float)is;
        const float m = (float)mean, s = (float)is, ga = gamma[c], be = beta[c];
        for (int n = 0; n < B; n++) {
            int64_t off = ((int64_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) {
                float h = (in[off + i] - m) * s;
                xhat[off + i] = h;
                out[off + i] = ga * h + be;
            }
        }
        double unbiased = N > 1 ? ss / (double)(N - 1) : var;
        run_mean[c] = (float)((1 - EXEC_BN_MOMENTUM) * run_mean[c] + EXEC_BN_MOMENTUM * mean);
        run_var[c] = (float)((1 - EXEC_BN_MOMENTUM) * run_var[c] + EXEC_BN_MOMENTUM * unbiased);
    }
}

void exec_batchnorm2d_forward_eval(float *out, const float *in, const float *gamma,
                                   const float *beta, const float *run_mean,
                                   const float *run_var, int B, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        float s = (float)(1.0 / sqrt((double)run_var[c] + EXEC_BN_EPS));
        float a = gamma[c] * s, b = beta[c] - run_mean[c] * gamma[c] * s;
        for (int n = 0; n < B; n++) {
            int64_t off = ((int64_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++) out[off + i] = a * in[off + i] + b;
        }
    }
}

/* Per channel: sum of dout and of dout * xhat, in double. */
static void bn_sums(double *sd, double *sdx, const float *dout, const float *xhat, int B,
                    int C, int HW, int c)
{
    double a = 0, b = 0;
    for (int n = 0; n < B; n++) {
        int64_t off = ((int64_t)n * C + c) * HW;
        for (int i = 0; i < HW; i++) {
            a += dout[off + i];
            b += (double)dout[off + i] * xhat[off + i];
        }
    }
    *sd = a;
    *sdx = b;
}

void exec_batchnorm2d_backward_input(float *din, const float *dout, const float *xhat,
                                     const float *invstd, const float *gamma, int B, int C,
                                     int HW)
{
    /* din = gamma * invstd * (dout - mean(dout) - xhat * mean(dout * xhat)) */
    const double N = (double)B * HW;
    for (int c = 0; c < C; c++) {
        double sd, sdx;
        bn_sums(&sd, &sdx, dout, xhat, B, C, HW, c);
        const float k = gamma[c] * invstd[c], md = (float)(sd / N), mdx = (float)(sdx / N);
        for (int n = 0; n < B; n++) {
            int64_t off = ((int64_t)n * C + c) * HW;
            for (int i = 0; i < HW; i++)
                din[off + i] = k * (dout[off + i] - md - xhat[off + i] * mdx);
        }
    }
}

void exec_batchnorm2d_backward_weight(float *dgamma, float *dbeta, const float *dout,
                                      const float *xhat, int B, int C, int HW)
{
    for (int c = 0; c < C; c++) {
        double sd, sdx;
        bn_sums(&sd, &sdx, dout, xhat, B, C, HW, c);
        dgamma[c] += (float)sdx;
        dbeta[c] += (float)sd;
    }
}

/* ======================================================================== */
/* softmax cross-entropy                                                     */

double exec_softmax_xent_forward(float *probs, float *loss, const float *logits,
                                 const int32_t *labels, int B, int K)
{
    double total = 0;
    for (int n = 0; n < B; n++) {
        const float *x = logits + (int64_t)n * K;
        float *p = probs + (int64_t)n * K;
        assert(labels[n] >= 0 && labels[n] < K);
        float m = x[0];
        for (int j = 1; j < K; j++) m = x[j] > m ? x[j] : m;
        double s = 0;
        for (int j = 0; j < K; j++) {
            p[j] = expf(x[j] - m);
            s += p[j];
        }
        float inv = (float)(1.0 / s);
        for (int j = 0; j < K; j++) p[j] *= inv;
        /* -log softmax = log(sum exp(x - m)) - (x_y - m), exact even when
         * p[y] underflows */
        double l = log(s) - ((double)x[labels[n]] - m);
        loss[n] = (float)l;
        total += l;
    }
    return total;
}

void exec_softmax_xent_backward_input(float *dlogits, const float *probs,
                                      const int32_t *labels, int B, int K, float scale)
{
    for (int n = 0; n < B; n++) {
        const float *p = probs + (int64_t)n * K;
        float *d = dlogits + (int64_t)n * K;
        for (int j = 0; j < K; j++) d[j] = scale * p[j];
        d[labels[n]] -= scale;
    }
}

int exec_count_correct(const float *scores, const int32_t *labels, int B, int K)
{
    int ok = 0;
    for (int n = 0; n < B; n++) {
        const float *x = scores + (int64_t)n * K;
        int best = 0;
        for (int j = 1; j < K; j++)
            if (x[j] > x[best]) best = j;
        ok += best == labels[n];
    }
    return ok;
}
