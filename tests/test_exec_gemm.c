/* test_exec_gemm.c - the executor's own AVX-512 SGEMM (exec/nn/kern.h,
 * exec_kern_gemm) against a naive triple loop in double.
 *
 * Every element must lie within the forward error bound of a float sum:
 * |C - C_ref| <= gamma_n (sum_k |a_ik b_kj| + |bias_j| + beta |C0_ij|),
 * gamma_n = n u / (1 - n u), u = 2^-24, where n counts the roundings on
 * the way from one product to the result: at most one per FMA of its K
 * block, one per later addition of a block into C, and one for adding C0;
 * n = K + ceil(K / 64) + 2 covers the kernel's blockings (K blocks of 128,
 * and larger ones on the transposed path).  A wrong
 * index, a lost term, a missed tile edge or a dropped bias moves an element
 * by about one term, far beyond that bound.
 *
 * Shapes: the edges of the 14 x 32 tile and of the 16-lane vectors (M, N,
 * K of 1, 7, 13-15, 17, 31-33, 64, 100), all four transposition cases,
 * leading dimensions wider than the rows, bias and beta, and shapes past
 * each blocking (K beyond one K block, N beyond one packed N block, M beyond
 * one M block, K beyond the transposed path's block) and the unblocked
 * weight-gradient path.  Skipped, and said
 * so, on CPUs without AVX-512 (the kernel never runs there).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "exec/nn/kern.h"
#include "exec/nn/tensor.h"
#include "test.h"

typedef struct gcase {
    int ta, tb, M, N, K, bias, beta, pad; /* pad: extra columns in every leading dimension */
} gcase;

static void fill(float *p, int64_t n, gsl_rng *r)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)(2 * gsl_rng_uniform(r) - 1);
}

/* Runs one case; returns the largest |error| / bound over C (<= 1 passes),
 * and *same = 1 when a repeated call gave the same bits. */
static double run_case(const gcase *g, gsl_rng *r, int *same)
{
    const int M = g->M, N = g->N, K = g->K;
    /* leading dimensions at least 1, as BLAS wants (K = 0) */
    const int lda = (g->ta ? M : K) + g->pad + !(g->ta ? M : K),
              ldb = (g->tb ? K : N) + g->pad + !(g->tb ? K : N), ldc = N + g->pad;
    const int64_t na = (int64_t)(g->ta ? K : M) * lda, nb = (int64_t)(g->tb ? N : K) * ldb,
                  nc = (int64_t)M * ldc;
    float *A = exec_falloc(na), *B = exec_falloc(nb), *bias = exec_falloc(N), *C = exec_falloc(nc),
          *C0 = exec_falloc(nc), *C2 = exec_falloc(nc);
    fill(A, na, r);
    fill(B, nb, r);
    fill(bias, N, r);
    fill(C0, nc, r);
    memcpy(C, C0, (size_t)nc * sizeof *C);
    memcpy(C2, C0, (size_t)nc * sizeof *C);
    const float *bs = g->bias ? bias : NULL;
    exec_kern_gemm(g->ta, g->tb, M, N, K, A, lda, B, ldb, bs, g->beta, C, ldc);
    exec_kern_gemm(g->ta, g->tb, M, N, K, A, lda, B, ldb, bs, g->beta, C2, ldc);
    *same = memcmp(C, C2, (size_t)nc * sizeof *C) == 0;
    const double u = ldexp(1.0, -24), n = K + (K + 63) / 64 + 2, gam = n * u / (1 - n * u);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < ldc; j++) {
            const int64_t at = (int64_t)i * ldc + j;
            if (j >= N) { /* the padding between rows is never written */
                if (C[at] != C0[at]) worst = INFINITY;
                continue;
            }
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double a = g->ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k];
                double b = g->tb ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j];
                s += a * b;
                mag += fabs(a * b);
            }
            if (bs) { s += bias[j]; mag += fabs(bias[j]); }
            if (g->beta) { s += C0[at]; mag += fabs(C0[at]); }
            const double err = fabs(C[at] - s), bound = gam * mag + 1e-30;
            if (err / bound > worst) worst = err / bound;
        }
    free(A);
    free(B);
    free(bias);
    free(C);
    free(C0);
    free(C2);
    return worst;
}

static void check(const gcase *g, gsl_rng *r)
{
    int same = 0;
    double w = run_case(g, r, &same);
    if (!(w <= 1) || !same)
        fprintf(stderr, "\n  gemm ta %d tb %d M %d N %d K %d bias %d beta %d pad %d: error %.3g of the bound, repeat %s\n",
                g->ta, g->tb, g->M, g->N, g->K, g->bias, g->beta, g->pad, w, same ? "same" : "DIFFERS");
    CU_ASSERT(w <= 1);
    CU_ASSERT(same);
}

static int have_kernel(void)
{
    if (exec_kern_avx512()) return 1;
    fprintf(stderr, " (skipped: no AVX-512 on this CPU, the own SGEMM never runs) ");
    return 0;
}

/* every transposition case on the tile and vector edges */
static void test_edges(void)
{
    if (!have_kernel()) return;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 17);
    static const int dims[] = {1, 7, 13, 14, 15, 17, 31, 32, 33, 64, 100};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    const int stride = TEST_BREADTH(1, 3); /* sanitizer builds: every third shape */
    int c = 0;
    for (int mi = 0; mi < nd; mi++)
        for (int ni = 0; ni < nd; ni++)
            for (int ki = 0; ki < nd; ki += 2, c++) {
                if (c % stride) continue;
                gcase g = {c & 1, (c >> 1) & 1, dims[mi], dims[ni], dims[ki], (c / 4) & 1,
                           (c / 8) & 1, c % 3 == 0 ? 3 : 0};
                check(&g, r);
            }
    /* K = 0: only the bias and beta C remain */
    for (int t = 0; t < 4; t++) {
        gcase g = {t & 1, t >> 1, 9, 40, 0, 1, t & 1, 0};
        check(&g, r);
    }
    gsl_rng_free(r);
}

/* past every blocking (and the unblocked A^T B of at most 64 rows): K
 * blocks (128, and 2048 on the transposed path of
 * A B^T with M < N), packed N blocks (1024 columns at K 128), M blocks (36
 * tiles of up to 14 rows at K 128); the unblocked path's K chunks and its
 * C^T orientation; and the executor's own shapes */
static void test_blocks(void)
{
    if (!have_kernel()) return;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 18);
    static const gcase cases[] = {
        {0, 1, 40, 70, 600, 1, 0, 0},    /* transposed path, one K block */
        {0, 1, 20, 50, 2100, 1, 1, 1},   /* transposed path, two K blocks */
        {0, 1, 600, 100, 300, 1, 1, 0},  /* normal path, three K blocks, two M blocks */
        {0, 0, 33, 1100, 200, 0, 0, 2},  /* two N blocks, two K blocks */
        {1, 0, 600, 65, 300, 0, 1, 0},   /* A^T: packed a over three K blocks, two M blocks */
        {1, 1, 45, 77, 300, 1, 1, 0},    /* A^T B^T */
        {1, 0, 60, 50, 900, 1, 1, 1},    /* A^T B unblocked (<= 64 rows), ragged panel */
        {1, 0, 64, 64, 3000, 0, 1, 0},   /* A^T B, 64 rows but too long for L2: blocked */
        {0, 1, 64, 256, 784, 1, 0, 0},   /* mlp fc1 forward, batch 64 */
        {0, 0, 64, 128, 256, 0, 0, 0},   /* mlp fc2 input gradient */
        /* the wide gradients, on the own SGEMM when OpenBLAS runs a
         * narrower kernel than the CPU could (layers.c, own_gemm) */
        {1, 0, 256, 784, 64, 0, 1, 0},   /* mlp fc1 weight gradient, batch 64 */
        {0, 0, 64, 1568, 128, 0, 0, 0},  /* cnn fc1 input gradient */
        {1, 0, 128, 1568, 256, 0, 1, 0}, /* cnn fc1 weight gradient, batch 256 */
        {1, 0, 128, 256, 64, 0, 1, 0},   /* mlp fc2 weight gradient */
        {0, 1, 1024, 192, 64, 1, 0, 0},  /* ViT qkv forward, batch 64 */
        {1, 0, 192, 64, 1024, 0, 1, 0},  /* ViT qkv weight gradient */
        /* A^T B of at most 64 rows with K past what fits in L2: K in
         * chunks, C added to per chunk; K not a multiple of the chunk */
        {1, 0, 64, 64, 4096, 0, 1, 0},   /* ViT out weight gradient, batch 256: two chunks */
        {1, 0, 64, 64, 5000, 1, 0, 0},   /* a ragged last chunk, bias, beta 0 */
        {1, 0, 37, 33, 9001, 0, 1, 1},   /* odd M, a ragged panel packed per chunk */
        /* C^T = B^T A when it pads fewer panel columns: the patch
         * embedding's 49 inputs (tiles stored transposed) */
        {1, 0, 64, 49, 1024, 0, 1, 0},   /* patch weight gradient, batch 64 */
        {1, 0, 64, 49, 4096, 0, 1, 0},   /* batch 256: chunks, transposed stores added */
        {1, 0, 32, 17, 777, 1, 1, 3},    /* bias per row of C^T, padded leading dimensions */
        {1, 0, 45, 63, 5001, 1, 0, 0},   /* odd M and N, a ragged chunk */
        {1, 0, 130, 47, 3001, 1, 1, 1},  /* C^T for more than 64 rows: odd, chunked, ragged panel */
        {1, 0, 128, 64, 4096, 0, 1, 0},  /* ViT mlp fc1 weight gradient, batch 256 */
    };
    const int n = (int)(sizeof cases / sizeof cases[0]), step = TEST_BREADTH(1, 4);
    for (int i = 0; i < n; i += step) check(&cases[i], r);
    gsl_rng_free(r);
}

TEST_SUITE(exec_gemm)
{
    test_add_suite("exec_gemm");
    test_add("own SGEMM: four transposition cases on tile and vector edges vs double, within gamma_n bounds",
             test_edges);
    test_add("own SGEMM: K, N and M blocks, the transposed path, the zoo's shapes vs double", test_blocks);
}
