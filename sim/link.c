/* link.c - channels between devices and the transfers on them (see sim.h
 * for the model, docs/simulator.md "Resources and timing").
 *
 * A channel is one stream of transfers from one device to another: the
 * pipeline's activations and gradients (stream 0), or one stage's
 * all-reduce (stream 1 + stage).  It sends one transfer at a time, in the
 * order they were posted: a transfer of b bytes starts when it is posted or
 * when the one before it on the channel has sent its last byte, whichever
 * is later, takes b / bw, and arrives `latency` after its last byte.  One
 * event per transfer.
 *
 * Why in order and not shared: with processor sharing, a transfer posted
 * earlier (because something upstream got faster) slows the ones already
 * on the link, and a faster link could make an iteration slower (issue
 * 15).  A stream's transfers are posted in an order that does not depend
 * on timing (a device's op list; a ring member's steps, sim/ring.c), so
 * every time in a run is a max-plus expression of the durations, and
 * faster links or lower latencies never delay anything.
 *
 * Several streams on one device pair, and cross-node streams through one
 * network card (clusters with nics_per_node), split its bandwidth evenly
 * and for the whole run (sim_links_setup): dynamic sharing would bring the
 * anomaly back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static int64_t chan_key(const sim *s, int src, int dst, int stream)
{
    return ((int64_t)src * s->n_w + dst) * (s->S + 1) + stream;
}

static int64_t chan_slot(int64_t key, int64_t cap)
{
    return (int64_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
}

int sim_link_lookup(sim *s, int src, int dst, int stream)
{
    int64_t key = chan_key(s, src, dst, stream);
    if (2 * (int64_t)(s->n_ch + 1) > s->ch_hcap) {
        int64_t cap = s->ch_hcap ? s->ch_hcap * 2 : 64;
        int64_t *keys = cl_malloc((size_t)cap * sizeof *keys);
        int32_t *vals = cl_malloc((size_t)cap * sizeof *vals);
        for (int64_t i = 0; i < cap; i++) keys[i] = -1;
        for (int64_t i = 0; i < s->ch_hcap; i++) {
            if (s->ch_hash[i] < 0) continue;
            int64_t h = chan_slot(s->ch_hash[i], cap);
            while (keys[h] >= 0) h = (h + 1) & (cap - 1);
            keys[h] = s->ch_hash[i];
            vals[h] = s->ch_hval[i];
        }
        free(s->ch_hash);
        free(s->ch_hval);
        s->ch_hash = keys;
        s->ch_hval = vals;
        s->ch_hcap = cap;
    }
    int64_t h = chan_slot(key, s->ch_hcap);
    while (s->ch_hash[h] >= 0) {
        if (s->ch_hash[h] == key) return s->ch_hval[h];
        h = (h + 1) & (s->ch_hcap - 1);
    }
    if (s->n_ch == s->cap_ch) { /* grown by hand: it is 64-byte aligned */
        int cap = s->cap_ch * 2 + 16;
        sim_chan *grown = aligned_alloc(64, (size_t)cap * sizeof *grown);
        if (!grown) abort();
        if (s->n_ch) memcpy(grown, s->ch, (size_t)s->n_ch * sizeof *grown);
        free(s->ch);
        s->ch = grown;
        s->cap_ch = cap;
    }
    int c = s->n_ch++;
    sim_chan *ch = &s->ch[c];
    memset(ch, 0, sizeof *ch);
    ch->src = src;
    ch->dst = dst;
    ch->stream = stream;
    const cluster *cl = &s->pl->cluster;
    int a = s->sc->dev[src], b = s->sc->dev[dst];
    ch->level = cl->devices[a].node == cl->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER;
    const cluster_link *l = cluster_link_between(cl, a, b);
    ch->bw = l->bw_Bps;
    ch->lat = l->latency_s;
    if (!(ch->bw > 0) || !isfinite(ch->bw) || !(ch->lat >= 0) || !isfinite(ch->lat)) {
        /* a cluster without that link level: stop with an input error */
        if (!s->err.code)
            cl_fail(&s->err, CL_EINPUT, "cluster: the %s-node link between devices %d and %d has "
                    "bandwidth %g B/s, latency %g s (hint: give the cluster that link level)",
                    ch->level == CLUSTER_INTRA ? "intra" : "inter", a, b, ch->bw, ch->lat);
        if (s->k) ev_stop(s->k);
        ch->bw = 1;
        ch->lat = 0;
    }
    s->ch_hash[h] = key;
    s->ch_hval[h] = c;
    return c;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Count, for each channel, the channels with the same value of key[]
 * (sorted copy, binary search), and divide its bandwidth by the count. */
static void split_by(sim *s, const int64_t *key, double bw_of_group)
{
    int n = s->n_ch;
    int64_t *sorted = cl_malloc((size_t)(n ? n : 1) * sizeof *sorted);
    int m = 0;
    for (int c = 0; c < n; c++)
        if (key[c] >= 0) sorted[m++] = key[c];
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_i64);
    for (int c = 0; c < n; c++) {
        if (key[c] < 0) continue;
        int lo = 0, hi = m; /* first >= key */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (sorted[mid] < key[c]) lo = mid + 1; else hi = mid;
        }
        int cnt = 0;
        while (lo + cnt < m && sorted[lo + cnt] == key[c]) cnt++;
        double share = (bw_of_group > 0 ? bw_of_group : s->ch[c].bw) / cnt;
        if (share < s->ch[c].bw) s->ch[c].bw = share;
    }
    free(sorted);
}

void sim_links_setup(sim *s)
{
    const cluster *cl = &s->pl->cluster;
    int nics = cl->nics_per_node > 0 && cl->n_nodes > 1;
    int multi = 0; /* a device holding several stages: streams may share a pair */
    for (int w = 0; w < s->n_w && !multi; w++) multi = s->w[w].n_local > 1;
    if ((!nics && !multi) || s->o.comm_off || s->sc->kind == SCHED_SEQUENTIAL) return;
    /* every channel the run will use, before it starts */
    for (int w = 0; w < s->n_w; w++)
        for (int64_t i = s->sc->off[w]; i < s->sc->off[w + 1]; i++) {
            const sched_op *op = &s->sc->ops[i];
            if (op->kind == SCHED_SEND && (unsigned)op->peer < (unsigned)s->n_w && op->peer != w)
                sim_link_get(s, w, op->peer);
        }
    sim_ring_channels(s);
    if (s->err.code) return;
    int n = s->n_ch;
    int64_t *key = cl_malloc((size_t)(n ? n : 1) * sizeof *key);
    for (int c = 0; c < n; c++) key[c] = (int64_t)s->ch[c].src * s->n_w + s->ch[c].dst;
    split_by(s, key, 0); /* streams on one device pair */
    if (nics) {
        /* each node's first device and device count (devices are numbered
         * node by node), for cluster_nic_of's blocks in O(1) a channel */
        int *first = cl_malloc((size_t)cl->n_nodes * sizeof *first);
        int *count = cl_calloc((size_t)cl->n_nodes, sizeof *count);
        for (int d = cl->n_devices; d-- > 0;) {
            first[cl->devices[d].node] = d;
            count[cl->devices[d].node]++;
        }
        double nic_bw = cl->links[CLUSTER_INTER].bw_Bps;
        for (int side = 0; side < 2; side++) { /* the sender's card out, the receiver's in */
            for (int c = 0; c < n; c++) {
                const sim_chan *ch = &s->ch[c];
                int d = s->sc->dev[side ? ch->dst : ch->src], nd = cl->devices[d].node;
                key[c] = ch->level != CLUSTER_INTER ? -1
                         : cluster_nic_card(cl->nics_per_node, nd, d - first[nd], count[nd]);
            }
            split_by(s, key, nic_bw);
        }
        free(first);
        free(count);
    }
    free(key);
}

static int32_t xf_alloc(sim *s)
{
    if (s->xf_free < 0) {
        int32_t old = s->cap_xf, cap = old * 2 + 64;
        s->xf = cl_realloc(s->xf, (size_t)cap * sizeof *s->xf);
        for (int32_t i = cap; i-- > old;) {
            s->xf[i].next_free = s->xf_free;
            s->xf_free = i;
        }
        s->cap_xf = cap;
    }
    int32_t x = s->xf_free;
    s->xf_free = s->xf[x].next_free;
    return x;
}

static void on_arrive(ev_kernel *k, void *ctx, uint64_t x)
{
    sim *s = ctx;
    sim_arrive(s, (int32_t)x, s->now = ev_now(k));
    sim_drain(s);
}

void sim_link_start(sim *s, int c, int kind, int64_t ref, int64_t op, double bytes,
                    int src, int dst, int member, int hop)
{
    double t = s->now;
    int32_t x = xf_alloc(s);
    sim_xfer *X = &s->xf[x];
    X->kind = kind;
    X->chan = c;
    X->ref = ref;
    X->op = op;
    X->src = src;
    X->dst = dst;
    X->member = member;
    X->hop = hop;
    X->bytes = bytes;
    X->start_t = t;
    sim_chan *ch = &s->ch[c];
    s->sent_level[ch->level] += bytes;
    double begin = ch->free_t > t ? ch->free_t : t;
    ch->free_t = begin + bytes / ch->bw;
    ev_at(s->k, ch->free_t + ch->lat, on_arrive, s, (uint64_t)x);
}
