/* merge.c - the method's partition-and-merge heuristic (see merge.h). */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ----------------------------------------------------------------- api -- */

double merge_sel_offer(merge_sel *S, plan_layout *y)
{
    double bottleneck = 0;
    for (int j = 0; j < S->n; j++) {
        plan_inst Ij = *S->I;
        if (S->sched) Ij.sched = S->sched[j];
        plan_eval ev;
        plan_layout_eval(&Ij, S->L, y, &ev);
        assert(ev.valid);
        bottleneck = ev.bottleneck_s; /* the same under every schedule */
        if (!S->have[j] || plan_eval_cmp(&ev, &S->best_ev[j]) < 0) {
            if (S->have[j]) plan_layout_free(&S->best[j]);
            plan_layout_copy(&S->best[j], y);
            S->best_ev[j] = ev;
            S->have[j] = 1;
        }
    }
    plan_layout_free(y);
    return bottleneck;
}

/* Step 1 into S (its layouts depend on no schedule's memory: one run for
 * schedules that price all-reduces alike, plan_merge_multi); returns the
 * stage counts tried and sets *p_fixed to the count step 2 asks for. */
static int merge_step1(const plan_inst *I, const plan_lattice *L, int *p_fixed_io, merge_sel *S)
{
    assert(L->chain);
    int p_fixed = *p_fixed_io;
    int n = L->n_layers, N = I->n_dev;
    int *removed = cl_calloc((size_t)n + 1, sizeof(int));
    merge_sequence(I, L, removed);
    /* cuts by removal step, last removed first */
    int *by_step = cl_malloc((size_t)n * sizeof(int));
    for (int b = 1; b < n; b++) by_step[removed[b]] = b;
    int pmax = n < N ? n : N;
    if (p_fixed > 0 && p_fixed > pmax) p_fixed = pmax;
    *p_fixed_io = p_fixed;

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

    int tried = 0;
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
        int placed = 0, allowed = 1;
        for (int s = 1; s < p; s++) allowed &= y.cut[s] <= I->cut_max;
        if (I->rep_fixed > 0) {
            /* one replica count for every stage: no spare devices to spread */
            for (int s = 0; s < p; s++) y.r[s] = I->rep_fixed;
            placed = allowed && p * I->rep_fixed <= N && place_blocks(I, L, &y);
            allowed = 0; /* nothing else to try */
        } else if (!allowed) {
            /* a stage would start where none may (cut_max) */
        } else if (rc.rcap > 1 && N > p) {
            add_replicas(&rc, p, N - p);
            placed = place_blocks(I, L, &y);
            if (!placed)
                for (int s = 0; s < p; s++) y.r[s] = 1;
        }
        if (!placed && allowed) placed = place_blocks(I, L, &y);
        tried++;
        if (placed) merge_sel_offer(S, &y);
        else plan_layout_free(&y);
    }
    free(cut);
    free(by_step);
    free(removed);
    return tried;
}

/* The bottleneck that brackets step 2 for schedule j of S: its best
 * layout's when that fits, else none (HUGE_VAL). */
static double merge_hi(const merge_sel *S, int j)
{
    return S->have[j] && S->best_ev[j].feasible ? S->best_ev[j].bottleneck_s : HUGE_VAL;
}

/* plan_merge into S (one schedule, or several whose layouts are the same:
 * plan_merge_multi); returns the stage counts tried. */
static int merge_run(const plan_inst *I, const plan_lattice *L, int p_fixed, merge_sel *S)
{
    int tried = merge_step1(I, L, &p_fixed, S);
    /* the merge sequence's best bottleneck brackets the bisection (pk_init
     * declines when the states would be too many: a fixed stage count on a
     * long model); every schedule of S must have the same (plan_merge_multi:
     * each layout fits under each, so each keeps one of the least
     * bottleneck), else -1 */
    for (int j = 1; j < S->n; j++)
        if (S->have[j] != S->have[0] ||
            (S->have[0] && (!S->best_ev[j].feasible || !S->best_ev[0].feasible ||
                            S->best_ev[j].bottleneck_s != S->best_ev[0].bottleneck_s)))
            return -1;
    plan_merge_pack(I, L, p_fixed, merge_hi(S, 0), S);
    return tried;
}

int plan_merge(const plan_inst *I, const plan_lattice *L, int p_fixed, plan_layout *out,
               plan_merge_stats *st)
{
    memset(out, 0, sizeof *out);
    plan_eval ev;
    int have = 0;
    merge_sel S = {.I = I, .L = L, .n = 1, .best = out, .best_ev = &ev, .have = &have};
    int tried = merge_run(I, L, p_fixed, &S);
    if (st) {
        st->counts_tried = tried;
        st->best_p = have ? out->p : 0;
    }
    return have && ev.feasible;
}

/* Equal to the bit (NaN included): the same bits make the same arithmetic. */
static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The factor a schedule's all-reduces are priced with (cost.c,
 * plan_allreduce_factors): with ZeRO it depends on the schedule. */
static double ar_scale_of(const plan_inst *I)
{
    return I->ar_scale[plan_zero_splits(I->zero, I->sched)];
}

/* plan_merge for each of n schedules (out, ev, have zeroed; the answers of
 * n plan_merge calls) where memory may bind under some.  Step 1 reads no
 * schedule but through the all-reduce's price, so it runs once for the
 * schedules that price all-reduces alike and offers its layouts to each.
 * Step 2 runs once for the schedules that also bring the same bracket and
 * whose memory is of the same kind (none zb-h1): where no memory binds
 * under any of them, plan_merge_pack as for one; else
 * plan_merge_pack_group, and each schedule again on its own, from its
 * state before, where their memory checks differ. */
static void merge_apart(const plan_inst *I, const plan_lattice *L, int p_fixed, int n, const sched_kind *sched,
                        plan_layout *out, plan_eval *ev, int *have)
{
    size_t nn = (size_t)n;
    plan_inst *Ij = cl_malloc(nn * sizeof *Ij);
    double *scale = cl_malloc(nn * sizeof *scale), *hi = cl_malloc(nn * sizeof *hi);
    int *idx = cl_malloc(nn * sizeof *idx), *mfree = cl_malloc(nn * sizeof *mfree);
    int *solo = cl_malloc(nn * sizeof *solo), *gh = cl_malloc(nn * sizeof *gh);
    int *khave = cl_malloc(nn * sizeof *khave);
    char *done = cl_calloc(nn, 1);
    sched_kind *gs = cl_malloc(nn * sizeof *gs);
    plan_layout *gb = cl_malloc(nn * sizeof *gb), *keep = cl_malloc(nn * sizeof *keep);
    plan_eval *ge = cl_malloc(nn * sizeof *ge), *kev = cl_malloc(nn * sizeof *kev);
    for (int j = 0; j < n; j++) {
        Ij[j] = *I;
        Ij[j].sched = sched[j];
        scale[j] = ar_scale_of(&Ij[j]);
    }
    int pf = p_fixed;
    for (int j0 = 0; j0 < n; j0++) {
        if (done[j0]) continue;
        int cnt = 0;
        for (int j = j0; j < n; j++)
            if (!done[j] && same_bits(scale[j], scale[j0])) {
                done[j] = 1;
                idx[cnt] = j;
                gs[cnt++] = sched[j];
            }
        memset(gb, 0, (size_t)cnt * sizeof *gb);
        memset(gh, 0, (size_t)cnt * sizeof *gh);
        merge_sel S = {.I = &Ij[j0], .L = L, .n = cnt, .sched = gs, .best = gb, .best_ev = ge, .have = gh};
        pf = p_fixed;
        merge_step1(&Ij[j0], L, &pf, &S); /* (pf: the same clamp for all) */
        for (int k = 0; k < cnt; k++) {
            out[idx[k]] = gb[k];
            ev[idx[k]] = ge[k];
            have[idx[k]] = gh[k];
        }
    }
    for (int j = 0; j < n; j++) {
        hi[j] = have[j] && ev[j].feasible ? ev[j].bottleneck_s : HUGE_VAL;
        mfree[j] = plan_exact_mem_free(&Ij[j], L);
        solo[j] = plan_mem_dependence(&Ij[j]) == PLAN_MEM_BY_TOTAL;
    }
    memset(done, 0, nn);
    for (int j0 = 0; j0 < n; j0++) {
        if (done[j0]) continue;
        int cnt = 0;
        for (int j = j0; j < n; j++)
            if (!done[j] && (j == j0 || (!solo[j0] && !solo[j] && mfree[j] == mfree[j0] &&
                                         same_bits(scale[j], scale[j0]) && same_bits(hi[j], hi[j0])))) {
                done[j] = 1;
                idx[cnt] = j;
                gs[cnt] = sched[j];
                gb[cnt] = out[j];
                ge[cnt] = ev[j];
                gh[cnt++] = have[j];
            }
        merge_sel S = {.I = &Ij[j0], .L = L, .n = cnt, .sched = gs, .best = gb, .best_ev = ge, .have = gh};
        if (cnt == 1 || mfree[j0]) {
            /* one schedule, or no memory check: what one run does */
            plan_merge_pack(&Ij[j0], L, pf, hi[j0], &S);
        } else {
            for (int k = 0; k < cnt; k++) {
                memset(&keep[k], 0, sizeof keep[k]);
                if (gh[k]) plan_layout_copy(&keep[k], &gb[k]);
                kev[k] = ge[k];
                khave[k] = gh[k];
            }
            int same = plan_merge_pack_group(&Ij[j0], L, pf, hi[j0], &S);
            for (int k = 0; k < cnt; k++) {
                if (same) {
                    if (khave[k]) plan_layout_free(&keep[k]);
                    continue;
                }
                /* back to before step 2, then on its own */
                if (gh[k]) plan_layout_free(&gb[k]);
                gb[k] = keep[k];
                ge[k] = kev[k];
                gh[k] = khave[k];
                merge_sel Sk = {.I = &Ij[idx[k]], .L = L, .n = 1, .best = &gb[k], .best_ev = &ge[k], .have = &gh[k]};
                plan_merge_pack(&Ij[idx[k]], L, pf, hi[idx[k]], &Sk);
            }
        }
        for (int k = 0; k < cnt; k++) {
            out[idx[k]] = gb[k];
            ev[idx[k]] = ge[k];
            have[idx[k]] = gh[k];
        }
    }
    free(Ij);
    free(scale);
    free(hi);
    free(idx);
    free(mfree);
    free(solo);
    free(gh);
    free(khave);
    free(done);
    free(gs);
    free(gb);
    free(keep);
    free(ge);
    free(kev);
}

void plan_merge_multi(const plan_inst *I, const plan_lattice *L, int p_fixed, int n, const sched_kind *sched,
                      plan_layout *out, int *ok)
{
    int shared = n > 1;
    for (int j = 0; j < n && shared; j++) {
        plan_inst Ij = *I;
        Ij.sched = sched[j];
        shared = plan_mem_dependence(&Ij) != PLAN_MEM_BY_TOTAL && plan_exact_mem_free(&Ij, L);
    }
    plan_eval *ev = cl_calloc((size_t)n, sizeof *ev);
    int *have = cl_calloc((size_t)n, sizeof *have);
    for (int j = 0; j < n; j++) memset(&out[j], 0, sizeof out[j]);
    if (shared) {
        /* every layout fits under each: the same best bottleneck brackets
         * step 2 for all, and the packer checks no memory */
        plan_inst I0 = *I;
        I0.sched = sched[0];
        merge_sel S = {.I = &I0, .L = L, .n = n, .sched = sched, .best = out, .best_ev = ev, .have = have};
        if (merge_run(&I0, L, p_fixed, &S) < 0) {
            shared = 0; /* (not seen) */
            for (int j = 0; j < n; j++) {
                if (have[j]) plan_layout_free(&out[j]);
                memset(&out[j], 0, sizeof out[j]);
                have[j] = 0;
            }
        }
        for (int j = 0; j < n && shared; j++) ok[j] = have[j] && ev[j].feasible;
    }
    if (!shared) {
        merge_apart(I, L, p_fixed, n, sched, out, ev, have);
        for (int j = 0; j < n; j++) ok[j] = have[j] && ev[j].feasible;
    }
    free(ev);
    free(have);
}
