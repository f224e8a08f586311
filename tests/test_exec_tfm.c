/* test_exec_tfm.c - the vision transformer's layers (exec/nn/layers_tfm.h)
 * against naive double-precision references written here, with the
 * finite-difference harness of test_exec_layers.c (fd_layer.h): forward
 * agreement, input and weight gradients each against central differences
 * (step 1e-5, double) of L = sum_j r_j y_j.
 *
 * The references use direct loops and the textbook formulas (tanh for
 * GELU, a plain softmax), not the executor's arrangement: the attention
 * reference loops over heads and tokens, the executor uses SGEMMs on
 * strided views.  Sizes are small and ragged (5 tokens, width 8 or 12, 2 or
 * 3 heads) so a mixed-up stride or head offset shows.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/layers_tfm.h"
#include "exec/nn/tensor.h"
#include "fd_layer.h"
#include "test.h"

typedef struct { exec_tfm g; int B; float *aux; } tfm_ctx;

/* ---------------------------------------------------- double references */

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

static void tfm_ref(double *y, const double *x, const double *w, void *vc)
{
    const tfm_ctx *c = vc;
    const exec_tfm *g = &c->g;
    const int B = c->B, T = g->T, D = g->D, BT = B * T, n = BT * D;
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
        double *ln = malloc((size_t)n * sizeof *ln), *qkv = malloc((size_t)3 * n * sizeof *qkv),
               *ctx = malloc((size_t)n * sizeof *ctx);
        const double *wqkv = w + 2 * D, *bqkv = wqkv + 3 * D * D, *wo = bqkv + 3 * D;
        r_layernorm(ln, x, w, w + D, BT, D);
        r_linear(qkv, ln, wqkv, bqkv, BT, D, 3 * D);
        r_mhsa(ctx, qkv, B, T, D, g->H);
        r_linear(y, ctx, wo, wo + D * D, BT, D, D);
        for (int i = 0; i < n; i++) y[i] += x[i];
        free(ln); free(qkv); free(ctx);
        break;
    }
    case EXEC_TFM_MLP: {
        const int F = g->F;
        double *ln = malloc((size_t)n * sizeof *ln), *h = malloc((size_t)BT * F * sizeof *h);
        const double *w1 = w + 2 * D, *b1 = w1 + F * D, *w2 = b1 + F;
        r_layernorm(ln, x, w, w + D, BT, D);
        r_linear(h, ln, w1, b1, BT, D, F);
        for (int i = 0; i < BT * F; i++) h[i] = r_gelu1(h[i]);
        r_linear(y, h, w2, w2 + D * F, BT, F, D);
        for (int i = 0; i < n; i++) y[i] += x[i];
        free(ln); free(h);
        break;
    }
    }
}

/* -------------------------------------------------- the executor's calls */

static void tfm_fwd(float *y, const float *x, const float *w, void *vc)
{
    tfm_ctx *c = vc;
    exec_tfm_forward(&c->g, y, x, w, c->aux, c->B);
}
static void tfm_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                    void *vc)
{
    tfm_ctx *c = vc;
    (void)y;
    exec_tfm_backward_input(&c->g, dx, dy, x, w, c->aux, c->B);
}
/* For the blocks this reads the inner gradients the input-gradient call
 * just left in aux (the harness calls it second, as the net does). */
static void tfm_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    tfm_ctx *c = vc;
    (void)w;
    exec_tfm_backward_weight(&c->g, dw, dy, x, c->aux, c->B);
}

static void tfm_case(const char *name, exec_tfm g, int B, double tol)
{
    tfm_ctx c = {g, B, exec_falloc(B * exec_tfm_aux_floats(&g))};
    int64_t nx = (int64_t)B * g.T * g.D, ny = nx;
    if (g.kind == EXEC_TFM_PATCH) nx = (int64_t)B * g.C * g.Hh * g.Ww;
    if (g.kind == EXEC_TFM_MEANPOOL) ny = (int64_t)B * g.D;
    int64_t nw = exec_tfm_params(&g);
    layer_case lc = {name, nx, nw, ny, tol, 1e-5, &c, tfm_ref, tfm_fwd, tfm_bin,
                     nw ? tfm_bw : NULL, 0, 1};
    check_layer(&lc);
    free(c.aux);
}

static void test_tfm_simple(void)
{
    tfm_case("patch_embed 2x6x4 image, 2x2 patches, width 5",
             (exec_tfm){.kind = EXEC_TFM_PATCH, .T = 6, .D = 5, .C = 2, .Hh = 6, .Ww = 4, .p = 2},
             3, 1e-4);
    tfm_case("patch_embed 1x28x28 image, 7x7 patches (the model's), width 4",
             (exec_tfm){.kind = EXEC_TFM_PATCH, .T = 16, .D = 4, .C = 1, .Hh = 28, .Ww = 28, .p = 7},
             1, 1e-4);
    tfm_case("pos_embed 5 tokens, width 6", (exec_tfm){.kind = EXEC_TFM_POS, .T = 5, .D = 6}, 3,
             1e-6);
    tfm_case("layernorm 5 tokens, width 12",
             (exec_tfm){.kind = EXEC_TFM_LAYERNORM, .T = 5, .D = 12}, 2, 1e-4);
    tfm_case("layernorm features [7]", (exec_tfm){.kind = EXEC_TFM_LAYERNORM, .T = 1, .D = 7}, 4,
             1e-4);
    tfm_case("gelu 5 x 6", (exec_tfm){.kind = EXEC_TFM_GELU, .T = 5, .D = 6}, 2, 1e-4);
    tfm_case("meanpool 5 tokens, width 6", (exec_tfm){.kind = EXEC_TFM_MEANPOOL, .T = 5, .D = 6},
             3, 1e-6);
}

static void test_tfm_blocks(void)
{
    tfm_case("attention block: 5 tokens, width 8, 2 heads",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 5, .D = 8, .H = 2}, 2, 1e-4);
    tfm_case("attention block: 4 tokens, width 12, 3 heads, batch 1",
             (exec_tfm){.kind = EXEC_TFM_ATTN, .T = 4, .D = 12, .H = 3}, 1, 1e-4);
    tfm_case("mlp block: 5 tokens, width 6, hidden 10",
             (exec_tfm){.kind = EXEC_TFM_MLP, .T = 5, .D = 6, .F = 10}, 2, 1e-4);
}

TEST_SUITE(exec_tfm)
{
    test_add_suite("exec_tfm");
    test_add("patch and position embedding, layernorm, gelu, meanpool vs finite differences",
             test_tfm_simple);
    test_add("attention and mlp blocks (pre-norm, residual) vs finite differences",
             test_tfm_blocks);
}
