/* sched_kind.c - names of the schedule kinds (declared in core/plan.h,
 * which owns the sched_kind enum; defined here, beside the schedules). */
#include <assert.h>
#include <string.h>

#include "plan.h"

static const char *const kind_names[] = {
    "sequential", "gpipe", "1f1b", "interleaved", "zb-h1", "pipedream", "fbp",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == SCHED_COUNT,
               "kind_names out of sync with sched_kind");

const char *sched_kind_name(sched_kind k)
{
    assert((unsigned)k < SCHED_COUNT);
    return kind_names[k];
}

int sched_kind_from_name(const char *name)
{
    for (int k = 0; k < SCHED_COUNT; k++)
        if (name && strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

int sched_is_async(sched_kind k)
{
    return k == SCHED_PIPEDREAM || k == SCHED_FBP;
}
