/* tfm_model.h - a transformer (tfm_desc) as a cleave model: one `block`
 * layer for the embedding, one per transformer layer, one for the final
 * norm, the logit layer and the loss (docs/formats.md, "Transformer
 * blocks"; docs/transformer.md, "Importing a Hugging Face config.json").
 *
 * Per-sample costs (one sequence of s tokens) come from models/transformer.h
 * with t = 1, no recomputation, microbatch 1, so that a model built here
 * and the closed forms agree by construction.  For the GPT family the
 * layers equal those tools/gen_zoo.py wrote into models/gpt2-1.5b.json and
 * models/gpt3-175b.json (tests/test_hf_import.c checks it field by field).
 */
#ifndef CL_TFM_MODEL_H
#define CL_TFM_MODEL_H

#include "base/status.h"
#include "models/model.h"
#include "models/transformer.h"

/* Forward FLOPs the final norm spends per element: LayerNorm 7 (mean,
 * variance, subtract, scale, shift: gen_zoo's count), RMSNorm 4 (square,
 * sum, scale by 1/rms, scale by the gain). */
#define TFM_MODEL_LN_FLOPS 7
#define TFM_MODEL_RMS_FLOPS 4

/* Build *m from d with activations of type dt, named `name` (a valid name,
 * see base/escape.h).  The caller has checked d (tfm_check) and its sizes
 * against the model format's limits (tfm_model_check).  `file` names the
 * source in messages.  CL_OK and a derived model (model_free releases it),
 * or CL_EINPUT with *m left empty. */
int tfm_model_build(model *m, const tfm_desc *d, model_dtype dt, const char *name,
                    const char *file, cl_err *e);

/* The largest per-sample byte counts a built model would hold, to check
 * against the format's limits before building (MODEL_MAX_ELEMS elements per
 * tensor, MODEL_MAX_PARAMS parameters). */
typedef struct tfm_model_sizes {
    double out_elems;   /* a block's output: s h                           */
    double stash_bytes; /* the largest stash of any layer                  */
    double params;      /* the whole model                                 */
} tfm_model_sizes;
tfm_model_sizes tfm_model_sizes_of(const tfm_desc *d, model_dtype dt);

#endif
