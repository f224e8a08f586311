/* exact_setup.c - what the exact search knows before its first pass (see
 * exact_dp.h): the classes of the device line's positions (dp_places) and
 * the tables of memory and time every transition reads (dp_tables).  Built
 * once per search so that the passes, run many times over, never call the
 * simulator's counts or the cost model's all-reduce in their inner loop.
 *
 * Position classes.  With identical devices in one node every position is
 * alike (one class); with identical devices in equal nodes of K only the
 * offset in the node matters (K classes, and the smaller span wins inside a
 * class because shifting a layout by whole nodes changes nothing); otherwise
 * each position is its own class (times 2: does the next stage share the
 * node of the stage after it).
 *
 * The last node may hold fewer than K (the first k devices of a cluster of
 * equal nodes, as the searches on fewer devices see them: 47 = 5 x 8 + 7).
 * Offsets still decide: stages are placed from the right end, so of two
 * entries of one class the one further right (e) has, to its left, every
 * position the other (e - jK) has, shifted by j whole nodes: the other's
 * blocks inside a node land inside one node (the short node's first
 * positions are those of a whole node's), its whole-node blocks on whole
 * nodes, and its boundaries on the same side of a node's edge.  So the
 * smaller span still wins, and node starts are still the offsets 0.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/schedule.h"
#include "exact_front.h"

/* inner steps of one search when the caller gives no budget */
#define DEFAULT_BUDGET ((int64_t)4000000000)
/* the most devices positions mode (2 (N + 1) classes per set) takes */
#define MAX_POSITION_DEVICES 512

static void classify_positions(exact_dp *X)
{
    const plan_inst *I = X->I;
    dp_places *P = &X->pos;
    int N = I->n_dev, same = 1;
    P->nstart = cl_malloc((size_t)N * sizeof(int));
    P->nend = cl_malloc((size_t)N * sizeof(int));
    P->node_spd = cl_malloc((size_t)N * sizeof(double));
    P->node_cap = cl_malloc((size_t)N * sizeof(double));
    for (int a = 0; a < N;) {
        int b = a;
        while (b < N && I->node[b] == I->node[a]) b++;
        double spd, cap;
        plan_block_least(I, a, b - a, &spd, &cap);
        for (int i = a; i < b; i++) {
            P->nstart[i] = a;
            P->nend[i] = b;
            P->node_spd[i] = spd;
            P->node_cap[i] = cap;
        }
        a = b;
    }
    P->spd_top = 0;
    for (int i = 0; i < N; i++) {
        P->spd_top = fmax(P->spd_top, I->speed[i]);
        if (I->speed[i] != I->speed[0] || I->mem_cap[i] != I->mem_cap[0]) same = 0;
    }
    int K = P->nend[0] - P->nstart[0];
    int uniform = !X->positions;
    /* (the last node may be shorter: see the top) */
    for (int i = 0; i < N && uniform; i++) {
        int size = P->nend[i] - P->nstart[i];
        uniform = size == K || (P->nend[i] == N && size < K);
    }
    if (same && K == N) {
        P->mode = MODE_FLAT;
        P->C = 1;
    } else if (same && uniform) {
        P->mode = MODE_PERIODIC;
        P->K = K;
        P->C = K;
    } else {
        P->mode = MODE_POSITIONS;
        P->C = 2 * (N + 1);
    }
    P->pcls = cl_malloc((size_t)(N + 1) * sizeof(int));
    for (int e = 0; e <= N; e++)
        P->pcls[e] = P->mode == MODE_FLAT ? 0 : P->mode == MODE_PERIODIC ? e % P->K : 2 * e;
}

/* The most in-flight microbatches and weight versions a stage of r
 * replicas holds at any depth of a pipeline as deep as itself (buf: 2 (N +
 * 1) ints of scratch). */
static void counts_most(sched_kind sk, int r, int m, int chunks, int N, int *buf, int *in_max, int *ver_max)
{
    int *in = buf, *ver = buf + N + 1;
    sched_inflight_depths(sk, 0, r, m, chunks, N, in, ver);
    *in_max = *ver_max = 0;
    for (int D = r; D <= N; D++) {
        if (in[D] > *in_max) *in_max = in[D];
        if (ver[D] > *ver_max) *ver_max = ver[D];
    }
}

int exact_dp_mem_most(const plan_inst *I, const plan_lattice *L, dp_mem_most *w)
{
    int N = I->n_dev, rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > N) rmax = N;
    if ((double)N * rmax > TAB_MAX) return 0; /* not worth proving */
    /* Every schedule's in-flight and version counts fall (or stay) as the
     * replicas r grow: each is a ceiling of something over r (core/
     * sched_memory.c).  So one replica gives the most, and only the depths
     * need trying: N of them, not N x rmax (65,536 per call on 256 devices,
     * a sixth of GPT-3's whole tensor-parallel question). */
    w->sched = I->sched;
    int *buf = cl_malloc(2 * ((size_t)N + 1) * sizeof *buf);
    counts_most(I->sched, 1, I->m, I->chunks, N, buf, &w->in_max, &w->ver_max);
    free(buf);
    w->cut_max = 0;
    w->cap_min = HUGE_VAL;
    for (int t = 0; t < L->n_sets; t++) w->cut_max = fmax(w->cut_max, L->cut[t]);
    for (int d = 0; d < N; d++) w->cap_min = fmin(w->cap_min, I->mem_cap[d]);
    return 1;
}

int exact_dp_mem_most_fits(const plan_inst *I, const dp_mem_most *w, double P, double st)
{
    /* one replica: ZeRO's sharding only lowers the model state */
    return plan_stage_mem_counts(I, P, st, w->cut_max, w->cut_max, w->in_max, w->ver_max, 1) <= w->cap_min;
}

/* Can no stage a pass under `bound` places overflow a device, at any depth
 * (dp_pass_state.c_first)?  Always so when the whole model fits
 * (plan_exact_mem_free).  On a chain, a stage the pass places on r
 * replicas runs q = ceil(m / r) microbatches of its work w on a device no
 * faster than the fastest, within the bound: w <= bound x fastest speed /
 * q; its parameters and stash only grow with its layers, so the longest
 * such run of layers from each start is the one to check (two pointers
 * over the prefix sums).  Fewer replicas mean shorter runs but more
 * microbatches in flight, so each q is checked with the counts of the
 * fewest replicas that give it (the most in flight and weight versions at
 * any depth, and the least sharded model state: the counts never grow
 * with r, test sim_closed, and ZeRO only shards further), not the longest
 * run of the most
 * replicas with the counts of one replica, which proved nothing where
 * many replicas allow long runs (fbp at 256 microbatches on 256 devices:
 * the whole model on 256 replicas, held as 256 in flight).  With the
 * device count fixed (zb-h1) the memory counts are not the ones tabulated
 * here: never. */
int exact_dp_free_at(const exact_dp *X, double bound)
{
    return exact_dp_free_with(X, X->tab.most_ok, &X->tab.most, X->tab.mem_free, bound);
}

int exact_dp_free_with(const exact_dp *X, int most_ok, const dp_mem_most *most, int mem_free, double bound)
{
    const plan_inst *I = X->I;
    const plan_lattice *L = X->L;
    if (X->dev_fixed || !most_ok) return 0;
    if (mem_free) return 1;
    if (!L->chain || !(bound < HUGE_VAL)) return 0;
    int N = X->pos.N, m = I->m, rmax = m < I->max_replicas ? m : I->max_replicas;
    if (rmax > N) rmax = N;
    int n = L->n_sets - 1, ok = 1;
    int *buf = cl_malloc(2 * ((size_t)N + 1) * sizeof *buf);
    for (int r = 1, r_next; r <= rmax && ok; r = r_next) {
        int q = (m + r - 1) / r;
        /* the replica counts with this q: r .. the last r with m / r <= q */
        r_next = q == 1 ? rmax + 1 : (m - 1) / (q - 1) + 1;
        int in_r, ver_r;
        counts_most(most->sched, r, m, I->chunks, N, buf, &in_r, &ver_r);
        double wmax = bound * X->pos.spd_top / q * (1 + PLAN_BOUND_SLACK);
        for (int lo = 0, hi = 0; lo < n && ok; lo++) {
            if (hi < lo) hi = lo;
            while (hi < n && L->work[hi + 1] - L->work[lo] <= wmax) hi++;
            ok = hi == lo || plan_stage_mem_counts(I, L->params[hi] - L->params[lo], L->stash[hi] - L->stash[lo],
                                                   most->cut_max, most->cut_max, in_r, ver_r, r) <= most->cap_min;
        }
    }
    free(buf);
    return ok;
}

/* ------------------------------------------- memory-count tables -- */

/* A schedule's memory counts over the device line (dp_tables.in, ver, in1,
 * ver1, pm, infl) read the instance's microbatches, chunks, replica limit,
 * device count and model state, the schedule and the fixed device count,
 * nothing else; every schedule and device count of one microbatch count
 * asks for them again (1,800 searches set up on GPT-3's tensor and
 * recomputation question, a quarter of its time when each built its own).
 * So an instance keeps the ones built (plan_inst.tabs), keyed by all of
 * those, up to MEM_TABS of them and MEM_TAB_CELLS cells in all; past that
 * a search builds its own and frees them. */
#define MEM_TABS 16
#define MEM_TAB_CELLS 4e6

struct plan_mem_tabs {
    int n;
    double cells;
    mem_tab tab[MEM_TABS];
};

plan_mem_tabs *plan_mem_tabs_new(void) { return cl_calloc(1, sizeof(plan_mem_tabs)); }

static void mem_tab_free(mem_tab *t)
{
    free(t->in);
    free(t->ver);
    free(t->in1);
    free(t->ver1);
    free(t->pm);
    free(t->infl);
}

void plan_mem_tabs_free(plan_mem_tabs *c)
{
    for (int i = 0; c && i < c->n; i++) mem_tab_free(&c->tab[i]);
    free(c);
}

static int state_eq(const plan_state_f *a, const plan_state_f *b)
{
    return a->weights == b->weights && a->grads == b->grads && a->master == b->master &&
           a->master_grads == b->master_grads && a->moments == b->moments && a->optim == b->optim &&
           a->rep == b->rep && a->shard == b->shard && a->version == b->version &&
           a->grads_sharded == b->grads_sharded && a->opt_sharded == b->opt_sharded;
}

/* Build the tables of key t (its key fields set); pm_least and infl_least
 * stand in for depths no replica count reaches.  One replica count at a
 * time: its in-flight microbatches and weight versions at every depth
 * (sched_inflight_depths, pipelines of max(dev_fixed, depth) devices) fill
 * its column of the tables, and each depth U below a stage takes the
 * least multipliers over the replica counts r that fit (the same set of
 * values as a loop over U first, so the same least). */
static void mem_tab_build(const plan_inst *I, mem_tab *t, double pm_least, double infl_least)
{
    int N = t->N, rmax = t->rmax, dev_fixed = t->dev_fixed;
    sched_kind sk = t->sched;
    if ((double)(N + 1) * (rmax + 1) <= TAB_MAX) {
        size_t n = (size_t)(N + 1) * (size_t)(rmax + 1);
        t->in = cl_calloc(n, sizeof(int));
        t->ver = cl_calloc(n, sizeof(int));
        t->in1 = cl_calloc((size_t)rmax + 1, sizeof(int));
        t->ver1 = cl_calloc((size_t)rmax + 1, sizeof(int));
        for (int r = 1; r <= rmax; r++) {
            t->in1[r] = sched_inflight_rep(sk, r, r, r, t->m, t->chunks);
            t->ver1[r] = sched_versions_rep(sk, r, r);
        }
    }
    /* memory multipliers per depth, least over the replica counts allowed;
     * plan_stage_mem_counts's parts that no count changes once per replica
     * count (the same sum, so the same bits) */
    t->pm = cl_malloc(((size_t)N + 1) * sizeof(double));
    t->infl = cl_malloc(((size_t)N + 1) * sizeof(double));
    for (int U = 0; U <= N; U++) t->pm[U] = t->infl[U] = HUGE_VAL;
    /* RB replica counts' columns at a time, so that the tables (a row per
     * depth) are written RB cells at a time: a column written straight
     * into them strides a row per cell, and those writes were most of the
     * tables' time (GPT-3's tensor question: 1,024 depths x 1,024 counts) */
    enum { RB = 16 };
    size_t col = (size_t)N + 1;
    int *ci = cl_malloc(RB * col * sizeof *ci), *cv = cl_malloc(RB * col * sizeof *cv);
    double vb1 = plan_mem_version(I, 1), vb0 = plan_mem_version(I, 0), io = plan_mem_io(0, 0);
    int rtop = rmax < N ? rmax : N;
    /* the tables hold depths within a fixed pipeline (mem_of refuses
     * deeper ones) */
    int dtab = dev_fixed && dev_fixed < N ? dev_fixed : N;
    for (int r0 = 1; r0 <= rtop; r0 += RB) {
        int nb = rtop - r0 + 1 < RB ? rtop - r0 + 1 : RB;
        for (int j = 0; j < nb; j++) {
            int r = r0 + j, *cij = ci + (size_t)j * col, *cvj = cv + (size_t)j * col;
            sched_inflight_depths(sk, dev_fixed, r, t->m, t->chunks, N, cij, cvj);
            double w1 = plan_mem_weights(I, 1, r), w0 = plan_mem_weights(I, 0, r);
            for (int U = 0; U + r <= N; U++) {
                int D = U + r;
                t->pm[U] = mind(t->pm[U], plan_stage_mem_parts(w1, vb1, 0, io, cij[D], cvj[D]));
                t->infl[U] = mind(t->infl[U], plan_stage_mem_parts(w0, vb0, 1, io, cij[D], cvj[D]));
            }
        }
        for (int D = r0; t->in && D <= dtab; D++) {
            size_t row = (size_t)D * (size_t)(rmax + 1);
            for (int j = 0; j < nb && r0 + j <= D; j++) {
                t->in[row + (size_t)(r0 + j)] = ci[(size_t)j * col + (size_t)D];
                t->ver[row + (size_t)(r0 + j)] = cv[(size_t)j * col + (size_t)D];
            }
        }
    }
    for (int U = 0; U <= N; U++) {
        if (!(t->pm[U] < HUGE_VAL)) t->pm[U] = pm_least;
        if (!(t->infl[U] < HUGE_VAL)) t->infl[U] = infl_least;
    }
    free(ci);
    free(cv);
}

/* The tables of schedule sk with dev_fixed devices on I's instance: kept
 * ones, or built and kept, or (the instance keeping no more) built into
 * *own, which the caller frees (mem_tab_free). */
static const mem_tab *mem_tab_get(const plan_inst *I, sched_kind sk, int dev_fixed, int rmax, mem_tab *own,
                                  int *kept)
{
    *kept = 0;
    mem_tab key = {.sched = sk, .dev_fixed = dev_fixed, .N = I->n_dev, .rmax = rmax, .m = I->m,
                   .chunks = I->chunks, .state = I->state};
    plan_mem_tabs *c = I->tabs;
    for (int i = 0; c && i < c->n; i++) {
        const mem_tab *t = &c->tab[i];
        if (t->sched == sk && t->dev_fixed == dev_fixed && t->N == key.N && t->rmax == rmax && t->m == key.m &&
            t->chunks == key.chunks && state_eq(&t->state, &key.state)) {
            *kept = 1;
            return t;
        }
    }
    double cells = (double)(key.N + 1) * (rmax + 1);
    mem_tab *t = c && c->n < MEM_TABS && c->cells + cells <= MEM_TAB_CELLS ? &c->tab[c->n] : own;
    if (t == own) mem_tab_free(own); /* (empty unless asked twice) */
    *t = key;
    mem_tab_build(I, t, plan_stage_mem_least(I, 1, 0, 0, 0), plan_stage_mem_least(I, 0, 1, 0, 0));
    if (t != own) {
        c->n++;
        c->cells += cells;
    }
    return t;
}

/* The tables of dp_tables (the question's fields of X set). */
static void build_tables(exact_dp *X)
{
    const plan_inst *I = X->I;
    dp_tables *T = &X->tab;
    int N = X->pos.N;
    T->dep = plan_mem_dependence(I);
    T->monotone = plan_mem_depth_monotone(I);
    T->cap_top = 0;
    for (int d = 0; d < N; d++) T->cap_top = fmax(T->cap_top, I->mem_cap[d]);
    T->inv_cap = (1 - PLAN_BOUND_SLACK) / T->cap_top;
    T->pm_least = plan_stage_mem_least(I, 1, 0, 0, 0);
    T->infl_least = plan_stage_mem_least(I, 0, 1, 0, 0);
    int rmax = I->m < I->max_replicas ? I->m : I->max_replicas;
    if (rmax > N) rmax = N;
    T->rtab = rmax;
    T->qtab = cl_calloc((size_t)rmax + 1, sizeof(int));
    for (int r = 1; r <= rmax; r++) T->qtab[r] = (I->m + r - 1) / r;
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        T->ar_pb[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        T->ar_lat[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        for (int r = 2; r <= rmax; r++) plan_allreduce_factors(I, r, lv, &T->ar_pb[lv][r], &T->ar_lat[lv][r]);
    }
    const mem_tab *t = mem_tab_get(I, I->sched, X->dev_fixed, rmax, &X->own_tab[0], &X->tabs_kept);
    T->in = t->in;
    T->ver = t->ver;
    T->in1 = t->in1;
    T->ver1 = t->ver1;
    T->pm = t->pm;
    T->infl = t->infl;
}

/* A shadow schedule's tables (exact_shadow.c): as its own search's, with
 * no device count fixed. */
void exact_dp_shadow_tables(exact_dp *X, int j, sched_kind sk, const int **in, const int **ver,
                            const double **pm, const double **infl)
{
    int kept;
    const mem_tab *t = mem_tab_get(X->I, sk, 0, X->tab.rtab, &X->own_tab[1 + j], &kept);
    *in = t->in;
    *ver = t->ver;
    *pm = t->pm;
    *infl = t->infl;
}

int exact_dp_setup(exact_dp *X, const plan_inst *I, const plan_lattice *L, const plan_exact_opts *o,
              plan_exact_stats *st, cl_err *e)
{
    memset(X, 0, sizeof *X);
    X->I = I;
    X->L = L;
    X->pos.N = I->n_dev;
    X->budget.limit = o && o->budget > 0 ? o->budget : DEFAULT_BUDGET;
    X->p_fixed = o ? o->p_fixed : 0;
    X->c_first_rule = o ? o->c_first : 0;
    X->fine_climb = o ? o->fine_climb : 0;
    X->positions = o ? o->positions : 0;
    classify_positions(X);
    if (st) {
        memset(st, 0, sizeof *st);
        st->classes = X->pos.C;
        st->mode = X->pos.mode == MODE_FLAT ? "flat" : X->pos.mode == MODE_PERIODIC ? "periodic" : "positions";
    }
    if (X->pos.mode == MODE_POSITIONS && X->pos.N > MAX_POSITION_DEVICES) {
        cl_fail(e, CL_ERUN,
                "exact search over %d devices of different kinds or in uneven nodes: more than %d positions",
                X->pos.N, MAX_POSITION_DEVICES);
        free(X->pos.nstart);
        free(X->pos.nend);
        free(X->pos.node_spd);
        free(X->pos.node_cap);
        free(X->pos.pcls);
        return -1;
    }
    X->store.head = cl_calloc((size_t)L->n_sets, sizeof(int *));
    X->subs.t = -1;
    X->dev_fixed = o ? o->devices_fixed : 0;
    build_tables(X);
    if (st) st->tabs_kept = X->tabs_kept;
    X->tab.most_ok = exact_dp_mem_most(I, L, &X->tab.most);
    int all = L->n_sets - 1;
    X->tab.mem_free = X->tab.most_ok && exact_dp_mem_most_fits(I, &X->tab.most, L->params[all], L->stash[all]);
    return 0;
}

void exact_dp_teardown(exact_dp *X, plan_exact_stats *st)
{
    if (st) {
        st->entries += X->store.created;
        st->steps = X->budget.steps;
    }
    dp_store *S = &X->store;
    free(S->ent);
    free(S->scratch);
    for (int f = 0; f < S->n_fr; f++) free(S->fr[f].key); /* (ids in its block) */
    for (int b = 0; b < 32; b++) pool_free(&S->pool[b]);
    pool_free(&S->head_pool);
    free(S->fr);
    free(S->fidx);
    free(S->head);
    exact_dp_subs_free(X);
    free(X->pos.nstart);
    free(X->pos.pcls);
    free(X->pos.nend);
    free(X->pos.node_spd);
    free(X->pos.node_cap);
    dp_tables *T = &X->tab;
    free(T->qtab);
    for (int j = 0; j <= PLAN_EXACT_SHADOWS; j++) mem_tab_free(&X->own_tab[j]);
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        free(T->ar_pb[lv]);
        free(T->ar_lat[lv]);
    }
}
