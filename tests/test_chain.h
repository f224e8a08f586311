/* test_chain.h - the uniform chain several planner suites plan: n equal
 * block layers (1 MFLOP, 1,000 parameters, 1,024 output elements, `stash`
 * bytes kept per sample) and a one-point profile measured on `device`:
 * 1 ms each way at batch 1, 4,000 parameter bytes per layer.  Plans of it
 * have closed forms the suites work out by hand (model_state, plan_search). */
#ifndef CL_TEST_CHAIN_H
#define CL_TEST_CHAIN_H

#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "models/model.h"
#include "profiles/profile.h"
#include "test.h"

static void test_uniform_chain(model *m, prof *pf, const char *name, int n, double stash, model_dtype dtype,
                               const char *device)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->input = (model_shape){1, {256, 0, 0}};
    m->dtype = dtype;
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    for (int i = 0; i < n; i++) {
        char lname[32];
        snprintf(lname, sizeof lname, "l%d", i);
        model_block_init(&m->layers[i], lname, 1e6, 1000, 1024, stash);
    }
    cl_err e = {0};
    CU_ASSERT_EQUAL_FATAL(model_derive(m, "chain", &e), CL_OK);
    memset(pf, 0, sizeof *pf);
    snprintf(pf->model, sizeof pf->model, "%s", m->name);
    snprintf(pf->device, sizeof pf->device, "%s", device);
    prof_alloc(pf, n, 1);
    for (int i = 0; i < n; i++) {
        prof_layer *l = &pf->layers[i];
        snprintf(l->name, sizeof l->name, "l%d", i);
        l->batch[0] = 1;
        l->fwd_s[0] = l->bwd_in_s[0] = l->bwd_w_s[0] = 1e-3;
        l->act_bytes = 1024;
        l->stash_bytes = stash;
        l->param_bytes = 4000;
    }
}

#endif
