/* fuzz_onnx.c - ONNX files: onnx_import_buf (protobuf decoding, graph walk,
 * shape rules, model_derive).
 *
 * Under the loader contract (CL_OK, or CL_EINPUT with one line starting with
 * the file name); an internal disagreement between the importer's shapes
 * and model_derive's comes back as CL_ERUN and fails the target.  A model
 * that imports must serialise and load again with the same totals.  Odd-sized
 * inputs run with --price-unknown memory, even-sized ones without (so the
 * seed bad-unknown_op.onnx, 102 bytes, must be refused). */
#include <string.h>

#include <cJSON.h>

#include "models/model.h"
#include "models/onnx_import.h"
#include "fuzz.h"

#define ONNX_FUZZ_FILE "fuzz-input.onnx"

FUZZ_TARGET(onnx)
{
    cl_err e = {0};
    model m;
    onnx_import_opts o = {.price_unknown_memory = size % 2, .notes = NULL};
    int rc = fuzz_check("onnx", ONNX_FUZZ_FILE,
                        onnx_import_buf(&m, data, size, ONNX_FUZZ_FILE, NULL, &o, NULL, &e), &e);
    if (rc) {
        fuzz_check_freed("onnx", (const void *[]){m.layers}, 1);
        return rc;
    }
    cJSON *j = model_to_json(&m);
    model back;
    cl_err e2 = {0};
    if (model_from_json(&back, j, "round-trip.json", &e2) != CL_OK)
        fuzz_fail("onnx", "an imported model does not load back: %s", e2.msg);
    model_totals a = model_sum(&m), b = model_sum(&back);
    if (memcmp(&a, &b, sizeof a) != 0) fuzz_fail("onnx", "the reloaded model derives different totals");
    cJSON_Delete(j);
    model_free(&back);
    model_free(&m);
    return rc;
}
