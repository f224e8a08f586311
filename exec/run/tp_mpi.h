/* tp_mpi.h - the collective of a tensor-parallel group whose ranks are MPI
 * processes (cleave train --plan --backend mpi --tensor-over mpi), the
 * counterpart of tp_group.h's threads.  Rank k of worker w is world rank
 * w * T + k (pipeline.h); the group of worker w is a sub-communicator of
 * its T ranks (MPI_Comm_split).
 *
 * The all-reduce gathers every rank's buffer (MPI_Allgather) and sums them
 * in rank order, ((buf_0[i] + buf_1[i]) + buf_2[i]) + ..., the additions
 * tp_group.c makes, so a run gives the threads crew's bits; so do the
 * reduce-scatter (an all-to-all, then the same sums in rank order) and the
 * all-gather of sequence parallelism (exec_tp_comm).  It blocks:
 * every rank of the group must make the same calls (each walks the same op
 * list with the same data, pipe_tp.h). */
#ifndef CL_EXEC_TP_MPI_H
#define CL_EXEC_TP_MPI_H

#include <stdint.h>

#include "exec/nn/layers_tfm.h"

typedef struct exec_tp_mpi exec_tp_mpi;

/* The group of this process in a world of n workers x T ranks (MPI
 * initialised, world size n * T; collective over the world). */
exec_tp_mpi *exec_tp_mpi_create(int T);
/* Frees the group; free_comm 0 leaves the communicator (a failed run
 * aborts the job instead). */
void exec_tp_mpi_destroy(exec_tp_mpi *g, int free_comm);

/* This process's tensor rank and view for exec_net_create_tp (owned by g). */
int exec_tp_mpi_rank(const exec_tp_mpi *g);
const exec_tp_comm *exec_tp_mpi_comm(exec_tp_mpi *g);

/* Gather every rank's n floats of mine into all (T x n, rank order) on
 * rank 0 (all unused elsewhere, may be NULL).  Collective over the group. */
void exec_tp_mpi_gather(exec_tp_mpi *g, const float *mine, float *all, int64_t n);

#endif
