/* test_plan_for.c - `cleave plan --for torch|deepspeed|megatron` (issue 16):
 * the planner searches only what the framework runs, and the plan's figure
 * is that run's.
 *
 * Every plan made with --for, on the PipeDream profiles, the zoo's
 * transformers (roofline costs) and random models and clusters (chains and
 * DAGs, one or several nodes, equal or mixed devices, memory that binds or
 * not), is checked against references outside the search:
 *   - the framework's constraints, read off the plan: one replica count for
 *     every stage, dividing the microbatches; stages that are runs of layers
 *     in model order; a schedule the framework runs (plan_target_runs);
 *   - the export: `plan_export` succeeds and keeps the plan's schedule (no
 *     1f1b fallback, no second figure);
 *   - the figure: the simulator's replay of the plan (sim_predict) gives the
 *     plan's predicted iteration;
 *   - the restriction: the unrestricted plan for the same question predicts
 *     no slower an iteration (it searches a superset; this check fails when
 *     the unrestricted search misses a layout the restricted one finds).
 * The command line: the plan, export and sim commands agree, and refusals
 * are one line with exit status 2.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "planner/export.h"
#include "planner/search.h"
#include "profiles/profile.h"
#include "sim/sim.h"
#include "test.h"
#include "test_rand.h"
#include "test_rand_model.h"

static const plan_for frameworks[] = {PLAN_FOR_TORCH, PLAN_FOR_DEEPSPEED, PLAN_FOR_MEGATRON};

/* What the checks saw, for the summary line. */
typedef struct tally {
    int plans, replicated, slower, missed_any;
    double worst_gap;       /* largest (for - any) / any                      */
    double best_gap;        /* smallest: below 0 where the --for plan is faster */
    int sched[SCHED_COUNT];
} tally;

/* The checks on one --for plan (see the top); `any` is the unrestricted
 * plan's iteration for the same question (NAN: none fitted). */
static void check_plan(const plan *p, plan_for f, double any, const char *what, tally *ty)
{
    plan_target t = plan_for_target(f);
    int r = p->stages[0].n_replicas, ok = p->framework == f && plan_target_runs(t, p->schedule) &&
                                         p->n_micro % r == 0;
    int next = 0;
    for (int s = 0; s < p->n_stages; s++) {
        const plan_stage *st = &p->stages[s];
        ok &= st->n_replicas == r && st->first == next && st->last - st->first + 1 == st->n_layers;
        next = st->last + 1;
    }
    ok &= next == p->model.n_layers;
    if (!ok) fprintf(stderr, "\n  %s: %s plan breaks the framework's rules", what, plan_for_name(f));
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(plan_export_schedule(p, t), p->schedule);
    cl_err e = {0};
    char *text = NULL;
    int rc = plan_export(p, t, "plan", &text, &e);
    if (rc) fprintf(stderr, "\n  %s: export --to %s: %s", what, plan_target_name(t), e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    CU_ASSERT(!text || !strstr(text, "is not one"));
    free(text);
    if (f == PLAN_FOR_DEEPSPEED) { /* the module export states the same run */
        CU_ASSERT_EQUAL(plan_export(p, PLAN_TO_DEEPSPEED_MODULE, "plan", &text, &e), CL_OK);
        free(text);
    }
    sim_result sr;
    rc = sim_predict(p, &sr, &e);
    CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
    double rel = fabs(sr.iteration_s - p->pred.iteration_s) / sr.iteration_s;
    if (rel > 1e-12)
        fprintf(stderr, "\n  %s: %s plan predicts %.9g s, its simulation %.9g s", what, plan_for_name(f),
                p->pred.iteration_s, sr.iteration_s);
    CU_ASSERT(rel <= 1e-12);
    sim_result_free(&sr);
    if (isnan(any)) {
        ty->missed_any++;
    } else {
        double gap = (p->pred.iteration_s - any) / any;
        if (gap < -1e-12) {
            ty->slower++;
            fprintf(stderr, "\n  %s: the %s plan predicts %.9g s, the unrestricted one %.9g s", what,
                    plan_for_name(f), p->pred.iteration_s, any);
        }
        /* the unrestricted search ranks every layout the --for search
         * ranks (docs/planner.md, "Equal replica counts") */
        CU_ASSERT(gap >= -1e-12);
        if (gap > ty->worst_gap) ty->worst_gap = gap;
        if (gap < ty->best_gap) ty->best_gap = gap;
    }
    ty->plans++;
    ty->replicated += r > 1;
    ty->sched[p->schedule]++;
}

/* Plan rq unrestricted and for each framework in fws[0..n); check every
 * --for plan.  A framework that cannot take the model must refuse it. */
static void check_question(plan_request rq, const plan_for *fws, int n, const char *what, tally *ty)
{
    plan_result res;
    cl_err e = {0};
    double any = NAN;
    rq.framework = PLAN_FOR_ANY;
    if (plan_search(&rq, &res, &e) == CL_OK) {
        any = res.plan.pred.iteration_s;
        plan_result_free(&res);
    }
    for (int k = 0; k < n; k++) {
        rq.framework = fws[k];
        int rc = plan_search(&rq, &res, &e);
        if (rc == CL_OK) {
            check_plan(&res.plan, fws[k], any, what, ty);
            plan_result_free(&res);
        } else {
            /* nothing fits: then the unrestricted search found nothing
             * either, or only what the framework cannot run */
            CU_ASSERT_EQUAL(rc, CL_EINPUT);
            CU_ASSERT(strstr(e.msg, "fit") != NULL);
        }
    }
}

static void summary(const char *what, const tally *ty)
{
    fprintf(stderr, "\n    %s: %d plans (%d replicated; gpipe %d, 1f1b %d, zb-h1 %d, interleaved %d, sequential %d), "
                    "against the unrestricted plan %+.2f%% to %+.2f%%, faster than it in %d ",
            what, ty->plans, ty->replicated, ty->sched[SCHED_GPIPE], ty->sched[SCHED_1F1B], ty->sched[SCHED_ZBH1],
            ty->sched[SCHED_INTERLEAVED], ty->sched[SCHED_SEQUENTIAL], 100 * ty->best_gap, 100 * ty->worst_gap,
            ty->slower);
}

static void cluster_of(cluster *c, int n, int per_node, double mem, double bw_in, double bw_out)
{
    cluster_devtype t = {.name = "ref", .peak_fp32_flops = 1e12, .mem_bytes = (uint64_t)mem, .mem_bw_Bps = 1e12,
                         .efficiency = 1};
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_uniform(c, &t, n, per_node, (cluster_link){bw_in, 1e-5},
                                          (cluster_link){bw_out, 5e-5}, &e),
                          CL_OK);
}

/* The PipeDream profiles (resnet50 is a DAG) on one node of 4, two nodes of
 * 4 and three nodes of 2; torch and deepspeed (Megatron refuses them). */
static void test_pipedream_profiles(void)
{
    static const char *const names[] = {"alexnet", "vgg16", "resnet18", "resnet50", "gnmt"};
    static const int shape[][2] = {{4, 0}, {8, 4}, {6, 2}};
    tally ty = {0};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        model m;
        prof pf;
        if (test_pipedream(names[i], &m, &pf)) continue;
        for (size_t k = 0; k < sizeof shape / sizeof shape[0]; k++) {
            cluster c;
            cluster_of(&c, shape[k][0], shape[k][1], 1e15, 1e10, 1.25e9);
            int batch = (int)pf.layers[0].batch[0];
            plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch > 1 ? batch : 32,
                               .schedule = -1, .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 1};
            char what[96];
            snprintf(what, sizeof what, "%s on %d devices", names[i], shape[k][0]);
            check_question(rq, frameworks, 2, what, &ty);
            /* Megatron: a one-line refusal naming the model */
            rq.framework = PLAN_FOR_MEGATRON;
            rq.model_origin = names[i];
            plan_result res;
            cl_err e = {0};
            CU_ASSERT_EQUAL(plan_search(&rq, &res, &e), CL_EINPUT);
            CU_ASSERT(strstr(e.msg, "--for megatron: ") == e.msg && strstr(e.msg, names[i]) && !strchr(e.msg, '\n'));
            cluster_free(&c);
        }
        model_free(&m);
        prof_free(&pf);
    }
    summary("PipeDream profiles", &ty);
}

/* The zoo's transformers, costs derived for an A100 (what `cleave plan
 * --model ... --device A100-80GB` does), Adam, on one node of 8 and two
 * nodes of 8: every framework, the automatic choice and each schedule the
 * framework runs. */
static void test_transformers(void)
{
    static const char *const files[] = {"models/gpt2-1.5b.json", "models/bert-large.json"};
    tally ty = {0};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        model m;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(model_load(&m, files[i], &e), CL_OK);
        cluster_devtype a100;
        CU_ASSERT_EQUAL_FATAL(cluster_devtype_preset(NULL, "A100-80GB", &a100, &e), CL_OK);
        int batch = 32;
        double pts[8];
        int np = 0;
        for (int d = 1; d <= batch; d++)
            if (batch % d == 0) pts[np++] = d;
        prof pf;
        CU_ASSERT_EQUAL_FATAL(prof_derive(&pf, &m, &a100, pts, np, &e), CL_OK);
        for (int nodes = 1; nodes <= 2; nodes++) {
            cluster c;
            CU_ASSERT_EQUAL_FATAL(cluster_uniform(&c, &a100, 8 * nodes, 8, (cluster_link){3e11, 5e-6},
                                                  (cluster_link){2.5e10, 2e-5}, &e),
                                  CL_OK);
            plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .ref_type = &a100, .batch = batch,
                               .algo = PLAN_ALGO_AUTO, .optimizer = OPTIM_ADAM, .comm = 1, .replication = 1};
            char what[128];
            for (int k = -1; k < SCHED_COUNT; k++) {
                if (k == SCHED_SEQUENTIAL || k == SCHED_PIPEDREAM || k == SCHED_FBP) continue;
                plan_for fws[3];
                int n = 0;
                for (int f = 0; f < 3; f++)
                    if (k < 0 || plan_for_runs(frameworks[f], (sched_kind)k)) fws[n++] = frameworks[f];
                rq.schedule = k;
                snprintf(what, sizeof what, "%s on %d x 8, %s", m.name, nodes, k < 0 ? "auto" : sched_kind_name((sched_kind)k));
                check_question(rq, fws, n, what, &ty);
            }
            cluster_free(&c);
        }
        prof_free(&pf);
        model_free(&m);
    }
    summary("transformers", &ty);
}

/* n devices in one node or nodes of 2, 3 or 4, links of 0.1 to 10 GB/s
 * inside nodes (5% to 55% of that between), and memory unlimited or, one
 * time in tight_one_in, about what the model needs at this batch. */
static void random_cluster(cluster *c, const prof *pf, int batch, int n, int tight_one_in)
{
    double need = 0;
    for (int i = 0; i < pf->n_layers; i++)
        need += 3 * pf->layers[i].param_bytes + batch * (pf->layers[i].stash_bytes + 2 * pf->layers[i].act_bytes);
    static const int per_node[] = {0, 2, 3, 4};
    double bw = 1e8 * pow(100, urand());
    cluster_of(c, n, per_node[irand(0, 3)], irand(0, tight_one_in - 1) == 0 ? need * (0.3 + urand()) : 1e15, bw,
               bw * (0.05 + 0.5 * urand()));
}

/* Random questions (200; fewer in sanitizer builds, tests/test.h): 2 to 8
 * devices in one node or nodes of 2, 3 or 4,
 * equal or mixed devices, slow or fast links, memory unlimited or about
 * what the model needs, batch 8 or 16; torch and deepspeed. */
static void test_random(void)
{
    tally ty = {0};
    rng_state = 0x16f0u;
    for (int q = 0; q < TEST_BREADTH(200, 40); q++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, q % 3 == 2, 0);
        int batch = irand(0, 1) ? 8 : 16, n = irand(2, 8);
        cluster c;
        random_cluster(&c, &pf, batch, n, 3);
        if (irand(0, 2) == 0) { /* mixed: a faster second type */
            c.types = realloc(c.types, 2 * sizeof *c.types);
            c.types[1] = c.types[0];
            snprintf(c.types[1].name, sizeof c.types[1].name, "fast");
            c.types[1].peak_fp32_flops *= 1.5 + 1.5 * urand();
            c.n_types = 2;
            for (int d = 0; d < n; d++) c.devices[d].type = irand(0, 1);
        }
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .ref_type = &c.types[0], .batch = batch,
                           .schedule = -1, .algo = PLAN_ALGO_AUTO, .comm = irand(0, 3) != 0,
                           .replication = irand(0, 4) != 0};
        char what[96];
        snprintf(what, sizeof what, "random question %d (%d layers, %d devices)", q, m.n_layers, n);
        check_question(rq, frameworks, 2, what, &ty);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    summary("random", &ty);
}

/* The unrestricted plan is never slower than a --for plan for the same
 * question (issue 16: the ranking is by the simulated time it reports, and
 * the unrestricted search ranks every layout the --for searches rank):
 * 150 random questions (fewer in sanitizer builds), each with a random
 * schedule (auto, gpipe, 1f1b,
 * zb-h1, interleaved), replication mostly on, and a third of the chains
 * shaped as transformers (an embedding first, one or two head layers
 * last) so that megatron plans them too.  check_question asserts it. */
static void test_random_never_slower(void)
{
    tally ty = {0};
    rng_state = 0x16a7u;
    static const int scheds[] = {-1, SCHED_GPIPE, SCHED_1F1B, SCHED_ZBH1, SCHED_INTERLEAVED};
    for (int q = 0; q < TEST_BREADTH(150, 30); q++) {
        model m;
        prof pf;
        rand_block_model(&m, &pf, q % 4 == 3, 0);
        if (q % 3 == 0 && !m.is_dag && m.n_layers >= 3) {
            int heads = irand(1, 2);
            snprintf(m.layers[0].name, sizeof m.layers[0].name, "embedding");
            for (int k = 0; k < heads; k++)
                snprintf(m.layers[m.n_layers - 1 - k].name, sizeof m.layers[0].name, "%s", k ? "head" : "loss");
            for (int i = 0; i < m.n_layers; i++) snprintf(pf.layers[i].name, sizeof pf.layers[i].name, "%s", m.layers[i].name);
        }
        int batch = irand(0, 1) ? 8 : 16, n = irand(2, 8);
        cluster c;
        random_cluster(&c, &pf, batch, n, 4);
        int sk = scheds[irand(0, 4)];
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = batch, .schedule = sk,
                           .algo = PLAN_ALGO_AUTO, .comm = irand(0, 3) != 0, .replication = irand(0, 5) != 0};
        plan_for fws[3];
        int nf = 0;
        for (int f = 0; f < 3; f++) {
            int head;
            cl_err me = {0};
            if ((sk < 0 || plan_for_runs(frameworks[f], (sched_kind)sk)) &&
                plan_target_model(&m, plan_for_target(frameworks[f]), "m", &head, &me) == CL_OK)
                fws[nf++] = frameworks[f];
        }
        char what[128];
        snprintf(what, sizeof what, "random question %d (%d layers, %d devices, %s)", q, m.n_layers, n,
                 sk < 0 ? "auto" : sched_kind_name((sched_kind)sk));
        if (nf) check_question(rq, fws, nf, what, &ty);
        cluster_free(&c);
        model_free(&m);
        prof_free(&pf);
    }
    summary("random, each schedule", &ty);
}

/* Megatron keeps the head layers (here "head" and "loss", the second the
 * heaviest layer, so a cut before it would balance best) on the last
 * stage: no --for megatron plan starts a stage at "loss", while the
 * unrestricted search does; the export takes every plan. */
static void test_megatron_head(void)
{
    int n = 8, cut_at_loss = 0;
    model m = {0};
    snprintf(m.name, sizeof m.name, "tiny-gpt");
    m.input = (model_shape){1, {64, 0, 0}};
    m.n_layers = n;
    m.layers = cl_calloc((size_t)n, sizeof *m.layers);
    for (int i = 0; i < n; i++) {
        char name[32];
        if (i == 0) snprintf(name, sizeof name, "embedding");
        else if (i == n - 2) snprintf(name, sizeof name, "head");
        else if (i == n - 1) snprintf(name, sizeof name, "loss");
        else snprintf(name, sizeof name, "layer.%d", i - 1);
        model_block_init(&m.layers[i], name, 1e6, 1e5, 4096, 4096);
    }
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_derive(&m, "tiny", &e), CL_OK);
    prof pf = {0};
    snprintf(pf.model, sizeof pf.model, "%s", m.name);
    snprintf(pf.device, sizeof pf.device, "ref");
    pf.n_layers = n;
    pf.layers = cl_calloc((size_t)n, sizeof *pf.layers);
    for (int i = 0; i < n; i++) {
        prof_layer *l = &pf.layers[i];
        snprintf(l->name, sizeof l->name, "%s", m.layers[i].name);
        prof_layer_points(l, 1);
        l->batch[0] = 1;
        l->fwd_s[0] = i == n - 1 ? 4e-3 : 1e-3;
        l->bwd_in_s[0] = l->bwd_w_s[0] = l->fwd_s[0];
        l->act_bytes = 4096;
        l->param_bytes = 1e6;
    }
    for (int devices = 2; devices <= 6; devices++) {
        cluster c;
        cluster_of(&c, devices, 0, 1e15, 1e10, 1e10);
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = 8, .microbatches = 8,
                           .schedule = SCHED_1F1B, .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 0};
        plan_result res;
        CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &res, &e), CL_OK);
        for (int s = 0; s < res.plan.n_stages; s++) cut_at_loss += res.plan.stages[s].first == n - 1;
        plan_result_free(&res);
        rq.framework = PLAN_FOR_MEGATRON;
        CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &res, &e), CL_OK);
        for (int s = 0; s < res.plan.n_stages; s++) CU_ASSERT(res.plan.stages[s].first < n - 1);
        char *text = NULL;
        CU_ASSERT_EQUAL(plan_export(&res.plan, PLAN_TO_MEGATRON, "plan", &text, &e), CL_OK);
        free(text);
        plan_result_free(&res);
        cluster_free(&c);
    }
    CU_ASSERT(cut_at_loss > 0); /* the rule changes something here */
    model_free(&m);
    prof_free(&pf);
}

/* "for" in a plan file: written by --for, read back, an unknown framework
 * named with its JSON path, absent in older plans. */
static void test_plan_file(void)
{
    model m;
    prof pf;
    if (test_pipedream("alexnet", &m, &pf)) return;
    cluster c;
    cluster_of(&c, 4, 0, 1e15, 1e10, 1e10);
    plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = 32, .schedule = -1,
                       .algo = PLAN_ALGO_AUTO, .comm = 1, .replication = 1, .framework = PLAN_FOR_DEEPSPEED};
    plan_result res;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_search(&rq, &res, &e), CL_OK);
    cJSON *j = plan_to_json(&res.plan);
    CU_ASSERT_STRING_EQUAL(cJSON_GetStringValue(cJSON_GetObjectItem(j, "for")), "deepspeed");
    plan back;
    CU_ASSERT_EQUAL(plan_from_json(&back, j, "p.json", &e), CL_OK);
    CU_ASSERT_EQUAL(back.framework, PLAN_FOR_DEEPSPEED);
    plan_free(&back);
    cJSON_ReplaceItemInObject(j, "for", cJSON_CreateString("jax"));
    CU_ASSERT_EQUAL(plan_from_json(&back, j, "p.json", &e), CL_EINPUT);
    CU_ASSERT(strstr(e.msg, "p.json: for: unknown value \"jax\"") != NULL);
    cJSON_DeleteItemFromObject(j, "for");
    CU_ASSERT_EQUAL(plan_from_json(&back, j, "p.json", &e), CL_OK);
    CU_ASSERT_EQUAL(back.framework, PLAN_FOR_ANY);
    plan_free(&back);
    cJSON_Delete(j);
    plan_result_free(&res);
    cluster_free(&c);
    model_free(&m);
    prof_free(&pf);
}

/* ---------------------------------------------------------- the CLI -- */

static char *dir;

static int run(const char *cmd, char **so, char **se)
{
    int st = test_run_cli(cmd, so, se);
    return st;
}

/* A number in the JSON text after "key": */
static double json_num(const char *text, const char *key)
{
    cJSON *j = cJSON_Parse(text);
    const cJSON *v = j ? cJSON_GetObjectItemCaseSensitive(j, key) : NULL;
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cJSON_Delete(j);
    return x;
}

/* plan --for F -o p.json; export --to F keeps the schedule and states the
 * plan's batch; sim --json replays the plan's figure. */
static void test_cli_roundtrip(void)
{
    static const char *const questions[][2] = {
        {"torch", "--model models/gpt2-1.5b.json --cluster profiles/clusters/h100-8-nvlink.json --optimizer adam"},
        {"deepspeed", "--model models/gpt2-1.5b.json --cluster profiles/clusters/dgx-a100-4nodes.json --optimizer adam"},
        {"megatron", "--model models/bert-large.json --cluster profiles/clusters/dgx-a100-4nodes.json --batch 64"},
        {"torch", "--profile ../shared/data/pipedream/vgg16.txt --devices 8 --per-node 4"},
        {"deepspeed", "--profile ../shared/data/pipedream/resnet50.txt --devices 6 --per-node 2"},
    };
    if (!dir) dir = test_tmpdir();
    for (size_t q = 0; q < sizeof questions / sizeof questions[0]; q++) {
        char cmd[1400], path[1100], *so, *se;
        snprintf(path, sizeof path, "%s/p%zu.json", dir, q);
        snprintf(cmd, sizeof cmd, "plan %s --for %s -o %s", questions[q][1], questions[q][0], path);
        int st = run(cmd, &so, &se);
        if (st) fprintf(stderr, "\n  %s: %s", cmd, se);
        CU_ASSERT_EQUAL_FATAL(st, 0);
        CU_ASSERT(strstr(so, "for: ") != NULL);
        free(so);
        free(se);
        plan p;
        cl_err e = {0};
        CU_ASSERT_EQUAL_FATAL(plan_load(&p, path, &e), CL_OK);
        CU_ASSERT_EQUAL(p.framework, plan_for_from_name(questions[q][0]));
        snprintf(cmd, sizeof cmd, "export %s --to %s", path, questions[q][0]);
        st = run(cmd, &so, &se);
        CU_ASSERT_EQUAL(st, 0);
        CU_ASSERT(!strstr(so, "is not one") && !strstr(se, "note"));
        char want[128];
        snprintf(want, sizeof want, "schedule %s, predicted by cleave", sched_kind_name(p.schedule));
        if (strcmp(questions[q][0], "deepspeed") != 0) {
            CU_ASSERT(strstr(so, want) != NULL);
        } else {
            CU_ASSERT_EQUAL((long)json_num(so, "train_batch_size"), p.batch);
        }
        free(so);
        free(se);
        snprintf(cmd, sizeof cmd, "sim %s --json", path);
        st = run(cmd, &so, &se);
        CU_ASSERT_EQUAL(st, 0);
        double it = json_num(so, "iteration_s");
        if (!(fabs(it - p.pred.iteration_s) <= 1e-12 * it))
            fprintf(stderr, "\n  %s: sim %.9g s, plan %.9g s", questions[q][1], it, p.pred.iteration_s);
        CU_ASSERT(fabs(it - p.pred.iteration_s) <= 1e-12 * it);
        free(so);
        free(se);
        plan_free(&p);
    }
}

/* One line on stderr, exit status 2, a hint, nothing written. */
static void expect_refusal(const char *args, const char *needle)
{
    char *so, *se;
    int st = run(args, &so, &se);
    CU_ASSERT_EQUAL(st, 2);
    int lines = 0;
    for (const char *s = se; *s; s++) lines += *s == '\n';
    CU_ASSERT_EQUAL(lines, 1);
    CU_ASSERT(strstr(se, "hint") != NULL);
    if (!strstr(se, needle)) fprintf(stderr, "\n  %s: %s", args, se);
    CU_ASSERT(strstr(se, needle) != NULL);
    CU_ASSERT_EQUAL(so[0], '\0');
    free(so);
    free(se);
}

static void test_cli_refusals(void)
{
    if (!dir) dir = test_tmpdir();
    char cmd[1400], out[1100];
    snprintf(out, sizeof out, "%s/never.json", dir);
    snprintf(cmd, sizeof cmd, "plan --model models/gpt2-1.5b.json --devices 4 --device A100-80GB --for torch --schedule fbp -o %s", out);
    expect_refusal(cmd, "--schedule fbp: torch does not run it (hint: --schedule gpipe, 1f1b, zb-h1 or interleaved, or auto)");
    snprintf(cmd, sizeof cmd, "plan --model models/gpt2-1.5b.json --devices 4 --device A100-80GB --for deepspeed --schedule interleaved -o %s", out);
    expect_refusal(cmd, "deepspeed does not run it");
    snprintf(cmd, sizeof cmd, "plan --model models/gpt2-1.5b.json --devices 4 --device A100-80GB --for jax -o %s", out);
    expect_refusal(cmd, "--for: unknown framework \"jax\"");
    snprintf(cmd, sizeof cmd, "plan --model models/vgg16.json --devices 4 --device A100-80GB --for megatron -o %s", out);
    expect_refusal(cmd, "--for megatron: models/vgg16.json: megatron needs a transformer model");
    FILE *f = fopen(out, "r");
    CU_ASSERT_PTR_NULL(f);
    if (f) fclose(f);
    expect_refusal("sweep --model models/gpt2-1.5b.json --device A100-80GB --devices 1,2 --for deepspeed --schedules 1f1b,gpipe --quiet",
                   "--schedules: deepspeed does not run gpipe (hint: deepspeed runs 1f1b)");
    expect_refusal("compare --model models/vgg16.json --clusters profiles/clusters/h100-8-nvlink.json --for megatron --quiet",
                   "--for megatron: models/vgg16.json: megatron needs a transformer model");
}

/* sweep --for torch keeps torch's schedules from its default list, and
 * every point's plan is a torch plan. */
static void test_cli_sweep(void)
{
    if (!dir) dir = test_tmpdir();
    char cmd[1400], *so, *se;
    snprintf(cmd, sizeof cmd, "sweep --model models/gpt2-1.5b.json --device A100-80GB --devices 1,2,4 --batch 16 "
                              "--for torch --quiet --csv %s/s.csv --save-plans %s/sp", dir, dir);
    int st = run(cmd, &so, &se);
    if (st) fprintf(stderr, "\n  %s", se);
    CU_ASSERT_EQUAL_FATAL(st, 0);
    free(so);
    free(se);
    char path[1200];
    snprintf(path, sizeof path, "%s/s.csv", dir);
    char *csv = test_slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    CU_ASSERT(strstr(csv, ",pipedream,") == NULL && strstr(csv, ",fbp,") == NULL);
    CU_ASSERT(strstr(csv, ",gpipe,") != NULL && strstr(csv, ",1f1b,") != NULL && strstr(csv, ",zb-h1,") != NULL);
    free(csv);
    static const char *const kinds[] = {"gpipe", "1f1b", "zb-h1"};
    for (int d = 1; d <= 4; d *= 2)
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/sp/%ddev-%s.json", dir, d, kinds[k]);
            plan p;
            cl_err e = {0};
            if (plan_load(&p, path, &e) != CL_OK) continue; /* a point that did not fit */
            CU_ASSERT_EQUAL(p.framework, PLAN_FOR_TORCH);
            char *text = NULL;
            CU_ASSERT_EQUAL(plan_export(&p, PLAN_TO_TORCH, path, &text, &e), CL_OK);
            CU_ASSERT(!text || !strstr(text, "is not one"));
            free(text);
            plan_free(&p);
        }
}

static void test_cleanup(void)
{
    if (dir) CU_ASSERT_EQUAL(test_rmtree(dir), 0);
    dir = NULL;
}

TEST_SUITE(plan_for)
{
    test_add_suite("plan_for");
    test_add("PipeDream profiles: --for plans obey the framework, export, simulate to their figure", test_pipedream_profiles);
    test_add("transformers: every framework and schedule", test_transformers);
    test_add("random questions: chains and DAGs, nodes, mixed devices, memory", test_random);
    test_add("random questions, each schedule: the unrestricted plan is never slower", test_random_never_slower);
    test_add("megatron: the head layers stay on the last stage", test_megatron_head);
    test_add("plan files: \"for\" written, read, checked, optional", test_plan_file);
    test_add("CLI: plan --for, export and sim agree", test_cli_roundtrip);
    test_add("CLI: refusals are one line, exit 2, with a hint", test_cli_refusals);
    test_add("CLI: sweep --for torch", test_cli_sweep);
    test_add("cleanup", test_cleanup);
}
