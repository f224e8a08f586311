/* test_inspect.c - `cleave inspect` on plan files: the table matches the
 * plan's own numbers, --json re-loads to the same plan, bad plans exit 2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/plan.h"
#include "profiles/cluster.h"
#include "base/fileio.h"
#include "base/jsonx.h"
#include "test.h"

#define PLAN2 "tests/data/sim/fmnist-2stage.json"

static void test_plan_table_and_json(void)
{
    plan p;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_load(&p, PLAN2, &e), CL_OK);
    char *out = NULL, want[128];
    CU_ASSERT_EQUAL(test_run_cli("inspect " PLAN2, &out, NULL), 0);
    snprintf(want, sizeof want, "iteration %.6f s", p.pred.iteration_s);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    snprintf(want, sizeof want, "batch %d = %d microbatches of %d", p.batch, p.n_micro, p.microbatch);
    CU_ASSERT_PTR_NOT_NULL(out ? strstr(out, want) : NULL);
    free(out);

    /* --json prints a plan that loads to the same serialisation */
    CU_ASSERT_EQUAL(test_run_cli("inspect --json " PLAN2, &out, NULL), 0);
    cJSON *j = NULL;
    CU_ASSERT_EQUAL_FATAL(jx_parse_text("stdout", out, strlen(out), &j, &e), CL_OK);
    plan q;
    CU_ASSERT_EQUAL_FATAL(plan_from_json(&q, j, "stdout", &e), CL_OK);
    cJSON *a = plan_to_json(&p), *b = plan_to_json(&q);
    char *sa = jx_print(a, 0), *sb = jx_print(b, 0);
    CU_ASSERT_STRING_EQUAL(sa, sb);
    free(sa);
    free(sb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(j);
    plan_free(&q);
    plan_free(&p);
    free(out);
}

static void test_bad_plan(void)
{
    char *dir = test_tmpdir(), path[600], args[700];
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char *text = "{\"format\": \"cleave-plan\", \"version\": 1, \"schedule\": \"1f1b\"}";
    cl_err e = {0};
    CU_ASSERT_EQUAL(cl_write_file(path, text, strlen(text), &e), CL_OK);
    snprintf(args, sizeof args, "inspect %s", path);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, path) : NULL);
    CU_ASSERT_PTR_NOT_NULL(err ? strstr(err, "missing") : NULL);
    free(err);
    remove(path);
    rmdir(dir);
    free(dir);
}

/* The device presets file: a row per preset with its peak, and --json that
 * loads back (as a presets file) to the very same types. */
static void test_devices(void)
{
    cluster_devtype *types;
    int n;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cluster_devtypes_load("profiles/devices.json", &types, &n, &e), CL_OK);
    char *out = NULL, *err = NULL;
    CU_ASSERT_EQUAL(test_run_cli("inspect profiles/devices.json", &out, &err), 0);
    for (int t = 0; t < n && out; t++) {
        char row[160];
        snprintf(row, sizeof row, "  %s ", types[t].name);
        const char *at = strstr(out, row);
        CU_ASSERT_PTR_NOT_NULL(at);
        double fp32 = 0;
        if (at) CU_ASSERT_EQUAL(sscanf(at + strlen(row), "%lf", &fp32), 1);
        CU_ASSERT(fabs(fp32 - types[t].peak_fp32_flops / 1e12) <= 5e-4 * fp32);
    }
    free(out);
    free(err);
    CU_ASSERT_EQUAL(test_run_cli("inspect profiles/devices.json --json", &out, &err), 0);
    char *dir = test_tmpdir(), path[600];
    snprintf(path, sizeof path, "%s/d.json", dir);
    CU_ASSERT_EQUAL(cl_write_file(path, out, strlen(out), &e), CL_OK);
    cluster_devtype *back;
    int nb;
    CU_ASSERT_EQUAL_FATAL(cluster_devtypes_load(path, &back, &nb, &e), CL_OK);
    CU_ASSERT_EQUAL(nb, n);
    for (int t = 0; t < n && t < nb; t++) CU_ASSERT_EQUAL(memcmp(&types[t], &back[t], sizeof *back), 0);
    free(back);
    free(types);
    free(out);
    free(err);
    remove(path);
    rmdir(dir);
    free(dir);
}

TEST_SUITE(inspect)
{
    test_add_suite("inspect");
    test_add("plan: table numbers and --json round trip", test_plan_table_and_json);
    test_add("plan: a broken file exits 2 naming it", test_bad_plan);
    test_add("device presets: a row per preset, --json loads back the same", test_devices);
}
