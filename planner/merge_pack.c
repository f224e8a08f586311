/* merge_pack.c - partition-and-merge's second step: merging layers into
 * stages under a bisected bound on the bottleneck (see merge.h and
 * docs/planner.md, "Partition and merge"). */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/budget.h"
#include "core/schedule.h"
#include "exact.h"
#include "merge.h"

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
#define PK_FAILS 160       /* failed packings a bisection remembers (it runs
                               at most 64 + 80)                              */

typedef struct packer {
    const plan_inst *I;
    const plan_lattice *L;
    int n, N, kmax;         /* kmax: stages exactly, or 0 for any count      */
    int *rs, nr;            /* replica counts tried, ascending               */
    int C;                  /* classes: 1, or positions 0..N (pos_mode)      */
    int mem_free;           /* no stage can overflow: skip memory checks     */
    /* memory is checked under G schedules at once, Ig[g] (I with each; Ig[0]
     * is I): a packing shared by schedules whose memory can bind, valid
     * while every memory check comes out the same under all of them
     * (diverged: one did not; plan_merge_pack_group) */
    int G, diverged;
    plan_inst *Ig;
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
     * at depth D on rs[a] replicas under Ig[g], at [(g x (N + 1) + D) x nr +
     * a], filled on first use (-1: not yet) */
    int *tab_in, *tab_ver;
    int *jt;                /* per (replica count, class): the loose reach */
    /* per (replica count, class) ac: the first block ac' <= ac of the same
     * replica count whose loose check (pk_check_loose) reads the same
     * values (replicas, link, speed, memory, in-flight counts): the two
     * reach as far under every bound, so they share ac''s reach (jt), and
     * a reach found at one (layer, stages) serves both (reach_at) */
    int *jsig;
    int *reach, *reach_at;
    /* per (replica count a, class c), at a x C + c: where states of class
     * c put the block (first position, -1: nowhere; replicas), its slowest
     * speed, least memory and all-reduce link (with one class and devices
     * that differ: the fastest and the largest, the block being unknown) */
    int *b_pos, *b_r, *b_lv;
    int *b_in, *b_ver;      /* the fewest in-flight microbatches and weight
                               versions at any depth (memory not free), at
                               g x nr x C + ac under Ig[g]                  */
    double *b_spd, *b_cap;
    /* plan_allreduce_factors per link level and replica count 2..rmax
     * (pk_allreduce): a check prices one all-reduce, and the factors' search
     * of the ring's shape was a tenth of a long chain's whole question */
    int ar_rmax;
    double *ar_pb[CLUSTER_LEVELS], *ar_lat[CLUSTER_LEVELS];
    /* A packing reads its bound B only through comparisons "x <= B" (the
     * boundaries, the checks' times), so any bound B' with pass_max <= B'
     * < fail_min (the largest x that came out within B, the smallest that
     * did not) makes every comparison, hence the whole packing, the same.
     * pk_run keeps the two; the bisection keeps them for each packing that
     * failed (fail_lo, fail_hi) and does not repeat a failure it already
     * knows (pk_try). */
    double pass_max, fail_min;
    double fail_lo[PK_FAILS], fail_hi[PK_FAILS];
    int n_fails;
} packer;

/* plan_allreduce_s(P->I, bytes, r, level), the same operations, from the
 * factors tabulated at setup. */
static inline double pk_allreduce(const packer *P, double bytes, int r, int level)
{
    if (r <= 1 || !P->I->comm) return 0;
    if (r > P->ar_rmax) return plan_allreduce_s(P->I, bytes, r, level);
    return P->ar_pb[level][r] * bytes + P->ar_lat[level][r];
}

/* The outcome of "x <= B" (1: within), kept in P's pass_max and fail_min
 * (NaN, false under any B, is neither). */
static inline int pk_within(packer *P, double x, double B)
{
    if (x <= B) {
        if (x > P->pass_max) P->pass_max = x;
        return 1;
    }
    if (x < P->fail_min) P->fail_min = x;
    return 0;
}

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

/* Is the boundary at cut j, between the block at pos of r replicas and
 * the first stage of state sj, within the bound on the link joining them
 * (bok_lv)?  pk_check's first test; the walks of positions mode, where the
 * block is the class's, ask it first (most of their candidates fail it). */
static inline int pk_bnd_ok(const packer *P, int pos, int r, size_t sj, int j)
{
    return j >= P->n || P->bok_lv[plan_link_level(P->I, pos, r, P->fpos[sj], P->r[sj])][j];
}

/* Can layers i..j-1 on about rs[a] replicas precede the placed state sj
 * (layers j..) within B?  Sets *at to the block's first position and
 * *r_out to its replicas (pk_place).  ac: the block of rs[a] and the
 * state's class (b_*), which in positions mode is where the block goes:
 * a state of class c starts at position c. */
static int pk_check(packer *P, double B, int i, int j, size_t sj, int a, size_t ac, int *at, int *r_out)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    int r, pos, level;
    double spd = P->spd0, cap = P->cap0;
    if (P->e[sj] < 0) return 0;
    if (P->pos_mode) {
        pos = P->b_pos[ac];
        r = P->b_r[ac];
        spd = P->b_spd[ac];
        cap = P->b_cap[ac];
        level = P->b_lv[ac];
        if (pos < 0) return 0;
    } else {
        pos = pk_place(P, P->e[sj], P->rs[a], &r);
        if (pos < 0) return 0;
        if (!P->uni) plan_block_least(I, pos, r, &spd, &cap);
        level = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
    }
    if (!pk_bnd_ok(P, pos, r, sj, j)) return 0; /* the boundary (plan_boundary_s on that link) is over B */
    double Pb = L->params[j] - L->params[i];
    double t = plan_stage_time(I, L->work[j] - L->work[i], r, spd, pk_allreduce(P, Pb, r, level));
    if (!pk_within(P, t, B)) return 0;
    if (!P->mem_free) {
        int depth = P->used[sj] + r;
        if (depth > P->N) return 0;
        int fits0 = 1;
        for (int g = 0; g < P->G; g++) {
            const plan_inst *Ig = &P->Ig[g];
            size_t ti = ((size_t)g * (P->N + 1) + depth) * P->nr + a, t0 = (size_t)depth * P->nr + a;
            int fits;
            if (r != P->rs[a]) {
                /* grown to whole nodes: not tabulated */
                double mem = plan_stage_mem(Ig, Pb, L->stash[j] - L->stash[i], L->cut[i], L->cut[j], depth, r,
                                            P->devices_arg ? P->N : depth);
                fits = !(mem > cap);
            } else {
                if (P->tab_in[ti] < 0) {
                    P->tab_in[ti] = sched_inflight_rep(Ig->sched, P->devices_arg ? P->N : depth, depth, r,
                                                       I->m, I->chunks);
                    P->tab_ver[ti] = sched_versions_rep(Ig->sched, depth, r);
                }
                /* the same counts as the first schedule's: the same sum */
                if (g > 0 && P->tab_in[ti] == P->tab_in[t0] && P->tab_ver[ti] == P->tab_ver[t0]) continue;
                fits = !(plan_stage_mem_counts(I, Pb, L->stash[j] - L->stash[i], L->cut[i], L->cut[j],
                                               P->tab_in[ti], P->tab_ver[ti], r) > cap);
            }
            if (g == 0) fits0 = fits;
            else if (fits != fits0) P->diverged = 1;
        }
        if (!fits0) return 0;
    }
    *at = pos;
    *r_out = r;
    return 1;
}

/* The part of pk_check that is monotone in j, for block ac (b_*): the
 * time, and the memory with the fewest in-flight microbatches and weight
 * versions the block's replica count has at any depth, without the
 * outgoing buffer (a bound never stricter than pk_check's). */
static int pk_check_loose(packer *P, double B, int i, int j, size_t ac)
{
    const plan_inst *I = P->I;
    const plan_lattice *L = P->L;
    int r = P->b_r[ac];
    double Pb = L->params[j] - L->params[i];
    if (!pk_within(P, plan_stage_time(I, L->work[j] - L->work[i], r, P->b_spd[ac],
                                      pk_allreduce(P, Pb, r, P->b_lv[ac])), B))
        return 0;
    if (P->mem_free) return 1;
    size_t nb = (size_t)P->nr * P->C;
    int fits0 = 1;
    for (int g = 0; g < P->G; g++) {
        size_t gi = g * nb + ac;
        /* the same counts as the first schedule's: the same sum */
        if (g > 0 && P->b_in[gi] == P->b_in[ac] && P->b_ver[gi] == P->b_ver[ac]) continue;
        int fits = !(plan_stage_mem_counts(I, Pb, L->stash[j] - L->stash[i], L->cut[i], 0, P->b_in[gi],
                                           P->b_ver[gi], r) > P->b_cap[ac]);
        if (g == 0) fits0 = fits;
        else if (fits != fits0) P->diverged = 1;
    }
    return fits0;
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
    P->pass_max = -HUGE_VAL;
    P->fail_min = HUGE_VAL;
    /* cuts whose boundary can be within B on some link */
    for (int j = 0; j <= n; j++) {
        for (int lv = 0; lv < CLUSTER_LEVELS; lv++)
            P->bok_lv[lv][j] = j == n || pk_within(P, plan_boundary_s(I, L->cut[j], lv), B);
        P->bok[j] = P->bok_lv[CLUSTER_INTRA][j] || P->bok_lv[CLUSTER_INTER][j];
        P->prev_inter[j] = P->bok_lv[CLUSTER_INTER][j] ? j : j > 0 ? P->prev_inter[j - 1] : -1;
    }
    size_t states = st_of(P, n, K, C - 1) + 1;
    for (size_t s = 0; s < states; s++) P->e[s] = -1;
    for (int l = 0; l < (K ? K + 1 : 1) * C; l++) P->lst_n[l] = 0;
    for (int l = 0; l < P->nr * C; l++) P->jt[l] = n, P->reach_at[l] = -1;
    pk_offer(P, n, 0, pk_cls(P, N), N, 0, -1, -1, N, 0);
    if (P->pos_mode)
        for (int c = N - 1; c >= 0; c--) pk_offer(P, n, 0, c, c, 0, -1, -1, N, 0);
    for (int i = n - 1; i >= 0; i--) {
        if (i > I->cut_max) continue; /* no stage may start at layer i */
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
                     * binary search.  Blocks alike share it (jsig). */
                    size_t as = (size_t)P->jsig[ac];
                    int at_ik = i * (k_hi + 1) + k, lo;
                    if (P->reach_at[as] == at_ik) {
                        lo = P->reach[as];
                    } else {
                        lo = i + 1;
                        int hi = K ? n - (k - 1) : n;
                        if (!K) {
                            int *jt = &P->jt[as], y = *jt;
                            while (y > i && !pk_check_loose(P, B, i, y, as)) y--;
                            *jt = y;
                            lo = y;
                        } else if (!pk_check_loose(P, B, i, lo, as)) {
                            lo = i;
                        } else {
                            while (lo < hi) {
                                int mid = lo + (hi - lo + 1) / 2;
                                if (pk_check_loose(P, B, i, mid, as)) lo = mid;
                                else hi = mid - 1;
                            }
                        }
                        P->reach[as] = lo;
                        P->reach_at[as] = at_ik;
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
                            if (pk_check(P, B, i, y, st_of(P, y, k - 1, c), a, ac, &at, &r_at)) {
                                j = y;
                                break;
                            }
                        }
                    } else if (P->e[st_of(P, lo, k - 1, c)] >= 0 && P->bok[lo] &&
                               pk_check(P, B, i, lo, st_of(P, lo, k - 1, c), a, ac, &at, &r_at)) {
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
                            if (P->pos_mode && !pk_bnd_ok(P, pos, r, st_of(P, lj[x], k - 1, c), lj[x])) continue;
                            if (pk_check(P, B, i, lj[x], st_of(P, lj[x], k - 1, c), a, ac, &at, &r_at)) {
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
static int pk_init(packer *P, const plan_inst *I, const plan_lattice *L, int kmax, int G, const sched_kind *kinds)
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
    for (int r = I->rep_fixed > 0 ? I->rep_fixed : 1; r <= rmax; r++) {
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
    if (P->nr == 0) { /* the one replica count allowed (rep_fixed) is no block here */
        free(P->nstart);
        free(P->rs);
        return 0;
    }
    P->devices_arg = plan_mem_dependence(I) == PLAN_MEM_BY_TOTAL;
    P->G = G;
    P->Ig = cl_malloc((size_t)G * sizeof *P->Ig);
    for (int g = 0; g < G; g++) {
        P->Ig[g] = *I;
        if (kinds) P->Ig[g].sched = kinds[g];
    }
    P->ar_rmax = rmax;
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        P->ar_pb[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        P->ar_lat[lv] = cl_calloc((size_t)rmax + 1, sizeof(double));
        for (int r = 2; r <= rmax; r++) plan_allreduce_factors(I, r, lv, &P->ar_pb[lv][r], &P->ar_lat[lv][r]);
    }
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
    size_t nt = (size_t)G * ((size_t)N + 1) * (size_t)P->nr;
    P->tab_in = cl_malloc(nt * sizeof(int));
    P->tab_ver = cl_malloc(nt * sizeof(int));
    size_t nb = (size_t)P->nr * (size_t)P->C;
    P->jt = cl_malloc(nb * sizeof(int));
    P->jsig = cl_malloc(nb * sizeof(int));
    P->reach = cl_malloc(nb * sizeof(int));
    P->reach_at = cl_malloc(nb * sizeof(int));
    P->b_pos = cl_malloc(nb * sizeof(int));
    P->b_r = cl_malloc(nb * sizeof(int));
    P->b_lv = cl_malloc(nb * sizeof(int));
    P->b_in = cl_calloc((size_t)G * nb, sizeof(int));
    P->b_ver = cl_calloc((size_t)G * nb, sizeof(int));
    P->b_spd = cl_malloc(nb * sizeof(double));
    P->b_cap = cl_malloc(nb * sizeof(double));
    /* the fewest counts at any depth depend on the replica count alone:
     * found once per count and schedule (-1: not yet) */
    int *in_of = cl_malloc(((size_t)N + 1) * sizeof(int)), *ver_of = cl_malloc(((size_t)N + 1) * sizeof(int));
    int *col_in = cl_malloc(((size_t)N + 1) * sizeof(int)), *col_ver = cl_malloc(((size_t)N + 1) * sizeof(int));
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
            } else if (!P->uni) {
                plan_block_least(I, pos, r, &spd, &cap);
            }
            P->b_spd[ac] = spd;
            P->b_cap[ac] = cap;
            P->b_lv[ac] = I->node[pos] == I->node[pos + r - 1] ? CLUSTER_INTRA : CLUSTER_INTER;
        }
    for (int g = 0; g < G && !P->mem_free; g++) {
        sched_kind kind = P->Ig[g].sched;
        for (int r = 0; r <= N; r++) in_of[r] = -1;
        for (size_t ac = 0; ac < nb; ac++) {
            int r = P->b_r[ac];
            if (P->b_pos[ac] < 0) continue;
            if (in_of[r] < 0) {
                int in_min = INT32_MAX, ver_min = INT32_MAX;
                sched_inflight_depths(kind, P->devices_arg ? N : 0, r, I->m, I->chunks, N, col_in, col_ver);
                for (int D = r; D <= N; D++) {
                    in_min = imin(in_min, col_in[D]);
                    ver_min = imin(ver_min, col_ver[D]);
                }
                in_of[r] = in_min;
                ver_of[r] = ver_min;
            }
            P->b_in[g * nb + ac] = in_of[r];
            P->b_ver[g * nb + ac] = ver_of[r];
        }
    }
    free(in_of);
    free(ver_of);
    free(col_in);
    free(col_ver);
    /* blocks whose loose checks read the same values (jsig): each compared
     * with the replica count's representatives so far (few: the values come
     * from a handful of device types and the two links), not every class */
    int *rep = cl_malloc((size_t)P->C * sizeof(int));
    for (int a = 0; a < P->nr; a++) {
        int n_rep = 0;
        for (int c = 0; c < P->C; c++) {
            size_t ac = (size_t)a * P->C + c;
            P->jsig[ac] = (int)ac;
            if (P->b_pos[ac] < 0) continue;
            int x = 0;
            for (; x < n_rep; x++) {
                size_t a2 = (size_t)rep[x];
                if (P->b_r[a2] != P->b_r[ac] || P->b_lv[a2] != P->b_lv[ac] || P->b_spd[a2] != P->b_spd[ac] ||
                    P->b_cap[a2] != P->b_cap[ac])
                    continue;
                int same = 1;
                for (int g = 0; g < G && same; g++)
                    same = P->b_in[g * nb + a2] == P->b_in[g * nb + ac] && P->b_ver[g * nb + a2] == P->b_ver[g * nb + ac];
                if (same) break;
            }
            if (x < n_rep) P->jsig[ac] = rep[x];
            else rep[n_rep++] = (int)ac;
        }
    }
    free(rep);
    for (size_t t = 0; t < nt; t++) P->tab_in[t] = -1;
    return 1;
}

static void pk_free(packer *P)
{
    free(P->Ig);
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
    for (int lv = 0; lv < CLUSTER_LEVELS; lv++) {
        free(P->bok_lv[lv]);
        free(P->ar_pb[lv]);
        free(P->ar_lat[lv]);
    }
    free(P->tab_in);
    free(P->tab_ver);
    free(P->jt);
    free(P->jsig);
    free(P->reach);
    free(P->reach_at);
    free(P->b_pos);
    free(P->b_r);
    free(P->b_lv);
    free(P->b_in);
    free(P->b_ver);
    free(P->b_spd);
    free(P->b_cap);
}

/* pk_run(P, B), unless a packing that failed made the same comparisons
 * under B (packer: pass_max, fail_min), which it then does not repeat:
 * the result is the same 0, and a failed packing leaves nothing the next
 * one reads (pk_run starts every state afresh). */
static int pk_try(packer *P, double B, merge_sel *S)
{
    for (int f = 0; f < P->n_fails; f++)
        if (P->fail_lo[f] <= B && B < P->fail_hi[f]) {
            if (S->recheck) {
                S->rechecked++;
                if (pk_run(P, B)) S->recheck_wrong++;
            }
            return 0;
        }
    if (pk_run(P, B)) return 1;
    if (!P->diverged && P->n_fails < PK_FAILS) {
        P->fail_lo[P->n_fails] = P->pass_max;
        P->fail_hi[P->n_fails++] = P->fail_min;
    }
    return 0;
}

/* Bisection on the bound with packer P: the smallest B under which it
 * places every layer, from lo (below, as far as known) and hi (a bottleneck
 * reached, HUGE_VAL when none).  To a relative 2e-4, then down from there:
 * packing just below the best bottleneck so far until that fails (each
 * success lowers it to another layout's), so the result is the packing's
 * own optimum, not within a tolerance of it.  At most `runs` packings.
 * Offers each layout found to S; returns the final hi.  Stops where the
 * packing's schedules diverged (packer: G). */
static double pk_bisect(packer *P, double lo, double hi, int runs, merge_sel *S)
{
    if (!(hi < HUGE_VAL)) {
        /* nothing reached yet: grow from lo until packing succeeds */
        double g = lo;
        for (int k = 0; k < 64 && !(hi < HUGE_VAL) && !cl_budget_over(); k++, g *= 4) {
            int ok = pk_try(P, g, S);
            if (P->diverged) return hi;
            if (ok) {
                plan_layout y;
                pk_layout(P, &y);
                merge_sel_offer(S, &y);
                hi = g;
            } else {
                lo = g;
            }
        }
    }
    int descend = 0;
    /* each run polls the --max-seconds budget (a clock read against a
     * packing's O(L x R x C) checks): a spent budget keeps the best so
     * far, and the search stops at its next poll */
    for (int it = 0; it < runs && hi < HUGE_VAL && !cl_budget_over(); it++) {
        if (!(hi > lo * (1 + 2e-4))) descend = 1;
        double mid = descend ? nextafter(hi, 0) : sqrt(lo * hi);
        if (!(mid > lo && mid < hi)) break;
        int ok = pk_try(P, mid, S);
        if (P->diverged) return hi;
        if (ok) {
            plan_layout y;
            pk_layout(P, &y);
            hi = fmin(mid, merge_sel_offer(S, &y));
        } else {
            lo = mid;
            if (descend) break;
        }
    }
    return hi;
}

/* The bisection is geometric (pk_bisect grows and splits bounds by
 * factors), so it needs a start above 0: for a model that costs nothing
 * (every layer 0 s), a picosecond, below any time a real layer takes. */
#define PACK_FLOOR_S 1e-12

/* The bisection with packer P from a bound no layout beats (the work
 * spread perfectly over every device at the fastest speed). */
static void pk_pack(packer *P, const plan_inst *I, const plan_lattice *L, double hi, merge_sel *S)
{
    double lo = I->m * L->work[L->n_sets - 1] / (I->n_dev * P->spd_top);
    if (!(lo > 0)) lo = PACK_FLOOR_S;
    lo = nextafter(lo, 0);
    pk_bisect(P, lo, hi, 80, S);
}

/* See merge.h. */
void plan_merge_pack(const plan_inst *I, const plan_lattice *L, int kmax, double hi, merge_sel *S)
{
    packer P;
    if (!pk_init(&P, I, L, kmax, 1, NULL)) return;
    pk_pack(&P, I, L, hi, S);
    pk_free(&P);
}

/* See merge.h. */
int plan_merge_pack_group(const plan_inst *I, const plan_lattice *L, int kmax, double hi, merge_sel *S)
{
    packer P;
    if (!pk_init(&P, I, L, kmax, S->n, S->sched)) return 1;
    pk_pack(&P, I, L, hi, S);
    int diverged = P.diverged;
    pk_free(&P);
    return !diverged;
}
