/* linkprof.c - ping-pong link profiling, its least-squares fit, and this
 * machine's cluster file (linkprof.h). */
#include <assert.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gsl/gsl_fit.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <mpi.h>

#include "chan.h"
#include "gemm.h"
#include "linkprof.h"
#include "profile.h"
#include "tensor.h"
#include "../tools/spawn.h"

static const char *const backend_names[] = {"threads", "mpi"};
_Static_assert(sizeof backend_names / sizeof backend_names[0] == EXEC_LINK_BACKEND_COUNT,
               "backend names");

const char *exec_link_backend_name(exec_link_backend b)
{
    assert((unsigned)b < EXEC_LINK_BACKEND_COUNT);
    return backend_names[b];
}

int exec_link_backend_from_name(const char *name)
{
    for (int b = 0; b < EXEC_LINK_BACKEND_COUNT; b++)
        if (name && strcmp(name, backend_names[b]) == 0) return b;
    return -1;
}

/* ----------------------------------------------------------------- fit -- */

int exec_link_fit_ls(const double *bytes, const double *t, const double *w, int n,
                     exec_link_fit *out, cl_err *e)
{
    memset(out, 0, sizeof *out);
    if (n < 2) return cl_fail(e, CL_EINPUT, "link fit: %d sizes; at least 2 are needed", n);
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        if (!(t[i] > 0) || !isfinite(t[i]) || !(bytes[i] >= 0) || !isfinite(bytes[i]))
            return cl_fail(e, CL_EINPUT, "link fit: point %d (%g B, %g s) is not a positive finite time",
                           i, bytes[i], t[i]);
        if (i > 0 && bytes[i] != bytes[0]) distinct = 1;
        if (w && (!(w[i] > 0) || !isfinite(w[i])))
            return cl_fail(e, CL_EINPUT, "link fit: weight %d is %g; weights must be positive", i, w[i]);
    }
    if (!distinct) return cl_fail(e, CL_EINPUT, "link fit: every point has the same size");
    double *wt = cl_malloc((size_t)n * sizeof *wt);
    for (int i = 0; i < n; i++) wt[i] = w ? w[i] : 1.0 / (t[i] * t[i]);
    double c0, c1, cov00, cov01, cov11, chisq;
    gsl_fit_wlinear(bytes, 1, wt, 1, t, 1, (size_t)n, &c0, &c1, &cov00, &cov01, &cov11, &chisq);
    (void)cov01;
    /* weighted R^2 = 1 - sum w r^2 / sum w (t - mean_w)^2 */
    double sw = 0, swt = 0;
    for (int i = 0; i < n; i++) {
        sw += wt[i];
        swt += wt[i] * t[i];
    }
    double mean = swt / sw, ss_tot = 0, ss_res = 0, sq_rel = 0;
    out->max_rel = -1;
    for (int i = 0; i < n; i++) {
        double r = t[i] - (c0 + c1 * bytes[i]);
        ss_tot += wt[i] * (t[i] - mean) * (t[i] - mean);
        ss_res += wt[i] * r * r;
        double rel = fabs(r) / t[i];
        sq_rel += rel * rel;
        if (rel > out->max_rel) {
            out->max_rel = rel;
            out->max_rel_bytes = bytes[i];
        }
    }
    free(wt);
    out->n = n;
    out->latency_s = c0;
    out->bw_Bps = c1 > 0 ? 1.0 / c1 : HUGE_VAL;
    /* GSL's covariance for given weights is the inverse normal matrix; when
     * the weights are only relative (1 / t^2), scale it by the residual
     * variance so the errors reflect the scatter actually seen. */
    double scale = (!w && n > 2) ? chisq / (n - 2) : 1.0;
    out->latency_se = sqrt(cov00 * scale);
    out->inv_bw_se = sqrt(cov11 * scale);
    out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    out->rms_rel = sqrt(sq_rel / n);
    return CL_OK;
}

/* ------------------------------------------------------------ options -- */

void exec_link_opts_default(exec_link_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = EXEC_LINK_THREADS;
    o->min_bytes = EXEC_LINK_MIN_BYTES;
    o->max_bytes = EXEC_LINK_MAX_BYTES;
    o->min_reps = 10;
    o->seconds_per_size = 0.05;
    o->warmup = 3;
    o->spin_s = exec_spin_default();
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int check_opts(const exec_link_opts *o, cl_err *e)
{
    if (!is_pow2(o->min_bytes) || !is_pow2(o->max_bytes) || o->min_bytes < 8 ||
        o->min_bytes > o->max_bytes ||
        o->max_bytes > ((uint64_t)1 << 30))
        return cl_fail(e, CL_EINPUT, "link sizes %llu .. %llu B: expected powers of two from 8 B to 1 GiB, the first not above the second",
                       (unsigned long long)o->min_bytes, (unsigned long long)o->max_bytes);
    if (o->min_reps < 1 || o->warmup < 0 || !(o->seconds_per_size >= 0) || !isfinite(o->seconds_per_size) ||
        !(o->gap_s >= 0) || !(o->gap_s <= 1))
        return cl_fail(e, CL_EINPUT, "link repetitions: at least one round trip per size, warm-up >= 0, time >= 0, gap 0 to 1 s");
    if ((unsigned)o->backend >= EXEC_LINK_BACKEND_COUNT)
        return cl_fail(e, CL_EINPUT, "link backend %d is unknown", (int)o->backend);
    return CL_OK;
}

/* Median, deviation and minimum of the one-way times v[0..n) (sorted in
 * place), and the median of the send calls' times w[0..n) (sorted too). */
static void summarise(double *v, double *w, int n, double bytes, exec_link_sample *s)
{
    gsl_sort(w, 1, (size_t)n);
    s->send_s = gsl_stats_median_from_sorted_data(w, 1, (size_t)n);
    gsl_sort(v, 1, (size_t)n);
    s->bytes = bytes;
    s->time_s = gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
    s->sd_s = n > 1 ? gsl_stats_sd(v, 1, (size_t)n) : 0;
    s->min_s = v[0];
    s->reps = n;
}

/* Round trips for one size: at least min_reps and until seconds_per_size
 * is spent, capped so the sample array stays small. */
#define MAX_REPS 20000

/* Protocol, per size: every message's first 8 bytes say whether another
 * follows (1) or it is the size's last (0); the echo returns each message
 * as it came.  The pinger times round trips until it has spent
 * seconds_per_size and done min_reps (after warm-up), then flags the last. */
static int64_t more_flag(const void *buf)
{
    int64_t v;
    memcpy(&v, buf, sizeof v);
    return v;
}

static void set_flag(unsigned char *buf, int64_t v) { memcpy(buf, &v, sizeof v); }

/* ------------------------------------------------------------ threads -- */

/* The runtime's own transport (chan.h): each message is a fresh
 * exec_msg the sender fills with a copy of its payload and posts to a
 * bounded channel, waking the receiver; the receiver takes it and reads it
 * (here: copies it into the reply, as a stage copies its output into the
 * message it sends).  Tags carry a running sequence number. */
typedef struct pp_ctx {
    const exec_link_opts *o;
    exec_xport *x;
    int n_sizes;
    uint64_t *sizes;
    int *reps;            /* round trips timed per size                      */
    double *times;        /* worker 0's one-way times, n_sizes x MAX_REPS     */
    double *sends;        /* and its send calls' times, the same layout       */
    int failed;           /* a message never came                             */
} pp_ctx;

/* Wait for the message; NULL when the other worker stopped or nothing came
 * for STALL_S (the run is then abandoned, never left hanging). */
#define STALL_S 10.0
static exec_msg *xrecv(exec_xport *x, int w, int src, uint64_t tag, int64_t bytes)
{
    const exec_xport_ops *X = x->ops;
    double t0 = exec_now();
    for (;;) {
        uint64_t seen = X->events(x, w);
        exec_msg *m = X->take(x, w, src, tag, bytes);
        if (m) return m;
        if (X->aborted(x)) return NULL;
        if (exec_now() - t0 > STALL_S) {
            X->abort(x);
            return NULL;
        }
        X->wait(x, w, seen, 0.05);
    }
}

/* Copy `bytes` of src into a new message and post it from w to dst. */
static void xsend(exec_xport *x, int w, int dst, uint64_t tag, const void *src, int64_t bytes)
{
    exec_msg *m = exec_msg_new(bytes);
    memcpy(exec_msg_data(m), src, (size_t)bytes);
    m->tag = tag;
    m->dst = dst;
    m->bounded = 1;
    while (x->ops->post(x, w, m)) { /* capacity 2: never full in a ping-pong */
        uint64_t seen = x->ops->events(x, w);
        x->ops->wait(x, w, seen, 0.001);
    }
}

/* Echo (worker 1): return every message as it came, in a new message. */
static void echo_loop(pp_ctx *c)
{
    exec_xport *x = c->x;
    int64_t seq = 0;
    for (int s = 0; s < c->n_sizes; s++) {
        int64_t b = (int64_t)c->sizes[s], more = 1;
        while (more) {
            exec_msg *m = xrecv(x, 1, 0, exec_tag(EXEC_TAG_ACT, 0, seq), b);
            if (!m) return;
            more = more_flag(exec_msg_data(m));
            xsend(x, 1, 0, exec_tag(EXEC_TAG_GRAD, 0, seq), exec_msg_data(m), b);
            exec_msg_free(m);
            seq++;
        }
    }
}

/* Compute (read and write buf, as an op would touch its data) for s seconds. */
static void busy_for(double s, unsigned char *buf, int64_t b)
{
    double end = exec_now() + s;
    unsigned char acc = 0;
    do {
        for (int64_t i = 8; i < b && i < 4096; i += 64) acc = (unsigned char)(acc + buf[i]);
        if (b > 8) buf[b - 1] = acc;
    } while (exec_now() < end);
}

/* Pinger (worker 0): time round trips into times[s * MAX_REPS ..]. */
static void ping_loop(pp_ctx *c)
{
    exec_xport *x = c->x;
    const exec_link_opts *o = c->o;
    uint64_t max = c->sizes[c->n_sizes - 1];
    unsigned char *buf = exec_balloc((int64_t)max);
    memset(buf, 1, max);
    int64_t seq = 0;
    for (int s = 0; s < c->n_sizes; s++) {
        int64_t b = (int64_t)c->sizes[s];
        double *tv = c->times + (size_t)s * MAX_REPS, *ts = c->sends + (size_t)s * MAX_REPS;
        int n = 0;
        double end = 0;
        for (int r = -o->warmup;; r++) {
            if (r == 0) end = exec_now() + o->seconds_per_size;
            int last = r >= 0 && (n + 1 >= MAX_REPS || (n + 1 >= o->min_reps && exec_now() >= end));
            set_flag(buf, !last);
            if (o->gap_s > 0) busy_for(o->gap_s, buf, b);
            double t0 = exec_now();
            xsend(x, 0, 1, exec_tag(EXEC_TAG_ACT, 0, seq), buf, b);
            if (r >= 0) ts[n] = exec_now() - t0;
            exec_msg *m = xrecv(x, 0, 1, exec_tag(EXEC_TAG_GRAD, 0, seq), b);
            seq++;
            if (!m) {
                c->failed = 1;
                free(buf);
                return;
            }
            memcpy(buf, exec_msg_data(m), (size_t)b);
            exec_msg_free(m);
            double d = exec_now() - t0;
            if (r >= 0) tv[n++] = d / 2;
            if (last) break;
        }
        c->reps[s] = n;
    }
    free(buf);
}

static int pp_worker(void *ctx, int w)
{
    if (w == 0) ping_loop(ctx);
    else echo_loop(ctx);
    return 0;
}

static int measure_threads(const exec_link_opts *o, uint64_t *sizes, int n_sizes,
                           exec_link_sample *out, cl_err *e)
{
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.sizes = sizes;
    c.n_sizes = n_sizes;
    c.reps = cl_calloc((size_t)n_sizes, sizeof *c.reps);
    c.times = cl_malloc((size_t)n_sizes * MAX_REPS * sizeof *c.times);
    c.sends = cl_malloc((size_t)n_sizes * MAX_REPS * sizeof *c.sends);
    const int cap[4] = {2, 2, 2, 2};
    c.x = exec_xport_threads(2, cap, o->spin_s); /* workers pinned to separate cores */
    c.x->ops->run(c.x, pp_worker, &c);
    c.x->ops->destroy(c.x);
    if (c.failed) {
        free(c.reps);
        free(c.times);
        free(c.sends);
        return cl_fail(e, CL_ERUN, "link profile: a ping-pong message did not come back within %.0f s", STALL_S);
    }
    for (int s = 0; s < n_sizes; s++)
        summarise(c.times + (size_t)s * MAX_REPS, c.sends + (size_t)s * MAX_REPS, c.reps[s],
                  (double)sizes[s], &out[s]);
    free(c.reps);
    free(c.times);
    free(c.sends);
    return CL_OK;
}

/* ---------------------------------------------------------------- MPI -- */

static int mpi_inited_here;

int exec_link_in_mpi_job(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL ||
           getenv("PMI_RANK") != NULL;
}

int exec_link_mpi_init(int *rank, int *size, cl_err *e)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) return cl_fail(e, CL_ERUN, "MPI was already finalised in this process");
    if (!inited) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return cl_fail(e, CL_ERUN, "MPI_Init failed (hint: run under mpirun)");
        mpi_inited_here = 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return CL_OK;
}

void exec_link_mpi_finalize(void)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (mpi_inited_here && inited && !finalized) MPI_Finalize();
    mpi_inited_here = 0;
}

int exec_link_mpirun(int np, const char *sub, int argc, char **argv)
{
    /* an argv array, no shell: the arguments (paths, names) pass as they are */
    char nps[16], self[64];
    snprintf(nps, sizeof nps, "%d", np);
    /* /proc/<pid>/exe of this process stays valid while it waits for mpirun */
    snprintf(self, sizeof self, "/proc/%d/exe", (int)getpid());
    char **av = cl_calloc((size_t)argc + 8, sizeof *av);
    int n = 0;
    av[n++] = "mpirun";
    av[n++] = "-np";
    av[n++] = nps;
    av[n++] = "--oversubscribe";
    if (getuid() == 0) av[n++] = "--allow-run-as-root";
    av[n++] = self;
    av[n++] = (char *)sub;
    for (int i = 1; i < argc; i++) av[n++] = argv[i];
    av[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    int st = cl_spawn_wait(av, NULL);
    free(av);
    if (st == -1 || !WIFEXITED(st)) {
        fprintf(stderr, "cleave: cannot run mpirun (hint: install openmpi-bin, or start the job with mpirun -np %d)\n", np);
        return 1;
    }
    return WEXITSTATUS(st) == 127 ? 1 : WEXITSTATUS(st);
}

static int measure_mpi(const exec_link_opts *o, uint64_t *sizes, int n_sizes,
                       exec_link_sample *out, cl_err *e)
{
    int rank, size;
    int rc = exec_link_mpi_init(&rank, &size, e);
    if (rc) return rc;
    if (size < 2)
        return cl_fail(e, CL_EINPUT, "the MPI link profile needs 2 ranks, this job has %d (hint: mpirun -np 2 cleave profile --links --backend mpi ...)",
                       size);
    uint64_t max = sizes[n_sizes - 1];
    unsigned char *buf = exec_balloc((int64_t)max);
    memset(buf, rank == 0, max);
    double *tv = cl_malloc(MAX_REPS * sizeof *tv), *tw = cl_malloc(MAX_REPS * sizeof *tw);
    double *res = cl_calloc((size_t)n_sizes * 6, sizeof *res);
    const int tag = 77;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int s = 0; s < n_sizes && rank < 2; s++) {
        uint64_t b = sizes[s];
        int cnt = (int)b; /* at most 1 GiB (check_opts) */
        if (rank == 0) {
            int n = 0;
            double end = 0;
            for (int r = -o->warmup;; r++) {
                if (r == 0) end = MPI_Wtime() + o->seconds_per_size;
                int last = r >= 0 && (n + 1 >= MAX_REPS || (n + 1 >= o->min_reps && MPI_Wtime() >= end));
                set_flag(buf, !last);
                double t0 = MPI_Wtime();
                MPI_Send(buf, cnt, MPI_BYTE, 1, tag, MPI_COMM_WORLD);
                if (r >= 0) tw[n] = MPI_Wtime() - t0;
                MPI_Recv(buf, cnt, MPI_BYTE, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double d = MPI_Wtime() - t0;
                if (r >= 0) tv[n++] = d / 2;
                if (last) break;
            }
            exec_link_sample smp;
            summarise(tv, tw, n, (double)b, &smp);
            double *q = res + 6 * s;
            q[0] = smp.bytes, q[1] = smp.time_s, q[2] = smp.sd_s, q[3] = smp.min_s, q[4] = smp.reps;
            q[5] = smp.send_s;
        } else {
            int64_t more = 1;
            while (more) {
                MPI_Recv(buf, cnt, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                more = more_flag(buf);
                MPI_Send(buf, cnt, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
            }
        }
    }
    /* every rank gets rank 0's figures */
    MPI_Bcast(res, n_sizes * 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int s = 0; s < n_sizes; s++) {
        const double *q = res + 6 * s;
        out[s].bytes = q[0];
        out[s].time_s = q[1];
        out[s].sd_s = q[2];
        out[s].min_s = q[3];
        out[s].reps = (int)q[4];
        out[s].send_s = q[5];
    }
    free(res);
    free(tv);
    free(tw);
    free(buf);
    return CL_OK;
}

int exec_link_measure(const exec_link_opts *o, exec_link_sample *samples, int *n, cl_err *e)
{
    *n = 0;
    int rc = check_opts(o, e);
    if (rc) return rc;
    uint64_t sizes[EXEC_LINK_MAX_SIZES];
    int k = 0;
    for (uint64_t b = o->min_bytes; b <= o->max_bytes && k < EXEC_LINK_MAX_SIZES; b *= 2)
        sizes[k++] = b;
    rc = o->backend == EXEC_LINK_MPI ? measure_mpi(o, sizes, k, samples, e)
                                     : measure_threads(o, sizes, k, samples, e);
    if (!rc) *n = k;
    return rc;
}

/* ------------------------------------------------------------ machine -- */

/* Best memcpy rate over a buffer much larger than the caches, counting
 * bytes read plus bytes written. */
static double memcpy_rate(double seconds)
{
    const size_t n = (size_t)128 << 20;
    unsigned char *a = cl_malloc(n), *b = cl_malloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0, end = exec_now() + seconds;
    do {
        double t0 = exec_now();
        memcpy(b, a, n);
        double d = exec_now() - t0;
        if (d > 0 && 2.0 * (double)n / d > best) best = 2.0 * (double)n / d;
        a[0] ^= b[n - 1]; /* keep the copies observable */
    } while (exec_now() < end);
    free(a);
    free(b);
    return best;
}

/* The best SGEMM rate of C (M,N) = A (M,K) B (K,N) over `seconds`. */
static double gemm_rate(int M, int N, int K, double seconds)
{
    exec_blas_init();
    float *a = exec_falloc((int64_t)M * K), *b = exec_falloc((int64_t)K * N),
          *c = exec_falloc((int64_t)M * N);
    for (int64_t i = 0; i < (int64_t)M * K; i++) a[i] = (float)(i % 7) * 0.125f;
    for (int64_t i = 0; i < (int64_t)K * N; i++) b[i] = (float)(i % 5) * 0.25f;
    double flops = 2.0 * M * N * (double)K, best = 0, end = exec_now() + seconds;
    exec_gemm(0, 0, M, N, K, 1, a, K, b, N, 0, c, N);
    do {
        double t0 = exec_now();
        exec_gemm(0, 0, M, N, K, 1, a, K, b, N, 0, c, N);
        double d = exec_now() - t0;
        if (d > 0 && flops / d > best) best = flops / d;
    } while (exec_now() < end);
    free(a);
    free(b);
    free(c);
    return best;
}

void exec_machine_measure(double seconds, exec_machine *mc)
{
    memset(mc, 0, sizeof *mc);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    mc->cores = n > 0 ? (int)n : 1;
    mc->peak_flops = exec_gemm_peak(seconds * 0.5, &mc->peak_n);
    /* a training-sized product: a linear layer of 784 -> 256 features on a
     * microbatch of 64 samples (fmnist-mlp's fc1 forward) */
    double small = gemm_rate(64, 256, 784, seconds * 0.2);
    mc->efficiency = mc->peak_flops > 0 ? fmin(1.0, small / mc->peak_flops) : 1.0;
    snprintf(mc->efficiency_note, sizeof mc->efficiency_note,
             "the SGEMM rate of a 64 x 784 by 784 x 256 product (a batch-64 linear layer) over the peak, %.1f / %.1f GFLOP/s",
             small * 1e-9, mc->peak_flops * 1e-9);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    mc->mem_bytes = pages > 0 && psz > 0 ? (double)pages * (double)psz / mc->cores : 1e9;
    mc->mem_bw_Bps = memcpy_rate(seconds * 0.3);
}

int exec_link_cluster(cluster *c, const exec_machine *mc, const exec_link_fit *fit,
                      exec_link_backend backend, const char *note, cl_err *e)
{
    char cpu[128];
    exec_cpu_name(cpu, sizeof cpu);
    cluster_devtype t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "cpu-core");
    t.peak_fp32_flops = mc->peak_flops;
    t.mem_bytes = (uint64_t)mc->mem_bytes;
    t.mem_bw_Bps = mc->mem_bw_Bps;
    t.efficiency = mc->efficiency > 0 && mc->efficiency <= 1 ? mc->efficiency : 1.0;
    snprintf(t.note, sizeof t.note,
             "Measured by cleave profile --links on one core of %.80s: peak = best single-thread SGEMM (OpenBLAS %.20s, n = %d); efficiency = %.160s; memory = physical memory / %d cores; bandwidth = best 128 MiB memcpy, bytes read + written.",
             cpu, exec_blas_corename(), mc->peak_n, mc->efficiency_note, mc->cores);
    cluster_link intra = {fit->bw_Bps, fit->latency_s > 0 ? fit->latency_s : 0};
    if (!isfinite(intra.bw_Bps) || !(intra.bw_Bps > 0))
        return cl_fail(e, CL_ERUN, "link fit: the time does not grow with the size (slope <= 0); the measurement is too noisy to give a bandwidth (hint: rerun on an idle machine)");
    cluster_link none = {0, 0};
    int rc = cluster_uniform(c, &t, mc->cores, 0, intra, none, e);
    if (rc) return rc;
    snprintf(c->name, sizeof c->name, "this-machine-%s", exec_link_backend_name(backend));
    snprintf(c->node_names[0], CLUSTER_NAME_MAX, "host");
    for (int d = 0; d < c->n_devices; d++) snprintf(c->devices[d].id, CLUSTER_NAME_MAX, "core%d", d);
    snprintf(c->note, sizeof c->note,
             "This machine (%d cores of %.80s) as %d devices, one per core, written by cleave profile --links (%s backend).",
             mc->cores, cpu, mc->cores, exec_link_backend_name(backend));
    snprintf(c->links_note, sizeof c->links_note, "%s", note ? note : "");
    return CL_OK;
}
