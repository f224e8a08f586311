/* test_exec_layers.c - every executor layer against an independent
 * reference.
 *
 * For each layer: a naive double-precision forward written here (direct
 * loops, no im2col, no BLAS) is the reference.  The float32 forward must
 * agree with it; the float32 input- and weight-gradient calls, each run on
 * its own, must agree with central finite differences of the reference
 * loss L = sum_j r_j y_j (r random), taken in double with step 1e-5.
 *
 * Error measure: max_i |analytic_i - numeric_i| / max_i |numeric_i| (error
 * relative to the gradient's scale, so near-zero entries do not blow it up).
 * Tolerances per layer are in the case table below (all <= 1e-3; the float32
 * rounding of the analytic side is what they allow for).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/gemm.h"
#include "exec/nn/kern.h"
#include "exec/nn/layers.h"
#include "base/status.h"
#include "exec/nn/tensor.h"
#include "test.h"

#include "fd_layer.h"

/* ------------------------------------------------------------------------ */
/* linear                                                                    */

typedef struct { int B, IC, O, bias; } lin_ctx;

static void lin_ref(double *y, const double *x, const double *w, void *vc)
{
    lin_ctx *c = vc;
    for (int n = 0; n < c->B; n++)
        for (int o = 0; o < c->O; o++) {
            double s = c->bias ? w[c->O * c->IC + o] : 0;
            for (int i = 0; i < c->IC; i++) s += x[n * c->IC + i] * w[o * c->IC + i];
            y[n * c->O + o] = s;
        }
}
static void lin_fwd(float *y, const float *x, const float *w, void *vc)
{
    lin_ctx *c = vc;
    exec_linear_forward(y, x, w, c->bias ? w + c->O * c->IC : NULL, c->B, c->IC, c->O);
}
static void lin_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                    void *vc)
{
    lin_ctx *c = vc;
    (void)x; (void)y;
    exec_linear_backward_input(dx, dy, w, c->B, c->IC, c->O);
}
static void lin_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    lin_ctx *c = vc;
    (void)w;
    exec_linear_backward_weight(dw, c->bias ? dw + c->O * c->IC : NULL, dy, x, c->B, c->IC, c->O);
}

static void lin_case(const char *name, int B, int IC, int O, int bias)
{
    lin_ctx c = {B, IC, O, bias};
    layer_case lc = {name, (int64_t)B * IC, (int64_t)O * IC + (bias ? O : 0), (int64_t)B * O,
                     1e-4, 1e-5, &c, lin_ref, lin_fwd, lin_bin, lin_bw, 0, 1};
    check_paths(&lc);
}

static void test_linear(void)
{
    lin_case("linear", 3, 7, 5, 1);
    lin_case("linear, no bias", 4, 6, 3, 0);
    /* few outputs and a batch over 64: OpenBLAS's row blocks */
    lin_case("linear, row blocks", 70, 5, 3, 1);
    /* the small-output kernels (kern.h): 10 outputs with a ragged last row
     * block and feature tail; 12 (six pairs of outputs, the most), batch 1;
     * 1 and 8 outputs (one and four pairs), 7 (an odd last pair) with whole
     * blocks of 8 features; 4 outputs with more features than the forward
     * kernel takes (OpenBLAS forward, kernel backward); 13 outputs (the
     * own SGEMM throughout: its forward transposed, as batch < outputs);
     * 40 outputs at batch 50 (own SGEMM, forward not transposed); 260
     * inputs (own SGEMM forward, OpenBLAS gradients: IC > 256) */
    lin_case("linear 37-10, batch 7", 7, 37, 10, 1);
    lin_case("linear 16-12, batch 1", 1, 16, 12, 1);
    lin_case("linear 9-1, batch 6", 6, 9, 1, 1);
    lin_case("linear 24-8, batch 9", 9, 24, 8, 0);
    lin_case("linear 64-7, batch 4", 4, 64, 7, 1);
    lin_case("linear 600-4, no bias", 3, 600, 4, 0);
    lin_case("linear 33-13", 5, 33, 13, 1);
    lin_case("linear 20-40, batch 50", 50, 20, 40, 1);
    lin_case("linear 260-20, batch 3", 3, 260, 20, 1);
}

/* ------------------------------------------------------------------------ */
/* conv2d                                                                    */

typedef struct { int B, bias; exec_conv g; float *col; } conv_ctx;

static void conv_ref(double *y, const double *x, const double *w, void *vc)
{
    conv_ctx *c = vc;
    const exec_conv *g = &c->g;
    int64_t nwt = (int64_t)g->O * g->C * g->k * g->k;
    for (int n = 0; n < c->B; n++)
        for (int o = 0; o < g->O; o++)
            for (int oh = 0; oh < g->Ho; oh++)
                for (int ow = 0; ow < g->Wo; ow++) {
                    double s = c->bias ? w[nwt + o] : 0;
                    for (int ci = 0; ci < g->C; ci++)
                        for (int ki = 0; ki < g->k; ki++)
                            for (int kj = 0; kj < g->k; kj++) {
                                int ih = oh * g->stride - g->pad + ki;
                                int iw = ow * g->stride - g->pad + kj;
                                if (ih < 0 || iw < 0 || ih >= g->H || iw >= g->W) continue;
                                s += x[((n * g->C + ci) * g->H + ih) * g->W + iw] *
                                     w[((o * g->C + ci) * g->k + ki) * g->k + kj];
                            }
                    y[((n * g->O + o) * g->Ho + oh) * g->Wo + ow] = s;
                }
}
static void conv_fwd(float *y, const float *x, const float *w, void *vc)
{
    conv_ctx *c = vc;
    int64_t nwt = (int64_t)c->g.O * c->g.C * c->g.k * c->g.k;
    exec_conv2d_forward(y, x, w, c->bias ? w + nwt : NULL, c->col, &c->g, c->B);
}
static void conv_bin(float *dx, const float *dy, const float *x, const float *w,
                     const float *y, void *vc)
{
    conv_ctx *c = vc;
    (void)x; (void)y;
    exec_conv2d_backward_input(dx, dy, w, c->col, &c->g, c->B);
}
static void conv_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    conv_ctx *c = vc;
    (void)w;
    int64_t nwt = (int64_t)c->g.O * c->g.C * c->g.k * c->g.k;
    exec_conv2d_backward_weight(dw, c->bias ? dw + nwt : NULL, dy, x, c->col, &c->g, c->B);
}

static void conv_case(const char *name, int B, int C, int H, int W, int O, int k, int s,
                      int p, int bias)
{
    conv_ctx c = {B, bias, {0}, NULL};
    CU_ASSERT_EQUAL_FATAL(exec_conv_init(&c.g, C, H, W, O, k, s, p), 0);
    c.col = exec_falloc(exec_conv_col_floats(&c.g));
    int64_t nwt = (int64_t)O * C * k * k;
    layer_case lc = {name, (int64_t)B * C * H * W, nwt + (bias ? O : 0),
                     (int64_t)B * O * c.g.Ho * c.g.Wo, 1e-4, 1e-5, &c, conv_ref, conv_fwd,
                     conv_bin, conv_bw, 0, 1};
    check_paths(&lc);
    free(c.col);
}

/* Each case: name, batch, channels, height, width, output channels, kernel,
 * stride, padding, bias. */
static const struct conv_spec {
    const char *name;
    int B, C, H, W, O, k, s, p, bias;
} conv_cases[] = {
    {"conv2d 3x3 s1 p1", 2, 3, 6, 5, 4, 3, 1, 1, 1},
    {"conv2d 3x3 s2 p0", 2, 2, 7, 7, 3, 3, 2, 0, 1},
    {"conv2d 5x5 s1 p2, no bias", 2, 2, 6, 6, 3, 5, 1, 2, 0},
    {"conv2d 1x1 direct", 3, 4, 3, 5, 2, 1, 1, 0, 1},
    {"conv2d 2x2 s3 p1", 2, 2, 7, 8, 3, 2, 3, 1, 1},
    /* C*k >= 16 selects the row-shift lowering */
    {"conv2d 5x5 s1 p2, row shifts", 2, 4, 6, 7, 3, 5, 1, 2, 1},
    {"conv2d 3x3 s1 p0, row shifts", 2, 6, 5, 6, 2, 3, 1, 0, 1},
    {"conv2d 3x3 s1 p1, row shifts, no bias", 3, 6, 4, 4, 2, 3, 1, 1, 0},
    /* the direct kernels (C*k < 16, stride 1; kern.h): 16 channels at batch
     * 1; 37 columns (three vectors, ragged); 7x7 (taps in 5s, ragged) with
     * 9 output channels (blocks of 8 and 4, ragged) */
    {"conv2d 5x5 s1 p2, direct, batch 1", 1, 1, 12, 12, 16, 5, 1, 2, 1},
    {"conv2d 3x3 s1 p1, direct, 37 wide", 2, 1, 3, 37, 3, 3, 1, 1, 1},
    {"conv2d 7x7 s1 p3, direct, 9 outputs", 2, 2, 7, 7, 9, 7, 1, 3, 0},
    {"conv2d 2x2 s1 p1, direct, even kernel", 2, 3, 4, 5, 5, 2, 1, 1, 1},
    /* the direct kernels' row-shift copies through the stack buffer
     * (conv_shift_avx512.c, W <= 32): conv1 itself; 70 rows, no padding (two
     * chunks of 64 buffered rows; a plane's last row, which holds data, is
     * stored masked, not spilt into the next plane); 31 wide
     * with no padding over 2 channels */
    {"conv2d 5x5 s1 p2, direct, conv1 28 x 28", 2, 1, 28, 28, 16, 5, 1, 2, 1},
    {"conv2d 3x3 s1 p0, direct, 70 rows", 2, 1, 70, 9, 4, 3, 1, 0, 1},
    {"conv2d 3x3 s1 p0, direct, 31 wide, 2 channels", 2, 2, 5, 31, 3, 3, 1, 0, 0},
    /* the channel weight-gradient kernel (O % 32 == 0, row shifts): 54 taps
     * (blocks of 12, ragged) */
    {"conv2d 3x3 s1 p1, 32 outputs", 2, 6, 4, 4, 32, 3, 1, 1, 1},
    /* the tiled direct kernels (conv_avx512.c; C*k a multiple of 16, at
     * least 16 outputs): 1x1 with 17 outputs (a ragged panel); 3x3 over
     * 16 channels (48 taps per kernel row: tiles of 12); stride 2 with 17
     * output columns (tiles of 9 and 8) and 33 outputs (a 1-wide panel) */
    {"conv2d 1x1, tiles, 17 outputs", 2, 16, 3, 4, 17, 1, 1, 0, 1},
    {"conv2d 3x3 s1 p1, tiles, 16 channels", 1, 16, 4, 5, 18, 3, 1, 1, 1},
    {"conv2d 2x2 s2 p1, tiles, 17 wide, no bias", 2, 8, 3, 33, 33, 2, 2, 1, 0},
};

static void test_conv2d(void)
{
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        const struct conv_spec *c = &conv_cases[i];
        conv_case(c->name, c->B, c->C, c->H, c->W, c->O, c->k, c->s, c->p, c->bias);
    }
}

/* ------------------------------------------------------------------------ */
/* pooling                                                                   */

typedef struct { int B, max; exec_pool g; int32_t *idx; } pool_ctx;

static void pool_ref(double *y, const double *x, const double *w, void *vc)
{
    pool_ctx *c = vc;
    const exec_pool *g = &c->g;
    (void)w;
    for (int pl = 0; pl < c->B * g->C; pl++)
        for (int oh = 0; oh < g->Ho; oh++)
            for (int ow = 0; ow < g->Wo; ow++) {
                double m = -INFINITY, s = 0;
                for (int ki = 0; ki < g->k; ki++)
                    for (int kj = 0; kj < g->k; kj++) {
                        int ih = oh * g->stride - g->pad + ki, iw = ow * g->stride - g->pad + kj;
                        if (ih < 0 || iw < 0 || ih >= g->H || iw >= g->W) continue;
                        double v = x[(pl * g->H + ih) * g->W + iw];
                        m = fmax(m, v);
                        s += v;
                    }
                y[(pl * g->Ho + oh) * g->Wo + ow] = c->max ? m : s / (g->k * g->k);
            }
}
static void pool_fwd(float *y, const float *x, const float *w, void *vc)
{
    pool_ctx *c = vc;
    (void)w;
    if (c->max) exec_maxpool2d_forward(y, c->idx, x, &c->g, c->B);
    else exec_avgpool2d_forward(y, x, &c->g, c->B);
}
static void pool_bin(float *dx, const float *dy, const float *x, const float *w,
                     const float *y, void *vc)
{
    pool_ctx *c = vc;
    (void)x; (void)w; (void)y;
    if (c->max) exec_maxpool2d_backward_input(dx, dy, c->idx, &c->g, c->B);
    else exec_avgpool2d_backward_input(dx, dy, &c->g, c->B);
}

static void pool_case(const char *name, int max, int B, int C, int H, int W, int k, int s, int p)
{
    pool_ctx c = {B, max, {0}, NULL};
    CU_ASSERT_EQUAL_FATAL(exec_pool_init(&c.g, C, H, W, k, s, p), 0);
    int64_t ny = (int64_t)B * C * c.g.Ho * c.g.Wo;
    c.idx = exec_balloc(ny * (int64_t)sizeof(int32_t));
    layer_case lc = {name, (int64_t)B * C * H * W, 0, ny, 1e-4, 1e-6, &c, pool_ref, pool_fwd,
                     pool_bin, NULL, max ? 2 : 0, 0};
    check_layer(&lc);
    free(c.idx);
}

static void test_pool(void)
{
    pool_case("maxpool2d 2x2 s2", 1, 2, 3, 6, 6, 2, 2, 0);
    pool_case("maxpool2d 2x2 s2, odd size", 1, 2, 2, 7, 5, 2, 2, 0);
    pool_case("maxpool2d 2x2 s2, four-wide path and tail", 1, 2, 2, 10, 11, 2, 2, 0);
    pool_case("maxpool2d 3x3 s2 p1", 1, 2, 2, 7, 6, 3, 2, 1);
    pool_case("maxpool2d 3x3 s1", 1, 2, 2, 5, 6, 3, 1, 0);
    pool_case("avgpool2d 2x2 s2", 0, 2, 3, 6, 6, 2, 2, 0);
    pool_case("avgpool2d 3x3 s1 p1", 0, 2, 2, 5, 4, 3, 1, 1);
}

/* ------------------------------------------------------------------------ */
/* relu and dropout                                                          */

typedef struct { int64_t n; double p; uint8_t *mask; gsl_rng *rng; } ew_ctx;

static void relu_ref(double *y, const double *x, const double *w, void *vc)
{
    ew_ctx *c = vc;
    (void)w;
    for (int64_t i = 0; i < c->n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}
static void relu_fwd(float *y, const float *x, const float *w, void *vc)
{
    (void)w;
    exec_relu_forward(y, x, ((ew_ctx *)vc)->n);
}
static void relu_bin(float *dx, const float *dy, const float *x, const float *w,
                     const float *y, void *vc)
{
    (void)x; (void)w;
    exec_relu_backward_input(dx, dy, y, ((ew_ctx *)vc)->n);
}

/* The reference applies the mask the float forward drew. */
static void drop_ref(double *y, const double *x, const double *w, void *vc)
{
    ew_ctx *c = vc;
    (void)w;
    for (int64_t i = 0; i < c->n; i++) y[i] = c->mask[i] ? x[i] / (1 - c->p) : 0;
}
static void drop_fwd(float *y, const float *x, const float *w, void *vc)
{
    ew_ctx *c = vc;
    (void)w;
    exec_dropout_forward(y, c->mask, x, c->n, c->p, c->rng);
}
static void drop_bin(float *dx, const float *dy, const float *x, const float *w,
                     const float *y, void *vc)
{
    ew_ctx *c = vc;
    (void)x; (void)w; (void)y;
    exec_dropout_backward_input(dx, dy, c->mask, c->n, c->p);
}

/* The AVX-512 elementwise passes give the portable loops' bits: relu
 * forward and backward, dropout's masks and outputs from the same seed
 * (1001 elements: a ragged tail). */
static void elementwise_paths_agree(void)
{
    enum { N = 1001 };
    float *x = exec_falloc(N), *g = exec_falloc(N);
    float *rf[2], *rb[2], *dout[2], *din[2]; /* relu fwd/bwd, dropout fwd/bwd */
    uint8_t *mask[2];
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    for (int i = 0; i < N; i++) {
        x[i] = (float)(gsl_rng_uniform(rng) - 0.5);
        g[i] = (float)(gsl_rng_uniform(rng) - 0.5);
    }
    x[3] = -0.0f;
    for (int path = 0; path < 2; path++) { /* 0: kernels, 1: portable */
        int prev = exec_kern_disable(path);
        rf[path] = exec_falloc(N);
        rb[path] = exec_falloc(N);
        dout[path] = exec_falloc(N);
        din[path] = exec_falloc(N);
        mask[path] = exec_balloc(N);
        exec_relu_forward(rf[path], x, N);
        exec_relu_backward_input(rb[path], g, rf[path], N);
        gsl_rng_set(rng, 99);
        exec_dropout_forward(dout[path], mask[path], x, N, 0.3, rng);
        exec_dropout_backward_input(din[path], g, mask[path], N, 0.3);
        exec_kern_disable(prev);
    }
    CU_ASSERT(memcmp(rf[0], rf[1], N * sizeof(float)) == 0);
    CU_ASSERT(memcmp(rb[0], rb[1], N * sizeof(float)) == 0);
    CU_ASSERT(memcmp(mask[0], mask[1], N) == 0);
    CU_ASSERT(memcmp(dout[0], dout[1], N * sizeof(float)) == 0);
    CU_ASSERT(memcmp(din[0], din[1], N * sizeof(float)) == 0);
    for (int path = 0; path < 2; path++) {
        free(rf[path]);
        free(rb[path]);
        free(dout[path]);
        free(din[path]);
        free(mask[path]);
    }
    free(x);
    free(g);
    gsl_rng_free(rng);
}

static void test_elementwise(void)
{
    ew_ctx r = {97, 0, NULL, NULL};
    layer_case lr = {"relu", 97, 0, 97, 1e-6, 1e-7, &r, relu_ref, relu_fwd, relu_bin, NULL, 1, 0};
    check_paths(&lr);

    ew_ctx d = {4000, 0.4, exec_balloc(4000), gsl_rng_alloc(gsl_rng_mt19937)};
    gsl_rng_set(d.rng, 7);
    layer_case ld = {"dropout", 4000, 0, 4000, 1e-6, 1e-6, &d, drop_ref, drop_fwd, drop_bin,
                     NULL, 0, 0};
    check_paths(&ld);
    /* the kept fraction is 1 - p: binomial sd is sqrt(4000 * .24) = 31, so
     * 5 sd is 155 elements */
    int kept = 0;
    for (int i = 0; i < 4000; i++) kept += d.mask[i];
    CU_ASSERT(abs(kept - 2400) < 155);
    free(d.mask);
    gsl_rng_free(d.rng);
    if (exec_kern_avx512()) elementwise_paths_agree();
}

/* ------------------------------------------------------------------------ */
/* batchnorm2d                                                               */

typedef struct {
    int B, C, HW;
    float *xhat, *invstd, *rm, *rv;
} bn_ctx;

/* w = gamma (C) then beta (C); batch statistics, biased variance */
static void bn_ref(double *y, const double *x, const double *w, void *vc)
{
    bn_ctx *c = vc;
    double N = (double)c->B * c->HW;
    for (int ch = 0; ch < c->C; ch++) {
        double m = 0, v = 0;
        for (int n = 0; n < c->B; n++)
            for (int i = 0; i < c->HW; i++) m += x[(n * c->C + ch) * c->HW + i];
        m /= N;
        for (int n = 0; n < c->B; n++)
            for (int i = 0; i < c->HW; i++) {
                double d = x[(n * c->C + ch) * c->HW + i] - m;
                v += d * d;
            }
        v /= N;
        for (int n = 0; n < c->B; n++)
            for (int i = 0; i < c->HW; i++) {
                int k = (n * c->C + ch) * c->HW + i;
                y[k] = w[ch] * (x[k] - m) / sqrt(v + EXEC_BN_EPS) + w[c->C + ch];
            }
    }
}
static void bn_fwd(float *y, const float *x, const float *w, void *vc)
{
    bn_ctx *c = vc;
    exec_batchnorm2d_forward_train(y, c->xhat, c->invstd, c->rm, c->rv, x, w, w + c->C, c->B,
                                   c->C, c->HW);
}
static void bn_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                   void *vc)
{
    bn_ctx *c = vc;
    (void)x; (void)y;
    exec_batchnorm2d_backward_input(dx, dy, c->xhat, c->invstd, w, c->B, c->C, c->HW);
}
static void bn_bw(float *dw, const float *dy, const float *x, const float *w, void *vc)
{
    bn_ctx *c = vc;
    (void)x; (void)w;
    exec_batchnorm2d_backward_weight(dw, dw + c->C, dy, c->xhat, c->B, c->C, c->HW);
}

static void bn_case(const char *name, int B, int C, int HW)
{
    int64_t n = (int64_t)B * C * HW;
    bn_ctx c = {B, C, HW, exec_falloc(n), exec_falloc(C), exec_falloc(C), exec_falloc(C)};
    for (int i = 0; i < C; i++) c.rv[i] = 1;
    layer_case lc = {name, n, 2 * C, n, 1e-4, 1e-5, &c, bn_ref, bn_fwd, bn_bin, bn_bw, 0, 0};
    check_layer(&lc);
    free(c.xhat); free(c.invstd); free(c.rm); free(c.rv);
}

/* Running statistics after one step, and evaluation with them. */
static void test_bn_running(void)
{
    enum { B = 3, C = 2, HW = 4, N = B * C * HW };
    float x[N], y[N], xhat[N], invstd[C], rm[C] = {0.5f, -1}, rv[C] = {2, 0.5f};
    float gamma[C] = {1.5f, -0.5f}, beta[C] = {0.25f, 2};
    for (int i = 0; i < N; i++) x[i] = (float)((i * 37) % 11) * 0.3f - 1;
    exec_batchnorm2d_forward_train(y, xhat, invstd, rm, rv, x, gamma, beta, B, C, HW);
    double y2[N];
    for (int ch = 0; ch < C; ch++) {
        double m = 0, ss = 0;
        for (int n = 0; n < B; n++)
            for (int i = 0; i < HW; i++) m += x[(n * C + ch) * HW + i];
        m /= B * HW;
        for (int n = 0; n < B; n++)
            for (int i = 0; i < HW; i++) ss += pow(x[(n * C + ch) * HW + i] - m, 2);
        double rm0 = ch ? -1 : 0.5, rv0 = ch ? 0.5 : 2;
        CU_ASSERT(test_rel(rm[ch], 0.9 * rm0 + 0.1 * m) < 1e-6);
        CU_ASSERT(test_rel(rv[ch], 0.9 * rv0 + 0.1 * ss / (B * HW - 1)) < 1e-6);
        for (int n = 0; n < B; n++)
            for (int i = 0; i < HW; i++) {
                int k = (n * C + ch) * HW + i;
                y2[k] = gamma[ch] * (x[k] - rm[ch]) / sqrt(rv[ch] + EXEC_BN_EPS) + beta[ch];
            }
    }
    exec_batchnorm2d_forward_eval(y, x, gamma, beta, rm, rv, B, C, HW);
    CU_ASSERT(rel_err(y, y2, N) < 1e-6);
}

static void test_batchnorm(void)
{
    bn_case("batchnorm2d (C,H,W)", 3, 2, 5);
    bn_case("batchnorm2d 1-D features", 6, 4, 1);
}

/* ------------------------------------------------------------------------ */
/* softmax cross-entropy (mean over the batch)                               */

typedef struct { int B, K; int32_t *labels; float *probs, *loss; } sx_ctx;

static void sx_ref(double *y, const double *x, const double *w, void *vc)
{
    sx_ctx *c = vc;
    (void)w;
    double L = 0;
    for (int n = 0; n < c->B; n++) {
        double s = 0;
        for (int j = 0; j < c->K; j++) s += exp(x[n * c->K + j]);
        L += log(s) - x[n * c->K + c->labels[n]];
    }
    y[0] = L / c->B;
}
static void sx_fwd(float *y, const float *x, const float *w, void *vc)
{
    sx_ctx *c = vc;
    (void)w;
    y[0] = (float)(exec_softmax_xent_forward(c->probs, c->loss, x, c->labels, c->B, c->K) / c->B);
}
static void sx_bin(float *dx, const float *dy, const float *x, const float *w, const float *y,
                   void *vc)
{
    sx_ctx *c = vc;
    (void)x; (void)w; (void)y;
    exec_softmax_xent_backward_input(dx, c->probs, c->labels, c->B, c->K, dy[0] / (float)c->B);
}

static void test_softmax_xent(void)
{
    int32_t labels[5] = {3, 0, 6, 6, 1};
    sx_ctx c = {5, 7, labels, exec_falloc(35), exec_falloc(5)};
    layer_case lc = {"softmax_xent", 35, 0, 1, 1e-4, 1e-6, &c, sx_ref, sx_fwd, sx_bin, NULL, 0, 0};
    check_paths(&lc);
    free(c.probs);
    free(c.loss);
    /* large logits: no overflow, loss is the exact margin (both paths) */
    for (int path = 0; path < 2; path++) {
        int prev = exec_kern_disable(path);
        float big[3] = {1000, 0, -1000}, p[3], l[1];
        int32_t y0[1] = {1};
        double L = exec_softmax_xent_forward(p, l, big, y0, 1, 3);
        CU_ASSERT(test_rel(L, 1000) < 1e-9);
        CU_ASSERT_EQUAL(exec_count_correct(big, y0, 1, 3), 0);
        exec_kern_disable(prev);
    }
    /* the AVX-512 path's e^x against expf: probabilities, losses and their
     * sum over rows of 10, 16 and 37 classes spanning e^-80 to 1 (losses
     * near 0 compared absolutely: the float sum of the exponentials, 1 +
     * tiny, rounds differently from the portable double one) */
    if (!exec_kern_avx512()) return;
    enum { B = 9, KMAX = 37 };
    static const int Ks[3] = {10, 16, 37};
    for (int t = 0; t < 3; t++) {
        const int K = Ks[t];
        float x[B * KMAX], p[2][B * KMAX], l[2][B];
        int32_t y[B];
        for (int i = 0; i < B * K; i++) x[i] = (float)(((i * 7919) % 1601) * 0.05 - 40);
        for (int n = 0; n < B; n++) y[n] = (n * 5) % K;
        double L[2];
        for (int path = 0; path < 2; path++) {
            int prev = exec_kern_disable(path);
            L[path] = exec_softmax_xent_forward(p[path], l[path], x, y, B, K);
            exec_kern_disable(prev);
        }
        double worst = 0;
        for (int i = 0; i < B * K; i++)
            if (p[1][i] > 1e-30f) worst = fmax(worst, test_rel(p[0][i], p[1][i]));
        for (int n = 0; n < B; n++) worst = fmax(worst, fabs(l[0][n] - l[1][n]) / fmax(1.0, fabs(l[1][n])));
        CU_ASSERT(worst < 1e-6);
        CU_ASSERT(test_rel(L[0], L[1]) < 1e-6);
    }
}

/* ------------------------------------------------------------------------ */
/* the OpenBLAS kernel choice (docs/executor.md, "Getting the fast kernel")  */

static void test_blas_choice(void)
{
    /* generic kernels on an AVX-512 CPU: the AVX-512 one */
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Prescott", 1, 1), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Nehalem", 1, 1), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Sandybridge", 1, 1), "SkylakeX");
    /* Haswell's kernel measured 101 against SkylakeX's 150 GFLOP/s here */
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Haswell", 1, 1), "SkylakeX");
    CU_ASSERT_PTR_NULL(exec_blas_better_core("SkylakeX", 1, 1));
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Cooperlake", 1, 1));
    CU_ASSERT_PTR_NULL(exec_blas_better_core("SapphireRapids", 1, 1));
    /* AVX2 + FMA only */
    CU_ASSERT_STRING_EQUAL(exec_blas_better_core("Sandybridge", 0, 1), "Haswell");
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Haswell", 0, 1));
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Zen", 0, 1));
    /* nothing better can run */
    CU_ASSERT_PTR_NULL(exec_blas_better_core("Nehalem", 0, 0));
    CU_ASSERT_PTR_NULL(exec_blas_better_core(NULL, 1, 1));
    CU_ASSERT(exec_blas_corename() && exec_blas_corename()[0]);
}

TEST_SUITE(exec_layers)
{
    test_add_suite("exec_layers");
    test_add("linear: forward, input and weight gradients vs finite differences, kernels and OpenBLAS",
             test_linear);
    test_add("conv2d: sixteen geometries, every lowering and kernel, vs direct convolution and finite differences",
             test_conv2d);
    test_add("max and average pooling vs finite differences", test_pool);
    test_add("relu and dropout vs finite differences", test_elementwise);
    test_add("batchnorm2d training pass vs finite differences", test_batchnorm);
    test_add("batchnorm2d running statistics and evaluation mode", test_bn_running);
    test_add("softmax cross-entropy vs finite differences", test_softmax_xent);
    test_add("OpenBLAS kernel choice", test_blas_choice);
}
