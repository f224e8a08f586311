/* backend_mpi.c - the MPI transport (chan.h): one rank per worker,
 * non-blocking point-to-point messages (MPI_Isend / MPI_Irecv) on a
 * communicator of its own, and MPI's lifetime (pipeline.h).  With tensor
 * ranks as processes (tp_mpi.h) the world holds one such pipeline per
 * tensor rank, each on its communicator split from the world.
 *
 * A message goes whole (header and payload) as MPI_BYTE.  MPI tags are
 * ints, so the 64-bit tag is folded: kind and boundary keep their 16 bits
 * and the sequence number is taken modulo (MPI_TAG_UB + 1) / 2^16 (32768
 * with Open MPI).  Two messages from one rank whose sequence numbers differ
 * by a multiple of that are never in flight together (channels are bounded
 * far below it), and MPI delivers equal tags from one rank in order, so
 * matching is exact; the receiver checks the full tag in the header.
 *
 * Waiting polls (MPI_Test) and yields the core between polls: a rank has
 * its own core, and the polls drive MPI's progress (Open MPI's shared-memory
 * transport has no interrupt-driven progress; its own blocking calls poll
 * too).  While other processes compete for the rank's core, polling makes
 * the rank lose it for whole time slices (exec_preempt, chan.h): then a
 * waiting rank sleeps EXEC_MPI_NAP_S between polls instead. */
#include <assert.h>
#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "chan.h"
#include "exec/nn/gemm.h"
#include "pipeline.h"

static int g_failed; /* a run stalled: finalising would hang, abort instead */

int exec_pipe_mpi_world(int *rank, int *size, cl_err *e)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (fin) return cl_fail(e, CL_ERUN, "MPI was already finalised in this process");
    if (!init && MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return cl_fail(e, CL_ERUN, "MPI_Init failed (hint: run under mpirun, or use --backend threads)");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return CL_OK;
}

int exec_pipe_mpi_size_check(int size, int workers, int tensor, const char *cmd, const char *file,
                             cl_err *e)
{
    if (size == workers * tensor) return CL_OK;
    if (tensor > 1)
        return cl_fail(e, CL_EINPUT, "%s: the plan runs on %d workers x %d tensor ranks but MPI has %d rank%s (hint: mpirun -np %d cleave %s --plan %s --backend mpi --tensor-over mpi)",
                       file, workers, tensor, size, size == 1 ? "" : "s", workers * tensor, cmd, file);
    return cl_fail(e, CL_EINPUT, "%s: the plan runs on %d workers but MPI has %d rank%s (hint: mpirun -np %d cleave %s --plan %s --backend mpi)",
                   file, workers, size, size == 1 ? "" : "s", workers, cmd, file);
}

void exec_pipe_mpi_finalize(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin) return;
    if (g_failed) MPI_Abort(MPI_COMM_WORLD, 1); /* peers may wait forever */
    MPI_Finalize();
}

typedef struct sreq {
    MPI_Request rq;
    exec_msg *m;
    int dst, bounded;
    int64_t bytes;
} sreq;

typedef struct rreq {
    MPI_Request rq;
    exec_msg *m;
    int src;
    uint64_t tag;
} rreq;

typedef struct mx {
    exec_xport x;
    MPI_Comm comm;
    int64_t mod;         /* sequence numbers modulo this                     */
    sreq *s;
    int ns, caps;
    rreq *r;
    int nr, capr;
    int *cap;            /* [n]: capacity towards each destination          */
    int *nb;             /* [n]: bounded sends outstanding to it            */
    double out;          /* their payload bytes                             */
    int stop;
    exec_preempt pre;    /* whether this rank holds its core (quiet_from)    */
    long nivcsw;         /* involuntary switches seen; -1 before the first  */
} mx;

#define EXEC_MPI_NAP_S 20e-6

/* Between two polls: yield while the rank holds its core, else sleep. */
/* Between two polls: yield while the rank holds its core, else nap.  A
 * rank polls in MPI calls, where a competing process takes the core from it
 * at the end of its time slice, so the sign is an involuntary context
 * switch (getrusage RUSAGE_THREAD) since the previous pause: then it naps
 * for EXEC_PREEMPT_BACKOFF_S. */
static void mx_pause(mx *t)
{
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0 && ru.ru_nivcsw != t->nivcsw) {
        if (t->nivcsw >= 0) t->pre.quiet_from = exec_now() + EXEC_PREEMPT_BACKOFF_S;
        t->nivcsw = ru.ru_nivcsw;
    }
    if (exec_preempt_spin_ok(&t->pre)) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, (long)(EXEC_MPI_NAP_S * 1e9)};
    nanosleep(&ts, NULL);
}

static int mpi_tag(const mx *t, uint64_t tag)
{
    int64_t seq = (int64_t)(tag >> 16) % t->mod;
    return (int)((seq << 16) | (int64_t)(tag & 0xffff));
}

/* Free the sends that completed. */
static void progress_sends(mx *t)
{
    int k = 0;
    for (int i = 0; i < t->ns; i++) {
        int done = 0;
        MPI_Test(&t->s[i].rq, &done, MPI_STATUS_IGNORE);
        if (done) {
            if (t->s[i].bounded) {
                t->nb[t->s[i].dst]--;
                t->out -= (double)t->s[i].bytes;
            }
            exec_msg_free(t->s[i].m);
        } else {
            t->s[k++] = t->s[i];
        }
    }
    t->ns = k;
}

static int mx_post(exec_xport *x, int src, exec_msg *m)
{
    mx *t = (mx *)x;
    assert(src == x->rank && m->dst >= 0 && m->dst < x->n && m->dst != src);
    progress_sends(t);
    if (m->bounded && t->nb[m->dst] >= t->cap[m->dst]) return 1;
    m->src = src;
    if (t->ns == t->caps) {
        t->caps = t->caps * 2 + 16;
        t->s = cl_realloc(t->s, (size_t)t->caps * sizeof *t->s);
    }
    sreq *q = &t->s[t->ns++];
    q->m = m;
    q->dst = m->dst;
    q->bounded = m->bounded;
    q->bytes = m->bytes;
    if (m->bounded) {
        t->nb[m->dst]++;
        t->out += (double)m->bytes;
    }
    int64_t n = EXEC_MSG_HDR + m->bytes;
    assert(n <= INT32_MAX);
    MPI_Isend(m, (int)n, MPI_BYTE, m->dst, mpi_tag(t, m->tag), t->comm, &q->rq);
    return 0;
}

static exec_msg *mx_take(exec_xport *x, int dst, int src, uint64_t tag, int64_t bytes)
{
    mx *t = (mx *)x;
    assert(dst == x->rank && src != dst);
    int i = 0;
    while (i < t->nr && !(t->r[i].src == src && t->r[i].tag == tag)) i++;
    if (i == t->nr) {
        if (bytes < 0) { /* size unknown: probe for it */
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(src, mpi_tag(t, tag), t->comm, &flag, &st);
            if (!flag) return NULL;
            int cnt = 0;
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            assert(cnt >= EXEC_MSG_HDR);
            exec_msg *m = exec_msg_new(cnt - EXEC_MSG_HDR);
            MPI_Recv(m, cnt, MPI_BYTE, src, mpi_tag(t, tag), t->comm, MPI_STATUS_IGNORE);
            assert(m->tag == tag && m->bytes == cnt - EXEC_MSG_HDR);
            return m;
        }
        if (t->nr == t->capr) {
            t->capr = t->capr * 2 + 16;
            t->r = cl_realloc(t->r, (size_t)t->capr * sizeof *t->r);
        }
        rreq *q = &t->r[t->nr++];
        q->m = exec_msg_new(bytes);
        q->src = src;
        q->tag = tag;
        assert(EXEC_MSG_HDR + bytes <= INT32_MAX);
        MPI_Irecv(q->m, (int)(EXEC_MSG_HDR + bytes), MPI_BYTE, src, mpi_tag(t, tag), t->comm,
                  &q->rq);
    }
    int done = 0;
    MPI_Test(&t->r[i].rq, &done, MPI_STATUS_IGNORE);
    if (!done) return NULL;
    exec_msg *m = t->r[i].m;
    t->r[i] = t->r[--t->nr];
    assert(m->tag == tag && (bytes < 0 || m->bytes == bytes));
    return m;
}

static uint64_t mx_events(exec_xport *x, int w)
{
    (void)x;
    (void)w;
    return 0;
}

static void mx_wait(exec_xport *x, int w, uint64_t seen, double max_s)
{
    (void)w;
    (void)seen;
    (void)max_s;
    progress_sends((mx *)x);
    mx_pause((mx *)x);
}

static double mx_out_bytes(exec_xport *x, int w)
{
    (void)w;
    return ((mx *)x)->out;
}

static int mx_sync(exec_xport *x, int w, double max_s, double *tnow)
{
    (void)w;
    mx *t = (mx *)x;
    /* drive our sends while waiting for the others */
    MPI_Request rq;
    MPI_Ibarrier(t->comm, &rq);
    double end = exec_now() + max_s;
    for (int done = 0; !done;) {
        progress_sends(t);
        MPI_Test(&rq, &done, MPI_STATUS_IGNORE);
        if (done) break;
        if (t->stop || exec_now() > end) return 1; /* the request leaks: we abort */
        mx_pause(t);
    }
    *tnow = exec_now();
    return 0;
}

static int mx_run(exec_xport *x, exec_worker_fn fn, void *ctx)
{
    exec_blas_init();
    prctl(PR_SET_TIMERSLACK, 1000UL); /* naps of EXEC_MPI_NAP_S, not + 50 us */
    return fn(ctx, x->rank);
}

static void mx_abort(exec_xport *x)
{
    ((mx *)x)->stop = 1;
    g_failed = 1;
}

static int mx_aborted(exec_xport *x) { return ((mx *)x)->stop; }

static void mx_destroy(exec_xport *x)
{
    mx *t = (mx *)x;
    if (!t) return;
    if (!t->stop) { /* a finished run: every send completes */
        while (t->ns) {
            progress_sends(t);
            if (t->ns) sched_yield();
        }
        for (int i = 0; i < t->nr; i++) {
            MPI_Cancel(&t->r[i].rq);
            MPI_Wait(&t->r[i].rq, MPI_STATUS_IGNORE);
        }
        MPI_Comm_free(&t->comm);
    }
    for (int i = 0; i < t->nr; i++) exec_msg_free(t->r[i].m);
    for (int i = 0; i < t->ns; i++) exec_msg_free(t->s[i].m);
    free(t->s);
    free(t->r);
    free(t->cap);
    free(t->nb);
    free(t);
}

static const exec_xport_ops mx_ops = {mx_post, mx_take, mx_events, mx_wait, mx_out_bytes,
                                      mx_sync, mx_run, mx_abort, mx_aborted, mx_destroy,
                                      NULL /* polls: never sleeps in a wait */};

int exec_xport_mpi(exec_xport **out, int n, int tensor, const int *cap, const char *file, cl_err *e)
{
    *out = NULL;
    assert(tensor >= 1);
    int rank, size;
    int rc = exec_pipe_mpi_world(&rank, &size, e);
    if (rc || (rc = exec_pipe_mpi_size_check(size, n, tensor, "train", file, e))) return rc;
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    int64_t mod = flag && ub ? ((int64_t)*ub + 1) >> 16 : 0;
    if (mod < 256)
        return cl_fail(e, CL_ERUN, "this MPI allows tags up to %d only; the MPI backend needs 2^24 (hint: use --backend threads)",
                       flag && ub ? *ub : -1);
    mx *t = cl_calloc(1, sizeof *t);
    t->x.ops = &mx_ops;
    t->x.n = n;
    t->x.rank = rank / tensor;
    t->x.cores = 0;
    t->mod = mod;
    t->nivcsw = -1;
    /* the pipeline of tensor rank k: worker w is its rank w */
    MPI_Comm_split(MPI_COMM_WORLD, rank % tensor, rank / tensor, &t->comm);
    rank /= tensor;
    t->cap = cl_calloc((size_t)n, sizeof *t->cap);
    t->nb = cl_calloc((size_t)n, sizeof *t->nb);
    for (int d = 0; d < n; d++) t->cap[d] = cap[rank * n + d] > 0 ? cap[rank * n + d] : 1;
    *out = &t->x;
    return CL_OK;
}
