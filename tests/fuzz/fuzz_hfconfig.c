/* fuzz_hfconfig.c - Hugging Face config.json files: hf_import_text (JSON
 * parse, the family's keys, the size checks, tfm_model_build and
 * model_derive).
 *
 * Under the loader contract (CL_OK, or CL_EINPUT with one line starting
 * with the file name).  A config that imports must give the parameter
 * count of transformer.h's closed form, a chain whose last cut is empty,
 * and a model that serialises and loads again with the same totals.  The
 * input's size picks the options: odd sizes --seq 64 (longer than some
 * learned tables, so refused there), sizes divisible by 4 --dtype float16;
 * --dtype pins the precision, so torch_dtype is read only without it. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "models/hf_config.h"
#include "models/model.h"
#include "fuzz.h"

FUZZ_TARGET(hfconfig)
{
    char *text = fuzz_text(data, size);
    cl_err e = {0};
    model m;
    hf_info in;
    hf_opts o = {.seq = size % 2 ? 64 : 0, .dtype = size % 4 == 0 ? MODEL_F16 : -1, .name = NULL};
    int rc = fuzz_check("hfconfig", FUZZ_FILE, hf_import_text(&m, text, size, FUZZ_FILE, &o, &in, &e), &e);
    free(text);
    if (rc) {
        fuzz_check_freed("hfconfig", (const void *[]){m.layers}, 1);
        return rc;
    }
    model_totals t = model_sum(&m);
    if ((double)t.params != tfm_params(&in.desc))
        fuzz_fail("hfconfig", "%llu parameters, the closed form says %.17g",
                  (unsigned long long)t.params, tfm_params(&in.desc));
    if (m.n_layers != in.desc.layers + 2) fuzz_fail("hfconfig", "%d layers for %lld blocks",
                                                   m.n_layers, (long long)in.desc.layers);
    uint64_t *cut = model_cut_elems(&m);
    if (cut[m.n_layers - 1] != 0) fuzz_fail("hfconfig", "the cut after the last layer is not empty");
    free(cut);
    cJSON *j = model_to_json(&m);
    model back;
    cl_err e2 = {0};
    if (model_from_json(&back, j, "round-trip.json", &e2) != CL_OK)
        fuzz_fail("hfconfig", "an imported model does not load back: %s", e2.msg);
    model_totals b = model_sum(&back);
    if (memcmp(&t, &b, sizeof t) != 0) fuzz_fail("hfconfig", "the reloaded model derives different totals");
    cJSON_Delete(j);
    model_free(&back);
    model_free(&m);
    return rc;
}
