/* tp_crew.c - the threads of a tensor-parallel group (tp_crew.h). */
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "base/status.h"
#include "exec/nn/gemm.h"
#include "tp_crew.h"

typedef struct crank {
    exec_tp_crew *c;
    int rank, cpu;
    pthread_t th;
} crank;

struct exec_tp_crew {
    int size;
    exec_tp_group *group;
    crank *r; /* [size]; r[0] is the caller */
    /* the run in progress: written by rank 0 before the barrier that starts
     * it, read by the others after it (the barrier's mutex orders them) */
    exec_tp_fn fn;
    void *ctx;
    int quit;
};

/* Ranks 1 ..: a barrier starts each run (or the end), another ends it. */
static void *rank_main(void *arg)
{
    crank *r = arg;
    exec_tp_crew *c = r->c;
    if (r->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(r->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    }
    exec_blas_init();
    for (;;) {
        exec_tp_group_barrier(c->group);
        if (c->quit) return NULL;
        c->fn(c->ctx, r->rank);
        exec_tp_group_barrier(c->group);
    }
}

exec_tp_crew *exec_tp_crew_create(int size, int64_t max_floats, const int *cpu)
{
    assert(size >= 2);
    exec_tp_crew *c = cl_calloc(1, sizeof *c);
    c->size = size;
    c->group = exec_tp_group_create(size, max_floats);
    c->r = cl_calloc((size_t)size, sizeof *c->r);
    for (int k = 1; k < size; k++) {
        c->r[k] = (crank){c, k, cpu ? cpu[k] : -1, 0};
        if (pthread_create(&c->r[k].th, NULL, rank_main, &c->r[k])) abort();
    }
    return c;
}

void exec_tp_crew_destroy(exec_tp_crew *c)
{
    if (!c) return;
    c->quit = 1;
    exec_tp_group_barrier(c->group);
    for (int k = 1; k < c->size; k++) pthread_join(c->r[k].th, NULL);
    exec_tp_group_destroy(c->group);
    free(c->r);
    free(c);
}

int exec_tp_crew_size(const exec_tp_crew *c) { return c->size; }
exec_tp_group *exec_tp_crew_group(exec_tp_crew *c) { return c->group; }

void exec_tp_crew_run(exec_tp_crew *c, exec_tp_fn fn, void *ctx)
{
    c->fn = fn;
    c->ctx = ctx;
    exec_tp_group_barrier(c->group);
    fn(ctx, 0);
    exec_tp_group_barrier(c->group);
}
