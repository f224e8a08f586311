/* link.c - links between devices and the transfers on them (see sim.h for
 * the model, docs/simulator.md "Resources and timing").
 *
 * A link is a directed device pair with the bandwidth and latency of the
 * cluster level joining them.  A transfer alone on its link (solo) takes
 * bytes / bw and arrives `latency` after its last byte: one event.  When
 * transfers overlap on a link they share it equally: with k in their
 * bandwidth phase each progresses at bw / k, recomputed at every start and
 * finish, with one pending event per link for the next finish (shared
 * mode); a transfer that finishes there gets its own arrival event, and the
 * last one left becomes solo again.  Latency does not occupy the link.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

int sim_link_lookup(sim *s, int src, int dst)
{
    int64_t key = (int64_t)src * s->n_w + dst;
    if (2 * (int64_t)(s->n_ch + 1) > s->ch_hcap) {
        int64_t cap = s->ch_hcap ? s->ch_hcap * 2 : 64;
        int64_t *keys = cl_malloc((size_t)cap * sizeof *keys);
        int32_t *vals = cl_malloc((size_t)cap * sizeof *vals);
        for (int64_t i = 0; i < cap; i++) keys[i] = -1;
        for (int64_t i = 0; i < s->ch_hcap; i++) {
            if (s->ch_hash[i] < 0) continue;
            int64_t h = (int64_t)((uint64_t)s->ch_hash[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
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
    int64_t h = (int64_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (s->ch_hcap - 1);
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
    ch->cap_active = SIM_CHAN_INLINE;
    ch->src = src;
    ch->dst = dst;
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
        ev_stop(s->k);
        ch->bw = 1;
        ch->lat = 0;
    }
    s->ch_hash[h] = key;
    s->ch_hval[h] = c;
    return c;
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

static void chan_add(sim_chan *ch, int32_t x)
{
    if (ch->n_active == ch->cap_active) {
        int cap = ch->cap_active * 2;
        int32_t *grown = cl_malloc((size_t)cap * sizeof *grown);
        memcpy(grown, sim_chan_act(ch), (size_t)ch->n_active * sizeof *grown);
        free(ch->active);
        ch->active = grown;
        ch->cap_active = cap;
    }
    sim_chan_act(ch)[ch->n_active++] = x;
}

/* Shared mode: advance every active transfer to time t. */
static void chan_progress(sim *s, sim_chan *ch, double t)
{
    double delta = (t - ch->last_t) * ch->bw / ch->n_active;
    const int32_t *act = sim_chan_act(ch);
    for (int i = 0; i < ch->n_active; i++) s->xf[act[i]].remaining -= delta;
    ch->last_t = t;
}

static void on_chan(ev_kernel *k, void *ctx, uint64_t c);
static void on_solo_arrive(ev_kernel *k, void *ctx, uint64_t x);
static void on_arrive(ev_kernel *k, void *ctx, uint64_t x);

static void chan_schedule_shared(sim *s, int c)
{
    sim_chan *ch = &s->ch[c];
    if (ch->ev) ev_cancel(s->k, ch->ev);
    double best = HUGE_VAL;
    const int32_t *act = sim_chan_act(ch);
    for (int i = 0; i < ch->n_active; i++)
        if (s->xf[act[i]].remaining < best) best = s->xf[act[i]].remaining;
    if (best < 0) best = 0;
    ch->ev = ev_at(s->k, ch->last_t + best * ch->n_active / ch->bw, on_chan, s, (uint64_t)c);
}

static void make_solo(sim *s, sim_chan *ch, int32_t x, double t, double remaining)
{
    sim_xfer *X = &s->xf[x];
    X->finish_t = t + (remaining > 0 ? remaining : 0) / ch->bw;
    X->ev = ev_at(s->k, X->finish_t + ch->lat, on_solo_arrive, s, (uint64_t)x);
}

void sim_link_start(sim *s, int c, int kind, int64_t ref, int64_t op, double bytes,
                    int src, int dst, int member)
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
    X->bytes = bytes;
    X->remaining = bytes;
    X->start_t = t;
    X->ev = 0;
    sim_chan *ch = &s->ch[c];
    s->sent_level[ch->level] += bytes;
    if (ch->n_active == 1 && s->xf[sim_chan_act(ch)[0]].finish_t <= t)
        ch->n_active = 0; /* the solo transfer is past its last byte */
    if (ch->n_active == 0) {
        chan_add(ch, x);
        make_solo(s, ch, x, t, bytes);
        return;
    }
    if (ch->n_active == 1) { /* a solo transfer becomes shared */
        sim_xfer *Y = &s->xf[sim_chan_act(ch)[0]];
        ev_cancel(s->k, Y->ev);
        Y->ev = 0;
        Y->remaining = (Y->finish_t - t) * ch->bw;
        ch->last_t = t;
    } else {
        chan_progress(s, ch, t);
    }
    chan_add(ch, x);
    chan_schedule_shared(s, c);
}

static void on_chan(ev_kernel *k, void *ctx, uint64_t c)
{
    sim *s = ctx;
    double t = s->now = ev_now(k);
    sim_chan *ch = &s->ch[c];
    ch->ev = 0;
    chan_progress(s, ch, t);
    int best = 0;
    int32_t *act = sim_chan_act(ch);
    for (int i = 1; i < ch->n_active; i++)
        if (s->xf[act[i]].remaining < s->xf[act[best]].remaining) best = i;
    int32_t x = act[best];
    memmove(act + best, act + best + 1, (size_t)(ch->n_active - best - 1) * sizeof *act);
    ch->n_active--;
    s->xf[x].finish_t = t;
    if (ch->n_active == 1) {
        int32_t y = act[0];
        make_solo(s, ch, y, t, s->xf[y].remaining);
    } else if (ch->n_active > 1) {
        chan_schedule_shared(s, (int)c);
    }
    if (ch->lat > 0)
        ev_at(k, t + ch->lat, on_arrive, s, (uint64_t)x);
    else
        sim_arrive(s, x, t);
    sim_drain(s);
}

static void on_solo_arrive(ev_kernel *k, void *ctx, uint64_t x)
{
    sim *s = ctx;
    sim_chan *ch = &s->ch[s->xf[x].chan];
    if (ch->n_active == 1 && sim_chan_act(ch)[0] == (int32_t)x) ch->n_active = 0;
    sim_arrive(s, (int32_t)x, s->now = ev_now(k));
    sim_drain(s);
}

static void on_arrive(ev_kernel *k, void *ctx, uint64_t x)
{
    sim *s = ctx;
    sim_arrive(s, (int32_t)x, s->now = ev_now(k));
    sim_drain(s);
}

