/* test_plan_same.c - two answers to one plan question compared
 * (test_plan_same.h). */
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "test_plan_same.h"

int test_same_plan(const plan *a, const plan *b)
{
    if (a->schedule != b->schedule || a->n_micro != b->n_micro || a->n_stages != b->n_stages ||
        memcmp(&a->pred.iteration_s, &b->pred.iteration_s, sizeof(double)))
        return 0;
    for (int s = 0; s < a->n_stages; s++) {
        const plan_stage *x = &a->stages[s], *y = &b->stages[s];
        if (x->n_layers != y->n_layers || x->n_replicas != y->n_replicas ||
            memcmp(x->layers, y->layers, (size_t)x->n_layers * sizeof(int)) ||
            memcmp(x->devices, y->devices, (size_t)x->n_replicas * sizeof(int)))
            return 0;
    }
    return 1;
}

void test_same_answer(const char *where, const char *name_a, const char *name_b, int also, int rc1,
                      const plan_result *a, const cl_err *e1, int rc2, const plan_result *b,
                      const cl_err *e2, int *differ)
{
    CU_ASSERT_EQUAL(rc1, rc2);
    if (rc1 != CL_OK || rc2 != CL_OK) {
        if (rc1 != CL_OK && rc2 != CL_OK) CU_ASSERT_STRING_EQUAL(e1->msg, e2->msg);
        return;
    }
    int same = test_same_plan(&a->plan, &b->plan) &&
               (!(also & TEST_SAME_STEPS) || a->exact_steps == b->exact_steps) &&
               (!(also & TEST_SAME_CANDIDATES) || a->candidates == b->candidates);
    if (!same && (*differ)++ < 5)
        fprintf(stderr, "\n  %s: %s %s m=%d %.17g s (%lld steps, %d candidates), %s %s m=%d %.17g s (%lld, %d)",
                where, name_a, sched_kind_name(a->plan.schedule), a->plan.n_micro,
                a->plan.pred.iteration_s, (long long)a->exact_steps, a->candidates, name_b,
                sched_kind_name(b->plan.schedule), b->plan.n_micro, b->plan.pred.iteration_s,
                (long long)b->exact_steps, b->candidates);
    CU_ASSERT(same);
}
