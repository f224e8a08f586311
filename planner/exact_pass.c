/* exact_pass.c - one pass of the exact search (see exact_dp.h): the
 * transitions out of an entry (place, expand) and the walk over the sets,
 * largest first, that expands every front once (exact_dp_run_pass).  What the
 * pass optimises and at which bound is exact_dp_pass's choice (exact_climb.c);
 * the entries land in the fronts of exact_front.h.
 */
#include <string.h>

#include "base/budget.h"
#include "exact_front.h"

/* Does the next stage, ending at e, share the node of the stage after it?
 * (positions mode: the bit; periodic: e inside a node; flat: always) */
static int shares_node(const exact_dp *X, int e, int c, int k)
{
    if (k == 0) return 0;
    switch (X->pos.mode) {
    case MODE_FLAT: return 1;
    case MODE_PERIODIC: return e % X->pos.K != 0;
    default: return c & 1;
    }
}

/* Devices the layers of set t need at least, when the stages holding them
 * sit at places k and further from the end: within the bound (work spread
 * perfectly) and within memory (each stage keeps its parameters and at
 * least place-k in-flight stash on one device of at most cap_top). */
static inline double need(const exact_dp *X, int t, int below)
{
    if (t == 0) return 0;
    const plan_lattice *L = X->L;
    double pm = X->tab.pm_least, infl = X->tab.infl_least;
    if (!X->run.relaxed) {
        if (below > X->pos.N) below = X->pos.N;
        pm = X->tab.pm[below];
        infl = X->tab.infl[below];
    }
    double n_time = L->work[t] * X->run.need_coef;
    /* inv_cap carries the same PLAN_BOUND_SLACK, far above the rounding here */
    double n_mem = (L->params[t] * pm + L->stash[t] * infl) * X->tab.inv_cap;
    return maxd(1.0, maxd(n_time, n_mem));
}

/* need() under schedule bit b's own multipliers (a pass with shadows:
 * exact memory, relaxed 0). */
static inline double need_of(const exact_dp *X, int b, int t, int below)
{
    if (t == 0) return 0;
    const plan_lattice *L = X->L;
    const double *pm, *infl;
    exact_dp_tables_of(X, b, &pm, &infl);
    if (below > X->pos.N) below = X->pos.N;
    double n_time = L->work[t] * X->run.need_coef;
    double n_mem = (L->params[t] * pm[below] + L->stash[t] * infl[below]) * X->tab.inv_cap;
    return maxd(1.0, maxd(n_time, n_mem));
}

/* With shadows, each schedule keeps its own run's prunes: the schedules
 * (bits) among `live` still placing a stage of r replicas here, each
 * leaving at least need[b's index] devices (the lead's at index
 * PLAN_EXACT_SHADOWS): place()'s `need_lo > e - r` per schedule. */
static inline int live_within(int live, const double *need_b, int e, int r)
{
    for (int m = live; m; m &= m - 1) {
        int b = m & -m;
        if (need_b[b == LEAD_BIT ? PLAN_EXACT_SHADOWS : __builtin_ctz((unsigned)b)] > e - r) live &= ~b;
    }
    return live;
}

/* The most replicas r for which live_within(live, need_b, e, r) keeps
 * every schedule of `live`: a schedule is dropped when need > e - r, and
 * for the integer e - r that is e - r < ceil(need), so it stays up to
 * r = e - ceil(need).  Between two changes place() skips the per-schedule
 * tests. */
static inline int live_upto(int live, const double *need_b, int e)
{
    int most = e;
    for (int m = live; m; m &= m - 1) {
        int b = m & -m;
        int r = e - (int)ceil(need_b[b == LEAD_BIT ? PLAN_EXACT_SHADOWS : __builtin_ctz((unsigned)b)]);
        most = r < most ? r : most;
    }
    return most;
}

/* Count one step without per-schedule prunes (no shadows, or only shadows
 * whose memory never binds with the lead's: every schedule's prunes are
 * then the lead's, and all their steps count in budget.steps). */
static inline void count_one(exact_dp *X, int alive)
{
    X->budget.steps++;
    if (X->sh.n && (alive & LEAD_BIT)) X->sh.lead_own++;
}

/* Count one step for the schedules `live` (with shadows): budget.steps is
 * the lead's own run's (and those counted with it), sh.steps[j] shadow
 * j's own. */
static inline void count_step(exact_dp *X, int live)
{
    if (live & X->sh.lead_mask) X->budget.steps++;
    if (live & LEAD_BIT) X->sh.lead_own++;
    for (int m = live & ~X->sh.lead_mask; m; m &= m - 1) X->sh.steps[__builtin_ctz((unsigned)m)]++;
}

/* With exactly dev_fixed devices required: can a layout whose placed
 * stages use U devices, leaving set lo (needing at least need_lo devices),
 * still end on exactly dev_fixed?  (Entries that cannot are dead; they
 * share their front only with entries of the same U, equally dead.) */
static int dev_fixed_ok(const exact_dp *X, int U, int lo, double need_lo)
{
    if (lo == 0) return U == X->dev_fixed;
    return U + need_lo <= X->dev_fixed;
}

/* plan_allreduce_s, from the factors tabulated at setup. */
static inline double allreduce_of(const exact_dp *X, double P, int r, int level)
{
    if (r <= 1 || !X->I->comm) return 0;
    if (r > X->tab.rtab) return plan_allreduce_s(X->I, P, r, level);
    return X->tab.ar_pb[level][r] * P + X->tab.ar_lat[level][r];
}

/* Headrooms of v (x plus stage g on r replicas) under the shadow
 * schedules; returns the shadows (bits) among `live` whose memory fits the
 * block (cap), the ones that keep v. */
static inline int shadow_h(const exact_dp *X, dp_key *v, const dp_entry *x, const xstage *g, int r,
                           double cap, int live)
{
    int fits = 0;
    for (int j = 0; j < X->sh.n; j++) {
        size_t k = (size_t)v->U * (size_t)(X->tab.rtab + 1) + (size_t)r;
        double mem = plan_stage_mem_parts(xfixed(X, g, r), g->vb, g->st, g->io, X->sh.in[j][k], X->sh.ver[j][k]);
        v->Hs[j] = mind(x->Hs[j], cap - mem);
        if ((live & (1 << j)) && mem <= cap) fits |= 1 << j;
    }
    return fits;
}

/* What place() needs of the entry it extends, the same for every set. */
typedef struct xrow {
    int rmax, qmin;         /* replicas at most here; ceil(m / rmax)          */
    double w_lo, w_hi;      /* qmin x (w / spd_top) > bound is false for work
                               w < w_lo and true for w > w_hi (rounding
                               margins far above the few ulps of the test)  */
    double bs;              /* bound x spd_top                               */
    /* with shadows, per schedule (the lead's at [PLAN_EXACT_SHADOWS]): its
     * multipliers at the entry's devices below plus one (need() of what a
     * stage leaves) and at them (place's test of the stage itself) */
    double pm1[PLAN_EXACT_SHADOWS + 1], in1[PLAN_EXACT_SHADOWS + 1];
    double pm0[PLAN_EXACT_SHADOWS + 1], in0[PLAN_EXACT_SHADOWS + 1];
} xrow;

static inline void row_of(const exact_dp *X, const dp_entry *x, xrow *R)
{
    const plan_inst *I = X->I;
    int e = X->pos.N - x->d;
    R->rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (R->rmax > e) R->rmax = e;
    R->qmin = (I->m + R->rmax - 1) / R->rmax;
    double lim = X->run.bound * X->pos.spd_top / R->qmin;
    R->w_lo = lim * (1 - PLAN_TIGHT_SLACK);
    R->w_hi = lim * (1 + PLAN_TIGHT_SLACK);
    R->bs = X->run.bound * X->pos.spd_top;
}

/* Is a stage of work w over the bound on any block here (place's first
 * test; true for every larger w too)? */
static inline int stage_over(const exact_dp *X, const xrow *R, double w)
{
    return !(w < R->w_lo) && (w > R->w_hi || (double)R->qmin * (w / X->pos.spd_top) > X->run.bound);
}

/* Place the stage set `hi` \ `lo` ... for entry `xi` on every allowed block
 * ending at e.  Returns 0 when the loop over smaller sets may stop.  With
 * shadows, *stopped holds the schedules whose own run has stopped that
 * loop (place returns 0 once all of x's have). */
static int place(exact_dp *X, int xi, const dp_entry *restrict xp, const xrow *restrict R, int lo,
                 double bnd, int *stopped)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    /* xp is the caller's copy (X->store.ent moves when offers add entries) */
    const dp_entry *restrict x = xp;
    int feas = X->run.goal == GOAL_FITS;
    int hi = x->t, e = X->pos.N - x->d;
    double w = L->work[hi] - L->work[lo];
    int rmax = R->rmax;
    /* the least time any block could give (all-reduce >= 0): stop when even
     * that is over the bound, since later sets only add work */
    if (stage_over(X, R, w)) return 0;
    double P = L->params[hi] - L->params[lo], st = L->stash[hi] - L->stash[lo];
    int kk = x->k + 1;
    if (X->p_fixed && kk > X->p_fixed) return 1;
    /* the layers left in `lo` need at least need(lo) devices within the
     * bound; a block that leaves fewer cannot lead anywhere (the stages
     * holding them sit on at least x->U + 1 devices) */
    double need_lo = 0;
    /* with shadows: the schedules still placing here, and what each needs
     * (the lead's at [PLAN_EXACT_SHADOWS]) */
    int live = 0, split = X->sh.split;
    double need_b[PLAN_EXACT_SHADOWS + 1];
    if (!split) {
        need_lo = need(X, lo, x->U + 1);
        if (need_lo > e - 1) return 1;
        /* parameters and stash only grow with the stage: once they alone
         * overflow the largest device at the least depth, so does every
         * larger stage of a chain */
        double pm0 = X->run.relaxed ? X->tab.pm_least : X->tab.pm[x->U];
        double in0 = X->run.relaxed ? X->tab.infl_least : X->tab.infl[x->U];
        if (P * pm0 + st * in0 > X->tab.cap_top) return !L->chain;
    } else {
        /* the same tests, each schedule under its own multipliers */
        /* need_of(X, b, lo, x->U + 1), the same operations, off R */
        double n_time = L->work[lo] * X->run.need_coef;
        for (int m = x->alive & ~*stopped; m; m &= m - 1) {
            int b = m & -m, bi = b == LEAD_BIT ? PLAN_EXACT_SHADOWS : __builtin_ctz((unsigned)b);
            need_b[bi] = lo == 0 ? 0
                                 : maxd(1.0, maxd(n_time, (L->params[lo] * R->pm1[bi] + L->stash[lo] * R->in1[bi]) *
                                                              X->tab.inv_cap));
            if (need_b[bi] > e - 1) continue;
            if (P * R->pm0[bi] + st * R->in0[bi] > X->tab.cap_top) {
                if (L->chain) *stopped |= b;
                continue;
            }
            live |= b;
        }
        if (!live) return (x->alive & ~*stopped) != 0;
    }

    /* fewer replicas than ceil(m / qmax) cannot meet the bound even on
     * the fastest device: ceil(m / r) x w / speed <= bound needs ceil(m / r)
     * <= qmax (one more allowed for rounding; the exact test follows) */
    double qmax = HUGE_VAL;
    if (!feas && w > 0 && X->run.bound < HUGE_VAL) {
        /* floor of a non-negative value below 2^62 by a cast */
        double qv = R->bs / w;
        if (qv < 4e18) qmax = (double)(long long)qv + 1;
    }

    int n1s = X->pos.nstart[e - 1], n1e = X->pos.nend[e - 1];
    int room = e - n1s;
    /* the widest block possible here; a stage needing more replicas than
     * that stays out of reach for every larger stage too */
    int r_cap = e == n1e && X->pos.mode != MODE_FLAT ? rmax : room < rmax ? room : rmax;
    if (X->tab.qtab[r_cap] > qmax) return 0;
    xstage g;
    stage_sums(X, &g, P, st, L->cut[lo], L->cut[hi]);
    double B0 = maxd(x->B, bnd);
    double spd = HUGE_VAL, cap = HUGE_VAL, wspd = 0;
    int prev_q = -1;
    int live_r = split ? live_upto(live, need_b, e) : 0; /* live stays as is up to it */
    /* blocks inside the node of position e - 1 */
    for (int r = 1; r <= room && r <= rmax; r++) {
        double s2 = mind(spd, I->speed[e - r]);
        if (s2 != spd || r == 1) wspd = w / s2; /* plan_stage_time's w / spd */
        spd = s2;
        cap = mind(cap, I->mem_cap[e - r]);
        if (split) {
            if (r > live_r) {
                if (!(live = live_within(live, need_b, e, r))) break;
                live_r = live_upto(live, need_b, e);
            }
        } else if (need_lo > e - r) {
            break; /* more replicas leave even less */
        }
        if (X->dev_fixed && !dev_fixed_ok(X, x->U + r, lo, need_lo)) {
            if (x->U + r + need_lo > X->dev_fixed) break;
            continue;
        }
        if (r < I->rep_fixed) continue; /* one replica count for all stages */
        int q = X->tab.qtab[r];
        if (q > qmax) continue;
        if (X->pos.mode == MODE_FLAT && q == prev_q) continue; /* fewer replicas do as well */
        prev_q = q;
        if (split) count_step(X, live);
        else count_one(X, x->alive);
        double ar = allreduce_of(X, P, r, CLUSTER_INTRA);
        double tm = (double)q * wspd + ar; /* plan_stage_time, same operations */
        if (tm > X->run.bound && !feas) continue;
        double mem = mem_of(X, &g, x->U + r, r);
        if (mem > cap && !split) continue;
        int e2 = e - r;
        int bit = X->pos.mode == MODE_POSITIONS && e2 > 0 && I->node[e2 - 1] == I->node[e2];
        dp_key v = {.B = feas ? 0 : maxd(B0, tm), .C = x->C + ar + bnd,
                  .H = mind(x->H, cap - mem), .U = x->U + r, .d = x->d + r, .alive = x->alive};
        if (split) {
            /* kept by the schedules whose memory fits */
            v.alive = ((live & LEAD_BIT) && mem <= cap ? LEAD_BIT : 0) | shadow_h(X, &v, x, &g, r, cap, live);
            if (!v.alive) continue;
        } else if (X->sh.n) {
            shadow_h(X, &v, x, &g, r, cap, 0);
        }
        offer(X, &v, lo, class_of(X, e2, bit), kk, xi, EDGE_STAGE, hi, r);
    }
    /* blocks of whole nodes ending at e (a node's end) */
    if (e == n1e && X->pos.mode != MODE_FLAT) {
        /* over node n1, complete if room == size (the minima of a node are
         * tabulated: the same values, taken in another order) */
        double nspd = room > rmax ? X->pos.node_spd[n1s] : spd, ncap = room > rmax ? X->pos.node_cap[n1s] : cap;
        int a = n1s;
        while (a > 0) {
            int b = X->pos.nstart[a - 1];
            nspd = mind(nspd, X->pos.node_spd[b]);
            ncap = mind(ncap, X->pos.node_cap[b]);
            a = b;
            int r = e - a;
            if (r > rmax) break;
            if (split) {
                if (r > live_r) {
                    if (!(live = live_within(live, need_b, e, r))) break;
                    live_r = live_upto(live, need_b, e);
                }
            } else if (need_lo > e - r) {
                break;
            }
            if (X->dev_fixed && !dev_fixed_ok(X, x->U + r, lo, need_lo)) {
                if (x->U + r + need_lo > X->dev_fixed) break;
                continue;
            }
            if (r < I->rep_fixed) continue;
            if (split) count_step(X, live);
            else count_one(X, x->alive);
            double ar = allreduce_of(X, P, r, CLUSTER_INTER);
            double tm = plan_stage_time(I, w, r, nspd, ar);
            if (tm > X->run.bound && !feas) continue;
            double mem = mem_of(X, &g, x->U + r, r);
            if (mem > ncap && !split) continue;
            dp_key v = {.B = feas ? 0 : maxd(B0, tm), .C = x->C + ar + bnd,
                      .H = mind(x->H, ncap - mem), .U = x->U + r, .d = x->d + r,
                      .alive = x->alive};
            if (split) {
                v.alive = ((live & LEAD_BIT) && mem <= ncap ? LEAD_BIT : 0) | shadow_h(X, &v, x, &g, r, ncap, live);
                if (!v.alive) continue;
            } else if (X->sh.n) {
                shadow_h(X, &v, x, &g, r, ncap, 0);
            }
            offer(X, &v, lo, class_of(X, a, 0), kk, xi, EDGE_STAGE, hi, r);
        }
    }
    return 1;
}

/* Is set u a proper subset of set t? */
static inline int proper_subset(const plan_lattice *L, int u, int t)
{
    const uint64_t *a = &L->bits[(size_t)u * (size_t)L->words], *b = &L->bits[(size_t)t * (size_t)L->words];
    for (int q = 0; q < L->words; q++)
        if (a[q] & ~b[q]) return 0;
    return u != t;
}

/* The stages x->t \ lo of a DAG over the subsets lo of x->t in the walk's
 * order (most work first, ties: the larger id first; exact_subs.c), read
 * off the lattice's list of every set in that order (plan_lattice.by_work)
 * from the first set that can be a subset and can still lead anywhere:
 *   - a subset has no more work than its superset, so the list starts at
 *     the first set of at most x->t's work;
 *   - place() passes over a set lo whose layers need more devices than the
 *     e - 1 positions left (need(lo) > e - 1), and need(lo) is at least
 *     work(lo) x need_coef, the same product: every set before the first
 *     where that product is at most e - 1 would be passed over;
 *   - place() stops at the first stage over the bound, and so does every
 *     later stage: a set of the list whose stage would be over it ends the
 *     list, subset or not.
 * So place() sees the same sets in the same order, less the ones it would
 * pass over without a step.  Returns the sets tried, or -1 when it would
 * pass over none (the caller walks the subsets instead). */
static int64_t subsets_by_work(exact_dp *X, int xi, const dp_entry *x, const xrow *R, int e, double bnd,
                               int *stopped)
{
    const plan_lattice *L = X->L;
    const int *ord = L->by_work;
    double wt = L->work[x->t], coef = X->run.need_coef;
    int64_t a = 0, b = L->n_sets;
    while (a < b) { /* first set of at most wt's work */
        int64_t mid = a + (b - a) / 2;
        if (L->work[ord[mid]] > wt) a = mid + 1;
        else b = mid;
    }
    int64_t c = a;
    b = L->n_sets;
    while (c < b) { /* first set whose layers may fit the positions left */
        int64_t mid = c + (b - c) / 2;
        if (L->work[ord[mid]] * coef > e - 1) c = mid + 1;
        else b = mid;
    }
    /* nothing passed over: the walk (exact_subs.c) visits subsets only,
     * where the list would also pass the sets that are not */
    if (c == a) return -1;
    int64_t tries = 0;
    for (int64_t j = c; j < L->n_sets && !X->budget.over; j++) {
        int lo = ord[j];
        if (!proper_subset(L, lo, x->t)) {
            if (stage_over(X, R, wt - L->work[lo])) break;
            continue;
        }
        tries++;
        if (!place(X, xi, x, R, lo, bnd, stopped)) break;
    }
    return tries;
}

static void expand(exact_dp *X, int xi)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    dp_entry x = X->store.ent[xi];
    int e = X->pos.N - x.d;
    if (e <= 0) return;
    /* gaps: leave position e - 1 unused (positions), or move to the node's
     * start (periodic; any other gap can slide away without changing a cost) */
    if (X->pos.mode == MODE_POSITIONS) {
        int bit = (x.c & 1) && e - 2 >= 0 && I->node[e - 2] == I->node[e - 1];
        dp_key v = key_of(X, &x);
        v.d = x.d + 1;
        offer(X, &v, x.t, class_of(X, e - 1, bit), x.k, xi, EDGE_GAP, x.from, 0);
    } else if (X->pos.mode == MODE_PERIODIC && e % X->pos.K != 0) {
        dp_key v = key_of(X, &x);
        v.d = x.d + e % X->pos.K;
        offer(X, &v, x.t, 0, x.k, xi, EDGE_GAP, x.from, 0);
    }
    if (x.t == 0) return;
    if (X->sh.split) {
        /* the schedules whose own run expands x (need() under each's own
         * multipliers); place() reads them off x.alive */
        int live = 0;
        for (int m = x.alive; m; m &= m - 1)
            if (!(need_of(X, m & -m, x.t, x.U) > e)) live |= m & -m;
        if (!live) return;
        x.alive = live;
    } else if (need(X, x.t, x.U) > e) {
        return;
    }
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
    if (bnd > X->run.bound && X->run.goal != GOAL_FITS) return;
    xrow R;
    row_of(X, &x, &R);
    for (int m = X->sh.split ? x.alive : 0; m; m &= m - 1) {
        int b = m & -m, bi = b == LEAD_BIT ? PLAN_EXACT_SHADOWS : __builtin_ctz((unsigned)b);
        const double *pm, *infl;
        exact_dp_tables_of(X, b, &pm, &infl);
        int below = x.U + 1 > X->pos.N ? X->pos.N : x.U + 1;
        R.pm1[bi] = pm[below];
        R.in1[bi] = infl[below];
        R.pm0[bi] = pm[x.U];
        R.in0[bi] = infl[x.U];
    }
    int64_t tries = 0;
    int stopped = 0; /* (with shadows: place) */
    if (L->chain) {
        /* the stage placed holds layers lo .. x.t - 1: it may start at lo
         * only up to cut_max (plan_inst) */
        for (int lo = x.t - 1; lo >= 0 && !X->budget.over; lo--, tries++)
            if (lo <= I->cut_max && !place(X, xi, &x, &R, lo, bnd, &stopped)) break;
    } else {
        /* the subsets of x.t, smallest stage first: off the list by work
         * when it passes over some, else walked (exact_subs.c) */
        tries = L->by_work ? subsets_by_work(X, xi, &x, &R, e, bnd, &stopped) : -1;
        if (tries < 0) {
            tries = 0;
            const dp_subs *G = &X->subs;
            const int *kept = L->subs ? L->subs->list[x.t] : NULL; /* stays put while x.t is expanded */
            int64_t n_kept = L->subs ? L->subs->n[x.t] : 0;
            for (int64_t j = 0; !X->budget.over; j++, tries++) {
                int lo = j < n_kept ? kept[j] : G->t == x.t && j < G->n ? G->list[j] : exact_dp_sub(X, x.t, j);
                if (lo < 0 || !place(X, xi, &x, &R, lo, bnd, &stopped)) break;
            }
        }
    }
    X->budget.tries += tries;
    if (X->budget.steps > X->budget.limit || X->budget.tries > X->budget.limit) X->budget.over = 1;
    if (X->budget.tries + X->budget.steps >= X->budget.next_poll) {
        /* the command's wall-clock budget: the caller sees "over budget"
         * and asks cl_budget_over() which one */
        X->budget.next_poll = X->budget.tries + X->budget.steps + 65536;
        if (cl_budget_over()) X->budget.over = 1;
    }
}

/* ----------------------------------------------------------- one pass -- */

/* Free the fronts of set t (their entries stay: rebuild reads them). */
static void free_fronts(exact_dp *X, int t)
{
    dp_store *S = &X->store;
    if (!S->head[t]) return;
    for (int c = 0; c < X->pos.C; c++)
        for (int f = S->head[t][c]; f >= 0; f = S->fr[f].next) {
            if (S->fr[f].cap) front_block_put(S, S->fr[f].key, S->fr[f].cap);
            S->fr[f].ids = NULL;
            S->fr[f].key = NULL;
            S->fr[f].n = S->fr[f].cap = 0;
        }
    pool_push(&S->head_pool, S->head[t]);
    S->head[t] = NULL;
}

int exact_dp_run_pass(exact_dp *X)
{
    const plan_lattice *L = X->L;
    dp_store *S = &X->store;
    int n_sets = L->n_sets;
    S->n_ent = 0;
    S->n_fr = 0;
    /* a new generation empties the front index (exact_front.h) */
    if (++S->fgen == 0) {
        if (S->fidx) memset(S->fidx, 0, (size_t)S->fidx_cap * sizeof *S->fidx);
        S->fgen = 1;
    }
    for (int t = 0; t < n_sets; t++) S->head[t] = NULL;
    dp_key s0 = {.B = 0, .C = 0, .H = HUGE_VAL, .U = 0, .d = 0};
    for (int j = 0; j < PLAN_EXACT_SHADOWS; j++) s0.Hs[j] = HUGE_VAL, X->sh.best[j] = -1;
    s0.alive = LEAD_BIT | ((1 << X->sh.n) - 1);
    offer(X, &s0, n_sets - 1, class_of(X, X->pos.N, 0), 0, -1, EDGE_START, 0, 0);
    int *order = cl_malloc((size_t)X->pos.C * sizeof(int));
    int no = 0;
    if (X->pos.mode == MODE_PERIODIC) {
        for (int c = 1; c < X->pos.C; c++) order[no++] = c;
        order[no++] = 0;
    } else {
        for (int c = X->pos.C - 1; c >= 0; c--) order[no++] = c;
    }
    for (int t = n_sets - 1; t >= 0 && !X->budget.over; t--) {
        if (!S->head[t]) continue;
        for (int oi = 0; oi < no && !X->budget.over; oi++) {
            int c = order[oi];
            for (int f = S->head[t][c]; f >= 0 && !X->budget.over; f = S->fr[f].next) {
                /* expansions never add to this front (gaps move to other
                 * classes), so iterate over a stable copy of the ids */
                int n = S->fr[f].n;
                if (n > S->cap_scratch) {
                    S->cap_scratch = 2 * n;
                    S->scratch = cl_realloc(S->scratch, (size_t)S->cap_scratch * sizeof(int));
                }
                if (n) memcpy(S->scratch, S->fr[f].ids, (size_t)n * sizeof(int));
                for (int i = 0; i < n && !X->budget.over; i++) expand(X, S->scratch[i]);
            }
        }
        if (t > 0) free_fronts(X, t);
    }
    free(order);
    int best = -1;
    if (!X->budget.over && S->head[0]) {
        for (int c = 0; c < X->pos.C; c++)
            for (int f = S->head[0][c]; f >= 0; f = S->fr[f].next) {
                for (int i = 0; i < S->fr[f].n; i++) {
                    int id = S->fr[f].ids[i];
                    const dp_entry *a = &S->ent[id];
                    if (a->k == 0 || (X->p_fixed && a->k != X->p_fixed) ||
                        (X->dev_fixed && a->U != X->dev_fixed))
                        continue;
                    /* each shadow schedule picks by its own rule */
                    if (X->sh.n) exact_dp_shadow_pick(X, id);
                    if (X->sh.n && !(a->alive & LEAD_BIT)) continue; /* not in the lead's run */
                    if (best < 0) { best = id; continue; }
                    const dp_entry *b = &S->ent[best];
                    int better;
                    if (X->run.goal != GOAL_COMM) better = a->B < b->B;
                    else if (a->C != b->C) better = a->C < b->C;
                    else better = a->H != b->H ? a->H > b->H : a->U < b->U;
                    if (better) best = id;
                }
            }
    }
    for (int t = 0; t < n_sets; t++) free_fronts(X, t);
    return best;
}
