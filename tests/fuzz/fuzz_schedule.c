/* fuzz_schedule.c - explicit schedule files: jx_parse_text then
 * sched_from_json, against one fixed plan: two stages on devices 0 and 1
 * (one replica each) out of four, unit compute times, the plan the files
 * in tests/data/sim/ are written for.
 *
 * A schedule that loads has passed sched_check; it must serialise and load
 * again to the same text (core/schedule.h). */
#include <stdlib.h>

#include <cJSON.h>

#include "core/schedule.h"
#include "sim/sim.h"
#include "fuzz.h"

/* Built on first use and kept for the process (libFuzzer calls the target
 * millions of times; the leak checker ignores what stays reachable). */
static const plan *schedule_plan(void)
{
    static plan pl;
    static int built;
    if (!built) {
        sim_uniform u = {.stages = 2, .chunks = 1, .replicas = 1, .micro = 2, .per_node = 4,
                         .schedule = SCHED_1F1B, .fwd_s = 1, .bwd_in_s = 1, .bwd_w_s = 1,
                         .act_bytes = 1e6, .stash_bytes = 1e3, .param_bytes = 4e6,
                         .intra = {1e9, 1e-6}, .inter = {1e9, 1e-6}};
        cl_err e = {0};
        if (sim_uniform_plan(&pl, &u, &e) != CL_OK)
            fuzz_fail("schedule", "cannot build the fixed plan: %s", e.msg);
        built = 1;
    }
    return &pl;
}

static cJSON *schedule_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    const sched *first = ctx;
    sched s;
    if (sched_from_json(schedule_plan(), doc, "round-trip.json", &s, e) != CL_OK) return NULL;
    if (s.n_ops != first->n_ops || s.n_dev != first->n_dev)
        fuzz_fail("schedule", "reloaded schedule has %lld ops on %d workers, not %lld on %d",
                  (long long)s.n_ops, s.n_dev, (long long)first->n_ops, first->n_dev);
    cJSON *out = sched_to_json(&s);
    sched_free(&s);
    return out;
}

FUZZ_TARGET(schedule)
{
    const plan *pl = schedule_plan();
    cJSON *root;
    int rc = fuzz_parse("schedule", data, size, &root);
    if (rc) return rc;
    cl_err e = {0};
    sched s;
    rc = fuzz_check("schedule", FUZZ_FILE, sched_from_json(pl, root, FUZZ_FILE, &s, &e), &e);
    cJSON_Delete(root);
    if (rc) {
        fuzz_check_freed("schedule", (const void *[]){s.dev, s.off, s.ops}, 3);
        return rc;
    }
    fuzz_round_trip("schedule", sched_to_json(&s), schedule_reload, &s);
    sched_free(&s);
    return rc;
}
