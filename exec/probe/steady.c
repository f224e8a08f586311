/* steady.c - how steady the host's compute is (steady.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "exec/nn/gemm.h"
#include "fma_peak.h"
#include "steady.h"

#define STEADY_SLICE_S 5e-4
#define STEADY_MAX_SLICES 20000 /* per thread: 10 s of 0.5 ms slices */
#define STEADY_MAX_THREADS 64

typedef struct steady_thread {
    pthread_t id;
    atomic_int *go; /* 0: wait, 1: run, -1: stop (a thread failed to start) */
    int width;
    long iters;
    double seconds;
    double *t;  /* slice times */
    int n;
} steady_thread;

/* read at run time so the loop cannot be folded for constant operands */
static volatile float steady_one = 1.0f;

static void *steady_main(void *arg)
{
    steady_thread *w = arg;
    int g;
    while ((g = atomic_load(w->go)) == 0) sched_yield();
    if (g < 0) return NULL;
    double end = exec_now() + w->seconds;
    do {
        double s = 0;
        exec_fma_run(w->width, w->iters, steady_one, steady_one, &s);
        w->t[w->n++] = s;
    } while (w->n < STEADY_MAX_SLICES && exec_now() < end);
    return NULL;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int exec_steady_measure(double seconds, int threads, exec_steady *s)
{
    memset(s, 0, sizeof *s);
    exec_cpu_feat f;
    exec_cpu_features(&f);
    int w[3], nw = exec_fma_widths(&f, w);
    if (nw == 0 || threads < 1 || threads > STEADY_MAX_THREADS) return -1;
    int width = w[nw - 1];
    /* size a slice from a warm-up run on this thread */
    long iters = 1 << 14;
    double t = 0;
    exec_fma_run(width, iters, steady_one, steady_one, &t);
    exec_fma_run(width, iters, steady_one, steady_one, &t);
    if (t > 0) iters = (long)(iters * (STEADY_SLICE_S / t)) + 1;

    steady_thread *th = cl_calloc((size_t)threads, sizeof *th);
    atomic_int go = 0;
    int started = 0;
    for (int i = 0; i < threads; i++) {
        th[i] = (steady_thread){.go = &go, .width = width, .iters = iters, .seconds = seconds,
                                .t = cl_malloc(STEADY_MAX_SLICES * sizeof(double))};
        if (pthread_create(&th[i].id, NULL, steady_main, &th[i])) break;
        started++;
    }
    /* all threads start timing together, or none does */
    atomic_store(&go, started == threads ? 1 : -1);
    for (int i = 0; i < started; i++) pthread_join(th[i].id, NULL);
    if (started < threads) {
        for (int i = 0; i < threads; i++) free(th[i].t);
        free(th);
        return -1;
    }

    int n = 0;
    for (int i = 0; i < threads; i++) n += th[i].n;
    double *all = cl_malloc((size_t)n * sizeof *all);
    n = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(all + n, th[i].t, (size_t)th[i].n * sizeof *all);
        n += th[i].n;
        free(th[i].t);
    }
    free(th);
    qsort(all, (size_t)n, sizeof *all, cmp_dbl);
    double fast = all[0];
    s->threads = threads;
    s->slices = n;
    s->slice_s = fast;
    if (fast > 0) {
        s->slow50 = all[(n - 1) / 2] / fast - 1;
        s->slow90 = all[(size_t)((n - 1) * 9) / 10] / fast - 1;
        s->slow_max = all[n - 1] / fast - 1;
    }
    free(all);
    return 0;
}

int exec_steady_ok(const exec_steady *s)
{
    return s->slices > 0 && s->slow90 <= EXEC_STEADY_MAX_SLOW90;
}
