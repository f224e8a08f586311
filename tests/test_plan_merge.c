/* test_plan_merge.c - partition-and-merge against the exact search.
 *
 * The exact search (itself checked against brute force in
 * test_plan_exact.c) is the independent reference: on many random chains
 * and branching models, of up to 120 layers on up to 32 devices (one node
 * or several, equal or mixed devices, binding memory, replication and
 * communication on and off, every schedule's memory rule), the heuristic's
 * bottleneck must be within 3% of the exact one over the same cuts (the
 * prefixes of the layer order, the heuristic's space), and never below it.
 * On uniform chains any balanced split is optimal, and the heuristic must
 * find the optimum exactly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/exact.h"
#include "planner/merge.h"
#include "test.h"
#include "test_rand.h"


/* kind: 0 random chain, 1 random DAG (skip connections), 2 uniform chain
 * (equal layers, equal devices), 3 near-uniform chain (layers within 1%),
 * 4 a random chain on 72 to 128 devices of mixed types (one per node of 8). */
static void gen(plan_inst *I, int kind)
{
    int n = kind == 4 ? irand(5, 60) : kind >= 2 ? irand(2, 64) : irand(5, 120);
    int nd = kind == 4 ? 8 * irand(9, 16) : irand(1, 32);
    int dag = kind == 1;
    int *cnt = cl_calloc((size_t)n, sizeof *cnt), *ins = cl_malloc((size_t)n * 2 * sizeof *ins);
    int total = 0;
    for (int i = 0; i < n; i++) {
        ins[2 * i] = i - 1;
        cnt[i] = 1;
        if (dag && i >= 2 && irand(0, 3) == 0) {
            ins[2 * i] = irand(-1, i - 2); /* a skip connection, then the layer before */
            ins[2 * i + 1] = i - 1;
            cnt[i] = 2;
        }
        total += cnt[i];
    }
    plan_inst_alloc(I, n, total, nd);
    int at = 0;
    for (int i = 0; i < n; i++) {
        I->in_off[i] = at;
        for (int a = 0; a < cnt[i]; a++) I->in_idx[at++] = ins[2 * i + a];
    }
    I->in_off[n] = at;
    free(cnt);
    free(ins);
    int uni = kind == 2 || kind == 3;
    double spread = kind == 2 ? 0 : 0.01;
    for (int i = 0; i < n; i++) {
        double u = uni ? 1 + spread * (2 * urand() - 1) : 0.05 + urand();
        I->fwd_s[i] = u;
        I->bwd_in_s[i] = uni ? u : urand() * 1.5;
        I->bwd_w_s[i] = uni ? u : urand();
        I->param_bytes[i] = uni ? 1e5 : irand(0, 3) == 0 ? 0 : urand() * 1e6;
        I->out_bytes[i] = uni ? 1e3 : 1 + urand() * 1e6;
        I->stash_bytes[i] = uni ? 1e3 : urand() * 1e6;
    }
    I->input_bytes = uni ? 1e3 : urand() * 1e6;
    /* nodes of K devices (the last one may be smaller); with mixed
     * devices each node holds one type, as real clusters do */
    int K = kind == 4 ? 8 : irand(1, 8), mixed = kind == 4 || (!uni && irand(0, 2) == 0);
    double spd = 1;
    for (int d = 0; d < nd; d++) {
        I->node[d] = d / K;
        I->dev[d] = d;
        if (d % K == 0) spd = mixed && irand(0, 1) ? 0.5 + urand() * 1.5 : 1.0;
        I->speed[d] = spd;
        I->mem_cap[d] = 1e300;
    }
    if (kind == 4) {
        /* nodes sorted by speed, slowest first: one of the device orders
         * the search tries (search.c), the one that leaves slow nodes at
         * the left end, where unused positions go */
        for (int a = 1; a < nd; a++)
            for (int b = a; b > 0 && I->speed[b - 1] > I->speed[b]; b--) {
                double t = I->speed[b];
                I->speed[b] = I->speed[b - 1];
                I->speed[b - 1] = t;
            }
    }
    I->link[CLUSTER_INTRA] = (cluster_link){1e7 + urand() * 1e8, urand() * 1e-4};
    I->link[CLUSTER_INTER] = (cluster_link){1e6 + urand() * 1e7, urand() * 1e-3};
    static const int ms[] = {1, 2, 4, 8, 16, 32};
    I->m = ms[irand(0, 5)];
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_FBP, SCHED_PIPEDREAM};
    I->sched = kinds[irand(0, 3)];
    int k = irand(0, 2);
    I->state = plan_state_factors(4, PREC_FP32, (plan_optim)k, 0, 4);
    I->comm = uni ? irand(0, 1) : irand(0, 3) != 0;
    I->max_replicas = irand(0, 2) == 0 ? 1 : nd;
    if (!uni && irand(0, 2) == 0) {
        /* a cap that binds: a share of the whole model's least memory */
        double need = 0;
        for (int i = 0; i < n; i++)
            need += I->param_bytes[i] * (3 + k) + I->stash_bytes[i] * I->m + 4 * I->out_bytes[i];
        double cap = need / nd * (1.0 + urand() * 2.0);
        for (int d = 0; d < nd; d++) I->mem_cap[d] = cap;
    }
    /* a third in mixed precision and/or under ZeRO (from a hash of the
     * generator's state, which it does not advance: every instance is
     * otherwise the one it was before they were modelled) */
    uint64_t h = state_hash();
    if (h % 3 == 0)
        I->state = plan_state_factors((h >> 8) & 1 ? 2 : 4, (h >> 9) & 1 ? PREC_MIXED : PREC_FP32,
                                      (plan_optim)k, (int)((h >> 10) % (PLAN_ZERO_MAX + 1)),
                                      (h >> 9) & 1 && (h >> 40) & 1 ? 2 : 4);
}

/* Runs count instances of a kind; returns the worst gap (merge over exact
 * - 1) and counts the instances compared and those over `tol`. */
static double compare(int kind, int count, uint64_t seed, double tol, int *compared, int *over)
{
    rng_state = seed;
    double worst = 0;
    *compared = *over = 0;
    for (int it = 0; it < count; it++) {
        plan_inst I;
        gen(&I, kind);
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        cl_err e = {0};
        plan_exact_opts o = {.upper_s = HUGE_VAL};
        plan_layout yx, ym;
        plan_exact_result okx = plan_exact(&I, &L, &o, &yx, NULL, &e);
        int okm = plan_merge(&I, &L, 0, &ym, NULL);
        CU_ASSERT_TRUE(okx == PLAN_EXACT_FOUND || okx == PLAN_EXACT_NONE_FITS);
        if (okm == 1) CU_ASSERT_EQUAL(okx, PLAN_EXACT_FOUND); /* merge's layouts lie in exact's space */
        if (okx == PLAN_EXACT_FOUND) {
            plan_eval ex, em;
            plan_layout_eval(&I, &L, &yx, &ex);
            (*compared)++;
            double gap = HUGE_VAL;
            if (okm == 1) {
                plan_layout_eval(&I, &L, &ym, &em);
                CU_ASSERT_TRUE(em.valid && em.feasible);
                CU_ASSERT_TRUE(plan_eval_cmp(&ex, &em) <= 0);
                gap = em.bottleneck_s / ex.bottleneck_s - 1;
            }
            if (gap > worst) worst = gap;
            if (gap > tol) {
                (*over)++;
                int mixed = 0;
                for (int d = 1; d < I.n_dev; d++) mixed |= I.speed[d] != I.speed[0];
                fprintf(stderr, "\n  kind %d instance %d: merge %s, gap %.4f [n %d dev %d m %d sched %s repl %d comm %d mixed %d cap %d]\n",
                        kind, it, okm == 1 ? "found" : "found nothing", gap, I.n, I.n_dev, I.m,
                        sched_kind_name(I.sched), I.max_replicas, I.comm, mixed, I.mem_cap[0] < 1e300);
            }
            if (gap > tol && getenv("MERGE_DUMP"))
                for (int w = 0; w < 2; w++) {
                    plan_layout *y = w ? &ym : &yx;
                    fprintf(stderr, "   %s:", w ? "merge" : "exact");
                    for (int k = 0; k < y->p; k++) fprintf(stderr, " [%d..%d)@%d x%d s%.2f", y->cut[k], y->cut[k + 1], y->pos[k], y->r[k], I.speed[y->pos[k]]);
                    fprintf(stderr, "\n");
                }
            plan_layout_free(&yx);
        }
        if (ym.p) plan_layout_free(&ym);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    return worst;
}

/* compare(): none over tol, more than min_compared compared (most
 * instances fit); the worst gap printed under `what` when it is not NULL. */
static void check_kind(int kind, int count, uint64_t seed, double tol, int min_compared, const char *what)
{
    int compared, over;
    double worst = compare(kind, count, seed, tol, &compared, &over);
    CU_ASSERT_EQUAL(over, 0);
    CU_ASSERT_TRUE(compared > min_compared);
    if (what) printf("\n    %s: %d compared, worst gap %.3f%%\n", what, compared, 100 * worst);
}

static void test_random_chains(void) { check_kind(0, 300, 9001, 0.03, 150, "random chains"); }
static void test_random_dags(void) { check_kind(1, 200, 4711, 0.03, 100, "random DAGs (prefix cuts)"); }

static void test_uniform_chains(void)
{
    check_kind(2, 200, 31337, 0, 150, NULL);
    check_kind(3, 200, 2718, 0, 150, NULL);
}

/* The issue's example: 8 equal layers on 4 devices, no communication, no
 * replication, gpipe, 8 microbatches: two layers per device, 8 x 2 x (F +
 * B + W) = 0.048 s with F = 1 ms, B = 2 ms (PipeDream's backward, split
 * into input and weight gradients), W = 0. */
static void test_issue_example(void)
{
    plan_inst I;
    plan_inst_alloc(&I, 8, 8, 4);
    for (int i = 0; i < 8; i++) {
        I.in_off[i] = i;
        I.in_idx[i] = i - 1;
        I.fwd_s[i] = 1e-3;
        I.bwd_in_s[i] = 2e-3;
        I.out_bytes[i] = 400;
        I.param_bytes[i] = 100;
    }
    I.in_off[8] = 8;
    for (int d = 0; d < 4; d++) {
        I.speed[d] = 1;
        I.mem_cap[d] = 1e300;
        I.dev[d] = d;
    }
    I.link[CLUSTER_INTRA] = I.link[CLUSTER_INTER] = (cluster_link){1e9, 0};
    I.m = 8;
    I.sched = SCHED_GPIPE;
    I.comm = 0;
    I.max_replicas = 1;
    plan_lattice L;
    plan_lattice_prefix(&L, &I);
    plan_layout y;
    CU_ASSERT_EQUAL(plan_merge(&I, &L, 0, &y, NULL), 1);
    plan_eval ev;
    plan_layout_eval(&I, &L, &y, &ev);
    CU_ASSERT_DOUBLE_EQUAL(ev.bottleneck_s, 8 * 2 * 3e-3, 1e-12);
    plan_layout_free(&y);
    plan_lattice_free(&L);
    plan_inst_free(&I);
}

static void test_large_mixed(void) { check_kind(4, 60, 1234, 0.03, 30, "mixed devices, 72 to 128"); }

/* ---------------------------------- the shortcuts against the long way -- */

/* The memory rules' memo (cost.c): under 4,000 keys asked in random
 * order, several landing in one slot, each answer is the schedule's rule
 * (cost.h: gpipe and sequential flat, fbp and pipedream by depth, 1f1b by
 * depth and zb-h1 by total from 2 microbatches on) and the same when asked
 * again; the monotony's the same as its first answer. */
static void test_mem_memo(void)
{
    enum { K = 4000 };
    static const sched_kind kinds[] = {SCHED_SEQUENTIAL, SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_PIPEDREAM, SCHED_FBP};
    static int dep[K], mono[K], ks[K], ms[K], ns[K];
    rng_state = 1979;
    plan_inst I;
    plan_inst_alloc(&I, 1, 1, 1);
    for (int round = 0; round < 3; round++)
        for (int q = 0; q < K; q++) {
            int k = round == 0 ? q : irand(0, K - 1);
            if (round == 0) {
                ks[k] = irand(0, 5);
                ms[k] = irand(1, 300);
                ns[k] = irand(1, 64);
            }
            I.sched = kinds[ks[k]];
            I.m = ms[k];
            I.n_dev = ns[k];
            int d = plan_mem_dependence(&I), mo = plan_mem_depth_monotone(&I);
            if (round == 0) {
                dep[k] = d;
                mono[k] = mo;
            }
            CU_ASSERT_EQUAL(d, dep[k]);
            CU_ASSERT_EQUAL(mo, mono[k]);
            sched_kind s = I.sched;
            if (s == SCHED_SEQUENTIAL || s == SCHED_GPIPE) CU_ASSERT_EQUAL(d, PLAN_MEM_FLAT);
            if (s == SCHED_FBP || s == SCHED_PIPEDREAM || (s == SCHED_1F1B && I.m >= 2))
                CU_ASSERT_EQUAL(d, PLAN_MEM_BY_DEPTH);
            if (s == SCHED_ZBH1 && I.m >= 2) CU_ASSERT_EQUAL(d, PLAN_MEM_BY_TOTAL);
        }
    I.n_dev = 1;
    plan_inst_free(&I);
}

/* A random chain (gen kind 0) whose memory can bind: a cap of 0.3 to
 * `most` times the whole model's least memory spread over the devices (0:
 * up to the whole of it on each device), and
 * now and then all-reduces that cost more under the schedules ZeRO splits
 * them for. */
static void gen_binding(plan_inst *I, double most)
{
    gen(I, 0);
    double need = 0;
    for (int i = 0; i < I->n; i++)
        need += I->param_bytes[i] * 4 + I->stash_bytes[i] * I->m + 4 * I->out_bytes[i];
    if (most <= 0) most = I->n_dev > 1 ? I->n_dev : 1.5;
    double cap = need / I->n_dev * (0.3 + urand() * (most - 0.3));
    for (int d = 0; d < I->n_dev; d++) I->mem_cap[d] = cap;
    if (irand(0, 3) == 0) I->ar_scale[1] = 1.5;
}

static int same_layout(const plan_layout *a, const plan_layout *b)
{
    if (a->p != b->p) return 0;
    if (a->p == 0) return 1;
    return !memcmp(a->cut, b->cut, (size_t)(a->p + 1) * sizeof(int)) &&
           !memcmp(a->pos, b->pos, (size_t)a->p * sizeof(int)) && !memcmp(a->r, b->r, (size_t)a->p * sizeof(int));
}

static const sched_kind all_kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_PIPEDREAM, SCHED_FBP};
#define N_KINDS 5

/* plan_merge_multi (step 1 once for schedules that price all-reduces alike,
 * step 2 shared where their memory checks agree) against one plan_merge per
 * schedule: the same layouts, bit for bit, and the same answers. */
static void test_multi_is_singles(void)
{
    rng_state = 5150;
    int differ = 0, fits = 0;
    for (int it = 0; it < 150; it++) {
        plan_inst I;
        gen_binding(&I, 3);
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        int p_fixed = irand(0, 4) == 0 ? irand(1, 6) : 0;
        plan_layout out[N_KINDS];
        int ok[N_KINDS];
        plan_merge_multi(&I, &L, p_fixed, N_KINDS, all_kinds, out, ok);
        int first = -1;
        for (int j = 0; j < N_KINDS; j++) {
            plan_inst Ij = I;
            Ij.sched = all_kinds[j];
            plan_layout y;
            int okj = plan_merge(&Ij, &L, p_fixed, &y, NULL);
            CU_ASSERT_EQUAL(ok[j], okj);
            CU_ASSERT_TRUE(same_layout(&out[j], &y));
            fits += okj;
            if (okj && first < 0) first = j;
            else if (okj && !same_layout(&out[first], &y)) differ++;
            if (y.p) plan_layout_free(&y);
            if (out[j].p) plan_layout_free(&out[j]);
        }
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    /* not vacuous: layouts that fit, and schedules whose memory made
     * different ones */
    CU_ASSERT_TRUE(fits > 200);
    CU_ASSERT_TRUE(differ > 20);
}

/* plan_merge_pack_group against plan_merge_pack per schedule, from nothing
 * (no bracket): where it reports that the schedules' memory checks agreed
 * throughout, each schedule's best layout is its own packing's; and both
 * outcomes occur. */
static void test_group_pack(void)
{
    static const sched_kind kinds[] = {SCHED_GPIPE, SCHED_1F1B, SCHED_PIPEDREAM, SCHED_FBP};
    enum { G = 4 };
    rng_state = 8086;
    int agreed = 0, split = 0;
    for (int it = 0; it < 150; it++) {
        plan_inst I;
        /* up to the whole model on each device: memory binds in some
         * (the schedules' checks then differ), in others only in
         * layouts the bisection does not reach */
        gen_binding(&I, 0);
        I.ar_scale[1] = 1; /* alike under every schedule */
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        int any_free = 0;
        for (int g = 0; g < G; g++) {
            plan_inst Ig = I;
            Ig.sched = kinds[g];
            any_free |= plan_exact_mem_free(&Ig, &L);
        }
        if (any_free) {
            plan_lattice_free(&L);
            plan_inst_free(&I);
            continue;
        }
        plan_inst I0 = I;
        I0.sched = kinds[0];
        plan_layout best[G];
        plan_eval ev[G];
        int have[G] = {0};
        merge_sel S = {.I = &I0, .L = &L, .n = G, .sched = kinds, .best = best, .best_ev = ev, .have = have};
        int same = plan_merge_pack_group(&I0, &L, 0, HUGE_VAL, &S);
        agreed += same;
        split += !same;
        for (int g = 0; g < G; g++) {
            plan_inst Ig = I;
            Ig.sched = kinds[g];
            plan_layout b1;
            plan_eval e1;
            int h1 = 0;
            merge_sel S1 = {.I = &Ig, .L = &L, .n = 1, .best = &b1, .best_ev = &e1, .have = &h1};
            plan_merge_pack(&Ig, &L, 0, HUGE_VAL, &S1);
            if (same) {
                CU_ASSERT_EQUAL(have[g], h1);
                if (have[g] && h1) CU_ASSERT_TRUE(same_layout(&best[g], &b1));
            }
            if (h1) plan_layout_free(&b1);
            if (have[g]) plan_layout_free(&best[g]);
        }
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    printf("\n    shared packings: %d agreed throughout, %d split\n", agreed, split);
    CU_ASSERT_TRUE(agreed > 10);
    CU_ASSERT_TRUE(split > 10);
}

/* The bisection skips a packing whose bound makes every comparison a
 * failed packing made (pk_try): run anyway (recheck), each such packing
 * fails, and the best layout is the same as without the rechecks. */
static void test_known_failures(void)
{
    rng_state = 6502;
    long rechecked = 0;
    for (int it = 0; it < 200; it++) {
        plan_inst I;
        if (irand(0, 1)) gen_binding(&I, 3);
        else gen(&I, irand(0, 1) ? 0 : 4);
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        int kmax = irand(0, 3) == 0 ? irand(1, 6) : 0;
        plan_layout b[2];
        plan_eval e[2];
        int h[2] = {0, 0};
        for (int w = 0; w < 2; w++) {
            merge_sel S = {.I = &I, .L = &L, .n = 1, .best = &b[w], .best_ev = &e[w], .have = &h[w], .recheck = w};
            plan_merge_pack(&I, &L, kmax, HUGE_VAL, &S);
            if (w) {
                CU_ASSERT_EQUAL(S.recheck_wrong, 0);
                rechecked += S.rechecked;
            }
        }
        CU_ASSERT_EQUAL(h[0], h[1]);
        if (h[0] && h[1]) CU_ASSERT_TRUE(same_layout(&b[0], &b[1]));
        for (int w = 0; w < 2; w++)
            if (h[w]) plan_layout_free(&b[w]);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    CU_ASSERT_TRUE(rechecked > 100);
}

TEST_SUITE(plan_merge)
{
    test_add_suite("plan_merge");
    test_add("the issue's 8 equal layers on 4 devices: the balanced split", test_issue_example);
    test_add("uniform and near-uniform chains: exactly the optimum", test_uniform_chains);
    test_add("300 random chains: within 3% of exact", test_random_chains);
    test_add("200 random DAGs: within 3% of exact over the same cuts", test_random_dags);
    test_add("60 random chains on 72 to 128 mixed devices: within 3% of exact", test_large_mixed);
    test_add("the memory rules' memo: 12,000 questions, the rules' answers", test_mem_memo);
    test_add("150 chains, binding memory: plan_merge_multi gives each schedule's plan_merge", test_multi_is_singles);
    test_add("150 chains, binding memory: a shared packing that agreed is each schedule's own", test_group_pack);
    test_add("200 packings: the failures the bisection skips fail when run", test_known_failures);
}
