/* event.c - the discrete-event kernel (see event.h).
 *
 * Layout: a pool of event slots (callback, argument, generation) reused
 * through a free list, and a binary min-heap of 128-bit keys: the time's
 * IEEE-754 bits in the high half (for times >= 0 they order like the times),
 * and the insertion sequence (40 bits) above the slot index (24 bits) in the
 * low half, so one unsigned comparison orders by time and then FIFO, without
 * branches.  Cancelling is lazy: the slot's generation changes and the dead
 * heap entry is dropped when it reaches the top, so sifting never has to
 * track positions.  Dispatch leaves a hole at the root instead of removing
 * the top at once (when more than HOLE_MIN are pending): the first event the
 * callback schedules fills the hole by sifting down from the root, so a
 * dispatch that schedules one event costs one sift, not a removal and an
 * insertion (an event due before every other pending one, such as a short
 * transfer, then stays at the root at no cost); a callback that schedules
 * nothing closes the hole with the last entry as a plain removal would.
 * Past the last entry the array holds NO_ENTRY, so sifting down needs no
 * bounds tests.  The order of dispatch depends only on the keys, never on
 * the heap's shape, so none of this changes a result.  A handle is the slot
 * index plus one in the low 32 bits and the generation in the high 32 bits;
 * a stale handle matches nothing.
 * Limits (asserted): 2^24 events pending at once, 2^40 events scheduled
 * between resets.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/budget.h"
#include "base/status.h"
#include "event.h"

#define SLOT_BITS 24
#define SLOT_MASK ((1u << SLOT_BITS) - 1)
#define NO_SLOT UINT32_MAX

typedef struct ev_slot {
    ev_fn fn;
    void *ctx;
    uint64_t data;
    uint32_t gen;
    uint32_t live;       /* 1 while scheduled and not cancelled */
} ev_slot;

typedef unsigned __int128 ev_entry; /* time bits << 64 | sequence << SLOT_BITS | slot */
/* Dispatch leaves the hole only above this many entries: in a heap of three
 * levels or fewer, removing the top first is faster; in a deeper one the
 * hole is (docs/simulator.md, "Determinism and speed", has the figures). */
#define HOLE_MIN 8
#define NO_ENTRY (~(ev_entry)0) /* above every key: its time bits are a NaN's */

static inline ev_entry make_entry(double t, uint64_t low)
{
    uint64_t bits;
    t += 0.0; /* -0.0 -> +0.0 */
    memcpy(&bits, &t, sizeof bits);
    return ((ev_entry)bits << 64) | low;
}

static inline double entry_time(ev_entry e)
{
    uint64_t bits = (uint64_t)(e >> 64);
    double t;
    memcpy(&t, &bits, sizeof t);
    return t;
}

static inline uint32_t entry_slot(ev_entry e) { return (uint32_t)e & SLOT_MASK; }

/* `dispatched` and `live` are kept apart: side by side, gcc updated both at
 * dispatch with one 16-byte load and store, which the 8-byte store to `live`
 * in the next ev_at cannot be forwarded to. */
struct ev_kernel {
    double now;
    uint64_t seq;
    uint64_t dispatched;
    ev_entry *heap;
    size_t live;         /* pending events that were not cancelled */
    uint32_t n, cap;     /* heap entries (live and dead) and capacity */
    int stop;
    int hole;            /* heap[0] is a hole: its event is being dispatched */
    ev_slot *slots;
    uint32_t *free_slots;
    uint32_t n_free, n_slots;
};

static inline void sift_down(ev_entry *h, uint32_t i, ev_entry e);
static inline void pop_entry(ev_kernel *k);

ev_kernel *ev_create(void)
{
    return cl_calloc(1, sizeof(ev_kernel));
}

void ev_destroy(ev_kernel *k)
{
    if (!k) return;
    free(k->heap);
    free(k->slots);
    free(k->free_slots);
    free(k);
}

void ev_reset(ev_kernel *k)
{
    if (k->hole) pop_entry(k); /* its slot was released at dispatch */
    for (uint32_t i = 0; i < k->n; i++) {
        ev_slot *sl = &k->slots[entry_slot(k->heap[i])];
        sl->gen++;
        sl->live = 0;
        k->heap[i] = NO_ENTRY;
    }
    k->n_free = 0;
    for (uint32_t i = k->n_slots; i-- > 0;) k->free_slots[k->n_free++] = i;
    k->n = 0;
    k->live = 0;
    k->now = 0;
    k->seq = 0;
    k->dispatched = 0;
    k->stop = 0;
}

double ev_now(const ev_kernel *k) { return k->now; }
size_t ev_pending(const ev_kernel *k) { return k->live; }
uint64_t ev_dispatched(const ev_kernel *k) { return k->dispatched; }
void ev_stop(ev_kernel *k) { k->stop = 1; }


static inline void push_entry(ev_kernel *k, ev_entry e)
{
    if (k->hole) { /* fill the root left by the event being dispatched */
        k->hole = 0;
        sift_down(k->heap, 0, e);
        return;
    }
    if (2 * (size_t)k->n + 4 > k->cap) { /* room for the children of every entry */
        uint32_t old = k->cap, cap = old ? old * 2 : 64;
        k->heap = cl_realloc(k->heap, (size_t)cap * sizeof *k->heap);
        for (uint32_t i = old; i < cap; i++) k->heap[i] = NO_ENTRY;
        k->cap = cap;
    }
    ev_entry *h = k->heap;
    uint32_t i = k->n++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (e >= h[parent]) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

/* Place e at hole i, moving it down.  Past the last entry the array holds
 * NO_ENTRY, above every key, so the loop needs no bounds test: a node's
 * children always exist, and a leaf's are NO_ENTRY.  The smaller child is
 * kept from its one load. */
static inline void sift_down(ev_entry *h, uint32_t i, ev_entry e)
{
    for (;;) {
        uint32_t c = 2 * i + 1;
        ev_entry a = h[c], b = h[c + 1];
        int right = b < a;
        ev_entry m = right ? b : a;
        if (m >= e) break;
        h[i] = m;
        i = c + (uint32_t)right;
    }
    h[i] = e;
}

/* Remove the top entry (or the hole at the root). */
static inline void pop_entry(ev_kernel *k)
{
    uint32_t n = --k->n;
    ev_entry e = k->heap[n];
    k->heap[n] = NO_ENTRY;
    k->hole = 0;
    if (n) sift_down(k->heap, 0, e);
}

/* Drop cancelled entries from the top so heap[0] is live (or the heap empty). */
static inline void skip_dead(ev_kernel *k)
{
    if (k->hole) pop_entry(k);
    while (k->n && !k->slots[entry_slot(k->heap[0])].live) {
        uint32_t s = entry_slot(k->heap[0]);
        pop_entry(k);
        k->free_slots[k->n_free++] = s;
    }
}

double ev_next_time(const ev_kernel *k)
{
    skip_dead((ev_kernel *)k);
    return k->n ? entry_time(k->heap[0]) : HUGE_VAL;
}

static uint32_t new_slot(ev_kernel *k)
{
    if (k->n_free == 0) {
        uint32_t old = k->n_slots, cap = old ? old * 2 : 64;
        assert(cap <= (1u << SLOT_BITS) && "event kernel: too many pending events");
        k->slots = cl_realloc(k->slots, (size_t)cap * sizeof *k->slots);
        k->free_slots = cl_realloc(k->free_slots, (size_t)cap * sizeof *k->free_slots);
        for (uint32_t i = cap; i-- > old;) {
            k->slots[i].gen = 0;
            k->slots[i].live = 0;
            k->free_slots[k->n_free++] = i;
        }
        k->n_slots = cap;
    }
    return k->free_slots[--k->n_free];
}

ev_handle ev_at(ev_kernel *k, double t, ev_fn fn, void *ctx, uint64_t data)
{
    assert(isfinite(t) && "event kernel: event time must be finite");
    assert(t >= k->now && "event kernel: cannot schedule in the past");
    assert(fn);
    assert(k->seq < ((uint64_t)1 << (64 - SLOT_BITS)) && "event kernel: sequence exhausted");
    uint32_t s = new_slot(k);
    ev_slot *sl = &k->slots[s];
    sl->fn = fn;
    sl->ctx = ctx;
    sl->data = data;
    sl->live = 1;
    push_entry(k, make_entry(t, (k->seq++ << SLOT_BITS) | s));
    k->live++;
    return ((uint64_t)sl->gen << 32) | (uint64_t)(s + 1);
}

ev_handle ev_after(ev_kernel *k, double dt, ev_fn fn, void *ctx, uint64_t data)
{
    assert(dt >= 0 && "event kernel: negative delay");
    return ev_at(k, k->now + dt, fn, ctx, data);
}

int ev_cancel(ev_kernel *k, ev_handle h)
{
    uint64_t lo = h & 0xffffffffu;
    if (lo == 0 || lo > k->n_slots) return 0;
    ev_slot *sl = &k->slots[lo - 1];
    if (!sl->live || sl->gen != (uint32_t)(h >> 32)) return 0;
    sl->live = 0;
    sl->gen++;
    k->live--;
    return 1;
}

/* Run the top entry's event; the heap is not empty and heap[0] is live. */
static inline void dispatch_top(ev_kernel *k)
{
    ev_entry top = k->heap[0];
    double t = entry_time(top);
    assert(t >= k->now && "event kernel: clock ran backwards");
    uint32_t s = entry_slot(top);
    ev_slot *sl = &k->slots[s];
    ev_fn fn = sl->fn;
    void *ctx = sl->ctx;
    uint64_t data = sl->data;
    sl->live = 0;
    sl->gen++;
    if (k->n > HOLE_MIN) k->hole = 1; /* the root is the callback's to fill (see the top) */
    else pop_entry(k);
    k->free_slots[k->n_free++] = s;
    k->live--;
    k->now = t;
    k->dispatched++;
    fn(k, ctx, data);
    if (k->hole) pop_entry(k);
}

int ev_step(ev_kernel *k)
{
    skip_dead(k);
    if (k->n == 0) return 0;
    dispatch_top(k);
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
    for (;;) {
        skip_dead(k);
        if (!k->n) break;
        if (max_events && ran >= max_events) return EV_EVENT_BUDGET;
        /* its own budget, and the command's (budget.h) */
        if ((ran & 4095) == 4095 && ((max_wall_s > 0 && wall_now() - t0 > max_wall_s) || cl_budget_over()))
            return EV_WALL_BUDGET;
        dispatch_top(k);
        ran++;
        if (k->stop) return EV_STOPPED;
    }
    return EV_EMPTY;
}
