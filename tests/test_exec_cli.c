/* test_exec_cli.c - `cleave train` and `cleave profile` end to end, on
 * synthetic data and the miniature Fashion-MNIST folder in tests/data/exec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profiles/profile.h"
#include "base/fileio.h"
#include "test.h"

static int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* The log without its speed and time columns (they differ run to run):
 * epoch,loss,train_acc,test_acc,test_loss,[samples_per_s,elapsed_s,]lr.
 * Caller frees. */
static char *strip_timing(const char *csv)
{
    char *o = cl_malloc(strlen(csv) + 1), *q = o;
    int field = 0;
    for (const char *p = csv; *p; p++) {
        if (*p == '\n') {
            field = 0;
            *q++ = *p;
            continue;
        }
        if (*p == ',') field++;
        if (field != 5 && field != 6) *q++ = *p;
    }
    *q = 0;
    return o;
}

static void test_train_synthetic(void)
{
    char args[1024], log1[600], log2[600];
    char *dir = test_scratch(sizeof log1, "a.csv", log1, "b.csv", log2, NULL);
    char *out, *err;
    snprintf(args, sizeof args,
             "train --model tests/data/exec/tiny-mlp.json --synthetic 400 --epochs 2 --batch 16 --seed 3 --log %s",
             log1);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "epoch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n    1 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\n    2 "));
    CU_ASSERT_STRING_EQUAL(err, ""); /* no progress bar: stderr is not a terminal */
    free(out);
    free(err);
    char *a = test_slurp(log1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(count_lines(a), 3);
    CU_ASSERT(strncmp(a, "epoch,loss,train_acc,test_acc,test_loss,samples_per_s,elapsed_s,lr\n", 67) == 0);
    /* the same seed in another process: the same losses and accuracies */
    snprintf(args, sizeof args,
             "train --model tests/data/exec/tiny-mlp.json --synthetic 400 --epochs 2 --batch 16 --seed 3 --log %s",
             log2);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    char *b = test_slurp(log2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    char *sa = strip_timing(a), *sb = strip_timing(b);
    CU_ASSERT_STRING_EQUAL(sa, sb);
    CU_ASSERT_PTR_NOT_NULL(strstr(sa, "epoch,loss,train_acc,test_acc,test_loss,lr\n1,"));
    free(sa);
    free(sb);
    free(a);
    free(b);
    remove(log1);
    remove(log2);
    rmdir(dir);
    free(dir);
}

static void test_train_refusals(void)
{
    char *dir = test_tmpdir(), args[1024], log[600];
    snprintf(log, sizeof log, "%s/log.csv", dir);
    char *err;
    snprintf(args, sizeof args,
             "train --model tests/data/exec/with-block.json --synthetic 100 --log %s", log);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cleave: tests/data/exec/with-block.json: layers[5] (mystery): the executor cannot run kind block; it is for planning only"));
    CU_ASSERT_NOT_EQUAL(access(log, F_OK), 0); /* no output file */
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("train --model models/fmnist-mlp.json --data tests/data/exec/nowhere",
                                 NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "apt-get install dataset-fashion-mnist"));
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("train --synthetic 100", NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--model"));
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("train --model tests/data/exec/tiny-mlp.json --epochs 0", NULL, &err), 2);
    free(err);
    rmdir(dir);
    free(dir);
}

static void test_train_fmnist_folder(void)
{
    char *out;
    CU_ASSERT_EQUAL(test_run_cli("train --model models/fmnist-mlp.json --data tests/data/exec/fmnist --epochs 1 --batch 8",
                                 &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "40 Fashion-MNIST training samples, 20 test"));
    free(out);
}

static void test_profile(void)
{
    char *dir = test_tmpdir(), args[1024], path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    snprintf(args, sizeof args,
             "profile --model tests/data/exec/tiny-mlp.json --batch 4,8 --reps 3 --warmup 1 -o %s", path);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    prof p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(prof_load(&p, path, &e), CL_OK);
    CU_ASSERT_EQUAL(p.n_layers, 5);
    CU_ASSERT_EQUAL(p.source, PROF_MEASURED);
    CU_ASSERT_STRING_EQUAL(p.model, "tiny-mlp");
    CU_ASSERT_STRING_EQUAL(p.layers[1].name, "fc1");
    CU_ASSERT_EQUAL(p.layers[1].n_points, 2);
    CU_ASSERT_EQUAL(p.layers[1].batch[1], 8);
    CU_ASSERT(p.layers[1].fwd_s[0] > 0);
    CU_ASSERT(p.layers[1].bwd_w_s[0] > 0);
    CU_ASSERT_EQUAL(p.layers[1].bwd_in_s[0], 0); /* nothing before fc1 has parameters */
    CU_ASSERT(p.layers[3].bwd_in_s[0] > 0);
    CU_ASSERT_EQUAL(p.layers[2].bwd_w_s[0], 0);  /* relu has no weights */
    CU_ASSERT_EQUAL(p.layers[1].param_bytes, (36 * 16 + 16) * 4);
    CU_ASSERT_EQUAL(p.layers[1].act_bytes, 16 * 4);
    CU_ASSERT_EQUAL(p.layers[1].stash_bytes, 36 * 4); /* its input */
    prof_free(&p);
    remove(path);
    char *err;
    snprintf(args, sizeof args, "profile --model tests/data/exec/with-block.json --reps 2 -o %s", path);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "kind block"));
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    free(err);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(exec_cli)
{
    test_add_suite("exec_cli");
    test_add("train --synthetic: epoch lines, CSV log, same seed same numbers across runs",
             test_train_synthetic);
    test_add("train refuses a block layer (exit 2, no log), missing data, bad options",
             test_train_refusals);
    test_add("train on a Fashion-MNIST folder given with --data", test_train_fmnist_folder);
    test_add("profile writes a measured profile the loader reads", test_profile);
}
