/* sched_memory.c - how many microbatches' stashed activations and weight
 * versions a stage of a built-in schedule holds at once (the closed forms
 * of core/schedule.h, sched_inflight* and sched_versions*): the planner's
 * memory model and the simulator's measured peaks both rest on them (test
 * sim_closed).  The schedules themselves are built in schedule.c.
 */
#include <assert.h>

#include "schedule.h"

static int imin(int a, int b) { return a < b ? a : b; }

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

int sched_inflight_rep(sched_kind kind, int devices, int depth, int r, int m, int v)
{
    assert(devices >= 1 && depth >= r && depth <= devices && r >= 1 && m >= 1 && v >= 1);
    int mq = ceil_div(m, r);               /* microbatches of replica 0 */
    int ld = ceil_div(depth, r);           /* its share of the depth    */
    switch (kind) {
    case SCHED_SEQUENTIAL: return 1;
    case SCHED_GPIPE: return mq;
    case SCHED_1F1B: return imin(ld, mq);
    case SCHED_PIPEDREAM:
    case SCHED_FBP: return ld; /* a stream without flushes: m does not bound it */
    case SCHED_ZBH1: return imin(ld + ceil_div(devices - depth, r), mq);
    case SCHED_INTERLEAVED: {
        if (v == 1) return imin(ld, mq);
        int p = devices, s = devices - depth; /* unreplicated: positions */
        return ceil_div(imin(2 * (p - s - 1) + (v - 1) * p + 1, m * v), r);
    }
    case SCHED_COUNT: break;
    }
    assert(0);
    return 0;
}

void sched_inflight_depths(sched_kind kind, int devices, int r, int m, int v, int dmax, int *in, int *ver)
{
    assert(r >= 1 && m >= 1 && v >= 1 && devices >= 0);
    int mq = ceil_div(m, r);
    if (kind == SCHED_INTERLEAVED && v > 1) {
        for (int depth = r; depth <= dmax; depth++) {
            in[depth] = sched_inflight_rep(kind, devices > depth ? devices : depth, depth, r, m, v);
            ver[depth] = 1;
        }
        return;
    }
    /* Stepped, with no division per depth: ld = ceil(depth / r) grows by
     * one after each depth that is a multiple of r (kd counts up to it);
     * below a fixed pipeline (zb-h1), lf = ceil((devices - depth) / r)
     * falls by one after each depth where devices - depth is one more
     * than a multiple of r (kf counts down to it), and is 0 from depth =
     * devices on.  One loop per kind (the kind does not change along it). */
    int ld = 1, kd = r - 1;
    int lf = devices > r ? ceil_div(devices - r, r) : 0, kf = devices > r ? (devices - r - 1) % r : 0;
    switch (kind) {
    case SCHED_SEQUENTIAL:
    case SCHED_GPIPE:
        for (int depth = r; depth <= dmax; depth++) in[depth] = kind == SCHED_GPIPE ? mq : 1, ver[depth] = 1;
        return;
    case SCHED_ZBH1:
        for (int depth = r; depth <= dmax; depth++) {
            in[depth] = imin(ld + lf, mq);
            ver[depth] = 1;
            if (++kd == r) ld++, kd = 0;
            if (lf > 0 && kf-- == 0) lf--, kf = r - 1;
        }
        return;
    case SCHED_PIPEDREAM:
    case SCHED_FBP: {
        int vers = kind == SCHED_PIPEDREAM;
        for (int depth = r; depth <= dmax; depth++) {
            in[depth] = ld;
            ver[depth] = vers ? ld : 1;
            if (++kd == r) ld++, kd = 0;
        }
        return;
    }
    case SCHED_1F1B:
    case SCHED_INTERLEAVED: /* (one chunk here) */
        for (int depth = r; depth <= dmax; depth++) {
            in[depth] = imin(ld, mq);
            ver[depth] = 1;
            if (++kd == r) ld++, kd = 0;
        }
        return;
    default: assert(0); return;
    }
}

int sched_inflight(sched_kind kind, int p, int s, int m, int v)
{
    assert(p >= 1 && s >= 0 && s < p);
    return sched_inflight_rep(kind, p, p - s, 1, m, v);
}

int sched_versions_rep(sched_kind kind, int depth, int r)
{
    assert(depth >= r && r >= 1);
    return kind == SCHED_PIPEDREAM ? ceil_div(depth, r) : 1;
}

int sched_versions(sched_kind kind, int p, int s, int m)
{
    assert(p >= 1 && s >= 0 && s < p && m >= 1);
    return sched_versions_rep(kind, p - s, 1);
}
