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

/* The CPU the rest of the machine used while something was measured: busy
 * time of all cores (/proc/stat) minus this process's and its waited-for
 * children's CPU time.  The machine is shared; a figure measured while
 * others took a good share of it measured them too, and should say so. */
typedef struct cl_loadmeter {
    double t, busy, ours;
} cl_loadmeter;
void cl_load_start(cl_loadmeter *l);
/* CPU seconds this process and its waited-for children used since start. */
double cl_load_ours_s(const cl_loadmeter *l);
/* Since cl_load_start: CPU seconds the processes other than those that used
 * ours_s (cl_load_ours_s, or summed over the ranks of an MPI job) used
 * (*others_s, may be NULL), returned as a share of the machine's capacity
 * over the wall time, 0..1 (NAN where /proc/stat cannot be read). */
double cl_load_others(const cl_loadmeter *l, double ours_s, double *others_s);

#endif
