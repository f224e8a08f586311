/* test_plan_rank.c - the pruned search chooses the plan the exhaustive one
 * chooses.
 *
 * plan_search skips candidates by bounds (a microbatch count whose least
 * bottleneck is slower than the best plan so far; flushing schedules whose
 * one-microbatch critical path is) and lets schedules share exact searches
 * (identical memory, or memory that never binds: plan_exact_shadowed).  The
 * independent comparison is the same request through plan_search_unpruned
 * (search_test.h): every candidate searched on its own and ranked by the
 * simulator.  Both must
 * return the same plan (schedule, microbatches, stages, layers, devices)
 * with the same predicted iteration, to the bit, on PipeDream's profiles
 * over clusters with unlimited and with binding memory, with and without
 * communication and replication.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/search.h"
#include "planner/search_test.h"
#include "profiles/pipedream.h"
#include "test.h"
#include "test_plan_same.h"
#include "test_rand.h"
#include "test_rand_model.h"

/* n devices, k per node, `cleave plan --devices`'s default links; memory
 * in bytes (2^53: unlimited, as for a profile's own device). */
static void cluster_of(cluster *c, int n, int k, double mem_bytes)
{
    cluster_devtype t = {.name = "gpu", .peak_fp32_flops = 1e13, .mem_bytes = (uint64_t)mem_bytes,
                         .mem_bw_Bps = 1e12, .efficiency = 0.5};
    cl_err e = {0};
    int rc = cluster_uniform(c, &t, n, k, (cluster_link){10e9, 10e-6}, (cluster_link){1.25e9, 50e-6}, &e);
    CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
}

typedef struct rcase {
    const char *model;
    int devices, per_node;
    double mem_bytes;
    int comm, replication, batch, schedule, microbatches;
} rcase;

static void check(const rcase *k)
{
    model m;
    prof pf;
    if (test_pipedream(k->model, &m, &pf)) {
        CU_FAIL("PipeDream profile missing");
        return;
    }
    cluster c;
    cluster_of(&c, k->devices, k->per_node, k->mem_bytes);
    plan_request rq = {.model = &m, .prof = &pf, .cluster = &c,
                       .batch = k->batch ? k->batch : (int)pf.layers[0].batch[0],
                       .schedule = k->schedule, .microbatches = k->microbatches,
                       .algo = PLAN_ALGO_AUTO, .comm = k->comm, .replication = k->replication};
    plan_result fast, full;
    cl_err e1 = {0}, e2 = {0};
    int rc1 = plan_search(&rq, &fast, &e1);
    int rc2 = plan_search_unpruned(&rq, &full, &e2);
    char where[96];
    snprintf(where, sizeof where, "%s on %d", k->model, k->devices);
    int differ = 0;
    test_same_answer(where, "pruned", "exhaustive", 0, rc1, &fast, &e1, rc2, &full, &e2, &differ);
    /* the exhaustive run ranks at least as many candidates */
    if (rc1 == CL_OK && rc2 == CL_OK) CU_ASSERT(full.candidates >= fast.candidates);
    if (rc1 == CL_OK) plan_result_free(&fast);
    if (rc2 == CL_OK) plan_result_free(&full);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

#define UNLIMITED 9007199254740992.0 /* 2^53 */

static void test_unlimited_memory(void)
{
    static const rcase cases[] = {
        {"alexnet", 32, 8, UNLIMITED, 1, 1, 0, -1, 0},
        {"vgg16", 32, 8, UNLIMITED, 1, 1, 0, -1, 0},
        {"resnet18", 32, 8, UNLIMITED, 1, 1, 0, -1, 0},
        {"vgg16", 8, 8, UNLIMITED, 1, 0, 0, -1, 0},       /* no replication */
        {"resnet18", 16, 8, UNLIMITED, 0, 1, 0, -1, 0},   /* communication off: ties everywhere */
        /* the slower cases last: sanitizer builds stop before them */
        {"resnet50", 32, 8, UNLIMITED, 1, 1, 0, -1, 0},
        {"gnmt", 16, 4, UNLIMITED, 1, 1, 32, -1, 0},
    };
    size_t n = TEST_BREADTH(sizeof cases / sizeof cases[0], 5);
    for (size_t i = 0; i < n; i++) check(&cases[i]);
}

static void test_binding_memory(void)
{
    static const rcase cases[] = {
        {"alexnet", 8, 8, 1.0e9, 0, 1, 0, -1, 0},
        {"resnet18", 32, 8, 1.5e9, 1, 1, 0, SCHED_1F1B, 32},
        /* the slower cases last (resnet50's exhaustive run takes most of
         * the suite's time): sanitizer builds stop before them */
        {"vgg16", 16, 4, 2.0e9, 1, 1, 0, -1, 0},
        {"resnet50", 12, 4, 3.0e9, 1, 1, 0, -1, 0},
    };
    size_t n = TEST_BREADTH(sizeof cases / sizeof cases[0], 2);
    for (size_t i = 0; i < n; i++) check(&cases[i]);
}

/* Interleaved plans over replica counts and pipeline depths
 * (search_interleaved): the least-iteration bound skips replays, so the
 * pruned search must pick what every candidate replayed picks. */
static void test_interleaved(void)
{
    static const rcase cases[] = {
        {"vgg16", 16, 4, UNLIMITED, 1, 1, 0, SCHED_INTERLEAVED, 0},
        {"alexnet", 8, 8, 1.0e9, 1, 1, 0, SCHED_INTERLEAVED, 0},
        {"resnet18", 32, 8, 1.5e9, 1, 1, 0, SCHED_INTERLEAVED, 32},
        {"vgg16", 8, 8, UNLIMITED, 0, 1, 0, SCHED_INTERLEAVED, 0}, /* communication off: ties */
    };
    size_t n = TEST_BREADTH(sizeof cases / sizeof cases[0], 2);
    for (size_t i = 0; i < n; i++) check(&cases[i]);
}

/* One random instance's two answers compared (test_same_answer, `also`
 * as there), then both answers and the instance freed. */
static void same_then_free(int inst, int n, const char *name_a, const char *name_b, int also, int rc1,
                           plan_result *a, const cl_err *e1, int rc2, plan_result *b, const cl_err *e2,
                           int *differ, cluster *c, model *m, prof *pf)
{
    char where[96];
    snprintf(where, sizeof where, "instance %d (%d layers, %d devices)", inst, m->n_layers, n);
    test_same_answer(where, name_a, name_b, also, rc1, a, e1, rc2, b, e2, differ);
    if (rc1 == CL_OK) plan_result_free(a);
    if (rc2 == CL_OK) plan_result_free(b);
    cluster_free(c);
    model_free(m);
    prof_free(pf);
}

/* Interleaved plans on random chains of 6 to 30 layers (many chunk
 * counts), 2 to 16 devices in nodes of 2 to 8 or one node, links from
 * 1e8 to 1e10 B/s (the transfers bound the chunk count) and memory that
 * binds in most (rand_binding_device), replicas on or off, the schedule
 * asked for or torch's auto: the least-iteration bound and the stop over
 * chunk counts choose what replaying every candidate chooses. */
static void test_interleaved_random(void);

/* A device whose memory binds three times in four (a tenth to seven
 * tenths of what the whole model needs at this batch, else 1e15 bytes) and
 * random links inside and between nodes: the draws of the prune and share
 * tests below, in their order. */
static void rand_binding_device(const prof *pf, int batch, cluster_devtype *t, cluster_link *in, cluster_link *out)
{
    double need = 0;
    for (int i = 0; i < pf->n_layers; i++)
        need += 3 * pf->layers[i].param_bytes + batch * (pf->layers[i].stash_bytes + 2 * pf->layers[i].act_bytes);
    double mem = irand(0, 3) ? need * (0.1 + 0.6 * urand()) : 1e15;
    *t = (cluster_devtype){.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)mem,
                           .mem_bw_Bps = 1e12, .efficiency = 1};
    *in = (cluster_link){1e8 * pow(100, urand()), urand() * 1e-4};
    *out = (cluster_link){in->bw_Bps * (0.05 + 0.5 * urand()), urand() * 5e-4};
}

static void test_interleaved_random(void)
{
    static const int batches[] = {4, 8, 16, 32};
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(60, 12), differ = 0, interleaved = 0;
    rng_state = 0x17e41ea5ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        rand_block_model_n(&m, &pf, 0, inst % 3 == 0, irand(6, 30));
        int batch = batches[irand(0, 3)], n = irand(2, 16);
        cluster_devtype t;
        cluster_link in, out;
        rand_binding_device(&pf, batch, &t, &in, &out);
        cluster c;
        cl_err ce = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, n, per_node[irand(0, 3)], in, out, &ce), CL_OK);
        /* auto for torch: after 1f1b, gpipe and zb-h1 (not fbp and
         * pipedream, whose equal replays tie without an interleaved plan) */
        int ask = irand(0, 1);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = ask ? SCHED_INTERLEAVED : -1, .framework = ask ? PLAN_FOR_ANY : PLAN_FOR_TORCH,
                           .comm = irand(0, 4) != 0, .replication = irand(0, 2) != 0};
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int rc1 = plan_search(&rq, &a, &e1);
        int rc2 = plan_search_unpruned(&rq, &b, &e2);
        interleaved += rc1 == CL_OK && a.plan.schedule == SCHED_INTERLEAVED;
        same_then_free(inst, n, "pruned", "exhaustive", 0, rc1, &a, &e1, rc2, &b, &e2, &differ, &c, &m, &pf);
    }
    printf("(%d of %d plans interleaved) ", interleaved, n_inst);
    CU_ASSERT(interleaved > n_inst / 6);
}

/* The schedule prune (count.c, schedule_loses: a schedule's exact search at
 * a count left out when no layout of it that fits in its memory has a
 * bottleneck with the boundaries left out within the best iteration) on
 * random chains: plan_search with and without it chooses the same plan, to
 * the bit, and with the same outcome when nothing fits.  The instances are
 * made for it to fire: equal devices, batches whose divisors include 1
 * (every microbatch of a deep fbp or pipedream pipeline in flight), memory
 * that binds in most; the test checks that it fired. */
static void test_sched_prune(void)
{
    static const int scheds[] = {-1, -1, SCHED_FBP, SCHED_PIPEDREAM, SCHED_1F1B};
    static const int batches[] = {2, 4, 8, 16};
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(200, 40), fired = 0, differ = 0;
    rng_state = 0x5ced9a11ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, 0, inst % 3 == 0);
        int batch = batches[irand(0, 3)], n = irand(2, 16);
        cluster_devtype t;
        cluster_link in, out;
        rand_binding_device(&pf, batch, &t, &in, &out);
        cluster c;
        cl_err ce = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, n, per_node[irand(0, 3)], in, out, &ce), CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = scheds[irand(0, 4)], .comm = irand(0, 4) != 0,
                           .replication = irand(0, 2) != 0};
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int pruned = 0;
        int rc1 = plan_search_sched_prune(&rq, 1, &pruned, &a, &e1);
        int rc2 = plan_search_sched_prune(&rq, 0, NULL, &b, &e2);
        fired += pruned > 0;
        same_then_free(inst, n, "pruned", "without", 0, rc1, &a, &e1, rc2, &b, &e2, &differ, &c, &m, &pf);
    }
    printf("(prune fired in %d of %d instances) ", fired, n_inst);
    CU_ASSERT(fired > n_inst / 20);
}

/* Schedules whose memory can bind riding along another schedule's exact
 * search as shadows (count.c, count_shadows; plan_exact_shadowed; and
 * pipedream's passes along fbp's climbs, memo_of): plan_search
 * with and without it chooses the same plan, to the bit, counts the same
 * exact-search steps and candidates (the work that budgets the searches on
 * fewer devices beyond 16, fewer.c, so those must not move), and fails the
 * same way when nothing fits; on random chains and DAGs on 2 to 16 devices
 * and, a quarter of them, 17 to 40 devices in nodes of 4 or 8 (the budgeted
 * searches on fewer devices), memory binding on most.  It must fire. */
static void test_sched_share(void)
{
    static const int scheds[] = {-1, -1, -1, SCHED_FBP, SCHED_1F1B};
    static const int batches[] = {4, 8, 16, 32};
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(160, 30), fired = 0, fired_skip = 0, fired_memo = 0, differ = 0;
    rng_state = 0x5a4e5a4eull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, 0, inst % 3 == 0);
        int batch = batches[irand(0, 3)], wide = inst % 4 == 3, n = wide ? irand(17, 40) : irand(2, 16);
        cluster_devtype t;
        cluster_link in, out;
        rand_binding_device(&pf, batch, &t, &in, &out);
        cluster c;
        cl_err ce = {0};
        int k = wide ? (irand(0, 1) ? 4 : 8) : per_node[irand(0, 3)];
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, n, k, in, out, &ce), CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = scheds[irand(0, 4)], .comm = irand(0, 4) != 0,
                           .replication = irand(0, 2) != 0};
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int shared = 0, skipped = 0, answered = 0;
        int rc1 = plan_search_share_stats(&rq, 1, &shared, &skipped, &answered, &a, &e1);
        int rc2 = plan_search_sched_share(&rq, 0, NULL, NULL, &b, &e2);
        fired += shared > 0;
        fired_skip += skipped > 0;
        fired_memo += answered > 0;
        same_then_free(inst, n, "shared", "without", TEST_SAME_STEPS | TEST_SAME_CANDIDATES, rc1, &a, &e1, rc2, &b, &e2, &differ, &c, &m, &pf);
    }
    printf("(sharing fired in %d of %d instances, passes left out in %d, answered alongside fbp in %d) ", fired,
           n_inst, fired_skip, fired_memo);
    /* (pipedream's passes along fbp fire on few of these small models:
     * tests/test_plan_pair.c makes instances for them) */
    CU_ASSERT(fired > n_inst / 10 && fired_skip > 0);
}

/* The bound that skips a candidate's replay (search.c, least_iteration;
 * for fbp and pipedream a ring per microbatch of each replica) against
 * the simulator itself: the unpruned search replays every candidate and
 * none may beat it; and plan_search, which skips by it, chooses the plan
 * the unpruned search chooses.  Random chains and DAGs on 2 to 16 equal
 * devices, replicated mostly, the asynchronous schedules mostly. */
static void test_replay_bound(void)
{
    static const int scheds[] = {-1, -1, SCHED_FBP, SCHED_PIPEDREAM, SCHED_1F1B};
    static const int batches[] = {4, 8, 16, 32};
    static const int per_node[] = {0, 2, 4, 8};
    int n_inst = TEST_BREADTH(120, 24), checked = 0, broken = 0, differ = 0;
    rng_state = 0xb0a7d5ull;
    for (int inst = 0; inst < n_inst; inst++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, inst % 3 == 0, irand(0, 2) == 0);
        int batch = batches[irand(0, 3)], n = irand(2, 16);
        cluster_devtype t;
        cluster_link in, out;
        rand_binding_device(&pf, batch, &t, &in, &out);
        cluster c;
        cl_err ce = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &t, n, per_node[irand(0, 3)], in, out, &ce), CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .algo = PLAN_ALGO_AUTO,
                           .schedule = scheds[irand(0, 4)], .comm = irand(0, 5) != 0,
                           .replication = irand(0, 4) != 0};
        plan_result a, b;
        cl_err e1 = {0}, e2 = {0};
        int ck = 0, br = 0;
        int rc1 = plan_search(&rq, &a, &e1);
        int rc2 = plan_search_unpruned_bound(&rq, &ck, &br, &b, &e2);
        checked += ck;
        broken += br;
        same_then_free(inst, n, "pruned", "unpruned", 0, rc1, &a, &e1, rc2, &b, &e2, &differ, &c, &m, &pf);
    }
    printf("(%d replays checked, %d beat the bound) ", checked, broken);
    CU_ASSERT_EQUAL(broken, 0);
    CU_ASSERT(checked > 10 * n_inst);
}

TEST_SUITE(plan_rank)
{
    test_add_suite("plan_rank");
    test_add("pruned ranking = every candidate simulated, unlimited memory", test_unlimited_memory);
    test_add("pruned ranking = every candidate simulated, binding memory", test_binding_memory);
    test_add("pruned ranking = every candidate simulated, interleaved over replicas", test_interleaved);
    test_add("pruned ranking = every candidate simulated, interleaved on random chains and links", test_interleaved_random);
    test_add("schedule prune = without it, random chains", test_sched_prune);
    test_add("schedules sharing an exact search where memory binds = without it, random models", test_sched_share);
    test_add("the bound that skips a replay never beats one; pruned = unpruned, random models", test_replay_bound);
}
