/* pipe_trace.c - the measured timeline of a pipelined run as a Chrome trace,
 * in the simulator's layout and names (sim/trace.h): one track per worker
 * with its F/B/W/U ops, one track per directed link and lane with the
 * transfers (SEND post to RECV completion) and all-reduce steps, and one
 * memory counter per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/trace.h"
#include "pipe_int.h"

typedef struct lspan {
    const pspan *s;
    int ch, lane;
} lspan;

static int cmp_lspan(const void *a, const void *b)
{
    const lspan *x = a, *y = b;
    if (x->ch != y->ch) return x->ch < y->ch ? -1 : 1;
    if (x->s->t0 != y->s->t0) return x->s->t0 < y->s->t0 ? -1 : 1;
    if (x->s->t1 != y->s->t1) return x->s->t1 < y->s->t1 ? -1 : 1;
    return (x->s->op > y->s->op) - (x->s->op < y->s->op);
}

int pipe_write_trace(const prun *R, const char *path, cl_err *e)
{
    const sched *sc = &R->sc;
    const cluster *cl = &R->p->cluster;
    int n = R->n_w;
    pblob *bl = cl_calloc((size_t)n, sizeof *bl);
    int64_t nl = 0;
    for (int w = 0; w < n; w++) {
        pipe_blob_parse(R, R->blobs[w], R->blob_len[w], &bl[w]);
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++)
            nl += bl[w].spans[i].kind == PSPAN_LINK || bl[w].spans[i].kind == PSPAN_AR;
    }
    /* link spans: per directed pair in start order, each in the lowest free lane */
    lspan *ls = cl_malloc((size_t)(nl ? nl : 1) * sizeof *ls);
    for (int w = 0, j = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++) {
            const pspan *s = &bl[w].spans[i];
            if (s->kind != PSPAN_LINK && s->kind != PSPAN_AR) continue;
            ls[j].s = s;
            ls[j].ch = s->src * n + s->dst;
            j++;
        }
    qsort(ls, (size_t)nl, sizeof *ls, cmp_lspan);
    int *lanes = cl_calloc((size_t)n * (size_t)n, sizeof *lanes);
    double *lane_end = NULL;
    int cap_lane = 0;
    for (int64_t i = 0; i < nl;) {
        int c = ls[i].ch, n_lanes = 0;
        int64_t j = i;
        for (; j < nl && ls[j].ch == c; j++) {
            int l = 0;
            while (l < n_lanes && lane_end[l] > ls[j].s->t0) l++;
            if (l == n_lanes) {
                if (n_lanes == cap_lane) {
                    cap_lane = cap_lane * 2 + 4;
                    lane_end = cl_realloc(lane_end, (size_t)cap_lane * sizeof *lane_end);
                }
                n_lanes++;
            }
            lane_end[l] = ls[j].s->t1;
            ls[j].lane = l;
        }
        lanes[c] = n_lanes;
        i = j;
    }
    free(lane_end);
    int *tid_base = cl_calloc((size_t)n * (size_t)n + 1, sizeof *tid_base);
    for (int c = 0; c < n * n; c++) tid_base[c + 1] = tid_base[c] + lanes[c];

    trace_w *t;
    int rc = trace_open(&t, path, e);
    if (rc) {
        free(ls);
        free(lanes);
        free(tid_base);
        free(bl);
        return rc;
    }
    char name[256], args[256], label[32];
    trace_process(t, TRACE_PID_DEVICES, "devices", 0);
    for (int w = 0; w < n; w++) {
        int d = sc->dev[w];
        int ns = sc->kind == SCHED_SEQUENTIAL ? R->S : R->v;
        if (ns == 1)
            snprintf(name, sizeof name, "dev %d %s (stage %d)", d, cl->devices[d].id, R->w_pos[w]);
        else
            snprintf(name, sizeof name, "dev %d %s (%d stages)", d, cl->devices[d].id, ns);
        trace_thread(t, TRACE_PID_DEVICES, w, name, w);
    }
    if (nl) trace_process(t, TRACE_PID_LINKS, "links", 1);
    for (int c = 0; c < n * n; c++)
        for (int l = 0; l < lanes[c]; l++) {
            int a = sc->dev[c / n], b = sc->dev[c % n];
            int k = snprintf(name, sizeof name, "%s -> %s (%s)", cl->devices[a].id,
                             cl->devices[b].id,
                             cl->devices[a].node == cl->devices[b].node ? "intra" : "inter");
            if (l) snprintf(name + k, sizeof name - (size_t)k, " #%d", l + 1);
            trace_thread(t, TRACE_PID_LINKS, tid_base[c] + l, name, tid_base[c] + l);
        }
    for (int w = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++) {
            const pspan *s = &bl[w].spans[i];
            if (s->kind != PSPAN_COMPUTE) continue;
            const sched_op *op = &sc->ops[s->op];
            if (op->wver >= 0)
                snprintf(args, sizeof args, "{\"stage\": %d, \"mb\": %d, \"iter\": %d, \"wver\": %d}",
                         op->stage, op->micro, s->iter, op->wver);
            else
                snprintf(args, sizeof args, "{\"stage\": %d, \"mb\": %d, \"iter\": %d}", op->stage,
                         op->micro, s->iter);
            trace_slice(t, TRACE_PID_DEVICES, w, sched_op_label(sc, op, label, sizeof label),
                        "compute", s->t0, s->t1 - s->t0, args);
        }
    for (int64_t i = 0; i < nl; i++) {
        const pspan *s = ls[i].s;
        int from = sc->dev[s->src], to = sc->dev[s->dst];
        if (s->kind == PSPAN_LINK) {
            /* named from the sender's side, as the simulator names it: its
             * stage and chunk */
            sched_op snd = sc->ops[s->op];
            int st = sched_peer_stage(&snd);
            snd.kind = SCHED_SEND;
            snd.stage = st;
            snd.chunk = (uint16_t)(sc->chunks > 1 ? st / R->P : 0);
            snprintf(args, sizeof args, "{\"bytes\": %.17g, \"stage\": %d, \"mb\": %d, \"iter\": %d, \"from\": %d, \"to\": %d}",
                     s->bytes, st, snd.micro, s->iter, from, to);
            sched_op_label(sc, &snd, label, sizeof label);
        } else {
            snprintf(args, sizeof args, "{\"bytes\": %.17g, \"stage\": %d, \"mb\": -1, \"iter\": -1, \"from\": %d, \"to\": %d}",
                     s->bytes, (int)s->op, from, to);
            snprintf(label, sizeof label, "AR");
        }
        trace_slice(t, TRACE_PID_LINKS, tid_base[ls[i].ch] + ls[i].lane, label, "link", s->t0,
                    s->t1 - s->t0, args);
    }
    for (int w = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++) {
            const pspan *s = &bl[w].spans[i];
            if (s->kind != PSPAN_MEM) continue;
            snprintf(name, sizeof name, "memory dev %d", sc->dev[w]);
            snprintf(args, sizeof args, "{\"bytes\": %.17g}", s->bytes);
            trace_counter(t, TRACE_PID_DEVICES, name, s->t0, args);
        }
    free(ls);
    free(lanes);
    free(tid_base);
    free(bl);
    return trace_close(t, e);
}
