/* bench.c - `cleave bench sim`: event rate and time per simulation against
 * stages (2 to 1,024) and microbatches (1 to 32,768), written to
 * <outdir>/sim.csv.
 *
 * Rows: "kernel" (the bare event kernel: a hold model with a fixed number of
 * pending events, each dispatch scheduling one more), then 1F1B on uniform
 * plans with links on (100 GB/s, 5 us, 1 MB activations): a stages sweep at
 * 64 microbatches, a microbatch sweep at 8 stages, and the target case
 * 64 x 512.  Each case runs once untimed, then is repeated and the median
 * reported; times are the thread's CPU time (the machine is shared, and
 * CPU time does not count the moments another process held the core).
 * build_ms is sched_build, sim_ms sim_create + sim_run, total_ms both;
 * events_per_s is events / sim_ms, events being what the kernel dispatched
 * (sim_result.events: callbacks run; cancelled events are not counted).  Targets (issue 4):
 * >= 20 M events/s, 64 x 512 in < 10 ms, time linear in microbatches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "base/fileio.h"
#include "sim/event.h"
#include "sim/sim.h"
#include "base/measure.h"


/* ------------------------------------------------------ kernel alone -- */

typedef struct hold { uint64_t x; } hold;

static void on_hold(ev_kernel *k, void *ctx, uint64_t data)
{
    hold *h = ctx;
    h->x = h->x * 6364136223846793005ull + 1442695040888963407ull;
    ev_after(k, (double)(h->x >> 40) * 1e-9, on_hold, h, data);
    if (ev_dispatched(k) % 1024 == 0 && ev_dispatched(k) >= (uint64_t)data) ev_stop(k);
}

static double kernel_rate(int pending, uint64_t n_events)
{
    ev_kernel *k = ev_create();
    hold h = {42};
    for (int i = 0; i < pending; i++) ev_at(k, i * 1e-9, on_hold, &h, n_events);
    double t0 = cl_thread_cpu_s();
    ev_run(k, 0, 0);
    double dt = cl_thread_cpu_s() - t0;
    double rate = (double)ev_dispatched(k) / dt;
    ev_destroy(k);
    return rate;
}

/* --------------------------------------------------------- one case -- */

typedef struct bcase {
    int stages, micro;
    int64_t ops;
    uint64_t events;
    double build_ms, sim_ms, total_ms, rate;
} bcase;

static int run_case(int stages, int micro, int reps, bcase *out, cl_err *e)
{
    sim_uniform u = {.stages = stages, .micro = micro, .schedule = SCHED_1F1B, .fwd_s = 1e-3,
                     .bwd_in_s = 1e-3, .bwd_w_s = 1e-3, .act_bytes = 1 << 20, .stash_bytes = 1 << 24,
                     .param_bytes = 1 << 26, .per_node = 8, .intra = {1e11, 5e-6}, .inter = {2.5e10, 1e-5}};
    plan p;
    int rc = sim_uniform_plan(&p, &u, e);
    if (rc) return rc;
    double *b = malloc((size_t)reps * sizeof *b), *s = malloc((size_t)reps * sizeof *s);
    double *t = malloc((size_t)reps * sizeof *t), *r = malloc((size_t)reps * sizeof *r);
    memset(out, 0, sizeof *out);
    out->stages = stages;
    out->micro = micro;
    for (int i = -1; i < reps && !rc; i++) { /* i = -1: warm-up, not timed */
        sched sc;
        double t0 = cl_thread_cpu_s();
        rc = sched_build(&p, SCHED_1F1B, micro, 1, &sc, e);
        if (rc) break;
        double t1 = cl_thread_cpu_s();
        sim_opts o = {0};
        sim *sm = sim_create(&p, &sc, &o, e);
        sim_result res;
        rc = sm ? sim_run(sm, &res, e) : e->code;
        double t2 = cl_thread_cpu_s();
        if (!rc) {
            out->ops = sc.n_ops;
            out->events = res.events;
            sim_result_free(&res);
        }
        sim_destroy(sm);
        sched_free(&sc);
        if (i < 0) continue;
        b[i] = (t1 - t0) * 1e3;
        s[i] = (t2 - t1) * 1e3;
        t[i] = (t2 - t0) * 1e3;
        r[i] = (double)out->events / (t2 - t1);
    }
    if (!rc) {
        out->build_ms = cl_median(b, reps);
        out->sim_ms = cl_median(s, reps);
        out->total_ms = cl_median(t, reps);
        out->rate = cl_median(r, reps);
    }
    free(b);
    free(s);
    free(t);
    free(r);
    sim_uniform_free(&p);
    return rc;
}

int sim_bench(const char *outdir, int quick)
{
    char path[1024];
    cl_out o;
    int rc = bench_csv_open(&o, path, sizeof path, outdir, "sim",
                            "case,schedule,stages,microbatches,ops,events,build_ms,sim_ms,total_ms,events_per_s");
    if (rc) return rc;
    cl_err e = {0};

    /* the bare kernel, at pending-queue sizes a pipeline simulation sees */
    int pend[] = {16, 256, 4096};
    double krate[3];
    uint64_t kev = quick ? 200000 : 20000000;
    for (int i = 0; i < 3; i++) {
        double v[5];
        int reps = quick ? 1 : 5;
        for (int j = 0; j < reps; j++) v[j] = kernel_rate(pend[i], kev);
        krate[i] = cl_median(v, reps);
        fprintf(o.f, "kernel,-,%d,0,0,%llu,0,0,0,%.0f\n", pend[i], (unsigned long long)kev, krate[i]);
    }
    printf("kernel alone: %.1f M events/s (16 pending), %.1f M (256), %.1f M (4096)\n",
           krate[0] / 1e6, krate[1] / 1e6, krate[2] / 1e6);

    int reps = quick ? 1 : 5;
    int max_p = quick ? 64 : 1024, max_m = quick ? 512 : 32768;
    bcase c;
    printf("Mev/s = events the kernel dispatched / CPU time of sim_create + sim_run (sim_ms; "
           "building the op lists is build_ms, apart)\n");
    printf("%-8s %6s %6s %9s %10s %9s %9s %9s %8s\n", "sweep", "stages", "micro", "ops", "events",
           "build_ms", "sim_ms", "total_ms", "Mev/s");
    double lin_t[32], lin_s[32], lin_m[32];
    int n_lin = 0;
    for (int sweep = 0; sweep < 3 && !rc; sweep++) {
        const char *name = sweep == 0 ? "stages" : sweep == 1 ? "micro" : "target";
        int lo = sweep == 0 ? 2 : 1, hi = sweep == 0 ? max_p : sweep == 1 ? max_m : 1;
        for (int x = lo; x <= hi && !rc; x *= 2) {
            int p = sweep == 0 ? x : sweep == 1 ? 8 : 64;
            int m = sweep == 0 ? 64 : sweep == 1 ? x : 512;
            int r = (int64_t)p * m > 100000 ? (reps < 3 ? reps : 3) : reps;
            if ((rc = run_case(p, m, r, &c, &e))) break;
            fprintf(o.f, "%s,1f1b,%d,%d,%lld,%llu,%.4f,%.4f,%.4f,%.0f\n", name, p, m, (long long)c.ops,
                    (unsigned long long)c.events, c.build_ms, c.sim_ms, c.total_ms, c.rate);
            printf("%-8s %6d %6d %9lld %10llu %9.3f %9.3f %9.3f %8.1f\n", name, p, m, (long long)c.ops,
                   (unsigned long long)c.events, c.build_ms, c.sim_ms, c.total_ms, c.rate / 1e6);
            if (sweep == 1 && m >= 64) {
                lin_t[n_lin] = c.total_ms;
                lin_s[n_lin] = c.sim_ms;
                lin_m[n_lin++] = m;
            }
            if (sweep == 2)
                printf("target 64 stages x 512 microbatches 1F1B: %.2f ms (target < 10 ms: %s); "
                       "%.1f M events/s (target >= 20: %s)\n", c.total_ms,
                       c.total_ms < 10 ? "met" : "NOT met", c.rate / 1e6, c.rate >= 2e7 ? "met" : "NOT met");
        }
    }
    if (!rc && n_lin >= 2)
        printf("linearity (8 stages): per microbatch %.2f us total, %.2f us simulating at m = %.0f; "
               "%.2f us total, %.2f us simulating at m = %.0f\n",
               1e3 * lin_t[0] / lin_m[0], 1e3 * lin_s[0] / lin_m[0], lin_m[0],
               1e3 * lin_t[n_lin - 1] / lin_m[n_lin - 1], 1e3 * lin_s[n_lin - 1] / lin_m[n_lin - 1],
               lin_m[n_lin - 1]);
    if (rc) {
        cl_out_abort(&o);
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    return bench_csv_commit(&o, path);
}
