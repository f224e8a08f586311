/* test_plan_ring.c - the search prices a replicated stage's ring all-reduce
 * as the simulator runs it, on random clusters where either link level may
 * be the slower one.
 *
 * A ring over r devices moves 2 (r - 1) / r of the gradient bytes and takes
 * 2 (r - 1) steps; each step sends over every link of the ring at once, so
 * the slowest link it uses sets the pace.  The test finds the links from the
 * plan's own device list (consecutive replicas and back to the first) and
 * the cluster's nodes, computes that closed form, and checks the search's
 * own price of a one-stage gpipe plan (its bottleneck: compute + all-reduce)
 * against it, and the simulated iteration where the ring runs on one link
 * level (over both, the simulator's unsynchronised ring differs; see
 * docs/planner.md).  Before
 * the fix the search priced every ring that left a node at the inter-node
 * link, also when a slower in-node link was part of it (issue 16: a plan at
 * 0.030 s that simulated at 0.303 s). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/search.h"
#include "test.h"
#include "test_rand.h"

/* Three block layers with parameters; a profile linear in the batch
 * (points 1..16) with no optimiser time, so a one-stage iteration is its
 * compute plus its all-reduce and nothing else. */
static void tiny_model(model *m, prof *pf)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "ring3");
    m->input = (model_shape){1, {64, 0, 0}};
    m->n_layers = 3;
    m->layers = cl_calloc(3, sizeof *m->layers);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "l%d", i);
        model_block_init(&m->layers[i], name, 1e6, floor(1e5 + urand() * 1e6), 1024, 1024);
    }
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_derive(m, "ring3", &e), CL_OK);
    memset(pf, 0, sizeof *pf);
    snprintf(pf->model, sizeof pf->model, "%s", m->name);
    snprintf(pf->device, sizeof pf->device, "ref");
    pf->n_layers = 3;
    pf->layers = cl_calloc(3, sizeof *pf->layers);
    for (int i = 0; i < 3; i++) {
        prof_layer *l = &pf->layers[i];
        snprintf(l->name, sizeof l->name, "l%d", i);
        prof_layer_points(l, 5);
        double c = 1e-4 + urand() * 1e-3;
        for (int k = 0; k < 5; k++) {
            l->batch[k] = (double)(1 << k);
            l->fwd_s[k] = c * l->batch[k];
            l->bwd_in_s[k] = c * l->batch[k];
            l->bwd_w_s[k] = c * l->batch[k];
        }
        l->act_bytes = 1024;
        l->stash_bytes = 1024;
        l->param_bytes = 4.0 * m->layers[i].params;
    }
}

/* The ring's closed form over the links the plan's stage 0 uses. */
static double ring_s(const plan *p, int *levels_used)
{
    const plan_stage *st = &p->stages[0];
    const cluster *c = &p->cluster;
    int r = st->n_replicas;
    double bw = HUGE_VAL, lat = 0;
    *levels_used = 0;
    for (int i = 0; i < r; i++) {
        int a = st->devices[i], b = st->devices[(i + 1) % r];
        int lv = c->devices[a].node == c->devices[b].node ? CLUSTER_INTRA : CLUSTER_INTER;
        *levels_used |= 1 << lv;
        bw = fmin(bw, c->links[lv].bw_Bps);
        lat = fmax(lat, c->links[lv].latency_s);
    }
    return 2.0 * (r - 1) / r * st->param_bytes / bw + 2.0 * (r - 1) * lat;
}

static void test_random_rings(void)
{
    rng_state = 0x5eed1f6;
    int checked = 0, mixed = 0, mixed_intra_slower = 0;
    for (int it = 0; it < 150; it++) {
        model m;
        prof pf;
        tiny_model(&m, &pf);
        int per_node = irand(1, 4), n = per_node * irand(2, 3);
        /* either level may be the slower, in bandwidth and in latency */
        cluster_link in = {1e8 * pow(100, urand()), urand() * 1e-4};
        cluster_link out = {1e8 * pow(100, urand()), urand() * 1e-4};
        cluster_devtype t = {.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)1 << 40,
                             .mem_bw_Bps = 1e12, .efficiency = 1};
        cluster cl;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(cluster_uniform(&cl, &t, n, per_node, in, out, &e), CL_OK);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &cl, .ref_type = &cl.types[0],
                           .batch = 16 * n, .schedule = SCHED_GPIPE, .microbatches = n, .stages = 1,
                           .optimizer = OPTIM_SGD, .comm = 1, .replication = 1};
        plan_result res;
        int rc = plan_search(&rq, &res, &e);
        if (rc) fprintf(stderr, "\n  case %d: %s\n", it, e.msg);
        CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
        const plan *p = &res.plan;
        const plan_stage *st = &p->stages[0];
        if (st->n_replicas >= 2) {
            int used;
            double ar = ring_s(p, &used);
            int q = (p->n_micro + st->n_replicas - 1) / st->n_replicas;
            double want = q * (st->fwd_s + st->bwd_in_s + st->bwd_w_s) + ar;
            double sim = p->pred.iteration_s; /* the simulator's, for a plan this small */
            CU_ASSERT(test_rel(res.bottleneck_s, want) < 1e-9);
            if (test_rel(res.bottleneck_s, want) >= 1e-9)
                fprintf(stderr, "\n  case %d: %d replicas, links %d: search %.9g s, ring closed form %.9g s\n",
                        it, st->n_replicas, used, res.bottleneck_s, want);
            /* On one link level the simulator's ring is the closed form.
             * Over both it is not: its members step as soon as their own
             * chunk arrives (no step barrier), which the closed form does
             * not follow (docs/planner.md, "Ring all-reduce across nodes") */
            if (used != 3) CU_ASSERT(test_rel(sim, want) < 1e-9);
            checked++;
            if (used == 3) {
                mixed++;
                mixed_intra_slower += in.bw_Bps < out.bw_Bps || in.latency_s > out.latency_s;
            }
        }
        plan_result_free(&res);
        cluster_free(&cl);
        model_free(&m);
        prof_free(&pf);
    }
    /* the comparison is not vacuous: rings inside a node, over nodes, and
     * over both with the in-node link the slower one */
    CU_ASSERT(checked > 60);
    CU_ASSERT(mixed > 10);
    CU_ASSERT(mixed_intra_slower > 5);
}

TEST_SUITE(plan_ring)
{
    test_add_suite("plan_ring");
    test_add("random clusters: a stage's ring priced as the simulator runs it", test_random_rings);
}
