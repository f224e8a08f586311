/* test_txp_ref.c - shared helpers of the exec_txp and exec_txr suites
 * (test_txp.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cJSON.h>

#include "test.h"
#include "test_pipe.h"
#include "test_txp.h"

#define U 0x1p-24 /* float's unit roundoff */

int txp_load_plan(plan *p, const char *path, sched_kind kind, int m, int mb, int t)
{
    cl_err e = {0};
    if (plan_load(p, path, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        CU_FAIL("the ViT plan does not load");
        return 1;
    }
    p->schedule = kind;
    p->n_micro = m;
    p->microbatch = mb;
    p->batch = m * mb;
    p->tensor = t;
    return 0;
}

void txp_opts(exec_pipe_opts *o, const exec_data *d, int iters)
{
    tp_opts(o, d, TXP_VIT_PLAN, iters);
    o->lr_schedule = EXEC_LR_COSINE;
}

int txp_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r)
{
    cl_err e = {0};
    int rc = exec_pipe_run(p, o, r, &e);
    if (rc) fprintf(stderr, "\n    %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    return rc;
}

/* The bound of suite exec_tp (test_tp_train): splitting reorders the
 * row-parallel sums of at most K + 2 terms (K = 128, the MLP's hidden
 * width), each within 2 gamma_{K+2} of the unsplit sum relative to its
 * terms, so after n updates a parameter may differ by n 2 gamma_{K+2} P,
 * P the tensor's largest |p| (a model, not a theorem: the terms' scale is
 * taken to be the parameters').  n counts updates: one per iteration for
 * the synchronous kinds, m (or m / r for a stage of r replicas) for the
 * asynchronous ones. */
double txp_vs_bound(const exec_pipe_result *a, const exec_pipe_result *ref, int updates)
{
    const int K = 128;
    const double gamma = (K + 2) * U / (1 - (K + 2) * U);
    if (a->n_tensors != ref->n_tensors || a->n_params != ref->n_params) return INFINITY;
    double worst = 0;
    for (int k = 0; k < ref->n_tensors; k++) {
        const float *x = a->params + a->tensors[k].offset, *y = ref->params + ref->tensors[k].offset;
        double P = 0, dmax = 0;
        for (int64_t i = 0; i < ref->tensors[k].n; i++) {
            P = fmax(P, fabs((double)y[i]));
            dmax = fmax(dmax, fabs((double)x[i] - y[i]));
        }
        if (P > 0) worst = fmax(worst, dmax / (updates * 2 * gamma * P));
    }
    return worst;
}

void txp_write_plan(const char *path, int t, const char *recompute, int replicas)
{
    char *text = test_slurp(TXP_VIT_PLAN);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_AddNumberToObject(j, "tensor", t);
    if (replicas > 1) { /* stage 0 on cores 0 .. r-1, stage 1 on core r */
        cJSON *devs = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "cluster"), "nodes"), 0), "devices");
        cJSON *st = cJSON_GetObjectItem(j, "stages"), *s0 = cJSON_GetArrayItem(st, 0);
        CU_ASSERT_EQUAL_FATAL(cJSON_GetArraySize(devs), 2);
        for (int d = 2; d <= replicas; d++) {
            char id[16];
            snprintf(id, sizeof id, "core%d", d);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "id", id);
            cJSON_AddStringToObject(x, "type", "cpu-core");
            cJSON_AddItemToArray(devs, x);
        }
        cJSON *on = cJSON_CreateArray();
        for (int d = 0; d < replicas; d++) cJSON_AddItemToArray(on, cJSON_CreateNumber(d));
        cJSON_ReplaceItemInObject(s0, "devices", on);
        cJSON_ReplaceItemInObject(s0, "replicas", cJSON_CreateNumber(replicas));
        cJSON *on1 = cJSON_CreateArray();
        cJSON_AddItemToArray(on1, cJSON_CreateNumber(replicas));
        cJSON_ReplaceItemInObject(cJSON_GetArrayItem(st, 1), "devices", on1);
    }
    if (recompute) cJSON_AddStringToObject(j, "recompute", recompute);
    char *out = cJSON_Print(j);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(out, f);
    fclose(f);
    free(out);
    cJSON_Delete(j);
}
