/* test_input_msgs.c - inputs that used to abort, be misnamed or load without
 * a word: each is refused with exit 2 and one line that starts with the
 * file at fault and names the real cause, and no output file appears.
 * The inputs are made here from shipped files (a cluster with one number
 * changed, a profile measured then edited, a plan made then edited, a
 * PipeDream graph cut short), so each case differs from a good file in
 * exactly the way it describes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "base/fileio.h"
#include "test.h"

static char *read_all(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    cl_err e = {0};
    if (cl_read_file(path, (size_t)64 << 20, &text, &len, &e)) fprintf(stderr, "%s\n", e.msg);
    return text;
}

static void write_all(const char *path, const char *text)
{
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(cl_write_file(path, text, strlen(text), &e), CL_OK);
}

/* Copy src to dst with the first `old` replaced by `new` (which must occur). */
static void copy_edit(const char *src, const char *dst, const char *old, const char *new)
{
    char *t = read_all(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *at = strstr(t, old);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    size_t n = strlen(t) + strlen(new) + 1;
    char *o = malloc(n);
    snprintf(o, n, "%.*s%s%s", (int)(at - t), t, new, at + strlen(old));
    write_all(dst, o);
    free(o);
    free(t);
}

/* Run `cleave args`; expect exit 2, one line starting "cleave: <file>:" and
 * holding `want`, and no file at `out` (NULL: none to check). */
static void refused(const char *args, const char *file, const char *want, const char *out)
{
    char *o = NULL, *err = NULL, head[600];
    int st = test_run_cli(args, &o, &err);
    snprintf(head, sizeof head, "cleave: %s:", file);
    int lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    int ok = st == 2 && lines == 1 && strncmp(err, head, strlen(head)) == 0 && strstr(err, want) &&
             (!out || access(out, F_OK) != 0);
    CU_ASSERT(ok);
    if (!ok) fprintf(stderr, "\n  cleave %s\n  -> exit %d: %s  want \"%s ... %s\"\n", args, st, err, head, want);
    free(o);
    free(err);
}

/* A cluster whose one number makes every iteration last forever: named,
 * with the device type or link and the value, not "no plan fits" nor an
 * assertion (peak_fp32_flops 1e-300 aborted plan_search). */
static void test_infinite_costs(void)
{
    static const struct {
        const char *old, *new, *want;
    } c[] = {
        {"\"peak_fp32_flops\": 166400000000.0", "\"peak_fp32_flops\": 1e-300", "peak_fp32_flops 1e-300"},
        {"\"efficiency\": 0.25", "\"efficiency\": 1e-300", "efficiency 1e-300"},
        {"\"bandwidth_Bps\": 12000000000.0", "\"bandwidth_Bps\": 1e-300", "intra-node link (bandwidth 1e-300 B/s"},
        {"\"latency_s\": 1e-05", "\"latency_s\": 1e300", "latency 1e+300 s"},
    };
    char *dir = test_tmpdir(), cl[600], out[600], args[2000];
    snprintf(out, sizeof out, "%s/p.json", dir);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(cl, sizeof cl, "%s/c%zu.json", dir, i);
        copy_edit("profiles/clusters/cpu-2cores.json", cl, c[i].old, c[i].new);
        snprintf(args, sizeof args, "plan --model models/fmnist-cnn.json --cluster %s -o %s", cl, out);
        refused(args, cl, c[i].want, out);
        remove(cl);
    }
    /* the same cluster with a profile measured on its other, sane type */
    snprintf(cl, sizeof cl, "%s/mixed.json", dir);
    copy_edit("profiles/clusters/cpu-2cores.json", cl, "\"type\": \"cpu-core\"\n        }\n      ]",
              "\"type\": \"slow\"\n        }\n      ]");
    char *t = read_all(cl);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    cJSON *j = cJSON_Parse(t);
    free(t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    cJSON *types = cJSON_GetObjectItem(j, "device_types");
    cJSON *slow = cJSON_Duplicate(cJSON_GetArrayItem(types, 0), 1);
    cJSON_ReplaceItemInObject(slow, "name", cJSON_CreateString("slow"));
    cJSON_ReplaceItemInObject(slow, "peak_fp32_flops", cJSON_CreateNumber(1e-300));
    cJSON_AddItemToArray(types, slow);
    char *s = cJSON_Print(j);
    write_all(cl, s);
    free(s);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "plan --model models/fmnist-cnn.json --cluster %s --profiled-on cpu-core -o %s", cl, out);
    refused(args, cl, "device type \"slow\" (peak_fp32_flops 1e-300", out);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* A profile of fmnist-mlp measured here, then edited one way at a time. */
static void test_profiles(void)
{
    char good[600], bad[600], out[600], args[2000];
    char *dir = test_scratch(sizeof good, "good.json", good, "bad.json", bad, "p.json", out, NULL);
    snprintf(args, sizeof args, "profile --model models/fmnist-mlp.json --reps 1 --warmup 0 -o %s", good);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "plan --model models/fmnist-mlp.json --profile %s --devices 2 -o %s", good, out);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0); /* the control: it plans */
    remove(out);
    char *t = read_all(good);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    for (int k = 0; k < 3; k++) {
        cJSON *j = cJSON_Parse(t);
        cJSON *fc1 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "layers"), 1);
        cJSON *pt = cJSON_GetArrayItem(cJSON_GetObjectItem(fc1, "points"), 0);
        const char *want = NULL;
        if (k == 0) { /* an absurd time: named, not an assertion */
            cJSON_ReplaceItemInObject(pt, "fwd_s", cJSON_CreateNumber(1e308));
            want = "layer 1 (\"fc1\") takes 1e+308 s per microbatch";
        } else if (k == 1) { /* 2^53: the default batch was truncated to 0 */
            cJSON *layers = cJSON_GetObjectItem(j, "layers");
            for (cJSON *l = layers->child; l; l = l->next)
                cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(l, "points"), 0), "batch",
                                          cJSON_CreateNumber(9007199254740992.0));
            want = "layers[0].points[0].batch: 90071992547409";
        } else { /* another model's fc1, twice as wide: same names, other sizes */
            double pb = cJSON_GetObjectItem(fc1, "param_bytes")->valuedouble;
            cJSON_ReplaceItemInObject(fc1, "param_bytes", cJSON_CreateNumber(2 * pb));
            want = "layers[1].param_bytes";
        }
        char *s = cJSON_Print(j);
        write_all(bad, s);
        free(s);
        cJSON_Delete(j);
        snprintf(args, sizeof args, "plan --model models/fmnist-mlp.json --profile %s --devices 2 -o %s", bad, out);
        refused(args, bad, want, out);
        /* sweep and compare take the same default batch (an int cast of
         * 2^53 there); they report the other cases as infeasible rows */
        snprintf(args, sizeof args, "sweep --model models/fmnist-mlp.json --profile %s --device A100-80GB "
                 "--devices 1,2 --csv %s", bad, out);
        if (k != 0) refused(args, bad, want, out);
        remove(out);
    }
    free(t);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* A plan made here, its embedded model then widened: the stage costs no
 * longer describe it, so sim, export and train refuse it. */
static void test_edited_plan(void)
{
    char plan[600], bad[600], args[2000];
    char *dir = test_scratch(sizeof plan, "p.json", plan, "edited.json", bad, NULL);
    snprintf(args, sizeof args, "plan --model models/fmnist-mlp.json --devices 2 --device A100-80GB -o %s", plan);
    CU_ASSERT_EQUAL_FATAL(test_run_cli(args, NULL, NULL), 0);
    snprintf(args, sizeof args, "sim %s", plan);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0); /* the control */
    copy_edit(plan, bad, "\"out_features\":\t256", "\"out_features\":\t512");
    copy_edit(bad, bad, "\"in_features\":\t256", "\"in_features\":\t512");
    snprintf(args, sizeof args, "sim %s", bad);
    refused(args, bad, "model_hash", NULL);
    snprintf(args, sizeof args, "export %s --to torch -o %s/x.py", bad, dir);
    refused(args, bad, "was edited after planning", NULL);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* Nesting past cJSON's limit is named, not called a syntax error. */
static void test_deep_json(void)
{
    char *dir = test_tmpdir(), path[600], args[700];
    snprintf(path, sizeof path, "%s/deep.json", dir);
    char *t = malloc(2 * 1001 + 2);
    memset(t, '[', 1001);
    memset(t + 1001, ']', 1001);
    t[2002] = '\0';
    write_all(path, t);
    free(t);
    snprintf(args, sizeof args, "inspect %s", path);
    refused(args, path, "nested more than 1000 levels deep", NULL);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

/* A PipeDream graph cut after its first node lines: no edges, no Input. */
static void test_pipedream_cut(void)
{
    char buf[256], *dir = test_tmpdir(), cut[600], out[600], args[2000];
    const char *src = test_shared("pipedream/alexnet.txt", buf, sizeof buf);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char *t = read_all(src);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    char *third = strchr(strchr(strchr(t, '\n') + 1, '\n') + 1, '\n');
    third[1] = '\0';
    snprintf(cut, sizeof cut, "%s/cut.txt", dir);
    snprintf(out, sizeof out, "%s/p.json", dir);
    write_all(cut, t);
    free(t);
    snprintf(args, sizeof args, "plan --profile %s --devices 2 -o %s", cut, out);
    refused(args, cut, "was the file cut short?", out);
    CU_ASSERT_EQUAL(test_rmtree(dir), 0);
}

TEST_SUITE(input_msgs)
{
    test_add_suite("input_msgs");
    test_add("infinite costs: the device type or link and its value named", test_infinite_costs);
    test_add("profiles: absurd time, 2^53 batch, another model's sizes", test_profiles);
    test_add("a plan whose embedded model was edited is refused", test_edited_plan);
    test_add("JSON nested past 1000 levels is named", test_deep_json);
    test_add("a PipeDream graph cut short is refused", test_pipedream_cut);
}
