/* test_vit_mpi.c - see test_vit.h: a tensor-parallel plan with its tensor
 * ranks as MPI processes (--tensor-over mpi), against the threads crew:
 * weights, checkpoints, and resumes across the two modes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/ckpt/checkpoint.h"

#include "test.h"
#include "test_pipe.h"
#include "test_proc.h"
#include "test_vit.h"

/* One MPI run of `args` on np ranks (tp_mpirun: root allowed, LeakSanitizer
 * told what Open MPI keeps until exit): its stdout holds `want` and its
 * weights file equals the threads run's `ref`. */
static void mpi_run_same(int np, const char *args, const char *want, const char *ref, const char *wm)
{
    char *out = NULL, *err = NULL;
    if (tp_mpirun(np, args, &out, &err) == 0) {
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
        CU_ASSERT(tproc_same_file(ref, wm));
    } else {
        fprintf(stderr, "\n    %s", err);
        CU_FAIL("the MPI run failed");
    }
    free(out);
    free(err);
}

void tv_mpi_same(const char *pl, int workers, int t, int crew, const char *dir)
{
    char wt[600], wm[600], args[2048], want[128];
    snprintf(wt, sizeof wt, "%s/threads.w", dir);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 4 --save-weights %s", pl, wt);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    if (crew) { /* a rank per worker, its tensor ranks a crew of threads */
        snprintf(wm, sizeof wm, "%s/mpi.w", dir);
        snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 4 --backend mpi --save-weights %s",
                 pl, wm);
        mpi_run_same(workers, args, " tensor-parallel threads (mpi), ", wt, wm);
    }
    /* a process per tensor rank: workers x t */
    snprintf(wm, sizeof wm, "%s/mpi-t.w", dir);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 4 --backend mpi --tensor-over mpi --save-weights %s",
             pl, wm);
    snprintf(want, sizeof want, " on %d workers x %d tensor-parallel ranks (mpi), ", workers, t);
    mpi_run_same(workers * t, args, want, wt, wm);
}

void tv_mpi_tensor_refusals(const char *pl, int workers, int t)
{
    char args[2048], want[128], *out = NULL, *err = NULL;
    /* a world of one rank per worker is refused, naming the size it needs */
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 1 --backend mpi --tensor-over mpi", pl);
    CU_ASSERT_EQUAL(tp_mpirun(workers, args, &out, &err), 2);
    snprintf(want, sizeof want, "x %d tensor ranks but MPI has %d ranks (hint: mpirun -np %d ", t, workers,
             workers * t);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, want));
    free(out);
    free(err);
    /* without --backend mpi: refused before any run */
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 1 --tensor-over mpi", pl);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "add --backend mpi"));
    free(err);
}

/* Do checkpoints a and b hold the same sections in the same order with the
 * same bytes, but for the two timings of each epoch record (run.epochs:
 * samples per second and elapsed seconds, entries 5 and 6 of 8, which no
 * two runs share)?  Names the first difference on stderr. */
static int same_state(const char *a, const char *b)
{
    exec_ckpt *ca = NULL, *cb = NULL;
    cl_err e = {0};
    int same = !exec_ckpt_read(&ca, a, &e) && !exec_ckpt_read(&cb, b, &e) &&
               exec_ckpt_count(ca) == exec_ckpt_count(cb) && exec_ckpt_count(ca) > 0;
    for (int i = 0; same && i < exec_ckpt_count(ca); i++) {
        const char *name = exec_ckpt_name(ca, i);
        size_t la, lb;
        const unsigned char *x = exec_ckpt_find(ca, name, &la), *y = exec_ckpt_find(cb, name, &lb);
        same = y && !strcmp(name, exec_ckpt_name(cb, i)) && la == lb;
        if (same && !strcmp(name, "run.epochs")) {
            for (size_t k = 0; same && k < la / sizeof(double); k++)
                same = k % 8 == 5 || k % 8 == 6 ||
                       !memcmp(x + k * sizeof(double), y + k * sizeof(double), sizeof(double));
        } else if (same) {
            same = !memcmp(x, y, la);
        }
        if (!same) fprintf(stderr, "\n    %s and %s differ at section %s", a, b, name);
    }
    exec_ckpt_free(ca);
    exec_ckpt_free(cb);
    return same;
}

/* Run `args` (NULL-terminated) under mpirun on np ranks until world rank 0
 * has written its checkpoint at iteration n and stopped itself there
 * (CLEAVE_TEST_PAUSE_AT), then kill the whole job: waiting on our own
 * child's rank, not on a clock. */
static void mpi_kill_at(int np, char **args, const char *dir, int64_t n)
{
    tproc_pause_at(n);
    pid_t mr = tproc_mpirun(np, args, dir);
    tproc_pause_at(-1);
    pid_t r0 = -1;
    double t0 = tproc_now(); /* a guard against a hang, not a speed target */
    while ((r0 = tproc_rank_pid(mr, 0)) < 0 && !tproc_ended(mr) && tproc_now() - t0 < TPROC_HANG_S)
        usleep(2000);
    CU_ASSERT(r0 > 0 && tproc_wait_stopped(r0) == 0);
    kill(-mr, SIGKILL); /* mpirun's process group: every rank */
    CU_ASSERT_EQUAL(tproc_reap(mr), 128 + SIGKILL);
}

void tv_mpi_ckpt(const char *pl, int workers, int t, const char *dir)
{
    char full[600], ct[600], cm[600], w[600], args[2048], *out = NULL, *err = NULL;
    snprintf(full, sizeof full, "%s/ck-full.w", dir);
    snprintf(ct, sizeof ct, "%s/ck-threads.ckpt", dir);
    snprintf(cm, sizeof cm, "%s/ck-mpi.ckpt", dir);
    snprintf(w, sizeof w, "%s/ck-resumed.w", dir);
    /* the uninterrupted run, on threads */
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --epochs 2 --save-weights %s", pl, full);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    /* killed at iteration 5 of 8, on threads and with a process per tensor
     * rank: the two checkpoints hold the same state */
    char *a1[] = {"train", "--plan", (char *)pl, "--synthetic", "256", "--epochs", "2", "--checkpoint",
                  ct, "--checkpoint-every", "1", NULL};
    int ok;
    CU_ASSERT_EQUAL(tproc_signal_at(a1, dir, 5, SIGKILL, &ok), 128 + SIGKILL);
    CU_ASSERT(ok);
    char *a2[] = {"train", "--plan", (char *)pl, "--synthetic", "256", "--epochs", "2", "--backend", "mpi",
                  "--tensor-over", "mpi", "--checkpoint", cm, "--checkpoint-every", "1", NULL};
    mpi_kill_at(workers * t, a2, dir, 5);
    CU_ASSERT_EQUAL(tproc_ckpt_iters(ct), 5);
    CU_ASSERT_EQUAL(tproc_ckpt_iters(cm), 5);
    CU_ASSERT(same_state(ct, cm));
    /* each resumed in the other mode and in its own: the uninterrupted
     * run's weights every time */
    const char *ck[] = {cm, ct, cm};
    const int over_mpi[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) {
        unlink(w);
        snprintf(args, sizeof args, "train --plan %s --synthetic 256 --epochs 2 --resume %s --save-weights %s%s",
                 pl, ck[i], w, over_mpi[i] ? " --backend mpi --tensor-over mpi" : "");
        int rc = over_mpi[i] ? tp_mpirun(workers * t, args, &out, &err) : test_run_cli(args, &out, &err);
        CU_ASSERT_EQUAL(rc, 0);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "resumed from"));
        CU_ASSERT(tproc_same_file(full, w));
        if (rc || !tproc_same_file(full, w)) fprintf(stderr, "\n    resume %d: %s", i, err ? err : "");
        free(out);
        free(err);
        out = err = NULL;
    }
}
