/* test_compare.c - `cleave compare`: the best plan per cluster is the best
 * of `cleave plan` + `cleave sim` over the schedules (replicated or not);
 * time and cost per epoch by hand from the simulated throughput and the
 * preset's prices; n/a without a price; interrupt and bad input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonx.h"
#include "test.h"
#include "test_csv.h"

/* Two devices of a made-up type priced 1.50 per hour, on one node. */
static const char tiny_cluster[] =
    "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"tiny-2\",\n"
    " \"device_types\": [{\"name\": \"tiny\", \"peak_fp32_flops\": 2e12, \"memory_bytes\": 1073741824,\n"
    "   \"memory_bw_Bps\": 1e11, \"efficiency\": 0.5, \"price_per_hour\": 1.5}],\n"
    " \"nodes\": [{\"name\": \"n0\", \"devices\": {\"type\": \"tiny\", \"count\": 2}}],\n"
    " \"links\": {\"intra_node\": {\"bandwidth_Bps\": 1e10, \"latency_s\": 1e-5}}}\n";

static const char *const all_kinds[] = {"gpipe", "1f1b", "zb-h1", "pipedream", "fbp"};

static cJSON *run_json(const char *args)
{
    char *out = NULL;
    int rc = test_run_cli(args, &out, NULL);
    cJSON *j = rc ? NULL : cJSON_Parse(out);
    free(out);
    return j;
}

static double num_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void test_cost_by_hand(void)
{
    char cl[600], csv[600], plans[600], args[3000];
    char *dir = test_scratch(sizeof cl, "tiny.json", cl, "c.csv", csv, "plans", plans, NULL);
    cl_err e = {0};
    CU_ASSERT_FATAL(cl_write_file(cl, tiny_cluster, strlen(tiny_cluster), &e) == CL_OK);
    snprintf(args, sizeof args,
             "compare --model models/fmnist-mlp.json --clusters %s profiles/clusters/cpu-2cores.json "
             "--csv %s --save-plans %s", cl, csv, plans);
    char *out = NULL, *err = NULL;
    int rc = test_run_cli(args, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "compare failed: %s\n", err);
    CU_ASSERT_STRING_EQUAL(err, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "60000 samples (Fashion-MNIST"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "n/a")); /* cpu-2cores has no price */
    free(out);
    free(err);
    test_csv c;
    CU_ASSERT_FATAL(test_csv_read(csv, &c) == 0);
    CU_ASSERT_EQUAL_FATAL(c.n_rows, 2);
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 0, "cluster"), "tiny-2");
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 0, "feasible"), "yes");
    CU_ASSERT_EQUAL(atoi(test_csv_get(&c, 0, "dataset_size")), 60000);

    /* the saved best plan, replayed by cleave sim */
    char plan[700];
    snprintf(plan, sizeof plan, "sim --json %s/tiny-2.json", plans);
    cJSON *sim = run_json(plan);
    CU_ASSERT_FATAL(sim != NULL);
    double thr = num_of(sim, "throughput");
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "throughput"), thr) < 1e-10);
    /* by hand: 60000 samples at thr samples/s; 2 devices x 1.50 per hour */
    double epoch_s = 60000.0 / thr, cost = 2 * 1.5 * epoch_s / 3600.0;
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "epoch_s"), epoch_s) < 1e-10);
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "price_per_hour"), 3.0) < 1e-12);
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "cost_per_epoch"), cost) < 1e-10);
    /* headroom: 1 GiB minus the highest simulated peak of the devices used */
    double peak = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(sim, "devices"))
        peak = fmax(peak, num_of(d, "peak_mem_bytes"));
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "headroom_bytes"), 1073741824.0 - peak) < 1e-10);
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "headroom_fraction"), 1 - peak / 1073741824.0) < 1e-10);
    cJSON_Delete(sim);

    /* no price: empty price and cost columns, the rest as usual */
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 1, "cost_per_epoch"), "");
    CU_ASSERT_STRING_EQUAL(test_csv_get(&c, 1, "price_per_hour"), "");
    CU_ASSERT(test_csv_num(&c, 1, "epoch_s") > 0);

    /* the best is the fastest of cleave plan + cleave sim over every schedule,
     * with replication and without */
    double best = 0;
    for (size_t k = 0; k < sizeof all_kinds / sizeof all_kinds[0]; k++)
        for (int rep = 0; rep < 2; rep++) {
            char p[700];
            snprintf(p, sizeof p, "%s/cand.json", dir);
            snprintf(args, sizeof args, "plan --model models/fmnist-mlp.json --cluster %s --schedule %s%s -o %s",
                     cl, all_kinds[k], rep ? "" : " --no-replication", p);
            if (test_run_cli(args, NULL, NULL) != 0) continue; /* nothing fits that way */
            snprintf(args, sizeof args, "sim --json %s", p);
            cJSON *j = run_json(args);
            if (j) best = fmax(best, num_of(j, "throughput"));
            cJSON_Delete(j);
            remove(p);
        }
    CU_ASSERT(test_rel(test_csv_num(&c, 0, "throughput"), best) < 1e-10);
    test_csv_free(&c);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

static void test_interrupt_and_errors(void)
{
    char csv[600], png[600], args[2400];
    char *dir = test_scratch(sizeof csv, "c.csv", csv, "c.png", png, NULL);
    /* two candidates per cluster (gpipe, replicated or not): SIGINT after the
     * second leaves the first cluster's row, complete */
    snprintf(args, sizeof args,
             "compare --model models/vgg16.json --clusters profiles/clusters/v100-8-pcie.json "
             "profiles/clusters/dgx-a100-1node.json profiles/clusters/h100-8-nvlink.json --schedules gpipe "
             "--csv %s --png %s", csv, png);
    char *err = NULL;
    CU_ASSERT_EQUAL(test_run_interrupted(args, 2, NULL, &err), 130);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "interrupted after 1 of 3 clusters"));
    free(err);
    test_check_interrupted(csv, 1, dir, 2);
    remove(csv);
    remove(png);

    /* a model whose data set is not known needs --dataset-size */
    snprintf(args, sizeof args, "compare --model models/bert-large.json --clusters profiles/clusters/dgx-a100-1node.json --csv %s", csv);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--dataset-size"));
    free(err);
    /* a malformed cluster among good ones: exit 2 before any planning, no files */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    cl_err e = {0};
    const char *text = "{\"format\": \"cleave-cluster\", \"version\": 1, \"name\": \"x\", \"nodes\": []}";
    CU_ASSERT_EQUAL(cl_write_file(bad, text, strlen(text), &e), CL_OK);
    snprintf(args, sizeof args, "compare --model models/vgg16.json --clusters profiles/clusters/dgx-a100-1node.json %s --csv %s --png %s",
             bad, csv, png);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "bad.json"));
    free(err);
    int tmp = 0;
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 1);
    /* gnuplot missing: a clear message and no image */
    setenv("GNUPLOT", "/nonexistent/gnuplot", 1);
    snprintf(args, sizeof args, "compare --model models/fmnist-mlp.json --clusters profiles/clusters/cpu-2cores.json --png %s --quiet", png);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, &err), 1);
    unsetenv("GNUPLOT");
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gnuplot"));
    free(err);
    CU_ASSERT_EQUAL(test_dir_count(dir, &tmp), 1);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(compare)
{
    test_add_suite("compare");
    test_add("time and cost per epoch by hand, best over schedules", test_cost_by_hand);
    test_add("interrupt, unknown data set, bad cluster, no gnuplot", test_interrupt_and_errors);
}
