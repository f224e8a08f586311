/* fd_layer.h - the finite-difference harness the layer suites share
 * (test_exec_layers.c, test_exec_tfm.c): a layer's float32 forward against
 * a double reference, and its input- and weight-gradient calls, each on its
 * own, against central differences of that reference.
 */
#ifndef CL_TEST_FD_LAYER_H
#define CL_TEST_FD_LAYER_H

#include <stdint.h>

typedef struct layer_case {
    const char *name;
    int64_t nx, nw, ny; /* input, parameter and output elements (nw may be 0) */
    double tol;         /* gradient tolerance (relative to the gradient's scale) */
    double fwd_tol;     /* forward agreement with the reference */
    void *ctx;
    void (*ref)(double *y, const double *x, const double *w, void *ctx);
    void (*fwd)(float *y, const float *x, const float *w, void *ctx);
    /* dx from dy; y is the float forward output */
    void (*bwd_in)(float *dx, const float *dy, const float *x, const float *w,
                   const float *y, void *ctx);
    /* dw += from dy; NULL when nw == 0 */
    void (*bwd_w)(float *dw, const float *dy, const float *x, const float *w, void *ctx);
    /* inputs away from kinks: |x| >= margin (relu), distinct values (max) */
    int kinks;
    /* 1: each call is repeated and must give the same bits (layers with no
     * random state) */
    int repeat;
} layer_case;

/* max_i |a_i| */
double max_abs(const double *a, int64_t n);
/* max |a - b| / max |b| */
double rel_err(const float *a, const double *b, int64_t n);
/* Run the case once (see test_exec_layers.c's head for the method). */
void check_layer(const layer_case *c);
/* The case on the AVX-512 kernels (when this CPU has them) and on the
 * portable OpenBLAS path. */
void check_paths(const layer_case *c);

#endif
