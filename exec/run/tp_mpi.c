/* tp_mpi.c - a tensor-parallel group over MPI processes (tp_mpi.h). */
#include <assert.h>
#include <limits.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "exec/nn/tensor.h"
#include "tp_mpi.h"

struct exec_tp_mpi {
    MPI_Comm comm;
    int rank, size;
    exec_tp_comm view;
    float *all;       /* [size x cap]: the gathered buffers */
    int64_t cap;
};

/* The split layers' all-reduce (exec_tp_comm.allreduce). */
static void mpi_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    exec_tp_mpi *g = ctx;
    assert(rank == g->rank && n >= 0 && n <= INT_MAX);
    (void)rank;
    if (g->size == 1 || n == 0) return;
    if (n > g->cap) {
        free(g->all);
        g->cap = n;
        g->all = exec_falloc(g->cap * g->size);
    }
    MPI_Allgather(buf, (int)n, MPI_FLOAT, g->all, (int)n, MPI_FLOAT, g->comm);
    /* in rank order, as tp_group.c: the same additions, the same bits */
    memcpy(buf, g->all, (size_t)n * sizeof *buf);
    for (int q = 1; q < g->size; q++) {
        const float *b = g->all + (int64_t)q * n;
        for (int64_t i = 0; i < n; i++) buf[i] += b[i];
    }
}

exec_tp_mpi *exec_tp_mpi_create(int T)
{
    int world;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    exec_tp_mpi *g = cl_calloc(1, sizeof *g);
    /* the T ranks of worker world / T, ordered by tensor rank */
    MPI_Comm_split(MPI_COMM_WORLD, world / T, world % T, &g->comm);
    MPI_Comm_rank(g->comm, &g->rank);
    MPI_Comm_size(g->comm, &g->size);
    assert(g->size == T && g->rank == world % T);
    g->view = (exec_tp_comm){.rank = g->rank, .size = g->size, .allreduce = mpi_allreduce, .ctx = g};
    return g;
}

void exec_tp_mpi_destroy(exec_tp_mpi *g, int free_comm)
{
    if (!g) return;
    if (free_comm) MPI_Comm_free(&g->comm);
    free(g->all);
    free(g);
}

int exec_tp_mpi_rank(const exec_tp_mpi *g) { return g->rank; }
const exec_tp_comm *exec_tp_mpi_comm(exec_tp_mpi *g) { return &g->view; }

void exec_tp_mpi_gather(exec_tp_mpi *g, const float *mine, float *all, int64_t n)
{
    assert(n >= 0 && n <= INT_MAX && (g->rank != 0 || all));
    MPI_Gather(mine, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, 0, g->comm);
}
