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
    float *all;       /* [cap]: the gathered buffers (room) */
    int64_t cap;
};

/* g->all holding at least n floats. */
static float *room(exec_tp_mpi *g, int64_t n)
{
    if (n > g->cap) {
        free(g->all);
        g->cap = n;
        g->all = exec_falloc(g->cap);
    }
    return g->all;
}

/* The split layers' all-reduce (exec_tp_comm.allreduce). */
static void mpi_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    exec_tp_mpi *g = ctx;
    assert(rank == g->rank && n >= 0 && n <= INT_MAX);
    (void)rank;
    if (g->size == 1 || n == 0) return;
    float *all = room(g, n * g->size);
    MPI_Allgather(buf, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, g->comm);
    /* in rank order, as tp_group.c: the same additions, the same bits */
    memcpy(buf, all, (size_t)n * sizeof *buf);
    for (int q = 1; q < g->size; q++) {
        const float *b = all + (int64_t)q * n;
        for (int64_t i = 0; i < n; i++) buf[i] += b[i];
    }
}

/* Sequence parallelism's reduce-scatter (exec_tp_comm.reduce_scatter): an
 * all-to-all sends chunk q of every block to rank q, which sums what it
 * receives in rank order: tp_group.c's additions, the same bits, and the
 * same volume as MPI_Reduce_scatter, whose order MPI leaves open. */
static void mpi_reduce_scatter(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                               int64_t chunk)
{
    exec_tp_mpi *g = ctx;
    const int64_t n = blocks * chunk, S = g->size; /* floats to and from each rank */
    assert(rank == g->rank && n >= 0 && n <= INT_MAX);
    (void)rank;
    float *send = room(g, 2 * S * n), *recv = send + S * n;
    for (int64_t q = 0; q < S; q++) /* rank order: what goes to rank q, block by block */
        for (int64_t b = 0; b < blocks; b++)
            memcpy(send + q * n + b * chunk, src + (b * S + q) * chunk, (size_t)chunk * sizeof *src);
    MPI_Alltoall(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, g->comm);
    memcpy(dst, recv, (size_t)n * sizeof *dst);
    for (int64_t q = 1; q < S; q++) {
        const float *b = recv + q * n;
        for (int64_t i = 0; i < n; i++) dst[i] += b[i];
    }
}

/* Sequence parallelism's all-gather (exec_tp_comm.all_gather): every
 * rank's blocks gathered, then each block's chunks put in rank order. */
static void mpi_all_gather(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                           int64_t chunk)
{
    exec_tp_mpi *g = ctx;
    const int64_t n = blocks * chunk, S = g->size;
    assert(rank == g->rank && n >= 0 && n <= INT_MAX);
    (void)rank;
    float *all = room(g, S * n);
    MPI_Allgather(src, (int)n, MPI_FLOAT, all, (int)n, MPI_FLOAT, g->comm);
    for (int64_t q = 0; q < S; q++)
        for (int64_t b = 0; b < blocks; b++)
            memcpy(dst + (b * S + q) * chunk, all + q * n + b * chunk, (size_t)chunk * sizeof *dst);
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
    g->view = (exec_tp_comm){.rank = g->rank, .size = g->size, .allreduce = mpi_allreduce,
                             .reduce_scatter = mpi_reduce_scatter, .all_gather = mpi_all_gather,
                             .ctx = g};
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
