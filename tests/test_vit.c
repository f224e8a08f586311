/* test_vit.c - see test_vit.h. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "exec/run/train.h"
#include "test.h"
#include "test_pipe.h"
#include "test_proc.h"
#include "test_vit.h"

#define U 0x1p-24 /* float's unit roundoff */

int tv_load_plan(plan *p, const char *path, sched_kind kind, int m, int mb, int t, int r)
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
    p->recompute = r;
    return 0;
}

void tv_opts(exec_pipe_opts *o, const exec_data *d, int iterations)
{
    tp_opts(o, d, TV_PLAN, iterations);
    o->lr_schedule = EXEC_LR_COSINE;
    o->test = NULL;
}

int tv_run(const plan *p, const exec_pipe_opts *o, exec_pipe_result *r)
{
    cl_err e = {0};
    int rc = exec_pipe_run(p, o, r, &e);
    if (rc) fprintf(stderr, "\n    %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, CL_OK);
    return rc;
}

exec_net *tv_trainer(const plan *p, const exec_pipe_opts *o, const exec_data *d, int mb, int t,
                     int r)
{
    exec_train_opts to;
    exec_train_defaults(&to);
    to.epochs = 1;
    to.batch = mb;
    to.lr = o->lr;
    to.momentum = o->momentum;
    to.weight_decay = o->weight_decay;
    to.schedule = o->lr_schedule;
    to.seed = o->seed;
    to.tensor = t;
    to.recompute = r;
    exec_trainer *tr;
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_trainer_create(&tr, &p->model, TV_PLAN, &to, &e), CL_OK);
    exec_epoch ep;
    exec_trainer_epoch(tr, d, NULL, NULL, NULL, &ep);
    exec_net *ref = exec_trainer_gather(tr);
    exec_trainer_destroy(tr);
    return ref;
}

int tv_same_as(const exec_pipe_result *r, const exec_net *ref)
{
    int same = r->n_tensors == exec_net_n_tensors(ref);
    for (int i = 0; same && i < r->n_tensors; i++) {
        const exec_tensor *x = exec_net_tensor(ref, i);
        same = x->n == r->tensors[i].n && !strcmp(x->name, r->tensors[i].name) &&
               memcmp(x->data, r->params + r->tensors[i].offset, (size_t)x->n * sizeof(float)) == 0;
    }
    return same;
}

void tv_validate(const plan *p, const exec_val_extra *x, sim_result *pred,
                 exec_pipe_result *meas, exec_val_report *rep)
{
    if (tv_val_run(p, x, TV_PLAN, pred, meas, rep)) CU_FAIL_FATAL("the validate steps failed");
}

void tv_write_seq_par(const char *src, const char *dst)
{
    char *text = test_slurp(src);
    CU_ASSERT_FATAL(text && text[0] == '{');
    FILE *f = fopen(dst, "w");
    CU_ASSERT_FATAL(f != NULL);
    fprintf(f, "{\"sequence_parallel\": true, %s", text + 1);
    fclose(f);
    free(text);
}

void tv_write_plan(const char *path, const char *kind, int t, const char *recompute, int replicas)
{
    char *text = test_slurp(TV_PLAN);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (kind) cJSON_ReplaceItemInObject(j, "schedule", cJSON_CreateString(kind));
    if (t) cJSON_AddNumberToObject(j, "tensor", t);
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

/* The bound of suite exec_tp (test_tp_train): splitting reorders the
 * row-parallel sums of at most K + 2 terms (K = 128, the MLP's hidden
 * width), each within 2 gamma_{K+2} of the unsplit sum relative to its
 * terms, so after n updates a parameter may differ by n 2 gamma_{K+2} P,
 * P the tensor's largest |p| (a model, not a theorem: the terms' scale is
 * taken to be the parameters').  n counts updates: one per iteration for
 * the synchronous kinds, m (or m / r for a stage of r replicas) for the
 * asynchronous ones. */
double tv_vs_bound(const exec_pipe_result *a, const exec_pipe_result *ref, int updates)
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

void tv_check_vs_t1(const exec_pipe_result *rt, const exec_pipe_result *r1, int updates,
                     const char *label)
{
    double w = tv_vs_bound(rt, r1, updates);
    int differ = rt->n_params != r1->n_params ||
                 memcmp(rt->params, r1->params, (size_t)r1->n_params * sizeof(float)) != 0;
    printf("\n    %s: largest difference %.4f of the bound%s ", label, w, differ ? "" : " (bit for bit)");
    CU_ASSERT(w <= 1);
    CU_ASSERT_EQUAL_FATAL(rt->n_workers, r1->n_workers);
    /* the stash and the versions are rank 0's, as with t = 1 */
    for (int i = 0; i < r1->n_workers; i++) {
        CU_ASSERT_EQUAL(rt->w[i].replica, r1->w[i].replica);
        CU_ASSERT_EQUAL(rt->w[i].peak_stash, r1->w[i].peak_stash);
        CU_ASSERT_EQUAL(rt->w[i].peak_versions, r1->w[i].peak_versions);
        CU_ASSERT(rt->w[i].at_peak.weights < r1->w[i].at_peak.weights); /* a shard */
    }
}

void tv_kill_resume(const char *pl, const char *dir)
{
    char full[600], wr[600], ck[600], args[2048], *out;
    snprintf(full, sizeof full, "%s/full.w", dir);
    snprintf(wr, sizeof wr, "%s/resumed.w", dir);
    snprintf(ck, sizeof ck, "%s/c.ckpt", dir);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --epochs 2 --save-weights %s", pl, full);
    CU_ASSERT_EQUAL(test_run_cli(args, NULL, NULL), 0);
    char *a1[] = {"train", "--plan", (char *)pl, "--synthetic", "256", "--epochs", "2", "--checkpoint",
                  ck, "--checkpoint-every", "1", "--save-weights", wr, NULL};
    int ok;
    CU_ASSERT_EQUAL(tproc_signal_at(a1, dir, 5, SIGKILL, &ok), 128 + SIGKILL);
    CU_ASSERT(ok);
    CU_ASSERT_EQUAL(tproc_ckpt_iters(ck), 5);
    snprintf(args, sizeof args, "train --plan %s --synthetic 256 --epochs 2 --resume %s --save-weights %s",
             pl, ck, wr);
    CU_ASSERT_EQUAL(test_run_cli(args, &out, NULL), 0);
    CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "resumed from"));
    CU_ASSERT(tproc_same_file(full, wr));
    free(out);
}

int tv_val_run(const plan *p, const exec_val_extra *x, const char *file, sim_result *pred,
                exec_pipe_result *meas, exec_val_report *rep)
{
    cl_err e = {0};
    int rc = exec_val_predict(p, 4, NULL, pred, &e);
    CU_ASSERT_EQUAL(rc, CL_OK);
    if (rc) return rc;
    rc = exec_val_measure(p, EXEC_PIPE_THREADS, 0, 4, file, NULL, meas, &e);
    CU_ASSERT_EQUAL(rc, CL_OK);
    if (!rc) {
        rc = exec_val_compare(p, x, pred, meas, rep, &e);
        CU_ASSERT_EQUAL(rc, CL_OK);
        if (rc) exec_pipe_result_free(meas);
    }
    if (rc) {
        fprintf(stderr, "\n    %s\n", e.msg);
        sim_result_free(pred);
    }
    return rc;
}
