/* test_sim_comm.c - links, transfers in order on a link, the ring all-reduce and the
 * Chrome trace, each against timelines worked out by hand. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "sim/trace.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"

static int run(const plan *p, sched_kind k, int m, int iters, int record, sim_result *r,
               const char *trace, cl_err *e)
{
    sched sc;
    int rc = sched_build(p, k, m, iters, &sc, e);
    if (rc) return rc;
    sim_opts o = {.record = record};
    sim *s = sim_create(p, &sc, &o, e);
    rc = s ? sim_run(s, r, e) : e->code;
    if (!rc && trace) rc = sim_write_trace(s, trace, e);
    sim_destroy(s);
    sched_free(&sc);
    return rc;
}

static void test_two_stage_exposed_transfer(void)
{
    /* GPipe, 2 stages, 2 microbatches, F = 1 ms, B = 2 ms, a transfer takes
     * 0.4 ms + 0.1 ms latency.  By hand:
     *   s0: F0 [0,1] F1 [1,2]; A0 arrives 1.5, A1 2.5
     *   s1: F0 [1.5,2.5] F1 [2.5,3.5] B0 [3.5,5.5] B1 [5.5,7.5]; G0 arrives 6.0, G1 8.0
     *   s0: B0 [6,8] B1 [8,10]
     * 10 ms against (m + p - 1)(F + B) = 9 ms free: exactly the first
     * activation and the last gradient, 2 x 0.5 ms, are exposed.  Each
     * device waits 0.5 ms on a link in flight. */
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 2, .micro = 2, .schedule = SCHED_GPIPE, .fwd_s = 1e-3,
                     .bwd_in_s = 2e-3, .act_bytes = 4e5, .stash_bytes = 10,
                     .intra = {1e9, 1e-4}, .inter = {1e9, 1e-4}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_GPIPE, 2, 1, 0, &r, NULL, &e), 0);
    CU_ASSERT(test_rel(r.iteration_s, 10e-3) < 1e-12);
    for (int d = 0; d < 2; d++) {
        CU_ASSERT(test_rel(r.dev[d].comm_wait_s, 0.5e-3) < 1e-9);
        CU_ASSERT(test_rel(r.dev[d].busy_s, 6e-3) < 1e-12);
        CU_ASSERT(test_rel(r.dev[d].idle_s, 3.5e-3) < 1e-9);
    }
    CU_ASSERT_EQUAL(r.sent_bytes[CLUSTER_INTRA], 4 * 4e5);
    CU_ASSERT_EQUAL(r.sent_bytes[CLUSTER_INTER], 0);
    /* the in-flight buffers: s1 holds A1 from its arrival (2.5) until its
     * RECV (2.5); s0 holds A1 while sending, so its peak includes it */
    sim_result_free(&r);
    /* one microbatch: time grows by exactly 2 transfers over the free case */
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_1F1B, 1, 1, 0, &r, NULL, &e), 0);
    CU_ASSERT(test_rel(r.iteration_s, 2 * 3e-3 + 2 * 0.5e-3) < 1e-12);
    sim_result_free(&r);
    sim_uniform_free(&p);
}

static void test_link_sharing(void)
{
    /* stage 0 has F = 0, so both activations are posted at t = 0 on one
     * link: 1 MB each at 1 MB/s, latency 0.25 s.  One at a time, in the
     * order posted (sim/link.c):
     *   A0 [0,1] arrives 1.25, A1 [1,2] arrives 2.25
     *   s1: F0 [1.25,1.75] waits for A1, F1 [2.25,2.75] B0 [2.75,3.25] B1 [3.25,3.75]
     *   G0 posted 3.25: [3.25,4.25] arrives 4.5; G1 posted 3.75, after
     *   G0: [4.25,5.25] arrives 5.5
     *   s0: B0 [4.5,5.5] B1 [5.5,6.5]  ->  6.5 s
     * (sharing the link equally, as the simulator did before, gave 7.5: A0
     * and A1 both arrived at 2.25, G0 at 5.5.) */
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 2, .micro = 2, .schedule = SCHED_GPIPE, .act_bytes = 1e6,
                     .intra = {1e6, 0.25}, .inter = {1e6, 0.25}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    p.stages[0].fwd_s = 0;
    p.stages[0].bwd_in_s = 1;
    p.stages[1].fwd_s = 0.5;
    p.stages[1].bwd_in_s = 0.5;
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_GPIPE, 2, 1, 0, &r, NULL, &e), 0);
    CU_ASSERT(fabs(r.iteration_s - 6.5) < 1e-12);
    /* s0 waits on G0 from its post (3.25) to its arrival (4.5); G1 is
     * there when B0 ends */
    CU_ASSERT(fabs(r.dev[0].comm_wait_s - 1.25) < 1e-12);
    /* s1 waits on A0 [0,1.25] and on A1 [1.75,2.25] */
    CU_ASSERT(fabs(r.dev[1].comm_wait_s - 1.75) < 1e-12);
    sim_result_free(&r);
    sim_uniform_free(&p);
}

static void test_ring_allreduce(void)
{
    /* one stage on r replicas, one microbatch each: F + B, then the ring
     * all-reduce, 2(r - 1) steps of P / r bytes: the planner's
     * 2 (r - 1)/r x P / bw + 2 (r - 1) x latency */
    for (int r = 2; r <= 6; r++) {
        cl_err e = {0};
        plan p;
        double P = 6e6, bw = 2e9, lat = 3e-6;
        sim_uniform u = {.stages = 1, .replicas = r, .micro = r, .schedule = SCHED_1F1B,
                         .fwd_s = 1e-3, .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .param_bytes = P,
                         .intra = {bw, lat}, .inter = {bw, lat}};
        CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
        sim_result res;
        CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_1F1B, r, 1, 0, &res, NULL, &e), 0);
        double ar = 2.0 * (r - 1) / r * P / bw + 2.0 * (r - 1) * lat;
        CU_ASSERT(test_rel(res.iteration_s, 3e-3 + ar) < 1e-12);
        CU_ASSERT(test_rel(res.dev[0].comm_wait_s, ar) < 1e-9);
        CU_ASSERT(test_rel(res.dev[0].sent_bytes, 2.0 * (r - 1) * P / r) < 1e-12);
        sim_result_free(&res);
        /* between nodes the slower level applies */
        sim_uniform_free(&p);
    }
}

static void test_inter_node_level(void)
{
    /* 4 stages, 2 per node: the boundary 1 -> 2 crosses nodes */
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 4, .micro = 4, .schedule = SCHED_1F1B, .fwd_s = 1e-3,
                     .bwd_in_s = 2e-3, .act_bytes = 1e6, .per_node = 2,
                     .intra = {1e10, 1e-6}, .inter = {1e9, 1e-5}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_1F1B, 4, 1, 0, &r, NULL, &e), 0);
    /* per microbatch an activation and a gradient on each boundary */
    CU_ASSERT_EQUAL(r.sent_bytes[CLUSTER_INTRA], 2 * 2 * 4 * 1e6);
    CU_ASSERT_EQUAL(r.sent_bytes[CLUSTER_INTER], 1 * 2 * 4 * 1e6);
    CU_ASSERT(r.iteration_s > 7 * 3e-3);
    sim_result_free(&r);
    sim_uniform_free(&p);
}

static void test_trace_deterministic_and_valid(void)
{
    char a[512], b[512];
    char *dir = test_scratch(sizeof a, "a.json", a, "b.json", b, NULL);
    cl_err e = {0};
    plan p;
    /* replicated, interleaved, shared links: every track kind appears */
    sim_uniform u = {.stages = 2, .chunks = 2, .replicas = 2, .micro = 4, .schedule = SCHED_INTERLEAVED,
                     .fwd_s = 1e-3, .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .act_bytes = 2e6,
                     .stash_bytes = 1e6, .param_bytes = 8e6, .per_node = 2,
                     .intra = {1e9, 1e-6}, .inter = {1e9, 1e-5}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    sim_result r1, r2;
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_INTERLEAVED, 4, 2, 1, &r1, a, &e), 0);
    CU_ASSERT_EQUAL_FATAL(run(&p, SCHED_INTERLEAVED, 4, 2, 1, &r2, b, &e), 0);
    char *ta = test_slurp(a), *tb = test_slurp(b);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ta);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT_STRING_EQUAL(ta, tb);
    /* it parses, and holds one compute slice per compute op */
    cJSON *root;
    CU_ASSERT_EQUAL_FATAL(jx_parse_text(a, ta, strlen(ta), &root, &e), 0);
    const cJSON *ev = cJSON_GetObjectItem(root, "traceEvents"), *x;
    int compute = 0, link = 0, ar = 0, names = 0;
    double counter_peak[4] = {0};
    cJSON_ArrayForEach(x, ev) {
        const char *nm0 = cJSON_GetObjectItem(x, "name")->valuestring;
        int dev;
        if (!strcmp(cJSON_GetObjectItem(x, "ph")->valuestring, "C") &&
            sscanf(nm0, "memory dev %d", &dev) == 1 && dev >= 0 && dev < 4) {
            double by = cJSON_GetObjectItem(cJSON_GetObjectItem(x, "args"), "bytes")->valuedouble;
            if (by > counter_peak[dev]) counter_peak[dev] = by;
        }
        const char *ph = cJSON_GetObjectItem(x, "ph")->valuestring;
        const char *cat = cJSON_GetObjectItem(x, "cat") ? cJSON_GetObjectItem(x, "cat")->valuestring : "";
        const char *nm = cJSON_GetObjectItem(x, "name")->valuestring;
        if (!strcmp(ph, "X") && !strcmp(cat, "compute")) compute++;
        if (!strcmp(ph, "X") && !strcmp(cat, "link")) link++;
        if (!strcmp(ph, "X") && !strcmp(nm, "AR")) ar++;
        if (!strcmp(ph, "X") && !strcmp(nm, "F3.1")) names++;
    }
    /* per replica: 2 microbatches x 2 chunks x (F + B) + 2 updates, 2 iterations */
    CU_ASSERT_EQUAL(compute, 4 * 2 * (2 * 2 * 2 + 2));
    /* transfers: microbatch x (3 boundaries x 2 directions) x 2 iterations;
     * all-reduce: 4 stages x 2 replicas x 2 steps x 2 iterations */
    CU_ASSERT_EQUAL(link - ar, 4 * 6 * 2);
    CU_ASSERT_EQUAL(ar, 4 * 2 * 2 * 2);
    CU_ASSERT_EQUAL(names, 2 * 2); /* F3.1 on stages 2 and 3, twice */
    /* the memory counters reach each device's reported peak */
    for (int d = 0; d < r1.n_dev; d++)
        CU_ASSERT_EQUAL(counter_peak[r1.dev[d].device], r1.dev[d].peak_mem_bytes);
    cJSON_Delete(root);
    free(ta);
    free(tb);
    sim_result_free(&r1);
    sim_result_free(&r2);
    sim_uniform_free(&p);
    remove(a);
    remove(b);
    rmdir(dir);
    free(dir);
}

static void test_budget_errors(void)
{
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 4, .micro = 8, .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 1,
                     .act_bytes = 1, .intra = {1e9, 0}, .inter = {1e9, 0}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, 8, 1, &sc, &e), 0);
    sim_opts o = {.max_events = 10};
    sim *s = sim_create(&p, &sc, &o, &e);
    sim_result r;
    CU_ASSERT_EQUAL(sim_run(s, &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "after 10 events: event budget exhausted"));
    sim_destroy(s);
    sched_free(&sc);
    sim_uniform_free(&p);
}

static void test_unusable_inputs(void)
{
    /* a cross-node transfer on a cluster without an inter-node link, and
     * stage times that would overflow the clock, are input errors */
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 2, .micro = 2, .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 1,
                     .act_bytes = 10, .per_node = 1, .intra = {1e9, 0}, .inter = {1e9, 0}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    p.cluster.links[CLUSTER_INTER].bw_Bps = 0;
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, 2, 1, &sc, &e), 0);
    sim_opts o = {0};
    sim *s = sim_create(&p, &sc, &o, &e);
    sim_result r;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(sim_run(s, &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "inter-node link between devices 0 and 1 has bandwidth 0"));
    sim_destroy(s);
    cl_err_clear(&e);
    p.cluster.links[CLUSTER_INTER].bw_Bps = 1e9;
    p.stages[1].fwd_s = 1e295;
    CU_ASSERT_PTR_NULL(sim_create(&p, &sc, &o, &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "overflow the simulated clock"));
    sched_free(&sc);
    sim_uniform_free(&p);
}

static void test_predict(void)
{
    /* sim_predict uses the plan's own schedule and microbatches */
    cl_err e = {0};
    plan p;
    sim_uniform u = {.stages = 4, .micro = 8, .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 2,
                     .intra = {1e300, 0}, .inter = {1e300, 0}};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), 0);
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(sim_predict(&p, &r, &e), 0);
    CU_ASSERT(test_rel(r.iteration_s, 11 * 3.0) < 1e-12);
    CU_ASSERT(test_rel(r.throughput, 8 / 33.0) < 1e-12);
    CU_ASSERT(test_rel(r.speedup, 4 * 8 * 3.0 / 33.0) < 1e-12);
    CU_ASSERT_EQUAL(r.n_dev, 4);
    sim_result_free(&r);
    sim_uniform_free(&p);
}

TEST_SUITE(sim_comm)
{
    test_add_suite("sim_comm");
    test_add("two stages: time grows by exactly the exposed transfers", test_two_stage_exposed_transfer);
    test_add("transfers on one link go one at a time, in posting order", test_link_sharing);
    test_add("ring all-reduce matches 2(r-1)/r P/bw + 2(r-1) latency", test_ring_allreduce);
    test_add("bytes are counted per link level", test_inter_node_level);
    test_add("same input gives a byte-identical, parseable trace", test_trace_deterministic_and_valid);
    test_add("an exhausted event budget is a clear error", test_budget_errors);
    test_add("missing link levels and overflowing times are input errors", test_unusable_inputs);
    test_add("sim_predict follows the plan", test_predict);
}
