/* test_absurd.c - absurd values on the command line and in files get a
 * clear error, never an overflow, an out-of-memory abort or a run without
 * end: each case runs the cleave binary and asserts its exit status, one
 * line on stderr starting "cleave" and naming the problem, and no output
 * file.  The 30 s bound per case only catches hangs (a refusal takes
 * milliseconds); it is not a speed target. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "base/measure.h"

#define HANG_S 30.0 /* guard against runs that never end */

typedef struct acase {
    const char *args;  /* after "cleave"; OUT is replaced by an output path */
    int status;        /* expected exit status                           */
    const char *msg;   /* a piece of the one-line message                */
} acase;

/* Run each case; args containing "OUT" get a path in a fresh folder there,
 * which must not exist afterwards. */
static void run_cases(const acase *c, int n)
{
    char *dir = test_tmpdir();
    for (int i = 0; i < n; i++) {
        char args[2048], out_path[600];
        snprintf(out_path, sizeof out_path, "%s/out-%d", dir, i);
        const char *o = strstr(c[i].args, "OUT");
        if (o)
            snprintf(args, sizeof args, "%.*s%s%s", (int)(o - c[i].args), c[i].args, out_path, o + 3);
        else
            snprintf(args, sizeof args, "%s", c[i].args);
        char *out = NULL, *err = NULL;
        double t0 = cl_now_s();
        int st = test_run_cli(args, &out, &err);
        double dt = cl_now_s() - t0;
        int nl = 0;
        for (const char *p = err; *p; p++) nl += *p == '\n';
        int ok = st == c[i].status && dt < HANG_S && nl == (c[i].status ? 1 : 0) &&
                 (!c[i].status || (strncmp(err, "cleave", 6) == 0 && strstr(err, c[i].msg))) &&
                 (!o || access(out_path, F_OK) != 0);
        CU_ASSERT(ok);
        if (!ok)
            fprintf(stderr, "\n  cleave %s\n  -> exit %d after %.2f s, %d line(s): %s", args, st, dt,
                    nl, err);
        free(out);
        free(err);
    }
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

#define N(a) ((int)(sizeof(a) / sizeof *(a)))
#define PLAN_Q "plan --model models/fmnist-cnn.json --device A100-80GB "
#define SIM_P "sim tests/data/sim/fmnist-2stage.json "
#define TRAIN_M "train --model tests/data/ckpt/tiny.json --synthetic 400 "
#define ABS "tests/data/absurd/"
/* `<cmd> OPT VAL<rest>` refused with "OPT: VAL is out of range" */
#define RANGE(cmd, opt, val, rest) {cmd opt " " val rest, 2, opt ": " val " is out of range"}

/* cleave plan: device counts, links, batch and microbatches out of range or
 * not numbers, clusters and models whose sizes overflow. */
static void test_plan(void)
{
    static const acase c[] = {
        RANGE(PLAN_Q, "--devices", "0", " -o OUT"),
        RANGE(PLAN_Q, "--devices", "-3", " -o OUT"),
        RANGE(PLAN_Q, "--devices", "10000000", " -o OUT"),
        {PLAN_Q "--devices 1000000000000 -o OUT", 2, "--devices"},
        RANGE(PLAN_Q "--devices 4 ", "--batch", "0", " -o OUT"),
        {PLAN_Q "--devices 4 --batch 99999999999999999999 -o OUT", 2, "--batch: expected an integer"},
        RANGE(PLAN_Q "--devices 4 ", "--bandwidth", "0", " -o OUT"),
        RANGE(PLAN_Q "--devices 4 ", "--bandwidth", "-5", " -o OUT"),
        {PLAN_Q "--devices 4 --bandwidth nan -o OUT", 2, "--bandwidth: expected a finite number"},
        {PLAN_Q "--devices 4 --bandwidth inf -o OUT", 2, "--bandwidth: expected a finite number"},
        RANGE(PLAN_Q "--devices 4 ", "--latency", "-1", " -o OUT"),
        {PLAN_Q "--devices 4 --microbatches 1000000000 -o OUT", 2, "microbatches"},
        {PLAN_Q "--devices 4 --microbatches 0 -o OUT", 2, "--microbatches"},
        {PLAN_Q "--devices 4 --stages 1000000000000 -o OUT", 2, "--stages"},
        {PLAN_Q "--devices 4 --max-cuts 1000000000000 -o OUT", 2, "--max-cuts"},
        {"plan --model models/fmnist-cnn.json --cluster tests/data/cluster/bad-count-huge.json -o OUT", 2,
         "devices.count: 1e+30 is out of range"},
        {"plan --model models/fmnist-cnn.json --cluster tests/data/cluster/bad-bandwidth-zero.json -o OUT", 2,
         "bandwidth"},
        {"plan --model models/fmnist-cnn.json --cluster tests/data/cluster/bad-negative-latency.json -o OUT", 2,
         "latency"},
        {"plan --model " ABS "model-shape-overflow.json --device A100-80GB --devices 2 -o OUT", 2,
         "more than 2^40 elements"},
        {"plan --model " ABS "model-params-overflow.json --device A100-80GB --devices 2 -o OUT", 2,
         "more than 2^53 parameters"},
        {"inspect " ABS "model-nan.json", 2, "NaN and Infinity are not JSON"},
        {"inspect " ABS "model-trillion-input.json", 2, "layers[1].inputs[0]"},
        /* node numbers are labels, not sizes: a trillion is fine */
        {"plan --profile " ABS "pipedream-trillion.txt --devices 2 -o OUT.json", 0, ""},
    };
    /* the last case writes its plan: check it is there, then drop the
     * "no output" rule for it by running it apart */
    run_cases(c, N(c) - 1);
    char *dir = test_tmpdir(), args[1024], path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    snprintf(args, sizeof args, "plan --profile " ABS "pipedream-trillion.txt --devices 2 -o %s", path);
    double t0 = cl_now_s();
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    CU_ASSERT(cl_now_s() - t0 < HANG_S);
    CU_ASSERT_EQUAL(access(path, F_OK), 0);
    remove(path);
    rmdir(dir);
    free(dir);
}

/* cleave sim: 10^9 microbatches (refused by range), 2^24 (refused before
 * allocating 40 GiB of ops), the event and wall-time budgets, plans naming
 * devices the cluster lacks, links of zero or negative bandwidth, infinite
 * times. */
static void test_sim(void)
{
    static const acase c[] = {
        RANGE(SIM_P, "--microbatches", "1000000000", " --trace OUT"),
        {SIM_P "--microbatches 16777216 --trace OUT", 2, "more than the 134217728 a schedule may hold"},
        {SIM_P "--schedule fbp --microbatches 16777216 --trace OUT", 2, "a schedule may hold"},
        {SIM_P "--schedule zb-h1 --microbatches 100000 --iterations 1000 --trace OUT", 2,
         "a schedule may hold"},
        RANGE(SIM_P, "--microbatches", "0", ""),
        RANGE(SIM_P, "--iterations", "-1", ""),
        {SIM_P "--iterations 1000000000000", 2, "--iterations"},
        {SIM_P "--microbatches 200000 --max-events 100000 --trace OUT", 2, "event budget exhausted"},
        {SIM_P "--microbatches 1000000 --max-seconds 0.05 --trace OUT", 2, "wall-time budget exhausted"},
        {SIM_P "--max-seconds nan", 2, "--max-seconds: expected a finite number"},
        RANGE(SIM_P, "--max-events", "0", ""),
        {"sim " ABS "plan-missing-device.json --trace OUT", 2, "device 7 does not exist"},
        {"sim " ABS "plan-huge-micro.json --trace OUT", 2, "1000000000 microbatches"},
        {"sim " ABS "plan-bandwidth-zero.json --trace OUT", 2, "bandwidth_Bps: expected a positive number, got 0"},
        {"sim " ABS "plan-bandwidth-negative.json --trace OUT", 2, "bandwidth_Bps: expected a positive number"},
        {"sim " ABS "plan-time-inf.json --trace OUT", 2, "stages[0].fwd_s: expected a finite number"},
        {"export " ABS "plan-missing-device.json --to torch -o OUT", 2, "device 7 does not exist"},
    };
    run_cases(c, N(c));
}

/* cleave train: batch, epochs, learning rate and sample counts out of
 * range; plans and models that cannot be trained; iteration counts whose
 * op lists would not fit in memory. */
static void test_train(void)
{
    static const acase c[] = {
        RANGE(TRAIN_M, "--batch", "0", " --save-weights OUT"),
        RANGE(TRAIN_M, "--batch", "1000000000", " --save-weights OUT"),
        RANGE(TRAIN_M, "--epochs", "-1", " --save-weights OUT"),
        RANGE(TRAIN_M, "--epochs", "0", " --save-weights OUT"),
        {TRAIN_M "--lr nan --save-weights OUT", 2, "--lr: expected a finite number"},
        RANGE(TRAIN_M, "--lr", "-1", " --save-weights OUT"),
        {TRAIN_M "--momentum 1 --save-weights OUT", 2, "--momentum"},
        RANGE(TRAIN_M, "--checkpoint-every", "0", " --checkpoint OUT"),
        {"train --model tests/data/ckpt/tiny.json --synthetic 10000000000 --save-weights OUT", 2,
         "--synthetic: 10000000000 is out of range"},
        {"train --model " ABS "model-shape-overflow.json --synthetic 400 --save-weights OUT", 2,
         "more than 2^40 elements"},
        {"train --plan " ABS "plan-missing-device.json --synthetic 400 --save-weights OUT", 2,
         "device 7 does not exist"},
        {"train --plan " ABS "plan-huge-micro.json --synthetic 400 --save-weights OUT", 2,
         "1000000000 microbatches"},
        {"train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 400 --iterations 100000000 --save-weights OUT",
         2, "a schedule may hold"},
        {"train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 400 --iterations 0 --save-weights OUT", 2,
         "--iterations: 0 is out of range"},
        {"train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 400 --epochs -1 --save-weights OUT", 2,
         "--epochs: -1 is out of range"},
    };
    run_cases(c, N(c));
}

/* Files in dir other than . and .. */
static int n_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *x; (x = readdir(d));) n += strcmp(x->d_name, ".") && strcmp(x->d_name, "..");
    closedir(d);
    return n;
}

/* A command that fails after it started its work leaves no output file and
 * no temporary beside it, and a file that was there keeps its content: an
 * infeasible plan (4 KiB devices), a simulation that exhausts its event
 * budget with a trace requested, training that diverges with weights
 * requested. */
static void test_failed_runs_leave_nothing(void)
{
    static const struct {
        const char *args; /* the output path follows */
        const char *name, *msg;
    } c[] = {
        {"plan --model models/fmnist-cnn.json --cluster " ABS "cluster-tiny-memory.json -o",
         "plan.json", "no plan fits in memory"},
        {SIM_P "--microbatches 200000 --max-events 1000 --trace", "trace.json", "event budget exhausted"},
        {TRAIN_M "--lr 100 --epochs 10 --save-weights", "w.bin", "training diverged"},
    };
    for (int i = 0; i < N(c); i++) {
        char *dir = test_tmpdir(), path[600], args[2048];
        snprintf(path, sizeof path, "%s/%s", dir, c[i].name);
        snprintf(args, sizeof args, "%s %s", c[i].args, path);
        char *err = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, c[i].msg));
        if (!strstr(err, c[i].msg)) fprintf(stderr, "\n  cleave %s\n  -> %s", args, err);
        free(err);
        CU_ASSERT_EQUAL(n_files(dir), 0);
        /* an earlier file of that name survives the failed run unchanged */
        FILE *f = fopen(path, "w");
        CU_ASSERT_FATAL(f != NULL);
        fputs("earlier\n", f);
        fclose(f);
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 2);
        char buf[64] = "";
        f = fopen(path, "r");
        CU_ASSERT_FATAL(f != NULL);
        CU_ASSERT_PTR_NOT_NULL(fgets(buf, sizeof buf, f));
        fclose(f);
        CU_ASSERT_STRING_EQUAL(buf, "earlier\n");
        CU_ASSERT_EQUAL(n_files(dir), 1);
        remove(path);
        rmdir(dir);
        free(dir);
    }
}

TEST_SUITE(absurd)
{
    test_add_suite("absurd");
    test_add("cleave plan: absurd devices, links, batch, sizes: exit 2, one line", test_plan);
    test_add("cleave sim: 10^9 microbatches, budgets, missing devices: exit 2, one line", test_sim);
    test_add("cleave train: absurd batch, epochs, rates, iterations: exit 2, one line", test_train);
    test_add("a run failing midway leaves no output file, an earlier one unchanged",
             test_failed_runs_leave_nothing);
}
