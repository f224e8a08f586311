/* tp_group.c - barrier and deterministic all-reduce of a tensor-parallel
 * group on threads (tp_group.h).
 *
 * Ordering: the mutex of the barrier orders every write before a worker's
 * arrival ahead of every read after any worker's departure, so the
 * pointers and partial sums published before the first barrier of an
 * all-reduce are complete when read, and the group's buffer is free again
 * once every worker has passed the first barrier of the next one (each
 * copied its sum out before arriving there).
 */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "exec/nn/gemm.h"
#include "exec/nn/tensor.h"
#include "tp_group.h"

struct exec_tp_group {
    int size;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;       /* in the current round                               */
    uint64_t round;    /* rounds completed: a waiter leaves when it changes  */
    float **buf;       /* [size]: each worker's buffer in the current all-reduce */
    const float **src; /* [size]: each worker's source in the current
                        * reduce-scatter or all-gather */
    float *sum;        /* [max]: the sums, shared                            */
    int64_t max;
    exec_tp_comm *comm; /* [size] */
    double *wait_s;    /* [size]: seconds each spent at an all-reduce's barriers */
};

static void comm_allreduce(void *ctx, int rank, float *buf, int64_t n)
{
    exec_tp_group_allreduce(ctx, rank, buf, n);
}

static void comm_reduce_scatter(void *ctx, int rank, float *dst, const float *src,
                                int64_t blocks, int64_t chunk)
{
    exec_tp_group_reduce_scatter(ctx, rank, dst, src, blocks, chunk);
}

static void comm_all_gather(void *ctx, int rank, float *dst, const float *src, int64_t blocks,
                            int64_t chunk)
{
    exec_tp_group_all_gather(ctx, rank, dst, src, blocks, chunk);
}

exec_tp_group *exec_tp_group_create(int size, int64_t max_floats)
{
    assert(size >= 1 && max_floats >= 0);
    exec_tp_group *g = cl_calloc(1, sizeof *g);
    g->size = size;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->buf = cl_calloc((size_t)size, sizeof *g->buf);
    g->src = cl_calloc((size_t)size, sizeof *g->src);
    g->sum = exec_falloc(max_floats);
    g->max = max_floats;
    g->comm = cl_calloc((size_t)size, sizeof *g->comm);
    g->wait_s = cl_calloc((size_t)size, sizeof *g->wait_s);
    for (int r = 0; r < size; r++)
        g->comm[r] = (exec_tp_comm){.rank = r, .size = size, .allreduce = comm_allreduce,
                                    .reduce_scatter = comm_reduce_scatter,
                                    .all_gather = comm_all_gather, .ctx = g};
    return g;
}

void exec_tp_group_destroy(exec_tp_group *g)
{
    if (!g) return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->buf);
    free(g->src);
    free(g->sum);
    free(g->comm);
    free(g->wait_s);
    free(g);
}

const exec_tp_comm *exec_tp_group_comm(exec_tp_group *g, int rank)
{
    assert(rank >= 0 && rank < g->size);
    return &g->comm[rank];
}

double exec_tp_group_wait_s(const exec_tp_group *g, int rank)
{
    assert(rank >= 0 && rank < g->size);
    return g->wait_s[rank]; /* written by rank's own thread only */
}

int64_t exec_tp_group_bytes(const exec_tp_group *g)
{
    return exec_pad_floats(g->max) * (int64_t)sizeof(float);
}

void exec_tp_group_barrier(exec_tp_group *g)
{
    pthread_mutex_lock(&g->mu);
    uint64_t round = g->round;
    if (++g->arrived == g->size) {
        g->arrived = 0;
        g->round++;
        pthread_cond_broadcast(&g->cv);
    }
    while (g->round == round) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

void exec_tp_group_allreduce(exec_tp_group *g, int rank, float *buf, int64_t n)
{
    assert(rank >= 0 && rank < g->size && n >= 0 && n <= g->max);
    if (g->size == 1) return;
    g->buf[rank] = buf;
    double t0 = exec_now();
    exec_tp_group_barrier(g);
    g->wait_s[rank] += exec_now() - t0;
    /* this worker's slice of the elements, summed in rank order */
    const int64_t lo = n * rank / g->size, hi = n * (rank + 1) / g->size;
    memcpy(g->sum + lo, g->buf[0] + lo, (size_t)(hi - lo) * sizeof *buf);
    for (int q = 1; q < g->size; q++) {
        const float *b = g->buf[q];
        for (int64_t i = lo; i < hi; i++) g->sum[i] += b[i];
    }
    t0 = exec_now();
    exec_tp_group_barrier(g);
    g->wait_s[rank] += exec_now() - t0;
    memcpy(buf, g->sum, (size_t)n * sizeof *buf);
}

/* Publish src, meet, read what the others published, meet again (after
 * which a worker may reuse its src): the frame of both collectives. */
static void meet(exec_tp_group *g, int rank)
{
    double t0 = exec_now();
    exec_tp_group_barrier(g);
    g->wait_s[rank] += exec_now() - t0;
}

void exec_tp_group_reduce_scatter(exec_tp_group *g, int rank, float *dst, const float *src,
                                  int64_t blocks, int64_t chunk)
{
    assert(rank >= 0 && rank < g->size && blocks >= 0 && chunk >= 0);
    const int64_t row = chunk * g->size; /* floats of a block in src */
    g->src[rank] = src;
    meet(g, rank);
    for (int64_t b = 0; b < blocks; b++) {
        float *d = dst + b * chunk;
        const int64_t o = b * row + rank * chunk;
        memcpy(d, g->src[0] + o, (size_t)chunk * sizeof *d);
        for (int q = 1; q < g->size; q++) { /* rank order, as the all-reduce */
            const float *s = g->src[q] + o;
            for (int64_t i = 0; i < chunk; i++) d[i] += s[i];
        }
    }
    meet(g, rank);
}

void exec_tp_group_all_gather(exec_tp_group *g, int rank, float *dst, const float *src,
                              int64_t blocks, int64_t chunk)
{
    assert(rank >= 0 && rank < g->size && blocks >= 0 && chunk >= 0);
    const int64_t row = chunk * g->size;
    g->src[rank] = src;
    meet(g, rank);
    for (int q = 0; q < g->size; q++)
        for (int64_t b = 0; b < blocks; b++)
            memcpy(dst + b * row + q * chunk, g->src[q] + b * chunk, (size_t)chunk * sizeof *dst);
    meet(g, rank);
}
