/* fuzz_search.c - plan search and the simulator behind it, on random
 * models, profiles, clusters and requests decoded from the input (gen.h).
 *
 * A model of 1-10 block layers (a chain, or a DAG with skip edges), a
 * cluster of 1-16 devices of one or two types over nodes of 1-8, a profile
 * either derived from the first type (roofline) or given with 1-3 batch
 * points, and a request (schedule, microbatches, stages, algorithm,
 * optimiser, replication, communication, and last the framework, ZeRO and
 * the gradient reduction's element size).  One value in 32 of the costs,
 * speeds and links is extreme (1e-300 .. 1e308), the inputs that once made
 * plan_search abort.  plan_search must return CL_OK or CL_EINPUT with one
 * non-empty line; a plan it returns must validate, predict an iteration
 * in [0, PLAN_MAX_ITERATION_S], survive a JSON round trip, and simulate within the event bound with the properties of
 * gen_sim_check (the simulation the search ranked it with).
 *
 * Under libFuzzer the search runs under the wall-clock budget `cleave plan
 * --max-seconds` sets (base/budget.h), of FUZZ_SEARCH_SECONDS, and one
 * input in 16 with the budget already spent (also in the regression
 * replays, which otherwise set none: their outcome must not depend on the
 * clock).  A request that would search long must stop at the budget
 * with its one-line message, so libFuzzer's 10 s limit catches a loop that
 * does not poll it rather than a search that is merely large (under the
 * fuzzer's ASan, UBSan and coverage the planner runs about 13 times
 * slower than the plain build: seed3.bin, 4 layers on 15 devices of two
 * types, takes 0.86 s plain and 11 s there). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "base/budget.h"
#include "models/model.h"
#include "planner/search.h"
#include "profiles/profile.h"
#include "fuzz.h"
#include "gen.c"

#define FUZZ_SEARCH_SECONDS 3.0

/* a normal value, or now and then an extreme one */
static double search_val(gen *g, double lo, double hi)
{
    static const double extreme[] = {1e-300, 1e-30, 1e30, 1e300, 1e308};
    if (gen_u(g, 32) == 0) return extreme[gen_u(g, 5)];
    double v = gen_real(g, lo, hi);
    return v > 0 ? v : lo;
}

static void search_model(gen *g, model *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "gen");
    m->dtype = gen_u(g, 2) ? MODEL_F32 : MODEL_F16;
    m->input = (model_shape){1, {1 + (int64_t)gen_u(g, 4096)}};
    m->n_layers = 1 + (int)gen_u(g, 10);
    m->layers = cl_calloc((size_t)m->n_layers, sizeof *m->layers);
    for (int i = 0; i < m->n_layers; i++) {
        model_layer *l = &m->layers[i];
        char name[16];
        snprintf(name, sizeof name, "l%d", i);
        double params = gen_u(g, 3) ? floor(gen_real(g, 1, 1e8)) : 0;
        /* one draw per statement, in reading order (gen.c, gen_plan) */
        double flops = search_val(g, 1e3, 1e12);
        double out = 4 * ceil(fmax(4, gen_real(g, 4, 1e7)) / 4);
        double stash = floor(gen_real(g, 4, 1e7));
        model_block_init(l, name, flops, params, out, stash);
        if (i >= 2 && gen_u(g, 4) == 0) { /* a skip from an earlier layer */
            l->n_inputs = 2;
            l->inputs[0] = (int)gen_u(g, (unsigned)i - 1);
            l->inputs[1] = i - 1;
        }
    }
}

static void search_cluster(gen *g, cluster *cl)
{
    cluster_devtype t = {0};
    t.peak_fp32_flops = search_val(g, 1e9, 1e15);
    t.mem_bytes = (uint64_t)1 << (20 + gen_u(g, 18));
    t.mem_bw_Bps = search_val(g, 1e9, 1e13);
    t.efficiency = fmin(1, search_val(g, 0.01, 1));
    snprintf(t.name, sizeof t.name, "type0");
    cluster_link intra, inter;
    gen_links(g, search_val, &intra, &inter);
    if (gen_u(g, 32) == 0) intra.latency_s = 1e300;
    cl_err e = {0};
    int n = 1 + (int)gen_u(g, 16);
    int per_node = 1 + (int)gen_u(g, 8);
    if (cluster_uniform(cl, &t, n, per_node, intra, inter, &e) != CL_OK) abort();
    if (n > 1 && gen_u(g, 3) == 0) { /* a second, other type for some devices */
        cl->types = cl_realloc(cl->types, 2 * sizeof *cl->types);
        cl->types[1] = cl->types[0];
        snprintf(cl->types[1].name, sizeof cl->types[1].name, "type1");
        cl->types[1].peak_fp32_flops = search_val(g, 1e9, 1e15);
        cl->types[1].mem_bytes = (uint64_t)1 << (20 + gen_u(g, 18));
        cl->n_types = 2;
        for (int d = 0; d < n; d++)
            if (gen_u(g, 2)) cl->devices[d].type = 1;
    }
}

/* A profile with 1-3 batch points and random times (the measured kind). */
static void search_profile(gen *g, const model *m, prof *p)
{
    memset(p, 0, sizeof *p);
    snprintf(p->model, sizeof p->model, "%s", m->name);
    snprintf(p->device, sizeof p->device, "type0");
    p->n_layers = m->n_layers;
    p->layers = cl_calloc((size_t)m->n_layers, sizeof *p->layers);
    int np = 1 + (int)gen_u(g, 3);
    for (int i = 0; i < m->n_layers; i++) {
        prof_layer *l = &p->layers[i];
        snprintf(l->name, sizeof l->name, "%s", m->layers[i].name);
        prof_layer_points(l, np);
        for (int k = 0; k < np; k++) {
            l->batch[k] = (double)(1 << (2 * k)) * (1 + gen_u(g, 3)) + k;
            if (k && l->batch[k] <= l->batch[k - 1]) l->batch[k] = l->batch[k - 1] + 1;
            l->fwd_s[k] = search_val(g, 1e-7, 1);
            l->bwd_in_s[k] = gen_real(g, 1e-7, 1);
            l->bwd_w_s[k] = m->layers[i].params ? gen_real(g, 1e-7, 1) : 0;
        }
        l->act_bytes = (double)m->layers[i].out_elems * 4;
        l->stash_bytes = (double)m->layers[i].stash_elems * 4;
        l->param_bytes = (double)m->layers[i].params * 4;
    }
}

/* FUZZ_VERBOSE=1 in the environment prints each refusal (seed writing). */
static int search_fail_msg(const char *what, int rc, const cl_err *e)
{
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "search: %s: %s\n", what, e->msg);
    if (rc != CL_EINPUT || e->code != rc || !e->msg[0] || strchr(e->msg, '\n'))
        fuzz_fail("search", "%s returned %d (recorded %d): %s", what, rc, e->code, e->msg);
    return rc;
}

FUZZ_TARGET(search)
{
    gen g = {data, size, 0};
    model m;
    prof pf;
    cluster cl = {0};
    search_model(&g, &m);
    cl_err e = {0};
    int rc = model_derive(&m, FUZZ_FILE, &e);
    if (rc) { /* extreme costs the model itself refuses */
        model_free(&m);
        return search_fail_msg("model_derive", rc, &e);
    }
    search_cluster(&g, &cl);
    plan_request rq = {.model = &m, .prof = &pf, .cluster = &cl, .ref_type = &cl.types[0],
                       .prof_origin = FUZZ_FILE, .cluster_origin = FUZZ_FILE};
    rq.batch = 1 + (int)gen_u(&g, 64);
    rq.schedule = gen_u(&g, 3) ? -1 : (int)gen_u(&g, SCHED_COUNT);
    rq.microbatches = gen_u(&g, 2) ? 0 : 1 + (int)gen_u(&g, (unsigned)rq.batch);
    if (rq.microbatches && rq.batch % rq.microbatches) rq.microbatches = 0;
    rq.chunks = (int)gen_u(&g, 4);
    rq.stages = gen_u(&g, 4) ? 0 : 1 + (int)gen_u(&g, 4);
    rq.algo = (plan_algo)gen_u(&g, PLAN_ALGO_COUNT);
    rq.optimizer = (plan_optim)gen_u(&g, OPTIM_COUNT);
    rq.comm = gen_u(&g, 4) != 0;
    rq.replication = gen_u(&g, 4) != 0;
    rq.exact_budget = 1 + gen_u(&g, 200000);
    if (gen_u(&g, 2)) { /* derived from the first type, at every divisor */
        double pts[PROF_MAX_POINTS];
        int np = 0;
        for (int d = 1; d <= rq.batch && np < PROF_MAX_POINTS; d++)
            if (rq.batch % d == 0) pts[np++] = d;
        rc = prof_derive(&pf, &m, &cl.types[0], pts, np, &e);
    } else {
        search_profile(&g, &m, &pf);
    }
    plan_result res;
    memset(&res, 0, sizeof res);
    /* (bytes past the input's end read 0: the spent budget is 15) */
    if (gen_u(&g, 16) == 15)
        cl_budget_start(0, "--max-seconds");
    else if (fuzz_current_input == NULL) /* under libFuzzer, not in a replay */
        cl_budget_start(FUZZ_SEARCH_SECONDS, "--max-seconds");
    /* the framework, ZeRO and the gradient reduction's element size, drawn
     * last so that older inputs decode as before (none, 0, the default) */
    rq.framework = (plan_for)gen_u(&g, PLAN_FOR_COUNT);
    rq.zero = (int)gen_u(&g, PLAN_ZERO_MAX + 1);
    rq.grad_reduce = (int)gen_u(&g, 3) * 2;
    if (!rc) rc = plan_search(&rq, &res, &e);
    cl_budget_clear(); /* the checks below are not the search's */
    if (rc) {
        search_fail_msg("plan_search", rc, &e);
    } else {
        plan *p = &res.plan;
        if (plan_validate(p, "plan", &e) != CL_OK) fuzz_fail("search", "the plan fails plan_validate: %s", e.msg);
        /* 0 is possible: costs below the smallest double (a memory
         * bandwidth of 1e308 B/s and no FLOPs) */
        if (!(p->pred.iteration_s >= 0 && p->pred.iteration_s <= PLAN_MAX_ITERATION_S))
            fuzz_fail("search", "predicted iteration %g s", p->pred.iteration_s);
        /* the round trip a saved plan makes, model hash included */
        cJSON *j = plan_to_json(p);
        plan q;
        cl_err qe = {0};
        if (plan_from_json(&q, j, "round-trip.json", &qe) != CL_OK)
            fuzz_fail("search", "the plan does not load back: %s", qe.msg);
        plan_free(&q);
        cJSON_Delete(j);
        gen_run run = {.kind = p->schedule, .micro = p->n_micro,
                       .iters = sched_default_iters(p->schedule, sched_fill_depth(p), p->n_micro),
                       .comm_off = p->comm_off};
        const char *broken = NULL;
        cl_err se = {0};
        int src = gen_sim_check(p, &run, NULL, &broken, &se);
        if (broken || src) fuzz_fail("search", "the chosen plan: %s", broken ? broken : se.msg);
    }
    plan_result_free(&res);
    prof_free(&pf);
    cluster_free(&cl);
    model_free(&m);
    return rc;
}
