/* test_linkprof.c - the link profiler: the least-squares fit against data
 * with a known latency and bandwidth, a short real ping-pong, and the
 * cluster file it writes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "exec/run/chan.h"
#include "exec/nn/gemm.h"
#include "exec/probe/linkprof.h"
#include "profiles/cluster.h"
#include "test.h"

/* Exact data t = L + b / bw over 8 B .. 64 MiB: the fit must give L and bw
 * back to rounding, with R^2 = 1 and no residual, weighted or not. */
static void test_fit_exact(void)
{
    const double L = 3.7e-6, bw = 5.5e9;
    double b[24], t[24], ones[24];
    for (int i = 0; i < 24; i++) {
        b[i] = 8.0 * pow(2, i);
        t[i] = L + b[i] / bw;
        ones[i] = 1;
    }
    exec_link_fit f;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t, NULL, 24, &f, &e), CL_OK);
    CU_ASSERT(test_rel(f.latency_s, L) < 1e-9);
    CU_ASSERT(test_rel(f.bw_Bps, bw) < 1e-9);
    CU_ASSERT(fabs(f.r2 - 1) < 1e-12);
    CU_ASSERT(f.max_rel < 1e-9);
    CU_ASSERT(f.rms_rel < 1e-9);
    CU_ASSERT_EQUAL(f.n, 24);
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t, ones, 24, &f, &e), CL_OK);
    CU_ASSERT(test_rel(f.latency_s, L) < 1e-9);
    CU_ASSERT(test_rel(f.bw_Bps, bw) < 1e-9);
    /* two points determine the line */
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b + 3, t + 3, NULL, 2, &f, &e), CL_OK);
    CU_ASSERT(test_rel(f.latency_s, L) < 1e-9);
    CU_ASSERT(test_rel(f.bw_Bps, bw) < 1e-9);
}

/* Noisy data: the weighted fit equals the closed-form weighted normal
 * equations computed here, and recovers the truth within the noise. */
static void test_fit_noise(void)
{
    const double L = 20e-6, bw = 8e9;
    const int n = 24;
    double b[24], t[24];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, 7);
    for (int i = 0; i < n; i++) {
        b[i] = 8.0 * pow(2, i);
        t[i] = (L + b[i] / bw) * (1 + gsl_ran_gaussian(r, 0.02));
    }
    gsl_rng_free(r);
    /* weighted normal equations, w = 1 / t^2 */
    double S = 0, Sx = 0, Sy = 0, Sxx = 0, Sxy = 0;
    for (int i = 0; i < n; i++) {
        double w = 1 / (t[i] * t[i]);
        S += w, Sx += w * b[i], Sy += w * t[i], Sxx += w * b[i] * b[i], Sxy += w * b[i] * t[i];
    }
    double slope = (S * Sxy - Sx * Sy) / (S * Sxx - Sx * Sx), icpt = (Sy - slope * Sx) / S;
    exec_link_fit f;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t, NULL, n, &f, &e), CL_OK);
    CU_ASSERT(test_rel(f.latency_s, icpt) < 1e-6);
    CU_ASSERT(test_rel(1 / f.bw_Bps, slope) < 1e-6);
    CU_ASSERT(test_rel(f.latency_s, L) < 0.05);
    CU_ASSERT(test_rel(f.bw_Bps, bw) < 0.05);
    CU_ASSERT(f.r2 > 0.99 && f.r2 < 1);
    CU_ASSERT(f.max_rel > 0.01 && f.max_rel < 0.1);
    CU_ASSERT(f.latency_se > 0 && f.inv_bw_se > 0);
}

static void test_fit_bad(void)
{
    double b[3] = {8, 8, 8}, t[3] = {1e-6, 1e-6, 1e-6};
    exec_link_fit f;
    cl_err e = {0};
    CU_ASSERT_EQUAL(exec_link_fit_ls(b, t, NULL, 1, &f, &e), CL_EINPUT);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(exec_link_fit_ls(b, t, NULL, 3, &f, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "same size"));
    cl_err_clear(&e);
    double b2[2] = {8, 16}, t2[2] = {1e-6, 0};
    CU_ASSERT_EQUAL(exec_link_fit_ls(b2, t2, NULL, 2, &f, &e), CL_EINPUT);
}

/* A short real ping-pong on threads: every size measured, times positive
 * and not shrinking much with size (64 KiB costs at least what 8 B does,
 * give or take scheduling noise). */
static void test_measure_threads(void)
{
    exec_link_opts o;
    exec_link_opts_default(&o);
    o.max_bytes = 65536;
    o.seconds_per_size = 0.002;
    o.min_reps = 5;
    exec_link_sample s[EXEC_LINK_MAX_SIZES];
    int n = 0;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_measure(&o, s, &n, &e), CL_OK);
    CU_ASSERT_EQUAL(n, 14); /* 8, 16, ..., 65536 */
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(s[i].bytes, 8.0 * pow(2, i));
        CU_ASSERT(s[i].time_s > 0 && s[i].min_s > 0 && s[i].min_s <= s[i].time_s);
        CU_ASSERT(s[i].reps >= 5);
        /* the two kinds of round trip partition the samples */
        CU_ASSERT(s[i].woke >= 0 && s[i].woke <= 1);
        CU_ASSERT(s[i].time_mean_s >= s[i].min_s && s[i].send_exp_s > 0 && s[i].handoff_s > 0);
        if (s[i].woke == 0) CU_ASSERT(s[i].time_woke_s == 0 && s[i].time_spin_s == s[i].time_s);
        if (s[i].woke == 1) CU_ASSERT(s[i].time_spin_s == 0 && s[i].time_woke_s == s[i].time_s);
        /* the expected time weighs the two kinds' medians by their shares */
        CU_ASSERT_DOUBLE_EQUAL(s[i].time_mean_s,
                               (1 - s[i].woke) * s[i].time_spin_s + s[i].woke * s[i].time_woke_s,
                               1e-12);
    }
    o.min_bytes = 4; /* the protocol needs 8-byte messages */
    CU_ASSERT_EQUAL(exec_link_measure(&o, s, &n, &e), CL_EINPUT);
}

/* Wake-ups (exec_notify) are never lost, whether the waiter spins or
 * sleeps when the bump comes: every wait below would last its full max_s
 * (5 s) if the bump were missed, so a return well before that is the
 * check; then a ping-pong of 2000 rounds between two threads on the
 * sleeping path and on the spinning path, where a lost wake-up shows as a
 * wait that returns with the counter unchanged after its full max_s (not
 * a bound on the total time, which a loaded machine stretches). */
typedef struct nt_arg {
    exec_notify *a, *b;
    double delay_s;
    int rounds;
    int timeouts; /* pong's waits that ran out (lost wake-ups) */
} nt_arg;

#define PONG_MAX_S 5.0

/* Wait until n's counter moves past seen; how many waits ran their full
 * PONG_MAX_S without it moving (each one a lost wake-up). */
static int await_move(exec_notify *n, uint64_t seen)
{
    int lost = 0;
    while (exec_notify_events(n) == seen) {
        double t0 = exec_now();
        exec_notify_wait(n, seen, PONG_MAX_S);
        lost += exec_notify_events(n) == seen && exec_now() - t0 >= PONG_MAX_S;
    }
    return lost;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void *bump_later(void *p)
{
    nt_arg *a = p;
    nap(a->delay_s);
    exec_notify_bump(a->a);
    return NULL;
}

static void *pong(void *p)
{
    nt_arg *a = p;
    for (int r = 0; r < a->rounds; r++) {
        uint64_t seen = (uint64_t)r; /* a's counter before round r's ping */
        a->timeouts += await_move(a->a, seen);
        exec_notify_bump(a->b);
    }
    return NULL;
}

static double wait_for_bump(double spin_s, double delay_s)
{
    exec_notify n;
    exec_notify_init(&n, spin_s);
    nt_arg a = {&n, NULL, delay_s, 0, 0};
    pthread_t th;
    uint64_t seen = exec_notify_events(&n);
    double t0 = exec_now();
    pthread_create(&th, NULL, bump_later, &a);
    while (exec_notify_events(&n) == seen && exec_now() - t0 < 5) exec_notify_wait(&n, seen, 5.0);
    double t = exec_now() - t0;
    pthread_join(th, NULL);
    exec_notify_destroy(&n);
    return t;
}

static void test_notify(void)
{
    exec_notify n;
    exec_notify_init(&n, 0);
    uint64_t seen = exec_notify_events(&n);
    exec_notify_bump(&n);
    double t0 = exec_now();
    exec_notify_wait(&n, seen, 5.0); /* already moved: returns at once */
    CU_ASSERT(exec_now() - t0 < 1.0);
    CU_ASSERT_EQUAL(exec_notify_events(&n), seen + 1);
    exec_notify_destroy(&n);
    CU_ASSERT(wait_for_bump(0, 0.02) < 2.0);      /* asleep when bumped        */
    CU_ASSERT(wait_for_bump(2e-3, 0.05) < 2.0);   /* spun 2 ms, then asleep    */
    CU_ASSERT(wait_for_bump(1.0, 0.01) < 0.9);    /* still spinning: never slept */
    for (int spin = 0; spin < 2; spin++) {
        exec_notify a, b;
        exec_notify_init(&a, spin ? 1e-3 : 0);
        exec_notify_init(&b, spin ? 1e-3 : 0);
        nt_arg arg = {&a, &b, 0, 2000, 0};
        pthread_t th;
        int lost = 0;
        pthread_create(&th, NULL, pong, &arg);
        for (int r = 0; r < arg.rounds; r++) {
            exec_notify_bump(&a);
            lost += await_move(&b, (uint64_t)r);
        }
        pthread_join(th, NULL);
        CU_ASSERT_EQUAL(lost + arg.timeouts, 0);
        CU_ASSERT_EQUAL(exec_notify_events(&a), 2000);
        CU_ASSERT_EQUAL(exec_notify_events(&b), 2000);
        exec_notify_destroy(&a);
        exec_notify_destroy(&b);
    }
    /* spinning is allowed until a window of spinning ran less than half
     * of its wall time, then not for the back-off */
    exec_preempt pr;
    memset(&pr, 0, sizeof pr);
    CU_ASSERT(exec_preempt_spin_ok(&pr));
    exec_preempt_note(&pr, 1e-3, 1e-3);
    exec_preempt_note(&pr, 1e-3, 0.9e-3); /* a window, 95% on the core */
    CU_ASSERT(exec_preempt_spin_ok(&pr));
    exec_preempt_note(&pr, 1.5e-3, 0.2e-3);
    CU_ASSERT(exec_preempt_spin_ok(&pr)); /* window not full yet */
    exec_preempt_note(&pr, 1e-3, 0.2e-3); /* 2.5 ms, 16% on the core */
    CU_ASSERT(!exec_preempt_spin_ok(&pr));
}

/* Why a fit is poor (exec_link_explain), on made-up samples whose answer is
 * known: a straight line is not explained; samples where half the round
 * trips woke a sleeping receiver name the share and fit the spinning ones
 * exactly; two exact lines with a break at 1 MiB are found as such. */
static void fill(exec_link_sample *s, int n, double lat, double bw, double lat2, double bw2,
                 double split)
{
    for (int i = 0; i < n; i++) {
        memset(&s[i], 0, sizeof s[i]);
        s[i].bytes = 8.0 * pow(2, i);
        s[i].time_s = s[i].bytes < split ? lat + s[i].bytes / bw : lat2 + s[i].bytes / bw2;
        s[i].time_spin_s = s[i].time_s;
        s[i].reps = 100;
    }
}

static void fit_of(const exec_link_sample *s, int n, exec_link_fit *f)
{
    double b[EXEC_LINK_MAX_SIZES], t[EXEC_LINK_MAX_SIZES];
    for (int i = 0; i < n; i++) b[i] = s[i].bytes, t[i] = s[i].time_s;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t, NULL, n, f, &e), CL_OK);
}

/* Times that fall with the size (the first, small messages slowed by a
 * neighbour): the fit's slope is negative, its bandwidth infinite; the
 * fallback prices bytes at the largest message's end-to-end rate, and a
 * fit with a slope is left alone. */
static void test_fit_slopeless(void)
{
    const double b[4] = {8, 4096, 65536, 1048576}, t[4] = {40e-6, 30e-6, 25e-6, 20e-6};
    exec_link_fit f;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t, NULL, 4, &f, &e), CL_OK);
    CU_ASSERT(!isfinite(f.bw_Bps));
    char why[256] = "";
    CU_ASSERT_EQUAL(exec_link_fit_slopeless(b, t, 4, &f, why, sizeof why), 1);
    CU_ASSERT_DOUBLE_EQUAL(f.bw_Bps, 1048576 / 20e-6, 1e-6 * f.bw_Bps);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "without a slope"));
    const double t2[4] = {1e-6, 2e-6, 10e-6, 100e-6};
    CU_ASSERT_EQUAL_FATAL(exec_link_fit_ls(b, t2, NULL, 4, &f, &e), CL_OK);
    const double fitted = f.bw_Bps;
    CU_ASSERT(isfinite(fitted) && fitted > 0);
    why[0] = 0;
    CU_ASSERT_EQUAL(exec_link_fit_slopeless(b, t2, 4, &f, why, sizeof why), 0);
    CU_ASSERT_EQUAL(why[0], 0);
    CU_ASSERT_EQUAL(f.bw_Bps, fitted);
}

static void test_explain(void)
{
    exec_link_sample s[20];
    exec_link_fit f;
    char why[1024];
    fill(s, 20, 1e-6, 1e10, 1e-6, 1e10, HUGE_VAL); /* one line: 8 B .. 4 MiB */
    fit_of(s, 20, &f);
    CU_ASSERT(f.r2 > 0.999);
    CU_ASSERT_EQUAL(exec_link_explain(s, 20, &f, why, sizeof why), 0);
    CU_ASSERT_STRING_EQUAL(why, "");
    /* every other size's median is a woken receiver's, 20 us */
    for (int i = 0; i < 20; i++) {
        s[i].woke = 0.5;
        s[i].time_woke_s = 20e-6;
        if (i % 2) s[i].time_s = 20e-6;
    }
    fit_of(s, 20, &f);
    CU_ASSERT(f.r2 < 0.9);
    CU_ASSERT_EQUAL(exec_link_explain(s, 20, &f, why, sizeof why), 1);
    CU_ASSERT(strstr(why, "unreliable") != NULL);
    CU_ASSERT(strstr(why, "50% of the round trips woke a receiver") != NULL);
    CU_ASSERT(strstr(why, "over the round trips to spinning receivers alone: latency 1 us, 10 GB/s, R^2 1.000") != NULL);
    /* two regimes: 1 us + bytes / 20 GB/s below 1 MiB, bytes / 2 GB/s from it */
    fill(s, 20, 1e-6, 2e10, 0, 2e9, 1048576);
    fit_of(s, 20, &f);
    CU_ASSERT(f.r2 < 0.9);
    CU_ASSERT_EQUAL(exec_link_explain(s, 20, &f, why, sizeof why), 1);
    CU_ASSERT(strstr(why, "woke") == NULL);
    CU_ASSERT(strstr(why, "two lines fit with R^2 1.000: up to 524288 B 1 us + bytes / 20 GB/s, from 1048576 B") != NULL);
}

/* exec_notify counts the waits that slept (the link profile tells a woken
 * receiver by it): a wait that times out asleep counts, one whose event
 * already happened does not. */
static void test_notify_sleeps(void)
{
    exec_notify n;
    exec_notify_init(&n, 0);
    uint64_t seen = exec_notify_events(&n);
    exec_notify_wait(&n, seen, 0.005); /* nothing comes: sleeps, times out */
    CU_ASSERT_EQUAL(atomic_load(&n.sleeps), 1);
    exec_notify_bump(&n);
    exec_notify_wait(&n, seen, 0.005); /* already moved: no sleep */
    CU_ASSERT_EQUAL(atomic_load(&n.sleeps), 1);
    exec_notify_destroy(&n);
}

/* The cluster file: one node of `cores` devices with the fit as its link,
 * and it survives a save/load round trip. */
static void test_cluster_file(void)
{
    exec_machine mc = {.cores = 3, .peak_flops = 1.5e11, .peak_n = 1024, .efficiency = 0.6,
                       .mem_bytes = 8e9, .mem_bw_Bps = 2e10};
    snprintf(mc.efficiency_note, sizeof mc.efficiency_note, "test");
    exec_link_fit f = {.latency_s = -1e-7, .bw_Bps = 7e9};
    cluster c;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_link_cluster(&c, &mc, &f, EXEC_LINK_THREADS, "fit note", &e), CL_OK);
    CU_ASSERT_EQUAL(c.n_devices, 3);
    CU_ASSERT_EQUAL(c.n_nodes, 1);
    CU_ASSERT_STRING_EQUAL(c.devices[2].id, "core2");
    CU_ASSERT_STRING_EQUAL(c.types[0].name, "cpu-core");
    CU_ASSERT_EQUAL(c.links[CLUSTER_INTRA].bw_Bps, 7e9);
    CU_ASSERT_EQUAL(c.links[CLUSTER_INTRA].latency_s, 0); /* negative fit -> 0 */
    char *dir = test_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/c.json", dir);
    CU_ASSERT_EQUAL_FATAL(cluster_save(&c, path, &e), CL_OK);
    cluster d;
    CU_ASSERT_EQUAL_FATAL(cluster_load(&d, path, &e), CL_OK);
    CU_ASSERT_EQUAL(d.n_devices, 3);
    CU_ASSERT_EQUAL(d.types[0].peak_fp32_flops, 1.5e11);
    CU_ASSERT_EQUAL(d.types[0].efficiency, 0.6);
    CU_ASSERT_EQUAL(d.links[CLUSTER_INTRA].bw_Bps, 7e9);
    CU_ASSERT_STRING_EQUAL(d.links_note, "fit note");
    cluster_free(&d);
    cluster_free(&c);
    remove(path);
    CU_ASSERT_EQUAL(rmdir(dir), 0);
    free(dir);
    f.bw_Bps = HUGE_VAL; /* a flat or falling line gives no bandwidth */
    CU_ASSERT_EQUAL(exec_link_cluster(&c, &mc, &f, EXEC_LINK_THREADS, "", &e), CL_ERUN);
}

TEST_SUITE(linkprof)
{
    test_add_suite("linkprof");
    test_add("fit recovers exact latency and bandwidth", test_fit_exact);
    test_add("a fit without a slope gets the largest message's rate", test_fit_slopeless);
    test_add("a poor fit is explained: woken receivers, two regimes", test_explain);
    test_add("notify counts the waits that slept", test_notify_sleeps);
    test_add("fit on noisy data equals the normal equations", test_fit_noise);
    test_add("fit refuses degenerate input", test_fit_bad);
    test_add("threads ping-pong measures every size", test_measure_threads);
    test_add("cluster file for this machine", test_cluster_file);
    test_add("wake-ups are never lost, spinning or asleep", test_notify);
}
