/* event.h - a deterministic discrete-event kernel.
 *
 * An event is a time (double seconds), a callback and its argument (a
 * context pointer plus a 64-bit datum).  Pending events sit in a binary heap
 * ordered by (time, insertion sequence): among events at the same time the
 * one scheduled first runs first, so a run is reproducible to the bit.  The
 * clock only moves forward; scheduling in the past is a bug and aborts.
 *
 * The kernel knows nothing of pipelines or DNNs: the simulator (sim.h) builds
 * devices, links and collectives on top of it.  No global state; a kernel is
 * an opaque handle from ev_create() freed by ev_destroy().  No allocation per
 * event once the internal arrays have grown to the peak number pending.
 */
#ifndef CL_SIM_EVENT_H
#define CL_SIM_EVENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct ev_kernel ev_kernel;

/* Callback: runs at ev_now(k) == the event's time.  It may schedule and
 * cancel events (including ones at the current time, which run after every
 * event already pending at that time). */
typedef void (*ev_fn)(ev_kernel *k, void *ctx, uint64_t data);

/* Names a scheduled event for ev_cancel; 0 is never a valid handle, so it
 * can mean "none".  A handle goes stale once its event ran or was cancelled. */
typedef uint64_t ev_handle;

typedef enum ev_status {
    EV_EMPTY,          /* no pending event left                        */
    EV_STOPPED,        /* a callback called ev_stop()                  */
    EV_EVENT_BUDGET,   /* max_events were dispatched, events remain    */
    EV_WALL_BUDGET     /* max_wall_s of real time elapsed, events remain */
} ev_status;

/* Create an empty kernel at time 0; ev_destroy frees it (NULL is fine). */
ev_kernel *ev_create(void);
void ev_destroy(ev_kernel *k);
/* Drop every pending event and set the clock and counters back to 0,
 * keeping the allocations (for repeated runs). */
void ev_reset(ev_kernel *k);

double ev_now(const ev_kernel *k);
size_t ev_pending(const ev_kernel *k);
uint64_t ev_dispatched(const ev_kernel *k); /* events run since create/reset */

/* Schedule fn(k, ctx, data) at absolute time t (finite, >= ev_now(k): asserts
 * otherwise) or after a delay dt >= 0.  Returns the event's handle. */
ev_handle ev_at(ev_kernel *k, double t, ev_fn fn, void *ctx, uint64_t data);
ev_handle ev_after(ev_kernel *k, double dt, ev_fn fn, void *ctx, uint64_t data);

/* Remove a pending event.  Returns 1 if it was pending, 0 if the handle is
 * stale (already ran or cancelled) or 0. */
int ev_cancel(ev_kernel *k, ev_handle h);

/* Time of the earliest pending event; +inf when none. */
double ev_next_time(const ev_kernel *k);

/* Run the earliest pending event; returns 0 when there was none. */
int ev_step(ev_kernel *k);

/* Dispatch events in order until the queue is empty, ev_stop() is called, or
 * a budget is exhausted (0 = no limit for either).  The wall-clock budget is
 * checked every few thousand events. */
ev_status ev_run(ev_kernel *k, uint64_t max_events, double max_wall_s);

/* Ask ev_run to return after the current callback. */
void ev_stop(ev_kernel *k);

#endif
