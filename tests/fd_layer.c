/* fd_layer.c - the finite-difference harness (fd_layer.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "base/status.h"
#include "exec/nn/kern.h"
#include "exec/nn/tensor.h"
#include "fd_layer.h"
#include "test.h"

#define FD_STEP 1e-5



double max_abs(const double *a, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* max |a - b| / max |b| */
double rel_err(const float *a, const double *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    double s = max_abs(b, n);
    return s > 0 ? m / s : m;
}

static double ref_loss(const layer_case *c, const double *x, const double *w, const double *r,
                       double *y)
{
    c->ref(y, x, w, c->ctx);
    double L = 0;
    for (int64_t j = 0; j < c->ny; j++) L += r[j] * y[j];
    return L;
}

/* Central differences of ref_loss with respect to v (x or w, n entries). */
static void numeric_grad(double *g, double *v, int64_t n, const layer_case *c, double *x,
                         double *w, const double *r, double *y)
{
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + FD_STEP;
        double lp = ref_loss(c, x, w, r, y);
        v[i] = keep - FD_STEP;
        double lm = ref_loss(c, x, w, r, y);
        v[i] = keep;
        g[i] = (lp - lm) / (2 * FD_STEP);
    }
}

/* Random values rounded to float so both sides see the same numbers. */
static void fill(float *f, double *d, int64_t n, gsl_rng *rng, double lo, double hi, int kinks)
{
    for (int64_t i = 0; i < n; i++) {
        double v = lo + (hi - lo) * gsl_rng_uniform(rng);
        if (kinks == 1 && fabs(v) < 0.05) v = v < 0 ? v - 0.05 : v + 0.05;
        f[i] = (float)v;
        d[i] = (double)f[i];
    }
    if (kinks == 2) { /* distinct values 0.01 apart, in random order */
        for (int64_t i = 0; i < n; i++) d[i] = (double)i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)gsl_rng_uniform_int(rng, (unsigned long)(i + 1));
            double t = d[i];
            d[i] = d[j];
            d[j] = t;
        }
        for (int64_t i = 0; i < n; i++) {
            f[i] = (float)(0.01 * (d[i] - (double)n / 2));
            d[i] = (double)f[i];
        }
    }
}

void check_layer(const layer_case *c)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 12345);
    int64_t nw = c->nw ? c->nw : 1;
    float *x = exec_falloc(c->nx), *w = exec_falloc(nw), *y = exec_falloc(c->ny),
          *dy = exec_falloc(c->ny), *dx = exec_falloc(c->nx), *dw = exec_falloc(nw),
          *dw0 = exec_falloc(nw);
    double *xd = cl_malloc((size_t)c->nx * sizeof *xd), *wd = cl_malloc((size_t)nw * sizeof *wd),
           *yd = cl_malloc((size_t)c->ny * sizeof *yd), *r = cl_malloc((size_t)c->ny * sizeof *r),
           *gx = cl_malloc((size_t)c->nx * sizeof *gx), *gw = cl_malloc((size_t)nw * sizeof *gw);
    fill(x, xd, c->nx, rng, -1, 1, c->kinks);
    fill(w, wd, c->nw, rng, -0.5, 0.5, 0);
    fill(dy, r, c->ny, rng, -1, 1, 0);

    /* forward agrees with the reference, and a second call gives the same
     * bits (the kernels sum in a fixed order) */
    float *y1 = exec_falloc(c->ny);
    c->fwd(y1, x, w, c->ctx);
    c->fwd(y, x, w, c->ctx);
    CU_ASSERT(!c->repeat || memcmp(y1, y, (size_t)c->ny * sizeof *y) == 0);
    free(y1);
    c->ref(yd, xd, wd, c->ctx);
    double fe = rel_err(y, yd, c->ny);
    if (fe >= c->fwd_tol) fprintf(stderr, "%s: forward error %.3g\n", c->name, fe);
    CU_ASSERT(fe < c->fwd_tol);

    /* input gradient on its own */
    for (int64_t i = 0; i < c->nx; i++) dx[i] = NAN; /* must be overwritten */
    c->bwd_in(dx, dy, x, w, y, c->ctx);
    if (c->repeat) {
        float *again = exec_falloc(c->nx);
        c->bwd_in(again, dy, x, w, y, c->ctx);
        CU_ASSERT(memcmp(again, dx, (size_t)c->nx * sizeof *dx) == 0);
        free(again);
    }
    numeric_grad(gx, xd, c->nx, c, xd, wd, r, yd);
    double ex = rel_err(dx, gx, c->nx);
    if (!(ex < c->tol)) fprintf(stderr, "%s: input-gradient error %.3g\n", c->name, ex);
    CU_ASSERT(ex < c->tol);
    CU_ASSERT(max_abs(gx, c->nx) > 0); /* the check compared something */

    /* weight gradient on its own, accumulating onto what was there */
    if (c->nw) {
        for (int64_t i = 0; i < c->nw; i++) dw[i] = dw0[i] = (float)(0.25 * (double)(i % 3));
        c->bwd_w(dw, dy, x, w, c->ctx);
        if (c->repeat) {
            float *again = exec_falloc(nw);
            memcpy(again, dw0, (size_t)c->nw * sizeof *dw0);
            c->bwd_w(again, dy, x, w, c->ctx);
            CU_ASSERT(memcmp(again, dw, (size_t)c->nw * sizeof *dw) == 0);
            free(again);
        }
        for (int64_t i = 0; i < c->nw; i++) dw[i] -= dw0[i];
        numeric_grad(gw, wd, c->nw, c, xd, wd, r, yd);
        double ew = rel_err(dw, gw, c->nw);
        if (!(ew < c->tol)) fprintf(stderr, "%s: weight-gradient error %.3g\n", c->name, ew);
        CU_ASSERT(ew < c->tol);
        CU_ASSERT(max_abs(gw, c->nw) > 0);
    }
    free(x); free(w); free(y); free(dy); free(dx); free(dw); free(dw0);
    free(xd); free(wd); free(yd); free(r); free(gx); free(gw);
    gsl_rng_free(rng);
}

/* The case on the AVX-512 kernels (when this CPU has them) and on the
 * portable OpenBLAS path. */
void check_paths(const layer_case *c)
{
    check_layer(c);
    if (!exec_kern_avx512()) return;
    int prev = exec_kern_disable(1);
    check_layer(c);
    exec_kern_disable(prev);
}

