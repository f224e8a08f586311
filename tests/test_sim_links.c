/* test_sim_links.c - the link model of issue 15: faster links never make a
 * simulated run slower (a property over random plans and clusters), the
 * hierarchical all-reduce against its closed form, and network cards
 * shared by a node's devices. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "tests/fuzz/gen.h"
#include "test.h"
#include "test_rand.h"

static int sim_once(const plan *p, const sched *sc, sim_result *r, cl_err *e)
{
    sim_opts o = {.max_wall_s = 60};
    sim *s = sim_create(p, sc, &o, e);
    int rc = s ? sim_run(s, r, e) : (e->code ? e->code : CL_EINPUT);
    sim_destroy(s);
    return rc;
}

/* One random change that makes the cluster's links no slower: a bandwidth
 * (inside nodes, between nodes, or both) raised by up to 10x (sometimes
 * 1000x), or a latency lowered (sometimes to 0). */
static void faster(cluster *c, char *what, size_t cap)
{
    int mode = irand(0, 5);
    double f = irand(0, 7) ? 1 + urand() * 9 : 1000, g = irand(0, 3) ? urand() : 0;
    cluster_link *in = &c->links[CLUSTER_INTRA], *x = &c->links[CLUSTER_INTER];
    if (mode == 0 || mode == 2 || mode == 5) in->bw_Bps *= f;
    if ((mode == 1 || mode == 2 || mode == 5) && x->bw_Bps > 0) x->bw_Bps *= f;
    if (mode == 3 || mode == 5) in->latency_s *= g;
    if (mode == 4 || mode == 5) x->latency_s *= g;
    snprintf(what, cap, "%s x %g, latency x %g", (const char *[]){"intra bandwidth", "inter bandwidth",
             "both bandwidths", "intra latency", "inter latency", "all"}[mode], f, g);
}

/* Random plans (tests/fuzz/gen.h: every kind, replicas over shuffled
 * nodes, ZeRO 0-2), half of them on clusters whose nodes share 1 to 8
 * network cards: the same op lists simulated again with one faster link
 * level never end later, and a flushing kind's iteration is never longer.
 * The asynchronous kinds' iteration is a slope between two instants, each
 * no later, so only the run's end is checked for them. */
static void test_faster_never_slower(void)
{
    enum { PLANS = 500, BYTES = 256 };
    rng_state = 0x5EED15ull;
    int runs = 0, nic = 0, hier = 0, failures = 0, async_slower = 0;
    for (int i = 0; i < PLANS; i++) {
        uint8_t bytes[BYTES];
        for (int k = 0; k < BYTES; k++) bytes[k] = (uint8_t)(rnd() >> 56);
        gen g = {bytes, BYTES, 0};
        plan p;
        gen_run run;
        gen_plan(&g, &p, &run);
        p.zero = irand(0, 2);
        p.comm_off = 0;
        if (p.cluster.n_nodes > 1 && irand(0, 1)) p.cluster.nics_per_node = irand(1, 8);
        cl_err e = {0};
        sched sc;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, run.kind, run.micro, run.iters, &sc, &e), CL_OK);
        sim_result a, b;
        int rc = sim_once(&p, &sc, &a, &e);
        CU_ASSERT_EQUAL(rc, CL_OK);
        if (rc) fprintf(stderr, "\n  plan %d: %s\n", i, e.msg);
        char what[96] = "";
        if (!rc) {
            faster(&p.cluster, what, sizeof what);
            rc = sim_once(&p, &sc, &b, &e);
            CU_ASSERT_EQUAL(rc, CL_OK);
            if (!rc) {
                int flush = !sched_is_async(run.kind);
                int bad = b.makespan_s > a.makespan_s || (flush && b.iteration_s > a.iteration_s);
                async_slower += !flush && b.iteration_s > a.iteration_s * (1 + 1e-12);
                if (bad && failures++ < 5)
                    fprintf(stderr, "\n  plan %d (%s, %d stages, nics %d, ZeRO %d), %s: iteration "
                            "%.17g -> %.17g s, end %.17g -> %.17g s\n", i, sched_kind_name(run.kind),
                            p.n_stages, p.cluster.nics_per_node, p.zero, what, a.iteration_s,
                            b.iteration_s, a.makespan_s, b.makespan_s);
                runs++;
                nic += p.cluster.nics_per_node > 0;
                for (int s = 0; s < p.n_stages; s++) {
                    const plan_stage *st = &p.stages[s];
                    hier += st->n_replicas > 2 &&
                            p.cluster.devices[st->devices[0]].node !=
                                p.cluster.devices[st->devices[st->n_replicas - 1]].node;
                }
                sim_result_free(&b);
            }
            sim_result_free(&a);
        }
        sched_free(&sc);
        gen_plan_free(&p);
    }
    CU_ASSERT_EQUAL(failures, 0);
    CU_ASSERT(runs == PLANS && nic > PLANS / 4 && hier > PLANS / 10);
    fprintf(stderr, "\n    %d runs, %d with network cards, %d asynchronous runs whose slope rose\n",
            runs, nic, async_slower);
}

/* One stage on k x n replicas, k to a node, one microbatch each: F + B + W,
 * then the all-reduce.  Hierarchical (n >= 2, k >= 2):
 *   2 (k - 1) (P / k / bw_in + lat_in) + 2 (n - 1) (P / (k n) / bw_x' + lat_x)
 * with bw_x' = bw_x, or with c cards per node shared by the k devices (k / c
 * rings through each card) bw_x c / k. */
static void one_stage(int k, int n, int nics, double P, cluster_link in, cluster_link x,
                      sim_result *res)
{
    cl_err e = {0};
    plan p;
    int r = k * n;
    sim_uniform u = {.stages = 1, .replicas = r, .micro = r, .per_node = k, .schedule = SCHED_1F1B,
                     .fwd_s = 1e-3, .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .param_bytes = P,
                     .intra = in, .inter = x};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
    p.cluster.nics_per_node = nics;
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, r, 1, &sc, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(sim_once(&p, &sc, res, &e), CL_OK);
    sched_free(&sc);
    sim_uniform_free(&p);
}

static void test_hierarchical_closed_form(void)
{
    const int shapes[][2] = {{2, 2}, {4, 2}, {2, 3}, {3, 5}, {8, 4}, {1, 4}, {4, 1}};
    double P = 12e6;
    cluster_link in = {3e9, 2e-6}, x = {5e8, 3e-5};
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        int k = shapes[t][0], n = shapes[t][1];
        sim_result res;
        one_stage(k, n, 0, P, in, x, &res);
        double want;
        if (k == 1 || n == 1) { /* a flat ring: between nodes, or inside one */
            int r = k * n;
            const cluster_link *l = n == 1 ? &in : &x;
            want = 2.0 * (r - 1) * (P / r / l->bw_Bps + l->latency_s);
        } else {
            want = 2.0 * (k - 1) * (P / k / in.bw_Bps + in.latency_s) +
                   2.0 * (n - 1) * (P / k / n / x.bw_Bps + x.latency_s);
        }
        double ok = test_rel(res.iteration_s, 3e-3 + want) < 1e-12;
        CU_ASSERT(ok);
        if (!ok) fprintf(stderr, "\n  k %d n %d: %.17g s, want %.17g\n", k, n, res.iteration_s, 3e-3 + want);
        /* bytes: inside the node 2 (k - 1) / k P per device, between 2 (n - 1) / (n k) P */
        double sent = k > 1 && n > 1 ? 2.0 * (k - 1) * P / k + 2.0 * (n - 1) * P / k / n
                                     : 2.0 * (k * n - 1) * P / (k * n);
        CU_ASSERT(test_rel(res.dev[0].sent_bytes, sent) < 1e-12);
        if (k > 1 && n > 1)
            CU_ASSERT(test_rel(res.sent_bytes[CLUSTER_INTER], k * n * 2.0 * (n - 1) * P / k / n) < 1e-12);
        sim_result_free(&res);
    }
}

static void test_shared_network_cards(void)
{
    /* 4 devices a node on 3 nodes: the 4 rings between nodes go through
     * c cards per node, 4 / c rings a card, each at c / 4 of its bandwidth;
     * with a card per device it is the cluster without cards */
    double P = 8e6;
    cluster_link in = {2e9, 1e-6}, x = {1e9, 2e-5};
    int k = 4, n = 3;
    sim_result none;
    one_stage(k, n, 0, P, in, x, &none);
    for (int c = 1; c <= k; c *= 2) {
        sim_result res;
        one_stage(k, n, c, P, in, x, &res);
        double want = 3e-3 + 2.0 * (k - 1) * (P / k / in.bw_Bps + in.latency_s) +
                      2.0 * (n - 1) * (P / k / n / (x.bw_Bps / (k / c)) + x.latency_s);
        CU_ASSERT(test_rel(res.iteration_s, want) < 1e-12);
        if (c == k) CU_ASSERT_EQUAL(res.iteration_s, none.iteration_s);
        if (c < k) CU_ASSERT(res.iteration_s > none.iteration_s);
        sim_result_free(&res);
    }
    sim_result_free(&none);
    /* a pipeline boundary between two nodes: stage 0's 4 replicas on node
     * 0 each send to their partner on node 1 at once (F = 0); through one
     * card the 4 transfers take 4 times as long as through 4 */
    for (int c = 1; c <= 4; c *= 4) {
        cl_err e = {0};
        plan p;
        sim_uniform u = {.stages = 2, .replicas = 4, .micro = 4, .per_node = 4,
                         .schedule = SCHED_GPIPE, .bwd_in_s = 1e-3, .act_bytes = 1e6,
                         .intra = in, .inter = x};
        CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(p.cluster.n_nodes, 2);
        p.cluster.nics_per_node = c;
        p.stages[1].bwd_in_s = 0;
        sched sc;
        sim_result res;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_GPIPE, 4, 1, &sc, &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(sim_once(&p, &sc, &res, &e), CL_OK);
        /* activation (bw x c / 4), the gradient back, B of 1 ms, then
         * stage 0's all-reduce of no bytes inside node 0: 6 latencies */
        double hop = 1e6 / (x.bw_Bps * c / 4) + x.latency_s;
        CU_ASSERT(test_rel(res.iteration_s, 2 * hop + 1e-3 + 6 * in.latency_s) < 1e-12);
        sim_result_free(&res);
        sched_free(&sc);
        sim_uniform_free(&p);
    }
}

TEST_SUITE(sim_links)
{
    test_add_suite("sim_links");
    test_add("faster links never make a random plan's run slower", test_faster_never_slower);
    test_add("hierarchical all-reduce matches its closed form", test_hierarchical_closed_form);
    test_add("network cards shared by a node's devices split their bandwidth", test_shared_network_cards);
}
