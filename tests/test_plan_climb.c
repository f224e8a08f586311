/* test_plan_climb.c - how the exact search climbs to the optimal bottleneck
 * changes its steps, never its layout (plan_exact_opts.fine_climb).
 *
 * The climb runs pass 1 under growing guesses until one holds a layout;
 * that pass returns the least bottleneck of all, whatever the guess above
 * it, and pass 2 there picks the layout.  So the fine climb (guesses 2% and
 * 5% above a miss before the usual 15%) must give the same plans as the
 * usual one.  On random chains and DAGs on 2 to 16 devices (where no step
 * count budgets a search: on more, the searches on fewer devices are
 * budgeted by the steps of the search on all, which the climb moves):
 * plan_search with the fine climb in every search, as plan_search runs,
 * and nowhere chooses the same plan, predicted to the bit, from the same
 * candidates, or refuses alike.  The steps must differ somewhere: the
 * climb ran.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/search.h"
#include "planner/search_test.h"
#include "test.h"
#include "test_plan_same.h"
#include "test_rand.h"
#include "test_rand_model.h"

static void test_climb(void)
{
    static const int scheds[] = {-1, -1, -1, SCHED_FBP, SCHED_1F1B, SCHED_PIPEDREAM};
    static const int batches[] = {4, 8, 16, 32};
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(120, 24), differ = 0, moved = 0;
    rng_state = 0xc11b5ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, inst % 3 == 0, irand(0, 2) == 0);
        int batch = batches[irand(0, 3)], n = irand(2, 16);
        double need = 0;
        for (int i = 0; i < pf.n_layers; i++)
            need += 3 * pf.layers[i].param_bytes + batch * (pf.layers[i].stash_bytes + 2 * pf.layers[i].act_bytes);
        double mem = irand(0, 3) ? need * (0.1 + 0.6 * urand()) : 1e15;
        cluster_devtype t = {.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)mem,
                             .mem_bw_Bps = 1e12, .efficiency = 1};
        cluster_link in = {1e8 * pow(100, urand()), urand() * 1e-4};
        cluster_link out = {in.bw_Bps * (0.05 + 0.5 * urand()), urand() * 5e-4};
        cluster c;
        cl_err ce = {0};
        int k = per_node[irand(0, 3)];
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, n, k, in, out, &ce), CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = scheds[irand(0, 5)], .comm = irand(0, 4) != 0,
                           .replication = irand(0, 3) != 0};
        /* r[0]: no fine climb; r[1]: every search's, as plan_search */
        plan_result r[2];
        cl_err e[2] = {{0}};
        int rc[2];
        for (int f = 0; f < 2; f++) rc[f] = plan_search_climb(&rq, f - 1, &r[f], &e[f]);
        char where[96];
        snprintf(where, sizeof where, "instance %d (%d devices)", inst, n);
        test_same_answer(where, "fine", "usual", TEST_SAME_CANDIDATES, rc[1], &r[1], &e[1], rc[0], &r[0], &e[0],
                         &differ);
        if (rc[1] == CL_OK && rc[0] == CL_OK) moved += r[1].exact_steps != r[0].exact_steps;
        for (int f = 0; f < 2; f++)
            if (rc[f] == CL_OK) plan_result_free(&r[f]);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    printf("(steps moved in %d comparisons) ", moved);
    if (TEST_COVERAGE) CU_ASSERT(moved > n_inst / 10);
}

TEST_SUITE(plan_climb)
{
    test_add_suite("plan_climb");
    test_add("the fine climb: the same plans, other steps, random models", test_climb);
}
