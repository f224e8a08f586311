/* bench.h - `cleave bench`: each module's benchmark writes one CSV.
 * A benchmark function writes <outdir>/<name>.csv (atomically, via cl_out),
 * prints a short human summary (medians, ratios, targets met or not) to
 * stdout, and returns an exit status.  `quick` makes it small enough for a
 * smoke test. */
#ifndef CL_BENCH_H
#define CL_BENCH_H

typedef int (*bench_fn)(const char *outdir, int quick);

#endif
