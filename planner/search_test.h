/* search_test.h - plan_search without its prunes, for the tests that prove
 * the prunes change nothing (tests/test_plan_rank.c).  Not for production
 * callers: it is plan_search made slow on purpose. */
#ifndef CL_PLAN_SEARCH_TEST_H
#define CL_PLAN_SEARCH_TEST_H

#include "planner/search.h"

/* plan_search with every candidate searched and ranked on its own: no
 * microbatch count or schedule skipped by a bound (the least-memory and
 * critical-path bounds, the work bound of the searches on fewer devices),
 * no exact search shared between schedules (twins, shadows).  The chosen
 * plan must be the one plan_search chooses. */
int plan_search_unpruned(const plan_request *rq, plan_result *res, cl_err *e);

#endif
