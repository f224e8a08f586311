/* profile.h - measuring a model's layers on this machine: per-layer
 * forward, input-gradient and weight-gradient seconds (median and spread of
 * repeated runs, GSL statistics) and a whole sequential training step, for
 * `cleave profile` and `cleave bench exec`.
 *
 * Method (docs/executor.md, "Profiling"): for each batch size, one net over
 * the whole model keeps every buffer (EXEC_NET_KEEP_ALL), runs one full
 * training step to fill them, then times each layer's three calls on their
 * own: `warmup` untimed calls, then `reps` timed ones.  A pass the executor
 * never runs (input gradient of a layer with no parameters before it,
 * weight gradient of a layer without weights) is 0 s.
 */
#ifndef CL_EXEC_PROFILE_H
#define CL_EXEC_PROFILE_H

#include <stdint.h>

#include "../models/model.h"
#include "../profiles/profile.h"
#include "../tools/status.h"

/* One layer at one batch size: medians and standard deviations, seconds for
 * the whole batch. */
typedef struct exec_layer_time {
    double fwd_s, bwd_in_s, bwd_w_s;
    double fwd_sd, bwd_in_sd, bwd_w_sd;
} exec_layer_time;

/* Time every layer of m at batch size `batch`; t has m->n_layers entries.
 * CL_EINPUT if the executor cannot run m. */
int exec_profile_batch(const model *m, const char *file, int batch, int warmup, int reps,
                       uint64_t seed, exec_layer_time *t, cl_err *e);

/* A profile of m (source "measured", device "cpu-core") at the given batch
 * sizes (strictly increasing, at most PROF_MAX_POINTS); act_bytes are the
 * layer's output bytes per sample, stash_bytes what the executor keeps per
 * sample for its backward pass (exec_net_layer_bytes), param_bytes 4 per
 * parameter.  The caller frees *p with prof_free. */
int exec_profile(const model *m, const char *file, const int64_t *batches, int n_batches,
                 int warmup, int reps, uint64_t seed, prof *p, cl_err *e);

/* Median seconds of a whole sequential training step at `batch` (forward
 * over every layer, input- then weight-gradient passes, SGD update), and
 * the median of the SGD update alone (update_s may be NULL). */
int exec_time_step(const model *m, const char *file, int batch, int warmup, int reps,
                   uint64_t seed, double *step_s, double *update_s, cl_err *e);

/* The CPU's model name from /proc/cpuinfo ("cpu" when unknown). */
void exec_cpu_name(char *buf, size_t cap);

#endif
