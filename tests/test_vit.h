/* test_vit.h - shared helpers of the suites that run the two-stage ViT
 * plan (bench/results/pipe/fmnist-vit-2stage-1f1b.json) pipelined:
 * exec_txp (tensor parallelism), exec_txr (replicated stages with tensor
 * parallelism) and exec_recomp (recomputation): the plan, short
 * deterministic runs of it, the bound suite exec_tp puts on a t > 1 run's
 * distance from the same run at t = 1, bench/validate.c's steps, and the
 * command's MPI refusal and kill-and-resume. */
#ifndef CL_TEST_VIT_H
#define CL_TEST_VIT_H

#include "bench/validate.h"
#include "core/schedule.h"
#include "exec/nn/data.h"
#include "exec/nn/net.h"
#include "exec/run/pipeline.h"

#define TV_PLAN "bench/results/pipe/fmnist-vit-2stage-1f1b.json"

/* The plan at path (TV_PLAN, or one tv_write_plan wrote) with schedule
 * kind, m microbatches of mb, tensor t and recompute r (a tfm_recomp);
 * CU_FAIL and nonzero when it does not load. */
int tv_load_plan(plan *p, const char *path, sched_kind kind, int m, int mb, int t, int r);
static inline int tv_plan(plan *p, sched_kind kind, int m, int mb, int t, int r)
{
    return tv_load_plan(p, TV_PLAN, kind, m, mb, t, r);
}

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

/* The largest parameter difference of a from ref as a fraction of the
 * reordered-sum bound after `updates` updates (test_vit.c explains it);
 * INFINITY when the layouts differ. */
double tv_vs_bound(const exec_pipe_result *a, const exec_pipe_result *ref, int updates);

/* rt (tensor t > 1) against r1 (the same plan and options at t = 1),
 * printed under label: within the bound (tv_vs_bound), the same workers
 * and replicas, the same peak stash and weight versions (rank 0's), and
 * each worker's weights a shard (fewer bytes than t = 1's). */
void tv_check_vs_t1(const exec_pipe_result *rt, const exec_pipe_result *r1, int updates,
                    const char *label);

/* bench/validate.c's prediction (pred) and run (meas) of p over 4
 * iterations on threads, costed already with extras x, and their
 * comparison (rep); nonzero (after a failed assertion, nothing to free)
 * when one fails. */
int tv_val_run(const plan *p, const exec_val_extra *x, const char *file, sim_result *pred,
               exec_pipe_result *meas, exec_val_report *rep);

/* tv_val_run on TV_PLAN; a failure ends the test (else the caller frees
 * all three). */
void tv_validate(const plan *p, const exec_val_extra *x, sim_result *pred,
                 exec_pipe_result *meas, exec_val_report *rep);

/* Write the plan file to path with schedule `kind` (NULL: the plan's),
 * "tensor" t (0: none written) and "recompute" r (NULL: none); replicas
 * > 1: its first stage replicated on that many cores, the second on one
 * more (the cluster grown to replicas + 1 cores). */
void tv_write_plan(const char *path, const char *kind, int t, const char *r, int replicas);
/* Copy the plan file src to dst (may be src) with "sequence_parallel": true
 * added. */
void tv_write_seq_par(const char *src, const char *dst);

/* `cleave train --plan pl --backend mpi` writes the weights the threads
 * backend writes, byte for byte, after 4 iterations on 256 synthetic
 * samples, for a plan of `workers` workers and tensor t: with each tensor
 * rank an MPI process (--tensor-over mpi, workers x t ranks; with t >= 3 the
 * bytes depend on the all-reduce's summation order), and when crew is set
 * also with one rank per worker and its tensor ranks a crew of threads
 * (workers ranks).  Files in dir: threads.w, mpi.w, mpi-t.w
 * (test_vit_mpi.c). */
void tv_mpi_same(const char *pl, int workers, int t, int crew, const char *dir);
/* --tensor-over mpi refused with one line each: a world of one rank per
 * worker (naming the size it needs), without --backend mpi. */
void tv_mpi_tensor_refusals(const char *pl, int workers, int t);
/* Checkpoints with tensor ranks as MPI processes, for a plan of 4
 * iterations an epoch (batch 64 of 256 samples) on `workers` workers and
 * tensor t: killed at iteration 5 of 2 epochs (world rank 0 stopped there,
 * then the job killed), the checkpoint holds what the threads crew's does
 * at iteration 5, bytes equal but for the epoch timings; resumed with the
 * tensor ranks as processes (from either checkpoint) or as threads (from
 * the MPI one), the run ends with the uninterrupted run's weights.  Files
 * in dir: ck-*. */
void tv_mpi_ckpt(const char *pl, int workers, int t, const char *dir);

/* `cleave train --plan pl` on 256 synthetic samples for 2 epochs (8
 * iterations), killed (SIGKILL) after iteration 5 with a checkpoint every
 * iteration and resumed, writes the uninterrupted run's weights file byte
 * for byte; files in dir (full.w, resumed.w, c.ckpt). */
void tv_kill_resume(const char *pl, const char *dir);

#endif
