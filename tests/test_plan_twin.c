/* test_plan_twin.c - an fbp plan and the pipedream plan of the same stages
 * share one replay (planner/predict_twin.h).
 *
 * The premise, checked against the simulator itself: on random plans
 * (found by the search for fbp or pipedream on random chains and DAGs over
 * clusters of equal devices, replicated or not, communication on or off,
 * memory binding or not), the plan and its copy under the other
 * asynchronous schedule get the same prediction from plan_predict and
 * plan_predict_sim, to the bit.  And the search: plan_search with and
 * without the shared replays chooses the same plan, predicted to the bit,
 * and counts the same exact-search steps and candidates (the work that
 * budgets the searches on fewer devices); the sharing must fire.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/predict.h"
#include "planner/search.h"
#include "planner/search_test.h"
#include "test.h"
#include "test_plan_same.h"
#include "test_rand.h"
#include "test_rand_model.h"

/* A random question on n equal devices in nodes of k: memory binding three
 * times in four (a tenth to seven tenths of what the whole model needs),
 * random links. */
static void rand_question(model *m, prof *pf, cluster *c, plan_request *rq, int dag, int n, int k)
{
    static const int batches[] = {4, 8, 16, 32};
    rand_block_model(m, pf, dag, irand(0, 2) == 0);
    int batch = batches[irand(0, 3)];
    double need = 0;
    for (int i = 0; i < pf->n_layers; i++)
        need += 3 * pf->layers[i].param_bytes + batch * (pf->layers[i].stash_bytes + 2 * pf->layers[i].act_bytes);
    double mem = irand(0, 3) ? need * (0.1 + 0.6 * urand()) : 1e15;
    cluster_devtype t = {.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)mem,
                         .mem_bw_Bps = 1e12, .efficiency = 1};
    cluster_link in = {1e8 * pow(100, urand()), urand() * 1e-4};
    cluster_link out = {in.bw_Bps * (0.05 + 0.5 * urand()), urand() * 5e-4};
    cl_err ce = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(c, &t, n, k, in, out, &ce), CL_OK);
    *rq = (plan_request){.model = m, .prof = pf, .cluster = c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                         .schedule = -1, .comm = irand(0, 4) != 0, .replication = irand(0, 2) != 0};
}

static int same_pred(const plan_pred *a, const plan_pred *b)
{
    return memcmp(&a->iteration_s, &b->iteration_s, sizeof(double)) == 0 &&
           memcmp(&a->throughput, &b->throughput, sizeof(double)) == 0 &&
           memcmp(&a->bubble, &b->bubble, sizeof(double)) == 0 &&
           memcmp(&a->speedup, &b->speedup, sizeof(double)) == 0 && a->simulated == b->simulated;
}

/* The prediction of pl under schedule kind, closed form then replay. */
static plan_pred predict_as(const plan *pl, sched_kind kind, int comm)
{
    plan q = *pl; /* (shallow: only read) */
    q.schedule = kind;
    plan_pred pr;
    plan_timing tm;
    cl_err e = {0};
    plan_predict_opts po = {.comm = comm};
    CU_ASSERT_EQUAL_FATAL(plan_predict(&q, &po, &pr, &tm, &e), CL_OK);
    CU_ASSERT_EQUAL(plan_predict_sim(&q, &pr), CL_OK);
    return pr;
}

static void test_premise(void)
{
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(200, 30), replayed = 0, replicated = 0, differ = 0;
    rng_state = 0x7e1a5ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        cluster c;
        plan_request rq;
        rand_question(&m, &pf, &c, &rq, inst % 3 == 0, irand(2, 16), per_node[irand(0, 3)]);
        rq.schedule = irand(0, 1) ? SCHED_FBP : SCHED_PIPEDREAM;
        plan_result res;
        cl_err e = {0};
        if (plan_search(&rq, &res, &e) == CL_OK) {
            plan_pred f = predict_as(&res.plan, SCHED_FBP, rq.comm), p = predict_as(&res.plan, SCHED_PIPEDREAM, rq.comm);
            int same = same_pred(&f, &p);
            if (!same && differ++ < 5)
                fprintf(stderr, "\n  instance %d: fbp %.17g s, pipedream %.17g s", inst, f.iteration_s, p.iteration_s);
            CU_ASSERT(same);
            replayed += f.simulated;
            for (int s = 0; s < res.plan.n_stages; s++)
                if (res.plan.stages[s].n_replicas > 1) {
                    replicated++;
                    break;
                }
            plan_result_free(&res);
        }
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    printf("(%d of %d replayed, %d replicated) ", replayed, n_inst, replicated);
    CU_ASSERT(replayed > n_inst / 2 && replicated > n_inst / 10);
}

/* plan_search with and without the shared replays: the same plan, steps
 * and candidates, or the same refusal; on 2 to 16 devices and, a quarter
 * of the instances, 17 to 40 in nodes of 4 or 8 (budgeted searches on
 * fewer devices). */
static void test_search(void)
{
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(120, 24), fired = 0, differ = 0;
    rng_state = 0x7e1b5ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        cluster c;
        plan_request rq;
        int wide = inst % 4 == 3;
        rand_question(&m, &pf, &c, &rq, inst % 3 == 0, wide ? irand(17, 40) : irand(2, 16),
                      wide ? (irand(0, 1) ? 4 : 8) : per_node[irand(0, 3)]);
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int hits = 0;
        int rc1 = plan_search_twins(&rq, 1, &hits, &a, &e1);
        int rc2 = plan_search_twins(&rq, 0, NULL, &b, &e2);
        fired += hits > 0;
        char where[96];
        snprintf(where, sizeof where, "instance %d", inst);
        test_same_answer(where, "shared", "without", TEST_SAME_STEPS | TEST_SAME_CANDIDATES, rc1, &a, &e1, rc2, &b, &e2, &differ);
        if (rc1 == CL_OK) plan_result_free(&a);
        if (rc2 == CL_OK) plan_result_free(&b);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    printf("(replays shared in %d of %d instances) ", fired, n_inst);
    CU_ASSERT(fired > n_inst / 10);
}

TEST_SUITE(plan_twin)
{
    test_add_suite("plan_twin");
    test_add("fbp and pipedream plans of the same stages replay alike, random plans", test_premise);
    test_add("search with shared replays = without them, random models", test_search);
}
