/* fma_peak.h - this core's floating-point peak, measured directly (prefix
 * exec_fma): the CPU's vector features, and the throughput of a
 * register-only loop of independent fused multiply-adds at each vector
 * width the CPU runs.
 *
 * Why: `cleave bench exec` used to call OpenBLAS's SGEMM rate "peak", but
 * that is whatever kernel OpenBLAS picked (OPENBLAS_CORETYPE may select an
 * AVX2 kernel on an AVX-512 core), so the executor's own kernels read
 * 130-190% of it.  The FMA loop needs no memory and no library: it is what
 * the core's FMA units can do, and every pass is judged against it.
 *
 * Decisions use features only (cpuid through __builtin_cpu_supports, which
 * also checks that the OS saves the wider registers); vendor and model
 * string are labels.  Each width's loop is compiled for its own target
 * (function attributes), so this file builds on any x86-64 and only runs
 * what the CPU supports; elsewhere no width is available and the peak is 0.
 */
#ifndef CL_EXEC_FMA_PEAK_H
#define CL_EXEC_FMA_PEAK_H

#include <stddef.h>

typedef struct exec_cpu_feat {
    int fma;            /* FMA3 (128-bit FMAs need only it, with AVX) */
    int avx2;           /* AVX2 + FMA: 256-bit */
    int avx512f;        /* AVX-512F (OS saves the ZMM state): 512-bit */
    char vendor[13];    /* "AuthenticAMD", ...: a label only */
} exec_cpu_feat;

/* The features of the CPU this runs on (all 0 off x86-64). */
void exec_cpu_features(exec_cpu_feat *f);

/* Vector widths in bits (128, 256, 512, ascending) the CPU runs FMAs at,
 * as f says; writes up to 3 and returns their count (0: no FMA). */
int exec_fma_widths(const exec_cpu_feat *f, int widths[3]);

/* Independent accumulator vectors in the loop: FMA latency (4-5 cycles)
 * x ports (2) with room to spare, and with the two operands still within
 * 16 registers for the 128/256-bit loops. */
#define EXEC_FMA_CHAINS 12

/* Floating-point operations of `iters` loop iterations at `width` bits:
 * EXEC_FMA_CHAINS vector FMAs per iteration, width / 32 float lanes each,
 * 2 operations (multiply, add) per lane. */
double exec_fma_flops(int width, long iters);

/* Run the loop once: each of the EXEC_FMA_CHAINS accumulators starts at its
 * index k in every lane and takes acc = acc * mul + add `iters` times.
 * Returns the sum over all lanes and accumulators of the results (with
 * mul = 1, add = 1: lanes * (sum of k + chains * iters), exact below 2^24
 * per lane; the tests check the FMA count with it), and the seconds taken in
 * *secs (may be NULL).  width must be one exec_fma_widths gave; -1 else. */
double exec_fma_run(int width, long iters, float mul, float add, double *secs);

typedef struct exec_fma_peak {
    int width;          /* the width that reached the peak (0: none) */
    double flops;       /* FLOP/s on one core, best run at that width */
    double at[3];       /* best FLOP/s at 128, 256, 512 bits (0: not run) */
} exec_fma_peak;

/* Measure: at every width the CPU has, repeated runs of about 2 ms for
 * about `seconds` in all, the best run kept (the machine is shared: a peak
 * is the fastest run, not the typical one).  Runs on the calling thread. */
void exec_fma_measure(double seconds, exec_fma_peak *p);

#endif
