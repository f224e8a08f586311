/* pipe_bench.c - `cleave bench pipe`: pipelined training's speed-up on this
 * machine (bench/pipe.csv).
 *
 * The model is tests/data/pipe/cnn-even.json, a CNN whose layers the planner
 * can cut into two stages of nearly equal time.  It is profiled here
 * (exec_profile, batches 1 to 64), planned on profiles/clusters/cpu-2cores.json for two
 * stages at batch 64 (plan_search), and trained on the first samples of
 * Fashion-MNIST (a synthetic set of the same shape when it is absent):
 *   sequential      exec_trainer steps on one thread (the baseline);
 *   one stage       exec_pipe_run of a one-stage plan with the same 4
 *                   microbatches of 16 on one worker: the pipelined runs'
 *                   kernels and arithmetic without the pipeline (small
 *                   microbatches use the caches better than batch 64, so
 *                   this baseline is the faster of the two);
 *   threads         exec_pipe_run on two pinned threads (FBP with 4
 *                   microbatches; 1F1B with the planner's count and 16);
 *   mpi             `mpirun -np 2 cleave train --plan ... --backend mpi`,
 *                   compared with the same command on threads (both report
 *                   samples/s the same way: the whole run of the op lists).
 * Throughput is samples over the wall time of the iterations after the
 * first `WARM` (steady state), best of `reps` rounds; each round runs every
 * measurement once, so a neighbour's load on the shared machine falls on
 * all of them alike.  Column others_load: the share of the machine's CPU
 * other processes used during the kept run (from /proc/stat), so a figure
 * measured under load says so.
 * Targets (issue 6): a 2-stage pipeline >= 1.8x sequential; MPI within 10%
 * of threads.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "planner/search.h"
#include "sim/sim.h"
#include "base/fileio.h"
#include "base/measure.h"
#include "base/spawn.h"
#include "exec/nn/gemm.h"
#include "exec/run/pipeline.h"
#include "exec/probe/profile_layers.h"

#define WARM 2
#define SPEEDUP_TARGET 1.8
#define MPI_TARGET 0.10

static const char *const MODEL = "tests/data/pipe/cnn-even.json";
static const char *const CLUSTER = "profiles/clusters/cpu-2cores.json";

/* Keep the fastest of repeated measurements and the others' load during it. */
static void keep(double sps, double others, double *best, double *best_others)
{
    if (sps > *best) {
        *best = sps;
        *best_others = others;
    }
}

static int load_data(exec_data *tr, exec_data *te, int64_t n, const char **source)
{
    cl_err e = {0};
    *source = "fashion-mnist";
    if (exec_fmnist_load(NULL, tr, te, &e)) {
        *source = "synthetic";
        exec_data_synthetic(tr, n, 1, 28, 28, 10, 1, 0);
        exec_data_synthetic(te, 16, 1, 28, 28, 10, 1, 1);
    }
    exec_data_limit(tr, n);
    double mean, sd;
    exec_data_normalise(tr, te, &mean, &sd);
    return 0;
}

/* Sequential steps of batch 64: samples/s after WARM steps. */
static double run_sequential(const model *m, const exec_data *d, int iters, double lr)
{
    exec_train_opts o;
    exec_train_defaults(&o);
    o.lr = lr;
    o.schedule = EXEC_LR_CONSTANT;
    exec_trainer *t;
    cl_err e = {0};
    if (exec_trainer_create(&t, m, MODEL, &o, &e)) return NAN;
    float *x = exec_falloc((int64_t)o.batch * d->dim);
    int32_t *y = cl_malloc((size_t)o.batch * sizeof *y);
    int64_t *idx = cl_malloc((size_t)o.batch * sizeof *idx);
    double t0 = 0;
    for (int it = 0; it < iters; it++) {
        if (it == WARM) t0 = exec_now();
        for (int b = 0; b < o.batch; b++) idx[b] = ((int64_t)it * o.batch + b) % d->n;
        exec_data_gather(d, idx, o.batch, x, y);
        exec_trainer_step(t, x, y, o.batch);
    }
    double sps = (double)(iters - WARM) * o.batch / (exec_now() - t0);
    free(x);
    free(y);
    free(idx);
    exec_trainer_destroy(t);
    return sps;
}

/* The pipelined run on threads: samples/s over iterations WARM.. */
static double run_threads(const plan *p, const exec_data *d, int iters, double lr, double *busy)
{
    exec_pipe_opts o;
    exec_pipe_defaults(&o);
    o.train = d;
    o.file = "bench";
    o.iterations = iters;
    o.lr = lr;
    o.lr_schedule = EXEC_LR_CONSTANT;
    o.momentum = 0.9;
    exec_pipe_result r;
    cl_err e = {0};
    double sps = NAN;
    if (exec_pipe_run(p, &o, &r, &e) == CL_OK) {
        sps = (double)(iters - WARM) * p->batch / (r.iter_end_s[iters - 1] - r.iter_end_s[WARM - 1]);
        *busy = 0;
        for (int w = 0; w < r.n_workers; w++) *busy += r.w[w].busy_s / r.wall_s / r.n_workers;
    } else {
        fprintf(stderr, "bench pipe: %s\n", e.msg);
    }
    exec_pipe_result_free(&r);
    return sps;
}

/* `cleave train --plan` on a backend (mpi: under mpirun): the samples/s it
 * prints for the run. */
static double run_cli(const char *plan_path, const char *backend, int iters, int64_t n)
{
    char out[4096], self[1024], its[32], lim[32];
    snprintf(out, sizeof out, "%s.out", plan_path);
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1); /* mpirun needs the real path */
    if (k <= 0) return NAN;
    self[k] = 0;
    snprintf(its, sizeof its, "%d", iters);
    snprintf(lim, sizeof lim, "%lld", (long long)n);
    /* an argv array, no shell: --out DIR may hold spaces, ; or backticks */
    char *av[32];
    int na = 0;
    if (!strcmp(backend, "mpi")) {
        char *const mpi[] = {"mpirun", "-np", "2", "--bind-to", "core", "--mca", "btl", "self,vader"};
        for (size_t i = 0; i < sizeof mpi / sizeof mpi[0]; i++) av[na++] = mpi[i];
        if (getuid() == 0) av[na++] = "--allow-run-as-root";
    }
    char *const args[] = {self, "train", "--plan", (char *)plan_path, "--iterations", its, "--limit", lim,
                          "--lr", "0.005", "--lr-schedule", "constant", "--momentum", "0.9",
                          "--backend", (char *)backend, NULL};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) av[na++] = args[i];
    int st = cl_spawn_wait(av, out);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) { /* said, not a silent NaN */
        if (st == -1) fprintf(stderr, "bench pipe: cannot run %s: %s\n", av[0], strerror(errno));
        else fprintf(stderr, "bench pipe: cleave train --backend %s failed (status %d); its output is in %s\n",
                     backend, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out);
        return NAN;
    }
    char *text;
    size_t len;
    cl_err e = {0};
    if (cl_read_file(out, 1 << 20, &text, &len, &e)) return NAN;
    remove(out);
    double sps = NAN;
    for (char *line = text; line && *line;) {
        int ep;
        double l, a, t, s, el;
        if (sscanf(line, "%d %lf %lf %lf %lf %lf", &ep, &l, &a, &t, &s, &el) == 6) sps = s;
        line = strchr(line, '\n');
        if (line) line++;
    }
    free(text);
    return sps;
}

static int make_plan(const model *m, const prof *pf, const cluster *cl, sched_kind k, int micro,
                     int stages, plan_result *res)
{
    plan_request rq = {.model = m, .prof = pf, .cluster = cl, .batch = 64, .schedule = k,
                       .microbatches = micro, .stages = stages, .algo = PLAN_ALGO_AUTO,
                       .optimizer = OPTIM_MOMENTUM, .comm = 1, .replication = 0};
    cl_err e = {0};
    if (plan_search(&rq, res, &e)) {
        fprintf(stderr, "bench pipe: %s\n", e.msg);
        return 1;
    }
    return 0;
}

int exec_pipe_bench(const char *outdir, int quick);
int exec_pipe_bench(const char *outdir, int quick)
{
    cl_err e = {0};
    model m;
    cluster cl;
    if (model_load(&m, MODEL, &e) || cluster_load(&cl, CLUSTER, &e)) {
        fprintf(stderr, "bench pipe: %s\n", e.msg);
        return 1;
    }
    const int iters = quick ? 12 : 30, reps = quick ? 1 : 5;
    const double lr = 0.005;
    int64_t n = (int64_t)iters * 64;
    exec_data tr = {0}, te = {0};
    const char *source;
    load_data(&tr, &te, n, &source);
    prof pf;
    /* every microbatch size the plans may run, so the simulator
     * interpolates (1F1B's planner picks one-sample microbatches) */
    const int64_t batches[] = {1, 4, 16, 64};
    int rc = exec_profile(&m, MODEL, batches, 4, 2, quick ? 3 : 8, 1, &pf, &e);
    if (rc) {
        fprintf(stderr, "bench pipe: %s\n", e.msg);
        goto out0;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/pipe.csv", outdir);
    cl_out out;
    if ((rc = cl_out_open(&out, path, &e))) goto out1;
    fprintf(out.f, "row,schedule,backend,workers,microbatches,cut,iterations,data,samples_per_s,speedup,speedup_one_stage,predicted_speedup,busy,others_load\n");
    /* plans first, then every measurement once per round, so a neighbour's
     * load falls on all of them alike; each keeps its best round */
    /* the first case is the pipeline's own baseline: one stage, the same 4
     * microbatches of 16 on one worker (the kernels and arithmetic of the
     * pipelined runs, without the pipeline) */
    struct { sched_kind k; int micro, stages; } cases[] = {
        {SCHED_GPIPE, 4, 1}, {SCHED_FBP, 4, 2}, {SCHED_1F1B, 0, 2}, {SCHED_1F1B, 16, 2}};
    enum { NC = sizeof cases / sizeof *cases };
    plan_result pr[NC];
    int ok[NC] = {0};
    double pred[NC], sps[NC], busy[NC], seq = 0, thr_cli = 0, mpi_cli = 0, best = 0;
    char pp[1100];
    snprintf(pp, sizeof pp, "%s/pipe-plan.json", outdir);
    for (int c = 0; c < NC; c++) {
        pred[c] = NAN;
        sps[c] = busy[c] = 0;
        ok[c] = !make_plan(&m, &pf, &cl, cases[c].k, cases[c].micro, cases[c].stages, &pr[c]);
        sim_result sr;
        if (ok[c] && sim_predict(&pr[c].plan, &sr, &e) == CL_OK) {
            pred[c] = sr.speedup;
            sim_result_free(&sr);
        }
    }
    int saved = ok[1] && plan_save(&pr[1].plan, pp, &e) == CL_OK;
    double o_seq = 0, o_sps[NC] = {0}, o_thr = 0, o_mpi = 0;
    cl_loadmeter lm;
    for (int r = 0; r < reps; r++) {
        cl_load_start(&lm);
        double x = run_sequential(&m, &tr, iters, lr);
        keep(x, cl_load_others(&lm, cl_load_ours_s(&lm), NULL), &seq, &o_seq);
        for (int c = 0; c < NC; c++) {
            double b = 0;
            cl_load_start(&lm);
            x = ok[c] ? run_threads(&pr[c].plan, &tr, iters, lr, &b) : NAN;
            if (x > sps[c]) busy[c] = b;
            keep(x, cl_load_others(&lm, cl_load_ours_s(&lm), NULL), &sps[c], &o_sps[c]);
        }
        if (saved) { /* MPI against threads, both through the command */
            cl_load_start(&lm);
            x = run_cli(pp, "threads", iters, n);
            keep(x, cl_load_others(&lm, cl_load_ours_s(&lm), NULL), &thr_cli, &o_thr);
            cl_load_start(&lm);
            x = run_cli(pp, "mpi", iters, n);
            keep(x, cl_load_others(&lm, cl_load_ours_s(&lm), NULL), &mpi_cli, &o_mpi);
        }
    }
    if (saved) remove(pp);
    printf("  sequential: %.1f samples/s (%s, %d iterations of 64, best of %d; others' load then %.0f%%)\n",
           seq, source, iters, reps, 100 * o_seq);
    fprintf(out.f, "sequential,sequential,threads,1,1,,%d,%s,%.2f,1,,1,1,%.3f\n", iters, source, seq, o_seq);
    double one = ok[0] ? sps[0] : NAN; /* the one-stage baseline */
    for (int c = 0; c < NC; c++) {
        if (!ok[c]) continue;
        const plan *p = &pr[c].plan;
        int ns = p->n_stages;
        if (ns > 1) best = fmax(best, sps[c] / seq);
        printf("  %-5s %d stage%s, %2d microbatches, cut after layer %2d: %.1f samples/s, %.2fx sequential, %.2fx one stage (simulated %.2fx), busy %.0f%%, others' load %.0f%%\n",
               sched_kind_name(p->schedule), ns, ns > 1 ? "s" : " ", p->n_micro,
               p->stages[0].last, sps[c], sps[c] / seq, sps[c] / one, pred[c], 100 * busy[c],
               100 * o_sps[c]);
        fprintf(out.f, "pipeline,%s,threads,%d,%d,%d,%d,%s,%.2f,%.4f,%.4f,%.4f,%.4f,%.3f\n",
                sched_kind_name(p->schedule), ns, p->n_micro, p->stages[0].last, iters, source,
                sps[c], sps[c] / seq, sps[c] / one, pred[c], busy[c], o_sps[c]);
    }
    if (saved) {
        const plan *p = &pr[1].plan;
        printf("  cleave train --plan (fbp): threads %.1f, mpi %.1f samples/s (mpi/threads %.3f; others' load %.0f%%, %.0f%%)\n",
               thr_cli, mpi_cli, mpi_cli / thr_cli, 100 * o_thr, 100 * o_mpi);
        fprintf(out.f, "command,fbp,threads,2,%d,%d,%d,%s,%.2f,%.4f,,,,%.3f\n", p->n_micro,
                p->stages[0].last, iters, source, thr_cli, thr_cli / seq, o_thr);
        fprintf(out.f, "command,fbp,mpi,2,%d,%d,%d,%s,%.2f,%.4f,,,,%.3f\n", p->n_micro,
                p->stages[0].last, iters, source, mpi_cli, mpi_cli / seq, o_mpi);
    }
    for (int c = 0; c < NC; c++)
        if (ok[c]) plan_result_free(&pr[c]);
    rc = cl_out_commit(&out, &e);
    printf("  targets: best 2-stage speed-up %.2fx over sequential, %.2fx over one stage (target >= %.1fx) %s; mpi/threads %.3f (target within %.0f%%) %s\n",
           best, ok[0] ? best * seq / sps[0] : NAN, SPEEDUP_TARGET,
           best >= SPEEDUP_TARGET ? "met" : "NOT met", mpi_cli / thr_cli,
           100 * MPI_TARGET, fabs(mpi_cli / thr_cli - 1) <= MPI_TARGET ? "met" : "NOT met");
    if (!rc) printf("  wrote %s\n", path);
out1:
    prof_free(&pf);
out0:
    exec_data_free(&tr);
    exec_data_free(&te);
    model_free(&m);
    cluster_free(&cl);
    if (rc) fprintf(stderr, "bench pipe: %s\n", e.msg);
    return rc;
}
