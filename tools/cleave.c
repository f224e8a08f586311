/* cleave.c - the command line: a table of subcommands and a dispatcher.
 * Every subcommand is a function in tools/cmd_<name>.c (see cli.h). */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "exec/nn/gemm.h"
#include "cli.h"
#include "base/fileio.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"import",  cmd_import,  "turn an ONNX graph into a cleave model file"},
    {"inspect", cmd_inspect, "show a model, cluster, profile or plan file as a table"},
    {"plan",    cmd_plan,    "partition a model over a cluster: stages, devices, schedule"},
    {"sim",     cmd_sim,     "simulate a plan's schedule event by event: time, bubble, memory, trace"},
    {"export",  cmd_export,  "turn a plan into torch, DeepSpeed or Megatron settings"},
    {"plot",    cmd_plot,    "draw a trace (Gantt chart, memory over time) or validate results (PNG/SVG)"},
    {"bench",   cmd_bench,   "run the benchmarks, writing CSV (make bench)"},
    {"train",   cmd_train,   "train a model on Fashion-MNIST with the embedded executor"},
    {"profile", cmd_profile, "time every layer on this machine, writing a profile"},
    {"validate", cmd_validate, "predict a plan, run it for real, compare time and memory"},
    {"sweep",   cmd_sweep,   "plan and simulate over device counts and schedules: CSV + speed-up curve"},
    {"compare", cmd_compare, "best plan on each of several clusters: time and cost per epoch, chart"},
    {"demo",    cmd_demo,    "the main job on built-in defaults: plans, exports, curves, charts (make demo)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cleave <command> [options]   (cleave <command> --help for its options)\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-10s %s\n", "version", "print cleave's version (also cleave --version)");
}

int main(int argc, char **argv)
{
    exec_blas_setup(argc, argv); /* may re-execute with the fast OpenBLAS kernel */
    /* Keep freed memory in the process: the planner simulates candidate
     * after candidate, sweeps plan point after point, and glibc would
     * otherwise hand each run's large arrays back to the kernel (mmap and
     * trim) and fault them in again, zeroed, on the next run.  Measured
     * (docs/simulator.md): 64-512-stage replays ran 14-16 M events/s, a
     * third of their CPU time in first-touch page faults; 22 M with this.
     * 32 MiB is glibc's largest mmap threshold. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("cleave %s\n", CLEAVE_VERSION);
        return 0;
    }
    cl_inputs_track(1); /* no output may replace a file the command read */
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "cleave: unknown command \"%s\" (hint: cleave --help lists them)\n", argv[1]);
    return 2;
}
