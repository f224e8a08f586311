/* test_exec_linsmall.c - the executor's own kernels for linear layers with
 * at most 12 outputs (exec/nn/kern.h, exec_kern_linear_*: mlp fc3, cnn fc2,
 * the ViT's head) against naive loops in double, in the style of
 * test_exec_gemm.c.
 *
 * Every element must lie within the forward error bound of a float sum,
 * |y - y_ref| <= gamma_n (sum |a b| + |terms added|), gamma_n = n u /
 * (1 - n u), u = 2^-24, with n the length of the longest chain of roundings
 * from one product to the result, generously: IC + 6 for the forward
 * (partial sums over the features, a tree of at most 4 levels, the bias),
 * OC + 1 for the input gradient (one chain over the outputs), B + 2 for the
 * weight and bias gradients (one chain over the rows, then the add into the
 * old value).  A wrong index, a missed tail or a dropped product
 * moves an element by about one term, far beyond that bound; the test
 * checks that, too: each pass's result with its largest product dropped
 * from one element at a vector edge must fail the bound.
 *
 * Shapes: the edges the kernels block by: rows in blocks of 4 (B = 1, 3-5,
 * 7-9, 64, 67), features in strips of 32 and vectors of 16 and groups of 8
 * (IC = 1, 7-9, 15-17, 31-33, 63-65, 128, 130, 512 for the forward), every
 * output count 1-12; and for the 10-output forward's own layout (IC a
 * multiple of 8), every row edge with 1-64 groups of 8 features.  Repeated
 * calls must give the same bits (the sums run
 * in a fixed order).  Skipped, and said so, on CPUs without AVX-512 (the
 * kernels never run there).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/kern.h"
#include "exec/nn/tensor.h"
#include "test.h"

static void fill(float *p, int64_t n, gsl_rng *r)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2 * gsl_rng_uniform(r) - 1);
}

static double gam(double n)
{
    const double u = ldexp(1.0, -24);
    return n * u / (1 - n * u);
}

/* One element's check: the kernel's value y against the exact sum s of
 * terms whose magnitudes add to mag, rounding chain n; returns err / bound. */
static double ratio(double y, double s, double mag, double n)
{
    return fabs(y - s) / (gam(n) * mag + 1e-30);
}

typedef struct lcase {
    int B, IC, OC;
} lcase;

typedef struct lbufs {
    float *x, *w, *b, *d, *y, *y2, *dx, *dx2, *dw0, *dw, *dw2, *db0, *db, *db2;
} lbufs;

static void bufs_alloc(lbufs *a, const lcase *c, gsl_rng *r)
{
    const int64_t nx = (int64_t)c->B * c->IC, nw = (int64_t)c->OC * c->IC, nd = (int64_t)c->B * c->OC;
    float **p[] = {&a->x, &a->dx, &a->dx2};
    for (int i = 0; i < 3; i++) *p[i] = exec_falloc(nx);
    float **q[] = {&a->w, &a->dw0, &a->dw, &a->dw2};
    for (int i = 0; i < 4; i++) *q[i] = exec_falloc(nw);
    float **s[] = {&a->d, &a->y, &a->y2};
    for (int i = 0; i < 3; i++) *s[i] = exec_falloc(nd);
    float **t[] = {&a->b, &a->db0, &a->db, &a->db2};
    for (int i = 0; i < 4; i++) *t[i] = exec_falloc(c->OC);
    fill(a->x, nx, r);
    fill(a->w, nw, r);
    fill(a->d, nd, r);
    fill(a->b, c->OC, r);
    fill(a->dw0, nw, r);
    fill(a->db0, c->OC, r);
}

static void bufs_free(lbufs *a)
{
    float *all[] = {a->x, a->w, a->b, a->d, a->y, a->y2, a->dx, a->dx2, a->dw0, a->dw, a->dw2, a->db0, a->db, a->db2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* s0 + sum over i < n of p[i ps] q[i qs] in double; *mag gets |s0| plus
 * the terms' magnitudes, *big the term of largest magnitude. */
static double dot_ref(const float *p, int64_t ps, const float *q, int64_t qs, int n, double s0,
                      double *mag, double *big)
{
    double s = s0;
    *mag = fabs(s0);
    *big = 0;
    for (int i = 0; i < n; i++) {
        const double t = (double)p[i * ps] * q[i * qs];
        s += t;
        *mag += fabs(t);
        if (fabs(t) > fabs(*big)) *big = t;
    }
    return s;
}

/* *worst = max(*worst, err / bound) of the kernel's y, with the largest
 * term first dropped from it when dropit */
static void judge(double y, int dropit, double big, double s, double mag, double n, double *worst)
{
    const double e = ratio(dropit ? y - big : y, s, mag, n);
    if (e > *worst) *worst = e;
}

/* The worst err / bound of each pass (forward, input gradient, weight and
 * bias gradient) into worst[3]; drop != 0 first removes the largest
 * product from one element at the last vector edge of each pass's output
 * (the broken-kernel check: the result must then exceed the bound). */
static void check_case(const lcase *c, lbufs *a, int drop, double worst[3])
{
    const int B = c->B, IC = c->IC, OC = c->OC;
    double mag, big, s;
    worst[0] = worst[1] = worst[2] = 0;
    /* forward: y (B, OC) = x w^T + b */
    for (int i = 0; i < B; i++)
        for (int o = 0; o < OC; o++) {
            s = dot_ref(a->x + (int64_t)i * IC, 1, a->w + (int64_t)o * IC, 1, IC, a->b[o], &mag, &big);
            judge(a->y[(int64_t)i * OC + o], drop && i == B - 1 && o == OC - 1, big, s, mag, IC + 6,
                  &worst[0]);
        }
    /* input gradient: dx (B, IC) = d w */
    for (int i = 0; i < B; i++)
        for (int k = 0; k < IC; k++) {
            s = dot_ref(a->d + (int64_t)i * OC, 1, a->w + k, IC, OC, 0, &mag, &big);
            judge(a->dx[(int64_t)i * IC + k], drop && i == B - 1 && k == IC - 1, big, s, mag, OC + 1,
                  &worst[1]);
        }
    /* weight gradient: dw (OC, IC) = dw0 + d^T x; bias: db = db0 + column sums of d */
    for (int o = 0; o < OC; o++) {
        for (int k = 0; k < IC; k++) {
            s = dot_ref(a->d + o, OC, a->x + k, IC, B, a->dw0[(int64_t)o * IC + k], &mag, &big);
            judge(a->dw[(int64_t)o * IC + k], drop && o == OC - 1 && k == IC - 1, big, s, mag, B + 2,
                  &worst[2]);
        }
        s = a->db0[o];
        mag = fabs(s);
        for (int i = 0; i < B; i++) {
            s += a->d[(int64_t)i * OC + o];
            mag += fabs(a->d[(int64_t)i * OC + o]);
        }
        judge(a->db[o], 0, 0, s, mag, B + 2, &worst[2]);
    }
}

/* Runs the three kernels twice on one shape; returns 1 when the repeats
 * gave the same bits. */
static int run_kernels(const lcase *c, lbufs *a)
{
    const int B = c->B, IC = c->IC, OC = c->OC;
    const size_t nw = (size_t)OC * IC * sizeof(float), nb = (size_t)OC * sizeof(float);
    int same = 1;
    if (IC <= EXEC_KERN_LINEAR_FWD_MAX_IC) {
        exec_kern_linear_forward(a->y, a->x, a->w, a->b, B, IC, OC);
        exec_kern_linear_forward(a->y2, a->x, a->w, a->b, B, IC, OC);
        same &= memcmp(a->y, a->y2, (size_t)B * OC * sizeof(float)) == 0;
    }
    exec_kern_linear_backward_input(a->dx, a->d, a->w, B, IC, OC);
    exec_kern_linear_backward_input(a->dx2, a->d, a->w, B, IC, OC);
    same &= memcmp(a->dx, a->dx2, (size_t)B * IC * sizeof(float)) == 0;
    memcpy(a->dw, a->dw0, nw);
    memcpy(a->db, a->db0, nb);
    memcpy(a->dw2, a->dw0, nw);
    memcpy(a->db2, a->db0, nb);
    exec_kern_linear_backward_weight(a->dw, a->db, a->d, a->x, B, IC, OC);
    exec_kern_linear_backward_weight(a->dw2, a->db2, a->d, a->x, B, IC, OC);
    same &= memcmp(a->dw, a->dw2, nw) == 0 && memcmp(a->db, a->db2, nb) == 0;
    return same;
}

static void check(const lcase *c, gsl_rng *r, int *broken_caught)
{
    lbufs a;
    bufs_alloc(&a, c, r);
    const int same = run_kernels(c, &a);
    double w[3], wd[3];
    check_case(c, &a, 0, w);
    if (c->IC > EXEC_KERN_LINEAR_FWD_MAX_IC) w[0] = 0;
    const int ok = w[0] <= 1 && w[1] <= 1 && w[2] <= 1;
    if (!ok || !same)
        fprintf(stderr, "\n  linear B %d IC %d OC %d: error %.3g / %.3g / %.3g of the bound, repeat %s\n",
                c->B, c->IC, c->OC, w[0], w[1], w[2], same ? "same" : "DIFFERS");
    CU_ASSERT(ok);
    CU_ASSERT(same);
    /* the same results with one product dropped must fail every pass */
    check_case(c, &a, 1, wd);
    for (int p = 0; p < 3; p++)
        if (p > 0 || c->IC <= EXEC_KERN_LINEAR_FWD_MAX_IC) *broken_caught &= wd[p] > 1;
    bufs_free(&a);
}

static int have_kernel(void)
{
    if (exec_kern_avx512()) return 1;
    fprintf(stderr, " (skipped: no AVX-512 on this CPU, the small-output kernels never run) ");
    return 0;
}

static void test_edges(void)
{
    if (!have_kernel()) return;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 19);
    static const int bs[] = {1, 3, 4, 5, 7, 8, 9, 64, 67};
    static const int ics[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128, 130, 512, 600};
    const int nb = (int)(sizeof bs / sizeof bs[0]), ni = (int)(sizeof ics / sizeof ics[0]);
    const int stride = TEST_BREADTH(1, 5);
    int c = 0, caught = 1;
    for (int bi = 0; bi < nb; bi++)
        for (int ii = 0; ii < ni; ii++, c++) {
            if (c % stride) continue;
            /* every output count, spread over the shapes */
            const lcase k = {bs[bi], ics[ii], 1 + (bi * 5 + ii * 7) % EXEC_KERN_LINEAR_MAX_OC};
            check(&k, r, &caught);
        }
    /* the zoo's shapes: mlp fc3 and cnn fc2 (128 -> 10), the ViT's head (64 -> 10) */
    static const lcase zoo[] = {{64, 128, 10}, {256, 128, 10}, {64, 64, 10}, {256, 64, 10}};
    for (int i = 0; i < 4; i++) check(&zoo[i], r, &caught);
    /* 10 outputs with IC a multiple of 8 run their own forward (rows in
     * blocks of 4, outputs 8 and 9 apart): every row edge, one to 64
     * groups of 8 features */
    static const int ics10[] = {8, 16, 24, 56, 64, 72, 136, 512};
    for (int bi = 0; bi < nb; bi++)
        for (int ii = 0; ii < (int)(sizeof ics10 / sizeof ics10[0]); ii++) {
            if ((bi + ii) % stride) continue;
            const lcase k = {bs[bi], ics10[ii], 10};
            check(&k, r, &caught);
        }
    if (!caught) fprintf(stderr, "\n  a result with a product dropped passed the bound\n");
    CU_ASSERT(caught);
    gsl_rng_free(r);
}

TEST_SUITE(exec_linsmall)
{
    test_add_suite("exec_linsmall");
    test_add("small-output linear kernels: forward, input and weight gradients on row, vector and strip edges vs double, within gamma_n bounds; a dropped product fails them",
             test_edges);
}
