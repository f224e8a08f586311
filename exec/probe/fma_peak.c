/* fma_peak.c - vector features and the FMA throughput of one core (fma_peak.h). */
#include <string.h>

#include "exec/nn/gemm.h"
#include "fma_peak.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FMA_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define FMA_X86 0
#endif

void exec_cpu_features(exec_cpu_feat *f)
{
    memset(f, 0, sizeof *f);
#if FMA_X86
    __builtin_cpu_init();
    /* "avx" and "avx512f" also require the OS to save the YMM / ZMM state */
    f->fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx");
    f->avx2 = f->fma && __builtin_cpu_supports("avx2");
    f->avx512f = f->fma && __builtin_cpu_supports("avx512f");
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(f->vendor, &b, 4);
        memcpy(f->vendor + 4, &d, 4);
        memcpy(f->vendor + 8, &c, 4);
        f->vendor[12] = 0;
    }
#endif
}

int exec_fma_widths(const exec_cpu_feat *f, int widths[3])
{
    int n = 0;
    if (f->fma) widths[n++] = 128;
    if (f->avx2) widths[n++] = 256;
    if (f->avx512f) widths[n++] = 512;
    return n;
}

double exec_fma_flops(int width, long iters)
{
    return 2.0 * (width / 32) * EXEC_FMA_CHAINS * (double)iters;
}

#if FMA_X86
/* The loops' result (exec_fma_run): the n lanes of the accumulators' sum,
 * added in double in lane order. */
static double sum_lanes(const float *v, int n)
{
    double t = 0;
    for (int i = 0; i < n; i++) t += v[i];
    return t;
}

/* One loop per width: EXEC_FMA_CHAINS named accumulators (registers; the
 * macro keeps the three loops the same), no loads or stores inside.  The
 * accumulators start different so the compiler cannot merge the chains,
 * and mul and add come in as arguments so it cannot fold the FMA.  The
 * body returns the sum over the accumulators' lanes (sum_lanes). */
#define FMA_LOOP(T, SET1, FMADD, ADD, STORE)                                       \
    T m = SET1(mul), c = SET1(add);                                                \
    T a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3), a4 = SET1(4),        \
      a5 = SET1(5), a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9),        \
      a10 = SET1(10), a11 = SET1(11);                                              \
    for (long i = 0; i < iters; i++) {                                             \
        a0 = FMADD(a0, m, c); a1 = FMADD(a1, m, c); a2 = FMADD(a2, m, c);         \
        a3 = FMADD(a3, m, c); a4 = FMADD(a4, m, c); a5 = FMADD(a5, m, c);         \
        a6 = FMADD(a6, m, c); a7 = FMADD(a7, m, c); a8 = FMADD(a8, m, c);         \
        a9 = FMADD(a9, m, c); a10 = FMADD(a10, m, c); a11 = FMADD(a11, m, c);     \
    }                                                                              \
    T s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));       \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                   \
    float v[sizeof(T) / sizeof(float)];                                            \
    STORE(v, s);                                                                   \
    return sum_lanes(v, (int)(sizeof v / sizeof *v));

_Static_assert(EXEC_FMA_CHAINS == 12, "FMA_LOOP names 12 accumulators");

__attribute__((target("avx,fma"), noinline)) static double loop128(long iters, float mul,
                                                                    float add)
{
    FMA_LOOP(__m128, _mm_set1_ps, _mm_fmadd_ps, _mm_add_ps, _mm_storeu_ps)
}

__attribute__((target("avx2,fma"), noinline)) static double loop256(long iters, float mul,
                                                                     float add)
{
    FMA_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps)
}

__attribute__((target("avx512f,fma"), noinline)) static double loop512(long iters, float mul,
                                                                        float add)
{
    FMA_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps)
}
#endif

double exec_fma_run(int width, long iters, float mul, float add, double *secs)
{
    exec_cpu_feat f;
    exec_cpu_features(&f);
    int w[3], n = exec_fma_widths(&f, w), ok = 0;
    for (int i = 0; i < n; i++) ok |= w[i] == width;
    if (!ok || iters < 0) return -1;
    double r = -1, t0 = exec_now();
#if FMA_X86
    if (width == 128) r = loop128(iters, mul, add);
    else if (width == 256) r = loop256(iters, mul, add);
    else r = loop512(iters, mul, add);
#else
    (void)mul;
    (void)add;
#endif
    if (secs) *secs = exec_now() - t0;
    return r;
}

/* read at run time so the timed loops cannot be specialised for 1 and 1 */
static volatile float one = 1.0f;

void exec_fma_measure(double seconds, exec_fma_peak *p)
{
    memset(p, 0, sizeof *p);
    exec_cpu_feat f;
    exec_cpu_features(&f);
    int w[3], n = exec_fma_widths(&f, w);
    for (int k = 0; k < n; k++) {
        int slot = w[k] == 128 ? 0 : w[k] == 256 ? 1 : 2;
        /* size one run to about 2 ms (a few scheduler ticks would spoil
         * longer ones on a loaded machine), from a first short run that
         * also warms the units up */
        long iters = 1 << 16;
        double s = 0;
        exec_fma_run(w[k], iters, one, one, &s);
        exec_fma_run(w[k], iters, one, one, &s);
        if (s > 0) iters = (long)(iters * (2e-3 / s)) + 1;
        double t_end = exec_now() + seconds / n;
        do {
            exec_fma_run(w[k], iters, one, one, &s);
            double rate = s > 0 ? exec_fma_flops(w[k], iters) / s : 0;
            if (rate > p->at[slot]) p->at[slot] = rate;
        } while (exec_now() < t_end);
        if (p->at[slot] > p->flops) {
            p->flops = p->at[slot];
            p->width = w[k];
        }
    }
}
