/* fuzz_profile.c - profile files: jx_parse_text then prof_from_json.
 *
 * A profile that loads must serialise and load again to the same text, and
 * looking a layer's times up at, between and beyond its batch sizes must
 * give a number >= 0 without tripping the interpolation's abort
 * (profiles/profile.h). */
#include <math.h>
#include <stdlib.h>

#include <cJSON.h>

#include "profiles/profile.h"
#include "fuzz.h"

static cJSON *profile_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    const prof *first = ctx;
    prof p;
    if (prof_from_json(&p, doc, "round-trip.json", e) != CL_OK) return NULL;
    if (p.n_layers != first->n_layers)
        fuzz_fail("profile", "reloaded profile has %d layers, not %d", p.n_layers, first->n_layers);
    cJSON *out = prof_to_json(&p);
    prof_free(&p);
    return out;
}

static void profile_lookup(const prof_layer *l, double b)
{
    double t[3] = {prof_fwd_s(l, b), prof_bwd_in_s(l, b), prof_bwd_w_s(l, b)};
    for (int k = 0; k < 3; k++)
        if (!(t[k] >= 0)) fuzz_fail("profile", "layer %s: time %g at batch %g", l->name, t[k], b);
}

FUZZ_TARGET(profile)
{
    cJSON *root;
    int rc = fuzz_parse("profile", data, size, &root);
    if (rc) return rc;
    cl_err e = {0};
    prof p;
    rc = fuzz_check("profile", FUZZ_FILE, prof_from_json(&p, root, FUZZ_FILE, &e), &e);
    cJSON_Delete(root);
    if (rc) {
        fuzz_check_freed("profile", (const void *[]){p.layers}, 1);
        return rc;
    }
    for (int i = 0; i < p.n_layers; i++) {
        const prof_layer *l = &p.layers[i];
        if (l->n_points < 1 || l->n_points > PROF_MAX_POINTS)
            fuzz_fail("profile", "layer %d has %d points", i, l->n_points);
        int n = l->n_points;
        profile_lookup(l, l->batch[0] / 2);
        profile_lookup(l, l->batch[0]);
        if (n > 1) profile_lookup(l, l->batch[0] / 2 + l->batch[1] / 2);
        profile_lookup(l, l->batch[n - 1]);
        if (isfinite(2 * l->batch[n - 1])) profile_lookup(l, 2 * l->batch[n - 1]);
    }
    fuzz_round_trip("profile", prof_to_json(&p), profile_reload, &p);
    prof_free(&p);
    return rc;
}
