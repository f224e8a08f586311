/* cmd_bench.c - `cleave bench [--out DIR] [--quick] [NAME...]`: run the
 * benchmarks (all, or those named), each writing DIR/NAME.csv. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <math.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "bench/fidelity.h"
#include "cli.h"
#include "gnuplot.h"

/* `cleave bench fidelity`: bench/fidelity.h's table, then its plot
 * (fidelity.gp) beside the CSV. */
static int fidelity_bench(const char *outdir, int quick)
{
    (void)quick; /* the table is small: always whole */
    fid_summary sum;
    cl_err e = {0};
    int rc = fidelity_run(FIDELITY_CSV, outdir, stdout, &sum, &e);
    if (rc) return cli_report(&e);
    double lo = HUGE_VAL, hi = 0;
    for (int i = 0; i < sum.evaluated; i++) {
        lo = fmin(lo, fmin(sum.points[i].measured_s, sum.points[i].predicted_s));
        hi = fmax(hi, fmax(sum.points[i].measured_s, sum.points[i].predicted_s));
    }
    if (sum.evaluated) {
        char path[4096];
        snprintf(path, sizeof path, "%s/fidelity.png", outdir);
        gp_plot *g = gp_new();
        gp_str(g, "title", "cleave on published training runs: iteration time");
        gp_num(g, "lo", lo / 1.5);
        gp_num(g, "hi", hi * 1.5);
        FILE *d = gp_data(g, "runs");
        for (int i = 0; i < sum.evaluated; i++)
            fprintf(d, "%.9g %.9g %d\n", sum.points[i].measured_s, sum.points[i].predicted_s, sum.points[i].fits);
        rc = gp_render(g, "fidelity", path, 900, 800, &e);
        gp_free(g);
        if (rc) cli_report(&e);
        else printf("wrote %s\n", path);
    }
    free(sum.points);
    return rc;
}

typedef struct bench_entry {
    const char *name;
    bench_fn run;
    const char *what;
} bench_entry;

static const bench_entry benches[] = {
    {"sim", sim_bench, "simulator: events/s and time per simulation vs stages and microbatches"},
    {"plan", plan_bench, "planner: planning time vs layers and devices, PipeDream profiles on 32 devices"},
    {"exec", exec_bench, "executor: GFLOP/s per layer vs FMA peak and SGEMM, samples/s, profile vs step, PyTorch"},
    {"validate", exec_val_bench, "prediction accuracy: simulated vs measured iteration time and memory over 43 plans (MLP, CNN, vision transformer; 3 tensor-parallel on threads, 3 recomputing, 2 with tensor ranks as MPI processes, 3 sequence parallel)"},
    {"validate-tp", exec_val_bench_tp, "the validate suite's 8 tensor-parallel vision transformer plans (3 on threads, 2 as MPI processes, 3 sequence parallel) and their 2 one-stage t = 1 twins (validate-tp.csv)"},
    {"validate-recompute", exec_val_bench_recompute, "the validate suite's 3 recomputing two-stage vision transformer plans and their 2 twins without recomputation (validate-recompute.csv)"},
    {"pipe", exec_pipe_bench, "pipelined training: 2-stage FBP and 1F1B vs sequential samples/s, MPI vs threads"},
    {"fidelity", fidelity_bench, "published Megatron-style runs: predicted vs measured iteration time (CSV and plot)"},
    {"studies", study_bench, "cleave demo wall time (target under 60 s), sweep time per point, compare per cluster"},
    {NULL, NULL, NULL} /* sentinel: benchmarks are listed above it */
};

typedef struct bench_args {
    const char *out;
    int quick;
    cli_list args;          /* NAME... */
} bench_args;

static const cli_opt bench_opts[] = {
    {"out", 0, CLI_STR, CLI_FIELD(bench_args, out), .help = NULL},
    {"quick", 0, CLI_FLAG, CLI_FIELD(bench_args, quick), .help = NULL},
};
static const cli_spec bench_spec = {"bench", bench_opts, CLI_N(bench_opts), .args = CLI_AT(bench_args, args)};

int cmd_bench(int argc, char **argv)
{
    bench_args x = {.out = "bench/results"};
    int rc = cli_parse(&bench_spec, argc, argv, &x, 0);
    if (rc == CLI_HELP) {
        printf("usage: cleave bench [--out DIR] [--quick] [NAME...]\n\nbenchmarks:\n");
        for (const bench_entry *b = benches; b->name; b++)
            printf("  %-10s %s\n", b->name, b->what);
        return 0;
    }
    if (rc) return rc;
    const char *out = x.out;
    int named = x.args.n, ran = 0;
    mkdir(out, 0777);
    for (const bench_entry *b = benches; b->name; b++) {
        int want = !named;
        for (int i = 0; i < named && i < CLI_LIST_MAX; i++)
            if (!strcmp(x.args.v[i], b->name)) want = 1;
        if (!want) continue;
        ran++;
        printf("== bench %s: %s\n", b->name, b->what);
        fflush(stdout);
        int r = b->run(out, x.quick);
        if (r && !rc) rc = r;
    }
    if (named && ran != named)
        return cli_usage_error("bench", "unknown benchmark name (cleave bench --help lists them)");
    return rc;
}
