/* cmd_bench.c - `cleave bench [--out DIR] [--quick] [NAME...]`: run the
 * benchmarks (all, or those named), each writing DIR/NAME.csv. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "bench/bench.h"
#include "cli.h"

typedef struct bench_entry {
    const char *name;
    bench_fn run;
    const char *what;
} bench_entry;

static const bench_entry benches[] = {
    {"sim", sim_bench, "simulator: events/s and time per simulation vs stages and microbatches"},
    {"plan", plan_bench, "planner: planning time vs layers and devices, PipeDream profiles on 32 devices"},
    {"exec", exec_bench, "executor: GFLOP/s per layer vs FMA peak and SGEMM, samples/s, profile vs step, PyTorch"},
    {"validate", exec_val_bench, "prediction accuracy: simulated vs measured iteration time and memory over 20 plans"},
    {"pipe", exec_pipe_bench, "pipelined training: 2-stage FBP and 1F1B vs sequential samples/s, MPI vs threads"},
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
