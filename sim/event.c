/* event.c - the discrete-event kernel (see event.h).
 *
 * Layout: a pool of event slots (callback, argument, heap position) reused
 * through a free list, and a binary min-heap of small entries (time,
 * sequence, slot) kept separate so sifting touches only the heap array.  Each
 * slot records its heap position, so cancelling removes the entry at once
 * (the heap never holds dead events).  A handle is the slot index plus one in
 * the low 32 bits and the slot's generation in the high 32 bits; the
 * generation changes whenever the slot is released, which makes stale
 * handles harmless.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "../tools/status.h"
#include "event.h"

#define NO_POS UINT32_MAX

typedef struct ev_slot {
    ev_fn fn;
    void *ctx;
    uint64_t data;
    uint32_t pos;  /* index in heap, NO_POS when free */
    uint32_t gen;
    uint32_t next_free;
} ev_slot;

typedef struct ev_entry {
    double t;
    uint64_t seq;
    uint32_t slot;
} ev_entry;

struct ev_kernel {
    double now;
    uint64_t seq;
    uint64_t dispatched;
    int stop;
    ev_entry *heap;
    uint32_t n, cap;      /* heap size and capacity (== slot capacity) */
    ev_slot *slots;
    uint32_t free_head;   /* first free slot, NO_POS when none */
};

ev_kernel *ev_create(void)
{
    ev_kernel *k = cl_calloc(1, sizeof *k);
    k->free_head = NO_POS;
    return k;
}

void ev_destroy(ev_kernel *k)
{
    if (!k) return;
    free(k->heap);
    free(k->slots);
    free(k);
}

static void rebuild_free_list(ev_kernel *k)
{
    k->free_head = NO_POS;
    for (uint32_t i = k->cap; i-- > 0;) {
        k->slots[i].pos = NO_POS;
        k->slots[i].next_free = k->free_head;
        k->free_head = i;
    }
}

void ev_reset(ev_kernel *k)
{
    for (uint32_t i = 0; i < k->n; i++) k->slots[k->heap[i].slot].gen++;
    k->n = 0;
    k->now = 0;
    k->seq = 0;
    k->dispatched = 0;
    k->stop = 0;
    rebuild_free_list(k);
}

double ev_now(const ev_kernel *k) { return k->now; }
size_t ev_pending(const ev_kernel *k) { return k->n; }
uint64_t ev_dispatched(const ev_kernel *k) { return k->dispatched; }
double ev_next_time(const ev_kernel *k) { return k->n ? k->heap[0].t : HUGE_VAL; }
void ev_stop(ev_kernel *k) { k->stop = 1; }

static inline int before(const ev_entry *a, const ev_entry *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static inline void place(ev_kernel *k, uint32_t i, ev_entry e)
{
    k->heap[i] = e;
    k->slots[e.slot].pos = i;
}

static void sift_up(ev_kernel *k, uint32_t i, ev_entry e)
{
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!before(&e, &k->heap[parent])) break;
        place(k, i, k->heap[parent]);
        i = parent;
    }
    place(k, i, e);
}

static void sift_down(ev_kernel *k, uint32_t i, ev_entry e)
{
    uint32_t n = k->n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&k->heap[c + 1], &k->heap[c])) c++;
        if (!before(&k->heap[c], &e)) break;
        place(k, i, k->heap[c]);
        i = c;
    }
    place(k, i, e);
}

static void grow(ev_kernel *k)
{
    uint32_t old = k->cap;
    assert(old < (UINT32_MAX - 1) / 2 && "event kernel: too many pending events");
    uint32_t cap = old ? old * 2 : 64;
    k->heap = cl_realloc(k->heap, (size_t)cap * sizeof *k->heap);
    k->slots = cl_realloc(k->slots, (size_t)cap * sizeof *k->slots);
    for (uint32_t i = cap; i-- > old;) {
        k->slots[i].pos = NO_POS;
        k->slots[i].gen = 0;
        k->slots[i].next_free = k->free_head;
        k->free_head = i;
    }
    k->cap = cap;
}

ev_handle ev_at(ev_kernel *k, double t, ev_fn fn, void *ctx, uint64_t data)
{
    assert(isfinite(t) && "event kernel: event time must be finite");
    assert(t >= k->now && "event kernel: cannot schedule in the past");
    assert(fn);
    if (k->free_head == NO_POS) grow(k);
    uint32_t s = k->free_head;
    ev_slot *sl = &k->slots[s];
    k->free_head = sl->next_free;
    sl->fn = fn;
    sl->ctx = ctx;
    sl->data = data;
    ev_entry e = {t, k->seq++, s};
    k->n++;
    sift_up(k, k->n - 1, e);
    return ((uint64_t)sl->gen << 32) | (uint64_t)(s + 1);
}

ev_handle ev_after(ev_kernel *k, double dt, ev_fn fn, void *ctx, uint64_t data)
{
    assert(dt >= 0 && "event kernel: negative delay");
    return ev_at(k, k->now + dt, fn, ctx, data);
}

static void release(ev_kernel *k, uint32_t s)
{
    ev_slot *sl = &k->slots[s];
    sl->pos = NO_POS;
    sl->gen++;
    sl->next_free = k->free_head;
    k->free_head = s;
}

/* Remove the heap entry at position i. */
static void remove_at(ev_kernel *k, uint32_t i)
{
    ev_entry last = k->heap[--k->n];
    if (i == k->n) return;
    if (i > 0 && before(&last, &k->heap[(i - 1) / 2]))
        sift_up(k, i, last);
    else
        sift_down(k, i, last);
}

int ev_cancel(ev_kernel *k, ev_handle h)
{
    uint64_t lo = h & 0xffffffffu;
    if (lo == 0 || lo > k->cap) return 0;
    uint32_t s = (uint32_t)(lo - 1);
    ev_slot *sl = &k->slots[s];
    if (sl->pos == NO_POS || sl->gen != (uint32_t)(h >> 32)) return 0;
    remove_at(k, sl->pos);
    release(k, s);
    return 1;
}

int ev_step(ev_kernel *k)
{
    if (k->n == 0) return 0;
    ev_entry top = k->heap[0];
    assert(top.t >= k->now && "event kernel: clock ran backwards");
    ev_slot *sl = &k->slots[top.slot];
    ev_fn fn = sl->fn;
    void *ctx = sl->ctx;
    uint64_t data = sl->data;
    remove_at(k, 0);
    release(k, top.slot);
    k->now = top.t;
    k->dispatched++;
    fn(k, ctx, data);
    return 1;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ev_status ev_run(ev_kernel *k, uint64_t max_events, double max_wall_s)
{
    k->stop = 0;
    double t0 = max_wall_s > 0 ? wall_now() : 0;
    uint64_t ran = 0;
    while (k->n) {
        if (max_events && ran >= max_events) return EV_EVENT_BUDGET;
        if (max_wall_s > 0 && (ran & 4095) == 4095 && wall_now() - t0 > max_wall_s)
            return EV_WALL_BUDGET;
        ev_step(k);
        ran++;
        if (k->stop) return EV_STOPPED;
    }
    return EV_EMPTY;
}
