/* fidelity.h - `cleave bench fidelity`: cleave's predicted iteration time
 * of published Megatron-style training runs against the measured one
 * (bench/fidelity/published-runs.csv; docs/fidelity.md).
 *
 * Each row becomes a GPT model (tfm_gpt of its layers, hidden, heads,
 * seq_len, vocab), a cluster of the device preset its hardware names with
 * the links of its system, and a layout (planner/layout.h) of its degrees,
 * microbatch, schedule, recomputation, ZeRO stage and sequence
 * parallelism; plan_fixed_eval prices it.  No parameter is fitted to these
 * measurements.
 */
#ifndef CL_BENCH_FIDELITY_H
#define CL_BENCH_FIDELITY_H

#include <stdio.h>

#include "base/status.h"

/* The published runs the benchmark reads by default. */
#define FIDELITY_CSV "bench/fidelity/published-runs.csv"

typedef struct fid_point {
    double measured_s, predicted_s;
    int fits;               /* 0: the layout overflows a device's memory  */
} fid_point;

typedef struct fid_summary {
    int rows, evaluated, skipped;
    double mae_pct, bias_pct, worst_pct; /* mean |error|, mean error, largest |error| */
    char worst_id[64];
    int over15, over25, nofit;
    fid_point *points;      /* evaluated rows, in file order; free() it   */
} fid_summary;

/* Read `csv`, evaluate every row, write <outdir>/fidelity.csv (id, source,
 * gpus, layout, measured_s, predicted_s, error_pct, fits, reason) and print
 * the rows that cannot be expressed (with the reason) and the summary on
 * msg.  CL_EINPUT naming csv:line for a malformed file (no output file);
 * CL_OK otherwise, with *sum filled. */
int fidelity_run(const char *csv, const char *outdir, FILE *msg, fid_summary *sum, cl_err *e);

#endif
