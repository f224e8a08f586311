/* test_pipe_async.c - the asynchronous schedules: PipeDream's backward
 * passes use the weight version their forward used (stashing), FBP's use
 * the current weights with one version alive; both against a replay of the
 * 1F1B stream one microbatch at a time with explicit weight versions
 * (test_pipe_ref.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/run/pipe_hooks.h"
#include "test.h"
#include "test_pipe.h"

static int run(const char *name, int iters, int stash_off, exec_pipe_result *r, float **ref_stash,
               float **ref_cur, int64_t *n_ref)
{
    plan p;
    if (tp_plan(name, &p)) return 1;
    exec_data tr, te;
    tp_data(&tr, &te);
    exec_pipe_opts o;
    tp_opts(&o, &tr, name, iters);
    exec_pipe_hooks h = {.stash_off = stash_off};
    cl_err e = {0};
    int rc = exec_pipe_run_hooked(&p, &o, &h, r, &e);
    if (rc) fprintf(stderr, "\n%s: %s\n", name, e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    tp_ref_async(&p, &o, iters, 1, ref_stash, n_ref);
    tp_ref_async(&p, &o, iters, 0, ref_cur, n_ref);
    exec_data_free(&tr);
    exec_data_free(&te);
    plan_free(&p);
    return rc;
}

/* PipeDream equals the stashing replay; the same run with stashing off
 * does not (it equals the replay with current weights): so the stashed
 * versions are really used.  On 3 stages over 3 iterations of 4
 * microbatches, stages 0 and 1 run backwards with old versions. */
static void test_pipedream_stashes(void)
{
    exec_pipe_result r;
    float *st, *cur;
    int64_t n;
    if (run("tiny3-pipedream.json", 3, 0, &r, &st, &cur, &n)) return;
    double e_st = tp_rel_err(&r, st, n), e_cur = tp_rel_err(&r, cur, n);
    CU_ASSERT(e_st <= 1e-6);
    CU_ASSERT(e_cur > 1e-4); /* the two references differ: the test can tell */
    CU_ASSERT_EQUAL(r.w[0].peak_versions, 3);
    CU_ASSERT_EQUAL(r.w[1].peak_versions, 2);
    CU_ASSERT_EQUAL(r.w[2].peak_versions, 1);
    CU_ASSERT_EQUAL(r.w[0].at_peak.versions > 0, 1);
    exec_pipe_result_free(&r);
    free(st);
    free(cur);

    if (run("tiny3-pipedream.json", 3, 1, &r, &st, &cur, &n)) return;
    CU_ASSERT(tp_rel_err(&r, st, n) > 1e-4); /* without stashing: wrong */
    CU_ASSERT(tp_rel_err(&r, cur, n) <= 1e-6);
    for (int w = 0; w < r.n_workers; w++) CU_ASSERT_EQUAL(r.w[w].peak_versions, 1);
    exec_pipe_result_free(&r);
    free(st);
    free(cur);
}

/* FBP: updates right after each backward with the current weights (stale
 * gradients), one weight version, no extra version memory. */
static void test_fbp_one_version(void)
{
    exec_pipe_result r;
    float *st, *cur;
    int64_t n;
    if (run("tiny3-fbp.json", 3, 0, &r, &st, &cur, &n)) return;
    CU_ASSERT(tp_rel_err(&r, cur, n) <= 1e-6);
    CU_ASSERT(tp_rel_err(&r, st, n) > 1e-4);
    for (int w = 0; w < r.n_workers; w++) {
        CU_ASSERT_EQUAL(r.w[w].peak_versions, 1);
        CU_ASSERT_EQUAL(r.w[w].at_peak.versions, 0);
    }
    /* p - s microbatches in flight on stage s: the stream never flushes */
    CU_ASSERT_EQUAL(r.w[0].peak_stash, 3);
    CU_ASSERT_EQUAL(r.w[2].peak_stash, 1);
    exec_pipe_result_free(&r);
    free(st);
    free(cur);
}

/* A replicated stage under FBP: its replicas all-reduce after every round
 * of two microbatches and stay identical; training still lowers the loss. */
static void test_fbp_replicated(void)
{
    tp_fixture f;
    if (tp_setup(&f, "tiny-rep-fbp.json", "rep", 32)) return;
    exec_pipe_result r;
    tp_run(&f.p, &f.o, &r);
    double first = (r.iter_loss[0] + r.iter_loss[1]) / 2,
           last = (r.iter_loss[30] + r.iter_loss[31]) / 2;
    CU_ASSERT(last < 0.8 * first);
    CU_ASSERT_EQUAL(r.w[1].peak_versions, 1);
    exec_pipe_result_free(&r);
    tp_free(&f);
}

TEST_SUITE(pipe_async)
{
    test_add_suite("pipe_async");
    test_add("pipedream: backward uses the stashed version (fails without stashing)", test_pipedream_stashes);
    test_add("fbp: current weights, one version", test_fbp_one_version);
    test_add("fbp: replicated stage trains", test_fbp_replicated);
}
