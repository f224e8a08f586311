/* bench.h - `cleave bench`: each module's benchmark writes one CSV.
 * A benchmark function writes <outdir>/<name>.csv (atomically, via cl_out),
 * prints a short human summary (medians, ratios, targets met or not) to
 * stdout, and returns an exit status.  `quick` makes it small enough for a
 * smoke test. */
#ifndef CL_BENCH_H
#define CL_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "base/fileio.h"

typedef int (*bench_fn)(const char *outdir, int quick);

/* The benchmarks, listed by tools/cmd_bench.c. */
int sim_bench(const char *outdir, int quick);       /* bench_sim.c      */
int exec_bench(const char *outdir, int quick);      /* bench_exec.c     */
int plan_bench(const char *outdir, int quick);      /* bench_plan.c     */
int exec_val_bench(const char *outdir, int quick);  /* validate_bench.c */
int exec_val_bench_tp(const char *outdir, int quick); /* its tensor-parallel cases alone */
int exec_val_bench_recompute(const char *outdir, int quick); /* its recomputing cases */
int exec_pipe_bench(const char *outdir, int quick); /* bench_pipe.c     */
int study_bench(const char *outdir, int quick);     /* bench_study.c    */

/* bench_exec_vit.c, for exec_bench: the linear products inside the ViT
 * model at `path` on their own, as kernel rows of csv; adds the passes
 * under 70% of `peak` to *below and every pass timed to *judged. */
struct cl_err;
int exec_bench_vit(FILE *csv, const char *path, double peak, double sgemm, const int *batches,
                   int nb, int reps, int *below, int *judged, struct cl_err *e);

/* Open <outdir>/<name>.csv for writing (atomically: nothing appears until
 * bench_csv_commit) with its header line; the path goes into path[0..cap).
 * On failure prints "cleave: <why>" on stderr and returns the exit status. */
int bench_csv_open(cl_out *o, char *path, size_t cap, const char *outdir, const char *name,
                   const char *header);
/* Put the file in place and print "wrote <path>"; or print why not.  Returns
 * the exit status. */
int bench_csv_commit(cl_out *o, const char *path);

#endif
