/* test_vit.h - shared helpers of the suites that run the two-stage ViT
 * plan (bench/results/pipe/fmnist-vit-2stage-1f1b.json) pipelined:
 * exec_txp (tensor parallelism) and exec_recomp (recomputation). */
#ifndef CL_TEST_VIT_H
#define CL_TEST_VIT_H

#include "bench/validate.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/run/pipeline.h"

#define TV_PLAN "bench/results/pipe/fmnist-vit-2stage-1f1b.json"

/* The plan with schedule kind, m microbatches of mb, tensor t and
 * recompute r (a tfm_recomp); CU_FAIL and nonzero when it does not load. */
int tv_plan(plan *p, sched_kind kind, int m, int mb, int t, int r);

/* A short deterministic run over d (the pipe suites' tp_opts, the cosine
 * lr so it changes every step), no evaluation. */
void tv_opts(exec_pipe_opts *o, const exec_data *d, int iterations);

/* exec_pipe_run, asserting it succeeds (the message on stderr if not). */
int tv_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r);

/* The sequential trainer (train.h) on p's model for one epoch of d in
 * batches of mb with o's settings, tensor t and recomputation r: the
 * whole net it ends with (caller destroys). */
exec_net *tv_trainer(const plan *p, const exec_pipe_opts *o, const exec_data *d, int mb, int t,
                     int r);

/* Whether r's parameters are ref's: the same tensors, names and bits. */
int tv_same_as(const exec_pipe_result *r, const exec_net *ref);

/* bench/validate.c's steps 3-5 on p with costs x: 4 iterations simulated
 * (*pred) and run on threads (*meas), compared into *rep (the caller frees
 * all three); a failure ends the test. */
void tv_validate(const plan *p, const exec_val_extra *x, sim_result *pred,
                 exec_pipe_result *meas, exec_val_report *rep);

/* Write the plan file to path with schedule `kind` (NULL: the plan's),
 * "tensor" t (0: none written) and "recompute" r (NULL: none). */
void tv_write_plan(const char *path, const char *kind, int t, const char *r);

#endif
