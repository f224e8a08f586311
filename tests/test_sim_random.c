/* test_sim_random.c - the simulator on random plans and on the regression
 * plan of ../shared/data/regress/ (its README): every schedule kind,
 * replicated stages, devices over several nodes, communication on.  Each
 * run has an event budget counted from its op lists (tests/fuzz/gen.h), so
 * a run without end fails instead of hanging, and its results are checked
 * against the op lists (bytes sent, compute per device) and against the
 * same run without communication.  The fuzz target `sim` runs the same
 * decoder on libFuzzer's inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plan.h"
#include "tests/fuzz/gen.h"
#include "test.h"

/* The 512-device plan whose ring all-reduces resent forever (sim_arrive
 * wrote through a transfer pointer the next ring step's allocation had
 * moved): it must end within the bound, with every byte accounted for. */
static void test_ring_realloc_plan(void)
{
    char buf[256];
    const char *path = test_shared("regress/sim-ring-realloc-plan.json", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(path);
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, path, &e), CL_OK);
    CU_ASSERT(p.stages[0].n_replicas == 32 && p.cluster.n_nodes > 1);
    gen_run run = {.kind = p.schedule, .micro = p.n_micro, .iters = 1, .comm_off = 0};
    const char *broken = NULL;
    sim_result r;
    int rc = gen_sim_check(&p, &run, &r, &broken, &e);
    CU_ASSERT_EQUAL(rc, CL_OK);
    CU_ASSERT_PTR_NULL(broken);
    if (rc || broken) fprintf(stderr, "\n  %s\n", broken ? broken : e.msg);
    if (!rc) CU_ASSERT(r.sent_bytes[CLUSTER_INTRA] > 0 && r.sent_bytes[CLUSTER_INTER] > 0);
    sim_result_free(&r);
    plan_free(&p);
    /* and through the command line, within an event budget */
    char args[512], *out, *err;
    snprintf(args, sizeof args, "sim %s --max-events 1000000", path);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    free(out);
    free(err);
}

/* Asynchronous kinds with replicated stages: a replica runs m / r of an
 * iteration's microbatches, so the pipeline fills in ceil(p r / m)
 * iterations.  With m = r every device does one forward and one backward
 * per iteration; once full, stage 0 (the only one that takes time here)
 * is busy all the time, so the steady iteration is exactly its F + B + W.  (The window used to start
 * after ceil(p / m) iterations, still filling: iteration times far below
 * any device's work and bubbles of -64,000 %.) */
static void test_async_replicas_steady(void)
{
    const sched_kind kinds[] = {SCHED_PIPEDREAM, SCHED_FBP};
    for (int k = 0; k < 2; k++)
        for (int p = 2; p <= 4; p += 2)
            for (int r = 4; r <= 16; r *= 4) {
                plan pl;
                cl_err e = {0};
                sim_uniform u = {.stages = p, .replicas = r, .micro = r, .schedule = kinds[k],
                                 .fwd_s = 1e-3, .bwd_in_s = 2e-3, .bwd_w_s = 0.5e-3,
                                 .intra = {1e9, 0}, .inter = {1e9, 0}};
                CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&pl, &u, &e), CL_OK);
                for (int s = 1; s < p; s++) /* only stage 0 works: the rest fill at once */
                    pl.stages[s].fwd_s = pl.stages[s].bwd_in_s = pl.stages[s].bwd_w_s = 0;
                gen_run run = {.kind = kinds[k], .micro = r, .comm_off = 1,
                               .iters = sched_default_iters(kinds[k], sched_fill_depth(&pl), r)};
                sim_result res;
                const char *broken = NULL;
                CU_ASSERT_EQUAL_FATAL(gen_sim_check(&pl, &run, &res, &broken, &e), CL_OK);
                CU_ASSERT_PTR_NULL(broken);
                /* stage 0's devices busy, the others (no work) idle */
                int ok = test_rel(res.iteration_s, 3.5e-3) < 1e-9 && fabs(res.bubble - (1 - 1.0 / p)) < 1e-9;
                CU_ASSERT(ok);
                if (!ok)
                    fprintf(stderr, "\n  %s p %d r %d: iteration %.17g s (want 0.0035), bubble %g\n",
                            sched_kind_name(kinds[k]), p, r, res.iteration_s, res.bubble);
                sim_result_free(&res);
                sim_uniform_free(&pl);
            }
}

/* xorshift64*: the bytes a fuzz input would hold */
static uint64_t next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 0x2545F4914F6CDD1DULL;
}

static void test_random_plans(void)
{
    enum { PLANS = 600, BYTES = 256 };
    int kinds[SCHED_COUNT] = {0}, replicated = 0, nodes = 0, comm = 0, zero = 0, failures = 0;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < PLANS; i++) {
        uint8_t bytes[BYTES];
        for (int k = 0; k < BYTES; k++) bytes[k] = (uint8_t)(next(&x) >> 56);
        gen g = {bytes, BYTES, 0};
        plan p;
        gen_run run;
        gen_plan(&g, &p, &run);
        p.zero = i % 3; /* ZeRO 0, 1, 2 in turn (outside the bytes: the plans are as before) */
        cl_err e = {0};
        const char *broken = NULL;
        int rc = gen_sim_check(&p, &run, NULL, &broken, &e);
        if (rc || broken) {
            if (failures++ < 5) fprintf(stderr, "\n  plan %d: %s\n", i, broken ? broken : e.msg);
        } else {
            kinds[run.kind]++;
            int rep = 0;
            for (int s = 0; s < p.n_stages; s++) rep |= p.stages[s].n_replicas > 1;
            replicated += rep;
            nodes += p.cluster.n_nodes > 1;
            comm += !run.comm_off && rep && p.cluster.n_nodes > 1;
            zero += !run.comm_off && rep && p.zero && !sched_is_async((sched_kind)run.kind);
        }
        gen_plan_free(&p);
    }
    CU_ASSERT_EQUAL(failures, 0);
    /* what the plans covered: every kind, and many replicated, multi-node
     * runs with communication on */
    for (int k = 0; k < SCHED_COUNT; k++) CU_ASSERT(kinds[k] >= PLANS / SCHED_COUNT / 3);
    CU_ASSERT(replicated > PLANS / 2 && nodes > PLANS / 2 && comm > PLANS / 4);
    CU_ASSERT(zero > PLANS / 10); /* ZeRO's split ring, communication on */
    fprintf(stderr, "\n    %d runs with ZeRO's split ring\n", zero);
}

TEST_SUITE(sim_random)
{
    test_add_suite("sim_random");
    test_add("regress: ring all-reduce plan of 512 devices ends, bytes add up", test_ring_realloc_plan);
    test_add("async kinds with replicas: steady iteration F + B + W", test_async_replicas_steady);
    test_add("random plans: every schedule, replicas, nodes, comm on: properties hold", test_random_plans);
}
