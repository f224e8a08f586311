/* layers.c - forward/backward pairs (layers.h); conv2d's in conv2d.c.  Matrix products go through
 * exec_gemm (OpenBLAS) or, on AVX-512 CPUs, the own kernels and SGEMM of
 * kern.h; everything else is plain loops the compiler
 * vectorises.  Reductions run in a fixed order, so results are bit-for-bit
 * reproducible. */
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "gemm.h"
#include "kern.h"
#include "layers.h"
#include "tensor.h"
#include "vec.h"

/* ======================================================================== */
/* linear                                                                    */

#define LINEAR_THIN_OC 32   /* fewer output features than this: row blocks */
#define LINEAR_ROW_BLOCK 64

/* Few outputs on an AVX-512 CPU: the kernels of kern.h, faster than
 * OpenBLAS on such skinny products (docs/executor.md, "Own kernels"). */
static int linear_small(int OC)
{
    return OC <= EXEC_KERN_LINEAR_MAX_OC && exec_kern_avx512();
}

/* The own SGEMM (kern.h, exec_kern_gemm) on an AVX-512 CPU, for the
 * passes where it beat OpenBLAS 0.3.21's SkylakeX kernel on the zoo's
 * shapes (docs/executor-sgemm.md): every forward; the input and
 * weight gradients when their output has at most 256 columns (IC): with
 * more (784, 1568) OpenBLAS's was faster.  When OpenBLAS runs a narrower
 * kernel than this CPU can (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU:
 * exec_blas_wanted), the own SGEMM takes those too (76-91% of the FMA
 * peak against 41-47% on Zen 5). */
#define OWN_GEMM_MAX_IC 256
static int blas_narrow;
static void blas_narrow_init(void) { blas_narrow = exec_blas_wanted() != NULL; }

static int own_gemm(int pass, int IC)
{
    if (!exec_kern_avx512()) return 0;
    if (pass == 0 || IC <= OWN_GEMM_MAX_IC) return 1;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, blas_narrow_init);
    return blas_narrow;
}

void exec_linear_forward(float *out, const float *in, const float *w, const float *b,
                         int B, int IC, int OC)
{
    if (linear_small(OC) && IC <= EXEC_KERN_LINEAR_FWD_MAX_IC) {
        exec_kern_linear_forward(out, in, w, b, B, IC, OC);
        return;
    }
    if (own_gemm(0, IC)) {
        exec_kern_gemm(0, 1, B, OC, IC, in, IC, w, IC, b, 0, out, OC);
        return;
    }
    /* out (B,OC) = b broadcast, then += in (B,IC) . w^T (IC,OC) */
    if (b) {
        for (int r = 0; r < B; r++) memcpy(out + (int64_t)r * OC, b, (size_t)OC * sizeof *out);
    }
    /* OpenBLAS 0.3.21 sends a product with few output columns but more
     * than 64^3 multiply-adds down its general path at under half speed;
     * blocks of 64 rows stay on its small-matrix path (docs/executor.md,
     * "Thin linear layers").  Rows are independent: the same result. */
    const int rows = OC < LINEAR_THIN_OC ? LINEAR_ROW_BLOCK : B;
    for (int r = 0; r < B; r += rows) {
        int nr = B - r < rows ? B - r : rows;
        exec_gemm(0, 1, nr, OC, IC, 1.0f, in + (int64_t)r * IC, IC, w, IC, b ? 1.0f : 0.0f,
                  out + (int64_t)r * OC, OC);
    }
}

void exec_linear_backward_input(float *din, const float *dout, const float *w,
                                int B, int IC, int OC)
{
    /* din (B,IC) = dout (B,OC) . w (OC,IC) */
    if (linear_small(OC)) {
        exec_kern_linear_backward_input(din, dout, w, B, IC, OC);
        return;
    }
    if (own_gemm(1, IC)) {
        exec_kern_gemm(0, 0, B, IC, OC, dout, OC, w, IC, NULL, 0, din, IC);
        return;
    }
    exec_gemm(0, 0, B, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, din, IC);
}

void exec_linear_backward_weight(float *dw, float *db, const float *dout, const float *in,
                                 int B, int IC, int OC)
{
    /* dw (OC,IC) += dout^T (OC,B) . in (B,IC) */
    if (linear_small(OC)) {
        exec_kern_linear_backward_weight(dw, db, dout, in, B, IC, OC);
        return;
    }
    if (own_gemm(2, IC)) exec_kern_gemm(1, 0, OC, IC, B, dout, OC, in, IC, NULL, 1, dw, IC);
    else exec_gemm(1, 0, OC, IC, B, 1.0f, dout, OC, in, IC, 1.0f, dw, IC);
    if (db && exec_kern_avx512()) {
        exec_kern_colsum_add(db, dout, B, OC);
    } else if (db) {
        for (int r = 0; r < B; r++) exec_v_add(db, dout + (int64_t)r * OC, OC);
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

/* 2x2 windows, stride 2, no padding (the common case), four outputs at a
 * time: even and odd input columns are split with shuffles, and maxima are
 * taken with compare-and-select, since branches on maxima mispredict.  Ties
 * keep the first position, as the general loop does. */
static void maxpool_2x2(float *out, int32_t *idx, const float *in, const exec_pool *g,
                        int64_t planes)
{
    const int W = g->W, Ho = g->Ho, Wo = g->Wo;
    const exec_v4i even = {0, 2, 4, 6}, odd = {1, 3, 5, 7};
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *x = in + pl * g->H * W;
        float *o = out + pl * Ho * Wo;
        int32_t *ix = idx + pl * Ho * Wo;
        for (int oh = 0; oh < Ho; oh++) {
            const float *r0 = x + 2 * oh * W, *r1 = r0 + W;
            const int j0 = 2 * oh * W;
            int ow = 0;
            for (; ow + 4 <= Wo; ow += 4) {
                exec_v4f a0 = exec_v_load(r0 + 2 * ow), a1 = exec_v_load(r0 + 2 * ow + 4);
                exec_v4f b0 = exec_v_load(r1 + 2 * ow), b1 = exec_v_load(r1 + 2 * ow + 4);
                exec_v4f cand[4] = {__builtin_shuffle(a0, a1, even), __builtin_shuffle(a0, a1, odd),
                                    __builtin_shuffle(b0, b1, even), __builtin_shuffle(b0, b1, odd)};
                const int j = j0 + 2 * ow;
                exec_v4i base = {j, j + 2, j + 4, j + 6};
                const int32_t off[4] = {0, 1, W, W + 1};
                exec_v4f m = cand[0];
                exec_v4i best = base;
                for (int t = 1; t < 4; t++) {
                    exec_v4i gt = cand[t] > m;
                    m = (exec_v4f)(((exec_v4i)cand[t] & gt) | ((exec_v4i)m & ~gt));
                    best = ((base + off[t]) & gt) | (best & ~gt);
                }
                exec_v_store(o + oh * Wo + ow, m);
                memcpy(ix + oh * Wo + ow, &best, sizeof best);
            }
            for (; ow < Wo; ow++) {
                const int j = j0 + 2 * ow, cj[4] = {j, j + 1, j + W, j + W + 1};
                float m = x[j];
                int best = j;
                for (int t = 1; t < 4; t++) {
                    int gt = x[cj[t]] > m;
                    best = gt ? cj[t] : best;
                    m = gt ? x[cj[t]] : m;
                }
                o[oh * Wo + ow] = m;
                ix[oh * Wo + ow] = best;
            }
        }
    }
}

void exec_maxpool2d_forward(float *out, int32_t *idx, const float *in, const exec_pool *g,
                            int B)
{
    const int64_t planes = (int64_t)B * g->C;
    if (g->k == 2 && g->stride == 2 && g->pad == 0) {
        maxpool_2x2(out, idx, in, g, planes);
        return;
    }
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
                    for (int w = w0; w < w1; w++) {
                        int j = h * g->W + w, gt = x[j] > m;
                        best = gt ? j : best;
                        m = gt ? x[j] : m;
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
    if (exec_kern_avx512()) exec_kern_relu(out, in, n);
    else exec_v_relu(out, in, n);
}

void exec_relu_backward_input(float *din, const float *dout, const float *out, int64_t n)
{
    if (exec_kern_avx512()) exec_kern_pass_positive(din, dout, out, n);
    else exec_v_pass_positive(din, dout, out, n);
}

/* Dropout's mask is drawn in chunks, each applied right away, so on an
 * AVX-512 CPU the scalar generator never runs long enough for the 512-bit
 * units to power down before the next layer's product (kern.h). */
#define DROPOUT_CHUNK 128

void exec_dropout_forward(float *out, uint8_t *mask, const float *in, int64_t n, double p,
                          gsl_rng *rng)
{
    if (p <= 0) {
        memmove(out, in, (size_t)n * sizeof *out);
        memset(mask, 1, (size_t)n);
        return;
    }
    const float scale = p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    const int fast = exec_kern_avx512();
    for (int64_t i0 = 0; i0 < n; i0 += DROPOUT_CHUNK) {
        const int64_t i1 = n - i0 < DROPOUT_CHUNK ? n : i0 + DROPOUT_CHUNK;
        for (int64_t i = i0; i < i1; i++) mask[i] = gsl_rng_uniform(rng) >= p;
        if (fast) {
            exec_kern_mask_scale(out + i0, in + i0, mask + i0, i1 - i0, scale);
        } else {
            for (int64_t i = i0; i < i1; i++) out[i] = mask[i] ? in[i] * scale : 0.0f;
        }
    }
}

void exec_dropout_backward_input(float *din, const float *dout, const uint8_t *mask,
                                 int64_t n, double p)
{
    const float scale = p <= 0 ? 1.0f : p < 1 ? (float)(1.0 / (1.0 - p)) : 0.0f;
    if (exec_kern_avx512()) {
        exec_kern_mask_scale(din, dout, mask, n, scale);
        return;
    }
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
    for (int n = 0; n < B; n++) assert(labels[n] >= 0 && labels[n] < K);
    if (exec_kern_avx512()) return exec_kern_softmax_xent_forward(probs, loss, logits, labels, B, K);
    double total = 0;
    for (int n = 0; n < B; n++) {
        const float *x = logits + (int64_t)n * K;
        float *p = probs + (int64_t)n * K;
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
    if (exec_kern_avx512()) {
        exec_kern_softmax_xent_backward_input(dlogits, probs, labels, B, K, scale);
        return;
    }
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
