/* test_rand_model.h - random planner questions' models and profiles, for
 * the suites that check properties over many of them (plan_mono,
 * plan_for).  Include after test_rand.h: the draws come from the including
 * suite's own generator, so a suite's seeds replay as before. */
#ifndef CL_TEST_RAND_MODEL_H
#define CL_TEST_RAND_MODEL_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "models/model.h"
#include "profiles/profile.h"
#include "test.h"

/* A random model of n block layers (a chain, or, with dag, a DAG with
 * skips and joins) and its profile at batch sizes 1, 2, 4, ..., 16: time =
 * a + c x batch, so a small microbatch pays the fixed part a more often;
 * with update, a third of the layers also take an optimiser step. */
static void rand_block_model_n(model *m, prof *pf, int dag, int update, int n)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "rand%d", n);
    m->input = (model_shape){1, {64, 0, 0}};
    m->n_layers = n;
    m->layers = cl_calloc((size_t)n, sizeof *m->layers);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "l%d", i);
        model_block_init(&m->layers[i], name, 1e6, irand(0, 3) ? floor(urand() * 1e6) : 0, floor(256 + urand() * 4e5),
                         floor(urand() * 4e5));
        if (dag && i >= 2 && irand(0, 2) == 0) {
            int src = irand(-1, i - 2);
            m->layers[i].n_inputs = 2;
            m->layers[i].inputs[0] = src;
            m->layers[i].inputs[1] = i - 1;
        }
    }
    cl_err e = {0};
    int rc = model_derive(m, "rand", &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, CL_OK);
    memset(pf, 0, sizeof *pf);
    snprintf(pf->model, sizeof pf->model, "%s", m->name);
    snprintf(pf->device, sizeof pf->device, "ref");
    pf->n_layers = n;
    pf->layers = cl_calloc((size_t)n, sizeof *pf->layers);
    for (int i = 0; i < n; i++) {
        prof_layer *l = &pf->layers[i];
        snprintf(l->name, sizeof l->name, "l%d", i);
        double a = urand() * 2e-3, c = 1e-4 + urand() * 1e-3, bi = 0.5 + urand(), bw = urand();
        prof_layer_points(l, 5);
        for (int k = 0; k < 5; k++) {
            double b = (double)(1 << k);
            l->batch[k] = b;
            l->fwd_s[k] = a + c * b;
            l->bwd_in_s[k] = bi * (a + c * b);
            l->bwd_w_s[k] = bw * (a + c * b);
        }
        l->act_bytes = 256 + urand() * 4e5;
        l->stash_bytes = urand() * 4e5;
        l->param_bytes = irand(0, 3) ? urand() * 4e6 : 0;
        if (update) l->update_s = irand(0, 2) == 0 ? urand() * 1e-3 : 0;
    }
}

/* The same with 2 to 9 layers. */
static void rand_block_model(model *m, prof *pf, int dag, int update)
{
    rand_block_model_n(m, pf, dag, update, irand(2, 9));
}

#endif
