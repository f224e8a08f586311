/* trace.c - the Chrome trace writer (trace.h) and the simulator's timeline
 * export (sim_write_trace). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/fileio.h"
#include "sim_int.h"
#include "trace.h"

struct trace_w {
    cl_out out;
    int n;       /* events written so far */
    char *title; /* otherData.title, or NULL */
};

int trace_open(trace_w **t, const char *path, cl_err *e)
{
    *t = NULL;
    trace_w *w = cl_calloc(1, sizeof *w);
    int rc = cl_out_open(&w->out, path, e);
    if (rc) {
        free(w);
        return rc;
    }
    fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", w->out.f);
    *t = w;
    return CL_OK;
}

/* A JSON string literal of s (esc_json). */
static void put_str(FILE *f, const char *s)
{
    char *q = esc_json(s);
    fputs(q, f);
    free(q);
}

/* A time of ns nanoseconds in microseconds with three decimals, printed from
 * the integer so that equal nanoseconds always print equal. */
static void put_us(FILE *f, long long ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%lld.%03lld", ns / 1000, ns % 1000);
}

static void sep(trace_w *t)
{
    if (t->n++) fputs(",\n", t->out.f);
}

void trace_process(trace_w *t, int pid, const char *name, int sort)
{
    FILE *f = t->out.f;
    sep(t);
    fprintf(f, "{\"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"name\": \"process_name\", \"args\": {\"name\": ", pid);
    put_str(f, name);
    fputs("}},\n", f);
    fprintf(f, "{\"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"name\": \"process_sort_index\", "
            "\"args\": {\"sort_index\": %d}}", pid, sort);
}

void trace_thread(trace_w *t, int pid, int tid, const char *name, int sort)
{
    FILE *f = t->out.f;
    sep(t);
    fprintf(f, "{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_name\", \"args\": {\"name\": ",
            pid, tid);
    put_str(f, name);
    fputs("}},\n", f);
    fprintf(f, "{\"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"name\": \"thread_sort_index\", "
            "\"args\": {\"sort_index\": %d}}", pid, tid, sort);
}

void trace_slice(trace_w *t, int pid, int tid, const char *name, const char *cat,
                 double t0_s, double dur_s, const char *args_json)
{
    FILE *f = t->out.f;
    sep(t);
    fputs("{\"ph\": \"X\", \"name\": ", f);
    put_str(f, name);
    fputs(", \"cat\": ", f);
    put_str(f, cat);
    /* Round the end points to the nanosecond, then take the duration between
     * them: rounding start and duration apart made back-to-back slices on one
     * track overlap by 1 ns, which Perfetto does not accept. */
    long long ns0 = llround(t0_s * 1e9), ns1 = llround((t0_s + dur_s) * 1e9);
    if (ns1 < ns0) ns1 = ns0;
    fprintf(f, ", \"pid\": %d, \"tid\": %d, \"ts\": ", pid, tid);
    put_us(f, ns0);
    fputs(", \"dur\": ", f);
    put_us(f, ns1 - ns0);
    if (args_json) fprintf(f, ", \"args\": %s", args_json);
    fputc('}', f);
}

void trace_counter(trace_w *t, int pid, const char *name, double t_s, const char *args_json)
{
    FILE *f = t->out.f;
    sep(t);
    fputs("{\"ph\": \"C\", \"name\": ", f);
    put_str(f, name);
    fprintf(f, ", \"pid\": %d, \"ts\": ", pid);
    put_us(f, llround(t_s * 1e9));
    fprintf(f, ", \"args\": %s}", args_json);
}

void trace_title(trace_w *t, const char *title)
{
    free(t->title);
    t->title = cl_strdup(title);
}

int trace_close(trace_w *t, cl_err *e)
{
    fputs("\n]", t->out.f);
    if (t->title) { /* the Trace Event Format's metadata object */
        fputs(",\n\"otherData\": {\"title\": ", t->out.f);
        put_str(t->out.f, t->title);
        fputc('}', t->out.f);
    }
    fputs("}\n", t->out.f);
    int rc = cl_out_commit(&t->out, e);
    free(t->title);
    free(t);
    return rc;
}

void trace_abort(trace_w *t)
{
    if (!t) return;
    cl_out_abort(&t->out);
    free(t->title);
    free(t);
}

/* ------------------------------------------------ shared layout -- */

static int cmp_link(const void *a, const void *b)
{
    const trace_link_span *x = a, *y = b;
    if (x->track != y->track) return x->track < y->track ? -1 : 1;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) return x->t1 < y->t1 ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

int *trace_link_lanes(trace_link_span *s, int64_t n, int n_tracks)
{
    qsort(s, (size_t)n, sizeof *s, cmp_link);
    int *tid_base = cl_calloc((size_t)n_tracks + 1, sizeof *tid_base);
    double *lane_end = NULL;
    int cap_lane = 0;
    for (int64_t i = 0; i < n;) {
        int c = s[i].track, n_lanes = 0;
        int64_t j = i;
        for (; j < n && s[j].track == c; j++) {
            int l = 0;
            while (l < n_lanes && lane_end[l] > s[j].t0) l++;
            if (l == n_lanes) {
                if (n_lanes == cap_lane) {
                    cap_lane = cap_lane * 2 + 4;
                    lane_end = cl_realloc(lane_end, (size_t)cap_lane * sizeof *lane_end);
                }
                n_lanes++;
            }
            lane_end[l] = s[j].t1;
            s[j].lane = l;
        }
        tid_base[c + 1] = n_lanes; /* counts first, prefix sums below */
        i = j;
    }
    free(lane_end);
    for (int c = 0; c < n_tracks; c++) tid_base[c + 1] += tid_base[c];
    return tid_base;
}

void trace_device_name(char *buf, size_t cap, int dev, const char *id, int n_stages, int stage)
{
    if (n_stages == 1) snprintf(buf, cap, "dev %d %s (stage %d)", dev, id, stage);
    else snprintf(buf, cap, "dev %d %s (%d stages)", dev, id, n_stages);
}

void trace_link_name(char *buf, size_t cap, const char *from, const char *to, int inter,
                     int lane)
{
    int n = snprintf(buf, cap, "%s -> %s (%s)", from, to, inter ? "inter" : "intra");
    if (lane > 0 && n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " #%d", lane + 1);
}

void trace_compute(trace_w *t, int tid, const sched *sc, const sched_op *op, int iter,
                   double t0_s, double dur_s)
{
    char args[256], label[32];
    if (op->wver >= 0)
        snprintf(args, sizeof args, "{\"stage\": %d, \"mb\": %d, \"iter\": %d, \"wver\": %d}",
                 op->stage, op->micro, iter, op->wver);
    else
        snprintf(args, sizeof args, "{\"stage\": %d, \"mb\": %d, \"iter\": %d}", op->stage,
                 op->micro, iter);
    trace_slice(t, TRACE_PID_DEVICES, tid, sched_op_label(sc, op, label, sizeof label), "compute",
                t0_s, dur_s, args);
}

void trace_transfer(trace_w *t, int tid, const char *label, double t0_s, double dur_s,
                    double bytes, int stage, int mb, int iter, int from, int to)
{
    char args[256];
    snprintf(args, sizeof args, "{\"bytes\": %.17g, \"stage\": %d, \"mb\": %d, \"iter\": %d, "
             "\"from\": %d, \"to\": %d}", bytes, stage, mb, iter, from, to);
    trace_slice(t, TRACE_PID_LINKS, tid, label, "link", t0_s, dur_s, args);
}

void trace_memory(trace_w *t, int dev, double t_s, double bytes)
{
    char name[64], args[64];
    snprintf(name, sizeof name, "memory dev %d", dev);
    snprintf(args, sizeof args, "{\"bytes\": %.17g}", bytes);
    trace_counter(t, TRACE_PID_DEVICES, name, t_s, args);
}

/* ------------------------------------------------- simulator timeline -- */

int sim_write_trace(const sim *s, const char *path, cl_err *e)
{
    if (!s->o.record || !s->ran)
        return cl_fail(e, CL_ERUN, "internal: sim_write_trace needs a recorded run");
    const sched *sc = s->sc;
    const cluster *cl = &s->pl->cluster;

    /* link spans: per link in start order, each into the lowest free lane */
    int64_t nl = 0;
    for (int64_t i = 0; i < s->n_spans; i++) nl += s->spans[i].link;
    trace_link_span *ls = cl_malloc((size_t)(nl ? nl : 1) * sizeof *ls);
    for (int64_t i = 0, j = 0; i < s->n_spans; i++) {
        const sim_span *sp = &s->spans[i];
        if (sp->link)
            ls[j++] = (trace_link_span){.track = sp->track, .t0 = sp->t0, .t1 = sp->t1,
                                        .op = sp->op, .ref = sp};
    }
    int *tid_base = trace_link_lanes(ls, nl, s->n_ch);

    trace_w *t;
    int rc = trace_open(&t, path, e);
    if (rc) {
        free(ls);
        free(tid_base);
        return rc;
    }
    char name[256], label[32];
    snprintf(name, sizeof name, "%s on %s, %s, simulated", s->pl->model.name, cl->name,
             sched_kind_name(sc->kind));
    trace_title(t, name);
    trace_process(t, TRACE_PID_DEVICES, "devices", 0);
    for (int w = 0; w < s->n_w; w++) {
        const sim_worker *W = &s->w[w];
        trace_device_name(name, sizeof name, sc->dev[w], cl->devices[sc->dev[w]].id, W->n_local,
                          W->n_local ? W->local[0] : -1);
        trace_thread(t, TRACE_PID_DEVICES, w, name, w);
    }
    if (nl) trace_process(t, TRACE_PID_LINKS, "links", 1);
    for (int c = 0; c < s->n_ch; c++)
        for (int l = 0; l < tid_base[c + 1] - tid_base[c]; l++) {
            const sim_chan *ch = &s->ch[c];
            trace_link_name(name, sizeof name, cl->devices[sc->dev[ch->src]].id,
                            cl->devices[sc->dev[ch->dst]].id, ch->level != CLUSTER_INTRA, l);
            trace_thread(t, TRACE_PID_LINKS, tid_base[c] + l, name, tid_base[c] + l);
        }
    for (int64_t i = 0; i < s->n_spans; i++) {
        const sim_span *sp = &s->spans[i];
        if (sp->link) continue;
        const sched_op *op = &sc->ops[sp->op];
        trace_compute(t, sp->track, sc, op, op->iter, sp->t0, sp->t1 - sp->t0);
    }
    for (int64_t i = 0; i < nl; i++) {
        const sim_span *sp = ls[i].ref;
        const sched_op *op = &sc->ops[sp->op];
        const sim_chan *ch = &s->ch[sp->track];
        trace_transfer(t, tid_base[sp->track] + ls[i].lane, sched_op_label(sc, op, label, sizeof label),
                       sp->t0, sp->t1 - sp->t0, sp->bytes, op->stage, op->micro, op->iter,
                       sc->dev[ch->src], sc->dev[ch->dst]);
    }
    /* memory in use per device, as counters (one track per device) */
    for (int64_t i = 0; i < s->n_mem; i++)
        trace_memory(t, sc->dev[s->mem_samples[i].w], s->mem_samples[i].t, s->mem_samples[i].bytes);
    free(ls);
    free(tid_base);
    return trace_close(t, e);
}
