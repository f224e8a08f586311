/* layers_tfm.c - the transformer's elementary layers (layers_tfm.h): layer
 * norm, GELU, the attention core, patches, position embedding, pooling.
 * The attention core's products are small SGEMMs per sample and head.
 * Reductions run in a fixed order, so results depend on the inputs only.
 */
#include <math.h>
#include <string.h>

#include "gemm.h"
#include "kern.h"
#include "layers_tfm.h"

/* ------------------------------------------------------------ layer norm */

void exec_layernorm_forward(float *out, float *xhat, float *rstd, const float *in,
                            const float *gamma, const float *beta, int64_t R, int D)
{
    for (int64_t r = 0; r < R; r++) {
        const float *x = in + r * D;
        double s = 0, ss = 0;
        for (int j = 0; j < D; j++) s += x[j];
        double mean = s / D;
        for (int j = 0; j < D; j++) ss += (x[j] - mean) * (x[j] - mean); /* two passes */
        float rs = (float)(1.0 / sqrt(ss / D + EXEC_LN_EPS));
        float m = (float)mean;
        float *xh = xhat + r * D, *y = out + r * D;
        for (int j = 0; j < D; j++) {
            xh[j] = (x[j] - m) * rs;
            y[j] = xh[j] * gamma[j] + beta[j];
        }
        rstd[r] = rs;
    }
}

void exec_layernorm_backward_input(float *din, const float *dout, const float *xhat,
                                   const float *rstd, const float *gamma, int64_t R, int D)
{
    /* dxhat = dout gamma; din = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) */
    for (int64_t r = 0; r < R; r++) {
        const float *dy = dout + r * D, *xh = xhat + r * D;
        float s = 0, sx = 0;
        for (int j = 0; j < D; j++) {
            float g = dy[j] * gamma[j];
            s += g;
            sx += g * xh[j];
        }
        s /= (float)D;
        sx /= (float)D;
        float *dx = din + r * D;
        for (int j = 0; j < D; j++) dx[j] = rstd[r] * (dy[j] * gamma[j] - s - xh[j] * sx);
    }
}

void exec_layernorm_backward_weight(float *dgamma, float *dbeta, const float *dout,
                                    const float *xhat, int64_t R, int D)
{
    for (int64_t r = 0; r < R; r++)
        for (int j = 0; j < D; j++) {
            dgamma[j] += dout[r * D + j] * xhat[r * D + j];
            dbeta[j] += dout[r * D + j];
        }
}

/* ------------------------------------------------------------------ GELU */

#define GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)): one expf instead of tanhf, which
 * glibc computes through expm1f at several times the cost (measured: tanhf
 * and expm1f were 36% of a ViT training step). */
static inline float gelu_sig(float x)
{
    return 1.0f / (1.0f + expf(-2.0f * GELU_C * (x + GELU_A * x * x * x)));
}

void exec_gelu_forward(float *out, const float *in, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * gelu_sig(in[i]);
}

void exec_gelu_backward_input(float *din, const float *dout, const float *in, int64_t n)
{
    /* d/dx x s(2u) = s + x s (1 - s) 2 u', u' = C (1 + 3 A x^2) */
    for (int64_t i = 0; i < n; i++) {
        float x = in[i], sg = gelu_sig(x);
        float d = sg + x * sg * (1.0f - sg) * 2.0f * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
        din[i] = dout[i] * d;
    }
}

/* ------------------------------------------------------- attention core */

/* One head's product, C = alpha op(A) op(B): a matrix multiply (the loops
 * ran at a few GFLOP/s), on an AVX-512 CPU the own SGEMM (kern.h).
 * OpenBLAS takes every call's buffers from one pool that the process's
 * threads share: with a second thread of the process multiplying at the
 * same time, a 16 x 16 x 16 product took 0.38 us a call instead of 0.14,
 * and the attention makes B H of them a pass for each of its products, so
 * a pipeline's workers (threads of one process) slowed each other down,
 * which the replay on one core never saw (docs/validation.md).  The own
 * SGEMM packs into buffers of its calling thread: 0.14 us either way. */
static void head_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc)
{
    if (!exec_kern_avx512()) {
        exec_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, 0.0f, C, ldc);
        return;
    }
    exec_kern_gemm(ta, tb, M, N, K, A, lda, B, ldb, NULL, 0, C, ldc);
    if (alpha != 1.0f)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(int64_t)i * ldc + j] *= alpha;
}

/* Per sample and head, q, k, v are (T, D/H) views with leading dimension
 * 3D, multiplied by head_gemm. */
void exec_mhsa_forward(float *ctx, float *att, const float *qkv, int B, int T, int D, int H)
{
    const int hd = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++) {
        const float *base = qkv + (int64_t)b * T * D3;
        for (int h = 0; h < H; h++) {
            float *A = att + ((int64_t)b * H + h) * T * T;
            const float *q = base + h * hd, *k = q + D, *v = q + 2 * D;
            head_gemm(0, 1, T, T, hd, scale, q, D3, k, D3, A, T);
            for (int t = 0; t < T; t++) {
                float *a = A + (int64_t)t * T, mx = -INFINITY, sum = 0;
                for (int s = 0; s < T; s++) mx = a[s] > mx ? a[s] : mx;
                for (int s = 0; s < T; s++) sum += (a[s] = expf(a[s] - mx));
                for (int s = 0; s < T; s++) a[s] /= sum;
            }
            head_gemm(0, 0, T, hd, T, 1.0f, A, T, v, D3, ctx + (int64_t)b * T * D + h * hd, D);
        }
    }
}

void exec_mhsa_backward(float *dqkv, const float *dctx, const float *att, const float *qkv,
                        float *tmp, int B, int T, int D, int H)
{
    const int hd = D / H, D3 = 3 * D;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++) {
        const float *base = qkv + (int64_t)b * T * D3;
        float *dbase = dqkv + (int64_t)b * T * D3;
        for (int h = 0; h < H; h++) {
            const float *A = att + ((int64_t)b * H + h) * T * T;
            const float *q = base + h * hd, *k = q + D, *v = q + 2 * D;
            const float *dc = dctx + (int64_t)b * T * D + h * hd;
            float *dq = dbase + h * hd, *dk = dq + D, *dv = dq + 2 * D;
            head_gemm(0, 1, T, T, hd, 1.0f, dc, D, v, D3, tmp, T);  /* datt = dc v^T */
            head_gemm(1, 0, T, hd, T, 1.0f, A, T, dc, D, dv, D3);   /* dv = att^T dc */
            for (int t = 0; t < T; t++) { /* softmax backward, times the scale */
                const float *a = A + (int64_t)t * T;
                float *d = tmp + (int64_t)t * T, dot = 0;
                for (int s = 0; s < T; s++) dot += a[s] * d[s];
                for (int s = 0; s < T; s++) d[s] = a[s] * (d[s] - dot) * scale;
            }
            head_gemm(0, 0, T, hd, T, 1.0f, tmp, T, k, D3, dq, D3); /* dq = ds k */
            head_gemm(1, 0, T, hd, T, 1.0f, tmp, T, q, D3, dk, D3); /* dk = ds^T q */
        }
    }
}

/* ----------------------------------------- patches, positions, pooling */

/* One loop for both directions: fwd copies in -> patches, else back. */
static void patch_perm(float *img, float *patches, int B, int C, int Hh, int Ww, int p, int fwd)
{
    const int nw = Ww / p, T = (Hh / p) * nw, K = C * p * p;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int pi = t / nw, pj = t % nw;
            float *row = patches + ((int64_t)b * T + t) * K;
            for (int c = 0; c < C; c++)
                for (int i = 0; i < p; i++) {
                    float *src = img + (((int64_t)b * C + c) * Hh + pi * p + i) * Ww + pj * p;
                    float *dst = row + (c * p + i) * p;
                    if (fwd) memcpy(dst, src, (size_t)p * sizeof *dst);
                    else memcpy(src, dst, (size_t)p * sizeof *dst);
                }
        }
}

void exec_patchify(float *patches, const float *in, int B, int C, int Hh, int Ww, int p)
{
    patch_perm((float *)in, patches, B, C, Hh, Ww, p, 1); /* reads in only */
}

void exec_unpatchify(float *din, const float *dpatches, int B, int C, int Hh, int Ww, int p)
{
    patch_perm(din, (float *)dpatches, B, C, Hh, Ww, p, 0); /* reads dpatches only */
}

void exec_posembed_forward(float *out, const float *in, const float *pos, int B, int N)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) out[(int64_t)b * N + i] = in[(int64_t)b * N + i] + pos[i];
}

void exec_posembed_backward_weight(float *dpos, const float *dout, int B, int N)
{
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) dpos[i] += dout[(int64_t)b * N + i];
}

void exec_meanpool_forward(float *out, const float *in, int B, int T, int D)
{
    for (int b = 0; b < B; b++) {
        float *y = out + (int64_t)b * D;
        for (int j = 0; j < D; j++) y[j] = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++) y[j] += in[((int64_t)b * T + t) * D + j];
        for (int j = 0; j < D; j++) y[j] /= (float)T;
    }
}

void exec_meanpool_backward_input(float *din, const float *dout, int B, int T, int D)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < D; j++)
                din[((int64_t)b * T + t) * D + j] = dout[(int64_t)b * D + j] / (float)T;
}
