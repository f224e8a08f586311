/* test_plan_same.h - two answers to one plan question compared, for the
 * suites that check a faster search against a slower one that must choose
 * the same plan (plan_rank, plan_twin, plan_pair, plan_climb). */
#ifndef CL_TEST_PLAN_SAME_H
#define CL_TEST_PLAN_SAME_H

#include "base/status.h"
#include "planner/search.h"

/* The same plan: schedule, microbatches, the predicted iteration bit for
 * bit, and every stage's layers, devices and replicas. */
int test_same_plan(const plan *a, const plan *b);

/* What else two answers must share beyond the plan. */
enum {
    TEST_SAME_STEPS = 1,      /* the exact search's steps */
    TEST_SAME_CANDIDATES = 2  /* the candidates ranked */
};

/* Two plan_search answers to one question (rc1 with a or e1, rc2 with b or
 * e2): the same code, and the same plan (and what `also` names) or the
 * same error.  CUnit asserts; the first five differences (*differ counts
 * every one) printed after `where` with the answers' names.  Frees
 * nothing. */
void test_same_answer(const char *where, const char *name_a, const char *name_b, int also, int rc1,
                      const plan_result *a, const cl_err *e1, int rc2, const plan_result *b,
                      const cl_err *e2, int *differ);

#endif
