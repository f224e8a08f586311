/* test_sim_closed.c - the simulator against closed forms (equal stage times,
 * free communication) and against the schedule module's memory formulas. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "test.h"

static const cluster_link fast = {1e12, 0};

/* Simulate a uniform p-stage plan; comm_off makes transfers free. */
static int run_uniform(sim_uniform u, int comm_off, int iters, sim_result *r)
{
    cl_err e = {0};
    plan p;
    if (sim_uniform_plan(&p, &u, &e)) return -1;
    int P = u.stages;
    if (!iters) iters = sched_default_iters(u.schedule, P, u.micro);
    sched sc;
    int rc = sched_build(&p, u.schedule, u.micro, iters, &sc, &e);
    if (!rc) rc = sched_check(&p, &sc, "test", &e);
    if (!rc) {
        sim_opts o = {.comm_off = comm_off};
        sim *s = sim_create(&p, &sc, &o, &e);
        rc = s ? sim_run(s, r, &e) : e.code;
        sim_destroy(s);
    }
    if (rc) fprintf(stderr, "run_uniform: %s\n", e.msg);
    sched_free(&sc);
    sim_uniform_free(&p);
    return rc;
}

static sim_uniform uni(sched_kind k, int p, int m, double f, double b, double w)
{
    sim_uniform u = {.stages = p, .chunks = 1, .replicas = 1, .micro = m, .schedule = k,
                     .fwd_s = f, .bwd_in_s = b, .bwd_w_s = w, .act_bytes = 1 << 20,
                     .stash_bytes = 1000, .param_bytes = 4000, .intra = fast, .inter = fast};
    return u;
}

static void test_gpipe_1f1b_closed_form(void)
{
    int ps[] = {1, 2, 3, 4, 7, 8, 16};
    int ms[] = {1, 2, 3, 5, 8, 16, 33};
    double F = 1.25e-3, B = 1.5e-3, W = 1.0e-3; /* fused backward = B + W */
    int bad = 0, n = 0;
    for (int kk = 0; kk < 2; kk++) {
        sched_kind k = kk ? SCHED_1F1B : SCHED_GPIPE;
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
            for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
                int p = ps[i], m = ms[j];
                sim_result r;
                if (run_uniform(uni(k, p, m, F, B, W), 1, 1, &r)) { bad++; continue; }
                double it = (m + p - 1) * (F + B + W);
                double bub = (double)(p - 1) / (m + p - 1);
                if (test_rel(r.iteration_s, it) > 1e-9 || fabs(r.bubble - bub) > 1e-9 * (bub > 1 ? bub : 1)) {
                    fprintf(stderr, "%s p=%d m=%d: iteration %.12g want %.12g, bubble %.12g want %.12g\n",
                            sched_kind_name(k), p, m, r.iteration_s, it, r.bubble, bub);
                    bad++;
                }
                n++;
                sim_result_free(&r);
            }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(n, 2 * 7 * 7);
}

static void test_interleaved_cuts_bubble(void)
{
    /* per device, chunk times are the stage's divided by v; Megatron's bubble
     * time (p - 1)(F + B) / v over m (F + B) of work */
    double F = 1e-3, B = 2e-3;
    int bad = 0;
    int ps[] = {2, 3, 4, 8};
    int vs[] = {1, 2, 3, 4};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++)
            for (int mm = 1; mm <= 4; mm *= 2) {
                int p = ps[i], v = vs[j], m = mm * p;
                sim_uniform u = uni(SCHED_INTERLEAVED, p, m, F, B, 0);
                u.chunks = v;
                sim_result r;
                if (run_uniform(u, 1, 1, &r)) { bad++; continue; }
                double it = m * (F + B) + (p - 1) * (F + B) / v;
                double bub = (p - 1) * (F + B) / v / it;
                if (test_rel(r.iteration_s, it) > 1e-9 || test_rel(r.bubble, bub) > 1e-9) {
                    fprintf(stderr, "interleaved p=%d v=%d m=%d: %.12g want %.12g\n", p, v, m,
                            r.iteration_s, it);
                    bad++;
                }
                sim_result_free(&r);
            }
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_zbh1_bubble(void)
{
    /* idle time per device (p - 1)(F + B - W) with B the input gradient and W
     * the weight gradient, for m >= p and W <= F; 1F1B's is (p - 1)(F + B + W) */
    double cases[][3] = {{1, 1, 1}, {1, 2, 1}, {2, 1, 0.5}, {3, 1, 1}, {1.5, 1.25, 0.75}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int p = 1; p <= 8; p++)
            for (int m = p; m <= 4 * p; m += p) {
                double F = cases[c][0] * 1e-3, B = cases[c][1] * 1e-3, W = cases[c][2] * 1e-3;
                sim_result r, r1;
                if (run_uniform(uni(SCHED_ZBH1, p, m, F, B, W), 1, 1, &r)) { bad++; continue; }
                if (run_uniform(uni(SCHED_1F1B, p, m, F, B, W), 1, 1, &r1)) { bad++; continue; }
                double want = (p - 1) * (F + B - W), want1 = (p - 1) * (F + B + W);
                for (int d = 0; d < r.n_dev; d++) {
                    double idle = r.dev[d].idle_s + r.dev[d].comm_wait_s;
                    double idle1 = r1.dev[d].idle_s + r1.dev[d].comm_wait_s;
                    if (fabs(idle - want) > 1e-9 * r.iteration_s || fabs(idle1 - want1) > 1e-9 * r1.iteration_s) {
                        fprintf(stderr, "zb-h1 F=%g B=%g W=%g p=%d m=%d dev %d: idle %.12g want %.12g "
                                "(1f1b %.12g want %.12g)\n", F, B, W, p, m, d, idle, want, idle1, want1);
                        bad++;
                    }
                }
                sim_result_free(&r);
                sim_result_free(&r1);
            }
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_one_stage_is_sum(void)
{
    /* one stage: no pipelining, iteration = m (F + B + W) for every kind */
    double F = 1.1e-3, B = 2.3e-3, W = 0.7e-3;
    for (int k = 0; k < SCHED_COUNT; k++) {
        int m = 7;
        sim_result r;
        CU_ASSERT_EQUAL_FATAL(run_uniform(uni((sched_kind)k, 1, m, F, B, W), 0, 0, &r), 0);
        CU_ASSERT(test_rel(r.iteration_s, m * (F + B + W)) < 1e-12);
        CU_ASSERT(test_rel(r.speedup, 1.0) < 1e-12);
        sim_result_free(&r);
    }
    /* sequential on a p-stage plan: one device does everything */
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run_uniform(uni(SCHED_SEQUENTIAL, 5, 3, F, B, W), 0, 1, &r), 0);
    CU_ASSERT_EQUAL(r.n_dev, 1);
    CU_ASSERT(test_rel(r.iteration_s, 5 * 3 * (F + B + W)) < 1e-12);
    CU_ASSERT(fabs(r.bubble) < 1e-12);
    sim_result_free(&r);
}

static void test_inflight_matches_formula(void)
{
    /* the measured peak of live stashed activations per device equals
     * sched_inflight, and the weight versions equal sched_versions */
    int bad = 0;
    for (int k = SCHED_GPIPE; k < SCHED_COUNT; k++)
        for (int p = 1; p <= 6; p++)
            for (int m = 1; m <= 12; m++) {
                int vs[] = {1, 2, 3};
                for (int vi = 0; vi < 3; vi++) {
                    int v = vs[vi];
                    if (v > 1 && (k != SCHED_INTERLEAVED || m % p)) continue;
                    sim_uniform u = uni((sched_kind)k, p, m, 1e-3, 2e-3, 1e-3);
                    u.chunks = v;
                    int iters = sched_default_iters((sched_kind)k, p, m);
                    int total = m;
                    sim_result r;
                    if (run_uniform(u, 0, iters, &r)) { bad++; continue; }
                    for (int s = 0; s < p; s++) {
                        int want = sched_inflight((sched_kind)k, p, s, total, v);
                        int wantv = sched_versions((sched_kind)k, p, s, total);
                        if (r.dev[s].peak_stash != want || r.dev[s].peak_versions != wantv) {
                            fprintf(stderr, "%s p=%d m=%d v=%d stage %d: stash %d want %d, versions %d want %d\n",
                                    sched_kind_name((sched_kind)k), p, m, v, s, r.dev[s].peak_stash, want,
                                    r.dev[s].peak_versions, wantv);
                            bad++;
                        }
                    }
                    sim_result_free(&r);
                }
            }
    CU_ASSERT_EQUAL(bad, 0);
}

/* A plan whose stage j has r[j] replicas (uniform times). */
static void replicated_plan(plan *pl, sched_kind k, int P, const int *r, int m)
{
    cl_err e = {0};
    int D = 0;
    for (int j = 0; j < P; j++) D += r[j];
    sim_uniform u = uni(k, D, m, 1e-3, 2e-3, 1e-3);
    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(pl, &u, &e), 0);
    for (int j = P; j < D; j++) free(pl->stages[j].devices);
    pl->n_stages = P;
    for (int j = 0, dev = 0; j < P; j++) {
        plan_stage *st = &pl->stages[j];
        st->n_replicas = r[j];
        st->devices = cl_realloc(st->devices, (size_t)r[j] * sizeof(int));
        for (int q = 0; q < r[j]; q++) st->devices[q] = dev++;
        st->act_out_bytes = j == P - 1 ? 0 : st->act_out_bytes;
    }
}

static void test_replicated_inflight(void)
{
    /* per replica, the measured peaks equal sched_inflight_rep and
     * sched_versions_rep (the most loaded replica of each stage) */
    static const int reps[][4] = {{1, 2, 1, 1}, {2, 1, 3, 1}, {1, 4, 2, 1}, {3, 3, 1, 2}, {2, 2, 2, 2}};
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_PIPEDREAM, SCHED_FBP};
    int bad = 0;
    for (size_t c = 0; c < sizeof reps / sizeof *reps; c++)
        for (size_t ki = 0; ki < sizeof kinds / sizeof *kinds; ki++)
            for (int m = 12; m <= 36; m += 12) {
                sched_kind k = kinds[ki];
                int P = 4, D = 0;
                for (int j = 0; j < P; j++) D += reps[c][j];
                plan pl;
                replicated_plan(&pl, k, P, reps[c], m);
                cl_err e = {0};
                sched sc;
                sim_result r;
                int rc = sched_build(&pl, k, m, sched_default_iters(k, P, m), &sc, &e);
                if (!rc) rc = sched_check(&pl, &sc, "built", &e);
                sim_opts o = {0};
                sim *s = rc ? NULL : sim_create(&pl, &sc, &o, &e);
                if (!rc) rc = s ? sim_run(s, &r, &e) : e.code;
                if (rc) {
                    fprintf(stderr, "replicated %s: %s\n", sched_kind_name(k), e.msg);
                    bad++;
                } else {
                    for (int j = 0, depth = D, w = 0; j < P; depth -= reps[c][j], j++) {
                        int most = 0, mostv = 0;
                        for (int q = 0; q < reps[c][j]; q++, w++) {
                            if (r.dev[w].peak_stash > most) most = r.dev[w].peak_stash;
                            if (r.dev[w].peak_versions > mostv) mostv = r.dev[w].peak_versions;
                        }
                        int want = sched_inflight_rep(k, D, depth, reps[c][j], m, 1);
                        int wantv = sched_versions_rep(k, depth, reps[c][j]);
                        if (most != want || mostv != wantv) {
                            fprintf(stderr, "%s r=%d,%d,%d,%d m=%d stage %d: stash %d want %d, versions %d "
                                    "want %d\n", sched_kind_name(k), reps[c][0], reps[c][1], reps[c][2],
                                    reps[c][3], m, j, most, want, mostv, wantv);
                            bad++;
                        }
                    }
                    sim_result_free(&r);
                }
                sim_destroy(s);
                sched_free(&sc);
                sim_uniform_free(&pl);
            }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Interleaved plans whose chunks stash different bytes (as a last device
 * holding the head does): the simulator's peak stash bytes on every device
 * of every replica equal sched_interleaved_stash_peak, which walks
 * Megatron-LM's order without timing.  Positions of 1-3 replicas, so both
 * of the simulator's orders are met (each replica its own microbatches, or
 * the device order filtered when they are not a multiple of p).  The
 * bound the planner used before, the largest chunk's stash times
 * sched_inflight_rep, is never below the walk unreplicated (it was a
 * bound), and above it in most cases (what the walk is for). */
static void test_interleaved_stash_peak(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int bad = 0, n = 0, looser = 0, filtered = 0, below = 0;
    for (int p = 1; p <= 5; p++)
        for (int v = 2; v <= 4; v++)
            for (int r = 1; r <= 3; r++)
                for (int k = 1; k <= 4; k++) {
                    int m = k * p * (k == 4 ? r : 1);
                    sim_uniform u = uni(SCHED_INTERLEAVED, p, m, 1e-3, 2e-3, 1e-3);
                    u.chunks = v;
                    u.replicas = r;
                    u.act_bytes = 0; /* no buffers: the peak above the model state is the stash */
                    cl_err e = {0};
                    plan pl;
                    CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&pl, &u, &e), 0);
                    for (int st = 0; st < p * v; st++) {
                        x = x * 6364136223846793005ull + 1442695040888963407ull;
                        pl.stages[st].stash_bytes = 1000.0 * (double)(1 + (x >> 33) % 1000);
                    }
                    sched sc;
                    sim_result res;
                    int rc = sched_build(&pl, SCHED_INTERLEAVED, m, 1, &sc, &e);
                    sim_opts o = {.comm_off = 1};
                    sim *sm = rc ? NULL : sim_create(&pl, &sc, &o, &e);
                    if (!rc) rc = sm ? sim_run(sm, &res, &e) : e.code;
                    if (rc) {
                        fprintf(stderr, "\n  interleaved p=%d v=%d r=%d m=%d: %s\n", p, v, r, m, e.msg);
                        bad++;
                    } else {
                        for (int j = 0; j < p; j++) {
                            double st[4], most = 0;
                            for (int c = 0; c < v; c++) {
                                st[c] = pl.stages[c * p + j].stash_bytes;
                                if (st[c] > most) most = st[c];
                            }
                            double want = sched_interleaved_stash_peak(p, v, j, m, r, st);
                            double old = most * sched_inflight_rep(SCHED_INTERLEAVED, p * r, (p - j) * r, r, m, v);
                            double got = 0; /* the most loaded replica's */
                            for (int q = 0; q < r; q++)
                                for (int w = 0; w < res.n_dev; w++)
                                    if (res.dev[w].device == pl.stages[j].devices[q] && res.dev[w].at_peak.stash > got)
                                        got = res.dev[w].at_peak.stash;
                            filtered += j == 0 && ((m + r - 1) / r) % p != 0;
                            if (got != want) {
                                fprintf(stderr, "\n  interleaved p=%d v=%d r=%d m=%d position %d: "
                                        "simulated %.0f, walked %.0f\n", p, v, r, m, j, got, want);
                                bad++;
                            }
                            n++;
                            looser += old > want;
                            below += r == 1 && old < want;
                        }
                        sim_result_free(&res);
                    }
                    sim_destroy(sm);
                    sched_free(&sc);
                    sim_uniform_free(&pl);
                }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(below, 0);
    CU_ASSERT_TRUE(filtered > 0);
    CU_ASSERT_TRUE(looser > n / 2);
}

static void test_named_memory_claims(void)
{
    /* the statements, checked directly */
    int p = 4, m = 8;
    sim_result r;
    CU_ASSERT_EQUAL_FATAL(run_uniform(uni(SCHED_1F1B, p, m, 1, 2, 0), 0, 1, &r), 0);
    CU_ASSERT_EQUAL(r.dev[0].peak_stash, p);        /* 1F1B: p on stage 0 */
    CU_ASSERT_EQUAL(r.dev[p - 1].peak_stash, 1);
    sim_result_free(&r);
    CU_ASSERT_EQUAL_FATAL(run_uniform(uni(SCHED_GPIPE, p, m, 1, 2, 0), 0, 1, &r), 0);
    CU_ASSERT_EQUAL(r.dev[0].peak_stash, m);        /* GPipe: m */
    sim_result_free(&r);
    CU_ASSERT_EQUAL_FATAL(run_uniform(uni(SCHED_PIPEDREAM, p, m, 1, 2, 0), 0, 0, &r), 0);
    CU_ASSERT_EQUAL(r.dev[0].peak_versions, p);     /* PipeDream: p versions on stage 0 */
    /* the extra versions are in the memory peak: (p - 1) x params */
    CU_ASSERT_EQUAL(r.dev[0].at_peak.versions, (p - 1) * 4000.0);
    sim_result_free(&r);
    CU_ASSERT_EQUAL_FATAL(run_uniform(uni(SCHED_FBP, p, m, 1, 2, 0), 0, 0, &r), 0);
    CU_ASSERT_EQUAL(r.dev[0].peak_versions, 1);     /* FBP: one */
    CU_ASSERT_EQUAL(r.dev[0].at_peak.versions, 0.0);
    sim_result_free(&r);
}

static void test_async_steady_state(void)
{
    /* PipeDream and FBP never flush: in steady state every device is busy, so
     * an iteration takes m (F + B) however many stages */
    double F = 1e-3, B = 2e-3;
    for (int k = SCHED_PIPEDREAM; k <= SCHED_FBP; k++)
        for (int p = 1; p <= 8; p *= 2)
            for (int m = 1; m <= 16; m *= 4) {
                sim_result r;
                CU_ASSERT_EQUAL_FATAL(run_uniform(uni((sched_kind)k, p, m, F, B, 0), 1, 0, &r), 0);
                CU_ASSERT(test_rel(r.iteration_s, m * (F + B)) < 1e-9);
                CU_ASSERT(fabs(r.bubble) < 1e-9);
                CU_ASSERT(test_rel(r.speedup, p) < 1e-9);
                sim_result_free(&r);
            }
}

static void test_async_unequal_stages(void)
{
    /* With unequal stages and free links, a never-flushing pipeline runs at
     * its slowest stage's pace: an iteration takes m x that stage's F + B,
     * and no device is busy more than the whole iteration.  (A slope taken
     * through the draining last iteration read up to 0.03% short.) */
    static const double factor[] = {1.0, 1.7, 0.6, 1.3, 0.9, 1.1, 0.5, 1.6};
    double F = 1e-3, B = 2e-3;
    int bad = 0;
    for (int k = SCHED_PIPEDREAM; k <= SCHED_FBP; k++)
        for (int p = 2; p <= 8; p += 3)
            for (int m = 1; m <= 16; m *= 2) {
                cl_err e = {0};
                plan pl;
                sim_uniform u = uni((sched_kind)k, p, m, F, B, 0);
                CU_ASSERT_EQUAL_FATAL(sim_uniform_plan(&pl, &u, &e), 0);
                double worst = 0;
                for (int st = 0; st < p; st++) {
                    pl.stages[st].fwd_s = F * factor[st];
                    pl.stages[st].bwd_in_s = B * factor[st];
                    worst = fmax(worst, m * (F + B) * factor[st]);
                }
                sched sc;
                sim_result r = {0};
                int rc = sched_build(&pl, (sched_kind)k, m, sched_default_iters((sched_kind)k, p, m), &sc, &e);
                CU_ASSERT_EQUAL_FATAL(rc, 0);
                sim_opts o = {.comm_off = 1};
                sim *s = sim_create(&pl, &sc, &o, &e);
                CU_ASSERT_PTR_NOT_NULL_FATAL(s);
                CU_ASSERT_EQUAL_FATAL(sim_run(s, &r, &e), 0);
                int ok = test_rel(r.iteration_s, worst) < 1e-9;
                for (int d = 0; d < r.n_dev; d++) ok &= r.dev[d].busy <= 1 + 1e-12;
                if (!ok) {
                    fprintf(stderr, "\n  %s p=%d m=%d: iteration %.9g, slowest stage %.9g\n",
                            sched_kind_name((sched_kind)k), p, m, r.iteration_s, worst);
                    bad++;
                }
                sim_destroy(s);
                sim_result_free(&r);
                sched_free(&sc);
                sim_uniform_free(&pl);
            }
    CU_ASSERT_EQUAL(bad, 0);
}

/* planner/exact.c (plan_exact_mem_free) takes the most in-flight
 * microbatches and weight versions of a whole pipeline at one replica: the
 * counts never rise with the replica count, for every kind, depth,
 * microbatch count and chunk count (checked here by enumeration). */
static void test_counts_fall_with_replicas(void)
{
    int rises = 0, checked = 0;
    for (int k = 0; k < SCHED_COUNT; k++)
        for (int D = 1; D <= 24; D++)
            for (int m = 1; m <= 40; m += 3)
                for (int v = 1; v <= (k == SCHED_INTERLEAVED ? 4 : 1); v++)
                    for (int r = 1; r < D; r++) {
                        checked++;
                        if (sched_inflight_rep((sched_kind)k, D, D, r + 1, m, v) >
                                sched_inflight_rep((sched_kind)k, D, D, r, m, v) ||
                            sched_versions_rep((sched_kind)k, D, r + 1) > sched_versions_rep((sched_kind)k, D, r))
                            rises++;
                    }
    CU_ASSERT(checked > 10000);
    CU_ASSERT_EQUAL(rises, 0);
}

/* sched_inflight_depths (the planner's tables, one replica count at a
 * time) steps its counts without dividing: every value equals
 * sched_inflight_rep / sched_versions_rep's, for every kind, pipeline
 * size (fixed or as deep as the stage), replica count, microbatch and
 * chunk count (by enumeration). */
static void test_inflight_depths(void)
{
    enum { DMAX = 40 };
    int in[DMAX + 1], ver[DMAX + 1], wrong = 0, checked = 0;
    for (int k = 0; k < SCHED_COUNT; k++)
        for (int F = 0; F <= DMAX + 3; F += (F < 12 ? 1 : 7))
            for (int r = 1; r <= DMAX; r++)
                for (int m = 1; m <= 50; m += (m < 10 ? 1 : 9))
                    for (int v = 1; v <= (k == SCHED_INTERLEAVED ? 3 : 1); v++) {
                        for (int d = 0; d <= DMAX; d++) in[d] = ver[d] = -1;
                        sched_inflight_depths((sched_kind)k, F, r, m, v, DMAX, in, ver);
                        for (int d = 0; d < r; d++) wrong += in[d] != -1 || ver[d] != -1; /* untouched */
                        for (int d = r; d <= DMAX; d++, checked++)
                            wrong += in[d] != sched_inflight_rep((sched_kind)k, F > d ? F : d, d, r, m, v) ||
                                     ver[d] != sched_versions_rep((sched_kind)k, d, r);
                    }
    CU_ASSERT(checked > 100000);
    CU_ASSERT_EQUAL(wrong, 0);
}

/* The planner proves that no zb-h1 layout on exactly F devices fits when
 * none fits under GPipe's memory with min(F, m) microbatches (exact_climb.c,
 * zbh1_may_fit): zb-h1 keeps at least GPipe's count there on every stage,
 * at every depth and replica count (by enumeration), and at some depth
 * exactly that many (the first stage's: the bound is the tightest
 * depth-free one).  And that zb-h1 loses where 1f1b does (count.c,
 * zb_h1_loses): zb-h1 keeps at least 1f1b's count at every depth (1f1b's
 * pipeline as deep as the stage), on any F.  And that zb-h1 on F >= m
 * devices has gpipe's memory (count.c, count_twin): never more than
 * gpipe's count with all m microbatches, and exactly that at every depth
 * once F >= m. */
static void test_zbh1_holds_gpipe(void)
{
    int below = 0, tight = 0, cases = 0, below_1f1b = 0, above_gpipe = 0, not_gpipe = 0, at_m = 0;
    for (int F = 1; F <= 40; F++)
        for (int m = 1; m <= 60; m += (m < 12 ? 1 : 7))
            for (int r = 1; r <= F; r++) {
                int g = sched_inflight_rep(SCHED_GPIPE, F, F, r, F < m ? F : m, 1), least = INT32_MAX;
                for (int D = r; D <= F; D++) {
                    int z = sched_inflight_rep(SCHED_ZBH1, F, D, r, m, 1);
                    int gm = sched_inflight_rep(SCHED_GPIPE, F, D, r, m, 1);
                    below += z < g;
                    above_gpipe += z > gm;
                    not_gpipe += F >= m && (z != gm || sched_versions_rep(SCHED_ZBH1, D, r) != sched_versions_rep(SCHED_GPIPE, D, r));
                    at_m += F >= m;
                    below_1f1b += z < sched_inflight_rep(SCHED_1F1B, D, D, r, m, 1) ||
                                  sched_versions_rep(SCHED_ZBH1, D, r) < sched_versions_rep(SCHED_1F1B, D, r);
                    least = z < least ? z : least;
                }
                tight += least == g;
                cases++;
            }
    CU_ASSERT_EQUAL(below, 0);
    CU_ASSERT_EQUAL(tight, cases);
    CU_ASSERT_EQUAL(below_1f1b, 0);
    CU_ASSERT_EQUAL(above_gpipe, 0);
    CU_ASSERT_EQUAL(not_gpipe, 0);
    CU_ASSERT_TRUE(at_m > 1000);
}

TEST_SUITE(sim_closed)
{
    test_add_suite("sim_closed");
    test_add("GPipe and 1F1B: (m + p - 1)(F + B) and bubble (p - 1)/(m + p - 1)", test_gpipe_1f1b_closed_form);
    test_add("interleaved cuts the bubble by v", test_interleaved_cuts_bubble);
    test_add("ZB-H1 idle per device (p - 1)(F + B - W)", test_zbh1_bubble);
    test_add("one stage: iteration = sum of all ops", test_one_stage_is_sum);
    test_add("live stashes and weight versions equal sched_inflight/sched_versions", test_inflight_matches_formula);
    test_add("replicated stages: per-replica peaks equal sched_inflight_rep", test_replicated_inflight);
    test_add("in-flight and version counts never rise with the replicas", test_counts_fall_with_replicas);
    test_add("in-flight and version counts of every depth at once equal the formula's", test_inflight_depths);
    test_add("zb-h1 on F devices keeps at least GPipe's count with min(F, m) microbatches, and 1f1b's; at most GPipe's, all of it from F = m", test_zbh1_holds_gpipe);
    test_add("interleaved: per-chunk stashes walked in Megatron-LM's order = simulated peak", test_interleaved_stash_peak);
    test_add("1F1B p, GPipe m, PipeDream p versions, FBP one", test_named_memory_claims);
    test_add("async kinds reach m (F + B) per iteration", test_async_steady_state);
    test_add("async kinds run at the slowest stage's pace", test_async_unequal_stages);
}
