/* test_exec_convdin.c - conv2d's input gradient as a forward convolution
 * of d on the 2 x 14 x 16 tile (exec/nn/conv_avx512.c,
 * exec_convg_backward_input, chosen by layers.c for the shapes of
 * exec_convg_din_shape) against a direct sum in double.
 *
 * Every element must lie within the forward error bound of a float sum:
 * |din - ref| <= gamma_n sum |d w| over its terms, gamma_n = n u / (1 - n
 * u), u = 2^-24, n = O k k + 1 (one rounding per FMA of the tile's single
 * k loop, whose zero-padded terms add nothing).  A wrong flip of the
 * kernel, a lost channel, a tile row or column stored in the wrong place
 * moves an element by about one term, far beyond that bound.
 *
 * Shapes, each on an edge the kernel splits on: cnn conv2 itself (16
 * channels, two 14-pixel rows per tile, d with 32 channels: the constant
 * pixel stride); an odd height (a last tile of one row) with 17 columns
 * (tiles of 9 and 8) and d with 16 channels (the run-time stride); 4 and
 * 13 channels (a ragged panel and store); 29 columns (tiles of 10, 10, 9);
 * padding 0 (d padded by k - 1) and k - 1 (not padded); an even kernel;
 * a 1x1 kernel on a 1 x 1 image (a tile of one pixel).  Repeated calls
 * must give the same bits, and the same shapes with the kernels switched
 * off (the row shifts) must meet the bound too.  Skipped, and said so, on
 * CPUs without AVX-512.
 *
 * Batch split: the three tiled passes (forward, weight and input gradient)
 * of B samples in one call must give the bits of B one-sample calls (the
 * weight gradient adds each sample's tile sums in sample order either
 * way).  They prefetch the next sample's operands while one computes
 * (conv_avx512.c); a hint that moved or dropped a sample, or any state
 * carried from one sample to the next, would break it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/conv_tile.h"
#include "exec/nn/kern.h"
#include "exec/nn/layers.h"
#include "exec/nn/tensor.h"
#include "test.h"

typedef struct dcase {
    int B, C, H, W, O, k, p;
} dcase;

static void fill(float *p, int64_t n, gsl_rng *r)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2 * gsl_rng_uniform(r) - 1);
}

/* largest |error| / bound over din (<= 1 passes); *same = 1 when a
 * repeated call gave the same bits */
static double run_case(const exec_conv *g, int B, gsl_rng *r, int *same)
{
    const int64_t nd = (int64_t)B * g->O * g->Ho * g->Wo, nx = (int64_t)B * g->C * g->H * g->W,
                  nw = (int64_t)g->O * g->C * g->k * g->k;
    float *d = exec_falloc(nd), *w = exec_falloc(nw), *dx = exec_falloc(nx), *dx2 = exec_falloc(nx),
          *col = exec_falloc(exec_conv_col_floats(g));
    fill(d, nd, r);
    fill(w, nw, r);
    fill(dx, nx, r); /* written, not added to: stale values must go */
    exec_conv2d_backward_input(dx, d, w, col, g, B);
    exec_conv2d_backward_input(dx2, d, w, col, g, B);
    *same = memcmp(dx, dx2, (size_t)nx * sizeof *dx) == 0;
    const double u = ldexp(1.0, -24), n = (double)g->O * g->k * g->k + 1, gam = n * u / (1 - n * u);
    double worst = 0;
    for (int b = 0; b < B; b++)
        for (int c = 0; c < g->C; c++)
            for (int h = 0; h < g->H; h++)
                for (int x = 0; x < g->W; x++) {
                    double s = 0, mag = 0;
                    for (int o = 0; o < g->O; o++)
                        for (int ki = 0; ki < g->k; ki++)
                            for (int kj = 0; kj < g->k; kj++) {
                                const int oh = h + g->pad - ki, ow = x + g->pad - kj;
                                if (oh < 0 || ow < 0 || oh >= g->Ho || ow >= g->Wo) continue;
                                const double t =
                                    (double)d[(((int64_t)b * g->O + o) * g->Ho + oh) * g->Wo + ow] *
                                    w[(((int64_t)o * g->C + c) * g->k + ki) * g->k + kj];
                                s += t;
                                mag += fabs(t);
                            }
                    const double got = dx[(((int64_t)b * g->C + c) * g->H + h) * g->W + x];
                    const double err = fabs(got - s) / (gam * mag + 1e-30);
                    if (!(err <= worst)) worst = err; /* a NaN counts as the worst */
                }
    free(d);
    free(w);
    free(dx);
    free(dx2);
    free(col);
    return worst;
}

static void check(const dcase *c, gsl_rng *r)
{
    exec_conv g;
    CU_ASSERT_EQUAL_FATAL(exec_conv_init(&g, c->C, c->H, c->W, c->O, c->k, 1, c->p), 0);
    /* the shape takes the kernel (layers.c: C k >= 16, its row-shift bound) */
    CU_ASSERT(exec_convg_din_shape(&g, 16));
    for (int off = 0; off < 2; off++) {
        const int prev = exec_kern_disable(off);
        int same = 0;
        const double worst = run_case(&g, c->B, r, &same);
        exec_kern_disable(prev);
        if (!(worst <= 1) || !same)
            fprintf(stderr, "\n  conv din B %d C %d %dx%d O %d k %d pad %d, kernels %s: error %.3g of the bound, repeat %s\n",
                    c->B, c->C, c->H, c->W, c->O, c->k, c->p, off ? "off" : "on", worst,
                    same ? "same" : "DIFFERS");
        CU_ASSERT(worst <= 1);
        CU_ASSERT(same);
    }
}

static void test_edges(void)
{
    if (!exec_kern_avx512()) {
        fprintf(stderr, " (skipped: no AVX-512 on this CPU, the kernel never runs) ");
        return;
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 17);
    static const dcase cases[] = {
        {2, 16, 14, 14, 32, 5, 2}, /* cnn conv2 */
        {1, 16, 7, 17, 16, 3, 1},  /* odd height, tiles of 9 and 8, run-time stride */
        {2, 4, 5, 29, 48, 5, 0},   /* 4 channels, tiles of 10, 10, 9, d padded by 4 */
        {1, 13, 6, 14, 32, 3, 2},  /* 13 channels, one 14-wide tile, padding k - 1 */
        {1, 2, 4, 3, 16, 8, 5},    /* even kernel */
        {3, 16, 1, 1, 32, 1, 0},   /* 1x1 on one pixel */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check(&cases[i], r);
    gsl_rng_free(r);
}

/* one call on B samples against B calls on one each, every pass, bit for bit */
static void split_case(const exec_conv *g, int B, gsl_rng *r)
{
    const int64_t sx = (int64_t)g->C * g->H * g->W, sy = (int64_t)g->O * g->Ho * g->Wo,
                  nw = (int64_t)g->O * g->C * g->k * g->k;
    float *x = exec_falloc(B * sx), *d = exec_falloc(B * sy), *w = exec_falloc(nw),
          *b = exec_falloc(g->O), *col = exec_falloc(exec_conv_col_floats(g));
    float *y1 = exec_falloc(B * sy), *y2 = exec_falloc(B * sy), *dx1 = exec_falloc(B * sx),
          *dx2 = exec_falloc(B * sx), *dw1 = exec_falloc(nw), *dw2 = exec_falloc(nw),
          *db1 = exec_falloc(g->O), *db2 = exec_falloc(g->O);
    fill(x, B * sx, r);
    fill(d, B * sy, r);
    fill(w, nw, r);
    fill(b, g->O, r);
    memset(dw1, 0, (size_t)nw * sizeof *dw1);
    memset(dw2, 0, (size_t)nw * sizeof *dw2);
    memset(db1, 0, (size_t)g->O * sizeof *db1);
    memset(db2, 0, (size_t)g->O * sizeof *db2);
    exec_conv2d_forward(y1, x, w, b, col, g, B);
    exec_conv2d_backward_input(dx1, d, w, col, g, B);
    exec_conv2d_backward_weight(dw1, db1, d, x, col, g, B);
    for (int n = 0; n < B; n++) {
        exec_conv2d_forward(y2 + n * sy, x + n * sx, w, b, col, g, 1);
        exec_conv2d_backward_input(dx2 + n * sx, d + n * sy, w, col, g, 1);
        exec_conv2d_backward_weight(dw2, db2, d + n * sy, x + n * sx, col, g, 1);
    }
    CU_ASSERT(memcmp(y1, y2, (size_t)(B * sy) * sizeof *y1) == 0);
    CU_ASSERT(memcmp(dx1, dx2, (size_t)(B * sx) * sizeof *dx1) == 0);
    CU_ASSERT(memcmp(dw1, dw2, (size_t)nw * sizeof *dw1) == 0);
    CU_ASSERT(memcmp(db1, db2, (size_t)g->O * sizeof *db1) == 0);
    float *bufs[] = {x, d, w, b, col, y1, y2, dx1, dx2, dw1, dw2, db1, db2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

static void test_split(void)
{
    if (!exec_kern_avx512()) {
        fprintf(stderr, " (skipped: no AVX-512 on this CPU, the kernels never run) ");
        return;
    }
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 18);
    exec_conv g;
    /* cnn conv2; 16 -> 16 channels on an odd 7 x 17 image (tiles of 9
     * and 8, a last din tile of one row) */
    CU_ASSERT_EQUAL_FATAL(exec_conv_init(&g, 16, 14, 14, 32, 5, 1, 2), 0);
    CU_ASSERT(exec_convg_shape(&g, 16) && exec_convg_din_shape(&g, 16));
    split_case(&g, 5, r);
    CU_ASSERT_EQUAL_FATAL(exec_conv_init(&g, 16, 7, 17, 16, 3, 1, 1), 0);
    CU_ASSERT(exec_convg_shape(&g, 16) && exec_convg_din_shape(&g, 16));
    split_case(&g, 3, r);
    gsl_rng_free(r);
}

TEST_SUITE(exec_convdin)
{
    test_add_suite("exec_convdin");
    test_add("conv2d input gradient on the 2 x 14 x 16 tile: split edges vs double, within gamma_n bounds",
             test_edges);
    test_add("conv2d tiled passes: one call on B samples gives the bits of B one-sample calls",
             test_split);
}
