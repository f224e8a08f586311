/* chan.h - messages between pipeline workers: tagged buffers, bounded
 * channels between threads, and the transport interface both backends
 * (threads, MPI) implement for the pipelined runner (pipeline.h).
 *
 * A message is one allocation: a 64-byte header, then the payload (so the
 * payload is 64-byte aligned, as the executor's buffers are).  Its tag says
 * what it carries, matched like the schedule's SEND/RECV: kind (activation,
 * gradient, all-reduce step, evaluation activation, statistics), the stage
 * boundary (or stage), and a sequence number (the global microbatch, or the
 * collective step).  Messages from one worker to another arrive in posting
 * order; a receiver takes the first one with the tag it wants, leaving
 * others queued (unexpected messages), so RECV order need not equal SEND
 * order.
 *
 * Bounded: a channel (src, dst) holds at most `cap` activation and gradient
 * messages that the receiver has not taken yet; posting one more reports
 * "full" and the sender waits (that is where a SEND blocks).  All-reduce,
 * evaluation and statistics messages are not counted.
 */
#ifndef CL_EXEC_CHAN_H
#define CL_EXEC_CHAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/status.h"

/* --------------------------------------------------------------- messages -- */

enum { EXEC_MSG_HDR = 64 };

typedef struct exec_msg {
    uint64_t tag;      /* exec_tag()                                          */
    int64_t bytes;     /* payload bytes                                        */
    double t_post;     /* sender's clock when posted, s since its start        */
    int32_t src, dst;  /* workers                                              */
    int32_t bounded;   /* counts against the channel's capacity                */
    int32_t pad_[7];
} exec_msg;
_Static_assert(sizeof(exec_msg) == EXEC_MSG_HDR, "exec_msg header must be 64 bytes");

/* A message with room for `bytes` of payload (not zeroed), header zeroed
 * apart from bytes.  Aborts when out of memory; free with exec_msg_free. */
exec_msg *exec_msg_new(int64_t bytes);
void exec_msg_free(exec_msg *m);
static inline void *exec_msg_data(exec_msg *m) { return (char *)m + EXEC_MSG_HDR; }

typedef enum exec_tag_kind {
    EXEC_TAG_ACT,      /* activation across boundary b, seq = global microbatch */
    EXEC_TAG_GRAD,     /* gradient across boundary b                            */
    EXEC_TAG_AR,       /* all-reduce of stage b, seq = collective x steps + step */
    EXEC_TAG_EVAL,     /* evaluation activation across boundary b, seq = batch  */
    EXEC_TAG_STAT      /* statistics and results to worker 0, seq = what        */
} exec_tag_kind;

/* kind in bits 0-2, boundary/stage in bits 3-15 (< 8192), seq in 16-63. */
static inline uint64_t exec_tag(int kind, int boundary, int64_t seq)
{
    return (uint64_t)seq << 16 | (uint64_t)(boundary & 0x1fff) << 3 | (uint64_t)(kind & 7);
}
static inline int exec_tag_kind_of(uint64_t tag) { return (int)(tag & 7); }
enum { EXEC_TAG_MAX_BOUNDARY = 8191 };

/* ------------------------------------------------- channels (threads) -- */

/* Whether a thread holds its core.  A worker that spins (or polls) while
 * another process wants its core is charged the core's time and loses it
 * to that process for whole time slices (milliseconds), where a sleeping
 * waiter is woken ahead of it: under load, spinning made the waits many
 * times longer (docs/validation.md).  The spinner reports each stretch of
 * spinning with exec_preempt_note (wall and thread CPU seconds); once
 * EXEC_PREEMPT_WINDOW_S of spinning has been reported, if the thread ran
 * less than EXEC_PREEMPT_SHARE of it, exec_preempt_spin_ok says no for
 * EXEC_PREEMPT_BACKOFF_S: waits sleep while other processes compete, and
 * spin again once they have stopped.  A short preemption by a kernel thread
 * does not trip it.  State of one thread; zero-initialised is ready. */
typedef struct exec_preempt {
    double wall, cpu;      /* spinning reported in the current window, s     */
    double quiet_from;     /* monotonic seconds from which spinning is allowed */
} exec_preempt;
#define EXEC_PREEMPT_WINDOW_S 2e-3
#define EXEC_PREEMPT_SHARE 0.5
#define EXEC_PREEMPT_BACKOFF_S 0.2
int exec_preempt_spin_ok(const exec_preempt *p);
void exec_preempt_note(exec_preempt *p, double wall_s, double cpu_s);
/* The calling thread's CPU time, seconds (CLOCK_THREAD_CPUTIME_ID). */
double exec_thread_cpu_s(void);

/* Wake-ups of one worker: a counter bumped whenever something it may be
 * waiting for happens (a message for it arrived, a slot in one of its
 * outgoing channels freed), so a wait cannot miss an event that happened
 * between looking and sleeping.
 *
 * A wait first spins on the counter for up to spin_s seconds and only then
 * sleeps on the condition variable; a bump makes the futex call only when
 * the worker sleeps.  A worker that has a core of its own therefore sees a
 * message within a microsecond of its posting, its poster pays no system
 * call, and its core does not go idle for short waits (an idle virtual CPU
 * loses its caches and wakes slowly: docs/validation.md). */
typedef struct exec_notify {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint64_t events;
    _Atomic int sleepers;  /* waits inside pthread_cond_timedwait            */
    _Atomic uint64_t sleeps; /* waits that went to sleep, ever (the link
                              profile tells a woken receiver by it)          */
    double spin_s;         /* how long a wait spins before sleeping; 0: none */
    exec_preempt pre;      /* the waiting worker's: spin only when it holds
                              its core (exec_preempt_spin_ok)                */
} exec_notify;

/* spin_s: see above (0 when the worker shares its core with others). */
void exec_notify_init(exec_notify *n, double spin_s);
void exec_notify_destroy(exec_notify *n);
void exec_notify_bump(exec_notify *n);
uint64_t exec_notify_events(exec_notify *n);
/* Spin (up to spin_s), then sleep, until events != seen or max_s seconds
 * passed. */
void exec_notify_wait(exec_notify *n, uint64_t seen, double max_s);

/* The spin of a waiting worker that has a core of its own (threads
 * backend, exec_pipe_opts.spin_s), seconds: longer than the gaps a
 * pipeline stage waits between its ops on the models this machine trains
 * (fill and drain of one op, hand-offs), bounded so a stalled pipeline
 * does not hold the cores for long. */
#define EXEC_SPIN_S 2e-3
/* EXEC_SPIN_S, or the environment's CLEAVE_SPIN_US (microseconds, >= 0) when
 * set: a knob for measuring the runtime with other spins (0: sleep at
 * once, as the runtime did before). */
double exec_spin_default(void);

/* One direction between two workers: a FIFO of messages. */
typedef struct exec_chan {
    pthread_mutex_t mu;
    exec_msg **q;      /* owned array, in posting order                       */
    int n, cap_q;      /* messages queued, array size                         */
    int n_bounded;     /* of them, counted against cap                        */
    int cap;           /* capacity in bounded messages (>= 1)                 */
} exec_chan;

void exec_chan_init(exec_chan *c, int cap);
/* Frees the messages still queued. */
void exec_chan_destroy(exec_chan *c);
/* Queue m (ownership passes) and return 0, or return 1 when m is bounded and
 * the channel is full (m stays the caller's). */
int exec_chan_push(exec_chan *c, exec_msg *m);
/* Remove and return the first message with `tag` (caller owns), or NULL.
 * *freed is set when a bounded slot became free. */
exec_msg *exec_chan_take(exec_chan *c, uint64_t tag, int *freed);

/* ------------------------------------------------------------ transport -- */

typedef struct exec_xport exec_xport;

typedef int (*exec_worker_fn)(void *ctx, int w);

typedef struct exec_xport_ops {
    /* Post m from worker src to m->dst (tag, bounded, t_post set by the
     * caller).  0: posted, ownership passes; 1: the channel is full, m stays
     * the caller's (make progress and retry). */
    int (*post)(exec_xport *x, int src, exec_msg *m);
    /* The first message from src to dst with tag, or NULL if none has
     * arrived yet (non-blocking; the MPI backend posts its receive on the
     * first call).  bytes: the payload size expected, or -1 when unknown.
     * Caller owns the result. */
    exec_msg *(*take)(exec_xport *x, int dst, int src, uint64_t tag, int64_t bytes);
    /* Event counter of worker w and a wait for it to move (exec_notify);
     * the MPI backend polls instead (events is constant, wait drives MPI's
     * progress and yields the core). */
    uint64_t (*events)(exec_xport *x, int w);
    void (*wait)(exec_xport *x, int w, uint64_t seen, double max_s);
    /* Payload bytes of bounded messages w posted that are not delivered yet
     * (threads: not taken; MPI: send not complete). */
    double (*out_bytes)(exec_xport *x, int w);
    /* All workers reach this point; *t receives a clock reading
     * (exec_now() seconds) the workers of this process share.  Returns 1
     * instead when the run was aborted or max_s passed first. */
    int (*sync)(exec_xport *x, int w, double max_s, double *t);
    /* Run fn(ctx, w) for every worker of this process (threads: one pinned
     * thread each; MPI: w = rank) and return the first nonzero result. */
    int (*run)(exec_xport *x, exec_worker_fn fn, void *ctx);
    /* Ask every worker to stop (a failed worker); aborted() polls it. */
    void (*abort)(exec_xport *x);
    int (*aborted)(exec_xport *x);
    void (*destroy)(exec_xport *x);
    /* Waits of worker w that slept so far (threads: exec_notify.sleeps);
     * NULL when the backend never sleeps in a wait (MPI polls). */
    uint64_t (*sleeps)(exec_xport *x, int w);
} exec_xport_ops;

struct exec_xport {
    const exec_xport_ops *ops;
    int n;             /* workers                                             */
    int rank;          /* MPI: this process's worker; threads: -1 (all)       */
    int cores;         /* threads: cores the workers were spread over         */
};

/* The threads backend for n workers; cap[src * n + dst] is the capacity of
 * each channel (copied).  A waiting worker spins spin_s seconds before it
 * sleeps (exec_notify) when every worker has a core of its own, else it
 * sleeps at once. */
exec_xport *exec_xport_threads(int n, const int *cap, double spin_s);

/* The MPI backend: MPI must be initialised (exec_pipe_mpi_world) with a
 * world of n x tensor ranks.  tensor 1: one rank per worker; tensor T > 1
 * (tensor ranks as processes, tp_mpi.h): world rank w * T + k is rank k of
 * worker w, and the ranks k of all workers form a pipeline of their own
 * (x->rank = w), rank k exchanging with rank k of the other workers.
 * CL_EINPUT when the world size differs. */
int exec_xport_mpi(exec_xport **x, int n, int tensor, const int *cap, const char *file, cl_err *e);

#endif
