/* test_exec_txr.c - replicated stages with tensor parallelism on threads
 * (exec/run/pipe_worker.c's ring over every rank's shard, pipe_tp.h):
 * `cleave train --plan` with a plan whose stage has r > 1 replicas and
 * tensor t > 1, each replica a tensor group of its own, rank k of each
 * reducing its gradient shard with rank k of the others (Megatron-LM's
 * data-parallel groups, orthogonal to the tensor groups).
 *
 * The two-stage ViT of suite exec_txp with its first stage on r cores, on
 * synthetic data:
 * - t = 2 equals the same plan at t = 1 within the bound suite exec_tp puts
 *   on the reordered row-parallel sums, for every schedule that runs
 *   replicated stages (with r = 2 the ring adds two terms, which commute,
 *   so the data-parallel sums add no reordering; r = 3 reorders three
 *   terms, far inside the bound's 130);
 * - the replicas end with the same parameters and momentum, every rank's
 *   shard (the checkpoint holds each worker's stage, its shards gathered):
 *   a ring over rank 0's shard alone would leave rank 1's apart;
 * - bench/validate.c's predicted peak memory per worker is the run's (up
 *   to a message buffered or not, a matter of timing);
 * - the command on the committed plan of the whole ViT on 2 replicas x
 *   t = 2: its header, the MPI backend equal to threads byte for byte, a run killed and resumed from
 *   its checkpoint equal to the uninterrupted one byte for byte.
 * One microbatch per replica does not give bits equal to anything here:
 * even at t = 1 the ring's g_a + g_b differs from one worker accumulating
 * the same two microbatches (its backward adds into the gradient block
 * inside the GEMM and the bias loops: suite pipe_sync, test_replicated).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/validate.h"
#include "exec/ckpt/checkpoint.h"
#include "exec/nn/data.h"
#include "test.h"
#include "test_vit.h"

enum { K_IT = 3, M = 4, MB = 4 }; /* iterations, microbatches of MB samples */

/* The replicated plan (stage 0 on r cores) written to a scratch folder and
 * loaded with kind, M microbatches of MB, tensor t; nonzero after CU_FAIL. */
static int rep_plan(plan *p, const char *path, int r, sched_kind kind, int t)
{
    tv_write_plan(path, NULL, 2, NULL, r);
    return tv_load_plan(p, path, kind, M, MB, t, 0);
}

/* ------------------------------------------------------- against t = 1 -- */

static void vs_t1(int r, const sched_kind *kinds, size_t n_kinds)
{
    char path[512];
    char *dir = test_scratch(sizeof path, "rep.json", path, NULL);
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * M * MB, 1, 28, 28, 10, 5, 0);
    for (size_t k = 0; k < n_kinds; k++) {
        plan p;
        if (rep_plan(&p, path, r, kinds[k], 1)) break;
        CU_ASSERT_EQUAL(p.stages[0].n_replicas, r);
        exec_pipe_opts o;
        tv_opts(&o, &d, K_IT);
        exec_pipe_result r1, rt;
        if (!tv_run(&p, &o, &r1)) {
            p.tensor = 2;
            if (!tv_run(&p, &o, &rt)) {
                /* stage 1 (unreplicated) updates after every microbatch
                 * under the asynchronous kinds: the most of any stage */
                const int updates = sched_is_async(kinds[k]) ? K_IT * M : K_IT;
                char label[64];
                snprintf(label, sizeof label, "%d replicas, %s, t = 2", r, sched_kind_name(kinds[k]));
                CU_ASSERT_EQUAL(rt.n_workers, r + 1);
                tv_check_vs_t1(&rt, &r1, updates, label);
            }
            exec_pipe_result_free(&rt);
        }
        exec_pipe_result_free(&r1);
        plan_free(&p);
    }
    exec_data_free(&d);
    test_rmtree(dir);
}

static void test_txr_vs_t1(void)
{
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_INTERLEAVED,
                                SCHED_FBP, SCHED_PIPEDREAM};
    vs_t1(2, kinds, sizeof kinds / sizeof *kinds);
    const sched_kind three[] = {SCHED_1F1B};
    vs_t1(3, three, 1);
}

/* ------------------------------------------- the replicas stay together -- */

/* Section `name` of c is the same bytes for workers 0 .. r-1 (stage 0). */
static int replicas_equal(const exec_ckpt *c, int r, const char *what)
{
    char name[64];
    size_t n0, n;
    snprintf(name, sizeof name, "w0.s0.%s", what);
    const void *a = exec_ckpt_find(c, name, &n0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    int same = 1;
    for (int q = 1; q < r; q++) {
        snprintf(name, sizeof name, "w%d.s0.%s", q, what);
        const void *b = exec_ckpt_find(c, name, &n);
        same &= b && n == n0 && memcmp(a, b, n) == 0;
    }
    return same;
}

/* The run's final checkpoint holds every worker's stage, its shards
 * gathered: the replicas' parameters and momentum are the same bytes, and
 * are trained (not the seed's), for r = 2 and 3. */
static void test_txr_replicas_agree(void)
{
    char path[512], ck[512];
    char *dir = test_scratch(sizeof path, "rep.json", path, "c.ckpt", ck, NULL);
    exec_data d = {0};
    exec_data_synthetic(&d, K_IT * M * MB, 1, 28, 28, 10, 5, 0);
    for (int r = 2; r <= 3; r++) {
        plan p;
        if (rep_plan(&p, path, r, SCHED_1F1B, 2)) break;
        exec_pipe_opts o;
        tv_opts(&o, &d, K_IT);
        o.ckpt_path = ck;
        exec_pipe_result res;
        if (!tv_run(&p, &o, &res)) {
            exec_ckpt *c = NULL;
            cl_err e = {0};
            CU_ASSERT_EQUAL_FATAL(exec_ckpt_read(&c, ck, &e), CL_OK);
            int params = replicas_equal(c, r, "params"), vel = replicas_equal(c, r, "velocity");
            printf("\n    %d replicas: parameters %s, momentum %s ", r, params ? "equal" : "DIFFER",
                   vel ? "equal" : "DIFFER");
            CU_ASSERT(params);
            CU_ASSERT(vel);
            /* trained: stage 0's parameters moved from the seed's */
            exec_net *start;
            CU_ASSERT_EQUAL_FATAL(exec_net_create(&start, &p.model, 0, p.stages[0].last + 1, 1, o.seed, 0, "", &e), CL_OK);
            int64_t n;
            const float *w0 = exec_net_params(start, &n);
            size_t len;
            const void *got = exec_ckpt_find(c, "w0.s0.params", &len);
            CU_ASSERT(got && len == (size_t)n * sizeof *w0 && memcmp(got, w0, len) != 0);
            exec_net_destroy(start);
            exec_ckpt_free(c);
        }
        exec_pipe_result_free(&res);
        plan_free(&p);
    }
    exec_data_free(&d);
    test_rmtree(dir);
}

/* ---------------------------------------------------------- validation -- */

/* bench/validate.c on the replicated t = 2 plan (gpipe, 2 microbatches per
 * replica): it runs, and the predicted peak memory per worker is the
 * run's in weights, gradients and momentum (rank 0's shard) and stash;
 * the buffers may differ by whole boundary messages, as whether a receiver
 * has taken the last activation (or gradient) sent when the sender peaks
 * depends on the timing, simulated and real. */
static void test_txr_validate(void)
{
    char path[512];
    char *dir = test_scratch(sizeof path, "rep.json", path, NULL);
    plan p;
    if (rep_plan(&p, path, 2, SCHED_GPIPE, 2)) {
        test_rmtree(dir);
        return;
    }
    prof pf;
    exec_val_extra x[2];
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_val_check(&p, path, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_val_profile(&p, 3, &pf, path, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, EXEC_VAL_CTX_REPLAY, x, path, &e), CL_OK);
    for (int s = 0; s < 2; s++) CU_ASSERT(x[s].ar_ctx_s > 0); /* the crew's all-reduces */
    sim_result pred;
    exec_pipe_result meas;
    exec_val_report rep;
    if (tv_val_run(&p, x, path, &pred, &meas, &rep)) {
        prof_free(&pf);
        plan_free(&p);
        test_rmtree(dir);
        CU_FAIL_FATAL("no prediction or run to compare");
    }
    CU_ASSERT_EQUAL_FATAL(rep.n_workers, 3);
    const double msg = (double)MB * (double)p.model.layers[p.stages[0].last].out_elems * 4;
    for (int w = 0; w < rep.n_workers; w++) {
        const sim_mem *a = &pred.dev[w].at_peak, *b = &meas.w[w].at_peak;
        const double k = (b->buffers - a->buffers) / msg;
        printf("\n    worker %d: peak memory predicted %.0f, measured %.0f bytes (%+g messages) ", w,
               rep.w[w].peak_mem.predicted, rep.w[w].peak_mem.measured, k);
        CU_ASSERT_EQUAL(b->weights, p.stages[w < 2 ? 0 : 1].param_bytes);
        CU_ASSERT_EQUAL(a->weights, b->weights);
        CU_ASSERT_EQUAL(a->grads, b->grads);
        CU_ASSERT_EQUAL(a->optim, b->optim);
        CU_ASSERT_EQUAL(a->stash, b->stash);
        CU_ASSERT(k == floor(k) && fabs(k) <= M / 2); /* at most the 2 a replica sends */
        CU_ASSERT_DOUBLE_EQUAL(rep.w[w].peak_mem.measured - rep.w[w].peak_mem.predicted, k * msg, 1e-6);
    }
    exec_val_report_free(&rep);
    exec_pipe_result_free(&meas);
    sim_result_free(&pred);
    prof_free(&pf);
    plan_free(&p);
    test_rmtree(dir);
}

/* ------------------------------------------------------------ command -- */

/* The committed plan of docs/executor-vit.md: the whole ViT on 2 replicas
 * x t = 2 (4 threads, as suite exec_txp's 2 x 2 plan, so the runs stay
 * short under the sanitizers). */
#define DP2_T2 "bench/results/pipe/fmnist-vit-dp2-gpipe-t2.json"

static void test_txr_cli(void)
{
    char args[2048];
    const char *pl = DP2_T2;
    char *dir = test_tmpdir();
    char *out, *err;
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 2", pl);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    char head[700];
    snprintf(head, sizeof head, "train fmnist-vit with %s: 1 stages on 2 workers x 2 tensor-parallel threads (threads), schedule gpipe, batch 64 = 4 x 16\n", pl);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, head));
    free(out);
    free(err);
    tv_mpi_same(pl, 2, 2, 1, dir);
    tv_mpi_ckpt(pl, 2, 2, dir);
    /* killed and resumed: both replicas' ranks restored from their own
     * sections */
    tv_kill_resume(pl, dir);
    test_rmtree(dir);
}

TEST_SUITE(exec_txr)
{
    test_add_suite("exec_txr");
    test_add("r = 2 and 3 replicas x t = 2: t = 1 within the reordered sums' bound, every schedule",
             test_txr_vs_t1);
    test_add("the replicas end with the same parameters and momentum, every rank's shard",
             test_txr_replicas_agree);
    test_add("validate: predicted peak memory per worker is the run's, up to a buffered message", test_txr_validate);
    test_add("cleave train --plan: the header, MPI equal to threads, kill and resume byte for byte",
             test_txr_cli);
}
