/* test_vit_mpi.c - see test_vit.h: a tensor-parallel plan with its tensor
 * ranks as MPI processes (--tensor-over mpi), against the threads crew. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_pipe.h"
#include "test_proc.h"
#include "test_vit.h"

void tv_mpi_tensor_same(const char *pl, int workers, int t, const char *dir)
{
    char wt[600], wm[600], args[2048], want[128], *out = NULL, *err = NULL;
    snprintf(wt, sizeof wt, "%s/threads-t.w", dir);
    snprintf(wm, sizeof wm, "%s/mpi-t.w", dir);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 4 --save-weights %s", pl, wt);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --iterations 4 --backend mpi --tensor-over mpi --save-weights %s",
             pl, wm);
    /* one process per tensor rank: workers x t */
    if (tp_mpirun(workers * t, args, &out, &err) == 0) {
        snprintf(want, sizeof want, " on %d workers x %d tensor-parallel ranks (mpi), ", workers, t);
        CU_ASSERT_PTR_NOT_NULL(out && strstr(out, want));
        CU_ASSERT(tproc_same_file(wt, wm));
    } else {
        fprintf(stderr, "\n    %s", err);
        CU_FAIL("the MPI run with tensor ranks as processes failed");
    }
    free(out);
    free(err);
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
