/* measure.h - clocks and medians for everything that times itself
 * (benchmarks, progress bars, planning phases), prefix cl_. */
#ifndef CL_MEASURE_H
#define CL_MEASURE_H

/* Seconds on the monotonic wall clock (arbitrary origin). */
double cl_now_s(void);
/* CPU seconds the calling thread has used: what a benchmark on a shared
 * machine reports, since another job's load does not add to it. */
double cl_thread_cpu_s(void);
/* Median of v[0..n) (n >= 1); sorts v in place. */
double cl_median(double *v, int n);

#endif
