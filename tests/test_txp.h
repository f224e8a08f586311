/* test_txp.h - shared helpers of the exec_txp and exec_txr suites
 * (test_txp_ref.c): the two-stage ViT plan with tensor parallelism, short
 * deterministic runs of it, and the bound suite exec_tp puts on a t > 1
 * run's distance from the same run at t = 1. */
#ifndef CL_TEST_TXP_H
#define CL_TEST_TXP_H

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

/* Write the two-stage plan with tensor t (and recompute, NULL: none) to
 * path; replicas > 1: its first stage replicated on that many cores, the
 * second on one more (the cluster grown to replicas + 1 cores). */
void txp_write_plan(const char *path, int t, const char *recompute, int replicas);

#endif
