/* budget.h - the wall-clock budget of one command (--max-seconds).
 *
 * A command that can run long (plan, sim, plot, sweep, compare) starts the
 * budget once, before any work; every loop that can grow with its input
 * (the plan search, the exact search, the cut lattice, the op-list builder,
 * the simulator's event loop, the plot writers) polls cl_budget_over() every
 * few thousand steps and, once it is over, stops and fails with
 * cl_budget_fail(), whose one line names the limit, what was being done and
 * how to raise it.  Until a command starts it, the budget never runs out
 * (library callers and tests see no limit).  One process-wide deadline, read
 * only after it is set, so the polling costs one clock read.
 */
#ifndef CL_BUDGET_H
#define CL_BUDGET_H

#include "status.h"

/* Default --max-seconds of every command that takes it. */
#define CL_BUDGET_DEFAULT_S 600.0

/* Start the budget: `seconds` from now (0: already spent, which tests use
 * to reach every check without a timing window).  `option` names what
 * raises it in messages ("--max-seconds"). */
void cl_budget_start(double seconds, const char *option);

/* No budget any more (the state before cl_budget_start). */
void cl_budget_clear(void);

/* 1 once the budget is spent (0 when none was started). */
int cl_budget_over(void);

/* Seconds left (HUGE_VAL when none was started; <= 0 when spent). */
double cl_budget_left(void);

/* Record "wall-time budget exhausted: S s (<option>) ran out while <doing>
 * (hint: raise <option>, or <hint>)" into e; returns CL_EINPUT.  hint may
 * be NULL. */
int cl_budget_fail(cl_err *e, const char *doing, const char *hint);

#endif
