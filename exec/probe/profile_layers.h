/* profile.h - measuring a model's layers on this machine: per-layer
 * forward, input-gradient and weight-gradient seconds (median and spread of
 * repeated runs, GSL statistics) and a whole sequential training step, for
 * `cleave profile` and `cleave bench exec`.
 *
 * Method (docs/executor.md, "Profiling"): for each batch size, real
 * training steps on a random batch (forward, input- and weight-gradient
 * passes, SGD update with rate 0 so the weights stay put) with the net's
 * per-layer clocks on: `warmup` steps untimed, then `reps` timed ones; each
 * layer pass gets the median and standard deviation of its `reps` times.
 * Timing layers inside whole steps (not one layer in a loop) keeps caches
 * as cold or warm as training has them.  A pass the executor never runs
 * (input gradient of a layer with no parameters before it, weight gradient
 * of a layer without weights) is 0 s.
 *
 * The SGD update (momentum and weight decay, one streaming pass over each
 * tensor's parameters, gradients and velocities) is timed as a whole after
 * each clocked step; each layer gets the median's share in proportion to
 * its parameter count, which is what a memory-bound pass costs.  It does
 * not depend on the batch size.
 */
#ifndef CL_EXEC_PROFILE_H
#define CL_EXEC_PROFILE_H

#include <stdint.h>

#include "models/model.h"
#include "profiles/profile.h"
#include "base/status.h"

/* One layer at one batch size: medians and standard deviations, seconds for
 * the whole batch. */
typedef struct exec_layer_time {
    double fwd_s, bwd_in_s, bwd_w_s;        /* medians */
    double fwd_sd, bwd_in_sd, bwd_w_sd;     /* standard deviations */
    double fwd_min, bwd_in_min, bwd_w_min;  /* fastest runs */
    double update_s; /* its share of the SGD update's median (by parameter count) */
} exec_layer_time;

/* A sequential training step timed without the clocks: medians of its
 * forward + input-gradient + weight-gradient part, of the SGD update alone,
 * and of the full step (their sum, per step). */
typedef struct exec_step_time {
    double fbw_s, update_s, step_s;
    double fbw_min; /* fastest forward + backward */
} exec_step_time;

/* Time every layer of m at batch size `batch`; t has m->n_layers entries.
 * With st, each clocked step is followed by one without clocks on the same
 * net, timed into *st: the two see the same machine load, so comparing the
 * layer sum with st->fbw_s tests the method, not the neighbours (cleave
 * bench exec).  CL_EINPUT if the executor cannot run m. */
int exec_profile_batch(const model *m, const char *file, int batch, int warmup, int reps,
                       uint64_t seed, exec_layer_time *t, exec_step_time *st, cl_err *e);

/* The conv2d and linear layers' passes at batch size `batch` measured on
 * their own: after two training steps on a random batch fill the operands,
 * each pass the step runs is called back to back, `warmup` untimed then `reps` timed
 * (exec_net_run_pass); t gets medians, spreads and fastest runs (0 for
 * other layers, and update_s 0).  This is a kernel's own speed, with its operands and code as its
 * previous repetition leaves them; exec_profile_batch's in-step times add
 * what the rest of a step costs it (cold code and operands, the vector
 * units' wake-up), and only they predict a step.  CL_EINPUT as
 * exec_profile_batch. */
int exec_profile_isolated(const model *m, const char *file, int batch, int warmup, int reps,
                          uint64_t seed, exec_layer_time *t, cl_err *e);

/* A profile of m (source "measured", device "cpu-core") at the given batch
 * sizes (strictly increasing, at most PROF_MAX_POINTS); act_bytes are the
 * layer's output bytes per sample, stash_bytes what the executor keeps per
 * sample for its backward pass (exec_net_layer_bytes), param_bytes 4 per
 * parameter, update_s the layer's update share (the mean over the batch
 * sizes' medians).  The caller frees *p with prof_free. */
int exec_profile(const model *m, const char *file, const int64_t *batches, int n_batches,
                 int warmup, int reps, uint64_t seed, prof *p, cl_err *e);

/* exec_profile of rank 0's share of m split `tensor` ways (1 ..
 * EXEC_TP_SOLO_MAX), its collectives left out (exec_net_create_solo):
 * every layer's times and stash bytes are one rank's; parameter bytes stay
 * the model's (what prof_check_model checks the profile against).  The
 * collectives are priced apart (bench/validate.c, as the planner does). */
int exec_profile_tp(const model *m, const char *file, const int64_t *batches, int n_batches,
                    int warmup, int reps, uint64_t seed, int tensor, prof *p, cl_err *e);
/* exec_profile_tp with the nets built with exec_net flags `flags`
 * (recomputation, net.h): an attention or mlp layer's input gradient then
 * includes what it recomputes (the profile's steps run the combined
 * backward, as full recomputation requires), its stash bytes what it
 * keeps. */
int exec_profile_net(const model *m, const char *file, const int64_t *batches, int n_batches,
                     int warmup, int reps, uint64_t seed, int tensor, int flags, prof *p,
                     cl_err *e);

/* `cleave bench exec` (bench/bench_exec.c): writes <outdir>/exec.csv. */
int exec_bench(const char *outdir, int quick);

/* The CPU's model name from /proc/cpuinfo ("cpu" when unknown). */
void exec_cpu_name(char *buf, size_t cap);

#endif
