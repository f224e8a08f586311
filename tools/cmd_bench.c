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

int sim_bench(const char *outdir, int quick); /* bench/bench_sim.c */
int exec_bench(const char *outdir, int quick); /* bench/bench_exec.c */
int plan_bench(const char *outdir, int quick); /* bench/bench_plan.c */
int exec_val_bench(const char *outdir, int quick); /* bench/validate_bench.c */
int exec_pipe_bench(const char *outdir, int quick); /* bench/bench_pipe.c */
int study_bench(const char *outdir, int quick); /* bench/bench_study.c */

static const bench_entry benches[] = {
    {"sim", sim_bench, "simulator: events/s and time per simulation vs stages and microbatches"},
    {"plan", plan_bench, "planner: planning time vs layers and devices, PipeDream profiles on 32 devices"},
    {"exec", exec_bench, "executor: GFLOP/s per layer vs SGEMM peak, samples/s, profile vs step"},
    {"validate", exec_val_bench, "prediction accuracy: simulated vs measured iteration time and memory over 20 plans"},
    {"pipe", exec_pipe_bench, "pipelined training: 2-stage FBP and 1F1B vs sequential samples/s, MPI vs threads"},
    {"studies", study_bench, "cleave demo wall time (target under 60 s), sweep time per point, compare per cluster"},
    {NULL, NULL, NULL} /* sentinel: benchmarks are listed above it */
};

int cmd_bench(int argc, char **argv)
{
    const char *out = "bench/results";
    int quick = 0, named = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: cleave bench [--out DIR] [--quick] [NAME...]\n\nbenchmarks:\n");
            for (const bench_entry *b = benches; b->name; b++)
                printf("  %-10s %s\n", b->name, b->what);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (argv[i][0] == '-') return cli_usage_error("bench", "unknown option %s", argv[i]);
        else named++;
    }
    mkdir(out, 0777);
    int rc = 0, ran = 0;
    for (const bench_entry *b = benches; b->name; b++) {
        int want = !named;
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], b->name)) want = 1;
        if (!want) continue;
        ran++;
        printf("== bench %s: %s\n", b->name, b->what);
        fflush(stdout);
        int r = b->run(out, quick);
        if (r && !rc) rc = r;
    }
    if (named && ran != named)
        return cli_usage_error("bench", "unknown benchmark name (cleave bench --help lists them)");
    return rc;
}
