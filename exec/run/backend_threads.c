/* backend_threads.c - the threads transport (chan.h): one thread per worker,
 * pinned round-robin to the cores this process may run on, messages passed
 * as pointers through one bounded channel per ordered worker pair.
 *
 * With more workers than cores, workers share cores (oversubscription): the
 * run is still correct, but its times measure time-sharing, not the plan. */
#include <assert.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan.h"
#include "exec/nn/gemm.h"

typedef struct tx {
    exec_xport x;
    exec_chan *ch;           /* [src * n + dst]                              */
    exec_notify *nt;         /* [w]                                          */
    _Atomic int64_t *out;    /* [w]: payload bytes posted, not yet taken     */
    pthread_mutex_t bmu;     /* the barrier: arrivals of this generation     */
    pthread_cond_t bcv;
    int b_count;
    uint64_t b_gen;
    double t0;               /* clock reading of the last completed barrier  */
    atomic_int stop;
    int *cpu;                /* cores to pin to, round-robin                 */
    int n_cpu;
} tx;

static int tx_post(exec_xport *x, int src, exec_msg *m)
{
    tx *t = (tx *)x;
    assert(src >= 0 && src < x->n && m->dst >= 0 && m->dst < x->n && m->dst != src);
    m->src = src;
    int64_t b = m->bytes;
    int bounded = m->bounded, dst = m->dst;
    /* counted before it becomes visible, so the receiver's decrement never
     * comes first */
    if (bounded) atomic_fetch_add(&t->out[src], b);
    if (exec_chan_push(&t->ch[src * x->n + dst], m)) {
        if (bounded) atomic_fetch_sub(&t->out[src], b);
        return 1;
    }
    exec_notify_bump(&t->nt[dst]); /* m may be taken and freed by now */
    return 0;
}

static exec_msg *tx_take(exec_xport *x, int dst, int src, uint64_t tag, int64_t bytes)
{
    tx *t = (tx *)x;
    int freed;
    exec_msg *m = exec_chan_take(&t->ch[src * x->n + dst], tag, &freed);
    if (!m) return NULL;
    assert(bytes < 0 || m->bytes == bytes);
    if (m->bounded) atomic_fetch_sub(&t->out[src], m->bytes);
    if (freed) exec_notify_bump(&t->nt[src]);
    return m;
}

static uint64_t tx_events(exec_xport *x, int w) { return exec_notify_events(&((tx *)x)->nt[w]); }

static void tx_wait(exec_xport *x, int w, uint64_t seen, double max_s)
{
    exec_notify_wait(&((tx *)x)->nt[w], seen, max_s);
}

static double tx_out_bytes(exec_xport *x, int w) { return (double)atomic_load(&((tx *)x)->out[w]); }

/* A barrier that gives up when the run is aborted or max_s passes (a
 * pthread barrier would wait forever for a worker that failed). */
static int tx_sync(exec_xport *x, int w, double max_s, double *tnow)
{
    (void)w;
    tx *t = (tx *)x;
    double end = exec_now() + max_s;
    pthread_mutex_lock(&t->bmu);
    uint64_t gen = t->b_gen;
    if (++t->b_count == x->n) {
        t->b_count = 0;
        t->b_gen++;
        t->t0 = exec_now();
        pthread_cond_broadcast(&t->bcv);
    }
    while (t->b_gen == gen && !atomic_load(&t->stop) && exec_now() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&t->bcv, &t->bmu, &ts);
    }
    int ok = t->b_gen != gen;
    *tnow = t->t0;
    pthread_mutex_unlock(&t->bmu);
    return !ok;
}

typedef struct launch {
    tx *t;
    exec_worker_fn fn;
    void *ctx;
    int w, rc;
} launch;

static void *thread_main(void *arg)
{
    launch *l = arg;
    tx *t = l->t;
    if (t->n_cpu > 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(t->cpu[l->w % t->n_cpu], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
    }
    exec_blas_init();
    l->rc = l->fn(l->ctx, l->w);
    return NULL;
}

static int tx_run(exec_xport *x, exec_worker_fn fn, void *ctx)
{
    tx *t = (tx *)x;
    int n = x->n;
    launch *l = cl_calloc((size_t)n, sizeof *l);
    pthread_t *th = cl_calloc((size_t)n, sizeof *th);
    for (int w = 0; w < n; w++) {
        l[w] = (launch){t, fn, ctx, w, 0};
        if (pthread_create(&th[w], NULL, thread_main, &l[w])) abort();
    }
    int rc = 0;
    for (int w = 0; w < n; w++) {
        pthread_join(th[w], NULL);
        if (!rc) rc = l[w].rc;
    }
    free(l);
    free(th);
    return rc;
}

static void tx_abort(exec_xport *x)
{
    tx *t = (tx *)x;
    atomic_store(&t->stop, 1);
    for (int w = 0; w < x->n; w++) exec_notify_bump(&t->nt[w]);
    pthread_mutex_lock(&t->bmu);
    pthread_cond_broadcast(&t->bcv);
    pthread_mutex_unlock(&t->bmu);
}

static int tx_aborted(exec_xport *x) { return atomic_load(&((tx *)x)->stop); }

static void tx_destroy(exec_xport *x)
{
    tx *t = (tx *)x;
    if (!t) return;
    for (int i = 0; i < x->n * x->n; i++) exec_chan_destroy(&t->ch[i]);
    for (int w = 0; w < x->n; w++) exec_notify_destroy(&t->nt[w]);
    pthread_cond_destroy(&t->bcv);
    pthread_mutex_destroy(&t->bmu);
    free(t->ch);
    free(t->nt);
    free((void *)t->out);
    free(t->cpu);
    free(t);
}

static uint64_t tx_sleeps(exec_xport *x, int w) { return atomic_load(&((tx *)x)->nt[w].sleeps); }

static const exec_xport_ops tx_ops = {tx_post, tx_take, tx_events, tx_wait, tx_out_bytes,
                                      tx_sync, tx_run, tx_abort, tx_aborted, tx_destroy,
                                      tx_sleeps};

exec_xport *exec_xport_threads(int n, const int *cap, double spin_s)
{
    assert(n >= 1);
    tx *t = cl_calloc(1, sizeof *t);
    t->x.ops = &tx_ops;
    t->x.n = n;
    t->x.rank = -1;
    t->ch = cl_calloc((size_t)n * (size_t)n, sizeof *t->ch);
    for (int i = 0; i < n * n; i++) exec_chan_init(&t->ch[i], cap[i] > 0 ? cap[i] : 1);
    t->nt = cl_calloc((size_t)n, sizeof *t->nt);
    t->out = cl_calloc((size_t)n, sizeof *t->out);
    pthread_mutex_init(&t->bmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->bcv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&t->stop, 0);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        t->cpu = cl_calloc(CPU_SETSIZE, sizeof *t->cpu);
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) t->cpu[t->n_cpu++] = c;
    }
    t->x.cores = t->n_cpu;
    /* spinning only pays when no other worker of ours needs the core */
    double spin = t->n_cpu >= n ? spin_s : 0;
    for (int w = 0; w < n; w++) exec_notify_init(&t->nt[w], spin);
    return &t->x;
}
