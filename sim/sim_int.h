/* sim_int.h - the simulator's internal state, shared by sim.c (events,
 * devices, links, collectives), memory.c (memory over time) and stats.c
 * (results).  Not for use outside sim/. */
#ifndef CL_SIM_INT_H
#define CL_SIM_INT_H

#include <assert.h>

#include "event.h"
#include "sim.h"

/* W_WAIT_SEND: held at a blocking SEND (sched.blocking_p2p) until its
 * receiver meets it and the transfer has arrived */
enum { W_READY, W_RUN, W_WAIT_RECV, W_WAIT_SEND, W_WAIT_AR, W_DONE };

/* per worker: a device running one op list.  The fields an event touches
 * come first, in the struct's first three cache lines (it is 64-byte
 * aligned; a new peak writes the fourth): with hundreds of workers each event meets a worker whose state
 * has left the cache, and every line saved is a miss saved. */
typedef struct sim_worker {
    _Alignas(64) int64_t pc; /* next op                                      */
    int64_t end;            /* end of its list                               */
    int64_t wait_ref;       /* slot (W_WAIT_RECV, W_WAIT_SEND) or instance
                               (W_WAIT_AR)                                   */
    double block_t;         /* when it started waiting                       */
    double run_t0;          /* start of the compute op in progress           */
    double held;            /* received data the next compute op reads: held
                               from its RECV until that op ends, bytes      */
    int state;
    int queued;             /* in the run queue                              */
    int wait_iter;          /* iteration of the op it waits at               */
    int stash_n;            /* stashed microbatches alive                    */
    /* line 2: memory, bytes */
    sim_mem mem;            /* current, by component                         */
    double peak;
    double sent;
    /* line 3 */
    int cpeer[2], cchan[2]; /* link cache: last two peers and their links    */
    int **vref;             /* owned; NULL unless the schedule stashes weights:
                               per local stage a refcount per version        */
    double t_last;          /* end of its last op                            */
    int peak_stash;
    int acc_iter;           /* iteration whose busy and comm-wait times are
                               accumulated in acc (-1: none; see sim_acc)   */
    double acc[2];          /* busy, comm-wait seconds of iteration acc_iter */
    int64_t last_sample;    /* its latest memory sample, -1                  */
    /* line 4: written at each new peak (at every F while memory grows) */
    _Alignas(64) double peak_t;
    sim_mem at_peak;
    int peak_versions;
    /* the rest is touched rarely */
    int n_local;            /* stages held (distinct stages in its list)     */
    int *local;             /* those stages, ascending (in sim's pool_i)     */
    int64_t *last_ar;       /* per local stage: last all-reduce instance posted, -1 */
    int64_t *ar_posted;     /* per local stage: all-reduces posted so far    */
    int *ar_q;              /* per local stage: replica index in its ring    */
    int *vcur, *vlive, *vcap;
} sim_worker;

/* What the replay reads of a plan stage per op, in one cache line (a
 * plan_stage is two, and the durations were four arrays). */
typedef struct sim_stage {
    _Alignas(64) double fwd;  /* F: fwd_s                                   */
    double bin;             /* B split from W: bwd_in_s                      */
    double bfused;          /* B with W fused: bwd_in_s + bwd_w_s            */
    double bw;              /* W: bwd_w_s                                    */
    double up;              /* UPDATE: update_s (0: not modelled)            */
    double stash_bytes, param_bytes;
} sim_stage;

/* one pipeline transfer: activation or gradient of (edge, microbatch) */
typedef struct sim_slot {
    double post_t;          /* SEND posted (blocking: the transfer started);
                               before that -1, or with blocking transfers
                               -2 - w while sender w waits at its SEND       */
    double arrive_t;        /* arrived; before that -1 - (waiter + 1): -1, or
                               -2 - w while worker w is blocked in RECV on it
                               (16 bytes a slot: four to a cache line)      */
} sim_slot;

enum { XF_PIPE, XF_RING };

typedef struct sim_xfer {
    int kind;               /* XF_PIPE, XF_RING                              */
    int32_t chan;
    int64_t ref;            /* pipe: slot; ring: instance                    */
    int64_t op;             /* SEND op, or the sender's ALLREDUCE op (labels) */
    int32_t src, dst;       /* workers                                       */
    int32_t member;         /* ring: receiving member's replica index        */
    int32_t hop;            /* ring: 0 inside the node's ring, 1 between nodes */
    double bytes;
    double start_t;         /* posted                                        */
    int32_t next_free;
} sim_xfer;

/* A channel: one stream of transfers from one device to another, sent one
 * at a time in the order posted (link.c). */
typedef struct sim_chan {
    double bw, lat;
    double free_t;          /* when its last transfer so far sends its last byte */
    int32_t src, dst;       /* workers                                       */
    int stream;             /* 0 pipeline, 1 + s stage s's all-reduce         */
    int level;              /* CLUSTER_INTRA / CLUSTER_INTER                 */
} sim_chan;

/* The all-reduce of a replicated stage (ring.c): replica q is member q.
 * Hierarchical when the replicas sit k to a node on n >= 2 nodes with
 * k >= 2: a ring inside each node (next_in), k rings between nodes
 * (next_x); else one flat ring over all (k = r, n = 1). */
typedef struct sim_ring {
    int k, n;
    double gather;              /* bytes of the all-gather half (plan_ar_bytes;
                                   the reduce-scatter half: the op's bytes)  */
    int32_t *next_in, *next_x;  /* member -> member, owned (one block)       */
    int32_t *ch_in, *ch_x;      /* member's channel to them, -1 not yet      */
} sim_ring;

/* A member's progress in one all-reduce. */
typedef struct sim_arm {
    int32_t got_in, got_x;  /* steps received inside the node, between nodes */
    int32_t sent;           /* steps sent (in order)                          */
    int32_t gate;           /* ZeRO: its shard's UPDATE is done               */
} sim_arm;

/* one ring all-reduce among the replicas of a stage */
typedef struct sim_ar {
    int stage;
    int r;
    int posted;
    double last_post_t;
    int64_t member_off;     /* into ar_done / ar_op / ar_m; ar_done is 0,
                               2 when a member's reduce-scatter is done
                               (zero_split), 1 when all of it is         */
} sim_ar;

typedef struct sim_memsample {
    double t;
    int32_t w;
    double bytes;
} sim_memsample;

typedef struct sim_span {
    double t0, t1;
    double bytes;           /* link spans: the transfer's bytes              */
    int32_t track;          /* worker, or channel for link spans            */
    int32_t link;           /* 0 compute, 1 link                             */
    int64_t op;
} sim_span;

struct sim {
    const plan *pl;
    const sched *sc;
    sim_opts o;
    ev_kernel *k;
    double now;             /* time of the event being handled              */
    int S, m, n_iter, n_w;
    int blocking;           /* sc->blocking_p2p, kept beside what every op reads */
    int64_t G;              /* microbatches over all iterations              */
    sim_stage *stg;         /* per stage: durations and sizes, one line each */
    plan_state_f state;     /* model state per parameter byte (memory.c)     */
    int zero_split;         /* ZeRO 1/2 under a flushing kind: a replicated
                               stage's all-reduce is a reduce-scatter, the
                               UPDATE of its shard (update_s / r), then an
                               all-gather the stage's next F waits for     */
    sim_worker *w;
    int *worker_of_dev;     /* cluster device -> worker, -1                  */
    int *pool_i;            /* the workers' local and ar_q arrays            */
    int64_t *pool_l;        /* the workers' last_ar and ar_posted arrays     */
    /* pipeline transfers */
    sim_slot *slots;
    int64_t n_slots;
    sim_xfer *xf;
    int32_t n_xf, cap_xf, xf_free;
    sim_chan *ch;
    int n_ch, cap_ch;
    int64_t *ch_hash;       /* open addressing: key src * n_w + dst -> chan */
    int32_t *ch_hval;
    int64_t ch_hcap;
    /* all-reduces, created as the first replica posts each one */
    sim_ar *ar;
    int64_t n_ar, cap_ar;
    int64_t **ar_list;      /* per stage: its instances in order             */
    int64_t *ar_n, *ar_cap; /* per stage: instances created, capacity        */
    uint8_t *ar_done;       /* per (instance, member)                        */
    int64_t *ar_op;         /* per (instance, member): the ALLREDUCE op      */
    sim_arm *ar_m;          /* per (instance, member): its progress          */
    sim_ring *ring;         /* per stage: the all-reduce's rings (ring.c)    */
    int64_t n_members, cap_members;
    cl_err err;             /* a bad op met during the run                   */
    /* run queue */
    int32_t *runq;
    int rq_head, rq_n;
    /* timeline */
    double *iter_end;       /* per iteration: end of its last compute op     */
    double *busy_it, *comm_it; /* per (worker, iteration)                   */
    sim_span *spans;
    int64_t n_spans, cap_spans;
    sim_memsample *mem_samples; /* recorded runs: memory after each change  */
    int64_t n_mem, cap_mem;
    double sent_level[CLUSTER_LEVELS];
    int ran;
};

/* link.c: channels and transfers */
int sim_link_lookup(sim *s, int src, int dst, int stream); /* creates it on first use */
void sim_link_start(sim *s, int c, int kind, int64_t ref, int64_t op, double bytes,
                    int src, int dst, int member, int hop);
/* Before the run: with network cards, or devices holding several stages,
 * create every channel and split shared bandwidth (link.c). */
void sim_links_setup(sim *s);
/* ring.c: the all-reduces */
void sim_ring_setup(sim *s);
void sim_ring_free(sim *s);
void sim_ring_channels(sim *s);             /* create every ring channel */
void sim_post_ar(sim *s, int w, const sched_op *op, int64_t pc);
void sim_ring_recv(sim *s, int64_t inst, int q, int hop, double t);
void sim_ring_gate(sim *s, int64_t inst, int q); /* ZeRO: member q's UPDATE ended */
/* the worker of member q of all-reduce a */
static inline int sim_ar_worker(const sim *s, const sim_ar *a, int q)
{
    return s->worker_of_dev[s->pl->stages[a->stage].devices[q]];
}
/* sim.c: a bad op met during the run (stops it); wake worker w blocked
 * since block_t for data posted at ready_t */
void sim_run_fail(sim *s, int w, const char *what);
void sim_wake(sim *s, int w, double t, double ready_t);
/* sim.c: a transfer's data has arrived; run woken workers */
void sim_arrive(sim *s, int32_t x, double t);
void sim_drain(sim *s);

/* The pipeline channel src -> dst, through a two-entry cache per worker (a
 * pipeline worker talks to its two neighbours). */
static inline int sim_link_get(sim *s, int src, int dst)
{
    sim_worker *W = &s->w[src];
    if (W->cpeer[0] == dst) return W->cchan[0];
    if (W->cpeer[1] == dst) {
        int c = W->cchan[1];
        W->cpeer[1] = W->cpeer[0];
        W->cchan[1] = W->cchan[0];
        W->cpeer[0] = dst;
        W->cchan[0] = c;
        return c;
    }
    int c = sim_link_lookup(s, src, dst, 0);
    W->cpeer[1] = W->cpeer[0];
    W->cchan[1] = W->cchan[0];
    W->cpeer[0] = dst;
    W->cchan[0] = c;
    return c;
}

/* memory.c */
void sim_mem_init(sim *s);
void sim_mem_free(sim *s);
void sim_mem_update(sim *s, int w, const sched_op *op);
/* PipeDream's weight versions: the version op->wver gains (delta 1) or loses
 * (-1) a stashed microbatch */
void sim_mem_version(sim *s, int w, const sched_op *op, int delta);

void sim_mem_sample(sim *s, sim_worker *W, double tot);

/* After any change of worker W's memory: a new peak is kept, and a recorded
 * run keeps the value for the trace's memory counter. */
static inline void sim_mem_peak(sim *s, sim_worker *W)
{
    double tot = sim_mem_total(&W->mem);
    if (s->o.record) sim_mem_sample(s, W, tot);
    if (tot > W->peak) {
        W->peak = tot;
        W->peak_t = s->now;
        W->at_peak = W->mem;
    }
}

/* Transfer buffers of worker w grow (bytes > 0) or shrink. */
static inline void sim_mem_buffers(sim *s, int w, double bytes)
{
    sim_worker *W = &s->w[w];
    W->mem.buffers += bytes;
    sim_mem_peak(s, W);
}

/* The (busy, comm-wait) accumulator of worker W for iteration it: held in
 * the worker while it works on one iteration, written back to busy_it and
 * comm_it when it turns to another (the same additions in the same order as
 * adding to the arrays directly). */
static inline double *sim_acc(sim *s, sim_worker *W, int it)
{
    if (W->acc_iter != it) {
        int64_t w = W - s->w;
        if (W->acc_iter >= 0) {
            s->busy_it[w * s->n_iter + W->acc_iter] = W->acc[0];
            s->comm_it[w * s->n_iter + W->acc_iter] = W->acc[1];
        }
        W->acc_iter = it;
        W->acc[0] = s->busy_it[w * s->n_iter + it];
        W->acc[1] = s->comm_it[w * s->n_iter + it];
    }
    return W->acc; /* [0] busy, [1] comm-wait */
}

/* An F starts: its stash is kept (and, stashing weights, its version). */
static inline void sim_mem_f_start(sim *s, int w, const sched_op *op)
{
    sim_worker *W = &s->w[w];
    W->mem.stash += s->stg[op->stage].stash_bytes;
    if (++W->stash_n > W->peak_stash) W->peak_stash = W->stash_n;
    if (W->vref && op->wver >= 0) sim_mem_version(s, w, op, +1);
    sim_mem_peak(s, W);
}

/* The op that last reads a stash (a fused B, or W) has ended. */
static inline void sim_mem_stash_free(sim *s, int w, const sched_op *op)
{
    sim_worker *W = &s->w[w];
    W->mem.stash -= s->stg[op->stage].stash_bytes;
    W->stash_n--;
    assert(W->stash_n >= 0);
    if (W->vref && op->wver >= 0) sim_mem_version(s, w, op, -1);
    if (s->o.record) sim_mem_peak(s, W);
}

/* stats.c */
void sim_fill_result(const sim *s, sim_result *out);

/* index of stage in worker w's local list, -1 if it does not hold it */
int sim_local_index(const sim_worker *w, int stage);

#endif
