/* schedule.c - built-in schedules as per-device op lists (see schedule.h).
 *
 * Building a schedule has two steps:
 * 1. order: for each pipeline position (a device group: one stage, or the v
 *    chunks of interleaved 1F1B) the ordered compute items (F/B/W of a stage
 *    and a global microbatch g = iteration x m + i), as if unreplicated;
 * 2. expansion, per replica: keep the items whose microbatch runs on that
 *    replica (i mod r), put a RECV before every item that needs data from
 *    another worker and a SEND after every item whose output another worker
 *    needs, and add ALLREDUCE/UPDATE ops where the kind applies updates.
 * The orders:
 *   gpipe        all F in microbatch order, then all B (fused);
 *   1f1b         w = p - s - 1 warm-up F, then F/B alternating, then the
 *                remaining B (Narayanan et al. 2021, PipeDream-Flush);
 *                for a plan `for` deepspeed with whole pipelines
 *                replicated, DeepSpeed's TrainSchedule: the same compute
 *                order with the transfers where DeepSpeed puts them (each
 *                output sent one step later), blocking (blocking_p2p);
 *   zb-h1        p - s warm-up F, then for each j: B_j, W_{j-s} (W deferred
 *                by s microbatches), F_{j+p-s}; then the remaining W
 *                (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", H1);
 *                with replicated stages p - s counts devices, not stages
 *                (depth: the replicas of this stage and all after it), and
 *                s the devices before it, as PipeDream's 1F1B-RR does;
 *   interleaved  Megatron-LM's order over v chunks: 2(p - j - 1) + (v - 1)p
 *                warm-up forwards, virtual microbatch k of a group of p v
 *                goes to chunk (k mod pv) / p (reversed for backwards)
 *                (Narayanan et al. 2021, "Efficient large-scale ... Megatron");
 *   pipedream,   1f1b over the whole stream of iterations x m microbatches,
 *   fbp          no flush, an UPDATE after every backward;
 *   sequential   one device: F through all stages then B back, per microbatch.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/budget.h"
#include "schedule.h"

/* ------------------------------------------------------------- labels -- */

static const char *const op_names[] = {"F", "B", "W", "SEND", "RECV", "ALLREDUCE", "UPDATE"};
_Static_assert(sizeof op_names / sizeof op_names[0] == SCHED_OP_COUNT,
               "op_names out of sync with sched_op_kind");

const char *sched_op_kind_name(sched_op_kind k)
{
    assert((unsigned)k < SCHED_OP_COUNT);
    return op_names[k];
}

char *sched_op_label(const sched *s, const sched_op *op, char *buf, int cap)
{
    const char *pre = "";
    switch ((sched_op_kind)op->kind) {
    case SCHED_F: pre = "F"; break;
    case SCHED_B: pre = "B"; break;
    case SCHED_W: pre = "W"; break;
    case SCHED_SEND:
    case SCHED_RECV: pre = (op->flags & SCHED_GRAD) ? "G" : "A"; break;
    case SCHED_ALLREDUCE: snprintf(buf, (size_t)cap, "AR"); return buf;
    case SCHED_UPDATE: snprintf(buf, (size_t)cap, "U"); return buf;
    case SCHED_OP_COUNT: assert(0); break;
    }
    if (s->chunks > 1)
        snprintf(buf, (size_t)cap, "%s%d.%d", pre, op->micro, op->chunk);
    else
        snprintf(buf, (size_t)cap, "%s%d", pre, op->micro);
    return buf;
}

/* ------------------------------------------------------- closed forms -- */
/* (the memory counts, sched_inflight* and sched_versions*: sched_memory.c) */

static int imin(int a, int b) { return a < b ? a : b; }

int sched_warmup_iters(sched_kind kind, int p, int m)
{
    if (!sched_is_async(kind)) return 0;
    return (p + m - 1) / m;
}

int sched_fill_depth(const plan *pl)
{
    int P = pl->n_stages / (pl->chunks > 1 ? pl->chunks : 1), r = 1;
    for (int s = 0; s < pl->n_stages && pl->stages; s++) /* (stages unset: no replicas) */
        if (pl->stages[s].n_replicas > r) r = pl->stages[s].n_replicas;
    return P * r;
}

int sched_default_iters(sched_kind kind, int p, int m)
{
    return sched_is_async(kind) ? 2 * sched_warmup_iters(kind, p, m) + 4 : 1;
}

void sched_steady_window(sched_kind kind, int p, int m, int n_iter, int *first, int *last)
{
    int w = sched_warmup_iters(kind, p, m);
    *first = 0;
    *last = n_iter - 1;
    if (w <= 0 || w >= n_iter) return;
    *first = w;
    if (n_iter - 2 * w >= 1) *last = n_iter - 1 - w;
}

/* ---------------------------------------------------------- orders -- */

typedef struct item {
    int8_t kind;   /* SCHED_F, SCHED_B, SCHED_W; SCHED_SEND, SCHED_RECV in
                      orders that place their own transfers (deepspeed) */
    int8_t grad;   /* SEND/RECV: a gradient (else an activation)        */
    int32_t stage;
    int32_t g;     /* global microbatch = iter x m + micro */
    int32_t micro, iter;  /* filled after ordering */
} item;

static int put(item *it, int n, int kind, int stage, int g)
{
    it[n].kind = (int8_t)kind;
    it[n].grad = 0;
    it[n].stage = stage;
    it[n].g = g;
    return n + 1;
}

static int put_xfer(item *it, int n, int kind, int grad, int stage, int g)
{
    n = put(it, n, kind, stage, g);
    it[n - 1].grad = (int8_t)grad;
    return n;
}

/* Microbatches g0 .. g0+n-1 on stage s of p.  Each returns the item count. */
static int order_gpipe(item *it, int s, int g0, int n, int st)
{
    int k = 0;
    for (int i = 0; i < n; i++) k = put(it, k, SCHED_F, s, g0 + i * st);
    for (int i = 0; i < n; i++) k = put(it, k, SCHED_B, s, g0 + i * st);
    return k;
}

/* depth: devices from this stage to the last (p - s unreplicated) */
static int order_1f1b(item *it, int depth, int s, int g0, int n, int st)
{
    int k = 0, w = imin(depth - 1, n), f = 0;
    for (; f < w; f++) k = put(it, k, SCHED_F, s, g0 + f * st);
    for (int j = 0; j < n; j++) {
        if (f < n) k = put(it, k, SCHED_F, s, g0 + (f++) * st);
        k = put(it, k, SCHED_B, s, g0 + j * st);
    }
    return k;
}

/* depth as for 1f1b; defer: devices before this stage (s unreplicated) */
static int order_zbh1(item *it, int depth, int defer, int s, int g0, int n, int st)
{
    int k = 0, f = 0, wdone = 0;
    for (; f < imin(depth, n); f++) k = put(it, k, SCHED_F, s, g0 + f * st);
    for (int j = 0; j < n; j++) {
        k = put(it, k, SCHED_B, s, g0 + j * st);
        if (j >= defer) k = put(it, k, SCHED_W, s, g0 + (wdone++) * st);
        if (f < n) k = put(it, k, SCHED_F, s, g0 + (f++) * st);
    }
    while (wdone < n) k = put(it, k, SCHED_W, s, g0 + (wdone++) * st);
    return k;
}

/* DeepSpeed's TrainSchedule (deepspeed/runtime/pipe/schedule.py) on stage
 * s of p, transfers included, for microbatches k = 0..n-1 (g0 + k st).  It
 * runs 2(n + p - 1) steps; step t is a forward step when t and s have the
 * same parity, of microbatch (t - s) / 2, else a backward step of
 * microbatch (t + s + 1) / 2 - p; a step whose microbatch is outside
 * 0..n-1 computes nothing but still sends what the step before computed.
 *   forward step:  RECV activation (k), SEND gradient (the previous step's
 *                  backward microbatch), F (k)
 *   backward step: SEND activation (the previous step's forward
 *                  microbatch), RECV gradient (k), B (k)
 * Transfers with the first stage's predecessor or the last stage's
 * successor are left out.  So a stage's output leaves one step after it
 * was computed, and at each step neighbouring stages meet at their shared
 * boundary with the same two transfers in the same order: blocking sends
 * and receives cannot deadlock.  The compute order is 1f1b's (p - s - 1
 * warm-up forwards, then F/B alternating). */
static int order_deepspeed(item *it, int p, int s, int g0, int n, int st)
{
    int k = 0, steps = 2 * (n + p - 1);
#define VALID(x) ((x) >= 0 && (x) < n)
    for (int t = 0; t < steps; t++) {
        if ((t - s) % 2 == 0) {
            int i = (t - s) / 2, prev = (t + s) / 2 - p;
            if (VALID(i) && s > 0) k = put_xfer(it, k, SCHED_RECV, 0, s, g0 + i * st);
            if (VALID(prev) && s > 0) k = put_xfer(it, k, SCHED_SEND, 1, s, g0 + prev * st);
            if (VALID(i)) k = put(it, k, SCHED_F, s, g0 + i * st);
        } else {
            int i = (t + s + 1) / 2 - p, prev = (t - 1 - s) / 2;
            if (VALID(prev) && s < p - 1) k = put_xfer(it, k, SCHED_SEND, 0, s, g0 + prev * st);
            if (VALID(i) && s < p - 1) k = put_xfer(it, k, SCHED_RECV, 1, s, g0 + i * st);
            if (VALID(i)) k = put(it, k, SCHED_B, s, g0 + i * st);
        }
    }
#undef VALID
    return k;
}

/* Item x of Megatron-LM's interleaved order on a device of p positions
 * with v chunks: forwards run chunk 0 of p microbatches, then chunk 1 of
 * the same p, ... (groups of p v items), backwards the chunks in reverse.
 * The chunk index and the microbatch's rank among the device's own. */
static void interleaved_item(int x, int fwd, int p, int v, int *chunk, int *micro)
{
    int pv = p * v;
    *chunk = fwd ? (x % pv) / p : v - 1 - (x % pv) / p;
    *micro = (x / pv) * p + (x % pv) % p;
}

/* Megatron-LM interleaved order on device j of p with v chunks; stage of
 * chunk c on device j is c p + j; the n microbatches are g0, g0 + st, ...
 * Requires n % p == 0. */
static int order_interleaved(item *it, int p, int v, int j, int g0, int n, int st)
{
    int total = n * v, k = 0, c, i;
    int warm = imin(2 * (p - j - 1) + (v - 1) * p, total);
    for (int x = 0; x < warm; x++) {
        interleaved_item(x, 1, p, v, &c, &i);
        k = put(it, k, SCHED_F, c * p + j, g0 + i * st);
    }
    for (int x = 0; x < total - warm; x++) {
        interleaved_item(x + warm, 1, p, v, &c, &i);
        k = put(it, k, SCHED_F, c * p + j, g0 + i * st);
        interleaved_item(x, 0, p, v, &c, &i);
        k = put(it, k, SCHED_B, c * p + j, g0 + i * st);
    }
    for (int x = total - warm; x < total; x++) {
        interleaved_item(x, 0, p, v, &c, &i);
        k = put(it, k, SCHED_B, c * p + j, g0 + i * st);
    }
    return k;
}

/* The most stash alive at once on device j walking order_interleaved over
 * n microbatches (g0 0, stride 1), counting only those with i % r == q when
 * r > 1 (a replica filtering the device order over all microbatches).  A
 * stash lives from its F's start to its B's end.  Unfiltered, the steady
 * part is periodic in x with period p v (both orders repeat every p v items
 * with p more of each chunk), so one period after the warm-up holds its
 * peak; the cool-down only frees. */
static double interleaved_walk(int p, int v, int j, int n, int r, int q, const double *stash)
{
    int total = n * v, c, i;
    int warm = imin(2 * (p - j - 1) + (v - 1) * p, total);
    double cur = 0, peak = 0;
    for (int x = 0; x < warm; x++) {
        interleaved_item(x, 1, p, v, &c, &i);
        if (r == 1 || i % r == q) cur += stash[c];
    }
    peak = cur;
    int steady = total - warm;
    if (r == 1 && steady > p * v) steady = p * v;
    for (int x = 0; x < steady; x++) {
        interleaved_item(x + warm, 1, p, v, &c, &i);
        if (r == 1 || i % r == q) cur += stash[c];
        if (cur > peak) peak = cur;
        interleaved_item(x, 0, p, v, &c, &i);
        if (r == 1 || i % r == q) cur -= stash[c];
    }
    return peak;
}

double sched_interleaved_stash_peak(int p, int v, int j, int m, int r, const double *stash)
{
    assert(p >= 1 && v >= 1 && j >= 0 && j < p && m >= 1 && r >= 1);
    if (v == 1) /* the order is 1F1B's */
        return stash[0] * sched_inflight_rep(SCHED_1F1B, p * r, (p - j) * r, r, m, 1);
    double peak = 0, own[2] = {-1, -1}; /* own order of the nq = ceil and floor of m / r */
    for (int q = 0; q < r && q < m; q++) {
        /* as sched_build orders a replica: its own nq microbatches when
         * they are a multiple of p (the same walk for every replica with
         * as many), else the device order over all m */
        int nq = (m - q + r - 1) / r, at = nq != (m + r - 1) / r;
        double x;
        if (nq % p) {
            x = interleaved_walk(p, v, j, m, r, q, stash);
        } else {
            if (own[at] < 0) own[at] = interleaved_walk(p, v, j, nq, 1, 0, stash);
            x = own[at];
        }
        if (x > peak) peak = x;
    }
    return peak;
}

static int order_sequential(item *it, int S, int g0, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        for (int s = 0; s < S; s++) k = put(it, k, SCHED_F, s, g0 + i);
        for (int s = S - 1; s >= 0; s--) k = put(it, k, SCHED_B, s, g0 + i);
    }
    return k;
}

/* ------------------------------------------------------- expansion -- */

/* What expanding the item lists into per-worker op lists needs: the plan,
 * the schedule being filled, and each worker's weight-version bookkeeping. */
typedef struct op_builder {
    const plan *pl;
    sched *s;
    int kind, P, m, G, seq, async;
    int listed;     /* the order places its own transfers (deepspeed)    */
    int *wbase;     /* first worker of each position */
    int *wb, *rr;   /* per stage: first worker and replicas of its position */
    int64_t cap;
    int *upd;       /* per chunk on the current worker: updates applied */
    int *fver;      /* per (chunk, g): weight version its F used */
} op_builder;

static inline int worker_of(const op_builder *b, int stage, int micro)
{
    if (b->seq) return 0;
    int r = b->rr[stage];
    return b->wb[stage] + (r > 1 ? micro % r : 0);
}

static sched_op *emit(op_builder *b, int kind, int stage)
{
    sched *s = b->s;
    if (s->n_ops == b->cap) {
        b->cap = b->cap * 2 + 64;
        s->ops = cl_realloc(s->ops, (size_t)b->cap * sizeof *s->ops);
    }
    sched_op *op = &s->ops[s->n_ops++];
    op->kind = (uint8_t)kind;
    op->flags = 0;
    op->chunk = (uint16_t)(b->seq || b->P == b->s->n_stages ? 0 : stage / b->P);
    op->stage = stage;
    op->peer = -1;
    op->micro = -1;
    op->iter = 0;
    op->wver = -1;
    op->bytes = 0;
    return op;
}

static void emit_xfer(op_builder *b, int kind, int stage, int peer_stage, int peer, const item *it, int grad)
{
    int lo = stage < peer_stage ? stage : peer_stage;
    sched_op *op = emit(b, kind, stage);
    op->flags = grad ? SCHED_GRAD : 0;
    op->peer = peer;
    op->micro = it->micro;
    op->iter = it->iter;
    op->bytes = b->pl->stages[lo].act_out_bytes;
}

/* ALLREDUCE of `stage` (only for a replicated stage) and UPDATE of
 * microbatch `micro` (async kinds) or of the whole iteration (micro -1). */
static void emit_allreduce(op_builder *b, int stage, int micro, int iter)
{
    if (b->seq || b->rr[stage] < 2) return;
    sched_op *ar = emit(b, SCHED_ALLREDUCE, stage);
    double gather; /* the ring takes its all-gather half from the plan too */
    plan_ar_bytes(b->pl, stage, b->kind, &ar->bytes, &gather);
    ar->micro = micro;
    ar->iter = iter;
}

static void emit_upd(op_builder *b, int stage, int micro, int iter)
{
    sched_op *u = emit(b, SCHED_UPDATE, stage);
    u->micro = micro;
    u->iter = iter;
    b->upd[b->seq ? 0 : stage / b->P]++;
}

/* Expand one compute item on worker w. */
static void expand(op_builder *b, int w, const item *it, int split)
{
    int S = b->s->n_stages, s = it->stage, g = it->g, i = it->micro;
    if (it->kind == SCHED_SEND || it->kind == SCHED_RECV) { /* placed by the order */
        int up = (it->kind == SCHED_SEND) != (it->grad != 0), ps = up ? s + 1 : s - 1;
        int peer = worker_of(b, ps, i);
        if (peer != w) emit_xfer(b, it->kind, s, ps, peer, it, it->grad);
        return;
    }
    if (it->kind == SCHED_F) {
        if (s > 0 && !b->listed) {
            int src = worker_of(b, s - 1, i);
            if (src != w) emit_xfer(b, SCHED_RECV, s, s - 1, src, it, 0);
        }
        sched_op *op = emit(b, SCHED_F, s);
        op->micro = i;
        op->iter = it->iter;
        if (b->s->stash_weights) { /* PipeDream: v = 1 */
            op->wver = b->upd[0];
            b->fver[g] = op->wver;
        }
        if (s < S - 1 && !b->listed) {
            int dst = worker_of(b, s + 1, i);
            if (dst != w) emit_xfer(b, SCHED_SEND, s, s + 1, dst, it, 0);
        }
    } else if (it->kind == SCHED_B) {
        if (s < S - 1 && !b->listed) {
            int src = worker_of(b, s + 1, i);
            if (src != w) emit_xfer(b, SCHED_RECV, s, s + 1, src, it, 1);
        }
        sched_op *op = emit(b, SCHED_B, s);
        op->flags = split ? 0 : SCHED_FUSED_W;
        op->micro = i;
        op->iter = it->iter;
        if (b->s->stash_weights) op->wver = b->fver[g];
        if (s > 0 && !b->listed) {
            int dst = worker_of(b, s - 1, i);
            if (dst != w) emit_xfer(b, SCHED_SEND, s, s - 1, dst, it, 1);
        }
        if (b->async) {
            emit_allreduce(b, s, i, it->iter);
            emit_upd(b, s, i, it->iter);
        }
    } else {
        sched_op *op = emit(b, SCHED_W, s);
        op->micro = i;
        op->iter = it->iter;
    }
}

/* The op array of a large schedule.  Above glibc's largest mmap threshold
 * (32 MiB, tools/cleave.c) malloc maps every such array afresh and the build
 * then takes one page fault per 4 KiB it writes: the build time grew faster
 * than the ops (docs/simulator.md, "Building the op lists", has the
 * figures).  Asking for transparent huge pages there faults 2 MiB at a time.
 * Freed with free() like any other array. */
#define OPS_HUGE_BYTES ((size_t)16 << 20)
static sched_op *ops_alloc(int64_t n)
{
    size_t bytes = (size_t)n * sizeof(sched_op);
    if (bytes < OPS_HUGE_BYTES) return cl_malloc(bytes);
    size_t huge = (size_t)2 << 20;
    void *p = NULL;
    bytes = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, bytes)) return cl_malloc((size_t)n * sizeof(sched_op));
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without THP, 4 KiB pages */
#endif
    return p;
}

/* Most ops a built schedule holds: 2^27 ops of 32 bytes are 4 GiB. */
#define SCHED_MAX_OPS (1 << 27)

/* Keep item x on worker w (replica q of r)? */
static inline int mine(const op_builder *b, const item *x, int q, int r)
{
    return b->seq || r == 1 || x->micro % r == q;
}

static int check_plan(const plan *pl, sched_kind kind, int m, int n_iter, int *P, cl_err *e)
{
    int S = pl->n_stages, v = pl->chunks < 1 ? 1 : pl->chunks;
    if (S < 1) return cl_fail(e, CL_EINPUT, "plan: no stages");
    if ((unsigned)kind >= SCHED_COUNT) return cl_fail(e, CL_EINPUT, "plan: unknown schedule kind");
    if (m < 1 || n_iter < 1)
        return cl_fail(e, CL_EINPUT, "schedule: %d microbatches x %d iterations (hint: both must be >= 1)",
                       m, n_iter);
    if ((int64_t)m * n_iter > INT32_MAX / 4)
        return cl_fail(e, CL_EINPUT, "schedule: %d microbatches x %d iterations is too many", m, n_iter);
    if (S % v)
        return cl_fail(e, CL_EINPUT, "plan: %d stages do not split into %d chunks per device", S, v);
    /* the op lists are built whole (sched_build's capacity, 32-byte ops):
     * refuse what cannot be held before allocating it */
    double ops = (double)m * n_iter * S * (kind == SCHED_ZBH1 ? 7 : 6) +
                 (sched_is_async(kind) ? (double)m * n_iter : (double)n_iter) * S * 2;
    if (ops > SCHED_MAX_OPS)
        return cl_fail(e, CL_EINPUT, "schedule: %d microbatches x %d iterations on %d stages make %.3g ops (%.0f GiB), more than the %d a schedule may hold (hint: fewer microbatches or iterations)",
                       m, n_iter, S, ops, ops * sizeof(sched_op) / 1073741824.0, SCHED_MAX_OPS);
    *P = S / v;
    if (v > 1 && kind != SCHED_INTERLEAVED && kind != SCHED_SEQUENTIAL)
        return cl_fail(e, CL_EINPUT,
                       "plan: %d chunks per device need the interleaved schedule, not %s "
                       "(hint: re-plan with --schedule %s)", v, sched_kind_name(kind),
                       sched_kind_name(kind));
    if (kind == SCHED_INTERLEAVED && v > 1 && m % *P)
        return cl_fail(e, CL_EINPUT,
                       "schedule: interleaved needs the microbatches (%d) to be a multiple of the "
                       "pipeline depth %d (hint: --microbatches %d)", m, *P, (m / *P + 1) * *P);
    for (int s = 0; s < S; s++) {
        const plan_stage *st = &pl->stages[s], *home = &pl->stages[s % *P];
        if (st->n_replicas < 1 || !st->devices)
            return cl_fail(e, CL_EINPUT, "plan: stages[%d]: no devices", s);
        if (st->n_replicas != home->n_replicas ||
            memcmp(st->devices, home->devices, (size_t)st->n_replicas * sizeof *st->devices))
            return cl_fail(e, CL_EINPUT,
                           "plan: stages[%d]: chunk stages must run on the devices of stage %d",
                           s, s % *P);
        for (int q = 0; q < st->n_replicas; q++)
            if (st->devices[q] < 0 || st->devices[q] >= pl->cluster.n_devices)
                return cl_fail(e, CL_EINPUT, "plan: stages[%d].devices[%d]: device %d is not in the "
                               "cluster (%d devices)", s, q, st->devices[q], pl->cluster.n_devices);
        if (sched_is_async(kind) && st->n_replicas > 1 && m % st->n_replicas)
            return cl_fail(e, CL_EINPUT,
                           "schedule: stage %d has %d replicas but %d microbatches; %s updates after "
                           "each round of replicas, so each replica needs as many "
                           "(hint: --microbatches a multiple of %d)", s, st->n_replicas, m,
                           sched_kind_name(kind), st->n_replicas);
    }
    return CL_OK;
}

/* A deepspeed plan's 1f1b is DeepSpeed's own order with its blocking
 * transfers.  Only whole pipelines replicate there, so replica q of a stage
 * talks to replica q of its neighbours; with unequal replicas it could not
 * (and the rendezvous could deadlock): cleave's order then. */
int sched_deepspeed(const plan *pl, sched_kind kind)
{
    return kind == SCHED_1F1B && pl->framework == PLAN_FOR_DEEPSPEED && pl->n_stages >= 1 && pl->stages &&
           !plan_uneven_stage(pl);
}

/* The command's wall-clock budget ran out (budget.h). */
static int budget_fail(cl_err *e)
{
    cl_err be = {0};
    cl_budget_fail(&be, "building the op lists", "simulate fewer microbatches or iterations");
    return cl_fail(e, CL_EINPUT, "schedule: %s", be.msg);
}

int sched_build(const plan *pl, sched_kind kind, int m, int n_iter, sched *s, cl_err *e)
{
    memset(s, 0, sizeof *s);
    int P = 0;
    int rc = check_plan(pl, kind, m, n_iter, &P, e);
    if (rc) return rc;
    if (cl_budget_over()) return budget_fail(e); /* spent: allocate nothing */
    int S = pl->n_stages, v = S / P, G = m * n_iter;
    int seq = kind == SCHED_SEQUENTIAL;
    int split = kind == SCHED_ZBH1;

    op_builder b = {.pl = pl, .s = s, .kind = kind, .P = P, .m = m, .G = G, .seq = seq,
             .async = sched_is_async(kind)};
    s->kind = kind;
    s->n_stages = S;
    s->chunks = kind == SCHED_INTERLEAVED ? v : 1;
    s->n_micro = m;
    s->n_iter = n_iter;
    s->split_bw = split;
    s->stash_weights = kind == SCHED_PIPEDREAM;
    int same_r = !plan_uneven_stage(pl); /* chunk stages share their position's replicas */
    int ds = sched_deepspeed(pl, kind);
    b.listed = ds;
    s->blocking_p2p = ds;

    /* workers: position by position, replica by replica; a device may hold
     * one position only */
    b.wbase = cl_calloc((size_t)P + 1, sizeof *b.wbase);
    int *seen = cl_malloc((size_t)pl->cluster.n_devices * sizeof *seen);
    for (int d = 0; d < pl->cluster.n_devices; d++) seen[d] = -1;
    int nw = 0;
    for (int j = 0; j < P; j++) {
        b.wbase[j] = nw;
        for (int q = 0; q < pl->stages[j].n_replicas; q++) {
            int d = pl->stages[j].devices[q];
            if (seen[d] >= 0 && !seq) {
                int other = seen[d];
                free(seen);
                free(b.wbase);
                return cl_fail(e, CL_EINPUT, "plan: device %d runs both stage %d and stage %d "
                               "(hint: one pipeline position per device)", d, other, j);
            }
            seen[d] = j;
            nw++;
        }
    }
    b.wbase[P] = nw;
    free(seen);
    /* pipeline depth in devices from each position to the last: a replicated
     * stage takes r x as long per microbatch on one replica, so keeping its
     * replicas busy needs that many more microbatches in flight upstream
     * (PipeDream's 1F1B-RR keeps ceil(devices / input replicas) in flight) */
    int *depth = cl_malloc((size_t)P * sizeof *depth);
    for (int j = P - 1, d = 0; j >= 0; j--) depth[j] = d += pl->stages[j].n_replicas;
    b.wb = cl_malloc((size_t)S * sizeof *b.wb);
    b.rr = cl_malloc((size_t)S * sizeof *b.rr);
    for (int st = 0; st < S; st++) {
        b.wb[st] = b.wbase[st % P];
        b.rr[st] = pl->stages[st % P].n_replicas;
    }
    s->n_dev = seq ? 1 : nw;
    s->dev = cl_malloc((size_t)s->n_dev * sizeof *s->dev);
    for (int j = 0, w = 0; j < P && w < s->n_dev; j++)
        for (int q = 0; q < pl->stages[j].n_replicas && w < s->n_dev; q++) s->dev[w++] = pl->stages[j].devices[q];
    s->off = cl_calloc((size_t)s->n_dev + 1, sizeof *s->off);

    /* items of one position (over all iterations) */
    int per_g = seq ? 2 * S : ds ? 6 : (split ? 3 : 2) * (kind == SCHED_INTERLEAVED ? v : 1);
    item *it = cl_malloc((size_t)G * (size_t)per_g * sizeof *it);
    b.upd = cl_calloc((size_t)(seq ? S : v), sizeof *b.upd);
    int *last = cl_malloc((size_t)(seq ? S : v) * sizeof *last);
    if (s->stash_weights) b.fver = cl_malloc((size_t)G * sizeof *b.fver);
    b.cap = (int64_t)G * S * (split ? 7 : 6) + (sched_is_async(kind) ? (int64_t)G : n_iter) * S * 2 + 64;
    s->ops = ops_alloc(b.cap);

    /* the budget, polled every few thousand ops: the lists of a long run
     * take seconds and gigabytes to build */
    int over = 0;
    for (int j = 0; j < (seq ? 1 : P) && !over; j++) {
      int r = seq ? 1 : pl->stages[j].n_replicas;
      /* per replica: its own microbatches q, q + r, ... (interleaved, as
       * each of Megatron-LM's data-parallel replicas runs its own order,
       * when every position has r replicas, so replica q of each position
       * holds the same microbatches, and they are a multiple of p; else
       * it keeps the device order over all microbatches and filters it) */
      int ld = (depth[j] + r - 1) / r, ldefer = (depth[0] - depth[j] + r - 1) / r;
      for (int q = 0; q < r && !over; q++) {
        int n = 0, nq = q < m ? (m - q + r - 1) / r : 0;
        if (sched_is_async(kind)) {
            n = order_1f1b(it, ld, j, q, G / r, r);
        } else {
            for (int k = 0; k < n_iter; k++) {
                int g0 = k * m;
                switch (kind) {
                case SCHED_SEQUENTIAL: n += order_sequential(it + n, S, g0, m); break;
                case SCHED_GPIPE: n += order_gpipe(it + n, j, g0 + q, nq, r); break;
                case SCHED_1F1B:
                    n += ds ? order_deepspeed(it + n, P, j, g0 + q, nq, r)
                            : order_1f1b(it + n, ld, j, g0 + q, nq, r);
                    break;
                case SCHED_ZBH1: n += order_zbh1(it + n, ld, ldefer, j, g0 + q, nq, r); break;
                case SCHED_INTERLEAVED:
                    n += v == 1  ? order_1f1b(it + n, ld, j, g0 + q, nq, r)
                         : !same_r || nq % P ? order_interleaved(it + n, P, v, j, g0, m, 1)
                                  : order_interleaved(it + n, P, v, j, g0 + q, nq, r);
                    break;
                default: assert(0);
                }
            }
        }
        for (int x = 0, i = -1, k = 0, gprev = -1; x < n; x++) {
            /* g mostly rises by one: track micro and iter without dividing */
            int g = it[x].g;
            if (g != gprev) {
                if (g == gprev + 1) {
                    if (++i == m) i = 0, k++;
                } else {
                    i = g % m;
                    k = g / m;
                }
                gprev = g;
            }
            it[x].micro = i;
            it[x].iter = k;
        }
        {
            int w = seq ? 0 : b.wbase[j] + q;
            s->off[w] = s->n_ops;
            memset(b.upd, 0, (size_t)(seq ? S : v) * sizeof *b.upd);
            if (sched_is_async(kind)) {
                for (int x = 0; x < n && !over; x++) {
                    if (mine(&b, &it[x], q, r)) expand(&b, w, &it[x], split);
                    if ((x & 16383) == 16383) over = cl_budget_over();
                }
            } else {
                /* per iteration: a chunk's all-reduce is posted right after
                 * its last backward item; every chunk updates at the end */
                int per_it = n / n_iter, nst = seq ? S : v;
                for (int k = 0; k < n_iter && !over; k++) {
                    const item *ik = it + (int64_t)k * per_it;
                    for (int c = 0; c < nst; c++) last[c] = -1;
                    for (int x = 0; x < per_it; x++)
                        if (ik[x].kind != SCHED_F && mine(&b, &ik[x], q, r))
                            last[seq ? ik[x].stage : ik[x].stage / P] = x;
                    for (int x = 0; x < per_it && !over; x++) {
                        if ((x & 16383) == 16383) over = cl_budget_over();
                        if (!mine(&b, &ik[x], q, r)) continue;
                        expand(&b, w, &ik[x], split);
                        int c = seq ? ik[x].stage : ik[x].stage / P;
                        if (last[c] == x) emit_allreduce(&b, ik[x].stage, -1, k);
                    }
                    if ((k & 1023) == 1023) over |= cl_budget_over();
                    for (int c = 0; c < nst; c++) {
                        int st = seq ? c : c * P + j;
                        if (last[c] < 0) emit_allreduce(&b, st, -1, k);
                        emit_upd(&b, st, -1, k);
                    }
                }
            }
        }
      }
    }
    s->off[s->n_dev] = s->n_ops;
    free(it);
    free(b.upd);
    free(last);
    free(b.fver);
    free(b.wbase);
    free(b.wb);
    free(b.rr);
    free(depth);
    if (over || cl_budget_over()) {
        sched_free(s);
        return budget_fail(e);
    }
    return CL_OK;
}

void sched_free(sched *s)
{
    if (!s) return;
    free(s->dev);
    free(s->off);
    free(s->ops);
    memset(s, 0, sizeof *s);
}
