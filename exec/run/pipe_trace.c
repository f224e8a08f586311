/* pipe_trace.c - the measured timeline of a pipelined run as a Chrome trace,
 * in the simulator's layout and names (sim/trace.h): one track per worker
 * with its F/B/W/U ops, one track per directed link and lane with the
 * transfers (SEND post to RECV completion) and all-reduce steps, and one
 * memory counter per device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/trace.h"
#include "pipe_run.h"
#include "pipe_trace.h"

int pipe_write_trace(const pipe_run *R, const char *path, cl_err *e)
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
    trace_link_span *ls = cl_malloc((size_t)(nl ? nl : 1) * sizeof *ls);
    for (int w = 0, j = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++) {
            const pspan *s = &bl[w].spans[i];
            if (s->kind != PSPAN_LINK && s->kind != PSPAN_AR) continue;
            ls[j++] = (trace_link_span){.track = s->src * n + s->dst, .t0 = s->t0, .t1 = s->t1,
                                        .op = s->op, .ref = s};
        }
    int *tid_base = trace_link_lanes(ls, nl, n * n);

    trace_w *t;
    int rc = trace_open(&t, path, e);
    if (rc) {
        free(ls);
        free(tid_base);
        free(bl);
        return rc;
    }
    char name[256], label[32];
    snprintf(name, sizeof name, "%s on %s, %s, measured (%s)", R->p->model.name, cl->name,
             sched_kind_name(sc->kind), R->x->rank >= 0 ? "mpi" : "threads");
    trace_title(t, name);
    trace_process(t, TRACE_PID_DEVICES, "devices", 0);
    for (int w = 0; w < n; w++) {
        int d = sc->dev[w];
        int ns = sc->kind == SCHED_SEQUENTIAL ? R->S : R->v;
        trace_device_name(name, sizeof name, d, cl->devices[d].id, ns, R->w_pos[w]);
        trace_thread(t, TRACE_PID_DEVICES, w, name, w);
    }
    if (nl) trace_process(t, TRACE_PID_LINKS, "links", 1);
    for (int c = 0; c < n * n; c++)
        for (int l = 0; l < tid_base[c + 1] - tid_base[c]; l++) {
            int a = sc->dev[c / n], b = sc->dev[c % n];
            trace_link_name(name, sizeof name, cl->devices[a].id, cl->devices[b].id,
                            cl->devices[a].node != cl->devices[b].node, l);
            trace_thread(t, TRACE_PID_LINKS, tid_base[c] + l, name, tid_base[c] + l);
        }
    for (int w = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++) {
            const pspan *s = &bl[w].spans[i];
            if (s->kind == PSPAN_COMPUTE)
                trace_compute(t, w, sc, &sc->ops[s->op], s->iter, s->t0, s->t1 - s->t0);
        }
    for (int64_t i = 0; i < nl; i++) {
        const pspan *s = ls[i].ref;
        int from = sc->dev[s->src], to = sc->dev[s->dst], tid = tid_base[ls[i].track] + ls[i].lane;
        if (s->kind == PSPAN_LINK) {
            /* named from the sender's side, as the simulator names it: its
             * stage and chunk */
            sched_op snd = sc->ops[s->op];
            int st = sched_peer_stage(&snd);
            snd.kind = SCHED_SEND;
            snd.stage = st;
            snd.chunk = (uint16_t)(sc->chunks > 1 ? st / R->P : 0);
            trace_transfer(t, tid, sched_op_label(sc, &snd, label, sizeof label), s->t0, s->t1 - s->t0,
                           s->bytes, st, snd.micro, s->iter, from, to);
        } else {
            trace_transfer(t, tid, "AR", s->t0, s->t1 - s->t0, s->bytes, (int)s->op, -1, -1, from, to);
        }
    }
    for (int w = 0; w < n; w++)
        for (int64_t i = 0; i < bl[w].rep->n_spans; i++)
            if (bl[w].spans[i].kind == PSPAN_MEM)
                trace_memory(t, sc->dev[w], bl[w].spans[i].t0, bl[w].spans[i].bytes);
    free(ls);
    free(tid_base);
    free(bl);
    return trace_close(t, e);
}
