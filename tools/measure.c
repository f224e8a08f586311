/* measure.c - clocks and medians (measure.h). */
#include "measure.h"

#include <assert.h>
#include <stdlib.h>
#include <time.h>

static double seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cl_now_s(void) { return seconds(CLOCK_MONOTONIC); }

double cl_thread_cpu_s(void) { return seconds(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cl_median(double *v, int n)
{
    assert(n >= 1);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
