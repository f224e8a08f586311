/* fuzz_plan.c - plan files: jx_parse_text then plan_from_json (which loads
 * the embedded model and cluster too).
 *
 * A plan that loads must pass plan_validate, use at least one device, and
 * serialise and load again to the same text (core/plan.h). */
#include <stdlib.h>

#include <cJSON.h>

#include "core/plan.h"
#include "fuzz.h"

static cJSON *plan_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    const plan *first = ctx;
    plan p;
    if (plan_from_json(&p, doc, "round-trip.json", e) != CL_OK) return NULL;
    if (p.n_stages != first->n_stages || p.batch != first->batch || p.n_micro != first->n_micro)
        fuzz_fail("plan", "reloaded plan has other stages, batch or microbatches");
    cJSON *out = plan_to_json(&p);
    plan_free(&p);
    return out;
}

FUZZ_TARGET(plan)
{
    cJSON *root;
    int rc = fuzz_parse("plan", data, size, &root);
    if (rc) return rc;
    cl_err e = {0};
    plan p;
    rc = fuzz_check("plan", FUZZ_FILE, plan_from_json(&p, root, FUZZ_FILE, &e), &e);
    cJSON_Delete(root);
    if (rc) {
        fuzz_check_freed("plan", (const void *[]){p.stages, p.model.layers, p.cluster.devices}, 3);
        return rc;
    }
    if (plan_validate(&p, "plan", &e) != CL_OK)
        fuzz_fail("plan", "a loaded plan fails plan_validate: %s", e.msg);
    if (plan_device_count(&p) < 1) fuzz_fail("plan", "a loaded plan uses no device");
    fuzz_round_trip("plan", plan_to_json(&p), plan_reload, &p);
    plan_free(&p);
    return rc;
}
