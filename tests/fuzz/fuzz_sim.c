/* fuzz_sim.c - the simulator on random plans (gen.h): every schedule kind,
 * replicated stages, devices over several nodes, communication on and off.
 *
 * The input is not parsed but decoded (gen_plan), so every byte string is
 * a plan.  A run must end within its event budget (a bound counted from the
 * op lists: an endless run, such as a ring all-reduce resending forever,
 * breaks it) and have the properties gen_sim_check lists; sanitizers watch
 * the rest.  One input in 16 sets a budget of 1..64 events instead: then
 * the run may also stop with "event budget exhausted", which is the
 * target's CL_EINPUT (the bad- seeds). */
#include <string.h>

#include "fuzz.h"
#include "gen.c"

FUZZ_TARGET(sim)
{
    gen g = {data, size, 0};
    int tiny = gen_u(&g, 16) == 0;
    uint64_t budget = tiny ? 1 + gen_u(&g, 64) : 0;
    plan p;
    gen_run run;
    gen_plan(&g, &p, &run);
    run.max_events = budget;
    cl_err e = {0};
    const char *broken = NULL;
    int rc = gen_sim_check(&p, &run, NULL, &broken, &e);
    gen_plan_free(&p);
    if (broken) fuzz_fail("sim", "%s", broken);
    if (rc == CL_OK) return rc;
    if (rc != CL_EINPUT || e.code != rc || !e.msg[0] || strchr(e.msg, '\n'))
        fuzz_fail("sim", "returned %d (recorded %d): %s", rc, e.code, e.msg);
    if (!tiny || !strstr(e.msg, "event budget exhausted"))
        fuzz_fail("sim", "a generated plan was refused: %s", e.msg);
    return rc;
}
