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

#include "base/measure.h"
#include "exec/run/chan.h"
#include "exec/nn/gemm.h"
#include "linkprof.h"
#include "profile_layers.h"
#include "exec/nn/tensor.h"
#include "base/spawn.h"

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

int exec_link_fit_slopeless(const double *bytes, const double *t, int n, exec_link_fit *out,
                            char *why, size_t cap)
{
    if (isfinite(out->bw_Bps) && out->bw_Bps > 0) return 0;
    int big = 0;
    for (int i = 1; i < n; i++)
        if (bytes[i] > bytes[big]) big = i;
    out->bw_Bps = bytes[big] / t[big];
    snprintf(why, cap, "without a slope (the time did not grow with the size): bytes priced at the "
             "largest message's end-to-end rate, %.3g GB/s", out->bw_Bps * 1e-9);
    return 1;
}

/* ------------------------------------------------------------ explain -- */

/* Weighted (1 / t^2) residual sum of points [lo, hi) against the line fitted
 * to them alone; *ok = 0 when it cannot be fitted. */
static double part_ssres(const double *b, const double *t, int lo, int hi, exec_link_fit *f, int *ok)
{
    cl_err e = {0};
    *ok = exec_link_fit_ls(b + lo, t + lo, NULL, hi - lo, f, &e) == CL_OK;
    double ss = 0;
    for (int i = lo; *ok && i < hi; i++) {
        double r = (t[i] - (f->latency_s + b[i] / f->bw_Bps)) / t[i];
        ss += r * r;
    }
    return ss;
}

#define EXPLAIN_SMALL 65536.0

int exec_link_explain(const exec_link_sample *s, int n, const exec_link_fit *fit, char *buf,
                      size_t cap)
{
    if (cap) buf[0] = 0;
    if (!(fit->r2 < EXEC_LINK_R2_OK) || n < 2 || cap < 2) return 0;
    size_t k = (size_t)snprintf(buf, cap, "unreliable: weighted R^2 %.3f is below %.1f, so time = latency + bytes / bandwidth does not describe this link;",
                                fit->r2, EXEC_LINK_R2_OK);
#define ADD(...) (k += k < cap ? (size_t)snprintf(buf + k, cap - k, __VA_ARGS__) : 0)
    double *b = cl_malloc((size_t)n * sizeof *b), *t = cl_malloc((size_t)n * sizeof *t);
    double *ws = cl_malloc((size_t)n * sizeof *ws), *wk = cl_malloc((size_t)n * sizeof *wk);
    int spin_all = 1, ns = 0, nk = 0;
    double woke = 0;
    for (int i = 0; i < n; i++) {
        b[i] = s[i].bytes;
        woke += s[i].woke / n;
        if (!(s[i].time_spin_s > 0)) spin_all = 0;
        /* the wake-up against the hand-off: small messages, where the copy
         * does not count */
        else if (s[i].bytes <= EXPLAIN_SMALL) ws[ns++] = s[i].time_spin_s;
        if (s[i].time_woke_s > 0 && s[i].bytes <= EXPLAIN_SMALL) wk[nk++] = s[i].time_woke_s;
    }
    if (woke >= 0.02) {
        ADD(" %.0f%% of the round trips woke a receiver that had gone to sleep (its wait outlasted the spin, or other processes took its core and it stopped spinning)",
            100 * woke);
        if (nk > 0 && ns > 0)
            ADD(": one way %.2f us to it against %.2f us to a spinning receiver (medians over the sizes up to 64 KiB)",
                cl_median(wk, nk) * 1e6, cl_median(ws, ns) * 1e6);
        if (spin_all) {
            for (int i = 0; i < n; i++) t[i] = s[i].time_spin_s;
            exec_link_fit f;
            cl_err e = {0};
            if (exec_link_fit_ls(b, t, NULL, n, &f, &e) == CL_OK)
                ADD("; over the round trips to spinning receivers alone: latency %.3g us, %.3g GB/s, R^2 %.3f",
                    f.latency_s * 1e6, f.bw_Bps * 1e-9, f.r2);
        }
        ADD(";");
    }
    /* two lines, split where they fit best: over the round trips to
     * spinning receivers when some woke one (else the wake-ups decide it) */
    int use_spin = woke >= 0.02;
    for (int i = 0; i < n; i++) t[i] = use_spin ? s[i].time_spin_s : s[i].time_s;
    double best = HUGE_VAL, sum_w = 0, mean = 0, ss_tot = 0;
    int split = -1;
    if (!use_spin || spin_all) {
        for (int i = 0; i < n; i++) sum_w += 1 / (t[i] * t[i]), mean += t[i] / (t[i] * t[i]);
        mean /= sum_w;
        for (int i = 0; i < n; i++) ss_tot += (t[i] - mean) * (t[i] - mean) / (t[i] * t[i]);
    }
    exec_link_fit lo, hi;
    for (int m = 2; ss_tot > 0 && m + 2 <= n; m++) {
        exec_link_fit a, c;
        int oka, okc;
        double ss = part_ssres(b, t, 0, m, &a, &oka);
        ss += part_ssres(b, t, m, n, &c, &okc);
        if (oka && okc && ss < best) best = ss, split = m, lo = a, hi = c;
    }
    if (split > 0) {
        long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        char bl[48], bh[48];
        if (isfinite(lo.bw_Bps)) snprintf(bl, sizeof bl, " + bytes / %.3g GB/s", lo.bw_Bps * 1e-9);
        else snprintf(bl, sizeof bl, " (no per-byte cost)");
        if (isfinite(hi.bw_Bps)) snprintf(bh, sizeof bh, " + bytes / %.3g GB/s", hi.bw_Bps * 1e-9);
        else snprintf(bh, sizeof bh, " (no per-byte cost)");
        ADD(" %stwo lines fit with R^2 %.3f: up to %.0f B %.3g us%s, from %.0f B %.3g us%s",
            use_spin ? "to spinning receivers, " : "", 1 - best / ss_tot, b[split - 1],
            lo.latency_s * 1e6, bl, b[split], hi.latency_s * 1e6, bh);
        if (l2 > 0 && b[split] >= l2 / 2.0 && b[split] <= 2.0 * l2)
            ADD(" (the core's L2 cache holds %ld KiB: larger messages are copied to and from the shared cache or memory)",
                l2 / 1024);
        ADD(".");
    }
#undef ADD
    free(b);
    free(t);
    free(ws);
    free(wk);
    return 1;
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

static double median_of(double *v, int n)
{
    if (n <= 0) return 0;
    gsl_sort(v, 1, (size_t)n);
    return gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
}

/* Median, deviation and minimum of the one-way times v[0..n) (sorted in
 * place), and the median of the send calls' times w[0..n) (sorted too).
 * woke (NULL: none): per round trip, whether a receiver was woken from
 * sleep; the one-way times of both kinds get their own medians, and the
 * expected costs of a message weigh each kind's medians by its share. */
static void summarise(double *v, double *w, const unsigned char *woke, const double *hand,
                      const unsigned char *ewoke, int n, double bytes, exec_link_sample *s)
{
    s->handoff_s = 0;
    if (hand && ewoke && n > 0) { /* the forward direction, by the echo's wait */
        double *a = cl_malloc((size_t)n * sizeof *a), *b = cl_malloc((size_t)n * sizeof *b);
        double *as = cl_malloc((size_t)n * sizeof *as), *bs = cl_malloc((size_t)n * sizeof *bs);
        int na = 0, nb = 0;
        for (int i = 0; i < n; i++) {
            if (ewoke[i]) bs[nb] = w[i], b[nb++] = hand[i];
            else as[na] = w[i], a[na++] = hand[i];
        }
        double p = (double)nb / n;
        s->handoff_s = (1 - p) * median_of(a, na) + p * median_of(b, nb);
        s->send_exp_s = (1 - p) * median_of(as, na) + p * median_of(bs, nb);
        free(a);
        free(b);
        free(as);
        free(bs);
    }
    s->woke = s->time_spin_s = s->time_woke_s = 0;
    s->time_mean_s = 0;
    int split = 0;
    if (woke && n > 0) {
        double *a = cl_malloc((size_t)n * sizeof *a), *b = cl_malloc((size_t)n * sizeof *b);
        int na = 0, nb = 0;
        for (int i = 0; i < n; i++) {
            if (woke[i]) b[nb++] = v[i];
            else a[na++] = v[i];
        }
        double p = (double)nb / n;
        s->woke = p;
        s->time_spin_s = median_of(a, na);
        s->time_woke_s = median_of(b, nb);
        s->time_mean_s = (1 - p) * s->time_spin_s + p * s->time_woke_s;
        split = 1;
        free(a);
        free(b);
    }
    gsl_sort(w, 1, (size_t)n);
    s->send_s = gsl_stats_median_from_sorted_data(w, 1, (size_t)n);
    gsl_sort(v, 1, (size_t)n);
    s->bytes = bytes;
    s->time_s = gsl_stats_median_from_sorted_data(v, 1, (size_t)n);
    s->sd_s = n > 1 ? gsl_stats_sd(v, 1, (size_t)n) : 0;
    s->min_s = v[0];
    s->reps = n;
    if (!split) s->time_mean_s = s->time_s;
    if (!(hand && ewoke)) { /* no one-way clock: half a round trip less the send */
        s->send_exp_s = s->send_s;
        s->handoff_s = s->time_s > s->send_s ? s->time_s - s->send_s : 0;
    }
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
    unsigned char *woke;  /* and whether a receiver slept, the same layout    */
    unsigned char *echo_slept; /* per message (seq): the echo's wait slept    */
    double *echo_hand;    /* per message (seq): post to the echo holding it  */
    double *hand;         /* worker 0's timed messages: echo_hand, and      */
    unsigned char *ewoke; /* echo_slept, n_sizes x MAX_REPS                   */
    int failed;           /* a message never came                             */
} pp_ctx;

static void pp_free(pp_ctx *c)
{
    free(c->reps);
    free(c->times);
    free(c->sends);
    free(c->woke);
    free(c->echo_slept);
    free(c->echo_hand);
    free(c->hand);
    free(c->ewoke);
}

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
    m->t_post = exec_now(); /* both threads read one clock: the hand-off is exact */
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
            uint64_t z0 = x->ops->sleeps ? x->ops->sleeps(x, 1) : 0;
            exec_msg *m = xrecv(x, 1, 0, exec_tag(EXEC_TAG_ACT, 0, seq), b);
            if (!m) return;
            /* read by the pinger after it takes the reply (the channel's
             * mutex orders the two) */
            c->echo_slept[seq] = (x->ops->sleeps ? x->ops->sleeps(x, 1) : 0) != z0;
            c->echo_hand[seq] = exec_now() - m->t_post;
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
        unsigned char *tw = c->woke + (size_t)s * MAX_REPS, *te = c->ewoke + (size_t)s * MAX_REPS;
        double *th = c->hand + (size_t)s * MAX_REPS;
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
            uint64_t z0 = x->ops->sleeps ? x->ops->sleeps(x, 0) : 0;
            exec_msg *m = xrecv(x, 0, 1, exec_tag(EXEC_TAG_GRAD, 0, seq), b);
            if (m && r >= 0) {
                tw[n] = c->echo_slept[seq] || (x->ops->sleeps ? x->ops->sleeps(x, 0) : 0) != z0;
                te[n] = c->echo_slept[seq];
                th[n] = c->echo_hand[seq];
            }
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
    c.woke = cl_calloc((size_t)n_sizes * MAX_REPS, 1);
    c.echo_slept = cl_calloc((size_t)n_sizes * (MAX_REPS + (size_t)o->warmup + 1), 1);
    c.echo_hand = cl_calloc((size_t)n_sizes * (MAX_REPS + (size_t)o->warmup + 1), sizeof *c.echo_hand);
    c.hand = cl_calloc((size_t)n_sizes * MAX_REPS, sizeof *c.hand);
    c.ewoke = cl_calloc((size_t)n_sizes * MAX_REPS, 1);
    const int cap[4] = {2, 2, 2, 2};
    c.x = exec_xport_threads(2, cap, o->spin_s); /* workers pinned to separate cores */
    c.x->ops->run(c.x, pp_worker, &c);
    c.x->ops->destroy(c.x);
    if (c.failed) {
        pp_free(&c);
        return cl_fail(e, CL_ERUN, "link profile: a ping-pong message did not come back within %.0f s", STALL_S);
    }
    for (int s = 0; s < n_sizes; s++)
        summarise(c.times + (size_t)s * MAX_REPS, c.sends + (size_t)s * MAX_REPS,
                  c.woke + (size_t)s * MAX_REPS, c.hand + (size_t)s * MAX_REPS,
                  c.ewoke + (size_t)s * MAX_REPS, c.reps[s], (double)sizes[s], &out[s]);
    pp_free(&c);
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

int exec_link_mpirun_wait(int np, const char *sub, int argc, char **argv, const char *out_path,
                          const char *err_path)
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
    int st = cl_spawn_wait_err(av, out_path, err_path);
    free(av);
    return st;
}

int exec_link_mpirun(int np, const char *sub, int argc, char **argv)
{
    int st = exec_link_mpirun_wait(np, sub, argc, argv, NULL, NULL);
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
            summarise(tv, tw, NULL, NULL, NULL, n, (double)b, &smp);
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
        out[s].woke = out[s].time_spin_s = out[s].time_woke_s = 0; /* MPI polls, never sleeps */
        out[s].time_mean_s = q[1]; /* no wake-ups: the medians */
        out[s].send_exp_s = q[5];
        out[s].handoff_s = q[1] > q[5] ? q[1] - q[5] : 0; /* no one-way clock */
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
