/* bench.c - `cleave bench plan`: planning time against layers (100 to
 * 10,000) and devices (8 to 4,096), and on every PipeDream profile, written
 * to <outdir>/plan.csv.
 *
 * Synthetic models are chains of block layers with deterministic, varied
 * costs (a PipeDream-style single-point profile; past 1,000 layers the same
 * totals cut finer); clusters are uniform, 8
 * devices per node, links 100 GB/s inside a node and 12.5 GB/s between,
 * 80 GB per device.  Each row times one call, repeated, and reports the
 * median:
 *   exact   one exact search (schedule 1f1b, 32 microbatches, replication)
 *   merge   one partition-and-merge run, same settings
 *   search  the whole `cleave plan` search (every schedule, microbatch
 *           counts, both algorithms, ranking); once where it takes more
 *           than seconds (layers x devices above 300,000)
 * The first two are whole plan_search calls (instance, ranking, and for
 * exact also partition-and-merge, its first bound); exact_search_ms and
 * merge_only_ms are the algorithms' own share of them (plan_result's
 * time_exact_s + time_lower_s, and time_merge_s).
 * and, for the PipeDream profiles, one user question end to end: the
 * `cleave plan` command itself (this binary, spawned; loading, searching,
 * printing), with the default options and with --schedule 1f1b
 * --microbatches 32 (gnmt's profile has a batch of 1: --batch 32).
 * Rows `one_per_node` time `cleave plan --model models/resnet50.json
 * --device A100-80GB --devices N --per-node 1` (spawned) for N up to
 * 262,144 (issue 13: the device orders were O(nodes x devices), 100 s at
 * 262,144; now near linear), and rows `long_chain` the whole search
 * (--algo auto, 64 devices) on chains of 30,000 and 100,000 layers, past
 * the 10,000 the exact search takes (it is quadratic there: 30,000 cheap
 * layers took 100 s).
 * Rows `gpt3_tensor_auto` and `gpt3_tensor_auto_megatron` time the
 * tensor and recomputation question on GPT-3 175B over 1,024 A100s
 * (docs/transformer.md), every schedule and `--for megatron` (spawned,
 * median of 3; in question_auto_ms).
 * Targets (issue 3): 1,000 layers x 1,024 devices under 1 s; every
 * PipeDream profile on 32 devices (8 per node x 4 nodes) with replication
 * under 0.1 s.  Issue 15: the GPT-3 question under 1 s.
 */
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "profiles/pipedream.h"
#include "base/fileio.h"
#include "planner/cost.h"
#include "planner/exact.h"
#include "planner/merge.h"
#include "planner/search.h"
#include "base/measure.h"


/* Wall time of one `cleave plan ARGS` run of this very binary, output
 * discarded; NAN when it cannot run or fails. */
static double question_ms(const char *const *args)
{
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return NAN;
    self[n] = '\0';
    char *argv[32];
    int k = 0;
    argv[k++] = self;
    argv[k++] = (char *)"plan";
    for (int i = 0; args[i] && k < 31; i++) argv[k++] = (char *)args[i];
    argv[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    extern char **environ;
    pid_t pid;
    double t0 = cl_now_s();
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return NAN;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    double ms = 1e3 * (cl_now_s() - t0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ms : NAN;
}

/* Median over reps of the question `cleave plan --profile FILE --devices
 * 32 --per-node 8 [--schedule 1f1b --microbatches 32 [--batch 32]]`. */
static double question_median_ms(const char *file, int explicit_form, int batch1, int reps)
{
    const char *auto_args[] = {"--profile", file, "--devices", "32", "--per-node", "8", NULL};
    const char *x_args[] = {"--profile", file, "--devices", "32", "--per-node", "8", "--schedule",
                            "1f1b", "--microbatches", "32", batch1 ? "--batch" : NULL, "32", NULL};
    double t[16];
    for (int r = 0; r < reps; r++) {
        t[r] = question_ms(explicit_form ? x_args : auto_args);
        if (isnan(t[r])) return NAN;
    }
    return cl_median(t, reps);
}

/* ------------------------------------------------------------ inputs -- */

#define BATCH 256

static void synth(int n, model *m, prof *pf)
{
    memset(m, 0, sizeof *m);
    memset(pf, 0, sizeof *pf);
    snprintf(m->name, sizeof m->name, "synth%d", n);
    m->input = (model_shape){1, {1024, 0, 0}};
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    prof_alloc(pf, n, 1);
    snprintf(pf->model, sizeof pf->model, "%s", m->name);
    snprintf(pf->device, sizeof pf->device, "A100-80GB");
    uint64_t x = 88172645463325252ull;
    /* past 1,000 layers the same model is cut finer: totals stay put */
    double k = n > 1000 ? 1000.0 / n : 1.0;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double u = (double)(x >> 11) / 9007199254740992.0;
        char name[32];
        snprintf(name, sizeof name, "layer.%d", i);
        double act = 2e5 * (1 + (i % 7)), params = 4 * floor(1e6 * k * (0.5 + u));
        model_block_init(&m->layers[i], name, 1e9 * (0.5 + u), params / 4, act, 2 * act);
        prof_layer *l = &pf->layers[i];
        snprintf(l->name, sizeof l->name, "%s", name);
        l->batch[0] = BATCH;
        l->fwd_s[0] = 2e-3 * k * (0.5 + u);
        l->bwd_in_s[0] = 2e-3 * k * (0.5 + u);
        l->bwd_w_s[0] = 2e-3 * k * (0.5 + u);
        l->act_bytes = act;
        l->stash_bytes = 2 * act * k;
        l->param_bytes = params;
    }
    cl_err e = {0};
    if (model_derive(m, "synth", &e)) {
        fprintf(stderr, "synth: %s\n", e.msg);
        abort(); /* built to be valid */
    }
}

static int uniform(cluster *c, int n, cl_err *e)
{
    cluster_devtype t = {.name = "A100-80GB", .peak_fp32_flops = 19.5e12,
                         .mem_bytes = 80ull << 30, .mem_bw_Bps = 2.039e12, .efficiency = 0.5};
    return cluster_uniform(c, &t, n, 8, (cluster_link){100e9, 5e-6}, (cluster_link){12.5e9, 1e-5}, e);
}

/* ------------------------------------------------------------- timing -- */

typedef struct row {
    double exact_ms, merge_ms, search_ms;
    double exact_own_ms, merge_own_ms; /* the algorithms alone (see time_case) */
    double exact_b, merge_b;
    int p, devices_used;
} row;

/* Time exact and merge (one schedule, m = 32) and the full search (in the
 * first search_reps of the reps: 0, none). */
static int time_case(const model *m, const prof *pf, const cluster *c, int reps, int search_reps,
                     int repl, row *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    plan_request rq = {.model = m, .prof = pf, .cluster = c, .batch = (int)pf->layers[0].batch[0],
                       .schedule = SCHED_1F1B, .microbatches = 32, .algo = PLAN_ALGO_EXACT,
                       .comm = 1, .replication = repl};
    if (rq.batch % 32) rq.microbatches = rq.batch >= 1 ? 1 : 1;
    double tx[16], tm[16], ts[16], txo[16], tmo[16];
    for (int r = 0; r < reps; r++) {
        plan_result res;
        double t0 = cl_now_s();
        rq.algo = PLAN_ALGO_EXACT;
        int rc = plan_search(&rq, &res, e);
        tx[r] = 1e3 * (cl_now_s() - t0);
        if (rc) return rc;
        out->exact_b = res.bottleneck_s;
        /* the exact search's own passes (partition-and-merge, which gives
         * it its first bound, left out) */
        txo[r] = 1e3 * (res.time_exact_s + res.time_lower_s);
        out->p = res.plan.n_stages;
        out->devices_used = plan_device_count(&res.plan);
        plan_result_free(&res);
        t0 = cl_now_s();
        rq.algo = PLAN_ALGO_MERGE;
        rc = plan_search(&rq, &res, e);
        tm[r] = 1e3 * (cl_now_s() - t0);
        if (rc) return rc;
        out->merge_b = res.bottleneck_s;
        tmo[r] = 1e3 * res.time_merge_s;
        plan_result_free(&res);
        if (r < search_reps) {
            plan_request full = rq;
            full.schedule = -1;
            full.microbatches = 0;
            full.algo = PLAN_ALGO_AUTO;
            t0 = cl_now_s();
            rc = plan_search(&full, &res, e);
            ts[r] = 1e3 * (cl_now_s() - t0);
            if (rc) return rc;
            plan_result_free(&res);
        }
    }
    out->exact_ms = cl_median(tx, reps);
    out->merge_ms = cl_median(tm, reps);
    out->exact_own_ms = cl_median(txo, reps);
    out->merge_own_ms = cl_median(tmo, reps);
    out->search_ms = search_reps > 0 ? cl_median(ts, search_reps < reps ? search_reps : reps) : NAN;
    return CL_OK;
}

int plan_bench(const char *outdir, int quick)
{
    char path[1024];
    cl_out o;
    int rc = bench_csv_open(&o, path, sizeof path, outdir, "plan",
                            "case,model,layers,devices,replication,exact_ms,merge_ms,search_ms,exact_bottleneck_s,"
                            "merge_bottleneck_s,stages,devices_used,question_auto_ms,question_1f1b_ms,exact_search_ms,"
                            "merge_only_ms");
    if (rc) return rc;
    cl_err e = {0};
    printf("%-9s %-10s %6s %7s %10s %10s %10s %12s %7s %9s %9s\n", "case", "model", "layers", "devices",
           "exact_ms", "merge_ms", "search_ms", "merge gap", "stages", "x_own_ms", "m_own_ms");
    int reps = quick ? 1 : 5;
    double target_ms = NAN, pd_worst_exact = 0, pd_worst_search = 0, pd_worst_q = 0, worst_whole = 0;
    int worst_L = 0, worst_N = 0;
    int q_reps = quick ? 1 : 7;
    /* sweeps over layers (64 devices) and devices (1,000 layers) */
    static const int layers[] = {100, 300, 1000, 3000, 10000};
    static const int devs[] = {8, 64, 256, 1024, 4096};
    for (int sweep = 0; sweep < 2 && !rc; sweep++) {
        for (int k = 0; k < 5 && !rc; k++) {
            int L = sweep == 0 ? layers[k] : 1000, N = sweep == 0 ? 64 : devs[k];
            if (quick && (L > 300 || N > 64)) continue;
            model m;
            prof pf;
            cluster c;
            synth(L, &m, &pf);
            if ((rc = uniform(&c, N, &e))) break;
            row r;
            int reps_here = L * (double)N > 2e5 ? (reps < 3 ? reps : 3) : reps;
            /* the whole search (every schedule and microbatch count): once
             * where it takes more than seconds (10,000 x 64, 1,000 x 1,024
             * and 1,000 x 4,096: 20 to 90 s each on 2026-11-29) */
            rc = time_case(&m, &pf, &c, reps_here, (double)L * N <= 300000 ? reps_here : 1, 1, &r, &e);
            if (!rc) {
                const char *name = sweep == 0 ? "layers" : "devices";
                fprintf(o.f, "%s,%s,%d,%d,1,%.3f,%.3f,%.3f,%.9g,%.9g,%d,%d,,,%.3f,%.3f\n", name, m.name, L, N,
                        r.exact_ms, r.merge_ms, r.search_ms, r.exact_b, r.merge_b, r.p, r.devices_used,
                        r.exact_own_ms, r.merge_own_ms);
                printf("%-9s %-10s %6d %7d %10.2f %10.2f %10.2f %11.2f%% %7d %9.2f %9.2f\n", name, m.name, L, N,
                       r.exact_ms, r.merge_ms, r.search_ms, 100 * (r.merge_b - r.exact_b) / r.exact_b, r.p,
                       r.exact_own_ms, r.merge_own_ms);
                fflush(stdout);
                if (L == 1000 && N == 1024) target_ms = r.exact_ms;
                if (!(r.search_ms <= worst_whole)) {
                    worst_whole = r.search_ms;
                    worst_L = L;
                    worst_N = N;
                }
            }
            cluster_free(&c);
            model_free(&m);
            prof_free(&pf);
        }
    }
    /* one device per node (issue 13): the whole command, once each */
    static const char *const one_per_node[] = {"4096", "16384", "65536", "262144"};
    for (int k = 0; k < 4 && !rc && !(quick && k > 0); k++) {
        const char *args[] = {"--model", "models/resnet50.json", "--device", "A100-80GB", "--devices",
                              one_per_node[k], "--per-node", "1", NULL};
        double ms = question_ms(args);
        fprintf(o.f, "one_per_node,resnet50,,%s,1,,,,,,,,%.3f,\n", one_per_node[k], ms);
        printf("%-12s %-10s %7s devices, one per node: `cleave plan` %.1f ms\n", "one_per_node", "resnet50",
               one_per_node[k], ms);
        fflush(stdout);
    }
    /* GPT-3 175B on 1,024 A100s, the tensor and recomputation question
     * (issue 15's planning-time target: the whole question under 1 s), over
     * every schedule and for Megatron-LM's; the whole command, medians */
    for (int k = 0; k < 2 && !rc; k++) {
        const char *args[] = {"--model", "models/gpt3-175b.json", "--device", "A100-80GB", "--devices", "1024",
                              "--per-node", "8", "--bandwidth", "300e9,25e9", "--batch", "1536", "--optimizer",
                              "adam", "--tensor", "auto", "--recompute", "auto", k ? "--for" : NULL, "megatron", NULL};
        double t[3];
        int reps_q = quick ? 1 : 3;
        for (int r = 0; r < reps_q; r++) t[r] = question_ms(args);
        double ms = cl_median(t, reps_q);
        fprintf(o.f, "gpt3_tensor_auto%s,gpt3-175b,98,1024,1,,,,,,,,%.3f,\n", k ? "_megatron" : "", ms);
        printf("%-12s %-10s 1024 A100s, --tensor auto --recompute auto%s: `cleave plan` %.1f ms\n", "gpt3",
               "gpt3-175b", k ? " --for megatron" : "", ms);
        fflush(stdout);
    }
    /* long chains: the whole search, once each */
    static const int long_layers[] = {30000, 100000};
    for (int k = 0; k < 2 && !rc && !quick; k++) {
        model m;
        prof pf;
        cluster c;
        synth(long_layers[k], &m, &pf);
        if ((rc = uniform(&c, 64, &e))) break;
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = BATCH, .schedule = -1,
                           .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 1};
        plan_result res;
        double t0 = cl_now_s();
        rc = plan_search(&rq, &res, &e);
        double ms = 1e3 * (cl_now_s() - t0);
        if (!rc) {
            fprintf(o.f, "long_chain,%s,%d,64,1,,,%.3f,,%.9g,%d,%d,,\n", m.name, long_layers[k], ms,
                     res.bottleneck_s, res.plan.n_stages, plan_device_count(&res.plan));
            printf("%-12s %-10s %6d layers, 64 devices: whole search %.1f ms (partition-and-merge only)\n",
                   "long_chain", m.name, long_layers[k], ms);
            fflush(stdout);
            plan_result_free(&res);
        }
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    /* every PipeDream profile on 32 devices, 8 per node, with replication */
    static const char *const pd[] = {"alexnet", "vgg16", "resnet18", "resnet50", "gnmt"};
    for (int k = 0; k < 5 && !rc; k++) {
        char file[256];
        snprintf(file, sizeof file, "../shared/data/pipedream/%s.txt", pd[k]);
        model m;
        prof pf;
        if (pipedream_import(file, 0, &m, &pf, NULL, &e)) {
            printf("pipedream %s: skipped (%s)\n", pd[k], e.msg);
            cl_err_clear(&e);
            continue;
        }
        cluster c;
        if ((rc = uniform(&c, 32, &e))) break;
        row r;
        rc = time_case(&m, &pf, &c, reps, reps, 1, &r, &e);
        if (!rc) {
            /* the whole command, as a user asks it */
            int batch1 = pf.layers[0].batch[0] < 32;
            double qa = question_median_ms(file, 0, 0, q_reps);
            double qx = question_median_ms(file, 1, batch1, q_reps);
            fprintf(o.f, "pipedream,%s,%d,32,1,%.3f,%.3f,%.3f,%.9g,%.9g,%d,%d,%.3f,%.3f,%.3f,%.3f\n", pd[k],
                    m.n_layers, r.exact_ms, r.merge_ms, r.search_ms, r.exact_b, r.merge_b, r.p,
                    r.devices_used, qa, qx, r.exact_own_ms, r.merge_own_ms);
            printf("%-9s %-10s %6d %7d %10.2f %10.2f %10.2f %11.2f%% %7d %9.2f %9.2f   question: auto %.1f ms, 1f1b/32 %.1f ms\n",
                   "pipedream", pd[k], m.n_layers, 32, r.exact_ms, r.merge_ms, r.search_ms,
                   100 * (r.merge_b - r.exact_b) / r.exact_b, r.p, r.exact_own_ms, r.merge_own_ms, qa, qx);
            fflush(stdout);
            if (r.exact_ms > pd_worst_exact) pd_worst_exact = r.exact_ms;
            if (r.search_ms > pd_worst_search) pd_worst_search = r.search_ms;
            if (!(qa <= pd_worst_q)) pd_worst_q = qa; /* NAN (failed) sticks */
            if (!(qx <= pd_worst_q)) pd_worst_q = qx;
        }
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    if (!rc) {
        if (worst_L)
            printf("target every synthetic case, whole search under 1 s (issue 16): slowest %.1f ms (%d layers x %d devices): %s\n",
                   worst_whole, worst_L, worst_N, worst_whole < 1000 ? "met" : "NOT met");
        if (!isnan(target_ms))
            printf("target 1,000 layers x 1,024 devices, exact search: %.1f ms (target < 1000 ms: %s)\n",
                   target_ms, target_ms < 1000 ? "met" : "NOT met");
        printf("target PipeDream profiles on 32 devices with replication: slowest exact search %.1f ms, "
               "whole search %.1f ms, slowest whole `cleave plan` question %.1f ms "
               "(target < 100 ms for the question: %s)\n",
               pd_worst_exact, pd_worst_search, pd_worst_q, pd_worst_q < 100 ? "met" : "NOT met");
    }
    if (rc) {
        cl_out_abort(&o);
        fprintf(stderr, "cleave: %s\n", e.msg);
        return rc;
    }
    return bench_csv_commit(&o, path);
}
