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
/* The same, and every replayed candidate checked against the bound that
 * skips a candidate's replay in plan_search (search.c, least_iteration):
 * *checked replays, *broken of them faster than the bound (must be 0). */
int plan_search_unpruned_bound(const plan_request *rq, int *checked, int *broken, plan_result *res, cl_err *e);

/* plan_search with (prune 1) or without (prune 0) the one prune that
 * leaves out a schedule's exact search at a microbatch count when no layout
 * of it that fits can beat the best plan (count.c, schedule_loses); the
 * rest as plan_search.  *pruned (when not NULL): the schedule searches left
 * out.  Both must choose the same plan (tests/test_plan_rank.c). */
int plan_search_sched_prune(const plan_request *rq, int prune, int *pruned, plan_result *res, cl_err *e);

/* plan_search with (share 1) or without (share 0) the schedules whose
 * memory can bind riding along another schedule's exact search as shadows
 * (count.c, count_shadows; exact.h, plan_exact_shadowed) and the exact
 * passes known to find nothing left out (plan_exact_opts.lower_failed,
 * no_skip); the rest as plan_search.  *shared, *skipped (when not NULL): the
 * schedule searches the shadows replaced, the passes left out.  Both must
 * choose the same plan and count the same exact-search steps
 * (tests/test_plan_rank.c). */
int plan_search_sched_share(const plan_request *rq, int share, int *shared, int *skipped, plan_result *res,
                            cl_err *e);
/* The same, and *answered (when not NULL): pipedream's exact passes that
 * rode along fbp's search and were answered from it there
 * (plan_exact_opts.memo_out, memo_in; also off without share). */
int plan_search_share_stats(const plan_request *rq, int share, int *shared, int *skipped, int *answered,
                            plan_result *res, cl_err *e);

/* plan_search with (share 1) or without (share 0) an fbp plan and the
 * pipedream plan of the same stages sharing one replay (predict_twin.h);
 * *hits (when not NULL): the replays shared.  Both must choose the same
 * plan and count the same steps and candidates (tests/test_plan_twin.c). */
int plan_search_twins(const plan_request *rq, int share, int *hits, plan_result *res, cl_err *e);

/* plan_search with the exact searches' fine climb (plan_exact_opts.
 * fine_climb) in every search (fine 0, as plan_search) or in none (-1).
 * The climb decides only how the optimal bottleneck is found, so both
 * choose the same plan (on up to 16 devices, where no step count budgets
 * a search; tests/test_plan_climb.c). */
int plan_search_climb(const plan_request *rq, int fine, plan_result *res, cl_err *e);

#endif
