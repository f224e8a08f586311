/* measure.c - clocks and medians (measure.h). */
#include "measure.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

/* Busy seconds of all cores: every /proc/stat column but idle and iowait. */
static double cpu_busy_s(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return NAN;
    unsigned long long v[8] = {0};
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 5) return NAN;
    double hz = (double)sysconf(_SC_CLK_TCK);
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / hz;
}

static double ours_s(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           1e-6 * (double)(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec);
}

void cl_load_start(cl_loadmeter *l)
{
    l->t = cl_now_s();
    l->busy = cpu_busy_s();
    l->ours = ours_s();
}

double cl_load_ours_s(const cl_loadmeter *l) { return ours_s() - l->ours; }

double cl_load_others(const cl_loadmeter *l, double ours, double *others_s)
{
    double wall = cl_now_s() - l->t, cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    double x = cpu_busy_s() - l->busy - ours;
    if (x < 0) x = 0; /* jiffies are coarser than rusage */
    if (others_s) *others_s = x;
    if (!isfinite(x) || !(wall > 0) || !(cores > 0)) return NAN;
    return fmin(1, x / (wall * cores));
}
