/* fuzz_pipedream.c - PipeDream graph.txt text: pipedream_parse.
 *
 * Each input is imported twice, inferring the batch size (0) and stating
 * one (32; per-sample sizes differ, so one may pass where the other fails
 * a size limit).  An imported
 * model and profile must match each other (prof_check_model) and each must
 * serialise and load again to the same text (profiles/pipedream.h). */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "models/model.h"
#include "profiles/pipedream.h"
#include "profiles/profile.h"
#include "fuzz.h"

static cJSON *pipedream_model_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    (void)ctx;
    model m;
    if (model_from_json(&m, doc, "round-trip.json", e) != CL_OK) return NULL;
    cJSON *out = model_to_json(&m);
    model_free(&m);
    return out;
}

static cJSON *pipedream_prof_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    (void)ctx;
    prof p;
    if (prof_from_json(&p, doc, "round-trip.json", e) != CL_OK) return NULL;
    cJSON *out = prof_to_json(&p);
    prof_free(&p);
    return out;
}

static int import(const char *text, size_t size, double batch)
{
    model m;
    prof p;
    pipedream_info info = {0};
    cl_err e = {0};
    int rc = fuzz_check("pipedream", FUZZ_TEXT_FILE,
                        pipedream_parse(FUZZ_TEXT_FILE, text, size, batch, &m, &p, &info, &e), &e);
    if (rc) {
        fuzz_check_freed("pipedream", (const void *[]){m.layers, p.layers}, 2);
        return rc;
    }
    if (m.n_layers != info.n_nodes || !(info.batch > 0) || (batch > 0 && info.batch != batch))
        fuzz_fail("pipedream", "info says %d nodes, batch %g; the model has %d layers (batch asked: %g)",
                  info.n_nodes, info.batch, m.n_layers, batch);
    if (prof_check_model(&p, &m, "profile", &e) != CL_OK)
        fuzz_fail("pipedream", "imported profile does not match the imported model: %s", e.msg);
    fuzz_round_trip("pipedream", model_to_json(&m), pipedream_model_reload, NULL);
    fuzz_round_trip("pipedream", prof_to_json(&p), pipedream_prof_reload, NULL);
    model_free(&m);
    prof_free(&p);
    return rc;
}

FUZZ_TARGET(pipedream)
{
    char *text = fuzz_text(data, size);
    int rc = import(text, size, 0);
    (void)import(text, size, 32);
    free(text);
    return rc;
}
