/* test_pipe_cli.c - `cleave train --plan` end to end: epoch lines, the CSV
 * log, the trace and weights files; refusals before any training (exit 2,
 * one line, no output files); and the MPI backend: the same weights bit for
 * bit as the threads backend, and a world size that does not fit the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/fileio.h"
#include "test.h"
#include "test_pipe.h"

static int count_lines(const char *s, const char *prefix)
{
    int n = 0;
    for (const char *p = s; p && *p;) {
        if (!strncmp(p, prefix, strlen(prefix))) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

static void test_train_files(void)
{
    char args[2048], log[512], trace[512], w[512];
    char *dir = test_scratch(sizeof log, "log.csv", log, "trace.json", trace, "w.bin", w, NULL);
    snprintf(args, sizeof args, "train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 256 --epochs 2 --log %s --trace %s --save-weights %s",
             log, trace, w);
    char *out, *err;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 stages on 2 workers (threads), schedule 1f1b, batch 16 = 4 x 4"));
    CU_ASSERT_EQUAL(count_lines(out, "    1 "), 1);
    CU_ASSERT_EQUAL(count_lines(out, "    2 "), 1);
    char *text;
    size_t len;
    cl_err e = {0};
    CU_ASSERT_EQUAL(cl_read_file(log, 1 << 20, &text, &len, &e), CL_OK);
    if (text) {
        CU_ASSERT_EQUAL(count_lines(text, "epoch,loss,"), 1);
        CU_ASSERT_EQUAL(count_lines(text, "2,"), 1);
        free(text);
    }
    CU_ASSERT_EQUAL(cl_read_file(trace, 1 << 24, &text, &len, &e), CL_OK);
    if (text) {
        cJSON *root = cJSON_Parse(text);
        CU_ASSERT_PTR_NOT_NULL(root);
        CU_ASSERT(cJSON_GetArraySize(cJSON_GetObjectItem(root, "traceEvents")) > 100);
        cJSON_Delete(root);
        free(text);
    }
    CU_ASSERT_EQUAL(cl_read_file(w, 1 << 24, &text, &len, &e), CL_OK);
    if (text) {
        CU_ASSERT(!strncmp(text, "cleave-weights 1 10\nconv1.weight 36\n", 36));
        free(text);
    }
    free(out);
    free(err);
    remove(log);
    remove(trace);
    remove(w);
    rmdir(dir);
    free(dir);
}

/* Bad plans fail before training: exit 2, one line naming the file and
 * the problem, no epoch header, no log or weights file. */
static void test_refusals(void)
{
    static const struct {
        const char *plan, *msg;
    } cases[] = {
        {"bad-stages.json", "stages: layer 5 (fc1) is in no stage"},
        {"bad-block.json", "layers[8] (fc2): the executor cannot run kind block"},
        {"bad-adam.json", "optimizer: the executor trains with SGD"},
    };
    char args[2048], log[512], w[512];
    char *dir = test_scratch(sizeof log, "log.csv", log, "w.bin", w, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "train --plan tests/data/pipe/%s --synthetic 256 --log %s --save-weights %s",
                 cases[i].plan, log, w);
        char *out, *err;
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
        CU_ASSERT(!strncmp(err, "cleave: tests/data/pipe/", 24));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[i].msg));
        CU_ASSERT_EQUAL(count_lines(err, ""), 1);
        CU_ASSERT_PTR_NULL(strstr(out, "epoch"));
        CU_ASSERT_NOT_EQUAL(access(log, F_OK), 0);
        CU_ASSERT_NOT_EQUAL(access(w, F_OK), 0);
        free(out);
        free(err);
    }
    char *out, *err;
    CU_ASSERT_EQUAL(test_run_cli("train --plan tests/data/pipe/tiny2-1f1b.json --epochs 1 --iterations 3", &out, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "exclude each other"));
    free(out);
    free(err);
    rmdir(dir);
    free(dir);
}

/* MPI: mpirun -np 2 gives the same weights file as the threads backend,
 * byte for byte, for every synchronous schedule, a replicated stage (ring
 * all-reduce on 3 ranks) and PipeDream's stashing; rank 0 alone prints. */
static void test_mpi_same_bits(void)
{
    static const struct {
        const char *plan;
        int np;
    } cases[] = {
        {"tiny2-gpipe.json", 2}, {"tiny2-1f1b.json", 2},      {"tiny2-zbh1.json", 2},
        {"tiny-interleaved.json", 2}, {"tiny-rep-1f1b.json", 3}, {"tiny3-pipedream.json", 3},
    };
    char args[2048], wt[512], wm[512];
    char *dir = test_scratch(sizeof wt, "threads.bin", wt, "mpi.bin", wm, NULL);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out, *err, *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        cl_err e = {0};
        snprintf(args, sizeof args, "train --plan tests/data/pipe/%s --synthetic 256 --iterations 20 --save-weights %s",
                 cases[i].plan, wt);
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
        free(out);
        free(err);
        snprintf(args, sizeof args, "train --plan tests/data/pipe/%s --synthetic 256 --iterations 20 --backend mpi --save-weights %s",
                 cases[i].plan, wm);
        int st = tp_mpirun(cases[i].np, args, &out, &err);
        if (st) fprintf(stderr, "\nmpirun %s: exit %d\n%s\n", cases[i].plan, st, err);
        CU_ASSERT_EQUAL(st, 0);
        CU_ASSERT_EQUAL(count_lines(out, "epoch "), 1); /* one header: rank 0 */
        CU_ASSERT_EQUAL(count_lines(out, "    1 "), 1);
        CU_ASSERT_EQUAL(cl_read_file(wt, 1 << 24, &a, &la, &e), CL_OK);
        CU_ASSERT_EQUAL(cl_read_file(wm, 1 << 24, &b, &lb, &e), CL_OK);
        CU_ASSERT(a && b && la == lb && la > 100 && memcmp(a, b, la) == 0);
        if (!(a && b && la == lb && memcmp(a, b, la) == 0))
            fprintf(stderr, "\n%s: the MPI weights differ from the threads weights\n", cases[i].plan);
        free(a);
        free(b);
        free(out);
        free(err);
        remove(wt);
        remove(wm);
    }
    rmdir(dir);
    free(dir);
}

/* A world that does not fit the plan is refused before any data is loaded
 * or training starts, once (rank 0), exit 2.  Without mpirun, cleave starts
 * it itself with one rank per worker, and trains. */
static void test_mpi_world_mismatch(void)
{
    char *out, *err;
    int st = tp_mpirun(3, "train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 256 --backend mpi", &out, &err);
    CU_ASSERT_EQUAL(st, 2);
    CU_ASSERT_EQUAL(count_lines(err, "cleave: tests/data/pipe/tiny2-1f1b.json: the plan runs on 2 workers but MPI has 3 ranks (hint: mpirun -np 2"), 1);
    CU_ASSERT_PTR_NULL(strstr(out, "epoch"));
    free(out);
    free(err);
    st = tp_mpirun(0, "train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 256 --backend mpi", &out, &err);
    CU_ASSERT_EQUAL(st, 0);
    if (st) fprintf(stderr, "\n  %s", err);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 workers"));
    CU_ASSERT_EQUAL(count_lines(out, "    1 "), 1); /* one epoch line, from rank 0 only */
    free(out);
    free(err);
}

/* A progress bar per epoch on a terminal, erased before the epoch's line;
 * nothing of it when stderr is not a terminal. */
static void test_progress_on_tty(void)
{
    char *argv[] = {"cleave", "train", "--plan", "tests/data/pipe/tiny2-1f1b.json", "--synthetic", "2048",
                    "--epochs", "2", NULL};
    char buf[16384];
    CU_ASSERT_EQUAL(test_run_on_tty(argv, buf, sizeof buf), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "epoch 1/2 ["));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "epoch 2/2 ["));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "iteration 1/128"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\r\033[K"));
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("train --plan tests/data/pipe/tiny2-1f1b.json --synthetic 2048 --epochs 2", &out, &err), 0);
    CU_ASSERT_PTR_NULL(err && strchr(err, '\r'));
    CU_ASSERT_PTR_NULL(out && strchr(out, '\r'));
    free(out);
    free(err);
}

TEST_SUITE(pipe_cli)
{
    test_add_suite("pipe_cli");
    test_add("train --plan: epoch lines, log, trace, weights", test_train_files);
    test_add("refusals before training: stages, kinds, optimiser, options", test_refusals);
    test_add("train --plan: a progress bar on a terminal only", test_progress_on_tty);
}

TEST_SUITE(pipe_mpi)
{
    test_add_suite("pipe_mpi");
    test_add("mpirun -np 2/3: the threads backend's weights bit for bit", test_mpi_same_bits);
    test_add("world size differs from the workers: exit 2 before training", test_mpi_world_mismatch);
}
