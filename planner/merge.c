/* merge.c - the method's partition-and-merge heuristic (see merge.h). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/schedule.h"
#include "exact.h"
#include "merge.h"

/* ------------------------------------------------------------- heap -- */

typedef struct hitem {
    double cost;            /* merged partition's cost                      */
    double bytes;           /* activation bytes at the boundary removed     */
    int b;                  /* the boundary (cut index)                     */
    int ver;                /* version of b when pushed (stale if changed)  */
} hitem;

typedef struct heap {
    hitem *a;
    int n, cap;
    int by_bytes;           /* order by bytes (most first) instead of cost  */
} heap;

static int hless_in(const heap *h, const hitem *x, const hitem *y)
{
    if (!h->by_bytes && x->cost != y->cost) return x->cost < y->cost;
    if (x->bytes != y->bytes) return x->bytes > y->bytes;
    return x->b < y->b;
}
#define hless(x, y) hless_in(h, x, y)

static void hpush(heap *h, hitem v)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->a = cl_realloc(h->a, (size_t)h->cap * sizeof *h->a);
    }
    int i = h->n++;
    while (i > 0 && hless(&v, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = v;
}

static hitem hpop(heap *h)
{
    hitem top = h->a[0], v = h->a[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && hless(&h->a[c + 1], &h->a[c])) c++;
        if (!hless(&h->a[c], &v)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = v;
    return top;
}

/* ----------------------------------------------------- merge sequence -- */

/* removed[b] = the merge step (1-based) that removes internal cut b.
 *
 * A partition's cost is its compute on one device (m x work); boundaries
 * are pipeline resources of their own (cost.h), so they do not add to it.
 * Merging the pair across cut b raises the slowest partition by
 * max(0, merged - slowest).  Pairs whose merge raises nothing wait in heap
 * `free`, the one across the most activation bytes first (cuts then stay
 * where activations are small); the others wait in heap `cost`, the
 * smallest merged cost first.  When `free` is empty the cheapest of `cost`
 * is merged and the slowest partition grows to it, which moves the pairs
 * now under it to `free`.  Every pair enters each heap at most once per
 * version, so the sequence takes O(L log L). */
static void merge_sequence(const plan_inst *I, const plan_lattice *L, int *removed)
{
    int n = L->n_layers;
    int *prev = cl_malloc((size_t)(n + 1) * sizeof(int));
    int *next = cl_malloc((size_t)(n + 1) * sizeof(int));
    int *ver = cl_calloc((size_t)(n + 1), sizeof(int));
    for (int b = 0; b <= n; b++) {
        prev[b] = b - 1;
        next[b] = b + 1;
    }
    heap hf = {.by_bytes = 1}, hc = {0};
    double m = I->m, slowest = 0;
    for (int j = 0; j < n; j++)
        slowest = fmax(slowest, m * (L->work[j + 1] - L->work[j]));
#define KEY(b)                                                                              \
    (hitem){m * (L->work[next[b]] - L->work[prev[b]]), L->cut[b], b, ver[b]}
#define PUT(b)                                                                              \
    do {                                                                                    \
        hitem it_ = KEY(b);                                                                 \
        hpush(it_.cost <= slowest ? &hf : &hc, it_);                                        \
    } while (0)
    for (int b = 1; b < n; b++) PUT(b);
    int step = 0;
    for (;;) {
        /* pairs the slowest partition now covers move to `free` */
        while (hc.n > 0 && hc.a[0].cost <= slowest) {
            hitem it = hpop(&hc);
            if (it.ver == ver[it.b]) hpush(&hf, it);
        }
        hitem it;
        if (hf.n > 0) {
            it = hpop(&hf);
        } else if (hc.n > 0) {
            it = hpop(&hc);
            if (it.ver != ver[it.b]) continue;
            slowest = fmax(slowest, it.cost);
        } else {
            break;
        }
        if (it.ver != ver[it.b]) continue;
        int b = it.b, a = prev[b], c = next[b];
        removed[b] = ++step;
        ver[b] = -1;
        next[a] = c;
        prev[c] = a;
        if (a > 0) {
            ver[a]++;
            PUT(a);
        }
        if (c < n) {
            ver[c]++;
            PUT(c);
        }
    }
#undef PUT
#undef KEY
    free(hf.a);
    free(hc.a);
    free(prev);
    free(next);
    free(ver);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ----------------------------------------------------------- replicas -- */

typedef struct rep_ctx {
    const plan_inst *I;
    const plan_lattice *L;
    const int *cut;
    int *r;
    int rcap;               /* largest replica group allowed                */
    int whole;              /* node size when whole-node groups are allowed, else 0 */
} rep_ctx;

static double stage_ref_time(const rep_ctx *c, int s, int r)
{
    const plan_lattice *L = c->L;
    double P = L->params[c->cut[s + 1]] - L->params[c->cut[s]];
    int level = c->whole && r > c->whole ? CLUSTER_INTER : CLUSTER_INTRA;
    double ar = plan_allreduce_s(c->I, P, r, level);
    return plan_stage_time(c->I, L->work[c->cut[s + 1]] - L->work[c->cut[s]], r, 1.0, ar);
}

/* The next replica count worth trying: the fewest that lower ceil(m / r). */
static int next_r(const rep_ctx *c, int r)
{
    int m = c->I->m, q = (m + r - 1) / r;
    if (q <= 1) return 0;
    int r2 = (m + q - 2) / (q - 1);
    if (r2 <= r) r2 = r + 1;
    if (c->whole && r2 > c->whole) r2 = (r2 + c->whole - 1) / c->whole * c->whole;
    if (r2 > c->rcap || r2 > m) return 0;
    return r2;
}

/* Spread spare devices over the slowest stages: a max-heap of stage times;
 * the slowest gets its next replica count while that shortens it. */
static void add_replicas(rep_ctx *c, int p, int budget)
{
    double *t = cl_malloc((size_t)p * sizeof *t);
    int *h = cl_malloc((size_t)p * sizeof *h), n = 0;
    for (int s = 0; s < p; s++) {
        c->r[s] = 1;
        t[s] = stage_ref_time(c, s, 1);
    }
    /* heap of stage indices by t (max first, then lower index) */
#define ABOVE(a, b) (t[a] > t[b] || (t[a] == t[b] && (a) < (b)))
    for (int s = 0; s < p; s++) {
        int i = n++;
        h[i] = s;
        while (i > 0 && ABOVE(h[i], h[(i - 1) / 2])) {
            int x = h[i];
            h[i] = h[(i - 1) / 2];
            h[(i - 1) / 2] = x;
            i = (i - 1) / 2;
        }
    }
    while (n > 0) {
        int w = h[0];
        int r2 = next_r(c, c->r[w]);
        double t2 = r2 ? stage_ref_time(c, w, r2) : HUGE_VAL;
        int done = !r2 || r2 - c->r[w] > budget || !(t2 < t[w]);
        if (done) {
            h[0] = h[--n];
        } else {
            budget -= r2 - c->r[w];
            c->r[w] = r2;
            t[w] = t2;
        }
        /* sift down from the root */
        int i = 0;
        for (;;) {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < n && ABOVE(h[l], h[m])) m = l;
            if (r < n && ABOVE(h[r], h[m])) m = r;
            if (m == i) break;
            int x = h[i];
            h[i] = h[m];
            h[m] = x;
            i = m;
        }
    }
#undef ABOVE
    free(t);
    free(h);
}

/* ---------------------------------------------------------- placement -- */

/* Pack stages into nodes left to right, cutting between nodes only at
 * boundaries whose bytes are <= limit: a node takes stages while they fit,
 * and when the next does not, the run goes back to the last allowed cut.
 * This uses the fewest nodes for that set of allowed cuts.  Fills y->pos and
 * returns 1 when the stages fit the cluster's nodes. */
static int pack(const plan_lattice *L, plan_layout *y, double limit,
                const int *nstart, int n_nodes, const int *nsize)
{
    int p = y->p, node = 0, s = 0;
    while (s < p) {
        if (node >= n_nodes) return 0;
        int K = nsize[node];
        if (y->r[s] > K) {
            /* whole nodes: the stage's replica count must be a run of them */
            int need = y->r[s], q = node, got = 0;
            while (q < n_nodes && got < need) got += nsize[q++];
            if (got != need) return 0;
            y->pos[s] = nstart[node];
            node = q;
            s++;
            continue;
        }
        /* fill this node with stages s .. e - 1 */
        int used = 0, e = s, last_ok = -1;
        while (e < p && y->r[e] <= K - used) {
            used += y->r[e];
            e++;
            if (e < p && L->cut[y->cut[e]] <= limit) last_ok = e;
        }
        if (e == s) return 0; /* a stage wider than its node (mixed sizes) */
        if (e < p && y->r[e] <= K && L->cut[y->cut[e]] > limit) {
            /* the run must end at an allowed boundary */
            if (last_ok <= s) return 0;
            e = last_ok;
        }
        int at = nstart[node];
        for (int k = s; k < e; k++) {
            y->pos[k] = at;
            at += y->r[k];
        }
        s = e;
        node++;
    }
    return 1;
}

/* Place blocks so that the boundaries between nodes carry the fewest bytes:
 * the smallest byte limit under which packing still fits (binary search over
 * the boundaries' bytes).  Returns 0 when the stages do not fit at all. */
static int place_blocks(const plan_inst *I, const plan_lattice *L, plan_layout *y)
{
    int N = I->n_dev, p = y->p;
    int *nstart = cl_malloc((size_t)N * sizeof(int)), *nsize = cl_malloc((size_t)N * sizeof(int));
    int n_nodes = 0;
    for (int a = 0; a < N;) {
        int b = a;
        while (b < N && I->node[b] == I->node[a]) b++;
        nstart[n_nodes] = a;
        nsize[n_nodes++] = b - a;
        a = b;
    }
    double *lim = cl_malloc((size_t)(p + 1) * sizeof(double));
    int nl = 0;
    for (int s = 1; s < p; s++) lim[nl++] = L->cut[y->cut[s]];
    lim[nl++] = HUGE_VAL;
    qsort(lim, (size_t)nl, sizeof(double), cmp_double);
    int ok = 0;
    if (pack(L, y, HUGE_VAL, nstart, n_nodes, nsize)) {
        int lo = 0, hi = nl - 1; /* lim[hi] works */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (pack(L, y, lim[mid], nstart, n_nodes, nsize)) hi = mid;
            else lo = mid + 1;
        }
        ok = pack(L, y, lim[hi], nstart, n_nodes, nsize);
    }
    free(lim);
    free(nstart);
    free(nsize);
    return ok;
}

/* ------------------------------------------- packing under a bound -- */

/* Given a bound B on the bottleneck, merge layers into stages from the
 * model's end backwards.  A state (i, c) says layers i.. are placed on the
 * right end of the device line from a position of class c on: one class
 * with identical devices in equal nodes, where the state keeps the
 * rightmost start (the fewest positions spanned); the position itself when
 * devices differ or nodes are unequal (up to PK_POS_MAX devices), where a
 * state may also leave positions before its first stage unused (gaps skip
 * slow devices).  The stage before state (j, c) takes layers i..j-1 for
 * the smallest i (the most merges) that keeps its time, its boundary and
 * its memory within B and its devices' capacity, for each replica count
 * worth trying.  Per bound that is O(L x R x C) checks (and a binary
 * search per check at worst), R the replica counts that lower ceil(m / r)
 * (about 2 sqrt(m)), C the classes.  Every price goes through cost.h. */
typedef struct packer {
    const plan_inst *I;
    const plan_lattice *L;
    int n, N, kmax;         /* kmax: stages exactly, or 0 for any count      */
    int *rs, nr;            /* replica counts tried, ascending               */
    int C;                  /* classes: 1, or positions 0..N (pos_mode)      */
    int mem_free;           /* no stage can overflow: skip memory checks     */
    int devices_arg;        /* BY_TOTAL memory: price at N devices (the most) */
    int uni;                /* identical devices: speed and memory are spd0, cap0 */
    double spd0, cap0, spd_top, cap_top;
    int *nstart;            /* per position: first position of its node      */
    /* per state (layer i, stages k when kmax, class c): the first stage's
     * position (-1: none), devices used, the next state's layer and class,
     * the first stage's replicas */
    int *e, *used, *nj, *nc, *r;
    int *fpos;              /* the first stage's position (e is where the
                               suffix's positions start: gaps may follow)  */
    int *lst, *lst_n;       /* per (stages, class): the layers i whose state
                               exists, decreasing (appended as found)       */
    int pos_mode;           /* classes are positions: a state may also skip
                               positions (gaps), to leave slow devices out  */
    char *bok;              /* per cut: its boundary can be within B on some link */
    char *bok_lv[CLUSTER_LEVELS]; /* per cut: within B on that link       */
    int *prev_inter;        /* per cut j: the largest j' <= j within B on the
                               inter-node link (-1: none)                   */
    /* the simulator's in-flight microbatches and weight versions of a stage
     * at depth D on rs[a] replicas, at [D x nr + a], filled on first use
     * (-1: not yet) */
    int *tab_in, *tab_ver;
    int *jt;                /* per (replica count, class): the loose reach */
    /* per (replica count a, class c), at a x C + c: where states of class
     * c put the block (first position, -1: nowhere; replicas), its slowest
     * speed, least memory and all-reduce link (with one class and devices
     * that differ: the fastest and the largest, the block being unknown) */
    int *b_pos, *b_r, *b_lv;
    int *b_in, *b_ver;      /* the fewest in-flight microbatches and weight
                               versions at any depth (memory not free)     */
    double *b_spd, *b_cap;
} packer;

#define PK_POS_MAX 512      /* devices at most for a state per position      */
#define PK_POS_WORK 4e5     /* state visits per packing at most, for the same */
#define PK_MAX_WORK 4e6     /* state visits per packing at most, else no packing */
#define PK_MEM_R 16         /* every replica count up to this when memory binds */
#define WALK 48             /* full checks per (state, replica count) at most */

static inline int imin(int a, int b) { return a < b ? a : b; }

static inline int pk_cls(const packer *P, int pos) { return P->pos_mode ? pos : 0; }

static inline size_t st_of(const packer *P, int i, int k, int c)
{
    return ((size_t)i * (size_t)(P->kmax ? P->kmax + 1 : 1) + (size_t)(P->kmax ? k : 0)) * (size_t)P->C + (size_t)c;
}

/* Block of about r positions ending at or before e (exclusive), obeying
 * the block rules: skip to the end of the previous node when it does not
 * fit; more than a node takes whole nodes, at least r positions of them
 * (nodes of unequal sizes: the replica count grows to what they hold,
 * *rr, when the instance allows it).  -1 when nothing fits. */
static int pk_place(const packer *P, int e, int r, int *rr)
{
    const plan_inst *I = P->I;
    *rr = r;
    for (int tries = 0; tries < 4 && e - r >= 0; tries++) {
        if (plan_block_ok(I, e - r, r)) return e - r;
        if (r > e - P->nstart[e - 1] && (e == P->N || I->node[e] != I->node[e - 1])) {
            /* whole nodes from e leftwards */
            int s = e;
            while (s > 0 && e - s < r) s = P->nstart[s - 1];
            int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
            if (e - s >= r && e - s <= rmax) {
                *rr = e - s;
                return s;
            }
        }
        e = P->nstart[e - 1];
    }
    return -1;
}

/* Can layers i..j-1 on about rs[a] replicas precede the placed state sj
 * (layers j..) within B?  Sets *at to the block's first position and
 * *r_out to its replicas (pk_place). */
static int pk_check(const packer *P, double B, int i, int j, size_t sj, int a, int *at, int *r_out)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    int r;
    if (P->e[sj] < 0) return 0;
    int pos = pk_place(P, P->e[sj], P->rs[a], &r);
    if (pos < 0) return 0;
    if (j < P->n && !P->bok_lv[plan_link_level(I, pos, r, P->fpos[sj], P->r[sj])][j])
        return 0; /* the boundary (plan_boundary_s on that link) is over B */
    double spd = P->uni ? P->spd0 : HUGE_VAL, cap = P->uni ? P->cap0 : HUGE_VAL;
    if (!P->uni)
        for (int d = pos; d < pos + r; d++) {
            spd = fmin(spd, I->speed[d]);
            cap = fmin(cap, I->mem_cap[d]);
        }
    int level = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
    double Pb = L->params[j] - L->params[i];
    double t = plan_stage_time(I, L->work[j] - L->work[i], r, spd, plan_allreduce_s(I, Pb, r, level));
    if (t > B) return 0;
    if (!P->mem_free) {
        int depth = P->used[sj] + r;
        if (depth > P->N) return 0;
        size_t ti = (size_t)depth * P->nr + a;
        if (r != P->rs[a]) {
            /* grown to whole nodes: not tabulated */
            double mem = plan_stage_mem(I, Pb, L->stash[j] - L->stash[i], L->cut[i],
                                        L->cut[j], depth, r, P->devices_arg ? P->N : depth);
            if (mem > cap) return 0;
        } else if (P->tab_in[ti] < 0) {
            P->tab_in[ti] = sched_inflight_rep(I->sched, P->devices_arg ? P->N : depth, depth, r,
                                               I->m, I->chunks);
            P->tab_ver[ti] = sched_versions_rep(I->sched, depth, r);
        }
        if (r == P->rs[a] && plan_stage_mem_counts(I, Pb, L->stash[j] - L->stash[i], L->cut[i],
                                                   L->cut[j], P->tab_in[ti],
                                                   P->tab_ver[ti]) > cap)
            return 0;
    }
    *at = pos;
    *r_out = r;
    return 1;
}

/* The part of pk_check that is monotone in j, for block ac (b_*): the
 * time, and the memory with the fewest in-flight microbatches and weight
 * versions the block's replica count has at any depth, without the
 * outgoing buffer (a bound never stricter than pk_check's). */
static int pk_check_loose(const packer *P, double B, int i, int j, size_t ac)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    int r = P->b_r[ac];
    double Pb = L->params[j] - L->params[i];
    if (plan_stage_time(I, L->work[j] - L->work[i], r, P->b_spd[ac],
                        plan_allreduce_s(I, Pb, r, P->b_lv[ac])) > B)
        return 0;
    if (!P->mem_free && plan_stage_mem_counts(I, Pb, L->stash[j] - L->stash[i], L->cut[i], 0,
                                              P->b_in[ac], P->b_ver[ac]) > P->b_cap[ac])
        return 0;
    return 1;
}

/* Set state si (class c, layers i.., k stages) when better: the rightmost
 * start, then the fewest devices.  Returns 1 when set. */
static int pk_offer(packer *P, int i, int k, int c, int e, int used, int j, int cj, int fpos, int r)
{
    size_t si = st_of(P, i, k, c);
    if (P->e[si] >= 0 && !(e > P->e[si] || (e == P->e[si] && used < P->used[si]))) return 0;
    if (P->e[si] < 0) {
        size_t li = (size_t)(P->kmax ? k : 0) * P->C + c;
        P->lst[li * (P->n + 1) + P->lst_n[li]++] = i;
    }
    P->e[si] = e;
    P->used[si] = used;
    P->nj[si] = j;
    P->nc[si] = cj;
    P->fpos[si] = fpos;
    P->r[si] = r;
    return 1;
}

/* Pack under B; returns 1 when every layer is placed within N positions
 * (in exactly kmax stages when kmax > 0). */
static int pk_run(packer *P, double B)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    int n = P->n, K = P->kmax, C = P->C, N = P->N;
    /* cuts whose boundary can be within B on some link */
    for (int j = 0; j <= n; j++) {
        for (int lv = 0; lv < CLUSTER_LEVELS; lv++)
            P->bok_lv[lv][j] = j == n || plan_boundary_s(I, L->cut[j], lv) <= B;
        P->bok[j] = P->bok_lv[CLUSTER_INTRA][j] || P->bok_lv[CLUSTER_INTER][j];
        P->prev_inter[j] = P->bok_lv[CLUSTER_INTER][j] ? j : j > 0 ? P->prev_inter[j - 1] : -1;
    }
    size_t states = st_of(P, n, K, C - 1) + 1;
    for (size_t s = 0; s < states; s++) P->e[s] = -1;
    for (int l = 0; l < (K ? K + 1 : 1) * C; l++) P->lst_n[l] = 0;
    for (int l = 0; l < P->nr * C; l++) P->jt[l] = n;
    pk_offer(P, n, 0, pk_cls(P, N), N, 0, -1, -1, N, 0);
    if (P->pos_mode)
        for (int c = N - 1; c >= 0; c--) pk_offer(P, n, 0, c, c, 0, -1, -1, N, 0);
    for (int i = n - 1; i >= 0; i--) {
        int k_hi = K ? K : 1;
        for (int k = 1; k <= k_hi; k++) {
            if (K && n - i < k) break;
            size_t lb = (size_t)(K ? k - 1 : 0) * C;
            for (int a = 0; a < P->nr; a++) {
                for (int c = 0; c < C; c++) {
                    /* states of class c place this block at one offset:
                     * its speed, memory and all-reduce link are known */
                    int nl = P->lst_n[lb + c];
                    if (nl == 0) continue;
                    const int *lj = P->lst + (lb + c) * (n + 1);
                    size_t ac = (size_t)a * C + c;
                    int pos = P->b_pos[ac], r = P->b_r[ac], e_rep = P->pos_mode ? c : N;
                    if (pos < 0) continue;
                    /* the farthest j by the monotone part: it only
                     * recedes as i does (the block's devices are fixed by
                     * the class), so one pointer per replica count and
                     * class, O(L) per run; with a fixed stage count, a
                     * binary search */
                    int lo = i + 1, hi = K ? n - (k - 1) : n;
                    if (!K) {
                        int *jt = &P->jt[(size_t)a * C + c], y = *jt;
                        while (y > i && !pk_check_loose(P, B, i, y, ac)) y--;
                        *jt = y;
                        lo = y;
                    } else if (!pk_check_loose(P, B, i, lo, ac)) {
                        lo = i;
                    } else {
                        while (lo < hi) {
                            int mid = lo + (hi - lo + 1) / 2;
                            if (pk_check_loose(P, B, i, mid, ac)) lo = mid;
                            else hi = mid - 1;
                        }
                    }
                    if (lo <= i) continue;
                    if (C == 1) {
                        /* no state up to lo starts further right than lo's
                         * (they hold more layers), so this block cannot
                         * beat the state i already has */
                        int e_lo = P->e[st_of(P, lo, k - 1, 0)], e_i = P->e[st_of(P, i, k, 0)];
                        if (e_i >= 0 && e_lo >= 0 && e_lo - r < e_i) continue;
                    }
                    /* then down the states of class c from there (lj
                     * decreases): the first that passes every check */
                    int at = -1, j = -1, r_at = 0;
                    if (e_rep < N && I->node[pos] != I->node[e_rep]) {
                        /* this block and the next stage share no node: only
                         * cuts within B on the inter-node link can do */
                        for (int y = P->prev_inter[lo], w = 0, seen = 0;
                             y > i && w < WALK && seen < 8 * WALK; y = P->prev_inter[y - 1], seen++) {
                            if (P->e[st_of(P, y, k - 1, c)] < 0) continue;
                            w++;
                            if (pk_check(P, B, i, y, st_of(P, y, k - 1, c), a, &at, &r_at)) {
                                j = y;
                                break;
                            }
                        }
                    } else if (P->e[st_of(P, lo, k - 1, c)] >= 0 && P->bok[lo] &&
                               pk_check(P, B, i, lo, st_of(P, lo, k - 1, c), a, &at, &r_at)) {
                        j = lo; /* the usual case: the farthest reach itself */
                    } else {
                        int x0 = 0, x1 = nl;
                        while (x0 < x1) {
                            int mid = (x0 + x1) / 2;
                            if (lj[mid] > lo) x0 = mid + 1;
                            else x1 = mid;
                        }
                        for (int x = x0, w = 0; x < nl && lj[x] > i && w < WALK; x++) {
                            if (!P->bok[lj[x]]) continue;
                            w++;
                            if (pk_check(P, B, i, lj[x], st_of(P, lj[x], k - 1, c), a, &at, &r_at)) {
                                j = lj[x];
                                break;
                            }
                        }
                    }
                    if (j < 0) continue;
                    size_t sj = st_of(P, j, k - 1, c);
                    pk_offer(P, i, k, pk_cls(P, at), at, P->used[sj] + r_at, j, c, at, r_at);
                }
            }
            /* gaps: a state may leave the positions before its first
             * stage unused, so state (i, c) may also be state (i, c + 1)
             * one position further left, when that uses fewer devices */
            if (P->pos_mode)
                for (int c = N - 1; c >= 0; c--) {
                    size_t s1 = st_of(P, i, k, c + 1);
                    if (P->e[s1] < 0) continue;
                    size_t s0 = st_of(P, i, k, c);
                    if (P->e[s0] >= 0 && P->used[s0] <= P->used[s1]) continue;
                    if (P->e[s0] >= 0) {
                        /* replace in place (already listed) */
                        P->used[s0] = P->used[s1];
                        P->nj[s0] = P->nj[s1];
                        P->nc[s0] = P->nc[s1];
                        P->fpos[s0] = P->fpos[s1];
                        P->r[s0] = P->r[s1];
                    } else {
                        pk_offer(P, i, k, c, c, P->used[s1], P->nj[s1], P->nc[s1], P->fpos[s1], P->r[s1]);
                    }
                }
        }
    }
    for (int c = 0; c < C; c++)
        if (P->e[st_of(P, 0, K ? K : 1, c)] >= 0) return 1;
    return 0;
}

/* The layout pk_run found (call after it returned 1): from the state of
 * layer 0 with the rightmost start. */
static void pk_layout(const packer *P, plan_layout *y)
{
    int K = P->kmax, kk = K ? K : 1, c0 = -1;
    for (int c = 0; c < P->C; c++)
        if (P->e[st_of(P, 0, kk, c)] >= 0 && (c0 < 0 || P->e[st_of(P, 0, kk, c)] > P->e[st_of(P, 0, kk, c0)]))
            c0 = c;
    int p = 0;
    for (int i = 0, k = kk, c = c0; i < P->n; k--) {
        size_t si = st_of(P, i, k, c);
        i = P->nj[si];
        c = P->nc[si];
        p++;
    }
    plan_layout_alloc(y, p);
    int s = 0;
    for (int i = 0, k = kk, c = c0; i < P->n; k--) {
        size_t si = st_of(P, i, k, c);
        y->cut[s] = i;
        y->pos[s] = P->fpos[si];
        y->r[s] = P->r[si];
        i = P->nj[si];
        c = P->nc[si];
        y->cut[++s] = i;
    }
}

/* Returns 0 (nothing allocated) when the states would be too many. */
static int pk_init(packer *P, const plan_inst *I, const plan_lattice *L, int kmax)
{
    memset(P, 0, sizeof *P);
    int n = L->n_layers, N = I->n_dev;
    P->I = I;
    P->L = L;
    P->n = n;
    P->N = N;
    P->kmax = kmax;
    int K0 = 0;
    while (K0 < N && I->node[K0] == I->node[0]) K0++;
    int eq_nodes = N % K0 == 0;
    for (int d = 0; d < N && eq_nodes; d++) eq_nodes = I->node[d] == d / K0;
    P->uni = 1;
    for (int d = 1; d < N; d++)
        if (I->speed[d] != I->speed[0] || I->mem_cap[d] != I->mem_cap[0]) P->uni = 0;
    P->spd0 = P->spd_top = I->speed[0];
    P->cap0 = P->cap_top = I->mem_cap[0];
    for (int d = 0; d < N; d++) {
        P->spd_top = fmax(P->spd_top, I->speed[d]);
        P->cap_top = fmax(P->cap_top, I->mem_cap[d]);
    }
    /* one class, or positions (see packer) while a packing visits at most
     * PK_POS_WORK states */
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > N) rmax = N;
    if (rmax < 1) rmax = 1;
    double per_state = kmax ? kmax + 1.0 : 1.0, nr_est = fmin(rmax, 2 * sqrt(I->m) + 1);
    P->C = 1;
    if ((!P->uni || !eq_nodes) && N <= PK_POS_MAX && (n + 1.0) * per_state * (N + 1) * nr_est <= PK_POS_WORK) {
        P->C = N + 1;
        P->pos_mode = 1;
    }
    /* a fixed stage count multiplies the states: decline beyond PK_MAX_WORK */
    size_t states = (size_t)(n + 1) * (size_t)per_state * (size_t)P->C;
    if ((double)states * nr_est > PK_MAX_WORK) return 0;
    P->nstart = cl_malloc((size_t)N * sizeof(int));
    for (int d = 0; d < N; d++) P->nstart[d] = d > 0 && I->node[d - 1] == I->node[d] ? P->nstart[d - 1] : d;
    /* replica counts: the fewest for each ceil(m / r); where that cannot be
     * a block (more than a node, not whole nodes of equal size), the next
     * multiple of the node size */
    P->rs = cl_malloc((size_t)rmax * sizeof(int));
    P->mem_free = plan_exact_mem_free(I, L);
    int last_q = 0;
    for (int r = 1; r <= rmax; r++) {
        int q = (I->m + r - 1) / r;
        /* when memory can bind, more replicas of the same ceil(m / r) can
         * still help: fewer microbatches in flight per replica (PipeDream,
         * FBP, 1F1B keep about depth / r) */
        if (last_q && q == last_q && (P->mem_free || r > PK_MEM_R)) continue;
        int rr = r;
        if (eq_nodes && rr > K0 && rr % K0) rr = (rr + K0 - 1) / K0 * K0;
        if (rr > rmax) break;
        if (P->nr && P->rs[P->nr - 1] >= rr) continue;
        P->rs[P->nr++] = rr;
        last_q = (I->m + rr - 1) / rr;
        r = rr;
    }
    P->devices_arg = plan_mem_dependence(I) == PLAN_MEM_BY_TOTAL;
    P->e = cl_malloc(states * sizeof(int));
    P->used = cl_malloc(states * sizeof(int));
    P->nj = cl_malloc(states * sizeof(int));
    P->nc = cl_malloc(states * sizeof(int));
    P->r = cl_malloc(states * sizeof(int));
    P->fpos = cl_malloc(states * sizeof(int));
    P->lst = cl_malloc(states * sizeof(int));
    P->lst_n = cl_malloc((size_t)(kmax ? kmax + 1 : 1) * (size_t)P->C * sizeof(int));
    P->bok = cl_malloc((size_t)n + 1);
    P->prev_inter = cl_malloc(((size_t)n + 1) * sizeof(int));
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) P->bok_lv[lv] = cl_malloc((size_t)n + 1);
    size_t nt = ((size_t)N + 1) * (size_t)P->nr;
    P->tab_in = cl_malloc(nt * sizeof(int));
    P->tab_ver = cl_malloc(nt * sizeof(int));
    size_t nb = (size_t)P->nr * (size_t)P->C;
    P->jt = cl_malloc(nb * sizeof(int));
    P->b_pos = cl_malloc(nb * sizeof(int));
    P->b_r = cl_malloc(nb * sizeof(int));
    P->b_lv = cl_malloc(nb * sizeof(int));
    P->b_in = cl_calloc(nb, sizeof(int));
    P->b_ver = cl_calloc(nb, sizeof(int));
    P->b_spd = cl_malloc(nb * sizeof(double));
    P->b_cap = cl_malloc(nb * sizeof(double));
    for (int a = 0; a < P->nr; a++)
        for (int c = 0; c < P->C; c++) {
            size_t ac = (size_t)a * P->C + c;
            int r, pos = pk_place(P, P->pos_mode ? c : N, P->rs[a], &r);
            P->b_pos[ac] = pos;
            P->b_r[ac] = r;
            if (pos < 0) continue;
            double spd = P->uni ? P->spd0 : HUGE_VAL, cap = P->uni ? P->cap0 : HUGE_VAL;
            if (!P->uni && !P->pos_mode) {
                spd = P->spd_top;
                cap = P->cap_top;
            } else if (!P->uni)
                for (int d = pos; d < pos + r; d++) {
                    spd = fmin(spd, I->speed[d]);
                    cap = fmin(cap, I->mem_cap[d]);
                }
            P->b_spd[ac] = spd;
            P->b_cap[ac] = cap;
            P->b_lv[ac] = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
            if (P->mem_free) continue;
            int in_min = INT32_MAX, ver_min = INT32_MAX;
            for (int D = r; D <= N; D++) {
                in_min = imin(in_min, sched_inflight_rep(I->sched, P->devices_arg ? N : D, D, r, I->m, I->chunks));
                ver_min = imin(ver_min, sched_versions_rep(I->sched, D, r));
            }
            P->b_in[ac] = in_min;
            P->b_ver[ac] = ver_min;
        }
    for (size_t t = 0; t < nt; t++) P->tab_in[t] = -1;
    return 1;
}

static void pk_free(packer *P)
{
    free(P->nstart);
    free(P->rs);
    free(P->e);
    free(P->used);
    free(P->nj);
    free(P->nc);
    free(P->r);
    free(P->fpos);
    free(P->lst);
    free(P->lst_n);
    free(P->bok);
    free(P->prev_inter);
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) free(P->bok_lv[lv]);
    free(P->tab_in);
    free(P->tab_ver);
    free(P->jt);
    free(P->b_pos);
    free(P->b_r);
    free(P->b_lv);
    free(P->b_in);
    free(P->b_ver);
    free(P->b_spd);
    free(P->b_cap);
}

/* Keep y in *best when it evaluates better (by plan_eval_cmp). */
static void keep_better(const plan_inst *I, const plan_lattice *L, plan_layout *y, plan_layout *best,
                        plan_eval *best_ev, int *have)
{
    plan_eval ev;
    plan_layout_eval(I, L, y, &ev);
    assert(ev.valid);
    if (!*have || plan_eval_cmp(&ev, best_ev) < 0) {
        if (*have) plan_layout_free(best);
        *best = *y;
        *best_ev = ev;
        *have = 1;
    } else {
        plan_layout_free(y);
    }
}

/* Bisection on the bound with packer P: the smallest B under which it
 * places every layer, from lo (below, as far as known) and hi (a bottleneck
 * reached, HUGE_VAL when none).  To a relative 2e-4, then down from there:
 * packing just below the best bottleneck so far until that fails (each
 * success lowers it to another layout's), so the result is the packing's
 * own optimum, not within a tolerance of it.  At most `runs` packings.
 * The best layout found replaces *best when better; returns the final hi. */
static double pk_bisect(packer *P, double lo, double hi, int runs, plan_layout *best,
                        plan_eval *best_ev, int *have)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    if (!(hi < HUGE_VAL)) {
        /* nothing reached yet: grow from lo until packing succeeds */
        double g = lo;
        for (int k = 0; k < 64 && !(hi < HUGE_VAL); k++, g *= 4)
            if (pk_run(P, g)) {
                plan_layout y;
                pk_layout(P, &y);
                keep_better(I, L, &y, best, best_ev, have);
                hi = g;
            } else {
                lo = g;
            }
    }
    int descend = 0;
    for (int it = 0; it < runs && hi < HUGE_VAL; it++) {
        if (!(hi > lo * (1 + 2e-4))) descend = 1;
        double mid = descend ? nextafter(hi, 0) : sqrt(lo * hi);
        if (!(mid > lo && mid < hi)) break;
        if (pk_run(P, mid)) {
            plan_layout y;
            pk_layout(P, &y);
            plan_eval ev;
            plan_layout_eval(I, L, &y, &ev);
            hi = fmin(mid, ev.bottleneck_s);
            keep_better(I, L, &y, best, best_ev, have);
        } else {
            lo = mid;
            if (descend) break;
        }
    }
    return hi;
}

/* Packing under a bisected bound, from a bound no layout beats (the work
 * spread perfectly over every device at the fastest speed). */
static void pk_pack(const plan_inst *I, const plan_lattice *L, int kmax, double hi,
                    plan_layout *best, plan_eval *best_ev, int *have)
{
    packer P;
    if (!pk_init(&P, I, L, kmax)) return;
    double lo = I->m * L->work[L->n_sets - 1] / (I->n_dev * P.spd_top);
    if (!(lo > 0)) lo = 1e-12;
    lo = nextafter(lo, 0);
    pk_bisect(&P, lo, hi, 80, best, best_ev, have);
    pk_free(&P);
}

/* ----------------------------------------------------------------- api -- */

int plan_merge(const plan_inst *I, const plan_lattice *L, int p_fixed, plan_layout *out,
               plan_merge_stats *st)
{
    assert(L->chain);
    int n = L->n_layers, N = I->n_dev;
    memset(out, 0, sizeof *out);
    int *removed = cl_calloc((size_t)n + 1, sizeof(int));
    merge_sequence(I, L, removed);
    /* cuts by removal step, last removed first */
    int *by_step = cl_malloc((size_t)n * sizeof(int));
    for (int b = 1; b < n; b++) by_step[removed[b]] = b;
    int pmax = n < N ? n : N;
    if (p_fixed > 0 && p_fixed > pmax) p_fixed = pmax;

    /* node sizes: whole-node replica groups only when nodes are equal */
    int K = 0;
    while (K < N && I->node[K] == I->node[0]) K++;
    int uniform = N % K == 0;
    for (int d = 0; d < N && uniform; d++) uniform = I->node[d] == d / K;
    int kmin = N;
    for (int a = 0; a < N;) {
        int b = a;
        while (b < N && I->node[b] == I->node[a]) b++;
        if (b - a < kmin) kmin = b - a;
        a = b;
    }

    plan_eval best_ev;
    int have = 0, tried = 0, best_p = 0;
    int *cut = cl_malloc((size_t)(n + 1) * sizeof(int));
    for (int p = 1; p <= pmax; p++) {
        if (p_fixed > 0 && p != p_fixed) continue;
        if (!p_fixed && p > 32 && p != pmax) {
            /* thin large counts geometrically: p in ~1.2^k */
            double ratio = pow(1.2, floor(log((double)p) / log(1.2)));
            if ((int)ceil(ratio) != p) continue;
        }
        /* the p - 1 cuts removed last, sorted */
        int k = 0;
        cut[k++] = 0;
        char *keep = cl_calloc((size_t)n + 1, 1);
        for (int j = 0; j < p - 1; j++) keep[by_step[n - 1 - j]] = 1;
        for (int b = 1; b < n; b++)
            if (keep[b]) cut[k++] = b;
        cut[k++] = n;
        free(keep);
        assert(k == p + 1);
        plan_layout y;
        plan_layout_alloc(&y, p);
        memcpy(y.cut, cut, (size_t)(p + 1) * sizeof(int));
        rep_ctx rc = {.I = I, .L = L, .cut = y.cut, .r = y.r,
                      .rcap = I->max_replicas < kmin ? I->max_replicas : kmin,
                      .whole = uniform && N > K ? K : 0};
        if (rc.whole && I->max_replicas > K) rc.rcap = I->max_replicas;
        if (rc.rcap > I->m) rc.rcap = I->m;
        if (rc.rcap < 1) rc.rcap = 1;
        for (int s = 0; s < p; s++) y.r[s] = 1;
        int placed = 0;
        if (rc.rcap > 1 && N > p) {
            add_replicas(&rc, p, N - p);
            placed = place_blocks(I, L, &y);
            if (!placed)
                for (int s = 0; s < p; s++) y.r[s] = 1;
        }
        if (!placed) placed = place_blocks(I, L, &y);
        tried++;
        if (placed) {
            plan_eval ev;
            plan_layout_eval(I, L, &y, &ev);
            assert(ev.valid);
            if (!have || plan_eval_cmp(&ev, &best_ev) < 0) {
                if (have) plan_layout_free(out);
                plan_layout_copy(out, &y);
                best_ev = ev;
                have = 1;
                best_p = p;
            }
        }
        plan_layout_free(&y);
    }
    free(cut);
    free(by_step);
    free(removed);
    /* the merge sequence's best bottleneck brackets the bisection (pk_init
     * declines when the states would be too many: a fixed stage count on a
     * long model) */
    pk_pack(I, L, p_fixed, have && best_ev.feasible ? best_ev.bottleneck_s : HUGE_VAL, out,
            &best_ev, &have);
    if (have) best_p = out->p;
    if (st) {
        st->counts_tried = tried;
        st->best_p = best_p;
    }
    return have && best_ev.feasible;
}
