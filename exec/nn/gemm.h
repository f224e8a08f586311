/* gemm.h - the executor's matrix products (OpenBLAS through CBLAS), the
 * choice of OpenBLAS kernel, and a measurement of this core's SGEMM peak.
 *
 * Parallelism comes from the pipeline (one worker per core), so every
 * product runs on the calling thread only: exec_blas_init(), which exec_gemm
 * calls before every product, pins OpenBLAS to one thread.  That also keeps results independent of the thread count
 * (no split reductions), which bit-for-bit reproducibility needs.
 *
 * Kernel choice (docs/executor.md, "Getting the fast kernel"): Debian's
 * OpenBLAS is a DYNAMIC_ARCH build that picks its kernels from the CPUID
 * model when the library loads.  On a virtual CPU whose model number it does
 * not know it falls back to an old generic kernel (Prescott, Nehalem,
 * Sandybridge), several times slower than the AVX-512 one.  The only
 * supported way to override it is OPENBLAS_CORETYPE, read once at load
 * time, so exec_blas_setup() sets it and re-executes the program when
 * needed.
 */
#ifndef CL_EXEC_GEMM_H
#define CL_EXEC_GEMM_H

/* Call first thing in main(), before anything else runs: when OpenBLAS
 * loaded a generic kernel although this CPU can run a faster one, and the
 * user has not set OPENBLAS_CORETYPE, set it and re-execute /proc/self/exe
 * with the same argv (at most once; on failure it returns and the slow
 * kernel is used).  Returns only if no re-execution happened. */
void exec_blas_setup(int argc, char **argv);

/* The kernel OpenBLAS should use on a CPU with these features when it chose
 * `corename`: "SkylakeX" or "Haswell", or NULL when `corename` is already
 * one of the fast ones (or nothing better can run).  Pure, for tests. */
const char *exec_blas_better_core(const char *corename, int has_avx512, int has_avx2_fma);

/* The kernel exec_blas_setup() would ask for on this CPU (by its features)
 * instead of the one loaded, or NULL when the loaded one is already the
 * best; non-NULL after setup means OPENBLAS_CORETYPE chose a slower one. */
const char *exec_blas_wanted(void);

/* Pin OpenBLAS to the calling thread (idempotent, cheap).  Every exec_
 * function that multiplies matrices calls it. */
void exec_blas_init(void);

/* The kernel OpenBLAS is using ("SkylakeX", ...); static storage. */
const char *exec_blas_corename(void);

/* Row-major C (M,N) = alpha op(A) op(B) + beta C, op(A) (M,K), op(B) (K,N);
 * ta/tb nonzero transpose A/B as stored (then A is (K,M) with lda >= M).
 * All dimensions must be >= 0 and fit an int (asserted). */
void exec_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
               int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Single-core SGEMM peak in FLOP/s (multiply-add = 2): the best rate over
 * square products of a few sizes, each timed for about `seconds` / 3.
 * *best_n receives the size that reached it (may be NULL). */
double exec_gemm_peak(double seconds, int *best_n);

/* Monotonic wall clock in seconds. */
double exec_now(void);

#endif
