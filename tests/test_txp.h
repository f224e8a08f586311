/* test_txp.h - shared helpers of the exec_txp and exec_txr suites
 * (test_txp_ref.c): the two-stage ViT plan with tensor parallelism, short
 * deterministic runs of it, the bound suite exec_tp puts on a t > 1 run's
 * distance from the same run at t = 1, and the command's MPI refusal and
 * kill-and-resume. */
#ifndef CL_TEST_TXP_H
#define CL_TEST_TXP_H

#include "bench/validate.h"
#include "core/schedule.h"
#include "exec/run/pipeline.h"

#define TXP_VIT_PLAN "bench/results/pipe/fmnist-vit-2stage-1f1b.json"

/* The plan at path (TXP_VIT_PLAN, or one txp_write_plan wrote) with
 * schedule kind, m microbatches of mb, tensor t; nonzero (after CU_FAIL)
 * when it does not load. */
int txp_load_plan(plan *p, const char *path, sched_kind kind, int m, int mb, int t);
static inline int txp_vit_plan(plan *p, sched_kind kind, int m, int mb, int t)
{
    return txp_load_plan(p, TXP_VIT_PLAN, kind, m, mb, t);
}

/* Options of a short deterministic run of `iters` iterations over data d:
 * the pipe suites' (tp_opts), with the cosine schedule so the lr changes
 * every step. */
void txp_opts(exec_pipe_opts *o, const exec_data *d, int iters);

/* exec_pipe_run, asserting it succeeds (its message on stderr if not). */
int txp_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r);

/* The largest parameter difference of a from ref as a fraction of the
 * reordered-sum bound after `updates` updates (test_txp_ref.c explains
 * it); INFINITY when the layouts differ. */
double txp_vs_bound(const exec_pipe_result *a, const exec_pipe_result *ref, int updates);

/* rt (tensor t > 1) against r1 (the same plan and options at t = 1),
 * printed under label: within the bound (txp_vs_bound), the same workers
 * and replicas, the same peak stash and weight versions (rank 0's), and
 * each worker's weights a shard (fewer bytes than t = 1's). */
void txp_check_vs_t1(const exec_pipe_result *rt, const exec_pipe_result *r1, int updates,
                     const char *label);

/* bench/validate.c's prediction (pred) and run (meas) of p over 4
 * iterations on threads, costed already with extras x, and their
 * comparison (rep); nonzero (after a failed assertion, nothing to free)
 * when one fails. */
int txp_val_run(const plan *p, const exec_val_extra *x, const char *file, sim_result *pred,
                exec_pipe_result *meas, exec_val_report *rep);

/* Write the two-stage plan with tensor t (and recompute, NULL: none) to
 * path; replicas > 1: its first stage replicated on that many cores, the
 * second on one more (the cluster grown to replicas + 1 cores). */
void txp_write_plan(const char *path, int t, const char *recompute, int replicas);

/* `cleave train --plan pl --backend mpi`: exit 2, one line on stderr,
 * nothing on stdout. */
void txp_mpi_refused(const char *pl);

/* `cleave train --plan pl` on 256 synthetic samples for 2 epochs (8
 * iterations), killed (SIGKILL) after iteration 5 with a checkpoint every
 * iteration and resumed, writes the uninterrupted run's weights file byte
 * for byte; files in dir (full.w, resumed.w, c.ckpt). */
void txp_kill_resume(const char *pl, const char *dir);

#endif
