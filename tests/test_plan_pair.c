/* test_plan_pair.c - pipedream's exact passes run alongside fbp's search
 * (count.c, memo_of; plan_exact_opts.memo_out, memo_in).
 *
 * On long chains fbp and pipedream climb the same guesses at a microbatch
 * count and differ only in memory, so pipedream rides along fbp's passes as
 * a shadow and its own search later takes the recorded answers and steps.
 * The comparison is plan_search without any sharing between schedules
 * (plan_search_share_stats, share 0: each searches on its own): the same
 * plan, predicted to the bit, the same exact-search steps (the work that
 * budgets the searches on fewer devices) and candidates, or the same
 * refusal.  The instances are made for it to fire: chains of 40 to 160
 * layers of varied costs on 16 to 64 devices in nodes of 8, memory that
 * binds deep stages, batches of 8 to 32; it must fire in some.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/search.h"
#include "planner/search_test.h"
#include "test.h"
#include "test_plan_same.h"
#include "test_rand.h"

/* A chain of n block layers with costs varied as `cleave bench plan`'s
 * synthetic chains (forward, input and weight gradient alike), its
 * single-point profile at `batch`. */
static void chain_of(model *m, prof *pf, int n, int batch)
{
    memset(m, 0, sizeof *m);
    memset(pf, 0, sizeof *pf);
    snprintf(m->name, sizeof m->name, "pair%d", n);
    m->input = (model_shape){1, {1024, 0, 0}};
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    prof_alloc(pf, n, 1);
    snprintf(pf->model, sizeof pf->model, "%s", m->name);
    snprintf(pf->device, sizeof pf->device, "ref");
    for (int i = 0; i < n; i++) {
        double u = urand(), act = 2e5 * (1 + (i % 7)), params = 4 * floor(1e6 * (0.5 + u));
        char name[32];
        snprintf(name, sizeof name, "l%d", i);
        model_block_init(&m->layers[i], name, 1e9 * (0.5 + u), params / 4, act, 2 * act);
        prof_layer *l = &pf->layers[i];
        snprintf(l->name, sizeof l->name, "%s", name);
        l->batch[0] = batch;
        l->fwd_s[0] = l->bwd_in_s[0] = l->bwd_w_s[0] = 2e-3 * (0.5 + u);
        l->act_bytes = act;
        l->stash_bytes = 2 * act;
        l->param_bytes = params;
    }
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_derive(m, "pair", &e), CL_OK);
}

static void test_pair(void)
{
    static const int devices[] = {16, 24, 32, 48, 64};
    static const int batches[] = {8, 16, 32, 256};
    int n_inst = TEST_BREADTH(120, 30), fired = 0, answered_all = 0, differ = 0;
    rng_state = 0x9a12ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        int n = irand(40, 240), batch = batches[irand(0, 3)], N = devices[irand(0, 4)];
        chain_of(&m, &pf, n, batch);
        /* the whole model's weights and optimiser state (16 bytes a
         * parameter with Adam in fp32) spread over a tenth to all of the
         * devices: deep stages, with more microbatches in flight, bind */
        double params = 0;
        for (int i = 0; i < n; i++) params += pf.layers[i].param_bytes;
        double cap = irand(0, 1) ? 80e9 * (0.2 + urand()) : 4 * params / (N * (0.1 + 0.9 * urand()));
        cluster_devtype t = {.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)cap,
                             .mem_bw_Bps = 1e12, .efficiency = 1};
        cluster c;
        cl_err ce = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, N, 8, (cluster_link){100e9, 5e-6},
                                              (cluster_link){12.5e9 * (0.2 + urand()), 1e-5}, &ce),
                              CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = -1, .comm = 1, .replication = 1};
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int answered = 0;
        int rc1 = plan_search_share_stats(&rq, 1, NULL, NULL, &answered, &a, &e1);
        int rc2 = plan_search_share_stats(&rq, 0, NULL, NULL, NULL, &b, &e2);
        fired += answered > 0;
        answered_all += answered;
        char where[96];
        snprintf(where, sizeof where, "instance %d (%d layers, %d devices)", inst, n, N);
        test_same_answer(where, "shared", "alone", TEST_SAME_STEPS | TEST_SAME_CANDIDATES, rc1, &a, &e1, rc2, &b, &e2, &differ);
        if (rc1 == CL_OK) plan_result_free(&a);
        if (rc2 == CL_OK) plan_result_free(&b);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    printf("(pipedream's passes answered alongside fbp in %d of %d instances, %d passes) ", fired, n_inst,
           answered_all);
    if (TEST_COVERAGE) CU_ASSERT(fired > 0);
}

TEST_SUITE(plan_pair)
{
    test_add_suite("plan_pair");
    test_add("pipedream's passes alongside fbp's search = each alone, long chains", test_pair);
}
