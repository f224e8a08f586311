/* test_sim_blocking.c - DeepSpeed's pipeline order and its blocking
 * transfers (core/schedule.c order_deepspeed, sim/sim.c meet_send;
 * docs/simulator.md, "Blocking transfers: DeepSpeed's pipeline").
 *
 * Checked against things that do not share the simulator's code: the op
 * lists against DeepSpeed's TrainSchedule stepped through by hand, the
 * iteration of a uniform two-stage pipeline against its closed form, and
 * random deepspeed plans against a few-line rendezvous evaluator written
 * here (every transfer starts when both ends have reached it and holds
 * both until it arrives).  Plans of other frameworks keep cleave's order
 * and non-blocking transfers to the bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "core/schedule.h"
#include "planner/predict.h"
#include "sim/sim.h"
#include "tests/fuzz/gen.h"
#include "test.h"
#include "test_rand.h"

/* One worker's list as text: F0 B0 for compute, >A0 / <A0 for sending /
 * receiving microbatch 0's activation, >G0 / <G0 for its gradient. */
static void list_str(const sched *sc, int w, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int64_t i = sc->off[w]; i < sc->off[w + 1] && n + 16 < cap; i++) {
        const sched_op *op = &sc->ops[i];
        const char *pre = op->kind == SCHED_F ? "F" : op->kind == SCHED_B ? "B" : NULL;
        char t[16];
        if (pre) snprintf(t, sizeof t, "%s%d", pre, op->micro);
        else if (op->kind == SCHED_SEND || op->kind == SCHED_RECV)
            snprintf(t, sizeof t, "%c%c%d", op->kind == SCHED_SEND ? '>' : '<',
                     (op->flags & SCHED_GRAD) ? 'G' : 'A', op->micro);
        else
            snprintf(t, sizeof t, "%s", sched_op_kind_name((sched_op_kind)op->kind));
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? " " : "", t);
    }
}

static sim_uniform uni(int p, int m, double f, double b, double bytes, cluster_link l)
{
    sim_uniform u = {.stages = p, .chunks = 1, .replicas = 1, .micro = m, .schedule = SCHED_1F1B,
                     .fwd_s = f, .bwd_in_s = b, .bwd_w_s = 0, .act_bytes = bytes,
                     .stash_bytes = 1000, .param_bytes = 4000, .intra = l, .inter = l};
    return u;
}

/* DeepSpeed's TrainSchedule.steps() (deepspeed/runtime/pipe/schedule.py)
 * stepped through by hand: 2 (m + p - 1) steps, forward steps where the
 * step and the stage have the same parity.  A forward step receives its
 * activation, sends the gradient the step before computed, then runs F; a
 * backward step sends the activation the step before computed, receives its
 * gradient, then runs B. */
static void test_order_is_deepspeeds(void)
{
    static const struct {
        int p, m;
        const char *want[3];
    } cases[] = {
        {2, 3, {"F0 >A0 F1 >A1 <G0 B0 F2 >A2 <G1 B1 <G2 B2",
                "<A0 F0 B0 <A1 >G0 F1 B1 <A2 >G1 F2 B2 >G2"}},
        {3, 2, {"F0 >A0 F1 >A1 <G0 B0 <G1 B1",
                "<A0 F0 >A0 <A1 F1 >A1 <G0 B0 >G0 <G1 B1 >G1",
                "<A0 F0 B0 <A1 >G0 F1 B1 >G1"}},
        {1, 2, {"F0 B0 F1 B1"}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        plan p;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &(sim_uniform){.stages = cases[c].p, .micro = cases[c].m,
                                                                  .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 1,
                                                                  .act_bytes = 8, .intra = {1e9, 0}, .inter = {1e9, 0}},
                                               &e), CL_OK);
        p.framework = PLAN_FOR_DEEPSPEED;
        sched sc;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, cases[c].m, 1, &sc, &e), CL_OK);
        CU_ASSERT_EQUAL(sched_check(&p, &sc, "test", &e), CL_OK);
        CU_ASSERT(sc.blocking_p2p);
        for (int w = 0; w < cases[c].p; w++) {
            char got[512];
            list_str(&sc, w, got, sizeof got);
            /* every list ends in its update */
            char want[512];
            snprintf(want, sizeof want, "%s UPDATE", cases[c].want[w]);
            if (strcmp(got, want)) fprintf(stderr, "\n  p %d m %d stage %d: %s\n  want %s\n", cases[c].p, cases[c].m, w, got, want);
            CU_ASSERT_STRING_EQUAL(got, want);
        }
        sched_free(&sc);
        sim_uniform_free(&p);
    }
}

/* Two stages, F and B of f and b seconds each, every transfer c = latency
 * + bytes / bandwidth.  Stage 0 sends activation i only after F(i + 1)
 * and meets stage 1 there, so from the second microbatch on every round
 * is two transfers (A(i), then G(i - 1)) followed by both stages
 * computing B(i - 1) + F(i + 1) and F(i) + B(i): f + b + 2c a microbatch.
 * Adding the first forward, activation 0's transfer and the last
 * gradient's: (m + 1)(f + b) + 2 m c.  Without blocking (cleave's order,
 * another framework) the same pipeline is faster. */
static void test_two_stage_closed_form(void)
{
    const int ms[] = {1, 2, 3, 4, 8, 33, 64};
    const double f = 1.5e-3, b = 3.25e-3, bytes = 6e6;
    const cluster_link l = {2e9, 7e-6};
    double c = l.latency_s + bytes / l.bw_Bps;
    for (size_t k = 0; k < sizeof ms / sizeof *ms; k++) {
        int m = ms[k];
        double got[2] = {0, 0};
        for (int ds = 0; ds < 2; ds++) {
            plan p;
            cl_err e = {0};
            sim_uniform u = uni(2, m, f, b, bytes, l);
            CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
            p.framework = ds ? PLAN_FOR_DEEPSPEED : PLAN_FOR_MEGATRON;
            sim_result r;
            CU_ASSERT_EQUAL_FATAL(sim_predict(&p, &r, &e), CL_OK);
            got[ds] = r.iteration_s;
            if (ds) {
                /* stage 1 is busy (m (f + b)) and waits on communication
                 * for its 2m transfers; the rest of the iteration it is idle */
                CU_ASSERT(test_rel(r.dev[1].busy_s, m * (f + b)) < 1e-12);
                CU_ASSERT(test_rel(r.dev[1].comm_wait_s, 2 * m * c) < 1e-9);
            }
            sim_result_free(&r);
            sim_uniform_free(&p);
        }
        double want = (m + 1) * (f + b) + 2 * m * c;
        if (test_rel(got[1], want) > 1e-12) fprintf(stderr, "\n  m %d: %.15g want %.15g\n", m, got[1], want);
        CU_ASSERT(test_rel(got[1], want) < 1e-12);
        CU_ASSERT(got[0] < got[1] || m == 1);
    }
}

/* ------------------------------------------------ random deepspeed plans -- */

/* A random deepspeed plan: p stages (1-8) of r replicas each (whole
 * pipelines, as DeepSpeed replicates), m microbatches (1-64), unequal stage
 * times and activation sizes, devices in nodes of 1-8 with random links,
 * sometimes an optimiser step. */
static void rand_plan(plan *p, int r)
{
    int P = irand(1, 8), m = irand(1, 64), per_node = irand(1, 8);
    cluster_devtype t = {.peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)80 << 30, .mem_bw_Bps = 1e12,
                         .efficiency = 1};
    snprintf(t.name, sizeof t.name, "gen");
    cluster_link intra = {1e8 * pow(1e4, urand()), urand() < 0.2 ? 0 : 1e-6 * pow(100, urand())};
    cluster_link inter = {1e7 * pow(1e4, urand()), urand() < 0.2 ? 0 : 1e-5 * pow(100, urand())};
    memset(p, 0, sizeof *p);
    cl_err e = {0};
    if (cluster_uniform(&p->cluster, &t, P * r, per_node, intra, inter, &e)) abort();
    p->schedule = SCHED_1F1B;
    p->chunks = 1;
    p->microbatch = 1;
    p->n_micro = m;
    p->batch = m;
    p->framework = PLAN_FOR_DEEPSPEED;
    p->n_stages = P;
    p->stages = cl_calloc((size_t)P, sizeof *p->stages);
    /* a chain of P layers, one a stage (what plan_validate asks of a plan) */
    snprintf(p->model.name, sizeof p->model.name, "chain");
    p->model.input = (model_shape){1, {256, 0, 0}};
    p->model.n_layers = P;
    p->model.layers = cl_calloc((size_t)P, sizeof *p->model.layers);
    for (int s = 0; s < P; s++) {
        char name[16];
        snprintf(name, sizeof name, "l%d", s);
        model_block_init(&p->model.layers[s], name, 1e6, 1000, 1024, 0);
    }
    if (model_derive(&p->model, "chain", &e)) abort();
    for (int s = 0; s < P; s++) {
        plan_stage *st = &p->stages[s];
        st->first = st->last = s;
        st->n_layers = 1;
        st->layers = cl_malloc(sizeof *st->layers);
        st->layers[0] = s;
        st->n_replicas = r;
        st->devices = cl_malloc((size_t)r * sizeof *st->devices);
        for (int q = 0; q < r; q++) st->devices[q] = s * r + q;
        st->fwd_s = 1e-3 * pow(100, urand());
        st->bwd_in_s = 1e-3 * pow(100, urand());
        st->bwd_w_s = urand() < 0.5 ? 0 : 1e-3 * pow(10, urand());
        st->update_s = urand() < 0.25 ? 1e-3 * urand() : 0;
        st->act_out_bytes = s == P - 1 ? 0 : 1e3 * pow(1e6, urand());
        st->stash_bytes = 1e6;
        st->param_bytes = 1e3 * pow(1e6, urand());
    }
}

static void rand_plan_free(plan *p)
{
    for (int s = 0; s < p->n_stages; s++) {
        free(p->stages[s].devices);
        free(p->stages[s].layers);
    }
    model_free(&p->model);
    free(p->stages);
    cluster_free(&p->cluster);
    memset(p, 0, sizeof *p);
}

static double op_s(const plan *p, const sched_op *op)
{
    const plan_stage *st = &p->stages[op->stage];
    switch (op->kind) {
    case SCHED_F: return st->fwd_s;
    case SCHED_B: return st->bwd_in_s + ((op->flags & SCHED_FUSED_W) ? st->bwd_w_s : 0);
    case SCHED_W: return st->bwd_w_s;
    case SCHED_UPDATE: return st->update_s;
    default: return 0;
    }
}

/* The rendezvous, evaluated on its own (no replicas: no all-reduce): each
 * worker runs its list; a SEND or RECV waits until the peer's next op is
 * its counterpart, then both take max(their clocks) + latency + bytes /
 * bandwidth.  Returns the end of the last op, or -1 when the lists stop
 * with ops left (a deadlock). */
static double rendezvous_end(const plan *p, const sched *sc, int comm_off)
{
    int n = sc->n_dev;
    int64_t *pc = cl_malloc((size_t)n * sizeof *pc);
    double *t = cl_calloc((size_t)n, sizeof *t);
    for (int w = 0; w < n; w++) pc[w] = sc->off[w];
    for (int moved = 1; moved;) {
        moved = 0;
        for (int w = 0; w < n; w++)
            while (pc[w] < sc->off[w + 1]) {
                const sched_op *op = &sc->ops[pc[w]];
                if (op->kind != SCHED_SEND && op->kind != SCHED_RECV) {
                    t[w] += op_s(p, op);
                    pc[w]++;
                    moved = 1;
                    continue;
                }
                int v = op->peer;
                if (pc[v] >= sc->off[v + 1]) break;
                const sched_op *o2 = &sc->ops[pc[v]];
                int other = op->kind == SCHED_SEND ? SCHED_RECV : SCHED_SEND;
                if (o2->kind != other || o2->peer != w || o2->micro != op->micro || o2->iter != op->iter ||
                    (o2->flags & SCHED_GRAD) != (op->flags & SCHED_GRAD))
                    break;
                const cluster_link *l = cluster_link_between(&p->cluster, sc->dev[w], sc->dev[v]);
                double end = fmax(t[w], t[v]) + (comm_off ? 0 : l->latency_s + op->bytes / l->bw_Bps);
                t[w] = t[v] = end;
                pc[w]++;
                pc[v]++;
                moved = 1;
            }
    }
    double T = 0;
    for (int w = 0; w < n; w++) {
        if (pc[w] < sc->off[w + 1]) T = -HUGE_VAL;
        T = fmax(T, t[w]);
    }
    free(pc);
    free(t);
    return T < 0 ? -1 : T;
}

/* Simulate sc on p; the run's makespan (-1 and a message when it fails). */
static double sim_end(const plan *p, const sched *sc, int comm_off, double *iteration)
{
    cl_err e = {0};
    sim_opts o = {.comm_off = comm_off};
    sim *s = sim_create(p, sc, &o, &e);
    sim_result r;
    int rc = s ? sim_run(s, &r, &e) : CL_EINPUT;
    sim_destroy(s);
    if (rc) {
        fprintf(stderr, "\n  %s\n", e.msg);
        return -1;
    }
    double T = r.makespan_s;
    if (iteration) *iteration = r.iteration_s;
    sim_result_free(&r);
    return T;
}

/* F/B subsequence of worker w's list equal in a and b? */
static int same_compute(const sched *a, const sched *b, int w)
{
    int64_t i = a->off[w], j = b->off[w];
    for (;;) {
        while (i < a->off[w + 1] && (a->ops[i].kind == SCHED_SEND || a->ops[i].kind == SCHED_RECV)) i++;
        while (j < b->off[w + 1] && (b->ops[j].kind == SCHED_SEND || b->ops[j].kind == SCHED_RECV)) j++;
        if (i == a->off[w + 1] || j == b->off[w + 1]) return i == a->off[w + 1] && j == b->off[w + 1];
        if (a->ops[i].kind != b->ops[j].kind || a->ops[i].stage != b->ops[j].stage ||
            a->ops[i].micro != b->ops[j].micro || a->ops[i].iter != b->ops[j].iter)
            return 0;
        i++;
        j++;
    }
}

/* 400 random deepspeed plans, 1-8 stages, 1-64 microbatches, one or two
 * iterations, communication on and off:
 * - the lists pass sched_check, keep 1f1b's compute order, and run to the
 *   end under blocking transfers (no deadlock);
 * - without replicas the simulated run ends exactly when the rendezvous
 *   evaluator above says;
 * - blocking never makes a run faster: the blocking run >= DeepSpeed's
 *   order with non-blocking transfers >= cleave's 1f1b order (the plan
 *   for another framework), in iteration and makespan.  So every bound
 *   that held for the simulator's non-blocking replay (the planner's
 *   pruning bounds: docs/planner.md) holds for deepspeed plans too;
 * - the fuzz oracle's properties (tests/fuzz/gen.h) hold. */
static void test_random_deepspeed_plans(void)
{
    rng_state = 0x5eed15b10c4ull;
    int bad = 0, n_cmp = 0, slower = 0;
    for (int it = 0; it < 400; it++) {
        int r = it % 4 == 3 ? irand(2, 3) : 1;
        plan p;
        rand_plan(&p, r);
        int iters = irand(1, 2), comm_off = it % 5 == 4;
        int m = p.n_micro;
        cl_err e = {0};
        sched ds, any;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, m, iters, &ds, &e), CL_OK);
        p.framework = PLAN_FOR_ANY;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, m, iters, &any, &e), CL_OK);
        p.framework = PLAN_FOR_DEEPSPEED;
        const char *why = NULL;
        if (!ds.blocking_p2p || any.blocking_p2p) why = "blocking flag";
        else if (sched_check(&p, &ds, "test", &e)) why = e.msg;
        for (int w = 0; w < ds.n_dev && !why; w++)
            if (!same_compute(&ds, &any, w)) why = "compute order differs from 1f1b's";
        double it_b = 0, it_nb = 0, it_c = 0;
        double Tb = why ? 0 : sim_end(&p, &ds, comm_off, &it_b);
        if (!why && Tb < 0) why = "blocking run failed (deadlock?)";
        if (!why && r == 1) {
            double want = rendezvous_end(&p, &ds, comm_off);
            if (want < 0) why = "the evaluator deadlocked";
            else if (test_rel(Tb, want) > 1e-9) why = "makespan differs from the rendezvous evaluator";
        }
        if (!why) {
            ds.blocking_p2p = 0; /* the same lists, transfers posted and left */
            double Tnb = sim_end(&p, &ds, comm_off, &it_nb);
            ds.blocking_p2p = 1;
            p.framework = PLAN_FOR_ANY;
            double Tc = sim_end(&p, &any, comm_off, &it_c);
            p.framework = PLAN_FOR_DEEPSPEED;
            if (Tnb < 0 || Tc < 0) why = "a non-blocking run failed";
            else if (Tb < Tnb * (1 - 1e-12) || it_b < it_nb * (1 - 1e-12)) why = "blocking made a run faster";
            else if (Tnb < Tc * (1 - 1e-12) || it_nb < it_c * (1 - 1e-12)) why = "DeepSpeed's order ran faster than 1f1b's";
            n_cmp++;
            slower += it_b > it_c * (1 + 1e-9);
        }
        if (!why) {
            gen_run run = {.kind = SCHED_1F1B, .micro = m, .iters = iters, .comm_off = comm_off};
            p.comm_off = comm_off;
            const char *broken = NULL;
            if (gen_sim_check(&p, &run, NULL, &broken, &e) || broken) why = broken ? broken : e.msg;
        }
        if (why) {
            fprintf(stderr, "\n  plan %d (p %d, r %d, m %d, %d iterations, comm %s): %s\n", it, p.n_stages, r, m,
                    iters, comm_off ? "off" : "on", why);
            bad++;
        }
        sched_free(&ds);
        sched_free(&any);
        rand_plan_free(&p);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(n_cmp == 400);
    CU_ASSERT(slower > 200); /* blocking costs something on most plans */
}

/* The planner's closed form (plan_predict: it ranks plans too large to
 * replay) prices a deepspeed plan's blocking transfers as its stages' busy
 * time: exactly on two uniform stages, where it is (m - 1)(f + b + 2c) +
 * 2(f + b) + 2c, the closed form above; and on 300 random plans with no
 * replicas and one link level (where the closed form's link is each
 * pair's) within 0.9 to 1.2 of the replay (measured 0.944 to 1.145;
 * without the blocking term 0.518 to 1.144, as optimistic as half). */
static void test_closed_form_blocking(void)
{
    const cluster_link l = {2e9, 7e-6};
    for (int m = 1; m <= 64; m *= 4) {
        plan p;
        cl_err e = {0};
        sim_uniform u = uni(2, m, 1.5e-3, 3.25e-3, 6e6, l);
        CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &u, &e), CL_OK);
        /* plan_validate wants layers: one a stage */
        p.model.n_layers = 2;
        p.model.layers = cl_calloc(2, sizeof *p.model.layers);
        model_block_init(&p.model.layers[0], "l0", 1e6, 1000, 1024, 0);
        model_block_init(&p.model.layers[1], "l1", 1e6, 1000, 1024, 0);
        p.model.input = (model_shape){1, {256, 0, 0}};
        CU_ASSERT_EQUAL_FATAL(model_derive(&p.model, "chain", &e), CL_OK);
        for (int s = 0; s < 2; s++) {
            p.stages[s].n_layers = 1;
            p.stages[s].layers = cl_malloc(sizeof(int));
            p.stages[s].layers[0] = s;
        }
        p.framework = PLAN_FOR_DEEPSPEED;
        plan_pred cf;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(plan_predict(&p, &(plan_predict_opts){.comm = 1}, &cf, NULL, &e), CL_OK);
        CU_ASSERT_EQUAL_FATAL(sim_predict(&p, &r, &e), CL_OK);
        CU_ASSERT(test_rel(cf.iteration_s, r.iteration_s) < 1e-12);
        sim_result_free(&r);
        model_free(&p.model);
        sim_uniform_free(&p);
    }
    rng_state = 0xc105edull;
    double lo = HUGE_VAL, hi = 0;
    int bad = 0;
    for (int it = 0; it < 300; it++) {
        plan p;
        rand_plan(&p, 1);
        p.cluster.links[CLUSTER_INTER] = p.cluster.links[CLUSTER_INTRA];
        plan_pred cf;
        sim_result r;
        cl_err e = {0};
        if (plan_predict(&p, &(plan_predict_opts){.comm = 1}, &cf, NULL, &e) || sim_predict(&p, &r, &e)) {
            fprintf(stderr, "\n  plan %d: %s\n", it, e.msg);
            bad++;
        } else {
            lo = fmin(lo, cf.iteration_s / r.iteration_s);
            hi = fmax(hi, cf.iteration_s / r.iteration_s);
            sim_result_free(&r);
        }
        rand_plan_free(&p);
    }
    CU_ASSERT_EQUAL(bad, 0);
    if (!(lo >= 0.9 && hi <= 1.2)) fprintf(stderr, "\n  closed form / replay %.3f .. %.3f\n", lo, hi);
    CU_ASSERT(lo >= 0.9 && hi <= 1.2);
}

/* Other frameworks, and deepspeed plans DeepSpeed would not run (stages of
 * unequal replicas) or under other schedules, keep cleave's lists and
 * non-blocking transfers: the lists are byte for byte those of a plan for
 * no framework, and so is the replay. */
static void test_others_unchanged(void)
{
    rng_state = 0x0ddba11ull;
    int bad = 0;
    const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1};
    for (int it = 0; it < 60; it++) {
        plan p;
        rand_plan(&p, 1 + it % 2);
        sched_kind k = kinds[it % 3];
        plan_for fw = (plan_for)(it % 4 == 0 ? PLAN_FOR_DEEPSPEED : 1 + it % 3);
        if (fw == PLAN_FOR_DEEPSPEED && k == SCHED_1F1B) k = SCHED_GPIPE;
        if (it % 6 == 5 && p.n_stages > 1) { /* unequal replicas: cleave's order even for deepspeed */
            fw = PLAN_FOR_DEEPSPEED;
            k = SCHED_1F1B;
            p.stages[0].n_replicas = 1;
        }
        p.schedule = k;
        cl_err e = {0};
        sched a, b;
        p.framework = fw;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, k, p.n_micro, 1, &a, &e), CL_OK);
        double ta, ia, tb, ib;
        ta = sim_end(&p, &a, 0, &ia);
        p.framework = PLAN_FOR_ANY;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, k, p.n_micro, 1, &b, &e), CL_OK);
        tb = sim_end(&p, &b, 0, &ib);
        if (a.blocking_p2p || a.n_ops != b.n_ops || memcmp(a.off, b.off, (size_t)(a.n_dev + 1) * sizeof *a.off) ||
            memcmp(a.ops, b.ops, (size_t)a.n_ops * sizeof *a.ops) || ta != tb || ia != ib) {
            fprintf(stderr, "\n  plan %d (%s, %s): lists or replay differ\n", it, sched_kind_name(k),
                    plan_for_name(fw));
            bad++;
        }
        sched_free(&a);
        sched_free(&b);
        rand_plan_free(&p);
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* `cleave sim --dump-schedule` of a deepspeed plan writes "transfers":
 * "blocking", and loading it gives the same lists, blocking again. */
static void test_json_keeps_blocking(void)
{
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &(sim_uniform){.stages = 3, .micro = 4, .schedule = SCHED_1F1B,
                                                              .fwd_s = 1e-3, .bwd_in_s = 2e-3, .act_bytes = 1e6,
                                                              .intra = {1e9, 1e-6}, .inter = {1e9, 1e-6}},
                                           &e), CL_OK);
    for (int fw = 0; fw < 2; fw++) {
        p.framework = fw ? PLAN_FOR_DEEPSPEED : PLAN_FOR_ANY;
        sched a, b;
        CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, 4, 1, &a, &e), CL_OK);
        cJSON *j = sched_to_json(&a);
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "transfers");
        CU_ASSERT(fw ? tr && cJSON_IsString(tr) && !strcmp(tr->valuestring, "blocking") : !tr);
        CU_ASSERT_EQUAL_FATAL(sched_from_json(&p, j, "dump.json", &b, &e), CL_OK);
        CU_ASSERT_EQUAL(b.blocking_p2p, fw);
        CU_ASSERT(a.n_ops == b.n_ops && !memcmp(a.off, b.off, (size_t)(a.n_dev + 1) * sizeof *a.off));
        for (int64_t i = 0; i < a.n_ops && i < b.n_ops; i++)
            CU_ASSERT(a.ops[i].kind == b.ops[i].kind && a.ops[i].micro == b.ops[i].micro &&
                      a.ops[i].peer == b.ops[i].peer && a.ops[i].flags == b.ops[i].flags);
        double ta = sim_end(&p, &a, 0, NULL), tb = sim_end(&p, &b, 0, NULL);
        CU_ASSERT(ta > 0 && ta == tb);
        cJSON_Delete(j);
        sched_free(&a);
        sched_free(&b);
    }
    sim_uniform_free(&p);
}

/* A blocking schedule that cannot run says so (cleave's own 1f1b, which
 * posts and moves on, does not meet its neighbour in DeepSpeed's order);
 * the message names the blocking SEND. */
static void test_blocking_deadlock_reported(void)
{
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&p, &(sim_uniform){.stages = 2, .micro = 2, .schedule = SCHED_1F1B,
                                                              .fwd_s = 1e-3, .bwd_in_s = 1e-3, .act_bytes = 1e3,
                                                              .intra = {1e9, 0}, .inter = {1e9, 0}},
                                           &e), CL_OK);
    /* cleave's 1F1B on two stages: stage 1 runs F0 B0 F1 B1 and sends G0
     * before receiving A1, while stage 0 sends A1 before receiving G0 */
    sched sc;
    CU_ASSERT_EQUAL_FATAL(sched_build(&p, SCHED_1F1B, 2, 1, &sc, &e), CL_OK);
    CU_ASSERT(!sc.blocking_p2p);
    sc.blocking_p2p = 1; /* cleave's own order under rendezvous */
    sim_opts o = {0};
    sim *s = sim_create(&p, &sc, &o, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    sim_result r;
    CU_ASSERT_EQUAL(sim_run(s, &r, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "blocking SEND"));
    sim_destroy(s);
    sched_free(&sc);
    sim_uniform_free(&p);
}

/* `cleave sim` of a plan made with `--for deepspeed` says its transfers
 * block; the same question `--for torch` does not. */
static void test_cli_says_blocking(void)
{
    char pds[512], pt[512];
    char *dir = test_scratch(sizeof pds, "ds.json", pds, "torch.json", pt, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    const char *q = "plan --model models/gpt2-1.5b.json --device A100-80GB --devices 8 --per-node 4 --batch 16 "
                    "--optimizer adam";
    for (int ds = 0; ds < 2; ds++) {
        char args[1400], *out, *err;
        snprintf(args, sizeof args, "%s --for %s -o %s", q, ds ? "deepspeed" : "torch", ds ? pds : pt);
        CU_ASSERT_EQUAL_FATAL(test_run_cli(args, &out, &err), 0);
        free(out);
        free(err);
        snprintf(args, sizeof args, "sim %s", ds ? pds : pt);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        CU_ASSERT((strstr(out, "pipeline transfers: blocking, in DeepSpeed's order") != NULL) == ds);
        free(out);
        free(err);
    }
    test_rmtree(dir);
}

TEST_SUITE(sim_blocking)
{
    test_add_suite("sim_blocking");
    test_add("deepspeed 1f1b lists are DeepSpeed's TrainSchedule, transfers in place", test_order_is_deepspeeds);
    test_add("two stages, blocking: (m + 1)(F + B) + 2 m c", test_two_stage_closed_form);
    test_add("random deepspeed plans: no deadlock, the rendezvous, never faster", test_random_deepspeed_plans);
    test_add("the planner's closed form prices the blocking transfers", test_closed_form_blocking);
    test_add("other frameworks and schedules: lists and replay unchanged", test_others_unchanged);
    test_add("the schedule file keeps \"transfers\": \"blocking\"", test_json_keeps_blocking);
    test_add("cleave sim says a deepspeed plan's transfers block", test_cli_says_blocking);
    test_add("cleave's own 1f1b under blocking transfers deadlocks, and says so", test_blocking_deadlock_reported);
}
