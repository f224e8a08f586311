/* tfm_ref.c - the vision transformer's layers in double precision, written
 * as direct loops with the textbook formulas (tanh for GELU, a plain
 * softmax), not the executor's arrangement: the attention reference loops
 * over heads and tokens, the executor uses SGEMMs on strided views.  Shared
 * by the exec_tfm and exec_tp suites (tfm_ref.h). */
#include <math.h>
#include <stdlib.h>

#include "tfm_ref.h"

static void r_linear(double *y, const double *x, const double *w, const double *b, int R,
                     int IC, int OC)
{
    for (int r = 0; r < R; r++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < IC; i++) s += x[r * IC + i] * w[o * IC + i];
            y[r * OC + o] = s;
        }
}

static void r_layernorm(double *y, const double *x, const double *gm, const double *bt, int R,
                        int D)
{
    for (int r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < D; j++) m += x[r * D + j] / D;
        for (int j = 0; j < D; j++) v += (x[r * D + j] - m) * (x[r * D + j] - m) / D;
        for (int j = 0; j < D; j++)
            y[r * D + j] = (x[r * D + j] - m) / sqrt(v + EXEC_LN_EPS) * gm[j] + bt[j];
    }
}

static double r_gelu1(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* ctx (B,T,D) from qkv (B,T,3D) */
static void r_mhsa(double *ctx, const double *qkv, int B, int T, int D, int H)
{
    int hd = D / H;
    double *a = malloc((size_t)T * sizeof *a);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double sum = 0;
                for (int s = 0; s < T; s++) {
                    double dot = 0;
                    for (int i = 0; i < hd; i++)
                        dot += qkv[(b * T + t) * 3 * D + h * hd + i] *
                               qkv[(b * T + s) * 3 * D + D + h * hd + i];
                    a[s] = exp(dot / sqrt(hd));
                    sum += a[s];
                }
                for (int i = 0; i < hd; i++) {
                    double c = 0;
                    for (int s = 0; s < T; s++)
                        c += a[s] / sum * qkv[(b * T + s) * 3 * D + 2 * D + h * hd + i];
                    ctx[(b * T + t) * D + h * hd + i] = c;
                }
            }
    free(a);
}

void tfm_ref_inner(double *a, const double *x, const double *w, const exec_tfm *g, int B)
{
    const int T = g->T, D = g->D, BT = B * T, n = BT * D;
    double *ln = malloc((size_t)n * sizeof *ln);
    r_layernorm(ln, x, w, w + D, BT, D);
    if (g->kind == EXEC_TFM_ATTN) {
        double *qkv = malloc((size_t)3 * n * sizeof *qkv);
        const double *wqkv = w + 2 * D, *bqkv = wqkv + 3 * D * D;
        r_linear(qkv, ln, wqkv, bqkv, BT, D, 3 * D);
        r_mhsa(a, qkv, B, T, D, g->H);
        free(qkv);
    } else {
        const int F = g->F;
        const double *w1 = w + 2 * D, *b1 = w1 + F * D;
        r_linear(a, ln, w1, b1, BT, D, F);
        for (int i = 0; i < BT * F; i++) a[i] = r_gelu1(a[i]);
    }
    free(ln);
}

void tfm_ref_eval(double *y, const double *x, const double *w, const exec_tfm *g, int B)
{
    const int T = g->T, D = g->D, BT = B * T, n = BT * D;
    switch (g->kind) {
    case EXEC_TFM_PATCH: { /* direct: token t = (pi, pj), feature (ch, i, j) */
        const int K = g->C * g->p * g->p, nw = g->Ww / g->p;
        double *pt = malloc((size_t)BT * K * sizeof *pt);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int ch = 0; ch < g->C; ch++)
                    for (int i = 0; i < g->p; i++)
                        for (int j = 0; j < g->p; j++)
                            pt[(b * T + t) * K + (ch * g->p + i) * g->p + j] =
                                x[((b * g->C + ch) * g->Hh + (t / nw) * g->p + i) * g->Ww +
                                  (t % nw) * g->p + j];
        r_linear(y, pt, w, w + D * K, BT, K, D);
        free(pt);
        break;
    }
    case EXEC_TFM_POS:
        for (int i = 0; i < n; i++) y[i] = x[i] + w[i % (T * D)];
        break;
    case EXEC_TFM_LAYERNORM: r_layernorm(y, x, w, w + D, BT, D); break;
    case EXEC_TFM_GELU:
        for (int i = 0; i < n; i++) y[i] = r_gelu1(x[i]);
        break;
    case EXEC_TFM_MEANPOOL:
        for (int b = 0; b < B; b++)
            for (int j = 0; j < D; j++) {
                double s = 0;
                for (int t = 0; t < T; t++) s += x[(b * T + t) * D + j];
                y[b * D + j] = s / T;
            }
        break;
    case EXEC_TFM_ATTN: {
        double *ctx = malloc((size_t)n * sizeof *ctx);
        const double *wo = w + 2 * D + 3 * D * D + 3 * D;
        tfm_ref_inner(ctx, x, w, g, B);
        r_linear(y, ctx, wo, wo + D * D, BT, D, D);
        for (int i = 0; i < n; i++) y[i] += x[i];
        free(ctx);
        break;
    }
    case EXEC_TFM_MLP: {
        const int F = g->F;
        double *h = malloc((size_t)BT * F * sizeof *h);
        const double *w2 = w + 2 * D + F * D + F;
        tfm_ref_inner(h, x, w, g, B);
        r_linear(y, h, w2, w2 + D * F, BT, F, D);
        for (int i = 0; i < n; i++) y[i] += x[i];
        free(h);
        break;
    }
    }
}
