/* test_pipe.h - shared helpers of the pipe_* suites (test_pipe_ref.c): the
 * fixtures, a synthetic data set, and the references the pipelined runner
 * is checked against, written independently of it on the executor's
 * stage API (exec/nn/net.h): sequential training with gradient accumulation
 * over the same microbatches, and a one-microbatch-at-a-time replay of the
 * asynchronous schedules with explicit weight versions. */
#ifndef CL_TEST_PIPE_H
#define CL_TEST_PIPE_H

#include <stdint.h>

#include "exec/run/pipeline.h"

/* tests/data/pipe/<name>; CU_FAIL and returns nonzero when it does not load. */
int tp_plan(const char *name, plan *p);

/* 256 training and 64 test samples of the tiny model's shape (1x6x6, 4
 * classes), standardised; free with exec_data_free. */
void tp_data(exec_data *train, exec_data *test);

/* Options for a short deterministic run: constant lr 0.05, momentum 0.9,
 * weight decay 1e-3, seed 7, keep_params, stall 60 s. */
void tp_opts(exec_pipe_opts *o, const exec_data *train, const char *file, int iterations);

/* What most pipe tests start from: a fixture plan, the data set, options. */
typedef struct tp_fixture {
    plan p;
    exec_data train, test;
    exec_pipe_opts o;
} tp_fixture;

/* tp_plan(name), tp_data and tp_opts(file, iterations) into f; nonzero,
 * with nothing to free, when the plan does not load. */
int tp_setup(tp_fixture *f, const char *name, const char *file, int iterations);
void tp_free(tp_fixture *f);

/* exec_pipe_run(p, o, r), asserting (fatally) that it succeeds; the error
 * message on stderr when it does not. */
void tp_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r);

/* Sequential training of p's whole model for `iters` iterations: each
 * iteration the plan's batch in the seeded epoch order, split into its
 * microbatches, gradients accumulated with loss scale 1 / batch, one SGD
 * step.  *params (caller frees) holds every tensor unpadded in model order;
 * iter_loss[k] (may be NULL) the mean loss of iteration k. */
void tp_ref_sync(const plan *p, const exec_pipe_opts *o, int iters, float **params,
                 int64_t *n_params, double *iter_loss);

/* The asynchronous 1F1B stream on an unreplicated plan, replayed one
 * microbatch at a time: on stage s of p, microbatch g's forward uses weight
 * version max(0, g - (p - s) + 1) (the updates done before it in the 1F1B
 * order), its backward the same version when `stash`, else the current one
 * (g); each backward is followed by an SGD step of that stage with weight
 * decay / m.  G = iters x m microbatches. */
void tp_ref_async(const plan *p, const exec_pipe_opts *o, int iters, int stash, float **params,
                  int64_t *n_params);

/* Largest over tensors of max |a - b| / max |b| (r's layout; a tensor whose
 * values stay below 1e-3 of the model's largest is measured against that
 * instead); 1e30 when the sizes differ. */
double tp_rel_err(const exec_pipe_result *r, const float *ref, int64_t n_ref);

/* Run the cleave binary under mpirun with np ranks on loopback only
 * (--oversubscribe, btl self,vader, root allowed): exit status, output
 * (caller frees).  CU_FAIL with a message when mpirun is missing.  np 0:
 * the binary alone (a singleton MPI world) in the same environment. */
int tp_mpirun(int np, const char *args, char **out, char **err);

#endif
