/* test_sim_event.c - the event kernel against a brute-force reference:
 * dispatch order (time, then FIFO among equal times), cancellation, a clock
 * that never runs backwards, budgets. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sim/event.h"
#include "test.h"

/* A deterministic generator (xorshift64*), so failures reproduce. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

/* The reference: every event ever scheduled, with its time, id and whether it
 * is still pending; the next to run is the pending one with the smallest
 * (time, id) found by a linear scan. */
typedef struct ref_ev {
    double t;
    int id;
    int pending;
    ev_handle h;
} ref_ev;

typedef struct run_log {
    int *ids;
    int n;
    double last_t;
    int backwards;
    /* events a callback schedules, to test scheduling from inside a run */
    ev_kernel *k;
    ref_ev *ref;
    int *n_ref;
} run_log;

static void on_event(ev_kernel *k, void *ctx, uint64_t data)
{
    run_log *log = ctx;
    if (ev_now(k) < log->last_t) log->backwards = 1;
    log->last_t = ev_now(k);
    log->ids[log->n++] = (int)data;
}

static int ref_next(const ref_ev *r, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (r[i].pending && (best < 0 || r[i].t < r[best].t ||
                             (r[i].t == r[best].t && r[i].id < r[best].id)))
            best = i;
    return best;
}

static void test_random_against_reference(void)
{
    rng_state = 0x9E3779B97F4A7C15ull;
    for (int trial = 0; trial < 200; trial++) {
        int cap = 600;
        ref_ev *ref = calloc((size_t)cap, sizeof *ref);
        int n_ref = 0;
        run_log log = {calloc((size_t)cap, sizeof(int)), 0, 0, 0, NULL, NULL, NULL};
        ev_kernel *k = ev_create();
        int ok = 1;
        /* interleave schedules (few distinct times so ties are common),
         * cancels and single steps */
        for (int op = 0; op < 500 && ok; op++) {
            uint64_t r = rnd() % 10;
            if (r < 6 && n_ref < cap) {
                double t = ev_now(k) + (double)(rnd() % 8) * 0.25;
                ref[n_ref] = (ref_ev){t, n_ref, 1, 0};
                ref[n_ref].h = ev_at(k, t, on_event, &log, (uint64_t)n_ref);
                n_ref++;
            } else if (r < 8 && n_ref) {
                int i = (int)(rnd() % (uint64_t)n_ref);
                int was = ref[i].pending;
                int got = ev_cancel(k, ref[i].h);
                if (got != was) ok = 0;
                ref[i].pending = 0;
            } else {
                int want = ref_next(ref, n_ref);
                int before = log.n;
                int stepped = ev_step(k);
                if (stepped != (want >= 0)) ok = 0;
                if (want >= 0) {
                    if (log.n != before + 1 || log.ids[before] != want) ok = 0;
                    ref[want].pending = 0;
                }
            }
            int pending = 0;
            for (int i = 0; i < n_ref; i++) pending += ref[i].pending;
            if ((size_t)pending != ev_pending(k)) ok = 0;
        }
        /* drain: the rest must come out in reference order */
        int before = log.n;
        CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_EMPTY);
        for (int j = before; j < log.n && ok; j++) {
            int want = ref_next(ref, n_ref);
            if (want != log.ids[j]) ok = 0;
            ref[want].pending = 0;
        }
        if (ref_next(ref, n_ref) >= 0) ok = 0;
        CU_ASSERT_FALSE(log.backwards);
        CU_ASSERT_TRUE(ok);
        /* a stale handle cancels nothing */
        if (n_ref) CU_ASSERT_EQUAL(ev_cancel(k, ref[0].h), 0);
        CU_ASSERT_EQUAL(ev_cancel(k, 0), 0);
        ev_destroy(k);
        free(ref);
        free(log.ids);
        if (!ok) break;
    }
}

/* Callbacks that schedule, cancel and peek: each dispatched event schedules
 * 0 to 3 more (at the current time, before every pending event, or later),
 * sometimes cancels a pending one and sometimes asks for the next time; the
 * dispatch order must still be the reference's. */
typedef struct busy_log {
    ref_ev *ref;
    int n_ref, cap;
    int *order;
    int n;
    int bad;
} busy_log;

static void on_busy(ev_kernel *k, void *ctx, uint64_t data)
{
    busy_log *b = ctx;
    if (ref_next(b->ref, b->n_ref) != (int)data) b->bad = 1; /* not the reference's next */
    b->order[b->n++] = (int)data;
    b->ref[data].pending = 0;
    int adds = (int)(rnd() % 4);
    for (int j = 0; j < adds && b->n_ref < b->cap; j++) {
        double t = ev_now(k) + (rnd() % 3 == 0 ? 0.0 : (double)(rnd() % 16) * 0.125);
        b->ref[b->n_ref] = (ref_ev){t, b->n_ref, 1, 0};
        b->ref[b->n_ref].h = ev_at(k, t, on_busy, b, (uint64_t)b->n_ref);
        b->n_ref++;
    }
    if (rnd() % 4 == 0 && b->n_ref) {
        int i = (int)(rnd() % (uint64_t)b->n_ref);
        if (ev_cancel(k, b->ref[i].h) != b->ref[i].pending) b->bad = 1;
        b->ref[i].pending = 0;
    }
    if (rnd() % 4 == 0) {
        int want = ref_next(b->ref, b->n_ref);
        double next = ev_next_time(k);
        if (want < 0 ? !isinf(next) : next != b->ref[want].t) b->bad = 1;
    }
    int pending = 0;
    for (int i = 0; i < b->n_ref; i++) pending += b->ref[i].pending;
    if ((size_t)pending != ev_pending(k)) b->bad = 1;
}

static void test_callbacks_against_reference(void)
{
    rng_state = 0x243F6A8885A308D3ull;
    for (int trial = 0; trial < 100; trial++) {
        busy_log b = {0};
        b.cap = 2000;
        b.ref = calloc((size_t)b.cap, sizeof *b.ref);
        b.order = calloc((size_t)b.cap, sizeof *b.order);
        ev_kernel *k = ev_create();
        int seeds = 1 + (int)(rnd() % 40);
        for (int i = 0; i < seeds; i++) {
            double t = (double)(rnd() % 8) * 0.5;
            b.ref[b.n_ref] = (ref_ev){t, b.n_ref, 1, 0};
            b.ref[b.n_ref].h = ev_at(k, t, on_busy, &b, (uint64_t)b.n_ref);
            b.n_ref++;
        }
        ev_status st = ev_run(k, 0, 0);
        CU_ASSERT_EQUAL(st, EV_EMPTY);
        int ok = !b.bad && ref_next(b.ref, b.n_ref) < 0 && b.n > 0;
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_EQUAL(ev_pending(k), 0);
        ev_destroy(k);
        free(b.ref);
        free(b.order);
        if (!ok) break;
    }
}

static void test_fifo_among_ties(void)
{
    ev_kernel *k = ev_create();
    int ids[100];
    run_log log = {ids, 0, 0, 0, NULL, NULL, NULL};
    for (int i = 0; i < 100; i++) ev_at(k, 1.0, on_event, &log, (uint64_t)i);
    CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_EMPTY);
    CU_ASSERT_EQUAL(log.n, 100);
    int inorder = 1;
    for (int i = 0; i < log.n; i++) inorder &= ids[i] == i;
    CU_ASSERT_TRUE(inorder);
    CU_ASSERT_EQUAL(ev_now(k), 1.0);
    CU_ASSERT_EQUAL(ev_dispatched(k), 100);
    ev_destroy(k);
}

/* A callback that schedules a follow-up at the current time and one later. */
typedef struct chain {
    int n;
    double times[16];
} chain;

static void on_chain(ev_kernel *k, void *ctx, uint64_t data)
{
    chain *c = ctx;
    c->times[c->n++] = ev_now(k);
    if (data > 0) {
        ev_after(k, 0, on_chain, c, data - 1);
        if (data == 3) ev_after(k, 2.5, on_chain, c, 0);
    }
}

static void test_scheduling_from_callbacks(void)
{
    ev_kernel *k = ev_create();
    chain c = {0, {0}};
    ev_at(k, 1.0, on_chain, &c, 3);
    ev_at(k, 2.0, on_chain, &c, 0);
    CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_EMPTY);
    /* 1.0 (3), 1.0 (2), 1.0 (1), 1.0 (0), 2.0, 3.5 */
    CU_ASSERT_EQUAL(c.n, 6);
    double want[] = {1, 1, 1, 1, 2, 3.5};
    for (int i = 0; i < 6 && i < c.n; i++) CU_ASSERT_EQUAL(c.times[i], want[i]);
    ev_destroy(k);
}

static void on_stop(ev_kernel *k, void *ctx, uint64_t data)
{
    (void)ctx;
    if (data) ev_stop(k);
}

static void test_budgets_and_stop(void)
{
    ev_kernel *k = ev_create();
    for (int i = 0; i < 10; i++) ev_at(k, i, on_stop, NULL, 0);
    CU_ASSERT_EQUAL(ev_run(k, 4, 0), EV_EVENT_BUDGET);
    CU_ASSERT_EQUAL(ev_dispatched(k), 4);
    CU_ASSERT_EQUAL(ev_pending(k), 6);
    CU_ASSERT_EQUAL(ev_next_time(k), 4.0);
    ev_at(k, 5.5, on_stop, NULL, 1);
    CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_STOPPED);
    CU_ASSERT_EQUAL(ev_now(k), 5.5);
    CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_EMPTY);
    CU_ASSERT_EQUAL(ev_dispatched(k), 11);
    ev_reset(k);
    CU_ASSERT_EQUAL(ev_now(k), 0.0);
    CU_ASSERT_EQUAL(ev_pending(k), 0);
    CU_ASSERT_TRUE(isinf(ev_next_time(k)));
    ev_destroy(k);
}

static void test_many_pending(void)
{
    /* grows past the initial capacity; order holds over 100k events */
    ev_kernel *k = ev_create();
    rng_state = 12345;
    int n = 100000;
    int *ids = malloc((size_t)n * sizeof *ids);
    run_log log = {ids, 0, 0, 0, NULL, NULL, NULL};
    for (int i = 0; i < n; i++) ev_at(k, (double)(rnd() % 1000), on_event, &log, (uint64_t)i);
    CU_ASSERT_EQUAL(ev_run(k, 0, 0), EV_EMPTY);
    CU_ASSERT_EQUAL(log.n, n);
    CU_ASSERT_FALSE(log.backwards);
    free(ids);
    ev_destroy(k);
}

TEST_SUITE(sim_event)
{
    test_add_suite("sim_event");
    test_add("random schedule/cancel/step matches a brute-force reference", test_random_against_reference);
    test_add("events at equal times run in insertion order", test_fifo_among_ties);
    test_add("callbacks schedule at now and later", test_scheduling_from_callbacks);
    test_add("callbacks that schedule, cancel and peek match a brute-force reference",
             test_callbacks_against_reference);
    test_add("event budget, stop and reset", test_budgets_and_stop);
    test_add("100k pending events come out in time order", test_many_pending);
}
