/* exact.c - the exact partition search (see exact.h and docs/planner.md).
 *
 * A dynamic programme over suffixes of the pipeline.  A state is
 *   (t, c, k): the layers of set t are still to place (t is a downset, the
 *   stages already placed hold the rest), c says where the next stage must
 *   end on the device line and how it links to the stage after it, and k
 *   counts the stages placed (only when memory or the caller needs it).
 * Stages are placed last to first, from the right end of the device line.
 * Each state keeps a small Pareto front of entries over (d, key): d is the
 * span of device positions used so far, key the objective so far.
 *
 * Two passes.  Pass 1 finds the optimal bottleneck B* (key = bottleneck).
 * Pass 2 keeps only transitions within B* and minimises (communication,
 * -headroom, devices) lexicographically, which every extension preserves.
 * When the schedule's memory depends on a stage's place in the pipeline,
 * pass 1 first runs with each stage's least possible memory (a relaxation,
 * so B_lo <= B*); if pass 2 at B_lo finds a layout that fits, B* = B_lo,
 * otherwise both passes run again with exact memory.
 *
 * Position classes.  With identical devices in one node every position is
 * alike (one class); with identical devices in equal nodes of K only the
 * offset in the node matters (K classes, and the smaller span wins inside a
 * class because shifting a layout by whole nodes changes nothing); otherwise
 * each position is its own class (times 2: does the next stage share the
 * node of the stage after it).
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "base/budget.h"
#include "exact.h"

enum { MODE_FLAT, MODE_PERIODIC, MODE_POSITIONS };
enum { EDGE_START, EDGE_STAGE, EDGE_GAP };

#define DEFAULT_BUDGET ((int64_t)4000000000)
#define MAX_POSITION_DEVICES 512
/* entries of the tabulated memory counts (xdp.tab_in) at most */
#define TAB_MAX 4e6

typedef struct xent {
    double B, C, H;         /* bottleneck, communication, smallest headroom */
    double Hs[PLAN_EXACT_SHADOWS]; /* the headroom under each shadow schedule */
    int alive;              /* with shadows: bit j, in shadow j's own run;
                               LEAD_BIT, in the lead schedule's own run     */
    int U, d;               /* devices used, positions spanned from the right */
    int t, c, k;            /* the state it belongs to                       */
    int parent;             /* entry it extends, -1 for the start            */
    int edge, from, r;      /* EDGE_STAGE: stage = set `from` \ set t on r   */
} xent;

/* What dominance compares, kept beside the ids in each front so that the
 * scans read contiguous memory. */
typedef struct xkey {
    double B, C, H;
    int U, d;
    int alive;              /* as xent.alive                                */
    double Hs[PLAN_EXACT_SHADOWS];
} xkey;

typedef struct xfront {
    int k, next;            /* k of this front; next front of the same (t, c) */
    int n, cap;
    int *ids;
    xkey *key;              /* key[i] of entry ids[i]                        */
} xfront;

typedef struct xdp {
    const plan_inst *I;
    const plan_lattice *L;
    int N, mode, K, C;
    int p_fixed;            /* exact stage count, or 0                       */
    int dev_fixed;          /* exact device count (BY_TOTAL memory), or 0    */
    int dep;                /* plan_mem_dependence of the instance           */
    int monotone;           /* memory never shrinks as the depth grows       */
    int track_u;            /* memory depends on the depth: fewer devices
                               below dominate (see dominates)               */
    int u_fronts;           /* one front per devices count (exact U needed)  */
    int feas;               /* feasibility only: times ignored, B kept 0, so
                               fronts hold only (span, devices) trade-offs */
    int pass2, relaxed;     /* relaxed: 1 = least memory of this schedule,
                               2 = least memory of any schedule            */
    double bound;           /* pass 1: prune above; pass 2: the threshold B* */
    /* shadow schedules (plan_exact_shadowed), during the pass at lower_s */
    int n_sh;
    int *sh_in[PLAN_EXACT_SHADOWS], *sh_ver[PLAN_EXACT_SHADOWS]; /* as tab_in */
    int sh_track[PLAN_EXACT_SHADOWS]; /* its track_u                        */
    int nob;                /* pass 1 for feasibility within the bound only:
                               entries compare by span (and devices below)  */
    int sh_best[PLAN_EXACT_SHADOWS]; /* its best final entry, or -1         */
    xent *ent;
    int64_t n_ent, cap_ent;
    int64_t created;        /* entries offered and kept (stats)              */
    int *scratch;           /* run_pass: the ids of the front it expands     */
    int cap_scratch;
    xfront *fr;
    int n_fr, cap_fr;
    int **head;             /* per set: C front-list heads, or NULL          */
    int *nstart, *nend;     /* per position: first and one-past-last of its node */
    int *pcls;              /* per end position 0..N: class_of without the bit */
    double spd_top;
    double need_coef;       /* m / (fastest speed x bound) x (1 - 1e-9): a
                               set of work W needs >= W x need_coef devices */
    double cap_top;         /* the largest device memory                     */
    double inv_cap;         /* (1 - 1e-9) / cap_top                          */
    int *qtab;              /* ceil(m / r) for r = 0..rtab (qtab[0] unused)  */
    double *pm, *infl;      /* per devices U already below (0..N): the least,
                               over replica counts r, of bytes per parameter
                               byte and in-flight microbatches of a stage at
                               depth U + r (memory grows with the depth, so
                               stages further up need at least as much)     */
    double pm_least, infl_least; /* the same for any depth and schedule      */
    /* the simulator's counts per stage, tabulated (NULL when too large):
     * in-flight microbatches and weight versions of a stage of r replicas
     * at depth D, at [D x (rtab + 1) + r] (exact memory: pipeline devices
     * dev_fixed or D), and at [r] for depth = devices = r (relaxed 1) */
    int rtab;
    int *tab_in, *tab_ver, *tab1_in, *tab1_ver;
    /* plan_allreduce_s's factors per link level and r <= rtab: per byte
     * and the latency term, the same operations in the same order */
    double *ar_pb[CLUSTER_LEVELS], *ar_lat[CLUSTER_LEVELS];
    int64_t steps, budget;
    int64_t tries;          /* stage sets tried (place calls): on a long chain
                               of cheap layers most are refused before a
                               step is counted, yet each costs time        */
    int64_t next_poll;      /* tries at which to poll the command's budget */
    int over;
} xdp;

/* xent.alive's bit for the lead schedule (the shadows use bits 0..n_sh-1) */
#define LEAD_BIT (1 << PLAN_EXACT_SHADOWS)

static inline double mind(double a, double b) { return a < b ? a : b; }
/* fmax for the search's values (never NaN, never -0), without the call */
static inline double maxd(double a, double b) { return a > b ? a : b; }

/* ------------------------------------------------------------ entries -- */

/* A fresh entry slot. */
static int new_entry(xdp *X)
{
    if (X->n_ent == X->cap_ent) {
        X->cap_ent = X->cap_ent ? X->cap_ent * 2 : 4096;
        X->ent = cl_realloc(X->ent, (size_t)X->cap_ent * sizeof *X->ent);
    }
    return (int)X->n_ent++;
}

/* a is at least as good as b for every completion.  When memory grows with
 * the depth, an entry whose placed stages use fewer devices is no worse (the
 * stages still to come sit less deep), so U joins the comparison. */
static inline int dominates_by(int track_u, int pass2, const xkey *a, const xkey *b, double ha,
                               double hb)
{
    if (a->d > b->d) return 0;
    if (track_u && a->U > b->U) return 0;
    if (!pass2) return a->B <= b->B;
    if (a->C != b->C) return a->C < b->C;
    if (ha != hb) return ha > hb;
    return a->U <= b->U;
}

static inline int dominates(const xdp *X, const xkey *a, const xkey *b)
{
    /* feasibility within the bound only (any_below): the least span wins */
    if (X->nob) return a->d <= b->d && (!X->track_u || a->U <= b->U);
    return dominates_by(X->track_u, X->pass2, a, b, a->H, b->H);
}

static xfront *front_of(xdp *X, int t, int c, int k, int create)
{
    if (!X->head[t]) {
        if (!create) return NULL;
        X->head[t] = cl_malloc((size_t)X->C * sizeof(int));
        for (int i = 0; i < X->C; i++) X->head[t][i] = -1;
    }
    for (int f = X->head[t][c]; f >= 0; f = X->fr[f].next)
        if (X->fr[f].k == k) return &X->fr[f];
    if (!create) return NULL;
    if (X->n_fr == X->cap_fr) {
        X->cap_fr = X->cap_fr ? X->cap_fr * 2 : 1024;
        X->fr = cl_realloc(X->fr, (size_t)X->cap_fr * sizeof *X->fr);
    }
    xfront *f = &X->fr[X->n_fr];
    *f = (xfront){.k = k, .next = X->head[t][c]};
    X->head[t][c] = X->n_fr++;
    return f;
}

/* Store entry (kv but alive `alive`; t, c, k, parent, edge, from, r as in
 * offer) in front f, in slot `reuse` when >= 0 (an entry just dropped from
 * f), else a new one. */
static inline void keep_entry(xdp *X, xfront *f, const xkey *kv, int alive, int reuse, int t,
                              int c, int k, int parent, int edge, int from, int r)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 2;
        f->ids = cl_realloc(f->ids, (size_t)f->cap * sizeof(int));
        f->key = cl_realloc(f->key, (size_t)f->cap * sizeof(xkey));
    }
    int id = reuse >= 0 ? reuse : new_entry(X);
    X->created++;
    xent *e = &X->ent[id];
    e->B = kv->B;
    e->C = kv->C;
    e->H = kv->H;
    for (int j = 0; j < X->n_sh; j++) e->Hs[j] = kv->Hs[j];
    e->alive = alive;
    e->U = kv->U;
    e->d = kv->d;
    e->t = t;
    e->c = c;
    e->k = k;
    e->parent = parent;
    e->edge = edge;
    e->from = from;
    e->r = r;
    xkey *nk = &f->key[f->n];
    nk->B = kv->B;
    nk->C = kv->C;
    nk->H = kv->H;
    nk->U = kv->U;
    nk->d = kv->d;
    nk->alive = alive;
    for (int j = 0; j < X->n_sh; j++) nk->Hs[j] = kv->Hs[j];
    f->ids[f->n++] = id;
}

/* The schedules among `mask` (LEAD_BIT and shadow bits) for which a
 * dominates b: dominates() for the lead, and for shadow j dominates_by()
 * under its own rule (headroom Hs[j], track_u sh_track[j]); the pass with
 * shadows is a pass 2 with nob 0; the shared comparisons once. */
static inline int dom_mask(const xdp *X, int track_mask, const xkey *a, const xkey *b, int mask)
{
    if (a->d > b->d) return 0;
    int ule = a->U <= b->U;
    if (!ule) mask &= ~track_mask;
    if (!mask) return 0;
    if (a->C != b->C) return a->C < b->C ? mask : 0;
    int out = 0;
    if (mask & LEAD_BIT) {
        if (a->H != b->H ? a->H > b->H : ule) out |= LEAD_BIT;
    }
    for (int j = 0; j < X->n_sh; j++)
        if (mask & (1 << j)) {
            if (a->Hs[j] != b->Hs[j] ? a->Hs[j] > b->Hs[j] : ule) out |= 1 << j;
        }
    return out;
}

/* offer with shadow schedules (X->n_sh > 0).  The front is the union of
 * the lead's and every shadow's own front: an entry's bit for schedule j
 * says it is in j's own front, where j's own run would have put it (by
 * induction: j's run offers exactly the extensions of the entries alive
 * for j, in the same order, and compares them by its own rule).  An
 * entry stays while it is alive for one of them. */
static void offer_sh(xdp *X, xfront *f, const xkey *kvp, int t, int c, int k, int parent,
                     int edge, int from, int r)
{
    assert(X->pass2 && !X->nob);
    const xkey *kv = kvp; /* read field by field: it was just stored */
    int alive = kv->alive;
    xkey *fkey = f->key;
    int n = f->n;
    int track_mask = X->track_u ? LEAD_BIT : 0;
    for (int j = 0; j < X->n_sh; j++)
        if (X->sh_track[j]) track_mask |= 1 << j;
    /* rejected by schedule j when an entry of its front dominates v */
    int rej = 0;
    for (int i = 0; i < n; i++) {
        int m = fkey[i].alive & alive & ~rej;
        if (m) rej |= dom_mask(X, track_mask, &fkey[i], kv, m);
    }
    alive &= ~rej;
    if (!alive) return;
    /* v then drops from j's front the entries it dominates by j's rule */
    int w = 0, reuse = -1;
    for (int i = 0; i < n; i++) {
        int a = fkey[i].alive, both = a & alive;
        if (both) a &= ~dom_mask(X, track_mask, kv, &fkey[i], both);
        if (a != fkey[i].alive) {
            fkey[i].alive = a;
            X->ent[f->ids[i]].alive = a;
        }
        if (a) {
            f->ids[w] = f->ids[i];
            fkey[w++] = fkey[i];
        } else if (reuse < 0) {
            reuse = f->ids[i];
        }
    }
    f->n = w;
    keep_entry(X, f, kv, alive, reuse, t, c, k, parent, edge, from, r);
}

/* Offer a new entry to the front of state (t, c, k): key kv, and how it
 * extends entry `parent` (edge; EDGE_STAGE: the stage set `from` \ t on r
 * replicas).  It is stored only when no entry of the front dominates it.
 *
 * Every offer to a front comes before the front is expanded (offers go to
 * smaller sets, or through gaps to classes expanded later), so an entry
 * dropped from its front has no extensions: its slot is reused.  Inlined
 * into the callers, so the key stays in registers. */
static inline __attribute__((always_inline)) void offer(xdp *X, const xkey *kv, int t, int c,
                                                        int k, int parent, int edge, int from,
                                                        int r)
{
    int fk = (X->p_fixed ? k : 0) * (X->N + 1) + (X->u_fronts ? kv->U : 0);
    /* the state's first front is usually the one (a single k) */
    int f0 = X->head[t] ? X->head[t][c] : -1;
    xfront *f = f0 >= 0 && X->fr[f0].k == fk ? &X->fr[f0] : front_of(X, t, c, fk, 1);
    if (X->n_sh) {
        offer_sh(X, f, kv, t, c, k, parent, edge, from, r);
        return;
    }
    xkey *fkey = f->key;
    int n = f->n;
    for (int i = 0; i < n; i++)
        if (dominates(X, &fkey[i], kv)) return;
    int w = 0, reuse = -1;
    for (int i = 0; i < n; i++) {
        if (!dominates(X, kv, &fkey[i])) {
            if (w != i) {
                f->ids[w] = f->ids[i];
                fkey[w] = fkey[i];
            }
            w++;
        } else if (reuse < 0) {
            reuse = f->ids[i];
        }
    }
    f->n = w;
    keep_entry(X, f, kv, kv->alive, reuse, t, c, k, parent, edge, from, r);
}

/* The key of entry x (the parts dominance compares). */
static inline xkey key_of(const xdp *X, const xent *x)
{
    xkey kv = {.B = x->B, .C = x->C, .H = x->H, .U = x->U, .d = x->d, .alive = x->alive};
    for (int j = 0; j < X->n_sh; j++) kv.Hs[j] = x->Hs[j];
    return kv;
}

/* ---------------------------------------------------------- positions -- */

/* The class of a state whose next stage ends at e (bit: positions mode's
 * node bit, ignored otherwise); pcls[e] holds the part without the bit. */
static inline int class_of(const xdp *X, int e, int bit)
{
    return X->pcls[e] + (X->mode == MODE_POSITIONS ? bit : 0);
}

/* Does the next stage, ending at e, share the node of the stage after it?
 * (positions mode: the bit; periodic: e inside a node; flat: always) */
static int shares_node(const xdp *X, int e, int c, int k)
{
    if (k == 0) return 0;
    switch (X->mode) {
    case MODE_FLAT: return 1;
    case MODE_PERIODIC: return e % X->K != 0;
    default: return c & 1;
    }
}

static void classify_positions(xdp *X)
{
    const plan_inst *I = X->I;
    int N = I->n_dev, same = 1;
    X->nstart = cl_malloc((size_t)N * sizeof(int));
    X->nend = cl_malloc((size_t)N * sizeof(int));
    for (int a = 0; a < N;) {
        int b = a;
        while (b < N && I->node[b] == I->node[a]) b++;
        for (int i = a; i < b; i++) {
            X->nstart[i] = a;
            X->nend[i] = b;
        }
        a = b;
    }
    X->spd_top = 0;
    for (int i = 0; i < N; i++) {
        X->spd_top = fmax(X->spd_top, I->speed[i]);
        if (I->speed[i] != I->speed[0] || I->mem_cap[i] != I->mem_cap[0]) same = 0;
    }
    int K = X->nend[0] - X->nstart[0];
    int uniform = N % K == 0;
    for (int i = 0; i < N && uniform; i++) uniform = X->nend[i] - X->nstart[i] == K;
    if (same && K == N) {
        X->mode = MODE_FLAT;
        X->C = 1;
    } else if (same && uniform) {
        X->mode = MODE_PERIODIC;
        X->K = K;
        X->C = K;
    } else {
        X->mode = MODE_POSITIONS;
        X->C = 2 * (N + 1);
    }
    X->pcls = cl_malloc((size_t)(N + 1) * sizeof(int));
    for (int e = 0; e <= N; e++)
        X->pcls[e] = X->mode == MODE_FLAT ? 0 : X->mode == MODE_PERIODIC ? e % X->K : 2 * e;
}

/* ---------------------------------------------------------- expansion -- */

/* Devices the layers of set t need at least, when the stages holding them
 * sit at places k and further from the end: within the bound (work spread
 * perfectly) and within memory (each stage keeps its parameters and at
 * least place-k in-flight stash on one device of at most cap_top). */
static inline double need(const xdp *X, int t, int below)
{
    if (t == 0) return 0;
    const plan_lattice *L = X->L;
    double pm = X->pm_least, infl = X->infl_least;
    if (!X->relaxed) {
        if (below > X->N) below = X->N;
        pm = X->pm[below];
        infl = X->infl[below];
    }
    double n_time = L->work[t] * X->need_coef;
    /* inv_cap carries the same 1e-9 slack, far above the rounding here */
    double n_mem = (L->params[t] * pm + L->stash[t] * infl) * X->inv_cap;
    return maxd(1.0, maxd(n_time, n_mem));
}

/* With exactly dev_fixed devices required: can a layout whose placed
 * stages use U devices, leaving set lo (needing at least need_lo devices),
 * still end on exactly dev_fixed?  (Entries that cannot are dead; they
 * share their front only with entries of the same U, equally dead.) */
static int dev_fixed_ok(const xdp *X, int U, int lo, double need_lo)
{
    if (lo == 0) return U == X->dev_fixed;
    return U + need_lo <= X->dev_fixed;
}

/* plan_allreduce_s, from the factors tabulated at setup. */
static inline double allreduce_of(const xdp *X, double P, int r, int level)
{
    if (r <= 1 || !X->I->comm) return 0;
    if (r > X->rtab) return plan_allreduce_s(X->I, P, r, level);
    return X->ar_pb[level][r] * P + X->ar_lat[level][r];
}

/* One stage's set sums, priced once for every block that may hold it. */
typedef struct xstage {
    double P, st, in, out;  /* parameters, stash, cut bytes before and after */
    double fixed, io;       /* plan_stage_mem_parts's count-free parts      */
    double least;           /* plan_stage_mem_least (relaxed 2)             */
} xstage;

static inline void stage_sums(const xdp *X, xstage *g, double P, double st, double in,
                              double out)
{
    g->P = P;
    g->st = st;
    g->in = in;
    g->out = out;
    g->fixed = P * (2.0 + X->I->optim_mult);
    g->io = 2.0 * (in + out);
    g->least = X->relaxed == 2 ? plan_stage_mem_least(X->I, P, st, in, out) : 0;
}

/* Memory of one device of stage g on r replicas at `depth` (the bits of
 * plan_stage_mem, plan_stage_mem_least or plan_stage_mem_counts). */
static inline __attribute__((always_inline)) double mem_of(const xdp *X, const xstage *g,
                                                            int depth, int r)
{
    if (X->relaxed == 2) return g->least;
    if (X->relaxed == 1) {
        if (X->tab1_in && r <= X->rtab)
            return plan_stage_mem_parts(g->fixed, g->P, g->st, g->io, X->tab1_in[r], X->tab1_ver[r]);
        return plan_stage_mem(X->I, g->P, g->st, g->in, g->out, r, r, r);
    }
    int devices = X->dev_fixed ? X->dev_fixed : depth;
    if (depth > devices) return HUGE_VAL;
    if (X->tab_in && r <= X->rtab && depth <= X->N) {
        size_t k = (size_t)depth * (size_t)(X->rtab + 1) + (size_t)r;
        return plan_stage_mem_parts(g->fixed, g->P, g->st, g->io, X->tab_in[k], X->tab_ver[k]);
    }
    return plan_stage_mem(X->I, g->P, g->st, g->in, g->out, depth, r, devices);
}

/* Headrooms of v (x plus stage g on r replicas) under the shadow
 * schedules: their memory never exceeds a device (plan_exact_mem_free). */
static inline void shadow_h(const xdp *X, xkey *v, const xent *x, const xstage *g, int r,
                            double cap)
{
    for (int j = 0; j < X->n_sh; j++) {
        size_t k = (size_t)v->U * (size_t)(X->rtab + 1) + (size_t)r;
        double mem = plan_stage_mem_parts(g->fixed, g->P, g->st, g->io, X->sh_in[j][k], X->sh_ver[j][k]);
        v->Hs[j] = mind(x->Hs[j], cap - mem);
    }
}

/* What place() needs of the entry it extends, the same for every set. */
typedef struct xrow {
    int rmax, qmin;         /* replicas at most here; ceil(m / rmax)          */
    double w_lo, w_hi;      /* qmin x (w / spd_top) > bound is false for work
                               w < w_lo and true for w > w_hi (rounding
                               margins far above the few ulps of the test)  */
    double bs;              /* bound x spd_top                               */
} xrow;

static inline void row_of(const xdp *X, const xent *x, xrow *R)
{
    const plan_inst *I = X->I;
    int e = X->N - x->d;
    R->rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (R->rmax > e) R->rmax = e;
    R->qmin = (I->m + R->rmax - 1) / R->rmax;
    double lim = X->bound * X->spd_top / R->qmin;
    R->w_lo = lim * (1 - 1e-12);
    R->w_hi = lim * (1 + 1e-12);
    R->bs = X->bound * X->spd_top;
}

/* Place the stage set `hi` \ `lo` ... for entry `xi` on every allowed block
 * ending at e.  Returns 0 when the loop over smaller sets may stop. */
static int place(xdp *X, int xi, const xent *restrict xp, const xrow *restrict R, int lo,
                 double bnd)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    /* xp is the caller's copy (X->ent moves when offers add entries) */
    const xent *restrict x = xp;
    int hi = x->t, e = X->N - x->d;
    double w = L->work[hi] - L->work[lo];
    int rmax = R->rmax;
    /* the least time any block could give (all-reduce >= 0): stop when even
     * that is over the bound, since later sets only add work */
    if (!(w < R->w_lo) && (w > R->w_hi || (double)R->qmin * (w / X->spd_top) > X->bound)) return 0;
    double P = L->params[hi] - L->params[lo], st = L->stash[hi] - L->stash[lo];
    int kk = x->k + 1;
    if (X->p_fixed && kk > X->p_fixed) return 1;
    /* the layers left in `lo` need at least need(lo) devices within the
     * bound; a block that leaves fewer cannot lead anywhere (the stages
     * holding them sit on at least x->U + 1 devices) */
    double need_lo = need(X, lo, x->U + 1);
    if (need_lo > e - 1) return 1;
    /* parameters and stash only grow with the stage: once they alone
     * overflow the largest device at the least depth, so does every larger
     * stage of a chain */
    double pm0 = X->relaxed ? X->pm_least : X->pm[x->U];
    double in0 = X->relaxed ? X->infl_least : X->infl[x->U];
    if (P * pm0 + st * in0 > X->cap_top) return !L->chain;

    /* fewer replicas than ceil(m / qmax) cannot meet the bound even on
     * the fastest device: ceil(m / r) x w / speed <= bound needs ceil(m / r)
     * <= qmax (one more allowed for rounding; the exact test follows) */
    double qmax = HUGE_VAL;
    if (!X->feas && w > 0 && X->bound < HUGE_VAL) {
        /* floor of a non-negative value below 2^62 by a cast */
        double qv = R->bs / w;
        if (qv < 4e18) qmax = (double)(long long)qv + 1;
    }

    int n1s = X->nstart[e - 1], n1e = X->nend[e - 1];
    int room = e - n1s;
    /* the widest block possible here; a stage needing more replicas than
     * that stays out of reach for every larger stage too */
    int r_cap = e == n1e && X->mode != MODE_FLAT ? rmax : room < rmax ? room : rmax;
    if (X->qtab[r_cap] > qmax) return 0;
    xstage g;
    stage_sums(X, &g, P, st, L->cut[lo], L->cut[hi]);
    double B0 = maxd(x->B, bnd);
    double spd = HUGE_VAL, cap = HUGE_VAL, wspd = 0;
    int prev_q = -1;
    /* blocks inside the node of position e - 1 */
    for (int r = 1; r <= room && r <= rmax; r++) {
        double s2 = mind(spd, I->speed[e - r]);
        if (s2 != spd || r == 1) wspd = w / s2; /* plan_stage_time's w / spd */
        spd = s2;
        cap = mind(cap, I->mem_cap[e - r]);
        if (need_lo > e - r) break; /* more replicas leave even less */
        if (X->dev_fixed && !dev_fixed_ok(X, x->U + r, lo, need_lo)) {
            if (x->U + r + need_lo > X->dev_fixed) break;
            continue;
        }
        int q = X->qtab[r];
        if (q > qmax) continue;
        if (X->mode == MODE_FLAT && q == prev_q) continue; /* fewer replicas do as well */
        prev_q = q;
        X->steps++;
        double ar = allreduce_of(X, P, r, CLUSTER_INTRA);
        double tm = (double)q * wspd + ar; /* plan_stage_time, same operations */
        if (tm > X->bound && !X->feas) continue;
        double mem = mem_of(X, &g, x->U + r, r);
        if (mem > cap) continue;
        int e2 = e - r;
        int bit = X->mode == MODE_POSITIONS && e2 > 0 && I->node[e2 - 1] == I->node[e2];
        xkey v = {.B = X->feas ? 0 : maxd(B0, tm), .C = x->C + ar + bnd,
                  .H = mind(x->H, cap - mem), .U = x->U + r, .d = x->d + r, .alive = x->alive};
        shadow_h(X, &v, x, &g, r, cap);
        offer(X, &v, lo, class_of(X, e2, bit), kk, xi, EDGE_STAGE, hi, r);
    }
    /* blocks of whole nodes ending at e (a node's end) */
    if (e == n1e && X->mode != MODE_FLAT) {
        double nspd = spd, ncap = cap; /* over node n1, complete if room == size */
        if (room > rmax) {
            nspd = HUGE_VAL;
            ncap = HUGE_VAL;
            for (int i = n1s; i < e; i++) {
                nspd = fmin(nspd, I->speed[i]);
                ncap = fmin(ncap, I->mem_cap[i]);
            }
        }
        int a = n1s;
        while (a > 0) {
            int b = X->nstart[a - 1];
            for (int i = b; i < a; i++) {
                nspd = mind(nspd, I->speed[i]);
                ncap = mind(ncap, I->mem_cap[i]);
            }
            a = b;
            int r = e - a;
            if (r > rmax || need_lo > e - r) break;
            if (X->dev_fixed && !dev_fixed_ok(X, x->U + r, lo, need_lo)) {
                if (x->U + r + need_lo > X->dev_fixed) break;
                continue;
            }
            X->steps++;
            double ar = allreduce_of(X, P, r, CLUSTER_INTER);
            double tm = plan_stage_time(I, w, r, nspd, ar);
            if (tm > X->bound && !X->feas) continue;
            double mem = mem_of(X, &g, x->U + r, r);
            if (mem > ncap) continue;
            xkey v = {.B = X->feas ? 0 : maxd(B0, tm), .C = x->C + ar + bnd,
                      .H = mind(x->H, ncap - mem), .U = x->U + r, .d = x->d + r,
                      .alive = x->alive};
            shadow_h(X, &v, x, &g, r, ncap);
            offer(X, &v, lo, class_of(X, a, 0), kk, xi, EDGE_STAGE, hi, r);
        }
    }
    return 1;
}

static void expand(xdp *X, int xi)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    xent x = X->ent[xi];
    int e = X->N - x.d;
    if (e <= 0) return;
    /* gaps: leave position e - 1 unused (positions), or move to the node's
     * start (periodic; any other gap can slide away without changing a cost) */
    if (X->mode == MODE_POSITIONS) {
        int bit = (x.c & 1) && e - 2 >= 0 && I->node[e - 2] == I->node[e - 1];
        xkey v = key_of(X, &x);
        v.d = x.d + 1;
        offer(X, &v, x.t, class_of(X, e - 1, bit), x.k, xi, EDGE_GAP, x.from, 0);
    } else if (X->mode == MODE_PERIODIC && e % X->K != 0) {
        xkey v = key_of(X, &x);
        v.d = x.d + e % X->K;
        offer(X, &v, x.t, 0, x.k, xi, EDGE_GAP, x.from, 0);
    }
    if (x.t == 0) return;
    if (need(X, x.t, x.U) > e) return;
    /* exactly dev_fixed devices: the stages still to come lie within the
     * e positions left */
    if (X->dev_fixed && X->dev_fixed - x.U > e) return;
    /* the boundary between the stage placed next and the one after it; a
     * block inside a node shares it with the next stage only then */
    double bnd = 0;
    int shares = shares_node(X, e, x.c, x.k);
    if (x.k > 0) {
        /* a block of whole nodes never shares; blocks inside the node of
         * e - 1 do exactly when `shares` */
        bnd = plan_boundary_s(I, L->cut[x.t], shares ? CLUSTER_INTRA : CLUSTER_INTER);
    }
    /* (a whole-node block ending at e shares nothing: when it is chosen, e
     * is a node end, where shares is already 0 in every mode) */
    if (bnd > X->bound && !X->feas) return;
    xrow R;
    row_of(X, &x, &R);
    int64_t tries = 0;
    if (L->chain) {
        for (int lo = x.t - 1; lo >= 0 && !X->over; lo--, tries++)
            if (!place(X, xi, &x, &R, lo, bnd)) break;
    } else {
        for (int64_t j = L->sub_off[x.t]; j < L->sub_off[x.t + 1] && !X->over; j++, tries++)
            if (!place(X, xi, &x, &R, L->sub[j], bnd)) break;
    }
    X->tries += tries;
    if (X->steps > X->budget || X->tries > X->budget) X->over = 1;
    if (X->tries + X->steps >= X->next_poll) {
        /* the command's wall-clock budget: the caller sees "over budget"
         * and asks cl_budget_over() which one */
        X->next_poll = X->tries + X->steps + 65536;
        if (cl_budget_over()) X->over = 1;
    }
}

/* ----------------------------------------------------------- one pass -- */

static void free_fronts(xdp *X, int t)
{
    if (!X->head[t]) return;
    for (int c = 0; c < X->C; c++)
        for (int f = X->head[t][c]; f >= 0; f = X->fr[f].next) {
            free(X->fr[f].ids);
            free(X->fr[f].key);
            X->fr[f].ids = NULL;
            X->fr[f].key = NULL;
            X->fr[f].n = X->fr[f].cap = 0;
        }
    free(X->head[t]);
    X->head[t] = NULL;
}

/* Run one pass; returns the best final entry id, or -1. */
static int run_pass(xdp *X)
{
    const plan_lattice *L = X->L;
    int S = L->n_sets;
    X->n_ent = 0;
    X->n_fr = 0;
    for (int t = 0; t < S; t++) X->head[t] = NULL;
    xkey s0 = {.B = 0, .C = 0, .H = HUGE_VAL, .U = 0, .d = 0};
    for (int j = 0; j < PLAN_EXACT_SHADOWS; j++) s0.Hs[j] = HUGE_VAL, X->sh_best[j] = -1;
    s0.alive = LEAD_BIT | ((1 << X->n_sh) - 1);
    offer(X, &s0, S - 1, class_of(X, X->N, 0), 0, -1, EDGE_START, 0, 0);
    int *order = cl_malloc((size_t)X->C * sizeof(int));
    int no = 0;
    if (X->mode == MODE_PERIODIC) {
        for (int c = 1; c < X->C; c++) order[no++] = c;
        order[no++] = 0;
    } else {
        for (int c = X->C - 1; c >= 0; c--) order[no++] = c;
    }
    for (int t = S - 1; t >= 0 && !X->over; t--) {
        if (!X->head[t]) continue;
        for (int oi = 0; oi < no && !X->over; oi++) {
            int c = order[oi];
            for (int f = X->head[t][c]; f >= 0 && !X->over; f = X->fr[f].next) {
                /* expansions never add to this front (gaps move to other
                 * classes), so iterate over a stable copy of the ids */
                int n = X->fr[f].n;
                if (n > X->cap_scratch) {
                    X->cap_scratch = 2 * n;
                    X->scratch = cl_realloc(X->scratch, (size_t)X->cap_scratch * sizeof(int));
                }
                if (n) memcpy(X->scratch, X->fr[f].ids, (size_t)n * sizeof(int));
                for (int i = 0; i < n && !X->over; i++) expand(X, X->scratch[i]);
            }
        }
        if (t > 0) free_fronts(X, t);
    }
    free(order);
    int best = -1;
    if (!X->over && X->head[0]) {
        for (int c = 0; c < X->C; c++)
            for (int f = X->head[0][c]; f >= 0; f = X->fr[f].next) {
                for (int i = 0; i < X->fr[f].n; i++) {
                    int id = X->fr[f].ids[i];
                    const xent *a = &X->ent[id];
                    if (a->k == 0 || (X->p_fixed && a->k != X->p_fixed) ||
                        (X->dev_fixed && a->U != X->dev_fixed))
                        continue;
                    /* each shadow schedule picks by its own headroom, in
                     * the same order, as its own run would */
                    for (int j = 0; j < X->n_sh; j++) {
                        if (!(a->alive & (1 << j))) continue;
                        int q = X->sh_best[j];
                        const xent *b = q >= 0 ? &X->ent[q] : NULL;
                        if (!b || a->C < b->C ||
                            (a->C == b->C && (a->Hs[j] != b->Hs[j] ? a->Hs[j] > b->Hs[j] : a->U < b->U)))
                            X->sh_best[j] = id;
                    }
                    if (X->n_sh && !(a->alive & LEAD_BIT)) continue; /* not in the lead's run */
                    if (best < 0) { best = id; continue; }
                    const xent *b = &X->ent[best];
                    int better;
                    if (!X->pass2) better = a->B < b->B;
                    else if (a->C != b->C) better = a->C < b->C;
                    else better = a->H != b->H ? a->H > b->H : a->U < b->U;
                    if (better) best = id;
                }
            }
    }
    for (int t = 0; t < S; t++) free_fronts(X, t);
    return best;
}

static void rebuild(const xdp *X, int id, plan_layout *out)
{
    int p = 0;
    for (int i = id; i >= 0; i = X->ent[i].parent)
        if (X->ent[i].edge == EDGE_STAGE) p++;
    plan_layout_alloc(out, p);
    int s = 0;
    out->cut[0] = 0;
    for (int i = id; i >= 0; i = X->ent[i].parent) {
        const xent *v = &X->ent[i];
        if (v->edge != EDGE_STAGE) continue;
        out->pos[s] = X->N - v->d;
        out->r[s] = v->r;
        out->cut[s + 1] = v->from;
        s++;
    }
    assert(s == p && out->cut[p] == X->L->n_sets - 1);
}

/* Set up the DP; returns 0, or -1 (with e) when the positions are too many. */
static int setup(xdp *X, const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                 plan_exact_stats *st, cl_err *e)
{
    memset(X, 0, sizeof *X);
    X->I = I;
    X->L = L;
    X->N = I->n_dev;
    X->budget = o && o->budget > 0 ? o->budget : DEFAULT_BUDGET;
    X->p_fixed = o ? o->p_fixed : 0;
    classify_positions(X);
    if (st) {
        memset(st, 0, sizeof *st);
        st->classes = X->C;
        st->mode = X->mode == MODE_FLAT ? "flat" : X->mode == MODE_PERIODIC ? "periodic" : "positions";
    }
    if (X->mode == MODE_POSITIONS && X->N > MAX_POSITION_DEVICES) {
        cl_fail(e, CL_ERUN,
                "exact search over %d devices of different kinds or in uneven nodes: more than %d positions",
                X->N, MAX_POSITION_DEVICES);
        free(X->nstart);
        free(X->nend);
        free(X->pcls);
        return -1;
    }
    X->head = cl_calloc((size_t)L->n_sets, sizeof(int *));
    X->dev_fixed = o ? o->devices_fixed : 0;
    X->dep = plan_mem_dependence(I);
    X->monotone = plan_mem_depth_monotone(I);
    X->cap_top = 0;
    for (int d = 0; d < X->N; d++) X->cap_top = fmax(X->cap_top, I->mem_cap[d]);
    X->inv_cap = (1 - 1e-9) / X->cap_top;
    /* memory multipliers per depth, least over the replica counts allowed */
    X->pm_least = plan_stage_mem_least(I, 1, 0, 0, 0);
    X->infl_least = plan_stage_mem_least(I, 0, 1, 0, 0);
    X->pm = cl_calloc((size_t)X->N + 1, sizeof(double));
    X->infl = cl_calloc((size_t)X->N + 1, sizeof(double));
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > X->N) rmax = X->N;
    X->rtab = rmax;
    X->qtab = cl_calloc((size_t)rmax + 1, sizeof(int));
    for (int r = 1; r <= rmax; r++) X->qtab[r] = (I->m + r - 1) / r;
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        const cluster_link *l = &I->link[lv];
        X->ar_pb[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        X->ar_lat[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        for (int r = 2; r <= rmax; r++) {
            X->ar_pb[lv][r] = 2.0 * (r - 1) / r / l->bw_Bps;
            X->ar_lat[lv][r] = 2.0 * (r - 1) * l->latency_s;
        }
    }
    if ((double)(X->N + 1) * (rmax + 1) <= TAB_MAX) {
        size_t n = (size_t)(X->N + 1) * (size_t)(rmax + 1);
        X->tab_in = cl_calloc(n, sizeof(int));
        X->tab_ver = cl_calloc(n, sizeof(int));
        X->tab1_in = cl_calloc((size_t)rmax + 1, sizeof(int));
        X->tab1_ver = cl_calloc((size_t)rmax + 1, sizeof(int));
        for (int r = 1; r <= rmax; r++) {
            X->tab1_in[r] = sched_inflight_rep(I->sched, r, r, r, I->m, I->chunks);
            X->tab1_ver[r] = sched_versions_rep(I->sched, r, r);
        }
        for (int D = 1; D <= X->N; D++) {
            int devs = X->dev_fixed ? X->dev_fixed : D;
            if (D > devs) continue; /* mem_of refuses these */
            for (int r = 1; r <= rmax && r <= D; r++) {
                size_t k = (size_t)D * (size_t)(rmax + 1) + (size_t)r;
                X->tab_in[k] = sched_inflight_rep(I->sched, devs, D, r, I->m, I->chunks);
                X->tab_ver[k] = sched_versions_rep(I->sched, D, r);
            }
        }
    }
    for (int U = 0; U <= X->N; U++) {
        double pm = HUGE_VAL, infl = HUGE_VAL;
        for (int r = 1; r <= rmax && U + r <= X->N; r++) {
            int D = U + r, devs = X->dev_fixed > D ? X->dev_fixed : D;
            int ci, cv;
            if (X->tab_in && devs == (X->dev_fixed ? X->dev_fixed : D)) {
                size_t k = (size_t)D * (size_t)(rmax + 1) + (size_t)r;
                ci = X->tab_in[k];
                cv = X->tab_ver[k];
            } else {
                ci = sched_inflight_rep(I->sched, devs, D, r, I->m, I->chunks);
                cv = sched_versions_rep(I->sched, D, r);
            }
            pm = fmin(pm, plan_stage_mem_counts(I, 1, 0, 0, 0, ci, cv));
            infl = fmin(infl, plan_stage_mem_counts(I, 0, 1, 0, 0, ci, cv));
        }
        X->pm[U] = pm < HUGE_VAL ? pm : X->pm_least;
        X->infl[U] = infl < HUGE_VAL ? infl : X->infl_least;
    }
    return 0;
}

static void teardown(xdp *X, plan_exact_stats *st)
{
    if (st) {
        st->entries += X->created;
        st->steps = X->steps;
    }
    free(X->ent);
    free(X->scratch);
    for (int f = 0; f < X->n_fr; f++) {
        free(X->fr[f].ids);
        free(X->fr[f].key);
    }
    free(X->fr);
    free(X->head);
    free(X->nstart);
    free(X->pcls);
    free(X->nend);
    free(X->pm);
    free(X->infl);
    free(X->qtab);
    free(X->tab_in);
    free(X->tab_ver);
    free(X->tab1_in);
    free(X->tab1_ver);
    for (int j = 0; j < PLAN_EXACT_SHADOWS; j++) {
        free(X->sh_in[j]);
        free(X->sh_ver[j]);
    }
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        free(X->ar_pb[lv]);
        free(X->ar_lat[lv]);
    }
}

/* One pass; relaxed as in xdp.relaxed; pass2 at threshold `bound`. */
static int pass(xdp *X, int relaxed, int pass2, double bound, plan_exact_stats *st)
{
    X->relaxed = relaxed;
    X->pass2 = pass2;
    X->bound = bound;
    int by_depth = !relaxed && X->dep != PLAN_MEM_FLAT;
    X->track_u = by_depth && X->monotone;
    X->u_fronts = (by_depth && !X->monotone) || X->dev_fixed > 0;
    X->need_coef = bound < HUGE_VAL ? X->I->m / (X->spd_top * bound) * (1 - 1e-9) : 0;
    if (st) st->passes++;
    return run_pass(X);
}

/* Does any layout fit in memory (with this relaxation)?  Cheap: with no
 * times to compare, fronts keep only span and devices.  A witness first:
 * the whole model as one stage on one device is a layout whenever the
 * stage and device counts are free (or 1), and any position can hold it
 * (positions mode reaches each through gaps; the other modes have one
 * kind of device). */
static int feasible(xdp *X, int relaxed, plan_exact_stats *st)
{
    const plan_lattice *L = X->L;
    int all = L->n_sets - 1;
    if (X->p_fixed <= 1 && X->dev_fixed <= 1 && all > 0) {
        int keep = X->relaxed;
        X->relaxed = relaxed;
        xstage g;
        stage_sums(X, &g, L->params[all], L->stash[all], L->cut[0], L->cut[all]);
        double mem = mem_of(X, &g, 1, 1);
        X->relaxed = keep;
        if (mem <= X->cap_top) return 1;
    }
    X->feas = 1;
    int b = pass(X, relaxed, 0, HUGE_VAL, st);
    X->feas = 0;
    return b >= 0;
}

/* A bottleneck no layout beats: the work spread perfectly over every
 * device, and the heaviest layer on its best replica count. */
static double global_lower(const xdp *X)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    double spd_sum = 0;
    for (int d = 0; d < X->N; d++) spd_sum += I->speed[d];
    double lb = I->m * L->work[L->n_sets - 1] / spd_sum;
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > X->N) rmax = X->N;
    int qmin = (I->m + rmax - 1) / rmax;
    for (int i = 0; i < I->n; i++)
        lb = fmax(lb, qmin * (plan_inst_work(I, i) / X->spd_top));
    return lb * (1 - 1e-9);
}

/* A bottleneck every layout stays under: all the work on the slowest
 * device, the largest all-reduce, the largest boundary. */
static double global_upper(const xdp *X)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    double spd_min = HUGE_VAL, cut_max = 0;
    for (int d = 0; d < X->N; d++) spd_min = fmin(spd_min, I->speed[d]);
    for (int t = 0; t < L->n_sets; t++) cut_max = fmax(cut_max, L->cut[t]);
    int r = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (r > X->N) r = X->N;
    double P = L->params[L->n_sets - 1];
    double ar = fmax(plan_allreduce_s(I, P, r, CLUSTER_INTRA), plan_allreduce_s(I, P, r, CLUSTER_INTER));
    double bnd = fmax(plan_boundary_s(I, cut_max, CLUSTER_INTRA), plan_boundary_s(I, cut_max, CLUSTER_INTER));
    return fmax(I->m * (L->work[L->n_sets - 1] / spd_min) + ar, bnd) * (1 + 1e-9);
}

/* Growth of the guesses: failed passes below the optimum cost more the
 * closer they get, the successful one more the looser it is; 1.15 was the
 * best of 1.05, 1.15 and 1.3 on `cleave bench plan`'s chains and on
 * resnet50 over 32 devices. */
#define GROW 1.15
/* Pass 1 under growing guesses of the bound: a pass under bound g is exact
 * whenever the optimum is <= g, and far cheaper than one under a loose
 * bound, because partial layouts that cannot finish within g on the devices
 * left are cut early (need_coef).  Guesses grow from a lower bound until
 * they pass the caller's bound or one every layout meets. */
static int pass1(xdp *X, int relaxed, double upper, double hint, double known_lb,
                 plan_exact_stats *st)
{
    double lb = fmax(global_lower(X), known_lb), U = fmin(upper, global_upper(X));
    if (hint > lb && hint < U) {
        /* a good guess ends the climb at once; a miss still proves the
         * optimum is above it */
        int b = pass(X, relaxed, 0, hint, st);
        if (X->over || b >= 0) return b;
        lb = hint;
    }
    double g = lb;
    for (int k = 0; lb > 0 && k < 200; k++) {
        g = k == 0 ? lb * 1.02 : g * (k < 40 ? GROW : 2);
        if (!(g < U)) break;
        int b = pass(X, relaxed, 0, g, st);
        if (X->over || b >= 0) return b;
        /* after a few misses, check that anything fits at all, so that an
         * instance where nothing does is not climbed all the way up */
        if (k == 5 && !feasible(X, relaxed, st)) return -1;
    }
    return pass(X, relaxed, 0, U, st);
}

/* Why a search stopped early: the command's wall-clock budget (budget.h),
 * or the search's own step budget. */
static int over_fail(const xdp *X, cl_err *e)
{
    if (cl_budget_over()) return cl_budget_fail(e, "searching partitions", "--algo merge for large models");
    return cl_fail(e, CL_ERUN, "exact search stopped after %lld steps and %lld stage sets tried (its budget: %lld)",
                   (long long)X->steps, (long long)X->tries, (long long)X->budget);
}

int plan_exact_lower(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                     double *lb, plan_exact_stats *st, cl_err *e)
{
    xdp X;
    *lb = HUGE_VAL;
    if (setup(&X, I, L, o, st, e)) return -1;
    /* o->lower_s: known to be below the optimum, the climb starts there */
    double known = o && o->lower_s > 0 && o->lower_s < HUGE_VAL ? o->lower_s : 0;
    int best = pass1(&X, 2, o ? o->upper_s : HUGE_VAL, o ? o->hint_s : 0, known, st);
    int over = X.over;
    if (!over && best >= 0) *lb = X.ent[best].B;
    teardown(&X, st);
    if (over)
        return over_fail(&X, e), -1;
    return 1;
}

/* Tabulate the shadow schedules' memory counts (like tab_in, exact
 * memory, devices = depth); 0 when the tables are too large. */
static int shadows_setup(xdp *X, int n_sh, const sched_kind *sh)
{
    const plan_inst *I = X->I;
    if (!X->tab_in) return 0;
    size_t n = (size_t)(X->N + 1) * (size_t)(X->rtab + 1);
    for (int j = 0; j < n_sh; j++) {
        X->sh_in[j] = cl_calloc(n, sizeof(int));
        X->sh_ver[j] = cl_calloc(n, sizeof(int));
        for (int D = 1; D <= X->N; D++)
            for (int r = 1; r <= X->rtab && r <= D; r++) {
                size_t k = (size_t)D * (size_t)(X->rtab + 1) + (size_t)r;
                X->sh_in[j][k] = sched_inflight_rep(sh[j], D, D, r, I->m, I->chunks);
                X->sh_ver[j][k] = sched_versions_rep(sh[j], D, r);
            }
        plan_inst y = *I;
        y.sched = sh[j];
        int dep = plan_mem_dependence(&y);
        if (dep == PLAN_MEM_BY_TOTAL) return 0;
        /* as pass() sets track_u (and u_fronts, which must be 0 like ours) */
        X->sh_track[j] = dep != PLAN_MEM_FLAT && plan_mem_depth_monotone(&y);
        if (dep != PLAN_MEM_FLAT && !X->sh_track[j]) return 0;
    }
    if (X->dep != PLAN_MEM_FLAT && !X->monotone) return 0; /* u_fronts */
    X->n_sh = n_sh;
    return 1;
}

int plan_exact(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
               plan_layout *out, plan_exact_stats *st, cl_err *e)
{
    return plan_exact_shadowed(I, L, o, 0, NULL, out, NULL, st, e);
}

int plan_exact_shadowed(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                        int n_sh, const sched_kind *sh, plan_layout *out, int *sh_ok,
                        plan_exact_stats *st, cl_err *e)
{
    assert(n_sh >= 0 && n_sh <= PLAN_EXACT_SHADOWS);
    for (int j = 0; j <= n_sh; j++) memset(&out[j], 0, sizeof out[j]);
    for (int j = 0; j < n_sh; j++) sh_ok[j] = 0;
    xdp X;
    if (setup(&X, I, L, o, st, e)) return -1;
    int dep = X.dep;
    assert(dep != PLAN_MEM_BY_TOTAL || X.dev_fixed > 0); /* the caller fixes the devices */
    double upper = o ? o->upper_s : HUGE_VAL;
    int best = -1;
    /* a known lower bound first: reaching it proves optimality */
    if (o && o->lower_s > 0 && o->lower_s < HUGE_VAL && o->lower_s <= upper) {
        int ok_sh = n_sh > 0 && !X.dev_fixed && shadows_setup(&X, n_sh, sh);
        best = pass(&X, 0, 1, o->lower_s, st);
        for (int j = 0; ok_sh && j < n_sh; j++)
            if (best >= 0 && !X.over && X.sh_best[j] >= 0) {
                rebuild(&X, X.sh_best[j], &out[1 + j]);
                sh_ok[j] = 1;
            }
        X.n_sh = 0;
        if (best < 0 && !X.over && o->probe) {
            teardown(&X, st);
            return 2;
        }
    }
    /* pass 1 with this schedule's least memory when its memory depends on
     * the stage's place (a relaxation), then pass 2 at that bottleneck; if
     * nothing fits there, both passes again with exact memory */
    int relax = dep != PLAN_MEM_FLAT && X.monotone && !X.p_fixed && !X.dev_fixed;
    for (int round = 0; round < 2 && best < 0 && !X.over; round++) {
        int relaxed = round == 0 && relax;
        if (round == 1 && !relax) break;
        /* o->lower_s bounds this optimum from below (a relaxation of it):
         * the climb starts there */
        double known = o && o->lower_s > 0 && o->lower_s < HUGE_VAL ? o->lower_s : 0;
        int b1 = pass1(&X, relaxed, upper, o ? o->hint_s : 0, known, st);
        if (X.over || b1 < 0) break; /* over budget, or nothing fits */
        best = pass(&X, 0, 1, X.ent[b1].B, st);
    }
    int over = X.over;
    if (!over && best >= 0) rebuild(&X, best, out);
    teardown(&X, st);
    if (over)
        return over_fail(&X, e), -1;
    return best >= 0;
}

int plan_exact_mem_free(const plan_inst *I, const plan_lattice *L)
{
    int N = I->n_dev, rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > N) rmax = N;
    if ((double)N * rmax > TAB_MAX) return 0; /* not worth proving */
    int in_max = 0, ver_max = 0;
    for (int D = 1; D <= N; D++)
        for (int r = 1; r <= rmax && r <= D; r++) {
            int a = sched_inflight_rep(I->sched, D, D, r, I->m, I->chunks);
            int b = sched_versions_rep(I->sched, D, r);
            if (a > in_max) in_max = a;
            if (b > ver_max) ver_max = b;
        }
    double cut_max = 0, cap_min = HUGE_VAL;
    for (int t = 0; t < L->n_sets; t++) cut_max = fmax(cut_max, L->cut[t]);
    for (int d = 0; d < N; d++) cap_min = fmin(cap_min, I->mem_cap[d]);
    int all = L->n_sets - 1;
    double M = plan_stage_mem_counts(I, L->params[all], L->stash[all], cut_max, cut_max, in_max, ver_max);
    return M <= cap_min;
}

int plan_exact_any_below(const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
                         double g, int *any, plan_exact_stats *st, cl_err *e)
{
    xdp X;
    *any = 1;
    if (setup(&X, I, L, o, st, e)) return -1;
    X.nob = 1;
    int b = pass(&X, 2, 0, nextafter(g, 0), st);
    int over = X.over;
    teardown(&X, st);
    if (over)
        return over_fail(&X, e), -1;
    *any = b >= 0;
    return 1;
}
