/* trace.h - Chrome trace JSON (the "Trace Event Format"), as written by the
 * simulator and the executor so that predicted and measured timelines open
 * side by side in Perfetto or chrome://tracing (docs/formats.md, "Trace").
 *
 * Layout both writers follow:
 *   pid TRACE_PID_DEVICES ("devices"): one thread per worker, its compute
 *       stream; complete events ("ph": "X") named by sched_op_label (F3,
 *       F3.1, B3, W3, U) with args {stage, mb, iter};
 *   pid TRACE_PID_LINKS ("links"): one thread per directed link and lane
 *       (overlapping transfers on one link go to extra lanes), events A3 /
 *       G3 (activation / gradient of microbatch 3) and AR (all-reduce step)
 *       with args {bytes, from, to};
 *   counters "memory dev D" ("ph": "C", pid TRACE_PID_DEVICES) with
 *       args {bytes}: the device's memory in use after each change.
 * Times are microseconds printed with 3 decimals (nanoseconds), so the same
 * timeline always gives the same bytes.
 *
 * The writer is an opaque handle; output goes through cl_out (atomic): the
 * file appears complete at trace_close or not at all.
 */
#ifndef CL_SIM_TRACE_H
#define CL_SIM_TRACE_H

#include "base/status.h"
#include "core/schedule.h"

enum { TRACE_PID_DEVICES = 1, TRACE_PID_LINKS = 2 };

typedef struct trace_w trace_w;

/* Start writing path ("-" for stdout).  *t is NULL on failure. */
int trace_open(trace_w **t, const char *path, cl_err *e);
/* What the trace shows, one line ("vgg16 on v100-8-pcie, 1f1b, simulated"):
 * written as otherData.title, the default title of `cleave plot`. */
void trace_title(trace_w *t, const char *title);
/* Metadata: names and display order of a process and of a thread. */
void trace_process(trace_w *t, int pid, const char *name, int sort);
void trace_thread(trace_w *t, int pid, int tid, const char *name, int sort);
/* One complete event from t0_s lasting dur_s (seconds); args_json is NULL or
 * the text of a JSON object ("{\"stage\":1}"), copied verbatim. */
void trace_slice(trace_w *t, int pid, int tid, const char *name, const char *cat,
                 double t0_s, double dur_s, const char *args_json);
/* A counter sample ("ph": "C") at t_s: args_json holds the values, e.g.
 * "{\"bytes\": 1024}" for the memory tracks ("memory dev 3"). */
void trace_counter(trace_w *t, int pid, const char *name, double t_s, const char *args_json);
/* Link spans laid out for the links process: Perfetto draws one slice at a
 * time per thread, so transfers that overlap on one link go to lanes side by
 * side, each into the lowest lane free at its start. */
typedef struct trace_link_span {
    int track;              /* the link, 0 <= track < n_tracks            */
    double t0, t1;          /* seconds                                    */
    int64_t op;             /* tie-break for equal times (the op index)   */
    const void *ref;        /* the caller's span                          */
    int lane;               /* out                                        */
} trace_link_span;
/* Sort s[0..n) by (track, t0, t1, op) and fill their lanes.  Returns
 * tid_base (n_tracks + 1 entries; the caller frees it): track c's lanes are
 * threads tid_base[c] .. tid_base[c + 1] - 1 of TRACE_PID_LINKS. */
int *trace_link_lanes(trace_link_span *s, int64_t n, int n_tracks);
/* Thread names both writers use: "dev 3 node0.3 (stage 1)" (or "(2
 * stages)" for a device holding several), and "node0.0 -> node0.1 (intra)"
 * with " #2", " #3" for a link's lanes after the first. */
void trace_device_name(char *buf, size_t cap, int dev, const char *id, int n_stages, int stage);
void trace_link_name(char *buf, size_t cap, const char *from, const char *to, int inter,
                     int lane);
/* The events both writers emit, so that their args read alike:
 * op's compute slice on thread tid of TRACE_PID_DEVICES, named by
 * sched_op_label, args {stage, mb, iter} (+ wver when op has one); iter is
 * the iteration it ran in. */
void trace_compute(trace_w *t, int tid, const sched *sc, const sched_op *op, int iter,
                   double t0_s, double dur_s);
/* A transfer named `label` on thread tid of TRACE_PID_LINKS, args {bytes,
 * stage, mb, iter, from, to} (from, to: devices; -1 for mb and iter of an
 * all-reduce step where the writer has no microbatch). */
void trace_transfer(trace_w *t, int tid, const char *label, double t0_s, double dur_s,
                    double bytes, int stage, int mb, int iter, int from, int to);
/* Device dev's memory in use from t_s on: counter "memory dev D", args {bytes}. */
void trace_memory(trace_w *t, int dev, double t_s, double bytes);
/* Finish and commit the file; frees t.  trace_abort drops it instead. */
int trace_close(trace_w *t, cl_err *e);
void trace_abort(trace_w *t);

#endif
