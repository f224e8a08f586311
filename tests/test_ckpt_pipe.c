/* test_ckpt_pipe.c - checkpoints of pipelined training (cleave train --plan
 * --checkpoint/--resume, exec/run/pipe_ckpt.c): killed with SIGKILL or stopped
 * with SIGTERM at any point and resumed, every flushing schedule ends with
 * the very bytes of an uninterrupted run's weights file; the asynchronous
 * schedules are refused; a resume with another plan or options is refused. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "test_proc.h"

#define PIPE "tests/data/pipe/"

static void rm_rf(char *dir)
{
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* 2000 samples, batch 16: 125 iterations an epoch, 3 epochs. */
#define OPTS "--synthetic", "2000", "--epochs", "3", "--seed", "4"
#define OPTS_S "--synthetic 2000 --epochs 3 --seed 4"

/* The uninterrupted run's weights: dir/<name>.full.bin */
static void full_run(const char *plan, const char *dir, char *w, size_t cap)
{
    char args[2048];
    snprintf(w, cap, "%s/full.bin", dir);
    snprintf(args, sizeof args, "train --plan " PIPE "%s " OPTS_S " --save-weights %s", plan, w);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
}

/* SIGKILL mid-epoch 2 of a 1F1B run on threads, resumed: the same weights
 * and the same epoch losses as the run that was never stopped. */
static void test_sigkill_threads(void)
{
    char *dir = test_tmpdir(), wfull[600], ck[600], w[600], log[600], lfull[600], args[4096];
    snprintf(lfull, sizeof lfull, "%s/full.csv", dir);
    snprintf(args, sizeof args, "train --plan " PIPE "tiny2-1f1b.json " OPTS_S " --save-weights %s/full.bin --log %s",
             dir, lfull);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(wfull, sizeof wfull, "%s/full.bin", dir);
    snprintf(ck, sizeof ck, "%s/run.ckpt", dir);
    snprintf(w, sizeof w, "%s/resumed.bin", dir);
    snprintf(log, sizeof log, "%s/resumed.csv", dir);
    char *a1[] = {"train", "--plan", PIPE "tiny2-1f1b.json", OPTS, "--checkpoint", ck,
                  "--checkpoint-every", "10", "--save-weights", w, "--log", log, NULL};
    int ok; /* killed in epoch 2 */
    CU_ASSERT_EQUAL(tproc_signal_at(a1, dir, 160, SIGKILL, &ok), 128 + SIGKILL);
    CU_ASSERT(ok);
    CU_ASSERT(access(w, F_OK) != 0);
    int64_t at = tproc_ckpt_iters(ck);
    CU_ASSERT_EQUAL(at, 160);
    snprintf(args, sizeof args, "train --plan " PIPE "tiny2-1f1b.json " OPTS_S " --resume %s --checkpoint %s --save-weights %s --log %s",
             ck, ck, w, log);
    char *out = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "resumed from"));
    CU_ASSERT(tproc_same_file(wfull, w));
    if (!tproc_same_file(wfull, w))
        fprintf(stderr, "\nkilled after iteration %lld: weights differ\n", (long long)at);
    /* epoch lines: the loss, accuracy columns (not the timing ones) */
    char *x = tproc_slurp(lfull, NULL), *y = tproc_slurp(log, NULL);
    CU_ASSERT_FATAL(x && y);
    CU_ASSERT_EQUAL(tproc_lines(x), 4);
    CU_ASSERT_EQUAL(tproc_lines(y), 4);
    for (char *p = x, *q = y; p && q && *p && *q;) { /* first five fields of each line */
        char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        int f = 0;
        size_t n = 0;
        while (p + n < pe && f < 5) f += p[++n] == ',';
        CU_ASSERT(qe && strncmp(p, q, n) == 0);
        p = pe ? pe + 1 : NULL;
        q = qe ? qe + 1 : NULL;
    }
    free(x);
    free(y);
    free(out);
    rm_rf(dir);
}

/* Every flushing schedule (GPipe, ZB-H1, interleaved, replicated stages
 * with the ring all-reduce, the sequential kind, four stages): SIGTERM
 * stops all workers at one iteration end with a checkpoint, exit 143; the
 * resumed run ends with the uninterrupted run's weights. */
static void test_sigterm_every_kind(void)
{
    static const char *plans[] = {"tiny2-gpipe.json", "tiny2-zbh1.json", "tiny-interleaved.json",
                                  "tiny-rep-1f1b.json", "tiny2-sequential.json", "tiny4-1f1b.json"};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        char *dir = test_tmpdir(), wfull[600], ck[600], w[600], plan[200], args[4096];
        full_run(plans[i], dir, wfull, sizeof wfull);
        snprintf(ck, sizeof ck, "%s/run.ckpt", dir);
        snprintf(w, sizeof w, "%s/resumed.bin", dir);
        snprintf(plan, sizeof plan, PIPE "%s", plans[i]);
        char *a1[] = {"train", "--plan", plan, OPTS, "--checkpoint", ck, "--checkpoint-every", "7",
                      "--save-weights", w, NULL};
        int ok;
        CU_ASSERT_EQUAL(tproc_signal_at(a1, dir, 14, SIGTERM, &ok), 143);
        CU_ASSERT(ok);
        char *err = tproc_output(dir, "err");
        CU_ASSERT(err && tproc_lines(err) == 1 && strstr(err, "cleave: SIGTERM: stopped after iteration") &&
                  strstr(err, "checkpoint written to"));
        free(err);
        CU_ASSERT(access(w, F_OK) != 0);
        int64_t at = tproc_ckpt_iters(ck); /* the iteration end all workers agreed on */
        CU_ASSERT(at > 14 && at < 375);
        snprintf(args, sizeof args, "train --plan %s " OPTS_S " --resume %s --save-weights %s", plan,
                 ck, w);
        CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
        CU_ASSERT(tproc_same_file(wfull, w));
        if (!tproc_same_file(wfull, w))
            fprintf(stderr, "\n%s: stopped after iteration %lld: weights differ\n", plans[i], (long long)at);
        rm_rf(dir);
    }
}

/* Asynchronous schedules never drain at an iteration end: --checkpoint is
 * refused (exit 2, one line); a signal stops them at once saying nothing
 * was saved (exit 130). */
static void test_async_refused(void)
{
    char *dir = test_tmpdir(), ck[600], args[2048], *err = NULL;
    snprintf(ck, sizeof ck, "%s/x.ckpt", dir);
    static const char *plans[] = {"tiny2-fbp.json", "tiny2-pipedream.json"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "train --plan " PIPE "%s --synthetic 400 --checkpoint %s", plans[i], ck);
        char *out = NULL;
        CU_ASSERT_EQUAL(test_run_cli(args, &out, &err), 2);
        CU_ASSERT(tproc_lines(err) == 1 && strstr(err, "no iteration end drains the pipeline"));
        CU_ASSERT_STRING_EQUAL(out, ""); /* refused before any data or training */
        CU_ASSERT(access(ck, F_OK) != 0);
        free(out);
        free(err);
    }
    char *a1[] = {"train", "--plan", PIPE "tiny2-fbp.json", "--synthetic", "2000", "--epochs", "100000", NULL};
    pid_t pid = tproc_cleave(a1, dir);
    tproc_wait_output(pid, dir, "\n    1 "); /* the first epoch line */
    kill(pid, SIGINT);
    CU_ASSERT_EQUAL(tproc_reap(pid), 130);
    err = tproc_output(dir, "err");
    CU_ASSERT(err && tproc_lines(err) == 1 && strstr(err, "cleave: SIGINT: stopped") &&
              strstr(err, "nothing was saved"));
    free(err);
    rm_rf(dir);
}

/* A resume is refused (exit 2, one line) with another plan, other options,
 * a sequential run's checkpoint, or a pipelined checkpoint given to
 * sequential training. */
static void test_mismatch_refused(void)
{
    char ck[600], sq[600], args[2048];
    char *dir = test_scratch(sizeof ck, "p.ckpt", ck, "s.ckpt", sq, NULL);
    snprintf(args, sizeof args, "train --plan " PIPE "tiny2-1f1b.json --synthetic 400 --checkpoint %s", ck);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "train --model tests/data/ckpt/tiny.json --synthetic 400 --epochs 1 --checkpoint %s", sq);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    static const struct {
        const char *args, *msg;
        int seq_ckpt;
    } c[] = {
        {"train --plan " PIPE "tiny2-gpipe.json --synthetic 400", "plan-hash", 0},
        {"train --plan " PIPE "tiny2-1f1b.json --synthetic 400 --lr 0.5", "this run has --lr 0.5", 0},
        {"train --plan " PIPE "tiny2-1f1b.json --synthetic 400 --epochs 2", "this run has --epochs 2", 0},
        {"train --plan " PIPE "tiny2-1f1b.json --synthetic 800", "training-data", 0},
        {"train --plan " PIPE "tiny2-1f1b.json --synthetic 400", "not of a pipelined run", 1},
        {"train --model tests/data/ckpt/tiny.json --synthetic 400 --epochs 1", "not of a sequential run", 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char full[2600], *err = NULL;
        snprintf(full, sizeof full, "%s --resume %s", c[i].args, c[i].seq_ckpt ? sq : ck);
        CU_ASSERT_EQUAL(test_run_cli(full, NULL, &err), 2);
        CU_ASSERT(tproc_lines(err) == 1 && strstr(err, c[i].msg));
        if (!strstr(err, c[i].msg)) fprintf(stderr, "\n  %s\n  -> %s", full, err);
        free(err);
    }
    rm_rf(dir);
}

TEST_SUITE(ckpt_pipe)
{
    test_add_suite("ckpt_pipe");
    test_add("1f1b on threads: SIGKILL, resume: the same weights bytes and epoch lines", test_sigkill_threads);
    test_add("every flushing kind: SIGTERM at an iteration end, resume: the same weights", test_sigterm_every_kind);
    test_add("fbp, pipedream: --checkpoint refused, a signal stops at once", test_async_refused);
    test_add("resume with another plan, options, data or kind: refused", test_mismatch_refused);
}
