/* test_vit_mpi.c - see test_vit.h: a tensor-parallel plan with its tensor
 * ranks as MPI processes (--tensor-over mpi), against the threads crew. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void tv_mpi_tensor_refusals(const char *pl, int workers, int t, const char *dir)
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
    /* without --backend mpi, and with checkpoints: refused before any run */
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 1 --tensor-over mpi", pl);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "add --backend mpi"));
    free(err);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 1 --backend mpi --tensor-over mpi --checkpoint %s/x.ckpt",
             pl, dir);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err, "--tensor-over mpi does not write or read checkpoints yet"));
    free(err);
}
