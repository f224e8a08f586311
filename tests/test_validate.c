/* test_validate.c - the pieces of `cleave validate` that need no real run:
 * the error arithmetic, the comparison of a prediction with a measurement
 * (built by hand here), stage costs rebuilt from a profile, and the
 * simulator's optimiser-step time against closed forms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/nn/net.h"
#include "bench/validate.h"
#include "core/schedule.h"
#include "sim/sim.h"
#include "test.h"

static void test_error_arithmetic(void)
{
    CU_ASSERT_DOUBLE_EQUAL(exec_val_error(110, 100), 0.10, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(exec_val_error(90, 100), -0.10, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(exec_val_error(3e-3, 4e-3), -0.25, 1e-15);
    CU_ASSERT_EQUAL(exec_val_error(0, 0), 0);
    CU_ASSERT(isinf(exec_val_error(1, 0)) && exec_val_error(1, 0) > 0);
    exec_val_qty q;
    exec_val_qty_set(&q, 5, 4);
    CU_ASSERT_EQUAL(q.predicted, 5);
    CU_ASSERT_EQUAL(q.measured, 4);
    CU_ASSERT_DOUBLE_EQUAL(q.error, 0.25, 1e-15);
    double err[] = {0.1, -0.3, NAN, 0.05}, mean, max;
    exec_val_abs_stats(err, 4, &mean, &max);
    CU_ASSERT_DOUBLE_EQUAL(mean, (0.1 + 0.3 + 0.05) / 3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(max, 0.3, 1e-15);
    exec_val_abs_stats(err + 2, 1, &mean, &max);
    CU_ASSERT_EQUAL(mean, 0);
    CU_ASSERT_EQUAL(max, 0);
}

/* A 2-worker prediction and a 4-iteration measurement written by hand:
 * the flushing kind's window leaves out iteration 0; the measured iteration
 * and busy times are medians over iterations 1..3 (iteration 0's 9 s of
 * "busy" would move a mean). */
static void test_compare(void)
{
    plan p;
    memset(&p, 0, sizeof p);
    p.schedule = SCHED_1F1B;
    p.chunks = 1;
    p.n_stages = 2;
    p.microbatch = 8;
    p.n_micro = 4;
    sim_dev_result pd[2] = {{.device = 0, .stage = 0, .n_stages = 1, .busy_s = 2e-3, .peak_mem_bytes = 1000},
                            {.device = 1, .stage = 1, .n_stages = 1, .busy_s = 1e-3, .peak_mem_bytes = 500}};
    sim_result pred = {.n_dev = 2, .dev = pd, .iteration_s = 3e-3, .throughput = 32 / 3e-3};
    /* iteration 2 slowed by a neighbour: the median is 3 ms, the mean 3.33 */
    double ends[4] = {5e-3, 8e-3, 12.5e-3, 15e-3}, its[4] = {5e-3, 3e-3, 4.5e-3, 2.5e-3};
    double busy0[4] = {9, 2.1e-3, 1.9e-3, 2.0e-3}, busy1[4] = {9, 1e-3, 1.2e-3, 1.1e-3};
    exec_pipe_worker w[2] = {{.device = 0, .stage = 0, .iter_busy_s = busy0, .peak_mem_bytes = 1100},
                             {.device = 1, .stage = 1, .iter_busy_s = busy1, .peak_mem_bytes = 400}};
    exec_pipe_result meas = {.n_workers = 2, .n_iter = 4, .iter_end_s = ends, .iter_s = its, .w = w};
    exec_val_report r;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_val_compare(&p, NULL, &pred, &meas, &r, &e), CL_OK);
    CU_ASSERT_EQUAL(r.first_iter, 1);
    CU_ASSERT_EQUAL(r.last_iter, 3);
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_s.measured, 3e-3, 1e-15); /* median of 3, 4.5, 2.5 ms */
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_mean_s, 10e-3 / 3, 1e-15); /* (15 - 5) / 3 ms */
    CU_ASSERT_DOUBLE_EQUAL(r.iteration_s.error, 0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.throughput.measured, 32 / 3e-3, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(r.w[0].busy_s.measured, 2e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(r.w[0].busy_s.error, 0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.w[1].busy_s.measured, 1.1e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(r.w[1].busy_s.error, 1e-3 / 1.1e-3 - 1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.w[0].peak_mem.error, 1000.0 / 1100 - 1, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.w[1].peak_mem.error, 0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.max_mem_error, 0.25, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(r.max_busy_error, 1 - 1e-3 / 1.1e-3, 1e-12);
    exec_val_report_free(&r);
    /* an asynchronous kind: 2 stages, 4 microbatches, warm-up ceil(2/4) = 1
     * iteration and as many draining at the end: iterations 1..2 */
    p.schedule = SCHED_FBP;
    int first, last;
    CU_ASSERT_DOUBLE_EQUAL(exec_val_measured_iteration(&p, &meas, &first, &last), 7.5e-3 / 2, 1e-15);
    CU_ASSERT_EQUAL(first, 1);
    CU_ASSERT_EQUAL(last, 2);
    /* workers that do not line up are a bug in the caller */
    w[1].device = 5;
    CU_ASSERT_EQUAL(exec_val_compare(&p, NULL, &pred, &meas, &r, &e), CL_ERUN);
}

/* Stage costs are sums over the stage's layers of a profile written here,
 * at the plan's microbatch size (single-point profiles scale with batch). */
static void test_costs_from_profile(void)
{
    cl_err e = {0};
    model m;
    CU_ASSERT_EQUAL_FATAL(model_load(&m, "tests/data/exec/tiny-mlp.json", &e), CL_OK);
    prof pf;
    memset(&pf, 0, sizeof pf);
    prof_alloc(&pf, m.n_layers, 1);
    for (int l = 0; l < m.n_layers; l++) {
        prof_layer *x = &pf.layers[l];
        snprintf(x->name, sizeof x->name, "%s", m.layers[l].name);
        x->batch[0] = 4;                 /* times for batch 4: per sample / 4 */
        x->fwd_s[0] = 4e-6 * (l + 1);
        x->bwd_in_s[0] = 8e-6 * (l + 1);
        x->bwd_w_s[0] = 2e-6 * (l + 1);
        x->act_bytes = 100.0 * (l + 1);
        x->stash_bytes = 10.0 * (l + 1);
        x->param_bytes = 4.0 * (double)m.layers[l].params; /* float32, as measured */
    }
    plan p;
    memset(&p, 0, sizeof p);
    p.model = m;
    p.schedule = SCHED_1F1B;
    p.optimizer = OPTIM_MOMENTUM;
    p.chunks = 1;
    p.microbatch = 8;
    p.n_micro = 2;
    p.batch = 16;
    p.n_stages = 2;
    plan_stage st[2];
    memset(st, 0, sizeof st);
    int l0[] = {0, 1, 2}, l1[] = {3, 4}, d0 = 0, d1 = 1;
    st[0] = (plan_stage){.first = 0, .last = 2, .n_layers = 3, .layers = l0, .n_replicas = 1,
                         .devices = &d0};
    st[1] = (plan_stage){.first = 3, .last = 4, .n_layers = 2, .layers = l1, .n_replicas = 1,
                         .devices = &d1};
    p.stages = st;
    cluster_devtype dt = {.name = "cpu-core", .peak_fp32_flops = 1e11, .mem_bytes = (uint64_t)1 << 30,
                          .mem_bw_Bps = 1e10, .efficiency = 1};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(&p.cluster, &dt, 2, 0, (cluster_link){1e10, 0},
                                          (cluster_link){0, 0}, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, 0, NULL, "t.json", &e), CL_OK);
    /* batch 8 = twice the profiled batch: sums of 2 x (l + 1) x unit */
    CU_ASSERT_DOUBLE_EQUAL(st[0].fwd_s, 2 * 4e-6 * (1 + 2 + 3), 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(st[1].fwd_s, 2 * 4e-6 * (4 + 5), 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(st[0].bwd_in_s, 2 * 8e-6 * 6, 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(st[1].bwd_w_s, 2 * 2e-6 * 9, 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(st[0].act_out_bytes, 300.0 * 8, 1e-9); /* layer 2's output */
    CU_ASSERT_EQUAL(st[1].act_out_bytes, 0);
    CU_ASSERT_DOUBLE_EQUAL(st[0].stash_bytes, 10.0 * 6 * 8, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(st[1].param_bytes, 4.0 * (double)(m.layers[3].params + m.layers[4].params), 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(exec_val_max_transfer(&p), 2400, 1e-9);
    /* with the runtime's extras: the executor's own allocations (acts of
     * one microbatch, padded parameters), the copy added to the forward of
     * the stage that sends, the update timed */
    exec_val_extra x[2];
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, 0, x, "t.json", &e), CL_OK);
    for (int s = 0; s < 2; s++) {
        exec_net *n;
        CU_ASSERT_EQUAL_FATAL(exec_net_create(&n, &m, st[s].first, st[s].last + 1, 8, 1, 0, "t", &e), CL_OK);
        exec_acts *a = exec_acts_create(n, 8);
        int64_t nf;
        exec_net_params(n, &nf);
        CU_ASSERT_EQUAL(st[s].stash_bytes, (double)exec_acts_bytes(a));
        CU_ASSERT_EQUAL(st[s].param_bytes, (double)nf * 4);
        double real = 0; /* the model's parameters; the padded block only adds */
        for (int l = st[s].first; l <= st[s].last; l++) real += (double)m.layers[l].params * 4;
        CU_ASSERT(st[s].param_bytes >= real && st[s].param_bytes < real + 64.0 * 4 * 4);
        exec_acts_destroy(a);
        exec_net_destroy(n);
        CU_ASSERT(x[s].update_s > 0);
        CU_ASSERT_EQUAL(st[s].update_s, x[s].update_s);
    }
    CU_ASSERT(x[0].copy_s > 0);
    CU_ASSERT_EQUAL(x[1].copy_s, 0);
    CU_ASSERT(x[0].input_s > 0);
    CU_ASSERT_EQUAL(x[1].input_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(st[0].fwd_s, 2 * 4e-6 * 6 + x[0].copy_s + x[0].input_s, 1e-18);
    CU_ASSERT_DOUBLE_EQUAL(st[1].fwd_s, 2 * 4e-6 * 9, 1e-18);
    CU_ASSERT_EQUAL(x[0].fwd_ctx_s, 0);
    /* in context: the passes timed whole replace the layer sums, the
     * extras stay on top; exec_val_layer_costs gives the sums back */
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, 1, x, "t.json", &e), CL_OK);
    for (int s = 0; s < 2; s++) {
        CU_ASSERT(x[s].fwd_ctx_s > 0 && x[s].bwd_in_ctx_s > 0 && x[s].bwd_w_ctx_s > 0);
        CU_ASSERT_DOUBLE_EQUAL(st[s].fwd_s, x[s].fwd_ctx_s + x[s].copy_s + x[s].input_s, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(st[s].bwd_in_s, x[s].bwd_in_ctx_s + x[s].swap_s, 1e-15);
        CU_ASSERT_DOUBLE_EQUAL(st[s].bwd_w_s, x[s].bwd_w_ctx_s, 1e-15);
    }
    exec_val_layer_costs(&p, x);
    CU_ASSERT_DOUBLE_EQUAL(st[0].fwd_s, 2 * 4e-6 * 6 + x[0].copy_s + x[0].input_s, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(st[1].bwd_w_s, 2 * 2e-6 * 9, 1e-15);
    /* the same with the inputs written by another core */
    CU_ASSERT_EQUAL_FATAL(exec_val_costs(&p, &pf, 3, EXEC_VAL_CTX_REPLAY | EXEC_VAL_CTX_XCORE, x,
                                         "t.json", &e), CL_OK);
    for (int s = 0; s < 2; s++) {
        CU_ASSERT(x[s].fwd_ctx_s > 0 && x[s].bwd_in_ctx_s > 0 && x[s].bwd_w_ctx_s > 0);
        CU_ASSERT_DOUBLE_EQUAL(st[s].fwd_s, x[s].fwd_ctx_s + x[s].copy_s + x[s].input_s, 1e-15);
    }
    /* a profile of another model is refused */
    snprintf(pf.layers[1].name, sizeof pf.layers[1].name, "other");
    CU_ASSERT_EQUAL(exec_val_costs(&p, &pf, 3, 1, x, "t.json", &e), CL_EINPUT);
    prof_free(&pf);
    cluster_free(&p.cluster);
    model_free(&m);
}

/* Simulate a uniform plan whose stages take u per optimiser step. */
static int sim_update(sched_kind k, int P, int m, double f, double b, double w, double u,
                      int iters, sim_result *r)
{
    static const cluster_link fast = {1e15, 0};
    sim_uniform su = {.stages = P, .chunks = 1, .replicas = 1, .micro = m, .schedule = k,
                      .fwd_s = f, .bwd_in_s = b, .bwd_w_s = w, .act_bytes = 8,
                      .stash_bytes = 8, .param_bytes = 8, .intra = fast, .inter = fast};
    cl_err e = {0};
    plan p;
    if (sim_uniform_plan(&p, &su, &e)) return -1;
    for (int s = 0; s < P; s++) p.stages[s].update_s = u;
    int rc = exec_val_predict(&p, iters, NULL, r, &e);
    if (rc) fprintf(stderr, "sim_update: %s\n", e.msg);
    sim_uniform_free(&p);
    return rc;
}

/* Closed forms with the update: flushing kinds pay it once per iteration
 * after the last backward of stage 0, (m + p - 1)(F + B + W) + u; FBP and
 * PipeDream pay it after every backward, m (F + B + W + u) in the steady
 * state of equal stages.  Busy time counts it too. */
static void test_update_closed_form(void)
{
    const double F = 1e-3, B = 1.5e-3, W = 0.5e-3, U = 0.25e-3;
    int ps[] = {1, 2, 4}, ms[] = {1, 4, 8};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            int P = ps[i], m = ms[j];
            sim_result r;
            for (int kk = 0; kk < 2; kk++) {
                sched_kind k = kk ? SCHED_1F1B : SCHED_GPIPE;
                CU_ASSERT_EQUAL_FATAL(sim_update(k, P, m, F, B, W, U, 3, &r), 0);
                CU_ASSERT(test_rel(r.iteration_s, (m + P - 1) * (F + B + W) + U) < 1e-9);
                CU_ASSERT(test_rel(r.dev[0].busy_s, m * (F + B + W) + U) < 1e-9);
                sim_result_free(&r);
            }
            CU_ASSERT_EQUAL_FATAL(sim_update(SCHED_FBP, P, m, F, B, W, U, 0, &r), 0);
            CU_ASSERT(test_rel(r.iteration_s, m * (F + B + W + U)) < 1e-9);
            sim_result_free(&r);
        }
}

/* Off-clock time per iteration, counted by hand: stage 0 on device 0 does
 * 4 F (post 2 each; its gather of 1 is on the op clock); stage 1 is replicated on devices 1 and 2,
 * which run microbatches {0, 2} and {1, 3}: 2 F and 2 B each (post 4 per
 * B), and a version copy of 8 once per iteration (flushing) or once per
 * round of its 2 replicas' microbatches (asynchronous: 2 per replica). */
static void test_off_clock(void)
{
    plan p;
    memset(&p, 0, sizeof p);
    p.n_micro = 4;
    p.n_stages = 2;
    p.schedule = SCHED_1F1B;
    int d0[] = {0}, d1[] = {1, 2};
    plan_stage st[2];
    memset(st, 0, sizeof st);
    st[0].n_replicas = 1;
    st[0].devices = d0;
    st[1].n_replicas = 2;
    st[1].devices = d1;
    p.stages = st;
    exec_val_extra x[2];
    memset(x, 0, sizeof x);
    x[0].input_s = 1;
    x[0].post_f_s = 2;
    x[1].post_b_s = 4;
    x[1].version_s = 8;
    x[1].copy_s = 100; /* on the op clock (with the input gather): never subtracted */
    x[1].swap_s = 100;
    CU_ASSERT_DOUBLE_EQUAL(exec_val_off_clock(&p, x, 0), 4 * 2, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_val_off_clock(&p, x, 1), 2 * 4 + 8, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(exec_val_off_clock(&p, x, 2), 2 * 4 + 8, 1e-12);
    p.schedule = SCHED_PIPEDREAM;
    CU_ASSERT_DOUBLE_EQUAL(exec_val_off_clock(&p, x, 1), 2 * 4 + 2 * 8, 1e-12);
    CU_ASSERT_EQUAL(exec_val_off_clock(&p, x, 3), 0);
    CU_ASSERT_EQUAL(exec_val_off_clock(&p, NULL, 0), 0);
}

/* What the simulator gets of a profiled link: threads keep the latency and
 * drop the per-byte term (the copy is in F); MPI keeps both; nonsense
 * from a fit without slope or with a negative intercept is made safe. */
static void test_link_rules(void)
{
    cluster_link l = {5e9, 20e-6};
    cluster_link t = exec_val_link(&l, EXEC_PIPE_THREADS, 0),
                 m = exec_val_link(&l, EXEC_PIPE_MPI, 0);
    CU_ASSERT_EQUAL(t.latency_s, 20e-6);
    CU_ASSERT_EQUAL(t.bw_Bps, EXEC_VAL_HANDOFF_BPS);
    CU_ASSERT_EQUAL(m.latency_s, 20e-6);
    CU_ASSERT_EQUAL(m.bw_Bps, 5e9);
    /* the sender's share leaves the link */
    t = exec_val_link(&l, EXEC_PIPE_THREADS, 15e-6);
    CU_ASSERT_DOUBLE_EQUAL(t.latency_s, 5e-6, 1e-18);
    t = exec_val_link(&l, EXEC_PIPE_THREADS, 25e-6);
    CU_ASSERT_EQUAL(t.latency_s, 0);
    cluster_link bad = {HUGE_VAL, -3e-6};
    m = exec_val_link(&bad, EXEC_PIPE_MPI, 0);
    CU_ASSERT_EQUAL(m.latency_s, 0);
    CU_ASSERT_EQUAL(m.bw_Bps, EXEC_VAL_HANDOFF_BPS);
    plan p;
    memset(&p, 0, sizeof p);
    exec_val_set_link(&p, &l);
    CU_ASSERT_EQUAL(p.cluster.links[CLUSTER_INTRA].bw_Bps, 5e9);
    CU_ASSERT_EQUAL(p.cluster.links[CLUSTER_INTER].latency_s, 20e-6);
    /* posts: F of every stage but the last, B of every stage but the first */
    plan_stage st[3];
    memset(st, 0, sizeof st);
    p.stages = st;
    p.n_stages = 3;
    exec_val_extra x[3];
    memset(x, 0, sizeof x);
    exec_val_add_posts(&p, x, 1e-6);
    CU_ASSERT_EQUAL(x[0].post_f_s, 1e-6);
    CU_ASSERT_EQUAL(x[0].post_b_s, 0);
    CU_ASSERT_EQUAL(x[2].post_f_s, 0);
    CU_ASSERT_EQUAL(x[2].post_b_s, 1e-6);
    CU_ASSERT_EQUAL(st[0].fwd_s, 1e-6);
    CU_ASSERT_EQUAL(st[0].bwd_in_s, 0);
    CU_ASSERT_EQUAL(st[1].fwd_s, 1e-6);
    CU_ASSERT_EQUAL(st[1].bwd_in_s, 1e-6);
    CU_ASSERT_EQUAL(st[2].fwd_s, 0);
    CU_ASSERT_EQUAL(st[2].bwd_in_s, 1e-6);
}

TEST_SUITE(validate)
{
    test_add_suite("validate");
    test_add("relative error and its summaries", test_error_arithmetic);
    test_add("prediction against a hand-made measurement", test_compare);
    test_add("stage costs rebuilt from a profile", test_costs_from_profile);
    test_add("optimiser step in the simulator: closed forms", test_update_closed_form);
    test_add("the link the simulator gets", test_link_rules);
    test_add("off-clock time per worker", test_off_clock);
}
