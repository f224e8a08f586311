/* budget.c - the wall-clock budget of one command (budget.h). */
#include <math.h>
#include <time.h>

#include "budget.h"

static int active;
static double deadline_s, limit_s;
static const char *raise_opt = "--max-seconds";

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cl_budget_start(double seconds, const char *option)
{
    active = 1;
    limit_s = seconds > 0 ? seconds : 0;
    deadline_s = mono_now() + limit_s;
    if (option) raise_opt = option;
}

void cl_budget_clear(void) { active = 0; }

int cl_budget_over(void) { return active && (limit_s <= 0 || mono_now() >= deadline_s); }

double cl_budget_left(void)
{
    if (!active) return HUGE_VAL;
    return limit_s <= 0 ? 0 : deadline_s - mono_now();
}

int cl_budget_fail(cl_err *e, const char *doing, const char *hint)
{
    return cl_fail(e, CL_EINPUT, "wall-time budget exhausted: %g s (%s) ran out while %s (hint: raise %s%s%s)",
                   limit_s, raise_opt, doing, raise_opt, hint ? ", or " : "", hint ? hint : "");
}
