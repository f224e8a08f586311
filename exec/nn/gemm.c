/* gemm.c - OpenBLAS wrapper, kernel selection, peak measurement (gemm.h). */
#include <assert.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "base/status.h"
#include "gemm.h"

/* ------------------------------------------------------------------------ */
/* kernel selection                                                          */

static int in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return 1;
    return 0;
}

const char *exec_blas_better_core(const char *corename, int has_avx512, int has_avx2_fma)
{
    /* OpenBLAS's names (driver/others/dynamic.c, corename[]).  Cooperlake
     * and SapphireRapids reuse the SkylakeX SGEMM kernel; Zen the Haswell
     * one.  The AVX-512 kernel is the fastest, then the AVX2 one (rates:
     * docs/executor.md, "Getting the fast kernel"). */
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                       "SapphireRapids", NULL};
    if (!corename) return NULL;
    if (has_avx512) return in_list(corename, avx512) ? NULL : "SkylakeX";
    if (has_avx2_fma) return in_list(corename, avx2) ? NULL : "Haswell";
    return NULL;
}

static void cpu_features(int *avx512, int *avx2_fma)
{
    *avx512 = *avx2_fma = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* the SkylakeX kernels use F, DQ, BW, VL and CD; the GCC builtins also
     * check that the OS saves the AVX-512 state (XGETBV) */
    *avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
              __builtin_cpu_supports("avx512cd");
    *avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
}

void exec_blas_setup(int argc, char **argv)
{
    (void)argc;
    /* Set by the user (their choice wins) or by our own re-execution (so
     * this runs at most once even if the library ignores the variable). */
    if (getenv("OPENBLAS_CORETYPE")) return;
    int avx512, avx2_fma;
    cpu_features(&avx512, &avx2_fma);
    const char *want = exec_blas_better_core(openblas_get_corename(), avx512, avx2_fma);
    if (!want) return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* exec failed (no /proc): carry on with the kernel we have */
    unsetenv("OPENBLAS_CORETYPE");
}

static void pin_one_thread(void)
{
    openblas_set_num_threads(1);
}

void exec_blas_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, pin_one_thread);
}

const char *exec_blas_wanted(void)
{
    int avx512, avx2_fma;
    cpu_features(&avx512, &avx2_fma);
    return exec_blas_better_core(openblas_get_corename(), avx512, avx2_fma);
}

const char *exec_blas_corename(void)
{
    return openblas_get_corename();
}

/* ------------------------------------------------------------------------ */
/* products                                                                  */

void exec_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    assert(M >= 0 && N >= 0 && K >= 0);
    assert(ldc >= (N > 1 ? N : 1));
    assert(lda >= ((ta ? M : K) > 1 ? (ta ? M : K) : 1));
    assert(ldb >= ((tb ? K : N) > 1 ? (tb ? K : N) : 1));
    if (M == 0 || N == 0) return;
    /* every product on the calling thread, whoever calls: a layer used on
     * its own (a unit test, a probe) must not start OpenBLAS's threads,
     * whose writes no one else waits for (ThreadSanitizer saw them) and
     * whose split reductions would change the bits */
    exec_blas_init();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

double exec_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double exec_gemm_peak(double seconds, int *best_n)
{
    exec_blas_init();
    /* Square sizes from "fits in L2" to "streams from memory"; the best of
     * them is what the kernel can do on this core. */
    static const int sizes[] = {256, 512, 1024};
    const int n_sizes = (int)(sizeof sizes / sizeof sizes[0]);
    int nmax = sizes[n_sizes - 1];
    size_t nn = (size_t)nmax * (size_t)nmax;
    float *a = cl_malloc(nn * sizeof *a), *b = cl_malloc(nn * sizeof *b),
          *c = cl_malloc(nn * sizeof *c);
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 7) * 0.125f - 0.375f;
        b[i] = (float)(i % 5) * 0.25f - 0.5f;
    }
    double best = 0;
    int bn = sizes[0];
    for (int s = 0; s < n_sizes; s++) {
        int n = sizes[s];
        double flops = 2.0 * n * n * n;
        exec_gemm(0, 0, n, n, n, 1, a, n, b, n, 0, c, n); /* warm-up */
        double t_end = exec_now() + seconds / n_sizes;
        do {
            double t0 = exec_now();
            exec_gemm(0, 0, n, n, n, 1, a, n, b, n, 0, c, n);
            double rate = flops / (exec_now() - t0);
            if (rate > best) { best = rate; bn = n; }
        } while (exec_now() < t_end);
    }
    free(a);
    free(b);
    free(c);
    if (best_n) *best_n = bn;
    return best;
}
