/* chan.c - messages, wake-ups and bounded channels (chan.h). */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan.h"

exec_msg *exec_msg_new(int64_t bytes)
{
    assert(bytes >= 0);
    void *p = NULL;
    size_t n = (size_t)EXEC_MSG_HDR + (size_t)bytes;
    if (posix_memalign(&p, 64, n ? n : 64)) abort();
    exec_msg *m = p;
    memset(m, 0, sizeof *m);
    m->bytes = bytes;
    return m;
}

void exec_msg_free(exec_msg *m) { free(m); }

/* -------------------------------------------------------------- notify -- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double exec_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int exec_preempt_spin_ok(const exec_preempt *p) { return mono_s() >= p->quiet_from; }

void exec_preempt_note(exec_preempt *p, double wall_s, double cpu_s)
{
    p->wall += wall_s;
    p->cpu += cpu_s;
    if (p->wall < EXEC_PREEMPT_WINDOW_S) return;
    if (p->cpu < EXEC_PREEMPT_SHARE * p->wall) p->quiet_from = mono_s() + EXEC_PREEMPT_BACKOFF_S;
    p->wall = p->cpu = 0;
}

void exec_notify_init(exec_notify *n, double spin_s)
{
    pthread_mutex_init(&n->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&n->cv, &a);
    pthread_condattr_destroy(&a);
    atomic_init(&n->events, 0);
    atomic_init(&n->sleepers, 0);
    atomic_init(&n->sleeps, 0);
    n->spin_s = spin_s > 0 ? spin_s : 0;
    memset(&n->pre, 0, sizeof n->pre);
}

double exec_spin_default(void)
{
    const char *v = getenv("CLEAVE_SPIN_US");
    if (v && *v) {
        char *end;
        double us = strtod(v, &end);
        if (*end == 0 && us >= 0 && us < 1e7) return us * 1e-6;
    }
    return EXEC_SPIN_S;
}

void exec_notify_destroy(exec_notify *n)
{
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->mu);
}

/* Both sides use sequentially consistent operations: the bump writes events
 * then reads sleepers, the waiter writes sleepers then reads events, so at
 * least one of them sees the other (the waiter does not sleep, or the bump
 * signals it; the waiter holds mu from its check until it sleeps, so the
 * signal, sent under mu, cannot fall in between). */
void exec_notify_bump(exec_notify *n)
{
    atomic_fetch_add(&n->events, 1);
    if (atomic_load(&n->sleepers) > 0) {
        pthread_mutex_lock(&n->mu);
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
    }
}

uint64_t exec_notify_events(exec_notify *n) { return atomic_load(&n->events); }

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void exec_notify_wait(exec_notify *n, uint64_t seen, double max_s)
{
    double start = mono_s(), spin = n->spin_s < max_s ? n->spin_s : max_s;
    if (spin > 0 && exec_preempt_spin_ok(&n->pre)) {
        double c0 = exec_thread_cpu_s();
        int moved = 0;
        for (int i = 0;; i++) {
            if (atomic_load_explicit(&n->events, memory_order_acquire) != seen) {
                moved = 1;
                break;
            }
            cpu_relax();
            if ((i & 63) == 63 && mono_s() - start >= spin) break;
        }
        exec_preempt_note(&n->pre, mono_s() - start, exec_thread_cpu_s() - c0);
        if (moved) return;
    }
    double s = start + max_s;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    pthread_mutex_lock(&n->mu);
    atomic_fetch_add(&n->sleepers, 1);
    if (atomic_load(&n->events) == seen) atomic_fetch_add(&n->sleeps, 1);
    while (atomic_load(&n->events) == seen)
        if (pthread_cond_timedwait(&n->cv, &n->mu, &ts) == ETIMEDOUT) break;
    atomic_fetch_sub(&n->sleepers, 1);
    pthread_mutex_unlock(&n->mu);
}

/* ------------------------------------------------------------ channels -- */

void exec_chan_init(exec_chan *c, int cap)
{
    assert(cap >= 1);
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->cap = cap;
}

void exec_chan_destroy(exec_chan *c)
{
    for (int i = 0; i < c->n; i++) exec_msg_free(c->q[i]);
    free(c->q);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}

int exec_chan_push(exec_chan *c, exec_msg *m)
{
    pthread_mutex_lock(&c->mu);
    if (m->bounded && c->n_bounded >= c->cap) {
        pthread_mutex_unlock(&c->mu);
        return 1;
    }
    if (c->n == c->cap_q) {
        c->cap_q = c->cap_q * 2 + 8;
        c->q = cl_realloc(c->q, (size_t)c->cap_q * sizeof *c->q);
    }
    c->q[c->n++] = m;
    c->n_bounded += m->bounded != 0;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

exec_msg *exec_chan_take(exec_chan *c, uint64_t tag, int *freed)
{
    exec_msg *m = NULL;
    *freed = 0;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (c->q[i]->tag == tag) {
            m = c->q[i];
            memmove(c->q + i, c->q + i + 1, (size_t)(c->n - i - 1) * sizeof *c->q);
            c->n--;
            if (m->bounded) {
                *freed = c->n_bounded == c->cap;
                c->n_bounded--;
            }
            break;
        }
    pthread_mutex_unlock(&c->mu);
    return m;
}
