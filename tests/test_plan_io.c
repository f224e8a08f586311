/* test_plan_io.c - plan files: round trip and the checks plan_validate makes.
 *
 * The plan under test comes from the planner on a PipeDream profile; the
 * round trip must reproduce every field exactly and the file byte for byte,
 * and each way of breaking a plan must be refused with the JSON path of the
 * offending member in the message.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/plan.h"
#include "planner/search.h"
#include "profiles/pipedream.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"

/* A 4-stage plan of vgg16 (PipeDream profile) on 4 devices in 2 nodes. */
static int make_plan(plan *out)
{
    char buf[512];
    const char *path = test_shared("pipedream/vgg16.txt", buf, sizeof buf);
    if (!path) return -1;
    cl_err e = {0};
    model m;
    prof pf;
    if (pipedream_import(path, 0, &m, &pf, NULL, &e)) return -1;
    cluster_devtype t = {.name = "gpu", .peak_fp32_flops = 1e13, .mem_bytes = (uint64_t)16 << 30,
                         .mem_bw_Bps = 9e11, .efficiency = 0.5};
    cluster c;
    int rc = cluster_uniform(&c, &t, 4, 2, (cluster_link){1e10, 1e-5}, (cluster_link){1e9, 5e-5}, &e);
    if (!rc) {
        plan_request rq = {.model = &m, .prof = &pf, .cluster = &c, .batch = 64, .schedule = SCHED_1F1B,
                           .microbatches = 8, .algo = PLAN_ALGO_EXACT, .optimizer = OPTIM_ADAM,
                           .comm = 1, .replication = 1};
        plan_result res;
        rc = plan_search(&rq, &res, &e);
        if (!rc) {
            *out = res.plan;
            memset(&res.plan, 0, sizeof res.plan);
            plan_result_free(&res);
        }
        cluster_free(&c);
    }
    if (rc) fprintf(stderr, "make_plan: %s\n", e.msg);
    model_free(&m);
    prof_free(&pf);
    return rc;
}

static int same_plan(const plan *a, const plan *b)
{
    if (a->schedule != b->schedule || a->chunks != b->chunks || a->optimizer != b->optimizer ||
        a->batch != b->batch || a->microbatch != b->microbatch || a->n_micro != b->n_micro ||
        a->n_stages != b->n_stages)
        return 0;
    /* the figures; whether they were replayed is not stored (plan_pred.simulated) */
    if (a->pred.iteration_s != b->pred.iteration_s || a->pred.throughput != b->pred.throughput ||
        a->pred.bubble != b->pred.bubble || a->pred.speedup != b->pred.speedup)
        return 0;
    for (int s = 0; s < a->n_stages; s++) {
        const plan_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->first != y->first || x->last != y->last || x->n_layers != y->n_layers ||
            x->n_replicas != y->n_replicas)
            return 0;
        if (memcmp(x->layers, y->layers, (size_t)x->n_layers * sizeof(int)) ||
            memcmp(x->devices, y->devices, (size_t)x->n_replicas * sizeof(int)))
            return 0;
        const double u[] = {x->fwd_s, x->bwd_in_s, x->bwd_w_s, x->update_s, x->act_out_bytes,
                            x->stash_bytes, x->param_bytes, x->compute_s, x->comm_s, x->mem_bytes};
        const double v[] = {y->fwd_s, y->bwd_in_s, y->bwd_w_s, y->update_s, y->act_out_bytes,
                            y->stash_bytes, y->param_bytes, y->compute_s, y->comm_s, y->mem_bytes};
        if (memcmp(u, v, sizeof u) != 0) return 0;
    }
    if (a->model.n_layers != b->model.n_layers || strcmp(a->model.name, b->model.name) ||
        a->cluster.n_devices != b->cluster.n_devices || strcmp(a->cluster.name, b->cluster.name))
        return 0;
    return 1;
}

static void test_round_trip(void)
{
    plan p;
    CU_ASSERT_EQUAL_FATAL(make_plan(&p), 0);
    CU_ASSERT_TRUE(p.n_stages >= 2);
    p.stages[0].update_s = 0.1 + 0.2; /* not a short decimal: must come back exactly */
    p.stages[1].update_s = 0;
    char a[600], b[600];
    char *dir = test_scratch(sizeof a, "a.json", a, "b.json", b, NULL);
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_save(&p, a, &e), CL_OK);
    plan q, r;
    CU_ASSERT_EQUAL_FATAL(plan_load(&q, a, &e), CL_OK);
    CU_ASSERT_TRUE(same_plan(&p, &q));
    CU_ASSERT_EQUAL_FATAL(plan_save(&q, b, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(plan_load(&r, b, &e), CL_OK);
    CU_ASSERT_TRUE(same_plan(&q, &r));
    char *ta, *tb;
    size_t la, lb;
    CU_ASSERT_EQUAL(cl_read_file(a, 1 << 26, &ta, &la, &e), CL_OK);
    CU_ASSERT_EQUAL(cl_read_file(b, 1 << 26, &tb, &lb, &e), CL_OK);
    CU_ASSERT_TRUE(la == lb && memcmp(ta, tb, la) == 0);
    /* the file carries what the issue asks for */
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"first_name\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"compute_s\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"iteration_s\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"cleave-model\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ta, "\"cleave-cluster\""));
    /* update_s is optional: written for the stage that has one only */
    const char *u = strstr(ta, "\"update_s\"");
    CU_ASSERT_PTR_NOT_NULL(u);
    CU_ASSERT_PTR_NULL(u ? strstr(u + 1, "\"update_s\"") : NULL);
    CU_ASSERT_EQUAL(q.stages[0].update_s, 0.1 + 0.2);
    CU_ASSERT_EQUAL(q.stages[1].update_s, 0.0);
    free(ta);
    free(tb);
    plan_free(&p);
    plan_free(&q);
    plan_free(&r);
    remove(a);
    remove(b);
    rmdir(dir);
    free(dir);
}

/* Break a valid plan with `mutate`, check plan_validate's message. */
static void expect_invalid(void (*mutate)(plan *), const char *path_in_msg)
{
    plan p;
    CU_ASSERT_EQUAL_FATAL(make_plan(&p), 0);
    cl_err e = {0};
    CU_ASSERT_EQUAL(plan_validate(&p, "p.json", &e), CL_OK);
    mutate(&p);
    CU_ASSERT_EQUAL(plan_validate(&p, "p.json", &e), CL_EINPUT);
    if (!strstr(e.msg, path_in_msg) || strncmp(e.msg, "p.json: ", 8) != 0)
        fprintf(stderr, "\n  message \"%s\" lacks \"%s\"\n", e.msg, path_in_msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, path_in_msg));
    CU_ASSERT_EQUAL(strncmp(e.msg, "p.json: ", 8), 0);
    plan_free(&p);
}

static void overlap(plan *p)
{
    /* stage 1 also claims the last layer of stage 0 */
    plan_stage *a = &p->stages[0], *b = &p->stages[1];
    b->layers = cl_realloc(b->layers, (size_t)(b->n_layers + 1) * sizeof(int));
    memmove(b->layers + 1, b->layers, (size_t)b->n_layers * sizeof(int));
    b->layers[0] = a->last;
    b->n_layers++;
    b->first = a->last;
}
static void empty_stage(plan *p) { p->stages[1].n_layers = 0; }
static void bad_device(plan *p) { p->stages[0].devices[0] = p->cluster.n_devices + 3; }
static void shared_device(plan *p) { p->stages[1].devices[0] = p->stages[0].devices[0]; }
static void bad_batch(plan *p) { p->batch = p->microbatch * p->n_micro + 1; }
static void missing_layer(plan *p) { p->stages[p->n_stages - 1].n_layers--; p->stages[p->n_stages - 1].last--; }
static void backwards(plan *p)
{
    /* swap the layer sets of stages 0 and 1: data would flow backwards */
    plan_stage t = p->stages[0];
    p->stages[0].layers = p->stages[1].layers;
    p->stages[0].n_layers = p->stages[1].n_layers;
    p->stages[0].first = p->stages[1].first;
    p->stages[0].last = p->stages[1].last;
    p->stages[1].layers = t.layers;
    p->stages[1].n_layers = t.n_layers;
    p->stages[1].first = t.first;
    p->stages[1].last = t.last;
}

static void test_validate_overlap(void) { expect_invalid(overlap, "stages[1].layers[0]"); }
static void test_validate_empty(void) { expect_invalid(empty_stage, "stages[1].layers"); }
static void test_validate_device(void) { expect_invalid(bad_device, "stages[0].devices[0]"); }
static void test_validate_shared(void) { expect_invalid(shared_device, "stages[1].devices[0]"); }
static void test_validate_batch(void) { expect_invalid(bad_batch, "batch"); }
static void test_validate_missing(void) { expect_invalid(missing_layer, "is in no stage"); }
static void test_validate_order(void) { expect_invalid(backwards, "later stages"); }
static void negative_update(plan *p) { p->stages[1].update_s = -1e-6; }
static void test_validate_update(void) { expect_invalid(negative_update, "stages[1].update_s"); }

/* The loader names the file and path for a broken file, too. */
static void test_load_errors(void)
{
    plan p;
    CU_ASSERT_EQUAL_FATAL(make_plan(&p), 0);
    cJSON *root = plan_to_json(&p);
    plan_free(&p);
    cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    cJSON *s0 = cJSON_GetArrayItem(stages, 0);
    cJSON *devs = cJSON_GetObjectItemCaseSensitive(s0, "devices");
    cJSON_ReplaceItemInArray(devs, 0, cJSON_CreateNumber(99));
    char *dir = test_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    cl_err e = {0};
    CU_ASSERT_EQUAL(jx_write_file(path, root, &e), CL_OK);
    CU_ASSERT_EQUAL(plan_load(&p, path, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.json: stages[0].devices[0]: device 99 does not exist"));
    /* a typo in a member name */
    cJSON_AddNumberToObject(s0, "replicaz", 1);
    CU_ASSERT_EQUAL(jx_write_file(path, root, &e), CL_OK);
    cl_err_clear(&e);
    CU_ASSERT_EQUAL(plan_load(&p, path, &e), CL_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "stages[0].replicaz"));
    cJSON_Delete(root);
    remove(path);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(plan_io)
{
    test_add_suite("plan_io");
    test_add("plan save/load/save is identical", test_round_trip);
    test_add("validate: overlapping stages", test_validate_overlap);
    test_add("validate: empty stage", test_validate_empty);
    test_add("validate: device index out of range", test_validate_device);
    test_add("validate: one device in two stages", test_validate_shared);
    test_add("validate: batch != microbatch x microbatches", test_validate_batch);
    test_add("validate: a layer in no stage", test_validate_missing);
    test_add("validate: data flowing backwards", test_validate_order);
    test_add("validate: negative update_s", test_validate_update);
    test_add("load: file and JSON path in messages", test_load_errors);
}
