/* test_plan_exact.c - the exact search against brute force.
 *
 * Random small instances (up to 12 layers, up to 4 devices so up to 4
 * stages, chains and DAGs, one or two nodes, equal or mixed devices, memory
 * caps that bind, replication on and off, communication on and off, every
 * schedule's memory rule; test_plan_brute.c).  The brute force lists every
 * layout the cost model allows and keeps the best by plan_eval_cmp; the
 * DP's answer must evaluate to exactly the same objective, bit for bit.
 * The exact search's passes one by one: test_plan_passes.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost.h"
#include "planner/exact.h"
#include "planner/merge.h"
#include "test.h"
#include "test_plan_brute.h"
#include "test_rand.h"

/* ------------------------------------------------------------- tests -- */

/* A random chain of g, its prefix cuts, and the exact search's options for
 * the stage and device counts the instance fixes (no upper bound). */
static void gen_chain_case(const gen_opts *g, plan_inst *I, plan_lattice *L, plan_exact_opts *o)
{
    int dev_fixed;
    int p_fixed = gen_instance(I, g, &dev_fixed);
    plan_lattice_prefix(L, I);
    *o = (plan_exact_opts){.p_fixed = p_fixed, .devices_fixed = dev_fixed, .upper_s = HUGE_VAL};
}


static int check_instances(const gen_opts *g, int count, uint64_t seed, int *n_feasible)
{
    rng_state = seed;
    int bad = 0;
    *n_feasible = 0;
    for (int it = 0; it < count; it++) {
        plan_inst I;
        int dev_fixed;
        int p_fixed = gen_instance(&I, g, &dev_fixed);
        plan_lattice L;
        cl_err e = {0};
        if (g->dag) {
            int rc = plan_lattice_downsets(&L, &I, 100000, &e);
            CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
        } else {
            plan_lattice_prefix(&L, &I);
        }
        plan_eval want;
        long evals;
        int have = brute_force(&I, &L, p_fixed, dev_fixed, &want, &evals);
        plan_exact_opts o = {.p_fixed = p_fixed, .devices_fixed = dev_fixed, .upper_s = HUGE_VAL};
        plan_layout y;
        plan_exact_result got = plan_exact(&I, &L, &o, &y, NULL, &e);
        CU_ASSERT_TRUE(got == PLAN_EXACT_FOUND || got == PLAN_EXACT_NONE_FITS);
        if ((got == PLAN_EXACT_FOUND) != have) {
            bad++;
            fprintf(stderr, "\n  instance %d (seed %llu): exact says %s, brute force %s [n %d dev %d m %d sched %s p %d devices %d]\n", it,
                    (unsigned long long)seed, got == PLAN_EXACT_FOUND ? "feasible" : "infeasible",
                    have ? "feasible" : "infeasible", I.n, I.n_dev, I.m, sched_kind_name(I.sched), p_fixed, dev_fixed);
        } else if (got == PLAN_EXACT_FOUND) {
            (*n_feasible)++;
            plan_eval ev;
            plan_layout_eval(&I, &L, &y, &ev);
            if (!ev.feasible || ev.bottleneck_s != want.bottleneck_s || ev.comm_s != want.comm_s ||
                ev.headroom_bytes != want.headroom_bytes || ev.devices != want.devices) {
                bad++;
                fprintf(stderr,
                        "\n  instance %d: exact (B %.17g C %.17g H %.17g U %d) != brute force "
                        "(B %.17g C %.17g H %.17g U %d) [n %d dev %d m %d sched %s p %d]\n",
                        it, ev.bottleneck_s, ev.comm_s, ev.headroom_bytes, ev.devices,
                        want.bottleneck_s, want.comm_s, want.headroom_bytes, want.devices, I.n,
                        I.n_dev, I.m, sched_kind_name(I.sched), p_fixed);
            }
        }
        if (got == PLAN_EXACT_FOUND) plan_layout_free(&y);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    return bad;
}

static void test_chain_vs_brute(void)
{
    gen_opts g = {.max_layers = 12, .dag = 0, .max_dev = 4};
    int feas;
    CU_ASSERT_EQUAL(check_instances(&g, 400, 12345, &feas), 0);
    CU_ASSERT_TRUE(feas > 200); /* the caps leave most instances feasible */
}

static void test_dag_vs_brute(void)
{
    gen_opts g = {.max_layers = 8, .dag = 1, .max_dev = 4};
    int feas;
    CU_ASSERT_EQUAL(check_instances(&g, 200, 777, &feas), 0);
    CU_ASSERT_TRUE(feas > 100);
}

/* Partition-and-merge never beats the exact search, and a lower bound from
 * plan_exact_lower leads plan_exact to the same optimum. */
static void test_merge_and_lower_bound(void)
{
    gen_opts g = {.max_layers = 12, .dag = 0, .max_dev = 4};
    rng_state = 4242;
    int merged = 0, worse = 0;
    for (int it = 0; it < 300; it++) {
        plan_inst I;
        plan_lattice L;
        plan_exact_opts o;
        gen_chain_case(&g, &I, &L, &o);
        const int p_fixed = o.p_fixed, dev_fixed = o.devices_fixed;
        cl_err e = {0};
        plan_layout yx, ym, yl;
        plan_exact_result okx = plan_exact(&I, &L, &o, &yx, NULL, &e);
        int okm = plan_merge(&I, &L, p_fixed, &ym, NULL);
        double lb;
        plan_exact_result okb = plan_exact_lower(&I, &L, &o, &lb, NULL, &e);
        CU_ASSERT_TRUE(okb == PLAN_EXACT_FOUND || okb == PLAN_EXACT_NONE_FITS);
        /* nothing fits even with the least memory: nothing fits at all */
        if (okb == PLAN_EXACT_NONE_FITS) CU_ASSERT_EQUAL(okx, PLAN_EXACT_NONE_FITS);
        o.lower_s = lb;
        plan_exact_result okl = plan_exact(&I, &L, &o, &yl, NULL, &e);
        CU_ASSERT_EQUAL(okl, okx);
        if (okm == 1 && !dev_fixed) { /* merge picks its own device count */
            merged++;
            CU_ASSERT_EQUAL(okx, PLAN_EXACT_FOUND); /* merge found a fitting layout, so exact must */
            if (okx == PLAN_EXACT_FOUND) {
                plan_eval ex, em;
                plan_layout_eval(&I, &L, &yx, &ex);
                plan_layout_eval(&I, &L, &ym, &em);
                CU_ASSERT_TRUE(plan_eval_cmp(&ex, &em) <= 0);
                worse += plan_eval_cmp(&ex, &em) < 0;
            }
        }
        if (okx == PLAN_EXACT_FOUND) {
            plan_eval ex, el;
            plan_layout_eval(&I, &L, &yx, &ex);
            CU_ASSERT_TRUE(lb <= ex.bottleneck_s);
            if (okl == PLAN_EXACT_FOUND) {
                plan_layout_eval(&I, &L, &yl, &el);
                CU_ASSERT_EQUAL(plan_eval_cmp(&ex, &el), 0);
                plan_layout_free(&yl);
            }
            plan_layout_free(&yx);
        }
        if (ym.p) plan_layout_free(&ym);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    CU_ASSERT_TRUE(merged > 100);
    CU_ASSERT_TRUE(worse > 0); /* the heuristic is not always optimal */
}

/* One replica count for every stage and a last allowed stage start (what
 * `cleave plan --for` asks, plan_inst.rep_fixed and cut_max): on 300 random
 * chains the exact search equals the brute force over the layouts that obey
 * them, never beats the unrestricted optimum (it searches a subset:
 * plan_eval_cmp >= 0), and partition-and-merge's layout obeys them and
 * never beats the exact one. */
static void test_framework_rules(void)
{
    gen_opts g = {.max_layers = 10, .dag = 0, .max_dev = 5};
    rng_state = 1616;
    int bad = 0, found = 0, merged = 0, stricter = 0;
    for (int it = 0; it < 300; it++) {
        plan_inst I;
        plan_lattice L;
        plan_exact_opts o;
        gen_chain_case(&g, &I, &L, &o);
        const int p_fixed = o.p_fixed, dev_fixed = o.devices_fixed;
        cl_err e = {0};
        plan_layout ya, yf, ym;
        plan_exact_result oka = plan_exact(&I, &L, &o, &ya, NULL, &e);
        int rmax = I.m < I.max_replicas ? I.m : I.max_replicas;
        if (rmax > I.n_dev) rmax = I.n_dev;
        I.rep_fixed = I.max_replicas = irand(1, rmax);
        I.cut_max = irand(0, 2) ? I.n : irand(0, I.n);
        plan_eval want;
        long evals;
        int have = brute_force(&I, &L, p_fixed, dev_fixed, &want, &evals);
        plan_exact_result okf = plan_exact(&I, &L, &o, &yf, NULL, &e);
        CU_ASSERT_TRUE(okf == PLAN_EXACT_FOUND || okf == PLAN_EXACT_NONE_FITS);
        if ((okf == PLAN_EXACT_FOUND) != have) {
            bad++;
            fprintf(stderr, "\n  instance %d: exact says %s, brute force %s [r %d, cut_max %d]", it,
                    okf == PLAN_EXACT_FOUND ? "feasible" : "infeasible", have ? "feasible" : "infeasible", I.rep_fixed,
                    I.cut_max);
        } else if (okf == PLAN_EXACT_FOUND) {
            found++;
            plan_eval ef, ea;
            plan_layout_eval(&I, &L, &yf, &ef);
            if (plan_eval_cmp(&ef, &want) != 0 || ef.bottleneck_s != want.bottleneck_s) {
                bad++;
                fprintf(stderr, "\n  instance %d: exact B %.17g, brute force B %.17g [r %d, cut_max %d]", it,
                        ef.bottleneck_s, want.bottleneck_s, I.rep_fixed, I.cut_max);
            }
            /* the unrestricted optimum is at least as good */
            CU_ASSERT_EQUAL_FATAL(oka, PLAN_EXACT_FOUND);
            plan_inst Ia = I;
            Ia.rep_fixed = 0;
            Ia.max_replicas = I.n_dev;
            Ia.cut_max = I.n;
            plan_layout_eval(&Ia, &L, &ya, &ea);
            CU_ASSERT_TRUE(plan_eval_cmp(&ea, &ef) <= 0);
            stricter += plan_eval_cmp(&ea, &ef) < 0;
        }
        int okm = plan_merge(&I, &L, p_fixed, &ym, NULL);
        if (okm == 1 && !dev_fixed) {
            merged++;
            int obeys = 1;
            for (int s = 0; s < ym.p; s++) obeys &= ym.r[s] == I.rep_fixed && (s == 0 || ym.cut[s] <= I.cut_max);
            CU_ASSERT_TRUE(obeys);
            CU_ASSERT_EQUAL(okf, PLAN_EXACT_FOUND);
            if (okf == PLAN_EXACT_FOUND) {
                plan_eval ef, em;
                plan_layout_eval(&I, &L, &yf, &ef);
                plan_layout_eval(&I, &L, &ym, &em);
                CU_ASSERT_TRUE(plan_eval_cmp(&ef, &em) <= 0);
            }
        }
        if (ym.p) plan_layout_free(&ym);
        if (okf == PLAN_EXACT_FOUND) plan_layout_free(&yf);
        if (oka == PLAN_EXACT_FOUND) plan_layout_free(&ya);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    fprintf(stderr, "\n    %d feasible, %d strictly worse than unrestricted, %d merged ", found, stricter, merged);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(found > 150 && stricter > 20 && merged > 50); /* not vacuous */
}

/* The least slowest chunk over every split of layers lo.. into chunks
 * k..n-1 (chunk k on device k mod p, at least one layer each), by brute
 * force over where chunk k ends. */
static double chunks_brute(const plan_inst *I, const plan_lattice *L, int p, int n, int k, int lo)
{
    int nl = L->n_layers;
    double spd = I->speed[k % p], best = HUGE_VAL;
    if (k == n - 1) return (double)I->m * ((L->work[nl] - L->work[lo]) / spd);
    for (int end = lo + 1; end <= nl - (n - k - 1); end++) {
        double here = (double)I->m * ((L->work[end] - L->work[lo]) / spd);
        double rest = chunks_brute(I, L, p, n, k + 1, end);
        best = fmin(best, fmax(here, rest));
    }
    return best;
}

/* Interleaved chunk splits (plan_chunks_minmax: a bisection on the bound
 * with a greedy cover that gallops to each chunk's end): the slowest chunk
 * is the least over every contiguous split, to the bisection's relative
 * 1e-12, on random chains of up to 12 layers (some of no work) split into
 * 1 to 8 chunks over 1 to 4 devices of one speed or mixed speeds. */
static void test_chunks_minmax(void)
{
    rng_state = 2929;
    int bad = 0, tried = 0, mixed_n = 0;
    for (int it = 0; it < 400; it++) {
        gen_opts g = {.max_layers = 12, .dag = 0, .max_dev = 4};
        plan_inst I;
        int dev_fixed;
        gen_instance(&I, &g, &dev_fixed);
        int mixed = it % 2;
        for (int d = 0; d < I.n_dev; d++) I.speed[d] = mixed ? 0.5 + urand() : 1.0;
        mixed_n += mixed;
        for (int i = 0; i < I.n; i++)
            if (irand(0, 4) == 0) I.fwd_s[i] = I.bwd_in_s[i] = I.bwd_w_s[i] = 0;
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        int p = I.n_dev, n = irand(1, 8);
        int *cut = cl_malloc((size_t)(n + 1) * sizeof(int));
        int ok = plan_chunks_minmax(&I, &L, p, n, cut);
        if (n > L.n_layers) {
            CU_ASSERT_EQUAL(ok, 0);
        } else if (!ok) {
            bad++;
        } else {
            tried++;
            double got = 0;
            int valid = cut[0] == 0 && cut[n] == L.n_layers;
            for (int k = 0; k < n; k++) {
                valid &= cut[k + 1] > cut[k];
                got = fmax(got, (double)I.m * ((L.work[cut[k + 1]] - L.work[cut[k]]) / I.speed[k % p]));
            }
            double want = chunks_brute(&I, &L, p, n, 0, 0);
            if (!valid || got < want || got > want * (1 + 1e-9)) {
                bad++;
                fprintf(stderr, "\n  instance %d: slowest chunk %.17g, brute force %.17g [layers %d chunks %d devices %d mixed %d]\n",
                        it, got, want, L.n_layers, n, p, mixed);
            }
        }
        free(cut);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(tried > 200 && mixed_n > 100); /* not vacuous */
}

/* zb-h1 on exactly F >= m devices keeps every microbatch in flight on
 * every stage (gpipe's memory), and on fewer devices no more, so the
 * planner ranks gpipe's optimum, searched with no device count fixed, as
 * zb-h1's (count.c, count_twin).  Against brute force: wherever some zb-h1
 * layout on exactly F >= m devices fits, gpipe's optimum fits under zb-h1's
 * own memory (at its own device count) with a bottleneck no larger than
 * the best of those, and when gpipe finds nothing, neither does zb-h1 on
 * F; over random chains of up to 12 layers on up to 4 devices. */
static void test_zbh1_on_m_devices_is_gpipe(void)
{
    gen_opts g = {.max_layers = 12, .dag = 0, .max_dev = 4};
    rng_state = 5151;
    int bad = 0, compared = 0, none = 0, strictly = 0;
    for (int it = 0; it < 400; it++) {
        plan_inst I;
        int dev_fixed;
        int p_fixed = gen_instance(&I, &g, &dev_fixed);
        if (I.m > I.n_dev) I.m = irand(1, I.n_dev);
        plan_lattice L;
        plan_lattice_prefix(&L, &I);
        plan_inst G = I;
        G.sched = SCHED_GPIPE;
        plan_exact_opts o = {.p_fixed = p_fixed, .upper_s = HUGE_VAL};
        plan_layout y;
        cl_err e = {0};
        plan_exact_result got = plan_exact(&G, &L, &o, &y, NULL, &e);
        CU_ASSERT_TRUE(got == PLAN_EXACT_FOUND || got == PLAN_EXACT_NONE_FITS);
        plan_eval ev = {0};
        I.sched = SCHED_ZBH1;
        if (got == PLAN_EXACT_FOUND) plan_layout_eval(&I, &L, &y, &ev);
        for (int F = I.m; F <= I.n_dev; F++) {
            plan_eval want;
            long evals;
            if (!brute_force(&I, &L, p_fixed, F, &want, &evals)) continue;
            compared++;
            if (got != PLAN_EXACT_FOUND) {
                none++;
                fprintf(stderr, "\n  instance %d: zb-h1 fits on exactly %d devices, gpipe's search finds nothing\n", it, F);
            } else if (!ev.feasible || ev.bottleneck_s > want.bottleneck_s) {
                bad++;
                fprintf(stderr, "\n  instance %d: gpipe's layout (fits as zb-h1 %d, B %.17g) against zb-h1 on exactly %d (B %.17g)\n",
                        it, ev.feasible, ev.bottleneck_s, F, want.bottleneck_s);
            } else {
                strictly += ev.bottleneck_s < want.bottleneck_s;
            }
        }
        if (got == PLAN_EXACT_FOUND) plan_layout_free(&y);
        plan_lattice_free(&L);
        plan_inst_free(&I);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(none, 0);
    CU_ASSERT_TRUE(compared > 300 && strictly > 0); /* not vacuous */
    if (!(compared > 300 && strictly > 0)) fprintf(stderr, "\n  compared %d, strictly better %d\n", compared, strictly);
}

TEST_SUITE(plan_exact)
{
    test_add_suite("plan_exact");
    test_add("exact equals brute force on 400 random chains", test_chain_vs_brute);
    test_add("exact equals brute force on 200 random DAGs", test_dag_vs_brute);
    test_add("interleaved chunk splits: the least slowest chunk (brute force)", test_chunks_minmax);
    test_add("merge never beats exact; lower bounds keep the optimum", test_merge_and_lower_bound);
    test_add("zb-h1 on F >= m devices: gpipe's optimum fits and is no worse (brute force)", test_zbh1_on_m_devices_is_gpipe);
    test_add("one replica count, a last stage start: exact equals brute force, never beats unrestricted",
             test_framework_rules);
}
