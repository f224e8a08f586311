/* test_vit.c - see test_vit.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "exec/run/train.h"
#include "test.h"
#include "test_pipe.h"
#include "test_vit.h"

int tv_plan(plan *p, sched_kind kind, int m, int mb, int t, int r)
{
    cl_err e = {0};
    if (plan_load(p, TV_PLAN, &e)) {
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
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(exec_val_predict(p, 4, NULL, pred, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_val_measure(p, EXEC_PIPE_THREADS, 4, TV_PLAN, NULL, meas, &e), CL_OK);
    CU_ASSERT_EQUAL_FATAL(exec_val_compare(p, x, pred, meas, rep, &e), CL_OK);
}

void tv_write_plan(const char *path, const char *kind, int t, const char *r)
{
    char *text = test_slurp(TV_PLAN);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (kind) cJSON_ReplaceItemInObject(j, "schedule", cJSON_CreateString(kind));
    if (t) cJSON_AddNumberToObject(j, "tensor", t);
    if (r) cJSON_AddStringToObject(j, "recompute", r);
    char *out = cJSON_Print(j);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(out, f);
    fclose(f);
    free(out);
    cJSON_Delete(j);
}
