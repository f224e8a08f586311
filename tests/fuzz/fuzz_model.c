/* fuzz_model.c - model files: jx_parse_text then model_from_json.
 *
 * A model that loads must also serialise and load again to the same text,
 * derive the same totals, and give a chain view whose last cut is empty
 * (models/model.h). */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "models/model.h"
#include "fuzz.h"

static cJSON *model_reload(const cJSON *doc, cl_err *e, void *ctx)
{
    const model *first = ctx;
    model m;
    if (model_from_json(&m, doc, "round-trip.json", e) != CL_OK) return NULL;
    model_totals a = model_sum(first), b = model_sum(&m);
    if (memcmp(&a, &b, sizeof a) != 0 || m.is_dag != first->is_dag || m.classes != first->classes)
        fuzz_fail("model", "reloaded model derives different totals, is_dag or classes");
    cJSON *out = model_to_json(&m);
    model_free(&m);
    return out;
}

FUZZ_TARGET(model)
{
    cJSON *root;
    int rc = fuzz_parse("model", data, size, &root);
    if (rc) return rc;
    cl_err e = {0};
    model m;
    rc = fuzz_check("model", FUZZ_FILE, model_from_json(&m, root, FUZZ_FILE, &e), &e);
    cJSON_Delete(root);
    if (rc) {
        fuzz_check_freed("model", (const void *[]){m.layers}, 1);
        return rc;
    }
    uint64_t *cut = model_cut_elems(&m);
    if (cut[m.n_layers - 1] != 0) fuzz_fail("model", "the cut after the last layer is not empty");
    free(cut);
    fuzz_round_trip("model", model_to_json(&m), model_reload, &m);
    model_free(&m);
    return rc;
}
